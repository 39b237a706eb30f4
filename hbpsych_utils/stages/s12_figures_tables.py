"""Chapter 12, figures and tables: the paper's figures and Table 1, from what earlier stages wrote.

The chapter's calls, in order: :func:`start` (its parameters, checked),
:func:`category_figure` (05_subset's categories), :func:`table1` (for each subset of
``subsets``, the Table 1 08_scores wrote: its numbers, not a second bootstrap, as CSV, Markdown
and LaTeX), :func:`ranking_and_heatmaps` (the panel ranking from that Table 1, the candidate x
judge heatmap from the same evaluation source 08 used), :func:`judge_figure` (severity and
self-preference from 09_judges' metrics), :func:`metrics`, :func:`write` (every file; with
``publish`` also copied to the top-level ``figures/`` folder) and :func:`findings`.

Figures follow the judges the run graded with (one, two or three: titles, axes and legends), and
a subset this run has no Table 1 for (no graded conversation, or not among ``scores.subsets``)
is said in one sentence and left out.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core import paths
from hbpsych_utils.core.config import FiguresTablesParams
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.evaluation import judges as judge_stats
from hbpsych_utils.evaluation.score_sources import (
    EvaluationSource,
    evaluation_source,
    read_table1,
)
from hbpsych_utils.evaluation.scoring import ScoringError
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as stage_metrics
from hbpsych_utils.pipeline.metrics import FiguresTablesMetrics, JudgesMetrics, ScoresMetrics
from hbpsych_utils.reporting import figures, tables
from hbpsych_utils.reporting.display import Findings, Shown
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.FIGURES
CATEGORIES = "fig_categories_v1"
FIGURE_FORMATS = ("png", "svg")


start = base.starter(STAGE, FiguresTablesParams)


def category_figure(run: StageRun[FiguresTablesParams]) -> Figure:
    """The subset's composition: conversations per modal reviewer category (05_subset)."""
    categories = subset_files.read_categories(run.stage.upstream(graph.SUBSET,
                                                                 graph.CATEGORIES_V1))
    return figures.category_distribution(
        subset_files.category_counts(categories),
        title=f"{study.SUBSET_TITLES['v1']}: modal reviewer category", cache=run.figure_cache)


def table1_stem(key: str) -> str:
    """The stem of subset ``key``'s Table 1 files: 08's CSV name without ``.csv``, so 12's
    CSV, Markdown and LaTeX sit beside the same name."""
    return Path(graph.TABLE1.format(subset=key)).stem


@dataclass(frozen=True)
class SubsetTable:
    """One subset's Table 1 as 08_scores wrote it, its evaluation source (for the heatmap, the
    judges and n) and the text of its files."""

    key: str
    table: pd.DataFrame
    source: EvaluationSource
    texts: dict[str, str]


@dataclass(frozen=True, repr=False)
class Table1(Shown):
    """Table 1 of every subset of ``subsets`` that 08_scores wrote one for; the others, each
    with the sentence saying why it is left out."""

    subsets: dict[str, SubsetTable]
    skipped: dict[str, str]

    @property
    def primary(self) -> str | None:
        """The first subset with a Table 1 (what the findings speak of)."""
        return next(iter(self.subsets), None)

    @property
    def top(self) -> list[str]:
        """The primary subset's top three by rank."""
        if self.primary is None:
            return []
        return self.subsets[self.primary].table.sort_values("rank").index[:3].tolist()

    @property
    def intervals(self) -> bool:
        return self.primary is not None and self.subsets[self.primary].source.intervals

    def texts(self) -> dict[str, str]:
        return {name: text for sub in self.subsets.values() for name, text in sub.texts.items()}

    def _repr_markdown_(self) -> str:
        parts = list(self.skipped.values())
        parts += [sub.texts[f"{table1_stem(key)}.md"] for key, sub in self.subsets.items()]
        return "\n\n".join(parts)


def scores_metrics(run: StageRun[FiguresTablesParams]) -> ScoresMetrics:
    """08_scores' metrics, checked to be of the same mode as this stage: its Table 1 files are
    the ones this stage publishes."""
    scores = stage_metrics.parse(graph.SCORES, run.stage.upstream_metrics(graph.SCORES))
    if scores.mode != run.mode:
        raise ScoringError(
            f"{STAGE} is in {run.mode!r} mode but {graph.SCORES} ran in {scores.mode!r} mode in "
            f"profile {run.profile!r}: run both with the same {graph.EVALUATION_MODE} (the "
            "mode of figures_tables and of scores)")
    return scores


