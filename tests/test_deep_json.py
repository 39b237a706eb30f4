"""JSON nested too deeply for Python's parser (``[[[[...`` a hundred thousand deep) is a bad
input like any other: one line naming the file and line, never a ``RecursionError``
traceback."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from hbpsych_utils.__main__ import main as cli
from hbpsych_utils.core import jsonl, records
from hbpsych_utils.reporting import interop

DEPTH = 100_000


def deep(depth: int = DEPTH) -> str:
    return "[" * depth + "]" * depth


def test_filter_results_on_a_100k_deep_json_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "deep_allresults.json"
    path.write_text(deep())
    assert cli(["filter-results", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: {path}:1: not valid JSON: arrays and objects nested more than "
        f"{sys.getrecursionlimit()} deep (too deep to read)"]


def test_the_line_named_is_where_the_nesting_runs_out(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": "[[[[ in a string, not nesting",\n "b":\n' + deep() + "}")
    with pytest.raises(records.NotJSON) as caught:
        records.read_json(path)
    assert (caught.value.file, caught.value.line) == (str(path), 3)


def test_a_deep_line_of_json_lines_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_text('{"ok": 1}\n' + deep() + "\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: not valid JSON: arrays and objects "):
        list(jsonl.records(path))


def test_a_deep_member_of_an_eval_log_is_named(tmp_path: Path) -> None:
    path = tmp_path / "deep.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", deep())
    with pytest.raises(interop.InteropError, match=r"deep.eval: header.json: not valid JSON"):
        interop.load_results([str(path)], "inspect")


def test_nesting_within_the_limit_still_parses() -> None:
    assert records.loads(deep(200)) == json.loads(deep(200))
