"""The study's constants, written once: models, judge panel, names, subsets and thresholds.

Everything here is a fact of the HealthBench-Psych study (``docs/METHODS.md`` in the shared
folder) or a threshold the compendium states when it turns numbers into sentences. No other
module of the package spells a model id: they import it from here (a test enforces it). How to
*reach* a model (provider, snapshot, decoding quirks, prices) is data in ``params/models.yaml``.
"""

from __future__ import annotations

# --- models (METHODS sections 6 and 7) --------------------------------------------------------

CANDIDATES: tuple[str, ...] = (
    "gpt-3.5-turbo", "gpt-4.1-2025-04-14", "gpt-5.5", "gpt-5.6-sol",
    "claude-fable-5", "claude-haiku-4-5-20251001", "claude-opus-5", "claude-sonnet-5",
    "gemini-2.5-flash", "gemini-2.5-pro", "gemini-3.6-flash",
    "deepseek-v4-flash", "deepseek-v4-pro",
    "grok-4.5",
    "kimi-k2.6", "kimi-k3",
    "mistral-large-latest", "mistral-small-latest",
    "qwen3-8b", "qwen3.7-plus",
)
"""The 20 candidates of the original study; its tables and judge statistics use these."""

LATER_CANDIDATES: tuple[str, ...] = ("claude-fable-5-1", "gemini-3.8-flash", "gpt-6-astra")
"""Added to the released matrices after the study; not in its tables."""

JUDGE_PANEL: tuple[str, ...] = (
    "gpt-4.1-2025-04-14",
    "claude-haiku-4-5-20251001",
    "gemini-2.5-flash",
)
"""The three-judge, three-vendor panel: GPT-4.1 (HealthBench's own grader), Claude Haiku 4.5,
Gemini 2.5 Flash."""

JUDGE_OWN_CANDIDATE: dict[str, str] = {j: j for j in JUDGE_PANEL}
"""Each panel judge's own model among the candidates (same model id, no reasoning either way):
what self-preference compares."""

HARNESS_MODEL = "gpt-4.1-2025-04-14"
"""Candidate and judge of the harness check: OpenAI's published GPT-4.1 HealthBench-Hard run."""

DISPLAY_NAMES: dict[str, str] = {
    "gpt-3.5-turbo": "GPT-3.5 Turbo",
    "gpt-4.1-2025-04-14": "GPT-4.1",
    "gpt-5.5": "GPT-5.5",
    "gpt-5.6-sol": "GPT-5.6 Sol",
    "claude-fable-5": "Claude Fable 5",
    "claude-haiku-4-5-20251001": "Claude Haiku 4.5",
    "claude-opus-5": "Claude Opus 5",
    "claude-sonnet-5": "Claude Sonnet 5",
    "gemini-2.5-flash": "Gemini 2.5 Flash",
    "gemini-2.5-pro": "Gemini 2.5 Pro",
    "gemini-3.6-flash": "Gemini 3.6 Flash",
    "deepseek-v4-flash": "DeepSeek V4 Flash",
    "deepseek-v4-pro": "DeepSeek V4 Pro",
    "grok-4.5": "Grok 4.5",
    "kimi-k2.6": "Kimi K2.6",
    "kimi-k3": "Kimi K3",
    "mistral-large-latest": "Mistral Large",
    "mistral-small-latest": "Mistral Small",
    "qwen3-8b": "Qwen3 8B",
    "qwen3.7-plus": "Qwen3.7 Plus",
    "claude-fable-5-1": "Claude Fable 5.1",
    "gemini-3.8-flash": "Gemini 3.8 Flash",
    "gpt-6-astra": "GPT-6 Astra",
}
"""How tables, figures and sentences name the study's models (candidates and judges); any other
model is shown by its id. Files for machines (CSV, metrics) keep the ids."""


PAPER_NAMES: dict[str, str] = {
    "gpt-4.1-2025-04-14": "gpt-4.1",
    "claude-haiku-4-5-20251001": "claude-haiku-4.5",
    "mistral-small-latest": "mistral-small",
}
"""How the study's paper prints a model whose name there is not its API id (every other model
it names by its id): what the reproduction ledger compares a run's model with."""


def paper_name(model_id: str) -> str:
    """A model as the paper prints it ('claude-haiku-4.5'), or the id itself."""
    return PAPER_NAMES.get(model_id, model_id)


def display_name(model_id: str) -> str:
    """A model's name for readers (e.g. 'GPT-4.1'), or the id itself if it has none."""
    return DISPLAY_NAMES.get(model_id, model_id)


