"""Every stage's ``metrics.json``, typed: one pydantic model per stage (two where its modes write
different things), used by the stage that writes it, its findings, the stages downstream, the
manifest, the book and the tests. There is no second schema of these files anywhere.

The models describe the files as they are: the keys and values a stage wrote before it was
typed stay exactly the same. A key a mode does not write is left out of the file, not written
as ``null`` (:func:`dump` writes the fields that were set); a number that could not be
computed is ``null`` (``float | None``). Nested records (a Table 1 per subset, a bootstrap
interval, a sensitivity row) have their own models.

Read a stage's metrics with :func:`read` (the run folder and the stage's constant here,
``read(run_dir, SCORES)``: typed as that stage's model) or, from a stage, with
``Stage.upstream_metrics(SCORES)``; either names the file and the field when one does not fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar, Union, cast, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from hbpsych_utils.core import records
from hbpsych_utils.pipeline import graph

if TYPE_CHECKING:
    from typing_extensions import TypeForm


class Metrics(BaseModel):
    """A stage's metrics (or a record inside them): exactly the keys the file holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)


M = TypeVar("M", bound=Metrics, covariant=True)


Counts = dict[str, int]
ByModel = dict[str, float]
Bound = float | None
"""An end of a bootstrap interval: ``None`` where the interval is undefined (one conversation:
``evaluation.scoring.percentile_interval``)."""
BoundsByModel = dict[str, float | None]
Undefined = dict[str, str] | None
"""Field -> why its value is undefined (``null``); written only when one is."""


# --- 01 ---------------------------------------------------------------------------------------

class CorpusMetrics(Metrics):
    corpus_source: str
    """``registry`` or the path of a profile's own ``corpus_file``."""
    complete: bool
    n_conversations: int
    n_expected: int
    coverage: float
    n_skipped: int
    n_hard_ids: int
    n_hard_in_corpus: int
    n_rubric_items: int
    n_non_english: int | None
    non_english_share: float | None
    ids_sha256: str
    turns_mean: float | None
    turns_median: float | None
    turns_max: int | None
    n_multi_turn: int
    rubric_items_mean: float | None
    n_negative_items: int
    positive_points_total: int | float
    negative_points_total: int | float
    points_all_integer: bool


# --- 02 ---------------------------------------------------------------------------------------

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


# --- 03 and 04 --------------------------------------------------------------------------------

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


# --- 05 ---------------------------------------------------------------------------------------

class SubsetMetrics(Metrics):
    n_v1: int
    n_v2: int
    n_hard: int
    sha256_v1: str
    sha256_v2: str
    sha256_hard: str
    matches_release_v1: bool | None = None
    matches_release_v2: bool | None = None
    matches_release_hard: bool | None = None
    category_counts: Counts
    n_no_category_majority: int

    def sizes(self) -> dict[str, int]:
        return {"v1": self.n_v1, "v2": self.n_v2, "hard": self.n_hard}

    def hashes(self) -> dict[str, str]:
        return {"v1": self.sha256_v1, "v2": self.sha256_v2, "hard": self.sha256_hard}

    def matches(self) -> dict[str, bool]:
        """Subset key -> whether it equals the released file (only those compared)."""
        out = {"v1": self.matches_release_v1, "v2": self.matches_release_v2,
               "hard": self.matches_release_hard}
        return {k: v for k, v in out.items() if v is not None}


# --- 06 ---------------------------------------------------------------------------------------

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


# --- 07 ---------------------------------------------------------------------------------------

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


# --- 08 ---------------------------------------------------------------------------------------

class SubsetScores(Metrics):
    """One subset's Table 1 as numbers: panel means, ranking, per-judge means; intervals and
    n where the source has per-conversation scores."""

    panel_mean: ByModel
    ranking: list[str]
    per_judge: dict[str, ByModel]
    ci_low: BoundsByModel | None = None
    ci_high: BoundsByModel | None = None
    n_panel: Counts | None = None
    point_estimates_only: bool


class PairedDifferenceRow(Metrics):
    a: str
    b: str
    difference: float
    ci_low: Bound
    ci_high: Bound
    p_value: float
    n: int
    p_holm: float


class ScoresMetrics(Metrics):
    mode: Literal["paper", "live"]
    include_later: bool
    subset: str
    """The primary subset (the first with scores); its numbers are also at the top level."""
    panel_mean: ByModel
    ranking: list[str]
    per_judge: dict[str, ByModel]
    ci_low: BoundsByModel | None = None
    ci_high: BoundsByModel | None = None
    n_panel: Counts | None = None
    point_estimates_only: bool
    by_subset: dict[str, SubsetScores]
    n_resamples: int | None = None
    ci_level: float | None = None
    """The level of the intervals (``ci_low``, ``ci_high``, the pairs'), where there are any."""
    bootstrap_std: ByModel | None = None
    paired_differences: list[PairedDifferenceRow] | None = None


