"""Executing one notebook with papermill in this process: kernels, staging, Ctrl-C.

The kernels talk to this process over CurveZMQ-encrypted sockets (which also keeps ipykernel's
"running over TCP without encryption" warning out of the run's output). A kernel that fails
before the first cell starts is started once more; one that dies, or a second failure to
start, is reported as the notebook's failure. Ctrl-C is forwarded to the running kernels once
(:class:`RunWatch`), and no further cell starts; a second one kills them and stops at once.

Several notebooks may run at once, each in a thread of this process (``runner.schedule``), so
nothing here changes the process's state for one notebook: its kernel is given its staging
folder, the caller's directory and the project folder as its working directory when it starts
(:meth:`NotebookWatch.kernel_manager_class`), not through ``os.environ`` or ``chdir``.

A kernel's own error stream (its logging and what C code prints; a cell's output travels over
the kernel's sockets instead) reaches the terminal through this process, each line named by its
notebook and cleaned of API keys, until Ctrl-C: then the runner's one line says what stopped,
and what the stopping kernels print about their closing sockets is dropped.

A kernel ends without the interpreter's last garbage collections (:data:`KERNEL_EXIT_LINE`).
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hbpsych_utils.core import paths, secrets

if TYPE_CHECKING:
    from traitlets.config import Config


class StopRequested(Exception):
    """Raised by the cell-start hook after Ctrl-C: no further cell of the notebook starts."""


class KernelFailure(Exception):
    """The kernel did not start (twice), or died while a cell ran."""

    def __init__(self, error: BaseException, cell_index: int | None, attempts: int) -> None:
        super().__init__(str(error))
        self.error, self.cell_index, self.attempts = error, cell_index, attempts


def _kernel_errors() -> tuple[type[BaseException], ...]:
    """What a kernel that does not start (or dies) raises through papermill: jupyter_client's
    ``RuntimeError`` ('Kernel died before replying to kernel_info', "Kernel didn't respond"),
    nbclient's ``DeadKernelError`` (a ``RuntimeError``), timeouts and zmq errors ('Address
    already in use')."""
    import zmq

    return (RuntimeError, TimeoutError, zmq.error.ZMQError)


