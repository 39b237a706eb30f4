"""Paper mode: the released record re-exported, one artifact per candidate of the main
subset's released matrix (23 for v1: the study's 20 and the three evaluated later), point
estimates only, each value checked against the matrix as printed (:func:`check_release`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import hbpsych_utils
from hbpsych_utils import study
from hbpsych_utils.core import records, sources
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.evaluation.score_sources import matrix_n, read_matrix
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import comparability
from hbpsych_utils.reporting.publish_contract import (
    Artifact,
    Metric,
    PublishError,
    RunInfo,
    subset_metric,
)
from hbpsych_utils.reporting.publish_run import (
    HARD,
    RunFolder,
    benchmark,
    compendium,
    judge_info,
    model_info,
    subset_info,
)


@dataclass(frozen=True)
class Released:
    """One released matrix: per (candidate, judge) the clipped mean as read and as printed."""

    key: str
    path: Path
    per_judge: pd.DataFrame
    """candidate x judge (NaN where the matrix has no line)."""
    n: pd.Series
    printed: dict[tuple[str, str], str]


def read_released(key: str, path: Path) -> Released:
    """A released matrix through the package's reader, and its printed values as text."""
    try:
        matrix = read_matrix(path)
    except scoring.ScoringError as exc:
        raise PublishError(str(exc)) from None
    wide = matrix.pivot(index="candidate", columns="judge", values="clipped_mean_score")
    text = records.read_text(path, error=PublishError, newline="")
    printed = {(r["candidate"].strip(), r["judge"].strip()): r["clipped_mean_score"].strip()
               for r in csv.DictReader(io.StringIO(text))}
    return Released(key, Path(path), wide, matrix_n(matrix), printed)


def released_cell(released: Released, candidate: str, judge: str) -> float:
    """One (candidate, judge) value; a candidate the judge did not score is refused."""
    table = released.per_judge
    value = (table.at[candidate, judge]
             if candidate in table.index and judge in table.columns else math.nan)
    if pd.isna(value):
        raise PublishError(
            f"{released.path}: candidate {candidate} has no score from judge {judge} (the "
            f"{study.SUBSET_TITLES[released.key]} matrix); the panel score needs all "
            f"{len(study.JUDGE_PANEL)} judges, so no artifact can carry it")
    return float(value)


@dataclass(frozen=True)
class ReleasedScores:
    """One candidate's released scores, by subset key (the main subset and Psych-Hard)."""

    per_judge: dict[str, dict[str, float]]
    """Subset -> judge -> the released clipped mean."""
    panel: dict[str, float]
    """Subset -> the mean of the judges' values."""
    n: dict[str, int]
    """Subset -> the conversations behind them (the matrix's ``n_prompts``)."""


def paper_scores(main: Released, hard: Released, judges: Sequence[str]
                 ) -> dict[str, ReleasedScores]:
    """Per candidate of the main matrix: each judge's released value on the main subset and
    Psych-Hard, the panel means (the mean of the judges') and the conversations behind them."""
    out = {}
    for cand in sorted(main.per_judge.index):
        per_judge = {r.key: {j: released_cell(r, cand, j) for j in sorted(judges)}
                     for r in (main, hard)}
        out[str(cand)] = ReleasedScores(
            per_judge=per_judge,
            panel={k: sum(v.values()) / len(v) for k, v in per_judge.items()},
            n={r.key: int(r.n[cand]) for r in (main, hard)})
    return out


def check_release(payloads: Mapping[str, Mapping[str, Any]], released: Sequence[Released]
                  ) -> None:
    """Every per-judge value written equals the released matrix's at its printed precision,
    and each panel value is the mean of the judges' (read back from the payloads)."""
    for name, payload in payloads.items():
        cand = payload["model"]["label"]
        got = {m["key"]: m for m in payload["metrics"]}
        per_judge = got["per_judge_scores"]["value_json"]
        for r in released:
            for judge, value in per_judge[r.key].items():
                printed = r.printed.get((cand, judge))
                places = len(printed.partition(".")[2]) if printed else 0
                if printed is None or f"{value:.{places}f}" != printed:
                    raise PublishError(
                        f"{name}: metrics.per_judge_scores.{r.key}.{judge} is {value!r}, the "
                        f"released {r.path.name} prints {printed!r}; nothing was written")
            key = "healthbench_score" if r.key != HARD else "healthbench_hard_score"
            mean = sum(per_judge[r.key].values()) / len(per_judge[r.key])
            if not math.isclose(got[key]["value"], mean, rel_tol=0, abs_tol=1e-12):
                raise PublishError(f"{name}: metrics.{key} is {got[key]['value']!r}, not the "
                                   f"mean of its judges' {mean!r}; nothing was written")


def paper_artifacts(run: RunFolder, key: str) -> tuple[list[Artifact], list[Released]]:
    """The released record of subset ``key`` (and Psych-Hard), one artifact per candidate."""
    main = read_released(key, run.fetch(study.MATRIX_ARTIFACTS[key]))
    hard = read_released(HARD, run.fetch(study.MATRIX_ARTIFACTS[HARD]))
    info = subset_info(run, key)
    spend = records.read_text(run.fetch("run_spend"), error=PublishError).splitlines()
    stamps = sorted(json.loads(line)["ts"] for line in spend if line.strip())
    template = sources.artifact("grader_template").sha256 or ""
    config = {
        "evaluation_mode": graph.PAPER,
        "source": {name: {"url": sources.artifact(name).url,
                          "sha256": sources.artifact(name).sha256} for name in (
            study.MATRIX_ARTIFACTS[key], study.MATRIX_ARTIFACTS[HARD], "run_spend")},
        "run_dates": "the released spend ledger's first and last charge (the release keeps "
                     "no per-candidate dates)",
        "cost_usd": "null: the released ledger charges grading per judge, not per candidate",
        "n_errors": "subset conversations without a score in the released matrix "
                    "(n_items - the least-covered judge's n_prompts)",
        "exported_by": compendium(run),
    }
    out = []
    card = comparability.exported(run.root, run.profile, run.manifest, key)
    for cand, s in paper_scores(main, hard, study.JUDGE_PANEL).items():
        n = s.n[key]
        out.append(Artifact(
            benchmark=benchmark(info), model=model_info(run, cand, None),
            run=RunInfo(harness=study.STUDY_HARNESS, harness_commit=None,
                        adapter_version=hbpsych_utils.__version__, started_at=stamps[0],
                        finished_at=stamps[-1], cost_usd=None, n_completed=n,
                        n_errors=info.n - n,
                        harness_config={**config, "comparability": card([n])}),
            scoring=judge_info(study.JUDGE_PANEL, template, study.STUDY_TEMPERATURE),
            metrics=[subset_metric("healthbench_score", s.panel[key], n),
                     subset_metric("healthbench_hard_score", s.panel[HARD], s.n[HARD]),
                     Metric(key="per_judge_scores", value_json=s.per_judge)],
            items_artifact=None))
    return out, [main, hard]
