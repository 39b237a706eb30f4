"""Live mode: this run's grading of a subset (and Psych-Hard), one artifact per candidate, with
bootstrap intervals (the run's seed and resamples, as 08_scores computes them), the measured
``n_errors``, what the run's store paid for the candidate, the decoding settings actually sent,
and a per-conversation JSONL (``items_artifact``). When the run re-graded a sample
(16_self_consistency, current), the judges' flip rates go where the contract has a place for
them: ``metrics`` (``judge_flip_rates``, ``panel_flip_rate``, and the candidate's
``score_spread_across_repeats``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import hbpsych_utils
from hbpsych_utils import study
from hbpsych_utils.evaluation import consistency, generation, panel, scoring
from hbpsych_utils.evaluation.score_sources import EvaluationSource, evaluation_source
from hbpsych_utils.llm.store import Store
from hbpsych_utils.pipeline import graph, metrics, state
from hbpsych_utils.pipeline.metrics.s16_self_consistency import (
    SELF_CONSISTENCY,
    SelfConsistencyMetrics,
)
from hbpsych_utils.reporting import comparability
from hbpsych_utils.reporting.publish_contract import (
    Artifact,
    ItemLine,
    Metric,
    PublishError,
    RunInfo,
    Scoring,
    items_name,
    subset_metric,
)
from hbpsych_utils.reporting.publish_run import (
    HARD,
    RunFolder,
    SubsetInfo,
    benchmark,
    compendium,
    iso_time,
    judge_info,
    model_info,
    subset_info,
)

HARNESS = "hbpsych_utils"
"""``run.harness`` of a live run: this compendium generated and graded it."""
N_ERRORS_COUNTS = ("conversations of the subset the run set out to score for this candidate "
                   "that have no panel score (reply failed, or a judge's verdict excluded or "
                   "call failed); n_completed + n_errors = conversations attempted")


@dataclass
class Paid:
    """What the run's store paid for one candidate (its replies and the judge calls that graded
    them) and when: the first and last charge, seconds since the epoch."""

    cost: float
    first: float
    last: float
    untagged: bool = False
    """Some judge calls of the store were recorded without their candidate, so grading cannot
    be divided among candidates."""


def ledger_by_candidate(store_path: Path) -> dict[str, Paid]:
    """Per candidate, what the run's store paid for its replies and for grading them, and
    when: the ledger lines tagged for it (``generation.GENERATE_TAG`` with the candidate as
    model, ``panel.grade_tag``). ``untagged`` marks judge calls stored without a candidate."""
    if not store_path.is_file():
        return {}
    with Store(store_path) as store:
        rows = store.spend_by_tag()
    out: dict[str, Paid] = {}
    prefix = panel.grade_tag("")
    for r in rows:
        if r["tag"] == generation.GENERATE_TAG:
            cand = r["model"]
        elif r["tag"].startswith(prefix):
            cand = r["tag"][len(prefix):]
        else:
            continue
        got = out.setdefault(cand, Paid(0.0, r["first_ts"], r["last_ts"]))
        got.cost += r["cost"]
        got.first = min(got.first, r["first_ts"])
        got.last = max(got.last, r["last_ts"])
    if any(r["tag"] == panel.GRADE_TAG for r in rows):
        for got in out.values():
            got.untagged = True
    return out


def items(source: EvaluationSource, responses: pd.DataFrame, candidate: str,
          hard_ids: set[str]) -> list[ItemLine]:
    """The candidate's conversations of the subset: each judge's score and the panel's."""
    assert source.scores is not None and source.panel_long is not None
    mine = source.scores[source.scores["candidate"] == candidate]
    panel_scores = source.panel_long[source.panel_long["candidate"] == candidate]
    panel_by_id = dict(zip(panel_scores["prompt_id"], panel_scores["score"], strict=True))
    out = []
    for row in responses.sort_values("prompt_id").itertuples(index=False):
        graded = mine[mine["prompt_id"] == row.prompt_id].set_index("judge")
        scores = {j: (float(graded.at[j, "score"]) if j in graded.index
                      and pd.notna(graded.at[j, "score"]) else None) for j in source.judges}
        status = {j: (str(graded.at[j, "status"]) if j in graded.index
                      and "status" in graded.columns else "not_graded") for j in source.judges}
        value = panel_by_id.get(row.prompt_id)
        out.append(ItemLine(prompt_id=row.prompt_id, in_hard=row.prompt_id in hard_ids,
                            reply=str(row.status), scores=scores, status=status,
                            panel=None if value is None else float(value)))
    return out


