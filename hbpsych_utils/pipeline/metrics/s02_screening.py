"""The ``metrics.json`` of 02_screening: its model and the stage's constant (what ``metrics.read``
and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Counts,
    Metrics,
    StageMetrics,
)


class AgreementWithRelease(Metrics):
    n_common: int
    cohen_kappa: float | None
    percent_agreement: float | None


class ScreeningMetrics(Metrics):
    mode: Literal["replay", "live"]
    n_screened: int
    n_relevant: int
    n_borderline: int
    n_not_relevant: int
    n_model_refused: int
    n_screen_failed: int
    confidence_counts: Counts
    relevant_by_category: Counts
    borderline_by_category: Counts
    model: str | None = None
    """Live: the screening model."""
    batch_size: int | None = None
    n_screen_problems: int | None = None
    agreement_with_release: AgreementWithRelease | None = None
    translation_model: str | None = None
    """With a translation model: the model, and what came of the conversations 01 flagged
    non-English (``translation.STATUSES``)."""
    n_translation_requested: int | None = None
    n_translation_translated: int | None = None
    n_translation_is_english: int | None = None
    """The translator found the conversation English after all (no translation, no failure)."""
    n_translation_refused: int | None = None
    n_translation_failed: int | None = None
    """No valid translation after the bounded re-asks."""


SCREENING = StageMetrics(graph.SCREENING, ScreeningMetrics)
