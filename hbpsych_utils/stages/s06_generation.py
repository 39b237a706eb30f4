"""Chapter 06, candidate responses: one reply per (candidate, conversation), or the released
run's logs.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (live:
the subset's conversations in this run's corpus and the candidates; paper: the released run's
spend ledger and anomaly log, since the responses themselves are not released),
:func:`cost_plan` (what the run costs, priced three ways), :func:`responses` (live: the
generation through the LLM engine, with the plan the engine makes before anything is sent;
paper: the released generation spend per candidate and the anomalies logged while generating),
:func:`metrics`, :func:`write` and :func:`findings`.

Live writes ``responses.jsonl`` (read back by 07 and 10 with :func:`generation.read_responses`),
``summary.csv`` and ``cost_plan.csv``, and with ``samples`` > 1 the further replies in
``responses_samples.jsonl`` (each with its sample index and seed; 07 grades them, 14 reads them
for worst-at-k); paper writes ``spend_by_candidate.csv``, ``anomalies.csv`` and
``cost_plan.csv``.

The cost plan (:mod:`evaluation.cost_plan`): live, this run's candidates × its conversations;
paper, the study's design (its candidates × the released subset, measured on the conversations
the corpus holds and scaled to the subset's size). Generation and the grading the profile
configures (its judges, which the runner passes as ``judges``, ``llm.mode``,
``llm.prompt_caching``) are priced three ways: as the study ran it, as configured, optimised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subsets
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.config import GenerationParams, GradingParams
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count, were
from hbpsych_utils.evaluation import cost_plan as plans
from hbpsych_utils.evaluation import generation, grading, refusals, runlog
from hbpsych_utils.evaluation.refusals import ErrorEvent
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    GenerationLiveMetrics,
    GenerationMetrics,
    GenerationPaperMetrics,
)
from hbpsych_utils.reporting.display import Findings, Note, Shown, unavailable
from hbpsych_utils.reporting.vocabulary import Table, Tables, model_names, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.GENERATION
start = base.starter(STAGE, GenerationParams)

PLAN_FILE = "cost_plan.csv"
"""Either mode: the planned cost of the run."""
SUMMARY_FILE = "summary.csv"
"""Live: responses per candidate (beside ``responses.jsonl``)."""
SPEND_FILE = "spend_by_candidate.csv"
ANOMALIES_FILE = "anomalies.csv"
"""Paper: what the released run's ledger and anomaly log say about generation."""


# --- what is generated ---------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Conversations(Shown):
    """Live: what this run sends, every candidate on every selected conversation."""

    subset: str
    candidates: list[str]
    selected: list[Conversation]
    """The subset's conversations this run's corpus holds, by sorted id, at most
    ``n_conversations``."""
    n_in_subset: int
    corpus: list[Conversation]
    """The run's whole corpus (simulator faults may name any of its conversations)."""

    def _repr_markdown_(self) -> str:
        names = md_text(model_names(self.candidates)) if self.candidates else "none"
        return (f"{count(len(self.selected), 'conversation')} of "
                f"**{md_text(study.SUBSET_TITLES.get(self.subset, self.subset))}** "
                f"({self.n_in_subset} in the subset, {len(self.corpus)} in this run's corpus), "
                f"each sent to {count(len(self.candidates), 'candidate')}: {names}.")


@dataclass(frozen=True, repr=False)
class ReleasedLogs(Shown):
    """Paper: the released run's spend ledger and anomaly log (the responses are not
    released)."""

    spend: pd.DataFrame
    events: list[ErrorEvent]

    def _repr_markdown_(self) -> str:
        n_gen = int((self.spend["phase"] == runlog.GENERATE).sum())
        e_gen = sum(e.phase == runlog.GENERATE for e in self.events)
        return (f"The responses are not released, so this chapter reads the released run's "
                f"logs: {len(self.spend):,} charges in the spend ledger ({n_gen:,} for "
                f"generation) and {len(self.events):,} events in the anomaly log ({e_gen:,} "
                "while generating).")


