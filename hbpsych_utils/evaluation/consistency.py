"""Do the judges agree with themselves? Flip rates, agreement between repeats, and what a
re-grading does to the scores and the ranking; beside them, the judges' own refusals.

The input is a *repeats table* (:data:`REPEAT_COLUMNS`): one row per (judge, candidate,
prompt_id, criterion_index, repeat), repeat 0 being the study's own verdict and 1..k-1 the
re-gradings of the same request. Everything here is a plain function of such tables; the
chapter (``16_self_consistency``) calls them. Definitions (each a choice, stated once):

- **An item** is one judge's grading of one criterion of one reply: (judge, candidate,
  prompt_id, criterion_index). Its **obtained verdicts** are the repeats with a
  ``criteria_met`` that is True or False and not ``excluded``; a missing verdict (no verdict,
  a failed call, a refusal by the judge's provider) is never read as "not met".
- **Flipped**: an item whose obtained verdicts are not unanimous. An item with fewer than two
  obtained verdicts shows no flip either way; it is left out of the rate (and counted).
- **Flip rate**: flipped items / items with at least two obtained verdicts. Its interval is a
  percentile bootstrap that resamples *conversations* (prompt_id) with replacement, every item
  of a drawn conversation entering together (all candidates' replies and criteria of one
  conversation share its difficulty), as chapter 15 does for the judges' accuracy; one seeded
  generator per judge, so a judge's interval does not depend on the others.
- **The panel majority** (:data:`PANEL`) in each repeat: the verdict a strict majority of the
  *whole panel* gave; a tie, or no verdict with a majority because too few were obtained, is
  no panel verdict (a missing judge could have overturned it). Its flip rate is that of these
  verdicts across the repeats.
- **Agreement between repeats**: Gwet's AC1 (``construction.agreement``, the compendium's own
  implementation) with the repeats as raters and the items as subjects, on (met, not met).
- **Score spread**: each repeat's verdicts put in place of the study's for the re-graded items,
  the conversations re-scored by the reference formula (``grading.scores_from_verdicts``), the
  candidate's panel score taken as Table 1 takes it (``scoring.clipped_mean`` over the
  conversations of the mean over the judges that all scored it); the spread is the largest
  minus the smallest of the repeats' panel scores.
- **Ranking stability**: Kendall's tau-b (``evaluation.judges``' helper) between the candidates'
  panel scores in each pair of repeats.
- **The judges' refusals**: verdicts the judge's provider refused or filtered
  (reason ``judge_refused``), apart from replies it answered without a usable verdict
  (``no_verdict``) and from the candidates' refusals (chapter 10's), per judge and Psych
  category, the safety categories first.

An undefined statistic is ``None`` (NaN in a table) with its reason, never a number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import agreement
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.evaluation import grading, judges, scoring
from hbpsych_utils.evaluation.breakdowns import CATEGORY

REPEAT_COLUMNS = ("judge", "candidate", "prompt_id", "criterion_index", "repeat", "criteria_met",
                  "excluded", "reason")
"""The repeats table, one row per (judge, candidate, prompt_id, criterion_index, repeat)."""
ITEM_KEYS = ("judge", "candidate", "prompt_id", "criterion_index")
"""What names one item: one judge's grading of one criterion of one reply."""

PANEL = "panel majority"
"""The judge name of the panel's majority verdicts in the repeats layout and the tables."""
POOLED = "all judges"
"""The judge name of the rows that pool every judge's items (the panel left out)."""
UNLABELLED = "uncategorised"
"""The label of an item whose theme, axis or Psych category is unknown."""
JUDGE_REFUSED = "judge_refused"
"""The reason of a verdict the judge's provider refused or filtered."""
NO_VERDICT = "no_verdict"
"""The reason of a reply the judge gave without a usable verdict (re-asks included)."""
MAJORITY, NO_MAJORITY = "majority", "no_majority"
"""The reasons of the panel's rows: a strict majority of the panel, or none (a tie or too few
verdicts)."""

