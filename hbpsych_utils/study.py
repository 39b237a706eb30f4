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
    "gpt-4.1-2025-04-14": "GPT-4.1",
    "claude-haiku-4-5-20251001": "Claude Haiku 4.5",
    "gemini-2.5-flash": "Gemini 2.5 Flash",
}
"""Short headings for the panel judges in tables and figures; any other id is shown as is."""


def display_name(model_id: str) -> str:
    """A model's short heading (e.g. 'GPT-4.1'), or the id itself if it has none."""
    return DISPLAY_NAMES.get(model_id, model_id)


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

CI_LEVEL = 0.95
"""Level of every percentile bootstrap interval."""

STUDY_TEMPERATURE = 0.0
"""Candidates and judges run at temperature 0 (the study's one deliberate deviation for
judges)."""

REFERENCE_TEMPERATURE = 0.5
"""The HealthBench reference grader's temperature (harness check: candidate and judge)."""

GENERATION_MAX_TOKENS = 8192
GRADER_MAX_TOKENS = 2048

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

ALPHA = 0.05
"""A paired difference "differs" when its Holm-adjusted p-value is below this."""

LOCAL_MODEL = "smollm2-135m-instruct"
"""The registry's ``local`` model: SmolLM2-135M-Instruct served by llama.cpp (``local`` profile)."""
