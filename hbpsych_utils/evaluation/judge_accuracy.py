"""How accurate are the judges? Their verdicts against HealthBench's physician labels.

HealthBench released a meta-evaluation file (``healthbench_meta_eval`` in the registry): model
completions of HealthBench conversations, each with one rubric criterion and the binary
"criterion met" labels of several physicians (``binary_labels``, aligned with
``anonymized_physician_ids``). Grading those rows with the study's judges says how far each
judge's verdicts can be trusted, and lets a criterion-met rate be corrected for the judge's
errors. Everything here is plain functions of tables; the chapter (``stages.s15_judge_accuracy``)
calls them.

Definitions (each a choice, stated once):

- **Physician majority**: criterion met when strictly more than half of a row's physicians say
  so (a tie is "not met"), as inspect_evals' ``healthbench_meta_eval`` scorer takes it.
- **A class's F1** (:func:`class_f1`): the harmonic mean of its precision and its recall,
  defined only where both are: the grader gives that verdict at least once (else precision is
  0/0) and the truth holds it at least once (else recall is 0/0). Where either side never
  uses a class, its F1 is undefined (NaN, ``None`` in ``metrics.json``, "—" in the chapter,
  with the reason: :func:`f1_undefined`), never 0: that is simple-evals' rule
  (``healthbench_meta_eval.py`` records a precision only for a verdict the grader gave and a
  recall only for a label the truth holds, and reports no F1, and no balanced F1, without
  both).
- **Macro-F1** (:func:`macro_f1`): the mean of the F1 of the positive class (met) and of the
  negative class (not met), a judge's verdict against the physician majority, over rows;
  undefined when either class's F1 is. Where both are defined it equals what inspect_evals'
  meta-eval scorer reports ("macro F1": scikit-learn's ``f1_score(average="macro")`` on the two
  labels); where a class is never predicted or never in the truth scikit-learn counts its F1
  as 0 and halves the other, and the study reports no value instead.
- **Pairwise balanced F1** (:func:`pairwise_f1`): HealthBench's comparison of a grader with
  physicians, as simple-evals' ``healthbench_meta_eval`` computes it: every (grader verdict,
  physician label) pair of every row, the physician taken as truth, pooled; the F1 of each
  class, averaged, and undefined where either class's F1 is (simple-evals' semantics exactly,
  tested against a plain re-implementation of its formula). A physician's leave-one-out
  figure pairs each of its labels with every other physician's label on the same row (the
  others as truth): the physician baseline a grader is placed against.
- **Sensitivity / specificity** (:func:`sens_spec`): of the rows the physician majority calls
  met, the share the judge calls met; of those it calls not met, the share the judge calls not
  met. Intervals come from a bootstrap that resamples conversations (``prompt_id``), keeping
  every row of a drawn conversation together (:func:`cluster_draws`), because rows of one
  conversation share its difficulty; seeded (``study.SEED``-derived run seed). A slice of one
  conversation has no interval (``scoring.percentile_interval``: every resample is the same
  draw).
- **Agreement among judges**: Gwet's AC1 (``construction.agreement``, the study's own
  implementation) over rows x judges, on the two-category scale.
- **Rogan-Gladen correction** (:func:`rogan_gladen`): a criterion-met rate ``p`` observed
  through a judge of sensitivity ``se`` and specificity ``sp`` estimates the true rate
  ``(p + sp - 1) / (se + sp - 1)``, clipped to [0, 1]; undefined when ``se + sp <= 1``. Its
  interval (:func:`corrected_rate`) resamples both the calibration set (conversations, so the
  judge's se and sp vary) and the graded conversations (so ``p`` varies), and reads the
  percentiles of the corrected rate: calibration uncertainty is carried into the interval,
  not ignored.

Why not prediction-powered inference (PPI; the ``ppi_python`` package): PPI corrects an
estimate with a *labelled subset of the same population* (the rectifier is the mean error of
the judge on gold labels drawn from the data being estimated). Here the physician labels are of
HealthBench's meta-evaluation rows, not of this run's graded replies; what transfers is a
judge's sensitivity and specificity, which is exactly the Rogan-Gladen setting (a test's error
rates measured on a validation sample, applied to a prevalence elsewhere). PPI would need
physician labels on a sample of this run's own verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, overload

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from hbpsych_utils import study
from hbpsych_utils.construction import agreement
from hbpsych_utils.core import jsonl
from hbpsych_utils.core.records import FileRecord
from hbpsych_utils.evaluation import grading, scoring

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

@dataclass(frozen=True)
class Confusion:
    """Counts of a grader against a truth: ``tp`` met/met, ``fn`` truth met, grader not, ..."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def confusion(truth: Iterable[bool], pred: Iterable[bool]) -> Confusion:
    t = np.asarray(list(truth), dtype=bool)
    p = np.asarray(list(pred), dtype=bool)
    if t.shape != p.shape:
        raise MetaEvalError(f"{t.size} truths but {p.size} verdicts")
    return Confusion(int((t & p).sum()), int((~t & p).sum()), int((t & ~p).sum()),
                     int((~t & ~p).sum()))