NO_ITEMS = "no item has two or more verdicts: there is no flip to observe"
ONE_JUDGE = "one judge: the panel majority is that judge's own verdict"
ONE_REPEAT = "one repeat: no second verdict to agree with"
FLIP_LABELS = ("theme", "axis", "category")
"""The labels :func:`flips_by` groups by."""


class ConsistencyError(ValueError):
    """A repeats or verdict table that cannot be used; the message names the table and field."""


# --- verdicts -----------------------------------------------------------------------------------

def _check(frame: pd.DataFrame, columns: Iterable[str], where: str) -> None:
    missing = set(columns) - set(frame.columns)
    if missing:
        raise ConsistencyError(f"{where}: missing column(s) {sorted(missing)}")


def _as_verdict(value: object) -> bool | None:
    """True, False, or None for a missing verdict (None, NaN, NA, blank); "True"/"False" as
    a CSV reader may leave them."""
    if agreement.is_missing(value):
        return None
    if isinstance(value, str):
        low = value.strip().lower()
        if low not in ("true", "false"):
            raise ConsistencyError(f"criteria_met: {value!r} is not a verdict (True or False)")
        return low == "true"
    return bool(value)


def obtained(frame: pd.DataFrame) -> pd.Series:
    """Each row's obtained verdict (True, False) or ``None``: an ``excluded`` row (when the
    column is there) or a missing ``criteria_met`` has none."""
    excluded = (frame["excluded"].astype("boolean").fillna(False).to_numpy(bool)
                if "excluded" in frame.columns else np.zeros(len(frame), bool))
    met = frame["criteria_met"]
    values: np.ndarray
    if met.dtype == bool:  # no missing verdict to look for: the study-sized tables' case
        values = met.to_numpy(object, copy=True)
        values[excluded] = None
    else:
        values = np.array([None if ex else _as_verdict(m)
                           for m, ex in zip(met.tolist(), excluded, strict=True)], dtype=object)
    return pd.Series(values, index=frame.index, dtype=object, name="criteria_met")


def _check_repeats(repeats: pd.DataFrame, where: str = "repeats table") -> None:
    _check(repeats, (*ITEM_KEYS, "repeat", "criteria_met"), where)
    dup = repeats.duplicated([*ITEM_KEYS, "repeat"])
    if dup.any():
        r = repeats[dup].iloc[0]
        raise ConsistencyError(
            f"{where}: two rows for judge {r['judge']}, candidate {r['candidate']}, prompt_id "
            f"{r['prompt_id']}, criterion {r['criterion_index']}, repeat {r['repeat']}")


# --- flips --------------------------------------------------------------------------------------

def item_flips(repeats: pd.DataFrame) -> pd.DataFrame:
    """One row per item (:data:`ITEM_KEYS`, in order of first appearance): ``n_verdicts``
    (obtained), ``n_met``, ``flipped`` (obtained verdicts not unanimous) and ``defined`` (at
    least two obtained: only those enter a flip rate). Works on the panel's rows
    (:func:`panel_repeats`) as on a judge's."""
    _check_repeats(repeats)
    columns = [*ITEM_KEYS, "n_verdicts", "n_met", "flipped", "defined"]
    if repeats.empty:
        return pd.DataFrame(columns=columns)
    met = obtained(repeats)
    frame = repeats[list(ITEM_KEYS)].assign(n_verdicts=met.notna().to_numpy(),
                                            n_met=met.eq(True).to_numpy(bool))
    out = frame.groupby(list(ITEM_KEYS), sort=False)[["n_verdicts", "n_met"]].sum()
    out = out.astype(int).reset_index()
    out["flipped"] = (out["n_met"] > 0) & (out["n_met"] < out["n_verdicts"])
    out["defined"] = out["n_verdicts"] >= 2
    return out[columns]


