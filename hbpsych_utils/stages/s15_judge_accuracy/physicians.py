"""Chapter 15 against the physicians: each judge and the panel against their majority, placed
among them by pairwise balanced F1, and the judges' agreement with one another."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.display import Note, Together
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s15_judge_accuracy.files import (
    ACCURACY_FILE,
    FIGURE_CAPTION,
    FIGURE_LABEL,
    FIGURE_TITLE,
    SLICING_NAMES,
)
from hbpsych_utils.stages.s15_judge_accuracy.undefined import (
    ACCURACY_SHOWN,
    accuracy_undefined,
    rater,
    undefined_note,
    where,
)
from hbpsych_utils.stages.s15_judge_accuracy.verdicts import Graded


@dataclass(frozen=True)
class Accuracy:
    """Per judge and the panel, per slice: counts, macro-F1, each class's F1, sensitivity and
    specificity with conversation-clustered bootstrap intervals."""

    table: pd.DataFrame
    """By the file's category (``all`` first)."""
    graded: Graded
    by_theme: pd.DataFrame
    by_psych_category: pd.DataFrame
    level: float
    """The level of the sensitivity and specificity intervals."""

    def view(self) -> Tables:
        t = self.table
        overall = t[t["category"] == "all"].set_index("judge")[[
            "n", "macro_f1", "f1_met", "f1_not_met", "sensitivity", "sensitivity_low",
            "sensitivity_high", "specificity", "specificity_low", "specificity_high"]]
        per = [Table(frame.pivot(index="judge", columns="category", values="macro_f1"),
                     caption="Macro-F1 against the physician majority, by "
                     f"{SLICING_NAMES[by]}", value_kind="score",
                     notes=[undefined_note(accuracy_undefined(frame, ("macro_f1",)),
                                            self.level)])
               for by, frame in (("category", t[t["category"] != "all"]),
                                 (ja.PSYCH_CATEGORY, self.by_psych_category),
                                 (ja.THEME, self.by_theme)) if not frame.empty]
        labels = self.graded.source.labels
        note = (f"The panel is the majority of the judges on a row all of them graded (with an "
                "even number of judges a tie is not met). Rows without a Psych category "
                f"({count(int(labels[ja.PSYCH_CATEGORY].isna().sum()), 'row')}) or a "
                f"HealthBench theme ({count(int(labels[ja.THEME].isna().sum()), 'row')}) are "
                "left out of those tables. Every count and interval is in "
                f"{ACCURACY_FILE}.")
        why = undefined_note(accuracy_undefined(t[t["category"] == "all"], ACCURACY_SHOWN),
                              self.level)
        return Tables([
            Table(overall, caption="Each judge and the panel against the physician majority "
                  f"(all rows; {level_text(self.level)} intervals resample conversations)",
                  level=self.level, notes=[why]), *per], note=note)


@base.needs
def accuracy(graded: Graded, *, n_resamples: int, seed: int, level: float) -> Accuracy:
    """Each judge and the panel (the judges' majority, ``judge_accuracy.panel_verdicts``)
    against the physician majority, overall and per the file's category, per HealthBench theme
    and per Psych category (``judge_accuracy.against_majority``), with ``n_resamples`` seeded
    clustered intervals at ``level`` for sensitivity and specificity
    (``judge_accuracy.sens_spec_table``)."""
    rated = graded.rated
    tables = {}
    for by in ja.SLICINGS:
        overall = by == "category"
        base_table = ja.against_majority(rated, by, overall=overall)
        cis = ja.sens_spec_table(rated, by, overall=overall, n_resamples=n_resamples,
                                 seed=seed, level=level)
        tables[by] = ja.with_intervals(base_table, cis)
    return Accuracy(tables["category"], graded, _labelled(tables[ja.THEME], ja.THEME),
                    _labelled(tables[ja.PSYCH_CATEGORY], ja.PSYCH_CATEGORY), level)