MET, NOT_MET = "met", "not met"
"""The two classes, as the reasons name them."""


@dataclass(frozen=True)
class Roles:
    """Who gives the verdicts and who the truth, as a reason for an undefined value names
    them (``no “met” from the judge``)."""

    rater: str
    truth: str


AGAINST_MAJORITY = Roles("the judge", "the physician majority")


def _f1(hit: int, false_alarm: int, miss: int) -> float:
    """A class's F1 where both its precision and its recall are defined (the class is
    predicted at least once and present in the truth at least once), NaN otherwise. Then
    ``2 * hit / (2 * hit + false_alarm + miss)`` equals ``2PR / (P + R)``, and 0 when P and R
    are both 0, as simple-evals computes it."""
    if hit + false_alarm == 0 or hit + miss == 0:
        return math.nan
    return 2 * hit / (2 * hit + false_alarm + miss)


def class_f1(c: Confusion) -> tuple[float, float]:
    """The F1 of the positive class (met) and of the negative class (not met); NaN for a class
    the grader never predicts or the truth never holds (see the module docstring)."""
    return _f1(c.tp, c.fp, c.fn), _f1(c.tn, c.fn, c.fp)


def macro_f1(c: Confusion) -> float:
    """The mean of the two classes' F1; NaN when either is (see the module docstring)."""
    pos, neg = class_f1(c)
    return (pos + neg) / 2


def _absent(c: Confusion, roles: Roles) -> dict[str, list[str]]:
    """Per class, why its F1 is undefined: which side never uses it."""
    out: dict[str, list[str]] = {MET: [], NOT_MET: []}
    for k, predicted, present in ((MET, c.tp + c.fp, c.tp + c.fn),
                                  (NOT_MET, c.tn + c.fn, c.tn + c.fp)):
        if not predicted:
            out[k].append(f"no “{k}” from {roles.rater}")
        if not present:
            out[k].append(f"no “{k}” from {roles.truth}")
    return out


def f1_undefined(c: Confusion, roles: Roles) -> dict[str, str]:
    """Why each undefined value among ``f1_met``, ``f1_not_met`` and ``macro_f1`` (the mean of
    the two) is undefined; empty when all three are defined."""
    absent = _absent(c, roles)
    out = {f"f1_{k.replace(' ', '_')}": " and ".join(dict.fromkeys(why))
           for k, why in absent.items() if why}
    if out:
        out["macro_f1"] = " and ".join(dict.fromkeys(out.values()))
    return out


def sens_spec(c: Confusion) -> tuple[float, float]:
    """Sensitivity tp/(tp+fn) and specificity tn/(tn+fp); NaN without a row of the class."""
    se = c.tp / (c.tp + c.fn) if c.tp + c.fn else math.nan
    sp = c.tn / (c.tn + c.fp) if c.tn + c.fp else math.nan
    return se, sp


