"""Is a score bought with length? Reply lengths and the length-adjusted score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.evaluation import breakdowns, length
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.display import Together
from hbpsych_utils.reporting.vocabulary import Table
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s14_analyses.files import (
    FIGURES,
    LENGTHS_FILE,
    PANEL,
    captioned,
    figure_stem,
)
from hbpsych_utils.stages.s14_analyses.graded import Graded


@dataclass(frozen=True)
class Lengths:
    """Reply lengths and the length-adjusted score, per scorer and candidate
    (``length.length_table``), with the figure."""

    table: pd.DataFrame
    variant: str
    figure: Figure | figures.CachedFigure
    subset: str
    level: float

    @property
    def stem(self) -> str:
        return figure_stem("length", self.subset)

    def panel(self) -> pd.DataFrame:
        rows = self.table[self.table["scorer"] == PANEL].set_index("candidate")
        return rows.drop(columns=["scorer"]).sort_values("clipped_mean", ascending=False)

    def view(self) -> Together:
        per_500 = length.penalty(self.variant)
        table = Table(self.panel(), caption=(
            f"Reply length (characters) and the panel's length-adjusted score "
            f"({length.VARIANT_NAMES[self.variant]} penalty {per_500:g} per "
            f"{length.PER_CHARS} characters from "
            f"{length.CENTER:,}, before the clip) beside the raw one; every judge's in "
            f"{LENGTHS_FILE}"), level=self.level)
        return Together([table, captioned("length", self.subset, self.figure, self.level)])


@base.needs
def lengths(graded: Graded, *, penalty: str, n_resamples: int, seed: int, level: float,
            cache: Path) -> Lengths:
    """Each candidate's first replies: their length (characters, ``len`` of the text, as the
    reference counts it), its raw clipped mean and its length-adjusted one with a seeded
    interval (the ``penalty`` of that HealthBench variant, applied per reply before the clip),
    for each judge and the panel; and the figure of score against mean reply length."""
    long = breakdowns.with_panel(graded.first_scores, graded.judges)
    table = length.length_table(long, graded.lengths, length.penalty(penalty),
                                n_resamples=n_resamples, seed=seed, level=level)
    panel_rows = table[table["scorer"] == PANEL].set_index("candidate")
    title = study.SUBSET_TITLES.get(graded.subset, graded.subset)
    fig = figures.length_scatter(panel_rows, title=f"{FIGURES['length'].title}: {title}",
                                 note=f"{length.VARIANT_NAMES[penalty]} penalty, "
                                      f"{length.penalty(penalty):g} per 500 characters",
                                 center=length.CENTER, cache=cache)
    return Lengths(table, penalty, fig, graded.subset, level)


