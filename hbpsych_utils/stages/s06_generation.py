"""Chapter 06, candidate responses: one reply per (candidate, conversation), or the released
run's logs.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (the
resolver: live, the subset's conversations in this run's corpus and the candidates; paper, the
released run's spend ledger and anomaly log, since the responses themselves are not released;
either way the design the cost plan prices), :func:`cost_plan` (what the run costs, priced
three ways), :func:`responses` (live: the generation through the LLM engine, with the plan the
engine makes before anything is sent), :func:`released_generation` (paper: the released
generation spend per candidate and the anomalies logged while generating), :func:`metrics`,
:func:`write` and :func:`findings`.

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
from hbpsych_utils.core.config import LLMSettings
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count, were
from hbpsych_utils.evaluation import cost_plan as plans
from hbpsych_utils.evaluation import generation, grading, refusals, runlog
from hbpsych_utils.evaluation.refusals import ErrorEvent
from hbpsych_utils.evaluation.score_sources import EvaluationMode
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    GenerationLiveMetrics,
    GenerationMetrics,
    GenerationPaperMetrics,
)
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table, Tables, model_names, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.GENERATION
start = base.starter(STAGE)

PLAN_FILE = "cost_plan.csv"
"""Either mode: the planned cost of the run."""
SUMMARY_FILE = "summary.csv"
"""Live: responses per candidate (beside ``responses.jsonl``)."""
SPEND_FILE = "spend_by_candidate.csv"
ANOMALIES_FILE = "anomalies.csv"
"""Paper: what the released run's ledger and anomaly log say about generation."""


# --- what is generated ---------------------------------------------------------------------

@dataclass(frozen=True)
class Conversations:
    """Live: what this run sends, every candidate on every selected conversation."""

    subset: str
    candidates: list[str]
    selected: list[Conversation]
    """The subset's conversations this run's corpus holds, by sorted id, at most
    ``n_conversations``."""
    n_in_subset: int
    corpus: list[Conversation]
    """The run's whole corpus (simulator faults may name any of its conversations)."""

    def view(self) -> Note:
        names = md_text(model_names(self.candidates)) if self.candidates else "none"
        nothing = ("" if self.selected and self.candidates else " Nothing to plan or send: "
                   "this run has no candidate or no conversation to generate on.")
        return Note(f"{count(len(self.selected), 'conversation')} of "
                    f"**{md_text(study.SUBSET_TITLES.get(self.subset, self.subset))}** "
                    f"({self.n_in_subset} in the subset, {len(self.corpus)} in this run's "
                    f"corpus), each sent to {count(len(self.candidates), 'candidate')}: "
                    f"{names}.{nothing}")


@dataclass(frozen=True)
class ReleasedLogs:
    """Paper: the released run's spend ledger and anomaly log (the responses are not
    released)."""

    spend: pd.DataFrame
    events: list[ErrorEvent]

    def view(self) -> Note:
        n_gen = int((self.spend["phase"] == runlog.GENERATE).sum())
        e_gen = sum(e.phase == runlog.GENERATE for e in self.events)
        return Note(f"The responses are not released, so this chapter reads the released run's "
                    f"logs: {len(self.spend):,} charges in the spend ledger ({n_gen:,} for "
                    f"generation) and {len(self.events):,} events in the anomaly log ({e_gen:,} "
                    "while generating).")


@dataclass(frozen=True)
class Basis:
    """What the cost plan prices: a design (``cost_plan.Design``), said in words, and the
    judges that grade it."""

    design: plans.Design
    what: str
    judges: list[str]


@dataclass(frozen=True)
class Inputs:
    """What the chapter works from under its mode: this run's conversations and candidates
    (live) or the released logs (paper), and the design its cost plan prices (``None``: nothing
    to plan)."""

    mode: EvaluationMode
    live: Conversations | None
    released: ReleasedLogs | None
    basis: Basis | None

    def view(self) -> Note | None:
        shown = self.live if self.live is not None else self.released
        return None if shown is None else shown.view()


