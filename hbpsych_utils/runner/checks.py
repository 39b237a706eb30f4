"""What a profile refers to, checked when the runner loads it, before notebook 01.

The model registry (``llm.registry_file`` or params/models.yaml) must load and hold every model
the profile names (and the study's panel or harness model where a live section leaves them
null); simulator fault kinds must be known; ``llm.limits`` and ``llm.base_urls`` must name
registry providers with valid values; the corpus, rubric and ratings files must pass the
readers that will read them. Then the stage graph: a ``--set`` key that no stage reads under
the profile's modes is refused (:func:`load_for_run`), and the keys of the profile file that no
stage reads are listed once.

These checks use the readers of the layers above ``core`` (the engine's registry, the corpus and
ratings readers), which is why they live with the runner and not in :mod:`core.config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from hbpsych_utils.construction.corpus import load_corpus
from hbpsych_utils.construction.ratings import RatingsError, check_format, reviewer_collisions
from hbpsych_utils.core.config import (
    LimitOverride,
    LLMSettings,
    ProfileError,
    describe_overrides,
    profile_path,
    resolve_path,
    unset_live_model,
)
from hbpsych_utils.core.records import read_text
from hbpsych_utils.llm.faults import FAULT_KINDS
from hbpsych_utils.llm.models import ConfigError, Registry, profile_registry
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.graph import HARNESS, stage_mode
from hbpsych_utils.pipeline.profiles import Profile, load_profile


def load_for_run(name_or_path: str | Path, overrides: Mapping[str, Any] | None = None
                 ) -> tuple[Profile, list[str]]:
    """A profile as the runner uses it: validated (:func:`pipeline.profiles.load_profile`), every
    reference checked (:func:`check_references`), and every ``--set`` key read by some stage
    under the profile's modes. Returns the profile and one line per key of the profile file
    that no stage reads (to say once at start)."""
    overrides = dict(overrides or {})
    profile = load_profile(name_or_path, overrides)
    where = f"profile {profile.name!r} ({profile_path(name_or_path)}" + (
        f"; --set {describe_overrides(overrides)})" if overrides else ")")
    check_references(profile, where)
    refused = [(key, why) for key in overrides
               if (why := graph.unread_reason(profile, key)) is not None]
    if refused:
        raise ProfileError("\n".join(
            [f"{where}: no stage reads " + ("this key" if len(refused) == 1 else "these keys")
             + ", so the tweak would change nothing:"]
            + [f"  - {key}: {why}" for key, why in refused]))
    unread = [f"{key}: {why}" for key in graph.file_keys(load_profile(name_or_path))
              if key not in overrides and (why := graph.unread_reason(profile, key))]
    return profile, unread


def model_references(profile: Profile) -> list[tuple[str, str]]:
    """``(key, model)`` for every model the profile names. A live section that leaves its
    judges or harness models null uses the study's (``study.JUDGE_PANEL``,
    ``study.HARNESS_MODEL``, as stages 07 and 11 resolve them); those are listed too, so a
    registry that lacks them fails here."""
    refs: list[tuple[str, str]] = []
    for key in ("screening.model", "screening.translation_model", "recall.model"):
        section, field = key.split(".")
        name = getattr(getattr(profile, section), field)
        if name is not None:
            refs.append((key, name))
    refs += [(f"generation.candidates[{i}]", m)
             for i, m in enumerate(profile.generation.candidates)]
    grading = profile.grading
    if grading.judges is not None:
        refs += [(f"grading.judges[{i}]", m) for i, m in enumerate(grading.judges)]
    elif profile.evaluation_mode == "live":
        refs += [("grading.judges (null: the study's panel)", m)
                 for m in grading.judge_panel()]
    harness = profile.harness_validation
    for role in ("candidate", "judge"):
        if getattr(harness, role) is not None:
            refs.append((f"harness_validation.{role}", harness.model_of(role)))
        elif stage_mode(profile, HARNESS) == "live":
            refs.append((f"harness_validation.{role} (null: the study's harness model)",
                         harness.model_of(role)))
    return refs


def check_references(profile: Profile, where: str) -> None:
    """Everything ``profile`` refers to must exist, else one ``ProfileError`` (headed by
    ``where``) lists every problem with the key and the allowed values: the model registry
    (``llm.registry_file`` or params/models.yaml) must load; every model named must be in it;
    fault kinds must be the simulator's; ``llm.limits`` must name registry providers with
    valid limits, ``llm.base_urls`` registry providers or provider kinds with http(s) URLs;
    the corpus, ratings and rubric files must pass their own readers' checks; a live screening
    or recall section must name its model (:func:`unset_live_model`)."""
    llm = profile.llm
    try:
        registry = profile_registry(llm.registry_file)
    except ConfigError as exc:
        key = "llm.registry_file" + ("" if llm.registry_file else " (null: params/models.yaml)")
        raise ProfileError(f"{where}: {key}: {exc}") from None
    unset = [unset_live_model(key, getattr(profile, key)) for key in ("screening", "recall")]
    problems = [*(p for p in unset if p), *_model_problems(profile, registry),
                *_llm_problems(llm, registry), *_file_problems(profile)]
    if problems:
        raise ProfileError("\n".join([f"{where} is invalid:", *(f"  - {p}" for p in problems)]))


def _model_problems(profile: Profile, registry: Registry) -> list[str]:
    known = ", ".join(sorted(registry.models))
    return [f"{key}: unknown model {name!r} (expected a model of {registry.source}: {known})"
            for key, name in model_references(profile) if name not in registry.models]


def _llm_problems(llm: LLMSettings, registry: Registry) -> list[str]:
    """``llm.faults``, ``llm.limits`` and ``llm.base_urls`` against the registry; the
    simulator's own settings only with the simulator."""
    return [*_fault_problems(llm, registry), *_limit_problems(llm, registry),
            *_base_url_problems(llm, registry), *_simulator_problems(llm)]


