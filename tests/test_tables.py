"""Table 1 and the CSV / Markdown / LaTeX writers: layout, values, escaping, determinism."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils import study
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import score_sources, scoring
from hbpsych_utils.reporting import tables

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror

J = ["J1", "J2", "J3"]
PER_JUDGE = pd.DataFrame(
    {"J1": [0.6, 0.3, 0.5, 0.2, 0.7], "J2": [0.4, 0.5, 0.5, 0.2, 0.6],
     "J3": [0.5, 0.4, 0.8, 0.3, 0.8]},
    index=pd.Index(["J1", "J2", "J3", "X", "L"], name="candidate"),
)
PER_JUDGE["in_study"] = [True, True, True, True, False]


def _read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


# --------------------------------------------------------------------------------------------
# Formatting and the generic writers


@pytest.mark.parametrize(
    "value, expected",
    [(2 / 3, "0.667"), (-1e-4, "0.000"), (-0.25, "-0.250"), (np.float64(0.5), "0.500"),
     (np.int64(7), "7"), (12, "12"), (np.nan, ""), (None, ""), (pd.NA, ""), (True, "yes"),
     ("text", "text")],
)
def test_format_number(value, expected):
    assert tables.format_number(value, 3) == expected


def test_markdown_by_hand():
    df = pd.DataFrame({"name": ["a|b", "c"], "x": [0.12345, -0.0004], "k": [3, 12]})
    expected = (
        "| name |     x |   k |\n"
        "| :--- | ----: | --: |\n"
        "| a\\|b | 0.123 |   3 |\n"
        "| c    | 0.000 |  12 |\n"
    )
    assert tables.to_markdown(df) == expected
    assert tables.to_markdown(df, notes=["note one"]) == expected + "\nnote one\n"


def test_latex_by_hand():
    df = pd.DataFrame({"model_id": ["a_b & c", "d †"], "score": [0.5, 0.25]})
    expected = "\n".join([
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{x\% y}",
        r"\label{tab:t}",
        r"\begin{tabular}{lr}",
        r"\toprule",
        r"model\_id & score \\",
        r"\midrule",
        r"a\_b \& c & 0.500 \\",
        r"d \textdagger{} & 0.250 \\",
        r"\bottomrule",
        r"\end{tabular}",
        r"\par\smallskip{\footnotesize n1}",
        r"\end{table}",
    ]) + "\n"
    assert tables.to_latex(df, caption="x% y", label="tab:t", notes=["n1"]) == expected


def test_alignment_must_match_columns():
    df = pd.DataFrame({"a": [1], "b": [2]})
    with pytest.raises(ValueError, match="one of l/r/c per column"):
        tables.to_markdown(df, align=["l"])


def test_csv_fixed_floats_and_empty_missing(tmp_path: Path):
    df = pd.DataFrame({"a": [1 / 3, np.nan], "b": ["x", "y"]})
    path = tables.write_csv(df, tmp_path / "t.csv")
    assert path.read_bytes() == b"a,b\n0.333333,x\n,y\n"


# --------------------------------------------------------------------------------------------
# Table 1 layout


def test_table1_from_paper_table():
    t1 = tables.table1(scoring.paper_table(PER_JUDGE, J), judges=J, n=50)
    assert list(t1.columns) == ["rank", "candidate", "panel_mean", "ci_low", "ci_high", "n",
                                *J, "in_study"]
    assert t1["candidate"].tolist() == ["L", "J3", "J1", "J2", "X"]
    assert t1["rank"].tolist() == [1, 2, 3, 4, 5]
    # row means by hand: L (0.7+0.6+0.8)/3, J3 (0.5+0.5+0.8)/3, ..., X (0.2+0.2+0.3)/3
    np.testing.assert_allclose(t1["panel_mean"], [0.7, 0.6, 0.5, 0.4, 0.7 / 3])
    assert t1[["ci_low", "ci_high"]].isna().all(axis=None)
    assert t1["n"].tolist() == [50] * 5
    assert t1.loc[t1["candidate"] == "J3", "J3"].item() == 0.8
    assert t1["in_study"].tolist() == [False, True, True, True, True]
    assert not tables.has_intervals(t1)


def test_table1_n_per_candidate_and_errors():
    pt = scoring.paper_table(PER_JUDGE, J)
    n = {"J1": 10, "J2": 11, "J3": 12, "X": 13, "L": 14}
    assert tables.table1(pt, judges=J, n=n)["n"].tolist() == [14, 12, 10, 11, 13]
    assert tables.table1(pt, judges=J)["n"].isna().all()
    with pytest.raises(ValueError, match=r"no n given for candidate\(s\) \['L'\]"):
        tables.table1(pt, judges=J, n={k: v for k, v in n.items() if k != "L"})
    with pytest.raises(ValueError, match=r"J4"):
        tables.table1(pt, judges=[*J, "J4"])


def test_matrix_n_is_smallest_cell():
    m = pd.DataFrame({"candidate": ["a", "a", "b", "b"], "judge": ["J1", "J2", "J1", "J2"],
                      "clipped_mean_score": [0.1, 0.2, 0.3, 0.4], "n_prompts": [9, 7, 5, 5]})
    assert score_sources.matrix_n(m).to_dict() == {"a": 7, "b": 5}


def _scores() -> pd.DataFrame:
    """Three judges, two candidates, four conversations; hand-checkable panel means."""
    rows = []
    a = {"J1": [0.5, 1.0, 0.0, 0.5], "J2": [0.5, 0.5, 0.5, 0.5], "J3": [0.2, 0.8, 0.2, 0.8]}
    b = {"J1": [0.1, 0.2, 0.3, 0.4], "J2": [0.0, 0.0, 0.3, 0.3], "J3": [0.2, 0.1, 0.3, 0.2]}
    for cand, table in (("A", a), ("B", b)):
        for j, vals in table.items():
            for p, v in enumerate(vals):
                rows.append({"judge": j, "candidate": cand, "prompt_id": f"p{p}", "score": v})
    return pd.DataFrame(rows)


def test_write_table1_with_intervals(tmp_path: Path):
    st = scoring.table1(_scores(), judges=J, n_resamples=200, seed=5)
    paths = tables.write_table1(st, tmp_path / "table1", subset="toy subset", judges=J,
                                n_resamples=200)
    assert [p.name for p in paths] == ["table1.csv", "table1.md", "table1.tex"]
    rows = _read_csv(paths[0])
    assert [r["candidate"] for r in rows] == ["A", "B"]
    # A's panel: per conversation (0.5+0.5+0.2)/3 = 0.4, 0.766667, 0.233333, 0.6 -> mean 0.5;
    # B's: 0.1, 0.1, 0.3, 0.3 -> 0.2. Per-judge A: J1 0.5, J2 0.5, J3 0.5; B: J1 0.25
    assert rows[0]["panel_mean"] == "0.500000" and rows[1]["panel_mean"] == "0.200000"
    assert rows[1]["J1"] == "0.250000" and rows[1]["J2"] == "0.150000"
    assert rows[0]["n"] == "4"
    lo, hi = float(rows[0]["ci_low"]), float(rows[0]["ci_high"])
    assert 0.233333 <= lo <= 0.5 <= hi <= 0.766667
    md = paths[1].read_text(encoding="utf-8")
    assert md.startswith("**Table 1.** Panel ranking on toy subset (95% bootstrap intervals).")
    assert "| 95% CI" in md
    assert f"[{lo:.3f}, {hi:.3f}]" in md
    assert "(200 resamples)" in md
    assert tables.POINT_ESTIMATES_NOTE not in md
    tex = paths[2].read_text(encoding="utf-8")
    assert r"\caption{Panel ranking on toy subset (95\% bootstrap intervals).}" in tex
    assert r"1 & A & 0.500 & " in tex
    assert tex.count(r"\\") >= 3  # header and two rows


def test_write_table1_paper_mode_marks_point_estimates_and_later(tmp_path: Path):
    paths = tables.write_table1(scoring.paper_table(PER_JUDGE, J), tmp_path / "t", subset="toy",
                                judges=J, n=50)
    md = paths[1].read_text(encoding="utf-8")
    assert "(point estimates)" in md and tables.POINT_ESTIMATES_NOTE in md
    assert "95% CI" not in md
    assert "| L †" in md and tables.LATER_NOTE in md
    assert md.count("†") == 2  # the row and the note
    header = md.splitlines()[2]
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Rank", "Candidate", "Panel mean", "J1", "J2", "J3", "n"]
    tex = paths[2].read_text(encoding="utf-8")
    assert r"L \textdagger{}" in tex
    assert r"\begin{tabular}{rlrrrrr}" in tex
    csv_rows = _read_csv(paths[0])
    assert csv_rows[0]["ci_low"] == "" and csv_rows[0]["in_study"] == "False"


def test_write_table1_is_deterministic(tmp_path: Path):
    st = scoring.table1(_scores(), judges=J, n_resamples=100, seed=5)
    a = tables.write_table1(st, tmp_path / "a", subset="toy", judges=J)
    b = tables.write_table1(st, tmp_path / "b", subset="toy", judges=J)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


# --------------------------------------------------------------------------------------------
# The released matrices


@needs_mirror
def test_table1_on_released_v1(tmp_path: Path):
    m = score_sources.read_matrix(sources.fetch("matrix_v1"))
    pt = scoring.paper_table(scoring.paper_per_judge(m))
    paths = tables.write_table1(pt, tmp_path / "table1_v1", subset="HealthBench-Psych v1",
                                n=score_sources.matrix_n(m))
    rows = _read_csv(paths[0])
    assert len(rows) == 20
    assert list(rows[0]) == ["rank", "candidate", "panel_mean", "ci_low", "ci_high", "n",
                             *study.JUDGE_PANEL, "in_study"]
    top = rows[0]
    # matrix_v1.csv: kimi-k2.6 = 0.599671 (GPT-4.1), 0.586262 (Haiku), 0.694921 (Gemini);
    # (0.599671 + 0.586262 + 0.694921) / 3 = 0.626951
    assert (top["rank"], top["candidate"], top["panel_mean"], top["n"]) == (
        "1", "kimi-k2.6", "0.626951", "610")
    assert top["gpt-4.1-2025-04-14"] == "0.599671"
    assert top["claude-haiku-4-5-20251001"] == "0.586262"
    assert top["gemini-2.5-flash"] == "0.694921"
    assert rows[-1]["candidate"] == "gpt-3.5-turbo"
    md = paths[1].read_text(encoding="utf-8")
    first = next(line for line in md.splitlines() if "kimi-k2.6" in line)
    assert [c.strip() for c in first.strip("|").split("|")] == [
        "1", "kimi-k2.6", "0.627", "0.600", "0.586", "0.695", "610"]
    assert "Gemini 2.5 Flash" in md and "†" not in md


@needs_mirror
def test_table1_on_released_hard_with_later(tmp_path: Path):
    m = score_sources.read_matrix(sources.fetch("matrix_hard_v1"))
    pt = scoring.paper_table(scoring.paper_per_judge(m, include_later=True))
    paths = tables.write_table1(pt, tmp_path / "t", subset="Psych-Hard v1",
                                n=score_sources.matrix_n(m))
    rows = _read_csv(paths[0])
    assert len(rows) == 23 and {r["n"] for r in rows} == {"119"}
    assert sorted(r["candidate"] for r in rows if r["in_study"] == "False") == sorted(
        study.LATER_CANDIDATES)
    tex = paths[2].read_text(encoding="utf-8")
    assert tex.count(r"\textdagger{}") == 4  # three rows and the note
