"""Chapter 15's metrics and outputs, from its steps' typed results (``None`` for what the run
has not)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    CorrectedRate,
    JudgeAccuracy,
    JudgeAccuracyMetrics,
    PairwiseF1,
    SubsetCoverage,
)
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written
from hbpsych_utils.stages.s15_judge_accuracy.corrections import Corrected
from hbpsych_utils.stages.s15_judge_accuracy.files import (
    ACCURACY_FILE,
    CORRECTED_FILE,
    COVERAGE_FILE,
    FIGURE_STEM,
    PAIRWISE_FILE,
    VERDICTS_FILE,
)
from hbpsych_utils.stages.s15_judge_accuracy.physicians import Accuracy, Placement
from hbpsych_utils.stages.s15_judge_accuracy.rows import Inputs
from hbpsych_utils.stages.s15_judge_accuracy.verdicts import Graded


def _rate(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def metrics(data: Inputs, graded: Graded | None, acc: Accuracy | None,
            place: Placement | None, fixed: Corrected | None) -> JudgeAccuracyMetrics:
    """15's metrics: without graded rows (paper), the mode only; live, the rows, the judges,
    every accuracy and placement figure, AC1 among the judges and the corrected rates."""
    if graded is None:
        return JudgeAccuracyMetrics(mode=data.mode)
    out = _graded_metrics(graded)
    if acc is not None:
        out["ci_level"] = acc.level
    out["spend_earlier_attempts_usd"] = graded.paid_earlier
    if acc is not None:
        out["against_majority"] = _accuracy_metrics(acc.table)
        out["against_majority_by_theme"] = _accuracy_metrics(acc.by_theme)
        out["against_majority_by_psych_category"] = _accuracy_metrics(acc.by_psych_category)
    if place is not None:
        out["pairwise"] = _pairwise_metrics(place.table)
        out["pairwise_by_theme"] = _pairwise_metrics(place.by_theme)
        out["pairwise_by_psych_category"] = _pairwise_metrics(place.by_psych_category)
    value, n = ja.judges_ac1(graded.joined) if not graded.empty else (math.nan, 0)
    out |= {"judges_ac1": _rate(value), "n_rows_ac1": n}
    if fixed is not None:
        out["corrected"] = {r.judge: _corrected_metrics(r) for r in fixed.rates}
    return JudgeAccuracyMetrics(**out)


def _graded_metrics(graded: Graded) -> dict[str, Any]:
    """The rows, their coverage, the judges and what grading them cost."""
    src = graded.source
    labels = src.labels
    return {
        "mode": graph.LIVE, "source": src.source, "n_rows": len(src.rows),
        "n_rows_in_file": src.n_in_file,
        "coverage": {str(r["subset"]): SubsetCoverage(
            rows=int(r["rows"]), conversations=int(r["conversations"]),
            subset_conversations=None if pd.isna(r["subset_conversations"])
            else int(r["subset_conversations"]), share=_rate(r["share"]))
            for _, r in src.coverage.iterrows()},
        "n_rows_no_theme": int(labels[ja.THEME].isna().sum()),
        "n_rows_no_psych_category": int(labels[ja.PSYCH_CATEGORY].isna().sum()),
        "n_conversations": int(labels["prompt_id"].nunique()),
        "n_physicians": int(src.physicians["physician"].nunique()), "judges": src.judges,
        "n_excluded": graded.n_excluded, "spend_usd": round(graded.spend_usd, 6)}


def _corrected_metrics(r: ja.CorrectedRate) -> CorrectedRate:
    counts = ("n_verdicts", "n_conversations")
    values = {f: (getattr(r, f) if f in counts else _rate(getattr(r, f)))
              for f in CorrectedRate.model_fields if f != "undefined"}
    return CorrectedRate.model_validate({**values, **_with_reasons(ja.corrected_undefined(r))})


def _with_reasons(cell: Any) -> dict[str, Any]:
    """``undefined`` for a metrics record, only where a value is undefined (so a record whose
    values are all defined is written as before)."""
    reasons = ja.reasons_of(cell)
    return {"undefined": reasons} if reasons else {}


def _accuracy_metrics(table: pd.DataFrame) -> dict[str, dict[str, JudgeAccuracy]]:
    counts = ("n", "tp", "fp", "fn", "tn")
    return {str(j): {str(r["category"]): JudgeAccuracy.model_validate({
        **{f: (int(r[f]) if f in counts else _rate(r[f])) for f in JudgeAccuracy.model_fields
           if f != "undefined"}, **_with_reasons(r.get("undefined"))})
        for _, r in g.iterrows()} for j, g in table.groupby("judge", sort=False)}


def _pairwise_metrics(table: pd.DataFrame) -> dict[str, dict[str, PairwiseF1]]:
    return {str(rater): {str(r["category"]): PairwiseF1(kind=r["kind"], pairs=int(r["pairs"]),
                                                        balanced_f1=_rate(r["balanced_f1"]),
                                                        **_with_reasons(r["undefined"]))
                         for _, r in g.iterrows()}
            for rater, g in table.groupby("rater", sort=False)}


def _as_text(table: pd.DataFrame) -> pd.DataFrame:
    """A table with ``undefined`` reasons as the CSV file writes them: one line per row
    (``field: why; ...``), empty where every value is defined."""
    if "undefined" not in table.columns:
        return table
    return table.assign(undefined=[ja.undefined_text(ja.reasons_of(c))
                                   for c in table["undefined"]])


def write(run: StageRun, m: JudgeAccuracyMetrics, graded: Graded | None, acc: Accuracy | None,
          place: Placement | None, fixed: Corrected | None) -> Written:
    """Live: ``verdicts.csv``, ``coverage.csv``, ``accuracy.csv`` and ``pairwise_f1.csv`` (every
    slicing, named in column ``slicing``), ``corrected_rates.csv`` and the placement figure;
    ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    figs: dict[str, Any] = {}
    if graded is not None:
        tables[VERDICTS_FILE] = graded.verdicts
        tables[COVERAGE_FILE] = graded.source.coverage
    if acc is not None:
        tables[ACCURACY_FILE] = _as_text(pd.concat([acc.table.assign(slicing="category"),
                                                    acc.by_theme, acc.by_psych_category],
                                                   ignore_index=True))
    if place is not None:
        tables[PAIRWISE_FILE] = _as_text(pd.concat([place.table.assign(slicing="category"),
                                                    place.by_theme, place.by_psych_category],
                                                   ignore_index=True))
        figs[FIGURE_STEM] = place.figure
    if fixed is not None:
        tables[CORRECTED_FILE] = fixed.table
    return base.write(run, m, tables=tables, figures=figs)


