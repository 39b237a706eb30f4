"""Chapter 15, are the judges right? Their verdicts against physicians' labels.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`meta_eval` (the
resolver: live, the rows to grade, HealthBench's meta-evaluation file from the registry,
verified by content, or the compendium's format fixture, kept only on the conversations of the
run's Psych subsets, v1 ∪ v2 ∪ Hard from 05_subset, with the coverage of each; paper has no
physician labels, since the file is online only and a paper run downloads nothing, and the
chapter says so once), :func:`cost_plan` (what grading the rows will cost at the model
registry's prices, shown before anything is sent, as 06 does), :func:`grade` (every row graded
by every judge with the reference grader template through the engine:
``panel.grade_requests``, the same re-asks and exclusions as 07), :func:`accuracy` (each judge
and the panel, the majority of the judges, against the physician majority: macro-F1, each
class's F1, sensitivity and specificity with conversation-clustered bootstrap intervals,
overall, per the file's category, per HealthBench theme and per Psych category),
:func:`placement` (HealthBench's pairwise balanced F1 of each judge and the panel against each
physician beside each physician's leave-one-out F1 against the others, by the same slicings,
and the figure), :func:`agreement` (Gwet's AC1 among the judges), :func:`corrected` (each
judge's and the panel's criterion-met rate on this run's grading, 07, with its Rogan-Gladen
correction), :func:`metrics`, :func:`write` and :func:`findings`.

The statistics and their definitions are in :mod:`hbpsych_utils.evaluation.judge_accuracy`.
Deviations from the reference: the rows are graded at the study's grading settings
(``grading.temperature``, 0 in the study; simple-evals' meta-evaluation samples its grader at
its own defaults), and a verdict still missing after the re-asks is left out, never counted as
"not met". Live writes ``verdicts.csv``, ``coverage.csv``, ``accuracy.csv``,
``pairwise_f1.csv``, ``corrected_rates.csv`` (when 07 graded anything), the figure and
``metrics.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.config import LLMSettings
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, grading, panel
from hbpsych_utils.evaluation import cost_plan as plans
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.evaluation.score_sources import EvaluationMode
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    CorrectedRate,
    JudgeAccuracy,
    JudgeAccuracyMetrics,
    PairwiseF1,
    SubsetCoverage,
)
from hbpsych_utils.reporting import figures, vocabulary
from hbpsych_utils.reporting.display import Findings, Note, Together
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.JUDGE_ACCURACY
start = base.starter(STAGE)

VERDICTS_FILE = "verdicts.csv"
ACCURACY_FILE = "accuracy.csv"
PAIRWISE_FILE = "pairwise_f1.csv"
CORRECTED_FILE = "corrected_rates.csv"
COVERAGE_FILE = "coverage.csv"
FIGURE_STEM = "fig_f1_placement"
FIGURE_LABEL = "Figure J1"
FIGURE_TITLE = "Judges placed among physicians (pairwise balanced F1)"
FIGURE_CAPTION = (
    "Per category of the file (all rows first): each physician's balanced F1 against the other "
    "physicians on the rows it labelled (grey), the physicians pooled (bar), each judge's "
    "balanced F1 against every physician label (diamonds) and the panel's, the majority of the "
    "judges (square); balanced F1 is the mean of the met and not-met "
    "classes' F1 (HealthBench's meta-evaluation). An undefined value (a class one side never "
    "uses) is not drawn. Pairs and values are in pairwise_f1.csv.")
GRADE_TAG = "meta_eval"
"""The ledger tag of this chapter's judge calls (the store tells them from 07's)."""

LACKING_WHY = ("HealthBench's meta-evaluation file is online only, and a paper-mode run "
               "neither downloads it nor calls a judge.")
LACKING_ADDS = ("A live run adds the judges' accuracy against the physicians: macro-F1, "
                "sensitivity and specificity, the judges' placement among the physicians, "
                "their agreement and this run's corrected criterion-met rates (the smoke "
                "profile grades the compendium's format fixture; a real run grades the "
                "file's rows on the Psych subset).")
SLICING_NAMES = {"category": "the file's category", ja.THEME: "HealthBench theme",
                 ja.PSYCH_CATEGORY: "Psych category"}
"""How the chapter names the three slicings (``judge_accuracy.SLICINGS``)."""


# --- the rows ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetaEval:
    """Live: the rows to grade, their physician labels, the judges that will grade them, and
    this run's own verdicts (07) whose criterion-met rates the chapter corrects."""

    rows: list[ja.MetaEvalRow]
    source: str
    judges: list[str]
    template: str
    n_in_file: int
    coverage: pd.DataFrame
    """``judge_accuracy.coverage`` of the file's rows over the run's subsets."""
    themes: dict[str, str]
    """HealthBench theme by prompt id (01's corpus)."""
    psych_categories: dict[str, str]
    """Modal clinician category by prompt id (05's ``categories_v1.csv``, with a majority)."""
    conversations: list[Conversation]
    """01's corpus (simulator faults that name a ``prompt_id`` resolve against it)."""
    run_verdicts: pd.DataFrame
    """07's verdicts of the first reply of each conversation."""

    @property
    def empty(self) -> bool:
        """No row of the file is on a conversation of the subset: nothing to grade."""
        return not self.rows

    @property
    def labels(self) -> pd.DataFrame:
        return ja.labels_table(self.rows, self.themes, self.psych_categories)

    @property
    def physicians(self) -> pd.DataFrame:
        return ja.physician_labels(self.rows, self.themes, self.psych_categories)

    @property
    def n_in_subset(self) -> int:
        return int(self.coverage.loc[self.coverage["subset"] == ja.UNION, "rows"].iloc[0])

    def view(self) -> Tables:
        coverage = Table(self.coverage.set_index("subset"), caption=(
            "Coverage of the Psych subsets by physician-labelled rows: the rows, the "
            "conversations they are on, and their share of the subset's conversations"))
        if self.empty:
            return Tables([coverage], note="No row of the file is on a conversation of the "
                          "Psych subset, so nothing is graded.")
        labels = self.labels
        by_cat = labels.groupby("category").agg(rows=("row", "size"),
                                                conversations=("prompt_id", "nunique"),
                                                majority_met=("majority", "mean"))
        what = ("HealthBench's meta-evaluation file (verified by content)"
                if self.source == "registry" else
                "the compendium's format fixture (its completions script the simulator's "
                "verdicts)")
        kept = ("" if self.n_in_subset == len(self.rows) else
                f" (the first {len(self.rows):,} of them, max_rows)")
        note = (f"Of the {count(self.n_in_file, 'row')} of {what}, "
                f"{count(self.n_in_subset, 'row')} are on conversations of the Psych subset: "
                f"the statistics use {ja.UNION} (a row counts when its conversation is in any "
                f"of the three){kept}. Graded: {count(len(self.rows), 'row')}, "
                f"{count(labels['prompt_id'].nunique(), 'conversation')}, "
                f"{count(self.physicians['physician'].nunique(), 'physician')}, "
                f"{count(int(labels['n_physicians'].sum()), 'label')}; to be graded by the "
                f"{panel_phrase(self.judges)}. "
                f"{count(int(labels[ja.THEME].isna().sum()), 'row')} without a HealthBench theme "
                f"and {count(int(labels[ja.PSYCH_CATEGORY].isna().sum()), 'row')} without a Psych "
                "category are left out of those tables.")
        return Tables([coverage, Table(by_cat, caption="Rows per category of the file")],
                      note=note)


