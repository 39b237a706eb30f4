"""The figures of where and how reliably models fail (chapter 14: scores by slice, reply
length, worst-at-k) and of the judges among physicians (chapter 15: F1 placement), drawn like
the paper's (:mod:`~hbpsych_utils.reporting.drawing`); chapters find them in ``figures``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.drawing import (
    MUTED,
    OKABE_ITO,
    freeze_layout,
    heatmap,
    keyed,
    require_columns,
    subplots,
    use_style,
)

LINESTYLES = ("-", "--", ":")
"""Line styles that tell series apart once the palette's colours repeat (more than eight)."""


def _series_style(i: int) -> dict[str, Any]:
    return {"color": OKABE_ITO[i % len(OKABE_ITO)],
            "linestyle": LINESTYLES[(i // len(OKABE_ITO)) % len(LINESTYLES)]}


@keyed
def score_heatmap(table: pd.DataFrame, *, title: str, note: str = "",
                  cmap: str = "cividis") -> Figure:
    """Candidate x slice scores (rows and columns in the order given), every cell annotated, '–'
    where a candidate has no score for the slice; ``note`` is the title's second line."""
    m = table.to_numpy(dtype=float)
    n_rows, n_cols = m.shape
    use_style()
    fig, ax = subplots(figsize=(0.85 * n_cols + 3.6, 0.27 * n_rows + 2.4),
                       layout="constrained")
    heatmap(ax, m, cmap)
    ax.set_xticks(np.arange(n_cols) + 0.5, [vocabulary.term_label(c) for c in table.columns],
                  rotation=35, ha="left", rotation_mode="anchor")
    ax.xaxis.tick_top()
    ax.set_yticks(np.arange(n_rows) + 0.5, [study.display_name(str(r)) for r in table.index],
                  rotation=0)
    ax.set_title(title + (f"\n{note}" if note else ""), loc="left", fontsize=10, pad=8)
    return freeze_layout(fig)


@keyed
def length_scatter(table: pd.DataFrame, *, title: str, note: str = "",
                   center: float = 2000.0) -> Figure:
    """Each candidate's score against its mean reply length: the raw score (filled) and the
    length-adjusted one (open), joined by an arrow; ``table`` is indexed by candidate with
    ``mean_chars``, ``clipped_mean`` and ``adjusted_mean``."""
    require_columns(table, ["mean_chars", "clipped_mean", "adjusted_mean"], "length figure")
    t = table.sort_index()
    x = t["mean_chars"].to_numpy(float)
    raw = t["clipped_mean"].to_numpy(float)
    adj = t["adjusted_mean"].to_numpy(float)
    use_style()
    fig, ax = subplots(figsize=(6.8, 4.4), layout="constrained")
    for xi, r, a in zip(x, raw, adj, strict=True):
        ax.annotate("", xy=(xi, a), xytext=(xi, r),
                    arrowprops={"arrowstyle": "->", "color": MUTED, "lw": 0.9})
    ax.scatter(x, raw, s=30, color=OKABE_ITO[0], zorder=3, label="raw score")
    ax.scatter(x, adj, s=30, facecolors="white", edgecolors=OKABE_ITO[3], zorder=3,
               label="length-adjusted score")
    for xi, r, name in zip(x, raw, t.index, strict=True):
        ax.text(xi, r, f"  {study.display_name(str(name))}", fontsize=7.5, va="center")
    ax.axvline(center, color=MUTED, lw=0.8, ls="--", zorder=0)
    ax.text(center, 1.0, f" {center:,.0f} characters: no adjustment",
            transform=ax.get_xaxis_transform(), fontsize=7, color="#555555", va="top")
    span = float(np.nanmax(x) - np.nanmin(x)) or 1.0
    ax.set_xlim(min(float(np.nanmin(x)), center) - 0.15 * span,
                max(float(np.nanmax(x)), center) + 0.35 * span)
    ax.grid(color="#dddddd", lw=0.6, zorder=0)
    ax.set_xlabel("mean reply length (characters)")
    ax.set_ylabel("score (clipped mean over conversations)")
    ax.set_title(title + (f"\n{note}" if note else ""), loc="left", fontsize=10)
    fig.legend(loc="outside lower center", ncol=2, frameon=False, fontsize=8)
    return freeze_layout(fig)


@keyed
def worst_at_k_curves(table: pd.DataFrame, *, title: str, note: str = "") -> Figure:
    """Worst-at-k against k, one line per candidate with its bootstrap band, as HealthBench
    draws its reliability figure; ``table`` is long: candidate, k, clipped_mean, ci_low,
    ci_high (``note``, the subtitle, says the band's level)."""
    require_columns(table, ["candidate", "k", "clipped_mean", "ci_low", "ci_high"],
                    "worst-at-k figure")
    use_style()
    fig, ax = subplots(figsize=(6.8, 4.4), layout="constrained")
    for i, (cand, g) in enumerate(table.groupby("candidate", sort=True)):
        g = g.sort_values("k")
        style = _series_style(i)
        ax.plot(g["k"], g["clipped_mean"], marker="o", ms=4, lw=1.4,
                label=study.display_name(str(cand)), **style)
        ax.fill_between(g["k"], g["ci_low"], g["ci_high"], color=style["color"], alpha=0.12,
                        lw=0)
    ks = sorted(table["k"].unique())
    ax.set_xticks(ks)
    ax.set_xlim(min(ks) - 0.2, max(ks) + 0.2)
    ax.grid(color="#dddddd", lw=0.6, zorder=0)
    ax.set_xlabel("k (replies per conversation, worst one scored)")
    ax.set_ylabel("worst-at-k score (clipped mean over conversations)")
    ax.set_title(title + (f"\n{note}" if note else ""), loc="left", fontsize=10)
    fig.legend(loc="outside right center", frameon=False, fontsize=8)
    return freeze_layout(fig)


@keyed
def f1_placement(table: pd.DataFrame, *, title: str, note: str = "") -> Figure:
    """Graders placed among physicians, one row per category (``all`` first): each physician's
    leave-one-out balanced F1 (grey dots), the physicians pooled (a bar) and each judge's
    pairwise balanced F1 (coloured markers) and the panel's (a black square; kind ``panel``), as
    HealthBench places its grader; ``table`` is
    ``evaluation.judge_accuracy.pairwise_f1``'s (rater, kind, category, balanced_f1). An
    undefined (NaN) F1 is not drawn; its category keeps its row."""
    require_columns(table, ["rater", "kind", "category", "balanced_f1"], "F1 placement figure")
    cats = ["all", *sorted(c for c in table["category"].unique() if c != "all")]
    # an undefined F1 (a class one side never uses) is not a point: no marker, no bar; each
    # judge keeps its colour and offset whatever of it is drawn
    judge_names = sorted(table.loc[table["kind"] == "judge", "rater"].unique())
    table = table[table["balanced_f1"].notna()]
    use_style()
    fig, ax = subplots(figsize=(6.8, 1.2 + 0.55 * len(cats)), layout="constrained")
    y = {c: len(cats) - 1 - i for i, c in enumerate(cats)}
    phys = table[table["kind"] == "physician"]
    ax.scatter(phys["balanced_f1"], [y[c] for c in phys["category"]], s=18, color=MUTED,
               zorder=2, label="each physician (leave-one-out)")
    pooled = table[table["kind"] == "physicians"]
    for k, (_, r) in enumerate(pooled.iterrows()):
        ax.plot([r["balanced_f1"]] * 2, [y[r["category"]] - 0.3, y[r["category"]] + 0.3],
                color="#333333", lw=1.6, zorder=3,
                label="physicians pooled" if k == 0 else None)
    judges = table[table["kind"] == "judge"]
    for i, judge in enumerate(judge_names):
        g = judges[judges["rater"] == judge]
        ax.scatter(g["balanced_f1"], [y[c] + 0.12 * (i - 1) for c in g["category"]], s=40,
                   marker="D", color=OKABE_ITO[i % len(OKABE_ITO)], zorder=4,
                   label=study.display_name(str(judge)))
    for k, (_, r) in enumerate(table[table["kind"] == "panel"].iterrows()):
        ax.scatter([r["balanced_f1"]], [y[r["category"]]], s=46, marker="s", color="#000000",
                   zorder=5, label="panel (majority of the judges)" if k == 0 else None)
    ax.set_yticks([y[c] for c in cats], [vocabulary.term_label(c) for c in cats])
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.7, len(cats) - 0.3)
    ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
    ax.set_xlabel("balanced F1 (mean of the met and not-met classes' F1)")
    ax.set_title(title + (f"\n{note}" if note else ""), loc="left", fontsize=10)
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=8)
    return freeze_layout(fig)
