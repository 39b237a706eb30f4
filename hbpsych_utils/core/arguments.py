"""The command line's arguments, checked where they are read: every subcommand of
``python -m hbpsych_utils`` answers a bad argument in one line and exit code 2, before it reads
or writes anything.

:class:`Parser` is ``argparse`` with that answer (argparse's own is the usage block and then the
error); the argument types below check what a value must be for the command to be safe: a
profile's name that stays in its folder, an outputs root outside the project's source tree, a
seed and a resample count in range, an output file that can be written. Standard library and
:mod:`core.paths` only, so that ``scripts/refuse_if_running.py`` can read ``run``'s arguments
with whichever Python 3 it finds before the environment is set up.
"""

from __future__ import annotations

import argparse
import os
import stat
import tempfile
from pathlib import Path
from typing import NoReturn

from hbpsych_utils import study
from hbpsych_utils.core import paths

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose error is one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(EXIT_USAGE, f"error: {self.prog}: {line} (see --help)\n")


def profile(text: str) -> str:
    """A profile by name or YAML path whose name is a plain name (``paths.profile_name``)."""
    try:
        paths.profile_name(text)
    except paths.UnsafePath as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def outputs_root(text: str) -> Path:
    """An outputs root outside the project's source tree (``paths.outside_source_tree``), as
    the user wrote it (relative to the directory the command was started from)."""
    try:
        paths.outside_source_tree(text, "outputs root", may_hold_project=True)
    except paths.UnsafePath as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)


def _integer(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (expected {what} "
                                         f"from {low} to {high})") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{value} is out of range (expected {what} from "
                                         f"{low} to {high})")
    return value


def seed(text: str) -> int:
    """A seed: 0 to ``study.MAX_SEED`` (numpy's seed range)."""
    return _integer(text, "a seed", 0, study.MAX_SEED)


def resamples(text: str) -> int:
    """A number of bootstrap resamples: 1 to ``study.MAX_RESAMPLES``."""
    return _integer(text, "a number of resamples", 1, study.MAX_RESAMPLES)


def writable_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written as a file whole (a temp file beside it, then renamed
    over it, as ``core.writes`` does), or ``None``: it is a folder or something other than a
    regular file (a device would be replaced by the rename), or its folder is missing or
    takes no new file (``/proc``, read-only). The folder is tried with a temp file, removed at
    once: as the system answers, whoever runs the command (permission bits do not stop root)."""
    if str(path) == "":
        return "an empty path (expected a file to write)"
    if path.is_dir():
        return f"{path} is a folder (expected a file to write)"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if mode is not None and not stat.S_ISREG(mode):
        return f"{path} is not a regular file (expected a file to write)"
    folder = path.parent
    if not folder.is_dir():
        return (f"{path}: its folder {folder} "
                + ("is not a folder" if folder.exists() else "does not exist"))
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")
    except OSError as exc:
        return f"{path}: cannot write a file in {folder} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(probe)
    return None


def output_file(text: str) -> Path:
    """A file the command may write (:func:`writable_file_problem`)."""
    problem = writable_file_problem(Path(text))
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def output_folder(text: str) -> Path:
    """A folder the command may create or fill: empty path and anything that exists and is
    not a folder are refused (the folder itself is created by the command)."""
    path = Path(text)
    if text == "":
        raise argparse.ArgumentTypeError("an empty path (expected a folder to write)")
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a folder (expected a "
                                         "folder to write)")
    return path
