"""Scores: clipped means, the judge-panel score, bootstrap intervals, paired comparisons, Table 1.

Two modes.

*Per-conversation* (live and smoke runs): input is a long table of per-conversation scores,
columns ``judge, candidate, prompt_id, score`` (NaN = not scored by that judge). A model's score
under one judge is the mean over its scored conversations, clipped to [0, 1] (HealthBench's
rule). The panel score averages, per conversation, the judges that all scored it (equal
weights), then takes the clipped mean. Uncertainty is a seeded conversation-level bootstrap:
1,000 resamples, each resample mean clipped, 95% percentile interval. The reference's
``bootstrap_std`` is computed as well so numbers can be set beside published HealthBench ones.

*Paper mode*: the released matrices hold only per-(candidate, judge) clipped means. The panel
mean there is the plain mean of the three judges' scores: a point estimate, with no interval,
because the per-conversation grades behind it are not available offline.

``evaluation_source`` resolves the mode for a subset and returns an ``EvaluationSource`` (the
per-judge table, n per candidate, per-conversation scores when they exist, and Table 1): the one
place 08_scores, 09_judges, 10_refusals and 12_figures_tables get their scores from.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, field_validator

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core.records import FileRecord, read_csv, read_text, validate
from hbpsych_utils.core.stage import Stage


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
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """Clipped mean of each conversation-level bootstrap resample."""
    x = _as_array(scores)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    w = resample_counts(x.size, n_resamples, rng)
    return np.clip(w @ x / x.size, 0.0, 1.0)


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    n: int


def percentile_interval(
    estimate: float, resampled: np.ndarray, n: int, level: float = study.CI_LEVEL
) -> Interval:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.percentile(resampled, [100 * alpha, 100 * (1 - alpha)])
    return Interval(float(estimate), float(lo), float(hi), int(n))


def bootstrap_ci(
    scores: Iterable[float] | pd.Series | np.ndarray,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator = 0,
    level: float = study.CI_LEVEL,
) -> Interval:
    """Clipped mean with its seeded percentile bootstrap interval."""
    x = _as_array(scores)
    return percentile_interval(
        clipped_mean(x), bootstrap_means(x, n_resamples=n_resamples, seed=seed), x.size, level
    )


def reference_bootstrap_std(
    scores: Iterable[float] | pd.Series | np.ndarray,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int | np.random.Generator = 0,
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


def _check_scores_table(scores: pd.DataFrame, where: str = "score table") -> None:
    missing = set(SCORE_COLUMNS) - set(scores.columns)
    if missing:
        raise ScoringError(f"{where}: missing column(s) {sorted(missing)}")
    dup = scores.duplicated(["judge", "candidate", "prompt_id"])
    if dup.any():
        r = scores[dup].iloc[0]
        raise ScoringError(
            f"{where}: duplicate row for judge {r['judge']}, candidate {r['candidate']}, "
            f"prompt_id {r['prompt_id']}"
        )


def score_matrix(scores: pd.DataFrame, candidate: str) -> pd.DataFrame:
    """One candidate's scores as prompt_id x judge (NaN where a judge did not score)."""
    _check_scores_table(scores)
    sub = scores[scores["candidate"] == candidate]
    return sub.pivot(index="prompt_id", columns="judge", values="score").sort_index()


