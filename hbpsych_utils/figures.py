"""The compendium's figures, drawn from plain tables and deterministic for the same inputs.

Style: sorted bars, labelled axes and values, the Okabe–Ito colour-blind-safe palette, no
chart junk. ``save`` writes PNG and SVG with fixed metadata and SVG ids, so re-running a
profile on the same inputs reproduces the same files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; never needs a display
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
MUTED = "#999999"


def _style() -> None:
    plt.rcParams.update({
        "svg.hashsalt": "hbpsych",  # stable element ids in SVG output
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


def category_distribution(
    counts: Mapping[str, int], *, title: str, muted: tuple[str, ...] = ("no category majority",)
) -> Figure:
    """Horizontal bars, largest first; the 'no category majority' bucket greyed at the end."""
    _style()
    labels = list(counts)
    values = [counts[k] for k in labels]
    total = sum(values)
    fig, ax = plt.subplots(figsize=(6.5, 0.28 * len(labels) + 1.0))
    colours = [MUTED if k in muted else OKABE_ITO[0] for k in labels]
    ax.barh(range(len(labels)), values, color=colours)
    ax.set_yticks(range(len(labels)), [k.replace("_", " ") for k in labels])
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v, i, f" {v} ({v / total:.0%})", va="center", fontsize=8)
    ax.set_xlabel("conversations")
    ax.set_xlim(0, max(values) * 1.2 if values else 1)
    ax.set_title(f"{title} (n = {total})", loc="left")
    fig.tight_layout()
    return fig


def save(fig: Figure, stem: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write ``stem.<fmt>`` for each format with reproducible metadata; returns the paths."""
    out = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"Date": None} if fmt == "svg" else {"Software": None} if fmt == "png" else None
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata=meta)
        out.append(path)
    return out
