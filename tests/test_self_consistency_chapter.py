"""Chapter 16's numbers on a small scripted case, computed by hand: the stage's own steps and
metrics (flip rates, the panel majority's, AC1 between repeats, score spread, ranking taus,
the judges' refusals), not only the statistics' functions."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import consistency
from hbpsych_utils.pipeline import graph
from hbpsych_utils.stages import s16_self_consistency as s16

J1, J2 = "gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001"
T, F, N = True, False, None
# (judge, candidate, prompt_id, criterion) -> verdicts of repeats 0 (07's), 1 and 2
SCRIPT = {
    (J1, "c1", "p1", 0): (T, T, T), (J1, "c1", "p1", 1): (F, F, F),
    (J1, "c1", "p2", 0): (T, F, T), (J1, "c1", "p2", 1): (F, F, F),
    (J1, "c2", "p1", 0): (T, T, T), (J1, "c2", "p1", 1): (T, T, T),
    (J1, "c2", "p2", 0): (F, F, F), (J1, "c2", "p2", 1): (F, F, F),
    (J2, "c1", "p1", 0): (T, T, T), (J2, "c1", "p1", 1): (F, T, F),
    (J2, "c1", "p2", 0): (T, T, T), (J2, "c1", "p2", 1): (F, F, F),
    (J2, "c2", "p1", 0): (T, T, T), (J2, "c2", "p1", 1): (T, T, T),
    (J2, "c2", "p2", 0): (F, F, F), (J2, "c2", "p2", 1): (T, T, N),
}
"""J1 flips once (c1/p2/0), J2 once (c1/p1/1); J2's last verdict of c2/p2/1 was refused by
its provider (no verdict, never not met)."""


def conversations() -> dict[str, Conversation]:
    return {
        "p1": Conversation("p1", (Message("user", "one"),),
                           (RubricItem("a", 5, ("axis:accuracy",)),
                            RubricItem("b", 5, ("axis:completeness",))), ("theme:hedging",)),
        "p2": Conversation("p2", (Message("user", "two"),),
                           (RubricItem("c", 4, ("axis:accuracy",)),
                            RubricItem("d", -2, ("axis:accuracy",))), ("theme:hedging",)),
    }


def regraded() -> s16.Regraded:
    rows = [{"judge": j, "candidate": c, "prompt_id": p, "criterion_index": i, "repeat": r,
             "criteria_met": v, "excluded": v is None,
             "reason": "parsed" if v is not None else "judge_refused"}
            for (j, c, p, i), vs in SCRIPT.items() for r, v in enumerate(vs)]
    repeats = pd.DataFrame(rows)[list(consistency.REPEAT_COLUMNS)]
    repeats["criteria_met"] = repeats["criteria_met"].astype(object)
    first = repeats[repeats["repeat"] == 0].drop(columns="repeat").assign(
        recovered=False, attempts=1)
    items = sorted({(c, p, i) for _, c, p, i in SCRIPT})
    convs = conversations()
    categories = {"p1": "anxiety", "p2": "suicidality_self_harm"}
    sample = s16.Sample(items, len(items), 3, [J1, J2], pd.DataFrame(), convs, "", first,
                        s16.item_labels(items, convs, categories), categories)
    return s16.Regraded(sample, repeats, n_calls=32, spend_usd=0.0, paid_earlier=0.0,
                        flip_rate=None)


def ac1(items: list[tuple[bool, ...]]) -> float:
    """Gwet's AC1 for two categories and every item rated by all its raters, from the
    formula (exact fractions)."""
    pa = sum(Fraction(sum(v) * (sum(v) - 1) + (len(v) - sum(v)) * (len(v) - sum(v) - 1),
                      len(v) * (len(v) - 1)) for v in items) / len(items)
    met = sum(Fraction(sum(v), len(v)) for v in items) / len(items)
    pe = 2 * met * (1 - met)
    return float((pa - pe) / (1 - pe))


def test_the_chapters_numbers_equal_a_hand_computation() -> None:
    data = regraded()
    flips = s16.flips(data, n_resamples=200, seed=3, level=0.95)
    scores = s16.scores(data)
    refusals = s16.refusals(data)
    inputs = s16.Inputs(graph.LIVE, data.data)
    m = s16.metrics(inputs, data, flips, scores, refusals, repeats=3, repeat_sample=40)
    # flip rates: one flipped item of eight per judge; J2's c2/p2/1 still has two verdicts
    assert (m.flip_rates[J1].n_items, m.flip_rates[J1].n_flipped) == (8, 1)
    assert (m.flip_rates[J2].n_items, m.flip_rates[J2].n_flipped) == (8, 1)
    assert m.flip_rates[J1].rate == m.flip_rates[J2].rate == 1 / 8
    # the panel of two: a verdict when both judges agree; c1/p1/1 and c1/p2/0 lose their
    # repeat-1 verdict (a tie) and keep two equal ones; c2/p2/1 has none (a tie, then J2's
    # refusal): out of the rate. Nothing the panel decides flips.
    panel = m.flip_rates[consistency.PANEL]
    assert (panel.n_items, panel.n_flipped, panel.n_left_out, panel.rate) == (7, 0, 1, 0.0)
    assert m.panel_flips_less is True
    # AC1 between the repeats, from the formula
    j1 = [v for (j, *_), v in SCRIPT.items() if j == J1]
    assert m.flip_rates[J1].repeat_ac1 == pytest.approx(ac1(j1), abs=1e-12)
    assert ac1(j1) == pytest.approx(0.834482758620, abs=1e-9)
    # the interval resamples the two conversations: J1's flip is in p2 (4 items each)
    assert m.flip_rates[J1].low == 0.0 and m.flip_rates[J1].high == 0.25
    assert m.flip_rates[J1].self_consistent is False
    # scores (achieved / positive points), panel mean per conversation, mean over them:
    # repeat 0: c1 (0.5 + 1.0) / 2 = 0.75; c2 (1 + (0 - 0.5) / 2) / 2 = 0.375
    # repeat 1: J1 c1/p2 = 0, J2 c1/p1 = 1: c1 ((0.5 + 1) / 2 + (0 + 1) / 2) / 2 = 0.625
    # repeat 2: J2's c2/p2 has no verdict on criterion 1: c2 unscored for J2 -> p1 only, 1.0
    spread = m.score_spread
    assert spread["c1"].by_repeat == pytest.approx({"0": 0.75, "1": 0.625, "2": 0.75})
    assert spread["c2"].by_repeat == pytest.approx({"0": 0.375, "1": 0.375, "2": 1.0})
    assert spread["c1"].spread == pytest.approx(0.125)
    assert spread["c2"].spread == pytest.approx(0.625)
    assert m.largest_spread == pytest.approx(0.625)
    # c1 above c2 in repeats 0 and 1, below in repeat 2: tau-b +1 and -1 with two candidates
    assert m.ranking_taus == {"0|1": 1.0, "0|2": -1.0, "1|2": -1.0}
    assert m.ranking_stable is False
    # the refusal: J2, in a re-grading, on the suicidality conversation; never "not met"
    assert m.judge_refusals[J2].repeats_judge_refused == 1
    assert m.judge_refusals[J1].repeats_judge_refused == 0
    rows = refusals.repeats.set_index(["judge", "category"])
    assert rows.loc[(J2, "suicidality_self_harm"), "judge_refused"] == 1
    assert list(refusals.repeats["category"])[:1] == ["suicidality_self_harm"]  # first
    # as a reader sees them: the rate and its interval both as percentages, the repeat pairs
    # by name
    laid = flips.view().shown()
    row = dict(zip(laid.labels, laid.texts[0], strict=True))
    assert row["Flip rate"] == "12.5%" and row["95% interval"] == "[0.0%, 25.0%]"
    pairs = scores.view().tables[1].frame.index
    assert list(pairs) == ["0 and 1", "0 and 2", "1 and 2"]
    found = " ".join(s16.findings(m))
    assert "flipped on 1 of 8 items (12.5%" in found and "does not keep" in found
    assert "refused or filtered 1 verdict" in found


def test_a_paper_run_and_a_single_grading_have_only_their_mode() -> None:
    for mode in (graph.PAPER, graph.LIVE):
        m = s16.metrics(s16.Inputs(mode, None), None, None, None, None, repeats=1,
                        repeat_sample=200)
        assert m.flip_rates is None and s16.findings(m) is None


def test_the_sample_labels_each_item_by_theme_axis_and_category() -> None:
    labels = s16.item_labels([("c1", "p1", 1), ("c2", "p2", 0)], conversations(),
                             {"p2": "suicidality_self_harm"})
    rows = labels.astype(object).where(labels.notna(), None).to_dict("records")
    assert rows == [
        {"prompt_id": "p1", "criterion_index": 1, "theme": "hedging", "axis": "completeness",
         "category": None},
        {"prompt_id": "p2", "criterion_index": 0, "theme": "hedging", "axis": "accuracy",
         "category": "suicidality_self_harm"}]


def test_an_undefined_statistic_is_shown_as_a_dash_with_its_reason() -> None:
    """One conversation: no interval (every resample draws it); the table shows — and says
    why under it, and the metrics hold null with the reason."""
    data = regraded()
    one = data.repeats[data.repeats["prompt_id"] == "p1"]
    single = s16.Regraded(data.data, one, 0, 0.0, 0.0, None)
    flips = s16.flips(single, n_resamples=50, seed=1, level=0.9)
    shown = repr(flips.view())
    assert "—" in shown and "one conversation" in shown and "90% interval" in shown
    m = s16.metrics(s16.Inputs(graph.LIVE, data.data), single, flips, s16.scores(single),
                    s16.refusals(single), repeats=3, repeat_sample=40)
    assert m.flip_rates[J2].rate == 1 / 4 and m.flip_rates[J2].high is None
    assert "one conversation" in m.flip_rates[J2].undefined["interval"]
    assert repr(s16.scores(single).view()) and repr(s16.refusals(single).view())


def test_the_repeats_are_16s_keys_not_07s() -> None:
    """``grading.repeats`` and ``grading.repeat_sample`` sit in 07's section but only 16 reads
    them: 07's fingerprint and parameters ignore them (it is not re-run when they change), 16
    takes them as parameters, and a paper run refuses them naming 16."""
    from hbpsych_utils.core.config import ProfileError
    from hbpsych_utils.pipeline import profiles
    from hbpsych_utils.runner import checks

    smoke = profiles.load_profile("smoke")
    more = profiles.load_profile("smoke", {"grading.repeats": 5, "grading.repeat_sample": 9})
    assert graph.keys_read(smoke, graph.GRADING) == graph.keys_read(more, graph.GRADING)
    assert "repeats" not in graph.parameter_names(graph.GRADING)
    read = graph.keys_read(more, "16_self_consistency")
    assert (read["grading.repeats"], read["grading.repeat_sample"]) == (5, 9)
    params = graph.notebook_parameters(more, "16_self_consistency", "../outputs")
    assert (params["repeats"], params["repeat_sample"]) == (5, 9)
    with pytest.raises(ProfileError, match=r"grading\.repeats: 16_self_consistency reads it "
                       r"only in live mode"):
        checks.load_for_run("default", {"grading.repeats": 3})
