"""06 · Candidate responses: one reply per (candidate, conversation), or the released run's logs.

``live`` sends the subset's conversations (05_subset's index, restricted to this run's corpus) to
every candidate through the LLM engine and writes ``responses.jsonl`` (read back by 07 and 10
with :func:`generation.read_responses`) and ``summary.csv``. The engine prints its cost plan
before the first call is sent; the plan also comes back as a view. ``paper`` reports what the
released run logs say about generation, since the responses themselves are not released:
``spend_by_candidate.csv`` and ``anomalies.csv``.

Either mode also plans what the run costs (``cost_plan.csv``, :mod:`evaluation.cost_plan`): live,
this run's candidates × its conversations; paper, the study's design (its candidates × the
released subset, measured on the conversations the corpus holds and scaled to the subset's
size). Generation and the grading the profile configures (its judges, which the runner passes
as ``judges``, ``llm.mode``, ``llm.prompt_caching``) are priced three ways: as the study ran it,
as configured, optimised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subsets
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.config import GenerationParams, GradingParams
from hbpsych_utils.evaluation import cost_plan, generation, grading, refusals, runlog
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "06_generation"
RESPONSES_FILE = "responses.jsonl"
PLAN_FILE = "cost_plan.csv"


def start(namespace: Mapping[str, Any]) -> StageRun[GenerationParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[GenerationParams]) -> StageResult:
    """Generate (``live``) or summarise the released logs (``paper``); write and return.

    The cost plan prices the grading the profile configures: its ``judges`` parameter (the
    profile's ``grading.judges``; ``None`` is the study's panel)."""
    params = run.params
    stage = run.stage
    judges = GradingParams(judges=run.value("judges")).judge_panel()
    result = (_live(run, stage, params, judges) if run.mode == "live"
              else _paper(run, stage, params, judges))
    return result.write()


def _live(run: StageRun[Any], stage: Stage, params: GenerationParams,
          judges: list[str]) -> StageResult:
    by_id = {c.prompt_id: c
             for c in corpus.load_recorded(stage.upstream("01_corpus", corpus.SOURCE_RECORD))}
    wanted = subsets.stage_ids(stage, params.subset)
    ids = [i for i in wanted if i in by_id][:params.n_conversations]
    planned = planned_cost(run, stage, params, judges, [by_id[i] for i in ids])
    requests = generation.generation_requests([by_id[i] for i in ids], params.candidates,
                                              temperature=params.temperature,
                                              max_tokens=params.max_tokens)
    with run.open_engine(conversations=list(by_id.values())) as engine:
        plan = engine.plan(requests, mode=run.llm.mode)
        results = engine.run(requests, mode=run.llm.mode)
        report = engine.last_report
    responses = generation.responses_table(results)
    generation.write_responses(responses, stage.path(RESPONSES_FILE))
    summary = generation.summary(responses)
    metrics = live_metrics(params, ids, responses, spend=report.spend,
                           plan_est_cost=plan.est_cost,
                           stopped_by_budget=report.stopped_by_budget)
    return StageResult(run, metrics, tables={"summary.csv": summary, PLAN_FILE: planned},
        views={"Cost plan (estimated before any call was sent)": generation.plan_table(plan),
               "Responses per candidate": summary},
        findings=findings(metrics),
    )


def live_metrics(params: GenerationParams, ids: list[str], responses: pd.DataFrame, *,
                 spend: float, plan_est_cost: float, stopped_by_budget: bool) -> dict[str, Any]:
    """``metrics.json`` of a live run: what was asked, what came back, what it cost, and the
    decoding configuration each candidate was actually sent."""
    return {
        "mode": "live", "subset": params.subset, "n_conversations": len(ids),
        "candidates": list(params.candidates),
        "n_responses": len(responses), "n_ok": int((responses.status == "ok").sum()),
        "n_refused": int(responses.refusal.sum()),
        "n_failed": int((responses.status == "failed").sum()),
        "spend_usd": round(float(spend), 6), "plan_est_cost_usd": round(plan_est_cost, 6),
        "decoding_sent": generation.decoding_sent(responses),
        "stopped_by_budget": stopped_by_budget,
    }


def planned_cost(run: StageRun[Any], stage: Stage, params: GenerationParams, judges: list[str],
                 conversations: list[Conversation] | None = None) -> pd.DataFrame:
    """The planned cost of this run per (phase, model), as the study ran it, as configured and
    optimised (``cost_plan.compare``; its assumptions are in ``evaluation.cost_plan``): live,
    ``params.candidates`` on ``conversations`` (what this run sends); paper, the study's design
    on the released subset (``params.candidates`` or the study's 20), measured on the
    conversations the corpus holds and scaled to the subset's size. Grading is the profile's:
    ``judges`` (its resolved panel), ``llm.mode``, ``llm.prompt_caching``."""
    from hbpsych_utils.llm.models import profile_registry

    if conversations is None:
        design = cost_plan.study_design(
            params.subset, candidates=tuple(params.candidates or study.CANDIDATES),
            judges=tuple(judges), fetch=stage.fetch,
            held=corpus.load_recorded(stage.upstream("01_corpus", corpus.SOURCE_RECORD)))
    elif not conversations or not params.candidates:
        return pd.DataFrame()
    else:
        template = grading.load_template(stage.fetch(grading.TEMPLATE_ARTIFACT))
        design = cost_plan.Design(
            conversations=tuple(cost_plan.measure(conversations, template)),
            n_conversations=len(conversations), candidates=tuple(params.candidates),
            judges=tuple(judges))
    llm = run.llm
    registry = profile_registry(llm.registry_file)
    routings = [cost_plan.AS_STUDY_RAN, cost_plan.configured(llm.mode, llm.prompt_caching),
                cost_plan.OPTIMISED]
    return cost_plan.compare(design, registry, routings)


def _paper(run: StageRun[Any], stage: Stage, params: GenerationParams,
           judges: list[str]) -> StageResult:
    planned = planned_cost(run, stage, params, judges)
    spend = runlog.read_spend(stage.fetch("run_spend"))
    events = refusals.read_error_log(stage.fetch("run_errors"))
    gen_spend = runlog.spend_by(spend, "generate")
    gen_anomalies = runlog.anomalies(events, "generate")
    metrics = paper_metrics(gen_spend, gen_anomalies)
    return StageResult(run, metrics,
        tables={"spend_by_candidate.csv": gen_spend.rename_axis("candidate").to_frame(),
                "anomalies.csv": gen_anomalies, PLAN_FILE: planned},
        views={"Generation spend per candidate (USD)": gen_spend.to_frame(),
               "Anomalies logged while generating": gen_anomalies},
        findings=findings(metrics, gen_spend),
    )


def paper_metrics(gen_spend: pd.Series, gen_anomalies: pd.DataFrame) -> dict[str, Any]:
    """``metrics.json`` in paper mode: models charged, total generation spend, anomaly counts."""
    kinds = gen_anomalies.sum().to_dict() if len(gen_anomalies) else {}
    return {
        "mode": "paper",
        "n_candidates_charged": int(gen_spend.size),
        "spend_generate_usd": round(float(gen_spend.sum()), 4),
        "anomalies": {str(k): int(v) for k, v in kinds.items()},
    }


def findings(metrics: dict[str, Any], spend_by_candidate: pd.Series | None = None) -> list[str]:
    """The sentences of "What we found", from the metrics (and, in paper mode, the spend per
    candidate, largest first, to name the most expensive).

    Live: responses, then refusals and transport failures, each stated only when there are
    any (otherwise the sentence says there were none), the spend against the plan, and the
    spend cap when it stopped the run. Paper: the charge, the anomalies logged, and a pointer
    to notebook 10 only when empty responses were logged.
    """
    m = metrics
    if m["mode"] == "live":
        out = [f"{m['n_responses']} responses from {len(m['candidates'])} candidate(s) on "
               f"{m['n_conversations']} {m['subset']} conversations: {m['n_ok']} answered."]
        out.append(f"{m['n_refused']} explicit refusal(s) were kept as the model's answer and "
                   "are graded as returned." if m["n_refused"] else "No candidate refused.")
        out.append(f"{m['n_failed']} call(s) failed in transport and are left for a re-run "
                   "(never stored as an answer)." if m["n_failed"]
                   else "No call failed.")
        out.append(f"Spend ${m['spend_usd']:,.4f} (plan: ${m['plan_est_cost_usd']:,.4f}).")
        if m["stopped_by_budget"]:
            out.append("The spend cap (llm.max_cost) stopped the run before every call was "
                       "sent; raise it and re-run to finish (finished calls are reused).")
        return out
    out = [f"Generation was charged to {m['n_candidates_charged']} models for a total of "
           f"**${m['spend_generate_usd']:,.2f}**"
           + (f"; the most expensive was {spend_by_candidate.index[0]} "
              f"(${spend_by_candidate.iloc[0]:,.2f})."
              if spend_by_candidate is not None and len(spend_by_candidate) else ".")]
    logged = ", ".join(f"{n} × {k}" for k, n in m["anomalies"].items())
    out.append(f"The generation log records {logged}." if logged
               else "The generation log records no anomalies.")
    if m["anomalies"].get("empty_response"):
        out.append("Empty responses are examined as refusals in notebook 10.")
    return out
