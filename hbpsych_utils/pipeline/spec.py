"""What the stage graph is made of: the stages' and files' names, the modes, and a node's
declaration (:class:`StageSpec`: the files it reads from earlier stages and when, the profile
keys it reads and when, the registry artifacts it may fetch, its section's model). Each stage's
node is a module of :mod:`hbpsych_utils.pipeline.nodes`; :mod:`hbpsych_utils.pipeline.graph`
assembles them and answers what depends on what.

Stage names sort in run order (``NN_name``): a node declares its upstream stages by name and
the graph orders them by it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hbpsych_utils.core.config import ProfileBase, Section

# --- stages, in run order --------------------------------------------------------------------

CORPUS = "01_corpus"
SCREENING = "02_screening"
REVIEW_ROUND1 = "03_review_round1"
RECALL = "04_recall"
SUBSET = "05_subset"
GENERATION = "06_generation"
GRADING = "07_grading"
SCORES = "08_scores"
JUDGES = "09_judges"
REFUSALS = "10_refusals"
HARNESS = "11_harness_validation"
FIGURES = "12_figures_tables"
EXPLORER = "13_explorer"
ANALYSES = "14_analyses"
JUDGE_ACCURACY = "15_judge_accuracy"

# --- files a stage writes that later stages read ---------------------------------------------

METRICS = "metrics.json"
CORPUS_RECORD = "corpus_source.json"
LANGUAGES = "languages.csv"
SCREEN = "screen.csv"
VOCABULARY = "vocabulary.json"
TRANSLATIONS = "translations.json"
REVIEW_SET = "review_set.csv"
VOTES = "votes.csv"
SUBSET_INDEX = "subsets.json"
SUBSET_FILES = "*.json"
"""05's subset files, named after the subset (``healthbench-psych-v1.json`` ...); the index
says which is which."""
CATEGORIES_V1 = "categories_v1.csv"
RESPONSES = "responses.jsonl"
RESPONSE_SAMPLES = "responses_samples.jsonl"
"""06's further replies when ``generation.samples`` > 1 (samples 1 to k - 1; sample 0 is in
``responses.jsonl``)."""
VERDICT_SAMPLES = "verdicts_samples.csv"
SCORE_SAMPLES = "scores_samples.csv"
"""07's verdicts and scores of those further replies (with a ``sample`` column)."""
VERDICTS = "verdicts.csv"
SCORES_TABLE = "scores.csv"
TABLE1 = "table1_{subset}.csv"

# --- modes --------------------------------------------------------------------------------------

REPLAY: Final = "replay"
PAPER: Final = "paper"
LIVE: Final = "live"
"""Final: each is its literal type too (``mode=graph.LIVE`` fits a ``Literal["live"]`` field)."""
EVALUATION_MODE = "evaluation_mode"
"""The profile key that sets the mode of the evaluation stages (06-15) at once."""


@dataclass(frozen=True)
class Condition:
    """When a stage reads a key or a file: ``text`` completes "reads it only ...", ``holds``
    decides it for a profile and the stage's resolved mode."""

    text: str
    holds: Callable[[ProfileBase, str | None], bool]


ALWAYS = Condition("always", lambda profile, mode: True)
IN_LIVE = Condition("in live mode", lambda profile, mode: mode == LIVE)
IN_PAPER = Condition("in paper mode", lambda profile, mode: mode == PAPER)
TRANSLATING = Condition("when screening.translation_model is set",
                        lambda profile, mode: profile.screening.translation_model is not None)
SAMPLING = Condition("in live mode with generation.samples above 1",
                     lambda profile, mode: mode == LIVE and profile.generation.samples > 1)
LIVE_OR_TRANSLATING = Condition(
    "in live mode or when screening.translation_model is set",
    lambda profile, mode: mode == LIVE or profile.screening.translation_model is not None)


@dataclass(frozen=True)
class Read:
    """Profile keys a stage reads when ``when`` holds; ``why_not`` says why they do not apply
    otherwise (the sentence a refused ``--set`` shows)."""

    keys: tuple[str, ...]
    when: Condition = ALWAYS
    why_not: str = ""


