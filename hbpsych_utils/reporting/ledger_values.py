"""This run's side of the reproduction ledger: the value of each printed number, from the
stages' typed metrics only, or why this run has none.

A number is either one metrics field (``[stage, field, key, ...]``: :func:`at`) or a named
measure over a stage's metrics (:data:`MEASURES`: a rank, a difference and its interval, the
pairs a test separates, ...), as ``data/paper_numbers.yaml`` says. A value this run cannot give
is a :class:`Missing` with the reason in one clause.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hbpsych_utils import study
from hbpsych_utils.construction.tally import NO_CATEGORY_MAJORITY
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as m
from hbpsych_utils.pipeline.metrics import M, StageMetrics
from hbpsych_utils.reporting.run_metrics import RunMetrics, of


@dataclass(frozen=True)
class Missing:
    """A value this run cannot give, and why (one clause, e.g. "08_scores did not run")."""

    reason: str


Value = float | int | str | Missing

def chapter(stage: str) -> str:
    """A stage as a reader knows it: "chapter 08 (Scores and the leaderboard)"."""
    return f"chapter {stage[:2]} ({graph.spec(stage).title})"


def _stage(metrics: RunMetrics, stage: StageMetrics[M]) -> M | Missing:
    """A stage's metrics as its model, or why the run has none."""
    found = of(metrics, stage)
    return found if found is not None else Missing(f"{chapter(stage.stage)} did not run")


def at(metrics: RunMetrics, path: Sequence[str]) -> Value:
    """The value at ``[stage, field, key, ...]`` of the stages' metrics, or why it is missing."""
    node: object = metrics.get(path[0])
    if node is None:
        return Missing(f"{chapter(path[0])} did not run")
    for part in path[1:]:
        node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
        if node is None:
            return Missing(f"{chapter(path[0])} reports no such value in this run")
    if isinstance(node, int | float | str):
        return node
    return Missing(f"{chapter(path[0])} reports no single value for it")


def _per_judge_only(scores: m.ScoresMetrics) -> Missing:
    return Missing("needs per-conversation grades; the released matrices hold one mean per "
                   "candidate and judge" if scores.point_estimates_only
                   else "this run's paired comparisons do not include this pair")


def _ranked(metrics: RunMetrics, rank: str) -> Value:
    scores = _stage(metrics, m.SCORES)
    if isinstance(scores, Missing):
        return scores
    i = int(rank) - 1
    return scores.ranking[i] if i < len(scores.ranking) else Missing(
        f"this run ranks {len(scores.ranking)} candidates")


def _rank_range(metrics: RunMetrics, first: str, last: str, end: str) -> Value:
    scores = _stage(metrics, m.SCORES)
    if isinstance(scores, Missing):
        return scores
    models = scores.ranking[int(first) - 1:int(last)]
    if len(models) < int(last) - int(first) + 1:
        return Missing(f"this run ranks {len(scores.ranking)} candidates")
    values = [scores.panel_mean[m] for m in models]
    return min(values) if end == "low" else max(values)


def _top_under_judge(metrics: RunMetrics, judge: str) -> Value:
    scores = _stage(metrics, m.SCORES)
    if isinstance(scores, Missing):
        return scores
    means = scores.per_judge.get(judge)
    if not means:
        return Missing(f"this run has no judge {judge}")
    return max(means, key=lambda m: means[m])


def _pair_rows(scores: m.ScoresMetrics) -> list[m.PairedDifferenceRow]:
    return list(scores.paired_differences or [])


def _separated_pairs(metrics: RunMetrics, how: str) -> Value:
    scores = _stage(metrics, m.SCORES)
    if isinstance(scores, Missing):
        return scores
    rows = _pair_rows(scores)
    if not rows:
        return _per_judge_only(scores)
    if how == "holm":
        return sum(r.p_holm < study.ALPHA for r in rows)
    # an undefined interval (None) separates nothing
    return sum(r.ci_low is not None and r.ci_high is not None and (r.ci_low > 0 or r.ci_high < 0)
               for r in rows)


def _pair(scores: m.ScoresMetrics, a: str, b: str
          ) -> tuple[m.PairedDifferenceRow, float] | None:
    """The paired row of ``a`` and ``b`` and the sign that turns it into ``a − b``."""
    for r in _pair_rows(scores):
        if (r.a, r.b) == (a, b):
            return r, 1.0
        if (r.a, r.b) == (b, a):
            return r, -1.0
    return None


