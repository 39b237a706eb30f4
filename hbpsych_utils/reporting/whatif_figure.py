"""The what-if's figure: each model's place in the study's order under every scoring choice.

One row per model of the study's ranking, best first: a line from the best to the worst place
the model takes over the distinct choices, a dot per place sized by how many choices give it,
and a black mark at its place in the study's order. Places are counted among the study's models
(a later model added above does not move them), as the what-if's rank changes are.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.evaluation.whatif import WhatIf
from hbpsych_utils.reporting.drawing import OKABE_ITO, freeze_layout


def place_counts(whatif: WhatIf) -> dict[str, Counter[int]]:
    """Each model of the study's ranking: how many distinct choices put it in each place
    (1 = first, among the study's models)."""
    order = whatif.study_ranking
    counts: dict[str, Counter[int]] = {c: Counter() for c in order}
    for move in whatif.moves.values():
        for c, change in move.changes.items():
            counts[c][order.index(c) + 1 - change] += 1
    return counts


def places(whatif: WhatIf) -> Figure:
    """The figure (module doc), from :func:`place_counts`."""
    order = whatif.study_ranking
    counts = place_counts(whatif)
    n = len(order)
    fig = Figure(figsize=(6.5, 0.26 * n + 1.2), layout="constrained")
    ax = fig.subplots()
    total = max(len(whatif.moves), 1)
    for row, c in enumerate(order):
        seen = counts[c]
        if seen:
            ax.hlines(row, min(seen), max(seen), color=OKABE_ITO[0], linewidth=1.2)
            xs = sorted(seen)
            ax.scatter(xs, [row] * len(xs), s=[12 + 110 * seen[x] / total for x in xs],
                       color="#8fc1e3", linewidths=0, zorder=2)
        ax.plot([row + 1], [row], marker="|", color="black", markersize=11,
                markeredgewidth=2, zorder=3)
    ax.set_yticks(range(n), [study.display_name(c) for c in order])
    ax.invert_yaxis()
    ax.set_xlim(0.5, n + 0.5)
    ax.set_xticks(range(1, n + 1))
    ax.set_xlabel("place among the study's models (1 = first)")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.suptitle(f"Each model's place under {len(whatif.moves):,} scoring choices",
                 x=0.01, ha="left", fontsize=10)
    return freeze_layout(fig)


DPI = 120
"""Below the chapters' 150: the page's weight is budgeted (the figure is most of it)."""


def save_png(fig: Figure, path: Path) -> Path:
    """The figure as a PNG with fixed metadata, so the same run gives the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return path