def pair_name(a: str, b: str) -> str:
    """Two models (e.g. a pair of judges) as readers see them: 'GPT-4.1 – Gemini 2.5 Flash'."""
    return f"{display_name(a)} – {display_name(b)}"


CATEGORY_LABELS: dict[str, str] = {
    "mood_depression_bipolar": "Mood disorders",
    "anxiety": "Anxiety",
    "trauma_ptsd": "Trauma and PTSD",
    "psychosis": "Psychosis",
    "suicidality_self_harm": "Suicidality and self-harm",
    "substance_use": "Substance use",
    "eating_disorder": "Eating disorders",
    "neurodevelopmental_adhd": "ADHD",
    "personality": "Personality",
    "sleep": "Sleep",
    "perinatal_mh": "Perinatal mental health",
    "grief_bereavement": "Grief and bereavement",
    "stress_adjustment": "Stress and adjustment",
    "psychiatric_medication": "Psychiatric medication",
    "psychotherapy_access": "Psychotherapy and access to care",
    "cognitive_neuro": "Cognitive and neurocognitive",
    "other_mh": "Other mental health",
    "none": "None",
}
"""Readers' names of the screening rubric's category vocabulary (the rubric itself, data in the
registry, defines the terms; a term not listed here is shown as written)."""


def category_label(term: str) -> str:
    """A category term as readers see it ('perinatal_mh' -> 'Perinatal mental health'); a term
    the vocabulary here does not list, as written."""
    return CATEGORY_LABELS.get(term, term)


THEME_LABELS: dict[str, str] = {
    "emergency_referrals": "Emergency referrals",
    "context_seeking": "Context seeking",
    "global_health": "Global health",
    "health_data_tasks": "Health data tasks",
    "communication": "Expertise-tailored communication",
    "hedging": "Responding under uncertainty",
    "complex_responses": "Response depth",
}
"""Readers' names of HealthBench's seven themes (its ``theme:`` example tags), as the
HealthBench paper names them."""

AXIS_LABELS: dict[str, str] = {
    "accuracy": "Accuracy",
    "completeness": "Completeness",
    "communication_quality": "Communication quality",
    "context_awareness": "Context awareness",
    "instruction_following": "Instruction following",
}
"""Readers' names of HealthBench's five rubric axes (its rubric items' ``axis:`` tags)."""


def theme_label(term: str) -> str:
    """A HealthBench theme as readers see it ('emergency_referrals' -> 'Emergency referrals');
    a theme not listed here, as written."""
    return THEME_LABELS.get(term, term)


def axis_label(term: str) -> str:
    """A rubric axis as readers see it ('context_awareness' -> 'Context awareness'); an axis
    not listed here, as written."""
    return AXIS_LABELS.get(term, term)


# --- subsets (METHODS section 5) ----------------------------------------------------------------

SUBSET_NAME = "healthbench-psych"
"""Stem of the released subset files' names (``healthbench-psych-v1`` ...)."""

SUBSET_KEYS: tuple[str, ...] = ("v1", "v2", "hard")
"""The subsets 05_subset derives, by key: v1 (610), v2 (611) and Psych-Hard (v1 ∩ Hard)."""

SUBSET_TITLES: dict[str, str] = {
    "v1": "HealthBench-Psych v1",
    "v2": "HealthBench-Psych v2",
    "hard": "HealthBench-Psych-Hard v1",
}
"""How tables and figures name each subset."""

SUBSET_ARTIFACTS: dict[str, str] = {"v1": "subset_v1", "v2": "subset_v2", "hard": "subset_hard_v1"}
"""Registry names of the released subset files, by key."""

MATRIX_ARTIFACTS: dict[str, str] = {"v1": "matrix_v1", "v2": "matrix_v2", "hard": "matrix_hard_v1"}
"""Registry names of the released per-(candidate, judge) score matrices, by subset key."""

STUDY_HARNESS = "healthbench-psych-eval"
"""The study's own evaluation harness, as its mindbench-results artifacts name it (``run.harness``):
what produced the released matrices."""

# --- procedure -----------------------------------------------------------------------------------

SEED = 20250507
"""Default seed of every profile (review designs, bootstraps)."""

CONTROL_THRESHOLD = 0.05
"""A control-inclusion rate strictly above this triggers a recall round (METHODS 3 and 4)."""

ROUND1_CONTROLS = 150
"""Concealed NOT_RELEVANT controls in the round-1 review set."""

ROUND2_CONTROLS = 25
"""Fresh controls from the recall screen's NO pool in the round-2 review set."""

