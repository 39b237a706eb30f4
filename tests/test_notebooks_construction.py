"""Notebooks 01-05 on the default profile: the metrics are what the released data give.

Expected values are recomputed here independently from the raw released files (plain json/csv,
no package code) wherever that is short enough to write by hand.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import stage_metrics as metrics

from hbpsych_utils.core import sources

pytestmark = pytest.mark.notebook


@pytest.fixture
def run(default_run: Path) -> Path:
    return default_run




def raw_votes(round_: int) -> dict[str, list[str]]:
    votes: dict[str, list[str]] = {}
    for i in (1, 2, 3):
        doc = json.loads(sources.fetch(f"ratings_round{round_}_R{i}").read_text())
        for r in doc["ratings"]:
            votes.setdefault(r["prompt_id"], []).append(r["is_mental_health"])
    return votes


def test_screening_metrics(run: Path) -> None:
    labels = [json.loads(x) for x in sources.fetch("screening_labels").read_text().splitlines()]
    m = metrics(run, "02_screening")
    assert m["n_screened"] == len(labels) == 5000
    for key, label in (("n_relevant", "RELEVANT"), ("n_borderline", "BORDERLINE"),
                       ("n_not_relevant", "NOT_RELEVANT")):
        assert m[key] == sum(r["label"] == label for r in labels)
    assert m["n_model_refused"] == 1


def test_round1_metrics(run: Path) -> None:
    key = {r["prompt_id"]: r for r in csv.DictReader(sources.fetch("screening_key").open())}
    votes = raw_votes(1)
    controls = [p for p in votes if key[p]["screening_label"] == "NOT_RELEVANT"]
    included = {p for p, v in votes.items() if v.count("Y") >= 2}
    m = metrics(run, "03_review_round1")
    assert m["n_reviewed"] == len(votes) == 791
    assert m["n_controls"] == len(controls) == 150
    assert m["n_included"] == len(included)
    assert m["n_controls_included"] == sum(p in included for p in controls)
    assert m["control_inclusion_rate"] == m["n_controls_included"] / 150
    assert m["recall_triggered"] is (m["control_inclusion_rate"] > 0.05)
    assert set(m["ac1_pairs"]) == {"R1-R2", "R1-R3", "R2-R3"}
    assert 0 < m["fleiss_kappa"] < m["ac1_multirater"] <= 1
    assert (run / "03_review_round1" / "instrument.html").is_file()


def test_round2_metrics(run: Path) -> None:
    rows = list(csv.DictReader(sources.fetch("recovery_screening_key").open()))
    votes = raw_votes(2)
    inc = {p for p, v in votes.items() if v.count("Y") >= 2}
    cands = [r for r in rows if r["kind"] == "candidate"]
    m = metrics(run, "04_recall")
    assert m["n_recall_pool"] == metrics(run, "02_screening")["n_not_relevant"] - 150
    assert m["n_candidates"] == len(cands)
    assert m["n_clear"] == sum(r["recovery_tier"] == "CLEAR" for r in cands)
    assert m["n_candidates_included"] == sum(r["prompt_id"] in inc for r in cands)
    assert m["n_controls_included"] == sum(
        r["prompt_id"] in inc for r in rows if r["kind"] == "control")
    assert m["loop_terminated"] is (m["control_inclusion_rate"] <= 0.05)


def test_subset_matches_release(run: Path) -> None:
    m = metrics(run, "05_subset")
    assert m["matches_release_v1"] and m["matches_release_v2"] and m["matches_release_hard"]
    for key, art in (("v1", "subset_v1"), ("v2", "subset_v2"), ("hard", "subset_hard_v1")):
        rel = json.loads(sources.fetch(art).read_text())
        assert m[f"n_{key}"] == rel["n"]
        assert m[f"sha256_{key}"] == rel["prompt_id_sha256"]
        written = json.loads((run / "05_subset" / f"{rel['name']}.json").read_text())
        assert written["prompt_ids"] == rel["prompt_ids"]
    assert sum(m["category_counts"].values()) == m["n_v1"]
    for ext in ("png", "svg"):
        assert (run / "05_subset" / f"category_distribution.{ext}").stat().st_size > 1000
