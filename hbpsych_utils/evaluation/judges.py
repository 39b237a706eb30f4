"""How the judges of the panel differ: rank agreement, severity and self-preference.

All statistics work on a candidate x judge table of clipped means (the released matrices in
paper mode, or ``scoring.per_judge_means`` of a live run), restricted to candidates every judge
scored (the study's 20 by default).

- Kendall's tau-b between each pair of judges over the candidates (key ``"judgeA|judgeB"``).
- Severity of a judge = its mean over the candidates minus the grand mean of the table.
- Self-preference of a judge = its score for its own model (the candidate that *is* the judge
  model) minus the mean of the other judges' scores for that candidate; "corrected" subtracts
  every judge's severity from its scores first, so a judge that is harsh on everyone is not
  read as modest about itself.

With per-conversation scores (``judge, candidate, prompt_id, score``) the severity and
self-preference get bootstrap intervals: conversations are resampled jointly for every
candidate and judge, and the whole statistic is recomputed per resample.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.evaluation.scoring import ScoringError
from hbpsych_utils.pipeline.metrics import JudgesMetrics


def complete_rows(per_judge: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """The judge columns, only for candidates that every judge scored."""
    missing = [j for j in judges if j not in per_judge.columns]
    if missing:
        raise ScoringError(f"per-judge table: no column for judge(s) {missing}")
    return per_judge[list(judges)].astype(float).dropna(how="any")


def kendall_taus(
    per_judge: pd.DataFrame, judges: Sequence[str]
) -> dict[str, float | None]:
    """Kendall's tau-b between every pair of judges over the candidates (scipy's tau-b).

    A single judge has no pair (an empty dict); a pair whose tau is undefined (fewer than two
    candidates, or a judge that gave every candidate the same score) is ``None``, not NaN, so
    ``metrics.json`` stays valid JSON (:func:`kendall_tau_undefined` says why)."""
    from scipy import stats  # here, not at import: 12 reads 09's taus and needs no scipy

    t = complete_rows(per_judge, judges)
    out: dict[str, float | None] = {}
    for a, b in itertools.combinations(judges, 2):
        if len(t) < 2:  # a correlation on one point (scipy would warn and return NaN)
            out[f"{a}|{b}"] = None
            continue
        res = stats.kendalltau(t[a].to_numpy(), t[b].to_numpy(), variant="b")
        tau = float(res.statistic)
        out[f"{a}|{b}"] = None if np.isnan(tau) else tau
    return out


def kendall_tau_undefined(
    per_judge: pd.DataFrame, judges: Sequence[str]
) -> dict[str, str]:
    """Why each undefined tau of :func:`kendall_taus` is undefined (pair -> reason): a rank
    correlation needs two candidates and two different scores from each judge."""
    return pair_undefined(
        per_judge, judges,
        no_pair=lambda n: f"{n} candidate scored by every judge: no pair of candidates to order",
        no_order=lambda same: " and ".join(study.display_name(j) for j in same)
        + " gave every candidate the same score: no order to compare")


def pair_undefined(table: pd.DataFrame, columns: Sequence[str], *,
                   no_pair: Callable[[int], str],
                   no_order: Callable[[list[str]], str]) -> dict[str, str]:
    """Why the rank correlation of each pair of ``columns`` (``"a|b"``) is undefined, over the
    rows complete in every column: fewer than two such rows (``no_pair(n)`` says so), or a
    column of the pair holding one value only (``no_order(those columns)``). The reasons are
    the caller's words: the same rule serves judges' rankings and repeats' rankings."""
    t = complete_rows(table, list(columns))
    out = {}
    for a, b in itertools.combinations(columns, 2):
        if len(t) < 2:
            out[f"{a}|{b}"] = no_pair(len(t))
            continue
        same = [c for c in (a, b) if t[c].nunique() < 2]
        if same:
            out[f"{a}|{b}"] = no_order(same)
    return out


def grand_mean(per_judge: pd.DataFrame, judges: Sequence[str]) -> float:
    """Mean of every (candidate, judge) score over the candidates all judges scored."""
    return float(complete_rows(per_judge, judges).to_numpy().mean())


def severity(
    per_judge: pd.DataFrame, judges: Sequence[str]
) -> dict[str, float]:
    """Judge mean over candidates minus the grand mean (negative = harsher than the panel)."""
    t = complete_rows(per_judge, judges)
    g = t.to_numpy().mean()
    return {j: float(t[j].mean() - g) for j in judges}


