"""The what-if: Table 1 under every scoring choice, recomputed by hand, and its page's pieces.

The acceptance's three combinations are recomputed here from the released matrices read with
the ``csv`` module (independent of the package's readers): one judge alone equals that judge's
column of the released matrix (Table I1's), the median panel is the median of the three
judges' clipped means, and Psych-Hard with the later models is the mean of the three. A live
run's choices are recomputed by hand from a small per-conversation table (refusals, the clip,
the length adjustment), and the run's own choice gives ``scoring.table1`` exactly, intervals
included. The switcher's pieces join back into the vocabulary's HTML exactly, and the commands
name a setting only where the stage that makes Table 1 reads it.
"""

from __future__ import annotations

import csv
import functools
import json
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import grading_live_metrics

from hbpsych_utils import study
from hbpsych_utils.core import escape, sources
from hbpsych_utils.evaluation import length, scoring, whatif
from hbpsych_utils.evaluation.whatif import Choice, Space
from hbpsych_utils.pipeline import graph, metrics, profiles
from hbpsych_utils.reporting import comparability, vocabulary, whatif_commands
from hbpsych_utils.reporting import whatif_page as page
from hbpsych_utils.reporting import whatif_switcher as switcher

GPT41, HAIKU, GEMINI = study.JUDGE_PANEL
TOL = 1e-12
pytestmark = pytest.mark.xdist_group("whatif")
"""With the widget's tests (tests/test_whatif_widget.py), which read the same what-ifs: one
worker computes each once (:func:`paper_parts`, :func:`paper_whatif`, :func:`live_whatif`)."""


class Released:
    """What the what-if reads of a paper run: the registry's released matrices."""

    def fetch(self, artifact: str) -> Path:
        return sources.fetch(artifact)


def by_hand(subset: str) -> dict[tuple[str, str], float]:
    """A released matrix read with the csv module: (candidate, judge) -> clipped mean."""
    path = sources.fetch(study.MATRIX_ARTIFACTS[subset])
    with path.open(newline="", encoding="utf-8") as fh:
        return {(r["candidate"], r["judge"]): float(r["clipped_mean_score"])
                for r in csv.DictReader(fh)}


@functools.cache
def paper_parts() -> tuple[whatif.PaperData, Space, Choice, list[str]]:
    """A paper run's what-if inputs: the released matrices, every choice, the study's own, and
    the study's order (the panel mean of v1's study models). Shared, read only."""
    data = whatif.paper_data(Released())
    space = Space("paper", study.JUDGE_PANEL, ("v1", "v2", "hard"), True)
    reference = whatif.reference_choice(space, "v1", False)
    study_order = scoring.ranking(scoring.paper_panel_means(
        data.per_judge["v1"][data.per_judge["v1"]["in_study"]], study.JUDGE_PANEL))
    return data, space, reference, study_order


@functools.cache
def paper_whatif() -> whatif.WhatIf:
    """``whatif.compute`` of :func:`paper_parts`, once per process. Shared, read only."""
    data, space, reference, study_order = paper_parts()
    return whatif.compute(space, data, reference, study_order)


@pytest.fixture(scope="module")
def paper(mirror: Path) -> whatif.WhatIf:
    return paper_whatif()


def hand_order(values: dict[str, float]) -> list[str]:
    return [c for c, _ in sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))]


def assert_scores(outcome: whatif.Outcome, expected: dict[str, float]) -> None:
    got = outcome.table["score"].to_dict()
    assert set(got) == set(expected)
    assert max(abs(got[c] - expected[c]) for c in expected) <= TOL
    assert outcome.ranking == hand_order(expected)


def test_one_judge_alone_is_that_judges_column_of_the_released_matrix(paper) -> None:
    matrix = by_hand("v1")
    for judge in study.JUDGE_PANEL:
        expected = {c: matrix[(c, judge)] for c in study.CANDIDATES}
        assert_scores(paper.outcome(Choice((judge,), "mean", "v1", False)), expected)
    # the median of one judge is the same computation, so the same table
    alone = Choice((GPT41,), "median", "v1", False)
    assert alone.canonical() == Choice((GPT41,), "mean", "v1", False)
    assert paper.outcome(alone) is paper.outcome(alone.canonical())


