"""The run as a declared graph: every stage, the files it reads from earlier stages, the
registry artifacts it may fetch and the profile keys it reads, each with the condition (mode,
or a value such as a translation model) under which it reads them.

This is the one place that says what depends on what. From it:

- the runner resolves each stage's mode and the values injected into its notebook's
  ``parameters`` cell (:func:`notebook_parameters`);
- :mod:`hbpsych_utils.pipeline.state` fingerprints a stage from what it reads under the
  profile (:func:`keys_read`, its upstream stages, its notebook, the package code and the
  artifacts' registered hashes), so the runner re-runs exactly what a change affects;
- a ``--set`` that no stage reads under the profile's modes is refused, naming why
  (:func:`unread_reason`);
- a stage's output folder refuses to read an upstream file this graph does not declare
  (:meth:`hbpsych_utils.pipeline.stage.Stage.upstream`), so the declaration cannot drift from
  the code.

The graph is 15 nodes of plain data rather than a Snakefile: a stage is a notebook that
papermill runs in one Python process, its inputs include profile values by mode, and the
book and the manifest read the same declaration (``docs/pipeline.md`` says more).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from hbpsych_utils.core.config import Profile, Section

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
    holds: Callable[[Profile, str | None], bool]


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
    mode_of: Callable[[Profile], str | None]
    modes: tuple[str, ...]
    inputs: tuple[Input, ...] = ()
    reads: tuple[Read, ...] = ()
    artifacts: tuple[str, ...] = ()
    """Registry artifacts it may fetch; an entry with a dot is a profile key naming one."""
    parameters: Mapping[str, str] | None = None
    """Notebook parameters taken from another section: parameter name -> profile key."""

    def upstream(self, profile: Profile) -> list[str]:
        """The stages it reads from under ``profile``, in run order."""
        mode = self.mode_of(profile)
        names = {i.stage for i in self.inputs if i.when.holds(profile, mode)}
        return [s for s in STAGES if s in names]

    def declares(self, stage: str, filename: str) -> bool:
        """Whether this stage may read ``filename`` from ``stage`` (in some mode)."""
        return any(i.stage == stage and any(fnmatch.fnmatchcase(filename, f) for f in i.files)
                   for i in self.inputs)


def _section_mode(section: str) -> Callable[[Profile], str | None]:
    return lambda profile: getattr(profile, section).mode


def _evaluation_mode(profile: Profile) -> str | None:
    return profile.evaluation_mode


def _harness_mode(profile: Profile) -> str | None:
    override = profile.harness_validation.mode
    if override is not None:
        return override
    return REPLAY if profile.evaluation_mode == PAPER else LIVE


def _no_mode(profile: Profile) -> str | None:
    return None


LLM_CALL_KEYS = ("llm.simulator", "llm.faults", "llm.base_urls", "llm.limits", "llm.mode",
                 "llm.max_cost", "llm.registry_file")
"""What a stage that calls models reads of ``llm``."""
GRADING_CALL_KEYS = (*LLM_CALL_KEYS, "llm.prompt_caching")
"""What a stage that grades through the engine reads of ``llm``."""

_RELEASED_EVALUATION = ("paper mode reads the released study's logs and matrices; these "
                        "settings apply when the stage runs live")
_RELEASED_MATRICES = ("paper mode reads the released matrices, which carry one clipped mean "
                      "per candidate and judge (point estimates only); bootstrap intervals and "
                      "paired differences need per-conversation grades, in live mode")
_MATRICES = ("matrix_v1", "matrix_v2", "matrix_hard_v1")
_SUBSET_IDS = (SUBSET_INDEX, SUBSET_FILES)
_GRADED_SUBSETS = (Input(GRADING, (SCORES_TABLE, METRICS), IN_LIVE),
                   Input(SUBSET, _SUBSET_IDS, IN_LIVE))
"""What the analysis stages read in live mode: this run's scores, restricted to a subset."""


