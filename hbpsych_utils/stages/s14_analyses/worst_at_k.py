"""How reliable: worst-at-k and the spread across runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns
from hbpsych_utils.evaluation.reliability import complete, run_spread, worst_at_k_table
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.display import Together
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s14_analyses.files import (
    FIGURES,
    PANEL,
    WORST_FILE,
    captioned,
    figure_stem,
)
from hbpsych_utils.stages.s14_analyses.graded import Graded


@dataclass(frozen=True)
class Reliability:
    """Worst-at-k for k = 1..K and the run spread, per scorer and candidate, with the figure."""

    worst: pd.DataFrame
    spread: pd.DataFrame
    samples: int
    n_incomplete: int
    figure: Figure | figures.CachedFigure
    subset: str
    level: float

    @property
    def stem(self) -> str:
        return figure_stem("worst_at_k", self.subset)

    def view(self) -> Together:
        panel_rows = self.worst[self.worst["scorer"] == PANEL]
        wk = panel_rows.pivot(index="candidate", columns="k", values="clipped_mean")
        wk.columns = [f"Worst-at-{k}" for k in wk.columns]
        spread = self.spread[self.spread["scorer"] == PANEL].set_index("candidate").drop(
            columns=["scorer"])
        note = (f"{count(self.n_incomplete, '(scorer, candidate, conversation) row')} with an "
                "unscored sample left out." if self.n_incomplete else "")
        tables = Tables([
            Table(wk.sort_values("Worst-at-1", ascending=False), caption=(
                f"The panel's worst-at-k, k = 1..{self.samples} (clipped mean over "
                f"conversations; intervals and each judge's in {WORST_FILE})"),
                value_kind="score"),
            Table(spread, caption=f"The panel's overall score in each of the {self.samples} "
                  "runs (one per sample index) and their spread (standard deviation, "
                  "ddof 0)")], note=note)
        return Together([tables, captioned("worst_at_k", self.subset, self.figure,
                                           self.level)])


@base.needs
def reliability(graded: Graded, *, n_resamples: int, seed: int, level: float,
                cache: Path) -> Reliability:
    """With K >= 2 replies per conversation (``generation.samples``; ``Inputs.sampled``):
    worst-at-k for k = 1..K with seeded intervals (``reliability.worst_at_k_table``) and each
    run's overall score and their spread (``reliability.run_spread``), for each judge and the
    panel, on the conversations scored in every sample; and the figure."""
    long = breakdowns.with_panel(graded.scores, graded.judges)
    _, n_incomplete = complete(long)
    worst = worst_at_k_table(long, n_resamples=n_resamples, seed=seed, level=level)
    spread = run_spread(long)
    title = study.SUBSET_TITLES.get(graded.subset, graded.subset)
    fig = figures.worst_at_k_curves(
        worst[worst["scorer"] == PANEL], title=f"{FIGURES['worst_at_k'].title}: {title}",
        note=f"{graded.samples} replies per conversation; {level_text(level)} "
             "bootstrap bands", cache=cache)
    return Reliability(worst, spread, graded.samples, n_incomplete, fig, graded.subset, level)


