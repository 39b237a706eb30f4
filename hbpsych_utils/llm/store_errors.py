"""The errors of a store file this code cannot read: damaged, emptied, or of an unknown layout,
each naming the file and what to do (:func:`.store.check` finds them before anything reads)."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path


class StoreError(RuntimeError):
    """A store this code cannot read (damaged, or a newer or unknown layout); the message names
    the file and, for a damaged one, what to do."""


_DAMAGE = ("SQLITE_NOTADB", "SQLITE_CORRUPT")
"""SQLite's names for a file that is not a database, or one whose pages are damaged."""


def damaged(path: Path, problem: str, *, readable: bool) -> StoreError:
    """The error for a damaged store: the file, the problem, how to move it aside (with its
    journal files, which must not meet a new store of the same name) and what is lost.
    ``readable``: SQLite can still read some of it (damaged pages, not a file that is no
    database at all)."""
    moves = " && ".join(f"mv {shlex.quote(str(f))} {shlex.quote(str(path))}.damaged{suffix}"
                        for f, suffix in ((path, ""), (Path(f"{path}-wal"), "-wal"),
                                          (Path(f"{path}-shm"), "-shm"))
                        if f == path or f.exists())
    salvage = (f" (sqlite3's .recover can salvage some rows of {path.name}.damaged, but runs do "
               "not read them back)" if readable else "")
    return StoreError(
        f"{path}: damaged ({problem}). Move it aside ({moves}) and run again. The answers paid "
        f"for in it are lost: the new store the run starts pays for those calls again{salvage}")


def unreadable(path: Path, exc: sqlite3.DatabaseError) -> StoreError:
    """The error for a store SQLite refused to open or read."""
    if exc.sqlite_errorname in _DAMAGE:
        return damaged(path, str(exc), readable=exc.sqlite_errorname != "SQLITE_NOTADB")
    return StoreError(f"{path}: cannot be read ({exc})")


def emptied(path: Path) -> bool:
    """Whether ``path`` is an empty file (0 bytes).

    SQLite takes such a file for a new database and would start over in it, paying again for
    every answer the store held. A store this code opened is at least one page long: setting
    its journal mode, the first thing :class:`Store` does, writes the header (its write-ahead
    log, if one is left beside an emptied file, cannot be read without it)."""
    try:
        return Path(path).stat().st_size == 0
    except FileNotFoundError:
        return False
