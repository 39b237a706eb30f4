"""Reading JSON Lines files with errors that name the file and the line.

Every released log and table in JSONL (screen, spend ledger, anomaly log, responses) is read
through ``records`` so that a damaged line — bytes that are not UTF-8, text that is not JSON,
JSON that is not an object — is reported the same way everywhere. JSON Lines held in memory (a
provider's batch results, a downloaded results file) are split with ``lines``. Either way a line
ends at ``\n`` only: JSON allows U+2028, U+2029 and U+0085 raw inside a string, and
``str.splitlines()`` would cut a line at each of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from hbpsych_utils.core.records import NotUTF8, loads, utf8_lines


def records(
    path: Path | str, *, error: type[Exception] = ValueError
) -> Iterator[tuple[int, dict[str, object]]]:
    """``(line number, object)`` for every non-blank line; anything that is not a JSON object
    raises ``error`` with ``file:line`` and what is wrong."""
    for lineno, line in utf8_lines(path):
        if isinstance(line, NotUTF8):
            raise error(str(line))
        if not line.strip():
            continue
        try:
            rec = loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(rec, dict):
            raise error(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
        yield lineno, rec


def lines(text: str) -> Iterator[str]:
    """The non-blank lines of JSON Lines text, split on ``\n`` only (a ``\r`` before it is
    whitespace to the JSON parser); never ``str.splitlines()``, which also splits inside
    strings (see the module docstring)."""
    return (line for line in text.split("\n") if line.strip())