def _own_candidates(
    t: pd.DataFrame, judges: Sequence[str], own: Mapping[str, str]
) -> dict[str, str]:
    out = {}
    for j in judges:
        c = own.get(j)
        if c is None:
            continue
        if c not in t.index:
            raise ScoringError(
                f"self-preference: judge {j}'s own model {c} is not among the candidates scored "
                "by every judge"
            )
        out[j] = c
    return out


def self_preference(
    per_judge: pd.DataFrame,
    judges: Sequence[str],
    *,
    own: Mapping[str, str] = study.JUDGE_OWN_CANDIDATE,
    corrected: bool = False,
) -> dict[str, float]:
    """Judge's score for its own model minus the other judges' mean score for it.

    ``corrected=True`` first subtracts each judge's severity from all its scores. With a single
    judge there are no other judges to compare with, so no judge has a self-preference (an
    empty dict).
    """
    t = complete_rows(per_judge, judges)
    if len(judges) < 2:
        return {}
    if corrected:
        sev = severity(t, judges)
        t = t - pd.Series(sev)
    mine = _own_candidates(t, judges, own)
    out = {}
    for j, c in mine.items():
        others = [k for k in judges if k != j]
        out[j] = float(t.at[c, j] - t.loc[c, others].mean())
    return out


class JudgeFields(TypedDict):
    """09's point values (``JudgesMetrics`` fields)."""

    kendall_tau: dict[str, float | None]
    grand_mean: float | None
    severity: dict[str, float]
    self_preference_raw: dict[str, float | None]
    self_preference_corrected: dict[str, float | None]
    n_candidates: int


def judge_metrics(
    per_judge: pd.DataFrame,
    judges: Sequence[str],
    *,
    own: Mapping[str, str] = study.JUDGE_OWN_CANDIDATE,
) -> JudgeFields:
    """``metrics.json`` fields of 09_judges (point values)."""
    return JudgeFields(
        kendall_tau=kendall_taus(per_judge, judges),
        grand_mean=grand_mean(per_judge, judges),
        severity=severity(per_judge, judges),
        self_preference_raw=dict(self_preference(per_judge, judges, own=own)),
        self_preference_corrected=dict(self_preference(per_judge, judges, own=own,
                                                       corrected=True)),
        n_candidates=len(complete_rows(per_judge, judges)),
    )


def paper_judge_metrics(
    matrix: pd.DataFrame,
    *,
    judges: Sequence[str],
    candidates: Sequence[str] = study.CANDIDATES,
    own: Mapping[str, str] = study.JUDGE_OWN_CANDIDATE,
    source: str = "matrix",
) -> JudgeFields:
    """Judge statistics from a released matrix, over the study's candidates only."""
    pj = scoring.paper_per_judge(
        matrix, judges=judges, study_candidates=candidates, include_later=False, source=source
    )
    return judge_metrics(pj, judges, own=own)


# --------------------------------------------------------------------------------------------
# Bootstrap intervals from per-conversation scores


