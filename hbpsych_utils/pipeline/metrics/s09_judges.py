"""The ``metrics.json`` of 09_judges: its model and the stage's constant (what ``metrics.read`` and
``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    ByModel,
    Metrics,
    StageMetrics,
)


class IntervalRow(Metrics):
    """A judge statistic with its bootstrap interval (live)."""

    stat: str
    judge: str
    estimate: float | None
    low: float | None
    high: float | None
    n_resamples: int


class JudgesMetrics(Metrics):
    mode: Literal["paper", "live"]
    subset: str
    kendall_tau: dict[str, float | None]
    """``"judge A|judge B"`` -> Kendall's tau between their rankings of the candidates."""
    kendall_tau_undefined: dict[str, str] | None = None
    """Pair -> why its tau is ``null`` (written only when one is)."""
    grand_mean: float | None
    severity: ByModel
    self_preference_raw: dict[str, float | None]
    self_preference_corrected: dict[str, float | None]
    n_candidates: int
    intervals: list[IntervalRow] | None = None
    ci_level: float | None = None
    """The level of ``intervals`` (live)."""


JUDGES = StageMetrics(graph.JUDGES, JudgesMetrics)