@base.resolver
def inputs(run: StageRun, *, subset: str, candidates: list[str], n_conversations: int | None,
           samples: int, judges: list[str] | None) -> Inputs:
    """What the chapter works from under its mode: live, the conversations of ``subset`` (as
    05 wrote it) that this run's corpus holds (sorted ids, the first ``n_conversations``) and
    the ``candidates``, ``samples`` replies each; paper, the released spend ledger and anomaly
    log, and the study's design on the released subset (``candidates`` or the study's 20). The
    design either way is graded by ``judges`` (``None``: the study's panel)."""
    panel_judges = list(study.JUDGE_PANEL) if judges is None else list(judges)
    held = corpus.load_recorded(run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))
    if run.mode != graph.LIVE:
        chosen = tuple(candidates or study.CANDIDATES)
        design = plans.study_design(subset, candidates=chosen, judges=tuple(panel_judges),
                                    fetch=run.stage.fetch, held=held)
        what = (f"the study's design: {len(chosen)} candidates on "
                f"{study.SUBSET_TITLES.get(subset, subset)}, scaled from the conversations "
                "the corpus holds")
        logs = ReleasedLogs(runlog.read_spend(run.stage.fetch("run_spend")),
                            refusals.read_error_log(run.stage.fetch("run_errors")))
        return Inputs(graph.PAPER, None, logs, Basis(design, what, panel_judges))
    by_id = {c.prompt_id: c for c in held}
    wanted = subsets.stage_ids(run.stage, subset)
    ids = [i for i in wanted if i in by_id][:n_conversations]
    live = Conversations(subset, list(candidates), [by_id[i] for i in ids], len(wanted), held)
    if not live.selected or not live.candidates:
        return Inputs(graph.LIVE, live, None, None)
    template = grading.load_template(run.stage.fetch(grading.TEMPLATE_ARTIFACT))
    design = plans.Design(conversations=tuple(plans.measure(live.selected, template)),
                          n_conversations=len(live.selected), candidates=tuple(candidates),
                          judges=tuple(panel_judges), samples=samples)
    what = f"this run's {count(len(candidates), 'candidate')} on its conversations"
    if samples > 1:
        what += f", {samples} replies each"
    return Inputs(graph.LIVE, live, None, Basis(design, what, panel_judges))


# --- what a run costs ------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """The planned cost of a run per (phase, model), priced three ways."""

    frame: pd.DataFrame
    basis: Basis

    def view(self) -> Table:
        return Table(self.frame, caption=f"Planned cost of {self.basis.what}, graded by the "
                     f"{panel_phrase(self.basis.judges)}: as the study ran it, as configured, "
                     "optimised", index=False, lead=["model"])


@base.needs
def cost_plan(basis: Basis, *, llm: LLMSettings) -> Plan:
    """The planned cost of the run per (phase, model), as the study ran it, as configured
    (``llm.mode``, ``llm.prompt_caching``) and optimised, at the prices of the registry ``llm``
    names (``cost_plan.compare``; its assumptions are in ``evaluation.cost_plan``)."""
    from hbpsych_utils.llm.models import profile_registry

    routings = [plans.AS_STUDY_RAN, plans.configured(llm.mode, llm.prompt_caching),
                plans.OPTIMISED]
    return Plan(plans.compare(basis.design, profile_registry(llm.registry_file), routings),
                basis)


# --- what was sent and what came back --------------------------------------------------------

@dataclass(frozen=True)
class Responses:
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
    paid_earlier: float
    """USD earlier attempts of this stage paid for answers this one reused from the store."""

    @property
    def summary(self) -> pd.DataFrame:
        """Per candidate: responses (every sample), refusals, failures, tokens and cost."""
        return generation.summary(self.table)

    def view(self) -> Tables:
        return Tables([
            Table(self.plan, caption="Cost plan (estimated before any call was sent; stored "
                  "answers are not counted)"),
            Table(self.summary, caption="Responses per candidate"),
        ])


@base.needs
def responses(source: Conversations, run: StageRun, *, temperature: float | None,
              max_tokens: int, samples: int, seed: int) -> Responses:
    """Every candidate answers every selected conversation through the run's engine at
    ``temperature`` and ``max_tokens``, ``samples`` times (each further sample with its own
    seed from ``seed``), content-addressed (a re-run is answered from the store), after the
    engine's cost plan is made (and printed)."""
    requests = generation.generation_requests(source.selected, source.candidates,
                                              temperature=temperature, max_tokens=max_tokens,
                                              samples=samples, seed=seed)
    with run.open_engine(conversations=source.corpus) as engine:
        plan = engine.plan(requests, mode=run.llm.mode)
        results = engine.run(requests, mode=run.llm.mode)
        report = engine.last_report
        assert report is not None  # set by engine.run
        earlier = engine.paid_earlier([r.key for r in results], [report.run_id])
    return Responses(generation.responses_table(results, seed=seed),
                     generation.plan_table(plan), plan_est_cost=plan.est_cost,
                     spend=report.spend, stopped_by_budget=report.stopped_by_budget,
                     paid_earlier=earlier)


