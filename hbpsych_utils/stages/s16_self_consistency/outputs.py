"""Chapter 16's metrics, files and "What we found"."""

from __future__ import annotations

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import consistency
from hbpsych_utils.pipeline.metrics.s16_self_consistency import (
    FlipRate,
    JudgeRefusals,
    ScoreSpread,
    SelfConsistencyMetrics,
)
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.display import Findings
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written
from hbpsych_utils.stages.s16_self_consistency.regrading import (
    FLIP_RATES_FILE,
    FLIPS_BY_FILE,
    REFUSALS_FILE,
    REPEATS_FILE,
    SPREAD_FILE,
    Inputs,
    Regraded,
)
from hbpsych_utils.stages.s16_self_consistency.results import (
    FlippingCriteria,
    Flips,
    Refusals,
    Scores,
)


def _num(value: float | None) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _flip_metrics(f: Flips) -> dict[str, FlipRate]:
    return {r.judge: FlipRate(
        n_items=r.n_items, n_flipped=r.n_flipped, n_conversations=r.n_conversations,
        n_left_out=r.n_left_out, rate=r.rate, low=r.low, high=r.high,
        repeat_ac1=f.ac1.get(r.judge), self_consistent=consistency.self_consistent(r),
        undefined={k: v for k, v in (("rate", r.undefined if r.rate is None else None),
                                     ("interval", r.undefined),
                                     ("repeat_ac1", f.ac1_undefined.get(r.judge))) if v}
        or None) for r in f.rates}


def _spread_metrics(s: Scores) -> dict[str, ScoreSpread]:
    out = {}
    for cand, row in s.spread.iterrows():
        columns = [c for c in s.spread.columns if c.startswith("repeat_")]
        out[str(cand)] = ScoreSpread(
            by_repeat={c.removeprefix("repeat_"): _num(row[c]) for c in columns},
            min=_num(row["min"]), max=_num(row["max"]), spread=_num(row["spread"]),
            undefined=row["undefined"] or None)
    return out


def _refusal_metrics(r: Refusals) -> dict[str, JudgeRefusals]:
    def sums(frame: pd.DataFrame, judge: str) -> pd.Series:
        return frame[frame["judge"] == judge][["judge_refused", "no_verdict", "verdicts"]].sum()

    out = {}
    for judge in dict.fromkeys([*r.grading["judge"], *r.repeats["judge"]]):
        g, k = sums(r.grading, judge), sums(r.repeats, judge)
        out[str(judge)] = JudgeRefusals(
            grading_judge_refused=int(g["judge_refused"]), grading_no_verdict=int(g["no_verdict"]),
            grading_verdicts=int(g["verdicts"]), repeats_judge_refused=int(k["judge_refused"]),
            repeats_no_verdict=int(k["no_verdict"]), repeats_verdicts=int(k["verdicts"]))
    return out


def metrics(data: Inputs, regraded: Regraded | None, f: Flips | None, s: Scores | None,
            r: Refusals | None, *, repeats: int, repeat_sample: int) -> SelfConsistencyMetrics:
    """16's metrics: without re-gradings, the mode and the repeats asked for; live, the sample,
    what re-grading it did and cost, each flip rate (and the panel's, and whether it flips
    less than every judge), each candidate's score spread, the ranking taus and the judges'
    refusals."""
    if regraded is None or f is None or s is None or r is None:
        return SelfConsistencyMetrics(mode=data.mode, repeats=repeats,
                                      repeat_sample=repeat_sample)
    sm = regraded.data
    spreads = _spread_metrics(s)
    values = [x.spread for x in spreads.values() if x.spread is not None]
    return SelfConsistencyMetrics(
        mode=data.mode, repeats=repeats, repeat_sample=repeat_sample, n_items=len(sm.items),
        n_conversations=sm.n_conversations, judges=sm.judges,
        simulator_flip_rate=regraded.flip_rate, n_calls=regraded.n_calls,
        spend_usd=regraded.spend_usd, spend_earlier_attempts_usd=regraded.paid_earlier,
        flip_rates=_flip_metrics(f), panel_flips_less=consistency.panel_flips_less(f.rates),
        score_spread=spreads, largest_spread=max(values) if values else None,
        ranking_taus=s.taus, ranking_taus_undefined=s.taus_undefined or None,
        ranking_stable=consistency.ranking_stable(s.taus),
        judge_refusals=_refusal_metrics(r), ci_level=f.level)


