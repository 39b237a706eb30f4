"""A profile's run from start to end: load and check it, plan, run the notebooks, build the book.

Before anything runs, the profile is loaded and checked (:mod:`.checks`): a bad value, a bad
reference or a ``--set`` that no stage reads stops the run with exit 2. The plan
(:mod:`.plan`) then says what runs and why. Under the run lock, a damaged or empty LLM store in
the run folder stops the run before any notebook (the manifest says why); the notebooks run up
to ``jobs`` at a time (:mod:`.schedule`), each recorded as it ends (:mod:`.record`); the book is
built once, after the last (:mod:`.book_step`), and after a failure too, so it marks what is not
current. Ctrl-C at any point, from loading the profile to the book, ends the run with
:class:`~hbpsych_utils.runner.result.RunInterrupted` (:class:`~.execute.RunWatch`).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hbpsych_utils.core import config, paths, runlock, secrets
from hbpsych_utils.core.wording import count
from hbpsych_utils.core.writes import take_replaced
from hbpsych_utils.llm import store as llm_store
from hbpsych_utils.pipeline import state
from hbpsych_utils.runner import checks, execute, manifest, schedule
from hbpsych_utils.runner.book_step import build_book
from hbpsych_utils.runner.plan import Step, plan
from hbpsych_utils.runner.record import Recorder, clear_staging
from hbpsych_utils.runner.result import RunInterrupted, RunResult, and_list


def default_jobs() -> int:
    """How many notebooks run at once unless told: one per core of the machine."""
    return os.cpu_count() or 1


def run_profile(profile_name: str, *, outputs_root: Path | None, only: list[str] | None,
                overrides: Mapping[str, Any], force: bool, jobs: int | None,
                echo: Callable[[str], None], command: str | None) -> RunResult:
    """:func:`hbpsych_utils.runner.run.run_profile` (its doc says what it does and raises)."""
    _quiet_kernel_logs()
    overrides = dict(overrides)
    with execute.RunWatch() as watch:  # Ctrl-C, from here until the run returns
        profile, unread = checks.load_for_run(profile_name, overrides)
        # Absolute (a relative one is the caller's), so an executed copy opened from
        # outputs/<profile>/notebooks/ finds its run; never in the project's source tree.
        out = paths.run_folder(paths.outputs_root() if outputs_root is None else outputs_root,
                               profile.name)
        expected = state.expected_inputs(profile)
        steps = plan(profile, out, expected, only=only, force=force)
        command = command or default_command(profile_name, outputs_root, only, overrides,
                                             force, jobs)
        take_replaced()  # what an earlier run in this process noted was said there
        recorder = Recorder(profile, out, command, config.applied_overrides(profile, overrides),
                            scrubbed_echo(echo), [s.stage for s in steps])
        ctx = schedule.RunContext(profile, expected, injected_root(out.parent), recorder)
        with runlock.run_lock(out, profile.name, command):
            return _run_locked(ctx, steps, unread, watch, jobs or default_jobs())


def _run_locked(ctx: schedule.RunContext, steps: list[Step], unread: list[str],
                watch: execute.RunWatch, jobs: int) -> RunResult:
    rec = ctx.recorder
    _check_store(rec)
    (rec.out / state.EXECUTED_DIR).mkdir(parents=True, exist_ok=True)
    rec.replies = manifest.store_entries(rec.out)
    to_run = [s.stage for s in steps if s.run]
    for line in first_lines(rec, steps, unread, len(to_run)):
        rec.echo(line)
    board = _run_notebooks(ctx, to_run, watch, jobs)
    result = RunResult(profile=ctx.profile.name, outputs=rec.out, notebooks=rec.notebooks,
                       up_to_date=[s.stage for s in steps if not s.run and s.current],
                       failures=[s for s in to_run if s in board.failed],
                       not_run=[s for s in to_run if s in board.not_run])
    where = (f"the book ({and_list(result.failures)} failed)" if result.failures
             else "the book (every notebook ran)")
    build_book(result, watch, rec.echo, where)
    rec.echo(summary(result, steps))
    return result


def _run_notebooks(ctx: schedule.RunContext, to_run: list[str], watch: execute.RunWatch,
                   jobs: int) -> schedule.Board:
    """The plan's notebooks, each recorded as it ends (the manifest written once when none
    runs); the staging folder gone after them."""
    board = schedule.board(ctx.profile, to_run)
    clear_staging(ctx.recorder.out)
    with watch.running_notebooks():
        schedule.run_notebooks(ctx, board, watch, jobs)
        clear_staging(ctx.recorder.out)
        if not to_run:
            ctx.recorder.write()
        if watch.requested:  # Ctrl-C after the last notebook finished
            raise RunInterrupted(ctx.profile.name, ctx.recorder.out, [], "the run (every "
                                 "notebook ran; the book was not built)")
    return board


def _check_store(rec: Recorder) -> None:
    """Every stage of the run shares the run folder's LLM store: a damaged or empty one stops
    the run before any notebook, recorded in the manifest."""
    path = rec.out / llm_store.STORE_NAME
    if path.exists():
        try:
            llm_store.check(path)
        except llm_store.StoreError as exc:
            rec.write(error=str(exc))
            raise


def first_lines(rec: Recorder, steps: list[Step], unread: list[str], to_run: int) -> list[str]:
    """What a run says before its first notebook: the plan, and what it noticed."""
    tweaks = f" with --set {config.describe_overrides(rec.applied)}" if rec.applied else ""
    lines = [f"profile {rec.profile.name!r}{tweaks}: {to_run} of "
             f"{count(len(steps), 'notebook')} to run -> {rec.out}"]
    notice = secrets.placeholder_notice()
    if notice:
        lines.append(notice)
    if unread:
        lines.append("  keys of the profile that no stage reads under its modes:\n"
                     + "\n".join(f"    {line}" for line in unread))
    lines += [f"  {s.stage}: " + (f"runs ({s.reason})" if s.run else s.reason) for s in steps]
    return lines


def summary(result: RunResult, steps: list[Step]) -> str:
    """The run's last line: what ran, failed, was not run behind a failure, was up to date."""
    planned = sum(s.run for s in steps)
    ran = planned - len(result.failures) - len(result.not_run)
    parts = [f"{count(ran, 'notebook')} ran"]
    if result.failures:
        parts.append(f"{len(result.failures)} failed ({', '.join(result.failures)})")
    if result.not_run:
        parts.append(f"{len(result.not_run)} not run as an upstream failed "
                     f"({', '.join(result.not_run)})")
    parts.append(f"{len(result.up_to_date)} up to date")
    left = len(steps) - planned - len(result.up_to_date)
    if left:
        parts.append(f"{left} left not current")
    return f"profile {result.profile!r}: {', '.join(parts)}; outputs in {result.outputs}"


