"""A full re-run of the study, planned as it ran and optimised, beside what its ledger says it
spent (``benchmarks/cost.py`` prints it).

The plan is :mod:`.cost_plan`'s, on the study's design (:func:`.cost_plan.study_design`); the
ledger is the released one (``runlog.read_spend``). Besides the plan under the module's
assumptions, the report gives the totals under others (:func:`study_report`), among them replies
as long as the generation ledger implies (:func:`ledger_reply_scale`) and the judges' prompt
caches at their ceiling (:func:`.cost_plan.caching_ceiling`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pandas as pd

from hbpsych_utils.evaluation import runlog
from hbpsych_utils.evaluation.cost_plan import (
    AS_STUDY_RAN,
    CACHE_HIT_RATE,
    OPTIMISED,
    PHASES,
    Design,
    PlanError,
    PlanRow,
    caching_ceiling,
    model_spec,
    plan,
    tokens,
    total_usd,
)
from hbpsych_utils.llm.cost import CHARS_PER_TOKEN
from hbpsych_utils.llm.models import Registry

# --------------------------------------------------------------------------------------------
# What the generation ledger implies


def ledger_output_tokens(spend_by_candidate: Mapping[str, float], design: Design,
                         registry: Registry) -> dict[str, float]:
    """Per candidate of the design, the output tokens per reply that a generation ledger implies
    at the registry's (sync) prices, given the counted prompt tokens: (USD per call − prompt
    tokens × input price) / output price. It counts reasoning tokens too, which the judges
    never see. Candidates absent from the ledger are left out."""
    prompt = statistics.fmean(tokens(c.prompt_chars) for c in design.conversations)
    out = {}
    for cand in design.candidates:
        if cand not in spend_by_candidate:
            continue
        price = model_spec(registry, cand, "candidate")[0].price
        if price.output <= 0:
            continue
        per_call = spend_by_candidate[cand] / design.n_conversations * 1_000_000
        out[cand] = max(0.0, (per_call - prompt * price.input) / price.output)
    return out


def ledger_reply_scale(spend_by_candidate: Mapping[str, float], design: Design,
                       registry: Registry) -> dict[str, float]:
    """Per candidate, the factor that makes its mean assumed reply as long as the output the
    generation ledger implies (:func:`ledger_output_tokens`): a scenario in which every billed
    output token is visible reply."""
    base = design.mean_reply_tokens()
    if base <= 0:
        raise PlanError("the measured replies are empty: no scale can be derived")
    return {c: t / base for c, t in ledger_output_tokens(spend_by_candidate, design,
                                                         registry).items()}


# --------------------------------------------------------------------------------------------
# The report

LEDGER_PHASES = {runlog.GENERATE: "generation", runlog.GRADE: "grading"}
"""The released ledger's phase names -> this module's."""


def ledger_by_phase(spend: pd.DataFrame) -> dict[str, dict[str, float]]:
    """The released ledger (``runlog.read_spend``) as phase -> model -> USD
    (``runlog.spend_by``), phases renamed as here (``generate`` -> ``generation``, ``grade``
    -> ``grading``)."""
    return {LEDGER_PHASES.get(p, p): runlog.spend_by(spend, p).to_dict()
            for p in spend["phase"].unique()}


@dataclass(frozen=True)
class StudyReport:
    """A full re-run of the study planned as it ran and optimised, beside its ledger."""

    design: Design
    registry: Registry
    as_run: list[PlanRow]
    optimised: list[PlanRow]
    ledger: dict[str, dict[str, float]]
    """Phase -> model -> USD spent (:func:`ledger_by_phase`)."""
    hit_rates: Mapping[tuple[str, bool], float]
    sensitivity: dict[str, dict[str, float]]
    """The totals and ratio under other assumptions: name -> ``plan_as_study_ran_usd``,
    ``plan_optimised_usd``, ``ratio``."""

    def table(self) -> pd.DataFrame:
        """Per (phase, model): the ledger's USD, the plan as run, optimised, and their ratios;
        for candidates, the output per reply the ledger implies (:func:`ledger_output_tokens`)
        beside the reply length assumed."""
        implied = ledger_output_tokens(self.ledger.get("generation", {}), self.design,
                                       self.registry)
        records = []
        for run, opt in zip(self.as_run, self.optimised, strict=True):
            spent = self.ledger.get(run.phase, {}).get(run.model, 0.0)
            gen = run.phase == "generation"
            records.append({
                "phase": run.phase, "model": run.model, "calls": round(run.calls),
                "reply_tokens": round(run.output_tokens / run.calls) if gen else None,
                "ledger_implied_output": round(implied[run.model])
                if gen and run.model in implied else None,
                "input_tokens": round(run.input_tokens), "output_tokens": round(run.output_tokens),
                "cache_read_share": (round(opt.cache_read_tokens / opt.input_tokens, 3)
                                     if opt.input_tokens else 0.0),
                "ledger_usd": round(spent, 2), "as_run_usd": round(run.usd, 2),
                "as_run_vs_ledger": round(run.usd / spent, 3) if spent else None,
                "optimised_usd": round(opt.usd, 2),
                "optimised_vs_as_run": round(opt.usd / run.usd, 3) if run.usd else None,
            })
        df = pd.DataFrame(records)
        return df.astype({"reply_tokens": "Int64", "ledger_implied_output": "Int64"})

    def summary(self) -> dict[str, object]:
        """The JSON summary: totals and ratio first, then per phase and per judge."""
        ledger_total = sum(sum(models.values()) for models in self.ledger.values())
        as_run, opt = total_usd(self.as_run), total_usd(self.optimised)
        return {
            "study_spend_usd": round(ledger_total, 2),
            "plan_as_study_ran_usd": round(as_run, 2),
            "plan_optimised_usd": round(opt, 2),
            "ratio": round(opt / as_run, 3),
            "plan_as_study_ran_vs_spend": round(as_run / ledger_total, 3) if ledger_total else None,
            "by_phase": {p: self._phase(p) for p in PHASES},
            "by_judge": self._judges(),
            "design": self._design_facts(),
            "assumptions": self._assumptions(),
            "sensitivity": self.sensitivity,
        }

    def _phase(self, name: str) -> dict[str, float]:
        return {"study_spend_usd": round(sum(self.ledger.get(name, {}).values()), 2),
                "plan_as_study_ran_usd": round(total_usd(self.as_run, name), 2),
                "plan_optimised_usd": round(total_usd(self.optimised, name), 2)}

    def _judges(self) -> dict[str, dict[str, float]]:
        """Per judge: spent, planned both ways, and how much of its input the cache serves."""
        judges = {}
        for run, o in zip(self.as_run, self.optimised, strict=True):
            if run.phase == "grading":
                judges[run.model] = {
                    "study_spend_usd": round(self.ledger.get("grading", {}).get(run.model,
                                                                                0.0), 2),
                    "plan_as_study_ran_usd": round(run.usd, 2),
                    "plan_optimised_usd": round(o.usd, 2),
                    "groups_reaching_cache_minimum": round(o.groups_cached / o.groups, 3)
                    if o.groups else 0.0,
                    "cache_read_share_of_input": round(o.cache_read_tokens / o.input_tokens, 3)
                    if o.input_tokens else 0.0}
        return judges

    def _design_facts(self) -> dict[str, object]:
        """The design's size and the shape of its grader prompts."""
        d = self.design
        prefixes = d.prefix_tokens()
        return {
            "n_conversations": d.n_conversations, "n_measured": len(d.conversations),
            "candidates": len(d.candidates), "judges": len(d.judges),
            "criteria_per_conversation": round(statistics.fmean(
                c.n_criteria for c in d.conversations), 2),
            "generation_calls": round(sum(r.calls for r in self.as_run
                                          if r.phase == "generation")),
            "grading_calls": round(sum(r.calls for r in self.as_run
                                       if r.phase == "grading")),
            "shared_prefix_tokens_mean": round(statistics.fmean(prefixes), 1),
            "shared_prefix_tokens_median": statistics.median(prefixes),
            "unshared_tokens_per_call_mean": round(statistics.fmean(d.unshared_tokens()), 1),
        }

    def _assumptions(self) -> dict[str, object]:
        """Every assumed value the plan rests on, and the registry's facts it reads."""
        d = self.design
        return {
            "chars_per_token": CHARS_PER_TOKEN,
            "registry": registry_facts(self.registry, d.judges),
            "reply_tokens_mean": round(d.mean_reply_tokens(), 1),
            "reply_sources": dict(sorted(Counter(
                c.reply_source for c in d.conversations).items())),
            "judge_output_tokens": d.judge_output_tokens,
            "cache_hit_rate": {f"{k}/{'batch' if b else 'sync'}": v
                               for (k, b), v in self.hit_rates.items()},
        }