def panel_repeats(repeats: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    """The panel's verdict per (candidate, prompt_id, criterion_index, repeat), in the repeats
    layout with judge :data:`PANEL`: met when strictly more than half of ``judges`` (the whole
    panel, obtained or not) say met, not met when strictly more than half say not met, else
    ``None`` (excluded, reason :data:`NO_MAJORITY`): a tie, or too few verdicts obtained for
    either side to hold a majority whatever the missing judges would have said."""
    _check_repeats(repeats)
    keys = ["candidate", "prompt_id", "criterion_index", "repeat"]
    sub = repeats[repeats["judge"].isin(list(judges))]
    if sub.empty or not judges:
        return pd.DataFrame(columns=list(REPEAT_COLUMNS))
    met = obtained(sub)
    frame = sub[keys].assign(met=met.eq(True).to_numpy(bool),
                             not_met=met.eq(False).to_numpy(bool))
    g = frame.groupby(keys, sort=False)[["met", "not_met"]].sum().reset_index()
    size = len(judges)
    verdict = [True if m * 2 > size else False if n * 2 > size else None
               for m, n in zip(g["met"], g["not_met"], strict=True)]
    out = g[keys].assign(judge=PANEL, criteria_met=pd.Series(verdict, dtype=object).to_numpy())
    out["excluded"] = [v is None for v in verdict]
    out["reason"] = [NO_MAJORITY if v is None else MAJORITY for v in verdict]
    return out[list(REPEAT_COLUMNS)]


@dataclasses.dataclass(frozen=True)
class FlipRate:
    """One judge's (or the panel's) flip rate with its conversation-clustered percentile
    interval; ``rate``, ``low`` and ``high`` are ``None`` where undefined, ``undefined`` says
    why (the interval alone can be undefined: one conversation)."""

    judge: str
    n_items: int
    """Items with at least two obtained verdicts (those the rate is over)."""
    n_flipped: int
    n_conversations: int
    """Conversations those items are in (what the bootstrap resamples)."""
    n_left_out: int
    """Items with fewer than two obtained verdicts, not in the rate."""
    rate: float | None
    low: float | None
    high: float | None
    undefined: str | None


def _flip_rate(name: str, items: pd.DataFrame, rng: np.random.Generator, n_resamples: int,
               level: float) -> FlipRate:
    defined = items[items["defined"].astype(bool)]
    n, k, left_out = len(defined), int(defined["flipped"].sum()), len(items) - len(defined)
    if n == 0:
        return FlipRate(name, 0, 0, 0, left_out, None, None, None, NO_ITEMS)
    per = defined.groupby("prompt_id", sort=True)["flipped"].agg(["size", "sum"])
    w = scoring.resample_counts(len(per), n_resamples, rng)
    resampled = (w @ per["sum"].to_numpy(float)) / (w @ per["size"].to_numpy(float))
    iv = scoring.percentile_interval(resampled, level, n=len(per))
    low, high = (None, None) if iv.undefined else (iv.low, iv.high)
    return FlipRate(name, n, k, len(per), left_out, k / n, low, high, iv.undefined)


def flip_rates(repeats: pd.DataFrame, judges: Sequence[str], *, n_resamples: int, seed: int,
               level: float) -> list[FlipRate]:
    """Each judge's flip rate, in the order of ``judges``, then the panel majority's
    (:func:`panel_repeats`; undefined with one judge). The interval resamples conversations;
    the k-th rate's generator is seeded ``[seed, k]`` (the panel's k = ``len(judges)``)."""
    judges = list(judges)
    items = item_flips(repeats[repeats["judge"].isin(judges)])
    out = [_flip_rate(j, items[items["judge"] == j], np.random.default_rng([seed, k]),
                      n_resamples, level) for k, j in enumerate(judges)]
    if len(judges) < 2:
        out.append(FlipRate(PANEL, 0, 0, 0, 0, None, None, None, ONE_JUDGE))
    else:
        panel = item_flips(panel_repeats(repeats, judges))
        out.append(_flip_rate(PANEL, panel, np.random.default_rng([seed, len(judges)]),
                              n_resamples, level))
    return out


def flip_rate_table(rates: Sequence[FlipRate]) -> pd.DataFrame:
    """:func:`flip_rates` as a table, one row per rate in its order, a column per field (an
    undefined value NaN, as in the other tables, its reason in ``undefined``)."""
    columns = [f.name for f in dataclasses.fields(FlipRate)]
    return pd.DataFrame([dataclasses.asdict(r) for r in rates], columns=columns)


def self_consistent(rate: FlipRate) -> bool | None:
    """Whether a judge "agrees with itself": the upper end of its flip rate's interval is below
    ``study.SELF_CONSISTENT_FLIP_RATE``; ``None`` without an interval."""
    return None if rate.high is None else rate.high < study.SELF_CONSISTENT_FLIP_RATE


def panel_flips_less(rates: Sequence[FlipRate]) -> bool | None:
    """Whether the panel majority's flip rate is below every judge's (point estimates);
    ``None`` when the panel's or a judge's rate is undefined."""
    panel = [r for r in rates if r.judge == PANEL]
    others = [r.rate for r in rates if r.judge != PANEL]
    if len(panel) != 1 or panel[0].rate is None or not others or None in others:
        return None
    return all(panel[0].rate < float(x) for x in others if x is not None)


# --- agreement between repeats ------------------------------------------------------------------

def _ac1_of(frame: pd.DataFrame) -> tuple[float | None, str | None]:
    table = frame.pivot(index=["candidate", "prompt_id", "criterion_index"], columns="repeat",
                        values="met")
    if table.shape[1] < 2:
        return None, ONE_REPEAT
    table = table.astype(object).where(table.notna(), None)
    if not (table.notna().sum(axis=1) >= 2).any():
        return None, NO_ITEMS
    value = agreement.gwet_ac1_multirater(table, categories=(True, False))
    return (None, "chance agreement is 1") if math.isnan(value) else (value, None)


def _ac1_by_judge(repeats: pd.DataFrame) -> dict[str, tuple[float | None, str | None]]:
    _check_repeats(repeats)
    frame = repeats[[*ITEM_KEYS, "repeat"]].assign(met=obtained(repeats).to_numpy())
    return {str(j): _ac1_of(g) for j, g in frame.groupby("judge", sort=False)}


def repeat_agreement(repeats: pd.DataFrame) -> dict[str, float | None]:
    """Per judge (every judge of the table, the panel too when its rows are included): Gwet's
    AC1 among its repeats, the repeats as raters and the items as subjects, on (met, not met);
    a missing verdict is a missing rating. ``None`` where undefined
    (:func:`repeat_agreement_undefined` says why)."""
    return {j: v for j, (v, _) in _ac1_by_judge(repeats).items()}


def repeat_agreement_undefined(repeats: pd.DataFrame) -> dict[str, str]:
    """Why each undefined AC1 of :func:`repeat_agreement` is undefined (judge -> reason)."""
    return {j: why for j, (_, why) in _ac1_by_judge(repeats).items() if why}


# --- which criteria flip ------------------------------------------------------------------------

def _labelled(items: pd.DataFrame, labels: pd.DataFrame, by: str) -> pd.DataFrame:
    keys = ["prompt_id", "criterion_index"] if "criterion_index" in labels.columns else [
        "prompt_id"]
    _check(labels, [*keys, by], "labels")
    lab = labels[[*keys, by]].drop_duplicates()
    dup = lab.duplicated(keys)
    if dup.any():
        r = lab[dup].iloc[0]
        raise ConsistencyError(f"labels: two values of {by} for "
                               + ", ".join(f"{k} {r[k]}" for k in keys))
    out = items.merge(lab, on=keys, how="left", validate="many_to_one")
    out[by] = out[by].astype(object).where(out[by].notna(), UNLABELLED)
    return out


def flips_by(repeats: pd.DataFrame, labels: pd.DataFrame, by: str) -> pd.DataFrame:
    """Flip rates by a label of the item (``by`` one of :data:`FLIP_LABELS`): ``labels`` holds
    ``prompt_id``, ``criterion_index`` (optional for a label of the conversation) and ``by``;
    an item without one is :data:`UNLABELLED`. Over the items with two or more verdicts, the
    judges' items pooled (:data:`POOLED`, the panel left out) and each judge's (the panel's too
    when its rows are in ``repeats``). Columns ``judge``, ``by``, ``n_items``, ``n_flipped``,
    ``rate``; the pooled rows first, then each judge's, each sorted by rate (highest first),
    then by size."""
    if by not in FLIP_LABELS:
        raise ConsistencyError(f"flips_by: by must be one of {list(FLIP_LABELS)}, got {by!r}")
    items = item_flips(repeats)
    items = items[items["defined"].astype(bool)]
    if items.empty:
        return pd.DataFrame(columns=["judge", by, "n_items", "n_flipped", "rate"])
    items = _labelled(items, labels, by)
    parts = [(POOLED, items[items["judge"] != PANEL])]
    parts += [(str(j), g) for j, g in items.groupby("judge", sort=False)]
    frames = []
    for name, part in parts:
        g = part.groupby(by)["flipped"].agg(["size", "sum"]).reset_index()
        g = g.rename(columns={"size": "n_items", "sum": "n_flipped"})
        g["rate"] = g["n_flipped"] / g["n_items"]
        g = g.sort_values(["rate", "n_items", by], ascending=[False, False, True],
                          kind="mergesort")
        frames.append(g.assign(judge=name)[["judge", by, "n_items", "n_flipped", "rate"]])
    return pd.concat(frames, ignore_index=True).astype({"n_items": int, "n_flipped": int})


# --- scores and ranking across repeats ----------------------------------------------------------

def _first_replies(verdicts: pd.DataFrame) -> pd.DataFrame:
    if "sample" in verdicts.columns:
        verdicts = verdicts[verdicts["sample"] == 0].drop(columns="sample")
    return verdicts


def _replaced(base: pd.DataFrame, repeat: pd.DataFrame) -> pd.DataFrame:
    """The verdict rows of the conversations ``repeat`` touches, its verdicts in place of
    ``base``'s on the items it holds."""
    graded = list(grading.GRADED_KEYS)
    touched = repeat[graded].drop_duplicates()
    part = base.merge(touched, on=graded, how="inner")
    new = repeat[list(ITEM_KEYS)].assign(new_met=obtained(repeat).to_numpy())
    part = part.merge(new, on=list(ITEM_KEYS), how="left", indicator=True)
    hit = (part.pop("_merge") == "both").to_numpy()
    new_met = part.pop("new_met")
    part["criteria_met"] = np.where(hit, new_met.to_numpy(object),
                                    part["criteria_met"].to_numpy(object))
    return part


def repeat_scores(verdicts: pd.DataFrame, repeats: pd.DataFrame,
                  conversations: Mapping[str, Conversation]) -> pd.DataFrame:
    """Each repeat's (judge, candidate, prompt_id) score: 07's verdicts (first replies) with the
    re-graded items' verdicts replaced by that repeat's, scored by the reference formula
    (``grading.scores_from_verdicts``). An item without a verdict in a repeat is excluded as 07
    excludes it: the conversation is unscored (NaN) for that judge in that repeat, never given
    07's verdict. Every item of ``repeats`` must be in ``verdicts``. Columns ``repeat``,
    ``judge``, ``candidate``, ``prompt_id``, ``score``."""
    _check(verdicts, (*ITEM_KEYS, "criteria_met"), "verdict table")
    _check_repeats(repeats)
    first = _first_replies(verdicts)
    base = first[list(ITEM_KEYS)].assign(criteria_met=obtained(first).to_numpy())
    reps = repeats[repeats["judge"] != PANEL]
    known = reps[list(ITEM_KEYS)].merge(base[list(ITEM_KEYS)], how="left", indicator=True)
    if (known["_merge"] != "both").any():
        r = known[known["_merge"] != "both"].iloc[0]
        raise ConsistencyError(
            f"repeats table: judge {r['judge']}, candidate {r['candidate']}, prompt_id "
            f"{r['prompt_id']}, criterion {r['criterion_index']} is not in the verdict table")
    graded = list(grading.GRADED_KEYS)
    base_scores = grading.scores_from_verdicts(base, conversations)[[*graded, "score"]]
    frames = []
    for r in sorted(reps["repeat"].unique()):
        rescored = grading.scores_from_verdicts(
            _replaced(base, reps[reps["repeat"] == r]), conversations)[[*graded, "score"]]
        kept = base_scores.merge(rescored[graded], on=graded, how="left", indicator=True)
        kept = kept[kept.pop("_merge") == "left_only"]
        both = pd.concat([kept, rescored], ignore_index=True)
        frames.append(both.assign(repeat=int(r))[["repeat", *graded, "score"]])
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["repeat", *graded, "score"])
    return out.sort_values(["repeat", *graded], kind="mergesort").reset_index(drop=True)