SPECS: dict[str, StageSpec] = {spec.name: spec for spec in (
    StageSpec(
        CORPUS, "The HealthBench corpus", "corpus", _no_mode, (),
        reads=(Read(("corpus.allow_partial", "corpus.invalid_records", "corpus.max_conversations",
                     "corpus.corpus_file", "corpus.detect_language")),),
        artifacts=("healthbench_oss", "screening_labels", "harness_scores")),
    StageSpec(
        SCREENING, "LLM screening", "screening", _section_mode("screening"), (REPLAY, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,), LIVE_OR_TRANSLATING),
                Input(CORPUS, (LANGUAGES,), TRANSLATING)),
        reads=(
            Read(("screening.mode", "screening.rubric_artifact", "screening.rubric_file",
                  "screening.vocabulary", "screening.translation_model")),
            Read(("screening.model", "screening.batch_size", "screening.compare_with_release"),
                 IN_LIVE, "replay mode reads the released screen; the screening model, its "
                 "batches and the comparison with the release belong to a live screen"),
            Read(("screening.max_reasks", *LLM_CALL_KEYS), LIVE_OR_TRANSLATING,
                 "no model is called: the screen is replayed and no translation_model is set"),
            Read(("screening.translation_artifact",), TRANSLATING,
                 "no translation_model is set, so nothing is translated"),
        ),
        artifacts=("screening.rubric_artifact", "screening_labels",
                   "screening.translation_artifact")),
    StageSpec(
        REVIEW_ROUND1, "Blinded clinician review, round 1", "review_round1",
        _section_mode("review_round1"), (REPLAY, LIVE),
        inputs=(Input(SCREENING, (SCREEN, VOCABULARY, TRANSLATIONS)),
                Input(CORPUS, (CORPUS_RECORD,))),
        reads=(
            Read(("review_round1.mode", "review_round1.n_controls", "review_round1.threshold")),
            Read(("review_round1.ratings_files", "seed"), IN_LIVE,
                 "replay mode uses the released review set and ratings; a seeded set is "
                 "designed, and ratings files are read, only in live mode"),
        ),
        artifacts=("ratings_round1_R1", "ratings_round1_R2", "ratings_round1_R3",
                   "screening_key")),
    StageSpec(
        RECALL, "Recall round (round 2)", "recall", _section_mode("recall"), (REPLAY, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,)),
                Input(SCREENING, (SCREEN, VOCABULARY, TRANSLATIONS)),
                Input(REVIEW_ROUND1, (REVIEW_SET, METRICS))),
        reads=(
            Read(("recall.mode", "recall.n_controls", "recall.threshold")),
            Read(("recall.rubric_artifact", "recall.rubric_file", "recall.batch_size",
                  "recall.max_reasks", "recall.model", "recall.ratings_files", "seed",
                  *LLM_CALL_KEYS), IN_LIVE,
                 "replay mode uses the released recall screen, round-2 set and ratings"),
        ),
        artifacts=("ratings_round2_R1", "ratings_round2_R2", "ratings_round2_R3",
                   "recovery_screening_key", "recall.rubric_artifact")),
    StageSpec(
        SUBSET, "The HealthBench-Psych subset", "subset", _no_mode, (),
        inputs=(Input(REVIEW_ROUND1, (VOTES,)), Input(RECALL, (METRICS, VOTES))),
        reads=(Read(("subset.name", "subset.compare_with_release")),),
        artifacts=("harness_scores", "subset_v1", "subset_v2", "subset_hard_v1")),
    StageSpec(
        GENERATION, "Candidate responses", "generation", _evaluation_mode, (PAPER, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,)), Input(SUBSET, _SUBSET_IDS, IN_LIVE)),
        reads=(
            Read((EVALUATION_MODE, "generation.subset", "generation.candidates",
                  "grading.judges", "llm.mode", "llm.prompt_caching", "llm.registry_file")),
            Read(("generation.n_conversations", "generation.temperature",
                  "generation.max_tokens", "generation.samples", "llm.external",
                  *LLM_CALL_KEYS), IN_LIVE,
                 "paper mode summarises the released generation logs and plans the study's "
                 "design; these settings apply to a live generation"),
            Read(("seed",), SAMPLING, "one reply per conversation is sent without a seed; "
                 "the further samples' seeds derive from it"),
        ),
        artifacts=("grader_template", "run_spend", "run_errors", "subset_v1", "subset_v2",
                   "subset_hard_v1"),
        parameters={"judges": "grading.judges"}),
    StageSpec(
        GRADING, "Grading with the judge panel", "grading", _evaluation_mode, (PAPER, LIVE),
        inputs=(Input(GENERATION, (RESPONSES, RESPONSE_SAMPLES), IN_LIVE),
                Input(CORPUS, (CORPUS_RECORD,), IN_LIVE)),
        reads=(
            Read((EVALUATION_MODE,)),
            Read(("grading.judges", "grading.temperature", "grading.max_tokens",
                  "grading.max_reasks", "grading.response_schema", "llm.external",
                  *GRADING_CALL_KEYS),
                 IN_LIVE, "paper mode reads the released grading logs; the judges and their "
                 "settings apply when grading live"),
        ),
        artifacts=("grader_template", "run_spend", "run_errors")),
    StageSpec(
        SCORES, "Scores and the leaderboard", "scores", _evaluation_mode, (PAPER, LIVE),
        inputs=(*_GRADED_SUBSETS, Input(GENERATION, (RESPONSES,), IN_LIVE)),
        reads=(
            Read((EVALUATION_MODE, "scores.subsets")),
            Read(("scores.include_later",), IN_PAPER,
                 "live mode scores the candidates this run generated; the three candidates "
                 "added after the study exist only in the released matrices"),
            Read(("scores.n_resamples", "scores.top_k", "seed", "ci_level"), IN_LIVE,
                 _RELEASED_MATRICES),
            Read(("analyses.length_penalty",), IN_LIVE,
                 "the what-if's length-adjusted choice needs each reply's length, in live "
                 "mode"),
        ),
        artifacts=_MATRICES,
        parameters={"length_penalty": "analyses.length_penalty"}),
    StageSpec(
        JUDGES, "The judges", "judges", _evaluation_mode, (PAPER, LIVE), inputs=_GRADED_SUBSETS,
        reads=(Read((EVALUATION_MODE, "judges.subset")),
               Read(("judges.n_resamples", "seed", "ci_level"), IN_LIVE, _RELEASED_MATRICES)),
        artifacts=_MATRICES),
    StageSpec(
        REFUSALS, "Refusals", "refusals", _evaluation_mode, (PAPER, LIVE),
        inputs=(Input(SUBSET, (*_SUBSET_IDS, CATEGORIES_V1)),
                Input(GENERATION, (RESPONSES,), IN_LIVE),
                Input(GRADING, (SCORES_TABLE, METRICS), IN_LIVE)),
        reads=(Read((EVALUATION_MODE, "refusals.subset")),),
        artifacts=("run_errors",)),
    StageSpec(
        HARNESS, "Harness validation", "harness_validation", _harness_mode, (REPLAY, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,)),),
        reads=(
            Read((EVALUATION_MODE, "harness_validation.mode", "harness_validation.published",
                  "harness_validation.published_source", "seed", "ci_level")),
            Read(("harness_validation.candidate", "harness_validation.judge",
                  "harness_validation.temperature", "harness_validation.max_tokens",
                  "harness_validation.n_conversations", *GRADING_CALL_KEYS), IN_LIVE,
                 "replay mode summarises the released GPT-4.1 run, made at the reference "
                 "settings; these apply to a live re-run"),
        ),
        artifacts=("harness_scores", "harness_results", "grader_template")),
    StageSpec(
        FIGURES, "Figures and tables", "figures_tables", _evaluation_mode, (PAPER, LIVE),
        inputs=(Input(SUBSET, (CATEGORIES_V1,)),
                Input(SCORES, (METRICS, TABLE1.format(subset="*"))),
                Input(JUDGES, (METRICS,)),
                Input(GRADING, (SCORES_TABLE, METRICS), IN_LIVE),
                Input(SUBSET, _SUBSET_IDS, IN_LIVE)),
        reads=(Read((EVALUATION_MODE, "figures_tables.subsets", "figures_tables.publish")),),
        artifacts=_MATRICES),
    StageSpec(
        EXPLORER, "Explorer: inside the grades", None, _evaluation_mode, (PAPER, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
                Input(GENERATION, (RESPONSES,), IN_LIVE),
                Input(GRADING, (VERDICTS, SCORES_TABLE), IN_LIVE),
                Input(SUBSET, (CATEGORIES_V1, *_SUBSET_IDS), IN_LIVE)),
        reads=(Read((EVALUATION_MODE,)),),
        artifacts=("harness_scores",)),
    StageSpec(
        ANALYSES, "Where and how reliably models fail", "analyses", _evaluation_mode,
        (PAPER, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
                Input(SUBSET, (*_SUBSET_IDS, CATEGORIES_V1), IN_LIVE),
                Input(GENERATION, (RESPONSES, RESPONSE_SAMPLES), IN_LIVE),
                Input(GRADING, (METRICS, VERDICTS, VERDICT_SAMPLES, SCORES_TABLE, SCORE_SAMPLES),
                      IN_LIVE)),
        reads=(Read((EVALUATION_MODE,)),
               Read(("analyses.subset", "analyses.n_resamples", "analyses.length_penalty",
                     "seed", "ci_level"), IN_LIVE,
                    "paper mode has the released matrices only (one clipped mean per candidate "
                    "and judge): no per-criterion grade, reply or second sample to analyse")),
    ),
    StageSpec(
        JUDGE_ACCURACY, "Are the judges right?", "judge_accuracy", _evaluation_mode,
        (PAPER, LIVE),
        inputs=(Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
                Input(SUBSET, (*_SUBSET_IDS, CATEGORIES_V1), IN_LIVE),
                Input(GRADING, (VERDICTS, METRICS), IN_LIVE)),
        reads=(Read((EVALUATION_MODE,)),
               Read(("judge_accuracy.meta_eval", "judge_accuracy.max_rows",
                     "judge_accuracy.n_resamples", "grading.judges", "grading.temperature",
                     "grading.max_tokens", "grading.max_reasks", "seed", "ci_level",
                     *GRADING_CALL_KEYS),
                    IN_LIVE,
                    "paper mode neither downloads the physicians' labels (online only) nor "
                    "calls a judge; they are graded in live mode")),
        artifacts=("grader_template", "healthbench_meta_eval", "screening_labels"),
        parameters={"judges": "grading.judges", "grading_temperature": "grading.temperature",
                    "grading_max_tokens": "grading.max_tokens",
                    "max_reasks": "grading.max_reasks"}),
)}
"""Every stage, by name."""

