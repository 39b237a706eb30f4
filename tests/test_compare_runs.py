"""scripts/compare_runs.py: the check a redesign runs to show it kept every number."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("compare_runs", ROOT / "scripts" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_runs)  # type: ignore[union-attr]


def run_folder(root: Path, metrics: dict, table: str = "a,b\n1,2\n") -> Path:
    (root / "08_scores").mkdir(parents=True)
    (root / "08_scores" / "metrics.json").write_text(json.dumps(metrics))
    (root / "08_scores" / "table1_v1.csv").write_text(table)
    return root


def test_identical_runs_agree(tmp_path: Path, capsys) -> None:
    m = {"mode": "paper", "panel_mean": {"x": 0.5, "y": 0.25}, "ranking": ["x", "y"]}
    a, b = run_folder(tmp_path / "a", m), run_folder(tmp_path / "b", m)
    # the build records say when each run made the stage: not a number of the run
    for run, at in ((a, "2026-01-01T00:00:00+00:00"), (b, "2026-01-02T00:00:00+00:00")):
        (run / "08_scores" / "build.json").write_text(json.dumps(
            {"stage": "08_scores", "by": "runner", "written_at": at}))
    assert compare_runs.main([str(a), str(b), "--tables"]) == 0
    assert "identical" in capsys.readouterr().out


def test_every_changed_missing_or_added_key_and_table_is_reported(tmp_path: Path) -> None:
    a = run_folder(tmp_path / "a", {"panel_mean": {"x": 0.5, "y": 0.25}, "n": 3})
    b = run_folder(tmp_path / "b", {"panel_mean": {"x": 0.5, "y": 0.26}, "extra": 1},
                   table="a,b\n1,3\n")
    lines = compare_runs.metric_differences(a, b)
    assert lines == ["08_scores: n: only before (3)", "08_scores: panel_mean.y: 0.25 -> 0.26"]
    assert compare_runs.metric_additions(a, b) == ["08_scores: extra: only after (1)"]
    assert compare_runs.table_differences(a, b) == ["08_scores/table1_v1.csv: bytes differ"]
    assert compare_runs.main([str(a), str(b)]) == 1


def test_additions_are_listed_apart_and_change_no_number(tmp_path: Path, capsys) -> None:
    """A key, a table or a stage only the later run has is reported as added, not as a
    difference: every number of the earlier run is still there, unchanged."""
    m = {"panel_mean": {"x": 0.5}}
    a = run_folder(tmp_path / "a", m)
    b = run_folder(tmp_path / "b", {**m, "released_length": {"n": 1000}})
    (b / "08_scores" / "lengths.csv").write_text("n\n1\n")
    (b / "14_analyses").mkdir()
    (b / "14_analyses" / "metrics.json").write_text(json.dumps({"mode": "paper"}))
    assert compare_runs.metric_differences(a, b) == []
    assert compare_runs.table_differences(a, b) == []
    assert compare_runs.metric_additions(a, b) == [
        "08_scores: released_length.n: only after (1000)",
        "14_analyses: metrics.json only in after"]
    assert compare_runs.table_additions(a, b) == ["08_scores/lengths.csv: only in after"]
    assert compare_runs.main([str(a), str(b), "--tables"]) == 0
    out = capsys.readouterr().out
    assert "identical; 3 addition(s) listed apart" in out
    # a key or table the later run lacks is a difference
    assert compare_runs.main([str(b), str(a), "--tables"]) == 1