def repeat_column(repeat: int) -> str:
    """The column of :func:`score_spread` that holds one repeat's panel scores."""
    return f"repeat_{repeat}"


NO_PANEL_SCORE = "no conversation scored by every judge"


def _panel_means(scores: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict[str, str]]]:
    """candidate x repeat panel scores (NaN where none), and why each NaN is one."""
    _check(scores, ("repeat", *scoring.SCORE_COLUMNS), "score table")
    panel = sorted(str(j) for j in scores["judge"].unique() if j != PANEL)
    repeats = sorted(int(r) for r in scores["repeat"].unique())
    cands = sorted(str(c) for c in scores["candidate"].unique())
    means = pd.DataFrame(np.nan, index=pd.Index(cands, name="candidate"),
                         columns=[repeat_column(r) for r in repeats])
    why: dict[str, dict[str, str]] = {}
    for r in repeats:
        part = scores[scores["repeat"] == r].drop(columns="repeat")
        for cand in cands:
            per_conv = scoring.panel_conversation_scores(part, cand, panel)
            if per_conv.empty:
                why.setdefault(cand, {})[repeat_column(r)] = NO_PANEL_SCORE
            else:
                means.at[cand, repeat_column(r)] = scoring.clipped_mean(per_conv)
    return means, why


def score_spread(scores: pd.DataFrame) -> pd.DataFrame:
    """Per candidate (index), from :func:`repeat_scores`: the panel score in each repeat
    (:func:`repeat_column`; ``scoring.clipped_mean`` over the conversations of the mean over
    the judges that all scored it, as Table 1), their ``min``, ``max`` and ``spread``
    (max - min; NaN unless every repeat has a panel score) and ``undefined`` (column -> why,
    ``None`` where every value is defined). Sorted by the first repeat's score, best first."""
    means, why = _panel_means(scores)
    values = means.to_numpy(float)
    complete = ~np.isnan(values).any(axis=1) if values.size else np.zeros(len(means), bool)
    out = means.copy()
    out["min"] = np.where(complete, np.nanmin(values, axis=1, initial=np.inf), np.nan)
    out["max"] = np.where(complete, np.nanmax(values, axis=1, initial=-np.inf), np.nan)
    out["spread"] = out["max"] - out["min"]
    reasons = []
    for cand, ok in zip(out.index, complete, strict=True):
        mine = dict(why.get(str(cand), {}))
        if not ok:
            mine.update({k: "a repeat has no panel score" for k in ("min", "max", "spread")})
        reasons.append(mine or None)
    out["undefined"] = reasons
    first = list(means.columns[:1])
    return out.sort_values([*first, "candidate"] if first else ["candidate"],
                           ascending=[False, True] if first else [True],
                           na_position="last", kind="mergesort")


