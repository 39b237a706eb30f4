"""Chapter 14, where and how reliably models fail: HealthBench's own analyses on the subset.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (the
resolver: live, this run's verdicts and scores on ``subset``, every sampled reply's score, the
rubrics, the modal clinician categories and the reply lengths; paper has none of them, since
the released matrices carry no per-criterion grade, and the chapter says so once),
:func:`by_tag` (per candidate, for each judge and the panel, a score for every rubric axis,
HealthBench theme and modal clinician category, with n and bootstrap intervals:
``evaluation.breakdowns``), :func:`heatmaps` (the panel's scores, candidates x axes and
candidates x categories), :func:`lengths` (reply lengths and the length-adjusted score beside
the raw one, with the figure of score against mean reply length: ``evaluation.length``),
:func:`reliability` (with several replies per conversation, worst-at-k for k = 1..K and the
spread of the overall score across the K runs, with its figure: ``evaluation.reliability``),
:func:`metrics`, :func:`write` and :func:`findings`.

The tag breakdown and the lengths are of each conversation's first reply (the one 08 scores);
worst-at-k and the run spread use every reply. Live writes ``by_tag.csv``, ``lengths.csv``,
``worst_at_k.csv`` and ``run_spread.csv`` (with several samples), the figures (PNG and SVG) and
``metrics.json``. Each figure's title and caption are written once, in :data:`FIGURES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, generation, length, panel, scoring
from hbpsych_utils.evaluation.reliability import complete, run_spread, worst_at_k_table
from hbpsych_utils.evaluation.score_sources import EvaluationMode, graded_judges, read_scores
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    AnalysesMetrics,
    KScore,
    LengthScore,
    RunSpread,
)
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.display import Findings, Note, Together
from hbpsych_utils.reporting.figures import Gallery
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.ANALYSES
start = base.starter(STAGE)

BY_TAG_FILE = "by_tag.csv"
LENGTHS_FILE = "lengths.csv"
WORST_FILE = "worst_at_k.csv"
SPREAD_FILE = "run_spread.csv"
PANEL = breakdowns.PANEL


@dataclass(frozen=True)
class FigureText:
    """A figure's label, title (drawn on it) and caption (shown under it in the chapter;
    ``{level}`` stands for the interval level)."""

    label: str
    title: str
    caption: str


FIGURES: dict[str, FigureText] = {
    "axes": FigureText(
        "Figure A1", "Panel score by rubric axis",
        "Each candidate (rows, best overall panel score first) on each HealthBench rubric axis "
        "(columns): the panel's clipped mean over the conversations in which the criteria "
        "carrying the axis have positive points, each scored on those criteria alone "
        "(simple-evals' per-tag rule); first reply of each conversation. n, the {level} "
        "bootstrap interval and each judge's score are in by_tag.csv."),
    "categories": FigureText(
        "Figure A2", "Panel score by modal clinician category",
        "Each candidate (rows, best overall panel score first) on the conversations of each "
        "modal clinician category of the subset (columns; 05_subset): the panel's clipped mean "
        "of their overall scores. Conversations without a category majority are left out; "
        "'–': no scored conversation. n and intervals are in by_tag.csv."),
    "length": FigureText(
        "Figure A3", "Panel score against mean reply length",
        "Each candidate at its mean reply length (characters, as the reference counts them) "
        "and its panel score: raw (filled) and length-adjusted (open), each reply's score "
        "moved by the variant's penalty per 500 characters from 2,000 before the clipped mean "
        "(simple-evals, April 2026). The dashed line is where a reply is not adjusted."),
    "worst_at_k": FigureText(
        "Figure A4", "Worst-at-k",
        "For each k, the panel's score of the worst of k replies: per conversation the mean, "
        "over every k-subset of its K replies, of the subset's lowest score, then the clipped "
        "mean over conversations (HealthBench's reliability analysis); bands are {level} "
        "bootstrap intervals over conversations. k = 1 is the mean of all replies."),
}
"""Every figure of the chapter, by key: its label (the compendium's own, A for analyses: none
is in the paper), title and caption, written once."""


def figure_stem(key: str, subset: str) -> str:
    return f"fig_{key}_{subset}"


def captioned(key: str, subset: str, fig: Figure | figures.CachedFigure,
              level: float) -> figures.Captioned:
    """A figure of the chapter with its label, title (on the subset) and caption (its interval
    level, ``level``)."""
    text = FIGURES[key]
    title = study.SUBSET_TITLES.get(subset, subset)
    return figures.Captioned(fig, f"{text.label}. {text.title}: {title}",
                             text.caption.replace("{level}", level_text(level)))


# --- what was graded -------------------------------------------------------------------------

@dataclass(frozen=True)
class Graded:
    """Live: this run's graded replies on the subset."""

    subset: str
    judges: list[str]
    conversations: dict[str, Conversation]
    verdicts: pd.DataFrame
    """The first reply's verdicts (``panel.read_verdicts``), on the subset."""
    scores: pd.DataFrame
    """Every reply's score: judge, candidate, prompt_id, sample, score (NaN: unscored)."""
    categories: pd.Series
    """Modal clinician category by prompt id (05_subset)."""
    lengths: dict[tuple[str, str], int]
    """(candidate, prompt_id) -> the first reply's length in characters."""

    @property
    def samples(self) -> int:
        return int(self.scores["sample"].max()) + 1 if len(self.scores) else 1

    @property
    def first_scores(self) -> pd.DataFrame:
        first = self.scores[self.scores["sample"] == 0]
        return first[["judge", "candidate", "prompt_id", "score"]]

    @property
    def panel_mean(self) -> dict[str, float]:
        """The panel's clipped mean per candidate on the first reply (08's panel score)."""
        long = scoring.panel_scores_long(self.first_scores, self.judges)
        return {str(c): scoring.clipped_mean(g["score"]) for c, g in
                long.groupby("candidate", sort=True)}

    def view(self) -> Note:
        n_conv = self.verdicts["prompt_id"].nunique()
        n_cand = self.verdicts["candidate"].nunique()
        with_cat = len(breakdowns.category_tags(self.categories.loc[
            self.categories.index.isin(self.verdicts["prompt_id"])]))
        replies = ("one reply each (generation.samples = 1, as in the study; worst-at-k and "
                   "the spread across runs need at least 2)" if self.samples == 1
                   else f"{self.samples} replies each")
        title = study.SUBSET_TITLES.get(self.subset, self.subset)
        return Note(f"{count(n_conv, 'conversation')} of **{title}** graded in this run: "
                    f"{count(n_cand, 'candidate')}, {replies}, the "
                    f"{md_text(panel_phrase(self.judges))}; "
                    f"{with_cat:,} of the conversations have a modal clinician category.")