def inputs(run: StageRun[GenerationParams]) -> Conversations | ReleasedLogs:
    """What the chapter works from under its mode: live, the conversations of the subset 05
    wrote that this run's corpus holds (sorted ids, the first ``n_conversations``) and the
    candidates; paper, the released spend ledger and anomaly log."""
    if run.mode != graph.LIVE:
        return ReleasedLogs(runlog.read_spend(run.stage.fetch("run_spend")),
                            refusals.read_error_log(run.stage.fetch("run_errors")))
    params = run.params
    held = corpus.load_recorded(run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))
    by_id = {c.prompt_id: c for c in held}
    wanted = subsets.stage_ids(run.stage, params.subset)
    ids = [i for i in wanted if i in by_id][:params.n_conversations]
    return Conversations(params.subset, list(params.candidates), [by_id[i] for i in ids],
                         len(wanted), held)


# --- what a run costs ------------------------------------------------------------------------

def cost_plan(run: StageRun[GenerationParams],
              source: Conversations | ReleasedLogs) -> Table | Note:
    """The planned cost of the run per (phase, model), as the study ran it, as configured and
    optimised (``cost_plan.compare``; its assumptions are in ``evaluation.cost_plan``).

    Live: this run's candidates on its selected conversations (nothing to plan without
    either); paper: the study's design on the released subset (``candidates`` or the study's
    20), measured on the conversations the corpus holds and scaled to the subset's size.
    Grading is the profile's: its ``judges`` (``None``: the study's panel), ``llm.mode``,
    ``llm.prompt_caching``."""
    from hbpsych_utils.llm.models import profile_registry

    params = run.params
    judges = GradingParams(judges=run.value("judges")).judge_panel()
    if isinstance(source, Conversations):
        if not source.selected or not source.candidates:
            return unavailable("Nothing to plan: this run has no candidate or no conversation "
                               "to generate on.")
        template = grading.load_template(run.stage.fetch(grading.TEMPLATE_ARTIFACT))
        design = plans.Design(conversations=tuple(plans.measure(source.selected, template)),
                              n_conversations=len(source.selected),
                              candidates=tuple(source.candidates), judges=tuple(judges),
                              samples=params.samples)
        what = f"this run's {count(len(source.candidates), 'candidate')} on its conversations"
        if params.samples > 1:
            what += f", {params.samples} replies each"
    else:
        held = corpus.load_recorded(run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))
        candidates = tuple(params.candidates or study.CANDIDATES)
        design = plans.study_design(params.subset, candidates=candidates, judges=tuple(judges),
                                    fetch=run.stage.fetch, held=held)
        what = (f"the study's design: {len(candidates)} candidates on "
                f"{study.SUBSET_TITLES.get(params.subset, params.subset)}, scaled from the "
                "conversations the corpus holds")
    llm = run.llm
    routings = [plans.AS_STUDY_RAN, plans.configured(llm.mode, llm.prompt_caching),
                plans.OPTIMISED]
    frame = plans.compare(design, profile_registry(llm.registry_file), routings)
    return Table(frame, caption=f"Planned cost of {what}, graded by the "
                 f"{panel_phrase(judges)}: as the study ran it, as configured, optimised",
                 index=False, lead=["model"])


# --- what was sent and what came back --------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Responses(Shown):
    """Live: the candidates' replies and what the engine planned and paid for them."""

    table: pd.DataFrame
    """One row per (candidate, conversation): ``generation.RESPONSE_COLUMNS``; per sample too,
    with ``sample`` and ``seed``, when ``samples`` > 1."""
    plan: pd.DataFrame
    """The engine's plan per model (``generation.plan_table``), made before any call."""
    plan_est_cost: float
    spend: float
    """USD this run paid (answers already in the run's store cost nothing)."""
    stopped_by_budget: bool
    paid_earlier: float = 0.0
    """USD earlier attempts of this stage paid for answers this one reused from the store."""

    @property
    def summary(self) -> pd.DataFrame:
        """Per candidate: responses (every sample), refusals, failures, tokens and cost."""
        return generation.summary(self.table)

    @property
    def spend_by_candidate(self) -> pd.Series:
        """USD per candidate, largest first."""
        return self.summary["cost"].sort_values(ascending=False).rename("usd")

    def _repr_html_(self) -> str:
        return Tables([
            Table(self.plan, caption="Cost plan (estimated before any call was sent; stored "
                  "answers are not counted)"),
            Table(self.summary, caption="Responses per candidate"),
        ])._repr_html_()