STAGES: tuple[str, ...] = tuple(SPECS)
"""Stage names in run order."""

ALWAYS_ALLOWED = frozenset({"name", "description", "notebooks"})
"""Top-level profile keys that describe the run rather than feed a stage (the runner and the
book read them)."""


class GraphError(KeyError):
    """A stage name the graph does not know."""


def spec(name: str) -> StageSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise GraphError(f"unknown stage {name!r} (expected one of: {', '.join(STAGES)})") \
            from None


def stage_mode(profile: Profile, name: str) -> str | None:
    """The mode stage ``name`` runs in under ``profile`` (``None`` for a stage without modes)."""
    return spec(name).mode_of(profile)


def profile_stages(profile: Profile) -> list[str]:
    """The stages a profile runs, in order (its ``notebooks`` list, or all)."""
    if profile.notebooks is None:
        return list(STAGES)
    wanted = set(profile.notebooks)
    return [s for s in STAGES if s in wanted]


def value_at(profile: Profile | Mapping[str, Any], key: str) -> Any:
    """The value of a dotted profile key (``scores.n_resamples``, ``seed``), as JSON data."""
    node: Any = profile.model_dump(mode="json") if isinstance(profile, Profile) else profile
    for part in key.split("."):
        node = node[part]
    return node


def keys_read(profile: Profile, name: str) -> dict[str, Any]:
    """The profile keys stage ``name`` reads under ``profile``, with their values."""
    s = spec(name)
    mode = s.mode_of(profile)
    values = profile.model_dump(mode="json")
    return {key: value_at(values, key) for read in s.reads if read.when.holds(profile, mode)
            for key in read.keys}


