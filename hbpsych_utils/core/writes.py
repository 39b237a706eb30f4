"""Atomic writes: a file is replaced whole or not at all, so an interrupted stage never leaves a
half-written file behind (temp file in the same folder, then rename). What is written is
scrubbed of every API key set in the environment (:mod:`core.secrets`): a failure record or a
manifest may quote what a server sent back. A write that fails names the file it was writing
(not its temp file), and :func:`describe_os_error` says a file-system error in one line."""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from hbpsych_utils.core.secrets import scrub, secrets


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


def write_json(path: Path, data: Any) -> Path:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_jsonable(data), indent=2, ensure_ascii=False) + "\n"
    write_text(path, text)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` atomically (temp file + rename), without any API key in it."""
    text = scrub(text)
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
    """Rewrite a text file another library wrote (an executed notebook) without the API keys it
    holds, if any; nothing is read when no key is set."""
    if secrets() and path.is_file():
        text = path.read_text(encoding="utf-8")
        if scrub(text) != text:
            write_text(path, text)


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
        for place in (path, *path.parents):
            if place.is_symlink() and not place.exists():
                return (f"{place}: a symbolic link that leads nowhere (a loop, or its target is "
                        "missing): remove it, or point it at a folder")
            if exc.errno in (errno.ENOTDIR, errno.EEXIST) and place.exists():
                if place.is_dir():
                    break
                return (f"{place}: a file where a folder is needed: move it, or write "
                        "somewhere else")
    problem = _ADVICE.get(exc.errno or 0) or exc.strerror or str(exc)
    if not named:  # a caller that knows no path at all: the problem alone, still one line
        return " ".join(problem.split())
    return f"{named[0]}: {' '.join(problem.split())}"