# --- 09 ---------------------------------------------------------------------------------------

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


# --- 10 ---------------------------------------------------------------------------------------

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


# --- shared by 11 and 14: scores by tag, reply lengths ------------------------------------------

class TagScore(Metrics):
    """A tag's or slice's score (``evaluation.breakdowns.summarise``): n conversations, the
    clipped mean, its 95% bootstrap interval (``None`` on one conversation, with the reason in
    ``undefined``) and the reference's ``bootstrap_std``."""

    n: int
    clipped_mean: float
    ci_low: Bound
    ci_high: Bound
    bootstrap_std: float
    undefined: Undefined = None


class LengthDistribution(Metrics):
    """Reply lengths in characters (``evaluation.length.distribution``)."""

    n: int
    mean: float
    min: float
    p25: float
    median: float
    p75: float
    max: float


# --- 11 ---------------------------------------------------------------------------------------

class ReleasedBreakdown(Metrics):
    """The released harness run by rubric axis and theme: its per-criterion grades on the
    conversations whose rubric the run's corpus holds."""

    n_lines: int
    """Conversations of the released run (1,000)."""
    n_with_rubric: int
    """Of those, the ones whose rubric this run's corpus holds (193 with the offline corpus)."""
    by_tag: dict[str, TagScore]


class ReleasedLength(Metrics):
    """The released harness run's length-adjusted score beside its raw one, over its scored
    replies (``harness.length_summary``)."""

    variant: str
    penalty: float
    n: int
    clipped_mean: float
    adjusted_mean: float
    chars: LengthDistribution


class HarnessSettings(Metrics):
    candidate: str
    judge: str
    temperature: float
    max_tokens: int


class HarnessMetrics(Metrics):
    mode: Literal["replay", "live"]
    n_scored: int
    clipped_mean: float | None
    bootstrap_std: float | None
    published: float | None
    delta: float | None
    published_source: str
    settings: HarnessSettings
    n_common_with_released: int | None = None
    mean_difference_vs_released: float | None = None
    released_breakdown: ReleasedBreakdown | None = None
    released_length: ReleasedLength | None = None
    ci_level: float | None = None
    """The level of the released breakdown's intervals."""


# --- 12 ---------------------------------------------------------------------------------------

class FiguresTablesMetrics(Metrics):
    mode: Literal["paper", "live"]
    files: list[str]
    n_files: int
    published_to_figures: bool


# --- 14 ---------------------------------------------------------------------------------------

class LengthScore(Metrics):
    """A candidate's reply lengths and its length-adjusted score beside the raw one
    (``evaluation.length.length_table``)."""

    n: int
    mean_chars: float
    median_chars: float
    clipped_mean: float
    adjusted_mean: float
    adjusted_ci_low: Bound
    adjusted_ci_high: Bound


class KScore(Metrics):
    """Worst-at-k for one k (``evaluation.reliability.worst_at_k_table``)."""

    k: int
    n: int
    clipped_mean: float
    ci_low: Bound
    ci_high: Bound


class RunSpread(Metrics):
    """The overall score of each run (sample index) and their spread
    (``evaluation.reliability.run_spread``)."""

    n: int
    runs: list[float]
    mean: float
    min: float
    max: float
    std: float


class AnalysesMetrics(Metrics):
    """14's numbers; a paper run has only its mode (the released matrices carry no
    per-criterion grade). Scorer keys are the judges' model ids and ``panel``."""

    mode: Literal["paper", "live"]
    subset: str | None = None
    n_conversations: int | None = None
    judges: list[str] | None = None
    panel_mean: ByModel | None = None
    """The panel's clipped mean of the first reply per candidate on the subset (08's)."""
    by_tag: dict[str, dict[str, dict[str, TagScore]]] | None = None
    """Scorer -> candidate -> tag (``axis:``, ``theme:``, ``category:``) -> its score."""
    length_penalty: str | None = None
    length_per_500: float | None = None
    length: dict[str, dict[str, LengthScore]] | None = None
    """Scorer -> candidate -> reply lengths and the length-adjusted score."""
    samples: int | None = None
    """Replies per (candidate, conversation) (``generation.samples``)."""
    n_incomplete: int | None = None
    """(Scorer, candidate, conversation) rows left out of worst-at-k: a sample unscored."""
    worst_at_k: dict[str, dict[str, list[KScore]]] | None = None
    run_spread: dict[str, dict[str, RunSpread]] | None = None
    ci_level: float | None = None
    """The level of every interval of the tag scores, lengths and worst-at-k (live)."""