def study_report(design: Design, registry: Registry, spend: pd.DataFrame,
                 hit_rates: Mapping[tuple[str, bool], float] = CACHE_HIT_RATE) -> StudyReport:
    """The design planned as the study ran it and optimised, beside the ledger ``spend``
    (``runlog.read_spend``), with the ratio under other assumptions: no cache hit at all,
    every later call a hit, replies as long as the generation ledger implies per candidate
    (:func:`ledger_reply_scale`), and the judges' caches at their ceiling
    (:func:`caching_ceiling`, every later call a hit), with either reply length."""
    ledger = ledger_by_phase(spend)
    ceiling = caching_ceiling(registry, design.judges)
    every_hit = {k: 1.0 for k in hit_rates}

    def totals(d: Design, rates: Mapping[tuple[str, bool], float],
               reg: Registry = registry) -> dict[str, float]:
        run = total_usd(plan(d, reg, AS_STUDY_RAN, rates))
        opt = total_usd(plan(d, reg, OPTIMISED, rates))
        return {"plan_as_study_ran_usd": round(run, 2), "plan_optimised_usd": round(opt, 2),
                "ratio": round(opt / run, 3)}

    by_ledger = replace(design, reply_scale=ledger_reply_scale(ledger.get("generation", {}),
                                                               design, registry))
    sensitivity = {
        "no_cache_hit": totals(design, {}),
        "every_later_call_hits": totals(design, every_hit),
        "replies_as_long_as_the_generation_ledger_implies": totals(by_ledger, hit_rates),
        "those_replies_and_every_later_call_hits": totals(by_ledger, every_hit),
        "caching_ceiling": totals(design, every_hit, ceiling),
        "caching_ceiling_with_those_replies": totals(by_ledger, every_hit, ceiling),
    }
    return StudyReport(design, registry, plan(design, registry, AS_STUDY_RAN, hit_rates),
                       plan(design, registry, OPTIMISED, hit_rates), ledger, hit_rates,
                       sensitivity)


def registry_facts(registry: Registry, models: Iterable[str]) -> dict[str, dict[str, object]]:
    """What the registry says about each model's batch API and prompt cache (the plan's
    inputs from ``params/models.yaml``)."""
    out: dict[str, dict[str, object]] = {}
    for name in models:
        spec, prov = model_spec(registry, name, "model")
        p = spec.price
        out[name] = {"provider": prov.name, "batch_api": prov.batch,
                     "batch_discount": p.batch_discount, "cache_mode": spec.cache_mode,
                     "cache_min_tokens": spec.cache_min_tokens, "cache_read": p.cache_read,
                     "cache_write": p.cache_write, "batch_cache_stacks": p.batch_cache_stacks}
    return out