@dataclass(frozen=True)
class Inputs:
    """What the chapter analyses: this run's graded replies on the subset (``None`` when the
    run has none), and what it lacks."""

    mode: EvaluationMode
    graded: Graded | None
    lacking: base.Lacking | None = None
    """Paper: what the chapter needs (a live run) and what that adds."""
    empty: str = ""
    """Live: why there is nothing to analyse (no graded conversation of the subset)."""

    @property
    def sampled(self) -> Graded | None:
        """The graded replies when there are several per conversation (what worst-at-k and
        the spread across runs need), else ``None``."""
        return self.graded if self.graded is not None and self.graded.samples > 1 else None

    def view(self) -> Note | base.Lacking | Graded:
        if self.lacking is not None:
            return self.lacking
        return self.graded if self.graded is not None else Note(self.empty)


LACKING_WHY = ("the released matrices carry one clipped mean per candidate and judge, and no "
               "per-criterion grade, reply or second sample.")
LACKING_ADDS = ("A live run (the smoke or local profile, or a real one) adds scores by rubric "
                "axis, theme and modal clinician category, reply lengths and the "
                "length-adjusted score, and, with several replies per conversation, worst-at-k "
                "and the spread across runs.")


@base.resolver
def inputs(run: StageRun, *, subset: str) -> Inputs:
    """Live: 07's verdicts (first reply) and scores (every sample) on the subset's
    conversations, 01's rubrics, 05's modal categories and 06's reply lengths; paper: none of
    them (:data:`LACKING_WHY`)."""
    lacking = base.lacking(STAGE, run.mode, why=LACKING_WHY, adds=LACKING_ADDS)
    if run.mode != graph.LIVE:
        return Inputs(graph.PAPER, None, lacking)
    graded = _graded(run, subset)
    empty = (f"This run graded no conversation of subset {subset!r}, so there is nothing to "
             "analyse.")
    return Inputs(graph.LIVE, graded, empty=empty)


