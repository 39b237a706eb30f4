"""Chapter 09, the judges: rank agreement, severity and self-preference of the panel on one subset.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`evaluation_source`
(the resolver: the subset's candidate x judge table, the released matrix in paper mode, this
run's graded conversations in live mode), :func:`rank_agreement` (Kendall's tau between each
pair of judges), :func:`severity` (each judge's mean against the grand mean),
:func:`self_preference` (raw and severity-corrected), :func:`intervals` (bootstrap intervals of
severity and self-preference; they need per-conversation scores), :func:`metrics`,
:func:`write` (``judge_summary.csv``, ``judge_intervals.csv`` with intervals,
``metrics.json``) and :func:`findings`. 12_figures_tables draws the judge figure from these
metrics.

The panel is the judges this run graded with (one, two or three): a single judge has no pair
to rank against and no other judge to compare its own model's score with, so those sections
say so instead of showing numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.evaluation import judges as judge_stats
from hbpsych_utils.evaluation.score_sources import EvaluationMode, EvaluationSource
from hbpsych_utils.evaluation.score_sources import evaluation_source as subset_source
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import IntervalRow, JudgesMetrics
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table, level_text, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.JUDGES
SUMMARY = "judge_summary.csv"
INTERVALS = "judge_intervals.csv"
start = base.starter(STAGE)


def _title(subset: str) -> str:
    return study.SUBSET_TITLES[subset]


@dataclass(frozen=True)
class Source:
    """The subset's scores (``None`` when this live run graded none of its conversations) and
    the judges whose own model is among the candidates (what self-preference needs)."""

    mode: EvaluationMode
    subset: str
    source: EvaluationSource | None
    own: dict[str, str]

    @property
    def empty(self) -> bool:
        """This run graded no conversation of the subset: nothing to compare the judges on."""
        return self.source is None

    @property
    def judges(self) -> list[str]:
        return [] if self.source is None else list(self.source.judges)

    @property
    def per_judge(self) -> pd.DataFrame:
        assert self.source is not None
        return self.source.per_judge

    @property
    def per_conversation(self) -> Source | None:
        """This source when it holds per-conversation scores (what intervals need)."""
        return self if self.source is not None and self.source.intervals else None

    def view(self) -> Note:
        title = _title(self.subset)
        if self.source is None:
            return Note(f"This run graded no conversation of **{title}**, so there is nothing "
                        "to compare the judges on.")
        n = len(self.source.per_judge)
        where = ("this run's graded conversations (per-conversation scores, so intervals)"
                 if self.source.intervals else "the released matrix (one clipped mean per "
                 "candidate and judge, so point values; bootstrap intervals need "
                 "per-conversation grades, which a live run makes)")
        return Note(f"**{title}**: {n} candidates graded by the "
                    f"{md_text(panel_phrase(self.source.judges))}, from {where}.")


@base.resolver
def evaluation_source(run: StageRun, *, subset: str) -> Source:
    """The candidate x judge table of ``subset`` under the run's mode
    (``score_sources.evaluation_source``; paper mode: the study's 20 candidates)."""
    mode: EvaluationMode = graph.LIVE if run.mode == graph.LIVE else graph.PAPER
    source = subset_source(run.stage, subset, mode=mode)
    own = ({} if source is None
           else judge_stats.own_models_present(source.per_judge.index))
    return Source(mode, subset, source, own)


@dataclass(frozen=True)
class RankAgreement:
    """Kendall's tau-b between each pair of judges over the candidates every judge scored."""

    subset: str
    taus: dict[str, float | None]
    n_judges: int
    n_candidates: int
    undefined: dict[str, str] = field(default_factory=dict)
    """Pair -> why its tau is undefined (``judges.kendall_tau_undefined``)."""

    def view(self) -> Table | Note:
        if self.n_judges < 2:
            return Note("With a single judge there is no rank agreement to measure.")
        frame = pd.DataFrame(
            [(*pair.split("|"), tau) for pair, tau in self.taus.items()],
            columns=["judge_a", "judge_b", "kendall_tau"])
        why = [f"— ({' and '.join(_names(pair))}): undefined, {reason}."
               for pair, reason in self.undefined.items()]
        return Table(frame, caption=f"Kendall's tau between the judges' rankings of "
                     f"{self.n_candidates} candidates on {_title(self.subset)}",
                     index=False, notes=why)


def _names(pair: str) -> list[str]:
    return [study.display_name(j) for j in pair.split("|")]


@base.needs
def rank_agreement(source: Source) -> RankAgreement:
    """Kendall's tau-b between every pair of judges (``judges.kendall_taus``)."""
    n = len(judge_stats.complete_rows(source.per_judge, source.judges))
    return RankAgreement(source.subset, judge_stats.kendall_taus(source.per_judge,
                                                                 source.judges),
                         len(source.judges), n,
                         judge_stats.kendall_tau_undefined(source.per_judge, source.judges))


@dataclass(frozen=True)
class Severity:
    """Each judge's mean over the candidates minus the grand mean (negative: harsher)."""

    grand_mean: float | None
    severity: dict[str, float]

    def view(self) -> Table:
        frame = pd.Series(self.severity, name="severity").rename_axis("judge").to_frame()
        caption = f"Severity against the grand mean {self.grand_mean:.3f}"
        if len(self.severity) == 1:
            caption += " (a single judge: 0 by definition)"
        return Table(frame, caption=caption)


@base.needs
def severity(source: Source) -> Severity:
    """Grand mean and each judge's severity, over the candidates every judge scored."""
    return Severity(judge_stats.grand_mean(source.per_judge, source.judges),
                    judge_stats.severity(source.per_judge, source.judges))


@dataclass(frozen=True)
class SelfPreference:
    """Each judge's score for its own model minus the other judges' mean for it, raw and after
    removing every judge's severity; only judges whose own model is a candidate."""

    raw: dict[str, float | None]
    corrected: dict[str, float | None]
    reason: str = ""
    """Why no judge has one (empty when some do)."""

    def view(self) -> Table | Note:
        if not self.raw:
            return Note(md_text(self.reason))
        frame = pd.DataFrame({"self_preference_raw": self.raw,
                              "self_preference_corrected": self.corrected}).rename_axis("judge")
        return Table(frame, caption="Self-preference (own-model score − other judges' mean)")


@base.needs
def self_preference(source: Source) -> SelfPreference:
    """Raw and severity-corrected self-preference (``judges.self_preference``)."""
    raw: dict[str, float | None] = dict(
        judge_stats.self_preference(source.per_judge, source.judges, own=source.own))
    corrected: dict[str, float | None] = dict(judge_stats.self_preference(
        source.per_judge, source.judges, own=source.own, corrected=True))
    reason = ("" if raw else "A single judge has no other judges to compare its own model's "
              "score with, so self-preference is undefined." if len(source.judges) < 2 else
              "No judge's own model is among the candidates, so self-preference is undefined.")
    return SelfPreference(raw, corrected, reason)


@dataclass(frozen=True)
class Intervals:
    """Bootstrap intervals of severity and self-preference (``judges.bootstrap_judge_stats``)."""

    frame: pd.DataFrame
    subset: str
    n_resamples: int
    level: float

    def view(self) -> Table:
        return Table(self.frame, caption=f"Bootstrap intervals on {_title(self.subset)} "
                     f"({level_text(self.level)}, {self.n_resamples:,} resamples)",
                     index=False, level=self.level)


@base.needs
def intervals(source: Source, *, n_resamples: int, seed: int, level: float) -> Intervals:
    """Bootstrap intervals of severity and self-preference at ``level``: conversations
    resampled jointly for every candidate and judge, ``n_resamples`` times from ``seed``
    (``judges.bootstrap_judge_stats``). Needs per-conversation scores
    (``Source.per_conversation``)."""
    assert source.source is not None and source.source.scores is not None
    table = judge_stats.bootstrap_judge_stats(
        source.source.scores, judges=source.judges, own=source.own,
        n_resamples=n_resamples, seed=seed, level=level)
    return Intervals(table, source.subset, n_resamples, level)


def metrics(source: Source, agreement: RankAgreement | None, levels: Severity | None,
            preference: SelfPreference | None, bootstrap: Intervals | None) -> JudgesMetrics:
    """09's metrics: the point values in either mode, the interval rows with per-conversation
    scores. A subset this run graded nothing of has no values (empty, ``grand_mean`` null)."""
    extra: dict[str, Any] = {}
    if agreement is not None and agreement.undefined:
        extra["kendall_tau_undefined"] = agreement.undefined
    if bootstrap is not None:
        extra["intervals"] = [IntervalRow(**row)
                              for row in bootstrap.frame.to_dict(orient="records")]
        extra["ci_level"] = bootstrap.level
    return JudgesMetrics(
        mode=source.mode, subset=source.subset,
        kendall_tau=agreement.taus if agreement is not None else {},
        grand_mean=levels.grand_mean if levels is not None else None,
        severity=levels.severity if levels is not None else {},
        self_preference_raw=preference.raw if preference is not None else {},
        self_preference_corrected=preference.corrected if preference is not None else {},
        n_candidates=agreement.n_candidates if agreement is not None else 0, **extra)


def summary_table(m: JudgesMetrics) -> pd.DataFrame:
    """``judge_summary.csv``: severity and self-preference (raw, corrected) per judge."""
    return pd.DataFrame({
        "severity": m.severity,
        "self_preference_raw": pd.Series(m.self_preference_raw, dtype=float),
        "self_preference_corrected": pd.Series(m.self_preference_corrected, dtype=float),
    }).rename_axis("judge")


def write(run: StageRun, m: JudgesMetrics, bootstrap: Intervals | None) -> Written:
    """The intervals (with per-conversation scores), the per-judge summary and
    ``metrics.json``."""
    files: dict[str, pd.DataFrame] = {}
    if bootstrap is not None:
        files[INTERVALS] = bootstrap.frame
    files[SUMMARY] = summary_table(m)
    return base.write(run, m, tables=files)


def _name(model: str) -> str:
    return md_text(study.display_name(model))


def findings(m: JudgesMetrics) -> Findings:
    """The sentences of "What we found", from 09's metrics.

    The subset, the range of the pairwise Kendall taus, the most lenient and the harshest judge
    (largest and smallest severity) against the grand mean, and each judge's self-preference,
    raw and severity-corrected, where its own model is a candidate. Numbers only: the
    thresholds that turn them into "agree on the order" or "differ in level" are applied in
    12_figures_tables.
    """
    title = _title(m.subset)
    if not m.severity:
        return Findings([f"This run graded no conversation of {title}, so there is nothing to "
                         "say about the judges on it."])
    sev = m.severity
    taus = [t for t in m.kendall_tau.values() if t is not None]
    out = []
    if len(taus) == 1:
        out.append(f"On {title}, over {m.n_candidates} candidates the two judges' rankings "
                   f"agree with Kendall's tau {taus[0]:.2f}.")
    elif taus:
        out.append(f"On {title}, over {m.n_candidates} candidates the judges' rankings agree "
                   f"with Kendall's tau between {min(taus):.2f} and {max(taus):.2f}.")
    elif m.kendall_tau:
        out.append(f"On {title} Kendall's tau is undefined for every pair of judges (a judge "
                   "gave every candidate the same score, or fewer than two candidates).")
    else:
        out.append(f"On {title} there is a single judge, so there is no rank agreement to "
                   "measure.")
    if len(sev) > 1:
        harshest, lenient = min(sev, key=sev.__getitem__), max(sev, key=sev.__getitem__)
        assert m.grand_mean is not None
        out.append(f"{_name(lenient)} is the most lenient ({sev[lenient]:+.3f} against the "
                   f"grand mean {m.grand_mean:.3f}) and {_name(harshest)} the harshest "
                   f"({sev[harshest]:+.3f}).")
    raw, cor = m.self_preference_raw, m.self_preference_corrected
    if raw:
        out.append("Self-preference, raw: "
                   + ", ".join(f"{_name(j)} {v:+.3f}" for j, v in raw.items() if v is not None)
                   + "; after removing each judge's severity: "
                   + ", ".join(f"{_name(j)} {v:+.3f}" for j, v in cor.items() if v is not None)
                   + ".")
    elif len(sev) < 2:
        out.append("With no other judge to compare with, self-preference is undefined.")
    else:
        out.append("No judge's own model is among the candidates, so self-preference is "
                   "undefined.")
    return Findings(out)
