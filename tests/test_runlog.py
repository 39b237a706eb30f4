"""Run-log summaries: spend per model and phase, anomaly counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hbpsych_utils.evaluation import refusals, runlog


def write(tmp_path: Path, name: str, rows: list) -> Path:
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return p


def test_spend_by_phase(tmp_path: Path) -> None:
    p = write(tmp_path, "spend.jsonl", [
        {"ts": "t", "phase": "generate", "who": "a", "cost": 1.5},
        {"ts": "t", "phase": "generate", "who": "a", "cost": 0.25},
        {"ts": "t", "phase": "generate", "who": "b", "cost": 2},
        {"ts": "t", "phase": "grade", "who": "j", "cost": 9.0},
    ])
    by = runlog.spend_by(runlog.read_spend(p), "generate")
    assert by.to_dict() == {"b": 2.0, "a": 1.75}  # largest first
    assert list(by.index) == ["b", "a"]


@pytest.mark.parametrize(("row", "field"), [
    ({"phase": "x", "who": "a"}, "cost"),
    ({"phase": "x", "who": "a", "cost": -1}, "cost"),
    ({"phase": "x", "cost": 1}, "who"),
])
def test_bad_spend_line_names_line_and_field(tmp_path: Path, row: dict, field: str) -> None:
    p = write(tmp_path, "spend.jsonl", [{"phase": "x", "who": "a", "cost": 1}, row])
    with pytest.raises(ValueError, match=rf"spend.jsonl:2: field '{field}'"):
        runlog.read_spend(p)


def test_anomalies_by_model_and_kind() -> None:
    ev = [
        refusals.ErrorEvent(1, "generate", "empty_response", "m1", "p1", ""),
        refusals.ErrorEvent(2, "generate", "empty_response", "m1", "p2", ""),
        refusals.ErrorEvent(3, "generate", "call_failed", "m2", "p3", ""),
        refusals.ErrorEvent(4, "grade", "grade_fallback", "m1", "p1", "", judge="j1"),
    ]
    gen = runlog.anomalies(ev, "generate")
    assert gen.loc["m1", "empty_response"] == 2 and gen.loc["m2", "call_failed"] == 1
    assert runlog.anomalies(ev, "grade").loc["j1", "grade_fallback"] == 1
    assert runlog.anomalies(ev, "translate").empty


@pytest.mark.parametrize("cost", [True, "1.5", None])
def test_spend_cost_must_be_a_number(tmp_path: Path, cost: object) -> None:
    p = write(tmp_path, "spend.jsonl", [{"phase": "x", "who": "a", "cost": cost}])
    with pytest.raises(runlog.SpendError, match=r"spend.jsonl:1: field 'cost'"):
        runlog.read_spend(p)


def test_spend_ignores_other_keys(tmp_path: Path) -> None:
    p = write(tmp_path, "spend.jsonl", [{"phase": "x", "who": "a", "cost": 2, "batch": "b1"}])
    assert runlog.read_spend(p).to_dict("records") == [
        {"ts": None, "phase": "x", "who": "a", "cost": 2.0}]
