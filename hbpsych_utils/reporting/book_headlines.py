"""The landing page's headline numbers, in reading order, each with the chapter that computed
it: from the stages' typed metrics only (a stage that did not run contributes nothing).
"""

from __future__ import annotations

import math
from typing import TypeGuard

from pydantic import BaseModel, ConfigDict

from hbpsych_utils import study
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as m
from hbpsych_utils.pipeline.metrics import RecallMetrics, ReviewRound1Metrics
from hbpsych_utils.reporting.run_metrics import RunMetrics, of


class Headline(BaseModel):
    """One number of the landing page and the chapter (notebook stem) that computed it."""

    model_config = ConfigDict(frozen=True)

    key: str
    label: str
    value: str
    detail: str = ""
    chapter: str


def _percent(x: float) -> str:
    return f"{100 * x:.1f} %"


def finite(x: float | None) -> TypeGuard[float]:
    """Whether ``x`` is a number to show (not missing, not NaN or infinite)."""
    return x is not None and math.isfinite(x)


def _review_headlines(r: ReviewRound1Metrics | RecallMetrics | None, stage: str,
                      round_name: str) -> list[Headline]:
    """A review round's control-inclusion rate and its reviewers' agreement (Gwet's AC1)."""
    if r is None:
        return []
    out = []
    if finite(r.control_inclusion_rate):
        detail = ""
        if r.n_controls is not None and r.n_controls_included is not None:
            detail = f"{r.n_controls_included} of {r.n_controls} concealed controls included"
        out.append(Headline(
            key=f"control_inclusion_{stage[:2]}", chapter=stage, detail=detail,
            label=f"Control-inclusion rate, {round_name}",
            value=_percent(r.control_inclusion_rate)))
    if finite(r.ac1_pairwise_mean):
        parts = [f"mean over reviewer pairs ({r.ac1_pairwise_mean:.3f}), as the paper reports"]
        pairs = {k: v for k, v in (r.ac1_pairs or {}).items() if finite(v)}
        if len(pairs) > 2:
            best = max(pairs, key=lambda k: pairs[k])
            parts.append(f"the remaining pair {best.replace('-', '–')}, without the reviewer "
                         f"the others agree with least: {pairs[best]:.2f}")
        if finite(r.ac1_multirater):
            parts.append(f"multi-rater AC1: {r.ac1_multirater:.3f}")
        out.append(Headline(
            key=f"ac1_{stage[:2]}", chapter=stage, label=f"Gwet's AC1, {round_name}",
            value=f"{r.ac1_pairwise_mean:.2f}", detail="; ".join(parts)))
    return out


def headline_numbers(metrics: RunMetrics) -> list[Headline]:
    """The landing page's numbers, in reading order, from the stages' typed metrics.

    A stage that did not run (or a number it could not compute) contributes nothing."""
    return [*_corpus(of(metrics, m.CORPUS)), *_subsets(of(metrics, m.SUBSET)),
            *_review_headlines(of(metrics, m.REVIEW_ROUND1), graph.REVIEW_ROUND1, "round 1"),
            *_review_headlines(of(metrics, m.RECALL), graph.RECALL, "round 2 (recall)"),
            *_ranking(of(metrics, m.SCORES)), *_rank_agreement(of(metrics, m.JUDGES)),
            *_harness(of(metrics, m.HARNESS))]


def _corpus(corpus: m.CorpusMetrics | None) -> list[Headline]:
    if corpus is None:
        return []
    return [Headline(key="corpus", chapter=graph.CORPUS, label="Corpus",
                     value=f"{corpus.n_conversations:,} of {corpus.n_expected:,} conversations",
                     detail="complete" if corpus.complete else "partial")]


def _subsets(subset: m.SubsetMetrics | None) -> list[Headline]:
    """Each subset's size, its hash and whether it is the released file."""
    if subset is None:
        return []
    out = []
    hashes, matches = subset.hashes(), subset.matches()
    for key, n in subset.sizes().items():
        detail = f"sha256 {hashes[key]}"
        if key in matches:
            detail += ("; identical to the released file" if matches[key]
                       else "; differs from the released file")
        out.append(Headline(key=f"subset_{key}", chapter=graph.SUBSET,
                            label=study.SUBSET_TITLES.get(key, key),
                            value=f"{n:,} conversations", detail=detail))
    return out


def _ranking(scores: m.ScoresMetrics | None) -> list[Headline]:
    """The top three of the ranking with their panel means."""
    if scores is None or not scores.ranking:
        return []
    top = [f"{i}. {study.display_name(model)}"
           + (f" ({scores.panel_mean[model]:.3f})"
              if finite(scores.panel_mean.get(model)) else "")
           for i, model in enumerate(scores.ranking[:3], start=1)]
    where = study.SUBSET_TITLES.get(scores.subset, scores.subset)
    detail = f"panel mean on {where}, of {len(scores.ranking)} candidates"
    if scores.point_estimates_only:
        detail += "; point estimates"
    return [Headline(key="ranking", chapter=graph.SCORES, label="Top of the ranking",
                     value=", ".join(top), detail=detail)]


def _rank_agreement(judges: m.JudgesMetrics | None) -> list[Headline]:
    """The range of Kendall's τ over the judge pairs."""
    taus = [t for t in (judges.kendall_tau.values() if judges else ()) if finite(t)]
    if judges is None or not taus:
        return []
    lo, hi = min(taus), max(taus)
    where = study.SUBSET_TITLES.get(judges.subset, judges.subset)
    pairs = f"{len(taus)} judge pair{'s' if len(taus) != 1 else ''}"
    return [Headline(key="judge_tau", chapter=graph.JUDGES,
                     label="Judges' rank agreement (Kendall's τ)",
                     value=f"{lo:.3f}" if lo == hi else f"{lo:.3f} to {hi:.3f}",
                     detail=f"on {where}; {pairs}")]


def _harness(harness: m.HarnessMetrics | None) -> list[Headline]:
    """The harness check's score, against the published figure when there is one, and against
    the released run on the conversations in common."""
    if harness is None or not finite(harness.clipped_mean):
        return []
    n = f"n = {harness.n_scored:,}"
    std = (f"bootstrap std {harness.bootstrap_std:.3f}"
           if finite(harness.bootstrap_std) else "")
    if finite(harness.delta) and finite(harness.published):
        src = f" ({harness.published_source})" if harness.published_source else ""
        value = f"{harness.clipped_mean:.3f} against the published {harness.published:.2f}"
        detail = (f"difference {harness.delta:+.3f}; published figure{src}; "
                  f"{', '.join(x for x in (std, n) if x)}")
    else:
        value = f"{harness.clipped_mean:.3f}"
        detail = ", ".join(x for x in (std, n, "no published figure to compare") if x)
    if finite(harness.mean_difference_vs_released) and harness.n_common_with_released:
        detail += (f"; {harness.mean_difference_vs_released:+.3f} against the released "
                   f"run on the {harness.n_common_with_released:,} conversations in common")
    return [Headline(key="harness", chapter=graph.HARNESS,
                     label="Harness check (GPT-4.1, HealthBench-Hard)",
                     value=value, detail=detail)]
