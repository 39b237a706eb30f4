"""08_scores: per-judge and panel scores, Table 1 per subset, paired differences (live).

The evaluation source of each subset (``scoring.evaluation_source``) decides what can be said:
the released matrices give point estimates, a graded run gives bootstrap intervals and the
paired differences among the ``top_k`` candidates, Holm-adjusted. The stage writes
``table1_<subset>.csv`` for every subset with scores, ``paired_differences_<subset>.csv`` (live)
and ``metrics.json``; the first subset with scores is the primary one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.config import ScoresParams
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.stages.base import ProfileRun, StageResult

STAGE = "08_scores"


def run(run: ProfileRun, params: ScoresParams) -> StageResult:
    """Score every subset of ``params.subsets`` and write Table 1, the pairs and the metrics."""
    stage = run.stage(STAGE)
    sources: dict[str, scoring.EvaluationSource] = {}
    tables: dict[str, pd.DataFrame] = {}
    skipped = []
    for key in params.subsets:
        source = scoring.evaluation_source(stage, key, mode=params.mode,
                                           include_later=params.include_later)
        if source is None:
            skipped.append(key)
            continue
        sources[key] = source
        tables[key] = source.table1(n_resamples=params.n_resamples, seed=run.seed)
    if not tables:
        raise scoring.ScoringError(
            f"08_scores: no subset of {params.subsets} has scores in profile {run.profile!r}"
        )
    primary = next(iter(tables))
    source = sources[primary]
    metrics: dict[str, Any] = {
        "mode": params.mode, "include_later": params.include_later, "subset": primary,
        **source.metrics(tables[primary]),
        "by_subset": {key: sources[key].metrics(t) for key, t in tables.items()},
    }
    files = {f"table1_{key}.csv": t for key, t in tables.items()}
    pairs = None
    if source.intervals:
        assert source.panel_long is not None
        panel = source.panel_long.pivot(index="prompt_id", columns="candidate", values="score")
        pairs = scoring.pairwise_differences(panel, scoring.top_k(tables[primary], params.top_k),
                                             n_resamples=params.n_resamples, seed=run.seed)
        files[f"paired_differences_{primary}.csv"] = pairs
        metrics.update(
            n_resamples=params.n_resamples,
            bootstrap_std={c: float(v) for c, v in tables[primary]["bootstrap_std"].items()},
            paired_differences=pairs.to_dict(orient="records"),
        )
    note = (f"95% bootstrap intervals, {params.n_resamples} resamples" if source.intervals
            else "point estimates; no intervals in paper mode")
    views: dict[str, Any] = {
        "skipped": " ".join(f"No graded conversation of **{key}** in this run: skipped."
                            for key in skipped),
        "table1": [(f"**{study.SUBSET_TITLES[key]}** ({note})", t.style.format(precision=3))
                   for key, t in tables.items()],
        "paired_differences": (pairs.style.format(precision=4) if pairs is not None
                               else "Paired differences need per-conversation scores "
                                    "(live mode)."),
    }
    result = StageResult(stage, metrics, tables=files, views=views, findings=findings(metrics))
    return result.write()


def findings(
    metrics: Mapping[str, Any], *, close: float = study.CLOSE_SCORES, alpha: float = study.ALPHA
) -> list[str]:
    """The sentences of "What we found", from 08's metrics.

    The ranking of the primary subset (top three, last) and the start of every other subset's;
    with intervals, the leader's interval and how many top-k pairs differ (Holm-adjusted p below
    ``alpha``); with point estimates only, whether the top is close: how many candidates lie
    within ``close`` of the leader (a gap that small is not read as a ranking without
    intervals), or by how much the leader leads when none does.
    """
    rank, pm = metrics["ranking"], metrics["panel_mean"]
    points = bool(metrics["point_estimates_only"])
    kind = "panel's point estimates" if points else "panel scores"
    out = [f"On **{metrics['subset']}**, the {kind} rank **{rank[0]}** first ({pm[rank[0]]:.3f})"
           + "".join(f", then {c} ({pm[c]:.3f})" for c in rank[1:3])
           + f"; {rank[-1]} is last ({pm[rank[-1]]:.3f})."]
    for key, sub in metrics["by_subset"].items():
        if key != metrics["subset"]:
            out.append(f"On **{key}** the order starts {', '.join(sub['ranking'][:3])}.")
    if "paired_differences" in metrics:
        best, pairs = rank[0], metrics["paired_differences"]
        k = len({p["a"] for p in pairs} | {p["b"] for p in pairs})
        n_sig = sum(p["p_holm"] < alpha for p in pairs)
        out.append(f"The 95% interval of {best} is [{metrics['ci_low'][best]:.3f}, "
                   f"{metrics['ci_high'][best]:.3f}] over {metrics['n_panel'][best]} "
                   f"conversations; {n_sig} of {len(pairs)} top-{k} pairs differ after "
                   f"Holm–Bonferroni (adjusted p < {alpha:g}).")
    elif points and len(rank) > 1:
        near = [c for c in rank[1:] if pm[rank[0]] - pm[c] <= close]
        if near:
            out.append(f"The top of the table is close: {len(near)} candidate(s) lie within "
                       f"{close:g} of {rank[0]} ({', '.join(near)}); without per-conversation "
                       "grades these are point estimates, and differences this small should "
                       "not be read as a ranking.")
        else:
            out.append(f"{rank[0]} leads {rank[1]} by {pm[rank[0]] - pm[rank[1]]:.3f}, more "
                       f"than {close:g}; these are point estimates without intervals.")
    return out
