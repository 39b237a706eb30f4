"""Run profiles: ``params/<name>.yaml``, loaded and validated into typed records.

A profile has a few top-level keys and one section per notebook stage (``corpus`` for
``01_corpus``, ``screening`` for ``02_screening``, ...). Every section is a pydantic model that
forbids unknown keys, so a typo is an error naming the profile, the key and what was expected
instead of a silently ignored setting. The construction stages (02-04) each have a ``mode``
(``replay`` or ``live``); the evaluation stages (06-15) share one, the profile's
``evaluation_mode`` (``paper`` or ``live``), which only ``harness_validation.mode`` may
override. What each stage reads of a profile, and the values the runner injects into its
notebook's ``parameters`` cell, are declared by the stage graph
(:mod:`hbpsych_utils.pipeline.graph`).

``--set section.key=value`` on the command line tweaks one value of a profile without copying
its YAML: :func:`parse_overrides` reads the values as YAML, :func:`load_profile` applies them to
the file's mapping and validates the result with the same models, so a typo in an override is
the same error, naming the key, as a typo in the file.

What a profile refers to (models, fault kinds, providers, corpus, ratings and rubric files) is
checked against the readers of the layers above by :mod:`hbpsych_utils.runner.checks` when the
runner loads it, before notebook 01. The YAML itself is read strictly
(:mod:`hbpsych_utils.core.yaml_loader`): a key written twice is an error naming both lines.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hbpsych_utils import study
from hbpsych_utils.core import paths, yaml_loader


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the profile file and the key."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def distinct_names(names: list[str], what: str) -> list[str]:
    """``names`` when none is blank and none is given twice, else a ``ValueError`` naming
    the first problem (a model listed twice would be called, and counted, twice)."""
    for i, name in enumerate(names):
        if not name.strip():
            raise ValueError(f"{what}[{i}] is an empty name (expected a model name)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{', '.join(map(repr, twice))} listed more than once (each {what} "
                         "must be a different model)")
    return names


class FaultSpec(Section):
    """A simulator fault (tests and the smoke profile): see ``hbpsych_utils.llm.testing.Fault``."""

    kind: str
    """One of ``hbpsych_utils.llm.faults.FAULT_KINDS`` (checked when the runner loads the
    profile)."""
    match: str | None = None
    """Inject into calls whose messages contain this text."""
    prompt_id: str | None = None
    """Inject into calls about this conversation (its first user turn is the match text)."""
    model: str | None = None
    """Only calls to this model (a registry name or its ``api_model``)."""
    api: Literal["openai", "anthropic", "google"] | None = None
    """Only calls to this API family (OpenAI-compatible providers speak ``openai``)."""
    times: int | None = Field(default=None, ge=1)


class LLMSettings(Section):
    """How the live stages reach models: one engine, shared by every notebook of a run."""

    simulator: bool = False
    """Start the loopback provider simulator and point every provider at it (smoke, tests)."""
    faults: list[FaultSpec] = []
    base_urls: dict[str, str] = {}
    """Provider name or kind -> base URL (a local OpenAI-compatible server, vLLM, Ollama)."""
    limits: dict[str, dict[str, float | int | None]] = {}
    """Provider -> ``{concurrency, rpm, tpm}`` overrides (each checked by ``LimitOverride``)."""
    mode: Literal["sync", "batch"] = "batch"
    """Judge calls go through the providers' batch APIs (with synchronous fallback) or sync."""
    max_cost: float | None = Field(default=None, ge=0)
    """USD cap on new spend per stage; work beyond it is left for a later run."""
    registry_file: str | None = None
    """Model registry; ``None`` is params/models.yaml."""
    external: list[Literal["06_generation", "07_grading"]] = []
    """Stages whose model calls to OpenAI-compatible APIs are made elsewhere: exported as batch
    shards (``python -m hbpsych_utils shards``), run by a provider's Batch API, ``vllm
    run-batch`` or Ray Data, and imported into the run's store (``import-results``). Their
    engine answers those from the store only and never sends them (a call still missing stops
    the stage, naming the command that exports it); calls to Anthropic's and Google's APIs,
    which are not exported, it sends as usual (docs/scale.md)."""
    prompt_caching: bool = True
    """Grading: arrange judge calls for the providers' prompt caches (the criteria of one reply
    share a prefix; same prompts, same verdicts, cheaper calls). Recorded in the ``config`` of
    each result so arranged."""


