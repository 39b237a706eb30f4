"""Chapter 08, scores and the leaderboard: Table 1 per subset, its bootstrap, paired differences.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`evaluation_sources`
(for each subset, the released matrix in paper mode or this run's graded conversations in live
mode), :func:`table1` (per candidate, each judge's clipped mean and the panel's, with seeded
bootstrap intervals where the source has per-conversation scores), :func:`paired_differences`
(the top-k candidates pairwise, Holm-adjusted; live only), :func:`metrics`, :func:`write`
(``table1_<subset>.csv``, ``paired_differences_<subset>.csv``, ``metrics.json``),
:func:`findings` and :func:`whatif` (Table 1 under other scoring choices, an ipywidgets panel
in JupyterLab). The first subset with scores is the primary one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.config import AnalysesParams, ScoresParams
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.evaluation import whatif as whatif_scoring
from hbpsych_utils.evaluation.score_sources import EvaluationSource, evaluation_source
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.pipeline.metrics import PairedDifferenceRow, ScoresMetrics
from hbpsych_utils.reporting import tables, whatif_page, whatif_widget
from hbpsych_utils.reporting.display import Findings, Note, Shown, unavailable
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.SCORES


start = base.starter(STAGE, ScoresParams)


@dataclass(frozen=True, repr=False)
class Sources(Shown):
    """Each subset's evaluation source; the subsets this run has no scores for."""

    by_subset: dict[str, EvaluationSource]
    skipped: list[str]

    @property
    def primary(self) -> str:
        return next(iter(self.by_subset))

    @property
    def intervals(self) -> bool:
        return self.by_subset[self.primary].intervals

    def _repr_markdown_(self) -> str:
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
        return "\n".join(lines)


def evaluation_sources(run: StageRun[ScoresParams]) -> Sources:
    """Where each subset's scores come from under the run's mode (``score_sources``)."""
    params = run.params
    found: dict[str, EvaluationSource] = {}
    skipped = []
    for key in params.subsets:
        source = evaluation_source(run.stage, key, mode=run.mode or graph.PAPER,
                                   include_later=params.include_later)
        if source is None:
            skipped.append(key)
        else:
            found[key] = source
    if not found:
        raise scoring.ScoringError(
            f"{STAGE}: no subset of {params.subsets} has scores in profile {run.profile!r}")
    return Sources(found, skipped)


@dataclass(frozen=True, repr=False)
class Table1(Shown):
    """Table 1 of each subset (index: candidate; best first), shown in the paper's layout with
    the per-judge appendix table of the primary subset."""

    tables: dict[str, pd.DataFrame]
    intervals: bool
    n_resamples: int | None
    readers: list[tables.ReaderTable]

    def _repr_html_(self) -> str:
        return Tables([t.table() for t in self.readers])._repr_html_()

    def __repr__(self) -> str:
        return "\n\n".join(t.markdown() for t in self.readers)


def table1(run: StageRun[ScoresParams], sources: Sources) -> Table1:
    """Table 1 of every subset with scores: each judge's clipped mean and the panel's, with
    seeded bootstrap intervals and the reference's ``bootstrap_std`` where the source has
    per-conversation scores (``EvaluationSource.table1``); shown as the paper lays it out
    (``tables.paper_table1``, ``tables.per_judge_table``)."""
    n = run.params.n_resamples
    computed = {key: source.table1(n_resamples=n, seed=run.seed, level=run.ci_level)
                for key, source in sources.by_subset.items()}
    shown = {key: tables.table1(t, judges=sources.by_subset[key].judges,
                                n=sources.by_subset[key].n) for key, t in computed.items()}
    resamples = n if sources.intervals else None
    primary = sources.by_subset[sources.primary]
    readers = [tables.paper_table1(shown, judges=primary.judges, n_resamples=resamples,
                                   level=run.ci_level),
               tables.per_judge_table(shown[sources.primary], subset=sources.primary,
                                      judges=primary.judges)]
    return Table1(computed, intervals=sources.intervals, n_resamples=resamples,
                  readers=readers)


def paired_differences(run: StageRun[ScoresParams], sources: Sources,
                       table: Table1) -> Table | Note:
    """The top-k candidates of the primary subset compared pairwise: a paired bootstrap on the
    conversations both have, Holm–Bonferroni over the pairs. Needs per-conversation scores."""
    source = sources.by_subset[sources.primary]
    if source.panel_long is None:
        return unavailable("Paired differences need per-conversation grades; the released "
                           "matrices give one clipped mean per candidate and judge.")
    panel = source.panel_long.pivot(index="prompt_id", columns="candidate", values="score")
    top = scoring.top_k(table.tables[sources.primary], run.params.top_k)
    pairs = scoring.pairwise_differences(panel, top, n_resamples=run.params.n_resamples,
                                         seed=run.seed, level=run.ci_level)
    return Table(pairs, caption=f"Paired differences among the top {len(top)} on "
                 f"{study.SUBSET_TITLES[sources.primary]} (Holm-adjusted p)", index=False,
                 level=run.ci_level)


