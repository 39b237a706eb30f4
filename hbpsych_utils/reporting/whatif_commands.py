"""From a what-if state to a recorded run: the ``run_all.sh … --set …`` that makes it, if any.

A choice becomes profile settings where one exists: the judges (``grading.judges``, live
runs), the subset the headline Table 1 is on (``scores.subsets``, that subset first), the later
models (``scores.include_later`` in paper mode; in a live run, ``generation.candidates`` without
them). The median panel, refusals left out, the unclipped mean and the length-adjusted score
have no setting (chapters 10 and 14 show the last two beside the study's score). A setting is
offered only where the stage graph says a stage of the run's profile reads it under its modes
(``pipeline.graph.unread_reason``, the runner's own check) and the profile accepts the value;
otherwise the state says which choice no profile setting makes a run, and why.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hbpsych_utils.core import escape, paths
from hbpsych_utils.core.config import ProfileError, apply_overrides
from hbpsych_utils.evaluation.whatif import Choice, Space
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.profiles import Profile

NO_SETTING = {
    "median": "the median panel",
    "refusals": "refusals left out (chapter 10 shows each model's score without them)",
    "clip": "the unclipped mean",
    "length": "the length-adjusted score (chapter 14 shows it beside the raw one)",
}
"""The choices no profile setting makes, as a state names them."""


def outputs_option(outputs_root: Path) -> str:
    """`` --outputs DIR`` for a run outside the default outputs folder ("" otherwise)."""
    if Path(outputs_root).resolve() == paths.outputs_root().resolve():
        return ""
    return f" --outputs {shlex.quote(str(Path(outputs_root).resolve()))}"


def wanted(choice: Choice, reference: Choice, profile: Profile,
           later: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The settings that would make ``choice`` the run's Table 1 (key -> value), and the
    choices no setting makes (words)."""
    sets: dict[str, Any] = {}
    missing: list[str] = []
    if choice.judges != reference.judges:
        sets["grading.judges"] = list(choice.judges)
    if choice.canonical().combine == "median":
        missing.append(NO_SETTING["median"])
    if choice.subset != reference.subset:
        sets["scores.subsets"] = [choice.subset] + [s for s in profile.scores.subsets
                                                    if s != choice.subset]
    if choice.later != reference.later:
        if profile.evaluation_mode == graph.PAPER:
            sets["scores.include_later"] = choice.later
        else:
            sets["generation.candidates"] = [c for c in profile.generation.candidates
                                             if c not in set(later)]
    for flag, on in (("refusals", choice.refusals_excluded), ("clip", not choice.clipped),
                     ("length", choice.length_adjusted)):
        if on:
            missing.append(NO_SETTING[flag])
    return sets, missing


MAKERS = {"grading.judges": graph.GRADING, "scores.subsets": graph.SCORES,
          "scores.include_later": graph.SCORES, "generation.candidates": graph.GENERATION}
"""The stage whose reading of a setting changes Table 1: a setting another stage reads (06's
cost plan reads the judges in every mode) makes no run of the choice."""


def _made_by(profile: Profile, key: str) -> str | None:
    """Why ``key`` does not change Table 1 under ``profile`` (None when its maker reads it
    under the profile's modes)."""
    maker = MAKERS[key]
    if maker not in graph.profile_stages(profile):
        return f"the profile does not run {maker}"
    mode = graph.stage_mode(profile, maker)
    if any(name == maker and read.when.holds(profile, mode)
           for name, read in graph.readers(key)):
        return None
    return f"{maker} does not read {key} in {mode} mode"


def refused_settings(profile_values: Mapping[str, Any], overrides: Mapping[str, Any],
                     sets: Mapping[str, Any]) -> dict[str, str]:
    """Each setting of ``sets`` that would not make the choice a run, with why: the profile
    would not take the value, no stage of the profile reads the key under its modes (the
    runner's own check, ``graph.unread_reason``), or the stage that makes Table 1 from it
    does not read it (:data:`MAKERS`)."""
    try:
        tweaked = Profile.model_validate(apply_overrides(profile_values,
                                                         {**overrides, **sets}))
    except (ValidationError, ProfileError) as exc:
        first = str(exc).splitlines()
        return {k: first[0] if first else "not a valid value" for k in sets}
    out = {}
    for key in sets:
        why = graph.unread_reason(tweaked, key) or _made_by(tweaked, key)
        if why is not None:
            out[key] = why
    return out


def run_command(profile: str, overrides: Mapping[str, Any], outputs_root: Path) -> str:
    """``bash run_all.sh PROFILE [--outputs DIR] --set k=v ...`` (values as JSON, quoted)."""
    sets = "".join(f" --set {shlex.quote(f'{k}={json.dumps(v)}')}"
                   for k, v in overrides.items())
    return f"bash run_all.sh {shlex.quote(profile)}{outputs_option(outputs_root)}{sets}"


def command_html(choice: Choice, reference: Choice, space: Space, profile: Profile,
                 manifest: Mapping[str, Any], outputs_root: Path,
                 later: Sequence[str] = ()) -> str:
    """What a state says about making it a run: the run's own command, the command with the
    settings it needs, or which choice no profile setting makes (and the rest as a run)."""
    overrides = manifest.get("overrides") or {}
    overrides = overrides if isinstance(overrides, dict) else {}
    values = manifest.get("profile_values") or profile.model_dump(mode="json")
    name = str(manifest.get("profile") or profile.name)
    sets, missing = wanted(choice, reference, profile, later)
    refused = refused_settings(values, overrides, sets)
    for key, why in refused.items():
        missing.append(f"{_what(key)} ({why})")
        sets.pop(key)
    command = run_command(name, {**overrides, **sets}, outputs_root)
    code = f'<code class="hb-command">{escape.html_text(command)}</code>'
    if not sets and not missing:
        return f"<p>This is the run's own scoring: {code}</p>"
    if not missing:
        return f"<p>As a recorded run: {code}</p>"
    words = "; ".join(missing)
    rest = f" The other choices as a run: {code}" if sets else ""
    return (f"<p>No profile setting makes this a run: {escape.html_text(words)}."
            f"{rest}</p>")


def _what(key: str) -> str:
    return {"grading.judges": "a panel of these judges",
            "scores.subsets": "another subset's Table 1",
            "scores.include_later": "the later models",
            "generation.candidates": "the study's models only"}.get(key, key)

