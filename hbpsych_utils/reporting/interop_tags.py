"""``filter-results --by-tag``: per model and subset, every rubric axis and theme scored from
an input's per-criterion results, with simple-evals' per-tag semantics and the study's
statistics (:mod:`~hbpsych_utils.evaluation.breakdowns`, the same code the compendium's chapter
14 uses). Themes a log does not record (simple-evals) are taken from the HealthBench corpus for
the conversations it holds (:func:`corpus_themes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.evaluation import breakdowns, grading
from hbpsych_utils.reporting.interop_records import (
    GradedRubric,
    InteropError,
    LoadedResults,
    interval_end,
)
from hbpsych_utils.reporting.interop_report import Subset, interval_text, score_text
from hbpsych_utils.reporting.vocabulary import level_text


def corpus_themes(results: LoadedResults) -> dict[str, tuple[str, ...]]:
    """Example tags from the HealthBench corpus, for the conversations whose log records none
    (simple-evals): prompt id -> tags, for those the corpus holds (offline, the partial one)."""
    wanted = {pid for recs in results.by_model.values() for pid, r in recs.items()
              if r.criteria is not None and r.criteria.example_tags is None}
    if not wanted:
        return {}
    held = corpus.load_for_profile(allow_partial=True).by_id()
    return {pid: held[pid].example_tags for pid in wanted if pid in held}


@dataclass(frozen=True)
class TagReport:
    model: str
    subset: str
    subset_name: str
    scorer: str
    tag: str
    n: int
    clipped_mean: float
    ci_low: float | None
    ci_high: float | None
    """``None`` where there is no interval (one conversation)."""
    bootstrap_std: float
    n_graded: int
    """Subset conversations of the input with per-criterion results."""
    n_without_themes: int
    """Of those, how many have no example tags (neither in the log nor in the corpus)."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def tag_reports(
    results: LoadedResults, subsets: Iterable[Subset], *,
    corpus_tags: Mapping[str, Sequence[str]] | None = None,
    n_resamples: int = study.N_RESAMPLES, seed: int, level: float,
) -> list[TagReport]:
    """Per model and subset, every rubric axis and theme scored from the input's per-criterion
    results, as the compendium scores them (``breakdowns.tag_scores``, the panel's with
    ``breakdowns.with_panel`` when a log has several judges, ``breakdowns.summarise``); example
    tags the log lacks from ``corpus_tags``. Models and subsets without per-criterion results
    give no rows."""
    corpus_tags = corpus_tags or {}
    subsets = list(subsets)
    out = []
    for model in sorted(results.by_model):
        for sub in subsets:
            graded = {pid: r.criteria for pid, r in results.by_model[model].items()
                      if pid in set(sub.ids) and r.criteria is not None}
            if graded:
                out += _subset_tags(model, sub, graded, corpus_tags, n_resamples=n_resamples,
                                    seed=seed, level=level)
    return out


def _subset_tags(model: str, sub: Subset, graded: Mapping[str, GradedRubric],
                 corpus_tags: Mapping[str, Sequence[str]], *, n_resamples: int, seed: int,
                 level: float) -> list[TagReport]:
    """One model's tags on one subset, from the conversations with per-criterion results."""
    convs = {pid: corpus.Conversation(
        pid, (), g.rubrics, g.example_tags if g.example_tags is not None
        else tuple(corpus_tags.get(pid, ()))) for pid, g in graded.items()}
    summary = breakdowns.summarise(_scores_by_tag(model, graded, convs),
                                   n_resamples=n_resamples, seed=seed, level=level)
    bare = sum(not c.example_tags for c in convs.values())
    return [TagReport(model, sub.key, sub.name, str(r.scorer), str(r.tag), int(r.n),
                      float(r.clipped_mean), interval_end(r.ci_low), interval_end(r.ci_high),
                      float(r.bootstrap_std), len(graded), bare)
            for r in summary.itertuples(index=False)]


def _scores_by_tag(model: str, graded: Mapping[str, GradedRubric],
                   convs: Mapping[str, corpus.Conversation]) -> pd.DataFrame:
    """Each axis and theme score per conversation and scorer (each grader of the log, and the
    panel's when it has several)."""
    rows = [(grader, model, pid, i, met) for pid, g in sorted(graded.items())
            for grader, mets in g.verdicts.items() for i, met in enumerate(mets)]
    verdicts = pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id",
                                           "criterion_index", "criteria_met"])
    try:
        tags = breakdowns.tag_scores(verdicts, convs, keep=lambda t: t.startswith(
            (breakdowns.AXIS, breakdowns.THEME)))
    except grading.GradingError as exc:
        raise InteropError(f"model {model}: {exc}") from None
    graders = sorted({g for r in graded.values() for g in r.verdicts})
    return (breakdowns.with_panel(tags, graders) if len(graders) > 1
            else tags.rename(columns={"judge": "scorer"}))


def format_tags(tags: Sequence[TagReport], results: LoadedResults) -> str:
    """The per-tag report as text: per model, subset and scorer, one line per tag."""
    if not tags:
        return ("\nby tag: no input carries per-criterion results (a rubric with a verdict "
                "per criterion), so no tag can be scored")
    lines = ["\nby tag (simple-evals' per-tag rule; clipped mean over the conversations with "
             f"a score for the tag, n, {level_text(study.CI_LEVEL)} bootstrap interval)"]
    head = None
    for t in tags:
        if (t.model, t.subset_name, t.scorer) != head:
            head = (t.model, t.subset_name, t.scorer)
            themes = (f"; {t.n_without_themes} without themes (not in the log or the corpus)"
                      if t.n_without_themes else "")
            lines.append(f"\n{t.model} on {t.subset_name}, {t.scorer}: {t.n_graded} "
                         f"conversation(s) with per-criterion results{themes}")
        lines.append(f"  {t.tag}: n = {t.n}, {score_text(t.clipped_mean)} "
                     f"{interval_text(t.ci_low, t.ci_high)}")
    without = sorted(m for m in results.by_model if m not in {t.model for t in tags})
    if without:
        lines.append(f"\nno per-criterion results for: {', '.join(without)}")
    return "\n".join(lines)