def panel_conversation_scores(
    scores: pd.DataFrame, candidate: str, judges: Sequence[str] | None = None
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
    _check_scores_table(scores)
    ok = scores.dropna(subset=["score"])
    out = ok.groupby(["candidate", "judge"])["score"].agg(clipped_mean).unstack("judge")
    return out


def table1(
    scores: pd.DataFrame,
    *,
    judges: Sequence[str] | None = None,
    candidates: Sequence[str] | None = None,
    n_resamples: int = study.N_RESAMPLES,
    seed: int = 0,
    level: float = study.CI_LEVEL,
) -> pd.DataFrame:
    """Table 1: per candidate, panel mean with its bootstrap CI, n, and each judge's mean.

    Sorted by panel mean (best first; ties by name), with a 1-based ``rank``. Every candidate's
    bootstrap uses a generator seeded with ``seed``, so a row does not depend on which other
    candidates are in the table.
    """
    _check_scores_table(scores)
    judges = list(judges) if judges is not None else sorted(scores["judge"].unique())
    cands = list(candidates) if candidates is not None else sorted(scores["candidate"].unique())
    pj = per_judge_means(scores)
    rows = []
    for cand in cands:
        panel = panel_conversation_scores(scores, cand, judges)
        ci = bootstrap_ci(panel.to_numpy(), n_resamples=n_resamples, seed=seed, level=level)
        row: dict[str, Any] = {
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
    seed: int | np.random.Generator = 0,
    level: float = study.CI_LEVEL,
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
    iv = percentile_interval(est, d, n, level)
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
    seed: int = 0,
    level: float = study.CI_LEVEL,
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

MATRIX_COLUMNS = ("candidate", "judge", "clipped_mean_score", "n_prompts")


class MatrixCell(FileRecord):
    """One line of a released result matrix: a (candidate, judge) clipped mean and its n."""

    model_config = ConfigDict(strict=False, extra="forbid", frozen=True,
                              str_strip_whitespace=True)
    """Not strict: a CSV cell is text, and its numbers are parsed here."""

    candidate: str = Field(min_length=1)
    judge: str = Field(min_length=1)
    clipped_mean_score: float
    """A clipped mean, so within [0, 1]."""
    n_prompts: int
    """Conversations behind the mean."""

    @field_validator("clipped_mean_score")
    @classmethod
    def _in_unit_interval(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{value} outside [0, 1]")
        return value


def read_matrix(path: Path | str) -> pd.DataFrame:
    """A released result matrix, every line validated (``MatrixCell``: errors name file, line
    and field) and one line per (candidate, judge)."""
    path = Path(path)
    with io.StringIO(read_text(path, error=ScoringError, newline="")) as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or tuple(reader.fieldnames) != MATRIX_COLUMNS:
            raise ScoringError(
                f"{path}: header must be {','.join(MATRIX_COLUMNS)}, got {reader.fieldnames}"
            )
        rows = []
        seen: dict[tuple[str, str], int] = {}
        for rec in reader:
            lineno = reader.line_num
            cell = validate(MatrixCell, rec, f"{path}:{lineno}", ScoringError)
            key = (cell.candidate, cell.judge)
            if key in seen:
                raise ScoringError(
                    f"{path}:{lineno}: candidate {key[0]}, judge {key[1]} repeats line {seen[key]}"
                )
            seen[key] = lineno
            rows.append(cell.model_dump())
    if not rows:
        raise ScoringError(f"{path}: no rows")
    return pd.DataFrame(rows, columns=list(MATRIX_COLUMNS))


def matrix_n(matrix: pd.DataFrame) -> pd.Series:
    """Paper mode's n per candidate: the smallest ``n_prompts`` over its judges' cells.

    The released matrices give each cell's conversation count; the panel can rest on no more
    conversations than its least-covered judge.
    """
    missing = [c for c in ("candidate", "n_prompts") if c not in matrix.columns]
    if missing:
        raise ValueError(f"matrix: no column(s) {missing}")
    return matrix.groupby("candidate")["n_prompts"].min().astype(int).rename("n")


def paper_per_judge(
    matrix: pd.DataFrame,
    *,
    judges: Sequence[str] = study.JUDGE_PANEL,
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
    per_judge: pd.DataFrame, judges: Sequence[str] = study.JUDGE_PANEL
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


def paper_table(per_judge: pd.DataFrame, judges: Sequence[str] = study.JUDGE_PANEL) -> pd.DataFrame:
    """Paper-mode Table 1: rank, panel mean (point estimate) and per-judge means."""
    panel = paper_panel_means(per_judge, judges)
    order = ranking(panel)
    out = per_judge.loc[order].copy()
    out.insert(0, "panel_mean", panel.loc[order])
    out.insert(0, "rank", np.arange(1, len(order) + 1))
    return out


def paper_metrics(
    per_judge: pd.DataFrame, judges: Sequence[str] = study.JUDGE_PANEL
) -> dict[str, Any]:
    """``metrics.json`` fields of 08_scores in paper mode (no ci_low/ci_high: not computable)."""
    panel = paper_panel_means(per_judge, judges)
    return {
        "panel_mean": {c: float(v) for c, v in panel.items()},
        "ranking": ranking(panel),
        "per_judge": {
            j: {c: float(v) for c, v in per_judge[j].items()} for j in judges
        },
        "point_estimates_only": True,
    }


# --------------------------------------------------------------------------------------------
# Live mode: from per-conversation scores


def panel_scores_long(scores: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """Per-(candidate, conversation) panel scores, long format: candidate, prompt_id, score."""
    _check_scores_table(scores)
    frames = []
    for cand in sorted(scores["candidate"].unique()):
        s = panel_conversation_scores(scores, cand, judges)
        frames.append(pd.DataFrame({"candidate": cand, "prompt_id": s.index, "score": s.values}))
    if not frames:
        return pd.DataFrame(columns=["candidate", "prompt_id", "score"])
    return pd.concat(frames, ignore_index=True)


def with_reference_std(
    table: pd.DataFrame, scores: pd.DataFrame, judges: Sequence[str], *,
    n_resamples: int = study.N_RESAMPLES, seed: int = 0,
) -> pd.DataFrame:
    """Table 1 plus the reference harness's ``bootstrap_std`` of each panel score."""
    out = table.copy()
    out["bootstrap_std"] = [
        reference_bootstrap_std(panel_conversation_scores(scores, c, judges),
                                n_resamples=n_resamples, seed=seed)
        for c in out.index
    ]
    return out


def live_metrics(table: pd.DataFrame, judges: Sequence[str]) -> dict[str, Any]:
    """``metrics.json`` fields of 08_scores from a Table 1 frame (``table1``)."""
    return {
        "panel_mean": {c: float(v) for c, v in table["panel_mean"].items()},
        "ranking": table.sort_values("rank").index.tolist(),
        "per_judge": {j: {c: float(v) for c, v in table[j].items() if pd.notna(v)}
                      for j in judges},
        "ci_low": {c: float(v) for c, v in table["ci_low"].items()},
        "ci_high": {c: float(v) for c, v in table["ci_high"].items()},
        "n_panel": {c: int(v) for c, v in table["n_panel"].items()},
        "point_estimates_only": False,
    }


def read_scores(path: Path | str) -> pd.DataFrame:
    """``scores.csv`` as 07_grading wrote it (``grading.scores_from_verdicts``): one row per
    (judge, candidate, conversation), ids as text, an empty score as NaN (unscored)."""
    ids = {"judge": str, "candidate": str, "prompt_id": str}
    scores = read_csv(path, error=ScoringError, dtype=ids, keep_default_na=False,
                      na_values={"score": [""], "status": [""]})
    _check_scores_table(scores, where=str(path))
    return scores


def read_table1(path: Path | str) -> pd.DataFrame:
    """A ``table1_<subset>.csv`` as 08_scores wrote it (:meth:`EvaluationSource.table1`, indexed
    by candidate), so a later stage shows 08's numbers, not a second computation of them."""
    table = read_csv(path, error=ScoringError, dtype={"candidate": str}, keep_default_na=False,
                     na_values=[""])
    if "candidate" not in table.columns:
        raise ScoringError(f"{path}: no 'candidate' column (expected 08_scores' Table 1)")
    return table.set_index("candidate")


# --------------------------------------------------------------------------------------------
# Evaluation sources: what a subset's scores come from, in either mode

EvaluationMode = Literal["paper", "live"]


@dataclass(frozen=True)
class EvaluationSource:
    """One subset's scores as the analysis stages (08, 09, 10, 12) read them.

    *Paper mode*: the released matrix, i.e. per-(candidate, judge) clipped means only: point
    estimates, ``scores`` is None and no interval can be computed. *Live mode*: 07_grading's
    per-conversation scores restricted to the subset, from which intervals follow. Either way
    ``per_judge`` is the candidate x judge table of clipped means and ``n`` the conversations
    behind each candidate's panel score, so a stage asks the source rather than the mode.
    """

    subset: str
    judges: list[str]
    per_judge: pd.DataFrame
    """candidate x judge clipped means (paper mode adds ``in_study``)."""
    scores: pd.DataFrame | None = None
    """Per-conversation scores (``SCORE_COLUMNS``) in live mode; None in paper mode."""
    matrix: pd.DataFrame | None = None
    """The released matrix in paper mode; None in live mode."""

    @property
    def intervals(self) -> bool:
        """Whether per-conversation scores exist, so bootstrap intervals can be computed."""
        return self.scores is not None

    @cached_property
    def panel_long(self) -> pd.DataFrame | None:
        """Per-(candidate, conversation) panel scores (live mode; None in paper mode)."""
        return None if self.scores is None else panel_scores_long(self.scores, self.judges)

    @property
    def n(self) -> pd.Series:
        """Conversations per candidate: the panel's in live mode, the least-covered judge's
        ``n_prompts`` in paper mode."""
        if self.matrix is not None:
            return matrix_n(self.matrix)
        assert self.panel_long is not None
        return self.panel_long.groupby("candidate").size().rename("n")

    def table1(self, *, n_resamples: int | None, seed: int) -> pd.DataFrame:
        """Table 1 for this source: ``paper_table`` (point estimates) or ``table1`` with
        seeded bootstrap intervals and the reference's ``bootstrap_std`` (live)."""
        if self.scores is None:
            return paper_table(self.per_judge, self.judges)
        if n_resamples is None:
            raise ScoringError(f"{self.subset}: Table 1 with intervals needs n_resamples")
        t1 = table1(self.scores, judges=self.judges, n_resamples=n_resamples, seed=seed)
        return with_reference_std(t1, self.scores, self.judges, n_resamples=n_resamples,
                                  seed=seed)

    def metrics(self, table: pd.DataFrame) -> dict[str, Any]:
        """08_scores' ``metrics.json`` fields of a Table 1 frame from ``table1``."""
        if self.scores is None:
            return paper_metrics(table.drop(columns=["rank", "panel_mean"]), self.judges)
        return live_metrics(table, self.judges)


def graded_judges(stage: Stage) -> list[str]:
    """The judge panel of this run's 07_grading (its ``metrics.json``), in the panel's order."""
    return list(stage.upstream_metrics("07_grading")["judges"])


def evaluation_source(
    stage: Stage, subset: str, *, mode: EvaluationMode, include_later: bool = False
) -> EvaluationSource | None:
    """The scores of subset ``subset`` (v1, v2, hard) for this run, resolved by mode.

    Paper: the released matrix (fetched through ``stage``, so ``stage.json`` records it), the
    study's candidates (plus the later ones when ``include_later``). Live: 07_grading's
    ``scores.csv`` on the ids 05_subset wrote; None when this run graded none of them.
    """
    if mode == "paper":
        artifact = study.MATRIX_ARTIFACTS[subset]
        matrix = read_matrix(stage.fetch(artifact))
        per_judge = paper_per_judge(matrix, include_later=include_later, source=artifact)
        return EvaluationSource(subset, list(study.JUDGE_PANEL), per_judge, matrix=matrix)
    scores = read_scores(stage.upstream("07_grading", "scores.csv"))
    scores = scores[scores["prompt_id"].isin(subset_files.stage_ids(stage, subset))]
    if scores.empty:
        return None
    judges = graded_judges(stage)
    return EvaluationSource(subset, judges, per_judge_means(scores)[judges], scores=scores)
