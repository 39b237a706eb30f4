"""Chapter 14's metrics and outputs, from its steps' typed results (``None`` for what the run
has not)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from hbpsych_utils.evaluation import breakdowns, length
from hbpsych_utils.pipeline.metrics import (
    AnalysesMetrics,
    KScore,
    LengthScore,
    RunSpread,
)
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written
from hbpsych_utils.stages.s14_analyses.files import (
    BY_TAG_FILE,
    LENGTHS_FILE,
    SPREAD_FILE,
    WORST_FILE,
)
from hbpsych_utils.stages.s14_analyses.graded import Inputs
from hbpsych_utils.stages.s14_analyses.length_adjusted import Lengths
from hbpsych_utils.stages.s14_analyses.tags import Breakdown, Figures
from hbpsych_utils.stages.s14_analyses.worst_at_k import Reliability


def _nested(frame: pd.DataFrame, keys: list[str], fields: list[str]) -> dict[str, Any]:
    """Rows of ``frame`` as nested dicts keyed by ``keys`` (the last level holds ``fields``)."""
    out: dict[str, Any] = {}
    for row in frame.to_dict(orient="records"):
        node = out
        for k in keys[:-1]:
            node = node.setdefault(str(row[k]), {})
        node[str(row[keys[-1]])] = {f: row[f] for f in fields}
    return out


def metrics(data: Inputs, tags: Breakdown | None, lens: Lengths | None,
            rel: Reliability | None) -> AnalysesMetrics:
    """14's metrics: without graded replies (paper), the mode only; live, the subset, the
    judges and the panel's overall score, every tag score, the lengths and, with several
    samples, worst-at-k and the run spread (each per scorer and candidate)."""
    graded = data.graded
    if graded is None:
        return AnalysesMetrics(mode=data.mode)
    out: dict[str, Any] = {
        "mode": data.mode, "subset": graded.subset, "judges": graded.judges,
        "n_conversations": int(graded.verdicts["prompt_id"].nunique()),
        "panel_mean": graded.panel_mean, "samples": graded.samples,
        **({} if tags is None else {"ci_level": tags.level})}
    if tags is not None:
        nested = _nested(tags.summary, ["scorer", "candidate", "tag"],
                         ["n", "clipped_mean", "ci_low", "ci_high", "bootstrap_std"])
        out["by_tag"] = {s: {c: {t: breakdowns.tag_score(v) for t, v in by.items()}
                             for c, by in cands.items()} for s, cands in nested.items()}
    if lens is not None:
        nested = _nested(lens.table, ["scorer", "candidate"], list(LengthScore.model_fields))
        out |= {"length_penalty": lens.variant,
                "length_per_500": length.penalty(lens.variant),
                "length": {s: {c: LengthScore(**v) for c, v in by.items()}
                           for s, by in nested.items()}}
    if rel is not None:
        out |= _reliability_metrics(rel)
    return AnalysesMetrics(**out)


def _reliability_metrics(rel: Reliability) -> dict[str, Any]:
    worst: dict[str, dict[str, list[KScore]]] = {}
    for row in rel.worst.to_dict(orient="records"):
        worst.setdefault(row["scorer"], {}).setdefault(row["candidate"], []).append(
            KScore(**{f: row[f] for f in KScore.model_fields}))
    nested = _nested(rel.spread, ["scorer", "candidate"], list(RunSpread.model_fields))
    return {"n_incomplete": rel.n_incomplete, "worst_at_k": worst,
            "run_spread": {s: {c: RunSpread(**v) for c, v in by.items()}
                           for s, by in nested.items()}}


def write(run: StageRun, m: AnalysesMetrics, tags: Breakdown | None, heat: Figures | None,
          lens: Lengths | None, rel: Reliability | None) -> Written:
    """Live: ``by_tag.csv``, ``lengths.csv``, ``worst_at_k.csv`` and ``run_spread.csv`` (with
    several samples) and the figures; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    figs: dict[str, Any] = {}
    if tags is not None:
        tables[BY_TAG_FILE] = tags.summary
    if heat is not None:
        figs |= heat.figures
    if lens is not None:
        tables[LENGTHS_FILE] = lens.table
        figs[lens.stem] = lens.figure
    if rel is not None:
        tables[WORST_FILE] = rel.worst
        tables[SPREAD_FILE] = rel.spread
        figs[rel.stem] = rel.figure
    return base.write(run, m, tables=tables, figures=figs)