def _repeat_table(scores: pd.DataFrame) -> pd.DataFrame:
    means, _ = _panel_means(scores)
    return means.rename(columns=lambda c: c.removeprefix("repeat_"))


def ranking_taus(scores: pd.DataFrame) -> dict[str, float | None]:
    """Kendall's tau-b between the candidates' panel scores (:func:`score_spread`) in each pair
    of repeats, keyed ``"0|1"``, over the candidates with a panel score in every repeat
    (``judges.kendall_taus``); ``None`` where undefined (:func:`ranking_tau_undefined`)."""
    table = _repeat_table(scores)
    return judges.kendall_taus(table, list(table.columns))


def ranking_tau_undefined(scores: pd.DataFrame) -> dict[str, str]:
    """Why each undefined tau of :func:`ranking_taus` is undefined (pair -> reason): a rank
    correlation needs two candidates and two different panel scores in each repeat."""
    table = _repeat_table(scores)
    return judges.pair_undefined(
        table, list(table.columns),
        no_pair=lambda n: (f"{n} candidate with a panel score in every repeat: no pair of "
                           "candidates to order"),
        no_order=lambda same: (("repeats " if len(same) > 1 else "repeat ") + " and ".join(same)
                               + " gave every candidate the same panel score: no order"))


def ranking_stable(taus: Mapping[str, float | None]) -> bool | None:
    """Whether re-grading keeps the ranking: every repeat pair's tau is at least
    ``study.RANKING_STABLE_TAU``; ``None`` when there is no pair or a tau is undefined."""
    values = list(taus.values())
    if not values or any(v is None for v in values):
        return None
    return all(float(v) >= study.RANKING_STABLE_TAU for v in values if v is not None)


