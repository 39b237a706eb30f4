"""The ``metrics.json`` of 15_judge_accuracy: its model and the stage's constant (what
``metrics.read`` and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Metrics,
    StageMetrics,
    Undefined,
)

Rate = float | None
"""A proportion or F1; ``None`` where it is undefined (no row of a class)."""


class JudgeAccuracy(Metrics):
    """A judge against the physician majority on a category's rows (``all``: every row)."""

    n: int
    tp: int
    fp: int
    fn: int
    tn: int
    macro_f1: Rate
    f1_met: Rate
    f1_not_met: Rate
    sensitivity: Rate
    sensitivity_low: Rate
    sensitivity_high: Rate
    specificity: Rate
    specificity_low: Rate
    specificity_high: Rate
    undefined: Undefined = None


class PairwiseF1(Metrics):
    """A rater's pairwise balanced F1 against physicians on a category's rows (``None``, with
    the reason in ``undefined``, where either class is never predicted or never in the
    truth)."""

    kind: Literal["judge", "panel", "physician", "physicians"]
    pairs: int
    balanced_f1: Rate
    undefined: Undefined = None


class CorrectedRate(Metrics):
    """A judge's criterion-met rate on this run's grading (07) and its Rogan-Gladen correction,
    with the interval that resamples the calibration rows too."""

    observed: float
    n_verdicts: int
    n_conversations: int
    sensitivity: Rate
    specificity: Rate
    corrected: Rate
    low: Rate
    high: Rate
    undefined: Undefined = None


class SubsetCoverage(Metrics):
    """How much of a subset the physician-labelled rows cover (15)."""

    rows: int
    conversations: int
    subset_conversations: int | None
    share: Rate


class JudgeAccuracyMetrics(Metrics):
    """15's numbers; a paper run has only its mode (the physician labels are online only)."""

    mode: Literal["paper", "live"]
    source: Literal["registry", "fixture"] | None = None
    n_rows: int | None = None
    """Rows graded: the file's rows on the Psych subset's conversations (v1 ∪ v2 ∪ Hard), at
    most ``max_rows``."""
    n_rows_in_file: int | None = None
    coverage: dict[str, SubsetCoverage] | None = None
    """Subset (v1, v2, hard, their union, and the rows outside every subset) -> coverage."""
    n_conversations: int | None = None
    n_physicians: int | None = None
    judges: list[str] | None = None
    n_excluded: int | None = None
    """Verdicts still missing after the re-asks (left out, never counted as not met)."""
    spend_usd: float | None = None
    """What this attempt of the grading paid (answers found in the store cost it nothing)."""
    spend_earlier_attempts_usd: float | None = None
    """What earlier attempts of this stage in the run folder paid for answers this one reused
    from the store (the store's ledger; 0.0 when this attempt bought every answer it used):
    ``spend_usd`` is this attempt's, the two together what the answers cost."""
    against_majority: dict[str, dict[str, JudgeAccuracy]] | None = None
    """Judge (and ``panel``) -> category (``all`` first) -> its accuracy against the physician
    majority."""
    against_majority_by_theme: dict[str, dict[str, JudgeAccuracy]] | None = None
    against_majority_by_psych_category: dict[str, dict[str, JudgeAccuracy]] | None = None
    """The same per HealthBench theme and per modal clinician category (no ``all``)."""
    n_rows_no_theme: int | None = None
    n_rows_no_psych_category: int | None = None
    """Rows left out of the per-theme and per-category tables (no theme, no category)."""
    pairwise: dict[str, dict[str, PairwiseF1]] | None = None
    """Rater (judge, ``panel``, physician, ``physicians``) -> category -> pairwise balanced
    F1."""
    pairwise_by_theme: dict[str, dict[str, PairwiseF1]] | None = None
    pairwise_by_psych_category: dict[str, dict[str, PairwiseF1]] | None = None
    judges_ac1: Rate = None
    n_rows_ac1: int | None = None
    corrected: dict[str, CorrectedRate] | None = None
    """Judge (and ``panel``) -> its criterion-met rate on this run's 07 verdicts, corrected."""
    ci_level: float | None = None
    """The level of the sensitivity, specificity and corrected-rate intervals (live)."""


JUDGE_ACCURACY = StageMetrics(graph.JUDGE_ACCURACY, JudgeAccuracyMetrics)