def test_the_median_panel_is_the_median_of_the_judges_clipped_means(paper) -> None:
    matrix = by_hand("v1")
    expected = {c: statistics.median(matrix[(c, j)] for j in study.JUDGE_PANEL)
                for c in study.CANDIDATES}
    median = paper.outcome(Choice(study.JUDGE_PANEL, "median", "v1", False))
    assert_scores(median, expected)
    mean = paper.outcome(paper.reference)
    assert median.ranking != mean.ranking  # the median reorders the study's panel
    move = paper.move(Choice(study.JUDGE_PANEL, "median", "v1", False))
    order = hand_order(expected)
    study_order = paper.study_ranking
    assert move.changes == {c: study_order.index(c) - order.index(c) for c in study_order}


def test_hard_with_the_later_models_is_the_mean_of_the_three_judges(paper) -> None:
    matrix = by_hand("hard")
    models = sorted({c for c, _ in matrix})
    assert set(study.LATER_CANDIDATES) <= set(models) and len(models) == 23
    expected = {c: sum(matrix[(c, j)] for j in study.JUDGE_PANEL) / 3 for c in models}
    hard = paper.outcome(Choice(study.JUDGE_PANEL, "mean", "hard", True))
    assert_scores(hard, expected)
    assert set(hard.table.index[~hard.table["in_study"]]) == set(study.LATER_CANDIDATES)
    without = paper.outcome(Choice(study.JUDGE_PANEL, "mean", "hard", False))
    assert set(without.ranking) == set(study.CANDIDATES)


def test_the_runs_own_choice_is_08s_paper_table(paper) -> None:
    data = whatif.paper_data(Released())
    table = scoring.paper_table(data.per_judge["v1"][data.per_judge["v1"]["in_study"]],
                                study.JUDGE_PANEL)
    own = paper.outcome(paper.reference).table
    assert own.index.tolist() == table.index.tolist()
    assert (own["score"] == table["panel_mean"]).all()  # the same arithmetic, bit for bit
    assert (own["n"] == 610).all() and own["ci_low"].isna().all()


def test_paper_space_every_non_empty_panel_and_the_grid(paper) -> None:
    space = paper.space
    assert sorted(map(sorted, space.panels())) == sorted(
        sorted(c) for k in (1, 2, 3) for c in __import__("itertools").combinations(
            study.JUDGE_PANEL, k))
    assert space.panels()[0] == study.JUDGE_PANEL
    assert len(space.choices()) == 7 * 2 * 3 * 2
    assert len(space.distinct()) == (7 + 1) * 3 * 2 == len(paper.outcomes)
    two = Space("live", study.JUDGE_PANEL[:2], ("v1",), False)
    assert two.panels() == [study.JUDGE_PANEL[:2], (GPT41,), (HAIKU,)]
    assert two.combines() == ("mean",)


def test_compare_counts_moves_among_the_models_both_rank() -> None:
    table = pd.DataFrame({"rank": [1, 2, 3, 4], "score": [0.9, 0.8, 0.7, 0.6],
                          "ci_low": np.nan, "ci_high": np.nan, "n": 10,
                          "in_study": [True, False, True, True], "undefined": ""},
                         index=pd.Index(["c", "new", "a", "b"], name="candidate"))
    move = whatif.compare(whatif.Outcome(Choice(("j",)), table), ["a", "b", "c"], top_k=2)
    assert move.changes == {"a": -1, "b": -1, "c": 2}  # "new" above them moves nobody
    assert move.largest_move == 2 and move.moved == ("c",)
    assert move.tau == pytest.approx(-1 / 3)
    assert move.same_top is False  # a, b against c, new
    assert move.reversals is None


