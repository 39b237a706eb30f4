"""`ids` and `export`: a subset's prompt ids and conversations in forms other tools take."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import released_json

from hbpsych_utils.core import sources
from hbpsych_utils.reporting import export
from hbpsych_utils.reporting.interop import Subset


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hbpsych_utils", *args], capture_output=True,
                          text=True, check=False, timeout=120)


@pytest.mark.slow
def test_ids_of_the_hard_subset_in_every_format(mirror: Path) -> None:
    hard = released_json("subset_hard_v1")
    ids = sorted(hard["prompt_ids"])
    proc = cli("ids", "--subset", "hard")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ids and len(ids) == 119
    assert hard["prompt_id_sha256"] in proc.stderr
    assert export.format_ids(ids, "inspect") == ",".join(ids) + "\n"
    assert json.loads(export.format_ids(ids, "json")) == ids
    assert export.format_ids(ids, "csv").splitlines() == ["prompt_id", *ids]


@pytest.mark.slow
def test_export_writes_the_corpus_lines_of_the_subset(mirror: Path, tmp_path: Path) -> None:
    wanted = set(released_json("subset_hard_v1")["prompt_ids"])
    corpus_lines = sources.fetch("healthbench_oss").read_text(encoding="utf-8").splitlines()
    expected = [ln for ln in corpus_lines if json.loads(ln)["prompt_id"] in wanted]
    out = tmp_path / "hard.jsonl"
    proc = cli("export", "--subset", "hard", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8").splitlines() == expected
    assert len(expected) == 15 and "15/119" in proc.stdout and "PARTIAL" in proc.stdout
    for rec in map(json.loads, expected):
        assert {"prompt_id", "prompt", "rubrics"} <= set(rec)


def test_export_of_a_local_subset_file(mirror: Path, tmp_path: Path) -> None:
    corpus_path = sources.fetch("healthbench_oss")
    first = [json.loads(ln)["prompt_id"] for ln in corpus_path.read_text().splitlines()[:3]]
    subset = Subset("mine", "mine", (*sorted(first), "not-in-the-corpus"))
    n = export.export_conversations(subset, corpus_path, tmp_path / "mine.jsonl")
    assert n == 3
    assert [json.loads(ln)["prompt_id"] for ln in
            (tmp_path / "mine.jsonl").read_text().splitlines()] == first


@pytest.mark.slow
def test_unknown_subset_and_format_are_errors(mirror: Path) -> None:
    proc = cli("ids", "--subset", "nope")  # a bad argument: one line, exit 2
    assert proc.returncode == 2 and "nope" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    with pytest.raises(ValueError, match="unknown format"):
        export.format_ids(["a"], "xml")
