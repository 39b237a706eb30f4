"""Whether a stage's outputs are current: fingerprints, build records and stage states.

A stage's **inputs** under a profile are what the graph says it reads (:mod:`.graph`): its
resolved mode and the profile keys it reads with their values, the contents of the local files
those keys name, the registered sha256 of the artifacts it may fetch, its notebook, the package
code, and the fingerprints of its upstream stages. The **fingerprint** is the sha256 of those
inputs. Because an upstream's fingerprint is part of its dependents', a change anywhere reaches
everything downstream of it, and only that.

When the runner finishes a stage it writes ``<stage>/build.json`` (:class:`Build`) with the
inputs and fingerprint, and the sha256 of every file the stage wrote and of its executed
notebook (``notebooks/<stage>.ipynb``); a notebook run by hand (papermill, JupyterLab) writes
one that says so. :func:`stage_states` compares those records with what the profile now implies
and with the files as they are, and says, for every stage, whether it is current and, when not,
why: written outside the runner, one of its files changed or is missing since it was written,
its inputs changed (naming what), its upstream changed or failed, it failed, it never ran. A
record without hashes (an older version's) cannot vouch for its files: its stage is not current
and the runner runs it again. :func:`check_outputs` is what ``book`` and ``publish`` ask before
they read a run folder: they refuse one whose files differ from their records.

The package-code hash leaves out what cannot change a stage's outputs: the runner and the book.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from hbpsych_utils.core import paths, records, sources
from hbpsych_utils.core.wording import count
from hbpsych_utils.core.writes import write_json_record
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.profiles import Profile

BUILD_RECORD = "build.json"
FAILURE_RECORD = "failed.json"
RUNNER: Final = "runner"
HAND: Final = "hand"
EXECUTED_DIR = "notebooks"
"""Where the runner writes each stage's executed notebook, inside the run folder."""

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
    outputs: dict[str, str] | None = None
    """sha256 of every file a runner build wrote, by its path in the run folder
    (``<stage>/<file>``, and ``notebooks/<stage>.ipynb`` for the executed notebook). ``None``
    in a hand run's record and in an older version's: nothing to verify its files by."""
    written_at: str

    @field_validator("outputs")
    @classmethod
    def _inside_the_run_folder(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            parts = Path(name).parts
            if not parts or Path(name).is_absolute() or ".." in parts:
                raise ValueError(f"{name!r} is not a path inside the run folder")
        return value


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


_hashes: dict[tuple[int, ...], str] = {}
_SETTLED_NS = 2_000_000_000
"""A file's hash is remembered only once it has not been written for this long: file times
advance in ticks (a few ms, 2 s on some file systems), so a file rewritten within the tick it
was hashed in, at the same size, would look unchanged (git's "racily clean" entries)."""


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered for this process by the file's identity and times (device,
    inode, size, modification and change time in ns): the runner checks every stage's outputs
    before it plans and again after each notebook, and reads each settled file once. A file
    written since (in place or replaced) has another inode or times, so it is read again."""
    st = Path(path).stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    sha = _hashes.get(key)
    if sha is None:
        sha = sources.sha256_file(path)
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS:
            _hashes[key] = sha
    return sha


def clear_hash_cache() -> None:
    """Forget the hashes :func:`file_sha256` remembered (benchmarks time a cold check)."""
    _hashes.clear()


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


def executed_path(run_dir: Path, name: str) -> Path:
    """Where the runner writes stage ``name``'s executed notebook in a run folder."""
    return Path(run_dir) / EXECUTED_DIR / f"{name}.ipynb"


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


