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


def _cells(md: str, first: str) -> list[str]:
    """The cells of the Markdown table row whose second cell is ``first``."""
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 1 and cells[1] == first:
            return cells
    raise AssertionError(f"no row {first!r}")


def test_paper_table1_with_intervals_puts_subsets_side_by_side():
    st = tables.table1(scoring.table1(_scores(), judges=J, n_resamples=200, seed=5,
                                      level=0.95), judges=J)
    other = st.copy()
    other["panel_mean"] = other["panel_mean"] - 0.1
    t = tables.paper_table1({"v1": st, "hard": other}, n_resamples=200, judges=None, level=0.95)
    assert t.label == "Table 1"
    assert list(t.frame.columns) == ["Rank", "Model", "HealthBench-Psych v1 (n = 4)",
                                     "HealthBench-Psych-Hard v1 (n = 4)"]
    lo, hi = st.loc[0, "ci_low"], st.loc[0, "ci_high"]
    # A's panel: per conversation (0.5+0.5+0.2)/3 = 0.4, 0.766667, 0.233333, 0.6 -> mean 0.5
    assert t.frame.iloc[0].tolist() == ["1", "A", f"0.500 [{lo:.3f}, {hi:.3f}]",
                                        f"0.400 [{lo:.3f}, {hi:.3f}]"]
    assert "95% intervals" in t.caption and "200 resamples" in t.caption
    assert "Table I1" in t.caption
    md = t.markdown()
    assert md.startswith("**Table 1.** Three-judge panel means on HealthBench-Psych v1 and ")
    assert _cells(md, "B")[:3] == ["2", "B", t.frame.iloc[1, 2]]
    html = t._repr_html_()
    assert html.count("<table") == 1 and '<p class="hb-caption">Table 1. ' in html
    # names left, numbers right (the display vocabulary): the model column is a name column
    assert '<th class="hb-name" scope="col">Model</th>' in html
    assert '<td class="hb-num">0.200 [0.100, 0.300]</td>' in html


def test_paper_table1_point_estimates_say_why_and_mark_later():
    pt = tables.table1(scoring.paper_table(PER_JUDGE, J), judges=J, n=50)
    t = tables.paper_table1({"v1": pt}, judges=None, level=0.95)
    assert t.frame["Model"].tolist() == ["L †", "J3", "J1", "J2", "X"]
    assert t.frame.iloc[0, 2] == "0.700"  # no interval in a point-estimate cell
    assert "point estimates" in t.caption and "no interval" in t.caption
    assert t.notes == [tables.LATER_NOTE]
    tex = t.latex("tab:table1")
    assert r"L \textdagger{}" in tex and r"\begin{tabular}{rlr}" in tex


def test_per_judge_table_lists_each_judge_and_the_panel():
    pt = tables.table1(scoring.paper_table(PER_JUDGE, J), judges=J, n=50)
    t = tables.per_judge_table(pt, subset="v1", judges=J)
    assert t.label == "Table I1"
    assert list(t.frame.columns) == ["Rank", "Model", "J1", "J2", "J3", "Panel"]
    # J3's row: J1 0.5, J2 0.5, J3 0.8, panel (0.5 + 0.5 + 0.8) / 3 = 0.6
    assert t.frame.iloc[1].tolist() == ["2", "J3", "0.500", "0.500", "0.800", "0.600"]
    assert "HealthBench-Psych v1 (n = 50)" in t.caption


def test_table1_texts_are_every_file_and_deterministic():
    st = tables.table1(scoring.table1(_scores(), judges=J, n_resamples=100, seed=5,
                                      level=0.95), judges=J)
    a = tables.table1_texts({"v1": st}, judges=J, n_resamples=100, level=0.95)
    b = tables.table1_texts({"v1": st}, judges=J, n_resamples=100, level=0.95)
    assert a == b
    assert sorted(a) == sorted(["table1_v1.csv", *tables.TABLE1_FILES])
    assert a["table1_v1.csv"] == tables.csv_text(st)
    rows = list(csv.DictReader(io.StringIO(a["table1_v1.csv"])))
    assert rows[0]["panel_mean"] == "0.500000" and rows[1]["panel_mean"] == "0.200000"
    assert rows[1]["J1"] == "0.250000" and rows[1]["J2"] == "0.150000" and rows[0]["n"] == "4"


# --------------------------------------------------------------------------------------------
# The released matrices


def _released(name: str, include_later: bool = False) -> pd.DataFrame:
    m = score_sources.read_matrix(sources.fetch(name))
    pt = scoring.paper_table(scoring.paper_per_judge(m, include_later=include_later,
                                                     judges=study.JUDGE_PANEL),
                             judges=study.JUDGE_PANEL)
    return tables.table1(pt, n=score_sources.matrix_n(m), judges=study.JUDGE_PANEL)


def _matrix_panel(name: str, candidate: str) -> float:
    """A candidate's panel mean from the released matrix read with csv: the judges' mean."""
    path = sources.fetch(name)
    values = [float(r["clipped_mean_score"]) for r in csv.DictReader(io.StringIO(
        path.read_text(encoding="utf-8"))) if r["candidate"] == candidate]
    assert len(values) == 3
    return sum(values) / 3


@needs_mirror
def test_table1_on_the_released_matrices():
    v1, hard = _released("matrix_v1"), _released("matrix_hard_v1")
    texts = tables.table1_texts({"v1": v1, "hard": hard}, judges=study.JUDGE_PANEL, level=0.95)
    rows = list(csv.DictReader(io.StringIO(texts["table1_v1.csv"])))
    assert len(rows) == 20
    assert list(rows[0]) == ["rank", "candidate", "panel_mean", "ci_low", "ci_high", "n",
                             *study.JUDGE_PANEL, "in_study"]
    # matrix_v1.csv: kimi-k2.6 = 0.599671 (GPT-4.1), 0.586262 (Haiku), 0.694921 (Gemini);
    # (0.599671 + 0.586262 + 0.694921) / 3 = 0.626951
    assert (rows[0]["rank"], rows[0]["candidate"], rows[0]["panel_mean"], rows[0]["n"]) == (
        "1", "kimi-k2.6", "0.626951", "610")
    md = texts["table1.md"]
    header = _cells(md, "Model")
    assert header == ["Rank", "Model", "HealthBench-Psych v1 (n = 610)",
                      "HealthBench-Psych-Hard v1 (n = 119)"]
    kimi = _cells(md, "Kimi K2.6")
    assert kimi == ["1", "Kimi K2.6", f"{_matrix_panel('matrix_v1', 'kimi-k2.6'):.3f}",
                    f"{_matrix_panel('matrix_hard_v1', 'kimi-k2.6'):.3f}"]
    assert len([line for line in md.splitlines() if line.startswith("|")]) == 2 + 20
    assert "†" not in md
    appendix = texts["table_i1.md"]
    assert _cells(appendix, "Kimi K2.6") == ["1", "Kimi K2.6", "0.600", "0.586", "0.695",
                                             "0.627"]


@needs_mirror
def test_table1_on_released_hard_with_later():
    hard = _released("matrix_hard_v1", include_later=True)
    assert len(hard) == 23 and set(hard["n"]) == {119}
    assert sorted(hard.loc[~hard["in_study"], "candidate"]) == sorted(study.LATER_CANDIDATES)
    tex = tables.paper_table1({"hard": hard}, judges=None, level=0.95).latex("tab:t")
    assert tex.count(r"\textdagger{}") == 4  # three rows and the note
