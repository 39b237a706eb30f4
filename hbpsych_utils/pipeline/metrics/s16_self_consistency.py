"""The ``metrics.json`` of 16_self_consistency: its model and the stage's constant."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline.metrics.model import Metrics, StageMetrics, Undefined
from hbpsych_utils.pipeline.nodes.s16_self_consistency import SELF_CONSISTENCY as STAGE

Rate = float | None
"""A share, an AC1 or a tau; ``None`` where it is undefined (the reason in ``undefined``)."""


class FlipRate(Metrics):
    """A judge's (or the panel majority's) flip rate over the re-graded items, with its
    conversation-clustered percentile interval."""

    n_items: int
    """Items with at least two verdicts obtained (those the rate is over)."""
    n_flipped: int
    n_conversations: int
    n_left_out: int
    """Items with fewer than two verdicts obtained (left out of the rate)."""
    rate: Rate
    low: Rate
    high: Rate
    repeat_ac1: Rate
    """Gwet's AC1 among the repeats (the repeats as raters, the items as subjects)."""
    self_consistent: bool | None
    """The interval's upper end is below ``study.SELF_CONSISTENT_FLIP_RATE`` (``None``: no
    interval)."""
    undefined: Undefined = None


class ScoreSpread(Metrics):
    """A candidate's panel score (Table 1's clipped mean) in each repeat and their spread."""

    by_repeat: dict[str, Rate]
    """Repeat ("0" is 07's grading) -> the panel score with that repeat's verdicts."""
    min: Rate
    max: Rate
    spread: Rate
    undefined: Undefined = None


class JudgeRefusals(Metrics):
    """A judge's verdicts refused or filtered by its provider (``judge_refused``) and those it
    answered without a usable verdict (``no_verdict``), in 07's grading and in the re-gradings,
    apart from the candidates' refusals."""

    grading_judge_refused: int
    grading_no_verdict: int
    grading_verdicts: int
    repeats_judge_refused: int
    repeats_no_verdict: int
    repeats_verdicts: int
    """Verdicts asked for in the re-gradings (repeats 1 to k - 1)."""


class SelfConsistencyMetrics(Metrics):
    """16's numbers; a paper run, or a live run that grades once, has only its mode (and its
    repeats)."""

    mode: Literal["paper", "live"]
    repeats: int | None = None
    """``grading.repeats``: gradings of each sampled item, 07's included."""
    repeat_sample: int | None = None
    n_items: int | None = None
    """(candidate, conversation, criterion) items re-graded (at most ``repeat_sample``)."""
    n_conversations: int | None = None
    judges: list[str] | None = None
    simulator_flip_rate: float | None = None
    """The simulator's injected flip rate (``llm.simulator_flip_rate``), when it answered."""
    n_calls: int | None = None
    """Engine requests of the re-gradings, re-asks included (answers in the store too)."""
    spend_usd: float | None = None
    spend_earlier_attempts_usd: float | None = None
    flip_rates: dict[str, FlipRate] | None = None
    """Judge, then the panel majority -> its flip rate."""
    panel_flips_less: bool | None = None
    """The panel majority's flip rate is below every judge's (``None``: one is undefined)."""
    score_spread: dict[str, ScoreSpread] | None = None
    largest_spread: Rate = None
    ranking_taus: dict[str, Rate] | None = None
    """Pair of repeats ("0|1") -> Kendall's tau-b between the candidates' panel scores."""
    ranking_taus_undefined: Undefined = None
    ranking_stable: bool | None = None
    """Every pair's tau is at least ``study.RANKING_STABLE_TAU`` (``None``: a tau is
    undefined, or there is no pair)."""
    judge_refusals: dict[str, JudgeRefusals] | None = None
    ci_level: float | None = None


SELF_CONSISTENCY = StageMetrics(STAGE, SelfConsistencyMetrics)
