"""Whether a stage's outputs are current: fingerprints, build records and stage states.

A stage's **inputs** under a profile are what the graph says it reads (:mod:`.graph`): its
resolved mode and the profile keys it reads with their values, the contents of the local files
those keys name, the registered sha256 of the artifacts it may fetch, its notebook, the package
code, and the fingerprints of its upstream stages. The **fingerprint** is the sha256 of those
inputs. Because an upstream's fingerprint is part of its dependents', a change anywhere reaches
everything downstream of it, and only that.

When the runner finishes a stage it writes ``<stage>/build.json`` (:class:`Build`) with the
inputs and fingerprint; a notebook run by hand (papermill, JupyterLab) writes one that says so.
:func:`stage_states` compares those records with what the profile now implies and says, for
every stage, whether it is current and, when not, why: written outside the runner, its inputs
changed (naming what), its upstream changed or failed, it failed, it never ran.

The package-code hash leaves out what cannot change a stage's outputs: the runner and the book.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from hbpsych_utils.core import paths, records, sources
from hbpsych_utils.core.config import Profile
from hbpsych_utils.core.writes import write_json_record
from hbpsych_utils.pipeline import graph

BUILD_RECORD = "build.json"
FAILURE_RECORD = "failed.json"
RUNNER, HAND = "runner", "hand"

_PACKAGE = Path(__file__).resolve().parents[1]
_CODE_SUFFIXES = (".py", ".html", ".js", ".css")
_NOT_CODE_OF_STAGES = ("runner/", "reporting/book.py", "reporting/book_site/",
                       "reporting/publish.py")
"""Package parts that never change a stage's outputs (they run, render or publish stages)."""


class Inputs(BaseModel):
    """Everything a stage's outputs are computed from, as the fingerprint sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: str | None
    keys: dict[str, Any]
    """Profile keys the stage reads under its mode, with their values."""
    files: dict[str, str | None]
    """sha256 of each local file those keys name (``None``: missing)."""
    artifacts: dict[str, str | None]
    """Registered sha256 of each artifact it may fetch (``None``: verified by content)."""
    notebook: str | None
    code: str
    upstream: dict[str, str | None]
    """Upstream stage -> its fingerprint (``None``: not among the profile's stages)."""

    def fingerprint(self) -> str:
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Build(BaseModel):
    """``<stage>/build.json``: who made the stage's outputs, from what, and when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: str
    by: Literal["runner", "hand"]
    fingerprint: str | None = None
    inputs: Inputs | None = None
    parameters: dict[str, Any] = {}
    """A hand run's notebook parameters (a runner build's are in ``inputs.keys``)."""
    written_at: str


State = Literal["current", "not_current", "failed", "not_run", "not_in_profile"]


class StageState(BaseModel):
    """One stage of a run folder: its state and, unless current, why."""

    model_config = ConfigDict(frozen=True)

    stage: str
    state: State
    reason: str = ""
    by: str | None = None
    written_at: str | None = None

    @property
    def current(self) -> bool:
        return self.state == "current"


@cache
def code_hash() -> str:
    """sha256 over the package's source files that stages run (read once per process)."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        rel = path.relative_to(_PACKAGE).as_posix()
        if (path.suffix not in _CODE_SUFFIXES or "__pycache__" in rel
                or rel.startswith(_NOT_CODE_OF_STAGES)):
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _file_sha(path: Path) -> str | None:
    return sources.sha256_file(path) if path.is_file() else None