def sens_spec_undefined(c: Confusion, roles: Roles = AGAINST_MAJORITY) -> dict[str, str]:
    """Why sensitivity or specificity is undefined (no row of its class in the truth)."""
    out = {}
    if not c.tp + c.fn:
        out["sensitivity"] = f"no “{MET}” from {roles.truth}"
    if not c.tn + c.fp:
        out["specificity"] = f"no “{NOT_MET}” from {roles.truth}"
    return out


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

def cluster_draws(clusters: Sequence[str], n_resamples: int, rng: np.random.Generator
                  ) -> np.ndarray:
    """(n_resamples, n_rows) weights: how often each row is drawn when the clusters (one label
    per row) are resampled with replacement, a drawn cluster bringing all its rows."""
    codes, uniques = pd.factorize(pd.Series(list(clusters)), sort=True)
    if len(uniques) == 0:
        raise MetaEvalError("bootstrap: no conversations to resample")
    return scoring.resample_counts(len(uniques), n_resamples, rng)[:, codes]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def sens_spec_draws(part: pd.DataFrame, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's sensitivity and specificity (rows weighted by ``w``)."""
    t = part["majority"].to_numpy(bool)
    p = part["criteria_met"].to_numpy(bool)
    se = _ratio(w @ (t & p), w @ t)
    sp = _ratio(w @ (~t & ~p), w @ ~t)
    return se, sp


def sens_spec_table(joined: pd.DataFrame, by: str = "category", *, overall: bool = True,
                    n_resamples: int = study.N_RESAMPLES, seed: int = study.SEED,
                    level: float = study.CI_LEVEL) -> pd.DataFrame:
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


@overload
def rogan_gladen(p: float, se: float, sp: float) -> float: ...
@overload
def rogan_gladen(p: np.ndarray, se: float | np.ndarray, sp: float | np.ndarray
                 ) -> np.ndarray: ...
def rogan_gladen(p: float | np.ndarray, se: float | np.ndarray, sp: float | np.ndarray
                 ) -> float | np.ndarray:
    """The true rate behind an observed rate ``p`` (see the module docstring), clipped to
    [0, 1]; NaN where ``se + sp <= 1`` (the judge is no better than chance)."""
    p, se, sp = np.asarray(p, float), np.asarray(se, float), np.asarray(sp, float)
    youden = se + sp - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(youden > 0, np.clip((p + sp - 1) / np.where(youden > 0, youden, 1),
                                             0.0, 1.0), np.nan)
    return float(value) if value.ndim == 0 else value


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
                   n_resamples: int = study.N_RESAMPLES, seed: int = study.SEED,
                   level: float = study.CI_LEVEL) -> CorrectedRate:
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

FIXTURE_PHYSICIANS = ("phys-A", "phys-B", "phys-C", "phys-D")

FIXTURE_CONVERSATIONS: tuple[str, ...] = (
    "b603f797-58cc-45ea-9957-508f50b261f3",  # v1, v2, Hard; theme emergency_referrals; anxiety
    "0ffac3f1-44e4-4934-a25c-e6a31fe5a838",  # v1, v2, Hard; global_health; perinatal_mh
    "9db3e66f-9e4e-4683-9279-65fe41679e8d",  # v1, v2; hedging; perinatal_mh
    "140c95dc-4791-42a6-a1da-f52c7e525c48",  # v2 only: no modal category in categories_v1
)
"""The fixture's four conversations: real HealthBench prompt ids in the Psych subset as the
smoke run's 05_subset writes it (the smoke corpus holds the first three, so the fourth has no
theme there; v1's categories do not cover it)."""

FIXTURE_OUTSIDE = "c5f6bb12-a633-4ee4-b6a8-e6f9539472dc"
"""A HealthBench conversation outside the Psych subset (in the smoke corpus, theme
emergency_referrals): the fixture's thirteenth row is on it, so the subset filter drops it."""

