"""``python -m hbpsych_utils run`` (what ``run_all.sh`` calls): arguments, exit codes, Ctrl-C;
and ``publish`` (:func:`publish_main`) and ``book`` (:func:`book_main`), which read a run
folder the same way.

Exit codes: 0 every planned notebook ran, 1 a notebook failed or the run could not go on (a
damaged or empty LLM store, a file-system error: one line naming the path and the problem; a
book the run folder cannot be rendered into), 2 bad profile or arguments (including a ``--set``
that no stage reads, a profile name that is not a plain name, an outputs root in the project's
source tree: one line for an argument), 3 another command holds the outputs folder, 130
interrupted (Ctrl-C, at any point, once or more: one line).

A relative ``--outputs`` or profile file is the caller's: relative to the directory the
command was started from (``run_all.sh`` says which, :func:`core.paths.from_caller`).
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import signal
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from hbpsych_utils.core import arguments, paths, runlock
from hbpsych_utils.core.secrets import scrub
from hbpsych_utils.core.wording import count
from hbpsych_utils.runner.book_step import book_call
from hbpsych_utils.runner.run import RunInterrupted, run_profile

EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED, EXIT_INTERRUPTED = 1, 2, 3, 130

LAUNCHER_ENV = "HBPSYCH_LAUNCHER"
"""How the run command was started (``bash run_all.sh``), set by run_all.sh for the resume
line; otherwise ``<this python> -m hbpsych_utils run``."""


def profile_dir(profile: str, outputs_root: Path | None) -> Path:
    """``outputs/<profile>/`` of a profile given by name or YAML path, as ``run_profile`` will
    name it (the file's stem), without reading the profile; ``paths.UnsafePath`` when the name
    is not a plain name or the folder would be in the project's source tree
    (``paths.run_folder``)."""
    root = paths.outputs_root() if outputs_root is None else outputs_root
    return paths.run_folder(root, paths.profile_name(profile))


def interruption_line(exc: RunInterrupted, command: str) -> str:
    """The one line Ctrl-C leaves: what stopped, and the command that resumes the run."""
    store = exc.outputs / "llm_store.sqlite"
    paid = (f" (model calls already paid are reused from {store})" if store.is_file() else "")
    return f"interrupted: {exc.where} of profile {exc.profile!r}; resume with: {command}{paid}"


def parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="hbpsych run",
        description="Run a profile's notebooks: those whose inputs changed since their last "
        "successful run, and everything downstream of them.",
        epilog="exit codes: 0 every planned notebook ran, 1 a notebook failed or the run "
        "could not go on (a damaged or empty LLM store, a file-system error, a book it cannot "
        "build), 2 bad profile or arguments (a --set no stage reads included), 3 another run "
        "holds the outputs folder, 130 interrupted (Ctrl-C)")
    _run_folder_arguments(ap)
    ap.add_argument("--only", nargs="*", help="stages to run (with whichever of their "
                    "dependents are then not current)")
    ap.add_argument("--force", action="store_true", help="run every stage of the profile, "
                    "current or not (with --only: the named stages and all their dependents)")
    ap.add_argument("--jobs", type=jobs, default=None, metavar="N",
                    help="how many notebooks run at once, each as soon as the notebooks it "
                    "reads from have succeeded (default: the machine's cores, "
                    f"{os.cpu_count() or 1} here; 1 runs them one after another)")
    ap.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override one profile value, e.g. --set judges.subset=hard or --set seed=123 "
        "(the value is read as YAML; repeat for several)")
    return ap


def jobs(text: str) -> int:
    """``--jobs``: a whole number of notebooks, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (expected how many "
                                         "notebooks run at once: 1 or more)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is out of range (expected how many "
                                         "notebooks run at once: 1 or more)")
    return value


def _run_folder_arguments(ap: argparse.ArgumentParser) -> None:
    """``PROFILE`` and ``--outputs DIR``, checked as they are read: a profile's name is a plain
    name and the outputs root is outside the project's source tree (``core.arguments``)."""
    ap.add_argument("profile", nargs="?", default="default", type=arguments.profile,
                    help="a profile of params/ by name, or a profile YAML file (its name is "
                    f"the file's stem: {paths.NAME_RULE})")
    ap.add_argument("--outputs", type=arguments.outputs_root, default=None,
                    help="outputs root (default: outputs/ of the project; a relative path is "
                    "relative to the directory the command is started from; never inside the "
                    "project's source tree)")


def _parse(ap: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """The arguments, or the exit code argparse chose (2 after its one line, 0 after help)."""
    try:
        return ap.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else EXIT_USAGE


def lock_refusal(argv: list[str]) -> str | None:
    """The line refusing this command line because another run holds its outputs folder, or
    ``None`` (also for arguments the run itself answers: help, a usage error). What
    ``run_all.sh`` asks before its environment check: it needs the standard library only."""
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        try:
            args = parser().parse_args(argv)
        except SystemExit:
            return None
    return _refusal(args)


def _refusal(args: argparse.Namespace) -> str | None:
    try:
        folder = profile_dir(args.profile, args.outputs)
    except paths.UnsafePath:  # the run itself refuses it, with its own exit code
        return None
    try:
        runlock.refuse_if_running(folder, folder.name)
    except runlock.RunLocked as exc:
        return f"error: {exc}"
    return None


def _say(line: str) -> None:
    print(scrub(line), file=sys.stderr)


def main(argv: list[str] | None = None, *, restore_sigint: bool = True) -> int:
    """The command; ``restore_sigint=False`` when the process ends next (``python -m
    hbpsych_utils run``): after an interruption is reported, Ctrl-C stays ignored while it
    exits, instead of Python's handler coming back for its last moments."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(parser(), argv)
    if isinstance(args, int):
        return args
    launcher = os.environ.get(LAUNCHER_ENV) or f"{shlex.quote(sys.executable)} -m hbpsych_utils run"
    command = f"{launcher} {shlex.join(argv)}".rstrip()
    previous = signal.getsignal(signal.SIGINT)
    try:
        return _main(args, command)
    except KeyboardInterrupt:  # before the run recorded anything
        _quiet()
        _say(f"interrupted; run again with: {command}")
        return EXIT_INTERRUPTED
    finally:
        if restore_sigint and previous is not None:
            try:
                signal.signal(signal.SIGINT, previous)
            except ValueError:  # not the main thread: nothing was changed
                pass


def _quiet() -> None:
    """Ignore Ctrl-C while the interruption is reported: one line, never a traceback; and exit
    with 130 rather than by SIGINT. (CPython notes a ``KeyboardInterrupt`` that leaves code run
    by ``exec`` of a string — fastjsonschema compiles nbformat's schema that way while the book
    is built — as unhandled even when it is caught later, and then ends the process by SIGINT;
    the next such ``exec`` clears the note.)"""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass
    exec("None")  # clears CPython's note (see above)


def _main(args: argparse.Namespace, command: str) -> int:
    refused = _refusal(args)
    if refused:
        _say(refused)
        return EXIT_LOCKED
    from hbpsych_utils.core import config
    from hbpsych_utils.core.writes import describe_os_error
    from hbpsych_utils.llm.store import StoreError

    try:
        overrides = config.parse_overrides(args.overrides)
        result = run_profile(
            args.profile, outputs_root=args.outputs, only=args.only, overrides=overrides,
            force=args.force, jobs=args.jobs, command=command,
        )
    except (config.ProfileError, paths.UnsafePath) as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except runlock.RunLocked as exc:
        _say(f"error: {exc}")
        return EXIT_LOCKED
    except StoreError as exc:  # a damaged store: before any notebook
        _say(f"error: {exc}")
        return EXIT_FAILED
    except OSError as exc:  # the outputs folder: read-only, a file, a link loop, a full disk
        _say(f"error: {describe_os_error(exc, _folder_of(args))}")
        return EXIT_FAILED
    except RunInterrupted as exc:
        _quiet()
        _say(interruption_line(exc, command))
        return EXIT_INTERRUPTED
    return 0 if result.ok else EXIT_FAILED


def _folder_of(args: argparse.Namespace) -> Path | None:
    """The run folder of the command's arguments, to name where an error that names no file
    happened (``None`` if it cannot be told)."""
    try:
        return profile_dir(args.profile, args.outputs)
    except paths.UnsafePath:
        return None


# --------------------------------------------------------------------------------------------
# publish: a run's scores as mindbench-results v1 artifacts (hbpsych_utils.reporting.publish)


def publish_parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="hbpsych publish",
        description="Write one mindbench-results v1 artifact per candidate of an existing run "
        "(its main subset with Psych-Hard beside it), validated against the registry's "
        "schema, with their per-item files and an export manifest.",
        epilog="exit codes: 0 written, 1 the run cannot be published or a payload breaks the "
        "schema (nothing written), 2 bad arguments, 3 a run holds the outputs folder")
    _run_folder_arguments(ap)
    ap.add_argument("--subset", default="v1", choices=("v1", "v2"),
                    help="the main subset (default v1)")
    ap.add_argument("--output", type=arguments.output_folder, default=None,
                    help="folder to write (default: outputs/PROFILE/published/SUBSET)")
    ap.add_argument("--no-book", action="store_true",
                    help="do not re-render the run's book (it links what was published)")
    return ap


def publish_main(argv: list[str] | None = None) -> int:
    """``python -m hbpsych_utils publish PROFILE [--subset v1|v2] [--output DIR]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(publish_parser(), argv)
    if isinstance(args, int):
        return args
    from hbpsych_utils.core import sources
    from hbpsych_utils.core.writes import describe_os_error
    from hbpsych_utils.llm.store import StoreError
    from hbpsych_utils.reporting import book, publish

    try:
        run_dir = profile_dir(args.profile, args.outputs)
    except paths.UnsafePath as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    name = run_dir.name
    command = f"{shlex.quote(sys.executable)} -m hbpsych_utils publish {shlex.join(argv)}"
    try:
        # a missing run is refused before the lock is taken (which would make its folder)
        run = publish.open_run(run_dir, book.update_command(name, None, run_dir.parent))
        with runlock.run_lock(run_dir, name, command):
            rerun = book.update_command(name, run.manifest, run_dir.parent)
            report = publish.publish(run_dir, subset=args.subset, output=args.output,
                                     rerun=rerun)
            written = count(len(report.artifacts), "mindbench-results v1 artifact")
            print(f"published {written} of {name} ({args.subset}) -> {report.output}")
            if not args.no_book and (run_dir / book.BOOK_DIR).is_dir():
                print(f"book: {book_call(run_dir, book.build_book)}")
    except runlock.RunLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except OSError as exc:  # a full disk, a read-only folder, a book/ that is a link
        print(f"error: {describe_os_error(exc, args.output or run_dir)}", file=sys.stderr)
        return EXIT_FAILED
    except (ValueError, sources.ArtifactError, book.BookError, StoreError) as exc:
        # the package's readers name the file, record and field (PublishError, ScoringError,
        # NotJSON, ... are ValueErrors); a damaged or empty LLM store names the mv that sets
        # it aside
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


# --------------------------------------------------------------------------------------------
# book: an existing run folder rendered again (hbpsych_utils.reporting.book)


def book_parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="hbpsych book",
        description="Render an existing run folder outputs/PROFILE/ into outputs/PROFILE/book/, "
        "a static site that opens offline in any browser.",
        epilog="exit codes: 0 rendered, 1 no such run folder or the book cannot be built (one "
        "line naming the file), 2 bad arguments, 3 another command (a run, publish) holds the "
        "outputs folder, 130 interrupted (Ctrl-C)")
    _run_folder_arguments(ap)
    return ap


def book_main(argv: list[str] | None = None, *, restore_sigint: bool = True) -> int:
    """``python -m hbpsych_utils book PROFILE [--outputs DIR]``: refused while another command
    holds the run folder (a run would be rendered half-finished), and holding it while it
    renders; Ctrl-C at any point ends it with one line and exit 130. ``restore_sigint=False``
    when the process ends next: once the book is built or the interruption reported, Ctrl-C
    is ignored while it exits (as for ``run``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(book_parser(), argv)
    if isinstance(args, int):
        return args
    command = f"{shlex.quote(sys.executable)} -m hbpsych_utils book {shlex.join(argv)}".rstrip()
    try:
        run_dir = profile_dir(args.profile, args.outputs)
    except paths.UnsafePath as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from hbpsych_utils.runner.execute import RunWatch

    previous = signal.getsignal(signal.SIGINT)
    try:
        with RunWatch() as watch:  # a Ctrl-C that a library swallows is still seen
            report = _render(run_dir, command)
            if watch.requested:
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        _quiet()
        _say(f"interrupted: the book of {run_dir} was not finished; run again with: {command}")
        return EXIT_INTERRUPTED
    except runlock.RunLocked as exc:
        _say(f"error: {exc}")
        return EXIT_LOCKED
    except _BookRefused as exc:
        _say(f"error: {exc}")
        return EXIT_FAILED
    except OSError as exc:  # a book/ that is a link, a full disk, a read-only folder
        from hbpsych_utils.core.writes import describe_os_error

        _say(f"error: {describe_os_error(exc, run_dir)}")
        return EXIT_FAILED
    finally:
        try:
            signal.signal(signal.SIGINT, previous if restore_sigint and previous is not None
                          else signal.SIG_IGN)
        except ValueError:  # not the main thread: nothing was changed
            pass
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
    print(f"book: {report.index} ({report.seconds:.1f}s)")
    return 0


class _BookRefused(Exception):
    """The book cannot be built: no run folder, or the build failed (the message says why)."""


def _render(run_dir: Path, command: str) -> Any:
    """The book of ``run_dir`` (its ``BuildReport``), rendered under the folder's run lock."""
    from hbpsych_utils.reporting import book

    if not run_dir.is_dir():  # before the lock, which would make the folder
        raise _BookRefused(f"{run_dir}: no such run folder (run the profile first: "
                           f"{book.update_command(run_dir.name, None, run_dir.parent)})")
    try:
        with runlock.run_lock(run_dir, run_dir.name, command):
            return book_call(run_dir, book.render)
    except book.BookError as exc:
        raise _BookRefused(str(exc)) from None
