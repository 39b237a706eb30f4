"""Chapter 12, figures and tables: the paper's figures and Table 1, from what earlier stages wrote.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (the
resolver: 05's categories, 08's metrics, checked to be of this chapter's mode, and its Table 1
of each subset of ``subsets`` with the evaluation source it came from, 09's metrics),
:func:`category_figure` (Figure G1, 05_subset's categories), :func:`table1` (Table 1 in the
paper's layout, every subset of ``subsets`` side by side, and the per-judge Table I1, from the
Table 1 08_scores wrote: its numbers, not a second bootstrap, as CSV, Markdown and LaTeX),
:func:`ranking_and_heatmaps` (Figure G2, the panel ranking from that Table 1, and Figure I1,
the model x judge heatmap from the same evaluation source 08 used; other subsets' as
supplements), :func:`judge_figure` (Figure I2, severity and self-preference from 09_judges'
metrics), :func:`metrics`, :func:`write` (every file and ``catalogue.json``, the objects' labels
and captions the book's figures page shows; with ``publish`` also copied to the top-level
``figures/`` folder) and :func:`findings`. Labels follow the paper (``reporting.catalogue``).

Figures follow the judges the run graded with (one, two or three: titles, axes and legends), and
a subset this run has no Table 1 for (no graded conversation, or not among ``scores.subsets``)
is said in one sentence and left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.construction.tally import NO_CATEGORY_MAJORITY
from hbpsych_utils.core import paths
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.evaluation import judges as judge_stats
from hbpsych_utils.evaluation.score_sources import (
    EvaluationMode,
    EvaluationSource,
    evaluation_source,
    read_table1,
)
from hbpsych_utils.evaluation.scoring import ScoringError
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as stage_metrics
from hbpsych_utils.pipeline.metrics import FiguresTablesMetrics, JudgesMetrics, ScoresMetrics
from hbpsych_utils.reporting import catalogue, figures, figures_folder, tables
from hbpsych_utils.reporting.display import Findings, Note, Together
from hbpsych_utils.reporting.figures import Captioned, Gallery
from hbpsych_utils.reporting.vocabulary import Tables, level_text, panel_name
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.FIGURES
CATEGORIES = "fig_categories_v1"
FIGURE_FORMATS = ("png", "svg")


start = base.starter(STAGE)


def category_figure(categories: pd.Series, *, judges: list[str],
                    cache: Path) -> figures.Captioned:
    """Figure G1, the subset's composition: conversations per modal reviewer category
    (05_subset), labelled as the catalogue labels the run's objects (``judges``: its panel)."""
    counts = subset_files.category_counts(categories)
    title = study.SUBSET_TITLES["v1"]
    fig = figures.category_distribution(counts, title=f"{title}: modal reviewer category",
                                        cache=cache)
    label, heading, _ = catalogue.label([CATEGORIES], judges)[CATEGORIES]
    none = counts.get(NO_CATEGORY_MAJORITY, 0)
    return figures.Captioned(fig, f"{label}. {heading}", (
        f"The {sum(counts.values()):,} conversations of {title} by the category most of the "
        f"reviewers who included them chose, largest first; {none:,} without a category "
        "majority are shown in grey."))


def table1_stem(key: str) -> str:
    """The stem of subset ``key``'s Table 1 CSV: 08's name without ``.csv``."""
    return Path(graph.TABLE1.format(subset=key)).stem


@dataclass(frozen=True)
class SubsetTable:
    """One subset's Table 1 as 08_scores wrote it (normalised to Table 1's layout) and its
    evaluation source (for the heatmap, the judges and n)."""

    key: str
    table: pd.DataFrame
    source: EvaluationSource


@dataclass(frozen=True)
class Inputs:
    """What the chapter lays out: 05's categories, 08's metrics (of this chapter's mode) and
    Table 1 of each subset it scored, with the subsets left out and why, and 09's metrics."""

    mode: EvaluationMode
    categories: pd.Series
    scores: ScoresMetrics
    subsets: dict[str, SubsetTable]
    skipped: dict[str, str]
    judged: JudgesMetrics

    @property
    def judges(self) -> list[str]:
        """The panel 08 scored with (the study's when no subset has a Table 1)."""
        first = next(iter(self.subsets.values()), None)
        return list(study.JUDGE_PANEL) if first is None else list(first.source.judges)