def metrics(run: StageRun[ScoresParams], sources: Sources, table: Table1,
            pairs: Table | Note) -> ScoresMetrics:
    """08's metrics: the primary subset's numbers at the top level, every subset's under
    ``by_subset``; with intervals, the resamples, the reference ``bootstrap_std`` and the
    pairs."""
    primary = sources.primary
    numbers = {key: sources.by_subset[key].numbers(t) for key, t in table.tables.items()}
    extra: dict[str, Any] = {}
    if isinstance(pairs, Table):
        extra = {
            "n_resamples": run.params.n_resamples, "ci_level": run.ci_level,
            "bootstrap_std": {c: float(v)
                              for c, v in table.tables[primary]["bootstrap_std"].items()},
            "paired_differences": [PairedDifferenceRow(**row)
                                   for row in pairs.frame.to_dict(orient="records")],
        }
    top = numbers[primary].model_dump(exclude_unset=True)
    return ScoresMetrics(mode=run.mode or graph.PAPER, include_later=run.params.include_later,
                         subset=primary, **top, by_subset=numbers, **extra)


def write(run: StageRun[ScoresParams], scores: ScoresMetrics, table: Table1,
          pairs: Table | Note) -> Written:
    """Table 1 per subset, the pairs (live) and ``metrics.json``."""
    files = {graph.TABLE1.format(subset=key): t for key, t in table.tables.items()}
    if isinstance(pairs, Table):
        files[f"paired_differences_{scores.subset}.csv"] = pairs.frame
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
        best, pairs = rank[0], m.paired_differences
        k = len({p.a for p in pairs} | {p.b for p in pairs})
        n_sig = sum(p.p_holm < alpha for p in pairs)
        assert m.ci_low is not None and m.ci_high is not None and m.n_panel is not None
        if m.ci_low[best] is None or m.ci_high[best] is None:  # one conversation
            out.append(f"{name[best]} has no interval ({scoring.ONE_CONVERSATION}); {n_sig} of "
                       f"{len(pairs)} top-{k} pairs differ after Holm–Bonferroni.")
        else:
            level = level_text(m.ci_level if m.ci_level is not None else study.CI_LEVEL)
            out.append(f"The {level} interval of {name[best]} is [{m.ci_low[best]:.3f}, "
                       f"{m.ci_high[best]:.3f}] over {m.n_panel[best]} conversations; {n_sig} "
                       f"of {len(pairs)} top-{k} pairs differ after Holm–Bonferroni (adjusted "
                       f"p < {alpha:g}).")
    elif m.point_estimates_only and len(rank) > 1:
        near = [c for c in rank[1:] if pm[rank[0]] - pm[c] <= close]
        if near:
            out.append(f"The top of the table is close: {count(len(near), 'candidate')} "
                       f"{'lies' if len(near) == 1 else 'lie'} within "
                       f"{close:g} of {name[rank[0]]} ({', '.join(name[c] for c in near)}); "
                       "without per-conversation "
                       "grades these are point estimates, and differences this small should "
                       "not be read as a ranking.")
        else:
            out.append(f"{name[rank[0]]} leads {name[rank[1]]} by "
                       f"{pm[rank[0]] - pm[rank[1]]:.3f}, more than {close:g}; these are point "
                       "estimates without intervals.")
    return Findings(out)


def whatif(run: StageRun[ScoresParams], scores: ScoresMetrics) -> Any:
    """Table 1 under other scoring choices (which judges, mean or median, the subset, the later
    models; live: refusals, the clip, the length adjustment), against this chapter's ranking:
    an ipywidgets panel in JupyterLab (``reporting.whatif_widget``), the run's own scoring
    where no widget frontend renders it. The same functions as the book's what-if page."""
    live = scores.mode == graph.LIVE
    judges = run.stage.upstream_metrics(metrics_models.GRADING).judges if live else None
    penalty = run.value("length_penalty") or AnalysesParams().length_penalty
    try:
        scorer, later = whatif_page.scorer(run.stage, scores, judges, penalty_variant=penalty,
                                           n_resamples=run.params.n_resamples, seed=run.seed,
                                           level=run.ci_level)
    except (whatif_scoring.WhatIfError, FileNotFoundError) as exc:  # e.g. no replies kept
        return unavailable(f"This run's data cannot be scored another way: {exc}")
    return whatif_widget.Panel(scorer, later)
