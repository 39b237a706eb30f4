"""The ``metrics.json`` of 14_analyses: its model and the stage's constant (what ``metrics.read``
and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.breakdowns import TagScore
from hbpsych_utils.pipeline.metrics.model import (
    Bound,
    ByModel,
    Metrics,
    StageMetrics,
)


class LengthScore(Metrics):
    """A candidate's reply lengths and its length-adjusted score beside the raw one
    (``evaluation.length.length_table``)."""

    n: int
    mean_chars: float
    median_chars: float
    clipped_mean: float
    adjusted_mean: float
    adjusted_ci_low: Bound
    adjusted_ci_high: Bound


class KScore(Metrics):
    """Worst-at-k for one k (``evaluation.reliability.worst_at_k_table``)."""

    k: int
    n: int
    clipped_mean: float
    ci_low: Bound
    ci_high: Bound


class RunSpread(Metrics):
    """The overall score of each run (sample index) and their spread
    (``evaluation.reliability.run_spread``)."""

    n: int
    runs: list[float]
    mean: float
    min: float
    max: float
    std: float


class AnalysesMetrics(Metrics):
    """14's numbers; a paper run has only its mode (the released matrices carry no
    per-criterion grade). Scorer keys are the judges' model ids and ``panel``."""

    mode: Literal["paper", "live"]
    subset: str | None = None
    n_conversations: int | None = None
    judges: list[str] | None = None
    panel_mean: ByModel | None = None
    """The panel's clipped mean of the first reply per candidate on the subset (08's)."""
    by_tag: dict[str, dict[str, dict[str, TagScore]]] | None = None
    """Scorer -> candidate -> tag (``axis:``, ``theme:``, ``category:``) -> its score."""
    length_penalty: str | None = None
    length_per_500: float | None = None
    length: dict[str, dict[str, LengthScore]] | None = None
    """Scorer -> candidate -> reply lengths and the length-adjusted score."""
    samples: int | None = None
    """Replies per (candidate, conversation) (``generation.samples``)."""
    n_incomplete: int | None = None
    """(Scorer, candidate, conversation) rows left out of worst-at-k: a sample unscored."""
    worst_at_k: dict[str, dict[str, list[KScore]]] | None = None
    run_spread: dict[str, dict[str, RunSpread]] | None = None
    ci_level: float | None = None
    """The level of every interval of the tag scores, lengths and worst-at-k (live)."""


ANALYSES = StageMetrics(graph.ANALYSES, AnalysesMetrics)
