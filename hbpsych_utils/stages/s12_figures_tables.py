"""12_figures_tables: the paper's figures and Table 1, from what the earlier stages computed.

One source per element, in either mode: the category figure from 05_subset's categories;
Table 1 and the ranking of each subset from the Table 1 08_scores wrote (its numbers, not a
second bootstrap), the heatmap from the same evaluation source 08 used
(``scoring.evaluation_source``, with 08's mode and ``include_later``); the severity and
self-preference figure from 09_judges' metrics. Figures are PNG and SVG, Table 1 is CSV,
Markdown and LaTeX; with ``publish`` they are copied to the top-level ``figures/`` folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core import paths
from hbpsych_utils.core.config import FiguresTablesParams
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.reporting import figures, tables
from hbpsych_utils.stages import base, s09_judges
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "12_figures_tables"


def scores_run(stage: Stage, mode: str) -> dict[str, Any]:
    """08_scores' metrics, checked to be of the same mode as this stage: its Table 1 files are
    the ones this stage publishes."""
    scores = stage.upstream_metrics("08_scores")
    if scores["mode"] != mode:
        raise scoring.ScoringError(
            f"{STAGE} is in {mode!r} mode but 08_scores ran in {scores['mode']!r} mode in "
            f"profile {stage.profile!r}: set figures_tables.mode and scores.mode alike")
    return scores


def start(namespace: Mapping[str, Any]) -> StageRun[FiguresTablesParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[FiguresTablesParams]) -> StageResult:
    """Draw the figures, write Table 1 per subset (08_scores' numbers), publish when asked, and
    state the files."""
    params = run.params
    stage = run.stage
    categories = subset_files.read_categories(stage.upstream("05_subset", "categories_v1.csv"))
    figs = {"fig_categories_v1": figures.category_distribution(
        subset_files.category_counts(categories),
        title=f"{study.SUBSET_TITLES['v1']}: modal reviewer category")}
    scored = scores_run(stage, run.mode)
    sources = {}
    for key in params.subsets:
        source = scoring.evaluation_source(stage, key, mode=run.mode,
                                           include_later=scored.get("include_later", False))
        if source is not None:  # a live run may have graded nothing of a subset
            sources[key] = source
    n_resamples = scored["n_resamples"] if any(s.intervals for s in sources.values()) else None
    table_files: list[Path] = []
    top: dict[str, list[str]] = {}
    for key, source in sources.items():
        title = study.SUBSET_TITLES[key]
        table = scoring.read_table1(stage.upstream("08_scores", f"table1_{key}.csv"))
        top[key] = table.sort_values("rank").index[:3].tolist()
        figs[f"fig_ranking_{key}"] = figures.panel_ranking(table, subset=title)
        figs[f"fig_heatmap_{key}"] = figures.judge_heatmap(source.per_judge, subset=title)
        table_files += tables.write_table1(table, stage.path(f"table1_{key}"), subset=title,
                                           n=source.n, n_resamples=n_resamples)
    judge_metrics = s09_judges.read_metrics(stage)
    figs[f"fig_judges_{judge_metrics['subset']}"] = figures.judge_bias(
        s09_judges.judge_stats_table(judge_metrics),
        subset=study.SUBSET_TITLES[judge_metrics["subset"]])
    names = [p.name for p in table_files] + [f"{stem}.{ext}" for stem in figs
                                             for ext in ("png", "svg")]
    metrics = {"mode": run.mode, "files": sorted(names), "n_files": len(names),
               "published_to_figures": params.publish}
    primary = next(iter(sources))
    result = StageResult(run, metrics, figures=figs,
        views={"categories": figs["fig_categories_v1"],
               "ranking_and_heatmap": [fig for stem, fig in figs.items()
                                       if stem.startswith(("fig_ranking_", "fig_heatmap_"))],
               "judges": figs[f"fig_judges_{judge_metrics['subset']}"],
               "table1": stage.path(f"table1_{primary}.md").read_text(encoding="utf-8")},
        findings=findings(metrics, judges=judge_metrics, top=top[primary],
                          subset_title=study.SUBSET_TITLES[primary],
                          intervals=sources[primary].intervals),
    ).write()
    if params.publish:
        target = paths.figures_dir()
        target.mkdir(exist_ok=True)
        for name in names:
            shutil.copyfile(stage.path(name), target / name)
    return result


def judge_agreement(
    judges: Mapping[str, Any], *, tau_same_order: float = study.TAU_SAME_ORDER,
    level_gap: float = study.SEVERITY_LEVEL_GAP,
) -> str:
    """What the heatmap shows about the judges, as far as 09's metrics support it.

    "agree on the order" only when every pairwise Kendall tau is at least ``tau_same_order``;
    "differ in level" only when the severities span more than ``level_gap`` (score points).
    Otherwise the clause states the lowest tau or the span instead of the claim.
    """
    taus = list(judges["kendall_tau"].values())
    sev = list(judges["severity"].values())
    span = max(sev) - min(sev) if sev else 0.0
    same_order = bool(taus) and min(taus) >= tau_same_order
    differ = span > level_gap
    if not taus:
        return "there is a single judge, so no agreement between judges to report"
    if same_order:
        order = (f"the judges agree on the order (every pairwise Kendall tau ≥ "
                 f"{tau_same_order:g})")
    else:
        order = (f"the judges do not agree on the order (the lowest pairwise Kendall tau is "
                 f"{min(taus):.2f}, below {tau_same_order:g})")
    if differ:
        level = (f"they differ in level (severities span {span:.3f}, more than {level_gap:g}), "
                 "which the severity panel quantifies")
    else:
        level = (f"their levels are within {span:.3f} of each other (not more than "
                 f"{level_gap:g})")
    # "agree on the order" and "differ in level" pull in opposite directions: "but"
    joint = "but" if same_order == differ else "and"
    return f"{order}, {joint} {level}"


def findings(
    metrics: Mapping[str, Any], *, judges: Mapping[str, Any], top: Sequence[str],
    subset_title: str, intervals: bool,
) -> list[str]:
    """The sentences of "What we found": the files written, the top of the primary subset's
    ranking, what the judges agree on (``judge_agreement``, from 09's metrics ``judges``) and
    where the copies are."""
    kinds = sorted({Path(name).suffix for name in metrics["files"]})
    judged = study.SUBSET_TITLES[judges["subset"]]
    where = "" if judged == subset_title else f"on {judged} "
    out = [f"{metrics['n_files']} files written ({', '.join(kinds)}).",
           f"On {subset_title} the panel puts {', '.join(top)} on top"
           + (" (with 95% intervals in the ranking figure)" if intervals
              else " (point estimates)") + "; " + where + judge_agreement(judges) + "."]
    if metrics["published_to_figures"]:
        out.append("Copies are in `figures/`.")
    return out