@dataclass(frozen=True)
class ReleasedGeneration:
    """Paper: what the released logs say about generating the responses."""

    spend_by_candidate: pd.Series
    """USD per candidate charged for generation, largest first (``runlog.spend_by``)."""
    anomalies: pd.DataFrame
    """Anomalies logged while generating, per model and kind (``runlog.anomalies``)."""

    def view(self) -> Tables:
        tables = [Table(self.spend_by_candidate.to_frame(),
                        caption="Generation spend per candidate")]
        if len(self.anomalies):
            tables.append(Table(self.anomalies, caption="Anomalies logged while generating"))
            return Tables(tables)
        return Tables(tables, note="The generation log records no anomalies.")


@base.needs
def released_generation(logs: ReleasedLogs) -> ReleasedGeneration:
    """The released ledger's generation charges per candidate and the anomaly log's generation
    events."""
    return ReleasedGeneration(
        runlog.spend_by(logs.spend, runlog.GENERATE).rename_axis("candidate"),
        runlog.anomalies(logs.events, runlog.GENERATE))


# --- metrics, outputs, findings --------------------------------------------------------------

def metrics(data: Inputs, generated: Responses | None,
            released: ReleasedGeneration | None) -> GenerationMetrics:
    """06's metrics. Live: what was asked, what came back, what it cost against the engine's
    plan (``spend_usd``: this attempt; ``spend_earlier_attempts_usd``: what earlier attempts in
    the run folder paid for the replies it reused), and the decoding configuration each
    candidate was actually sent. Paper: models charged, total generation spend, anomaly counts
    by kind."""
    if released is not None:
        kinds = released.anomalies.sum().to_dict() if len(released.anomalies) else {}
        return GenerationPaperMetrics(
            mode=graph.PAPER, n_candidates_charged=int(released.spend_by_candidate.size),
            spend_generate_usd=round(float(released.spend_by_candidate.sum()), 4),
            anomalies={str(k): int(v) for k, v in kinds.items()})
    assert data.live is not None and generated is not None
    return _live_metrics(data.live, generated)


def _live_metrics(source: Conversations, generated: Responses) -> GenerationLiveMetrics:
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


def write(run: StageRun, m: GenerationMetrics, plan: Plan | None, generated: Responses | None,
          released: ReleasedGeneration | None) -> Written:
    """Live: ``responses.jsonl`` (the first reply of each), ``responses_samples.jsonl`` (the
    further samples, if any), ``summary.csv``, ``cost_plan.csv``; paper:
    ``spend_by_candidate.csv``, ``anomalies.csv``, ``cost_plan.csv``; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    first: list[str] = []
    if generated is not None:
        replies, rest = generation.split_samples(generated.table)
        generation.write_responses(replies, run.stage.path(graph.RESPONSES))
        first.append(graph.RESPONSES)
        if rest is not None:
            generation.write_responses(rest, run.stage.path(graph.RESPONSE_SAMPLES))
            first.append(graph.RESPONSE_SAMPLES)
        tables[SUMMARY_FILE] = generated.summary
    if released is not None:
        tables[SPEND_FILE] = released.spend_by_candidate.to_frame()
        tables[ANOMALIES_FILE] = released.anomalies
    if plan is not None:
        tables[PLAN_FILE] = plan.frame
    written = base.write(run, m, tables=tables)
    return replace(written, files=[*first, *written.files])


def findings(m: GenerationMetrics, released: ReleasedGeneration | None = None) -> Findings:
    """The sentences of "What we found", from 06's metrics (and, from the released logs, the
    spend per candidate, largest first, to name the most expensive).

    Live: responses, then refusals and transport failures, each stated only when there are
    any (otherwise the sentence says there were none), the spend against the plan, and the
    spend cap when it stopped the run. Paper: the charge, the anomalies logged, and a pointer
    to notebook 10 only when empty responses were logged.
    """
    if m.mode == graph.LIVE:
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
    spend_by_candidate = None if released is None else released.spend_by_candidate
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
