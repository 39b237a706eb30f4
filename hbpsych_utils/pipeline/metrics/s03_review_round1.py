"""The ``metrics.json`` of 03_review_round1 (and the round both review rounds share): its model and
the stage's constant (what ``metrics.read`` and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Counts,
    Metrics,
    StageMetrics,
)


class RoundMetrics(Metrics):
    """What both review rounds (03, 04) report once their votes are tallied: the controls and
    the stopping rule, the consensus tiers and the agreement on relevance among the reviewers
    (``agreement.AgreementSummary``). A round without a tally leaves them out."""

    mode: Literal["replay", "live"]
    n_controls: int | None = None
    n_controls_included: int | None = None
    control_inclusion_rate: float | None = None
    recall_triggered: bool | None = None
    ac1_pairs: dict[str, float | None] | None = None
    ac1_pairwise_mean: float | None = None
    ac1_multirater: float | None = None
    fleiss_kappa: float | None = None
    cohen_kappa_pairs: dict[str, float | None] | None = None
    tier_counts: Counts | None = None
    threshold: float | None = None


class ReviewRound1Metrics(RoundMetrics):
    n_reviewed: int
    n_ratings_files: int | None = None
    """Only while no ratings are in (0)."""
    n_screened_in: int | None = None
    n_included: int | None = None
    n_screened_in_included: int | None = None

    @property
    def tallied(self) -> bool:
        """Whether the round's ratings are in and counted."""
        return self.recall_triggered is not None


REVIEW_ROUND1 = StageMetrics(graph.REVIEW_ROUND1, ReviewRound1Metrics)