# --- 15 ---------------------------------------------------------------------------------------

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


class StageMetrics(Generic[M]):
    """A stage and the type of its ``metrics.json``: what :func:`read`, :func:`parse` and
    ``Stage.upstream_metrics`` take, so each returns that type (``read(run, SCORES).ranking``
    is a ``list[str]`` to the type checker too). One per stage below, named like the stage's
    constant in :mod:`~hbpsych_utils.pipeline.graph`."""

    def __init__(self, stage: str, *models: type[M]) -> None:
        self.stage = stage
        self.models = models
        """The stage's model, or one per mode (told apart by their ``mode``)."""
        shape: TypeForm[M] = models[0] if len(models) == 1 else cast(
            "TypeForm[M]", Annotated[Union[models], Field(discriminator="mode")])  # noqa: UP007
        self._adapter = TypeAdapter(shape)

    def validate(self, data: object) -> M:
        """``data`` as this stage's model (pydantic's error when it does not fit)."""
        return self._adapter.validate_python(data)

    def __repr__(self) -> str:
        return f"StageMetrics({self.stage!r})"


CORPUS = StageMetrics(graph.CORPUS, CorpusMetrics)
SCREENING = StageMetrics(graph.SCREENING, ScreeningMetrics)
REVIEW_ROUND1 = StageMetrics(graph.REVIEW_ROUND1, ReviewRound1Metrics)
RECALL = StageMetrics(graph.RECALL, RecallMetrics)
SUBSET = StageMetrics(graph.SUBSET, SubsetMetrics)
GENERATION: StageMetrics[GenerationMetrics] = StageMetrics(
    graph.GENERATION, GenerationPaperMetrics, GenerationLiveMetrics)
GRADING: StageMetrics[GradingMetrics] = StageMetrics(
    graph.GRADING, GradingPaperMetrics, GradingLiveMetrics)
SCORES = StageMetrics(graph.SCORES, ScoresMetrics)
JUDGES = StageMetrics(graph.JUDGES, JudgesMetrics)
REFUSALS = StageMetrics(graph.REFUSALS, RefusalsMetrics)
HARNESS = StageMetrics(graph.HARNESS, HarnessMetrics)
FIGURES = StageMetrics(graph.FIGURES, FiguresTablesMetrics)
ANALYSES = StageMetrics(graph.ANALYSES, AnalysesMetrics)
JUDGE_ACCURACY = StageMetrics(graph.JUDGE_ACCURACY, JudgeAccuracyMetrics)

MODELS: dict[str, StageMetrics[Metrics]] = {m.stage: m for m in (
    CORPUS, SCREENING, REVIEW_ROUND1, RECALL, SUBSET, GENERATION, GRADING, SCORES, JUDGES,
    REFUSALS, HARNESS, FIGURES, ANALYSES, JUDGE_ACCURACY)}
"""Stage name -> the type of its ``metrics.json`` (13_explorer writes none), in run order: for
code that holds a stage's name, not its constant above (the book, the manifest)."""


class MetricsError(ValueError):
    """A ``metrics.json`` that does not fit its stage's model; names the file and field."""


@overload
def parse(stage: StageMetrics[M], data: object, where: str = "metrics") -> M: ...
@overload
def parse(stage: str, data: object, where: str = "metrics") -> Metrics: ...
def parse(stage: StageMetrics[M] | str, data: object, where: str = "metrics") -> M | Metrics:
    """Validate a stage's metrics (a mapping, e.g. what its code computed) into its model."""
    typed = stage if isinstance(stage, StageMetrics) else MODELS[stage]
    try:
        return typed.validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise MetricsError(f"{where}: field {field}: {err['msg']} (got {err.get('input')!r:.80})"
                           ) from None


@overload
def read(run_dir: Path | str, stage: StageMetrics[M]) -> M: ...
@overload
def read(run_dir: Path | str, stage: str) -> Metrics: ...
def read(run_dir: Path | str, stage: StageMetrics[M] | str) -> M | Metrics:
    """A stage's ``metrics.json`` in a run folder, as its model: the stage's type with its
    constant above (``read(run, SCORES)``), :class:`Metrics` with a name held in a variable."""
    typed = stage if isinstance(stage, StageMetrics) else MODELS[stage]
    path = Path(run_dir) / typed.stage / graph.METRICS
    return parse(typed, records.read_json(path, error=MetricsError), str(path))


def dump(metrics: BaseModel) -> dict[str, Any]:
    """What ``metrics.json`` holds: the fields that were set, as JSON data."""
    return metrics.model_dump(mode="json", exclude_unset=True)