_C1, _C2, _C3, _C4 = FIXTURE_CONVERSATIONS
_FIXTURE_LABELS: tuple[tuple[str, str, tuple[bool, ...], tuple[str, ...]], ...] = (
    # (prompt_id, category, physician labels, physicians): majority met on rows 1-6
    (_C1, "emergency_referrals", (True, True, True), ("phys-A", "phys-B", "phys-C")),
    (_C1, "emergency_referrals", (True, True, False), ("phys-A", "phys-B", "phys-D")),
    (_C1, "emergency_referrals", (True, False, True), ("phys-A", "phys-C", "phys-D")),
    (_C2, "emergency_referrals", (True, True, True), ("phys-B", "phys-C", "phys-D")),
    (_C2, "hedging", (True, True, False), ("phys-A", "phys-B", "phys-C")),
    (_C2, "hedging", (False, True, True), ("phys-A", "phys-B", "phys-D")),
    (_C3, "hedging", (False, False, False), ("phys-A", "phys-C", "phys-D")),
    (_C3, "hedging", (False, False, True), ("phys-B", "phys-C", "phys-D")),
    (_C3, "emergency_referrals", (False, True, False), ("phys-A", "phys-B", "phys-C")),
    (_C4, "emergency_referrals", (False, False, False), ("phys-A", "phys-B", "phys-D")),
    (_C4, "hedging", (True, False, False), ("phys-A", "phys-C", "phys-D")),
    (_C4, "hedging", (False, False, False), ("phys-B", "phys-C", "phys-D")),
)
"""Twelve rows in four conversations, three physicians each (majority met on the first six)."""

_FIXTURE_OUTSIDE_ROW = (FIXTURE_OUTSIDE, "emergency_referrals", (True, True, True),
                        ("phys-A", "phys-B", "phys-C"))
"""The thirteenth row, outside the subset: unanimously met, every judge scripted to say not met,
so it would move every statistic were it not filtered out."""

FIXTURE_VERDICTS: tuple[tuple[bool, bool, bool], ...] = (
    # the first, second and third judge's scripted verdicts, row by row
    (True, True, True), (True, True, True), (True, True, True),
    (True, True, False), (True, True, False), (False, True, False),
    (False, False, False), (False, True, False), (False, True, False),
    (False, True, False), (False, False, False), (True, False, False),
)
"""Against the majority: the first judge misses row 6 and wrongly meets row 12 (tp 5, fn 1,
tn 5, fp 1); the second meets all six met rows and three of the six others (tp 6, tn 3, fp 3);
the third meets only three of the met rows and none of the others (tp 3, fn 3, tn 6)."""

SIM_VERDICT_PREFIX = "sim-verdicts"
"""The marker the loopback simulator obeys in a grader prompt (``llm.testing.simulator``)."""


def sim_marker(verdicts: Mapping[str, bool]) -> str:
    """``[sim-verdicts model=met other=not-met]``: the simulator gives each named model that
    verdict on a grader prompt carrying it, instead of its hash-chosen one."""
    parts = " ".join(f"{m}={'met' if v else 'not-met'}" for m, v in verdicts.items())
    return f"[{SIM_VERDICT_PREFIX} {parts}]"


def fixture_rows(judges: Sequence[str] = study.JUDGE_PANEL) -> list[MetaEvalRow]:
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
            zip([*_FIXTURE_LABELS, _FIXTURE_OUTSIDE_ROW], script, strict=True)):
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


def fixture_jsonl(judges: Sequence[str] = study.JUDGE_PANEL) -> str:
    """:func:`fixture_rows` as the file's JSON lines (what ``tests/fixtures`` holds)."""
    import json

    return "".join(json.dumps(r.model_dump(), ensure_ascii=False) + "\n"
                   for r in fixture_rows(judges))
