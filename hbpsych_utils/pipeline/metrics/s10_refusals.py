"""The ``metrics.json`` of 10_refusals: its model and the stage's constant (what ``metrics.read``
and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Counts,
    Metrics,
    StageMetrics,
)


class SensitivityRow(Metrics):
    candidate: str
    n_refused: int
    n_primary: int
    mean_primary: float | None
    n_excluded: int
    mean_excluded: float | None
    delta: float | None


class RefusalsMetrics(Metrics):
    mode: Literal["paper", "live"]
    subset: str
    refusals: Counts
    refused_conversations: dict[str, list[str]]
    n_replaced_transient: int
    sensitivity: list[SensitivityRow] | None = None


REFUSALS = StageMetrics(graph.REFUSALS, RefusalsMetrics)
