"""The ``metrics.json`` of 12_figures_tables: its model and the stage's constant (what
``metrics.read`` and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Metrics,
    StageMetrics,
)


class FiguresTablesMetrics(Metrics):
    mode: Literal["paper", "live"]
    files: list[str]
    n_files: int
    published_to_figures: bool


FIGURES = StageMetrics(graph.FIGURES, FiguresTablesMetrics)
