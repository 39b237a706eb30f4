"""The ``metrics.json`` of 04_recall: its model and the stage's constant (what ``metrics.read`` and
``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    StageMetrics,
)
from hbpsych_utils.pipeline.metrics.s03_review_round1 import RoundMetrics


class RecallMetrics(RoundMetrics):
    round2: Literal["tallied", "awaiting_round1_ratings", "not_needed", "awaiting_ratings"]
    n_recall_pool: int
    recall_model: str | None = None
    """Live: the model of the recall screen, and what it did with the pool."""
    n_recall_screened: int | None = None
    n_recall_refused: int | None = None
    n_recall_failed: int | None = None
    n_recall_problems: int | None = None
    n_candidates: int | None = None
    """The round-2 set's candidates (CLEAR and POSSIBLE), with a set or a tally."""
    n_clear: int | None = None
    n_possible: int | None = None
    n_candidates_included: int | None = None
    """With a tally: how many of them the clinicians' majority included."""
    n_clear_included: int | None = None
    n_possible_included: int | None = None
    loop_terminated: bool | None = None
    """Tallied: the fresh controls' inclusion rate is at or below the threshold. Not needed:
    round 1 already met the stopping rule."""


RECALL = StageMetrics(graph.RECALL, RecallMetrics)
