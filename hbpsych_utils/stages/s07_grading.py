"""07 · Grading with the judge panel, or the released run's grading logs.

Both modes first fetch the HealthBench grader template and check its sha256. ``live`` grades
every gradable reply of 06 (``responses.jsonl``) with every judge through the engine
(:func:`panel.grade`: batch APIs with synchronous fallback, bounded re-asks) and writes
``verdicts.csv`` (read back with :func:`panel.read_verdicts`), per-conversation ``scores.csv``
per judge (read by 08-10) and a per-judge ``census.csv``. ``paper`` reports what the released
logs say about grading: ``spend_by_judge.csv``, ``anomalies.csv`` and the verdicts that were
never obtained. ``judges`` left ``None`` is the study's panel (``study.JUDGE_PANEL``); the
judges used are reported in the metrics either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.core import sources
from hbpsych_utils.core.config import GradingParams
from hbpsych_utils.evaluation import generation, grading, panel, refusals, runlog
from hbpsych_utils.evaluation.refusals import ErrorEvent
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "07_grading"
VERDICTS_FILE = "verdicts.csv"
SCORES_FILE = "scores.csv"


def start(namespace: Mapping[str, Any]) -> StageRun[GradingParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[GradingParams]) -> StageResult:
    """Grade (``live``) or summarise the released grading logs (``paper``); write and return."""
    params = run.params
    stage = run.stage
    template_path = stage.fetch(grading.TEMPLATE_ARTIFACT)
    template = grading.load_template(template_path)
    template_sha256 = sources.sha256_file(template_path)
    if run.mode == "live":
        result = _live(run, stage, params, template, template_sha256)
    else:
        result = _paper(run, stage, template_sha256)
    checked = pd.DataFrame({"characters": [len(template)], "sha256": [template_sha256]},
                           index=pd.Index([grading.TEMPLATE_ARTIFACT], name="artifact"))
    result.views = {"Grader template (sha256-verified)": checked, **result.views}
    return result.write()


def _live(run: StageRun[Any], stage: Stage, params: GradingParams, template: str,
          template_sha256: str) -> StageResult:
    responses = generation.read_responses(stage.upstream("06_generation", "responses.jsonl"))
    by_id = {c.prompt_id: c
             for c in corpus.load_recorded(stage.upstream("01_corpus", corpus.SOURCE_RECORD))}
    judges = params.judge_panel()
    with run.open_engine(conversations=list(by_id.values())) as engine:
        graded = panel.grade(engine, responses, by_id, judges, template,
                             temperature=params.temperature, max_tokens=params.max_tokens,
                             max_reasks=params.max_reasks, mode=run.llm.mode,
                             response_schema=grading.VERDICT_SCHEMA if params.response_schema
                             else None, prompt_caching=run.llm.prompt_caching)
        ledger = engine.spend()  # everything this run's store has paid for (06 and 07)
    scores = grading.scores_from_verdicts(graded.verdicts, by_id)
    census = graded.census()
    metrics = live_metrics(params, judges, template_sha256, graded, scores, census,
                           ledger["cost"], prompt_caching=run.llm.prompt_caching)
    return StageResult(run, metrics,
        tables={VERDICTS_FILE: graded.verdicts, SCORES_FILE: scores, "census.csv": census},
        views={"Verdicts per judge": census},
        findings=findings(metrics, max_reasks=params.max_reasks),
    )


def live_metrics(params: GradingParams, judges: list[str], template_sha256: str,
                 graded: panel.PanelRun, scores: pd.DataFrame, census: pd.DataFrame,
                 ledger_cost: float, *, prompt_caching: bool = True) -> dict[str, Any]:
    """``metrics.json`` of a live run: the panel and settings used, the template's hash, what
    the grading did (recovered, re-asked, excluded), the scores it gave and what it cost.

    ``spend_usd`` is what this grading paid (its engine runs' ledger lines, priced with the
    registry's cached-token prices; answers already in the store cost nothing), with the prompt
    tokens the providers served from (``cache_read_tokens``) and wrote to
    (``cache_write_tokens``) their prompt caches, in total and per judge (``spend_by_judge``);
    ``ledger_cost_usd`` is everything the run's store has paid for (06 and 07)."""
    counts = graded.counts()
    totals = graded.spend_totals()
    return {
        "mode": "live", "judges": judges, "temperature": params.temperature,
        "response_schema": params.response_schema,
        "grader_template_sha256": template_sha256,
        **{k: counts[k] for k in ("n_criteria_graded", "n_recovered", "n_reasked",
                                  "n_excluded", "n_replies_not_graded")},
        "n_scores": int(scores.score.notna().sum()),
        "n_unscored": int(scores.score.isna().sum()),
        "calls_by_attempt": counts["calls_by_attempt"],
        "census": census.to_dict(orient="index"),
        "ledger_cost_usd": ledger_cost,
        "prompt_caching": prompt_caching,
        "spend_usd": totals["spend_usd"],
        "input_tokens": totals["input_tokens"],
        "cache_read_tokens": totals["cache_read_tokens"],
        "cache_write_tokens": totals["cache_write_tokens"],
        "spend_by_judge": {j: {**row, "spend_usd": round(float(row["spend_usd"]), 6)}
                           for j, row in sorted(graded.spend.items())},
    }


def spend_sentence(m: dict[str, Any]) -> str:
    """What the grading paid, and how much of its prompts the providers served from their
    prompt caches (a share of all prompt tokens it paid for)."""
    read, total = m["cache_read_tokens"], m["input_tokens"]
    out = f"Grading paid ${m['spend_usd']:,.4f}"
    if read:
        out += (f"; {read:,} of its {total:,} prompt tokens ({read / total:.1%}) were read from "
                "the providers' prompt caches at the cached-token price.")
    else:
        out += "; no prompt token was read from a provider's prompt cache."
    return out


def _paper(run: StageRun[Any], stage: Stage, template_sha256: str) -> StageResult:
    spend = runlog.read_spend(stage.fetch("run_spend"))
    events = refusals.read_error_log(stage.fetch("run_errors"))
    grade_spend = runlog.spend_by(spend, "grade")
    grade_anomalies = runlog.anomalies(events, "grade")
    no_verdict = no_verdict_events(events)
    metrics = paper_metrics(template_sha256, grade_spend, grade_anomalies, no_verdict)
    return StageResult(run, metrics,
        tables={"spend_by_judge.csv": grade_spend.rename_axis("judge").to_frame(),
                "anomalies.csv": grade_anomalies},
        views={"Grading spend per judge (USD)": grade_spend.to_frame(),
               "Anomalies logged while grading": grade_anomalies,
               "Verdicts never obtained": no_verdict},
        findings=findings(metrics),
    )


def no_verdict_events(events: list[ErrorEvent]) -> pd.DataFrame:
    """The log's ``grade_no_verdict`` events (a verdict still missing after the bounded
    re-asks): log line, judge, candidate, conversation and detail."""
    rows = [{"line": e.line, "judge": e.judge, "candidate": e.candidate,
             "prompt_id": e.prompt_id, "detail": e.detail}
            for e in events if e.kind == "grade_no_verdict"]
    return pd.DataFrame(rows, columns=["line", "judge", "candidate", "prompt_id", "detail"])


def paper_metrics(template_sha256: str, grade_spend: pd.Series, grade_anomalies: pd.DataFrame,
                  no_verdict: pd.DataFrame) -> dict[str, Any]:
    """``metrics.json`` in paper mode: template hash, grading spend (total and per judge),
    anomaly counts and verdicts never obtained."""
    kinds = grade_anomalies.sum().to_dict() if len(grade_anomalies) else {}
    return {
        "mode": "paper",
        "grader_template_sha256": template_sha256,
        "spend_grade_usd": round(float(grade_spend.sum()), 4),
        "spend_by_judge": {str(k): round(float(v), 4) for k, v in grade_spend.items()},
        "anomalies": {str(k): int(v) for k, v in kinds.items()},
        "n_no_verdict": len(no_verdict),
    }


def findings(metrics: dict[str, Any], max_reasks: int | None = None) -> list[str]:
    """The sentences of "What we found", from the metrics.

    Live: the verdicts obtained, then recovery, re-asks, exclusions, ungraded replies and
    unscored conversations, each stated as a count when there are any and as "none"
    otherwise (``max_reasks``, the bound, is named when verdicts were excluded). Paper: the
    grading spend per judge, the anomalies logged and the verdicts never obtained.
    """
    m = metrics
    if m["mode"] == "live":
        out = [f"{m['n_criteria_graded']:,} criterion verdicts from {len(m['judges'])} "
               f"judge(s)."]
        out.append(f"{m['n_recovered']} verdict(s) were recovered from malformed JSON by "
                   "pattern extraction." if m["n_recovered"]
                   else "Every verdict parsed as the reference grader reads it; none needed "
                        "recovery.")
        out.append(f"{m['n_reasked']} criterion verdict(s) needed a re-ask." if m["n_reasked"]
                   else "No criterion needed a re-ask.")
        bound = f" after {max_reasks} re-ask(s)" if max_reasks is not None else ""
        out.append(f"{m['n_excluded']} verdict(s) were still missing{bound} and were excluded "
                   "(never counted as false)." if m["n_excluded"]
                   else "No verdict was excluded.")
        if m["n_replies_not_graded"]:
            out.append(f"{m['n_replies_not_graded']} reply(ies) were not graded because "
                       "their generation failed.")
        out.append(f"{m['n_scores']:,} (judge, candidate, conversation) scores"
                   + (f"; {m['n_unscored']} left unscored because a verdict was missing."
                      if m["n_unscored"] else "; none left unscored."))
        if "spend_usd" in m:
            out.append(spend_sentence(m))
        return out
    per_judge = ", ".join(f"{study.display_name(j)}: ${v:,.2f}"
                          for j, v in m["spend_by_judge"].items())
    out = [f"Grading cost **${m['spend_grade_usd']:,.2f}** across the panel ({per_judge})."]
    logged = ", ".join(f"{n} × {k}" for k, n in m["anomalies"].items())
    out.append(f"The grading log records {logged}." if logged
               else "The grading log records no anomalies.")
    out.append(f"{m['n_no_verdict']} verdict(s) were never obtained after the bounded re-asks."
               if m["n_no_verdict"]
               else "Every verdict was eventually obtained.")
    return out
