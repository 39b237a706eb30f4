"""Score statistics: clipped means, the judge-panel score, bootstrap intervals, paired
comparisons with Holm's correction, Table 1.

*Per-conversation* scores (a live run): a long table with columns ``judge, candidate,
prompt_id, score`` (NaN = not scored by that judge). A model's score under one judge is the mean
over its scored conversations, clipped to [0, 1] (HealthBench's rule). The panel score averages,
per conversation, the judges that all scored it (equal weights), then takes the clipped mean.
Uncertainty is a seeded conversation-level bootstrap: 1,000 resamples, each resample mean
clipped, 95% percentile interval. The reference's ``bootstrap_std`` is computed as well so
numbers can be set beside published HealthBench ones.

*Per-(candidate, judge) means* (the released matrices, paper mode): the panel mean is the plain
mean of the judges' clipped means: a point estimate, with no interval, because the
per-conversation grades behind it are not released.

Reading the files these come from, and choosing between them by mode, is
:mod:`hbpsych_utils.evaluation.score_sources`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from hbpsych_utils import study


class ScoringError(ValueError):
    """Bad score input; the message names the file, record and field."""


# --------------------------------------------------------------------------------------------
# Clipped means and the bootstrap


def _as_array(scores: Iterable[float] | pd.Series | np.ndarray, what: str = "scores") -> np.ndarray:
    x = np.asarray(list(scores) if not isinstance(scores, np.ndarray | pd.Series) else scores,
                   dtype=float)
    if x.ndim != 1:
        raise ScoringError(f"{what}: expected a 1-D sequence of scores")
    if x.size == 0:
        raise ScoringError(f"{what}: no scored conversations")
    if not np.all(np.isfinite(x)):
        raise ScoringError(
            f"{what}: {int((~np.isfinite(x)).sum())} missing or non-finite score(s); drop "
            "unscored conversations before aggregating"
        )
    return x


def clipped_mean(scores: Iterable[float] | pd.Series | np.ndarray) -> float:
    """Mean over conversations, then clipped to [0, 1] (the clip applies to the mean only)."""
    return float(np.clip(np.mean(_as_array(scores)), 0.0, 1.0))


def resample_counts(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, n) matrix: how often each conversation appears in each bootstrap resample.

    Weights instead of index lists let one matrix product evaluate every resample of every
    (candidate, judge) cell at once; the distribution is that of sampling n with replacement.
    """
    if n <= 0:
        raise ScoringError("bootstrap: no conversations to resample")
    idx = rng.integers(0, n, size=(n_resamples, n))
    counts = np.zeros((n_resamples, n), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n_resamples), n), idx.ravel()), 1)
    return counts


def bootstrap_means(
    scores: Iterable[float] | pd.Series | np.ndarray,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator,
) -> np.ndarray:
    """Clipped mean of each conversation-level bootstrap resample."""
    x = _as_array(scores)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    w = resample_counts(x.size, n_resamples, rng)
    return np.clip(w @ x / x.size, 0.0, 1.0)


ONE_CONVERSATION = "one conversation: every resample draws it, so there is no interval"
"""Why a bootstrap over fewer than two conversations has no interval."""
NO_RESAMPLE = "no resample defines the statistic"
"""Why a bootstrap whose every resample is undefined (NaN) has no interval."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval over ``n`` conversations;
    ``low`` and ``high`` are NaN where the interval is undefined, and ``undefined`` says why."""

    estimate: float
    low: float
    high: float
    n: int
    undefined: str | None = None


class Bounds(NamedTuple):
    """A percentile interval's ends; NaN, with the reason in ``undefined``, where there is
    none."""

    low: float
    high: float
    undefined: str | None


def percentile_interval(resampled: Iterable[float] | np.ndarray, level: float, *,
                        n: int) -> Bounds:
    """The percentile bootstrap interval at ``level`` (the study's is ``study.CI_LEVEL``): the
    ``100 * (1 - level) / 2``-th and ``100 * (1 + level) / 2``-th percentiles (numpy's linear
    interpolation) of the resamples' finite values; or NaN ends with the reason where it is
    undefined: ``n``, the conversations (or clusters) the resamples drew from, is below
    two (every resample is the same draw: a zero-width "interval" would claim a certainty
    there is no data for), or no resample is finite. The one place the study turns
    bootstrap resamples into an interval."""
    if not 0.0 < level < 1.0:
        raise ScoringError(f"interval level must lie strictly between 0 and 1, got {level!r}")
    if n < 2:
        return Bounds(math.nan, math.nan, ONE_CONVERSATION)
    values = np.asarray(resampled, dtype=float).ravel()
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return Bounds(math.nan, math.nan, NO_RESAMPLE)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.percentile(finite, [100 * alpha, 100 * (1 - alpha)])
    return Bounds(float(lo), float(hi), None)


