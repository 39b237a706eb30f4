"""Run a profile: plan from the stage graph, execute what is not current, record, build the book.

Before anything runs, the profile is loaded and checked (:mod:`.checks`): a bad value, a bad
reference or a ``--set`` that no stage reads stops the run with exit 2. The plan then compares
every stage's build record with the inputs the profile implies now and with the files it
wrote (:mod:`hbpsych_utils.pipeline.state`): a stage runs when it never ran, failed, was written
outside the runner, a file it wrote (its executed notebook included) is no longer what it
wrote, its record cannot say (an older version's), or any of its inputs changed (its
parameters, notebook, the package code, an artifact or an upstream stage); the others are
reported up to date. ``force`` runs every
stage; ``only`` runs the named stages and whichever of their dependents are then not current,
and refuses when an upstream of a named stage is not current (it would read stale inputs); both
run the named stages and all their dependents, current or not (never the rest of the profile).

Each notebook runs in this process with papermill (:mod:`.execute`), writing into a staging
folder that is swapped into place with its ``build.json`` (the sha256 of what it wrote and of
the executed notebook) when the notebook succeeds
(:func:`hbpsych_utils.pipeline.stage.publish_staged`); a failed or interrupted notebook leaves
its stage folder holding only ``failed.json``. The run stops at the first failure. The manifest,
rewritten after each notebook, lists every stage of the graph with its state; the book is built
after the last notebook, and after a failure too, so it marks what is not current; a folder it
refuses (a stage's file that differs from its record, left by ``only``) is one line, and the
run is not ok. A damaged or empty LLM store in the run folder stops the run before any
notebook (the manifest says why). Ctrl-C
at any point, from loading the profile to the book, ends it with :class:`RunInterrupted`
(:class:`~hbpsych_utils.runner.execute.RunWatch`).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

# Only what refuses a second run: the rest is imported where used, so that the command line
# answers "already running" before it loads pydantic, the profile or papermill.
from hbpsych_utils.core import paths, runlock
from hbpsych_utils.core.secrets import scrubber
from hbpsych_utils.core.wording import count

if TYPE_CHECKING:
    from hbpsych_utils.pipeline.profiles import Profile
    from hbpsych_utils.pipeline.state import Inputs
    from hbpsych_utils.runner.execute import RunWatch


T = TypeVar("T")


@dataclass
class RunResult:
    profile: str
    outputs: Path
    notebooks: list[dict[str, Any]] = field(default_factory=list)
    """This invocation's notebooks: status ``ok``, ``failed`` or ``interrupted``, seconds."""
    up_to_date: list[str] = field(default_factory=list)
    """Stages found current and not run."""
    failed: str | None = None
    book_error: str | None = None
    """Why the book could not be built (the notebooks' outputs are kept)."""

    @property
    def ok(self) -> bool:
        return self.failed is None and self.book_error is None


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run after it recorded where (a ``KeyboardInterrupt``, so a caller
    looping over runs stops too)."""

    def __init__(self, profile: str, outputs: Path, notebook: str | None, where: str) -> None:
        super().__init__(f"{where} of profile {profile!r} stopped by Ctrl-C")
        self.profile, self.outputs, self.notebook, self.where = profile, outputs, notebook, where


@dataclass(frozen=True)
class Step:
    """One stage of the plan: whether it runs, and why; ``current`` whether its outputs are
    already current (a stage neither run nor current is left as it is, and says why)."""

    stage: str
    run: bool
    reason: str
    current: bool = False


def injected_root(root: Path) -> str:
    """The outputs root as the runner gives it to a notebook: relative to ``notebooks/`` when
    it lies inside the project (``../outputs``, as the parameters cell says by default, so the
    executed notebook and its book show no path of the machine), else absolute."""
    root = Path(root).resolve()
    if root.is_relative_to(paths.project_root().resolve()):
        return os.path.relpath(root, paths.notebooks_dir().resolve())
    return str(root)


def default_command(profile: str, outputs_root: Path | None, only: list[str] | None,
                    overrides: Mapping[str, Any], force: bool = False) -> str:
    """The command line that repeats a run (for callers of ``run_profile`` that have none)."""
    args = [profile]
    if outputs_root is not None:
        args += ["--outputs", str(outputs_root)]
    if only:
        args += ["--only", *only]
    if force:
        args.append("--force")
    for key, value in overrides.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    return f"{shlex.quote(sys.executable)} -m hbpsych_utils run {shlex.join(args)}"


def plan(profile: Profile, run_dir: Path, expected: Mapping[str, Inputs], *,
         only: list[str] | None = None, force: bool = False) -> list[Step]:
    """What runs and why, for each of the profile's stages in order (see the module doc)."""
    from hbpsych_utils.core.config import ProfileError
    from hbpsych_utils.pipeline import graph, state

    stages = list(expected)
    if only:
        unknown = [s for s in only if s not in stages]
        if unknown:
            raise ProfileError(
                f"--only {' '.join(unknown)}: not a notebook of profile {profile.name!r} "
                f"(expected some of: {', '.join(stages) or 'none'})")
    named = set(only or ())
    reach = set(graph.dependents(named, profile)) if only else set()
    steps: list[Step] = []
    running: set[str] = set()
    for name in stages:
        current, why = state.self_state(run_dir, name, expected[name])
        if only and name in named:
            run, reason = True, "named by --only" + ("" if current else f": {why}")
        elif only and name not in reach:
            run, reason = False, ("up to date" if current else f"not current ({why}); not "
                                  "selected by --only")
        elif force:  # every stage, or with --only every dependent of the named ones
            run, reason = True, "--force"
        else:
            run, reason = not current, why or "up to date"
        if run and only and name not in named:
            blocked = [u for u in graph.spec(name).upstream(profile) if u in expected
                       and u not in running and not state.self_state(run_dir, u, expected[u])[0]]
            if blocked:
                run, reason = False, (f"not current ({why}); left as is: its upstream "
                                      f"{_names(blocked)} not current and not selected by "
                                      "--only")
        if run and only and name in named:
            stale = [u for u in graph.spec(name).upstream(profile) if u in expected
                     and u not in running and not state.self_state(run_dir, u, expected[u])[0]]
            if stale:
                raise ProfileError(
                    f"--only {name}: its upstream {_names(stale)} not current, so {name} would "
                    f"read stale inputs; add {' '.join(stale)} to --only, or run without --only")
        if run:
            running.add(name)
        steps.append(Step(name, run, reason, current))
    return steps


