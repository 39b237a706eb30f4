"""01_corpus on the shared smoke run: its metrics are the corpus's true counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hbpsych_utils.construction import corpus
from hbpsych_utils.core import sources
from hbpsych_utils.pipeline import profiles

pytestmark = pytest.mark.notebook


def test_metrics_are_true_counts(smoke_run: Path) -> None:
    metrics = json.loads((smoke_run / "01_corpus" / "metrics.json").read_text())
    n = profiles.load_profile("smoke").corpus.max_conversations
    # independent recomputation straight from the first n lines of the corpus file
    lines = sources.fetch("healthbench_oss").read_text().splitlines()[:n]
    records = [json.loads(line) for line in lines]
    hard = {json.loads(x)["prompt_id"] for x in sources.fetch("harness_scores").open()}
    assert metrics["n_conversations"] == n
    assert metrics["n_expected"] == 5000
    assert metrics["coverage"] == n / 5000
    assert metrics["complete"] is False
    assert metrics["n_hard_ids"] == 1000
    assert metrics["n_hard_in_corpus"] == sum(r["prompt_id"] in hard for r in records)
    assert metrics["n_rubric_items"] == sum(len(r["rubrics"]) for r in records)
    assert metrics["ids_sha256"] == corpus.ids_hash(r["prompt_id"] for r in records)
    flagged = sum(corpus.detect_language(
        "\n".join(m["content"] for m in r["prompt"] if m["role"] == "user")).non_english
        for r in records)
    assert metrics["n_non_english"] == flagged


def test_tables_executed_notebook_and_manifest(smoke_run: Path) -> None:
    assert (smoke_run / "01_corpus" / "themes.csv").is_file()
    assert (smoke_run / "notebooks" / "01_corpus.ipynb").is_file()
    manifest = json.loads((smoke_run / "manifest.json").read_text())
    assert manifest["profile"] == "smoke"
    assert manifest["artifacts"]["healthbench_oss"]["used_by"] == ["01_corpus"]
    assert manifest["artifacts"]["screening_labels"]["sha256"] == sources.artifact(
        "screening_labels").sha256
