"""Chapter 10, refusals: each model's refused conversations on one subset, and scores without them.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`census` (the
resolver: who refused which conversation, from the released anomaly log in paper mode, with
transient empties set aside, or from this run's responses in live mode; and this run's
per-conversation scores of the subset where it has them), :func:`sensitivity` (panel scores
with the refused conversations left out; it needs per-conversation scores), :func:`metrics`,
:func:`write` (``refusals.csv``, ``sensitivity.csv`` with scores, ``metrics.json``) and
:func:`findings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import generation, refusals
from hbpsych_utils.evaluation.score_sources import EvaluationMode, evaluation_source
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import RefusalsMetrics, SensitivityRow
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.REFUSALS
REFUSALS_TABLE = "refusals.csv"
SENSITIVITY_TABLE = "sensitivity.csv"
start = base.starter(STAGE)


@dataclass(frozen=True)
class Census:
    """The refusals of one subset, however found: one row per (model, conversation) with its
    category, the count per model, the refused ids per model, and (paper mode) how many empty
    replies were transport failures, re-requested and not counted; with this run's
    per-conversation panel scores of the subset where it has them."""

    mode: EvaluationMode
    subset: str
    table: pd.DataFrame
    counts: dict[str, int]
    by_model: dict[str, list[str]]
    n_replaced: int
    source: str
    """Where it comes from, as a phrase."""
    n_replies: int | None = None
    """Live: this run's replies to the subset's conversations."""
    panel_long: pd.DataFrame | None = None
    """Per-(candidate, conversation) panel scores (live, a graded subset)."""
    missing: str = ""
    """Why there is no sensitivity analysis (empty when there is one)."""

    @property
    def scored(self) -> Census | None:
        """This census when the run has per-conversation scores (what the sensitivity
        analysis needs), else ``None``."""
        return None if self.panel_long is None else self

    def view(self) -> Table | Note:
        title = study.SUBSET_TITLES[self.subset]
        missing = f" {self.missing}" if self.missing else ""
        if self.n_replies == 0:
            return Note(f"This run generated no reply to a conversation of {md_text(title)}, "
                        "so there is nothing to count.")
        if self.table.empty:
            return Note(f"No model refused a conversation of {md_text(title)} "
                        f"({md_text(self.source)}).{missing}")
        return Table(self.table, caption=f"Refused conversations on {title} ({self.source})",
                     index=False, notes=[missing.strip()])


@base.resolver
def census(run: StageRun, *, subset: str) -> Census:
    """Who refused which conversation of ``subset``.

    Paper mode: the released anomaly log (``refusals.refusal_census``; an empty reply that a
    correction later replaced as a transient failure is not a refusal). Live mode: this run's
    responses (``refusals.refused``: an empty reply with a refusal stop reason or flag), and
    this run's panel scores of the subset where it graded any."""
    ids = subset_files.stage_ids(run.stage, subset)
    categories = subset_files.read_categories(
        run.stage.upstream(graph.SUBSET, graph.CATEGORIES_V1)).to_dict()
    if run.mode != graph.LIVE:
        found = refusals.refusal_census(
            refusals.read_error_log(run.stage.fetch("run_errors")), prompt_ids=ids)
        table = found.refusals.assign(category=lambda d: d.prompt_id.map(categories))
        return Census(graph.PAPER, subset, table, found.counts(), found.by_model(),
                      len(found.replaced), "the released anomaly log",
                      missing="The sensitivity analysis needs per-conversation scores, which "
                              "a live run makes.")
    responses = generation.read_responses(run.stage.upstream(graph.GENERATION, graph.RESPONSES))
    responses = responses[responses.prompt_id.isin(ids)]
    table = refusals.refused(responses, categories=categories)
    scores = evaluation_source(run.stage, subset, mode=graph.LIVE)
    return Census(graph.LIVE, subset, table,
                  refusals.refusal_counts(table, sorted(responses.model.unique())),
                  refusals.refused_by_model(table), 0, "this run's responses",
                  n_replies=len(responses),
                  panel_long=None if scores is None else scores.panel_long,
                  missing="" if scores is not None else (
                      f"This run graded no conversation of {study.SUBSET_TITLES[subset]}, so "
                      "there is no sensitivity analysis."))


@dataclass(frozen=True)
class Sensitivity:
    """Each candidate's panel score with and without its refused conversations."""

    frame: pd.DataFrame

    def view(self) -> Table:
        return Table(self.frame, caption="Panel score with and without the refused "
                     "conversations (the difference: without minus with)")


@base.needs
def sensitivity(found: Census) -> Sensitivity:
    """Each candidate's panel score with and without its refused conversations
    (``refusals.sensitivity``). Needs per-conversation scores (``Census.scored``)."""
    assert found.panel_long is not None
    return Sensitivity(refusals.sensitivity(found.panel_long, found.by_model))


def metrics(found: Census, sens: Sensitivity | None) -> RefusalsMetrics:
    """10's metrics: counts and refused ids per model, transient empties set aside (paper), the
    sensitivity rows (with scores)."""
    extra: dict[str, Any] = {}
    if sens is not None:
        extra["sensitivity"] = [SensitivityRow(**row) for row in
                                sens.frame.reset_index().to_dict(orient="records")]
    return RefusalsMetrics(mode=found.mode, subset=found.subset, refusals=found.counts,
                           refused_conversations=found.by_model,
                           n_replaced_transient=found.n_replaced, **extra)


def write(run: StageRun, m: RefusalsMetrics, found: Census,
          sens: Sensitivity | None) -> Written:
    """The refused conversations, the sensitivity table (with scores) and ``metrics.json``."""
    files: dict[str, pd.DataFrame] = {REFUSALS_TABLE: found.table}
    if sens is not None:
        files[SENSITIVITY_TABLE] = sens.frame
    return base.write(run, m, tables=files)


def findings(m: RefusalsMetrics) -> Findings:
    """The sentences of "What we found", from 10's metrics.

    Who refused how many conversations (or that nobody did); with a sensitivity analysis, how
    far leaving the refused conversations out moves each refusing model's panel score; without
    one in paper mode, how many empty replies were transport failures set aside, and why there
    is no sensitivity analysis; a live run without one graded nothing of the subset.
    """
    subset = study.SUBSET_TITLES.get(m.subset, m.subset)
    if m.mode == graph.LIVE and not m.refusals:
        return Findings([f"This run generated no reply to a {subset} conversation, so there is "
                         "nothing to count."])
    refusing = {model: n for model, n in m.refusals.items() if n}
    out = [f"On {subset}, " + ", ".join(f"**{md_text(study.display_name(model))}** refused "
                                        f"{count(n, 'conversation')}"
                                        for model, n in refusing.items()) + "."
           if refusing else f"No model refused a {subset} conversation."]
    if m.sensitivity is not None:
        delta = {r.candidate: r.delta for r in m.sensitivity}
        moved = [model for model in refusing if delta.get(model) is not None]
        if moved:
            out.append("Excluding the refused conversations moves the panel score by "
                       + ", ".join(f"{md_text(study.display_name(model))}: {delta[model]:+.4f}"
                                   for model in moved)
                       + ".")
    elif m.mode == graph.LIVE:
        out.append(f"This run graded no {subset} conversation, so there is no sensitivity "
                   "analysis.")
    else:
        n = m.n_replaced_transient
        out.append(f"{count(n, 'empty reply', 'empty replies')} "
                   f"{'was a transport failure' if n == 1 else 'were transport failures'}, "
                   "re-requested and not counted. The sensitivity analysis needs "
                   "per-conversation scores (live runs).")
    return Findings(out)
