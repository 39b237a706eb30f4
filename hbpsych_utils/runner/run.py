"""Execute a profile's notebooks in order with papermill, in one Python process.

Each notebook gets the profile's values (with any ``--set`` overrides) injected into its
``parameters`` cell and is written, executed, to ``outputs/<profile>/notebooks/``. The run stops
at the first failing notebook and names it and the failing cell. One process for the whole run
keeps start-up cost to one kernel launch per notebook (benchmarks/run_all_overhead.py measures
it). The kernels talk to this process over CurveZMQ-encrypted sockets, which is also what keeps
ipykernel's "running over TCP without encryption" warning out of the run's output.

A run is safe to stop and to repeat:

- a notebook writes its stage's outputs into a staging folder, swapped into
  ``outputs/<profile>/<stage>/`` only when papermill reports success
  (:func:`hbpsych_utils.core.stage.publish_staged`); a failed or interrupted notebook leaves
  its stage folder holding only ``failed.json`` and its partial outputs under ``.failed/``;
- one run per outputs folder of a profile at a time (:mod:`hbpsych_utils.core.runlock`);
- a kernel that fails to start is started once more, then reported as the notebook's failure;
- Ctrl-C interrupts the running cell, records the notebook as ``interrupted`` and ends the run
  with exit code 130 and one line saying how to resume (paid model calls are in the store).

Exit codes of ``main``: 0 all ran, 1 a notebook failed, 2 bad profile or arguments, 3 another
run holds the outputs folder, 130 interrupted.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only what refuses a second run: the rest is imported where used, so that the command line
# answers "already running" before it loads pydantic, the profile or papermill.
from hbpsych_utils.core import paths, runlock

if TYPE_CHECKING:
    from traitlets.config import Config

    from hbpsych_utils.core import config


@dataclass
class RunResult:
    profile: str
    outputs: Path
    notebooks: list[dict[str, Any]] = field(default_factory=list)
    failed: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed is None


EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED, EXIT_INTERRUPTED = 1, 2, 3, 130


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run after it recorded where (a ``KeyboardInterrupt``, so a caller
    looping over runs stops too)."""

    def __init__(self, profile: str, outputs: Path, notebook: str | None, where: str) -> None:
        super().__init__(f"{where} of profile {profile!r} stopped by Ctrl-C")
        self.profile, self.outputs, self.notebook, self.where = profile, outputs, notebook, where


class _StopRequested(Exception):
    """Raised by the cell-start hook after Ctrl-C: no further cell of the notebook starts."""


class _KernelFailure(Exception):
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


class _RunWatch:
    """Ctrl-C and cell progress during a run.

    The first Ctrl-C is noted and forwarded to the running kernel (its own process group:
    jupyter_client starts kernels in a new session, so the terminal's SIGINT reaches only this
    process); the cell stops with ``KeyboardInterrupt`` and papermill shuts the kernel down as
    after any failing cell. No further cell starts once it is noted. A second Ctrl-C raises
    ``KeyboardInterrupt`` here at once."""

    def __init__(self) -> None:
        self.requested = False
        self.cell_index: int | None = None
        self.kernels: list[Any] = []
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> _RunWatch:
        try:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        except ValueError:  # not the main thread: Ctrl-C keeps its default behaviour
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:  # None: a handler not set from Python; Python's own is the default
            signal.signal(signal.SIGINT, self._previous if self._previous is not None
                          else signal.default_int_handler)
            self._installed = False

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        for km in self.kernels:
            pgid = getattr(getattr(km, "provisioner", None), "pgid", None)
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGINT)
                except OSError:
                    pass

    def start_notebook(self) -> None:
        self.cell_index = None
        self.kernels.clear()

    def on_cell_start(self, cell: Any = None, cell_index: int | None = None, **_: Any) -> None:
        """nbclient's ``on_cell_start`` hook."""
        if self.requested:
            raise _StopRequested
        self.cell_index = cell_index

    def kernel_manager_class(self) -> type:
        """nbclient's default kernel manager, remembering each kernel it starts for Ctrl-C.

        It also skips the SIGINT jupyter_client sends before every shutdown request: an idle
        kernel (nbclient shuts it down after the last cell) needs none, and one still
        finishing a reply logs "KeyboardInterrupt caught in kernel." into the run's output."""
        from jupyter_client import AsyncKernelManager

        watch = self

        class WatchedKernelManager(AsyncKernelManager):
            def __init__(self, **kwargs: Any) -> None:
                super().__init__(**kwargs)
                watch.kernels.append(self)

            async def _async_interrupt_kernel(self) -> None:
                if not self.shutting_down:
                    await super()._async_interrupt_kernel()

        return WatchedKernelManager


