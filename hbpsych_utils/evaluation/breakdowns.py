"""Scores by tag and by slice: where a model fails, with HealthBench's own semantics.

Besides the overall score, simple-evals' ``healthbench_eval.py`` (``grade_sample``, then
``_aggregate_get_clipped_mean``) reports one score per tag:

- an **example-level tag** (``example_tags``: ``theme:...``, ``physician_agreed_category:...``)
  takes the conversation's overall score, for every conversation that carries it;
- a **rubric-level tag** (the tags of rubric items: ``axis:...``, ``cluster:...``,
  ``level:...``) scores the items that carry it as the overall score scores all of them: met
  points of those items (negative ones subtract) over their positive points, unclipped. An item
  with two tags counts in both. A conversation in which the tag's items have no positive points
  (none at all, or negative items only) gets no score for that tag (``calculate_score`` returns
  ``None`` and the reference skips it);
- each tag is then aggregated over the conversations that have a score for it: the mean,
  clipped to [0, 1], with n.

inspect_evals' ``healthbench`` scorer (``include_subset_scores``, read in its 0.26.0 release)
reports axis and theme scores too, but not these numbers: it clips each conversation's tag
score to [0, 1] before averaging (the reference clips only the mean), so a tag on which some
conversation scores below 0 (its negative criteria outweigh what it met) can come out higher
there. ``filter-results --by-tag`` on an Inspect log applies the reference's rule, so it can
differ from the tag numbers the log itself holds (``docs/publishing.md``).

:func:`conversation_tags` is that per-conversation step, computed with the grader's own
formula (``grading.conversation_score``, sums in rubric order); :func:`tag_scores` applies it to
every graded reply of a verdict table; :func:`summarise` aggregates with the study's statistics
(``scoring``: the clipped mean, its seeded conversation-level percentile bootstrap interval and,
from the same resamples, the reference's ``bootstrap_std``). A tag scored on one conversation
has no interval (``null``, with the reason: :func:`tag_score`); its ``bootstrap_std`` is the
reference's, 0.

Where this departs from the reference, it is because the study's grading does:

- a conversation a judge left unscored (a verdict still missing after the bounded re-asks,
  ``grading``) gives that judge no tag score either (the reference re-asks until it has every
  verdict, so it never has this case);
- the **panel**'s tag score of a conversation (:func:`with_panel`) is the equal-weight mean of
  the judges' tag scores, on the conversations every judge scored, as the panel's overall score
  is (``scoring.panel_conversation_scores``); the reference has one grader;
- a slice the reference does not have: the subset's **modal clinician category** (05_subset),
  passed as an extra example-level tag ``category:<name>`` (:func:`category_tags`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation, RubricItem
from hbpsych_utils.construction.tally import NO_CATEGORY_MAJORITY
from hbpsych_utils.evaluation import grading, scoring
from hbpsych_utils.pipeline.metrics import TagScore

PANEL = "panel"
"""The scorer name of the judge panel in the long tables (beside each judge's model id)."""
AXIS, THEME, CATEGORY = "axis:", "theme:", "category:"
"""Tag prefixes: HealthBench's rubric axes, its example themes, the subset's modal clinician
category."""
REPORTED = (AXIS, THEME, CATEGORY)
"""The tags the chapters report (HealthBench's clusters and levels are computed the same way
and left out of the tables)."""
SUMMARY_COLUMNS = ("scorer", "candidate", "tag", "n", "clipped_mean", "ci_low", "ci_high",
                   "bootstrap_std")


class BreakdownError(ValueError):
    """Tag scores that cannot be computed; the message names the table and the record."""


def conversation_tags(rubrics: Sequence[RubricItem], met: Sequence[bool | None],
                      example_tags: Iterable[str] = ()) -> dict[str, float]:
    """One graded reply's score per tag, as simple-evals' ``grade_sample`` computes it (module
    doc): each example-level tag takes the overall score; each rubric-level tag scores the
    items carrying it, skipped where they have no positive points. Empty when the reply has no
    overall score (a verdict missing, or no positive points)."""
    points = [r.points for r in rubrics]
    overall = grading.conversation_score(points, met)
    if overall is None:
        return {}
    out = dict.fromkeys(example_tags, overall)
    items: dict[str, list[int]] = {}
    for i, item in enumerate(rubrics):
        for tag in dict.fromkeys(item.tags):
            items.setdefault(tag, []).append(i)
    for tag, idx in items.items():
        score = grading.conversation_score([points[i] for i in idx], [met[i] for i in idx])
        if score is not None:
            out[tag] = score
    return out


def reported(tag: str) -> bool:
    """Whether a tag is one the chapters report (:data:`REPORTED`)."""
    return tag.startswith(REPORTED)


def category_tags(categories: pd.Series) -> dict[str, tuple[str, ...]]:
    """05_subset's modal categories (``subset.read_categories``: category by prompt id) as
    extra example-level tags: prompt id -> (``category:<name>``,); a conversation without a
    category majority gets none."""
    return {str(pid): (f"{CATEGORY}{cat}",) for pid, cat in categories.items()
            if isinstance(cat, str) and cat and cat != NO_CATEGORY_MAJORITY}


def tag_scores(verdicts: pd.DataFrame, conversations: Mapping[str, Conversation], *,
               extra_tags: Mapping[str, Sequence[str]] | None = None,
               keep: Callable[[str], bool] = reported) -> pd.DataFrame:
    """Every graded reply's tag scores (:func:`conversation_tags`) from a verdict table
    (``grading.graded_replies``): columns judge, candidate, prompt_id, [sample,] tag, score.
    ``extra_tags`` adds example-level tags by prompt id (the categories); ``keep`` chooses the
    tags kept (the reported ones by default)."""
    keys = grading.graded_keys(verdicts)
    extra = extra_tags or {}
    rows = []
    for key, conv, found in grading.graded_replies(verdicts, conversations):
        tags = [*conv.example_tags, *extra.get(conv.prompt_id, ())]
        met = [v.criteria_met for v in found]
        rows += [(*key, tag, score) for tag, score in
                 conversation_tags(conv.rubrics, met, tags).items() if keep(tag)]
    return pd.DataFrame(rows, columns=[*keys, "tag", "score"])


def with_panel(tags: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """A long score table (``judge``, keys, ``score``: the tag scores of :func:`tag_scores`, or
    per-conversation scores) with the panel's beside each judge's: columns scorer, the keys,
    score; unscored rows (NaN) left out. The panel's is the judges' equal-weight mean on the
    rows every judge of ``judges`` scored (as ``scoring.panel_conversation_scores`` forms the
    overall panel score)."""
    tags = tags.dropna(subset=["score"])
    rest = [k for k in tags.columns if k not in ("judge", "score")]
    per_judge = tags.rename(columns={"judge": "scorer"})
    if tags.empty:
        return per_judge[["scorer", *rest, "score"]]
    wide = tags.pivot(index=rest, columns="judge", values="score")
    absent = [j for j in judges if j not in wide.columns]
    if absent:
        raise BreakdownError(f"tag scores: no scores from judge(s) {absent}")
    panel = wide[list(judges)].dropna(how="any").mean(axis=1).rename("score").reset_index()
    panel.insert(0, "scorer", PANEL)
    out = pd.concat([per_judge[["scorer", *rest, "score"]], panel], ignore_index=True)
    return out


def summarise(long: pd.DataFrame, *, by: Sequence[str] = ("scorer", "candidate", "tag"),
              n_resamples: int = study.N_RESAMPLES, seed: int,
              level: float) -> pd.DataFrame:
    """Per group of ``by``: n conversations, the clipped mean with its seeded percentile
    bootstrap interval at ``level`` (NaN on one conversation), and the reference's
    ``bootstrap_std`` from the same resamples (``scoring.interval_and_std``). Conversations
    enter in prompt-id order, as Table 1's do, so a group's numbers do not depend on the
    others."""
    rows = []
    for key, group in long.groupby(list(by), sort=True):
        values = group.sort_values("prompt_id", kind="mergesort")["score"].to_numpy(float)
        iv, std = scoring.interval_and_std(values, n_resamples=n_resamples, seed=seed,
                                           level=level)
        rows.append((*key, iv.n, iv.estimate, iv.low, iv.high, std))
    return pd.DataFrame(rows, columns=[*by, *SUMMARY_COLUMNS[3:]])


def tag_score(row: Mapping[str, Any]) -> TagScore:
    """A row of :func:`summarise` (n, clipped_mean, ci_low, ci_high, bootstrap_std) as
    ``metrics.json`` holds it: an undefined interval as ``null`` with the reason."""
    values = {f: row[f] for f in ("n", "clipped_mean", "ci_low", "ci_high", "bootstrap_std")}
    bounds = {f: values[f] for f in ("ci_low", "ci_high")}
    if any(v is None or math.isnan(float(v)) for v in bounds.values()):
        why = scoring.ONE_CONVERSATION if int(values["n"]) < 2 else scoring.NO_RESAMPLE
        return TagScore(**{**values, "ci_low": None, "ci_high": None},
                        undefined=dict.fromkeys(bounds, why))
    return TagScore(**values)


LABELS: dict[str, dict[str, str]] = {
    CATEGORY.rstrip(":"): study.CATEGORY_LABELS,
    THEME.rstrip(":"): study.THEME_LABELS,
    AXIS.rstrip(":"): study.AXIS_LABELS,
}
"""The study's readers' names by tag prefix (``study``: categories, themes, axes)."""


def label(tag: str) -> str:
    """A tag, or a bare category, theme or axis term, by its readers' name (``study``):
    ``axis:context_awareness`` -> ``Context awareness``, ``category:perinatal_mh`` ->
    ``Perinatal mental health``, ``emergency_referrals`` -> ``Emergency referrals``; a term the
    study does not name, with its underscores as spaces."""
    kind, sep, name = tag.partition(":")
    if sep and kind in LABELS:
        return LABELS[kind].get(name, name.replace("_", " "))
    for names in LABELS.values():
        if tag in names:
            return names[tag]
    return (name or kind).replace("_", " ")


def wide(summary: pd.DataFrame, scorer: str, prefix: str,
         value: str = "clipped_mean") -> pd.DataFrame:
    """One scorer's ``value`` as candidate x tag (tags of one prefix, labelled, in name order):
    the heatmaps' and the chapters' tables."""
    sel = summary[(summary["scorer"] == scorer) & summary["tag"].str.startswith(prefix)]
    out = sel.pivot(index="candidate", columns="tag", values=value)
    out = out.reindex(columns=sorted(out.columns))
    out.columns = [label(t) for t in out.columns]
    out.columns.name = None
    return out


# --- findings ---------------------------------------------------------------------------------

def weakest(summary: pd.DataFrame, scorer: str = PANEL, prefix: str = AXIS, *,
            min_n: int = study.SLICE_MIN_N) -> dict[str, tuple[str, float, float | None]]:
    """Per candidate, its lowest-scoring tag of ``prefix`` among those with at least ``min_n``
    conversations: (tag, its clipped mean, the gap to its next lowest, ``None`` with one)."""
    sel = summary[(summary["scorer"] == scorer) & summary["tag"].str.startswith(prefix)
                  & (summary["n"] >= min_n)]
    out = {}
    for cand, group in sel.groupby("candidate", sort=True):
        ordered = group.sort_values(["clipped_mean", "tag"], kind="mergesort")
        first = ordered.iloc[0]
        gap = (float(ordered.iloc[1]["clipped_mean"] - first["clipped_mean"])
               if len(ordered) > 1 else None)
        out[str(cand)] = (str(first["tag"]), float(first["clipped_mean"]), gap)
    return out


def reorderings(summary: pd.DataFrame, overall: Mapping[str, float], scorer: str = PANEL, *,
                min_n: int = study.SLICE_MIN_N,
                close: float = study.CLOSE_SCORES) -> dict[str, list[tuple[str, str]]]:
    """Tags on which the ranking of the candidates changes: per tag (every candidate with at
    least ``min_n`` conversations), the pairs (a, b) that ``overall`` ranks a above b by more
    than ``close`` while the tag's clipped means rank b above a by more than ``close``. A swap
    within ``close`` on either side is not read as a change."""
    sel = summary[(summary["scorer"] == scorer) & summary["candidate"].isin(list(overall))]
    out: dict[str, list[tuple[str, str]]] = {}
    for tag, group in sel.groupby("tag", sort=True):
        if len(group) < len(overall) or (group["n"] < min_n).any():
            continue
        on_tag = dict(zip(group["candidate"], group["clipped_mean"], strict=True))
        pairs = [(a, b) for a in overall for b in overall
                 if overall[a] - overall[b] > close and on_tag[b] - on_tag[a] > close]
        if pairs:
            out[str(tag)] = sorted(pairs)
    return out


def spread_over_tags(summary: pd.DataFrame, scorer: str, prefix: str,
                     *, min_n: int = study.SLICE_MIN_N) -> pd.Series:
    """Per candidate, highest minus lowest clipped mean over the tags of ``prefix`` with at
    least ``min_n`` conversations (NaN with fewer than two)."""
    sel = summary[(summary["scorer"] == scorer) & summary["tag"].str.startswith(prefix)
                  & (summary["n"] >= min_n)]
    span = sel.groupby("candidate")["clipped_mean"].agg(
        lambda s: float(s.max() - s.min()) if len(s) > 1 else np.nan)
    return span.rename("spread")