def scrubbed_echo(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``echo`` of each line without the API keys it may quote (a failure's message may quote
    what a server sent back), one line at a time from any thread."""
    clean, lock = secrets.scrubber(), threading.Lock()

    def say(line: str) -> None:
        with lock:
            echo(clean(line))

    return say


def _quiet_kernel_logs() -> None:
    """nbclient logs through papermill's logger: warnings only, and not the kernel start that
    failed (the runner retries it and says so, naming the notebook)."""
    log = logging.getLogger("papermill")
    log.setLevel(logging.WARNING)
    if not any(isinstance(f, execute.KernelStartLog) for f in log.filters):
        log.addFilter(execute.KernelStartLog())


def injected_root(root: Path) -> str:
    """The outputs root as the runner gives it to a notebook: relative to ``notebooks/`` when
    it lies inside the project (``../outputs``, as the parameters cell says by default, so the
    executed notebook and its book show no path of the machine), else absolute."""
    root = Path(root).resolve()
    if root.is_relative_to(paths.project_root().resolve()):
        return os.path.relpath(root, paths.notebooks_dir().resolve())
    return str(root)


def default_command(profile: str, outputs_root: Path | None, only: list[str] | None,
                    overrides: Mapping[str, Any], force: bool = False,
                    jobs: int | None = None) -> str:
    """The command line that repeats a run (for callers of ``run_profile`` that have none)."""
    args = [profile]
    if outputs_root is not None:
        args += ["--outputs", str(outputs_root)]
    if only:
        args += ["--only", *only]
    if force:
        args.append("--force")
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    return f"{shlex.quote(sys.executable)} -m hbpsych_utils run {shlex.join(args)}"
