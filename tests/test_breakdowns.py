"""Scores by tag and slice (``evaluation.breakdowns``): simple-evals' per-tag semantics on a
hand-built case, the panel, the categories and the findings' helpers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import breakdowns, grading, scoring

Q = (Message("user", "q"),)
# Conversation A: an item with two tags, a tag whose items are all negative, one whose only
# item is worth 0 points, a negative item that is met.
A = Conversation("a", Q, (
    RubricItem("both", 5, ("axis:accuracy", "axis:completeness")),
    RubricItem("acc", 3, ("axis:accuracy",)),
    RubricItem("neg met", -2, ("axis:communication_quality",)),
    RubricItem("neg unmet", -4, ("axis:context_awareness",)),
    RubricItem("zero", 0, ("axis:instruction_following",)),
    RubricItem("comp", 2, ("axis:completeness",)),
), example_tags=("theme:hedging",))
MET_A = [True, False, True, False, True, True]
# Conversation B: accuracy below zero (a met negative item, an unmet positive one).
B = Conversation("b", Q, (
    RubricItem("cq", 4, ("axis:communication_quality",)),
    RubricItem("acc neg", -3, ("axis:accuracy",)),
    RubricItem("acc pos", 6, ("axis:accuracy",)),
), example_tags=("theme:hedging", "theme:emergency_referrals"))
MET_B = [True, True, False]


def test_conversation_tags_follow_simple_evals_by_hand():
    got = breakdowns.conversation_tags(A.rubrics, MET_A, A.example_tags)
    # overall: (5 - 2 + 2) / (5 + 3 + 2) = 0.5, taken by the example tag
    assert got == {
        "theme:hedging": 0.5,
        "axis:accuracy": 5 / 8,          # items 0 and 1 (item 0 counts for both of its tags)
        "axis:completeness": 7 / 7,      # items 0 and 5
        # communication_quality (negative items only), context_awareness (negative only) and
        # instruction_following (0 points) have no positive points here: no score, as
        # simple-evals' calculate_score returns None for them
    }
    got_b = breakdowns.conversation_tags(B.rubrics, MET_B, B.example_tags)
    assert got_b == {"theme:hedging": 0.1, "theme:emergency_referrals": 0.1,
                     "axis:communication_quality": 1.0, "axis:accuracy": -0.5}
    # a missing verdict leaves the reply without any tag score (it has no overall score)
    assert breakdowns.conversation_tags(B.rubrics, [True, None, False], B.example_tags) == {}


def _verdicts(rows):
    return pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id", "criterion_index",
                                       "criteria_met"])


def _graded(judge, cand, conv, met):
    return [(judge, cand, conv.prompt_id, i, m) for i, m in enumerate(met)]


def test_aggregated_tags_are_clipped_means_with_n():
    v = _verdicts(_graded("j", "m", A, MET_A) + _graded("j", "m", B, MET_B))
    long = breakdowns.with_panel(breakdowns.tag_scores(v, {"a": A, "b": B}), ["j"])
    s = breakdowns.summarise(long, n_resamples=50, seed=1, level=0.95)
    judge = s[s.scorer == "j"].set_index("tag")
    assert judge.loc["axis:accuracy", "clipped_mean"] == pytest.approx((5 / 8 - 0.5) / 2)
    assert judge.loc["axis:accuracy", "n"] == 2
    assert judge.loc["axis:communication_quality", ["clipped_mean", "n"]].tolist() == [1.0, 1]
    assert judge.loc["axis:completeness", "n"] == 1
    assert "axis:context_awareness" not in judge.index
    assert judge.loc["theme:hedging", "clipped_mean"] == pytest.approx(0.3)
    assert judge.loc["theme:emergency_referrals", ["clipped_mean", "n"]].tolist() == \
        pytest.approx([0.1, 1])
    # a tag whose mean is below zero is clipped, like the overall score
    only_b = breakdowns.summarise(breakdowns.with_panel(breakdowns.tag_scores(
        _verdicts(_graded("j", "m", B,
                          MET_B)), {"b": B}), ["j"]), n_resamples=50, seed=1, level=0.95)
    assert only_b.set_index(["scorer", "tag"]).loc[("j", "axis:accuracy"), "clipped_mean"] == 0
    # the interval and bootstrap std are the study's, from one bootstrap of the same values
    values = [5 / 8, -0.5]
    ci = scoring.bootstrap_ci(values, n_resamples=50, seed=1, level=0.95)
    assert judge.loc["axis:accuracy", ["ci_low", "ci_high"]].tolist() == pytest.approx(
        [ci.low, ci.high])
    assert judge.loc["axis:accuracy", "bootstrap_std"] == pytest.approx(
        scoring.reference_bootstrap_std(values, n_resamples=50, seed=1))


def test_a_tag_on_one_conversation_has_no_interval():
    """completeness is scored on conversation A only: its clipped mean is A's, its interval is
    undefined (NaN in the table, null in the metrics with the reason), not [x, x]; its
    bootstrap_std is the reference's, 0. A tag on two conversations keeps its numbers."""
    v = _verdicts(_graded("j", "m", A, MET_A) + _graded("j", "m", B, MET_B))
    long = breakdowns.with_panel(breakdowns.tag_scores(v, {"a": A, "b": B}), ["j"])
    s = breakdowns.summarise(long, n_resamples=50, seed=1, level=0.95).set_index(["scorer", "tag"])
    one = s.loc[("j", "axis:completeness")]
    assert one["n"] == 1 and one["clipped_mean"] == 1.0
    assert math.isnan(one["ci_low"]) and math.isnan(one["ci_high"])
    score = breakdowns.tag_score(one.to_dict())
    assert (score.ci_low, score.ci_high, score.bootstrap_std) == (None, None, 0.0)
    assert score.undefined == {"ci_low": scoring.ONE_CONVERSATION,
                               "ci_high": scoring.ONE_CONVERSATION}
    assert score.model_dump(mode="json", exclude_unset=True)["ci_low"] is None
    two = breakdowns.tag_score(s.loc[("j", "axis:accuracy")].to_dict())
    assert two.undefined is None and two.ci_low is not None and two.ci_low <= two.ci_high
    assert "undefined" not in two.model_dump(exclude_unset=True)


