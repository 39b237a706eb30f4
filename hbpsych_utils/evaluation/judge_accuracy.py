"""How accurate are the judges? Their verdicts against HealthBench's physician labels.

HealthBench released a meta-evaluation file (``healthbench_meta_eval`` in the registry): model
completions of HealthBench conversations, each with one rubric criterion and the binary
"criterion met" labels of several physicians (``binary_labels``, aligned with
``anonymized_physician_ids``). Grading those rows with the study's judges says how far each
judge's verdicts can be trusted, and lets a criterion-met rate be corrected for the judge's
errors. Everything here is plain functions of tables; the chapter (``stages.s15_judge_accuracy``)
calls them.

Definitions (each a choice, stated once; those of a rater against a truth in general, each
class's F1, macro-F1, sensitivity and specificity, the Rogan-Gladen correction and why not PPI,
are :mod:`.classification`'s):

- **Physician majority**: criterion met when strictly more than half of a row's physicians say
  so (a tie is "not met"), as inspect_evals' ``healthbench_meta_eval`` scorer takes it.
- **Macro-F1** and **sensitivity / specificity** of a judge: its verdicts against the
  physician majority, over rows. Intervals come from a bootstrap that resamples conversations
  (``prompt_id``), keeping every row of a drawn conversation together; seeded
  (``study.SEED``-derived run seed). A slice of one conversation has no interval
  (``scoring.percentile_interval``: every resample is the same draw).
- **Pairwise balanced F1** (:func:`pairwise_f1`): HealthBench's comparison of a grader with
  physicians, as simple-evals' ``healthbench_meta_eval`` computes it: every (grader verdict,
  physician label) pair of every row, the physician taken as truth, pooled; the F1 of each
  class, averaged, and undefined where either class's F1 is (simple-evals' semantics exactly,
  tested against a plain re-implementation of its formula). A physician's leave-one-out
  figure pairs each of its labels with every other physician's label on the same row (the
  others as truth): the physician baseline a grader is placed against.
- **Agreement among judges**: Gwet's AC1 (``construction.agreement``, the study's own
  implementation) over rows x judges, on the two-category scale.
- **A corrected criterion-met rate** (:func:`corrected_rate`): Rogan-Gladen with the judge's
  sensitivity and specificity on the calibration rows. Its interval resamples both the
  calibration set (conversations, so the judge's se and sp vary) and the graded conversations
  (so ``p`` varies), and reads the percentiles of the corrected rate: calibration uncertainty
  is carried into the interval, not ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from hbpsych_utils import study
from hbpsych_utils.construction import agreement
from hbpsych_utils.core import jsonl
from hbpsych_utils.core.records import FileRecord
from hbpsych_utils.evaluation import grading, scoring
from hbpsych_utils.evaluation.classification import (
    MET,
    NOT_MET,
    Roles,
    class_f1,
    cluster_draws,
    confusion,
    f1_undefined,
    macro_f1,
    rogan_gladen,
    sens_spec,
    sens_spec_draws,
    sens_spec_undefined,
)
from hbpsych_utils.evaluation.meta_eval_fixture import (
    FIXTURE_CONVERSATIONS,
    FIXTURE_LABELS,
    FIXTURE_OUTSIDE_ROW,
    FIXTURE_VERDICTS,
    sim_marker,
)

if TYPE_CHECKING:
    from hbpsych_utils.llm.models import Registry

ARTIFACT = "healthbench_meta_eval"
"""The registry name of HealthBench's meta-evaluation file (online only)."""

MAJORITY = "physician majority"


class MetaEvalError(ValueError):
    """A meta-evaluation file or table that cannot be used; the message says where and why."""


class PromptMessage(FileRecord):
    role: str
    content: str