class _KernelStartLog(logging.Filter):
    """Drops nbclient's log line for a kernel that did not start: the runner retries it and
    reports it itself, naming the notebook."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Error occurred while starting new kernel")


@contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` for the duration (kernels inherit it at start-up)."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _reset(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def execute(notebook: Path, target: Path, params: dict[str, Any], staging: Path,
            watch: _RunWatch, echo: Callable[[str], None]) -> None:
    """Execute ``notebook`` into ``target`` with its stage writing into ``staging``.

    A kernel that fails before the first cell starts is started once more; a second failure,
    or a kernel that dies during a cell, is raised as ``_KernelFailure``."""
    import papermill

    from hbpsych_utils.core import stage

    errors = _kernel_errors()
    for attempt in (1, 2):
        _reset(staging)
        watch.start_notebook()
        try:
            with _environment(stage.STAGING_ENV, str(staging / notebook.stem)):
                papermill.execute_notebook(
                    str(notebook),
                    str(target),
                    parameters=params,
                    kernel_name="python3",
                    cwd=str(paths.project_root()),
                    progress_bar=False,
                    log_output=False,
                    config=kernel_config(),
                    on_cell_start=watch.on_cell_start,
                    kernel_manager_class=watch.kernel_manager_class(),
                )
            return
        except errors as exc:
            if watch.cell_index is None and attempt == 1 and not watch.requested:
                echo(f"  {notebook.stem}: the kernel did not start ({type(exc).__name__}: "
                     f"{_one_line(exc)}); starting it once more")
                continue
            raise _KernelFailure(exc, watch.cell_index, attempt) from exc


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def default_command(profile: str, outputs_root: Path | None, only: list[str] | None,
                    overrides: Mapping[str, Any]) -> str:
    """The command line that repeats a run (for callers of ``run_profile`` that have none)."""
    args = [profile]
    if outputs_root is not None:
        args += ["--outputs", str(outputs_root)]
    if only:
        args += ["--only", *only]
    for key, value in overrides.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    return f"{shlex.quote(sys.executable)} -m hbpsych_utils run {shlex.join(args)}"


def profile_notebooks(profile: config.Profile) -> list[Path]:
    nb_dir = paths.notebooks_dir()
    if profile.notebooks is not None:
        return [nb_dir / f"{stem}.ipynb" for stem in profile.notebooks]
    return sorted(nb_dir.glob("[0-9][0-9]_*.ipynb"))


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


def select_notebooks(profile: config.Profile, only: list[str] | None) -> list[Path]:
    """The profile's notebooks, restricted to the stems in ``only`` (each must be one of them)."""
    from hbpsych_utils.core import config

    notebooks = profile_notebooks(profile)
    if not only:
        return notebooks
    stems = [nb.stem for nb in notebooks]
    unknown = [stem for stem in only if stem not in stems]
    if unknown:
        raise config.ProfileError(
            f"--only {' '.join(unknown)}: not a notebook of profile {profile.name!r} "
            f"(expected some of: {', '.join(stems) or 'none'})"
        )
    return [nb for nb in notebooks if nb.stem in set(only)]


def run_profile(
    profile_name: str,
    *,
    outputs_root: Path | None = None,
    only: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    echo: Callable[[str], None] = print,
    command: str | None = None,
) -> RunResult:
    """Run the notebooks of ``profile_name``; ``only`` restricts to some notebook stems and
    ``overrides`` (dotted key -> value, ``config.parse_overrides``) tweak the profile's values;
    ``command`` is how the run was started (recorded for a second run to name, and said again
    to resume after Ctrl-C).

    Everything is validated before the first notebook starts (a bad profile, override or
    ``only`` raises ``config.ProfileError``); another run into the same outputs folder raises
    ``runlock.RunLocked`` before anything is written; Ctrl-C raises :class:`RunInterrupted`
    once the manifest records the notebook it stopped."""
    from hbpsych_utils.core import config

    log = logging.getLogger("papermill")  # nbclient logs through papermill's logger
    log.setLevel(logging.WARNING)
    if not any(isinstance(f, _KernelStartLog) for f in log.filters):
        log.addFilter(_KernelStartLog())
    overrides = dict(overrides or {})
    profile = config.load_profile(profile_name, overrides)
    notebooks = select_notebooks(profile, only)
    # Absolute, so an executed copy opened from outputs/<profile>/notebooks/ finds its run.
    root = (Path(outputs_root) if outputs_root else paths.outputs_root()).resolve()
    out = root / profile.name
    command = command or default_command(profile_name, outputs_root, only, overrides)
    with runlock.run_lock(out, profile.name, command):
        return _run_locked(profile, notebooks, root, out, overrides, echo)