@dataclass(frozen=True, repr=False)
class ReleasedGeneration(Shown):
    """Paper: what the released logs say about generating the responses."""

    spend_by_candidate: pd.Series
    """USD per candidate charged for generation, largest first (``runlog.spend_by``)."""
    anomalies: pd.DataFrame
    """Anomalies logged while generating, per model and kind (``runlog.anomalies``)."""

    def _repr_html_(self) -> str:
        tables = [Table(self.spend_by_candidate.to_frame(),
                        caption="Generation spend per candidate")]
        if len(self.anomalies):
            tables.append(Table(self.anomalies, caption="Anomalies logged while generating"))
            return Tables(tables)._repr_html_()
        return Tables(tables, note="The generation log records no anomalies.")._repr_html_()


def responses(run: StageRun[GenerationParams],
              source: Conversations | ReleasedLogs) -> Responses | ReleasedGeneration:
    """Live: every candidate answers every selected conversation through the run's engine
    (content-addressed store: a re-run is answered from it), after the engine's cost plan is
    made (and printed). Paper: the released ledger's generation charges per candidate and the
    anomaly log's generation events."""
    if isinstance(source, ReleasedLogs):
        return ReleasedGeneration(
            runlog.spend_by(source.spend, runlog.GENERATE).rename_axis("candidate"),
            runlog.anomalies(source.events, runlog.GENERATE))
    params = run.params
    requests = generation.generation_requests(source.selected, source.candidates,
                                              temperature=params.temperature,
                                              max_tokens=params.max_tokens,
                                              samples=params.samples, seed=run.seed)
    with run.open_engine(conversations=source.corpus) as engine:
        plan = engine.plan(requests, mode=run.llm.mode)
        results = engine.run(requests, mode=run.llm.mode)
        report = engine.last_report
        earlier = engine.paid_earlier([r.key for r in results], [report.run_id])
    return Responses(generation.responses_table(results, seed=run.seed),
                     generation.plan_table(plan),
                     plan_est_cost=plan.est_cost, spend=report.spend,
                     stopped_by_budget=report.stopped_by_budget, paid_earlier=earlier)


# --- metrics, outputs, findings --------------------------------------------------------------

def metrics(source: Conversations | ReleasedLogs,
            generated: Responses | ReleasedGeneration) -> GenerationMetrics:
    """06's metrics. Live: what was asked, what came back, what it cost against the engine's
    plan (``spend_usd``: this attempt; ``spend_earlier_attempts_usd``: what earlier attempts in
    the run folder paid for the replies it reused), and the decoding configuration each
    candidate was actually sent. Paper: models
    charged, total generation spend, anomaly counts by kind."""
    if isinstance(generated, ReleasedGeneration):
        kinds = generated.anomalies.sum().to_dict() if len(generated.anomalies) else {}
        return GenerationPaperMetrics(
            mode=graph.PAPER, n_candidates_charged=int(generated.spend_by_candidate.size),
            spend_generate_usd=round(float(generated.spend_by_candidate.sum()), 4),
            anomalies={str(k): int(v) for k, v in kinds.items()})
    assert isinstance(source, Conversations)
    table, rest = generation.split_samples(generated.table)
    extra = {} if rest is None else {
        "samples": int(rest["sample"].max()) + 1, "n_sample_responses": len(rest),
        "n_sample_ok": int((rest.status == "ok").sum()),
        "n_sample_refused": int(rest.refusal.sum()),
        "n_sample_failed": int((rest.status == "failed").sum())}
    return GenerationLiveMetrics(
        mode=graph.LIVE, subset=source.subset, n_conversations=len(source.selected),
        candidates=list(source.candidates), n_responses=len(table),
        n_ok=int((table.status == "ok").sum()), n_refused=int(table.refusal.sum()),
        n_failed=int((table.status == "failed").sum()),
        spend_usd=round(float(generated.spend), 6),
        spend_earlier_attempts_usd=generated.paid_earlier,
        plan_est_cost_usd=round(generated.plan_est_cost, 6),
        decoding_sent=generation.decoding_sent(table),
        stopped_by_budget=generated.stopped_by_budget, **extra)