class LimitOverride(Section):
    """The keys and values one provider's ``llm.limits`` entry may hold, checked when the
    profile loads (the entry itself stays a plain mapping: only the keys written override the
    registry's; ``rpm: null`` / ``tpm: null`` mean no limit)."""

    concurrency: int = Field(default=1, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)


class CorpusParams(Section):
    """01_corpus: which corpus file, how strict to be about it, and how much of it to use."""

    allow_partial: bool = False
    """Accept a corpus that holds only some of the 5,000 HealthBench ids and report coverage."""
    invalid_records: Literal["error", "skip"] = "error"
    """``error`` stops at the first bad line; ``skip`` logs it, counts it and goes on."""
    max_conversations: int | None = Field(default=None, ge=1)
    """Use only the first N records in file order (tiny runs); ``None`` uses all."""
    corpus_file: str | None = None
    """A local HealthBench-layout JSONL to use instead of the registry's corpus (another corpus,
    a synthetic one in tests). Relative paths are taken from the project root."""
    detect_language: bool = True
    """Flag non-English conversations with the language detector."""


class ScreeningParams(Section):
    """02_screening: replay the released screen, or screen the corpus live through the engine."""

    mode: Literal["replay", "live"] = "replay"
    rubric_artifact: str = "screening_rubric"
    """Registry name of the screening rubric (used verbatim in live mode; its vocabulary always)."""
    rubric_file: str | None = None
    """A local rubric instead of the registry's (another specialty)."""
    vocabulary: list[str] | None = None
    """Category vocabulary; ``None`` reads it from the rubric's 'controlled vocabulary' line."""
    batch_size: int = Field(default=50, ge=1)
    max_reasks: int = Field(default=2, ge=0)
    model: str | None = None
    """Live mode: the screening model (a name in params/models.yaml)."""
    translation_model: str | None = None
    """The model that machine-translates the non-English conversations for reviewers, in either
    mode (``None``: no translations)."""
    translation_artifact: str = "translation_prompt"
    compare_with_release: bool = True
    """Live mode: report agreement with the released screen on the ids both cover."""


class ReviewParams(Section):
    """03_review_round1: the blinded review set, the reviewers' ratings and their tally."""

    mode: Literal["replay", "live"] = "replay"
    """``replay`` uses the released set and ratings; ``live`` designs a set from this run's
    screen and tallies the ratings files named in ``ratings_files`` (if any yet)."""
    n_controls: int = Field(default=study.ROUND1_CONTROLS, ge=0)
    threshold: float = Field(default=study.CONTROL_THRESHOLD, ge=0, le=1)
    """A control-inclusion rate above this triggers a recall round."""
    ratings_files: list[str] | None = None
    """Live mode: the reviewers' exported ratings files (relative to the project root)."""


class RecallParams(Section):
    """04_recall: the recall screen of the remaining excludes and the round-2 review."""

    mode: Literal["replay", "live"] = "replay"
    rubric_artifact: str = "recovery_rubric"
    rubric_file: str | None = None
    batch_size: int = Field(default=50, ge=1)
    max_reasks: int = Field(default=2, ge=0)
    model: str | None = None
    n_controls: int = Field(default=study.ROUND2_CONTROLS, ge=0)
    threshold: float = Field(default=study.CONTROL_THRESHOLD, ge=0, le=1)
    ratings_files: list[str] | None = None


class SubsetParams(Section):
    """05_subset: assembling the subset under each control policy and checking the release."""

    name: str = study.SUBSET_NAME
    compare_with_release: bool = True
    """Compare each derived subset with the released file (only meaningful in replay)."""