def table1(run: StageRun[FiguresTablesParams]) -> Table1:
    """Table 1 of each subset from 08_scores' ``table1_<subset>.csv`` (read back exactly), laid
    out as CSV, Markdown and LaTeX for the judges 08 scored with; a subset without graded
    conversations, or that 08 did not score, is left out with a sentence."""
    scores = scores_metrics(run)
    found: dict[str, tuple[pd.DataFrame, EvaluationSource]] = {}
    skipped = {}
    for key in run.params.subsets:
        title = study.SUBSET_TITLES[key]
        source = evaluation_source(run.stage, key, mode=run.mode or graph.PAPER,
                                   include_later=scores.include_later)
        if source is None:  # a live run may have graded nothing of a subset
            skipped[key] = (f"{title}: this run graded none of its conversations, so it has no "
                            "Table 1 and no figures.")
            continue
        path = run.stage.upstream_optional(graph.SCORES, graph.TABLE1.format(subset=key))
        if path is None:
            skipped[key] = (f"{title}: {graph.SCORES} made no Table 1 for it (it is not among "
                            "scores.subsets), so it has no Table 1 and no figures here.")
            continue
        found[key] = (read_table1(path), source)
    n_resamples = (scores.n_resamples if any(s.intervals for _, s in found.values())
                   else None)
    subsets = {}
    for key, (table, source) in found.items():
        texts = tables.table1_texts(table, table1_stem(key), subset=study.SUBSET_TITLES[key],
                                    judges=source.judges, n=source.n, n_resamples=n_resamples)
        subsets[key] = SubsetTable(key, table, source, texts)
    return Table1(subsets, skipped)


def ranking_and_heatmaps(run: StageRun[FiguresTablesParams], t1: Table1) -> figures.Gallery:
    """Per subset, the panel ranking (from 08's Table 1: intervals where it has them) and the
    candidate x judge heatmap (the evaluation source's per-judge means), for the judges used."""
    out: dict[str, Figure | figures.CachedFigure] = {}
    for key, sub in t1.subsets.items():
        title = study.SUBSET_TITLES[key]
        out[f"fig_ranking_{key}"] = figures.panel_ranking(
            sub.table, subset=title, judge_models=sub.source.judges, cache=run.figure_cache)
        out[f"fig_heatmap_{key}"] = figures.judge_heatmap(
            sub.source.per_judge, subset=title, judges=sub.source.judges,
            cache=run.figure_cache)
    return figures.Gallery(out, notes=tuple(t1.skipped.values()))


@dataclass(frozen=True, repr=False)
class JudgeFigure(Shown):
    """Severity and self-preference of the judges (09_judges' metrics), on 09's subset."""

    judges: JudgesMetrics
    gallery: figures.Gallery

    @property
    def figures(self) -> Mapping[str, Figure]:
        return self.gallery.figures

    def _repr_html_(self) -> str:
        return self.gallery._repr_html_()


def judge_figure(run: StageRun[FiguresTablesParams]) -> JudgeFigure:
    """The judge figure from 09_judges' metrics (intervals when 09 ran live), named after the
    subset 09 measured (``judges.subset``), which may differ from this chapter's subsets."""
    judged = stage_metrics.parse(graph.JUDGES, run.stage.upstream_metrics(graph.JUDGES))
    title = study.SUBSET_TITLES[judged.subset]
    if not judged.severity:
        return JudgeFigure(judged, figures.Gallery({}, notes=(
            f"{graph.JUDGES} had no graded conversation of {title}, so there is no judge "
            "figure.",)))
    fig = figures.judge_bias(judge_stats.judge_stats(judged), subset=title,
                             cache=run.figure_cache)
    return JudgeFigure(judged, figures.Gallery({f"fig_judges_{judged.subset}": fig}))


def _outputs(category: Figure, t1: Table1, panels: figures.Gallery,
             judged: JudgeFigure) -> tuple[dict[str, Figure], dict[str, str]]:
    """Every figure (by file stem) and text file (by file name) the chapter writes."""
    return {CATEGORIES: category, **panels.figures, **judged.figures}, t1.texts()


def metrics(run: StageRun[FiguresTablesParams], category: Figure, t1: Table1,
            panels: figures.Gallery, judged: JudgeFigure) -> FiguresTablesMetrics:
    """12's metrics: the files it writes and whether they are published to ``figures/``."""
    figs, texts = _outputs(category, t1, panels, judged)
    names = [*texts, *(f"{stem}.{ext}" for stem in figs for ext in FIGURE_FORMATS)]
    return FiguresTablesMetrics(mode=run.mode or graph.PAPER, files=sorted(names),
                                n_files=len(names), published_to_figures=run.params.publish)


