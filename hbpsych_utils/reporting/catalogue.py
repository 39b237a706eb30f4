"""The paper's tables and figures by name: what each file of 12_figures_tables is in the paper.

The paper numbers its objects Table 1, Figure G1 (the subset's categories), Figure G2 (the panel
ranking) and, in its Appendix I, the per-judge analysis; the compendium draws a few more (the
Hard subset's ranking and heatmap, a v2 subset's), numbered here C1, C2, ... in the order they
appear. A chapter and the book's figures page show every object under the same label, title
and caption: 12_figures_tables writes them to ``catalogue.json``, the book reads that file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from hbpsych_utils import study
from hbpsych_utils.core import records
from hbpsych_utils.reporting import vocabulary

CATALOGUE = "catalogue.json"
"""12_figures_tables' list of its objects, in the order the paper shows them."""

PRIMARY = "v1"
"""The subset whose figures the paper shows (HealthBench-Psych v1); others are supplements."""


class Item(BaseModel):
    """One table or figure: its label ("Figure G2"), title, caption, files and whether it is
    one of the paper's own objects."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stem: str
    label: str
    title: str
    caption: str
    files: list[str]
    in_paper: bool

    @property
    def heading(self) -> str:
        return f"{self.label}. {self.title}"


class Catalogue(BaseModel):
    """Every object of a run's 12_figures_tables, in the paper's order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    items: list[Item]


# the paper's own objects: stem -> (label, title); a subset other than v1 makes a supplement
# ("{panel}": the run's panel, e.g. "Three-judge panel")
PAPER_OBJECTS: dict[str, tuple[str, str]] = {
    "table1": ("Table 1", "{panel} means"),
    "fig_categories_v1": ("Figure G1", "HealthBench-Psych by modal clinician category"),
    "fig_ranking_v1": ("Figure G2", "Panel ranking on HealthBench-Psych"),
    "table_i1": ("Table I1", "Per-judge means"),
    "fig_heatmap_v1": ("Figure I1", "Mean score by model and judge"),
}
SUPPLEMENT_TITLES = {"fig_ranking": "Panel ranking on {subset}",
                     "fig_heatmap": "Mean score by model and judge on {subset}"}
ORDER = ("table1", "fig_categories_v1", "fig_ranking_v1", "table_i1", "fig_heatmap_v1",
         "fig_judges_")


def _rank(stem: str) -> int:
    return next((i for i, head in enumerate(ORDER) if stem.startswith(head)), len(ORDER))


def label(stems: Sequence[str], judges: Sequence[str]
          ) -> dict[str, tuple[str, str, bool]]:
    """Each stem's label, title and whether the paper has it, in the paper's order: the paper's
    objects, the judge figure (Figure I2, of the subset 09 measured), then the supplements,
    numbered C1, C2, ... in the order given. A title names the run's panel (``judges``)."""
    out: dict[str, tuple[str, str, bool]] = {}
    extra = 0
    panel = vocabulary.panel_name(judges).capitalize()
    for stem in sorted(stems, key=_rank):
        if stem in PAPER_OBJECTS:
            name, title = PAPER_OBJECTS[stem]
            out[stem] = (name, title.format(panel=panel), True)
            continue
        kind, _, key = stem.rpartition("_")
        subset = study.SUBSET_TITLES.get(key, key)
        if kind == "fig_judges":
            out[stem] = ("Figure I2", f"Judge severity and self-preference on {subset}",
                         key == PRIMARY)
        else:
            extra += 1
            out[stem] = (f"Figure C{extra}",
                         SUPPLEMENT_TITLES.get(kind, "{subset}").format(subset=subset), False)
    return out


def read(folder: Path) -> Catalogue | None:
    """A run's catalogue (``None`` when the stage wrote none)."""
    path = Path(folder) / CATALOGUE
    if not path.is_file():
        return None
    return records.validate(Catalogue, records.read_json(path), str(path), ValueError)