def _graded(run: StageRun, subset: str) -> Graded | None:
    """This run's graded replies on ``subset`` (``None``: it graded none of them)."""
    stage = run.stage
    ids = set(subset_files.stage_ids(stage, subset))
    verdicts = panel.read_verdicts(stage.upstream(graph.GRADING, graph.VERDICTS))
    verdicts = verdicts[verdicts["prompt_id"].isin(ids)].reset_index(drop=True)
    if verdicts.empty:
        return None
    by_id = {c.prompt_id: c for c in corpus.load_recorded(
        stage.upstream(graph.CORPUS, graph.CORPUS_RECORD)) if c.prompt_id in ids}
    more = stage.upstream_optional(graph.GRADING, graph.SCORE_SAMPLES)
    scores = generation.with_samples(read_scores(stage.upstream(graph.GRADING,
                                                                graph.SCORES_TABLE)),
                                     None if more is None else read_scores(more))
    if "sample" not in scores.columns:
        scores = scores.assign(sample=0)
    scores = scores[scores["prompt_id"].isin(ids)][
        ["judge", "candidate", "prompt_id", "sample", "score"]].reset_index(drop=True)
    replies = generation.read_responses(stage.upstream(graph.GENERATION, graph.RESPONSES))
    lengths = {(str(m), str(p)): int(c) for m, p, c in
               zip(replies["model"], replies["prompt_id"], replies["chars"], strict=True)
               if pd.notna(c)}
    categories = subset_files.read_categories(stage.upstream(graph.SUBSET, graph.CATEGORIES_V1))
    return Graded(subset, graded_judges(stage), by_id, verdicts, scores, categories, lengths)


# --- where models fail: scores by tag and slice ------------------------------------------------

@dataclass(frozen=True)
class Breakdown:
    """Per candidate, for each judge and the panel, the score of every reported tag
    (``breakdowns.summarise``), and the overall panel score that orders the rows."""

    summary: pd.DataFrame
    panel_mean: dict[str, float]
    subset: str
    judges: list[str]
    level: float
    """The level of the tag scores' intervals."""

    def order(self) -> list[str]:
        return scoring.ranking(pd.Series(self.panel_mean))

    def wide(self, scorer: str, prefix: str) -> pd.DataFrame:
        return breakdowns.wide(self.summary, scorer, prefix).reindex(
            [c for c in self.order() if c in set(self.summary["candidate"])])

    def n_by_tag(self) -> pd.DataFrame:
        """Per tag: the fewest and most conversations any candidate's panel score rests on."""
        panel_rows = self.summary[self.summary["scorer"] == PANEL]
        g = panel_rows.groupby("tag")["n"]
        slices = {"axis": "Rubric axis", "theme": "HealthBench theme",
                  "category": "Modal clinician category"}
        return pd.DataFrame({"slice": [slices.get(t.split(":", 1)[0], t.split(":", 1)[0])
                                       for t in g.min().index],
                             "n_fewest": g.min(), "n_most": g.max()})

    def view(self) -> Tables:
        title = study.SUBSET_TITLES.get(self.subset, self.subset)
        tables = [Table(self.wide(PANEL, prefix), caption=f"Panel score by {what}: {title} "
                        "(clipped mean; rows best overall first)", value_kind="score")
                  for prefix, what in ((breakdowns.AXIS, "rubric axis"),
                                       (breakdowns.THEME, "HealthBench theme"),
                                       (breakdowns.CATEGORY, "modal clinician category"))]
        by_judge = pd.concat({j: self.wide(j, breakdowns.AXIS) for j in self.judges},
                             names=["judge", "candidate"])
        tables.append(Table(by_judge, caption=f"Each judge's score by rubric axis: {title}",
                            value_kind="score"))
        tables.append(Table(self.n_by_tag(), caption="Conversations behind each tag's score",
                            kinds={"slice": "name"}))
        note = ("Simple-evals' per-tag rule: a theme or category takes the conversation's score; "
                "an axis scores its own criteria over their positive points, where they have "
                f"any. Every number with its n and {level_text(self.level)} interval is in "
                f"{BY_TAG_FILE}.")
        return Tables(tables, note=note)


