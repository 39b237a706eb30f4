"""Atomic writes: a file is replaced whole or not at all, so an interrupted stage never leaves a
half-written file behind (temp file in the same folder, then rename). No API key set in the
environment is ever written (:mod:`core.secrets`), and data is never edited to hide one:

- data (:func:`write_text`, :func:`write_json`: tables, responses, exports, copies of the
  corpus) is written exactly as given; data that holds a key is not written
  (:class:`~hbpsych_utils.core.secrets.KeyInData`). A model's reply is scrubbed where it
  enters (the LLM store), so data made from replies holds none;
- records the project composes, which may quote what a server sent back (:func:`write_record`,
  :func:`write_json_record`: failure records, build records, manifests; :func:`scrub_file`:
  executed notebooks) are scrubbed, and each replacement is noted (:func:`take_replaced`) for
  the runner to say and the manifest to record.

A write that fails names the file it was writing (not its temp file), and
:func:`describe_os_error` says a file-system error in one line."""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from hbpsych_utils.core.secrets import KeyInData, scrubber

_REPLACED: list[tuple[Path, dict[str, int]]] = []
"""What the record writes of this process replaced, in order, until :func:`take_replaced`."""


def _jsonable(value: Any) -> Any:
    """numpy/pandas scalars and containers -> plain JSON values (NaN -> null)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def json_text(data: Any) -> str:
    """``data`` as the JSON text the writers write (indented, NaN as null)."""
    return json.dumps(_jsonable(data), indent=2, ensure_ascii=False) + "\n"


def write_json(path: Path, data: Any) -> Path:
    """Write data as JSON atomically (temp file + rename), exactly (see :func:`write_text`)."""
    return write_text(path, json_text(data))


def write_text(path: Path, text: str) -> Path:
    """Write data atomically (temp file + rename), exactly as given; :class:`KeyInData` (and
    nothing written) when it holds an API key set in the environment."""
    found = scrubber().count(text)
    if found:
        raise KeyInData(path, found)
    return _write(path, text)


def write_json_record(path: Path, data: Any) -> Path:
    """Write a record as JSON (see :func:`write_record`)."""
    return write_record(path, json_text(data))


def write_record(path: Path, text: str, *, note: bool = True) -> Path:
    """Write a record the project composes (it may quote what a server sent back) atomically,
    with every API key set in the environment replaced by ``[NAME removed]``; a replacement is
    noted for :func:`take_replaced` (``note=False``: the record says so itself)."""
    clean = scrubber()
    found = clean.count(text)
    if found:
        if note:
            _REPLACED.append((Path(path), found))
        text = clean(text)
    return _write(path, text)


def take_replaced() -> list[tuple[Path, dict[str, int]]]:
    """The files the record writes of this process scrubbed since the last call (path, and
    occurrences replaced by variable name), in order; the list is then emptied."""
    taken = list(_REPLACED)
    _REPLACED.clear()
    return taken


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; outputs are for reading
        os.replace(tmp, path)
    except OSError as exc:  # a full disk names no file: this one is meant
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def scrub_file(path: Path) -> None:
    """Rewrite a record another library wrote (an executed notebook) without the API keys it
    holds, if any (noted for :func:`take_replaced`); nothing is read when no key is set."""
    if scrubber() and path.is_file():
        text = path.read_text(encoding="utf-8")
        if scrubber().count(text):
            write_record(path, text)


_ADVICE = {
    errno.ENOSPC: "no space left on the device: free some space, then run again",
    errno.EDQUOT: "the disk quota is used up: free some space, then run again",
    errno.EACCES: "permission denied: make it writable, or write somewhere else",
    errno.EPERM: "not permitted: make it writable, or write somewhere else",
    errno.EROFS: "a read-only file system: write somewhere else",
    errno.ELOOP: "a symbolic link loop: remove the link, or point it at a folder",
}


def _first_copy_error(exc: OSError) -> OSError | None:
    """The first failure of a ``shutil.copytree`` (its ``shutil.Error`` lists ``(source,
    destination, reason)`` and names no file itself), as an error naming the destination."""
    import shutil

    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        for item in exc.args[0]:
            if isinstance(item, tuple) and len(item) == 3:
                _src, dst, why = item
                return OSError(None, str(why), str(dst))
    return None


def with_path(exc: OSError, path: Path) -> OSError:
    """``exc`` if it names a file, else the same error naming ``path`` (where the caller was
    writing): a full disk met while a library writes (papermill, Sphinx, ``shutil``) names no
    file, and a one-line error must say where."""
    if exc.filename is not None or exc.filename2 is not None:
        return exc
    copied = _first_copy_error(exc)
    if copied is not None:
        return copied
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def describe_os_error(exc: OSError, where: Path | None = None) -> str:
    """A file-system error in one line: the path and the problem, in words, with what to do
    (instead of a traceback). ``where`` is the path to name when the error names none (the
    folder the command was writing, :func:`with_path`)."""
    if exc.filename is None and exc.filename2 is None:
        exc = _first_copy_error(exc) or (with_path(exc, where) if where is not None else exc)
    named = [Path(os.fsdecode(p)) for p in (exc.filename2, exc.filename)
             if isinstance(p, str | bytes | os.PathLike)]
    for path in named:
        found = _problem_on_the_way(path, exc.errno)
        if found is not None:
            return found
    problem = _ADVICE.get(exc.errno or 0) or exc.strerror or str(exc)
    if not named:  # a caller that knows no path at all: the problem alone, still one line
        return " ".join(problem.split())
    return f"{named[0]}: {' '.join(problem.split())}"


def _problem_on_the_way(path: Path, error: int | None) -> str | None:
    """What on the way to ``path`` (it, or a folder above it) explains the error, in one line:
    a symbolic link that leads nowhere, or (for "not a folder" and "exists") a file where a
    folder is needed; ``None`` when the way is clear up to the first folder that exists."""
    for place in (path, *path.parents):
        if place.is_symlink() and not place.exists():
            return (f"{place}: a symbolic link that leads nowhere (a loop, or its target is "
                    "missing): remove it, or point it at a folder")
        if error in (errno.ENOTDIR, errno.EEXIST) and place.exists():
            if place.is_dir():
                return None
            return f"{place}: a file where a folder is needed: move it, or write somewhere else"
    return None
