"""The plan's notebooks run, up to ``jobs`` at a time, each as soon as what it reads is ready.

A notebook waits for every notebook of the plan upstream of it in the stage graph
(:meth:`hbpsych_utils.pipeline.graph.StageSpec.upstream` under the profile, followed through
stages the plan leaves as they are); the ready ones start in the plan's order. The notebooks
that call models (:func:`calls_models`) share the run's LLM store, whose contents they read
(answers already paid for are not bought again, and grading reports everything the store has
paid for so far): they run one at a time, in the plan's order, so that each finds the store as
a run of one notebook at a time leaves it, and the outputs do not depend on which finished
first. Each runs in a
thread of this process (:func:`hbpsych_utils.runner.step.execute_step`, its kernel a process of
its own); the main thread starts them, waits, and records each outcome as it arrives
(:class:`hbpsych_utils.runner.record.Recorder`), so the manifest and the run folder are written
by one thread, one step at a time. ``jobs=1`` runs them one after another in the plan's order.

A notebook that fails stops the notebooks downstream of it (recorded ``not_run``, naming it)
and nothing else: the other branches run to the end. Ctrl-C stops them all: no notebook starts
once it is pressed, the running ones are interrupted (``execute.RunWatch``), and once each is
recorded the run ends with one :class:`~hbpsych_utils.runner.result.RunInterrupted` naming
them. An error that ends the run (a full disk while papermill saves an executed copy or the
runner writes a record) lets the running notebooks finish and is then raised: no kernel is left
behind.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hbpsych_utils.core.writes import scrub_file, with_path
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.runner import execute
from hbpsych_utils.runner.record import Recorder
from hbpsych_utils.runner.result import RunInterrupted, and_list, stopped_at
from hbpsych_utils.runner.step import Job, Outcome, execute_step

WAIT_SECONDS = 0.5
"""How long the main thread waits for an outcome at a time (Ctrl-C is handled meanwhile)."""


@dataclass(frozen=True)
class RunContext:
    """What every notebook of the run shares: the profile, the inputs each stage's build
    record will hold, the outputs root as the notebooks are given it, and the recorder."""

    profile: Profile
    expected: Mapping[str, state.Inputs]
    injected_root: str
    recorder: Recorder


@dataclass
class Board:
    """The plan's notebooks as they run: waiting (in the plan's order), running, and how
    those that ended did."""

    waiting: list[str]
    waits_for: dict[str, set[str]]
    """Each notebook -> the notebooks of the plan upstream of it (it runs once they
    succeeded, and not at all if one of them did not)."""
    after: dict[str, set[str]]
    """Each notebook -> the notebooks that must have ended before it starts, however they
    ended (the earlier notebooks that call models, for one that calls models)."""
    total: int
    running: dict[str, Job] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)
    succeeded: set[str] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    interrupted: list[Outcome] = field(default_factory=list)
    fatal: BaseException | None = None
    started: int = 0

    def ready(self, limit: int) -> list[str]:
        """The waiting notebooks whose upstream has succeeded, as many as may start now."""
        free = limit - len(self.running)
        ready = [s for s in self.waiting
                 if self.waits_for[s] <= self.succeeded and self.after[s] <= self.ended]
        return ready[:max(free, 0)]

    def stop_behind(self, failed: str) -> list[str]:
        """Take the waiting notebooks downstream of ``failed`` off the board (they will not
        run); return them."""
        behind = [s for s in self.waiting if failed in self.waits_for[s]]
        self.waiting = [s for s in self.waiting if s not in behind]
        self.not_run += behind
        self.ended.update(behind)
        return behind


def calls_models(profile: Profile, name: str) -> bool:
    """Whether stage ``name`` calls models under ``profile`` (then it opens the run's LLM
    store): the graph has it read every setting of the calls (``graph.LLM_CALL_KEYS``)."""
    return set(graph.LLM_CALL_KEYS) <= set(graph.keys_read(profile, name))


def board(profile: Profile, to_run: list[str]) -> Board:
    """The board of a plan that runs ``to_run`` (in the plan's order)."""
    planned = set(to_run)
    waits_for: dict[str, set[str]] = {s: set() for s in to_run}
    for name in to_run:
        for below in graph.dependents([name], profile):
            if below in planned:
                waits_for[below].add(name)
    callers = [s for s in to_run if calls_models(profile, s)]
    after = {s: set(callers[:callers.index(s)]) if s in callers else set() for s in to_run}
    return Board(waiting=list(to_run), waits_for=waits_for, after=after, total=len(to_run))


def run_notebooks(ctx: RunContext, board_: Board, watch: execute.RunWatch, jobs: int) -> None:
    """Run the board's notebooks, up to ``jobs`` at once, recording each (see the module doc).
    Raises :class:`RunInterrupted` after Ctrl-C, or the error that ended the run."""
    done: queue.Queue[Outcome] = queue.Queue()
    while board_.waiting or board_.running:
        try:
            if not watch.requested and board_.fatal is None:
                for name in board_.ready(jobs):
                    _start(ctx, board_, name, watch, done)
            if not board_.running:
                break  # Ctrl-C, or an error that ends the run: nothing more starts
            outcome = _next(done)
            with watch.recording():
                _record(ctx, board_, outcome, watch)
        except KeyboardInterrupt:  # a Ctrl-C the kernels did not take: stop them at once
            watch.requested = True
            watch.stopping()
            watch.kill_kernels()
        except Exception as exc:  # ends the run, once the running notebooks have ended
            board_.fatal = board_.fatal or exc
    if board_.fatal is not None:
        raise board_.fatal
    if watch.requested:
        _interrupted(ctx, board_, watch)


def _start(ctx: RunContext, board_: Board, name: str, watch: execute.RunWatch,
           done: queue.Queue[Outcome]) -> None:
    board_.waiting.remove(name)
    board_.started += 1
    rec = ctx.recorder
    notebook = state.notebook_path(name)
    declared = execute.declared_parameters(notebook)
    values = graph.notebook_parameters(ctx.profile, name, ctx.injected_root)
    job = Job(stage=name, notebook=notebook, target=state.executed_path(rec.out, name),
              params={k: v for k, v in values.items() if k in declared},
              index=board_.started, total=board_.total)
    board_.running[name] = job
    rec.echo(f"{job.label} ...")
    thread = threading.Thread(target=_work, name=f"notebook {name}", daemon=True,
                              args=(job, rec.staging, watch.notebook(name), rec.echo, done.put))
    thread.start()


def _work(job: Job, staging: Path, watch: execute.NotebookWatch, echo: Callable[[str], None],
          report: Callable[[Outcome], None]) -> None:
    report(execute_step(job, staging, watch, echo))


def _next(done: queue.Queue[Outcome]) -> Outcome:
    """The next outcome, waiting for it in slices so that Ctrl-C is handled meanwhile."""
    while True:
        try:
            return done.get(timeout=WAIT_SECONDS)
        except queue.Empty:
            continue


def _record(ctx: RunContext, board_: Board, outcome: Outcome, watch: execute.RunWatch) -> None:
    """Record what became of a notebook, and what it means for those waiting."""
    job, rec = outcome.job, ctx.recorder
    del board_.running[job.stage]
    board_.ended.add(job.stage)
    watch.finished(job.stage)
    scrub_file(job.target)  # a cell may have shown what a server sent back
    if outcome.raised is not None:
        exc = outcome.raised
        board_.fatal = board_.fatal or (with_path(exc, job.target)
                                        if isinstance(exc, OSError) else exc)
    elif outcome.status == "ok":
        board_.succeeded.add(job.stage)
        rec.succeeded(outcome, ctx.expected[job.stage])
    elif outcome.status == "interrupted":
        board_.interrupted.append(outcome)
        rec.stopped(outcome)
    else:
        board_.failed.append(job.stage)
        for name in board_.stop_behind(job.stage):
            rec.not_started(name, "not_run", reason=f"its upstream {job.stage} failed")
        rec.failed(outcome)


def _interrupted(ctx: RunContext, board_: Board, watch: execute.RunWatch) -> None:
    """After Ctrl-C, once every running notebook is recorded: the one interruption, naming
    the notebooks it stopped (or the next one, when none was running)."""
    watch.stopping()
    rec = ctx.recorder
    stopped = sorted(board_.interrupted, key=lambda o: o.job.index)
    if stopped:
        raise RunInterrupted(rec.profile.name, rec.out, [o.job.stage for o in stopped],
                             and_list([stopped_at(o.job.stage, o.cell) for o in stopped]))
    if board_.waiting:  # Ctrl-C between notebooks: the next one never started
        name = board_.waiting[0]
        rec.not_started(name, "interrupted")
        rec.write()
        raise RunInterrupted(rec.profile.name, rec.out, [name], f"{name} (before it started)")
