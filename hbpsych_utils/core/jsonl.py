"""Reading JSON Lines files with errors that name the file and the line.

Every released log and table in JSONL (screen, spend ledger, anomaly log, responses) is read
through ``records`` so that a damaged line is reported the same way everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def records(
    path: Path | str, *, error: type[Exception] = ValueError
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; anything that is not a JSON object
    raises ``error`` with ``file:line`` and what is wrong."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
            if not isinstance(rec, dict):
                raise error(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
            yield lineno, rec
