"""Where a subset's scores come from, and the files that hold them.

*Paper mode* reads the released result matrices (:func:`read_matrix`): one clipped mean per
(candidate, judge) and its conversation count, so only point estimates. *Live mode* reads this
run's ``07_grading/scores.csv`` (:func:`read_scores`), one score per (judge, candidate,
conversation), from which :mod:`hbpsych_utils.evaluation.scoring` computes intervals.

:func:`evaluation_source` resolves the mode for a subset and returns an
:class:`EvaluationSource` (the per-judge table, n per candidate, per-conversation scores when
they exist, Table 1 and its numbers): the one place the analysis stages (08, 09, 10, 12) get
their scores from. The statistics themselves are in :mod:`~hbpsych_utils.evaluation.scoring`;
this module reads files and chooses between them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, Protocol

import pandas as pd
from pydantic import ConfigDict, Field, field_validator

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core.records import FileRecord, read_csv, read_text, validate
from hbpsych_utils.evaluation.scoring import (
    ScoringError,
    check_scores_table,
    panel_scores_long,
    paper_panel_means,
    paper_per_judge,
    paper_table,
    per_judge_means,
    ranking,
    table1,
    with_reference_std,
)
from hbpsych_utils.pipeline import graph, metrics
from hbpsych_utils.pipeline.metrics import M, StageMetrics, SubsetScores


class RunFiles(subset_files.UpstreamFiles, Protocol):
    """What the score readers take from a run: a stage's folder (``pipeline.stage.Stage``) or
    a finished run (``reporting.publish.RunFolder``)."""

    def upstream_metrics(self, stage: StageMetrics[M]) -> M: ...

    def fetch(self, artifact: str) -> Path: ...

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


def paper_scores(per_judge: pd.DataFrame, judges: Sequence[str]
                 ) -> SubsetScores:
    """A subset's numbers in paper mode (no interval or n: not computable from the matrix)."""
    panel = paper_panel_means(per_judge, judges)
    return SubsetScores(
        panel_mean={c: float(v) for c, v in panel.items()},
        ranking=ranking(panel),
        per_judge={j: {c: float(v) for c, v in per_judge[j].items()} for j in judges},
        point_estimates_only=True,
    )



# --------------------------------------------------------------------------------------------
# Live mode: this run's per-conversation scores

def live_scores(table: pd.DataFrame, judges: Sequence[str]) -> SubsetScores:
    """A subset's numbers from a Table 1 frame with intervals (``scoring.table1``)."""
    return SubsetScores(
        panel_mean={c: float(v) for c, v in table["panel_mean"].items()},
        ranking=table.sort_values("rank").index.tolist(),
        per_judge={j: {c: float(v) for c, v in table[j].items() if pd.notna(v)}
                   for j in judges},
        ci_low={c: float(v) for c, v in table["ci_low"].items()},
        ci_high={c: float(v) for c, v in table["ci_high"].items()},
        n_panel={c: int(v) for c, v in table["n_panel"].items()},
        point_estimates_only=False,
    )


def read_scores(path: Path | str) -> pd.DataFrame:
    """``scores.csv`` as 07_grading wrote it (``grading.scores_from_verdicts``): one row per
    (judge, candidate, conversation), ids as text, an empty score as NaN (unscored)."""
    ids = {"judge": str, "candidate": str, "prompt_id": str}
    scores = read_csv(path, error=ScoringError, dtype=ids, keep_default_na=False,
                      na_values={"score": [""], "status": [""]})
    check_scores_table(scores, where=str(path))
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

    def table1(self, *, n_resamples: int | None, seed: int,
               level: float) -> pd.DataFrame:
        """Table 1 for this source: ``paper_table`` (point estimates) or ``table1`` with
        seeded bootstrap intervals at ``level`` and the reference's ``bootstrap_std``
        (live)."""
        if self.scores is None:
            return paper_table(self.per_judge, self.judges)
        if n_resamples is None:
            raise ScoringError(f"{self.subset}: Table 1 with intervals needs n_resamples")
        t1 = table1(self.scores, judges=self.judges, n_resamples=n_resamples, seed=seed,
                    level=level)
        return with_reference_std(t1, self.scores, self.judges, n_resamples=n_resamples,
                                  seed=seed)

    def numbers(self, table: pd.DataFrame) -> SubsetScores:
        """The numbers of a Table 1 frame from :meth:`table1` (08's ``by_subset`` entry)."""
        if self.scores is None:
            return paper_scores(table.drop(columns=["rank", "panel_mean"]), self.judges)
        return live_scores(table, self.judges)


def graded_judges(stage: RunFiles) -> list[str]:
    """The judge panel of this run's 07_grading (its metrics), in the panel's order."""
    grading = stage.upstream_metrics(metrics.GRADING)
    if not isinstance(grading, metrics.GradingLiveMetrics):
        raise ScoringError(f"{graph.GRADING} ran in paper mode: it graded nothing in this run")
    return list(grading.judges)


def evaluation_source(
    stage: RunFiles, subset: str, *, mode: EvaluationMode, include_later: bool = False
) -> EvaluationSource | None:
    """The scores of subset ``subset`` (v1, v2, hard) for this run, resolved by mode.

    Paper: the released matrix (fetched through ``stage``, so ``stage.json`` records it), the
    study's candidates (plus the later ones when ``include_later``). Live: 07_grading's
    ``scores.csv`` on the ids 05_subset wrote; None when this run graded none of them.
    """
    if mode == "paper":
        artifact = study.MATRIX_ARTIFACTS[subset]
        matrix = read_matrix(stage.fetch(artifact))
        judges = list(study.JUDGE_PANEL)  # the released matrices hold the study's panel
        per_judge = paper_per_judge(matrix, judges=judges, include_later=include_later,
                                    source=artifact)
        return EvaluationSource(subset, judges, per_judge, matrix=matrix)
    scores = read_scores(stage.upstream(graph.GRADING, graph.SCORES_TABLE))
    scores = scores[scores["prompt_id"].isin(subset_files.stage_ids(stage, subset))]
    if scores.empty:
        return None
    judges = graded_judges(stage)
    return EvaluationSource(subset, judges, per_judge_means(scores)[judges], scores=scores)
