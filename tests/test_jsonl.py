"""The shared JSON Lines reader: blank lines skipped, damaged lines named by file and line."""

from __future__ import annotations

import json
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


# JSON allows these raw inside a string; str.splitlines() would cut a line at each of them
SEPARATORS_IN_STRINGS = "a\u2028b\u0085c\u2029d"


def test_lines_split_on_newline_only() -> None:
    text = json.dumps({"t": SEPARATORS_IN_STRINGS}, ensure_ascii=False) + "\r\n\n" + '{"b": 1}'
    assert len(text.splitlines()) > 3
    assert [json.loads(x) for x in jsonl.lines(text)] == [{"t": SEPARATORS_IN_STRINGS}, {"b": 1}]


def test_records_keep_line_separators_inside_strings(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes((json.dumps({"t": SEPARATORS_IN_STRINGS}, ensure_ascii=False) + "\n"
                   + '{"t": "next"}\n').encode("utf-8"))
    assert list(jsonl.records(p)) == [(1, {"t": SEPARATORS_IN_STRINGS}), (2, {"t": "next"})]