def _simulator_problems(llm: LLMSettings) -> list[str]:
    """The flip setting makes the simulator's judges unstable; without the simulator it would
    change nothing, so it is refused rather than silently ignored."""
    if llm.simulator_flip_rate and not llm.simulator:
        return [f"llm.simulator_flip_rate: {llm.simulator_flip_rate} is the simulator's setting, "
                "but llm.simulator is false (expected 0, or llm.simulator: true)"]
    return []


def _fault_problems(llm: LLMSettings, registry: Registry) -> list[str]:
    """Each simulator fault's kind must be the simulator's, its model the registry's (by name
    or by the name the provider's API knows it by)."""
    problems = []
    wire = set(registry.models) | {m.api_model for m in registry.models.values()}
    for i, fault in enumerate(llm.faults or []):
        if fault.kind not in FAULT_KINDS:
            problems.append(f"llm.faults[{i}].kind: unknown fault kind {fault.kind!r} "
                            f"(expected one of: {', '.join(FAULT_KINDS)})")
        if fault.model is not None and fault.model not in wire:
            problems.append(f"llm.faults[{i}].model: unknown model {fault.model!r} "
                            f"(expected a model of {registry.source}: "
                            f"{', '.join(sorted(registry.models))})")
    return problems


def _limit_problems(llm: LLMSettings, registry: Registry) -> list[str]:
    """Each ``llm.limits`` entry must name a registry provider and hold valid limits."""
    problems = []
    providers = ", ".join(registry.providers)
    for name, values in llm.limits.items():
        if name not in registry.providers:
            problems.append(f"llm.limits.{name}: unknown provider (expected one of the "
                            f"providers of {registry.source}: {providers})")
        try:
            LimitOverride.model_validate(values)
        except ValidationError as exc:
            problems += [_limit_error(f"llm.limits.{name}", err) for err in exc.errors()]
    return problems


def _limit_error(where: str, err: ErrorDetails) -> str:
    key = f"{where}." + ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{key}: unknown key (expected one of: {', '.join(LimitOverride.model_fields)})"
    return f"{key}: {err['msg']} (got {err.get('input')!r})"


def _base_url_problems(llm: LLMSettings, registry: Registry) -> list[str]:
    """Each ``llm.base_urls`` entry must name a registry provider or provider kind, with an
    http(s) URL."""
    problems = []
    targets = {*registry.providers, *(p.kind for p in registry.providers.values())}
    for name, url in llm.base_urls.items():
        if name not in targets:
            problems.append(f"llm.base_urls.{name}: unknown provider (expected a provider of "
                            f"{registry.source} or a provider kind: {', '.join(sorted(targets))})")
        parts = urlparse(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append(f"llm.base_urls.{name}: {url!r} is not an http(s) URL "
                            "(expected e.g. http://127.0.0.1:8000/v1)")
    return problems


def _file_problems(profile: Profile) -> list[str]:
    """The files a profile names, checked by the readers that will read them (existence was
    checked before)."""
    problems = []
    c = profile.corpus
    if c.corpus_file is not None:
        try:
            load_corpus(resolve_path(c.corpus_file), invalid_records=c.invalid_records,
                        max_records=c.max_conversations)
        except ValueError as exc:
            problems.append(f"corpus.corpus_file: {exc}")
    for key in ("screening.rubric_file", "recall.rubric_file"):
        section, field = key.split(".")
        if (name := getattr(getattr(profile, section), field)) is not None:
            try:
                read_text(resolve_path(name))
            except ValueError as exc:
                problems.append(f"{key}: {exc}")
    for section in ("review_round1", "recall"):
        named = []  # (file, reviewer) of the round's good files
        for i, name in enumerate(getattr(profile, section).ratings_files or []):
            try:
                named.append((name, check_format(resolve_path(name))))
            except RatingsError as exc:
                problems.append(f"{section}.ratings_files[{i}]: "
                                + "\n      ".join(str(exc).splitlines()))
        problems += [f"{section}.ratings_files: {p}" for p in reviewer_collisions(named)]
    return problems
