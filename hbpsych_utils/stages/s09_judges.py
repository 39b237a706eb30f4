"""09_judges: rank agreement, severity and self-preference of the judge panel on one subset.

Point values come from the subset's candidate x judge table in either mode
(``scoring.evaluation_source``); with per-conversation scores (live) severity and
self-preference also get bootstrap intervals (``judge_intervals.csv``). Writes
``judge_summary.csv`` and ``metrics.json``; 12_figures_tables draws the figure from these
metrics (``read_metrics``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils.core.config import JudgesParams
from hbpsych_utils.evaluation import judges as judge_stats
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "09_judges"


def start(namespace: Mapping[str, Any]) -> StageRun[JudgesParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[JudgesParams]) -> StageResult:
    """Judge statistics of ``params.subset``, with intervals where the source allows."""
    params = run.params
    stage = run.stage
    source = scoring.evaluation_source(stage, params.subset, mode=run.mode)
    if source is None:
        raise scoring.ScoringError(
            f"09_judges: this run graded no conversation of subset {params.subset!r}"
        )
    own = judge_stats.own_models_present(source.per_judge.index)
    metrics: dict[str, Any] = {
        "mode": run.mode, "subset": params.subset,
        **judge_stats.judge_metrics(source.per_judge, source.judges, own=own),
    }
    files: dict[str, pd.DataFrame] = {}
    views: dict[str, Any] = {
        "intervals": "Intervals need per-conversation scores (live mode); the released "
                     "matrices give point values only."}
    if source.scores is not None:
        intervals = judge_stats.bootstrap_judge_stats(
            source.scores, judges=source.judges, own=own, n_resamples=params.n_resamples,
            seed=run.seed)
        files["judge_intervals.csv"] = intervals
        metrics["intervals"] = intervals.to_dict(orient="records")
        views["intervals"] = intervals.style.format(precision=4)
    summary = pd.DataFrame({
        "severity": metrics["severity"],
        "self_preference_raw": pd.Series(metrics["self_preference_raw"], dtype=float),
        "self_preference_corrected": pd.Series(metrics["self_preference_corrected"],
                                               dtype=float),
    }).rename_axis("judge")
    files["judge_summary.csv"] = summary
    views = {"summary": summary.style.format("{:+.4f}", na_rep="–"),
             "kendall_tau": pd.Series(metrics["kendall_tau"], name="Kendall tau").to_frame(),
             **views}
    result = StageResult(run, metrics, tables=files, views=views, findings=findings(metrics))
    return result.write()


def read_metrics(stage: Stage) -> dict[str, Any]:
    """The judge statistics this run's 09_judges wrote (what 12_figures_tables draws)."""
    return stage.upstream_metrics(STAGE)


def judge_stats_table(metrics: Mapping[str, Any]) -> pd.DataFrame | Mapping[str, Any]:
    """What ``figures.judge_bias`` draws from 09's metrics: the bootstrap table when there are
    intervals (live), else the point values themselves."""
    return pd.DataFrame(metrics["intervals"]) if "intervals" in metrics else metrics


def findings(metrics: Mapping[str, Any]) -> list[str]:
    """The sentences of "What we found", from 09's metrics.

    The range of the pairwise Kendall taus, the most lenient and the harshest judge (largest
    and smallest severity) against the grand mean, and each judge's self-preference, raw and
    severity-corrected, where its own model is a candidate. Numbers only: the thresholds that
    turn them into "agree on the order" or "differ in level" are applied in 12_figures_tables.
    """
    sev = metrics["severity"]
    taus = list(metrics["kendall_tau"].values())
    out = []
    if taus:
        out.append(f"Over {metrics['n_candidates']} candidates the judges' rankings agree with "
                   f"Kendall's tau between {min(taus):.2f} and {max(taus):.2f}.")
    else:
        out.append("With a single judge there is no rank agreement to measure.")
    if len(sev) > 1:
        harshest, lenient = min(sev, key=sev.get), max(sev, key=sev.get)
        out.append(f"{lenient} is the most lenient ({sev[lenient]:+.3f} against the grand mean "
                   f"{metrics['grand_mean']:.3f}) and {harshest} the harshest "
                   f"({sev[harshest]:+.3f}).")
    raw, cor = metrics["self_preference_raw"], metrics["self_preference_corrected"]
    if raw:
        out.append("Self-preference, raw: " + ", ".join(f"{j} {v:+.3f}" for j, v in raw.items())
                   + "; after removing each judge's severity: "
                   + ", ".join(f"{j} {v:+.3f}" for j, v in cor.items()) + ".")
    else:
        out.append("No judge's own model is among the candidates, so self-preference is "
                   "undefined.")
    return out
