"""Chapter 10, refusals: each model's refused conversations on one subset, and scores without them.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`census` (who
refused which conversation: the released anomaly log in paper mode, with transient empties set
aside; this run's responses in live mode), :func:`sensitivity` (panel scores with the refused
conversations left out; it needs per-conversation scores, so live only), :func:`metrics`,
:func:`write` (``refusals.csv``, ``sensitivity.csv`` in live mode, ``metrics.json``) and
:func:`findings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core.config import RefusalsParams
from hbpsych_utils.core.escape import html_text, md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import generation, refusals
from hbpsych_utils.evaluation.score_sources import evaluation_source
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import RefusalsMetrics, SensitivityRow
from hbpsych_utils.reporting.display import Findings, Note, Shown, unavailable
from hbpsych_utils.reporting.vocabulary import Table
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.REFUSALS
REFUSALS_TABLE = "refusals.csv"
SENSITIVITY_TABLE = "sensitivity.csv"


start = base.starter(STAGE, RefusalsParams)


@dataclass(frozen=True, repr=False)
class Census(Shown):
    """The refusals of one subset, however found: one row per (model, conversation) with its
    category, the count per model, the refused ids per model, and (paper mode) how many empty
    replies were transport failures, re-requested and not counted."""

    subset: str
    table: pd.DataFrame
    counts: dict[str, int]
    by_model: dict[str, list[str]]
    n_replaced: int
    source: str
    """Where it comes from, as a phrase."""
    n_replies: int | None = None
    """Live: this run's replies to the subset's conversations."""

    def _repr_html_(self) -> str:
        title = study.SUBSET_TITLES[self.subset]
        if self.n_replies == 0:
            return (f"<p>This run generated no reply to a conversation of {html_text(title)}, "
                    "so there is nothing to count.</p>")
        if self.table.empty:
            return (f"<p>No model refused a conversation of {html_text(title)} "
                    f"({html_text(self.source)}).</p>")
        return Table(self.table, caption=f"Refused conversations on {title} ({self.source})",
                     index=False).html()


def _categories(run: StageRun[RefusalsParams]) -> dict[str, str]:
    return subset_files.read_categories(
        run.stage.upstream(graph.SUBSET, graph.CATEGORIES_V1)).to_dict()


def census(run: StageRun[RefusalsParams]) -> Census:
    """Who refused which conversation of ``refusals.subset``.

    Paper mode: the released anomaly log (``refusals.refusal_census``; an empty reply that a
    correction later replaced as a transient failure is not a refusal). Live mode: this run's
    responses (``refusals.refused``: an empty reply with a refusal stop reason or flag)."""
    subset = run.params.subset
    ids = subset_files.stage_ids(run.stage, subset)
    categories = _categories(run)
    if run.mode != graph.LIVE:
        found = refusals.refusal_census(
            refusals.read_error_log(run.stage.fetch("run_errors")), prompt_ids=ids)
        table = found.refusals.assign(category=lambda d: d.prompt_id.map(categories))
        return Census(subset, table, found.counts(), found.by_model(), len(found.replaced),
                      "the released anomaly log")
    responses = generation.read_responses(run.stage.upstream(graph.GENERATION, graph.RESPONSES))
    responses = responses[responses.prompt_id.isin(ids)]
    table = refusals.refused(responses, categories=categories)
    return Census(subset, table, refusals.refusal_counts(table, sorted(responses.model.unique())),
                  refusals.refused_by_model(table), 0, "this run's responses",
                  n_replies=len(responses))


def sensitivity(run: StageRun[RefusalsParams], found: Census) -> Table | Note:
    """Each candidate's panel score with and without its refused conversations
    (``refusals.sensitivity``). Needs per-conversation scores: live mode, a graded subset."""
    if run.mode != graph.LIVE:
        return unavailable("The sensitivity analysis needs per-conversation scores (live "
                           "runs).")
    source = evaluation_source(run.stage, found.subset, mode=graph.LIVE)
    if source is None or source.panel_long is None:
        return unavailable(f"This run graded no conversation of "
                           f"{study.SUBSET_TITLES[found.subset]}, so there is no sensitivity "
                           "analysis.")
    table = refusals.sensitivity(source.panel_long, found.by_model)
    return Table(table, caption="Panel score with and without the refused conversations "
                 "(the difference: without minus with)")


def metrics(run: StageRun[RefusalsParams], found: Census,
            sens: Table | Note) -> RefusalsMetrics:
    """10's metrics: counts and refused ids per model, transient empties set aside (paper), the
    sensitivity rows (live)."""
    extra: dict[str, Any] = {}
    if isinstance(sens, Table):
        extra["sensitivity"] = [SensitivityRow(**row) for row in
                                sens.frame.reset_index().to_dict(orient="records")]
    return RefusalsMetrics(mode=run.mode or graph.PAPER, subset=found.subset,
                           refusals=found.counts, refused_conversations=found.by_model,
                           n_replaced_transient=found.n_replaced, **extra)


def write(run: StageRun[RefusalsParams], m: RefusalsMetrics, found: Census,
          sens: Table | Note) -> Written:
    """The refused conversations, the sensitivity table (live) and ``metrics.json``."""
    files: dict[str, pd.DataFrame] = {REFUSALS_TABLE: found.table}
    if isinstance(sens, Table):
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
