"""The ``metrics.json`` of 07_grading (one model per mode): its model and the stage's constant
(what ``metrics.read`` and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    ByModel,
    Counts,
    Metrics,
    StageMetrics,
)


class GradingPaperMetrics(Metrics):
    mode: Literal["paper"]
    grader_template_sha256: str
    spend_grade_usd: float
    spend_by_judge: ByModel
    anomalies: Counts
    n_no_verdict: int


class JudgeCensus(Metrics):
    """One judge's criterion verdicts in a live grading."""

    criteria: int
    verdicts: int
    recovered: int
    reasked: int
    excluded: int
    call_failed: int


class JudgeSpend(Metrics):
    spend_usd: float
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class GradingLiveMetrics(Metrics):
    mode: Literal["live"]
    judges: list[str]
    temperature: float
    response_schema: bool
    grader_template_sha256: str
    n_criteria_graded: int
    n_recovered: int
    n_reasked: int
    n_excluded: int
    n_replies_not_graded: int
    n_scores: int
    n_unscored: int
    calls_by_attempt: Counts
    census: dict[str, JudgeCensus]
    ledger_cost_usd: float
    prompt_caching: bool
    spend_usd: float
    """What this attempt of the grading paid (answers found in the store cost it nothing)."""
    spend_earlier_attempts_usd: float | None = None
    """What earlier attempts of this stage in the run folder paid for answers this one reused
    from the store (the store's ledger; 0.0 when this attempt bought every answer it used):
    ``spend_usd`` is this attempt's, the two together what the answers cost."""
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    spend_by_judge: dict[str, JudgeSpend]
    samples: int | None = None
    """With several replies per conversation: how many; the verdict counts above are of every
    reply, ``n_scores`` and ``n_unscored`` of the first, these of the further ones."""
    n_sample_scores: int | None = None
    n_sample_unscored: int | None = None


GradingMetrics = GradingPaperMetrics | GradingLiveMetrics


GRADING: StageMetrics[GradingMetrics] = StageMetrics(
    graph.GRADING, GradingPaperMetrics, GradingLiveMetrics)