class GenerationParams(Section):
    """06_generation: candidate responses (paper mode summarises the released run's logs)."""

    candidates: list[str] = []
    """Live mode: models to generate with (names in params/models.yaml), each once."""
    subset: Literal["v1", "v2", "hard"] = "v1"
    """Live mode: which subset 05_subset wrote to generate on (restricted to the corpus)."""
    n_conversations: int | None = Field(default=None, ge=1)
    """Live mode: only the first N subset conversations (sorted ids); ``None`` for all."""
    temperature: float | None = 0.0
    max_tokens: int = Field(default=study.GENERATION_MAX_TOKENS, ge=1)
    samples: int = Field(default=1, ge=1)
    """Live mode: replies per (candidate, conversation), every one graded by the panel (the
    study: 1). The first is the reply a one-sample run makes; each further one is sent with
    its own recorded seed (the profile's ``seed`` plus its index) where the provider takes one.
    Worst-at-k and the spread across runs (notebook 14) need at least 2. At temperature 0 the
    samples come out nearly identical."""

    @field_validator("candidates")
    @classmethod
    def _distinct_candidates(cls, value: list[str]) -> list[str]:
        return distinct_names(value, "candidate")


class GradingParams(Section):
    """07_grading: the judge panel's verdicts (paper mode summarises the released logs)."""

    judges: list[str] | None = None
    """Live mode: the judge models (names in params/models.yaml), at least one, each once;
    ``None`` is the study's panel (``study.JUDGE_PANEL``). The stage resolves it and reports
    the judges it used."""
    temperature: float = 0.0
    """0 in the study; the HealthBench reference uses 0.5."""
    max_tokens: int = Field(default=study.GRADER_MAX_TOKENS, ge=1)
    max_reasks: int = Field(default=3, ge=0)
    response_schema: bool = False
    """Constrain judge output to the verdict JSON schema where the server supports it. A
    deviation from the reference (which sends none), for small local models; off in the study."""

    @field_validator("judges")
    @classmethod
    def _a_panel(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty panel (expected at least one judge, or null for the "
                             "study's panel)")
        return value if value is None else distinct_names(value, "judge")

    def judge_panel(self) -> list[str]:
        """The judges a run uses: ``judges``, or the study's panel when it names none."""
        return list(study.JUDGE_PANEL) if self.judges is None else list(self.judges)


class ScoresParams(Section):
    """08_scores: per-judge and panel scores, intervals, paired differences."""

    subsets: list[Literal["v1", "v2", "hard"]] = ["v1", "hard"]
    include_later: bool = False
    """Also show the three candidates added after the study (flagged ``in_study: false``)."""
    top_k: int = Field(default=5, ge=2)
    """Live mode: paired differences among the top-k candidates, Holm-adjusted."""


class JudgesParams(Section):
    """09_judges: rank agreement, severity and self-preference of the judge panel."""

    subset: Literal["v1", "v2", "hard"] = "v1"


class RefusalsParams(Section):
    """10_refusals: refused conversations per model and the sensitivity analysis."""

    subset: Literal["v1", "v2", "hard"] = "v1"


class HarnessValidationParams(Section):
    """11_harness_validation: the GPT-4.1 HealthBench-Hard run against the published figure."""

    mode: Literal["replay", "live"] | None = None
    """``replay`` summarises the released run; ``live`` re-runs it through the engine; ``None``
    follows the profile's ``evaluation_mode`` (paper: replay). The one evaluation stage whose
    mode may differ from the rest, because it depends on nothing else of the evaluation: a live
    re-run of the candidates may keep the released harness check (the ``live`` profile does)."""
    published: float | None = Field(default=study.PUBLISHED_HARNESS_SCORE, ge=0, le=1)
    """The published score the check compares against (a fraction): by default OpenAI's
    HealthBench-Hard score for GPT-4.1, as the study compared; ``None``: no difference."""
    published_source: str = study.PUBLISHED_HARNESS_SOURCE
    """Where ``published`` comes from (citation), recorded beside it."""
    candidate: str | None = None
    """Live mode: the model that answers; ``None`` is the study's (``study.HARNESS_MODEL``,
    GPT-4.1). The stage resolves it and reports it under ``settings``."""
    judge: str | None = None
    """Live mode: the model that grades; ``None`` is the study's (``study.HARNESS_MODEL``)."""
    temperature: float = study.REFERENCE_TEMPERATURE
    """The reference setting, for candidate and judge alike."""
    max_tokens: int = Field(default=study.GRADER_MAX_TOKENS, ge=1)
    n_conversations: int | None = Field(default=None, ge=1)
    """Live mode: only the first N Hard conversations of the corpus (sorted ids)."""

    def model_of(self, role: Literal["candidate", "judge"]) -> str:
        """The model a run uses in ``role``: the one named, or ``study.HARNESS_MODEL``."""
        name = getattr(self, role)
        return study.HARNESS_MODEL if name is None else name


class FiguresTablesParams(Section):
    """12_figures_tables: the paper's figures and Table 1."""

    subsets: list[Literal["v1", "v2", "hard"]] = ["v1", "hard"]
    publish: bool = True
    """Also copy the figures and tables to the top-level ``figures/`` folder, which then holds
    this run's files and no earlier run's (the default profile's job; test profiles keep theirs
    under ``outputs/<profile>/``)."""


class AnalysesParams(Section):
    """14_analyses: where and how reliably models fail (live mode: per-criterion grades)."""

    subset: Literal["v1", "v2", "hard"] = "v1"
    """Which subset 05_subset wrote to analyse (this run's graded conversations of it)."""
    length_penalty: Literal["healthbench", "hard", "consensus", "professional"] = "healthbench"
    """The HealthBench variant whose penalty the length-adjusted score uses (reported beside the
    raw score; ``evaluation.length.PENALTIES``). HealthBench-Psych is drawn from the full
    HealthBench."""


class JudgeAccuracyParams(Section):
    """15_judge_accuracy: the judges' verdicts against HealthBench's physician labels (live)."""

    meta_eval: Literal["registry", "fixture"] = "registry"
    """Live mode: the rows graded. ``registry`` is HealthBench's meta-evaluation file (online
    only: downloaded, verified by content); ``fixture`` is the compendium's thirteen-row format
    fixture (twelve rows on the Psych subset, one outside it), whose completions script the
    simulator's verdicts (smoke and tests)."""
    max_rows: int | None = Field(default=None, ge=1)
    """Live mode: only the first N rows of the file (``None``: all of them)."""


class Profile(BaseModel):
    """A validated run profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The profile file's name: a plain name (``paths.plain_name``), the run's folder."""
    description: str = ""
    seed: int = Field(default=study.SEED, ge=0, le=study.MAX_SEED)
    """Every seeded draw of the run (review designs, bootstraps; a further sample's seed is
    this plus its index): 0 to ``study.MAX_SEED``, numpy's seed range."""
    ci_level: float = Field(default=study.CI_LEVEL, gt=0, lt=1)
    """The level of every interval a run computes and shows (percentile bootstrap intervals):
    0.95 in the study. Every caption, label and finding states it from here."""
    n_resamples: int = Field(default=study.N_RESAMPLES, ge=10, le=study.MAX_RESAMPLES)
    """The resamples of every bootstrap of the run (Table 1, the judges' statistics, the
    analyses, the judges' accuracy, the harness run's breakdown): 1,000 in the study."""
    notebooks: list[str] | None = None
    """Notebook stems to run, in order; ``None`` runs every notebook in ``notebooks/``."""
    evaluation_mode: Literal["paper", "live"] = "paper"
    """The mode of the evaluation stages 06-15: ``paper`` reads the released study's logs and
    matrices, ``live`` generates and grades through the engine (``harness_validation.mode``
    alone may differ)."""
    llm: LLMSettings = LLMSettings()
    """How the live stages reach models (one engine for the run)."""
    corpus: CorpusParams = CorpusParams()
    screening: ScreeningParams = ScreeningParams()
    review_round1: ReviewParams = ReviewParams()
    recall: RecallParams = RecallParams()
    subset: SubsetParams = SubsetParams()
    """The construction stages' sections (01-05), one per notebook."""
    generation: GenerationParams = GenerationParams()
    grading: GradingParams = GradingParams()
    scores: ScoresParams = ScoresParams()
    judges: JudgesParams = JudgesParams()
    refusals: RefusalsParams = RefusalsParams()
    harness_validation: HarnessValidationParams = HarnessValidationParams()
    figures_tables: FiguresTablesParams = FiguresTablesParams()
    analyses: AnalysesParams = AnalysesParams()
    judge_accuracy: JudgeAccuracyParams = JudgeAccuracyParams()
    """The evaluation stages' sections (06-12, 14, 15), in ``evaluation_mode``."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return paths.plain_name(value, "profile name")


TOP_LEVEL_ONLY = {
    "mode": "the evaluation stages share one mode: set evaluation_mode (paper or live) at the "
            "top of the profile instead",
    "n_resamples": "a run has one number of bootstrap resamples: set n_resamples at the top of "
                   "the profile instead (beside seed and ci_level)",
}
"""Section keys that exist only at the top of a profile, and what to write instead."""


NOT_PROFILES = frozenset({"models"})
"""YAML files in ``params/`` that are not run profiles (``models.yaml`` is the model registry)."""


def available_profiles() -> list[str]:
    """The profiles of ``params/`` by name (a file whose name is not a plain name is none:
    :func:`profile_name` would refuse it)."""
    return sorted(p.stem for p in paths.params_dir().glob("*.yaml")
                  if p.stem not in NOT_PROFILES and paths.is_plain_name(p.stem))


def profile_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):  # a file: relative to where the command was started
        return paths.from_caller(p)
    return paths.params_dir() / f"{name_or_path}.yaml"


def profile_name(name_or_path: str | Path) -> str:
    """``paths.profile_name`` (the profile's name, a plain name), its refusal a
    :class:`ProfileError`."""
    try:
        return paths.profile_name(name_or_path)
    except paths.UnsafePath as exc:
        raise ProfileError(str(exc)) from None


def existing_profile_path(name_or_path: str | Path) -> Path:
    """:func:`profile_path`, or an error listing the profiles when no such file exists (or
    the profile's name is not a plain name, :func:`profile_name`)."""
    profile_name(name_or_path)
    path = profile_path(name_or_path)
    if path.is_file():
        return path
    raise ProfileError(f"profile {str(name_or_path)!r}: file {path} does not exist (available "
                       f"profiles: {', '.join(available_profiles()) or 'none'})")


def parse_overrides(items: Iterable[str]) -> dict[str, object]:
    """``["corpus.max_conversations=20", "seed=1"]`` -> ``{"corpus.max_conversations": 20,
    "seed": 1}``. Each value is read as YAML, so ``true``, ``[v1, hard]`` and ``null`` mean what
    they mean in a profile file; a later ``--set`` of the same key wins."""
    overrides: dict[str, object] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or "" in key.split("."):
            raise ProfileError(
                f"--set {item!r}: expected section.key=value (or key=value for a top-level key, "
                "e.g. seed=123)"
            )
        try:
            overrides[key] = yaml_loader.load_text(text, source=f"--set {item!r}")
        except yaml_loader.YAMLFileError as exc:
            raise ProfileError(f"--set {item!r}: the value is not valid YAML: {exc}") from None
    return overrides


def apply_overrides(raw: Mapping[str, object], overrides: Mapping[str, object]
                    ) -> dict[str, object]:
    """A copy of a profile's raw mapping with each dotted key set (sections created as needed).

    Nothing is checked here beyond the path: the profile model validates the result."""
    result = copy.deepcopy(dict(raw))
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = result
        for depth, part in enumerate(parents, start=1):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ProfileError(
                    f"--set {dotted}: {'.'.join(parents[:depth])} is {child!r}, not a "
                    "section with keys"
                )
            node = child
        node[leaf] = value
    return result


def applied_overrides(profile: Profile, overrides: Mapping[str, object]) -> dict[str, object]:
    """Each overridden key with the value the validated profile holds (what the run used)."""
    values = profile.model_dump(mode="json")
    applied: dict[str, object] = {}
    for dotted in overrides:
        node: Any = values  # the profile as JSON data
        for part in dotted.split("."):
            node = node[part]
        applied[dotted] = node
    return applied


def describe_overrides(overrides: Mapping[str, object]) -> str:
    """``seed=123, corpus.allow_partial=true`` (values as JSON), for messages and progress."""
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in overrides.items())


def load_profile(
    name_or_path: str | Path, overrides: Mapping[str, object] | None = None
) -> Profile:
    """Load and validate a profile by name (``smoke``) or by path to a YAML file, with
    ``overrides`` (dotted key -> value, see :func:`parse_overrides`) applied before validation."""
    path = existing_profile_path(name_or_path)
    try:
        raw = yaml_loader.load_file(path)
    except yaml_loader.YAMLFileError as exc:
        raise ProfileError(f"profile {path.stem!r}: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProfileError(
            f"profile {path.stem!r} ({path}): expected a mapping of keys at the top level, "
            f"got {type(raw).__name__}"
        )
    if overrides:
        raw = apply_overrides(raw, overrides)
    where = f"({path}" + (f"; --set {describe_overrides(overrides)})" if overrides else ")")
    if "name" in raw and raw["name"] != path.stem:
        raise ProfileError(
            f"profile {path.stem!r} {where}: key 'name' is {raw['name']!r} but must equal the "
            f"file name {path.stem!r}"
        )
    raw = {**raw, "name": path.stem}
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        raise ProfileError(_describe(path, exc, where)) from None
    _check_files(profile, path)
    _check_notebooks(profile, path)
    return profile


def _describe(path: Path, exc: ValidationError, where: str) -> str:
    lines = [f"profile {path.stem!r} {where} is invalid:"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 2 and str(
                err["loc"][-1]) in TOP_LEVEL_ONLY:
            lines.append(f"  - {key}: {TOP_LEVEL_ONLY[str(err['loc'][-1])]}")
        elif err["type"] == "extra_forbidden":
            model = _model_at(err["loc"][:-1])
            allowed = ", ".join(model.model_fields) if model else "?"
            lines.append(f"  - {key}: unknown key (expected one of: {allowed})")
        else:
            expected = _expected_type(err["loc"])
            msg = err["msg"].removeprefix("Value error, ")  # a validator's own message
            lines.append(
                f"  - {key}: {msg} (got {err.get('input')!r}"
                + (f"; expected {expected})" if expected else ")")
            )
    return "\n".join(lines)


def _model_at(loc: Sequence[int | str]) -> type[BaseModel] | None:
    model: type[BaseModel] = Profile
    for part in loc:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None)
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model


def _expected_type(loc: Sequence[int | str]) -> str | None:
    model = _model_at(loc[:-1])
    if model is None or str(loc[-1]) not in model.model_fields:
        return None
    ann = model.model_fields[str(loc[-1])].annotation
    return re.sub(r"typing\.|<class '([^']+)'>", r"\1", str(ann))


def _check_files(profile: Profile, path: Path) -> None:
    """Every ``*_file`` / ``*_files`` setting must name existing files."""
    for section_key in type(profile).model_fields:
        section = getattr(profile, section_key)
        if not isinstance(section, Section):
            continue
        for key, value in section.model_dump().items():
            if not key.endswith(("_file", "_files")) or value is None:
                continue
            for item in value if isinstance(value, list) else [value]:
                p = resolve_path(item)
                if not p.is_file():
                    raise ProfileError(
                        f"profile {path.stem!r} ({path}): {section_key}.{key}: file {p} does not "
                        "exist (expected a path to an existing file, relative to the project root)"
                    )


def _check_notebooks(profile: Profile, path: Path) -> None:
    if profile.notebooks is None:
        return
    present = {p.stem for p in paths.notebooks_dir().glob("[0-9]*.ipynb")}
    for nb in profile.notebooks:
        if nb not in present:
            raise ProfileError(
                f"profile {path.stem!r} ({path}): notebooks: {nb!r} is not a notebook in "
                f"{paths.notebooks_dir()} (expected one of: {', '.join(sorted(present))})"
            )


def unset_live_model(section: str, params: ScreeningParams | RecallParams) -> str | None:
    """What is wrong with a screening or recall section whose live mode has no model to call
    (unlike judges and harness models, these have no study default), or ``None``. Checked when
    a profile loads, and again by the stage, for a notebook run by hand without a profile."""
    if params.mode == "live" and params.model is None:
        return (f"{section}.model: mode is 'live' but no model is set (expected a model name "
                "of the registry, params/models.yaml or llm.registry_file)")
    return None


resolve_path = paths.resolve_path
"""A profile path: absolute as given, otherwise relative to the project root."""
