"""One step of a run: a notebook executed into its staging folder, and what became of it.

:func:`execute_step` runs in a thread of the runner (``runner.schedule``) and only executes:
it returns an :class:`Outcome` (succeeded, failed with the error to record, interrupted at a
cell) and leaves every record of the run (build records, failure records, the manifest) to the
runner's main thread (``runner.record``), so that those are written one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hbpsych_utils.runner import execute

if TYPE_CHECKING:  # papermill and nbclient are imported when a notebook runs, not before
    from papermill.exceptions import PapermillExecutionError

Status = Literal["ok", "failed", "interrupted"]


@dataclass(frozen=True)
class Job:
    """A notebook to execute: its stage, where its executed copy goes, the parameters injected
    into its ``parameters`` cell and its place in the run (``[index/total]`` on its lines)."""

    stage: str
    notebook: Path
    target: Path
    params: dict[str, Any]
    index: int
    total: int

    @property
    def label(self) -> str:
        """How the notebook's progress lines name it: ``[3/15] 03_review_round1``."""
        return f"[{self.index}/{self.total}] {self.stage}"


@dataclass(frozen=True)
class Outcome:
    """What became of a job: ``ok``; ``failed`` with the error recorded for it (``cell``,
    ``ename``, ``evalue``, and ``kernel`` when its kernel did not start or died) and the line
    that says so; ``interrupted`` by Ctrl-C (``cell``: where, if a cell ran). ``raised`` is an
    error that ends the run (the disk filled up while papermill saved the executed copy)."""

    job: Job
    status: Status
    seconds: float
    error: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    raised: BaseException | None = None

    @property
    def cell(self) -> int | None:
        return self.error.get("cell")


def execute_step(job: Job, staging: Path, watch: execute.NotebookWatch,
                 echo: Callable[[str], None]) -> Outcome:
    """Execute ``job``'s notebook (its stage writes into ``staging/<stage>``) and say what
    became of it; never raises (an unexpected error is the outcome's ``raised``)."""
    from papermill.exceptions import PapermillExecutionError

    start = time.perf_counter()

    def outcome(status: Status, **kw: Any) -> Outcome:
        return Outcome(job, status, round(time.perf_counter() - start, 2), **kw)

    try:
        execute.execute(job.notebook, job.target, job.params, staging, watch, echo)
    except PapermillExecutionError as exc:
        cell = execute.source_cell_number(job.target, exc.cell_index)
        if watch.requested:
            return outcome("interrupted", error=_interruption(cell))
        return outcome("failed", **_cell_failure(job.stage, cell, exc))
    except (execute.StopRequested, KeyboardInterrupt):
        return outcome("interrupted", error=_interruption(_cell_of(job.target, watch.cell_index)))
    except execute.KernelFailure as exc:
        cell = _cell_of(job.target, exc.cell_index)
        if watch.requested:
            return outcome("interrupted", error=_interruption(cell))
        return outcome("failed", **_kernel_failure(job.stage, cell, exc))
    except BaseException as exc:  # the runner's main thread raises it
        return outcome("failed", raised=exc)
    return outcome("ok")


def _cell_of(target: Path, cell_index: int | None) -> int | None:
    """The source notebook's cell number of ``cell_index`` (``None``: no cell ran)."""
    return execute.source_cell_number(target, cell_index) if cell_index is not None else None


def _interruption(cell: int | None) -> dict[str, Any]:
    return {"cell": cell, "ename": "KeyboardInterrupt", "evalue": "Ctrl-C"}


def _cell_failure(stage: str, cell: int, exc: PapermillExecutionError) -> dict[str, Any]:
    """A cell that raised: the error recorded and the line that says so."""
    first_line = (exc.source or "").strip().splitlines()[:1]
    return {"error": {"cell": cell, "ename": exc.ename, "evalue": exc.evalue},
            "message": f"FAILED: {stage} at cell {cell} "
                       f"({first_line[0] if first_line else ''!s}): {exc.ename}: {exc.evalue}"}


def _kernel_failure(stage: str, cell: int | None, exc: execute.KernelFailure
                    ) -> dict[str, Any]:
    """A kernel that did not start (twice) or died in a cell: the error and its line."""
    error: dict[str, Any] = {"cell": cell, "ename": type(exc.error).__name__,
                             "evalue": execute.one_line(exc.error)}
    if cell is None:
        error["kernel"] = f"did not start ({exc.attempts} attempts)"
        what = f"FAILED: {stage}: its kernel did not start ({exc.attempts} attempts)"
    else:
        from nbclient.exceptions import DeadKernelError

        error["kernel"] = "died" if isinstance(exc.error, DeadKernelError) else "failed"
        what = f"FAILED: {stage} at cell {cell}: its kernel {error['kernel']}"
    return {"error": error, "message": f"{what}: {error['ename']}: {error['evalue']}"}