def write(run: StageRun[FiguresTablesParams], m: FiguresTablesMetrics, category: Figure,
          t1: Table1, panels: figures.Gallery, judged: JudgeFigure) -> Written:
    """Every figure (PNG and SVG) and Table 1 file, then ``metrics.json``; with ``publish`` the
    same files also go to the top-level ``figures/`` folder (the same bytes: figures are saved
    deterministically)."""
    figs, texts = _outputs(category, t1, panels, judged)
    written = base.write(run, m, figures=figs, texts=texts)
    if m.published_to_figures:
        # the stage's own files, where they now are (a hand run's were swapped into place)
        folder = run.stage.dir if run.stage.dir.is_dir() else run.stage.final_dir
        target = paths.figures_dir()
        target.mkdir(exist_ok=True)
        for name in m.files:
            shutil.copyfile(folder / name, target / name)
    return written


def judge_agreement(
    judges: JudgesMetrics, *, tau_same_order: float = study.TAU_SAME_ORDER,
    level_gap: float = study.SEVERITY_LEVEL_GAP,
) -> str:
    """What the heatmap shows about the judges, as far as 09's metrics support it.

    "agree on the order" only when every pairwise Kendall tau is at least ``tau_same_order``;
    "differ in level" only when the severities span more than ``level_gap`` (score points).
    Otherwise the clause states the lowest tau or the span instead of the claim.
    """
    taus = [t for t in judges.kendall_tau.values() if t is not None]
    sev = list(judges.severity.values())
    span = max(sev) - min(sev) if sev else 0.0
    if not judges.kendall_tau:
        return "there is a single judge, so no agreement between judges to report"
    if not taus:
        return ("Kendall's tau is undefined for every pair of judges (a judge gave every "
                "candidate the same score), so their order cannot be compared")
    same_order = min(taus) >= tau_same_order
    differ = span > level_gap
    if len(taus) > 1 and same_order:
        order = (f"the judges agree on the order (every pairwise Kendall tau ≥ "
                 f"{tau_same_order:g})")
    elif len(taus) > 1:
        order = (f"the judges do not agree on the order (the lowest pairwise Kendall tau is "
                 f"{min(taus):.2f}, below {tau_same_order:g})")
    else:  # two judges: one pair
        order = (f"the judges {'agree' if same_order else 'do not agree'} on the order "
                 f"(Kendall tau {taus[0]:.2f}, {'at least' if same_order else 'below'} "
                 f"{tau_same_order:g})")
    if differ:
        level = (f"they differ in level (severities span {span:.3f}, more than {level_gap:g}), "
                 "which the severity panel quantifies")
    else:
        level = (f"their levels are within {span:.3f} of each other (not more than "
                 f"{level_gap:g})")
    # "agree on the order" and "differ in level" pull in opposite directions: "but"
    joint = "but" if same_order == differ else "and"
    return f"{order}, {joint} {level}"


def findings(m: FiguresTablesMetrics, *, judges: JudgesMetrics, top: Sequence[str],
             subset: str | None, intervals: bool) -> Findings:
    """The sentences of "What we found": the files written, the top of the primary subset's
    ranking (``subset``: the first with a Table 1, ``None`` when none has one), what the judges
    agree on (``judge_agreement``, from 09's metrics, naming the subset they were measured on)
    and where the copies are."""
    kinds = sorted({Path(name).suffix for name in m.files})
    judged = study.SUBSET_TITLES[judges.subset]
    about = (f"on {judged} " + judge_agreement(judges) if judges.severity else
             f"{graph.JUDGES} had no graded conversation of {judged}, so nothing is said about "
             "the judges")
    out = [f"{m.n_files} files written ({', '.join(kinds)})."]
    if subset is None:
        out.append("No subset of figures_tables.subsets has a Table 1, so there is no ranking; "
                   + about + ".")
    else:
        out.append(f"On {study.SUBSET_TITLES[subset]} the panel puts "
                   f"{', '.join(md_text(c) for c in top)} on top"
                   + (" (with 95% intervals in the ranking figure)" if intervals
                      else " (point estimates)") + "; " + about + ".")
    if m.published_to_figures:
        out.append("Copies are in `figures/`.")
    return Findings(out)
