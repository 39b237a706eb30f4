"""Figures: ranking, heatmap and judge bias render from both score modes, sorted, labelled and
marked as the data allow, and save to byte-identical files for the same inputs. What a figure
shows is read from its artists (values, labels, their order and place), never its pixels; the
heatmaps and annotated bars are seaborn's."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from hbpsych_utils import study
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import judges, score_sources, scoring
from hbpsych_utils.reporting import drawing, figures, vocabulary

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror

J = ["J1", "J2", "J3"]
OWN = {"J1": "J1", "J2": "J2", "J3": "J3"}
# candidate x judge clipped means; J1..J3 are also the judges' own models, L is added later.
PER_JUDGE = pd.DataFrame(
    {"J1": [0.6, 0.3, 0.5, 0.2, 0.7], "J2": [0.4, 0.5, 0.5, 0.2, 0.6],
     "J3": [0.5, 0.4, 0.8, 0.3, 0.8]},
    index=pd.Index(["J1", "J2", "J3", "X", "L"], name="candidate"),
)
PER_JUDGE["in_study"] = [True, True, True, True, False]
# panel means (row means): J1 0.5, J2 0.4, J3 0.6, X 0.7/3, L 0.7 -> L, J3, J1, J2, X
EXPECTED_ORDER = ["L", "J3", "J1", "J2", "X"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(fig: Figure) -> list[str]:
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts]
        out += [ax.get_title(loc) for loc in ("left", "center", "right")]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return out


def _ytick_labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def _heatmap(ax) -> tuple[np.ndarray, dict[tuple[int, int], str]]:
    """What a heatmap shows: its cells' values (NaN where a cell has none) row by row, and the
    text written in each cell, by (row, column)."""
    mesh = ax.collections[0]
    values = np.ma.filled(np.ma.asarray(mesh.get_array(), dtype=float), np.nan)
    cells = {(int(y), int(x)): t.get_text() for t in ax.texts
             for x, y in [t.get_position()]}
    return values, cells


def _row_texts(cells: dict[tuple[int, int], str], row: int) -> list[str]:
    return [cells[k] for k in sorted(cells) if k[0] == row]


def _bars(ax) -> list[tuple[float, float]]:
    """Each horizontal bar as (its row's centre, its length), top row first."""
    return sorted(((p.get_y() + p.get_height() / 2, p.get_width()) for p in ax.patches
                   if p.get_height() > 0), key=lambda b: b[0])


def _synthetic_scores(n: int = 40, seed: int = 3) -> pd.DataFrame:
    """Per-conversation scores for the five candidates under three judges."""
    rng = np.random.default_rng(seed)
    base = {"J1": 0.5, "J2": 0.4, "J3": 0.6, "X": 0.25, "L": 0.7}
    rows = []
    for c, b in base.items():
        for k, j in enumerate(J):
            for p in range(n):
                rows.append({"judge": j, "candidate": c, "prompt_id": f"p{p:03d}",
                             "score": float(b + 0.05 * k + rng.normal(0, 0.2))})
    return pd.DataFrame(rows)


def _check_saved(fig: Figure, stem: Path) -> None:
    paths = figures.save(fig, stem)
    assert [p.suffix for p in paths] == [".png", ".svg"]
    first = [p.read_bytes() for p in paths]
    assert first[0][:8] == b"\x89PNG\r\n\x1a\n"
    assert first[1].lstrip().startswith(b"<?xml")
    assert b"<dc:date>" not in first[1] and b"Software" not in first[0]  # no run-specific metadata
    assert len(first[0]) > 10_000 and len(first[1]) > 10_000  # a drawing, not an empty canvas
    again = figures.save(fig, stem.parent / f"{stem.name}_again")
    assert [p.read_bytes() for p in again] == first  # byte-identical for the same figure


# --------------------------------------------------------------------------------------------
# Category distribution (the subset's composition)


def test_category_distribution_labels_and_saves(tmp_path: Path):
    counts = {"depression": 30, "perinatal_mh": 15, "psychosis": 1, "no category majority": 4}
    fig = figures.category_distribution(counts, title="toy subset")
    ax = fig.axes[0]
    # readers' names of the vocabulary's terms; a term without one is shown as written
    assert _ytick_labels(ax) == ["depression", "Perinatal mental health", "Psychosis",
                                 "no category majority"]
    assert fig._suptitle.get_text() == "toy subset (n = 50)"  # over the figure, not the axes
    # one bar per category in the order given, as long as its count, on its label's row
    assert _bars(ax) == [(0.0, 30), (1.0, 15), (2.0, 1), (3.0, 4)]
    assert list(ax.get_yticks()) == [0, 1, 2, 3]
    # each annotated at its end with count and share, to a tenth of a percent (a small
    # category never reads "(0%)")
    assert [(t.get_text(), t.xy) for t in ax.texts] == [
        ("30 (60.0%)", (30, 0)), ("15 (30.0%)", (15, 1)), ("1 (2.0%)", (1, 2)),
        ("4 (8.0%)", (4, 3))]
    assert ax.patches[3].get_facecolor()[:3] == pytest.approx((0.6, 0.6, 0.6))  # muted grey
    assert ax.patches[0].get_facecolor()[:3] == pytest.approx(
        tuple(int(figures.OKABE_ITO[0][i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert ax.get_xlabel() == "conversations"
    _check_saved(fig, tmp_path / "categories")


# --------------------------------------------------------------------------------------------
# Panel ranking


def test_ranking_paper_mode_is_sorted_marked_and_labelled(tmp_path: Path):
    table = scoring.paper_table(PER_JUDGE, J)
    fig = figures.panel_ranking(table, subset="toy subset", judge_models=J, later=(), level=0.95)
    ax = fig.axes[0]
    assert _ytick_labels(ax) == EXPECTED_ORDER
    title = ax.get_title("left")
    assert "toy subset" in title
    assert figures.POINT_ESTIMATES_SUBTITLE in title
    texts = _texts(fig)
    assert "0.700" in texts and "0.233" in texts  # L's and X's panel means, by hand
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sorted(legend) == sorted(
        ["study candidate", "judge model (also a candidate)", figures.LATER_LABEL]
    )
    # the later candidate is flagged through in_study even though ``later`` is empty
    assert ax.get_yticklabels()[0].get_fontstyle() == "italic"
    assert ax.get_yticklabels()[1].get_fontstyle() == "normal"
    _check_saved(fig, tmp_path / "ranking")


def test_ranking_with_intervals_draws_error_bars(tmp_path: Path):
    t1 = scoring.table1(_synthetic_scores(), judges=J, n_resamples=200, seed=1, level=0.95)
    fig = figures.panel_ranking(t1, subset="toy subset", judge_models=J, later=("L",), level=0.95)
    ax = fig.axes[0]
    title = ax.get_title("left")
    assert "95% bootstrap intervals, n = 40 conversations" in title
    assert figures.POINT_ESTIMATES_SUBTITLE not in title
    assert _ytick_labels(ax) == scoring.ranking(t1["panel_mean"])
    # one horizontal error bar per candidate, spanning exactly [ci_low, ci_high]
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    spans = sorted((round(s[0][0], 9), round(s[1][0], 9)) for s in segments)
    expected = sorted((round(lo, 9), round(hi, 9)) for lo, hi in zip(t1["ci_low"],
                                                                    t1["ci_high"], strict=True))
    assert spans == expected
    _check_saved(fig, tmp_path / "ranking_ci")


def test_ranking_needs_panel_mean():
    with pytest.raises(ValueError, match="panel_mean"):
        figures.panel_ranking(PER_JUDGE, subset="toy", level=0.95)


# --------------------------------------------------------------------------------------------
# Heatmap


def test_heatmap_sorted_annotated_and_own_cells_outlined(tmp_path: Path):
    fig = figures.judge_heatmap(PER_JUDGE, subset="toy subset", judges=J, own=OWN, later=())
    ax = fig.axes[0]
    assert _ytick_labels(ax) == EXPECTED_ORDER
    assert [t.get_text() for t in ax.get_xticklabels()] == J
    assert ax.collections[0].get_cmap().name == "cividis"
    values, cells = _heatmap(ax)
    np.testing.assert_allclose(values, PER_JUDGE.loc[EXPECTED_ORDER, J].to_numpy())
    # every cell annotated with its own value, row by row (each row's label on that row)
    assert len(cells) == 15
    assert _row_texts(cells, 0) == ["0.700", "0.600", "0.800"]  # row L
    for (i, k), text in cells.items():
        assert text == f"{values[i, k]:.3f}"
    # readable on its cell: black on the lightest (cividis' yellow), white on the darkest
    ink = {(int(y), int(x)): t.get_color() for t in ax.texts for x, y in [t.get_position()]}
    assert (ink[(0, 2)], ink[(4, 0)]) == ("black", "white")  # L under J3 0.8, X under J1 0.2
    assert list(ax.get_yticks()) == [0.5, 1.5, 2.5, 3.5, 4.5]
    # outlines on (J1, J1), (J2, J2), (J3, J3): rows 2, 3, 1 of the sorted table
    boxes = sorted((p.get_x(), p.get_y()) for p in ax.patches if isinstance(p, Rectangle)
                   and not p.get_fill())
    assert boxes == sorted([(0, 2), (1, 3), (2, 1)])
    assert "Clipped mean score by candidate and judge: toy subset" in ax.get_title("left")
    assert "added after the study" in ax.get_xlabel()
    assert fig.axes[1].get_title(loc="left") == "clipped\nmean\nscore"  # the colour bar
    _check_saved(fig, tmp_path / "heatmap")


def test_heatmap_follows_panel_mean_column_and_marks_missing_cells():
    t = PER_JUDGE.copy()
    t.loc["X", "J2"] = np.nan
    t["panel_mean"] = [0.1, 0.2, 0.3, 0.4, 0.5]  # reverses the order
    fig = figures.judge_heatmap(t, subset="toy", judges=J, own={})
    ax = fig.axes[0]
    assert _ytick_labels(ax) == ["L", "X", "J3", "J2", "J1"]
    values, cells = _heatmap(ax)
    assert np.isnan(values[1, 1]) and not np.isnan(values).sum() - 1
    assert _row_texts(cells, 1) == ["0.200", "–", "0.300"]  # row X
    assert not [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]


def test_slice_heatmap_keeps_the_order_given_and_names_its_columns():
    table = pd.DataFrame({"axis:accuracy": [0.5, np.nan],
                          "theme:emergency_referrals": [0.25, 0.75]}, index=["J1", "X"])
    fig = figures.score_heatmap(table, title="By axis", note="panel")
    ax = fig.axes[0]
    values, cells = _heatmap(ax)
    np.testing.assert_allclose(values, table.to_numpy())
    assert cells == {(0, 0): "0.500", (0, 1): "0.250", (1, 0): "–", (1, 1): "0.750"}
    assert _ytick_labels(ax) == ["J1", "X"]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        vocabulary.term_label(c) for c in table.columns]
    assert ax.get_title("left") == "By axis\npanel"


def test_the_heatmaps_and_annotated_bars_are_drawn_by_seaborn(monkeypatch) -> None:
    """seaborn draws them (the design card's choice), with the data the figure shows."""
    import seaborn

    calls: list[tuple[str, object]] = []

    class Recording:
        def heatmap(self, data, **kwargs):
            calls.append(("heatmap", np.asarray(data).round(3).tolist()))
            return seaborn.heatmap(data, **kwargs)

        def barplot(self, **kwargs):
            calls.append(("barplot", list(kwargs["x"])))
            return seaborn.barplot(**kwargs)

    for module in (drawing, figures):  # the heatmap is drawing's, the bars the figures'
        monkeypatch.setattr(module, "seaborn", Recording)
    figures.judge_heatmap(PER_JUDGE, subset="toy", judges=J, own=OWN, later=())
    figures.category_distribution({"depression": 3, "psychosis": 2}, title="t")
    metrics = judges.judge_metrics(PER_JUDGE.loc[["J1", "J2", "J3", "X"], J], J, own=OWN)
    figures.judge_bias(metrics, subset="toy", judges=None, level=0.95)
    assert calls == [
        ("heatmap", PER_JUDGE.loc[EXPECTED_ORDER, J].round(3).to_numpy().tolist()),
        ("barplot", [3, 2]),
        ("barplot", pytest.approx([m for m in metrics["severity"].values()])),
    ]


def test_heatmap_names_missing_judge_column():
    with pytest.raises(ValueError, match=r"J4"):
        figures.judge_heatmap(PER_JUDGE, subset="toy", judges=[*J, "J4"])


# --------------------------------------------------------------------------------------------
# Judge severity and self-preference


def test_judge_bias_point_estimates(tmp_path: Path):
    metrics = judges.judge_metrics(PER_JUDGE.loc[["J1", "J2", "J3", "X"], J], J, own=OWN)
    fig = figures.judge_bias(metrics, subset="toy subset", level=0.95, judges=None)
    ax_s, ax_p = fig.axes
    assert _ytick_labels(ax_s) == J
    title = fig._suptitle.get_text()
    assert "toy subset" in title and figures.POINT_ESTIMATES_SUBTITLE in title
    assert "over 4 candidates" in title
    # severity: 0.4 - 5.2/12 = -0.0333 (J1, J2) and 0.5 - 5.2/12 = +0.0667 (J3)
    assert [t.get_text() for t in ax_s.texts] == ["-0.033", "-0.033", "+0.067"]
    assert [x for bar in _bars(ax_s) for x in bar] == pytest.approx(
        [0, -0.4 / 12, 1, -0.4 / 12, 2, 0.8 / 12])  # each judge's bar on its row
    # self-preference raw 0.15, 0.15, 0.30; corrected 0.2 for each (tests/test_judges.py)
    pref = [t.get_text() for t in ax_p.texts]
    assert pref == ["+0.150", "+0.150", "+0.300", "+0.200", "+0.200", "+0.200"]
    assert not any(c.get_segments() for c in ax_p.collections)  # no error bars
    _check_saved(fig, tmp_path / "bias")


def test_judge_bias_with_bootstrap_intervals(tmp_path: Path):
    stats = judges.bootstrap_judge_stats(_synthetic_scores(), judges=J,
                                         candidates=["J1", "J2", "J3", "X"], own=OWN,
                                         n_resamples=200, seed=2, level=0.95)
    fig = figures.judge_bias(stats, subset="toy subset", level=0.95, judges=None)
    assert "95% bootstrap intervals" in fig._suptitle.get_text()
    ax_s, ax_p = fig.axes
    sev = stats[stats["stat"] == "severity"].set_index("judge")
    segs = sorted((round(s[0][0], 9), round(s[1][0], 9))
                  for c in ax_s.collections for s in c.get_segments())
    assert segs == sorted((round(sev.at[j, "low"], 9), round(sev.at[j, "high"], 9)) for j in J)
    assert sum(len(c.get_segments()) for c in ax_p.collections) == 6
    _check_saved(fig, tmp_path / "bias_ci")


def test_judge_bias_judge_without_own_model():
    metrics = {"severity": {"J1": -0.1, "J2": 0.1}, "self_preference_raw": {"J1": 0.05},
               "self_preference_corrected": {"J1": 0.15}}
    fig = figures.judge_bias(metrics, subset="toy", level=0.95, judges=None)
    assert "own model not a candidate" in _texts(fig)


def test_judge_stats_frame_needs_every_field():
    with pytest.raises(ValueError, match="self_preference_raw"):
        figures.judge_stats_frame({"severity": {"J1": 0.0}})


# --------------------------------------------------------------------------------------------
# The released matrices


@needs_mirror
@pytest.mark.parametrize("name, n", [("matrix_v1", 610), ("matrix_hard_v1", 119)])
def test_figures_on_released_matrices(tmp_path: Path, name: str, n: int):
    m = score_sources.read_matrix(sources.fetch(name))
    pj = scoring.paper_per_judge(m, include_later=True, judges=study.JUDGE_PANEL)
    table = scoring.paper_table(pj, judges=study.JUDGE_PANEL)
    subset = f"{name} (n = {n})"

    fig = figures.panel_ranking(table, subset=subset, level=0.95)
    labels = _ytick_labels(fig.axes[0])
    # models by their readers' names
    assert len(labels) == 23 and set(labels) == {study.display_name(c) for c in table.index}
    later = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_fontstyle() == "italic"]
    assert sorted(later) == sorted(study.display_name(c) for c in study.LATER_CANDIDATES)
    _check_saved(fig, tmp_path / "ranking")

    fig = figures.judge_heatmap(pj, subset=subset, judges=study.JUDGE_PANEL)
    assert _ytick_labels(fig.axes[0]) == labels  # same order as the ranking
    boxes = [p for p in fig.axes[0].patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(boxes) == 3
    _check_saved(fig, tmp_path / "heatmap")

    fig = figures.judge_bias(judges.paper_judge_metrics(m, judges=study.JUDGE_PANEL),
                             subset=subset, level=0.95, judges=None)
    assert "over 20 candidates" in fig._suptitle.get_text()
    _check_saved(fig, tmp_path / "bias")


@needs_mirror
def test_released_v1_ranking_hand_checked():
    m = score_sources.read_matrix(sources.fetch("matrix_v1"))
    table = scoring.paper_table(scoring.paper_per_judge(m, judges=study.JUDGE_PANEL),
                                judges=study.JUDGE_PANEL)
    fig = figures.panel_ranking(table, subset="HealthBench-Psych v1", level=0.95)
    labels = _ytick_labels(fig.axes[0])
    # from the CSV: kimi-k2.6 (0.599671 + 0.586262 + 0.694921) / 3 = 0.626951 leads,
    # gpt-5.5 (0.597851 + 0.584990 + 0.688751) / 3 = 0.623864 second, gpt-3.5-turbo last
    assert labels[:2] == ["Kimi K2.6", "GPT-5.5"] and labels[-1] == "GPT-3.5 Turbo"
    assert len(labels) == 20
    assert "0.627" in _texts(fig)


# --------------------------------------------------------------------------------------------
# Smaller panels: the figures follow the judges used


@pytest.mark.parametrize("used", [["J1", "J3"], ["J2"]], ids=["two", "one"])
def test_heatmap_and_ranking_for_the_judges_used(used: list[str], tmp_path: Path):
    per_judge = PER_JUDGE[used]  # a live run's table has only its judges' columns
    fig = figures.judge_heatmap(per_judge, subset="toy subset", judges=used)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == used
    assert _heatmap(ax)[0].shape == (5, len(used))
    boxes = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(boxes) == len(used)  # each judge's own model, outlined
    _check_saved(fig, tmp_path / "heatmap")
    table = scoring.paper_table(per_judge, used)
    fig = figures.panel_ranking(table, subset="toy subset", judge_models=used, later=(), level=0.95)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "judge model (also a candidate)" in legend
    # a candidate that judges nothing here is a study candidate, not a judge model
    markers = {c: line.get_marker() for c, line in zip(
        _ytick_labels(fig.axes[0]), [c.lines[0] for c in fig.axes[0].containers], strict=True)}
    assert {c for c, m in markers.items() if m == "D"} == set(used)


def test_judge_bias_with_two_judges():
    metrics = judges.judge_metrics(PER_JUDGE.loc[["J1", "J2", "J3", "X"], ["J1", "J3"]],
                                   ["J1", "J3"], own=OWN)
    fig = figures.judge_bias(metrics, subset="toy subset", level=0.95, judges=None)
    ax_s, ax_p = fig.axes
    assert _ytick_labels(ax_s) == ["J1", "J3"]
    assert [t.get_text() for t in ax_s.texts] == ["-0.050", "+0.050"]
    assert [t.get_text() for t in ax_p.texts] == ["+0.100", "+0.300", "+0.200", "+0.200"]
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == [
        "raw", "severity-corrected"]


def test_judge_bias_with_one_judge_says_why_there_is_no_self_preference(tmp_path: Path):
    metrics = judges.judge_metrics(PER_JUDGE.loc[["J1", "J2", "J3", "X"], ["J2"]], ["J2"],
                                   own=OWN)
    fig = figures.judge_bias(metrics, subset="toy subset", level=0.95, judges=None)
    ax_s, _ = fig.axes
    assert _ytick_labels(ax_s) == ["J2"]
    texts = _texts(fig)
    assert "no other judge to compare with" in texts
    assert "own model not a candidate" not in texts
    assert "a single judge" in fig._suptitle.get_text()
    assert not fig.legends  # no marker drawn, so no legend
    _check_saved(fig, tmp_path / "bias_one")


def test_a_figure_of_the_same_inputs_is_copied_from_the_cache_not_drawn(tmp_path) -> None:
    cache = tmp_path / "cache"
    counts = {"anxiety": 5, "sleep": 3}
    first = figures.category_distribution(counts, title="t", cache=cache)
    assert not isinstance(first, figures.CachedFigure)  # nothing cached yet: drawn
    drawn = figures.save(first, tmp_path / "a" / "fig", cache=cache)
    again = figures.category_distribution(counts, title="t", cache=cache)
    assert isinstance(again, figures.CachedFigure)
    copied = figures.save(again, tmp_path / "b" / "fig")
    assert [p.read_bytes() for p in copied] == [p.read_bytes() for p in drawn]
    assert figures.png_bytes(again) == drawn[0].read_bytes() == figures.png_bytes(first)
    other = figures.category_distribution({**counts, "sleep": 4}, title="t", cache=cache)
    assert not isinstance(other, figures.CachedFigure)  # other data: drawn again
