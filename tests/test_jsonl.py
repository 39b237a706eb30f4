"""The shared JSON Lines reader: blank lines skipped, damaged lines named by file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hbpsych_utils.core import jsonl


def test_records_with_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert list(jsonl.records(p)) == [(1, {"a": 1}), (3, {"a": 2})]


@pytest.mark.parametrize(("text", "problem"), [
    ('{"a": 1}\n{"a": \n', "x.jsonl:2: not valid JSON"),
    ('{"a": 1}\n[1, 2]\n', "x.jsonl:2: expected a JSON object, got list"),
])
def test_damaged_line_is_named(tmp_path: Path, text: str, problem: str) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(text)

    class Custom(ValueError):
        pass

    with pytest.raises(Custom, match=problem):
        list(jsonl.records(p, error=Custom))