def _run_locked(profile: config.Profile, notebooks: list[Path], root: Path, out: Path,
                overrides: dict[str, Any], echo: Callable[[str], None]) -> RunResult:
    from papermill.exceptions import PapermillExecutionError

    from hbpsych_utils.core import config, manifest, stage

    executed_dir = out / "notebooks"
    executed_dir.mkdir(parents=True, exist_ok=True)
    staging = out / stage.STAGING_DIR
    result = RunResult(profile=profile.name, outputs=out)
    applied = config.applied_overrides(profile, overrides)
    values = profile.model_dump(mode="json")

    def record() -> None:
        manifest.write_manifest(
            out, profile.name, result.notebooks, overrides=applied, profile_values=values
        )

    def stop(nb: Path, entry: dict[str, Any], status: str, error: dict[str, Any],
             start: float) -> tuple[list[str], list[str]]:
        """Record a notebook that started and did not succeed. Its stage folders keep no
        stale output: each holds only a failure record. Returns the stages whose previous
        outputs were removed and those whose partial outputs were kept."""
        entry.update(status=status, seconds=round(time.perf_counter() - start, 2), error=error)
        staged = stage.staged_names(staging)
        names = sorted(staged | {nb.stem}) if (out / nb.stem).exists() else sorted(staged)
        previous = [name for name in names if (out / name).exists()]
        info = {"notebook": nb.stem, "status": status, "error": error,
                "executed": entry.get("executed")}
        records = [stage.retire_stage(out, name, info, staging) for name in names]
        if records:
            entry["failure_record"] = [str(p) for p in records]
        shutil.rmtree(staging, ignore_errors=True)
        result.notebooks.append(entry)
        record()
        return previous, sorted(staged)

    def interrupted(nb: Path, entry: dict[str, Any], cell: int | None,
                    start: float) -> RunInterrupted:
        stop(nb, entry, "interrupted", {"cell": cell, "ename": "KeyboardInterrupt",
                                        "evalue": "Ctrl-C"}, start)
        where = f"{nb.stem} (at cell {cell})" if cell is not None else nb.stem
        return RunInterrupted(profile.name, out, nb.stem, where)

    def failed(nb: Path, entry: dict[str, Any], error: dict[str, Any], start: float,
               message: str) -> RunResult:
        previous, kept = stop(nb, entry, "failed", error, start)
        result.failed = nb.stem
        lines = [message]
        if error.get("cell") is not None:
            lines.append(f"  executed copy with the traceback: {entry['executed']}")
        if previous:
            lines.append(f"  previous outputs of {', '.join(previous)} removed (each folder "
                         f"holds only {stage.FAILURE_RECORD})")
        if kept:
            where = ", ".join(str(out / stage.FAILED_DIR / name) for name in kept)
            lines.append(f"  what this attempt wrote is kept in {where}")
        echo("\n".join(lines))
        return result

    tweaks = f" with --set {config.describe_overrides(applied)}" if applied else ""
    echo(f"profile {profile.name!r}{tweaks}: {len(notebooks)} notebook(s) -> {out}")
    with _RunWatch() as watch:
        for i, nb in enumerate(notebooks, start=1):
            target = executed_dir / nb.name
            start = time.perf_counter()
            entry: dict[str, Any] = {"notebook": nb.stem, "executed": str(target)}
            if watch.requested:  # Ctrl-C between notebooks: this one never started
                result.notebooks.append({"notebook": nb.stem, "status": "interrupted",
                                         "seconds": 0.0, "started": False})
                record()
                raise RunInterrupted(profile.name, out, nb.stem, f"{nb.stem} (before it started)")
            declared = declared_parameters(nb)
            nb_values = config.notebook_parameters(profile, nb.stem, root)
            params = {k: v for k, v in nb_values.items() if k in declared}
            echo(f"[{i}/{len(notebooks)}] {nb.stem} ...")
            try:
                execute(nb, target, params, staging, watch, echo)
            except PapermillExecutionError as exc:
                cell = source_cell_number(target, exc.cell_index)
                if watch.requested:
                    raise interrupted(nb, entry, cell, start) from None
                first_line = (exc.source or "").strip().splitlines()[:1]
                return failed(
                    nb, entry, {"cell": cell, "ename": exc.ename, "evalue": exc.evalue}, start,
                    f"FAILED: {nb.stem} at cell {cell} "
                    f"({first_line[0] if first_line else ''!s}): {exc.ename}: {exc.evalue}")
            except (_StopRequested, KeyboardInterrupt):
                cell = (source_cell_number(target, watch.cell_index)
                        if watch.cell_index is not None else None)
                raise interrupted(nb, entry, cell, start) from None
            except _KernelFailure as exc:
                cell = (source_cell_number(target, exc.cell_index)
                        if exc.cell_index is not None else None)
                if watch.requested:
                    raise interrupted(nb, entry, cell, start) from None
                error = {"cell": cell, "ename": type(exc.error).__name__,
                         "evalue": _one_line(exc.error)}
                if cell is None:
                    error["kernel"] = f"did not start ({exc.attempts} attempts)"
                    what = f"FAILED: {nb.stem}: its kernel did not start ({exc.attempts} attempts)"
                else:
                    from nbclient.exceptions import DeadKernelError

                    error["kernel"] = "died" if isinstance(exc.error, DeadKernelError) else "failed"
                    what = f"FAILED: {nb.stem} at cell {cell}: its kernel {error['kernel']}"
                return failed(nb, entry, error, start,
                              f"{what}: {error['ename']}: {error['evalue']}")
            published = stage.publish_staged(staging, out)
            if nb.stem not in published:
                stage.clear_failure_record(out, nb.stem)
            entry.update(status="ok", seconds=round(time.perf_counter() - start, 2))
            result.notebooks.append(entry)
            echo(f"[{i}/{len(notebooks)}] {nb.stem} done in {entry['seconds']:.1f}s")
            record()
        shutil.rmtree(staging, ignore_errors=True)
        if not notebooks:
            record()
        if watch.requested:  # Ctrl-C after the last notebook finished
            raise RunInterrupted(profile.name, out, None, "the run (every notebook ran; the "
                                 "book was not built)")
    from hbpsych_utils.reporting import book  # the run's offline reading copy (a top layer)

    try:
        echo(f"book: {book.build_book(out)}")
    except KeyboardInterrupt:
        raise RunInterrupted(profile.name, out, None, "the book (every notebook ran)") from None
    echo(f"profile {profile.name!r}: all {len(notebooks)} notebook(s) ran; outputs in {out}")
    return result


