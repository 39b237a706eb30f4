"""A binary rater against a truth: confusion counts, each class's F1, macro-F1, sensitivity and
specificity, their cluster-bootstrap draws, and the Rogan-Gladen correction of a rate.

The rater is a judge (or the panel, or a physician) saying "criterion met" or not; the truth
is the physicians' (:mod:`.judge_accuracy` builds both from HealthBench's meta-evaluation rows).
Definitions (each a choice, stated once):

- **A class's F1** (:func:`class_f1`): the harmonic mean of its precision and its recall,
  defined only where both are: the rater gives that verdict at least once (else precision is
  0/0) and the truth holds it at least once (else recall is 0/0). Where either side never
  uses a class, its F1 is undefined (NaN, ``None`` in ``metrics.json``, "—" in the chapter,
  with the reason: :func:`f1_undefined`), never 0: that is simple-evals' rule
  (``healthbench_meta_eval.py`` records a precision only for a verdict the grader gave and a
  recall only for a label the truth holds, and reports no F1, and no balanced F1, without
  both).
- **Macro-F1** (:func:`macro_f1`): the mean of the F1 of the positive class (met) and of the
  negative class (not met); undefined when either class's F1 is. Where both are defined it
  equals what inspect_evals' meta-eval scorer reports ("macro F1": scikit-learn's
  ``f1_score(average="macro")`` on the two labels); where a class is never predicted or never
  in the truth scikit-learn counts its F1 as 0 and halves the other, and the study reports no
  value instead.
- **Sensitivity / specificity** (:func:`sens_spec`): of the rows the truth calls met, the share
  the rater calls met; of those it calls not met, the share the rater calls not met. Their
  intervals come from a bootstrap that resamples conversations, keeping every row of a drawn
  conversation together (:func:`cluster_draws`), because rows of one conversation share its
  difficulty.
- **Rogan-Gladen correction** (:func:`rogan_gladen`): a criterion-met rate ``p`` observed
  through a judge of sensitivity ``se`` and specificity ``sp`` estimates the true rate
  ``(p + sp - 1) / (se + sp - 1)``, clipped to [0, 1]; undefined when ``se + sp <= 1``.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import pandas as pd

from hbpsych_utils.evaluation import scoring

# --- counts, F1, sensitivity and specificity ------------------------------------------------

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
        raise ValueError(f"{t.size} truths but {p.size} verdicts")
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


def sens_spec_undefined(c: Confusion, roles: Roles) -> dict[str, str]:
    """Why sensitivity or specificity is undefined (no row of its class in the truth)."""
    out = {}
    if not c.tp + c.fn:
        out["sensitivity"] = f"no “{MET}” from {roles.truth}"
    if not c.tn + c.fp:
        out["specificity"] = f"no “{NOT_MET}” from {roles.truth}"
    return out


# --- the bootstrap and the correction ----------------------------------------------------

def cluster_draws(clusters: Sequence[str], n_resamples: int, rng: np.random.Generator
                  ) -> np.ndarray:
    """(n_resamples, n_rows) weights: how often each row is drawn when the clusters (one label
    per row) are resampled with replacement, a drawn cluster bringing all its rows."""
    codes, uniques = pd.factorize(pd.Series(list(clusters)), sort=True)
    if len(uniques) == 0:
        raise ValueError("bootstrap: no conversations to resample")
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
