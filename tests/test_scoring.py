"""Clipped means, panel scores, bootstrap, paired differences, Holm, Table 1, paper mode."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils import study
from hbpsych_utils.evaluation import score_sources, scoring

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror


def test_clipped_mean_clips_the_mean_not_the_scores():
    assert scoring.clipped_mean([0.2, 0.4]) == pytest.approx(0.3)
    # mean is 1.1 -> clipped to 1
    assert scoring.clipped_mean([0.7, 1.5]) == 1.0
    # mean is -0.15 -> clipped to 0
    assert scoring.clipped_mean([-0.5, 0.2]) == 0.0
    # a negative conversation pulls the mean down before clipping: (1 + 1 - 0.5) / 3 = 0.5
    assert scoring.clipped_mean([1.0, 1.0, -0.5]) == pytest.approx(0.5)


def test_clipped_mean_refuses_missing_scores():
    with pytest.raises(scoring.ScoringError, match="non-finite"):
        scoring.clipped_mean([0.5, float("nan")])
    with pytest.raises(scoring.ScoringError, match="no scored"):
        scoring.clipped_mean([])


def test_resample_counts_shape_and_seed():
    w1 = scoring.resample_counts(7, 50, np.random.default_rng(3))
    w2 = scoring.resample_counts(7, 50, np.random.default_rng(3))
    assert w1.shape == (50, 7)
    assert (w1.sum(axis=1) == 7).all()
    assert (w1 == w2).all()


def test_percentile_interval_takes_its_level_by_hand():
    """21 resamples 0, 0.05, ..., 1 (shuffled): numpy's linear interpolation puts the p-th
    percentile at position p/100 * 20 of the sorted values, so a 0.90 interval is the 5th and
    95th percentiles (positions 1 and 19: 0.05 and 0.95) and a 0.95 interval the 2.5th and
    97.5th (positions 0.5 and 19.5: 0.025 and 0.975). A 90% interval is not a 95% one."""
    x = np.random.default_rng(4).permutation(np.arange(21) / 20)
    ninety = scoring.percentile_interval(x, 0.90, n=21)
    assert (ninety.low, ninety.high) == (pytest.approx(0.05), pytest.approx(0.95))
    assert ninety.undefined is None
    ninety_five = scoring.percentile_interval(x, 0.95, n=21)
    assert (ninety_five.low, ninety_five.high) == (pytest.approx(0.025), pytest.approx(0.975))
    assert ninety_five != ninety
    assert scoring.percentile_interval(x, study.CI_LEVEL, n=21) == ninety_five
    # non-finite resamples (a statistic undefined in that resample) are left out
    assert scoring.percentile_interval([*x, np.nan, np.inf], 0.90, n=21) == ninety


def test_percentile_interval_level_is_required_and_checked():
    with pytest.raises(TypeError):
        scoring.percentile_interval([0.1, 0.2], n=2)  # type: ignore[call-arg]
    for bad in (0.0, 1.0, 95):
        with pytest.raises(scoring.ScoringError, match="level"):
            scoring.percentile_interval([0.1, 0.2], bad, n=2)


def test_an_interval_needs_two_conversations():
    """Over one conversation every resample is the same draw: no interval (NaN ends, with the
    reason), not a zero-width one; the same where no resample is finite."""
    one = scoring.percentile_interval([0.4] * 50, 0.95, n=1)
    assert math.isnan(one.low) and math.isnan(one.high)
    assert one.undefined == scoring.ONE_CONVERSATION
    none = scoring.percentile_interval([np.nan] * 5, 0.95, n=5)
    assert math.isnan(none.low) and none.undefined == scoring.NO_RESAMPLE
    ci = scoring.bootstrap_ci([0.7], seed=1, level=0.95)
    assert (ci.estimate, ci.n, ci.undefined) == (0.7, 1, scoring.ONE_CONVERSATION)
    assert math.isnan(ci.low) and math.isnan(ci.high)
    iv, std = scoring.interval_and_std([0.7], seed=1, level=0.95)
    # the reference's bootstrap_std over one conversation stays what it computes: 0
    assert math.isnan(iv.low) and std == pytest.approx(0.0, abs=1e-12)
    d = scoring.paired_difference(pd.Series({"p": 0.9}), pd.Series({"p": 0.4}), seed=1, level=0.95)
    assert d.difference == pytest.approx(0.5) and math.isnan(d.low) and math.isnan(d.high)


def test_bootstrap_constant_scores_degenerate_interval():
    ci = scoring.bootstrap_ci([0.4] * 10, seed=1, level=0.95)
    assert (ci.estimate, ci.low, ci.high, ci.n) == (pytest.approx(0.4), pytest.approx(0.4),
                                                     pytest.approx(0.4), 10)


def test_bootstrap_two_point_distribution():
    # n = 2: resample means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so the 2.5% and
    # 97.5% percentiles of 1,000 resamples are 0 and 1.
    ci = scoring.bootstrap_ci([0.0, 1.0], seed=0, level=0.95)
    assert (ci.estimate, ci.low, ci.high) == (0.5, 0.0, 1.0)


def test_bootstrap_clips_each_resample():
    # resample means 0.5, 1.0, 1.5 -> clipped to 0.5, 1.0, 1.0: the upper limit is 1, not 1.5
    ci = scoring.bootstrap_ci([1.5, 0.5], seed=0, level=0.95)
    assert (ci.estimate, ci.low, ci.high) == (1.0, 0.5, 1.0)
    means = scoring.bootstrap_means([1.5, 0.5], seed=0)
    assert set(np.unique(means)) == {0.5, 1.0}


def test_bootstrap_is_seeded():
    rng = np.random.default_rng(11)
    x = rng.uniform(-0.2, 1.0, size=200)
    a = scoring.bootstrap_ci(x, seed=5, level=0.95)
    b = scoring.bootstrap_ci(x, seed=5, level=0.95)
    c = scoring.bootstrap_ci(x, seed=6, level=0.95)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low < a.estimate < a.high


def test_reference_bootstrap_std():
    assert scoring.reference_bootstrap_std([0.3] * 20, seed=0) == pytest.approx(0.0, abs=1e-12)
    # two-point case: std of {0, .5, 1} w.p. {1/4, 1/2, 1/4} is sqrt(1/8) = 0.3536
    assert scoring.reference_bootstrap_std([0.0, 1.0], seed=2) == pytest.approx(
        math.sqrt(1 / 8), abs=0.02
    )


def _long(rows):
    return pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id", "score"])


def test_panel_uses_only_conversations_all_judges_scored():
    s = _long([
        ("j1", "m", "a", 0.2), ("j2", "m", "a", 0.4), ("j3", "m", "a", 0.9),
        ("j1", "m", "b", 1.0), ("j2", "m", "b", 0.5), ("j3", "m", "b", np.nan),
        ("j1", "m", "c", -0.3), ("j2", "m", "c", 0.0), ("j3", "m", "c", 0.3),
    ])
    panel = scoring.panel_conversation_scores(s, "m", ["j1", "j2", "j3"])
    assert list(panel.index) == ["a", "c"]
    assert panel["a"] == pytest.approx(0.5)  # (0.2 + 0.4 + 0.9) / 3
    assert panel["c"] == pytest.approx(0.0)  # (-0.3 + 0 + 0.3) / 3


def test_table1_by_hand():
    s = _long([
        ("j1", "A", "p", 0.6), ("j2", "A", "p", 0.8),
        ("j1", "A", "q", 0.2), ("j2", "A", "q", 0.4),
        ("j1", "B", "p", 0.9), ("j2", "B", "p", 0.7),
        ("j1", "B", "q", 0.5), ("j2", "B", "q", np.nan),
    ])
    t = scoring.table1(s, judges=["j1", "j2"], n_resamples=200, seed=0, level=0.95)
    assert list(t.index) == ["B", "A"]
    # B: panel only over p: (0.9 + 0.7) / 2 = 0.8; j1 mean over p, q = 0.7; j2 over p = 0.7
    assert t.loc["B", "panel_mean"] == pytest.approx(0.8)
    assert t.loc["B", "n_panel"] == 1
    assert t.loc["B", "j1"] == pytest.approx(0.7)
    assert t.loc["B", "j2"] == pytest.approx(0.7)
    # A: panel per conversation 0.7 and 0.3 -> 0.5; j1 = 0.4, j2 = 0.6
    assert t.loc["A", "panel_mean"] == pytest.approx(0.5)
    assert (t.loc["A", "j1"], t.loc["A", "j2"]) == (pytest.approx(0.4), pytest.approx(0.6))
    assert t.loc["A", "ci_low"] == pytest.approx(0.3)
    assert t.loc["A", "ci_high"] == pytest.approx(0.7)
    assert list(t["rank"]) == [1, 2]


def test_score_table_rejects_duplicates():
    s = _long([("j", "m", "a", 0.1), ("j", "m", "a", 0.2)])
    with pytest.raises(scoring.ScoringError, match="duplicate"):
        scoring.per_judge_means(s)


def test_paired_difference_constant_shift():
    idx = [f"p{i}" for i in range(30)]
    b = pd.Series(np.linspace(0.1, 0.5, 30), index=idx)
    a = b + 0.1
    r = scoring.paired_difference(a, b, names=("a", "b"), seed=0, level=0.95)
    assert r.difference == pytest.approx(0.1)
    assert (r.low, r.high) == (pytest.approx(0.1), pytest.approx(0.1))
    # every resample difference is > 0: p = 2 * (0 + 1) / (1000 + 1)
    assert r.p_value == pytest.approx(2 / 1001)
    assert r.n == 30


def test_paired_difference_identical_and_common_conversations():
    a = pd.Series([0.3, 0.6, 0.9], index=["x", "y", "z"])
    b = pd.Series([0.3, 0.6, np.nan, 0.1], index=["x", "y", "z", "w"])
    r = scoring.paired_difference(a, b, seed=0, level=0.95)
    assert r.n == 2
    assert r.difference == 0.0
    assert r.p_value == 1.0


def test_holm_by_hand():
    # sorted: .005*4 = .02, .01*3 = .03, .03*2 = .06, .04*1 = .04 -> monotone .06
    got = scoring.holm_bonferroni([0.01, 0.04, 0.03, 0.005])
    assert got == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert scoring.holm_bonferroni([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert scoring.holm_bonferroni([]) == []
    with pytest.raises(scoring.ScoringError):
        scoring.holm_bonferroni([1.2])


def test_pairwise_family():
    idx = [f"p{i}" for i in range(40)]
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.6, 40)
    per = {
        "A": pd.Series(base + 0.2, index=idx),
        "B": pd.Series(base + 0.1, index=idx),
        "C": pd.Series(base, index=idx),
    }
    df = scoring.pairwise_differences(per, ["A", "B", "C"], n_resamples=500, seed=1, level=0.95)
    assert list(zip(df["a"], df["b"], strict=True)) == [("A", "B"), ("A", "C"), ("B", "C")]
    assert df["difference"].to_numpy() == pytest.approx([0.1, 0.2, 0.1])
    # all three raw p-values are 2/501; Holm multiplies by 3, 2, 1 then takes the running max
    assert df["p_value"].to_numpy() == pytest.approx([2 / 501] * 3)
    assert df["p_holm"].to_numpy() == pytest.approx([6 / 501] * 3)


# ---------------------------------------------------------------------------- paper mode


def test_read_matrix_errors_name_file_and_line(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("candidate,judge,clipped_mean_score,n_prompts\nA,j,0.5,10\nB,j,oops,10\n")
    with pytest.raises(scoring.ScoringError, match=r"m\.csv:3: field 'clipped_mean_score'"):
        score_sources.read_matrix(p)
    p.write_text("candidate,judge,clipped_mean_score,n_prompts\nA,j,0.5,10\nA,j,0.6,10\n")
    with pytest.raises(scoring.ScoringError, match="repeats line 2"):
        score_sources.read_matrix(p)
    p.write_text("candidate,judge,score\nA,j,0.5\n")
    with pytest.raises(scoring.ScoringError, match="header"):
        score_sources.read_matrix(p)
    p.write_text("candidate,judge,clipped_mean_score,n_prompts\r\nA,j,1.5,10\r\n")
    with pytest.raises(scoring.ScoringError, match="outside"):
        score_sources.read_matrix(p)


def test_paper_mode_synthetic():
    m = pd.DataFrame(
        [("A", "j1", 0.5, 3), ("A", "j2", 0.7, 3), ("B", "j1", 0.6, 3), ("B", "j2", 0.8, 3),
         ("Z", "j1", 0.9, 3), ("Z", "j2", 0.9, 3)],
        columns=list(score_sources.MATRIX_COLUMNS),
    )
    pj = scoring.paper_per_judge(m, judges=["j1", "j2"], study_candidates=["A", "B"])
    assert list(pj.index) == ["A", "B"]
    met = score_sources.paper_scores(pj, judges=["j1", "j2"])
    assert met.panel_mean == {"A": pytest.approx(0.6), "B": pytest.approx(0.7)}
    assert met.ranking == ["B", "A"]
    assert met.per_judge["j2"]["A"] == 0.7 and met.point_estimates_only
    pj_all = scoring.paper_per_judge(
        m, judges=["j1", "j2"], study_candidates=["A", "B"], include_later=True
    )
    assert pj_all.loc["Z", "in_study"] == False  # noqa: E712
    assert scoring.ranking(scoring.paper_panel_means(pj_all, ["j1", "j2"]))[0] == "Z"
    with pytest.raises(scoring.ScoringError, match="missing"):
        scoring.paper_per_judge(m, judges=["j1", "j2"], study_candidates=["A", "Q"])


@needs_mirror
def test_paper_mode_from_released_v1_matrix():
    from hbpsych_utils.core import sources

    m = score_sources.read_matrix(sources.fetch("matrix_v1"))
    assert len(m) == 69
    pj = scoring.paper_per_judge(m, source="matrix_v1", judges=study.JUDGE_PANEL)
    assert len(pj) == 20 and pj["in_study"].all()
    table = scoring.paper_table(pj, judges=study.JUDGE_PANEL)
    # kimi-k2.6 rows: haiku 0.586262, gemini 0.694921, gpt-4.1 0.599671 -> 1.880854 / 3
    assert table.loc["kimi-k2.6", "panel_mean"] == pytest.approx(0.626951333333, abs=1e-9)
    # gpt-5.5: (0.584990 + 0.688751 + 0.597851) / 3 = 0.623864
    assert table.loc["gpt-5.5", "panel_mean"] == pytest.approx(0.623864, abs=1e-9)
    # claude-opus-5: (0.581639 + 0.679574 + 0.597565) / 3 = 0.619592667
    assert table.loc["claude-opus-5", "panel_mean"] == pytest.approx(0.619592667, abs=1e-9)
    assert list(table.index[:3]) == ["kimi-k2.6", "gpt-5.5", "claude-opus-5"]
    # gpt-3.5-turbo: (0.129478 + 0.272775 + 0.125420) / 3 = 0.175891 -> last
    assert table.index[-1] == "gpt-3.5-turbo"
    assert table.loc["gpt-3.5-turbo", "panel_mean"] == pytest.approx(0.175891, abs=1e-9)
    later = scoring.paper_per_judge(m, include_later=True, judges=study.JUDGE_PANEL)
    assert len(later) == 23
    assert sorted(later.index[~later["in_study"]]) == sorted(study.LATER_CANDIDATES)
    met = score_sources.paper_scores(pj, judges=study.JUDGE_PANEL)
    assert met.ci_low is None and met.n_panel is None  # not computable from a matrix
    assert len(met.ranking) == 20
    assert met.per_judge["gemini-2.5-flash"]["gpt-5.5"] == 0.688751


@needs_mirror
def test_paper_mode_hard_matrix_has_119_prompts():
    from hbpsych_utils.core import sources

    m = score_sources.read_matrix(sources.fetch("matrix_hard_v1"))
    assert set(m["n_prompts"]) == {119}
    pj = scoring.paper_per_judge(m, source="matrix_hard_v1", judges=study.JUDGE_PANEL)
    # claude-fable-5 on hard: (0.317005 + 0.459551 + 0.275279) / 3 = 0.350611667
    assert scoring.paper_panel_means(pj, judges=study.JUDGE_PANEL)["claude-fable-5"] == (
        pytest.approx(0.350611667, abs=1e-9))