@dataclass(frozen=True)
class LiveRun:
    """What every artifact of a live run's subset shares: the run and its subset, the scores
    (Table 1 of the subset and of Psych-Hard, as 08_scores computes them), the ledger, when 07
    graded, and the harness's settings."""

    run: RunFolder
    key: str
    info: SubsetInfo
    source: EvaluationSource
    table: pd.DataFrame
    hard_table: pd.DataFrame | None
    ledger: dict[str, Paid]
    graded_at: str
    config: dict[str, Any]
    """``run.harness_config`` (a JSON payload of the contract)."""
    scoring: Scoring
    card: Callable[[Sequence[int]], dict[str, Any] | None]
    """The subset's comparability card for a candidate's ``n`` (``comparability.exported``)."""


FLIP_RATES = "judge_flip_rates"
"""The metric key of the judges' flip rates (16_self_consistency)."""


def live_artifacts(run: RunFolder, key: str, *, flips: bool = False
                   ) -> tuple[list[Artifact], dict[str, list[ItemLine]]]:
    """This run's grading of subset ``key`` (and Psych-Hard), one artifact per candidate;
    with ``flips`` (16 is current), the judges' self-consistency beside the scores when 16
    re-graded a sample (:func:`flip_metrics`)."""
    gen = run.upstream_metrics(metrics.GENERATION)
    grading = run.upstream_metrics(metrics.GRADING)
    if not isinstance(gen, metrics.GenerationLiveMetrics) or not isinstance(
            grading, metrics.GradingLiveMetrics):
        raise PublishError(f"{run.root}: 06 and 07 did not run live; nothing was graded")
    live = _live_run(run, key, gen, grading)
    hard_ids = set(subset_info(run, HARD).ids)
    responses = generation.read_responses(run.upstream(graph.GENERATION, graph.RESPONSES))
    responses = responses[responses["prompt_id"].isin(set(live.info.ids))]
    out, lines = [], {}
    consistent = run.upstream_metrics(SELF_CONSISTENCY) if flips else None
    for cand in gen.candidates:
        mine = responses[responses["model"] == cand]
        if cand not in live.table.index or mine.empty:
            raise PublishError(f"{run.root}: candidate {cand} has no graded conversation of "
                               f"{study.SUBSET_TITLES[key]}")
        lines[cand] = items(live.source, mine, cand, hard_ids)
        art = _artifact(live, cand, len(mine), gen.decoding_sent.get(cand))
        art.metrics += flip_metrics(consistent, cand) if consistent is not None else []
        out.append(art)
    return out, lines


def flip_metrics(m: SelfConsistencyMetrics, candidate: str) -> list[Metric]:
    """The judges' self-consistency in the contract's ``metrics`` (none when 16 did not
    re-grade): ``judge_flip_rates`` (each judge's and the panel majority's flip rate over the
    sampled items of every candidate, with its interval: a property of the judges, the same in
    every candidate's artifact), ``panel_flip_rate`` (the panel majority's, as a value with its
    ``n`` and interval) and ``score_spread_across_repeats`` (this candidate's panel score in
    each repeat and their spread; null where undefined)."""
    if m.flip_rates is None:
        return []
    by_judge = {j: {"rate": r.rate, "ci_low": r.low, "ci_high": r.high, "n_items": r.n_items,
                    "n_flipped": r.n_flipped, "repeat_ac1": r.repeat_ac1}
                for j, r in m.flip_rates.items()}
    out = [Metric(key=FLIP_RATES, value_json={
        "repeats": m.repeats, "n_items": m.n_items, "level": m.ci_level,
        "simulator_flip_rate": m.simulator_flip_rate, "by_judge": by_judge})]
    panel_rate = m.flip_rates.get(consistency.PANEL)
    if panel_rate is not None:
        out.append(Metric(key="panel_flip_rate", value=panel_rate.rate, n=panel_rate.n_items,
                          ci_low=panel_rate.low, ci_high=panel_rate.high))
    spread = (m.score_spread or {}).get(candidate)
    if spread is not None:
        out.append(Metric(key="score_spread_across_repeats", value=spread.spread,
                          value_json={"by_repeat": spread.by_repeat, "min": spread.min,
                                      "max": spread.max}))
    return out