@base.resolver
def inputs(run: StageRun, *, subsets: list[str]) -> Inputs:
    """05's categories; 08_scores' metrics, checked to be of the same mode as this stage (its
    Table 1 files are the ones this stage publishes); Table 1 of each subset of ``subsets``
    from 08's ``table1_<subset>.csv`` (read back exactly) with its evaluation source (the
    judges 08 scored with, n, the per-judge means); a subset without graded conversations, or
    that 08 did not score, is left out with a sentence; 09_judges' metrics."""
    mode: EvaluationMode = graph.LIVE if run.mode == graph.LIVE else graph.PAPER
    scores = run.stage.upstream_metrics(stage_metrics.SCORES)
    if scores.mode != mode:
        raise ScoringError(
            f"{STAGE} is in {mode!r} mode but {graph.SCORES} ran in {scores.mode!r} mode in "
            f"profile {run.profile!r}: run both with the same {graph.EVALUATION_MODE} (the "
            "mode of figures_tables and of scores)")
    found: dict[str, SubsetTable] = {}
    skipped = {}
    for key in subsets:
        title = study.SUBSET_TITLES[key]
        source = evaluation_source(run.stage, key, mode=mode,
                                   include_later=scores.include_later)
        if source is None:  # a live run may have graded nothing of a subset
            skipped[key] = (f"{title}: this run graded none of its conversations, so it has no "
                            "Table 1 and no figures.")
            continue
        path = run.stage.upstream_optional(graph.SCORES, graph.TABLE1.format(subset=key))
        if path is None:
            skipped[key] = (f"{title}: chapter 08 made no Table 1 for it (it is not among the "
                            "scored subsets), so it has no Table 1 and no figures here.")
            continue
        found[key] = SubsetTable(key, tables.table1(read_table1(path), judges=source.judges,
                                                    n=source.n), source)
    categories = subset_files.read_categories(run.stage.upstream(graph.SUBSET,
                                                                 graph.CATEGORIES_V1))
    return Inputs(mode, categories, scores, found, skipped,
                  run.stage.upstream_metrics(stage_metrics.JUDGES))


@dataclass(frozen=True)
class Table1:
    """Table 1 of every subset of ``subsets`` that 08_scores wrote one for, in the paper's
    layout, and the per-judge appendix table; the subsets left out, each with the sentence
    saying why."""

    subsets: dict[str, SubsetTable]
    skipped: dict[str, str]
    n_resamples: int | None
    level: float
    """The level of the intervals chapter 08 computed (its metrics' ``ci_level``)."""

    @property
    def primary(self) -> str | None:
        """The first subset with a Table 1 (what the findings speak of)."""
        return next(iter(self.subsets), None)

    @property
    def top(self) -> list[str]:
        """The primary subset's top three by rank."""
        if self.primary is None:
            return []
        return self.subsets[self.primary].table.sort_values("rank")["candidate"][:3].tolist()

    @property
    def intervals(self) -> bool:
        return self.primary is not None and self.subsets[self.primary].source.intervals

    @property
    def judges(self) -> list[str]:
        """The panel 08 scored with (the study's when no subset has a Table 1)."""
        if self.primary is None:
            return list(study.JUDGE_PANEL)
        return list(self.subsets[self.primary].source.judges)

    def reader_tables(self) -> list[tables.ReaderTable]:
        """Table 1 and Table I1 as readers see them (none when no subset has a Table 1)."""
        if self.primary is None:
            return []
        frames = {key: sub.table for key, sub in self.subsets.items()}
        primary = self.subsets[self.primary]
        return [tables.paper_table1(frames, judges=primary.source.judges,
                                    n_resamples=self.n_resamples, level=self.level),
                tables.per_judge_table(primary.table, subset=self.primary,
                                       judges=primary.source.judges)]

    def texts(self) -> dict[str, str]:
        if self.primary is None:
            return {}
        return tables.table1_texts({key: sub.table for key, sub in self.subsets.items()},
                                   judges=self.subsets[self.primary].source.judges,
                                   n_resamples=self.n_resamples, level=self.level)

    def view(self) -> Together:
        return Together([*(Note(s) for s in self.skipped.values()),
                         Tables([t.table() for t in self.reader_tables()])])


