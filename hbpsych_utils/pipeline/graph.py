"""The run as a declared graph: every stage, the files it reads from earlier stages, the
registry artifacts it may fetch and the profile keys it reads, each with the condition (mode,
or a value such as a translation model) under which it reads them.

This is the one place that says what depends on what. Each stage declares its node in a module
of :mod:`hbpsych_utils.pipeline.nodes` (its profile section's model beside it; what a node is
made of: :mod:`hbpsych_utils.pipeline.spec`), and the graph is their union. From it:

- the runner resolves each stage's mode and the values injected into its notebook's
  ``parameters`` cell (:func:`notebook_parameters`);
- :mod:`hbpsych_utils.pipeline.profiles` assembles a profile's sections;
- :mod:`hbpsych_utils.pipeline.state` fingerprints a stage from what it reads under the
  profile (:func:`keys_read`, its upstream stages, its notebook, the package code and the
  artifacts' registered hashes), so the runner re-runs exactly what a change affects;
- a ``--set`` that no stage reads under the profile's modes is refused, naming why
  (:func:`unread_reason`);
- a stage's output folder refuses to read an upstream file this graph does not declare
  (:meth:`hbpsych_utils.pipeline.stage.Stage.upstream`), so the declaration cannot drift from
  the code;
- the book's chapters and landing page, and the docs' chapter lists
  (:mod:`hbpsych_utils.pipeline.docs_blocks`).

The graph is plain data rather than a Snakefile: a stage is a notebook that papermill runs in
one Python process, its inputs include profile values by mode, and the book and the manifest
read the same declaration (``docs/pipeline.md`` says more).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hbpsych_utils.core.config import ProfileBase, Section
from hbpsych_utils.pipeline.nodes import NODES
from hbpsych_utils.pipeline.spec import *  # noqa: F403 - the graph's names, one import away
from hbpsych_utils.pipeline.spec import (
    ALWAYS,
    GRADING_CALL_KEYS,
    LLM_CALL_KEYS,
    Read,
    StageSpec,
)

SPECS: dict[str, StageSpec] = {node.SPEC.name: node.SPEC for node in NODES}
"""Every stage, by name, in run order."""


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


def needs(name: str, mode: str | None) -> str | None:
    """What chapter ``name`` needs that ``mode`` has not (``StageSpec.needs``), or ``None``."""
    return (spec(name).needs or {}).get(mode or "")


def stage_mode(profile: ProfileBase, name: str) -> str | None:
    """The mode stage ``name`` runs in under ``profile`` (``None`` for a stage without modes)."""
    return spec(name).mode_of(profile)


def profile_stages(profile: ProfileBase) -> list[str]:
    """The stages a profile runs, in order (its ``notebooks`` list, or all)."""
    if profile.notebooks is None:
        return list(STAGES)
    wanted = set(profile.notebooks)
    return [s for s in STAGES if s in wanted]


def value_at(profile: ProfileBase | Mapping[str, Any], key: str) -> Any:
    """The value of a dotted profile key (``scores.top_k``, ``seed``), as JSON data."""
    node: Any = profile.model_dump(mode="json") if isinstance(profile, ProfileBase) else profile
    for part in key.split("."):
        node = node[part]
    return node


def keys_read(profile: ProfileBase, name: str) -> dict[str, Any]:
    """The profile keys stage ``name`` reads under ``profile``, with their values."""
    s = spec(name)
    mode = s.mode_of(profile)
    values = profile.model_dump(mode="json")
    return {key: value_at(values, key) for read in s.reads if read.when.holds(profile, mode)
            for key in read.keys}


def artifacts_used(profile: ProfileBase, name: str) -> list[str]:
    """Registry artifacts stage ``name`` may fetch under ``profile`` (keys resolved)."""
    out = []
    for entry in spec(name).artifacts:
        value = value_at(profile, entry) if "." in entry else entry
        if value is not None:
            out.append(str(value))
    return out


def section_model(name: str) -> type[Section] | None:
    """Stage ``name``'s profile section model (``None``: it has no parameters)."""
    return spec(name).params


def section_fields(name: str) -> list[str]:
    """The fields of stage ``name``'s profile section that it reads, as its notebook declares
    them (its ``mode`` is the resolved mode, declared once as ``mode``). A field of the section
    that only a later stage reads (``grading.repeats``, read by 16 and not by 07) is that
    stage's parameter (its ``parameters``), not this one's."""
    model = section_model(name)
    if model is None:
        return []
    s = spec(name)
    read = {k for r in s.reads for k in r.keys}
    return [f for f in model.model_fields if f != "mode" and f"{s.section}.{f}" in read]


def _reads_any(name: str, prefix: str) -> bool:
    return any(k == prefix or k.startswith(prefix + ".") for r in spec(name).reads
               for k in r.keys)


def parameter_names(name: str) -> list[str]:
    """What stage ``name``'s notebook declares in its ``parameters`` cell, in order: the run
    (``profile``, ``outputs_root``), its resolved ``mode``, ``seed``, ``ci_level``,
    ``n_resamples`` and the ``llm`` settings where it reads them, its section's fields, and
    values from other sections."""
    s = spec(name)
    out = ["profile", "outputs_root"]
    if s.modes:
        out.append("mode")
    if _reads_any(name, "seed"):
        out.append("seed")
    if _reads_any(name, "ci_level"):
        out.append("ci_level")
    if _reads_any(name, "n_resamples"):
        out.append("n_resamples")
    if _reads_any(name, "llm"):
        out.append("llm")
    out += section_fields(name)
    out += list(s.parameters or {})
    return out


def notebook_parameters(profile: ProfileBase, name: str, outputs_root: str) -> dict[str, Any]:
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
        elif param in ("seed", "ci_level", "n_resamples", "llm"):
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


def unread_reason(profile: ProfileBase, key: str) -> str | None:
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


def file_keys(profile: ProfileBase) -> list[str]:
    """The keys a profile's own file sets (``section.field`` or top-level), for the list of
    keys no stage reads."""
    out = []
    for field, value in profile.model_dump(mode="json", exclude_unset=True).items():
        if isinstance(value, dict) and isinstance(getattr(profile, field), Section):
            out += [f"{field}.{k}" for k in value]
        else:
            out.append(field)
    return out


def dependents(names: Iterable[str], profile: ProfileBase) -> list[str]:
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
        left = [k.removeprefix("llm.") for k in ("llm.prompt_caching", "llm.external",
                                                  "llm.simulator_flip_rate") if k not in keys]
        engine = ("the engine's settings (`llm.*`" + (" but " + " and ".join(
            f"`{k}`" for k in left) if left else "") + ")")
        return [f"`{k}`" for k in rest] + [engine]
    return [f"`{k}`" for k in keys]