def _live_run(run: RunFolder, key: str, gen: metrics.GenerationLiveMetrics,
              grading: metrics.GradingLiveMetrics) -> LiveRun:
    """The subset's scores with the run's resamples, seed and level, its ledger and settings."""
    try:
        source = evaluation_source(run, key, mode=graph.LIVE)
        hard_source = evaluation_source(run, HARD, mode=graph.LIVE)
    except scoring.ScoringError as exc:
        raise PublishError(str(exc)) from None
    if source is None:
        raise PublishError(f"{run.root}: this run graded no conversation of "
                           f"{study.SUBSET_TITLES[key]}; publish the subset it generated on "
                           f"(--subset {gen.subset})")
    n_resamples, seed = run.profile.n_resamples, run.profile.seed
    level = run.profile.ci_level
    graded_at = state.read_build(run.root, graph.GRADING)
    assert graded_at is not None  # 07_grading is current (require_current)
    llm = run.profile.llm
    config = {
        "evaluation_mode": graph.LIVE, "llm_mode": llm.mode, "limits": llm.limits,
        "max_cost": llm.max_cost, "prompt_caching": llm.prompt_caching,
        "simulator": llm.simulator, "judge_max_reasks": run.profile.grading.max_reasks,
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "level": level},
        "n_errors": N_ERRORS_COUNTS, "exported_by": compendium(run),
    }
    return LiveRun(
        run, key, subset_info(run, key), source,
        source.table1(n_resamples=n_resamples, seed=seed, level=level),
        (hard_source.table1(n_resamples=n_resamples, seed=seed, level=level)
         if hard_source is not None else None),
        ledger_by_candidate(run.root / "llm_store.sqlite"), graded_at.written_at, config,
        judge_info(source.judges, grading.grader_template_sha256, grading.temperature),
        comparability.exported(run.root, run.profile, run.manifest, key))


def _artifact(live: LiveRun, cand: str, attempted: int,
              sampling: Mapping[str, Any] | None) -> Artifact:
    """One candidate's artifact: its scores, what its conversations cost and when they ran."""
    done = int(live.table.loc[cand, "n_panel"])
    paid = live.ledger.get(cand)
    stamps = ((iso_time(paid.first), iso_time(paid.last)) if paid is not None
              else (live.graded_at,) * 2)
    cost = None if paid is None or paid.untagged else round(paid.cost, 6)
    return Artifact(
        benchmark=benchmark(live.info, attempted),
        model=model_info(live.run, cand, sampling),
        run=RunInfo(harness=HARNESS, harness_commit=compendium(live.run)["commit"],
                    adapter_version=hbpsych_utils.__version__, started_at=stamps[0],
                    finished_at=stamps[1], cost_usd=cost, n_completed=done,
                    n_errors=attempted - done,
                    harness_config={**live.config, "cost_usd": _cost_note(paid),
                                    "comparability": live.card([done])}),
        scoring=live.scoring, metrics=_metrics(live, cand), items_artifact=items_name(cand))


def _metrics(live: LiveRun, cand: str) -> list[Metric]:
    """The panel score on the subset and on Psych-Hard (with their intervals and n), and each
    judge's clipped mean on both."""
    judges = sorted(live.source.judges)
    row = live.table.loc[cand]
    per_judge = {live.key: {j: float(row[j]) for j in judges if pd.notna(row[j])}}
    found = [subset_metric("healthbench_score", float(row["panel_mean"]), int(row["n_panel"]),
                           float(row["ci_low"]), float(row["ci_high"]))]
    if live.hard_table is not None and cand in live.hard_table.index:
        h = live.hard_table.loc[cand]
        found.append(subset_metric("healthbench_hard_score", float(h["panel_mean"]),
                                   int(h["n_panel"]), float(h["ci_low"]), float(h["ci_high"])))
        per_judge[HARD] = {j: float(h[j]) for j in judges if pd.notna(h[j])}
    found.append(Metric(key="per_judge_scores", value_json=per_judge))
    return found


def _cost_note(paid: Paid | None) -> str:
    if paid is None:
        return "null: the run's store has no ledger line for this candidate"
    if paid.untagged:
        return ("null: some judge calls in the run's store were recorded without their "
                "candidate, so grading cannot be divided among candidates")
    return ("what the run's store paid for this candidate's replies and the judge calls that "
            "graded them (every invocation that produced them)")