def book_call(run_dir: Path, build: Callable[[Path], T]) -> T:
    """``build(run_dir)`` (``reporting.book``'s ``build_book`` or ``render``), for ``run``,
    ``book`` and ``publish`` alike, with every file-system error naming its path: a ``book/``
    that is a symbolic link is refused before the build (the finished site replaces the folder
    whole, which neither follows nor removes a link), and an error a library raises without a
    file (a full disk while Sphinx or ``shutil`` writes) names the book's folder."""
    from hbpsych_utils.core.writes import with_path
    from hbpsych_utils.reporting import book

    target = run_dir / book.BOOK_DIR
    if target.is_symlink():
        raise OSError(None, f"a symbolic link (to {os.readlink(target)}) where the book's "
                      "folder is written whole: remove the link, or render into another "
                      "outputs folder", str(target))
    try:
        return build(run_dir)
    except OSError as exc:
        raise with_path(exc, target) from None


def _names(stages: list[str]) -> str:
    """``a is`` / ``a, b are`` (the stages named in a sentence, with its verb)."""
    return f"{', '.join(stages)} {'is' if len(stages) == 1 else 'are'}"


def run_profile(
    profile_name: str,
    *,
    outputs_root: Path | None = None,
    only: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    force: bool = False,
    echo: Callable[[str], None] = print,
    command: str | None = None,
) -> RunResult:
    """Run the stages of ``profile_name`` that are not current (see the module doc).

    ``overrides`` (dotted key -> value, ``config.parse_overrides``) tweak the profile's values;
    ``command`` is how the run was started (recorded for a second run to name, and said again
    to resume after Ctrl-C). A bad profile, override or ``only`` raises
    ``config.ProfileError`` before anything is written; another run into the same outputs
    folder raises ``runlock.RunLocked``; an outputs root or run folder in the project's source
    tree raises ``paths.UnsafePath`` (both before anything is written, as a bad profile name's
    ``config.ProfileError``); a damaged LLM store in the run folder raises
    ``llm.store.StoreError`` before any notebook, once the manifest records it (``error``);
    Ctrl-C raises :class:`RunInterrupted` once the manifest records the notebook it stopped."""
    from hbpsych_utils.core.writes import take_replaced
    from hbpsych_utils.pipeline import state
    from hbpsych_utils.runner import checks, execute

    log = logging.getLogger("papermill")  # nbclient logs through papermill's logger
    log.setLevel(logging.WARNING)
    if not any(isinstance(f, execute.KernelStartLog) for f in log.filters):
        log.addFilter(execute.KernelStartLog())
    overrides = dict(overrides or {})
    with execute.RunWatch() as watch:  # Ctrl-C, from here until the run returns
        profile, unread = checks.load_for_run(profile_name, overrides)
        # Absolute (a relative one is the caller's), so an executed copy opened from
        # outputs/<profile>/notebooks/ finds its run; never in the project's source tree.
        out = paths.run_folder(paths.outputs_root() if outputs_root is None else outputs_root,
                               profile.name)
        root = out.parent
        expected = state.expected_inputs(profile)
        steps = plan(profile, out, expected, only=only, force=force)
        command = command or default_command(profile_name, outputs_root, only, overrides, force)
        clean = scrubber()  # a failure's message may quote what a server sent back
        take_replaced()  # what an earlier run in this process noted was said there

        def say(line: str) -> None:
            echo(clean(line))

        with runlock.run_lock(out, profile.name, command):
            return _run_locked(profile, steps, expected, root, out, overrides, unread, say,
                               command, watch)


