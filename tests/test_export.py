"""`ids` and `export`: a subset's prompt ids and conversations in forms other tools take."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import released_json

from hbpsych_utils.core import sources
from hbpsych_utils.reporting import export
from hbpsych_utils.reporting.interop_report import Subset


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


def test_a_placeholder_key_leaves_the_export_byte_identical_and_is_named(
    mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """``OPENAI_API_KEY=therapist``, as a local server's docs would have it: the export is the
    corpus's data, byte for byte the export without the variable, and the command says once
    that the variable holds a placeholder."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    plain, placeholder = tmp_path / "plain.jsonl", tmp_path / "placeholder.jsonl"
    assert export.main("export", ["--subset", "v1", "--output", str(plain)]) == 0
    assert "placeholder" not in capsys.readouterr().err
    assert plain.read_text(encoding="utf-8").count("therapist") > 0  # the word is in the data
    monkeypatch.setenv("OPENAI_API_KEY", "therapist")
    assert export.main("export", ["--subset", "v1", "--output", str(placeholder)]) == 0
    assert placeholder.read_bytes() == plain.read_bytes()
    err = capsys.readouterr().err
    notices = [line for line in err.splitlines() if "placeholder" in line]
    assert len(notices) == 1 and "OPENAI_API_KEY" in notices[0]


def test_an_export_whose_data_holds_a_real_key_is_refused_not_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hbpsych_utils.core.secrets import KeyInData

    key = "-".join(["sk", "proj", "CorpusHELDkey0123456789abcdefXYZ"])
    corpus_path = tmp_path / "corpus.jsonl"
    corpus_path.write_text("".join(json.dumps({"prompt_id": pid, "prompt": text}) + "\n"
                                   for pid, text in (("a", "fine"), ("b", f"my key is {key}"))))
    subset = Subset("mine", "mine", ("a", "b"))
    monkeypatch.setenv("OPENAI_API_KEY", key)
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyInData) as refused:
        export.export_conversations(subset, corpus_path, out)
    assert not out.exists()  # nothing written, nothing edited
    assert refused.value.counts == {"OPENAI_API_KEY": 1}
    assert str(out) in str(refused.value) and key not in str(refused.value)
    # the command: exit 1, one line naming the file and the variable, never the key
    monkeypatch.setattr(export, "resolve_subset", lambda name: subset)
    monkeypatch.setattr(export, "verified_corpus", lambda: SimpleNamespace(
        report=SimpleNamespace(path=corpus_path), coverage=None))
    # a released key passes the argument check; the patched resolver hands back the test's subset
    assert export.main("export", ["--subset", "v1", "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {out}: ") and "OPENAI_API_KEY" in err
    assert "\n" not in err and key not in err and not out.exists()
    monkeypatch.delenv("OPENAI_API_KEY")  # without the key set, the same lines, exactly
    assert export.export_conversations(subset, corpus_path, out) == 2
    assert out.read_bytes() == corpus_path.read_bytes()
