"""Reply length and the length-adjusted HealthBench score: is a score bought with length?

The reference: openai/simple-evals ``healthbench_eval.py`` after its April 2026 change "Add
HealthBench Professional options" (merged 2026-04-22, commit 652c89d), which added
length-adjusted scoring to HealthBench. Per graded reply::

    adjusted = score - penalty * (len(reply) - 2000) / 500

where ``score`` is the reply's unclipped score (met points over positive points), ``len`` the
reply's length in characters as Python counts a string (code points), 2,000 characters the
centre and ``penalty`` the score per 500 characters, set per variant: HealthBench 0.0299,
HealthBench Hard 0.0392, HealthBench Consensus 0.0020, HealthBench Professional 0.0147 (the
values MedARC's parity port of the change lists as OpenAI's defaults; the centre is 2,000 for
all). The order of operations is the reference's: raw score, then the adjustment, then the mean
over conversations clipped to [0, 1] (a reply below 2,000 characters gains, a longer one loses;
nothing is clipped per reply). inspect_evals followed in May 2026.

Here the adjusted score is an option reported beside the raw score, never in its place
(:data:`PENALTIES` names the variants; a chapter's profile chooses one). Deviation: the panel's
adjusted score adjusts the panel's per-conversation score (the judges' mean) by the one reply's
length, which is the same as averaging the judges' adjusted scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.pipeline.metrics import LengthDistribution

CENTER = 2000
"""Characters at which the adjustment is zero."""
PER_CHARS = 500
"""The penalty is per this many characters."""
Variant = Literal["healthbench", "hard", "consensus", "professional"]
PENALTIES: dict[str, float] = {
    "healthbench": 0.0299,
    "hard": 0.0392,
    "consensus": 0.0020,
    "professional": 0.0147,
}
"""Score per 500 characters, by HealthBench variant (module doc). HealthBench-Psych is drawn
from the full HealthBench (``healthbench``); the harness check runs on Hard (``hard``)."""
VARIANT_NAMES: dict[str, str] = {
    "healthbench": "HealthBench", "hard": "HealthBench Hard",
    "consensus": "HealthBench Consensus", "professional": "HealthBench Professional",
}
"""How a variant's penalty is named in sentences and captions."""
LENGTH_COLUMNS = ("scorer", "candidate", "n", "mean_chars", "median_chars", "clipped_mean",
                  "adjusted_mean", "adjusted_ci_low", "adjusted_ci_high", "adjustment")


class LengthError(ValueError):
    """Reply lengths that cannot be used; the message names the record."""


def penalty(variant: str) -> float:
    """The penalty of a variant (:data:`PENALTIES`), or an error naming the variants."""
    try:
        return PENALTIES[variant]
    except KeyError:
        raise LengthError(f"length penalty: unknown HealthBench variant {variant!r} (expected "
                          f"one of: {', '.join(PENALTIES)})") from None


def chars(text: str | None) -> int | None:
    """A reply's length as the reference counts it: ``len`` of the text (code points);
    ``None`` for no reply."""
    return None if text is None else len(text)


def adjusted(score: float | np.ndarray, n_chars: float | np.ndarray,
             per_500: float) -> float | np.ndarray:
    """The length-adjusted score of one reply (or of arrays of them): the unclipped score minus
    ``per_500`` for every 500 characters above 2,000 (plus for every 500 below)."""
    return score - per_500 * ((n_chars - CENTER) / PER_CHARS)


def adjusted_mean(scores: Iterable[float], n_chars: Iterable[float], per_500: float) -> float:
    """The length-adjusted score of a run: the adjusted per-reply scores' mean, clipped to
    [0, 1] (``scoring.clipped_mean``)."""
    s = np.asarray(list(scores), dtype=float)
    c = np.asarray(list(n_chars), dtype=float)
    if s.shape != c.shape:
        raise LengthError(f"{s.size} scores for {c.size} reply lengths: they must pair")
    return scoring.clipped_mean(adjusted(s, c, per_500))


def distribution(n_chars: Iterable[float]) -> LengthDistribution:
    """Reply lengths (characters) summarised: n, mean, min, quartiles, max."""
    c = np.asarray(list(n_chars), dtype=float)
    if c.size == 0:
        raise LengthError("reply lengths: no reply")
    q = np.percentile(c, [0, 25, 50, 75, 100])
    return LengthDistribution(n=int(c.size), mean=float(c.mean()), min=float(q[0]),
                              p25=float(q[1]), median=float(q[2]), p75=float(q[3]),
                              max=float(q[4]))


def length_table(scores: pd.DataFrame, lengths: Mapping[tuple[str, str], int], per_500: float,
                 *, n_resamples: int = study.N_RESAMPLES, seed: int,
                 level: float) -> pd.DataFrame:
    """Per (scorer, candidate) of a long score table (``scorer, candidate, prompt_id, score``):
    n, mean and median reply length, the raw clipped mean, the length-adjusted one with its
    seeded bootstrap interval at ``level`` (``scoring.bootstrap_ci``), and the adjustment
    (adjusted − raw).
    ``lengths`` maps (candidate, prompt_id) to the reply's characters."""
    rows = []
    for (scorer, cand), group in scores.groupby(["scorer", "candidate"], sort=True):
        group = group.sort_values("prompt_id", kind="mergesort")
        try:
            n_chars = np.array([lengths[(cand, pid)] for pid in group["prompt_id"]], float)
        except KeyError as exc:
            raise LengthError(f"reply lengths: no reply of candidate {exc.args[0][0]} to "
                              f"prompt_id {exc.args[0][1]}") from None
        raw = group["score"].to_numpy(float)
        ci = scoring.bootstrap_ci(adjusted(raw, n_chars, per_500), n_resamples=n_resamples,
                                  seed=seed, level=level)
        rows.append((scorer, cand, ci.n, float(n_chars.mean()), float(np.median(n_chars)),
                     scoring.clipped_mean(raw), ci.estimate, ci.low, ci.high,
                     ci.estimate - scoring.clipped_mean(raw)))
    return pd.DataFrame(rows, columns=list(LENGTH_COLUMNS))


def reordered(table: pd.DataFrame, scorer: str, candidates: Sequence[str],
              close: float = study.CLOSE_SCORES) -> list[tuple[str, str]]:
    """Pairs (a, b) of ``candidates`` that the raw score ranks a above b by more than ``close``
    while the length-adjusted score ranks b above a by more than ``close``."""
    t = table[table["scorer"] == scorer].set_index("candidate")
    raw, adj = t["clipped_mean"], t["adjusted_mean"]
    cands = [c for c in candidates if c in t.index]
    return [(a, b) for a in cands for b in cands
            if raw[a] - raw[b] > close and adj[b] - adj[a] > close]