def artifacts_used(profile: Profile, name: str) -> list[str]:
    """Registry artifacts stage ``name`` may fetch under ``profile`` (keys resolved)."""
    out = []
    for entry in spec(name).artifacts:
        value = value_at(profile, entry) if "." in entry else entry
        if value is not None:
            out.append(str(value))
    return out


def section_fields(name: str) -> list[str]:
    """The fields of stage ``name``'s profile section, as its notebook declares them (its
    ``mode`` is the resolved mode, declared once as ``mode``)."""
    s = spec(name)
    if s.section is None:
        return []
    model = Profile.model_fields[s.section].annotation
    assert isinstance(model, type) and issubclass(model, Section)
    return [f for f in model.model_fields if f != "mode"]


def _reads_any(name: str, prefix: str) -> bool:
    return any(k == prefix or k.startswith(prefix + ".") for r in spec(name).reads
               for k in r.keys)


def parameter_names(name: str) -> list[str]:
    """What stage ``name``'s notebook declares in its ``parameters`` cell, in order: the run
    (``profile``, ``outputs_root``), its resolved ``mode``, ``seed``, ``ci_level`` and the
    ``llm`` settings where it reads them, its section's fields, and values from other
    sections."""
    s = spec(name)
    out = ["profile", "outputs_root"]
    if s.modes:
        out.append("mode")
    if _reads_any(name, "seed"):
        out.append("seed")
    if _reads_any(name, "ci_level"):
        out.append("ci_level")
    if _reads_any(name, "llm"):
        out.append("llm")
    out += section_fields(name)
    out += list(s.parameters or {})
    return out