def stage_files(folder: Path) -> dict[str, Path]:
    """Every file in a stage folder but its build record, by path relative to the folder."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix() != BUILD_RECORD}


def write_build(folder: Path, name: str, *, by: Literal["runner", "hand"],
                inputs: Inputs | None = None, parameters: Mapping[str, Any] | None = None,
                executed: Path | None = None) -> Path:
    """Write ``build.json`` into a stage's (staged) output folder. A runner build records the
    sha256 of every file in the folder and of ``executed``, the stage's executed notebook
    (recorded as ``notebooks/<stage>.ipynb``, where the runner writes it; when it exists)."""
    outputs = None
    if by == RUNNER:
        outputs = {f"{name}/{rel}": file_sha256(p) for rel, p in stage_files(folder).items()}
        if executed is not None and Path(executed).is_file():
            outputs[f"{EXECUTED_DIR}/{name}.ipynb"] = file_sha256(executed)
    build = Build(stage=name, by=by, inputs=inputs,
                  fingerprint=inputs.fingerprint() if inputs is not None else None,
                  parameters=dict(parameters or {}), outputs=outputs,
                  written_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return write_json_record(Path(folder) / BUILD_RECORD, build.model_dump(mode="json"))


class OutputProblem(BaseModel):
    """One file of a runner build that is no longer what the build wrote."""

    model_config = ConfigDict(frozen=True)

    stage: str
    file: str
    """Its path in the run folder, as the build record names it."""
    problem: Literal["changed", "missing", "unreadable"]
    detail: str = ""
    """Why it cannot be read (``unreadable``)."""

    @property
    def executed(self) -> bool:
        return self.file.startswith(f"{EXECUTED_DIR}/")

    def state(self) -> str:
        """What happened to the file, as a clause (``changed since it was written``)."""
        return {"changed": "changed since it was written", "missing": "is missing",
                "unreadable": f"cannot be read ({self.detail})"}[self.problem]

    def reason(self) -> str:
        """The problem as the plan and the stage states say it, of the stage."""
        what = (f"its executed notebook {self.file}" if self.executed
                else f"its output {self.file.removeprefix(f'{self.stage}/')}")
        return f"{what} {self.state()}"


def output_problems(run_dir: Path, build: Build) -> list[OutputProblem] | None:
    """The files of ``build`` that are no longer those it wrote (``[]``: all are), or ``None``
    when its record holds no hashes (a hand run's, or an older version's)."""
    if build.outputs is None:
        return None
    out = []
    for name, sha in sorted(build.outputs.items()):
        path = Path(run_dir) / name
        try:
            if not path.is_file():
                out.append(OutputProblem(stage=build.stage, file=name, problem="missing"))
            elif file_sha256(path) != sha:
                out.append(OutputProblem(stage=build.stage, file=name, problem="changed"))
        except OSError as exc:
            out.append(OutputProblem(stage=build.stage, file=name, problem="unreadable",
                                     detail=exc.strerror or type(exc).__name__))
    return out


def _problems_reason(problems: list[OutputProblem]) -> str:
    more = len(problems) - 1
    return problems[0].reason() + (f" (and {count(more, 'more file')})" if more else "")


UNVERIFIED = "its build record, from an older version, holds no hashes to verify its outputs by"


class OutputsChanged(ValueError):
    """A run folder whose files are not those its build records say the runner wrote."""


def damaged_outputs(run_dir: Path, stages: Iterable[str] | None = None
                    ) -> list[OutputProblem]:
    """The files of the runner's builds in a run folder (of ``stages``, else every stage of
    the graph) that are no longer those the builds wrote. A stage whose record holds no hashes
    has nothing to check here (its state says it is not current)."""
    out: list[OutputProblem] = []
    for name in graph.STAGES if stages is None else stages:
        if (Path(run_dir) / name / FAILURE_RECORD).is_file():
            continue
        build = read_build(run_dir, name)
        if build is not None and build.by == RUNNER:
            out += output_problems(run_dir, build) or []
    return out


def check_outputs(run_dir: Path, rerun: str, stages: Iterable[str] | None = None) -> None:
    """Raise :class:`OutputsChanged` naming the first file of the run folder that differs
    from its build record (``damaged_outputs``); ``rerun`` is the command that rebuilds it."""
    problems = damaged_outputs(run_dir, stages)
    if not problems:
        return
    first, more = problems[0], len(problems) - 1
    happened = {"changed": "changed since the runner wrote it",
                "missing": "missing; the runner wrote it",
                "unreadable": f"cannot be read ({first.detail}); the runner wrote it"}
    others = f" (and {count(more, 'more file')})" if more else ""
    raise OutputsChanged(
        f"{Path(run_dir) / first.file}: {happened[first.problem]} for {first.stage} (its "
        f"sha256 is in {first.stage}/{BUILD_RECORD}){others}. The run folder's files do not "
        f"match their build records; running the profile again rebuilds what changed: {rerun}")


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
    """Whether stage ``name``'s own outputs are those its build wrote and were computed from
    ``expected`` (upstream currency aside), and why not: what the runner uses to decide whether
    to run it."""
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
    problems = output_problems(run_dir, build)
    if problems is None:
        return False, UNVERIFIED
    if problems:
        return False, _problems_reason(problems)
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