def test_summarise_takes_the_level():
    v = _verdicts(_graded("j", "m", A, MET_A) + _graded("j", "m", B, MET_B))
    long = breakdowns.with_panel(breakdowns.tag_scores(v, {"a": A, "b": B}), ["j"])
    wide = breakdowns.summarise(long, n_resamples=200, seed=1, level=0.95)
    narrow = breakdowns.summarise(long, n_resamples=200, seed=1, level=0.5)
    a = wide.set_index(["scorer", "tag"]).loc[("j", "theme:hedging")]
    b = narrow.set_index(["scorer", "tag"]).loc[("j", "theme:hedging")]
    # resample means 0.1, 0.3, 0.5 (conversations a and b, 0.5 and 0.1)
    assert a["ci_low"] <= b["ci_low"] <= b["ci_high"] <= a["ci_high"]
    assert a["ci_high"] - a["ci_low"] > b["ci_high"] - b["ci_low"]


def test_panel_averages_judges_on_conversations_every_judge_scored():
    rows = (_graded("j1", "m", A, MET_A) + _graded("j1", "m", B, MET_B)
            + _graded("j2", "m", A, [False] * 6) + _graded("j2", "m", B, [True, None, False]))
    long = breakdowns.with_panel(breakdowns.tag_scores(_verdicts(rows), {"a": A, "b": B}),
                                 ["j1", "j2"])
    panel = long[long.scorer == breakdowns.PANEL].set_index(["prompt_id", "tag"])["score"]
    # j2 left b unscored (a missing verdict), so the panel has only a
    assert set(panel.index.get_level_values(0)) == {"a"}
    # j2 on a: overall 0, accuracy 0, completeness 0; j1 as in the hand case
    assert panel[("a", "theme:hedging")] == pytest.approx(0.25)
    assert panel[("a", "axis:accuracy")] == pytest.approx(5 / 16)
    # the panel's overall-score tag agrees with the study's panel score of the conversation
    scores = grading.scores_from_verdicts(_verdicts(rows), {"a": A, "b": B})
    assert scoring.panel_conversation_scores(scores, "m", ["j1", "j2"]).to_dict() == {
        "a": pytest.approx(0.25)}
    with pytest.raises(breakdowns.BreakdownError, match="j3"):
        breakdowns.with_panel(breakdowns.tag_scores(_verdicts(rows), {"a": A, "b": B}),
                              ["j1", "j3"])


def test_samples_and_categories_pass_through():
    rows = [(*r, s) for s in (0, 1) for r in _graded("j", "m", A, MET_A)]
    v = pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id", "criterion_index",
                                    "criteria_met", "sample"])
    cats = breakdowns.category_tags(pd.Series({"a": "anxiety", "b": "no category majority"}))
    assert cats == {"a": ("category:anxiety",)}
    long = breakdowns.tag_scores(v, {"a": A}, extra_tags=cats)
    assert list(long.columns) == ["judge", "candidate", "prompt_id", "sample", "tag", "score"]
    assert set(long["sample"]) == {0, 1}
    assert long.set_index(["sample", "tag"]).loc[(1, "category:anxiety"), "score"] == 0.5
    # a verdict table whose criteria do not cover the rubric is an error naming the reply
    with pytest.raises(grading.GradingError, match="prompt_id a"):
        breakdowns.tag_scores(v[v.criterion_index != 2], {"a": A})


def _summary(rows):
    return pd.DataFrame(rows, columns=["scorer", "candidate", "tag", "n", "clipped_mean"])


def test_weakest_axis_and_reorderings_follow_thresholds():
    s = _summary([
        ("panel", "x", "axis:accuracy", 9, 0.40), ("panel", "x", "axis:completeness", 9, 0.30),
        ("panel", "x", "axis:context_awareness", 2, 0.10),  # too few conversations to count
        ("panel", "y", "axis:accuracy", 9, 0.50), ("panel", "y", "axis:completeness", 9, 0.60),
        ("panel", "x", "theme:hedging", 9, 0.20), ("panel", "y", "theme:hedging", 9, 0.45),
        ("panel", "x", "theme:global_health", 9, 0.50),
        ("panel", "y", "theme:global_health", 9, 0.505),  # within CLOSE_SCORES: no change
    ])
    assert breakdowns.weakest(s, min_n=5) == {
        "x": ("axis:completeness", 0.30, pytest.approx(0.10)),
        "y": ("axis:accuracy", 0.50, pytest.approx(0.10))}
    overall = {"x": 0.45, "y": 0.40}
    assert breakdowns.reorderings(s, overall, min_n=5, close=0.01) == {
        "axis:accuracy": [("x", "y")], "axis:completeness": [("x", "y")],
        "theme:hedging": [("x", "y")]}
    assert breakdowns.spread_over_tags(s, "panel", "axis:", min_n=5)["x"] == pytest.approx(0.1)
