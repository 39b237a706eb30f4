"""11 · Harness validation: the GPT-4.1 HealthBench-Hard run, summarised as simple-evals does.

``replay`` summarises the released per-conversation scores (``harness_scores``): n scored,
clipped mean, reference bootstrap standard deviation. ``live`` re-runs it through the engine
(the candidate answers each Hard conversation of the corpus, the judge grades every criterion
with the reference grader, both at the reference settings), writes ``scores.csv`` and, beside
the released scores of the same conversations, ``live_vs_released.csv``. Either way the
difference from the published figure is reported when the profile gives one. ``candidate``
and ``judge`` left ``None`` are the study's (``study.HARNESS_MODEL``); the models used are
reported under ``settings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils.construction import corpus
from hbpsych_utils.core.config import HarnessValidationParams
from hbpsych_utils.evaluation import generation, grading, harness, panel
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "11_harness_validation"


def settings_of(params: HarnessValidationParams, mode: str | None = "live") -> dict[str, Any]:
    """The candidate, judge and decoding settings of the run summarised, as ``metrics.json``
    reports them under ``settings``: a live run's (``None`` models are the study's
    ``HARNESS_MODEL``); in replay, the released run's, made at the reference settings (the
    section's live settings do not apply to it)."""
    if mode != "live":
        params = HarnessValidationParams()
    return {"candidate": params.model_of("candidate"), "judge": params.model_of("judge"),
            "temperature": params.temperature, "max_tokens": params.max_tokens}


def start(namespace: Mapping[str, Any]) -> StageRun[HarnessValidationParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[HarnessValidationParams]) -> StageResult:
    """Replay the released harness run or re-run it live; write and return the result."""
    params = run.params
    stage = run.stage
    released = harness.read_harness_scores(stage.fetch("harness_scores"))
    settings = settings_of(params, run.mode)
    tables: dict[str, pd.DataFrame] = {}
    views: dict[str, Any] = {}
    if run.mode == "live":
        scores, plan = _live_scores(run, stage, params, settings, released)
        summary = harness.summarize(scores["score"].tolist(), published=params.published,
                                    seed=run.seed)
        comparison = harness.compare_with_released(scores, released)
        tables = {"scores.csv": scores, "live_vs_released.csv": comparison}
        views = {"Cost plan of the generation (estimated before any call was sent)": plan,
                 "Live scores beside the released run's": comparison}
        extra = harness.comparison_metrics(comparison)
    else:
        summary = harness.replay(released, published=params.published, seed=run.seed)
        extra = {}
    metrics = {"mode": run.mode, **summary.metrics(),
               "published_source": params.published_source, "settings": settings, **extra}
    views = {"Summary": summary_table(metrics), **views}
    return StageResult(run, metrics, tables=tables, views=views,
                       findings=findings(metrics)).write()


def _live_scores(run: StageRun[Any], stage: Stage, params: HarnessValidationParams,
                 settings: dict[str, Any], released: list[harness.HarnessLine]
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-conversation scores of the live re-run, and the generation's cost plan."""
    hard = {line.prompt_id for line in released}
    by_id = {c.prompt_id: c
             for c in corpus.load_recorded(stage.upstream("01_corpus", corpus.SOURCE_RECORD))}
    selected = [by_id[p] for p in sorted(hard & set(by_id))][:params.n_conversations]
    template = grading.load_template(stage.fetch(grading.TEMPLATE_ARTIFACT))
    requests = generation.generation_requests(selected, [settings["candidate"]],
                                              temperature=params.temperature,
                                              max_tokens=params.max_tokens)
    with run.open_engine(conversations=list(by_id.values())) as engine:
        plan = engine.plan(requests, mode=run.llm.mode)
        responses = generation.responses_table(engine.run(requests, mode=run.llm.mode))
        graded = panel.grade(engine, responses, by_id, [settings["judge"]], template,
                             temperature=params.temperature, max_tokens=params.max_tokens,
                             mode=run.llm.mode, prompt_caching=run.llm.prompt_caching)
    return grading.scores_from_verdicts(graded.verdicts, by_id), generation.plan_table(plan)


def summary_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """The metrics' single values (settings aside) as a one-column table to display."""
    return pd.Series({k: v for k, v in metrics.items() if not isinstance(v, dict)},
                     name="value").to_frame()


def findings(metrics: dict[str, Any]) -> list[str]:
    """The sentences of "What we found", from the metrics.

    The clipped mean and its bootstrap standard deviation always; the comparison with the
    released run only when a live run has conversations in common with it; the difference
    from the published figure, and how many bootstrap standard deviations it is, only when
    the profile gives a published figure (the ratio only when the standard deviation is not
    zero).
    """
    m = metrics
    which = "This live run" if m["mode"] == "live" else "The released GPT-4.1 run"
    out = [f"{which} scored {m['n_scored']:,} HealthBench-Hard conversations with a clipped "
           f"mean of **{m['clipped_mean']:.4f}** (bootstrap std {m['bootstrap_std']:.4f})."]
    if m.get("n_common_with_released"):
        out.append(f"On the {m['n_common_with_released']} conversations the released run also "
                   "scored, the per-conversation scores differ by "
                   f"{m['mean_difference_vs_released']:+.4f} on average (live minus released).")
    elif "n_common_with_released" in m:
        out.append("None of the conversations scored live was scored by the released run, so "
                   "the two are not compared.")
    if m["published"] is None:
        out.append("No published figure is set in this profile (`harness_validation."
                   "published`), so no difference is reported.")
        return out
    source = m["published_source"] or "source not given"
    sds = (f", {abs(m['delta']) / m['bootstrap_std']:.1f} bootstrap standard deviations"
           if m["bootstrap_std"] else "")
    out.append(f"The published figure is {m['published']:.4f} ({source}): a difference of "
               f"{m['delta']:+.4f}{sds}.")
    return out