def table1(data: Inputs) -> Table1:
    """Table 1 of each subset 08 wrote one for, in the paper's layout for the judges 08 scored
    with, with the resamples and level of 08's intervals where it has them."""
    scores = data.scores
    n_resamples = (scores.n_resamples if any(s.source.intervals for s in data.subsets.values())
                   else None)
    level = scores.ci_level if scores.ci_level is not None else study.CI_LEVEL
    return Table1(data.subsets, data.skipped, n_resamples, level)


def _ranking_caption(sub: SubsetTable, n_resamples: int | None, level: float) -> str:
    title = study.SUBSET_TITLES[sub.key]
    if tables.has_intervals(sub.table):
        how = f"with {level_text(level)} bootstrap intervals over conversations" + (
            f" ({n_resamples:,} resamples)" if n_resamples else "")
    else:
        how = ("as point estimates (the released matrices carry no per-conversation grades, "
               "so no interval)")
    later = ("in_study" in sub.table.columns and not bool(sub.table["in_study"].all()))
    return (f"Each model's {panel_name(sub.source.judges)} mean on {title}, best first, "
            f"{how}; diamonds mark "
            "the judges' own models" + ("; grey: models added after the study." if later
                                        else "."))


def _heatmap_caption(sub: SubsetTable) -> str:
    return (f"Each judge's clipped mean per model on {study.SUBSET_TITLES[sub.key]}, rows in "
            "the panel's order; an outlined cell is a judge grading its own model, where "
            "self-preference would show.")


def ranking_and_heatmaps(t1: Table1, *, cache: Path) -> figures.Gallery:
    """Per subset, the panel ranking (Figure G2 on v1: from 08's Table 1, intervals where it
    has them) and the model x judge heatmap (Figure I1 on v1: the evaluation source's
    per-judge means), for the judges used; other subsets' are supplements."""
    drawn: dict[str, tuple[Figure | figures.CachedFigure, str]] = {}
    for key, sub in t1.subsets.items():
        title = study.SUBSET_TITLES[key]
        drawn[f"fig_ranking_{key}"] = (figures.panel_ranking(
            sub.table.set_index("candidate"), subset=title, judge_models=sub.source.judges,
            level=t1.level, cache=cache),
            _ranking_caption(sub, t1.n_resamples, t1.level))
        drawn[f"fig_heatmap_{key}"] = (figures.judge_heatmap(
            sub.source.per_judge, subset=title, judges=sub.source.judges,
            cache=cache), _heatmap_caption(sub))
    labels = catalogue.label(list(drawn), t1.judges)
    shown = {stem: figures.Captioned(drawn[stem][0], f"{labels[stem][0]}. {labels[stem][1]}",
                                     drawn[stem][1]) for stem in labels}
    return figures.Gallery(shown, notes=tuple(t1.skipped.values()))


@dataclass(frozen=True)
class JudgeFigure:
    """Severity and self-preference of the judges (09_judges' metrics), on 09's subset."""

    judges: JudgesMetrics
    gallery: Gallery

    @property
    def figures(self) -> Mapping[str, Captioned]:
        return self.gallery.figures

    def view(self) -> Gallery:
        return self.gallery


def judge_figure(judged: JudgesMetrics, *, cache: Path) -> JudgeFigure:
    """Figure I2 from 09_judges' metrics (intervals when 09 had per-conversation scores), named
    after the subset 09 measured (``judges.subset``), which may differ from this chapter's
    subsets."""
    title = study.SUBSET_TITLES[judged.subset]
    if not judged.severity:
        return JudgeFigure(judged, figures.Gallery({}, notes=(
            f"Chapter 09 had no graded conversation of {title}, so there is no judge "
            "figure.",)))
    stem = f"fig_judges_{judged.subset}"
    level = judged.ci_level if judged.ci_level is not None else study.CI_LEVEL
    fig = figures.judge_bias(judge_stats.judge_stats(judged), subset=title, judges=None,
                             level=level,
                             cache=cache)
    label, heading, _ = catalogue.label([stem], list(judged.severity))[stem]
    how = (f"with {level_text(level)} bootstrap intervals" if judged.intervals else
           "as point estimates (no per-conversation grades, so no interval)")
    grand = f" {judged.grand_mean:.3f}" if judged.grand_mean is not None else ""
    caption = (f"Left: each judge's severity, its mean over the {judged.n_candidates} models "
               f"minus the grand mean{grand}; right: its self-preference (its score for its own "
               "model minus the other judges' mean for it), raw and after removing every "
               f"judge's severity; on {title}, {how}.")
    return JudgeFigure(judged, figures.Gallery(
        {stem: figures.Captioned(fig, f"{label}. {heading}", caption)}))