@base.needs
def by_tag(graded: Graded, *, n_resamples: int, seed: int, level: float) -> Breakdown:
    """Per candidate, for each judge and for the panel: a score for every rubric axis, every
    HealthBench theme and every modal clinician category, from the first reply's verdicts
    (``breakdowns.tag_scores``, ``with_panel``), with n and ``n_resamples`` seeded bootstrap
    intervals at ``level`` (``breakdowns.summarise``)."""
    tags = breakdowns.tag_scores(graded.verdicts, graded.conversations,
                                 extra_tags=breakdowns.category_tags(graded.categories))
    summary = breakdowns.summarise(breakdowns.with_panel(tags, graded.judges),
                                   n_resamples=n_resamples, seed=seed, level=level)
    return Breakdown(summary, graded.panel_mean, graded.subset, graded.judges, level)


@dataclass(frozen=True)
class Figures:
    """A section's figures, each under its label and with its caption (:data:`FIGURES`)."""

    shown: dict[str, figures.Captioned]
    notes: list[str] = field(default_factory=list)

    @property
    def figures(self) -> dict[str, Figure | figures.CachedFigure]:
        return {stem: c.figure for stem, c in self.shown.items()}

    def view(self) -> Gallery:
        return Gallery(self.shown, notes=self.notes)


@base.needs
def heatmaps(tags: Breakdown, *, cache: Path) -> Figures:
    """The panel's scores as heatmaps: candidates x rubric axes, candidates x modal clinician
    categories (rows best overall first); ``cache`` keeps figures drawn before."""
    out: dict[str, figures.Captioned] = {}
    notes = []
    title = study.SUBSET_TITLES.get(tags.subset, tags.subset)
    for key, prefix in (("axes", breakdowns.AXIS), ("categories", breakdowns.CATEGORY)):
        table = tags.wide(PANEL, prefix)
        if table.empty:
            notes.append(f"No {FIGURES[key].title.lower()} figure: no scored conversation "
                         "carries such a tag.")
            continue
        out[figure_stem(key, tags.subset)] = captioned(key, tags.subset, figures.score_heatmap(
            table, title=f"{FIGURES[key].title}: {title}",
            note="clipped mean; rows best overall first", cache=cache), tags.level)
    return Figures(out, notes)


# --- is a score bought with length? -----------------------------------------------------------

