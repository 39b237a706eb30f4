"""The judges against physicians (``evaluation.judge_accuracy``, ``classification`` and
``meta_eval_fixture``, chapter 15's functions): every statistic on the format fixture against a
count done by hand in the comments, the reader's content check, the fixture file, the
simulator's scripted verdicts, and the chapter's findings."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import chapter_parameters

from hbpsych_utils import study
from hbpsych_utils.evaluation import classification as cl
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.evaluation import meta_eval_fixture as fx
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.llm.testing import simulator
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import JudgeAccuracyMetrics, PairwiseF1
from hbpsych_utils.reporting import figures, vocabulary
from hbpsych_utils.stages import s15_judge_accuracy as s15
from hbpsych_utils.stages.base import shown
from hbpsych_utils.stages.s15_judge_accuracy.physicians import placement_summary

J1, J2, J3 = study.JUDGE_PANEL
DATA = Path(__file__).resolve().parent / "data"
C1, C2, C3, C4 = fx.FIXTURE_CONVERSATIONS
SUBSETS = {"v1": {C1, C2, C3, "x1"}, "v2": {C1, C2, C3, C4, "x1"}, "hard": {C1, C2, "x2"}}
"""Small subsets by hand: v1 holds conversations 1-3, v2 also 4, Hard 1-2 (and ids with no row)."""
THEMES = {C1: "emergency_referrals", C2: "global_health", C3: "hedging"}
CATS = {C1: "anxiety", C2: "perinatal_mh", C3: "perinatal_mh"}
"""Conversation 4 has neither (as in the smoke run: not in its corpus, v2 only)."""


def kept_rows() -> list[ja.MetaEvalRow]:
    return ja.in_subsets(ja.fixture_rows(judges=study.JUDGE_PANEL), SUBSETS)


def fixture_verdicts() -> pd.DataFrame:
    """The verdicts the simulator gives on the fixture: FIXTURE_VERDICTS, column k = judge k."""
    return pd.DataFrame([{"judge": j, "row": ja.row_key(i), "criteria_met": v[k]}
                         for k, j in enumerate((J1, J2, J3))
                         for i, v in enumerate(fx.FIXTURE_VERDICTS)])


@pytest.fixture()
def joined() -> pd.DataFrame:
    return ja.with_truth(fixture_verdicts(), ja.labels_table(kept_rows(), THEMES, CATS))


NUMBER_WORDS = {"eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14}


def test_the_profile_and_the_docs_count_the_fixtures_rows_as_the_code_makes_them() -> None:
    """``params/smoke.yaml``, the profile model and the docs say how many rows the fixture
    has (and how many are on the subset); each says what ``fixture_rows`` makes: thirteen,
    twelve of them on the subset."""
    import re

    from hbpsych_utils.core import paths

    rows = ja.fixture_rows(judges=study.JUDGE_PANEL)
    on_subset = sum(r.prompt_id in fx.FIXTURE_CONVERSATIONS for r in rows)
    assert (len(rows), on_subset) == (13, 12)
    root = paths.project_root()
    texts = {name: re.sub(r"\s+", " ", (root / name).read_text(encoding="utf-8"))
             for name in ("params/smoke.yaml", "hbpsych_utils/pipeline/nodes/s15_judge_accuracy.py",
                          "docs/judge_accuracy.md", "docs/methods.md")}
    for name, text in texts.items():
        said = [NUMBER_WORDS[w] for w in re.findall(r"\b(\w+)-row format fixture", text)]
        assert said and set(said) == {len(rows)}, (name, said)
    assert "(twelve in the subset)" in texts["params/smoke.yaml"]
    assert "first twelve rows" in texts["docs/judge_accuracy.md"]


def test_the_committed_fixture_is_the_generated_one() -> None:
    assert (DATA / "meta_eval_fixture.jsonl").read_text("utf-8") == ja.fixture_jsonl(
        judges=study.JUDGE_PANEL)
    rows = ja.read_meta_eval(DATA / "meta_eval_fixture.jsonl")
    assert len(rows) == 13 and {r.prompt_id for r in rows} == {C1, C2, C3, C4,
                                                               fx.FIXTURE_OUTSIDE}


def test_rows_outside_the_subset_are_dropped_and_counted() -> None:
    """Rows 1-3 on conversation 1, 4-6 on 2, 7-9 on 3, 10-12 on 4, row 13 outside: v1 has
    9 rows on 3 of its 4 conversations, v2 12 on 4 of 5, Hard 6 on 2 of 3, the union 12 on 4 of
    6; one row (one conversation) is outside every subset."""
    rows = ja.fixture_rows(judges=study.JUDGE_PANEL)
    kept = ja.in_subsets(rows, SUBSETS)
    assert [r.completion_id for r in kept] == [f"fixture-completion-{n}" for n in range(1, 13)]
    c = ja.coverage(rows, SUBSETS).set_index("subset")
    assert list(c.index) == ["v1", "v2", "hard", ja.UNION, "outside the subsets"]
    for key, (n_rows, n_conv, n_sub) in {"v1": (9, 3, 4), "v2": (12, 4, 5), "hard": (6, 2, 3),
                                         ja.UNION: (12, 4, 6)}.items():
        r = c.loc[key]
        assert (r.rows, r.conversations, r.subset_conversations) == (n_rows, n_conv, n_sub)
        assert r.share == pytest.approx(n_conv / n_sub)
    assert (c.loc["outside the subsets"].rows, c.loc["outside the subsets"].conversations) == (
        1, 1)


def test_majority_is_strict() -> None:
    assert ja.majority([True, True, False]) and not ja.majority([True, False, False])
    assert not ja.majority([True, False])  # a tie is not met


def test_each_judge_against_the_majority_by_hand(joined: pd.DataFrame) -> None:
    """Majority met on rows 1-6. J1 misses row 6 and meets row 12: tp 5 fp 1 fn 1 tn 5, so
    F1(met) = 10/12, F1(not met) = 10/12. J2 meets rows 1-6 and 8-10: tp 6 fp 3 tn 3, F1(met)
    = 12/15, F1(not met) = 6/9. J3 meets rows 1-3 only: tp 3 fn 3 tn 6, F1(met) = 6/9,
    F1(not met) = 12/15."""
    t = ja.against_majority(joined).set_index(["judge", "category"])
    expect = {J1: (5, 1, 1, 5, 10 / 12, 10 / 12, 5 / 6, 5 / 6),
              J2: (6, 3, 0, 3, 12 / 15, 6 / 9, 1.0, 3 / 6),
              J3: (3, 0, 3, 6, 6 / 9, 12 / 15, 3 / 6, 1.0)}
    for judge, (tp, fp, fn, tn, f1p, f1n, se, sp) in expect.items():
        r = t.loc[(judge, "all")]
        assert (r.tp, r.fp, r.fn, r.tn, r.n) == (tp, fp, fn, tn, 12)
        assert r.f1_met == pytest.approx(f1p) and r.f1_not_met == pytest.approx(f1n)
        assert r.macro_f1 == pytest.approx((f1p + f1n) / 2)
        assert (r.sensitivity, r.specificity) == (pytest.approx(se), pytest.approx(sp))
    # J1 on hedging (rows 5, 6, 7, 8, 11, 12; majority T T F F F F; J1 T F F F F T):
    # tp 1 fn 1 fp 1 tn 3 -> F1(met) 2/4, F1(not met) 6/8
    r = t.loc[(J1, "hedging")]
    assert (r.tp, r.fn, r.fp, r.tn) == (1, 1, 1, 3)
    assert r.macro_f1 == pytest.approx((2 / 4 + 6 / 8) / 2)
    # J2 on emergency referrals (rows 1-4, 9, 10) never says not met, though the majority
    # does on rows 9 and 10: the not-met class has no precision, so no F1, and the macro-F1 is
    # undefined too (sklearn would count that F1 as 0 and report (8/10 + 0) / 2 = 0.4)
    r = t.loc[(J2, "emergency_referrals")]
    assert (r.tp, r.fp, r.fn, r.tn) == (4, 2, 0, 0)
    assert r.f1_met == pytest.approx(8 / 10)
    assert math.isnan(r.f1_not_met) and math.isnan(r.macro_f1)
    assert r.undefined == {"f1_not_met": "no “not met” from the judge",
                           "macro_f1": "no “not met” from the judge"}
    assert t.loc[(J1, "hedging")].undefined is None  # every value defined: no reasons


def _with_panel(joined: pd.DataFrame) -> pd.DataFrame:
    v = joined[["judge", "row", "criteria_met"]]
    both = pd.concat([v, ja.panel_verdicts(v, list(study.JUDGE_PANEL))], ignore_index=True)
    return ja.with_truth(both, ja.labels_table(kept_rows(), THEMES, CATS))


def test_the_panel_is_the_judges_majority_by_hand(joined: pd.DataFrame) -> None:
    """Met votes per row (J1, J2, J3): 3 3 3 2 2 1 0 1 1 1 0 1, so the panel says met on rows
    1-5 only. Against the majority (met on 1-6): tp 5, fn 1, tn 6, fp 0: F1(met) 10/11,
    F1(not met) 12/13, sensitivity 5/6, specificity 1. Against every physician label: rows 1-5
    give tp 3+2+2+3+2 = 12 and fp 3 (rows 2, 3, 5); rows 6-12 give fn 2+1+1+1 = 5 (rows 6, 8,
    9, 11) and tn 1+3+2+2+3+2+3 = 16: F1(met) 24/32, F1(not met) 32/40."""
    rated = _with_panel(joined)
    t = ja.against_majority(rated).set_index(["judge", "category"])
    r = t.loc[(ja.PANEL, "all")]
    assert (r.tp, r.fp, r.fn, r.tn) == (5, 0, 1, 6)
    assert r.macro_f1 == pytest.approx((10 / 11 + 12 / 13) / 2)
    assert (r.sensitivity, r.specificity) == (pytest.approx(5 / 6), 1.0)
    p = ja.pairwise_f1(rated, ja.physician_labels(kept_rows())).set_index(["rater", "category"])
    assert p.loc[(ja.PANEL, "all")].kind == "panel" and p.loc[(ja.PANEL, "all")].pairs == 36
    assert p.loc[(ja.PANEL, "all")].balanced_f1 == pytest.approx((24 / 32 + 32 / 40) / 2)
    s = ja.sens_spec_table(rated, n_resamples=50, seed=1, level=0.95).set_index(["judge",
                                                                                 "category"])
    assert s.loc[(ja.PANEL, "all")].specificity_low == 1.0  # never meets a not-met row
    value, _ = ja.judges_ac1(rated)  # the panel is not a judge: AC1 unchanged
    assert value == pytest.approx(2 / 9)


def test_a_two_judge_panel_takes_a_tie_as_not_met() -> None:
    """J1 and J3: both met on rows 1-3 (met), split on rows 4, 5 and 12 (a tie: not met), both
    not met elsewhere; a row one judge left without a verdict has no panel verdict."""
    v = fixture_verdicts()
    v = v[v["judge"].isin([J1, J3])].astype({"criteria_met": object})
    v.loc[(v["judge"] == J3) & (v["row"] == ja.row_key(6)), "criteria_met"] = None
    p = ja.panel_verdicts(v, [J1, J3]).set_index("row")["criteria_met"]
    assert list(p.index) == [ja.row_key(i) for i in range(12) if i != 6]
    assert [bool(p[ja.row_key(i)]) for i in (0, 1, 2, 3, 4, 11)] == [True] * 3 + [False] * 3
    assert int(p.sum()) == 3


def test_per_theme_and_psych_category_by_hand(joined: pd.DataFrame) -> None:
    """Psych categories: anxiety rows 1-3 (all met, J1 meets all: tp 3; no not-met row, so the
    not-met F1 and the mean are undefined), perinatal_mh rows 4-9 (majority T T T F F F, J1
    T T F F F F: tp 2, fn 1, tn 3: F1(met) 4/5, F1(not met) 6/7); themes: global_health rows
    4-6 (J1 tp 2, fn 1: F1(met) 4/5; the majority never says not met there, so the not-met
    class has no recall: its F1 and the mean are undefined). Conversation 4 (rows 10-12) has
    neither and is left out. The panel on perinatal_mh against every physician label: rows 4-9
    give tp 3+2, fp 1, fn 2+1+1, tn 1+3+2+2: F1(met) 10/15, F1(not met) 16/21."""
    rated = _with_panel(joined)
    by_cat = ja.against_majority(rated, ja.PSYCH_CATEGORY, overall=False).set_index(
        ["judge", "category"])
    assert set(by_cat.index.get_level_values(1)) == {"anxiety", "perinatal_mh"}
    a = by_cat.loc[(J1, "anxiety")]
    assert (a.tp, a.n, a.f1_met) == (3, 3, 1.0) and math.isnan(a.macro_f1)
    r = by_cat.loc[(J1, "perinatal_mh")]
    assert (r.tp, r.fn, r.tn, r.fp) == (2, 1, 3, 0)
    assert r.macro_f1 == pytest.approx((4 / 5 + 6 / 7) / 2)
    assert int(by_cat.xs(J1, level=0)["n"].sum()) == 9  # rows 10-12 left out
    th = ja.against_majority(rated, ja.THEME, overall=False).set_index(["judge", "category"])
    gh = th.loc[(J1, "global_health")]
    assert gh.f1_met == pytest.approx(4 / 5) and math.isnan(gh.f1_not_met)
    assert math.isnan(gh.macro_f1)
    assert gh.undefined["macro_f1"] == "no “not met” from the physician majority"
    assert gh.undefined["specificity"] == "no “not met” from the physician majority"
    assert set(th.index.get_level_values(1)) == {"emergency_referrals", "global_health",
                                                 "hedging"}
    phys = ja.physician_labels(kept_rows(), THEMES, CATS)
    p = ja.pairwise_f1(rated, phys, ja.PSYCH_CATEGORY, overall=False).set_index(
        ["rater", "category"])
    assert p.loc[(ja.PANEL, "perinatal_mh")].pairs == 18
    assert p.loc[(ja.PANEL, "perinatal_mh")].balanced_f1 == pytest.approx(
        (10 / 15 + 16 / 21) / 2)
    s = ja.sens_spec_table(rated, ja.PSYCH_CATEGORY, overall=False, n_resamples=50, seed=1,
                           level=0.95)
    r = s.set_index(["judge", "category"]).loc[(J1, "perinatal_mh")]
    assert (r.sensitivity, r.specificity) == (pytest.approx(2 / 3), 1.0)


def test_an_empty_class_has_no_f1() -> None:
    c = cl.confusion([True, True], [True, True])
    pos, neg = cl.class_f1(c)
    assert pos == 1.0 and math.isnan(neg) and math.isnan(cl.macro_f1(c))
    assert math.isnan(cl.sens_spec(c)[1])
    # a class used by one side only has no F1 either: never predicted (no precision) ...
    never_met = cl.confusion([True, False, False], [False, False, False])
    assert math.isnan(cl.class_f1(never_met)[0]) and cl.class_f1(never_met)[1] == 0.8
    assert cl.f1_undefined(never_met, ja.AGAINST_MAJORITY) == {
        "f1_met": "no “met” from the judge", "macro_f1": "no “met” from the judge"}
    # ... or never in the truth (no recall); both sides at once: both reasons, each once
    assert math.isnan(cl.class_f1(cl.confusion([False, False], [True, False]))[0])
    pooled = cl.f1_undefined(c, ja.PAIRWISE_ROLES["physicians"])
    assert pooled == {"f1_not_met": "no “not met” from the physicians",
                      "macro_f1": "no “not met” from the physicians"}
    # where both classes are used, the F1 is sklearn's 2tp / (2tp + fp + fn), 0 included
    zero = cl.confusion([True, False, True], [False, True, False])
    assert cl.class_f1(zero) == (0.0, 0.0) and cl.f1_undefined(zero, ja.AGAINST_MAJORITY) == {}


def test_pairwise_balanced_f1_and_the_physicians_by_hand(joined: pd.DataFrame) -> None:
    """J1 against every physician label (36 pairs): tp 12, fp 6, fn 5, tn 13 (row by row in
    the module's fixture: rows 2, 3, 5 one fp each, row 12 three; rows 6, 8, 9, 11 the fn).
    The physicians pooled: 5 unanimous rows give 6 agreeing ordered pairs each, 7 split rows 2
    agreeing and 4 disagreeing: TT 20, FF 24, fp = fn = 14. phys-A on its 9 rows: tp 5, fp 5,
    fn 3, tn 5."""
    t = ja.pairwise_f1(joined, ja.physician_labels(kept_rows())).set_index(
        ["rater", "category"])
    assert t.loc[(J1, "all")].pairs == 36
    assert t.loc[(J1, "all")].balanced_f1 == pytest.approx((24 / 35 + 26 / 37) / 2)
    assert t.loc[("physicians", "all")].pairs == 72
    assert t.loc[("physicians", "all")].balanced_f1 == pytest.approx((40 / 68 + 48 / 76) / 2)
    assert t.loc[("phys-A", "all")].pairs == 18
    assert t.loc[("phys-A", "all")].balanced_f1 == pytest.approx((10 / 18 + 10 / 18) / 2)
    assert set(t.loc[(J1, slice(None)), :].index.get_level_values(1)) == {
        "all", "emergency_referrals", "hedging"}


def test_ac1_among_the_judges_by_hand(joined: pd.DataFrame) -> None:
    """Rows 1, 2, 3, 7, 11 unanimous (agreement 1), the other 7 split 2-1 (agreement 1/3):
    p_a = (5 + 7/3) / 12 = 22/36; met share per row sums to 6 over 12 rows, so p_e = 0.5;
    AC1 = (22/36 - 1/2) / (1/2) = 2/9."""
    value, n = ja.judges_ac1(joined)
    assert n == 12 and value == pytest.approx(2 / 9)


def test_cluster_draws_keep_a_conversation_together() -> None:
    w = cl.cluster_draws(["a", "a", "b", "c", "c", "c"], 50, np.random.default_rng(1))
    assert w.shape == (50, 6)
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 3] == w[:, 4]).all()
    # every resample draws three conversations: a, b and c weigh 2, 1 and 3 rows
    assert (w[:, [0, 2, 3]].sum(axis=1) == 3).all()


def test_sens_spec_intervals_are_seeded_and_clustered(joined: pd.DataFrame) -> None:
    a = ja.sens_spec_table(joined, n_resamples=300, seed=3, level=0.95).set_index(["judge",
                                                                                   "category"])
    b = ja.sens_spec_table(joined, n_resamples=300, seed=3, level=0.95).set_index(["judge",
                                                                                   "category"])
    pd.testing.assert_frame_equal(a, b)
    assert a.loc[(J1, "all")].n_conversations == 4
    # J2 never misses a met row: every resample's sensitivity is 1
    assert (a.loc[(J2, "all")].sensitivity_low, a.loc[(J2, "all")].sensitivity_high) == (1, 1)
    for _, r in a.iterrows():
        for s in ("sensitivity", "specificity"):
            assert r[f"{s}_low"] <= r[s] + 1e-12 and r[s] <= r[f"{s}_high"] + 1e-12


def test_sens_spec_intervals_use_the_shared_percentile_interval(joined: pd.DataFrame) -> None:
    """The chapter's intervals are scoring.percentile_interval's at the level given: at 0.90
    the 5th and 95th percentiles of the clustered draws, by hand, not the 2.5th and 97.5th."""
    t = ja.sens_spec_table(joined, n_resamples=400, seed=3, level=0.90)
    t = t.set_index(["judge", "category"])
    part = joined[joined["judge"] == J3]
    rng = np.random.default_rng([3, sorted(joined["judge"].unique()).index(J3), 0])
    w = cl.cluster_draws(part["prompt_id"].tolist(), 400, rng)
    se, _ = cl.sens_spec_draws(part, w)
    se = se[np.isfinite(se)]
    r = t.loc[(J3, "all")]
    assert (r.sensitivity_low, r.sensitivity_high) == pytest.approx(
        tuple(np.percentile(se, [5, 95])))
    wide = ja.sens_spec_table(joined, n_resamples=400, seed=3, level=0.95).set_index(["judge",
                                                                                      "category"])
    assert (wide.loc[(J3, "all")].sensitivity_low, wide.loc[(J3, "all")].sensitivity_high) == \
        pytest.approx(tuple(np.percentile(se, [2.5, 97.5])))


def test_a_slice_of_one_conversation_has_no_interval(joined: pd.DataFrame) -> None:
    """Each HealthBench theme of the fixture is one conversation: sensitivity and specificity
    are still computed, their intervals are undefined, with the reason."""
    s = ja.sens_spec_table(joined, ja.THEME, overall=False, n_resamples=50, seed=1, level=0.95)
    assert (s["n_conversations"] == 1).all()
    assert s[["sensitivity_low", "sensitivity_high", "specificity_low",
              "specificity_high"]].isna().all(axis=None)
    r = s.set_index(["judge", "category"]).loc[(J1, "global_health")]
    assert r.sensitivity == pytest.approx(2 / 3)
    assert r.undefined["sensitivity_low"] == scoring.ONE_CONVERSATION


def test_rogan_gladen_by_hand() -> None:
    # (0.75 + 5/6 - 1) / (5/6 + 5/6 - 1) = (7/12) / (2/3) = 7/8
    assert cl.rogan_gladen(0.75, 5 / 6, 5 / 6) == pytest.approx(7 / 8)
    assert cl.rogan_gladen(0.05, 5 / 6, 5 / 6) == 0.0  # clipped
    assert cl.rogan_gladen(0.99, 0.9, 0.95) == 1.0
    assert math.isnan(cl.rogan_gladen(0.5, 0.5, 0.5))  # no better than chance
    assert cl.rogan_gladen(0.3, 1.0, 1.0) == pytest.approx(0.3)


def _calibration(se_hits: int, sp_hits: int, n: int = 40) -> pd.DataFrame:
    """n met and n not-met rows in 2n conversations; the judge gets se_hits and sp_hits
    right."""
    return pd.DataFrame({
        "prompt_id": [f"c{i}" for i in range(2 * n)],
        "majority": [True] * n + [False] * n,
        "criteria_met": [i < se_hits for i in range(n)] + [i >= sp_hits for i in range(n)]})


def test_corrected_rate_propagates_calibration_uncertainty() -> None:
    graded = pd.DataFrame({"prompt_id": [f"p{i // 2}" for i in range(60)],
                           "criteria_met": [i % 3 != 0 for i in range(60)]})
    perfect = ja.corrected_rate("j", graded, _calibration(40, 40), n_resamples=400, seed=9,
                                level=0.95)
    assert perfect.observed == pytest.approx(40 / 60) and perfect.corrected == pytest.approx(
        40 / 60)
    # with a perfect judge the interval is the run's own clustered bootstrap, by hand
    rng = np.random.default_rng([9, 1])
    w = cl.cluster_draws(graded["prompt_id"].tolist(), 400, rng)
    p = w @ graded["criteria_met"].to_numpy(bool) / w.sum(axis=1)
    assert (perfect.low, perfect.high) == pytest.approx(tuple(np.percentile(p, [2.5, 97.5])))
    noisy = ja.corrected_rate("j", graded, _calibration(34, 36), n_resamples=400, seed=9,
                              level=0.95)
    # (2/3 + 0.9 - 1) / (0.85 + 0.9 - 1) = 0.5667 / 0.75
    assert noisy.corrected == pytest.approx((40 / 60 + 36 / 40 - 1) / (34 / 40 + 36 / 40 - 1))
    assert noisy.high - noisy.low > perfect.high - perfect.low


def test_reader_checks_content(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in ja.fixture_jsonl(judges=study.JUDGE_PANEL).splitlines()]
    path = tmp_path / "m.jsonl"

    def write(recs: list[dict]) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        return path

    bad = [dict(rows[0], binary_labels=[True, False]), *rows[1:]]
    with pytest.raises(ja.MetaEvalError, match=r"m.jsonl:1.*2 binary_labels but 3"):
        ja.read_meta_eval(write(bad))
    missing = [{k: v for k, v in rows[0].items() if k != "rubric"}, *rows[1:]]
    with pytest.raises(ja.MetaEvalError, match=r"m.jsonl:1: field 'rubric'"):
        ja.read_meta_eval(write(missing))
    with pytest.raises(ja.MetaEvalError, match=r"same criterion twice"):
        ja.read_meta_eval(write(rows + rows[:1]))
    with pytest.raises(ja.MetaEvalError, match=r"5 prompt_id not among HealthBench"):
        ja.read_meta_eval(write(rows), known_prompt_ids={"x"})
    known = {C1, C2, C3, C4, fx.FIXTURE_OUTSIDE}
    assert len(ja.read_meta_eval(write(rows), known_prompt_ids=known)) == 13


def test_the_simulator_obeys_a_scripted_verdict() -> None:
    marker = fx.sim_marker({J1: True, J2: False})
    assert simulator.scripted_verdict(J1, f"x {marker} y") is True
    assert simulator.scripted_verdict(J2, marker) is False
    assert simulator.scripted_verdict(J3, marker) is None
    msgs = [("system", "s"), ("user", f"criteria_met ... {marker}")]
    h = simulator.sim_hash(J2, msgs, None, seed=None)
    text = simulator.answer_text(J2, msgs, None, h)
    assert '"criteria_met": false' in text


def test_the_grader_prompt_puts_the_rubric_in_verbatim() -> None:
    row = ja.fixture_rows(judges=study.JUDGE_PANEL)[0]
    text = ja.grader_prompt("A <<conversation>> B <<rubric_item>> C", row)
    assert text == (f"A user: {row.prompt[0].content}\n\nassistant: {row.completion} B "
                    f"{row.rubric} C")


def test_cost_rows_price_each_call() -> None:
    from hbpsych_utils.llm.models import load_registry

    reg = load_registry()
    t = ja.cost_rows(1000, 1200, [J1], reg, batch=False, output_tokens=80).iloc[0]
    price = reg.model(J1).price
    assert t.usd == pytest.approx(1000 * (1200 * price.input + 80 * price.output) / 1e6)
    batch = ja.cost_rows(1000, 1200, [J1], reg, batch=True, output_tokens=80).iloc[0]
    assert batch.usd == pytest.approx(t.usd * price.batch_discount)


KNOBS = {"n_resamples": 50, "seed": 5, "level": 0.95}


def _source() -> s15.MetaEval:
    return s15.MetaEval(kept_rows(), "fixture", list(study.JUDGE_PANEL), "<<conversation>>",
                        13, ja.coverage(ja.fixture_rows(judges=study.JUDGE_PANEL),
                                        SUBSETS), THEMES, CATS, [],
                        pd.DataFrame())


def _steps(graded: s15.Graded) -> tuple[s15.Accuracy, s15.Placement]:
    acc = s15.accuracy(graded, **KNOBS)
    place = s15.placement(graded, level=0.95, cache=None)
    assert isinstance(acc, s15.Accuracy) and isinstance(place, s15.Placement)
    return acc, place


def test_the_chapter_on_the_fixture_verdicts() -> None:
    m, place, acc = _chapter_metrics()
    source = _source()
    assert m.against_majority[J1]["all"].macro_f1 == pytest.approx(5 / 6)
    assert m.judges_ac1 == pytest.approx(2 / 9) and m.n_rows == 12 and m.n_physicians == 4
    assert m.pairwise["physicians"]["all"].balanced_f1 == pytest.approx(
        (40 / 68 + 48 / 76) / 2)
    assert m.n_rows_in_file == 13 and m.coverage[ja.UNION].conversations == 4
    assert m.coverage["outside the subsets"].rows == 1
    assert m.n_rows_no_theme == 3 and m.n_rows_no_psych_category == 3
    assert m.against_majority[ja.PANEL]["all"].macro_f1 == pytest.approx((10 / 11 + 12 / 13) / 2)
    assert m.pairwise[ja.PANEL]["all"].balanced_f1 == pytest.approx(0.775)
    peri = m.against_majority_by_psych_category[J1]["Perinatal mental health"]
    assert peri.macro_f1 == pytest.approx((4 / 5 + 6 / 7) / 2)
    assert "global_health" in m.pairwise_by_theme[ja.PANEL]
    text = str(s15.findings(m))
    assert "scripted" in text and "4 of the 6 conversations of v1 ∪ v2 ∪ Hard" in text
    # the physicians' leave-one-out F1 (18 pairs each): phys-A (10/18 + 10/18) / 2 = 0.556,
    # phys-B tp 7 fp 5 fn 1 tn 5: (14/20 + 10/16) / 2 = 0.6625, phys-C and phys-D 0.6
    span = "(0.556–0.662, leave-one-out, 4 physicians with at least 10 label pairs)"
    # J1 (24/35 + 26/37) / 2 = 0.694 above; J2 tp 16 fp 11 fn 1 tn 8: (32/44 + 16/28) / 2 =
    # 0.649 within; J3 tp 7 fp 2 fn 10 tn 17: (14/26 + 34/46) / 2 = 0.639 within; panel 0.775
    assert f"its pairwise balanced F1 (0.694) is above the physicians' range {span}" in text
    assert f"its pairwise balanced F1 (0.649) is within the physicians' range {span}" in text
    assert f"its pairwise balanced F1 (0.639) is within the physicians' range {span}" in text
    assert f"its pairwise balanced F1 (0.775) is above the physicians' range {span}" in text
    assert "AC1 0.222" in text
    # no judge falls below the physicians pooled on a slice where both F1 are defined: the
    # gaps the chapter once reported (Claude on emergency referrals, Gemini on hedging) were
    # on slices where that judge never gives one verdict
    assert "furthest below" not in text
    # a category named as prose, not as the file's identifier, where the gap is defined
    pooled = m.pairwise["physicians"]["emergency_referrals"].balanced_f1
    worse = m.model_copy(update={"pairwise": {**m.pairwise, J1: {
        **m.pairwise[J1], "emergency_referrals": PairwiseF1(
            kind="judge", pairs=18, balanced_f1=pooled - 0.2)}}})
    assert "furthest below the physicians pooled on Emergency referrals (-0.200)" in str(
        s15.findings(worse))
    assert "emergency_referrals" not in str(s15.findings(worse))
    # gated: with 19 pairs required no physician counts, so there is no range
    gated = str(s15.findings(m, min_pairs=19))
    assert "is within" not in gated and "above the physicians' range" not in gated
    assert "with no physicians' range to place it in" in gated
    below = m.model_copy(update={"pairwise": {**m.pairwise, J3: {"all": PairwiseF1(
        kind="judge", pairs=36, balanced_f1=0.5)}}})
    assert "(0.500) is below the physicians' range" in str(s15.findings(below))
    html = shown(place)._repr_html_() + shown(acc)._repr_html_() + shown(source)._repr_html_()
    assert "Figure J1" in html and "Emergency referrals" in html  # the theme, in prose
    assert "Perinatal mental health" in html and "Panel (majority of the judges)" in html


def test_paper_mode_says_once_that_it_needs_the_physician_labels(tmp_path) -> None:
    run = s15.start(**chapter_parameters(graph.JUDGE_ACCURACY, tmp_path))
    data = s15.meta_eval(run, meta_eval="registry", max_rows=None, judges=None)
    top = str(shown(data))
    assert data.rows is None and "This chapter needs the physician labels" in top
    assert "online only" in top and "A live run adds" in top
    plan = s15.cost_plan(data.rows, llm=run.llm)
    graded = s15.grade(data.rows, run, temperature=0.0, max_tokens=10, max_reasks=0)
    acc = s15.accuracy(graded, **KNOBS)
    assert plan is graded is acc is None  # not executed: nothing is downloaded or called
    assert s15.placement(graded, level=0.95, cache=tmp_path) is None
    assert s15.corrected(acc, **KNOBS) is None and s15.agreement(graded) is None
    m = s15.metrics(data, graded, acc, None, None)
    assert m.model_dump(exclude_unset=True) == {"mode": "paper"}
    assert s15.findings(m) is None
    assert not (tmp_path / "default" / graph.JUDGE_ACCURACY / "stage.json").exists()


# --- simple-evals' semantics, re-implemented from its definition ---------------------------------

def simple_evals_balanced_f1(pairs: list[tuple[bool, bool]]) -> float | None:
    """simple-evals' ``healthbench_meta_eval`` balanced F1 of (rater label, truth label) pairs,
    written from its definition: a precision of class c is recorded for every pair whose rater
    says c (agreement share), a recall of class c for every pair whose truth says c; a class's
    F1 exists only when both exist (0 when both are 0, else 2PR / (P + R)); the balanced F1
    exists only when both classes' F1 do, and is their mean. ``None`` where it reports none."""
    precision: dict[bool, list[bool]] = {True: [], False: []}
    recall: dict[bool, list[bool]] = {True: [], False: []}
    for mine, truth in pairs:
        precision[mine].append(mine == truth)
        recall[truth].append(mine == truth)
    f1 = {}
    for c in (True, False):
        if not precision[c] or not recall[c]:
            continue
        p, r = sum(precision[c]) / len(precision[c]), sum(recall[c]) / len(recall[c])
        f1[c] = 0.0 if p == 0 and r == 0 else 2 * p * r / (p + r)
    return (f1[True] + f1[False]) / 2 if len(f1) == 2 else None


def _fixture_pairs(slicing: str) -> dict[tuple[str, str], list[tuple[bool, bool]]]:
    """(rater, slice) -> (rater label, truth label) pairs, straight from the fixture's rows and
    scripted verdicts (not through the chapter's tables): each judge and the panel (the
    judges' majority) against every physician label of a row; each physician against every
    other physician's label on its rows; the physicians pooled."""
    rows = kept_rows()
    out: dict[tuple[str, str], list[tuple[bool, bool]]] = {}
    for i, r in enumerate(rows):
        verdicts = dict(zip((J1, J2, J3), fx.FIXTURE_VERDICTS[i], strict=True))
        verdicts[ja.PANEL] = sum(fx.FIXTURE_VERDICTS[i]) >= 2
        where = {"category": r.category, ja.THEME: THEMES.get(r.prompt_id),
                 ja.PSYCH_CATEGORY: (study.category_label(CATS[r.prompt_id])
                                     if r.prompt_id in CATS else None)}[slicing]
        slices = [s for s in (["all"] if slicing == "category" else []) + [where] if s]
        for s in slices:
            for rater, v in verdicts.items():
                out.setdefault((rater, s), []).extend((v, lab) for lab in r.binary_labels)
            labelled = list(zip(r.anonymized_physician_ids, r.binary_labels, strict=True))
            for k, (phys, mine) in enumerate(labelled):
                others = [(mine, lab) for j, (_, lab) in enumerate(labelled) if j != k]
                out.setdefault((phys, s), []).extend(others)
                out.setdefault(("physicians", s), []).extend(others)
    return out


@functools.cache
def _chapter_metrics() -> tuple[JudgeAccuracyMetrics, s15.Placement, s15.Accuracy]:
    """Chapter 15's steps on the fixture verdicts, computed once for the tests that read them
    (none changes what it is given)."""
    source = _source()
    v = fixture_verdicts().assign(recovered=False, excluded=False, attempts=1, reason="parsed")
    graded = s15.Graded(source, v, 0.0, 0.0)
    acc, place = _steps(graded)
    return s15.metrics(s15.Inputs("live", source), graded, acc, place, None), place, acc


def test_pairwise_f1_follows_simple_evals_on_every_slice() -> None:
    """Every (rater, slice) of chapter 15 on the fixture, in all three slicings: a defined
    pairwise balanced F1 equals simple-evals' (re-implemented above) to 1e-12; where
    simple-evals reports none the chapter's is undefined (NaN in the table, null in the
    metrics, with the reason), never a number. On the fixture (the smoke run's rows) that is
    29 of the 72 values."""
    m, place, _ = _chapter_metrics()
    tables = {"category": (m.pairwise, place.table),
              ja.THEME: (m.pairwise_by_theme, place.by_theme),
              ja.PSYCH_CATEGORY: (m.pairwise_by_psych_category, place.by_psych_category)}
    seen = undefined = 0
    for slicing, (metrics, table) in tables.items():
        expected = _fixture_pairs(slicing)
        indexed = table.set_index(["rater", "category"])
        assert {(r, c) for r, cats in metrics.items() for c in cats} == set(expected)
        for (rater, where), pairs in expected.items():
            want = simple_evals_balanced_f1(pairs)
            got = metrics[rater][where]
            assert got.pairs == len(pairs)
            seen += 1
            if want is None:
                undefined += 1
                assert got.balanced_f1 is None, (slicing, rater, where)
                assert math.isnan(indexed.loc[(rater, where), "balanced_f1"])
                assert got.undefined and got.undefined["balanced_f1"].startswith("no “")
            else:
                assert got.balanced_f1 is not None and abs(got.balanced_f1 - want) <= 1e-12, (
                    slicing, rater, where)
                assert got.undefined is None
    assert (seen, undefined) == (72, 29)
    # the reasons name which side never uses which verdict: Claude Haiku 4.5 (J2) never says
    # not met on the file's emergency referrals, Gemini 2.5 Flash (J3) never says met on hedging
    assert m.pairwise[J2]["emergency_referrals"].undefined == {
        "balanced_f1": "no “not met” from the judge"}
    assert m.pairwise[J3]["hedging"].undefined == {"balanced_f1": "no “met” from the judge"}


def test_no_finding_rests_on_an_undefined_value() -> None:
    """The findings name no slice whose pairwise F1 (the judge's or the physicians' pooled) is
    undefined, and read no undefined F1 as a number; a judge whose F1 on all rows is undefined
    is said to be so, not placed."""
    m, _, _ = _chapter_metrics()
    text = str(s15.findings(m))
    undefined_slices = {c for cats in (m.pairwise or {}).values() for c, v in cats.items()
                        if c != "all" and v.balanced_f1 is None}
    assert undefined_slices >= {"emergency_referrals", "hedging"}
    assert "furthest below" not in text
    # the only slices are undefined for one judge: a large defined gap elsewhere is still named
    # but an undefined one never is, however large the other side's value
    gapless = m.model_copy(update={"pairwise": {**m.pairwise, J3: {
        **m.pairwise[J3], "emergency_referrals": PairwiseF1(
            kind="judge", pairs=18, balanced_f1=None,
            undefined={"balanced_f1": "no “met” from the judge"})}}})
    assert "furthest below" not in str(s15.findings(gapless))
    none_all = m.model_copy(update={"pairwise": {**m.pairwise, J1: {
        "all": PairwiseF1(kind="judge", pairs=36, balanced_f1=None,
                              undefined={"balanced_f1": "no “met” from the judge"})}}})
    said = str(s15.findings(none_all))
    assert ("its pairwise balanced F1 is undefined (no “met” from the judge), so it is not "
            "placed") in said
    no_macro = m.model_copy(update={"against_majority": {**m.against_majority, J1: {
        "all": m.against_majority[J1]["all"].model_copy(update={
            "macro_f1": None, "undefined": {"macro_f1": "no “met” from the judge"}})}}})
    said = str(s15.findings(no_macro))
    assert "GPT-4.1 has no macro-F1 (undefined: no “met” from the judge)" in said
    assert "reaches macro-F1 undefined" not in said


def test_the_chapter_shows_undefined_as_a_dash_with_the_reason() -> None:
    """The pairwise and accuracy tables show an undefined value as "—" (never a number, never
    "nan"), and say under the table why, naming the rater and the slice."""
    _, place, acc = _chapter_metrics()
    summary = placement_summary(place.table)
    assert math.isnan(summary.loc[J2, "emergency_referrals"])
    assert math.isnan(summary.loc[J3, "hedging"])
    assert summary.loc[J1, "all"] == pytest.approx((24 / 35 + 26 / 37) / 2)
    # laid out by the vocabulary: the undefined cells read "—", under the theme's prose name
    laid = vocabulary.lay_out(summary, value_kind="score", level=0.95)
    rows = {r[0]: dict(zip(laid.labels, r, strict=True)) for r in laid.texts}
    assert rows["Claude Haiku 4.5"]["Emergency referrals"] == s15.UNDEFINED == "—"
    hedging = study.THEME_LABELS["hedging"]  # "Responding under uncertainty"
    assert rows["Gemini 2.5 Flash"][hedging] == s15.UNDEFINED
    assert rows["GPT-4.1"]["All"] == f"{(24 / 35 + 26 / 37) / 2:.3f}"
    html = shown(place)._repr_html_() + shown(acc)._repr_html_()
    text = re.sub(r"data:[^\"']+", "", html)  # the figure's embedded image
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)
    assert s15.UNDEFINED in html
    assert "no “not met” from the judge: Claude Haiku 4.5 on Emergency referrals" in html
    assert f"Gemini 2.5 Flash on {hedging}" in html


def test_the_placement_figure_draws_no_undefined_point() -> None:
    """Figure J1 on the fixture: a marker for every defined F1 and none for an undefined one
    (Claude Haiku 4.5 on emergency referrals, Gemini 2.5 Flash on hedging); each judge keeps
    its colour and legend entry."""
    from matplotlib.collections import PathCollection

    _, place, _ = _chapter_metrics()
    table = place.table
    fig = figures.f1_placement(table, title="t")
    ax = fig.axes[0]
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    offsets = np.concatenate([c.get_offsets() for c in points])
    assert np.isfinite(offsets).all()
    defined = table[table["kind"].isin(["judge", "panel", "physician"])]
    assert len(offsets) == int(defined["balanced_f1"].notna().sum())
    by_label = {c.get_label(): c for c in points}
    for judge in (J2, J3):
        mine = table[(table["rater"] == judge)]
        assert len(by_label[study.display_name(judge)].get_offsets()) == int(
            mine["balanced_f1"].notna().sum()) == 2
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 2]
    assert len(lines) == int(table.loc[table["kind"] == "physicians",
                                       "balanced_f1"].notna().sum())
