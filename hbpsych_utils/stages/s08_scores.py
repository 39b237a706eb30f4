"""Chapter 08, scores and the leaderboard: Table 1 per subset, its bootstrap, paired differences.

The chapter's calls, in order: :func:`start` (its parameters, checked),
:func:`evaluation_sources` (the resolver: for each subset, the released matrix in paper mode or
this run's graded conversations in live mode; the primary subset's per-conversation scores
where the run has them), :func:`table1` (per candidate, each judge's clipped mean and the
panel's, with seeded bootstrap intervals where the source has per-conversation scores),
:func:`paired_differences` (the top-k candidates pairwise, Holm-adjusted; it needs
per-conversation scores), :func:`metrics`, :func:`write` (``table1_<subset>.csv``,
``paired_differences_<subset>.csv``, ``metrics.json``), :func:`findings` and :func:`whatif`
(Table 1 under other scoring choices, an ipywidgets panel in JupyterLab; what it reads is
resolved with the sources). The first subset with scores is the primary one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.evaluation.score_sources import (
    EvaluationMode,
    EvaluationSource,
    RunFiles,
    evaluation_source,
    graded_judges,
)
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import PairedDifferenceRow, ScoresMetrics
from hbpsych_utils.reporting import tables, whatif_page, whatif_widget
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.tables import ReaderTable
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.SCORES
start = base.starter(STAGE)


@dataclass(frozen=True)
class WhatIfInputs:
    """What the what-if scores other choices from: the stage's view of the run's files (the
    released matrices in paper mode; 07's ``scores.csv`` and 06's replies in live mode) and the
    run's panel (07's judges in live mode; ``None``: the released matrices' judges)."""

    files: RunFiles
    judges: Sequence[str] | None


@dataclass(frozen=True)
class Sources:
    """Each subset's evaluation source under the run's mode; the subsets this run has no
    scores for; what the what-if reads (``None``: a live run that kept no replies)."""

    mode: EvaluationMode
    include_later: bool
    by_subset: dict[str, EvaluationSource]
    skipped: list[str]
    whatif: WhatIfInputs | None

    @property
    def primary(self) -> str:
        return next(iter(self.by_subset))

    @property
    def per_conversation(self) -> EvaluationSource | None:
        """The primary subset's source when it holds per-conversation scores (what paired
        differences need), else ``None``."""
        source = self.by_subset[self.primary]
        return source if source.intervals else None

    def view(self) -> Note:
        lines = []
        for key, source in self.by_subset.items():
            panel = md_text(panel_phrase(source.judges))
            what = (f"this run's graded conversations ({len(source.per_judge)} candidates, "
                    f"the {panel}; per-conversation scores, so intervals)" if source.intervals
                    else f"the released matrix ({len(source.per_judge)} candidates, the "
                    f"{panel}; one clipped mean per candidate and judge, so point estimates)")
            lines.append(f"- **{study.SUBSET_TITLES[key]}**: {what}.")
        lines += [f"- **{study.SUBSET_TITLES[key]}**: no graded conversation in this run, "
                  "so it is left out." for key in self.skipped]
        if self.per_conversation is None:
            lines.append("\nBootstrap intervals and paired differences need per-conversation "
                         "grades, which a live run makes (the smoke profile, or a real one).")
        if self.whatif is None:
            lines.append(f"\nThe what-if needs each reply (06's `{graph.RESPONSES}`, for the "
                         "refusals and the length-adjusted score), which this run has not kept.")
        return Note("\n".join(lines))


@base.resolver
def evaluation_sources(run: StageRun, *, subsets: list[str], include_later: bool) -> Sources:
    """Where each subset of ``subsets`` gets its scores under the run's mode
    (``score_sources.evaluation_source``): the released matrix (paper; the three later
    candidates too with ``include_later``) or this run's graded conversations (live); and what
    the what-if reads (live: the run's panel, and only where the run kept its replies)."""
    mode: EvaluationMode = graph.LIVE if run.mode == graph.LIVE else graph.PAPER
    found: dict[str, EvaluationSource] = {}
    skipped = []
    for key in subsets:
        source = evaluation_source(run.stage, key, mode=mode, include_later=include_later)
        if source is None:
            skipped.append(key)
        else:
            found[key] = source
    if not found:
        raise scoring.ScoringError(
            f"{STAGE}: no subset of {subsets} has scores in profile {run.profile!r}")
    # the what-if: the released matrices' judges, or the run's panel and the replies it kept
    whatif: WhatIfInputs | None = WhatIfInputs(run.stage, None)
    if mode == graph.LIVE:
        kept = run.stage.upstream_optional(graph.GENERATION, graph.RESPONSES) is not None
        whatif = WhatIfInputs(run.stage, graded_judges(run.stage)) if kept else None
    return Sources(mode, include_later, found, skipped, whatif)