@dataclass(frozen=True)
class Lengths:
    """Reply lengths and the length-adjusted score, per scorer and candidate
    (``length.length_table``), with the figure."""

    table: pd.DataFrame
    variant: str
    figure: Figure | figures.CachedFigure
    subset: str
    level: float

    @property
    def stem(self) -> str:
        return figure_stem("length", self.subset)

    def panel(self) -> pd.DataFrame:
        rows = self.table[self.table["scorer"] == PANEL].set_index("candidate")
        return rows.drop(columns=["scorer"]).sort_values("clipped_mean", ascending=False)

    def view(self) -> Together:
        per_500 = length.penalty(self.variant)
        table = Table(self.panel(), caption=(
            f"Reply length (characters) and the panel's length-adjusted score "
            f"({length.VARIANT_NAMES[self.variant]} penalty {per_500:g} per "
            f"{length.PER_CHARS} characters from "
            f"{length.CENTER:,}, before the clip) beside the raw one; every judge's in "
            f"{LENGTHS_FILE}"), level=self.level)
        return Together([table, captioned("length", self.subset, self.figure, self.level)])


@base.needs
def lengths(graded: Graded, *, penalty: str, n_resamples: int, seed: int, level: float,
            cache: Path) -> Lengths:
    """Each candidate's first replies: their length (characters, ``len`` of the text, as the
    reference counts it), its raw clipped mean and its length-adjusted one with a seeded
    interval (the ``penalty`` of that HealthBench variant, applied per reply before the clip),
    for each judge and the panel; and the figure of score against mean reply length."""
    long = breakdowns.with_panel(graded.first_scores, graded.judges)
    table = length.length_table(long, graded.lengths, length.penalty(penalty),
                                n_resamples=n_resamples, seed=seed, level=level)
    panel_rows = table[table["scorer"] == PANEL].set_index("candidate")
    title = study.SUBSET_TITLES.get(graded.subset, graded.subset)
    fig = figures.length_scatter(panel_rows, title=f"{FIGURES['length'].title}: {title}",
                                 note=f"{length.VARIANT_NAMES[penalty]} penalty, "
                                      f"{length.penalty(penalty):g} per 500 characters",
                                 center=length.CENTER, cache=cache)
    return Lengths(table, penalty, fig, graded.subset, level)


# --- how reliable: worst-at-k and the spread across runs ---------------------------------------

@dataclass(frozen=True)
class Reliability:
    """Worst-at-k for k = 1..K and the run spread, per scorer and candidate, with the figure."""

    worst: pd.DataFrame
    spread: pd.DataFrame
    samples: int
    n_incomplete: int
    figure: Figure | figures.CachedFigure
    subset: str
    level: float

    @property
    def stem(self) -> str:
        return figure_stem("worst_at_k", self.subset)

    def view(self) -> Together:
        panel_rows = self.worst[self.worst["scorer"] == PANEL]
        wk = panel_rows.pivot(index="candidate", columns="k", values="clipped_mean")
        wk.columns = [f"Worst-at-{k}" for k in wk.columns]
        spread = self.spread[self.spread["scorer"] == PANEL].set_index("candidate").drop(
            columns=["scorer"])
        note = (f"{count(self.n_incomplete, '(scorer, candidate, conversation) row')} with an "
                "unscored sample left out." if self.n_incomplete else "")
        tables = Tables([
            Table(wk.sort_values("Worst-at-1", ascending=False), caption=(
                f"The panel's worst-at-k, k = 1..{self.samples} (clipped mean over "
                f"conversations; intervals and each judge's in {WORST_FILE})"),
                value_kind="score"),
            Table(spread, caption=f"The panel's overall score in each of the {self.samples} "
                  "runs (one per sample index) and their spread (standard deviation, "
                  "ddof 0)")], note=note)
        return Together([tables, captioned("worst_at_k", self.subset, self.figure,
                                           self.level)])


