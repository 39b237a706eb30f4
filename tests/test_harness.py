"""Harness validation replay from the released GPT-4.1 HealthBench-Hard scores."""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest

from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import harness

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror


def _write(tmp_path, rows):
    p = tmp_path / "scores.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_replay_by_hand(tmp_path):
    p = _write(tmp_path, [
        {"prompt_id": "a", "score": 0.2, "grades": [True, False]},
        {"prompt_id": "b", "score": -0.4, "grades": [False, True]},
        {"prompt_id": "c", "score": 0.5, "grades": [True]},
        {"prompt_id": "d", "score": None, "grades": []},
    ])
    r = harness.replay(harness.read_harness_scores(p), published=0.15, seed=0)
    assert (r.n_lines, r.n_scored) == (4, 3)
    assert r.clipped_mean == pytest.approx(0.1)  # (0.2 - 0.4 + 0.5) / 3
    assert r.delta == pytest.approx(-0.05)
    m = r.metrics()
    assert set(m) == {"n_scored", "clipped_mean", "bootstrap_std", "published", "delta"}
    assert m["published"] == 0.15
    assert r.bootstrap_std > 0


def test_replay_constant_scores_and_clip(tmp_path):
    p = _write(tmp_path, [{"prompt_id": str(i), "score": 1.2, "grades": [True]} for i in range(5)])
    r = harness.replay(harness.read_harness_scores(p), published=1.0, seed=0)
    assert r.clipped_mean == 1.0
    assert r.bootstrap_std == pytest.approx(0.0, abs=1e-12)
    assert r.delta == 0.0


def test_published_must_be_a_fraction(tmp_path):
    p = _write(tmp_path, [{"prompt_id": "a", "score": 0.2, "grades": [True]}])
    with pytest.raises(harness.HarnessError, match="fraction"):
        harness.replay(harness.read_harness_scores(p), published=13.2, seed=0)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"prompt_id": "a", "score": "0.3", "grades": [true]}', "score"),
        ('{"prompt_id": "a", "score": 0.3, "grades": [1, 0]}', "grades[0]"),  # first bad item
        ('{"prompt_id": "a", "score": true, "grades": []}', "score"),  # a bool is not a number
        ('{"prompt_id": "", "score": 0.3, "grades": []}', "prompt_id"),
        ('{"prompt_id": "a", "score": 0.3, "grades": "yes"}', "grades"),
        ('{"score": 0.3, "grades": []}', "prompt_id"),
        # the released replies (results.jsonl)
        ('{"prompt_id": "a", "score": 0.3, "response_text": 7}', "response_text"),
        ('{"prompt_id": "a", "score": "0.3", "response_text": "x"}', "score"),
    ],
)
def test_bad_lines_name_the_field(tmp_path, line, field):
    p = tmp_path / "s.jsonl"
    p.write_text(line + "\n", encoding="utf-8")
    read = (harness.read_harness_replies if "response_text" in line
            else harness.read_harness_scores)
    with pytest.raises(harness.HarnessError, match=rf"s\.jsonl:1: field '{re.escape(field)}'"):
        read(p)


def test_duplicate_prompt_id(tmp_path):
    p = _write(tmp_path, [{"prompt_id": "a", "score": 0.1, "grades": []}] * 2)
    with pytest.raises(harness.HarnessError, match="repeats line 1"):
        harness.read_harness_scores(p)