@dataclass(frozen=True)
class Table1:
    """Table 1 of each subset (index: candidate; best first), with the sources it came from,
    shown in the paper's layout with the per-judge appendix table of the primary subset."""

    tables: dict[str, pd.DataFrame]
    sources: Sources
    n_resamples: int | None
    """The resamples behind its intervals (``None``: point estimates, no interval)."""
    level: float

    def readers(self) -> list[ReaderTable]:
        shown = {key: tables.table1(t, judges=self.sources.by_subset[key].judges,
                                    n=self.sources.by_subset[key].n)
                 for key, t in self.tables.items()}
        primary = self.sources.primary
        judges = self.sources.by_subset[primary].judges
        return [tables.paper_table1(shown, judges=judges, n_resamples=self.n_resamples,
                                    level=self.level),
                tables.per_judge_table(shown[primary], subset=primary, judges=judges)]

    def view(self) -> Tables:
        return Tables([t.table() for t in self.readers()])


def table1(sources: Sources, *, n_resamples: int, seed: int, level: float) -> Table1:
    """Table 1 of every subset with scores: each judge's clipped mean and the panel's, with
    ``n_resamples`` seeded bootstrap intervals at ``level`` and the reference's
    ``bootstrap_std`` where the source has per-conversation scores
    (``EvaluationSource.table1``); shown as the paper lays it out (``tables.paper_table1``,
    ``tables.per_judge_table``)."""
    computed = {key: source.table1(n_resamples=n_resamples, seed=seed, level=level)
                for key, source in sources.by_subset.items()}
    resamples = n_resamples if sources.per_conversation is not None else None
    return Table1(computed, sources, resamples, level)


@dataclass(frozen=True)
class PairedDifferences:
    """The top candidates of one subset compared pairwise (``scoring.pairwise_differences``)."""

    frame: pd.DataFrame
    subset: str
    n_resamples: int
    level: float

    def view(self) -> Table:
        k = len(set(self.frame["a"]) | set(self.frame["b"]))
        return Table(self.frame, caption=f"Paired differences among the top {k} on "
                     f"{study.SUBSET_TITLES[self.subset]} (Holm-adjusted p)", index=False,
                     level=self.level)


@base.needs
def paired_differences(source: EvaluationSource, table: Table1, *, top_k: int,
                       n_resamples: int, seed: int, level: float) -> PairedDifferences:
    """The ``top_k`` candidates of the subset compared pairwise: a paired bootstrap of
    ``n_resamples`` on the conversations both have, Holm–Bonferroni over the pairs. Needs
    per-conversation scores (``Sources.per_conversation``)."""
    assert source.panel_long is not None
    panel = source.panel_long.pivot(index="prompt_id", columns="candidate", values="score")
    top = scoring.top_k(table.tables[source.subset], top_k)
    pairs = scoring.pairwise_differences(panel, top, n_resamples=n_resamples, seed=seed,
                                         level=level)
    return PairedDifferences(pairs, source.subset, n_resamples, level)


def metrics(sources: Sources, table: Table1,
            pairs: PairedDifferences | None) -> ScoresMetrics:
    """08's metrics: the primary subset's numbers at the top level, every subset's under
    ``by_subset``; with intervals, the resamples, the reference ``bootstrap_std`` and the
    pairs."""
    primary = sources.primary
    numbers = {key: sources.by_subset[key].numbers(t) for key, t in table.tables.items()}
    extra: dict[str, Any] = {}
    if pairs is not None:
        extra = {
            "n_resamples": pairs.n_resamples, "ci_level": pairs.level,
            "bootstrap_std": {c: float(v)
                              for c, v in table.tables[primary]["bootstrap_std"].items()},
            "paired_differences": [PairedDifferenceRow(**row)
                                   for row in pairs.frame.to_dict(orient="records")],
        }
    top = numbers[primary].model_dump(exclude_unset=True)
    return ScoresMetrics(mode=sources.mode, include_later=sources.include_later,
                         subset=primary, **top, by_subset=numbers, **extra)


def write(run: StageRun, scores: ScoresMetrics, table: Table1,
          pairs: PairedDifferences | None) -> Written:
    """Table 1 per subset, the pairs (with per-conversation scores) and ``metrics.json``."""
    files = {graph.TABLE1.format(subset=key): t for key, t in table.tables.items()}
    if pairs is not None:
        files[f"paired_differences_{pairs.subset}.csv"] = pairs.frame
    return base.write(run, scores, tables=files)