@base.needs
def reliability(graded: Graded, *, n_resamples: int, seed: int, level: float,
                cache: Path) -> Reliability:
    """With K >= 2 replies per conversation (``generation.samples``; ``Inputs.sampled``):
    worst-at-k for k = 1..K with seeded intervals (``reliability.worst_at_k_table``) and each
    run's overall score and their spread (``reliability.run_spread``), for each judge and the
    panel, on the conversations scored in every sample; and the figure."""
    long = breakdowns.with_panel(graded.scores, graded.judges)
    _, n_incomplete = complete(long)
    worst = worst_at_k_table(long, n_resamples=n_resamples, seed=seed, level=level)
    spread = run_spread(long)
    title = study.SUBSET_TITLES.get(graded.subset, graded.subset)
    fig = figures.worst_at_k_curves(
        worst[worst["scorer"] == PANEL], title=f"{FIGURES['worst_at_k'].title}: {title}",
        note=f"{graded.samples} replies per conversation; {level_text(level)} "
             "bootstrap bands", cache=cache)
    return Reliability(worst, spread, graded.samples, n_incomplete, fig, graded.subset, level)


# --- metrics, outputs, findings ------------------------------------------------------------------

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


def findings(m: AnalysesMetrics, *, min_n: int = study.SLICE_MIN_N,
             close: float = study.CLOSE_SCORES) -> Findings | None:
    """The sentences of "What we found", from 14's metrics (the panel's numbers); ``None``
    without graded replies (the chapter said so at its top).

    Each candidate's weakest rubric axis among those with at least ``min_n`` conversations (the
    gap to its next weakest when that is more than ``close``); the slices of at least ``min_n``
    conversations per candidate on which the panel's order of two candidates reverses by more
    than ``close`` on both sides; the suicidality/self-harm and emergency-referral slices
    (``study.SAFETY_SLICES``) whatever their size, said to be too small to read below
    ``min_n``; the length adjustment's range and any pair it reverses by more than ``close``;
    with several samples, the largest drop from worst-at-1 to worst-at-K and the widest spread
    across runs; with one, why there is no worst-at-k.
    """
    if m.panel_mean is None:
        return None
    out = [f"On **{study.SUBSET_TITLES.get(m.subset or '', m.subset)}** "
           f"({count(m.n_conversations or 0, 'conversation')}), for "
           f"{count(len(m.panel_mean), 'candidate')} graded by the "
           f"{md_text(panel_phrase(m.judges or []))}:"]
    summary = _summary_frame(m)
    out += _axis_sentences(summary, min_n, close)
    out += _reordering_sentences(summary, m.panel_mean, min_n, close)
    out += _safety_sentences(m, min_n)
    out += _length_sentences(m, close)
    out += _reliability_sentences(m, close)
    return Findings(out)


def _name(model: str) -> str:
    """A candidate as a sentence names it: its display name, as text."""
    return md_text(study.display_name(model))


def _summary_frame(m: AnalysesMetrics) -> pd.DataFrame:
    rows = [(s, c, t, v.n, v.clipped_mean) for s, cands in (m.by_tag or {}).items()
            for c, by in cands.items() for t, v in by.items()]
    return pd.DataFrame(rows, columns=["scorer", "candidate", "tag", "n", "clipped_mean"])


def _axis_sentences(summary: pd.DataFrame, min_n: int, close: float) -> list[str]:
    weakest = breakdowns.weakest(summary, min_n=min_n)
    if not weakest:
        return [f"No rubric axis has a panel score on {min_n} or more conversations, so no "
                "weakest axis is named."]
    parts = []
    for cand, (tag, value, gap) in weakest.items():
        if gap is None:
            margin = ", its only axis"
        elif gap > close:
            margin = f", {gap:.3f} below its next"
        else:
            margin = f", within {close:g} of its next"
        parts.append(f"{_name(cand)}: {md_text(breakdowns.label(tag))} ({value:.3f}{margin})")
    return [f"Weakest rubric axis (panel, axes with at least {min_n} conversations): "
            + "; ".join(parts) + "."]