@dataclass(frozen=True)
class Inputs:
    """What the chapter grades (``None`` where the run has no physician labels) and what it
    lacks."""

    mode: EvaluationMode
    rows: MetaEval | None
    lacking: base.Lacking | None = None

    def view(self) -> MetaEval | base.Lacking | None:
        return self.lacking if self.lacking is not None else self.rows


@base.resolver
def meta_eval(run: StageRun, *, meta_eval: str, max_rows: int | None,
              judges: list[str] | None) -> Inputs:
    """Live: the rows (``meta_eval``: the registry's file, checked line by line and its prompt
    ids against HealthBench's 5,000, or the format fixture scripted for the judges) on the
    conversations of 05's subsets (v1 ∪ v2 ∪ Hard; ``judge_accuracy.coverage`` says how much
    of each they cover), the first ``max_rows`` of them, each conversation's theme (01's
    corpus) and modal clinician category (05), the grader template (sha256-checked) and 07's
    verdicts; ``judges`` (``None``: the study's panel) grade them. Paper: no physician labels
    (:data:`LACKING_WHY`)."""
    if run.mode != graph.LIVE:
        return Inputs(graph.PAPER, None, base.lacking(STAGE, run.mode, why=LACKING_WHY,
                                                      adds=LACKING_ADDS))
    panel_judges = list(study.JUDGE_PANEL) if judges is None else list(judges)
    stage = run.stage
    if meta_eval == "fixture":
        everything = ja.check_rows(ja.fixture_rows(panel_judges), where="format fixture")
    else:
        ids = corpus.screening_ids(stage.fetch("screening_labels"))
        everything = ja.read_meta_eval(stage.fetch(ja.ARTIFACT), ids)
    index = subset_files.read_index(stage.upstream(graph.SUBSET, graph.SUBSET_INDEX))
    subsets = {key: subset_files.stage_ids(stage, key) for key in index}
    rows = ja.in_subsets(everything, subsets)[:max_rows]
    held = corpus.load_recorded(stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))
    themes = {c.prompt_id: t for c in held if (t := ja.theme_of(c.example_tags)) is not None}
    cats = subset_files.read_categories(stage.upstream(graph.SUBSET, graph.CATEGORIES_V1))
    psych = {f"{pid}": tags[0].split(":", 1)[1]
             for pid, tags in breakdowns.category_tags(cats).items()}
    template = grading.load_template(stage.fetch(grading.TEMPLATE_ARTIFACT))
    return Inputs(graph.LIVE, MetaEval(rows, meta_eval, panel_judges, template, len(everything),
                                       ja.coverage(everything, subsets), themes, psych, held,
                                       _first_replies(run)))