def findings(m: ScoresMetrics, *, close: float = study.CLOSE_SCORES,
             alpha: float = study.ALPHA) -> Findings:
    """The sentences of "What we found", from 08's metrics.

    The ranking of the primary subset (top three, last) and the start of every other subset's;
    with intervals, the leader's interval and how many top-k pairs differ (Holm-adjusted p below
    ``alpha``); with point estimates only, whether the top is close: how many candidates lie
    within ``close`` of the leader (a gap that small is not read as a ranking without
    intervals), or by how much the leader leads when none does.
    """
    rank, pm = m.ranking, m.panel_mean
    name = {c: md_text(study.display_name(c)) for c in rank}
    kind = "panel's point estimates" if m.point_estimates_only else "panel scores"
    title = study.SUBSET_TITLES.get(m.subset, m.subset)
    out = [f"On **{title}**, the {kind} rank **{name[rank[0]]}** first ({pm[rank[0]]:.3f})"
           + "".join(f", then {name[c]} ({pm[c]:.3f})" for c in rank[1:3])
           + f"; {name[rank[-1]]} is last ({pm[rank[-1]]:.3f})."]
    for key, sub in m.by_subset.items():
        if key != m.subset:
            out.append(f"On **{study.SUBSET_TITLES.get(key, key)}** the order starts "
                       f"{', '.join(md_text(study.display_name(c)) for c in sub.ranking[:3])}.")
    if m.paired_differences is not None:
        out.append(_pairs_sentence(m, name, alpha))
    elif m.point_estimates_only and len(rank) > 1:
        out.append(_closeness_sentence(m, name, close))
    return Findings(out)


def _pairs_sentence(m: ScoresMetrics, name: dict[str, str], alpha: float) -> str:
    """The leader's interval and how many top-k pairs differ after Holm's correction."""
    best, pairs = m.ranking[0], m.paired_differences or []
    k = len({p.a for p in pairs} | {p.b for p in pairs})
    n_sig = sum(p.p_holm < alpha for p in pairs)
    assert m.ci_low is not None and m.ci_high is not None and m.n_panel is not None
    if m.ci_low[best] is None or m.ci_high[best] is None:  # one conversation
        return (f"{name[best]} has no interval ({scoring.ONE_CONVERSATION}); {n_sig} of "
                f"{len(pairs)} top-{k} pairs differ after Holm–Bonferroni.")
    level = level_text(m.ci_level if m.ci_level is not None else study.CI_LEVEL)
    return (f"The {level} interval of {name[best]} is [{m.ci_low[best]:.3f}, "
            f"{m.ci_high[best]:.3f}] over {m.n_panel[best]} conversations; {n_sig} "
            f"of {len(pairs)} top-{k} pairs differ after Holm–Bonferroni (adjusted "
            f"p < {alpha:g}).")


def _closeness_sentence(m: ScoresMetrics, name: dict[str, str], close: float) -> str:
    """Point estimates only: whether the top is close (within ``close`` of the leader)."""
    rank, pm = m.ranking, m.panel_mean
    near = [c for c in rank[1:] if pm[rank[0]] - pm[c] <= close]
    if near:
        return (f"The top of the table is close: {count(len(near), 'candidate')} "
                f"{'lies' if len(near) == 1 else 'lie'} within "
                f"{close:g} of {name[rank[0]]} ({', '.join(name[c] for c in near)}); "
                "without per-conversation grades these are point estimates, and differences "
                "this small should not be read as a ranking.")
    return (f"{name[rank[0]]} leads {name[rank[1]]} by {pm[rank[0]] - pm[rank[1]]:.3f}, more "
            f"than {close:g}; these are point estimates without intervals.")


@base.needs
def whatif(inputs: WhatIfInputs, scores: ScoresMetrics, *, length_penalty: str,
           n_resamples: int, seed: int, level: float) -> whatif_widget.Panel:
    """Table 1 under other scoring choices (which judges, mean or median, the subset, the later
    models; live: refusals, the clip, the length adjustment with ``length_penalty``, intervals
    of ``n_resamples`` seeded resamples at ``level``), against this chapter's ranking: an
    ipywidgets panel in JupyterLab (``reporting.whatif_widget``), the run's own scoring where
    no widget frontend renders it. The same functions as the book's what-if page."""
    scorer, later = whatif_page.scorer(inputs.files, scores, inputs.judges,
                                       penalty_variant=length_penalty, n_resamples=n_resamples,
                                       seed=seed, level=level)
    return whatif_widget.Panel(scorer, later)