def test_tau_is_scipys_kendall_tau_b_bit_for_bit(paper) -> None:
    """The what-if counts τ-b's pairs itself: the very float scipy gives, on every order the
    released matrices' what-if compares and on random orders with and without ties."""
    from scipy import stats

    def scipy_tau(x: list[int], y: list[int]) -> float:
        return float(stats.kendalltau(x, y, variant="b").statistic)

    def same(a: float, b: float) -> bool:
        return np.float64(a).tobytes() == np.float64(b).tobytes()

    reference = paper.study_ranking
    for outcome in paper.outcomes.values():
        common = [c for c in reference if c in set(outcome.ranking)]
        ref_pos = {c: i for i, c in enumerate(common)}
        pos = {c: i for i, c in enumerate(c for c in outcome.ranking if c in set(common))}
        x, y = [ref_pos[c] for c in common], [pos[c] for c in common]
        assert same(paper.move(outcome.choice).tau, scipy_tau(x, y))
    rng = np.random.default_rng(3)
    for size in [*range(2, 30), *([23] * 20)]:
        x = rng.permutation(size).tolist()
        y = rng.permutation(size).tolist()
        ties = rng.integers(0, max(2, size // 3), size).tolist()
        for a, b in ((x, y), (x, ties), (ties, y), (ties, ties[::-1]), (x, x), (x, x[::-1])):
            assert same(whatif.kendall_tau_b(a, b), scipy_tau(a, b)), (a, b)
    assert np.isnan(whatif.kendall_tau_b([1, 1, 1], [0, 1, 2]))
    assert np.isnan(scipy_tau([1, 1, 1], [0, 1, 2]))


def test_summary_and_finding_of_the_released_matrices(paper) -> None:
    s = whatif.summarise(paper)
    assert s.n_choices == 48 and s.n_models == 20 and s.top_k == study.RANKING_TOP_K
    assert s.same_top == sum(m.same_top for m in paper.moves.values())
    assert s.tau_min == min(m.tau for m in paper.moves.values())
    assert s.with_reversal is None  # point estimates


# --------------------------------------------------------------------------------------------
# live runs: a small per-conversation table by hand


JUDGES = ("j1", "j2", "j3")


def live_data() -> whatif.LiveData:
    rng = np.random.default_rng(5)
    rows = []
    for cand in ("m1", "m2", study.LATER_CANDIDATES[0]):
        for p in range(6):
            for j in JUDGES:
                score = float(rng.uniform(-0.3, 1.2))
                rows.append((j, cand, f"p{p}", np.nan if (cand, p, j) == ("m1", 2, "j2")
                             else score))
    scores = pd.DataFrame(rows, columns=list(scoring.SCORE_COLUMNS))
    lengths = {(c, f"p{p}"): 500 * p for c in scores["candidate"].unique() for p in range(6)}
    return whatif.LiveData({"v1": scores}, {"m2": ["p0", "p3"]}, lengths, "healthbench", 200,
                           7, 0.9)


@functools.cache
def live_whatif() -> tuple[whatif.LiveData, whatif.WhatIf]:
    """:func:`live_data` and ``whatif.compute`` of its every choice, the run's own the
    reference and m1, m2 the study's order; once per process. Shared, read only."""
    data = live_data()
    space = Space("live", JUDGES, ("v1",), True)
    return data, whatif.compute(space, data, whatif.reference_choice(space, "v1", False),
                                ["m1", "m2"])


def by_hand_live(data: whatif.LiveData, choice: Choice, cand: str) -> float:
    s = data.scores["v1"]
    s = s[s["candidate"] == cand]
    if choice.refusals_excluded:
        s = s[~s["prompt_id"].isin(data.refused.get(cand, []))]
    wide = s.pivot(index="prompt_id", columns="judge", values="score")[list(choice.judges)]
    wide = wide.dropna()
    per = [float(np.median(r)) if choice.combine == "median" else float(np.mean(r))
           for r in wide.to_numpy()]
    if choice.length_adjusted:
        per = [x - length.PENALTIES["healthbench"] * (data.lengths[(cand, p)] - 2000) / 500
               for x, p in zip(per, wide.index, strict=True)]
    mean = sum(per) / len(per)
    return min(max(mean, 0.0), 1.0) if choice.clipped else mean


def test_live_choices_by_hand() -> None:
    data = live_data()
    space = Space("live", JUDGES, ("v1",), True)
    ref = whatif.reference_choice(space, "v1", False)
    assert ref == Choice(JUDGES, "mean", "v1", True)
    shared, w = live_whatif()  # whatif.compute(space, data, ref, ["m1", "m2"])
    assert w.space == space and w.reference == ref and w.study_ranking == ["m1", "m2"]
    assert shared.scores["v1"].equals(data.scores["v1"])
    assert len(space.choices()) == 7 * 2 * 2 * 2 * 2 * 2
    for choice in [Choice(JUDGES, "median", "v1", True, True, False, True),
                   Choice(("j2",), "mean", "v1", False, False, False, False),
                   Choice(("j1", "j3"), "mean", "v1", True, True, True, True)]:
        table = w.outcome(choice).table
        for cand in table.index:
            assert abs(table.at[cand, "score"] - by_hand_live(data, choice, cand)) <= TOL
        assert (study.LATER_CANDIDATES[0] in table.index) == choice.later
    refused = w.outcome(Choice(JUDGES, "mean", "v1", True, True)).table
    assert refused.at["m2", "n"] == 4 and refused.at["m1", "n"] == 5  # m1's p2 lacks j2


def test_the_live_runs_own_choice_is_08s_table1_intervals_included() -> None:
    data, w = live_whatif()
    own = w.outcome(w.reference).table
    t1 = scoring.table1(data.scores["v1"], judges=list(JUDGES), n_resamples=200, seed=7,
                        level=0.9)
    assert own.index.tolist() == t1.index.tolist()
    for col, other in (("score", "panel_mean"), ("ci_low", "ci_low"), ("ci_high", "ci_high"),
                       ("n", "n_panel")):
        assert (own[col].to_numpy() == t1[other].to_numpy()).all(), col
    assert w.move(w.reference).reversals == 0


# --------------------------------------------------------------------------------------------
# the page's pieces


def test_json_script_cannot_close_its_element() -> None:
    data = {"a": "</script><!-- & \u2028", "b": [1, 0.5, None], "<k>": "x"}
    text = escape.json_script(data)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == data


def test_switcher_pieces_join_into_the_vocabularys_html(paper) -> None:
    computed = page.Computed(paper, whatif.paper_data(Released()), list(study.LATER_CANDIDATES))
    text, rows, classes = (switcher.Interned() for _ in range(3))
    for choice in (paper.reference, Choice(study.JUDGE_PANEL, "mean", "hard", True)):
        table = page.outcome_table(computed, choice)
        got = switcher.table_pieces(table, text, rows, classes)
        assert got["rows"] is not None  # carried as pieces, not whole
        cls = classes.items[got["cls"]]
        joined = "\n".join([text.items[got["pre"]],
                            *(switcher.row_html(rows.items[r], cls[i])
                              for i, r in enumerate(got["rows"])), text.items[got["post"]]])
        assert joined == table.html(style=False)


def test_every_control_setting_has_a_state(paper) -> None:
    computed = page.Computed(paper, whatif.paper_data(Released()), list(study.LATER_CANDIDATES))
    controls = page.dims(paper.space, computed.later)
    assert [d.name for d in controls] == ["judges", "combine", "subset", "later"]
    labels = [w for _, w in controls[0].options]
    assert "GPT-4.1 only" in labels and labels[0] == "All three judges (the run's panel)"
    keys = {page.state_key(c, paper.space, controls) for c in paper.space.choices()}
    every = {"|".join(v) for v in __import__("itertools").product(
        *[[o for o, _ in d.options] for d in controls])}
    assert keys == every


def profile_with(name: str, **sets: object) -> tuple[profiles.Profile, dict]:
    profile = profiles.load_profile(name, sets)
    return profile, {"profile": name, "overrides": sets,
                     "profile_values": profile.model_dump(mode="json")}


def test_commands_only_where_the_stage_that_makes_table1_reads_the_setting(
        paper, tmp_path: Path) -> None:
    profile, manifest = profile_with("default")
    ref, space = paper.reference, paper.space

    def said(choice: Choice) -> str:
        return whatif_commands.command_html(choice, ref, space, profile, manifest, tmp_path,
                                            study.LATER_CANDIDATES)

    assert "run's own scoring" in said(ref)
    later = said(Choice(study.JUDGE_PANEL, "mean", "v1", True))
    assert "As a recorded run" in later and "scores.include_later=true" in later
    alone = said(Choice((GPT41,), "mean", "hard", False))
    assert "No profile setting makes this a run" in alone and "07_grading" in alone
    assert "grading.judges" not in alone.split("as a run:")[-1]  # not offered as a setting
    assert "scores.subsets=[&quot;hard&quot;, &quot;v1&quot;]" in alone
    assert "the median panel" in said(Choice(study.JUDGE_PANEL, "median", "v1", False))

    smoke, smoke_manifest = profile_with("smoke")
    live_space = Space("live", study.JUDGE_PANEL, ("v1", "hard"), False)
    live_ref = whatif.reference_choice(live_space, "v1", False)
    two = whatif_commands.command_html(Choice(study.JUDGE_PANEL[:2], "mean", "v1", True),
                                       live_ref, live_space, smoke, smoke_manifest, tmp_path)
    assert "As a recorded run" in two and "grading.judges=" in two
    clip = whatif_commands.command_html(Choice(study.JUDGE_PANEL, "mean", "v1", True,
                                               clipped=False), live_ref, live_space, smoke,
                                        smoke_manifest, tmp_path)
    assert "the unclipped mean" in clip


def test_the_card_reads_the_judges_settings_from_the_runs_records() -> None:
    judges = [GPT41, GEMINI]
    profile, manifest = profile_with("smoke", **{"grading.max_tokens": 1500})
    grading = {**grading_live_metrics(judges), "temperature": 0.3}
    found = {graph.GRADING: metrics.parse(metrics.GRADING, grading),
             graph.SCORES: metrics.parse(metrics.SCORES, {
                 "mode": "live", "include_later": False, "subset": "v1",
                 "panel_mean": {"m": 0.5}, "ranking": ["m"], "per_judge": {},
                 "point_estimates_only": False, "by_subset": {}, "n_resamples": 300,
                 "ci_level": 0.8})}
    card = comparability.run_card(profile, manifest, found, n=[11, 12])
    assert card is not None
    assert [j.judge for j in card.judges] == judges
    assert card.judges[0].sent == {"temperature": 0.3, "max_tokens": 1500}
    assert card.judges[1].sent["thinking_config"] == {"thinking_budget": 0}
    words = card.rows()
    assert "temperature 0.3" in words["card_judges"]
    assert "at most 1,500 output tokens" in words["card_judges"]
    assert "80% percentile bootstrap" in words["card_interval"]
    assert "300 resamples" in words["card_interval"] and "seed 7" in words["card_interval"]
    assert words["card_n"] == "11 to 12 conversations per model"
    html = card.html()
    assert "GPT-4.1: temperature 0.3" in html and vocabulary.MISSING not in html
    # on chapter 08's page the card says, as each of the chapter's tables does, the chapter
    # and the command that make it again; outside it (landing, figures page) it does not
    command = "bash run_all.sh smoke --only 08_scores"
    chapter = page.in_chapter(card, command)
    assert chapter.count('class="hb-source"') == 1
    assert f'data-stage="{graph.SCORES}"' in chapter and f">{command}</code>" in chapter
    assert vocabulary.current_origin() is None and 'class="hb-source"' not in card.markdown()
    assert page.in_chapter(None, command) == ""


def test_reversals_the_intervals_support_are_counted_by_hand() -> None:
    # the study orders a, b, c; this choice orders c, b, a, and only c's interval lies wholly
    # above another's (a's and b's)
    table = pd.DataFrame({"rank": [1, 2, 3], "score": [0.9, 0.6, 0.5],
                          "ci_low": [0.8, 0.4, 0.3], "ci_high": [0.95, 0.7, 0.6], "n": 10,
                          "in_study": True, "undefined": ""},
                         index=pd.Index(["c", "b", "a"], name="candidate"))
    move = whatif.compare(whatif.Outcome(Choice(("j",)), table), ["a", "b", "c"])
    assert move.reversals == 2 and move.tau == pytest.approx(-1.0)


def test_a_live_runs_robustness_carries_what_its_intervals_support() -> None:
    # j1 and j2 score m2 far above m1, j3 the reverse; the study's order is m1, m2, so a panel
    # without j3 reverses it with intervals apart, and one with j3 alone does not
    rng = np.random.default_rng(11)
    level = {"j1": (0.2, 0.8), "j2": (0.25, 0.75), "j3": (0.9, 0.1)}
    rows = [(j, cand, f"p{p}", level[j][i] + float(rng.uniform(-0.02, 0.02)))
            for i, cand in enumerate(("m1", "m2")) for p in range(8) for j in JUDGES]
    scores = pd.DataFrame(rows, columns=list(scoring.SCORE_COLUMNS))
    lengths = {(c, f"p{p}"): 1000 for c in ("m1", "m2") for p in range(8)}
    data = whatif.LiveData({"v1": scores}, {}, lengths, "healthbench", 200, 7, 0.9)
    space = Space("live", JUDGES, ("v1",), False)
    w = whatif.compute(space, data, whatif.reference_choice(space, "v1", False), ["m1", "m2"])
    frame = whatif.robustness(w)
    assert len(frame) == len(space.distinct())
    assert {"whatif_refusals", "whatif_mean", "whatif_length",
            "supported_reversals"} <= set(frame.columns)
    by_hand = []
    for choice, outcome in w.outcomes.items():
        t = outcome.table
        wins = int(t.at["m2", "ci_low"] > t.at["m1", "ci_high"])  # m2's interval above m1's
        by_hand.append(wins)
        assert w.move(choice).reversals == wins
        if "j3" not in choice.judges:
            assert wins == 1
        if choice.judges == ("j3",):
            assert wins == 0
    assert frame["supported_reversals"].tolist() == by_hand
    s = whatif.summarise(w)
    assert 0 < s.with_reversal == sum(by_hand) < s.n_choices == len(by_hand)


def test_a_judges_settings_in_words() -> None:
    assert comparability.settings_text({}) == "settings not recorded"
    assert comparability.settings_text({"temperature": 0.3, "max_tokens": 2048}) == (
        "temperature 0.3, at most 2,048 output tokens")
    assert comparability.settings_text({
        "thinking_config": {"thinking_budget": 0}, "reasoning_effort": "low",
        "thinking": {"type": "enabled", "budget_tokens": 1024}, "top_p": 0.9}) == (
        "temperature not sent (the provider's default), thinking off (budget 0), reasoning "
        "effort low, extended thinking, budget 1024 tokens, top_p=0.9")


def test_the_figure_counts_each_models_places_by_hand(paper) -> None:
    from hbpsych_utils.reporting import whatif_figure

    counts = whatif_figure.place_counts(paper)
    order = paper.study_ranking
    assert list(counts) == order
    by_hand: dict[str, dict[int, int]] = {c: {} for c in order}
    for outcome in paper.outcomes.values():
        among = [c for c in outcome.ranking if c in order]  # later models move nobody
        for place, c in enumerate(among, start=1):
            by_hand[c][place] = by_hand[c].get(place, 0) + 1
    assert {c: dict(v) for c, v in counts.items()} == by_hand
    assert all(sum(v.values()) == len(paper.moves) for v in counts.values())
    from matplotlib.collections import PathCollection

    fig = whatif_figure.places(paper)
    dots = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    assert [[float(x) for x, _ in d.get_offsets()] for d in dots] == [
        sorted(by_hand[c]) for c in order]  # a dot per place each model takes, row by row
    assert [[float(y) for _, y in d.get_offsets()] for d in dots] == [
        [float(row)] * len(by_hand[c]) for row, c in enumerate(order)]