def _first_replies(run: StageRun) -> pd.DataFrame:
    """07's verdicts of each conversation's first reply."""
    verdicts = panel.read_verdicts(run.stage.upstream(graph.GRADING, graph.VERDICTS))
    if "sample" in verdicts.columns:
        verdicts = verdicts[verdicts["sample"].fillna(0) == 0]
    return verdicts


# --- what it costs -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """What grading the rows costs, per judge, before anything is sent."""

    table: pd.DataFrame
    batch: bool
    mean_input_tokens: float

    @property
    def total_usd(self) -> float:
        return float(self.table["usd"].sum())

    def view(self) -> Tables:
        route = "through the batch APIs" if self.batch else "synchronously"
        note = (f"Planned before anything is sent: one call per row and judge, {route}, about "
                f"{self.mean_input_tokens:,.0f} prompt tokens per call (4 characters a token) "
                f"and {plans.JUDGE_OUTPUT_TOKENS} written, at the model registry's prices: "
                f"${self.total_usd:,.4f} in all (re-asks and answers already in the store "
                "not counted; llm.max_cost caps what a stage may spend).")
        return Tables([Table(self.table.set_index("judge"), caption="Cost plan")], note=note)


@base.needs
def cost_plan(rows: MetaEval, *, llm: LLMSettings) -> Plan:
    """Calls, tokens and USD per judge for grading the rows once: the engine's token estimate
    of each filled grader prompt, the cost plan's assumed verdict length and the prices of the
    registry ``llm`` names, through the batch APIs when ``llm.mode`` is batch
    (``judge_accuracy.cost_rows``)."""
    from hbpsych_utils.llm.models import profile_registry

    chars = [ja.request_chars(r, rows.template) for r in rows.rows]
    mean_tokens = sum(plans.tokens(c) for c in chars) / len(chars)
    batch = llm.mode == "batch"
    table = ja.cost_rows(len(rows.rows), mean_tokens, rows.judges,
                         profile_registry(llm.registry_file), batch=batch,
                         output_tokens=plans.JUDGE_OUTPUT_TOKENS)
    return Plan(table, batch, mean_tokens)


# --- the judges' verdicts ------------------------------------------------------------------------

@dataclass(frozen=True)
class Graded:
    """Live: every (judge, row) verdict, joined with the physician majority."""

    source: MetaEval
    verdicts: pd.DataFrame
    """judge, row, criteria_met (None: excluded), recovered, excluded, attempts, reason."""
    spend_usd: float
    paid_earlier: float
    """USD earlier attempts of this grading paid for answers this one reused from the store."""

    @property
    def joined(self) -> pd.DataFrame:
        """Each judge's verdicts with the physician majority."""
        return ja.with_truth(self.verdicts, self.source.labels)

    @property
    def rated(self) -> pd.DataFrame:
        """:attr:`joined` and the panel's verdicts (the judges' majority) as one more rater."""
        v = self.verdicts[["judge", "row", "criteria_met"]]
        both = pd.concat([v, ja.panel_verdicts(v, self.source.judges)], ignore_index=True)
        return ja.with_truth(both, self.source.labels)

    @property
    def empty(self) -> bool:
        """No judge returned a verdict on any row: nothing to compare with the physicians."""
        return self.joined.empty

    @property
    def n_excluded(self) -> int:
        return int(self.verdicts["excluded"].sum())

    def view(self) -> Tables:
        v = self.verdicts
        g = v.groupby("judge", sort=False)
        frame = pd.DataFrame({"rows": g.size(), "met": g["criteria_met"].apply(
            lambda s: int((s == True).sum())),  # noqa: E712 - None is neither
            "not_met": g["criteria_met"].apply(lambda s: int((s == False).sum())),  # noqa: E712
            "recovered": g["recovered"].sum().astype(int),
            "reasked": g["attempts"].apply(lambda s: int((s > 1).sum())),
            "excluded": g["excluded"].sum().astype(int)})
        note = (f"This grading paid ${self.spend_usd:,.4f} (answers already in the store cost "
                "nothing)" + (f"; earlier attempts in this run folder paid "
                              f"${self.paid_earlier:,.4f} for the answers it reused"
                              if self.paid_earlier else "")
                + ". An excluded verdict is left out of every statistic, never read as not met."
                + (" No judge returned a verdict on any row, so nothing is compared with the "
                   "physicians." if self.empty else ""))
        return Tables([Table(frame, caption="Verdicts per judge")], note=note)