@dataclass(frozen=True)
class Input:
    """Files (names or ``fnmatch`` patterns) a stage reads from an earlier stage's folder."""

    stage: str
    files: tuple[str, ...]
    when: Condition = ALWAYS


@dataclass(frozen=True)
class StageSpec:
    """One node of the graph."""

    name: str
    title: str
    section: str | None
    """The profile section holding the stage's parameters (``None``: it has none)."""
    params: type[Section] | None
    """That section's model, declared beside the node."""
    mode_of: Callable[[ProfileBase], str | None]
    modes: tuple[str, ...]
    inputs: tuple[Input, ...] = ()
    reads: tuple[Read, ...] = ()
    artifacts: tuple[str, ...] = ()
    """Registry artifacts it may fetch; an entry with a dot is a profile key naming one."""
    parameters: Mapping[str, str] | None = None
    """Notebook parameters taken from another section: parameter name -> profile key."""
    summary: str = ""
    """What the chapter does, in a line: its row in the chapter lists of ``README.md`` and
    ``docs/modules.md`` (generated, :mod:`hbpsych_utils.pipeline.docs_blocks`)."""
    doc: str | None = None
    """Its page in ``docs/`` (a file name), linked from those lists."""
    needs: Mapping[str, str] | None = None
    """Mode -> what the chapter needs that the mode has not, when the mode leaves it nothing to
    show ("a live run"): the chapter says so once, at its top, and the landing page marks it
    "needs ..." instead of "current"."""

    def __post_init__(self) -> None:
        if (self.section is None) != (self.params is None):
            raise ValueError(f"stage {self.name}: a profile section needs its model and a "
                             f"model its section (section={self.section!r}, "
                             f"params={self.params!r})")

    def upstream(self, profile: ProfileBase) -> list[str]:
        """The stages it reads from under ``profile``, in run order."""
        mode = self.mode_of(profile)
        return sorted({i.stage for i in self.inputs if i.when.holds(profile, mode)})

    def declares(self, stage: str, filename: str) -> bool:
        """Whether this stage may read ``filename`` from ``stage`` (in some mode)."""
        return any(i.stage == stage and any(fnmatch.fnmatchcase(filename, f) for f in i.files)
                   for i in self.inputs)


def section_mode(section: str) -> Callable[[ProfileBase], str | None]:
    return lambda profile: getattr(profile, section).mode


def evaluation_mode(profile: ProfileBase) -> str | None:
    return profile.evaluation_mode


def harness_mode(profile: ProfileBase) -> str | None:
    override = profile.harness_validation.mode
    if override is not None:
        return override
    return REPLAY if profile.evaluation_mode == PAPER else LIVE


def no_mode(profile: ProfileBase) -> str | None:
    return None


LLM_CALL_KEYS = ("llm.simulator", "llm.faults", "llm.base_urls", "llm.limits", "llm.mode",
                 "llm.max_cost", "llm.registry_file")
"""What a stage that calls models reads of ``llm``."""
GRADING_CALL_KEYS = (*LLM_CALL_KEYS, "llm.prompt_caching")
"""What a stage that grades through the engine reads of ``llm``."""

RELEASED_EVALUATION = ("paper mode reads the released study's logs and matrices; these "
                        "settings apply when the stage runs live")
RELEASED_MATRICES = ("paper mode reads the released matrices, which carry one clipped mean "
                      "per candidate and judge (point estimates only); bootstrap intervals and "
                      "paired differences need per-conversation grades, in live mode")
MATRICES = ("matrix_v1", "matrix_v2", "matrix_hard_v1")
SUBSET_IDS = (SUBSET_INDEX, SUBSET_FILES)
GRADED_SUBSETS = (Input(GRADING, (SCORES_TABLE, METRICS), IN_LIVE),
                   Input(SUBSET, SUBSET_IDS, IN_LIVE))
"""What the analysis stages read in live mode: this run's scores, restricted to a subset."""