def profile_dir(profile: str, outputs_root: Path | None) -> Path:
    """``outputs/<profile>/`` of a profile given by name or YAML path, as ``run_profile`` will
    name it (the file's stem), without reading the profile."""
    p = Path(profile)
    name = p.stem if p.suffix in (".yaml", ".yml") else profile
    return (Path(outputs_root) if outputs_root else paths.outputs_root()).resolve() / name


LAUNCHER_ENV = "HBPSYCH_LAUNCHER"
"""How the run command was started (``bash run_all.sh``), set by run_all.sh for the resume
line; otherwise ``<this python> -m hbpsych_utils run``."""


def interruption_line(exc: RunInterrupted, command: str) -> str:
    """The one line Ctrl-C leaves: what stopped, and the command that resumes the run."""
    store = exc.outputs / "llm_store.sqlite"
    paid = (f" (model calls already paid are reused from {store})" if store.is_file() else "")
    return f"interrupted: {exc.where} of profile {exc.profile!r}; resume with: {command}{paid}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(
        prog="hbpsych run", description=__doc__.split("\n\n")[0],
        epilog="exit codes: 0 all notebooks ran, 1 a notebook failed, 2 bad profile or "
        "arguments, 3 another run holds the outputs folder, 130 interrupted (Ctrl-C)")
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--only", nargs="*", help="notebook stems to run (default: the profile's)")
    ap.add_argument("--outputs", type=Path, default=None, help="outputs root (default: outputs/)")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one profile value, e.g. --set judges.subset=hard or --set seed=123 "
        "(the value is read as YAML; repeat for several)",
    )
    args = ap.parse_args(argv)
    launcher = os.environ.get(LAUNCHER_ENV) or f"{shlex.quote(sys.executable)} -m hbpsych_utils run"
    command = f"{launcher} {shlex.join(argv)}".rstrip()
    try:
        runlock.refuse_if_running(profile_dir(args.profile, args.outputs), args.profile)
    except runlock.RunLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    from hbpsych_utils.core import config

    try:
        overrides = config.parse_overrides(args.overrides)
        result = run_profile(
            args.profile, outputs_root=args.outputs, only=args.only, overrides=overrides,
            command=command,
        )
    except config.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except runlock.RunLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except RunInterrupted as exc:
        print(interruption_line(exc, command), file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # before the run recorded anything, or a repeated Ctrl-C
        print(f"interrupted; run again with: {command}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if result.ok else EXIT_FAILED