@base.needs
def grade(rows: MetaEval, run: StageRun, *, temperature: float, max_tokens: int,
          max_reasks: int) -> Graded:
    """Every row graded by every judge through the run's engine, with the reference grader
    template (``judge_accuracy.grader_prompt``) at ``temperature`` and ``max_tokens`` (the
    study's grading settings), a missing verdict re-asked at most ``max_reasks`` times
    (``panel.grade_requests``); the plan was shown first."""
    requests = [grading.GraderRequest(
        prompt_id=ja.row_key(i), criterion_index=0, system=grading.SYSTEM_MESSAGE,
        user=ja.grader_prompt(rows.template, r), max_tokens=max_tokens,
        temperature=temperature) for i, r in enumerate(rows.rows)]
    with run.open_engine(conversations=rows.conversations) as engine:
        done = panel.grade_requests(engine, requests, rows.judges, candidate=GRADE_TAG,
                                    max_reasks=max_reasks, mode=run.llm.mode, tag=GRADE_TAG)
        earlier = engine.paid_earlier(done.keys, done.run_ids)
    verdicts = done.verdicts.rename(columns={"prompt_id": "row"}).drop(
        columns=["candidate", "criterion_index"])
    return Graded(rows, verdicts, float(done.spend_totals()["spend_usd"]), earlier)


# --- against the physician majority ----------------------------------------------------------

@dataclass(frozen=True)
class Accuracy:
    """Per judge and the panel, per slice: counts, macro-F1, each class's F1, sensitivity and
    specificity with conversation-clustered bootstrap intervals."""

    table: pd.DataFrame
    """By the file's category (``all`` first)."""
    graded: Graded
    by_theme: pd.DataFrame
    by_psych_category: pd.DataFrame
    level: float
    """The level of the sensitivity and specificity intervals."""

    def view(self) -> Tables:
        t = self.table
        overall = t[t["category"] == "all"].set_index("judge")[[
            "n", "macro_f1", "f1_met", "f1_not_met", "sensitivity", "sensitivity_low",
            "sensitivity_high", "specificity", "specificity_low", "specificity_high"]]
        per = [Table(frame.pivot(index="judge", columns="category", values="macro_f1"),
                     caption="Macro-F1 against the physician majority, by "
                     f"{SLICING_NAMES[by]}", value_kind="score",
                     notes=[_undefined_note(_accuracy_undefined(frame, ("macro_f1",)),
                                            self.level)])
               for by, frame in (("category", t[t["category"] != "all"]),
                                 (ja.PSYCH_CATEGORY, self.by_psych_category),
                                 (ja.THEME, self.by_theme)) if not frame.empty]
        labels = self.graded.source.labels
        note = (f"The panel is the majority of the judges on a row all of them graded (with an "
                "even number of judges a tie is not met). Rows without a Psych category "
                f"({count(int(labels[ja.PSYCH_CATEGORY].isna().sum()), 'row')}) or a "
                f"HealthBench theme ({count(int(labels[ja.THEME].isna().sum()), 'row')}) are "
                "left out of those tables. Every count and interval is in "
                f"{ACCURACY_FILE}.")
        why = _undefined_note(_accuracy_undefined(t[t["category"] == "all"], ACCURACY_SHOWN),
                              self.level)
        return Tables([
            Table(overall, caption="Each judge and the panel against the physician majority "
                  f"(all rows; {level_text(self.level)} intervals resample conversations)",
                  level=self.level, notes=[why]), *per], note=note)


