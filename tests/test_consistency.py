"""The judges' self-consistency (``evaluation.consistency``, chapter 16's statistics): every
function on small scripted repeats tables against the arithmetic done by hand in the test, the
edge cases (one verdict, a tied panel, all unanimous, one candidate, refusals apart from
unparsed replies) and a synthetic table of 10,000 items with exactly 5% flipped."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils import study
from hbpsych_utils.construction import agreement
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import consistency as cs
from hbpsych_utils.evaluation import scoring

T, F, N = True, False, None
KNOBS = {"n_resamples": 2000, "seed": 7, "level": 0.95}


def repeats_table(items: dict[tuple[str, str, str, int], list[bool | None]]) -> pd.DataFrame:
    """A repeats table from (judge, candidate, prompt_id, criterion) -> verdicts by repeat
    (None = no verdict, reason no_verdict)."""
    rows = []
    for (judge, cand, pid, crit), verdicts in items.items():
        for r, met in enumerate(verdicts):
            rows.append({"judge": judge, "candidate": cand, "prompt_id": pid,
                         "criterion_index": crit, "repeat": r, "criteria_met": met,
                         "excluded": met is None,
                         "reason": "no_verdict" if met is None else "parsed"})
    return pd.DataFrame(rows, columns=list(cs.REPEAT_COLUMNS))


JUDGE_A = {
    ("A", "x", "p1", 0): [T, T, T],  # unanimous
    ("A", "x", "p1", 1): [T, F, T],  # flipped
    ("A", "x", "p2", 0): [F, F, F],  # unanimous
    ("A", "x", "p2", 1): [F, T, N],  # two obtained (F, T): flipped
    ("A", "x", "p3", 0): [T, N, N],  # one obtained: no flip to observe, left out
    ("A", "x", "p3", 1): [F, F, F],  # unanimous
}
"""Five items with two or more verdicts, two of them flipped: a flip rate of 2 / 5 = 0.4."""


# --- flips --------------------------------------------------------------------------------------

def test_item_flips_counts_obtained_verdicts_and_flags_flips():
    items = cs.item_flips(repeats_table(JUDGE_A)).set_index(["prompt_id", "criterion_index"])
    assert items["n_verdicts"].tolist() == [3, 3, 3, 2, 1, 3]
    assert items["n_met"].tolist() == [3, 2, 0, 1, 1, 0]
    assert items["flipped"].tolist() == [False, True, False, True, False, False]
    assert items["defined"].tolist() == [True, True, True, True, False, True]


def test_flip_rate_by_hand_and_its_clustered_interval():
    (a, panel) = cs.flip_rates(repeats_table(JUDGE_A), ["A"], **KNOBS)
    # 2 flipped of the 5 items with two verdicts or more; (p3, 0) has one and is left out
    assert (a.judge, a.n_items, a.n_flipped, a.n_left_out, a.n_conversations) == ("A", 5, 2, 1, 3)
    assert a.rate == pytest.approx(2 / 5)
    # conversations resampled: p1 (2 items, 1 flipped), p2 (2, 1), p3 (1 defined item, 0).
    # A resample of three p3 has rate 0 (chance 1/27 = 3.7% > 2.5%), one without p3 has rate
    # 2/4 = 0.5 (chance (2/3)^3 = 30% > 2.5%), and no resample lies outside [0, 0.5]:
    # the 95% interval is [0, 0.5] exactly.
    assert (a.low, a.high, a.undefined) == (0.0, 0.5, None)
    # one judge: the panel majority would be that judge's own verdicts
    assert (panel.judge, panel.rate, panel.undefined) == (cs.PANEL, None, cs.ONE_JUDGE)


def test_interval_keeps_a_conversations_items_together():
    # p1: ten items, all flipped; p2: ten items, none. Resampling conversations (two draws)
    # gives rate 1 (p1 twice, chance 1/4), 0.5 or 0 (p2 twice, 1/4): the interval is [0, 1].
    # Items resampled one by one would give a narrow interval around 0.5.
    items = {("A", "x", "p1", i): [T, F] for i in range(10)}
    items |= {("A", "x", "p2", i): [T, T] for i in range(10)}
    a = cs.flip_rates(repeats_table(items), ["A"], **KNOBS)[0]
    assert (a.rate, a.n_conversations, a.low, a.high) == (0.5, 2, 0.0, 1.0)


def test_one_conversation_has_a_rate_but_no_interval():
    a = cs.flip_rates(repeats_table({("A", "x", "p1", 0): [T, F], ("A", "x", "p1", 1): [T, T]}),
                      ["A"], **KNOBS)[0]
    assert a.rate == 0.5
    assert (a.low, a.high, a.undefined) == (None, None, scoring.ONE_CONVERSATION)


def test_all_unanimous_is_rate_zero_with_interval_zero_zero():
    items = {("A", "x", f"p{i}", 0): [T, T, T] if i % 2 else [F, F, F] for i in range(6)}
    a = cs.flip_rates(repeats_table(items), ["A"], **KNOBS)[0]
    assert (a.rate, a.low, a.high, a.undefined) == (0.0, 0.0, 0.0, None)
    assert cs.self_consistent(a) is True


def test_no_item_with_two_verdicts_is_undefined_not_zero():
    items = {("A", "x", "p1", 0): [T, N, N], ("A", "x", "p2", 0): [N, N, F]}
    a = cs.flip_rates(repeats_table(items), ["A"], **KNOBS)[0]
    assert (a.n_items, a.n_left_out, a.rate, a.low, a.high) == (0, 2, None, None, None)
    assert a.undefined == cs.NO_ITEMS
    assert cs.self_consistent(a) is None


def test_flip_rates_are_reproducible_and_depend_on_the_seed():
    # conversation i has i % 3 of its three items flipped: resamples differ from one another
    items = {("A", "x", f"p{i}", c): [T, F] if c < i % 3 else [T, T]
             for i in range(12) for c in range(3)}
    table = repeats_table(items)
    one = cs.flip_rates(table, ["A"], **KNOBS)[0]
    assert cs.flip_rates(table, ["A"], **KNOBS)[0] == one
    other = cs.flip_rates(table, ["A"], **(KNOBS | {"seed": 8}))[0]
    assert other.rate == one.rate and (other.low, other.high) != (one.low, one.high)


# --- the panel majority -------------------------------------------------------------------------

PANEL_ITEMS = {
    # (p1, 0): repeat 0 A T, B T, C F -> met; repeat 1 A T, B F, C F -> not met: flipped
    ("A", "x", "p1", 0): [T, T], ("B", "x", "p1", 0): [T, F], ("C", "x", "p1", 0): [F, F],
    # (p1, 1): repeat 0 A T, B F, C missing -> a tie (1 of 3 each way): no panel verdict;
    #          repeat 1 A T, B T, C missing -> 2 of 3 met: met. One panel verdict: left out.
    ("A", "x", "p1", 1): [T, T], ("B", "x", "p1", 1): [F, T], ("C", "x", "p1", 1): [N, N],
    # (p2, 0): every judge met in both repeats: unanimous
    ("A", "x", "p2", 0): [T, T], ("B", "x", "p2", 0): [T, T], ("C", "x", "p2", 0): [T, T],
    # (p2, 1): A flips, B and C say not met throughout: the panel says not met twice
    ("A", "x", "p2", 1): [T, F], ("B", "x", "p2", 1): [F, F], ("C", "x", "p2", 1): [F, F],
}


def test_panel_majority_of_the_whole_panel_and_a_tie_excluded():
    panel = cs.panel_repeats(repeats_table(PANEL_ITEMS), ["A", "B", "C"])
    got = {(r.prompt_id, r.criterion_index, r.repeat): r.criteria_met
           for r in panel.itertuples()}
    assert got == {("p1", 0, 0): T, ("p1", 0, 1): F, ("p1", 1, 0): N, ("p1", 1, 1): T,
                   ("p2", 0, 0): T, ("p2", 0, 1): T, ("p2", 1, 0): F, ("p2", 1, 1): F}
    assert set(panel["judge"]) == {cs.PANEL}
    tie = panel[(panel.prompt_id == "p1") & (panel.criterion_index == 1) & (panel.repeat == 0)]
    assert tie["excluded"].tolist() == [True] and tie["reason"].tolist() == [cs.NO_MAJORITY]
    assert list(panel.columns) == list(cs.REPEAT_COLUMNS)


def test_flip_rates_per_judge_then_the_panel():
    rates = cs.flip_rates(repeats_table(PANEL_ITEMS), ["A", "B", "C"], **KNOBS)
    assert [r.judge for r in rates] == ["A", "B", "C", cs.PANEL]
    by = {r.judge: r for r in rates}
    # A: flips on (p2, 1) only, of 4 items -> 1/4; B: (p1, 0) and (p1, 1) -> 2/4;
    # C: (p1, 1) has no verdict, none of its other 3 flips -> 0/3
    assert (by["A"].n_flipped, by["A"].n_items, by["A"].rate) == (1, 4, 0.25)
    assert (by["B"].n_flipped, by["B"].n_items, by["B"].rate) == (2, 4, 0.5)
    assert (by["C"].n_flipped, by["C"].n_items, by["C"].n_left_out, by["C"].rate) == (0, 3, 1, 0)
    # panel: (p1, 0) flipped; (p1, 1) one verdict (the tie) -> left out; p2's two unanimous
    assert (by[cs.PANEL].n_flipped, by[cs.PANEL].n_items, by[cs.PANEL].n_left_out) == (1, 3, 1)
    assert by[cs.PANEL].rate == pytest.approx(1 / 3)
    # the panel (1/3) flips less than B (1/2) but not less than A (1/4) or C (0)
    assert cs.panel_flips_less(rates) is False
    steadier = [r if r.judge == cs.PANEL else
                cs.FlipRate(r.judge, 4, 2, 2, 0, 0.5, 0.1, 0.9, None) for r in rates]
    assert cs.panel_flips_less(steadier) is True


# --- agreement between repeats ------------------------------------------------------------------

def test_repeat_agreement_is_gwets_ac1_by_hand():
    items = {("A", "x", "p1", 0): [T, T, T], ("A", "x", "p1", 1): [T, T, F],
             ("A", "x", "p2", 0): [F, F, F], ("A", "x", "p2", 1): [T, F, N],
             ("B", "x", "p1", 0): [T, T, T], ("B", "x", "p1", 1): [F, F, F]}
    # Judge A, items x (met, not met) counts: (3,0), (2,1), (0,3), (1,1).
    # observed agreement per item, sum_k r_k (r_k - 1) / (r (r - 1)):
    #   6/6 = 1, (2 + 0)/6 = 1/3, 1, (0 + 0)/2 = 0  -> p_a = (7/3) / 4 = 7/12
    # prevalence of met, the mean of r_met / r: (1 + 2/3 + 0 + 1/2) / 4 = 13/24
    # chance agreement (q = 2): 2 * (13/24) * (11/24) = 143/288
    # AC1 = (7/12 - 143/288) / (1 - 143/288) = (168 - 143) / (288 - 143) = 25/145 = 5/29
    pa, pi = 7 / 12, 13 / 24
    pe = 2 * pi * (1 - pi)
    ac1 = cs.repeat_agreement(repeats_table(items))
    assert ac1["A"] == pytest.approx((pa - pe) / (1 - pe))
    assert ac1["A"] == pytest.approx(5 / 29)
    # B: every item unanimous, met and not met equally prevalent: p_a = 1, AC1 = 1
    assert ac1["B"] == pytest.approx(1.0)
    assert cs.repeat_agreement_undefined(repeats_table(items)) == {}


def test_repeat_agreement_undefined_with_one_repeat_or_no_pair():
    one = repeats_table({("A", "x", "p1", 0): [T], ("A", "x", "p2", 0): [F]})
    assert cs.repeat_agreement(one) == {"A": None}
    assert cs.repeat_agreement_undefined(one) == {"A": cs.ONE_REPEAT}
    lonely = repeats_table({("A", "x", "p1", 0): [T, N], ("A", "x", "p2", 0): [N, F]})
    assert cs.repeat_agreement(lonely) == {"A": None}
    assert cs.repeat_agreement_undefined(lonely) == {"A": cs.NO_ITEMS}


def test_repeat_agreement_of_the_panel_rows():
    table = repeats_table(PANEL_ITEMS)
    panel = cs.panel_repeats(table, ["A", "B", "C"])
    ac1 = cs.repeat_agreement(pd.concat([table, panel], ignore_index=True))
    assert set(ac1) == {"A", "B", "C", cs.PANEL}
    frame = panel.pivot(index=["prompt_id", "criterion_index"], columns="repeat",
                        values="criteria_met")
    assert ac1[cs.PANEL] == pytest.approx(
        agreement.gwet_ac1_multirater(frame.astype(object), categories=(True, False)))


# --- which criteria flip ------------------------------------------------------------------------

def test_flips_by_axis_and_by_category_with_counts():
    table = repeats_table(PANEL_ITEMS)
    axes = pd.DataFrame({"prompt_id": ["p1", "p1", "p2"], "criterion_index": [0, 1, 0],
                         "axis": ["accuracy", "completeness", "accuracy"]})
    got = cs.flips_by(table, axes, "axis")
    pooled = got[got["judge"] == cs.POOLED].set_index("axis")
    # items with >= 2 verdicts: (p1,0) A B C [B flips]; (p1,1) A B [B flips], C left out;
    # (p2,0) A B C; (p2,1) A B C [A flips] (no label: uncategorised)
    # accuracy = (p1,0) and (p2,0): 6 items, 1 flipped; completeness: 2 items, 1 flipped;
    # uncategorised: 3 items, 1 flipped. Highest rate first.
    assert pooled.index.tolist() == ["completeness", cs.UNLABELLED, "accuracy"]
    assert pooled["n_items"].tolist() == [2, 3, 6]
    assert pooled["n_flipped"].tolist() == [1, 1, 1]
    assert pooled["rate"].tolist() == pytest.approx([1 / 2, 1 / 3, 1 / 6])
    b = got[got["judge"] == "B"].set_index("axis")
    assert b.loc["completeness", "rate"] == 1.0 and b.loc["accuracy", "n_items"] == 2
    assert got["judge"].drop_duplicates().tolist() == [cs.POOLED, "A", "B", "C"]
    # a label of the conversation (no criterion_index): p1 suicidality, p2 none given
    cats = pd.DataFrame({"prompt_id": ["p1"], "category": ["suicidality_self_harm"]})
    by_cat = cs.flips_by(table, cats, "category")
    pooled = by_cat[by_cat["judge"] == cs.POOLED].set_index("category")
    # p1: 5 items, 2 flipped; p2: 6 items, 1 flipped
    assert pooled.loc["suicidality_self_harm", ["n_items", "n_flipped"]].tolist() == [5, 2]
    assert pooled.loc[cs.UNLABELLED, ["n_items", "n_flipped"]].tolist() == [6, 1]


def test_flips_by_refuses_an_unknown_label_and_conflicting_labels():
    table = repeats_table(JUDGE_A)
    with pytest.raises(cs.ConsistencyError, match="by must be one of"):
        cs.flips_by(table, pd.DataFrame({"prompt_id": ["p1"], "colour": ["red"]}), "colour")
    twice = pd.DataFrame({"prompt_id": ["p1", "p1"], "theme": ["hedging", "global_health"]})
    with pytest.raises(cs.ConsistencyError, match="two values of theme for prompt_id p1"):
        cs.flips_by(table, twice, "theme")


# --- scores across repeats ----------------------------------------------------------------------

CONVS = {
    "c1": Conversation("c1", (Message("user", "q1"),),
                       (RubricItem("a", 5), RubricItem("b", 3), RubricItem("c", -2))),
    "c2": Conversation("c2", (Message("user", "q2"),), (RubricItem("d", 4), RubricItem("e", 4))),
}
"""Two rubrics: c1 [5, 3, -2] (8 positive points), c2 [4, 4] (8)."""

STUDY_VERDICTS = {
    ("A", "x", "c1"): [T, T, F],  # (5 + 3) / 8 = 1.0
    ("B", "x", "c1"): [T, F, F],  # 5 / 8 = 0.625
    ("A", "x", "c2"): [T, F],     # 4 / 8 = 0.5
    ("B", "x", "c2"): [T, T],     # 8 / 8 = 1.0
    ("A", "y", "c1"): [F, T, T],  # (3 - 2) / 8 = 0.125
    ("B", "y", "c1"): [F, T, T],  # 0.125
    ("A", "y", "c2"): [F, T],     # 0.5
    ("B", "y", "c2"): [F, T],     # 0.5
    ("A", "z", "c1"): [F, F, T],  # -2 / 8 = -0.25
    ("B", "z", "c1"): [F, F, T],  # -0.25
    ("A", "z", "c2"): [F, F],     # 0
    ("B", "z", "c2"): [F, F],     # 0
}
SCORE_REPEATS = {
    # repeat 0 is the study's verdict; repeat 1 A says not met on x's c1 criterion 0
    ("A", "x", "c1", 0): [T, F, T], ("B", "x", "c1", 0): [T, T, T],
    # repeat 2 B has no verdict on y's c2 criterion 1: y's c2 unscored for B in repeat 2
    ("A", "y", "c2", 1): [T, T, T], ("B", "y", "c2", 1): [T, T, N],
}


def study_verdicts() -> pd.DataFrame:
    rows = [{"judge": j, "candidate": c, "prompt_id": p, "criterion_index": i,
             "criteria_met": met, "recovered": False, "excluded": False, "attempts": 1,
             "reason": "parsed"}
            for (j, c, p), mets in STUDY_VERDICTS.items() for i, met in enumerate(mets)]
    return pd.DataFrame(rows)


def test_repeat_scores_replace_the_sampled_verdicts_by_each_repeats():
    scores = cs.repeat_scores(study_verdicts(), repeats_table(SCORE_REPEATS), CONVS)
    assert list(scores.columns) == ["repeat", "judge", "candidate", "prompt_id", "score"]
    got = scores.set_index(["repeat", "judge", "candidate", "prompt_id"])["score"]
    assert len(got) == 3 * len(STUDY_VERDICTS)
    assert got[(0, "A", "x", "c1")] == 1.0
    assert got[(1, "A", "x", "c1")] == 3 / 8  # criterion 0 (5 points) not met in repeat 1
    assert got[(2, "A", "x", "c1")] == 1.0
    assert got[(1, "B", "x", "c1")] == 5 / 8  # B's repeat verdict equals its study verdict
    assert got[(1, "B", "y", "c2")] == 0.5
    assert math.isnan(got[(2, "B", "y", "c2")])  # no verdict: unscored, not 07's verdict
    assert got[(2, "A", "y", "c2")] == 0.5
    assert got[(2, "A", "z", "c1")] == -0.25  # untouched conversations keep the study's


def test_score_spread_by_hand():
    scores = cs.repeat_scores(study_verdicts(), repeats_table(SCORE_REPEATS), CONVS)
    spread = cs.score_spread(scores)
    r0, r1, r2 = (cs.repeat_column(r) for r in range(3))
    # x: c1 mean(1.0, 0.625) = 0.8125, c2 mean(0.5, 1.0) = 0.75 -> (0.8125 + 0.75)/2 = 0.78125
    #    repeat 1: c1 mean(0.375, 0.625) = 0.5 -> (0.5 + 0.75)/2 = 0.625; repeat 2 as 0
    assert spread.loc["x", [r0, r1, r2]].tolist() == [0.78125, 0.625, 0.78125]
    assert spread.loc["x", ["min", "max", "spread"]].tolist() == [0.625, 0.78125, 0.15625]
    # y: c1 0.125, c2 0.5 -> 0.3125; repeat 2: c2 not scored by B, so the panel has c1 only
    assert spread.loc["y", [r0, r1, r2]].tolist() == [0.3125, 0.3125, 0.125]
    assert spread.loc["y", "spread"] == 0.3125 - 0.125
    # z: c1 -0.25, c2 0 -> mean -0.125, clipped to 0 (the clip applies to the mean)
    assert spread.loc["z", [r0, r1, r2, "spread"]].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert spread.index.tolist() == ["x", "y", "z"]
    assert spread["undefined"].tolist() == [None, None, None]


def test_repeat_scores_refuse_an_item_the_study_did_not_grade():
    stray = repeats_table({("A", "w", "c1", 0): [T, T]})
    with pytest.raises(cs.ConsistencyError, match="candidate w, prompt_id c1, criterion 0"):
        cs.repeat_scores(study_verdicts(), stray, CONVS)


# --- the ranking across repeats -----------------------------------------------------------------

def scores_of(values: dict[int, dict[str, float]]) -> pd.DataFrame:
    """A repeat score table with one judge and one conversation per candidate."""
    return pd.DataFrame([{"repeat": r, "judge": "A", "candidate": c, "prompt_id": "c1",
                          "score": s} for r, row in values.items() for c, s in row.items()])


def test_ranking_taus_by_hand():
    scores = cs.repeat_scores(study_verdicts(), repeats_table(SCORE_REPEATS), CONVS)
    # x > y > z in every repeat (0.78125 / 0.625 / 0.78125 over 0.3125 / 0.125 over 0)
    assert cs.ranking_taus(scores) == {"0|1": 1.0, "0|2": 1.0, "1|2": 1.0}
    assert cs.ranking_stable(cs.ranking_taus(scores)) is True
    # a swapped pair: (a, b) discordant, (a, c) and (b, c) concordant -> (2 - 1) / 3
    swapped = scores_of({0: {"a": 0.9, "b": 0.5, "c": 0.1}, 1: {"a": 0.5, "b": 0.9, "c": 0.1}})
    assert cs.ranking_taus(swapped) == {"0|1": pytest.approx(1 / 3)}
    assert cs.ranking_stable(cs.ranking_taus(swapped)) is False


def test_one_candidate_has_no_tau_and_says_why():
    one = scores_of({0: {"a": 0.9}, 1: {"a": 0.5}})
    assert cs.ranking_taus(one) == {"0|1": None}
    assert "1 candidate" in cs.ranking_tau_undefined(one)["0|1"]
    assert cs.ranking_stable(cs.ranking_taus(one)) is None
    flat = scores_of({0: {"a": 0.5, "b": 0.5}, 1: {"a": 0.2, "b": 0.6}})
    assert cs.ranking_taus(flat) == {"0|1": None}
    assert cs.ranking_tau_undefined(flat)["0|1"].startswith("repeat 0 ")


# --- the judges' refusals -----------------------------------------------------------------------

def test_judge_refusals_apart_from_unparsed_and_by_category_suicidality_first():
    rows = [  # judge, prompt_id, criteria_met, reason
        ("A", "p_anx", T, "parsed"), ("A", "p_anx", F, "parsed"),
        ("A", "p_sui", N, "judge_refused"), ("A", "p_sui", N, "judge_refused"),
        ("A", "p_sui", N, "no_verdict"), ("A", "p_sui", T, "recovered"),
        ("A", "p_sui", N, "call_failed"), ("A", "p_none", F, "parsed"),
        ("B", "p_sui", F, "parsed"), ("B", "p_anx", N, "no_verdict"),
        (cs.PANEL, "p_sui", N, cs.NO_MAJORITY),
    ]
    verdicts = pd.DataFrame(rows, columns=["judge", "prompt_id", "criteria_met", "reason"])
    cats = {"p_anx": "anxiety", "p_sui": "suicidality_self_harm"}
    got = cs.judge_refusals(verdicts, cats)
    assert list(got.columns) == list(cs.REFUSAL_COLUMNS)
    assert got[["judge", "category"]].values.tolist() == [
        ["A", "suicidality_self_harm"], ["A", "anxiety"], ["A", cs.UNLABELLED],
        ["B", "suicidality_self_harm"], ["B", "anxiety"]]
    a_sui = got.iloc[0]
    # five verdict rows: two refused by the provider, one unparsed, one recovered (graded),
    # one failed call; a refusal is neither graded nor "not met"
    assert (a_sui.verdicts, a_sui.graded, a_sui.judge_refused, a_sui.no_verdict,
            a_sui.other) == (5, 1, 2, 1, 1)
    assert got.iloc[1][["verdicts", "graded", "judge_refused"]].tolist() == [2, 2, 0]
    assert got.iloc[4][["graded", "judge_refused", "no_verdict"]].tolist() == [0, 0, 1]


def test_category_order_follows_the_study():
    order = cs.category_order(["sleep", "anxiety", cs.UNLABELLED, "zz_new",
                               "suicidality_self_harm"])
    assert order == ["suicidality_self_harm", "anxiety", "sleep", "zz_new", cs.UNLABELLED]


# --- tables as files, bad input -----------------------------------------------------------------

def test_a_repeats_table_read_back_from_csv_gives_the_same_flips(tmp_path):
    table = repeats_table(JUDGE_A)
    table.to_csv(tmp_path / "repeats.csv", index=False)
    back = pd.read_csv(tmp_path / "repeats.csv")
    assert cs.item_flips(back).equals(cs.item_flips(table))


def test_a_duplicate_repeat_row_is_refused_with_its_key():
    table = repeats_table(JUDGE_A)
    twice = pd.concat([table, table.iloc[[0]]], ignore_index=True)
    with pytest.raises(cs.ConsistencyError,
                       match="judge A, candidate x, prompt_id p1, criterion 0, repeat 0"):
        cs.item_flips(twice)
    with pytest.raises(cs.ConsistencyError, match=r"missing column\(s\) \['repeat'\]"):
        cs.item_flips(table.drop(columns="repeat"))


def test_thresholds_are_the_studys():
    assert 0 < study.SELF_CONSISTENT_FLIP_RATE < 1
    assert -1 < study.RANKING_STABLE_TAU <= 1
    rate = cs.FlipRate("A", 100, 1, 50, 0, 0.01, 0.0, study.SELF_CONSISTENT_FLIP_RATE, None)
    assert cs.self_consistent(rate) is False  # the upper end must be below the threshold


# --- a synthetic table of 10,000 items ----------------------------------------------------------

@pytest.mark.parametrize("share", [0.05, 0.0])
def test_ten_thousand_items_with_a_known_share_flipped(share):
    n_conv, per_conv = 2000, 5
    n = n_conv * per_conv
    rng = np.random.default_rng(11)
    flipped = np.zeros(n, bool)
    flipped[rng.choice(n, size=round(share * n), replace=False)] = True
    k = 3
    met = np.repeat(rng.random(n) < 0.6, k).reshape(n, k)
    met[flipped, k - 1] = ~met[flipped, k - 1]
    table = pd.DataFrame({
        "judge": "A", "candidate": "x",
        "prompt_id": np.repeat([f"p{i:04d}" for i in range(n_conv)], per_conv * k),
        "criterion_index": np.tile(np.repeat(np.arange(per_conv), k), n_conv),
        "repeat": np.tile(np.arange(k), n), "criteria_met": met.ravel(), "excluded": False,
        "reason": "parsed"})
    a = cs.flip_rates(table, ["A"], n_resamples=1000, seed=study.SEED, level=study.CI_LEVEL)[0]
    assert (a.n_items, a.n_flipped) == (n, round(share * n))
    assert a.rate == share
    assert a.low is not None and a.high is not None
    assert a.low <= share <= a.high
    if share == 0:
        assert (a.low, a.high) == (0.0, 0.0)
    else:
        assert 0.04 < a.low < share < a.high < 0.06


def test_flip_rate_table_has_a_row_per_rate_and_the_reasons():
    rates = cs.flip_rates(repeats_table(JUDGE_A), ["A"], **KNOBS)
    table = cs.flip_rate_table(rates)
    assert table["judge"].tolist() == ["A", cs.PANEL]
    assert table.loc[0, ["n_items", "n_flipped", "rate", "low", "high"]].tolist() == [
        5, 2, 0.4, 0.0, 0.5]
    assert math.isnan(table.loc[1, "rate"]) and table.loc[1, "undefined"] == cs.ONE_JUDGE


def test_repeat_scores_read_the_first_replies_of_a_sampled_verdict_table():
    verdicts = study_verdicts().assign(sample=0)
    other = verdicts.assign(sample=1, criteria_met=False)  # a second reply: not the study's
    both = pd.concat([verdicts, other], ignore_index=True)
    table = repeats_table(SCORE_REPEATS)
    assert cs.repeat_scores(both, table, CONVS).equals(
        cs.repeat_scores(study_verdicts(), table, CONVS))


def test_empty_tables_give_empty_results():
    empty = repeats_table({})
    assert cs.item_flips(empty).empty
    assert cs.panel_repeats(empty, ["A", "B"]).empty
    rates = cs.flip_rates(empty, ["A", "B"], **KNOBS)
    assert [(r.judge, r.rate, r.undefined) for r in rates] == [
        ("A", None, cs.NO_ITEMS), ("B", None, cs.NO_ITEMS), (cs.PANEL, None, cs.NO_ITEMS)]
    assert cs.repeat_agreement(empty) == {}
    no_labels = pd.DataFrame({"prompt_id": [], "axis": []})
    assert cs.flips_by(empty, no_labels, "axis").empty
    assert cs.judge_refusals(empty, {}).empty


@pytest.mark.parametrize("met", [[True, False, True, False],
                                 [True, False, True, None],
                                 ["True", "False", "True", float("nan")]])
def test_an_excluded_or_missing_verdict_is_none_never_false(met):
    frame = pd.DataFrame({"criteria_met": met, "excluded": [False, False, True, False]})
    got = cs.obtained(frame).tolist()
    assert got[:3] == [True, False, None]
    assert got[3] is (False if met[3] is False else None)


def test_interval_level_and_a_judges_interval_apart_from_the_others():
    items = {("A", "x", f"p{i}", c): [T, F] if c < i % 3 else [T, T]
             for i in range(12) for c in range(3)}
    items |= {("B", "x", f"p{i}", 0): [F, F] for i in range(12)}
    table = repeats_table(items)
    wide = cs.flip_rates(table, ["A"], **KNOBS)[0]
    narrow = cs.flip_rates(table, ["A"], **(KNOBS | {"level": 0.5}))[0]
    assert wide.low is not None and wide.high is not None
    assert narrow.low is not None and narrow.high is not None
    assert wide.low <= narrow.low <= wide.rate <= narrow.high <= wide.high
    assert narrow.high - narrow.low < wide.high - wide.low
    # A's rate and interval do not change when judge B joins the table
    assert cs.flip_rates(table, ["A", "B"], **KNOBS)[0] == wide
    with pytest.raises(scoring.ScoringError, match="level"):
        cs.flip_rates(table, ["A"], **(KNOBS | {"level": 95}))
