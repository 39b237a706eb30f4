"""The ``metrics.json`` of 06_generation (one model per mode): its model and the stage's constant
(what ``metrics.read`` and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Any, Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Counts,
    Metrics,
    StageMetrics,
)


class GenerationPaperMetrics(Metrics):
    mode: Literal["paper"]
    n_candidates_charged: int
    spend_generate_usd: float
    anomalies: Counts


class GenerationLiveMetrics(Metrics):
    mode: Literal["live"]
    subset: str
    n_conversations: int
    candidates: list[str]
    n_responses: int
    n_ok: int
    n_refused: int
    n_failed: int
    spend_usd: float
    """What this attempt of the stage paid (answers found in the store cost it nothing)."""
    spend_earlier_attempts_usd: float | None = None
    """What earlier attempts of this stage in the run folder paid for answers this one reused
    from the store (the store's ledger; 0.0 when this attempt bought every answer it used):
    ``spend_usd`` is this attempt's, the two together what the answers cost."""
    plan_est_cost_usd: float
    decoding_sent: dict[str, dict[str, Any]]
    """Candidate -> the decoding settings actually sent (provider-specific keys)."""
    stopped_by_budget: bool
    samples: int | None = None
    """With ``generation.samples`` > 1: replies per (candidate, conversation); the counts above
    are of the first reply, those below of the further ones."""
    n_sample_responses: int | None = None
    n_sample_ok: int | None = None
    n_sample_refused: int | None = None
    n_sample_failed: int | None = None


GenerationMetrics = GenerationPaperMetrics | GenerationLiveMetrics


GENERATION: StageMetrics[GenerationMetrics] = StageMetrics(
    graph.GENERATION, GenerationPaperMetrics, GenerationLiveMetrics)