class MetaEvalRow(FileRecord):
    """One line of HealthBench's meta-evaluation file: a completion, one rubric criterion and
    the physicians' binary labels (unknown keys ignored)."""

    error = MetaEvalError

    prompt_id: str = Field(min_length=1)
    completion_id: str = Field(min_length=1)
    prompt: list[PromptMessage] = Field(min_length=1)
    completion: str
    rubric: str = Field(min_length=1)
    category: str = Field(min_length=1)
    binary_labels: list[bool] = Field(min_length=1)
    anonymized_physician_ids: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _aligned(self) -> MetaEvalRow:
        if len(self.binary_labels) != len(self.anonymized_physician_ids):
            raise ValueError(f"{len(self.binary_labels)} binary_labels but "
                             f"{len(self.anonymized_physician_ids)} anonymized_physician_ids")
        if len(set(self.anonymized_physician_ids)) != len(self.anonymized_physician_ids):
            raise ValueError("a physician labels the row twice")
        return self


def read_meta_eval(path: Path | str, known_prompt_ids: Iterable[str] | None = None
                   ) -> list[MetaEvalRow]:
    """The rows of a meta-evaluation file, verified by content (the file has no hash known
    offline): every line a :class:`MetaEvalRow`, ``binary_labels`` aligned with
    ``anonymized_physician_ids``, no (completion, criterion) twice, and, given
    ``known_prompt_ids`` (HealthBench's 5,000), every ``prompt_id`` one of them."""
    rows = [MetaEvalRow.parse(rec, f"{path}:{line}")
            for line, rec in jsonl.records(path, error=MetaEvalError)]
    return check_rows(rows, known_prompt_ids, where=str(path))


def check_rows(rows: Sequence[MetaEvalRow], known_prompt_ids: Iterable[str] | None = None,
               where: str = "meta-eval") -> list[MetaEvalRow]:
    """The content check of :func:`read_meta_eval`, on rows already parsed."""
    if not rows:
        raise MetaEvalError(f"{where}: no rows")
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(rows):
        key = (r.completion_id, r.rubric)
        if key in seen:
            raise MetaEvalError(f"{where}: row {i + 1}: completion {r.completion_id!r} has the "
                                "same criterion twice")
        seen.add(key)
    if known_prompt_ids is not None:
        known = set(known_prompt_ids)
        unknown = sorted({r.prompt_id for r in rows} - known)
        if unknown:
            raise MetaEvalError(f"{where}: {len(unknown)} prompt_id not among HealthBench's "
                                f"conversations (first: {unknown[0]!r}): not HealthBench's "
                                "meta-evaluation file")
    return list(rows)


def row_key(i: int) -> str:
    """A row's key in the verdict table: its position (rows share prompt ids)."""
    return f"row{i:06d}"


THEME = "theme"
"""The slicing column of HealthBench's example theme (the conversation's ``theme:`` tag in the
corpus, as ``evaluation.breakdowns`` reads it)."""
PSYCH_CATEGORY = "psych_category"
"""The slicing column of the conversation's modal clinician category (05_subset's
``categories_v1.csv``, readers' names in ``study.CATEGORY_LABELS``)."""
SLICINGS = ("category", THEME, PSYCH_CATEGORY)
"""The ways the rows are sliced: the meta-evaluation file's own ``category``, the theme and the
Psych category. A row without a theme or a category is left out of that slicing (and counted)."""


