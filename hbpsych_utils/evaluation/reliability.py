"""How reliable is a model: worst-at-k over several replies per conversation, and the spread of
the overall score across repeated runs.

Both follow the HealthBench paper (Arora et al., 2025; section 6.4 "Reliability" and section
8.2 "Variability of results"):

- **worst-at-k.** For a conversation with K independent replies, worst-at-k (1 <= k <= K) is the
  mean, over all C(K, k) subsets of k replies, of the subset's lowest score: the unbiased
  estimate of the worst of k calls. A model's worst-at-k is the mean over conversations,
  clipped to [0, 1], as every HealthBench score. Worst-at-1 is the mean of all K scores of a
  conversation; worst-at-K its minimum. Computed here in closed form (:func:`worst_at_k`): with
  the scores sorted ascending, the i-th lowest is the minimum of C(K - i, k - 1) of the subsets,
  so the mean over subsets is ``sum_i C(K - i, k - 1) * x_i / C(K, k)``, the same number as
  enumerating the subsets (a test checks both). Each k gets the study's seeded
  conversation-level bootstrap interval (``scoring.bootstrap_ci``).
- **run spread.** Sample index s of every conversation is one run of the benchmark; each run's
  overall score is the clipped mean over conversations of its replies' scores, and the runs'
  mean, minimum, maximum and standard deviation (numpy's, ddof 0) are reported, as the paper's
  Table 7 does for 16 runs.

Only conversations with a score for every one of the K replies enter (so every k and every run
rests on the same conversations); the others are counted. Deviation: the study grades with a
panel, so beside each judge the panel's score of a reply (the judges' mean, on the replies
every judge scored) is one more scorer.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.evaluation import scoring

WORST_COLUMNS = ("scorer", "candidate", "k", "n", "clipped_mean", "ci_low", "ci_high")
SPREAD_COLUMNS = ("scorer", "candidate", "n", "runs", "mean", "min", "max", "std")


class ReliabilityError(ValueError):
    """Replies that cannot be compared across samples; the message names what is wrong."""


def worst_at_k(scores: Sequence[float] | np.ndarray, k: int) -> float:
    """One conversation's worst-at-k: the mean over every k-subset of its K scores of the
    subset's minimum (closed form, module doc)."""
    x = np.sort(np.asarray(scores, dtype=float))
    n = x.size
    if not 1 <= k <= n:
        raise ReliabilityError(f"worst-at-k: k = {k} with {n} replies (expected 1 <= k <= {n})")
    weights = np.array([comb(n - i, k - 1) for i in range(1, n + 1)], dtype=float)
    return float(weights @ x / comb(n, k))


def complete(samples: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per (scorer, candidate, prompt_id), the scores of every sample as one row (columns: the
    sample indices), keeping the conversations scored in every sample; and how many were left
    out. ``samples`` is long: scorer, candidate, prompt_id, sample, score (NaN = unscored)."""
    if samples.duplicated(["scorer", "candidate", "prompt_id", "sample"]).any():
        r = samples[samples.duplicated(["scorer", "candidate", "prompt_id", "sample"])].iloc[0]
        raise ReliabilityError(f"sample scores: a second score for scorer {r['scorer']}, "
                               f"candidate {r['candidate']}, prompt_id {r['prompt_id']}, "
                               f"sample {r['sample']}")
    grid = samples.pivot(index=["scorer", "candidate", "prompt_id"], columns="sample",
                         values="score").sort_index(axis=1)
    kept = grid.dropna(how="any")
    return kept, len(grid) - len(kept)


def worst_at_k_table(samples: pd.DataFrame, *, n_resamples: int = study.N_RESAMPLES,
                     seed: int, level: float) -> pd.DataFrame:
    """Per (scorer, candidate) and k = 1..K: n conversations, the clipped mean of their
    worst-at-k and its seeded bootstrap interval at ``level``."""
    grid, _ = complete(samples)
    rows = []
    n_samples = grid.shape[1]
    for (scorer, cand), block in grid.groupby(level=["scorer", "candidate"], sort=True):
        values = block.sort_index().to_numpy(float)
        for k in range(1, n_samples + 1):
            per_conv = [worst_at_k(v, k) for v in values]
            ci = scoring.bootstrap_ci(per_conv, n_resamples=n_resamples, seed=seed,
                                      level=level)
            rows.append((scorer, cand, k, ci.n, ci.estimate, ci.low, ci.high))
    return pd.DataFrame(rows, columns=list(WORST_COLUMNS))


def run_spread(samples: pd.DataFrame) -> pd.DataFrame:
    """Per (scorer, candidate): each run's overall score (sample index s: the clipped mean over
    conversations of the s-th replies' scores, in sample order) and their mean, minimum,
    maximum and standard deviation (ddof 0)."""
    grid, _ = complete(samples)
    rows = []
    for (scorer, cand), block in grid.groupby(level=["scorer", "candidate"], sort=True):
        runs = [scoring.clipped_mean(block[s].to_numpy(float)) for s in block.columns]
        arr = np.array(runs)
        rows.append((scorer, cand, len(block), runs, float(arr.mean()), float(arr.min()),
                     float(arr.max()), float(arr.std())))
    return pd.DataFrame(rows, columns=list(SPREAD_COLUMNS))