class RunWatch:
    """Ctrl-C and cell progress during a run, from the moment it starts until it returns.

    While notebooks run (:meth:`running_notebooks`), the first Ctrl-C is noted and forwarded to
    the kernels of the running cells (each kernel has its own process group: jupyter_client
    starts kernels in a new session, so the terminal's SIGINT reaches only this process; a
    kernel still starting is not sent it, it would print a traceback of its own); each cell
    stops with ``KeyboardInterrupt`` and papermill shuts its kernel down as after any failing
    cell. No further cell starts once it is noted. A second Ctrl-C kills the kernels, and the
    run stops as soon as nbclient sees them gone (within a second); a third raises
    ``KeyboardInterrupt`` here at once, except while a notebook's outcome is recorded
    (:meth:`recording`): then it is raised once the record is whole. Before the notebooks and
    while the book is built,
    Ctrl-C raises ``KeyboardInterrupt`` at once, as Python's own handler would, and is noted
    too: one that a library swallows (a bare ``except:``) still stops the run at the next
    check of :attr:`requested`. Once the runner records an interruption (:meth:`stopping`),
    Ctrl-C is ignored, so that the record is written whole.

    Each running notebook has a :class:`NotebookWatch` (:meth:`notebook`), which the notebook's
    thread updates; the signal handler runs in the main thread and reads them."""

    def __init__(self) -> None:
        self.requested = False
        self._notebooks: dict[str, NotebookWatch] = {}
        self._lock = threading.Lock()
        self._previous: Any = None
        self._installed = False
        self._forward = False  # notebooks are running: the first Ctrl-C goes to the kernels
        self._killed = False
        self._ignore = False
        self._recording = False
        self._pending = False  # a Ctrl-C that arrived while an outcome was recorded

    def __enter__(self) -> RunWatch:
        logging.getLogger("papermill").addFilter(self._after_ctrl_c)
        try:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        except ValueError:  # not the main thread: Ctrl-C keeps its default behaviour
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("papermill").removeFilter(self._after_ctrl_c)
        if self._installed:  # None: a handler not set from Python; Python's own is the default
            if self.requested:
                # the stopped kernels' clients are collected with Ctrl-C ignored: one arriving
                # in their finalizers would print a traceback of its own
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                gc.collect()
            signal.signal(signal.SIGINT, self._previous if self._previous is not None
                          else signal.default_int_handler)
            self._installed = False

    @contextmanager
    def running_notebooks(self) -> Iterator[None]:
        """Notebooks run in this block: the first Ctrl-C goes to the running kernels."""
        self._forward = True
        try:
            yield
        finally:
            self._forward = False

    def notebook(self, name: str) -> NotebookWatch:
        """The watch of notebook ``name``, which starts now (its kernels are signalled with
        the others' until :meth:`finished`)."""
        watch = NotebookWatch(self, name)
        with self._lock:
            self._notebooks[name] = watch
        return watch

    def finished(self, name: str) -> None:
        """Notebook ``name`` returned: its kernels are no longer signalled."""
        with self._lock:
            self._notebooks.pop(name, None)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """A notebook's outcome is recorded in this block (its outputs swapped in or retired,
        the manifest written): a Ctrl-C that would raise ``KeyboardInterrupt`` is held until
        the block ends and raised then, so the record is never cut in half (the run's line
        would name a notebook the manifest does not list)."""
        self._recording = True
        try:
            yield
        finally:
            self._recording = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    def stopping(self) -> None:
        """The runner records an interruption: further Ctrl-C is ignored."""
        self._ignore = True

    def kill_kernels(self) -> bool:
        """Kill the running notebooks' kernels (the runner stops at once); whether any was."""
        self._killed = self._signal_kernels(signal.SIGKILL) or self._killed
        return self._killed

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self._ignore:
            return
        first, self.requested = not self.requested, True
        if self._forward and first:
            # a starting kernel is stopped by on_cell_start
            self._signal_kernels(signal.SIGINT, in_cells_only=True)
            return
        if self._forward and not self._killed and self._signal_kernels(signal.SIGKILL):
            # a second Ctrl-C: nbclient sees its kernel die within a second and stops cleanly
            # (a KeyboardInterrupt raised inside its event loop would leave a task behind that
            # reports the dead kernel on the terminal)
            self._killed = True
            return
        if self._recording:
            self._pending = True
            return
        raise KeyboardInterrupt

    def _signal_kernels(self, signum: int, in_cells_only: bool = False) -> bool:
        """Send ``signum`` to the process groups of the running notebooks' kernels (with
        ``in_cells_only``, of those running a cell); whether any was sent it."""
        with self._lock:
            watches = list(self._notebooks.values())
        sent = False
        for watch in watches:
            if in_cells_only and watch.cell_index is None:
                continue
            for km in list(watch.kernels):
                pgid = getattr(getattr(km, "provisioner", None), "pgid", None)
                if pgid and pgid != os.getpgrp():  # the kernel's own group, never this one
                    try:
                        os.killpg(pgid, signum)
                        sent = True
                    except OSError:
                        pass
        return sent

    def _after_ctrl_c(self, record: logging.LogRecord) -> bool:
        """After Ctrl-C, nbclient's lines about the kernels it stops are not news: the runner's
        one line says what stopped."""
        return not self.requested


class NotebookWatch:
    """One notebook of a run as Ctrl-C sees it: the cell its kernel runs and the kernels
    started for it (a retried start makes a second), updated from the notebook's thread."""

    def __init__(self, run: RunWatch, name: str) -> None:
        self.run, self.name = run, name
        self.cell_index: int | None = None
        self.kernels: list[Any] = []

    @property
    def requested(self) -> bool:
        """Ctrl-C was pressed during the run."""
        return self.run.requested

    def start_notebook(self) -> None:
        """A kernel is about to start (again): no cell has run on it."""
        self.cell_index = None

    def on_cell_start(self, cell: Any = None, cell_index: int | None = None, **_: Any) -> None:
        """nbclient's ``on_cell_start`` hook."""
        if self.run.requested:
            raise StopRequested
        self.cell_index = cell_index

    def forward_errors(self, fd: int, write: Callable[[str], object]) -> None:
        """Pass each line the kernel writes on its error stream (the pipe's reading end
        ``fd``) to ``write``, named by the notebook and without API keys, until the pipe closes;
        after Ctrl-C the lines are read and dropped."""
        clean = secrets.scrubber()
        with open(fd, "rb", closefd=True) as stream:
            for raw in stream:
                if not self.requested:
                    line = raw.decode("utf-8", errors="replace").rstrip()
                    write(clean(f"  {self.name} (kernel): {line}\n"))

    def kernel_manager_class(self, env: Mapping[str, str] | None = None,
                             cwd: str | None = None) -> type:
        """nbclient's default kernel manager, remembering each kernel it starts for Ctrl-C,
        and starting it with ``env`` added to this process's environment and in ``cwd``, its
        error stream passed on by :meth:`forward_errors`.

        It also skips the SIGINT jupyter_client sends before every shutdown request: an idle
        kernel (nbclient shuts it down after the last cell) needs none, and one still
        finishing a reply logs "KeyboardInterrupt caught in kernel." into the run's output."""
        from jupyter_client import AsyncKernelManager

        watch, extra = self, dict(env or {})

        class WatchedKernelManager(AsyncKernelManager):
            def __init__(self, **kwargs: Any) -> None:
                super().__init__(**kwargs)
                watch.kernels.append(self)

            async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
                kw["env"] = {**kw.get("env", os.environ), **extra}
                kw["extra_arguments"] = [*kw.get("extra_arguments", ()),
                                         f"--IPKernelApp.exec_lines={KERNEL_EXIT_LINE}"]
                if cwd is not None:
                    kw.setdefault("cwd", cwd)
                # a pipe of our own, not PIPE: the provisioner closes the streams it made
                read_end, write_end = os.pipe()
                kw["stderr"] = write_end
                try:
                    await super().start_kernel(**kw)
                except BaseException:
                    os.close(read_end)
                    raise
                finally:
                    os.close(write_end)
                threading.Thread(target=watch.forward_errors, args=(read_end, _stderr_write),
                                 name=f"{watch.name} kernel errors", daemon=True).start()

            async def _async_interrupt_kernel(self) -> None:
                if not self.shutting_down:
                    await super()._async_interrupt_kernel()

        return WatchedKernelManager


