"""Reply length and the length-adjusted score (``evaluation.length``), against values computed
by hand from the reference's formula."""

from __future__ import annotations

import pandas as pd
import pytest

from hbpsych_utils.evaluation import length, scoring


def test_penalties_are_the_reference_variants():
    assert length.PENALTIES == {"healthbench": 0.0299, "hard": 0.0392, "consensus": 0.0020,
                                "professional": 0.0147}
    assert (length.CENTER, length.PER_CHARS) == (2000, 500)
    with pytest.raises(length.LengthError, match="unknown HealthBench variant 'easy'"):
        length.penalty("easy")


def test_adjusted_scores_by_hand():
    hard = length.penalty("hard")
    # 500 characters below the centre gains one penalty; 2,500 above loses five
    assert length.adjusted(0.5, 1500, hard) == pytest.approx(0.5392)
    assert length.adjusted(0.2, 4500, hard) == pytest.approx(0.004)
    assert length.adjusted(-0.1, 3000, hard) == pytest.approx(-0.1784)
    assert length.adjusted(0.3, 2000, hard) == 0.3
    assert length.adjusted_mean([0.5, 0.2, -0.1], [1500, 4500, 3000], hard) == \
        pytest.approx((0.5392 + 0.004 - 0.1784) / 3)


def test_adjustment_comes_before_the_clip():
    # adjusted per reply: 1.0 + 3 * 0.0392 = 1.1176 (not clipped), then 0.9; mean 1.0088 -> 1.0
    assert length.adjusted_mean([1.0, 0.9], [500, 2000], 0.0392) == 1.0
    # clipping each reply first would give 0.95: the reference does not
    assert length.adjusted_mean([1.0, 0.8], [500, 2000], 0.0392) == pytest.approx(0.9588)


def test_chars_and_distribution():
    assert length.chars("naïve 😀") == 7  # Python's len: code points, as the reference
    assert length.chars(None) is None
    d = length.distribution([100, 200, 300, 400, 500])
    assert d.model_dump() == {"n": 5, "mean": 300.0, "min": 100.0, "p25": 200.0, "median": 300.0,
                 "p75": 400.0, "max": 500.0}
    with pytest.raises(length.LengthError, match="no reply"):
        length.distribution([])


def test_length_table_per_scorer_and_candidate():
    scores = pd.DataFrame({"scorer": ["panel"] * 3, "candidate": ["m"] * 3,
                           "prompt_id": ["c", "a", "b"], "score": [-0.1, 0.5, 0.2]})
    lengths = {("m", "a"): 1500, ("m", "b"): 4500, ("m", "c"): 3000}
    t = length.length_table(scores, lengths, 0.0392, n_resamples=40, seed=3, level=0.95).iloc[0]
    assert t["n"] == 3 and t["mean_chars"] == 3000 and t["median_chars"] == 3000
    assert t["clipped_mean"] == pytest.approx(0.2)
    assert t["adjusted_mean"] == pytest.approx((0.5392 + 0.004 - 0.1784) / 3)
    assert t["adjustment"] == pytest.approx(t["adjusted_mean"] - 0.2)
    ci = scoring.bootstrap_ci([0.5392, 0.004, -0.1784], n_resamples=40, seed=3, level=0.95)
    assert [t["adjusted_ci_low"], t["adjusted_ci_high"]] == pytest.approx([ci.low, ci.high])
    with pytest.raises(length.LengthError, match="candidate m to prompt_id c"):
        length.length_table(scores, {("m", "a"): 1, ("m", "b"): 2}, 0.0392, level=0.95, seed=0)


def test_reordered_pairs_need_both_gaps():
    t = pd.DataFrame({"scorer": ["panel"] * 3, "candidate": ["x", "y", "z"],
                      "clipped_mean": [0.50, 0.45, 0.449], "adjusted_mean": [0.40, 0.47, 0.405]})
    assert length.reordered(t, "panel", ["x", "y", "z"], close=0.01) == [("x", "y")]