def _difference(metrics: RunMetrics, a: str, b: str) -> Value:
    """``a − b``: the paired estimate where the run made one, else the panel means' difference
    (the same number when both are means over the same conversations)."""
    scores = _stage(metrics, m.SCORES)
    if isinstance(scores, Missing):
        return scores
    found = _pair(scores, a, b)
    if found is not None:
        return found[1] * found[0].difference
    if a not in scores.panel_mean or b not in scores.panel_mean:
        return Missing(f"this run did not score both {a} and {b}")
    return scores.panel_mean[a] - scores.panel_mean[b]


def _difference_interval(metrics: RunMetrics, a: str, b: str, end: str) -> Value:
    scores = _stage(metrics, m.SCORES)
    if isinstance(scores, Missing):
        return scores
    found = _pair(scores, a, b)
    if found is None:
        return _per_judge_only(scores)
    r, sign = found
    if r.ci_low is None or r.ci_high is None:
        return Missing("the interval is undefined in this run")
    ends = (sign * r.ci_low, sign * r.ci_high)
    return min(ends) if end == "low" else max(ends)


def _best_pair_ac1(metrics: RunMetrics, stage: str) -> Value:
    rnd = _stage(metrics, m.MODELS[stage])
    if isinstance(rnd, Missing):
        return rnd
    if not isinstance(rnd, m.RoundMetrics):
        return Missing(f"{chapter(stage)} is not a review round")
    pairs = [v for v in (rnd.ac1_pairs or {}).values() if v is not None and math.isfinite(v)]
    if not pairs:
        return Missing(f"{chapter(stage)} has no pairwise agreement in this run")
    return max(pairs)


def _categories_at_most(metrics: RunMetrics, limit: str) -> Value:
    found = _stage(metrics, m.SUBSET)
    if isinstance(found, Missing):
        return found
    return sum(1 for cat, n in found.category_counts.items()
               if cat != NO_CATEGORY_MAJORITY and n <= int(limit))


def _kendall_tau(metrics: RunMetrics, a: str, b: str) -> Value:
    found = _stage(metrics, m.JUDGES)
    if isinstance(found, Missing):
        return found
    for key in (f"{a}|{b}", f"{b}|{a}"):
        if (tau := found.kendall_tau.get(key)) is not None:
            return tau
    return Missing(f"this run has no τ for {a} and {b}")


def _self_preference_interval(metrics: RunMetrics, judge: str, end: str) -> Value:
    found = _stage(metrics, m.JUDGES)
    if isinstance(found, Missing):
        return found
    for r in found.intervals or []:
        if r.stat == "self_preference_corrected" and r.judge == judge:
            v = r.low if end == "low" else r.high
            return v if v is not None else Missing("the interval is undefined in this run")
    return Missing("needs per-conversation grades; the released matrices hold one mean per "
                   "candidate and judge" if found.mode == "paper"
                   else f"this run has no interval for {judge}")


def _refusing_models(metrics: RunMetrics) -> Value:
    found = _stage(metrics, m.REFUSALS)
    if isinstance(found, Missing):
        return found
    return sum(1 for n in found.refusals.values() if n > 0)


def _mean_without_refusals(metrics: RunMetrics, model: str) -> Value:
    found = _stage(metrics, m.REFUSALS)
    if isinstance(found, Missing):
        return found
    for r in found.sensitivity or []:
        if r.candidate == model and r.mean_excluded is not None:
            return r.mean_excluded
    return Missing("needs per-conversation grades; the released matrices hold one mean per "
                   "candidate and judge" if found.mode == "paper"
                   else f"this run has no refusal sensitivity for {model}")


MEASURES: dict[str, Callable[..., Value]] = {
    "ranked": _ranked,
    "rank_range": _rank_range,
    "top_under_judge": _top_under_judge,
    "separated_pairs": _separated_pairs,
    "difference": _difference,
    "difference_interval": _difference_interval,
    "best_pair_ac1": _best_pair_ac1,
    "categories_at_most": _categories_at_most,
    "kendall_tau": _kendall_tau,
    "self_preference_interval": _self_preference_interval,
    "refusing_models": _refusing_models,
    "mean_without_refusals": _mean_without_refusals,
}
"""Named measures for numbers that are not one metrics field (``measure:`` in the data)."""


MEASURE_STAGES: dict[str, str] = {
    "ranked": graph.SCORES, "rank_range": graph.SCORES, "top_under_judge": graph.SCORES,
    "separated_pairs": graph.SCORES, "difference": graph.SCORES,
    "difference_interval": graph.SCORES, "categories_at_most": graph.SUBSET,
    "kendall_tau": graph.JUDGES, "self_preference_interval": graph.JUDGES,
    "refusing_models": graph.REFUSALS, "mean_without_refusals": graph.REFUSALS,
}
"""The stage each named measure reads (``best_pair_ac1`` names its stage in its argument)."""