KERNEL_EXIT_LINE = ("import hbpsych_utils.__main__ as _hb_main; "
                    "_hb_main.without_exit_collections(); del _hb_main")
"""Run by every kernel as it starts (IPython's ``exec_lines``, outside the notebook and its
history): the kernel's exit skips the interpreter's last garbage collections. A kernel that
ran chapters 08 and 12 then stopped in about 0.1 s instead of 0.5 s, which the runner waits for
after every notebook."""


def _stderr_write(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


class KernelStartLog(logging.Filter):
    """Drops nbclient's log line for a kernel that did not start: the runner retries it and
    reports it itself, naming the notebook."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Error occurred while starting new kernel")


def _reset(folder: Path) -> None:
    """Nothing of an earlier attempt in ``folder``; its parent made (the stage makes the
    folder when it first writes)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)


def execute(notebook: Path, target: Path, params: dict[str, Any], staging: Path,
            watch: NotebookWatch, echo: Callable[[str], None]) -> None:
    """Execute ``notebook`` into ``target`` with its stage writing into
    ``staging/<notebook's name>`` (emptied first; other notebooks of the run may be writing
    beside it).

    A kernel that fails before the first cell starts is started once more; a second failure,
    or a kernel that dies during a cell, is raised as ``KernelFailure``."""
    import papermill

    from hbpsych_utils.pipeline import stage

    errors = _kernel_errors()
    env = {stage.STAGING_ENV: str(staging / notebook.stem),
           paths.CALLER_DIR_ENV: str(paths.caller_dir())}
    for attempt in (1, 2):
        _reset(staging / notebook.stem)
        watch.start_notebook()
        try:
            papermill.execute_notebook(
                str(notebook),
                str(target),
                parameters=params,
                kernel_name="python3",
                progress_bar=False,
                log_output=False,
                config=kernel_config(),
                on_cell_start=watch.on_cell_start,
                kernel_manager_class=watch.kernel_manager_class(
                    env, cwd=str(paths.project_root())),
            )
            return
        except errors as exc:
            if watch.cell_index is None and attempt == 1 and not watch.requested:
                echo(f"  {notebook.stem}: the kernel did not start ({type(exc).__name__}: "
                     f"{one_line(exc)}); starting it once more")
                continue
            raise KernelFailure(exc, watch.cell_index, attempt) from exc


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def declared_parameters(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def source_cell_number(executed: Path, cell_index: int) -> int:
    """1-based number of a cell in the source notebook (papermill's injected cell not counted).

    ``cell_index`` counts the cells as executed: the error markers papermill adds to the saved
    copy (one at the top, one before the failing cell) are not among them."""
    import nbformat

    try:
        cells = nbformat.read(str(executed), as_version=4).cells
    except (OSError, ValueError):
        return cell_index + 1
    executed_cells = [c for c in cells
                      if "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
    injected = sum(
        "injected-parameters" in c.metadata.get("tags", []) for c in executed_cells[:cell_index]
    )
    return cell_index + 1 - injected


def kernel_config() -> Config:
    """nbclient configuration for the kernels a run starts.

    jupyter_client provisions CurveZMQ keys for kernels whose kernelspec declares support
    (ipykernel's does), so code and outputs are not sent in plain text and ipykernel has no
    reason to warn. Without libzmq's CURVE support the setting would be an error, so it is
    then left at jupyter_client's default."""
    import zmq
    from traitlets.config import Config

    encryption = "auto" if zmq.has("curve") else "disabled"
    return Config({"KernelManager": {"transport_encryption": encryption}})
