"""One run per outputs folder of a profile at a time.

Two runs into the same ``outputs/<profile>/`` would pay every model call twice and race for
the same files, so a run holds an exclusive lock (`filelock`, an OS-level lock released when
the process ends, even on ``kill -9``) on ``outputs/<profile>/.run.lock`` for its whole length.
filelock does not say who holds a lock, so the holder writes its pid, host, start time and
command next to it (``.run.holder.json``) and a second run, refused at once, names them.

Whether a run holds the lock is asked with the standard library alone (``fcntl.flock``, the
lock filelock takes on Unix), so that ``run_all.sh`` can refuse a second run before its
environment check, with whichever Python 3 it finds.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from filelock import FileLock

LOCK_FILE = ".run.lock"
HOLDER_FILE = ".run.holder.json"


class RunLocked(RuntimeError):
    """Another run holds the outputs folder of this profile."""


def describe_holder(profile_dir: Path) -> str:
    """Who holds the lock, from the holder's record (or why that is not known)."""
    try:
        holder = json.loads((profile_dir / HOLDER_FILE).read_text(encoding="utf-8"))
        return (f"pid {holder['pid']} on {holder['host']}, started {holder['started_at']}: "
                f"{holder['command']}")
    except (OSError, ValueError, KeyError, TypeError):
        return "holder not recorded (it may be starting or just finishing)"


def _locked(profile_dir: Path, profile: str) -> RunLocked:
    return RunLocked(
        f"profile {profile!r} is already running into {profile_dir} "
        f"({describe_holder(profile_dir)}); wait for that run to finish, or run into "
        f"another folder with --outputs DIR")


def _acquire(profile_dir: Path, profile: str) -> FileLock:
    from filelock import FileLock, Timeout

    lock = FileLock(profile_dir / LOCK_FILE, blocking=False)
    try:
        lock.acquire()
    except Timeout:
        raise _locked(profile_dir, profile) from None
    return lock


def refuse_if_running(profile_dir: Path, profile: str) -> None:
    """Raise :class:`RunLocked` if a run holds ``profile_dir`` now. The command line (and
    run_all.sh, before its environment check) asks this before it loads anything heavy, so a
    second run is refused well within a second; the run itself then takes the lock with
    :func:`run_lock`. Creates nothing; a lock file it cannot open is left for the run to
    report."""
    try:
        import fcntl
    except ImportError:  # Windows: filelock's own lock
        if profile_dir.is_dir():
            _acquire(profile_dir, profile).release()
        return
    try:
        fd = os.open(profile_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:  # no lock file: no run yet
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:  # as filelock reads it: some file systems say EACCES
        if exc.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
            raise _locked(profile_dir, profile) from None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def run_lock(profile_dir: Path, profile: str, command: str) -> Iterator[None]:
    """Hold the run lock of ``profile_dir`` (created if needed) or raise :class:`RunLocked`
    at once, naming the profile, the folder and the process holding it."""
    from hbpsych_utils.core.writes import write_json_record

    profile_dir.mkdir(parents=True, exist_ok=True)
    lock = _acquire(profile_dir, profile)
    holder = profile_dir / HOLDER_FILE
    try:
        write_json_record(holder, {
            "pid": os.getpid(), "host": socket.gethostname(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"), "command": command,
        })
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()
