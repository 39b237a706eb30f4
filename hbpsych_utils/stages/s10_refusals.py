"""10_refusals: each model's refused conversations on one subset, and scores without them.

Where the census comes from depends on what the run has: paper mode reads the released anomaly
log (``refusals.refusal_census``), a generating run its own responses (``refusals.refused``).
The sensitivity analysis (panel scores with the refused conversations left out) needs
per-conversation scores, so only a graded run has it. Writes ``refusals.csv``,
``sensitivity.csv`` (live) and ``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core.config import RefusalsParams
from hbpsych_utils.evaluation import generation, refusals, scoring
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "10_refusals"


@dataclass(frozen=True)
class _Census:
    """The refusals of one subset, however found."""

    table: pd.DataFrame
    counts: dict[str, int]
    by_model: dict[str, list[str]]
    n_replaced: int
    sensitivity: pd.DataFrame | None = None


def _from_error_log(stage: Stage, ids: list[str], categories: Mapping[str, str]) -> _Census:
    """Paper mode: the released anomaly log (transient empties set aside)."""
    census = refusals.refusal_census(refusals.read_error_log(stage.fetch("run_errors")),
                                     prompt_ids=ids)
    table = census.refusals.assign(category=lambda d: d.prompt_id.map(categories))
    return _Census(table, census.counts(), census.by_model(), len(census.replaced))


def _from_run(stage: Stage, subset: str, ids: list[str],
              categories: Mapping[str, str]) -> _Census:
    """Live mode: this run's responses, and the sensitivity of its panel scores."""
    responses = generation.read_responses(stage.upstream("06_generation", "responses.jsonl"))
    responses = responses[responses.prompt_id.isin(ids)]
    table = refusals.refused(responses, categories=categories)
    by_model = refusals.refused_by_model(table)
    source = scoring.evaluation_source(stage, subset, mode="live")
    sensitivity = (refusals.sensitivity(source.panel_long, by_model)
                   if source is not None and source.panel_long is not None else None)
    return _Census(table, refusals.refusal_counts(table, sorted(responses.model.unique())),
                   by_model, 0, sensitivity)


def start(namespace: Mapping[str, Any]) -> StageRun[RefusalsParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[RefusalsParams]) -> StageResult:
    """The refusal census of ``params.subset`` and, with per-conversation scores, its
    sensitivity analysis."""
    params = run.params
    stage = run.stage
    ids = subset_files.stage_ids(stage, params.subset)
    categories = subset_files.read_categories(
        stage.upstream("05_subset", "categories_v1.csv")).to_dict()
    census = (_from_error_log(stage, ids, categories) if run.mode == "paper"
              else _from_run(stage, params.subset, ids, categories))
    metrics: dict[str, Any] = {
        "mode": run.mode, "subset": params.subset, "refusals": census.counts,
        "refused_conversations": census.by_model, "n_replaced_transient": census.n_replaced,
    }
    files = {"refusals.csv": census.table}
    views: dict[str, Any] = {
        "refusals": census.table,
        "sensitivity": "The sensitivity analysis needs per-conversation scores (live runs)."}
    if census.sensitivity is not None:
        metrics["sensitivity"] = census.sensitivity.reset_index().to_dict(orient="records")
        files["sensitivity.csv"] = census.sensitivity
        views["sensitivity"] = census.sensitivity.style.format(precision=4)
    result = StageResult(run, metrics, tables=files, views=views, findings=findings(metrics))
    return result.write()


def findings(metrics: Mapping[str, Any]) -> list[str]:
    """The sentences of "What we found", from 10's metrics.

    Who refused how many conversations (or that nobody did); with a sensitivity analysis, how
    far leaving the refused conversations out moves each refusing model's panel score; without
    one (paper mode), how many empty replies were transport failures set aside, and why there
    is no sensitivity analysis.
    """
    subset = metrics["subset"]
    refusing = {m: n for m, n in metrics["refusals"].items() if n}
    out = [f"On {subset}, " + ", ".join(f"**{m}** refused {n} conversation(s)"
                                        for m, n in refusing.items()) + "."
           if refusing else f"No model refused a {subset} conversation."]
    if "sensitivity" in metrics:
        delta = {r["candidate"]: r["delta"] for r in metrics["sensitivity"]}
        moved = [m for m in refusing if m in delta]
        if moved:
            out.append("Excluding the refused conversations moves the panel score by "
                       + ", ".join(f"{m}: {delta[m]:+.4f}" for m in moved) + ".")
    else:
        out.append(f"{metrics['n_replaced_transient']} empty reply(ies) were transport failures, "
                   "re-requested and not counted. The sensitivity analysis needs "
                   "per-conversation scores (live runs).")
    return out