def _reordering_sentences(summary: pd.DataFrame, overall: dict[str, float], min_n: int,
                          close: float) -> list[str]:
    if len(overall) < 2:
        return []
    found = breakdowns.reorderings(summary, overall, min_n=min_n, close=close)
    if not found:
        return [f"No slice with at least {min_n} conversations per candidate reverses the "
                f"panel's order of two candidates by more than {close:g}."]
    parts = [f"{t.split(':', 1)[0]} {md_text(breakdowns.label(t))} ("
             + ", ".join(f"{_name(b)} above {_name(a)}" for a, b in pairs) + ")"
             for t, pairs in found.items()]
    return [f"Slices that reverse the panel's overall order (by more than {close:g} on both "
            f"sides, at least {min_n} conversations each): " + "; ".join(parts) + "."]


def _safety_sentences(m: AnalysesMetrics, min_n: int) -> list[str]:
    panel_tags = (m.by_tag or {}).get(PANEL, {})
    out = []
    for tag, name in study.SAFETY_SLICES.items():
        found = {c: by[tag] for c, by in panel_tags.items() if tag in by}
        if not found:
            out.append(f"None of the graded conversations is among the {name}.")
            continue
        n = max(v.n for v in found.values())
        values = ", ".join(f"{_name(c)} {v.clipped_mean:.3f}" for c, v in
                           sorted(found.items(), key=lambda kv: (-kv[1].clipped_mean, kv[0])))
        caution = (f"; fewer than {min_n}, too few to read as a ranking" if n < min_n else "")
        out.append(f"On the {name} (n = {n}{caution}) the panel scores {values}.")
    return out


def _length_sentences(m: AnalysesMetrics, close: float) -> list[str]:
    rows = (m.length or {}).get(PANEL)
    if not rows:
        return []
    shift = {c: v.adjusted_mean - v.clipped_mean for c, v in rows.items()}
    lo, hi = min(shift.values()), max(shift.values())
    mean_chars = sum(v.mean_chars for v in rows.values()) / len(rows)
    table = pd.DataFrame({"scorer": PANEL, "candidate": list(rows),
                          "clipped_mean": [v.clipped_mean for v in rows.values()],
                          "adjusted_mean": [v.adjusted_mean for v in rows.values()]})
    swapped = length.reordered(table, PANEL, list(rows), close)
    order = (f"; it reverses {', '.join(f'{_name(a)} and {_name(b)}' for a, b in swapped)} "
             "by more than "
             f"{close:g}" if swapped else
             f"; it reverses no pair of candidates by more than {close:g}")
    variant = length.VARIANT_NAMES.get(m.length_penalty or "", m.length_penalty)
    return [f"Replies average {mean_chars:,.0f} characters; the length adjustment ({variant} "
            f"penalty, {m.length_per_500:g} per 500 characters) moves the "
            f"panel's scores by {lo:+.3f} to {hi:+.3f}{order}."]


def _reliability_sentences(m: AnalysesMetrics, close: float) -> list[str]:
    if not m.samples or m.samples < 2 or not m.worst_at_k:
        return ["One reply per conversation, as in the study: no worst-at-k or run spread "
                "(generation.samples sets more)."]
    panel_worst = m.worst_at_k.get(PANEL, {})
    drops = {c: ks[0].clipped_mean - ks[-1].clipped_mean for c, ks in panel_worst.items()}
    cand = max(drops, key=lambda c: (drops[c], c))
    first, last = panel_worst[cand][0], panel_worst[cand][-1]
    out = [f"With {m.samples} replies per conversation, the largest fall from worst-at-1 to "
           f"worst-at-{m.samples} is {_name(cand)}'s ({first.clipped_mean:.3f} to "
           f"{last.clipped_mean:.3f})"
           + ("." if drops[cand] > close else f", within {close:g}: no candidate's worst reply "
              "is clearly below its typical one.")]
    spreads = (m.run_spread or {}).get(PANEL, {})
    if spreads:
        widest = max(spreads, key=lambda c: (spreads[c].std, c))
        out.append(f"Across the {m.samples} runs the panel's overall score varies most for "
                   f"{_name(widest)} (standard deviation {spreads[widest].std:.4f}, "
                   f"{spreads[widest].min:.3f} to {spreads[widest].max:.3f}).")
    return out