def labels_table(rows: Sequence[MetaEvalRow], themes: Mapping[str, str] | None = None,
                 psych_categories: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One line per row: ``row`` (:func:`row_key`), ``prompt_id``, ``category``, ``theme`` and
    ``psych_category`` (by prompt id; ``None`` where unknown), ``majority`` (bool) and
    ``n_physicians``."""
    themes, cats = themes or {}, psych_categories or {}
    return pd.DataFrame({
        "row": [row_key(i) for i in range(len(rows))],
        "prompt_id": [r.prompt_id for r in rows],
        "category": [r.category for r in rows],
        THEME: pd.Series([themes.get(r.prompt_id) for r in rows], dtype=object),
        PSYCH_CATEGORY: pd.Series([cats.get(r.prompt_id) for r in rows], dtype=object),
        "majority": [majority(r.binary_labels) for r in rows],
        "n_physicians": [len(r.binary_labels) for r in rows],
    })


def physician_labels(rows: Sequence[MetaEvalRow], themes: Mapping[str, str] | None = None,
                     psych_categories: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One line per (row, physician): ``row``, the row's slicings (:data:`SLICINGS`),
    ``physician``, ``label``."""
    labels = labels_table(rows, themes, psych_categories)[["row", *SLICINGS]]
    out = [(row_key(i), p, bool(lab)) for i, r in enumerate(rows)
           for p, lab in zip(r.anonymized_physician_ids, r.binary_labels, strict=True)]
    frame = pd.DataFrame(out, columns=["row", "physician", "label"])
    return frame.merge(labels, on="row", how="left")[["row", *SLICINGS, "physician", "label"]]


def theme_of(example_tags: Iterable[str]) -> str | None:
    """A conversation's HealthBench theme (its ``theme:`` example tag, without the prefix)."""
    found = [t.split(":", 1)[1] for t in example_tags if t.startswith("theme:")]
    return found[0] if found else None


# --- the Psych subset ---------------------------------------------------------------------------

UNION = "v1 ∪ v2 ∪ Hard"
"""The rows the statistics use: those whose conversation is in any of the run's subsets."""


def in_subsets(rows: Sequence[MetaEvalRow], subsets: Mapping[str, Iterable[str]]
               ) -> list[MetaEvalRow]:
    """The rows whose ``prompt_id`` is in one of ``subsets`` (key -> prompt ids), in file
    order."""
    union = set().union(*(set(ids) for ids in subsets.values())) if subsets else set()
    return [r for r in rows if r.prompt_id in union]


def coverage(rows: Sequence[MetaEvalRow], subsets: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """Per subset (in ``subsets``' order), then their union (:data:`UNION`): the labelled rows
    whose conversation is in it, those conversations, the subset's conversations and the share
    of them with labelled rows; last, the file's rows outside every subset (left out)."""
    sets = {k: set(ids) for k, ids in subsets.items()}
    union = set().union(*sets.values()) if sets else set()
    out = []
    for name, ids in [*sets.items(), (UNION, union)]:
        mine = [r.prompt_id for r in rows if r.prompt_id in ids]
        out.append({"subset": name, "rows": len(mine), "conversations": len(set(mine)),
                    "subset_conversations": len(ids),
                    "share": len(set(mine)) / len(ids) if ids else math.nan})
    outside = [r.prompt_id for r in rows if r.prompt_id not in union]
    out.append({"subset": "outside the subsets", "rows": len(outside),
                "conversations": len(set(outside)), "subset_conversations": None,
                "share": None})
    return pd.DataFrame(out)


def majority(labels: Sequence[bool]) -> bool:
    """Met when strictly more than half of the physicians say so (a tie is not met)."""
    return sum(bool(x) for x in labels) * 2 > len(labels)


PANEL = "panel"
"""The rater name of the panel: the majority of the judges' verdicts on a row."""


def panel_verdicts(verdicts: pd.DataFrame, judges: Sequence[str],
                   keys: Sequence[str] = ("row",)) -> pd.DataFrame:
    """The panel as a rater: on each item (``keys``) every judge of ``judges`` graded, met when
    strictly more than half of the judges say met, so with an even number of judges a tie is
    "not met" (the physician majority's rule). Items a judge left without a verdict get no panel
    verdict, as 08's panel score uses only the conversations every judge scored. Columns
    ``judge`` (:data:`PANEL`), the keys, ``criteria_met``."""
    v = verdicts[verdicts["judge"].isin(judges)].dropna(subset=["criteria_met"])
    keys = list(keys)
    if v.empty or len(judges) < 2:
        return pd.DataFrame(columns=["judge", *keys, "criteria_met"])
    wide = v.assign(criteria_met=v["criteria_met"].astype(bool)).pivot_table(
        index=keys, columns="judge", values="criteria_met", aggfunc="first")
    wide = wide.reindex(columns=list(judges)).dropna(how="any")
    met = wide.astype(bool).sum(axis=1) * 2 > len(judges)
    out = met.rename("criteria_met").reset_index()
    out.insert(0, "judge", PANEL)
    return out[["judge", *keys, "criteria_met"]]


# --- the statistics -----------------------------------------------------------------------------

AGAINST_MAJORITY = Roles("the judge", "the physician majority")


def _why(reasons: Mapping[str, str | None]) -> dict[str, str] | None:
    """The reasons of the undefined values of a row (field -> why), ``None`` when every value
    is defined: a table's ``undefined`` column."""
    out = {k: v for k, v in reasons.items() if v}
    return out or None


def reasons_of(cell: object) -> dict[str, str]:
    """A table's ``undefined`` cell as a mapping (empty where every value is defined)."""
    return dict(cell) if isinstance(cell, Mapping) else {}


def undefined_text(reasons: Mapping[str, str] | None) -> str | None:
    """A row's ``undefined`` reasons as one line (``field: why; field: why``), as the CSV
    files write them."""
    return "; ".join(f"{k}: {v}" for k, v in reasons.items()) if reasons else None


def with_truth(verdicts: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Judge verdicts (``judge``, ``row``, ``criteria_met``; a missing verdict dropped) joined
    with the rows' ``prompt_id``, ``category`` and physician ``majority``."""
    v = verdicts.dropna(subset=["criteria_met"])[["judge", "row", "criteria_met"]]
    v = v.assign(criteria_met=v["criteria_met"].astype(bool))
    cols = ["row", "prompt_id", *[c for c in SLICINGS if c in labels.columns], "majority"]
    return v.merge(labels[cols], on="row", how="inner", validate="many_to_one")


def _slices(frame: pd.DataFrame, by: str, overall: bool) -> list[tuple[str, pd.DataFrame]]:
    """("all", frame) when ``overall``, then each value of ``by`` (rows without one left
    out)."""
    parts = sorted((str(k), g) for k, g in frame.dropna(subset=[by]).groupby(by))
    return [("all", frame), *parts] if overall else parts


def against_majority(joined: pd.DataFrame, by: str = "category", *, overall: bool = True
                     ) -> pd.DataFrame:
    """Per judge and value of ``by`` (and ``all`` when ``overall``): n, the confusion counts,
    macro-F1, F1 of each class, sensitivity and specificity, each judge against the physician
    majority, and ``undefined`` (field -> why, for the values that are undefined; ``None``
    when none is). The slice is in column ``category`` whatever ``by`` is."""
    out = []
    for judge, g in joined.groupby("judge", sort=False):
        roles = Roles("the panel" if judge == PANEL else AGAINST_MAJORITY.rater,
                      AGAINST_MAJORITY.truth)
        for category, part in _slices(g, by, overall):
            c = confusion(part["majority"], part["criteria_met"])
            pos, neg = class_f1(c)
            se, sp = sens_spec(c)
            out.append({"judge": judge, "category": category, "n": c.n, "tp": c.tp,
                        "fp": c.fp, "fn": c.fn, "tn": c.tn, "macro_f1": (pos + neg) / 2,
                        "f1_met": pos, "f1_not_met": neg, "sensitivity": se,
                        "specificity": sp,
                        "undefined": _why({**f1_undefined(c, roles),
                                           **sens_spec_undefined(c, roles)})})
    return pd.DataFrame(out)


def with_intervals(table: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """:func:`against_majority`'s table with :func:`sens_spec_table`'s intervals beside each
    row (by judge and slice), the reasons of both in one ``undefined`` column."""
    if table.empty:
        return table
    cis = intervals.drop(columns=["n", "sensitivity", "specificity"])
    merged = table.merge(cis, on=["judge", "category"], how="left",
                         suffixes=("", "_interval"))
    reasons = [_why({**reasons_of(a), **reasons_of(b)}) for a, b in
               zip(merged["undefined"], merged.pop("undefined_interval"), strict=True)]
    return merged.drop(columns=["undefined"]).assign(undefined=reasons)


PAIRWISE_ROLES = {"judge": Roles("the judge", "the physicians"),
                  "panel": Roles("the panel", "the physicians"),
                  "physician": Roles("this physician", "the other physicians"),
                  "physicians": Roles("the physicians", "the physicians")}
"""Who gives the verdicts and who the truth in each kind of pairwise comparison."""


def pairwise_f1(joined: pd.DataFrame, physicians: pd.DataFrame, by: str = "category", *,
                overall: bool = True) -> pd.DataFrame:
    """HealthBench's placement of graders among physicians, per category (and ``all``).

    For each judge, every (judge verdict, physician label) pair of the rows it graded, the
    physician as truth; for each physician, every (its label, another physician's label on the
    same row) pair, the other as truth; and ``physicians`` pooled (HealthBench's physician
    baseline). The panel (:data:`PANEL`, a rater of ``joined``) is of kind ``panel``. Sliced by
    ``by`` (column ``category`` whatever ``by`` is; ``all`` first when ``overall``). Columns:
    ``rater``, ``kind`` (judge, panel, physician, physicians), ``category``, ``pairs``,
    ``balanced_f1`` (the mean of the two classes' F1; NaN where either class is never
    predicted or never in the truth, where simple-evals reports no value) and ``undefined``
    (``{"balanced_f1": why}`` there, else ``None``)."""
    pairs_j = joined[["judge", "row", "criteria_met"]].merge(
        physicians[["row", by, "physician", "label"]], on="row", how="inner")
    mine = physicians[["row", by, "physician", "label"]]
    others = mine.merge(physicians[["row", "physician", "label"]], on="row",
                        suffixes=("", "_other"))
    others = others[others["physician"] != others["physician_other"]]
    out = []

    def add(rater: str, kind: str, frame: pd.DataFrame, truth: str, pred: str) -> None:
        for category, part in _slices(frame, by, overall):
            c = confusion(part[truth], part[pred])
            why = f1_undefined(c, PAIRWISE_ROLES[kind]).get("macro_f1")
            out.append({"rater": rater, "kind": kind, "category": category, "pairs": c.n,
                        "balanced_f1": macro_f1(c),
                        "undefined": _why({"balanced_f1": why})})

    for judge, g in pairs_j.groupby("judge", sort=False):
        add(str(judge), "panel" if judge == PANEL else "judge", g, "label", "criteria_met")
    for physician, g in others.groupby("physician", sort=True):
        add(str(physician), "physician", g, "label_other", "label")
    if len(others):
        add("physicians", "physicians", others, "label_other", "label")
    return pd.DataFrame(out, columns=["rater", "kind", "category", "pairs", "balanced_f1",
                                      "undefined"])


def judges_ac1(joined: pd.DataFrame) -> tuple[float, int]:
    """Gwet's AC1 among the judges over the rows (items x judges; a missing verdict is a missing
    rating) on the scale (met, not met), and how many rows at least two judges graded. The
    panel (:data:`PANEL`) is not a judge and is left out."""
    joined = joined[joined["judge"] != PANEL]
    table = joined.pivot(index="row", columns="judge", values="criteria_met")
    if table.shape[1] < 2:
        return math.nan, 0
    table = table.astype(object).where(table.notna(), None)
    n = int((table.notna().sum(axis=1) >= 2).sum())
    return agreement.gwet_ac1_multirater(table, categories=(True, False)), n


# --- intervals --------------------------------------------------------------------------------

def sens_spec_table(joined: pd.DataFrame, by: str = "category", *, overall: bool = True,
                    n_resamples: int = study.N_RESAMPLES, seed: int,
                    level: float) -> pd.DataFrame:
    """Per judge and value of ``by`` (and ``all`` when ``overall``; column ``category``):
    sensitivity and specificity with conversation-clustered percentile bootstrap intervals;
    one generator per (judge, slice) from ``seed``, in a fixed order, so a table is
    reproducible."""
    out = []
    for j, (judge, g) in enumerate(joined.groupby("judge", sort=True)):
        for k, (category, part) in enumerate(_slices(g, by, overall)):
            rng = np.random.default_rng([seed, j, k])
            w = cluster_draws(part["prompt_id"].tolist(), n_resamples, rng)
            se, sp = sens_spec(confusion(part["majority"], part["criteria_met"]))
            se_b, sp_b = sens_spec_draws(part, w)
            n_conv = part["prompt_id"].nunique()
            se_iv = scoring.percentile_interval(se_b, level, n=n_conv)
            sp_iv = scoring.percentile_interval(sp_b, level, n=n_conv)
            out.append({"judge": judge, "category": category, "n": len(part),
                        "n_conversations": n_conv,
                        "sensitivity": se, "sensitivity_low": se_iv.low,
                        "sensitivity_high": se_iv.high,
                        "specificity": sp, "specificity_low": sp_iv.low,
                        "specificity_high": sp_iv.high,
                        "undefined": _why({"sensitivity_low": se_iv.undefined,
                                           "sensitivity_high": se_iv.undefined,
                                           "specificity_low": sp_iv.undefined,
                                           "specificity_high": sp_iv.undefined})})
    return pd.DataFrame(out)


@dataclass(frozen=True)
class CorrectedRate:
    judge: str
    observed: float
    n_verdicts: int
    n_conversations: int
    sensitivity: float
    specificity: float
    corrected: float
    low: float
    high: float
    interval_undefined: str | None = None
    """Why ``low`` and ``high`` are NaN (``scoring.percentile_interval``), else ``None``."""


def corrected_rate(judge: str, graded: pd.DataFrame, calibration: pd.DataFrame, *,
                   n_resamples: int = study.N_RESAMPLES, seed: int,
                   level: float) -> CorrectedRate:
    """A judge's criterion-met rate on a graded run, corrected for its errors (Rogan-Gladen).

    ``graded``: the judge's verdicts on the run (``prompt_id``, ``criteria_met``; missing
    verdicts dropped), ``calibration``: its verdicts on the meta-evaluation rows joined with
    the physician majority (:func:`with_truth`). The interval resamples the graded
    conversations and the calibration conversations independently in each replicate (both
    clustered), so it carries the calibration's uncertainty."""
    g = graded.dropna(subset=["criteria_met"])
    met = g["criteria_met"].astype(bool).to_numpy()
    if met.size == 0 or calibration.empty:
        raise MetaEvalError(f"judge {judge}: nothing to correct (no verdict on the run or on "
                            "the calibration rows)")
    se, sp = sens_spec(confusion(calibration["majority"], calibration["criteria_met"]))
    observed = float(met.mean())
    rng = np.random.default_rng([seed, 1])
    w_run = cluster_draws(g["prompt_id"].tolist(), n_resamples, rng)
    p_b = w_run @ met / w_run.sum(axis=1)
    w_cal = cluster_draws(calibration["prompt_id"].tolist(), n_resamples, rng)
    se_b, sp_b = sens_spec_draws(calibration, w_cal)
    n_run, n_cal = int(g["prompt_id"].nunique()), int(calibration["prompt_id"].nunique())
    iv = scoring.percentile_interval(rogan_gladen(p_b, se_b, sp_b), level, n=min(n_run, n_cal))
    return CorrectedRate(judge, observed, int(met.size), n_run, se, sp,
                         rogan_gladen(observed, se, sp), iv.low, iv.high, iv.undefined)


def corrected_undefined(rate: CorrectedRate) -> dict[str, str]:
    """Why a corrected rate's values are undefined: the judge's sensitivity or specificity
    (no calibration row of a class), the correction (a judge no better than chance), the
    interval (one conversation, or no resample in which the correction is defined)."""
    out: dict[str, str] = {}
    if math.isnan(rate.sensitivity):
        out["sensitivity"] = f"no “{MET}” from the physician majority"
    if math.isnan(rate.specificity):
        out["specificity"] = f"no “{NOT_MET}” from the physician majority"
    if math.isnan(rate.corrected):
        out["corrected"] = out.get("sensitivity") or out.get("specificity") or (
            "sensitivity + specificity <= 1: the judge is no better than chance")
    if rate.interval_undefined:
        out["low"] = out["high"] = rate.interval_undefined
    return out


# --- what a run against the real file costs -----------------------------------------------------

def request_chars(row: MetaEvalRow, template: str, system: str = grading.SYSTEM_MESSAGE) -> int:
    """Characters of one judge call on ``row`` (system message and filled template)."""
    return len(system) + len(grader_prompt(template, row))


def grader_prompt(template: str, row: MetaEvalRow) -> str:
    """The user message of a judge call on a meta-evaluation row: the reference grader
    template with the row's conversation (its prompt, then the completion as the assistant's
    turn) and the row's ``rubric`` text put in verbatim. The row carries one criterion without
    separate points, so there is no ``[points]`` prefix as in the benchmark's own grading."""
    convo = grading.render_conversation([m.model_dump() for m in row.prompt], row.completion)
    return template.replace(grading.CONVERSATION_SLOT, convo).replace(grading.RUBRIC_SLOT,
                                                                      row.rubric)


def cost_rows(n_rows: int, mean_input_tokens: float, judges: Sequence[str], registry: Registry,
              *, batch: bool, output_tokens: int) -> pd.DataFrame:
    """Planned USD per judge for grading ``n_rows`` rows once, at ``mean_input_tokens`` per call
    and ``output_tokens`` per verdict, at the registry's prices (the batch discount where
    ``batch``; no prompt-cache discount: each row is its own conversation and criterion)."""
    from hbpsych_utils.llm.cost import call_cost

    out = []
    for judge in judges:
        price = registry.model(judge).price
        usd = n_rows * call_cost(price, round(mean_input_tokens), output_tokens, batch=batch)
        out.append({"judge": judge, "calls": n_rows,
                    "input_tokens": round(n_rows * mean_input_tokens),
                    "output_tokens": n_rows * output_tokens, "usd": usd})
    return pd.DataFrame(out)


# --- the format fixture ---------------------------------------------------------------------------

def fixture_rows(judges: Sequence[str]) -> list[MetaEvalRow]:
    """The format fixture: thirteen rows in the real file's layout, physician labels chosen so
    that every statistic is computable by hand, each completion carrying the simulator's
    marker that scripts the judges' verdicts (:data:`FIXTURE_VERDICTS`, the i-th judge of
    ``judges`` the i-th column; at most three). The first twelve are on conversations of the
    Psych subset (:data:`FIXTURE_CONVERSATIONS`), the last outside it
    (:data:`FIXTURE_OUTSIDE`); every prompt id is HealthBench's."""
    if len(judges) > 3:
        raise MetaEvalError(f"the fixture scripts three judges, got {len(judges)}")
    rows = []
    script = [*FIXTURE_VERDICTS, (False, False, False)]
    for i, ((pid, category, labels, phys), verdicts) in enumerate(
            zip([*FIXTURE_LABELS, FIXTURE_OUTSIDE_ROW], script, strict=True)):
        n = i + 1
        marker = sim_marker(dict(zip(judges, verdicts, strict=False)))
        conv = (FIXTURE_CONVERSATIONS.index(pid) + 1 if pid in FIXTURE_CONVERSATIONS
                else len(FIXTURE_CONVERSATIONS) + 1)
        rows.append(MetaEvalRow(
            prompt_id=pid, completion_id=f"fixture-completion-{n}",
            prompt=[PromptMessage(role="user", content=f"Fixture question {conv}: I have "
                                  "felt low for weeks and cannot sleep. What should I do?")],
            completion=f"Fixture reply {n}: speak with a clinician soon. {marker}",
            rubric=f"Fixture criterion {n}: advises seeing a clinician.",
            category=category, binary_labels=list(labels),
            anonymized_physician_ids=list(phys)))
    return rows


def fixture_jsonl(judges: Sequence[str]) -> str:
    """:func:`fixture_rows` as the file's JSON lines (what ``tests/fixtures`` holds)."""
    import json

    return "".join(json.dumps(r.model_dump(), ensure_ascii=False) + "\n"
                   for r in fixture_rows(judges))