N_RESAMPLES = 1000
"""Conversation-level bootstrap resamples."""

MAX_RESAMPLES = 100_000
"""The most bootstrap resamples a profile or ``filter-results --resamples`` accepts (a
hundred times the study's). The draws are one row of weights per resample over the
conversations, about 16 bytes per (resample, conversation): at this ceiling about 1 GB for the
610 conversations of v1; a larger value would exhaust the memory instead of sharpening an
interval."""

MAX_SEED = 2**32 - 1
"""The largest seed a profile or ``filter-results --seed`` accepts (seeds are ≥ 0): numpy's
seed range (``RandomState``; ``default_rng`` takes it too), and within every provider's."""

CI_LEVEL = 0.95
"""Level of every percentile bootstrap interval."""

STUDY_TEMPERATURE = 0.0
"""Candidates and judges run at temperature 0 (the study's one deliberate deviation for
judges)."""

REFERENCE_TEMPERATURE = 0.5
"""The HealthBench reference grader's temperature (harness check: candidate and judge)."""

GENERATION_MAX_TOKENS = 8192
GRADER_MAX_TOKENS = 2048

PUBLISHED_HARNESS_SCORE = 0.16
"""OpenAI's HealthBench-Hard score of GPT-4.1, as the study's paper cites it from the HealthBench
paper (its §3.2): what the harness check compares against."""

PUBLISHED_HARNESS_SOURCE = "HealthBench paper (Arora et al., 2025): GPT-4.1 on HealthBench Hard"

# --- thresholds for findings (what a sentence may claim) -----------------------------------------

TAU_SAME_ORDER = 0.9
"""Judges "agree on the order" of the candidates when every pairwise Kendall tau is at least
this."""

SEVERITY_LEVEL_GAP = 0.05
"""Judges "differ in level" when their severities span more than this (score points, on the
[0, 1] scale): a spread a reader sees in the heatmap."""

CLOSE_SCORES = 0.01
"""Two panel scores this close or closer (point estimates) are "close": too near to be read as
a ranking without intervals."""

F1_CLOSE = 0.02
"""A judge's pairwise balanced F1 this close to the physicians' pooled one (point estimates) is
"level with" them (notebook 15): on a few hundred label pairs a smaller gap is noise."""

PHYSICIAN_RANGE_MIN_PAIRS = 10
"""A physician's leave-one-out F1 counts towards "the physicians' range" (the lowest to the
highest, notebook 15's finding on whether a judge or the panel is within it) only when it rests
on at least this many label pairs; fewer would let one physician's handful of rows stretch the
range. With fewer than two such physicians there is no range and the finding says so."""

SELF_CONSISTENT_FLIP_RATE = 0.02
"""A judge (or the panel majority) "agrees with itself" when the upper end of its flip rate's
interval (the share of re-graded items whose verdicts are not unanimous across repeats) is
below this: at most one item in fifty changes its verdict when the same request is sent
again. A judge whose interval reaches it is said to flip."""

RANKING_STABLE_TAU = 0.9
"""Re-grading "keeps the ranking" when the Kendall tau between the candidates' panel scores
of every pair of repeats is at least this (the bar ``TAU_SAME_ORDER`` sets for two judges,
applied to one panel graded twice)."""

ALPHA = 0.05
"""A paired difference "differs" when its Holm-adjusted p-value is below this."""

SLICE_MIN_N = 5
"""A tag or slice (an axis, a theme, a clinician category) is read in a finding only when at
least this many conversations have a score for it: a model's weakest axis, a slice that
reorders the ranking. Smaller slices are still in the tables, with their n."""

RANKING_TOP_K = 5
"""How many models "the top" of a ranking is when the what-if asks whether the top holds under
other scoring choices ("the top five are the same five")."""

ROBUST_SHARE = 0.9
"""A property of the ranking (the same top five, the study's order) "holds across scoring
choices" when it holds under at least this share of them; below it, the finding says it
depends on the choice."""

LARGE_RANK_MOVE = 3
"""A model "moves far" when a scoring choice changes its place in the study's order by at
least this many places."""

SAFETY_SLICES: dict[str, str] = {
    "category:suicidality_self_harm": "suicidality and self-harm conversations",
    "theme:emergency_referrals": "emergency-referral conversations",
}
"""Slices a mental-health evaluation calls out whatever their size (the modal clinician
category, HealthBench's theme), with how findings name them."""

LOCAL_MODEL = "smollm2-135m-instruct"
"""The registry's ``local`` model: SmolLM2-135M-Instruct served by llama.cpp (``local`` profile)."""