# --- the judges' refusals -----------------------------------------------------------------------

def category_order(terms: Iterable[Hashable]) -> list[str]:
    """Psych categories in the study's order: those a mental-health evaluation calls out
    (``study.SAFETY_SLICES``, suicidality first) first, then the vocabulary's order
    (``study.CATEGORY_LABELS``), then any other term by name, :data:`UNLABELLED` last."""
    first = [t.removeprefix(CATEGORY) for t in study.SAFETY_SLICES if t.startswith(CATEGORY)]
    known = [*first, *(t for t in study.CATEGORY_LABELS if t not in first)]
    present = {str(t) for t in terms}
    rest = sorted(present - set(known) - {UNLABELLED})
    tail = [UNLABELLED] if UNLABELLED in present else []
    return [t for t in known if t in present] + rest + tail


REFUSAL_COLUMNS = ("judge", "category", "verdicts", "graded", "judge_refused", "no_verdict",
                   "other")


def judge_refusals(verdicts: pd.DataFrame, categories: Mapping[str, str]) -> pd.DataFrame:
    """Per judge (first appearance) and Psych category (:func:`category_order`; a conversation
    ``categories`` does not name is :data:`UNLABELLED`), over any verdict table with a
    ``reason`` (07's or the repeats; the panel's rows left out): ``verdicts`` (rows),
    ``graded`` (an obtained verdict), ``judge_refused`` (refused or filtered by the judge's
    provider), ``no_verdict`` (answered without a usable verdict) and ``other`` (failed or
    not-run calls). A refusal is never a verdict of "not met"."""
    _check(verdicts, ("judge", "prompt_id", "criteria_met", "reason"), "verdict table")
    v = verdicts[verdicts["judge"] != PANEL]
    if v.empty:
        return pd.DataFrame(columns=list(REFUSAL_COLUMNS))
    reason = v["reason"].astype(object)
    frame = pd.DataFrame({
        "judge": v["judge"].to_numpy(),
        "category": [categories.get(str(p), UNLABELLED) or UNLABELLED for p in v["prompt_id"]],
        "verdicts": 1, "graded": obtained(v).notna().to_numpy(),
        "judge_refused": (reason == JUDGE_REFUSED).to_numpy(),
        "no_verdict": (reason == NO_VERDICT).to_numpy()})
    out = frame.groupby(["judge", "category"], sort=False).sum().reset_index()
    out["other"] = out["verdicts"] - out["graded"] - out["judge_refused"] - out["no_verdict"]
    judge_rank = {j: i for i, j in enumerate(dict.fromkeys(v["judge"]))}
    cat_rank = {c: i for i, c in enumerate(category_order(out["category"]))}
    out = out.assign(_j=out["judge"].map(judge_rank), _c=out["category"].map(cat_rank))
    out = out.sort_values(["_j", "_c"], kind="mergesort").drop(columns=["_j", "_c"])
    counts = list(REFUSAL_COLUMNS[2:])
    return out.astype({c: int for c in counts})[list(REFUSAL_COLUMNS)].reset_index(drop=True)
