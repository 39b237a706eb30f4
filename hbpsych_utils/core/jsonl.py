"""Reading JSON Lines files with errors that name the file and the line.

Every released log and table in JSONL (screen, spend ledger, anomaly log, responses) is read
through ``records`` so that a damaged line — bytes that are not UTF-8, text that is not JSON,
JSON that is not an object — is reported the same way everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hbpsych_utils.core.records import NotUTF8, utf8_lines


def records(
    path: Path | str, *, error: type[Exception] = ValueError
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; anything that is not a JSON object
    raises ``error`` with ``file:line`` and what is wrong."""
    for lineno, line in utf8_lines(path):
        if isinstance(line, NotUTF8):
            raise error(str(line))
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(rec, dict):
            raise error(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
        yield lineno, rec