def write(run: StageRun[GenerationParams], m: GenerationMetrics, plan: Table | Note,
          generated: Responses | ReleasedGeneration) -> Written:
    """Live: ``responses.jsonl`` (the first reply of each), ``responses_samples.jsonl`` (the
    further samples, if any), ``summary.csv``, ``cost_plan.csv``; paper:
    ``spend_by_candidate.csv``, ``anomalies.csv``, ``cost_plan.csv``; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    first: list[str] = []
    if isinstance(generated, Responses):
        replies, rest = generation.split_samples(generated.table)
        generation.write_responses(replies, run.stage.path(graph.RESPONSES))
        first.append(graph.RESPONSES)
        if rest is not None:
            generation.write_responses(rest, run.stage.path(graph.RESPONSE_SAMPLES))
            first.append(graph.RESPONSE_SAMPLES)
        tables[SUMMARY_FILE] = generated.summary
    else:
        tables[SPEND_FILE] = generated.spend_by_candidate.to_frame()
        tables[ANOMALIES_FILE] = generated.anomalies
    if isinstance(plan, Table):
        tables[PLAN_FILE] = plan.frame
    written = base.write(run, m, tables=tables)
    return replace(written, files=[*first, *written.files])


def findings(m: GenerationMetrics, spend_by_candidate: pd.Series | None = None) -> Findings:
    """The sentences of "What we found", from 06's metrics (and, in paper mode, the spend per
    candidate, largest first, to name the most expensive).

    Live: responses, then refusals and transport failures, each stated only when there are
    any (otherwise the sentence says there were none), the spend against the plan, and the
    spend cap when it stopped the run. Paper: the charge, the anomalies logged, and a pointer
    to notebook 10 only when empty responses were logged.
    """
    if isinstance(m, GenerationLiveMetrics):
        out = [f"{m.n_responses} responses from {count(len(m.candidates), 'candidate')} on "
               f"{m.n_conversations} {study.SUBSET_TITLES.get(m.subset, m.subset)} "
               f"conversations: {m.n_ok} answered."]
        out.append(f"{count(m.n_refused, 'explicit refusal')} {were(m.n_refused)} kept as the "
                   "model's answer and "
                   "are graded as returned." if m.n_refused else "No candidate refused.")
        out.append(f"{count(m.n_failed, 'call')} failed in transport and "
                   f"{'is' if m.n_failed == 1 else 'are'} left for a re-run "
                   "(never stored as an answer)." if m.n_failed else "No call failed.")
        if m.samples is not None:
            out.append(f"Each candidate answered each conversation {m.samples} times: "
                       f"{m.n_sample_responses} further replies ({m.n_sample_ok} answered, "
                       f"{m.n_sample_refused} refused, {m.n_sample_failed} failed), each sent "
                       "with its own seed where the provider takes one.")
        if m.spend_earlier_attempts_usd:
            out.append(f"This attempt spent ${m.spend_usd:,.4f} (plan: "
                       f"${m.plan_est_cost_usd:,.4f}); earlier attempts in this run folder paid "
                       f"${m.spend_earlier_attempts_usd:,.4f} for the replies it reused from "
                       f"the store, so the replies cost "
                       f"${m.spend_usd + m.spend_earlier_attempts_usd:,.4f} in all.")
        else:
            out.append(f"Spend ${m.spend_usd:,.4f} (plan: ${m.plan_est_cost_usd:,.4f}).")
        if m.stopped_by_budget:
            out.append("The spend cap (llm.max_cost) stopped the run before every call was "
                       "sent; raise it and re-run to finish (finished calls are reused).")
        return Findings(out)
    out = [f"Generation was charged to {m.n_candidates_charged} models for a total of "
           f"**${m.spend_generate_usd:,.2f}**"
           + (f"; the most expensive was "
              f"{md_text(study.display_name(str(spend_by_candidate.index[0])))} "
              f"(${spend_by_candidate.iloc[0]:,.2f})."
              if spend_by_candidate is not None and len(spend_by_candidate) else ".")]
    logged = ", ".join(f"{n} × {md_text(k)}" for k, n in m.anomalies.items())
    out.append(f"The generation log records {logged}." if logged
               else "The generation log records no anomalies.")
    if m.anomalies.get("empty_response"):
        out.append("Empty responses are examined as refusals in notebook 10.")
    return Findings(out)
