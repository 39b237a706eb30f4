"""What is undefined in chapter 15's tables, said once under each: the reason and the (rater,
slice, value) it leaves undefined."""

from __future__ import annotations

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.reporting import vocabulary

UNDEFINED = vocabulary.MISSING
"""How the chapter shows an undefined value ("—", as the vocabulary shows any value it does
not have; the reason is said under its table)."""
ACCURACY_SHOWN = ("macro_f1", "f1_met", "f1_not_met", "sensitivity", "specificity",
                  "sensitivity_low", "specificity_low")
"""The fields of the accuracy tables whose undefined values the chapter explains (an
interval's by its low end)."""


def rater(name: str) -> str:
    """A judge, or the panel, as a sentence or a table names it."""
    return "Panel (majority of the judges)" if name == ja.PANEL else study.display_name(name)


def where(slice_name: str) -> str:
    """A slice as a sentence names it ("all rows", or its readers' label)."""
    return "all rows" if slice_name == "all" else vocabulary.term_label(slice_name)


def accuracy_undefined(frame: pd.DataFrame, fields: tuple[str, ...]
                       ) -> list[tuple[str, str, str, str]]:
    """The undefined values of ``fields`` an accuracy table shows, with their reasons."""
    if "undefined" not in frame.columns:
        return []
    return [(rater(r["judge"]), where(r["category"]), name, reason)
            for _, r in frame.iterrows()
            for name, reason in ja.reasons_of(r["undefined"]).items() if name in fields]


def _field_label(name: str, level: float) -> str:
    """The column an undefined value is in, as the table labels it (an interval's by either
    end, ``sensitivity_low`` or ``low``)."""
    for end in ("low", "high"):
        if name.endswith(end):
            return vocabulary.label(name.removesuffix(end) + "interval", level)
    return vocabulary.label(name, level)


def undefined_note(items: list[tuple[str, str, str, str]], level: float) -> str:
    """Under a table: each reason once, with the (rater, slice, value) it leaves undefined;
    "" when every value is defined."""
    if not items:
        return ""
    by_reason: dict[str, list[str]] = {}
    for who, place, name, reason in items:
        what = _field_label(name, level) if name not in ("macro_f1", "balanced_f1") else None
        by_reason.setdefault(reason, []).append(
            f"{who} on {place}" + (f" ({what})" if what else ""))
    parts = [f"{reason}: {', '.join(dict.fromkeys(cells))}" for reason, cells in
             by_reason.items()]
    return (f"{UNDEFINED} marks a value that is undefined, never counted as 0 (a class one "
            "side never uses has no precision or no recall, so no F1, and simple-evals reports "
            "none there; an interval needs two conversations). Here: "
            f"{'; '.join(parts)}.")


