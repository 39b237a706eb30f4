"""Where models fail: scores by rubric axis, theme and modal clinician category, and their
heatmaps."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.evaluation import breakdowns, scoring
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.figures import Gallery
from hbpsych_utils.reporting.vocabulary import Table, Tables, level_text
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s14_analyses.files import (
    BY_TAG_FILE,
    FIGURES,
    PANEL,
    captioned,
    figure_stem,
)
from hbpsych_utils.stages.s14_analyses.graded import Graded


@dataclass(frozen=True)
class Breakdown:
    """Per candidate, for each judge and the panel, the score of every reported tag
    (``breakdowns.summarise``), and the overall panel score that orders the rows."""

    summary: pd.DataFrame
    panel_mean: dict[str, float]
    subset: str
    judges: list[str]
    level: float
    """The level of the tag scores' intervals."""

    def order(self) -> list[str]:
        return scoring.ranking(pd.Series(self.panel_mean))

    def wide(self, scorer: str, prefix: str) -> pd.DataFrame:
        return breakdowns.wide(self.summary, scorer, prefix).reindex(
            [c for c in self.order() if c in set(self.summary["candidate"])])

    def n_by_tag(self) -> pd.DataFrame:
        """Per tag: the fewest and most conversations any candidate's panel score rests on."""
        panel_rows = self.summary[self.summary["scorer"] == PANEL]
        g = panel_rows.groupby("tag")["n"]
        slices = {"axis": "Rubric axis", "theme": "HealthBench theme",
                  "category": "Modal clinician category"}
        return pd.DataFrame({"slice": [slices.get(t.split(":", 1)[0], t.split(":", 1)[0])
                                       for t in g.min().index],
                             "n_fewest": g.min(), "n_most": g.max()})

    def view(self) -> Tables:
        title = study.SUBSET_TITLES.get(self.subset, self.subset)
        tables = [Table(self.wide(PANEL, prefix), caption=f"Panel score by {what}: {title} "
                        "(clipped mean; rows best overall first)", value_kind="score")
                  for prefix, what in ((breakdowns.AXIS, "rubric axis"),
                                       (breakdowns.THEME, "HealthBench theme"),
                                       (breakdowns.CATEGORY, "modal clinician category"))]
        by_judge = pd.concat({j: self.wide(j, breakdowns.AXIS) for j in self.judges},
                             names=["judge", "candidate"])
        tables.append(Table(by_judge, caption=f"Each judge's score by rubric axis: {title}",
                            value_kind="score"))
        tables.append(Table(self.n_by_tag(), caption="Conversations behind each tag's score",
                            kinds={"slice": "name"}))
        note = ("Simple-evals' per-tag rule: a theme or category takes the conversation's score; "
                "an axis scores its own criteria over their positive points, where they have "
                f"any. Every number with its n and {level_text(self.level)} interval is in "
                f"{BY_TAG_FILE}.")
        return Tables(tables, note=note)


@base.needs
def by_tag(graded: Graded, *, n_resamples: int, seed: int, level: float) -> Breakdown:
    """Per candidate, for each judge and for the panel: a score for every rubric axis, every
    HealthBench theme and every modal clinician category, from the first reply's verdicts
    (``breakdowns.tag_scores``, ``with_panel``), with n and ``n_resamples`` seeded bootstrap
    intervals at ``level`` (``breakdowns.summarise``)."""
    tags = breakdowns.tag_scores(graded.verdicts, graded.conversations,
                                 extra_tags=breakdowns.category_tags(graded.categories))
    summary = breakdowns.summarise(breakdowns.with_panel(tags, graded.judges),
                                   n_resamples=n_resamples, seed=seed, level=level)
    return Breakdown(summary, graded.panel_mean, graded.subset, graded.judges, level)


@dataclass(frozen=True)
class Figures:
    """A section's figures, each under its label and with its caption (:data:`FIGURES`)."""

    shown: dict[str, figures.Captioned]
    notes: list[str] = field(default_factory=list)

    @property
    def figures(self) -> dict[str, Figure | figures.CachedFigure]:
        return {stem: c.figure for stem, c in self.shown.items()}

    def view(self) -> Gallery:
        return Gallery(self.shown, notes=self.notes)


@base.needs
def heatmaps(tags: Breakdown, *, cache: Path) -> Figures:
    """The panel's scores as heatmaps: candidates x rubric axes, candidates x modal clinician
    categories (rows best overall first); ``cache`` keeps figures drawn before."""
    out: dict[str, figures.Captioned] = {}
    notes = []
    title = study.SUBSET_TITLES.get(tags.subset, tags.subset)
    for key, prefix in (("axes", breakdowns.AXIS), ("categories", breakdowns.CATEGORY)):
        table = tags.wide(PANEL, prefix)
        if table.empty:
            notes.append(f"No {FIGURES[key].title.lower()} figure: no scored conversation "
                         "carries such a tag.")
            continue
        out[figure_stem(key, tags.subset)] = captioned(key, tags.subset, figures.score_heatmap(
            table, title=f"{FIGURES[key].title}: {title}",
            note="clipped mean; rows best overall first", cache=cache), tags.level)
    return Figures(out, notes)