def _cube(
    scores: pd.DataFrame, candidates: Sequence[str], judges: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(candidate*judge, conversation) score and mask arrays over the union of conversations."""
    scoring.check_scores_table(scores)
    sub = scores[scores["candidate"].isin(candidates) & scores["judge"].isin(judges)]
    pids = sorted(sub["prompt_id"].unique())
    pos = {p: i for i, p in enumerate(pids)}
    cell = {(c, j): k for k, (c, j) in enumerate(itertools.product(candidates, judges))}
    vals = np.zeros((len(cell), len(pids)))
    mask = np.zeros((len(cell), len(pids)))
    ok = sub.dropna(subset=["score"])
    rows = np.array([cell[(c, j)] for c, j in zip(ok["candidate"], ok["judge"], strict=True)],
                    dtype=int)
    cols = np.array([pos[p] for p in ok["prompt_id"]], dtype=int)
    vals[rows, cols] = ok["score"].to_numpy(dtype=float)
    mask[rows, cols] = 1.0
    empty = np.where(mask.sum(axis=1) == 0)[0]
    if empty.size:
        c, j = list(cell)[empty[0]]
        raise ScoringError(f"score table: candidate {c} has no scored conversation from judge {j}")
    return vals, mask, pids


def _stats_from_table(
    t: np.ndarray, judges: Sequence[str], own_idx: Mapping[str, int]
) -> dict[str, np.ndarray]:
    """Severity and self-preference for a stack of candidate x judge tables (..., C, J)."""
    g = t.mean(axis=(-2, -1), keepdims=True)
    sev = t.mean(axis=-2, keepdims=True) - g  # (..., 1, J)
    out: dict[str, np.ndarray] = {}
    tc = t - sev
    for k, j in enumerate(judges):
        out[f"severity:{j}"] = sev[..., 0, k]
        if j in own_idx and len(judges) > 1:  # one judge: no others to compare with
            ci = own_idx[j]
            others = [m for m in range(len(judges)) if m != k]
            out[f"self_preference_raw:{j}"] = t[..., ci, k] - t[..., ci, others].mean(axis=-1)
            out[f"self_preference_corrected:{j}"] = (
                tc[..., ci, k] - tc[..., ci, others].mean(axis=-1)
            )
    return out


def bootstrap_judge_stats(
    scores: pd.DataFrame,
    *,
    judges: Sequence[str],
    candidates: Sequence[str] | None = None,
    own: Mapping[str, str] = study.JUDGE_OWN_CANDIDATE,
    n_resamples: int = study.N_RESAMPLES,
    seed: int,
    level: float,
) -> pd.DataFrame:
    """Severity and self-preference (raw and corrected) with percentile bootstrap intervals.

    Each resample draws conversations with replacement once and applies that draw to every
    (candidate, judge) cell, recomputes each cell's clipped mean over the drawn conversations it
    scored, then the statistics. Returns one row per statistic: ``stat, judge, estimate, low,
    high`` (NaN over one conversation: ``scoring.percentile_interval``). Vectorised: one
    (resamples x conversations) weight matrix times the score matrix.
    """
    cands = list(candidates) if candidates is not None else sorted(scores["candidate"].unique())
    judges = list(judges)
    vals, mask, pids = _cube(scores, cands, judges)
    own_idx = {}
    for j in judges:
        c = own.get(j)
        if c is not None:
            if c not in cands:
                raise ScoringError(
                    f"self-preference: judge {j}'s own model {c} is not among the candidates"
                )
            own_idx[j] = cands.index(c)
    shape = (len(cands), len(judges))
    point = np.clip(vals.sum(axis=1) / mask.sum(axis=1), 0.0, 1.0).reshape(shape)
    rng = np.random.default_rng(seed)
    w = scoring.resample_counts(len(pids), n_resamples, rng).astype(float)  # (B, N)
    num = w @ vals.T  # (B, C*J)
    den = w @ mask.T
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.clip(num / den, 0.0, 1.0).reshape(n_resamples, *shape)
    # A resample that happens to miss every conversation a cell scored leaves that cell
    # undefined; such resamples are dropped (vanishingly rare with hundreds of conversations).
    good = ~np.isnan(boot).any(axis=(1, 2))
    boot = boot[good]
    est = _stats_from_table(point, judges, own_idx)
    dist = _stats_from_table(boot, judges, own_idx)
    rows = []
    for key, value in est.items():
        stat, judge = key.split(":", 1)
        iv = scoring.percentile_interval(dist[key], level, n=len(pids))
        rows.append({"stat": stat, "judge": judge, "estimate": float(value),
                     "low": iv.low, "high": iv.high, "n_resamples": int(good.sum())})
    return pd.DataFrame(rows)


def judge_stats(m: JudgesMetrics) -> pd.DataFrame | dict[str, Any]:
    """What ``figures.judge_bias`` draws from 09's metrics: the bootstrap table when there are
    intervals (live), else the point values themselves (with ``n_candidates``, which the figure
    states)."""
    if m.intervals is not None:
        return pd.DataFrame([row.model_dump() for row in m.intervals])
    return m.model_dump(mode="json")


def own_models_present(
    candidates: Sequence[str], own: Mapping[str, str] = study.JUDGE_OWN_CANDIDATE
) -> dict[str, str]:
    """The judge -> own-model pairs whose model is among ``candidates`` (self-preference is
    defined only for those; a run that did not generate with a judge's model has none for it)."""
    present = set(candidates)
    return {j: c for j, c in own.items() if c in present}