def _interval(estimate: float, resampled: np.ndarray, n: int, level: float) -> Interval:
    lo, hi, why = percentile_interval(resampled, level, n=n)
    return Interval(float(estimate), lo, hi, int(n), why)


def bootstrap_ci(
    scores: Iterable[float] | pd.Series | np.ndarray,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator,
    level: float,
) -> Interval:
    """Clipped mean with its seeded percentile bootstrap interval."""
    x = _as_array(scores)
    return _interval(clipped_mean(x), bootstrap_means(x, n_resamples=n_resamples, seed=seed),
                     x.size, level)


def interval_and_std(
    scores: Iterable[float] | pd.Series | np.ndarray,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator,
    level: float,
) -> tuple[Interval, float]:
    """:func:`bootstrap_ci` and :func:`reference_bootstrap_std` from the same resamples (one
    bootstrap, the same numbers as calling both with the same seed)."""
    x = _as_array(scores)
    means = bootstrap_means(x, n_resamples=n_resamples, seed=seed)
    return _interval(clipped_mean(x), means, x.size, level), float(np.std(means))


def reference_bootstrap_std(
    scores: Iterable[float] | pd.Series | np.ndarray,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator,
) -> float:
    """HealthBench's ``bootstrap_std``: population std (ddof=0) of 1,000 clipped resample means.

    Same statistic as simple-evals' ``_compute_clipped_stats(values, "bootstrap_std")``; the
    reference draws from numpy's unseeded global RNG, so its value varies run to run, while
    ours is seeded (equal in distribution, not bit for bit).
    """
    return float(np.std(bootstrap_means(scores, n_resamples=n_resamples, seed=seed)))


# --------------------------------------------------------------------------------------------
# Per-conversation tables

SCORE_COLUMNS = ("judge", "candidate", "prompt_id", "score")


def check_scores_table(scores: pd.DataFrame, where: str = "score table") -> None:
    """The columns of ``SCORE_COLUMNS``, one row per (judge, candidate, conversation) — per
    sample too in a table of several replies per conversation (a ``sample`` column)."""
    missing = set(SCORE_COLUMNS) - set(scores.columns)
    if missing:
        raise ScoringError(f"{where}: missing column(s) {sorted(missing)}")
    sampled = "sample" in scores.columns
    dup = scores.duplicated(["judge", "candidate", "prompt_id", *(["sample"] if sampled else [])])
    if dup.any():
        r = scores[dup].iloc[0]
        raise ScoringError(
            f"{where}: duplicate row for judge {r['judge']}, candidate {r['candidate']}, "
            f"prompt_id {r['prompt_id']}" + (f", sample {r['sample']}" if sampled else "")
        )


def score_matrix(scores: pd.DataFrame, candidate: str) -> pd.DataFrame:
    """One candidate's scores as prompt_id x judge (NaN where a judge did not score)."""
    check_scores_table(scores)
    sub = scores[scores["candidate"] == candidate]
    return sub.pivot(index="prompt_id", columns="judge", values="score").sort_index()


def panel_conversation_scores(
    scores: pd.DataFrame, candidate: str, judges: Sequence[str] | None
) -> pd.Series:
    """Per-conversation panel score: equal-weight mean over the judges, for the conversations
    that every judge of the panel scored (the others are left out, not partially averaged)."""
    wide = score_matrix(scores, candidate)
    judges = list(judges) if judges is not None else sorted(scores["judge"].unique())
    absent = [j for j in judges if j not in wide.columns]
    if absent:
        raise ScoringError(
            f"score table: candidate {candidate} has no scores from judge(s) {absent}"
        )
    wide = wide[judges].dropna(how="any")
    return wide.mean(axis=1).rename("panel_score")


def per_judge_means(scores: pd.DataFrame) -> pd.DataFrame:
    """candidate x judge clipped means over each judge's scored conversations."""
    check_scores_table(scores)
    ok = scores.dropna(subset=["score"])
    out = ok.groupby(["candidate", "judge"])["score"].agg(clipped_mean).unstack("judge")
    return out