def _figures(category: figures.Captioned, panels: figures.Gallery,
             judged: JudgeFigure) -> dict[str, figures.Captioned]:
    return {CATEGORIES: category, **panels.figures, **judged.figures}


def catalogue_of(category: figures.Captioned, t1: Table1, panels: figures.Gallery,
                 judged: JudgeFigure) -> catalogue.Catalogue:
    """The chapter's objects in the paper's order, with the labels and captions shown here
    (the book's figures page shows the same)."""
    shown = _figures(category, panels, judged)
    readers = {"table1": t1.reader_tables()[0], "table_i1": t1.reader_tables()[1]} \
        if t1.primary is not None else {}
    files = {"table1": ["table1.md", "table1.tex",
                        *(f"{table1_stem(k)}.csv" for k in t1.subsets)],
             "table_i1": ["table_i1.md", "table_i1.tex"]}
    labels = catalogue.label([*readers, *shown], t1.judges)
    items = []
    for stem in labels:
        if stem in readers:
            r = readers[stem]
            items.append(catalogue.Item(stem=stem, label=r.label, title=labels[stem][1],
                                        caption=r.caption, files=files[stem],
                                        in_paper=labels[stem][2]))
        else:
            c = shown[stem]
            label, title = c.heading.split(". ", 1)
            items.append(catalogue.Item(stem=stem, label=label, title=title, caption=c.caption,
                                        files=[f"{stem}.{ext}" for ext in FIGURE_FORMATS],
                                        in_paper=labels[stem][2]))
    return catalogue.Catalogue(items=items)


def _outputs(category: figures.Captioned, t1: Table1, panels: figures.Gallery,
             judged: JudgeFigure
             ) -> tuple[dict[str, Figure | figures.CachedFigure], dict[str, str]]:
    """Every figure (by file stem) and text file (by file name) the chapter writes."""
    figs = {stem: c.figure for stem, c in _figures(category, panels, judged).items()}
    made = catalogue_of(category, t1, panels, judged)
    return figs, {**t1.texts(), catalogue.CATALOGUE: made.model_dump_json(indent=1) + "\n"}


def metrics(data: Inputs, category: figures.Captioned, t1: Table1, panels: figures.Gallery,
            judged: JudgeFigure, *, publish: bool) -> FiguresTablesMetrics:
    """12's metrics: the files it writes and whether they are published to ``figures/``
    (``publish``)."""
    figs, texts = _outputs(category, t1, panels, judged)
    names = [*texts, *(f"{stem}.{ext}" for stem in figs for ext in FIGURE_FORMATS)]
    return FiguresTablesMetrics(mode=data.mode, files=sorted(names), n_files=len(names),
                                published_to_figures=publish)


def write(run: StageRun, m: FiguresTablesMetrics,
          category: figures.Captioned, t1: Table1, panels: figures.Gallery,
          judged: JudgeFigure) -> Written:
    """Every figure (PNG and SVG), Table 1 file and the catalogue, then ``metrics.json``; with
    ``publish`` the same files also go to the top-level ``figures/`` folder (the same bytes:
    figures are saved deterministically), which then holds this run's files and no earlier
    run's (``figures_folder``)."""
    figs, texts = _outputs(category, t1, panels, judged)
    written = base.write(run, m, figures=figs, texts=texts)
    if m.published_to_figures:
        # the stage's own files, where they now are (a hand run's were swapped into place)
        folder = run.stage.dir if run.stage.dir.is_dir() else run.stage.final_dir
        figures_folder.publish(folder, m.files, paths.figures_dir())
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
             subset: str | None, intervals: bool, level: float) -> Findings:
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
                   f"{', '.join(md_text(study.display_name(c)) for c in top)} on top"
                   + (f" (with {level_text(level)} intervals in the ranking figure)"
                      if intervals
                      else " (point estimates)") + "; " + about + ".")
    if m.published_to_figures:
        out.append("Copies are in `figures/`.")
    return Findings(out)
