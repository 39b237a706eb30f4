"""Atomic writes: a file is replaced whole or not at all, so an interrupted stage never leaves a
half-written file behind (temp file in the same folder, then rename). What is written is
scrubbed of every API key set in the environment (:mod:`core.secrets`): a failure record or a
manifest may quote what a server sent back."""

from __future__ import annotations

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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; outputs are for reading
        os.replace(tmp, path)
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