@base.needs
def accuracy(graded: Graded, *, n_resamples: int, seed: int, level: float) -> Accuracy:
    """Each judge and the panel (the judges' majority, ``judge_accuracy.panel_verdicts``)
    against the physician majority, overall and per the file's category, per HealthBench theme
    and per Psych category (``judge_accuracy.against_majority``), with ``n_resamples`` seeded
    clustered intervals at ``level`` for sensitivity and specificity
    (``judge_accuracy.sens_spec_table``)."""
    rated = graded.rated
    tables = {}
    for by in ja.SLICINGS:
        overall = by == "category"
        base_table = ja.against_majority(rated, by, overall=overall)
        cis = ja.sens_spec_table(rated, by, overall=overall, n_resamples=n_resamples,
                                 seed=seed, level=level)
        tables[by] = ja.with_intervals(base_table, cis)
    return Accuracy(tables["category"], graded, _labelled(tables[ja.THEME], ja.THEME),
                    _labelled(tables[ja.PSYCH_CATEGORY], ja.PSYCH_CATEGORY), level)


def _labelled(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """A slicing's table with its slices by readers' names (categories via
    ``study.CATEGORY_LABELS``) and the slicing named in column ``slicing``."""
    if frame.empty:
        return frame.assign(slicing=pd.Series(dtype=object))
    names = [study.category_label(c) if by == ja.PSYCH_CATEGORY else str(c)
             for c in frame["category"]]
    return frame.assign(category=names, slicing=by)


# --- what is undefined, said under a table -------------------------------------------------------

UNDEFINED = vocabulary.MISSING
"""How the chapter shows an undefined value ("—", as the vocabulary shows any value it does
not have; the reason is said under its table)."""
ACCURACY_SHOWN = ("macro_f1", "f1_met", "f1_not_met", "sensitivity", "specificity",
                  "sensitivity_low", "specificity_low")
"""The fields of the accuracy tables whose undefined values the chapter explains (an
interval's by its low end)."""


def _rater(name: str) -> str:
    return "Panel (majority of the judges)" if name == ja.PANEL else study.display_name(name)


def _where(slice_name: str) -> str:
    return "all rows" if slice_name == "all" else vocabulary.term_label(slice_name)


def _accuracy_undefined(frame: pd.DataFrame, fields: tuple[str, ...]
                        ) -> list[tuple[str, str, str, str]]:
    """The undefined values of ``fields`` an accuracy table shows, with their reasons."""
    if "undefined" not in frame.columns:
        return []
    return [(_rater(r["judge"]), _where(r["category"]), name, reason)
            for _, r in frame.iterrows()
            for name, reason in ja.reasons_of(r["undefined"]).items() if name in fields]


def _field_label(name: str, level: float) -> str:
    """The column an undefined value is in, as the table labels it (an interval's by either
    end, ``sensitivity_low`` or ``low``)."""
    for end in ("low", "high"):
        if name.endswith(end):
            return vocabulary.label(name.removesuffix(end) + "interval", level)
    return vocabulary.label(name, level)


def _undefined_note(items: list[tuple[str, str, str, str]], level: float) -> str:
    """Under a table: each reason once, with the (rater, slice, value) it leaves undefined;
    "" when every value is defined."""
    if not items:
        return ""
    by_reason: dict[str, list[str]] = {}
    for who, where, name, reason in items:
        what = _field_label(name, level) if name not in ("macro_f1", "balanced_f1") else None
        by_reason.setdefault(reason, []).append(
            f"{who} on {where}" + (f" ({what})" if what else ""))
    parts = [f"{reason}: {', '.join(dict.fromkeys(cells))}" for reason, cells in
             by_reason.items()]
    return (f"{UNDEFINED} marks a value that is undefined, never counted as 0 (a class one "
            "side never uses has no precision or no recall, so no F1, and simple-evals reports "
            "none there; an interval needs two conversations). Here: "
            f"{'; '.join(parts)}.")


# --- among the physicians --------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """HealthBench's pairwise balanced F1 of judges and physicians, per category, and the
    figure."""

    table: pd.DataFrame
    figure: Figure | figures.CachedFigure
    by_theme: pd.DataFrame
    by_psych_category: pd.DataFrame
    level: float

    def view(self) -> Together:
        frames = [(self.table, "Pairwise balanced F1 by the file's category: each judge and "
                   "the panel against every physician label, and the physicians' "
                   "leave-one-out F1")]
        frames += [(frame, f"Pairwise balanced F1 by {SLICING_NAMES[by]}")
                   for by, frame in ((ja.PSYCH_CATEGORY, self.by_psych_category),
                                     (ja.THEME, self.by_theme)) if not frame.empty]
        tables = [Table(_placement_summary(frame), caption=caption, value_kind="score",
                        notes=[_undefined_note(_pairwise_undefined(frame), self.level)])
                  for frame, caption in frames]
        shown = figures.Captioned(self.figure, f"{FIGURE_LABEL}. {FIGURE_TITLE}",
                                  FIGURE_CAPTION)
        return Together([Tables(tables), shown])


def _placement_summary(t: pd.DataFrame) -> pd.DataFrame:
    """Judges and the panel by slice, then the physicians pooled, lowest and highest."""
    judges = t[t["kind"].isin(["judge", "panel"])].pivot(index="rater", columns="category",
                                                          values="balanced_f1")
    judges.index.name = None
    phys = t[t["kind"] == "physician"].groupby("category")["balanced_f1"]
    pooled = t[t["kind"] == "physicians"].set_index("category")["balanced_f1"]
    extra = pd.DataFrame([pooled, phys.min(), phys.max()],
                         index=["Physicians pooled", "Physicians (lowest)",
                                "Physicians (highest)"])
    out = pd.concat([judges, extra])
    cols = [*(["all"] if "all" in out.columns else []),
            *sorted(c for c in out.columns if c != "all")]
    return out[cols]


def _pairwise_undefined(table: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """The undefined values a pairwise summary shows: each judge's and the panel's, the
    physicians pooled, and a slice where no physician's leave-one-out F1 is defined."""
    out = []
    for _, r in table.iterrows():
        reason = ja.reasons_of(r["undefined"]).get("balanced_f1")
        if reason and r["kind"] != "physician":
            who = "the physicians pooled" if r["kind"] == "physicians" else _rater(r["rater"])
            out.append((who, _where(r["category"]), "balanced_f1", reason))
    phys = table[table["kind"] == "physician"]
    for category, g in phys.groupby("category", sort=True):
        if g["balanced_f1"].isna().all():
            out.append(("every physician", _where(str(category)), "balanced_f1",
                        "no physician's leave-one-out F1 is defined"))
        elif g["balanced_f1"].isna().any():
            out.append((f"{int(g['balanced_f1'].isna().sum())} of {len(g)} physicians "
                        "(left out of the lowest and highest)", _where(str(category)),
                        "balanced_f1", "a physician's leave-one-out F1 undefined"))
    return out


@base.needs
def placement(graded: Graded, *, level: float, cache: Path) -> Placement:
    """Each judge's and the panel's pairwise balanced F1 against the physicians and each
    physician's leave-one-out F1 against the others (``judge_accuracy.pairwise_f1``), per the
    file's category (with the placement figure; ``cache`` keeps figures drawn before), per
    Psych category and per HealthBench theme (``level``: the chapter's interval level, named
    where an undefined interval is explained)."""
    rated, physicians = graded.rated, graded.source.physicians
    table = ja.pairwise_f1(rated, physicians)
    fig = figures.f1_placement(table, title=FIGURE_TITLE, cache=cache)
    return Placement(table, fig,
                     _labelled(ja.pairwise_f1(rated, physicians, ja.THEME, overall=False),
                               ja.THEME),
                     _labelled(ja.pairwise_f1(rated, physicians, ja.PSYCH_CATEGORY,
                                              overall=False), ja.PSYCH_CATEGORY), level)


@dataclass(frozen=True)
class Agreement:
    """Gwet's AC1 among the judges on the rows at least two of them graded (NaN: one judge)."""

    value: float
    n_rows: int
    n_judges: int

    def view(self) -> Note:
        if math.isnan(self.value):
            return Note("One judge only: agreement among judges needs two.")
        return Note(f"Gwet's AC1 among the {count(self.n_judges, 'judge')} on the "
                    f"{self.n_rows:,} rows at least two of them graded: **{self.value:.3f}** "
                    "(met / not met).")


@base.needs
def agreement(graded: Graded) -> Agreement:
    """Gwet's AC1 among the judges over the rows (``judge_accuracy.judges_ac1``)."""
    value, n = ja.judges_ac1(graded.joined)
    return Agreement(value, n, len(graded.source.judges))


# --- a criterion-met rate, corrected ---------------------------------------------------------

@dataclass(frozen=True)
class Corrected:
    """Each judge's criterion-met rate on this run's grading, corrected (Rogan-Gladen)."""

    rates: list[ja.CorrectedRate]
    level: float
    """The level of the corrected rates' intervals."""

    @property
    def empty(self) -> bool:
        """No judge graded both this run's replies and the rows."""
        return not self.rates

    @property
    def table(self) -> pd.DataFrame:
        """One row per rate (``corrected_rates.csv``); why a value is undefined is said under
        the chapter's table."""
        return pd.DataFrame([{k: v for k, v in r.__dict__.items() if k != "interval_undefined"}
                             for r in self.rates])

    def view(self) -> Tables | Note:
        if self.empty:
            return Note("No judge graded both this run's replies (07) and the rows, so no "
                        "criterion-met rate can be corrected.")
        shown = self.table.set_index("judge")[[
            "n_verdicts", "observed", "sensitivity", "specificity", "corrected", "low", "high"]]
        note = ("The share of this run's criteria (07, first reply) each judge calls met, and "
                "the rate it implies once the judge's sensitivity and specificity against the "
                "physicians are taken out: (observed + specificity - 1) / (sensitivity + "
                "specificity - 1), clipped to [0, 1]. The interval resamples this run's "
                "conversations and the calibration rows' conversations together, so the "
                "calibration's own uncertainty widens it. It assumes that what physicians "
                "said of HealthBench's completions stands in for what they would say of the "
                "candidates' replies: the judge errs at the same rates on both.")
        why = _undefined_note([(_rater(r.judge), "this run", name, reason)
                               for r in self.rates
                               for name, reason in ja.corrected_undefined(r).items()],
                              self.level)
        return Tables([Table(shown, caption="Criterion-met rates, observed and corrected",
                             level=self.level, notes=[why])], note=note)


@base.needs
def corrected(acc: Accuracy, *, n_resamples: int, seed: int, level: float) -> Corrected:
    """For each judge that graded both this run (07's verdicts, the first reply) and the rows,
    and for the panel (the judges' majority on each criterion of each reply, and on each row):
    its criterion-met rate and the Rogan-Gladen correction with an interval of ``n_resamples``
    seeded resamples at ``level`` that resamples both (``judge_accuracy.corrected_rate``). The
    transfer assumption: the judge's sensitivity and specificity on HealthBench's completions,
    against physicians, hold on the candidates' replies."""
    source = acc.graded.source
    keys = ["candidate", "prompt_id", "criterion_index"]
    mine = source.run_verdicts
    run_panel = ja.panel_verdicts(mine[["judge", *keys, "criteria_met"]], source.judges, keys)
    verdicts = pd.concat([mine, run_panel], ignore_index=True)
    rated = acc.graded.rated
    rates = []
    for judge in [*source.judges, ja.PANEL]:
        own = verdicts[verdicts["judge"] == judge]
        cal = rated[rated["judge"] == judge]
        if own["criteria_met"].notna().any() and not cal.empty:
            rates.append(ja.corrected_rate(judge, own, cal, n_resamples=n_resamples,
                                           seed=seed, level=level))
    return Corrected(rates, level)


# --- metrics, outputs, findings ------------------------------------------------------------------

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


def findings(m: JudgeAccuracyMetrics, *, close: float = study.F1_CLOSE,
             min_rows: int = study.SLICE_MIN_N,
             min_pairs: int = study.PHYSICIAN_RANGE_MIN_PAIRS) -> Findings | None:
    """The sentences of "What we found", from 15's metrics; ``None`` without a verdict on any
    row (the chapter said why above).

    How much of the Psych subset the labelled rows cover; each judge's and the panel's macro-F1
    against the physician majority with its sensitivity and specificity; whether its pairwise
    balanced F1 is within the physicians' range (the lowest to the highest leave-one-out F1 of
    the physicians with at least ``min_pairs`` label pairs: :func:`placed_in_range`), above or
    below it, and the category of at least ``min_rows`` rows where it falls furthest below the
    physicians pooled (by more than ``close``); AC1 among the judges; the range of the corrected
    criterion-met rates. On the fixture, a reminder that its verdicts are scripted."""
    if not m.against_majority:
        return None
    out = []
    if m.source == "fixture":
        out.append("These rows are the format fixture and the simulator's verdicts on them are "
                   "scripted: the numbers check the chapter's arithmetic, not any judge.")
    union = (m.coverage or {}).get(ja.UNION)
    if union is not None and union.subset_conversations:
        out.append(f"The physicians' labels cover {union.conversations:,} of the "
                   f"{union.subset_conversations:,} conversations of {ja.UNION} "
                   f"({union.share:.1%}); {count(union.rows, 'labelled row')} of the file's "
                   f"{m.n_rows_in_file or 0:,} are on them.")
    out.append(f"On {count(m.n_rows or 0, 'row')} ({count(m.n_conversations or 0, 'conversation')}"
               f", {count(m.n_physicians or 0, 'physician')}):")
    out += _rater_sentences(m, close, min_rows, min_pairs)
    if m.judges_ac1 is not None:
        out.append(f"The judges agree with one another at AC1 {m.judges_ac1:.3f}.")
    shifts = {}
    for j, r in (m.corrected or {}).items():
        if r.corrected is not None:
            shifts[j] = r.corrected - r.observed
    if shifts:
        out.append(f"Corrected for each judge's errors, this run's criterion-met rates move "
                   f"by {min(shifts.values()):+.3f} to {max(shifts.values()):+.3f}.")
    if m.n_excluded:
        out.append(f"{count(m.n_excluded, 'verdict')} never came and are left out.")
    return Findings(out)


def _rater_sentences(m: JudgeAccuracyMetrics, close: float, min_rows: int,
                     min_pairs: int) -> list[str]:
    """Each judge's and the panel's accuracy, its place among the physicians and its worst
    slice."""
    pooled = (m.pairwise or {}).get("physicians", {})
    span = physician_range(m, min_pairs)
    out = []
    for judge, cats in (m.against_majority or {}).items():
        a = cats["all"]
        reaches = (f"reaches macro-F1 {_f(a.macro_f1)}" if a.macro_f1 is not None else
                   "has no macro-F1 (undefined: "
                   f"{md_text((a.undefined or {}).get('macro_f1', 'a class never used'))})")
        out.append(f"{md_text(_rater(judge))} {reaches} "
                   f"against the physician majority (sensitivity {_f(a.sensitivity)}, "
                   f"specificity {_f(a.specificity)})"
                   f"{placed_in_range(judge, m, span, min_pairs)}"
                   f"{_worst(judge, m, pooled, close, min_rows)}.")
    return out


def _f(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def physician_range(m: JudgeAccuracyMetrics, min_pairs: int = study.PHYSICIAN_RANGE_MIN_PAIRS
                    ) -> tuple[float, float, int] | None:
    """The lowest and highest leave-one-out balanced F1 (all rows) of the physicians with at
    least ``min_pairs`` label pairs, and how many they are; ``None`` with fewer than two."""
    values = [cats["all"].balanced_f1 for cats in (m.pairwise or {}).values()
              if "all" in cats and cats["all"].kind == "physician"
              and cats["all"].pairs >= min_pairs and cats["all"].balanced_f1 is not None]
    return (min(values), max(values), len(values)) if len(values) >= 2 else None


def placed_in_range(rater: str, m: JudgeAccuracyMetrics,
                    span: tuple[float, float, int] | None,
                    min_pairs: int = study.PHYSICIAN_RANGE_MIN_PAIRS) -> str:
    """"; its pairwise balanced F1 (x) is within / above / below the physicians' range (lo–hi,
    n physicians)", or why there is no range, or why its F1 is undefined; empty without the
    rater's pairwise F1."""
    mine = (m.pairwise or {}).get(rater, {}).get("all")
    if mine is None:
        return ""
    if mine.balanced_f1 is None:
        why = (mine.undefined or {}).get("balanced_f1", "a class never used")
        return f"; its pairwise balanced F1 is undefined ({md_text(why)}), so it is not placed"
    value = mine.balanced_f1
    if span is None:
        return (f"; its pairwise balanced F1 is {value:.3f}, with no physicians' range to place "
                f"it in (fewer than two physicians with {min_pairs} label pairs)")
    lo, hi, n = span
    where = "within" if lo <= value <= hi else ("above" if value > hi else "below")
    return (f"; its pairwise balanced F1 ({value:.3f}) is {where} the physicians' range "
            f"({lo:.3f}–{hi:.3f}, leave-one-out, {count(n, 'physician')} with at least "
            f"{min_pairs} label pairs)")


def _worst(judge: str, m: JudgeAccuracyMetrics, pooled: dict[str, PairwiseF1], close: float,
           min_rows: int) -> str:
    """"; furthest below the physicians pooled on <slice> (gap)", over the slices where both
    the judge's and the pooled F1 are defined: an undefined F1 is never read as a gap."""
    mine = (m.pairwise or {}).get(judge, {})
    rows = m.against_majority.get(judge, {}) if m.against_majority else {}
    gaps = {}
    for c, v in mine.items():
        other = pooled[c].balanced_f1 if c in pooled else None
        if (c != "all" and v.balanced_f1 is not None and other is not None and c in rows
                and rows[c].n >= min_rows):
            gaps[c] = v.balanced_f1 - other
    worst = min(gaps, key=lambda c: (gaps[c], c)) if gaps else None
    if worst is None or gaps[worst] >= -close:
        return ""
    named = md_text(breakdowns.label(worst))  # a category as prose names it
    return f"; furthest below the physicians pooled on {named} ({gaps[worst]:+.3f})"