def write(run: StageRun, m: SelfConsistencyMetrics, regraded: Regraded | None,
          f: Flips | None, c: FlippingCriteria | None, s: Scores | None,
          r: Refusals | None) -> Written:
    """Live: ``repeats.csv``, ``flip_rates.csv``, ``flips_by_label.csv``,
    ``score_spread.csv``, ``judge_refusals.csv``; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    if regraded is not None:
        tables[REPEATS_FILE] = regraded.repeats
    if f is not None:
        tables[FLIP_RATES_FILE] = f.frame
    if c is not None:
        tables[FLIPS_BY_FILE] = c.frame
    if s is not None:
        tables[SPREAD_FILE] = s.spread.drop(columns="undefined")
    if r is not None:
        tables[REFUSALS_FILE] = r.frame
    return base.write(run, m, tables=tables)


def _judge_sentence(name: str, x: FlipRate, level: float) -> str:
    who = ("The panel majority" if name == consistency.PANEL
           else md_text(study.display_name(name)))
    if x.rate is None:
        return f"{who}'s flip rate is undefined ({'; '.join((x.undefined or {}).values())})."
    out = f"{who} flipped on {x.n_flipped:,} of {x.n_items:,} items ({x.rate:.1%}"
    if x.low is not None and x.high is not None:
        out += f", {vocabulary.level_text(level)} interval {x.low:.1%} to {x.high:.1%}"
    verdict = {True: f": it agrees with itself (below {study.SELF_CONSISTENT_FLIP_RATE:.0%})",
               False: f": it does not agree with itself (its interval reaches "
                      f"{study.SELF_CONSISTENT_FLIP_RATE:.0%})",
               None: ""}[x.self_consistent]
    return out + ")" + verdict + "."


def _ranking_sentence(m: SelfConsistencyMetrics) -> str:
    taus = [v for v in (m.ranking_taus or {}).values() if v is not None]
    if m.ranking_stable is None:
        why = "; ".join((m.ranking_taus_undefined or {}).values()) or "no pair of repeats"
        return f"Whether re-grading keeps the ranking is undefined ({why})."
    kept = "keeps" if m.ranking_stable else "does not keep"
    return (f"Re-grading {kept} the candidates' ranking: Kendall's τ between repeats from "
            f"{min(taus):.3f} to {max(taus):.3f} (the bar is {study.RANKING_STABLE_TAU}).")


def findings(m: SelfConsistencyMetrics) -> Findings | None:
    """The sentences of "What we found", from 16's metrics; ``None`` without re-gradings (the
    chapter said why above). The sample and its repeats; each judge's and the panel majority's
    flip rate against ``study.SELF_CONSISTENT_FLIP_RATE``; whether the panel flips less than
    every judge; the largest score spread; the ranking against ``study.RANKING_STABLE_TAU``; the
    judges' own refusals."""
    if m.flip_rates is None:
        return None
    out = [f"{count(m.n_items or 0, 'item')} of {count(m.n_conversations or 0, 'conversation')}"
           f" graded {m.repeats} times by each judge (07's grading and "
           f"{count((m.repeats or 1) - 1, 'repeat')})."]
    if m.simulator_flip_rate is not None:
        out.append(f"The judges are the simulator's, set to flip {m.simulator_flip_rate:.1%} of "
                   "grader prompts: the rates measure that setting, not a model.")
    out += [_judge_sentence(name, x, m.ci_level or study.CI_LEVEL)
            for name, x in m.flip_rates.items()]
    if m.panel_flips_less is not None:
        out.append("The panel majority flips less than every judge alone." if m.panel_flips_less
                   else "The panel majority does not flip less than every judge alone.")
    if m.largest_spread is not None:
        out.append(f"Across the repeats, a candidate's panel score moves by at most "
                   f"{m.largest_spread:.3f}.")
    out += [_ranking_sentence(m), _refusal_sentence(m)]
    return Findings(out)


def _refusal_sentence(m: SelfConsistencyMetrics) -> str:
    refused = {j: x.repeats_judge_refused + x.grading_judge_refused
               for j, x in (m.judge_refusals or {}).items()}
    if not any(refused.values()):
        return "No judge's provider refused or filtered a verdict."
    return "The judges' providers refused or filtered " + ", ".join(
        f"{count(n, 'verdict')} of {md_text(study.display_name(j))}"
        for j, n in refused.items() if n) + " (never read as not met)."
