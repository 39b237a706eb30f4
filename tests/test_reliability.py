"""Worst-at-k and the spread across runs (``evaluation.reliability``) on a hand-made grid."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils.evaluation import reliability, scoring

GRID = {"c1": [0.2, 0.8, 0.5], "c2": [1.0, 1.0, 0.4]}
"""Two conversations, three replies each."""


def _long(grid, scorer="panel", cand="m"):
    return pd.DataFrame([(scorer, cand, pid, s, v) for pid, vs in grid.items()
                         for s, v in enumerate(vs)],
                        columns=["scorer", "candidate", "prompt_id", "sample", "score"])


def _brute(scores, k):
    return float(np.mean([min(c) for c in itertools.combinations(scores, k)]))


def test_worst_at_k_is_the_mean_of_subset_minima():
    assert reliability.worst_at_k(GRID["c1"], 1) == pytest.approx(0.5)  # the mean
    assert reliability.worst_at_k(GRID["c1"], 2) == pytest.approx((0.2 + 0.2 + 0.5) / 3)
    assert reliability.worst_at_k(GRID["c1"], 3) == pytest.approx(0.2)  # the minimum
    rng = np.random.default_rng(0)
    for n in range(1, 8):
        x = rng.uniform(-0.5, 1, n)
        for k in range(1, n + 1):
            assert reliability.worst_at_k(x, k) == pytest.approx(_brute(x, k))
    with pytest.raises(reliability.ReliabilityError, match="k = 4 with 3 replies"):
        reliability.worst_at_k(GRID["c1"], 4)


def test_worst_at_k_table_by_hand():
    t = reliability.worst_at_k_table(_long(GRID), n_resamples=30, seed=2, level=0.95).set_index("k")
    assert t["n"].tolist() == [2, 2, 2]
    # worst-at-1: the mean of all samples; worst-at-K: the mean of per-conversation minima
    assert t.loc[1, "clipped_mean"] == pytest.approx((0.5 + 0.8) / 2)
    assert t.loc[2, "clipped_mean"] == pytest.approx((0.3 + 0.6) / 2)
    assert t.loc[3, "clipped_mean"] == pytest.approx((0.2 + 0.4) / 2)
    ci = scoring.bootstrap_ci([0.2, 0.4], n_resamples=30, seed=2, level=0.95)
    assert [t.loc[3, "ci_low"], t.loc[3, "ci_high"]] == pytest.approx([ci.low, ci.high])


def test_incomplete_conversations_are_left_out_and_clipping_applies():
    grid = {**GRID, "c3": [0.9, np.nan, 0.9], "c4": [-0.9, -0.2, -0.4]}
    long = _long(grid)
    kept, dropped = reliability.complete(long)
    assert dropped == 1 and sorted(kept.index.get_level_values("prompt_id")) == ["c1", "c2", "c4"]
    t = reliability.worst_at_k_table(long, n_resamples=30, level=0.95, seed=0).set_index("k")
    assert t.loc[3, "clipped_mean"] == 0.0  # (0.2 + 0.4 - 0.9) / 3 < 0: clipped to 0
    assert t.loc[1, "n"] == 3


def test_run_spread_by_hand():
    row = reliability.run_spread(_long(GRID)).iloc[0]
    assert row["runs"] == pytest.approx([0.6, 0.9, 0.45])
    assert (row["mean"], row["min"], row["max"]) == pytest.approx((0.65, 0.45, 0.9))
    assert row["std"] == pytest.approx(np.sqrt(0.035))


def test_a_repeated_sample_is_an_error():
    long = _long(GRID)
    with pytest.raises(reliability.ReliabilityError, match="prompt_id c1, sample 0"):
        reliability.complete(pd.concat([long, long.iloc[:1]]))