def _labelled(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """A slicing's table with its slices by readers' names (categories via
    ``study.CATEGORY_LABELS``) and the slicing named in column ``slicing``."""
    if frame.empty:
        return frame.assign(slicing=pd.Series(dtype=object))
    names = [study.category_label(c) if by == ja.PSYCH_CATEGORY else str(c)
             for c in frame["category"]]
    return frame.assign(category=names, slicing=by)


# --- among the physicians --------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """HealthBench's pairwise balanced F1 of judges and physicians, per category, and the
    figure."""

    table: pd.DataFrame
    figure: Figure | figures.CachedFigure
    by_theme: pd.DataFrame
    by_psych_category: pd.DataFrame
    level: float

    def view(self) -> Together:
        frames = [(self.table, "Pairwise balanced F1 by the file's category: each judge and "
                   "the panel against every physician label, and the physicians' "
                   "leave-one-out F1")]
        frames += [(frame, f"Pairwise balanced F1 by {SLICING_NAMES[by]}")
                   for by, frame in ((ja.PSYCH_CATEGORY, self.by_psych_category),
                                     (ja.THEME, self.by_theme)) if not frame.empty]
        tables = [Table(placement_summary(frame), caption=caption, value_kind="score",
                        notes=[undefined_note(pairwise_undefined(frame), self.level)])
                  for frame, caption in frames]
        shown = figures.Captioned(self.figure, f"{FIGURE_LABEL}. {FIGURE_TITLE}",
                                  FIGURE_CAPTION)
        return Together([Tables(tables), shown])


def placement_summary(t: pd.DataFrame) -> pd.DataFrame:
    """Judges and the panel by slice, then the physicians pooled, lowest and highest."""
    judges = t[t["kind"].isin(["judge", "panel"])].pivot(index="rater", columns="category",
                                                          values="balanced_f1")
    judges.index.name = None
    phys = t[t["kind"] == "physician"].groupby("category")["balanced_f1"]
    pooled = t[t["kind"] == "physicians"].set_index("category")["balanced_f1"]
    extra = pd.DataFrame([pooled, phys.min(), phys.max()],
                         index=["Physicians pooled", "Physicians (lowest)",
                                "Physicians (highest)"])
    out = pd.concat([judges, extra])
    cols = [*(["all"] if "all" in out.columns else []),
            *sorted(c for c in out.columns if c != "all")]
    return out[cols]


def pairwise_undefined(table: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """The undefined values a pairwise summary shows: each judge's and the panel's, the
    physicians pooled, and a slice where no physician's leave-one-out F1 is defined."""
    out = []
    for _, r in table.iterrows():
        reason = ja.reasons_of(r["undefined"]).get("balanced_f1")
        if reason and r["kind"] != "physician":
            who = "the physicians pooled" if r["kind"] == "physicians" else rater(r["rater"])
            out.append((who, where(r["category"]), "balanced_f1", reason))
    phys = table[table["kind"] == "physician"]
    for category, g in phys.groupby("category", sort=True):
        if g["balanced_f1"].isna().all():
            out.append(("every physician", where(str(category)), "balanced_f1",
                        "no physician's leave-one-out F1 is defined"))
        elif g["balanced_f1"].isna().any():
            out.append((f"{int(g['balanced_f1'].isna().sum())} of {len(g)} physicians "
                        "(left out of the lowest and highest)", where(str(category)),
                        "balanced_f1", "a physician's leave-one-out F1 undefined"))
    return out


@base.needs
def placement(graded: Graded, *, level: float, cache: Path) -> Placement:
    """Each judge's and the panel's pairwise balanced F1 against the physicians and each
    physician's leave-one-out F1 against the others (``judge_accuracy.pairwise_f1``), per the
    file's category (with the placement figure; ``cache`` keeps figures drawn before), per
    Psych category and per HealthBench theme (``level``: the chapter's interval level, named
    where an undefined interval is explained)."""
    rated, physicians = graded.rated, graded.source.physicians
    table = ja.pairwise_f1(rated, physicians)
    fig = figures.f1_placement(table, title=FIGURE_TITLE, cache=cache)
    return Placement(table, fig,
                     _labelled(ja.pairwise_f1(rated, physicians, ja.THEME, overall=False),
                               ja.THEME),
                     _labelled(ja.pairwise_f1(rated, physicians, ja.PSYCH_CATEGORY,
                                              overall=False), ja.PSYCH_CATEGORY), level)


@dataclass(frozen=True)
class Agreement:
    """Gwet's AC1 among the judges on the rows at least two of them graded (NaN: one judge)."""

    value: float
    n_rows: int
    n_judges: int

    def view(self) -> Note:
        if math.isnan(self.value):
            return Note("One judge only: agreement among judges needs two.")
        return Note(f"Gwet's AC1 among the {count(self.n_judges, 'judge')} on the "
                    f"{self.n_rows:,} rows at least two of them graded: **{self.value:.3f}** "
                    "(met / not met).")


@base.needs
def agreement(graded: Graded) -> Agreement:
    """Gwet's AC1 among the judges over the rows (``judge_accuracy.judges_ac1``)."""
    value, n = ja.judges_ac1(graded.joined)
    return Agreement(value, n, len(graded.source.judges))