def table1(
    scores: pd.DataFrame,
    *,
    judges: Sequence[str] | None,
    candidates: Sequence[str] | None = None,
    n_resamples: int = study.N_RESAMPLES,
    seed: int,
    level: float,
) -> pd.DataFrame:
    """Table 1: per candidate, panel mean with its bootstrap CI, n, and each judge's mean.

    Sorted by panel mean (best first; ties by name), with a 1-based ``rank``. Every candidate's
    bootstrap uses a generator seeded with ``seed``, so a row does not depend on which other
    candidates are in the table.
    """
    check_scores_table(scores)
    judges = list(judges) if judges is not None else sorted(scores["judge"].unique())
    cands = list(candidates) if candidates is not None else sorted(scores["candidate"].unique())
    pj = per_judge_means(scores)
    rows = []
    for cand in cands:
        panel = panel_conversation_scores(scores, cand, judges)
        ci = bootstrap_ci(panel.to_numpy(), n_resamples=n_resamples, seed=seed, level=level)
        row: dict[str, object] = {
            "candidate": cand,
            "panel_mean": ci.estimate,
            "ci_low": ci.low,
            "ci_high": ci.high,
            "n_panel": ci.n,
        }
        for j in judges:
            row[j] = pj.at[cand, j] if (cand in pj.index and j in pj.columns) else np.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    df = df.sort_values(["panel_mean", "candidate"], ascending=[False, True], kind="mergesort")
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df.set_index("candidate")


# --------------------------------------------------------------------------------------------
# Paired differences and Holm–Bonferroni


@dataclass(frozen=True)
class PairedDifference:
    a: str
    b: str
    difference: float
    """clipped_mean(a) - clipped_mean(b) over the conversations both have."""
    low: float
    high: float
    p_value: float
    n: int


