"""The ``metrics.json`` of 08_scores: its model and the stage's constant (what ``metrics.read`` and
``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Bound,
    BoundsByModel,
    ByModel,
    Counts,
    Metrics,
    StageMetrics,
)


class SubsetScores(Metrics):
    """One subset's Table 1 as numbers: panel means, ranking, per-judge means; intervals and
    n where the source has per-conversation scores."""

    panel_mean: ByModel
    ranking: list[str]
    per_judge: dict[str, ByModel]
    ci_low: BoundsByModel | None = None
    ci_high: BoundsByModel | None = None
    n_panel: Counts | None = None
    point_estimates_only: bool


class PairedDifferenceRow(Metrics):
    a: str
    b: str
    difference: float
    ci_low: Bound
    ci_high: Bound
    p_value: float
    n: int
    p_holm: float


class ScoresMetrics(Metrics):
    mode: Literal["paper", "live"]
    include_later: bool
    subset: str
    """The primary subset (the first with scores); its numbers are also at the top level."""
    panel_mean: ByModel
    ranking: list[str]
    per_judge: dict[str, ByModel]
    ci_low: BoundsByModel | None = None
    ci_high: BoundsByModel | None = None
    n_panel: Counts | None = None
    point_estimates_only: bool
    by_subset: dict[str, SubsetScores]
    n_resamples: int | None = None
    ci_level: float | None = None
    """The level of the intervals (``ci_low``, ``ci_high``, the pairs'), where there are any."""
    bootstrap_std: ByModel | None = None
    paired_differences: list[PairedDifferenceRow] | None = None


SCORES = StageMetrics(graph.SCORES, ScoresMetrics)