def notebook_parameters(profile: Profile, name: str, outputs_root: str) -> dict[str, Any]:
    """The values the runner injects into stage ``name``'s ``parameters`` cell."""
    s = spec(name)
    values = profile.model_dump(mode="json")
    section = values[s.section] if s.section else {}
    cross = dict(s.parameters or {})
    out: dict[str, Any] = {}
    for param in parameter_names(name):
        if param == "profile":
            out[param] = profile.name
        elif param == "outputs_root":
            out[param] = outputs_root
        elif param == "mode":
            out[param] = s.mode_of(profile)
        elif param in ("seed", "ci_level", "llm"):
            out[param] = values[param]
        elif param in cross:
            out[param] = value_at(values, cross[param])
        else:
            out[param] = section[param]
    return out


def _declared_key(key: str) -> str:
    """A ``--set`` key at the granularity the graph declares: a top-level key, or
    ``section.field`` (``llm.limits.openai.rpm`` -> ``llm.limits``)."""
    return ".".join(key.split(".")[:2])


def readers(key: str) -> list[tuple[str, Read]]:
    """Every (stage, read) of the graph that covers ``key``."""
    key = _declared_key(key)
    return [(name, read) for name, s in SPECS.items() for read in s.reads
            for k in read.keys if k == key or k.startswith(key + ".")]


def unread_reason(profile: Profile, key: str) -> str | None:
    """Why no stage of ``profile`` reads ``key`` under its modes, or ``None`` when one does.

    The reason names each stage that would read it and the condition it reads it under, and
    the mode the profile gives that stage."""
    if key.split(".")[0] in ALWAYS_ALLOWED:
        return None
    stages = profile_stages(profile)
    found = readers(key)
    if not found:
        return "no stage reads it"
    if _declared_key(key) in GRADING_CALL_KEYS and not any(
            name in stages and read.when.holds(profile, stage_mode(profile, name))
            for name, read in found):
        modes = ", ".join(f"{name} {stage_mode(profile, name)}" for name in
                          dict.fromkeys(n for n, _ in found) if name in stages)
        return ("no stage of this profile calls a model under its modes (" + modes
                + "); the engine's settings apply when a stage runs live")
    reasons = []
    for name, read in found:
        if name not in stages:
            reasons.append(f"{name} reads it, but it is not among the profile's notebooks")
            continue
        mode = stage_mode(profile, name)
        if read.when.holds(profile, mode):
            return None
        runs = f"; this profile runs {name} in {mode} mode" if mode else ""
        reasons.append(f"{name} reads it only {read.when.text} ({read.why_not}){runs}")
    return "; ".join(dict.fromkeys(reasons))


def file_keys(profile: Profile) -> list[str]:
    """The keys a profile's own file sets (``section.field`` or top-level), for the list of
    keys no stage reads."""
    out = []
    for field, value in profile.model_dump(mode="json", exclude_unset=True).items():
        if isinstance(value, dict) and isinstance(getattr(profile, field), Section):
            out += [f"{field}.{k}" for k in value]
        else:
            out.append(field)
    return out


def dependents(names: Iterable[str], profile: Profile) -> list[str]:
    """The stages that read, directly or through others, from any of ``names`` (in order)."""
    reached = set(names)
    out = []
    for s in profile_stages(profile):
        if s not in reached and set(spec(s).upstream(profile)) & reached:
            reached.add(s)
            out.append(s)
    return out


def describe_markdown() -> str:
    """The graph as a Markdown table (``docs/pipeline.md`` holds it; a test keeps the two
    equal): each stage, its modes, the stages it reads and when, the profile keys it reads."""
    rows = ["| stage | modes | reads from | profile keys (when) |", "|---|---|---|---|"]
    for name, s in SPECS.items():
        inputs = "<br>".join(
            f"{i.stage}: {', '.join(f'`{f}`' for f in i.files)}"
            + ("" if i.when is ALWAYS else f" ({i.when.text})") for i in s.inputs) or "–"
        keys = "<br>".join(
            ", ".join(_shown_keys(r.keys)) + ("" if r.when is ALWAYS else f" ({r.when.text})")
            for r in s.reads)
        rows.append(f"| {name} | {', '.join(s.modes) or '–'} | {inputs} | {keys} |")
    return "\n".join(rows) + "\n"


def _shown_keys(keys: tuple[str, ...]) -> list[str]:
    """Keys as the table shows them: the engine's call settings as one entry."""
    if set(LLM_CALL_KEYS) <= set(keys):
        rest = [k for k in keys if not k.startswith("llm.")]
        left = [k.removeprefix("llm.") for k in ("llm.prompt_caching", "llm.external")
                if k not in keys]
        engine = ("the engine's settings (`llm.*`" + (" but " + " and ".join(
            f"`{k}`" for k in left) if left else "") + ")")
        return [f"`{k}`" for k in rest] + [engine]
    return [f"`{k}`" for k in keys]
