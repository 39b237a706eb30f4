"""Run profiles: ``params/<name>.yaml``, loaded and validated into typed records.

A profile has a few top-level keys (:class:`ProfileBase`: the run's name, ``seed``,
``ci_level``, ``n_resamples``, the evaluation stages' shared mode, how the engine reaches
models) and one section per notebook stage (``corpus`` for ``01_corpus``, ``screening`` for
``02_screening``, ...), whose model is declared beside the stage's node of the graph
(:mod:`hbpsych_utils.pipeline.nodes`); :mod:`hbpsych_utils.pipeline.profiles` assembles the
whole profile from them and loads it with :func:`load_profile_as`. Every section is a pydantic
model that forbids unknown keys, so a typo is an error naming the profile, the key and what was
expected instead of a silently ignored setting. The construction stages (02-04) each have a
``mode`` (``replay`` or ``live``); the evaluation stages (06-15) share one, the profile's
``evaluation_mode`` (``paper`` or ``live``), which only ``harness_validation.mode`` may
override.

``--set section.key=value`` on the command line tweaks one value of a profile without copying
its YAML: :func:`parse_overrides` reads the values as YAML, :func:`load_profile_as` applies them
to the file's mapping and validates the result with the same models, so a typo in an override
is the same error, naming the key, as a typo in the file.

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
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hbpsych_utils import study
from hbpsych_utils.core import paths, yaml_loader

P = TypeVar("P", bound="ProfileBase")


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
    simulator_flip_rate: float = Field(default=0.0, ge=0, le=1)
    """The simulator's flip setting: this share of grader prompts gets the other verdict on every
    call after the first its simulator answers (a judge that does not agree with itself; read by
    the self-consistency chapter, docs/self_consistency.md). Only with ``simulator: true``."""
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


class ProfileBase(BaseModel):
    """A validated run profile's top-level keys. The profile a run loads is this with one
    section per stage of the graph (``pipeline.profiles.Profile``, assembled from the graph's
    nodes: a stage's section model is declared beside its node)."""

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

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        return paths.plain_name(value, "profile name")

    if TYPE_CHECKING:
        def __getattr__(self, section: str) -> Any:
            """A stage's section (``profile.scores``): its model, declared beside the stage's
            node of the graph."""


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


def applied_overrides(profile: ProfileBase, overrides: Mapping[str, object]) -> dict[str, object]:
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


def load_profile_as(
    model: type[P], name_or_path: str | Path, overrides: Mapping[str, object] | None = None
) -> P:
    """Load and validate a profile by name (``smoke``) or by path to a YAML file as ``model``
    (``pipeline.profiles.Profile``: the top-level keys and a section per stage), with
    ``overrides`` (dotted key -> value, see :func:`parse_overrides`) applied before
    validation."""
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
        profile = model.model_validate(raw)
    except ValidationError as exc:
        raise ProfileError(_describe(model, path, exc, where)) from None
    _check_files(profile, path)
    _check_notebooks(profile, path)
    return profile


def _describe(profile: type[BaseModel], path: Path, exc: ValidationError, where: str) -> str:
    lines = [f"profile {path.stem!r} {where} is invalid:"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 2 and str(
                err["loc"][-1]) in TOP_LEVEL_ONLY:
            lines.append(f"  - {key}: {TOP_LEVEL_ONLY[str(err['loc'][-1])]}")
        elif err["type"] == "extra_forbidden":
            model = _model_at(profile, err["loc"][:-1])
            allowed = ", ".join(model.model_fields) if model else "?"
            lines.append(f"  - {key}: unknown key (expected one of: {allowed})")
        else:
            expected = _expected_type(profile, err["loc"])
            msg = err["msg"].removeprefix("Value error, ")  # a validator's own message
            lines.append(
                f"  - {key}: {msg} (got {err.get('input')!r}"
                + (f"; expected {expected})" if expected else ")")
            )
    return "\n".join(lines)


def _model_at(profile: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    model = profile
    for part in loc:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None)
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model


def _expected_type(profile: type[BaseModel], loc: Sequence[int | str]) -> str | None:
    model = _model_at(profile, loc[:-1])
    if model is None or str(loc[-1]) not in model.model_fields:
        return None
    ann = model.model_fields[str(loc[-1])].annotation
    return re.sub(r"typing\.|<class '([^']+)'>", r"\1", str(ann))


def _check_files(profile: BaseModel, path: Path) -> None:
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


def _check_notebooks(profile: ProfileBase, path: Path) -> None:
    if profile.notebooks is None:
        return
    present = {p.stem for p in paths.notebooks_dir().glob("[0-9]*.ipynb")}
    for nb in profile.notebooks:
        if nb not in present:
            raise ProfileError(
                f"profile {path.stem!r} ({path}): notebooks: {nb!r} is not a notebook in "
                f"{paths.notebooks_dir()} (expected one of: {', '.join(sorted(present))})"
            )


class LiveModelSection(Protocol):
    """A section that calls a model in live mode and names it (screening, recall)."""

    @property
    def mode(self) -> str | None: ...

    @property
    def model(self) -> str | None: ...


def unset_live_model(section: str, params: LiveModelSection) -> str | None:
    """What is wrong with a screening or recall section whose live mode has no model to call
    (unlike judges and harness models, these have no study default), or ``None``. Checked when
    a profile loads, and again by the stage, for a notebook run by hand without a profile."""
    if params.mode == "live" and params.model is None:
        return (f"{section}.model: mode is 'live' but no model is set (expected a model name "
                "of the registry, params/models.yaml or llm.registry_file)")
    return None


resolve_path = paths.resolve_path
"""A profile path: absolute as given, otherwise relative to the project root."""