def test_rubric_check_finds_mismatches(tmp_path):
    conv = Conversation("a", (Message("user", "q"),), (RubricItem("x", 4), RubricItem("y", -2)))
    conv_b = Conversation("b", (Message("user", "q"),), (RubricItem("x", 4),))
    p = _write(tmp_path, [
        {"prompt_id": "a", "score": 0.5, "grades": [True, True]},  # (4 - 2) / 4 = 0.5
        {"prompt_id": "b", "score": 0.9, "grades": [True]},  # should be 1.0
        {"prompt_id": "c", "score": 0.3, "grades": [True]},  # rubric unknown: not checked
    ])
    chk = harness.check_against_rubrics(harness.read_harness_scores(p), [conv, conv_b])
    assert (chk.n_checked, chk.n_exact) == (2, 1)
    assert [(m.prompt_id, m.recomputed) for m in chk.mismatches] == [("b", 1.0)]
    p2 = _write(tmp_path, [{"prompt_id": "a", "score": 0.5, "grades": [True]}])
    chk2 = harness.check_against_rubrics(harness.read_harness_scores(p2), [conv])
    assert "1 grades for 2 rubric criteria" in chk2.mismatches[0].problem


@needs_mirror
def test_replay_of_released_harness_scores():
    from hbpsych_utils.construction import corpus
    from hbpsych_utils.core import sources

    path = sources.fetch("harness_scores")
    lines = harness.read_harness_scores(path)
    r = harness.replay(lines, published=0.0, seed=0)
    assert r.n_scored == 1000
    scores = [json.loads(x)["score"] for x in path.read_text(encoding="utf-8").splitlines()]
    assert r.clipped_mean == pytest.approx(min(1.0, max(0.0, math.fsum(scores) / 1000)), abs=1e-12)
    assert r.delta == r.clipped_mean
    # the bootstrap std of a mean of 1,000 values is about sd / sqrt(1000)
    expected = statistics.pstdev(scores) / math.sqrt(1000)
    assert r.bootstrap_std == pytest.approx(expected, rel=0.15)
    # acceptance: every released score whose rubric is in the partial corpus is reproduced
    convs = corpus.load_corpus(sources.fetch("healthbench_oss")).conversations
    chk = harness.check_against_rubrics(lines, convs)
    assert chk.n_checked == 193
    assert chk.mismatches == []
    assert chk.n_exact == 193  # exact float equality, no tolerance needed


def test_no_published_figure_reports_no_difference(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"prompt_id": "a", "score": 0.5, "grades": [true]}\n'
                 '{"prompt_id": "b", "score": -0.5, "grades": [false]}\n')
    r = harness.replay(harness.read_harness_scores(p), published=None, seed=0)
    # mean of 0.5 and -0.5 is 0.0, clipped stays 0.0
    assert r.clipped_mean == 0.0 and r.published is None and r.delta is None


def test_released_replies_lengths_and_breakdown_by_hand(tmp_path):
    p = _write(tmp_path, [
        {"prompt_id": "a", "score": 0.5, "response_text": "x" * 1500, "grades": []},
        {"prompt_id": "b", "score": 0.2, "response_text": "y" * 4500},
        {"prompt_id": "c", "score": None, "response_text": None},
    ])
    replies = harness.read_harness_replies(p)
    assert [(r.prompt_id, r.chars) for r in replies] == [("a", 1500), ("b", 4500), ("c", None)]
    s = harness.length_summary(replies, "hard")
    assert (s.n, s.penalty, s.variant) == (2, 0.0392, "hard")
    assert s.clipped_mean == pytest.approx(0.35)
    assert s.adjusted_mean == pytest.approx((0.5 + 0.0392 + 0.2 - 5 * 0.0392) / 2)
    assert s.chars.median == 3000
    # grades pair with the rubric only where the corpus holds it and the counts agree
    conv = Conversation("a", (Message("user", "q"),), (RubricItem("x", 4, ("axis:accuracy",)),
                                                       RubricItem("y", -2)))
    lines = [harness.HarnessLine(1, "a", 0.5, (True, True)), harness.HarnessLine(2, "b", 0.2,
                                                                                  (True,)),
             harness.HarnessLine(3, "z", 0.1, (True, True, False))]
    v = harness.released_verdicts(lines, {"a": conv, "z": conv})
    assert v[["prompt_id", "criterion_index", "criteria_met"]].values.tolist() == [
        ["a", 0, True], ["a", 1, True]]


