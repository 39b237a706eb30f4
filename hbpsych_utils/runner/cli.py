"""``python -m hbpsych_utils run`` (what ``run_all.sh`` calls): arguments, exit codes, Ctrl-C.

Exit codes: 0 every planned notebook ran, 1 a notebook failed, 2 bad profile or arguments
(including a ``--set`` that no stage reads), 3 another run holds the outputs folder, 130
interrupted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from hbpsych_utils.core import paths, runlock
from hbpsych_utils.runner.run import RunInterrupted, run_profile

EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED, EXIT_INTERRUPTED = 1, 2, 3, 130

LAUNCHER_ENV = "HBPSYCH_LAUNCHER"
"""How the run command was started (``bash run_all.sh``), set by run_all.sh for the resume
line; otherwise ``<this python> -m hbpsych_utils run``."""


def profile_dir(profile: str, outputs_root: Path | None) -> Path:
    """``outputs/<profile>/`` of a profile given by name or YAML path, as ``run_profile`` will
    name it (the file's stem), without reading the profile."""
    p = Path(profile)
    name = p.stem if p.suffix in (".yaml", ".yml") else profile
    return (Path(outputs_root) if outputs_root else paths.outputs_root()).resolve() / name


def interruption_line(exc: RunInterrupted, command: str) -> str:
    """The one line Ctrl-C leaves: what stopped, and the command that resumes the run."""
    store = exc.outputs / "llm_store.sqlite"
    paid = (f" (model calls already paid are reused from {store})" if store.is_file() else "")
    return f"interrupted: {exc.where} of profile {exc.profile!r}; resume with: {command}{paid}"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="hbpsych run",
        description="Run a profile's notebooks: those whose inputs changed since their last "
        "successful run, and everything downstream of them.",
        epilog="exit codes: 0 every planned notebook ran, 1 a notebook failed, 2 bad profile "
        "or arguments (a --set no stage reads included), 3 another run holds the outputs "
        "folder, 130 interrupted (Ctrl-C)")
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--only", nargs="*", help="stages to run (with whichever of their "
                    "dependents are then not current)")
    ap.add_argument("--force", action="store_true", help="run every stage of the profile, "
                    "current or not (with --only: the named stages and all their dependents)")
    ap.add_argument("--outputs", type=Path, default=None, help="outputs root (default: outputs/)")
    ap.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override one profile value, e.g. --set judges.subset=hard or --set seed=123 "
        "(the value is read as YAML; repeat for several)")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    launcher = os.environ.get(LAUNCHER_ENV) or f"{shlex.quote(sys.executable)} -m hbpsych_utils run"
    command = f"{launcher} {shlex.join(argv)}".rstrip()
    try:
        runlock.refuse_if_running(profile_dir(args.profile, args.outputs), args.profile)
    except runlock.RunLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    from hbpsych_utils.core import config
    from hbpsych_utils.llm.store import StoreError

    try:
        overrides = config.parse_overrides(args.overrides)
        result = run_profile(
            args.profile, outputs_root=args.outputs, only=args.only, overrides=overrides,
            force=args.force, command=command,
        )
    except config.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except runlock.RunLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except StoreError as exc:  # a damaged store: before any notebook
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except RunInterrupted as exc:
        print(interruption_line(exc, command), file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # before the run recorded anything, or a repeated Ctrl-C
        print(f"interrupted; run again with: {command}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if result.ok else EXIT_FAILED
