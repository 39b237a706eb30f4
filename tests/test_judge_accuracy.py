"""The judges against physicians (``evaluation.judge_accuracy``, chapter 15's functions): every
statistic on the format fixture against a count done by hand in the comments, the reader's
content check, the fixture file, the simulator's scripted verdicts, and the chapter's findings."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils import study
from hbpsych_utils.core.config import JudgeAccuracyParams
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.llm.testing import simulator
from hbpsych_utils.stages import s15_judge_accuracy as s15

J1, J2, J3 = study.JUDGE_PANEL
DATA = Path(__file__).resolve().parent / "data"


def fixture_verdicts() -> pd.DataFrame:
    """The verdicts the simulator gives on the fixture: FIXTURE_VERDICTS, column k = judge k."""
    return pd.DataFrame([{"judge": j, "row": ja.row_key(i), "criteria_met": v[k]}
                         for k, j in enumerate((J1, J2, J3))
                         for i, v in enumerate(ja.FIXTURE_VERDICTS)])


@pytest.fixture()
def joined() -> pd.DataFrame:
    return ja.with_truth(fixture_verdicts(), ja.labels_table(ja.fixture_rows()))


def test_the_committed_fixture_is_the_generated_one() -> None:
    assert (DATA / "meta_eval_fixture.jsonl").read_text("utf-8") == ja.fixture_jsonl()
    rows = ja.read_meta_eval(DATA / "meta_eval_fixture.jsonl")
    assert len(rows) == 12 and {r.prompt_id for r in rows} == {f"fixture-conv-{i}"
                                                               for i in range(1, 5)}


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
    # J2 on emergency referrals never says not met where the majority does (rows 9, 10): its
    # not-met F1 is 0 (0 / (0 + 0 + 2)), not undefined
    assert t.loc[(J2, "emergency_referrals")].f1_not_met == 0.0


def test_an_empty_class_has_no_f1() -> None:
    c = ja.confusion([True, True], [True, True])
    pos, neg = ja.class_f1(c)
    assert pos == 1.0 and math.isnan(neg) and math.isnan(ja.macro_f1(c))
    assert math.isnan(ja.sens_spec(c)[1])


def test_pairwise_balanced_f1_and_the_physicians_by_hand(joined: pd.DataFrame) -> None:
    """J1 against every physician label (36 pairs): tp 12, fp 6, fn 5, tn 13 (row by row in
    the module's fixture: rows 2, 3, 5 one fp each, row 12 three; rows 6, 8, 9, 11 the fn).
    The physicians pooled: 5 unanimous rows give 6 agreeing ordered pairs each, 7 split rows 2
    agreeing and 4 disagreeing: TT 20, FF 24, fp = fn = 14. phys-A on its 9 rows: tp 5, fp 5,
    fn 3, tn 5."""
    t = ja.pairwise_f1(joined, ja.physician_labels(ja.fixture_rows())).set_index(
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
    w = ja.cluster_draws(["a", "a", "b", "c", "c", "c"], 50, np.random.default_rng(1))
    assert w.shape == (50, 6)
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 3] == w[:, 4]).all()
    # every resample draws three conversations: a, b and c weigh 2, 1 and 3 rows
    assert (w[:, [0, 2, 3]].sum(axis=1) == 3).all()


def test_sens_spec_intervals_are_seeded_and_clustered(joined: pd.DataFrame) -> None:
    a = ja.sens_spec_table(joined, n_resamples=300, seed=3).set_index(["judge", "category"])
    b = ja.sens_spec_table(joined, n_resamples=300, seed=3).set_index(["judge", "category"])
    pd.testing.assert_frame_equal(a, b)
    assert a.loc[(J1, "all")].n_conversations == 4
    # J2 never misses a met row: every resample's sensitivity is 1
    assert (a.loc[(J2, "all")].sensitivity_low, a.loc[(J2, "all")].sensitivity_high) == (1, 1)
    for _, r in a.iterrows():
        for s in ("sensitivity", "specificity"):
            assert r[f"{s}_low"] <= r[s] + 1e-12 and r[s] <= r[f"{s}_high"] + 1e-12


def test_rogan_gladen_by_hand() -> None:
    # (0.75 + 5/6 - 1) / (5/6 + 5/6 - 1) = (7/12) / (2/3) = 7/8
    assert ja.rogan_gladen(0.75, 5 / 6, 5 / 6) == pytest.approx(7 / 8)
    assert ja.rogan_gladen(0.05, 5 / 6, 5 / 6) == 0.0  # clipped
    assert ja.rogan_gladen(0.99, 0.9, 0.95) == 1.0
    assert math.isnan(ja.rogan_gladen(0.5, 0.5, 0.5))  # no better than chance
    assert ja.rogan_gladen(0.3, 1.0, 1.0) == pytest.approx(0.3)


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
    perfect = ja.corrected_rate("j", graded, _calibration(40, 40), n_resamples=400, seed=9)
    assert perfect.observed == pytest.approx(40 / 60) and perfect.corrected == pytest.approx(
        40 / 60)
    # with a perfect judge the interval is the run's own clustered bootstrap, by hand
    rng = np.random.default_rng([9, 1])
    w = ja.cluster_draws(graded["prompt_id"].tolist(), 400, rng)
    p = w @ graded["criteria_met"].to_numpy(bool) / w.sum(axis=1)
    assert (perfect.low, perfect.high) == pytest.approx(tuple(np.percentile(p, [2.5, 97.5])))
    noisy = ja.corrected_rate("j", graded, _calibration(34, 36), n_resamples=400, seed=9)
    # (2/3 + 0.9 - 1) / (0.85 + 0.9 - 1) = 0.5667 / 0.75
    assert noisy.corrected == pytest.approx((40 / 60 + 36 / 40 - 1) / (34 / 40 + 36 / 40 - 1))
    assert noisy.high - noisy.low > perfect.high - perfect.low


def test_reader_checks_content(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in ja.fixture_jsonl().splitlines()]
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
    with pytest.raises(ja.MetaEvalError, match=r"4 prompt_id not among HealthBench"):
        ja.read_meta_eval(write(rows), known_prompt_ids={"x"})
    known = {f"fixture-conv-{i}" for i in range(1, 5)}
    assert len(ja.read_meta_eval(write(rows), known_prompt_ids=known)) == 12


def test_the_simulator_obeys_a_scripted_verdict() -> None:
    marker = ja.sim_marker({J1: True, J2: False})
    assert simulator.scripted_verdict(J1, f"x {marker} y") is True
    assert simulator.scripted_verdict(J2, marker) is False
    assert simulator.scripted_verdict(J3, marker) is None
    msgs = [("system", "s"), ("user", f"criteria_met ... {marker}")]
    h = simulator.sim_hash(J2, msgs, None)
    text = simulator.answer_text(J2, msgs, None, h)
    assert '"criteria_met": false' in text


def test_the_grader_prompt_puts_the_rubric_in_verbatim() -> None:
    row = ja.fixture_rows()[0]
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


def _live_run() -> SimpleNamespace:
    return SimpleNamespace(mode="live", seed=5, params=JudgeAccuracyParams(n_resamples=50),
                           figure_cache=None)


def test_the_chapter_on_the_fixture_verdicts() -> None:
    rows = ja.fixture_rows()
    source = s15.MetaEval(rows, "fixture", list(study.JUDGE_PANEL), "<<conversation>>", 12)
    v = fixture_verdicts().assign(recovered=False, excluded=False, attempts=1, reason="parsed")
    graded = s15.Graded(source, v, 0.0)
    run = _live_run()
    acc = s15.accuracy(run, graded)
    place = s15.placement(run, graded)
    assert isinstance(acc, s15.Accuracy) and isinstance(place, s15.Placement)
    m = s15.metrics(run, graded, acc, place, s15.unavailable("none"))
    assert m.against_majority[J1]["all"].macro_f1 == pytest.approx(5 / 6)
    assert m.judges_ac1 == pytest.approx(2 / 9) and m.n_rows == 12 and m.n_physicians == 4
    assert m.pairwise["physicians"]["all"].balanced_f1 == pytest.approx(
        (40 / 68 + 48 / 76) / 2)
    text = str(s15.findings(m))
    assert "scripted" in text
    # J1 0.694 vs physicians pooled 0.610: above by 0.084
    gap = (24 / 35 + 26 / 37) / 2 - (40 / 68 + 48 / 76) / 2
    assert f"{gap:.3f} above the physicians pooled" in text
    assert "AC1 0.222" in text
    html = place._repr_html_() + acc._repr_html_()
    assert "Figure J1" in html and "emergency_referrals" in html


def test_paper_mode_is_one_sentence() -> None:
    run = SimpleNamespace(mode="paper")
    note = s15.meta_eval(run)
    assert str(note) == s15.PAPER_NOTE and "online only" in s15.PAPER_NOTE
    assert s15.accuracy(run, note) is note and s15.placement(run, note) is note
    m = s15.metrics(run, note, note, note, note)
    assert m.model_dump(exclude_unset=True) == {"mode": "paper"}
    assert list(s15.findings(m)) == [s15.PAPER_NOTE]