def _run_locked(profile: Profile, steps: list[Step], expected: Mapping[str, Inputs], root: Path,
                out: Path, overrides: dict[str, Any], unread: list[str],
                echo: Callable[[str], None], command: str, watch: RunWatch) -> RunResult:
    from papermill.exceptions import PapermillExecutionError

    from hbpsych_utils.core import config, secrets
    from hbpsych_utils.core.writes import scrub_file, take_replaced, with_path
    from hbpsych_utils.llm import store as llm_store
    from hbpsych_utils.pipeline import graph, stage, state
    from hbpsych_utils.runner import execute, manifest

    executed_dir = out / state.EXECUTED_DIR
    staging = out / stage.STAGING_DIR
    result = RunResult(profile=profile.name, outputs=out)
    applied = config.applied_overrides(profile, overrides)
    values = profile.model_dump(mode="json")
    to_run = [s.stage for s in steps if s.run]

    scrubbed: list[dict[str, Any]] = []  # records this invocation wrote with keys replaced

    def record(**extra: Any) -> None:
        stages = [s.model_dump() for s in state.stage_states(out, profile)]
        manifest.write_manifest(out, profile.name, result.notebooks, extra, overrides=applied,
                                profile_values=values, stages=stages, command=command,
                                scrubbed=scrubbed)

    if (out / llm_store.STORE_NAME).exists():  # every stage of the run shares it
        try:
            llm_store.check(out / llm_store.STORE_NAME)
        except llm_store.StoreError as exc:
            record(error=str(exc))
            raise
    executed_dir.mkdir(parents=True, exist_ok=True)
    replies = manifest.store_entries(out)

    def say_scrubbed() -> None:
        """Say (and keep for the manifest) where keys were replaced since the last call: in
        records this process wrote, and in replies a stage stored."""
        nonlocal replies
        for path, counts in take_replaced():
            scrubbed.append(manifest.record_entry(out, path, counts))
            echo(f"  {manifest.describe_entry(scrubbed[-1])}")
        now = manifest.store_entries(out)
        for entry in manifest.new_store_entries(replies, now):
            echo(f"  {manifest.describe_entry(entry)}")
        replies = now

    def stop(name: str, entry: dict[str, Any], status: str, error: dict[str, Any],
             start: float) -> tuple[list[str], list[str]]:
        """Record a notebook that started and did not succeed. Its stage folder keeps no
        stale output: it holds only a failure record. Returns the stages whose previous
        outputs were removed and those whose partial outputs were kept."""
        entry.update(status=status, seconds=round(time.perf_counter() - start, 2), error=error)
        staged = stage.staged_names(staging)
        names = sorted(staged | {name})
        previous = [n for n in names if (out / n).exists()]
        info = {"notebook": name, "status": status, "error": error,
                "executed": entry.get("executed")}
        records = [stage.retire_stage(out, n, info, staging) for n in names]
        entry["failure_record"] = [str(p) for p in records]
        shutil.rmtree(staging, ignore_errors=True)
        result.notebooks.append(entry)
        say_scrubbed()
        record()
        return previous, sorted(staged)

    def interrupted(name: str, entry: dict[str, Any], cell: int | None,
                    start: float) -> RunInterrupted:
        watch.stopping()
        stop(name, entry, "interrupted", {"cell": cell, "ename": "KeyboardInterrupt",
                                          "evalue": "Ctrl-C"}, start)
        where = f"{name} (at cell {cell})" if cell is not None else name
        return RunInterrupted(profile.name, out, name, where)

    def failed(name: str, entry: dict[str, Any], error: dict[str, Any], start: float,
               message: str) -> RunResult:
        previous, kept = stop(name, entry, "failed", error, start)
        result.failed = name
        lines = [message]
        if error.get("cell") is not None:
            lines.append(f"  executed copy with the traceback: {entry['executed']}")
        if previous:
            lines.append(f"  previous outputs of {', '.join(previous)} removed (each folder "
                         f"holds only {stage.FAILURE_RECORD})")
        if kept:
            where = ", ".join(str(out / stage.FAILED_DIR / n) for n in kept)
            lines.append(f"  what this attempt wrote is kept in {where}")
        behind = graph.dependents([name], profile)
        if behind:
            lines.append(f"  not current until it succeeds: {', '.join(behind)}")
        echo("\n".join(lines))
        build_book(f"the book ({name} failed)")
        return result

    def build_book(where: str) -> None:
        """The book, after the last notebook or a failure. Ctrl-C stops it, even one that a
        library swallowed. A run folder the book refuses (a stage's files that differ from its
        build record, left as they are by ``--only``) is one line, and the run is not ok."""
        try:
            from hbpsych_utils.reporting import book  # the run's offline reading copy

            try:
                echo(f"book: {book_call(out, book.build_book)}")
            except book.BookError as exc:
                result.book_error = str(exc)
                echo(f"FAILED: the book: {exc}")
        except KeyboardInterrupt:
            watch.requested = True
        if watch.requested:
            watch.stopping()
            raise RunInterrupted(profile.name, out, None, where)

    tweaks = f" with --set {config.describe_overrides(applied)}" if applied else ""
    echo(f"profile {profile.name!r}{tweaks}: {len(to_run)} of "
         f"{count(len(steps), 'notebook')} to run -> {out}")
    notice = secrets.placeholder_notice()
    if notice:
        echo(notice)
    if unread:
        echo("  keys of the profile that no stage reads under its modes:\n"
             + "\n".join(f"    {line}" for line in unread))
    for s in steps:
        if not s.run and s.current:
            result.up_to_date.append(s.stage)
        echo(f"  {s.stage}: " + (f"runs ({s.reason})" if s.run else s.reason))
    with watch.running_notebooks():
        for i, name in enumerate(to_run, start=1):
            nb = state.notebook_path(name)
            target = state.executed_path(out, name)
            start = time.perf_counter()
            entry: dict[str, Any] = {"notebook": name, "executed": str(target)}
            if watch.requested:  # Ctrl-C between notebooks: this one never started
                watch.stopping()
                result.notebooks.append({"notebook": name, "status": "interrupted",
                                         "seconds": 0.0, "started": False})
                record()
                raise RunInterrupted(profile.name, out, name, f"{name} (before it started)")
            declared = execute.declared_parameters(nb)
            values_in = graph.notebook_parameters(profile, name, injected_root(root))
            params = {k: v for k, v in values_in.items() if k in declared}
            echo(f"[{i}/{len(to_run)}] {name} ...")
            try:
                execute.execute(nb, target, params, staging, watch, echo)
            except PapermillExecutionError as exc:
                cell = execute.source_cell_number(target, exc.cell_index)
                if watch.requested:
                    raise interrupted(name, entry, cell, start) from None
                first_line = (exc.source or "").strip().splitlines()[:1]
                return failed(
                    name, entry, {"cell": cell, "ename": exc.ename, "evalue": exc.evalue},
                    start, f"FAILED: {name} at cell {cell} "
                    f"({first_line[0] if first_line else ''!s}): {exc.ename}: {exc.evalue}")
            except (execute.StopRequested, KeyboardInterrupt):
                cell = (execute.source_cell_number(target, watch.cell_index)
                        if watch.cell_index is not None else None)
                raise interrupted(name, entry, cell, start) from None
            except execute.KernelFailure as exc:
                cell = (execute.source_cell_number(target, exc.cell_index)
                        if exc.cell_index is not None else None)
                if watch.requested:
                    raise interrupted(name, entry, cell, start) from None
                error = {"cell": cell, "ename": type(exc.error).__name__,
                         "evalue": execute.one_line(exc.error)}
                if cell is None:
                    error["kernel"] = f"did not start ({exc.attempts} attempts)"
                    what = f"FAILED: {name}: its kernel did not start ({exc.attempts} attempts)"
                else:
                    from nbclient.exceptions import DeadKernelError

                    error["kernel"] = "died" if isinstance(exc.error, DeadKernelError) else "failed"
                    what = f"FAILED: {name} at cell {cell}: its kernel {error['kernel']}"
                return failed(name, entry, error, start,
                              f"{what}: {error['ename']}: {error['evalue']}")
            except OSError as exc:  # papermill saving the executed copy on a full disk: no file
                raise with_path(exc, target) from None
            finally:  # a cell may have shown what a server sent back
                scrub_file(target)
            (staging / name).mkdir(parents=True, exist_ok=True)
            state.write_build(staging / name, name, by=state.RUNNER, inputs=expected[name],
                              executed=target)
            stage.publish_staged(staging, out)
            entry.update(status="ok", seconds=round(time.perf_counter() - start, 2))
            result.notebooks.append(entry)
            echo(f"[{i}/{len(to_run)}] {name} done in {entry['seconds']:.1f}s")
            say_scrubbed()
            record()
        shutil.rmtree(staging, ignore_errors=True)
        if not to_run:
            record()
        if watch.requested:  # Ctrl-C after the last notebook finished
            raise RunInterrupted(profile.name, out, None, "the run (every notebook ran; the "
                                 "book was not built)")
    build_book("the book (every notebook ran)")
    left = len(steps) - len(to_run) - len(result.up_to_date)
    echo(f"profile {profile.name!r}: {count(len(to_run), 'notebook')} ran, "
         f"{len(result.up_to_date)} up to date" + (f", {left} left not current" if left else "")
         + f"; outputs in {out}")
    return result