def _files_named(keys: Mapping[str, Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key, value in keys.items():
        if not key.endswith(("_file", "_files")) or value is None:
            continue
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            out[f"{key}[{i}]" if isinstance(value, list) else key] = _file_sha(
                paths.resolve_path(item))
    return out


def _artifact_hashes(names: Iterable[str], mirror: bool) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = sources.artifact(name).expected_sha256(from_mirror=mirror)
        except sources.ArtifactError:
            out[name] = None
    return out


def notebook_path(name: str) -> Path:
    return paths.notebooks_dir() / f"{name}.ipynb"


def expected_inputs(profile: Profile, *, mirror: bool | None = None) -> dict[str, Inputs]:
    """What each of the profile's stages should be computed from now, in run order.

    ``mirror``: whether artifacts come from the offline mirror (whose corpus is partial), as
    ``$HBPSYCH_MIRROR`` says now when ``None``; the book passes what the run's manifest
    recorded, so a reader's environment does not change what counts as current."""
    if mirror is None:
        mirror = sources.mirror_dir() is not None
    stages = graph.profile_stages(profile)
    out: dict[str, Inputs] = {}
    for name in stages:
        spec = graph.spec(name)
        keys = graph.keys_read(profile, name)
        out[name] = Inputs(
            mode=spec.mode_of(profile),
            keys=keys,
            files=_files_named(keys),
            artifacts=_artifact_hashes(graph.artifacts_used(profile, name), mirror),
            notebook=_file_sha(notebook_path(name)),
            code=code_hash(),
            upstream={u: out[u].fingerprint() if u in out else None
                      for u in spec.upstream(profile)},
        )
    return out


def build_path(run_dir: Path, name: str) -> Path:
    return Path(run_dir) / name / BUILD_RECORD


def read_build(run_dir: Path, name: str) -> Build | None:
    """A stage's build record, or ``None`` when it has none (or one this version cannot read,
    which counts as none: the stage is then rebuilt)."""
    path = build_path(run_dir, name)
    if not path.is_file():
        return None
    try:
        return Build.model_validate(records.read_json(path))
    except (ValidationError, ValueError):
        return None


def write_build(folder: Path, name: str, *, by: Literal["runner", "hand"],
                inputs: Inputs | None = None, parameters: Mapping[str, Any] | None = None
                ) -> Path:
    """Write ``build.json`` into a stage's (staged) output folder."""
    build = Build(stage=name, by=by, inputs=inputs,
                  fingerprint=inputs.fingerprint() if inputs is not None else None,
                  parameters=dict(parameters or {}),
                  written_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return write_json_record(Path(folder) / BUILD_RECORD, build.model_dump(mode="json"))


def _show(value: Any) -> str:
    return json.dumps(value, default=str)


def changes(recorded: Inputs, expected: Inputs) -> list[str]:
    """What differs between the inputs a build recorded and those expected now, in words."""
    out = []
    if recorded.mode != expected.mode:
        out.append(f"its mode changed ({recorded.mode} → {expected.mode})")
    for key in sorted(recorded.keys.keys() | expected.keys.keys()):
        if key not in expected.keys:
            out.append(f"it no longer reads {key}")
        elif key not in recorded.keys:
            out.append(f"it now reads {key} = {_show(expected.keys[key])}")
        elif recorded.keys[key] != expected.keys[key]:
            out.append(f"{key} changed ({_show(recorded.keys[key])} → "
                       f"{_show(expected.keys[key])})")
    for label, a, b in (("file", recorded.files, expected.files),
                        ("artifact", recorded.artifacts, expected.artifacts)):
        for key in sorted(a.keys() | b.keys()):
            if a.get(key) != b.get(key):
                out.append(f"{label} {key} changed")
    if recorded.notebook != expected.notebook:
        out.append("its notebook changed")
    if recorded.code != expected.code:
        out.append("the package code changed")
    for up in sorted(recorded.upstream.keys() | expected.upstream.keys()):
        if recorded.upstream.get(up) != expected.upstream.get(up):
            out.append(f"its upstream {up} changed")
    return out


def self_state(run_dir: Path, name: str, expected: Inputs) -> tuple[bool, str]:
    """Whether stage ``name``'s own outputs match ``expected`` (upstream currency aside), and
    why not: what the runner uses to decide whether to run it."""
    folder = Path(run_dir) / name
    if (folder / FAILURE_RECORD).is_file():
        return False, "its last run failed"
    if not folder.is_dir():
        return False, "it has not run yet"
    build = read_build(run_dir, name)
    if build is None:
        return False, "it has no build record (made by an older version or outside the runner)"
    if build.by == HAND:
        return False, "its outputs were written outside the runner" + _hand_params(build)
    if build.fingerprint == expected.fingerprint():
        return True, ""
    assert build.inputs is not None
    return False, "; ".join(changes(build.inputs, expected)) or "its inputs changed"


def _hand_params(build: Build) -> str:
    shown = {k: v for k, v in build.parameters.items() if k not in ("profile", "outputs_root",
                                                                     "llm")}
    if not shown:
        return " (papermill or JupyterLab)"
    return (" (papermill or JupyterLab, with "
            + ", ".join(f"{k}={_show(v)}" for k, v in shown.items()) + ")")


def _failure_reason(run_dir: Path, name: str) -> str:
    try:
        record = records.read_json(Path(run_dir) / name / FAILURE_RECORD)
    except ValueError:
        return "its last run failed"
    error = record.get("error") if isinstance(record, dict) else None
    status = record.get("status", "failed") if isinstance(record, dict) else "failed"
    if isinstance(error, dict) and error.get("ename"):
        return (f"its last run was {status}: {error.get('ename')}: "
                f"{str(error.get('evalue', ''))[:200]}")
    return f"its last run was {status}"


def stage_states(run_dir: Path, profile: Profile, *, mirror: bool | None = None
                 ) -> list[StageState]:
    """Every stage of the graph in a run folder, against what ``profile`` implies now.

    ``current``: built by the runner from exactly the expected inputs, and every upstream
    current. ``not_current``: anything else with outputs (the reason says what). ``failed``:
    its last run failed. ``not_run``: no outputs. ``not_in_profile``: the profile does not run
    it. ``mirror`` as for :func:`expected_inputs`."""
    run_dir = Path(run_dir)
    expected = expected_inputs(profile, mirror=mirror)
    out: dict[str, StageState] = {}
    for name in graph.STAGES:
        folder = run_dir / name
        build = read_build(run_dir, name)
        by = build.by if build else None
        at = build.written_at if build else None
        if name not in expected:
            out[name] = StageState(stage=name, state="not_in_profile", by=by, written_at=at)
            continue
        if (folder / FAILURE_RECORD).is_file():
            out[name] = StageState(stage=name, state="failed",
                                   reason=_failure_reason(run_dir, name))
            continue
        if not folder.is_dir():
            out[name] = StageState(stage=name, state="not_run", reason="it has not run yet")
            continue
        ok, why = self_state(run_dir, name, expected[name])
        if ok:
            # an upstream the profile does not run is not this run's to bring up to date (its
            # fingerprint is recorded as None, see expected_inputs)
            blocked = [u for u in graph.spec(name).upstream(profile)
                       if u in expected and not out[u].current]
            if blocked:
                up = blocked[0]
                what = "failed" if out[up].state == "failed" else "is not current"
                ok, why = False, f"its upstream {up} {what}"
        out[name] = StageState(stage=name, state="current" if ok else "not_current",
                               reason=why, by=by, written_at=at)
    return list(out.values())