def paired_difference(
    a: pd.Series,
    b: pd.Series,
    *,
    names: tuple[str, str] = ("a", "b"),
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator,
    level: float,
) -> PairedDifference:
    """Bootstrap of the paired difference on the conversations both series score.

    Conversations are resampled jointly (the same resample for both), each side's resample mean
    clipped, then differenced. Two-sided p-value from the bootstrap distribution's position
    relative to 0, with the +1 correction so it is never 0:
    ``min(1, 2 * min(#(d* <= 0) + 1, #(d* >= 0) + 1) / (B + 1))``.
    """
    common = a.dropna().index.intersection(b.dropna().index)
    if len(common) == 0:
        raise ScoringError(f"paired difference {names[0]} vs {names[1]}: no common conversations")
    common = common.sort_values()
    xa = a.loc[common].to_numpy(dtype=float)
    xb = b.loc[common].to_numpy(dtype=float)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    w = resample_counts(len(common), n_resamples, rng)
    n = len(common)
    da = np.clip(w @ xa / n, 0.0, 1.0)
    db = np.clip(w @ xb / n, 0.0, 1.0)
    d = da - db
    est = clipped_mean(xa) - clipped_mean(xb)
    iv = _interval(est, d, n, level)
    le = int((d <= 0).sum())
    ge = int((d >= 0).sum())
    p = min(1.0, 2.0 * (min(le, ge) + 1) / (n_resamples + 1))
    return PairedDifference(names[0], names[1], est, iv.low, iv.high, p, n)


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    Sorted ascending, the k-th smallest (k from 0) is multiplied by (m - k), then a running
    maximum keeps the adjusted values monotone, and each is capped at 1.
    """
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise ScoringError(f"Holm–Bonferroni: p-values must lie in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="mergesort")
    adj_sorted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj_sorted
    return out.tolist()


def pairwise_differences(
    per_conversation: Mapping[str, pd.Series] | pd.DataFrame,
    candidates: Sequence[str],
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int,
    level: float,
) -> pd.DataFrame:
    """All pairs among ``candidates`` (in the order given: a before b), with bootstrap CIs,
    raw p-values and Holm–Bonferroni adjusted p-values over this family of pairs.

    ``per_conversation`` maps candidate -> per-conversation score Series indexed by prompt_id
    (e.g. ``panel_conversation_scores``), or is a prompt_id x candidate DataFrame. Each pair
    gets a generator seeded with ``seed``.
    """
    get = per_conversation.__getitem__
    rows = []
    for i, ca in enumerate(candidates):
        for cb in candidates[i + 1 :]:
            r = paired_difference(
                get(ca), get(cb), names=(ca, cb), n_resamples=n_resamples, seed=seed, level=level
            )
            rows.append(
                {"a": r.a, "b": r.b, "difference": r.difference, "ci_low": r.low,
                 "ci_high": r.high, "p_value": r.p_value, "n": r.n}
            )
    df = pd.DataFrame(
        rows, columns=["a", "b", "difference", "ci_low", "ci_high", "p_value", "n"]
    )
    df["p_holm"] = holm_bonferroni(df["p_value"].tolist())
    return df


def top_k(table: pd.DataFrame, k: int) -> list[str]:
    """The k best candidates of a Table 1 frame (index = candidate, sorted by rank)."""
    return table.sort_values("rank").index[:k].tolist()


# --------------------------------------------------------------------------------------------
# Paper mode: the released matrices

def paper_per_judge(
    matrix: pd.DataFrame,
    *,
    judges: Sequence[str],
    study_candidates: Sequence[str] = study.CANDIDATES,
    include_later: bool = False,
    source: str = "matrix",
) -> pd.DataFrame:
    """candidate x judge table of released clipped means.

    By default only the study's candidates; ``include_later=True`` keeps the others too, with
    ``in_study`` False. Every study candidate must have a score from every judge.
    """
    wide = matrix.pivot(index="candidate", columns="judge", values="clipped_mean_score")
    absent_j = [j for j in judges if j not in wide.columns]
    if absent_j:
        raise ScoringError(f"{source}: no scores from judge(s) {absent_j}")
    wide = wide[list(judges)]
    missing = [c for c in study_candidates if c not in wide.index]
    if missing:
        raise ScoringError(f"{source}: study candidate(s) missing: {missing}")
    for c in study_candidates:
        for j in judges:
            if pd.isna(wide.at[c, j]):
                raise ScoringError(f"{source}: candidate {c} has no score from judge {j}")
    keep = list(wide.index) if include_later else list(study_candidates)
    out = wide.loc[keep].copy()
    out.columns.name = None
    out.index.name = "candidate"
    out["in_study"] = [c in set(study_candidates) for c in out.index]
    return out


def paper_panel_means(
    per_judge: pd.DataFrame, judges: Sequence[str]
) -> pd.Series:
    """Point estimate of the panel score: the mean of the judges' released clipped means.

    Not the study's panel score exactly (that averages per conversation, then clips), but equal
    to it whenever every judge scored the same conversations and no clip binds; no interval.
    """
    return per_judge[list(judges)].mean(axis=1).rename("panel_mean")


def ranking(values: pd.Series) -> list[str]:
    """Candidates best first; ties broken by name so the order is deterministic."""
    df = pd.DataFrame({"c": values.index, "v": values.to_numpy()})
    return df.sort_values(["v", "c"], ascending=[False, True], kind="mergesort")["c"].tolist()


def paper_table(per_judge: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """Paper-mode Table 1: rank, panel mean (point estimate) and per-judge means."""
    panel = paper_panel_means(per_judge, judges)
    order = ranking(panel)
    out = per_judge.loc[order].copy()
    out.insert(0, "panel_mean", panel.loc[order])
    out.insert(0, "rank", np.arange(1, len(order) + 1))
    return out


# --------------------------------------------------------------------------------------------
# Live mode: from per-conversation scores


def panel_scores_long(scores: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """Per-(candidate, conversation) panel scores, long format: candidate, prompt_id, score."""
    check_scores_table(scores)
    frames = []
    for cand in sorted(scores["candidate"].unique()):
        s = panel_conversation_scores(scores, cand, judges)
        frames.append(pd.DataFrame({"candidate": cand, "prompt_id": s.index, "score": s.values}))
    if not frames:
        return pd.DataFrame(columns=["candidate", "prompt_id", "score"])
    return pd.concat(frames, ignore_index=True)


def with_reference_std(
    table: pd.DataFrame, scores: pd.DataFrame, judges: Sequence[str], *,
    n_resamples: int = study.N_RESAMPLES, seed: int,
) -> pd.DataFrame:
    """Table 1 plus the reference harness's ``bootstrap_std`` of each panel score."""
    out = table.copy()
    out["bootstrap_std"] = [
        reference_bootstrap_std(panel_conversation_scores(scores, c, judges),
                                n_resamples=n_resamples, seed=seed)
        for c in out.index
    ]
    return out


