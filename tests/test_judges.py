"""Judge statistics: Kendall's tau, severity, self-preference, bootstrap intervals, paper mode."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils import study
from hbpsych_utils.evaluation import judges, score_sources, scoring

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror

J = ["J1", "J2", "J3"]
OWN = {"J1": "J1", "J2": "J2", "J3": "J3"}
# candidate x judge; the candidates J1..J3 are the judges' own models
TABLE = pd.DataFrame(
    {"J1": [0.6, 0.3, 0.5, 0.2], "J2": [0.4, 0.5, 0.5, 0.2], "J3": [0.5, 0.4, 0.8, 0.3]},
    index=["J1", "J2", "J3", "X"],
)


def test_grand_mean_and_severity_by_hand():
    # column sums 1.6, 1.6, 2.0 over 4 candidates; grand mean 5.2 / 12
    assert judges.grand_mean(TABLE, J) == pytest.approx(5.2 / 12)
    sev = judges.severity(TABLE, J)
    assert sev == {
        "J1": pytest.approx(0.4 - 5.2 / 12),
        "J2": pytest.approx(0.4 - 5.2 / 12),
        "J3": pytest.approx(0.5 - 5.2 / 12),
    }
    assert sum(sev.values()) == pytest.approx(0.0, abs=1e-12)


def test_self_preference_raw_and_corrected_by_hand():
    raw = judges.self_preference(TABLE, J, own=OWN)
    # J1: 0.6 - (0.4 + 0.5)/2; J2: 0.5 - (0.3 + 0.4)/2; J3: 0.8 - (0.5 + 0.5)/2
    assert raw == {"J1": pytest.approx(0.15), "J2": pytest.approx(0.15), "J3": pytest.approx(0.3)}
    cor = judges.self_preference(TABLE, J, own=OWN, corrected=True)
    # raw - own severity + mean of the others' severities: 0.15 + 1/30 + 1/60 = 0.2, etc.
    assert cor == {"J1": pytest.approx(0.2), "J2": pytest.approx(0.2), "J3": pytest.approx(0.2)}


def test_kendall_tau_b_by_hand():
    taus = judges.kendall_taus(TABLE, J)
    assert list(taus) == ["J1|J2", "J1|J3", "J2|J3"]
    # J1 vs J3: 5 concordant, 1 discordant pair, no ties -> 4/6
    assert taus["J1|J3"] == pytest.approx(4 / 6)
    # J1 vs J2: 3 concordant, 2 discordant, one pair tied in J2 only -> 1 / sqrt(6 * 5)
    assert taus["J1|J2"] == pytest.approx(1 / math.sqrt(30))


def test_incomplete_candidates_are_left_out():
    t = TABLE.copy()
    t.loc["Y"] = [0.9, np.nan, 0.9]
    assert judges.grand_mean(t, J) == pytest.approx(5.2 / 12)
    assert judges.judge_metrics(t, J, own=OWN)["n_candidates"] == 4


def test_own_model_must_be_a_candidate():
    with pytest.raises(scoring.ScoringError, match="own model"):
        judges.self_preference(TABLE, J, own={"J1": "nobody"})


def _per_conversation(table, n_conv, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for cand in table.index:
        for judge in table.columns:
            for k in range(n_conv):
                rows.append((judge, cand, f"p{k}", table.at[cand, judge] + noise * rng.normal()))
    return pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id", "score"])


def test_bootstrap_constant_cells_give_degenerate_intervals():
    s = _per_conversation(TABLE, 5)
    out = judges.bootstrap_judge_stats(s, judges=J, own=OWN, n_resamples=100, seed=0, level=0.95)
    got = out.set_index(["stat", "judge"])
    assert got.loc[("self_preference_raw", "J3"), "estimate"] == pytest.approx(0.3)
    assert got.loc[("self_preference_corrected", "J1"), "estimate"] == pytest.approx(0.2)
    assert got.loc[("severity", "J3"), "estimate"] == pytest.approx(0.5 - 5.2 / 12)
    assert np.allclose(got["low"], got["estimate"]) and np.allclose(got["high"], got["estimate"])
    assert len(out) == 9


def test_bootstrap_estimates_match_point_statistics():
    s = _per_conversation(TABLE, 60, noise=0.2, seed=3)
    s.loc[5, "score"] = np.nan  # one unscored conversation: left out of that cell only
    out = judges.bootstrap_judge_stats(s, judges=J, own=OWN, n_resamples=300, seed=1, level=0.95)
    point = judges.judge_metrics(scoring.per_judge_means(s), J, own=OWN)
    got = out.set_index(["stat", "judge"])["estimate"]
    for j in J:
        assert got[("severity", j)] == pytest.approx(point["severity"][j])
        assert got[("self_preference_raw", j)] == pytest.approx(point["self_preference_raw"][j])
        assert got[("self_preference_corrected", j)] == pytest.approx(
            point["self_preference_corrected"][j]
        )
    assert (out["low"] <= out["estimate"]).all() and (out["estimate"] <= out["high"]).all()
    assert (out["high"] > out["low"]).all()
    again = judges.bootstrap_judge_stats(s, judges=J, own=OWN, n_resamples=300, seed=1, level=0.95)
    pd.testing.assert_frame_equal(out, again)


@needs_mirror
def test_paper_mode_v1_by_hand():
    from hbpsych_utils.core import sources

    m = score_sources.read_matrix(sources.fetch("matrix_v1"))
    for judge in study.JUDGE_PANEL:  # every judge model is also a candidate
        assert judge in set(m["candidate"])
    met = judges.paper_judge_metrics(m, source="matrix_v1", judges=study.JUDGE_PANEL)
    assert met["n_candidates"] == 20
    raw = met["self_preference_raw"]
    # gpt-4.1 judging itself 0.483064; haiku and gemini gave it 0.462072 and 0.591803
    assert raw["gpt-4.1-2025-04-14"] == pytest.approx(0.483064 - (0.462072 + 0.591803) / 2)
    # haiku on itself 0.401298; others 0.404613 (gpt-4.1), 0.516337 (gemini)
    assert raw["claude-haiku-4-5-20251001"] == pytest.approx(0.401298 - (0.404613 + 0.516337) / 2)
    # gemini on itself 0.537928; others 0.413346 (haiku), 0.419243 (gpt-4.1)
    assert raw["gemini-2.5-flash"] == pytest.approx(0.537928 - (0.413346 + 0.419243) / 2)
    assert sum(met["severity"].values()) == pytest.approx(0.0, abs=1e-12)
    assert set(met["kendall_tau"]) == {
        "gpt-4.1-2025-04-14|claude-haiku-4-5-20251001",
        "gpt-4.1-2025-04-14|gemini-2.5-flash",
        "claude-haiku-4-5-20251001|gemini-2.5-flash",
    }
    assert all(-1 <= t <= 1 for t in met["kendall_tau"].values())
    # the three later candidates are not part of the judge statistics
    pj = scoring.paper_per_judge(m, judges=study.JUDGE_PANEL)
    assert judges.grand_mean(pj, judges=study.JUDGE_PANEL) == pytest.approx(met["grand_mean"])
    assert not set(study.LATER_CANDIDATES) & set(pj.index)


# --------------------------------------------------------------------------------------------
# Smaller panels: two judges, one judge


def test_two_judges_by_hand():
    two = ["J1", "J3"]
    taus = judges.kendall_taus(TABLE, two)
    assert list(taus) == ["J1|J3"] and taus["J1|J3"] == pytest.approx(4 / 6)
    # column sums 1.6 and 2.0 over 4 candidates: grand mean 3.6 / 8
    sev = judges.severity(TABLE, two)
    assert sev == {"J1": pytest.approx(0.4 - 0.45), "J3": pytest.approx(0.5 - 0.45)}
    # the other judges' mean is the one other judge: J1 0.6 - 0.5, J3 0.8 - 0.5
    raw = judges.self_preference(TABLE, two, own=OWN)
    assert raw == {"J1": pytest.approx(0.1), "J3": pytest.approx(0.3)}
    # corrected: raw - own severity + the other's: 0.1 + 0.05 + 0.05, 0.3 - 0.05 - 0.05
    cor = judges.self_preference(TABLE, two, own=OWN, corrected=True)
    assert cor == {"J1": pytest.approx(0.2), "J3": pytest.approx(0.2)}
    out = judges.bootstrap_judge_stats(_per_conversation(TABLE[two], 5), judges=two, own=OWN,
                                       n_resamples=50, seed=0, level=0.95)
    assert len(out) == 6 and set(out["judge"]) == set(two)


def test_one_judge_has_no_pair_and_no_self_preference():
    one = ["J2"]
    m = judges.judge_metrics(TABLE, one, own=OWN)
    assert m["kendall_tau"] == {} and m["severity"] == {"J2": 0.0}
    assert m["self_preference_raw"] == {} and m["self_preference_corrected"] == {}
    assert m["grand_mean"] == pytest.approx(1.6 / 4) and m["n_candidates"] == 4
    out = judges.bootstrap_judge_stats(_per_conversation(TABLE[one], 5), judges=one, own=OWN,
                                       n_resamples=50, seed=0, level=0.95)
    assert out["stat"].tolist() == ["severity"] and out["estimate"].tolist() == [0.0]
    assert not out[["estimate", "low", "high"]].isna().any(axis=None)


def test_undefined_tau_is_none_not_nan():
    flat = TABLE.assign(J2=0.5)  # J2 gives every candidate the same score
    taus = judges.kendall_taus(flat, J)
    assert taus["J1|J2"] is None and taus["J2|J3"] is None
    assert taus["J1|J3"] == pytest.approx(4 / 6)
    why = judges.kendall_tau_undefined(flat, J)
    assert set(why) == {"J1|J2", "J2|J3"}
    assert "gave every candidate the same score" in why["J1|J2"]
    # a correlation on one point: one candidate scored by every judge
    single = TABLE.iloc[:1]
    assert set(judges.kendall_taus(single, J).values()) == {None}
    assert all("1 candidate" in r for r in judges.kendall_tau_undefined(single, J).values())
    assert judges.kendall_tau_undefined(TABLE, J) == {}


def test_bootstrap_over_one_conversation_has_no_interval():
    out = judges.bootstrap_judge_stats(_per_conversation(TABLE, 1), judges=J, own=OWN,
                                       n_resamples=50, seed=0, level=0.95)
    assert not out["estimate"].isna().any()
    assert out["low"].isna().all() and out["high"].isna().all()


def test_bootstrap_intervals_take_the_level():
    data = _per_conversation(TABLE, 30, noise=0.2)
    wide = judges.bootstrap_judge_stats(data, judges=J, own=OWN, n_resamples=200, seed=0,
                                        level=0.95)
    narrow = judges.bootstrap_judge_stats(data, judges=J, own=OWN, n_resamples=200, seed=0,
                                          level=0.5)
    assert ((wide["high"] - wide["low"]) >= (narrow["high"] - narrow["low"])).all()
    assert ((wide["high"] - wide["low"]) > (narrow["high"] - narrow["low"])).any()


def test_judge_stats_from_typed_metrics():
    from hbpsych_utils.pipeline.metrics import IntervalRow, JudgesMetrics

    point = JudgesMetrics(mode="paper", subset="v1", kendall_tau={"J1|J2": 0.5},
                          grand_mean=0.4, severity={"J1": -0.1, "J2": 0.1},
                          self_preference_raw={"J1": 0.05},
                          self_preference_corrected={"J1": 0.15}, n_candidates=4)
    stats = judges.judge_stats(point)
    assert isinstance(stats, dict) and stats["n_candidates"] == 4
    row = IntervalRow(stat="severity", judge="J1", estimate=-0.1, low=-0.2, high=0.0,
                      n_resamples=10)
    live = point.model_copy(update={"mode": "live", "intervals": [row]})
    table = judges.judge_stats(live)
    assert isinstance(table, pd.DataFrame)
    assert table.to_dict(orient="records") == [row.model_dump()]


def test_rank_agreement_shows_an_undefined_tau_as_a_dash_with_the_reason():
    from hbpsych_utils.stages import s09_judges

    flat = TABLE.assign(J2=0.5)
    shown = s09_judges.RankAgreement("v1", judges.kendall_taus(flat, J), 3, 4,
                                     judges.kendall_tau_undefined(flat, J))
    from hbpsych_utils.stages.base import shown as chapter_shows

    html = chapter_shows(shown)._repr_html_()
    assert html.count("—") >= 2 and "gave every candidate the same score" in html
    assert "nan" not in html.lower()
