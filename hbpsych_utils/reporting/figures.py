"""The compendium's figures, drawn from plain tables and deterministic for the same inputs.

Each figure function takes a table (or counts) and returns a matplotlib ``Figure``; heatmaps and
annotated bars are drawn by seaborn, the rest by matplotlib, in the style, off pyplot and with
the inputs-keyed cache of :mod:`~hbpsych_utils.reporting.drawing`. Here: the subset's
categories and the paper's figures of the results (ranking, heatmap, judge severity and
self-preference); chapters 14 and 15's are in :mod:`~hbpsych_utils.reporting.figures_analyses`.
A chapter shows a figure as a :class:`~hbpsych_utils.reporting.drawing.Captioned` (or several as
a ``Gallery``) and saves it with ``save``; this module is where chapters find all of them
(:data:`__all__`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from hbpsych_utils import study
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.drawing import (
    MUTED,
    OKABE_ITO,
    CachedFigure,
    Captioned,
    Gallery,
    freeze_layout,
    heatmap,
    keyed,
    png_bytes,
    require_columns,
    save,
    seaborn,
    subplots,
    use_style,
)
from hbpsych_utils.reporting.figures_analyses import (
    f1_placement,
    length_scatter,
    score_heatmap,
    worst_at_k_curves,
)

__all__ = [
    "LATER_LABEL",
    "POINT_ESTIMATES_SUBTITLE",
    "CachedFigure",
    "Captioned",
    "Gallery",
    "category_distribution",
    "f1_placement",
    "judge_bias",
    "judge_heatmap",
    "judge_stats_frame",
    "length_scatter",
    "panel_ranking",
    "png_bytes",
    "save",
    "score_heatmap",
    "worst_at_k_curves",
]
"""The figures, and how a chapter shows and saves them (from ``drawing``)."""


@keyed
def category_distribution(
    counts: Mapping[str, int], *, title: str, muted: tuple[str, ...] = ("no category majority",)
) -> Figure:
    """Horizontal bars, largest first; the 'no category majority' bucket greyed at the end,
    each bar annotated with its count and share."""
    use_style()
    labels = list(counts)
    values = [counts[k] for k in labels]
    total = sum(values)
    fig, ax = subplots(figsize=(6.5, 0.28 * len(labels) + 1.0), layout="constrained")
    colours = {k: MUTED if k in muted else OKABE_ITO[0] for k in labels}
    if labels:
        seaborn().barplot(x=values, y=labels, hue=labels, order=labels, hue_order=labels,
                          palette=colours, orient="h", saturation=1, legend=False, ax=ax)
        for bar, v in zip(ax.containers, values, strict=True):
            ax.bar_label(bar, labels=[f"{v} ({v / total:.1%})"], padding=2, fontsize=8)
    ax.set_yticks(range(len(labels)), [k if k in muted else study.category_label(k)
                                       for k in labels])
    ax.set_xlabel("conversations")
    ax.set_xlim(0, max(values) * 1.2 if values else 1)
    fig.suptitle(f"{title} (n = {total})", x=0.01, ha="left")
    return freeze_layout(fig)


# --------------------------------------------------------------------------------------------
# Results: panel ranking, candidate x judge heatmap, judge severity and self-preference

POINT_ESTIMATES_SUBTITLE = "point estimates (per-conversation grades not available)"
"""A figure's subtitle when it has no intervals (paper mode): the released matrices hold cell
means only, so no interval is drawn."""

LATER_LABEL = "added after the study"


def _ordered(table: pd.DataFrame, panel: pd.Series) -> list[str]:
    """Candidates best first, ties by name (the scoring module's ranking rule)."""
    return scoring.ranking(panel.loc[table.index])


def _later_set(table: pd.DataFrame, later: Sequence[str]) -> set[str]:
    """Later-added candidates: named in ``later`` or flagged ``in_study`` False in the table."""
    out = {c for c in table.index if c in set(later)}
    if "in_study" in table.columns:
        out |= {c for c, s in table["in_study"].items() if not bool(s)}
    return out


def _has_intervals(table: pd.DataFrame) -> bool:
    cols = {"ci_low", "ci_high"}
    return cols <= set(table.columns) and bool(table[list(cols)].notna().all(axis=None))


@keyed
def panel_ranking(
    table: pd.DataFrame,
    *,
    subset: str,
    judge_models: Sequence[str] = study.JUDGE_PANEL,
    later: Sequence[str] = study.LATER_CANDIDATES,
    level: float,
) -> Figure:
    """Candidates by panel mean, best on top, with bootstrap intervals (at ``level``, which
    the subtitle states) when the table has them (``scoring.table1``) or labelled as point
    estimates (``scoring.paper_table``).

    Marker shape and colour separate the judges' own models (a judge may favour them) and
    candidates added after the study (not among its original candidates), so neither is misread.
    """
    require_columns(table, ["panel_mean"], "panel ranking")
    order = _ordered(table, table["panel_mean"])
    t = table.loc[order]
    ci = _has_intervals(t)
    late = _later_set(t, later)
    n = len(order)
    use_style()
    fig, ax = subplots(figsize=(7.0, 0.27 * n + 1.8), layout="constrained")
    est = t["panel_mean"].to_numpy(dtype=float)
    lo = t["ci_low"].to_numpy(dtype=float) if ci else est
    hi = t["ci_high"].to_numpy(dtype=float) if ci else est
    groups = [_ranking_group(c, late, set(judge_models)) for c in order]
    _ranking_points(ax, est, lo, hi, groups, ci)
    span = float(np.nanmax(hi) - np.nanmin(lo)) or 0.1
    for i in range(n):
        ax.text(hi[i] + 0.015 * span, i, f"{est[i]:.3f}", va="center", fontsize=7.5)
    _label_rows(ax, order, late)
    ax.set_ylim(n - 0.4, -0.6)
    ax.set_xlim(max(0.0, float(np.nanmin(lo)) - 0.05 * span),
                min(1.0, float(np.nanmax(hi)) + 0.12 * span))
    ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
    ax.set_xlabel("panel score (clipped mean over conversations, 0–1)")
    ax.set_title(f"Panel ranking: {subset}\n{_ranking_note(t, ci, level)}", loc="left",
                 fontsize=10)
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=8)
    return freeze_layout(fig)


JUDGE_MODEL_LABEL = "judge model (also a candidate)"
RANKING_GROUPS: dict[str, dict[str, str]] = {
    "study candidate": {"marker": "o", "color": OKABE_ITO[0], "mfc": OKABE_ITO[0]},
    JUDGE_MODEL_LABEL: {"marker": "D", "color": OKABE_ITO[3], "mfc": OKABE_ITO[3]},
    LATER_LABEL: {"marker": "o", "color": MUTED, "mfc": "white"},
}
"""The ranking's marker groups (its legend's entries) and how each is drawn."""


def _ranking_group(candidate: str, late: set[str], judges: set[str]) -> str:
    if candidate in late:
        return LATER_LABEL
    return JUDGE_MODEL_LABEL if candidate in judges else "study candidate"


def _ranking_points(ax: Axes, est: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    groups: Sequence[str], ci: bool) -> None:
    """Each candidate's panel mean, row by row, marked by its group (each group in the legend
    once), with its interval when ``ci``."""
    seen: set[str] = set()
    for i, g in enumerate(groups):
        marks = RANKING_GROUPS[g]
        ax.errorbar(
            est[i], i, xerr=[[est[i] - lo[i]], [hi[i] - est[i]]] if ci else None,
            fmt=marks["marker"], color=marks["color"], mfc=marks["mfc"], ms=5, capsize=2,
            lw=1, label=g if g not in seen else None, zorder=3,
        )
        seen.add(g)


def _ranking_note(t: pd.DataFrame, ci: bool, level: float) -> str:
    """The ranking's subtitle: the intervals' level (and n, when one n holds for all), or that
    the values are point estimates."""
    if not ci:
        return POINT_ESTIMATES_SUBTITLE
    note = f"{vocabulary.level_text(level)} bootstrap intervals"
    ns = next((t[c] for c in ("n_panel", "n") if c in t.columns), None)
    if ns is not None and ns.nunique() == 1:
        note += f", n = {int(ns.iloc[0])} conversations"
    return note


def _label_rows(ax: Axes, order: Sequence[str], late: set[str], offset: float = 0.0) -> None:
    """The rows' labels (models by display name, row ``i`` at ``i + offset``), a later-added
    candidate's in grey italics."""
    ax.set_yticks(np.arange(len(order)) + offset, [study.display_name(c) for c in order])
    for tick, c in zip(ax.get_yticklabels(), order, strict=True):
        if c in late:
            tick.set_color("#555555")
            tick.set_fontstyle("italic")


def _judge_label(j: str) -> str:
    return study.display_name(j)


@keyed
def judge_heatmap(
    per_judge: pd.DataFrame,
    *,
    subset: str,
    judges: Sequence[str],
    own: Mapping[str, str] | None = None,
    later: Sequence[str] = study.LATER_CANDIDATES,
    cmap: str = "cividis",
) -> Figure:
    """Candidate x judge clipped means, sorted by panel mean, every cell annotated.

    Accepts any candidate-indexed table with one column per judge (``paper_per_judge``,
    ``per_judge_means``, ``paper_table``, ``table1``); rows follow ``panel_mean`` when present,
    else the judges' mean. Cells where a judge grades its own model are outlined, since that is
    where self-preference would show.
    """
    judges = list(judges)
    require_columns(per_judge, judges, "judge heatmap")
    own = dict(own) if own is not None else {j: j for j in judges}
    vals = per_judge[judges].astype(float)
    panel = (per_judge["panel_mean"] if "panel_mean" in per_judge.columns
             else vals.mean(axis=1))
    order = _ordered(per_judge, panel)
    late = _later_set(per_judge, later)
    n = len(order)
    use_style()
    fig, ax = subplots(figsize=(1.25 * len(judges) + 3.4, 0.27 * n + 1.7),
                       layout="constrained")
    heatmap(ax, vals.loc[order].to_numpy(), cmap)
    outlined = False
    for k, j in enumerate(judges):
        c = own.get(j)
        if c in order:
            ax.add_patch(Rectangle((k, order.index(c)), 1, 1, fill=False, ec=OKABE_ITO[3],
                                   lw=2.0, zorder=3))
            outlined = True
    ax.set_xticks(np.arange(len(judges)) + 0.5, [_judge_label(j) for j in judges])
    ax.xaxis.tick_top()
    _label_rows(ax, order, late, offset=0.5)
    ax.set_title(f"Clipped mean score by candidate and judge: {subset}\n"
                 "rows sorted by panel mean", loc="left", fontsize=10, pad=8)
    notes = []
    if outlined:
        notes.append("outlined (vermillion): a judge grading its own model")
    if late:
        notes.append(f"grey italic: {LATER_LABEL}")
    if notes:
        ax.set_xlabel("\n".join(notes), fontsize=7.5, color="#333333", loc="left")
    return freeze_layout(fig)


JUDGE_STATS = ("severity", "self_preference_raw", "self_preference_corrected")


def judge_stats_frame(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """``judges.judge_metrics``/``paper_judge_metrics`` output as the long table that
    ``judges.bootstrap_judge_stats`` returns (``stat, judge, estimate, low, high``), intervals
    NaN: one input shape for the figure in both modes."""
    rows = []
    for stat in JUDGE_STATS:
        if stat not in metrics:
            raise ValueError(f"judge metrics: no field '{stat}'")
        for j, v in metrics[stat].items():
            rows.append({"stat": stat, "judge": j, "estimate": float(v),
                         "low": np.nan, "high": np.nan})
    return pd.DataFrame(rows, columns=["stat", "judge", "estimate", "low", "high"])


Estimate = tuple[float, float, float]
"""A statistic's estimate and its interval's ends (NaN when it has none)."""


@keyed
def judge_bias(
    stats: pd.DataFrame | Mapping[str, Any],
    *,
    subset: str,
    judges: Sequence[str] | None,
    level: float,
) -> Figure:
    """Severity per judge (left) beside self-preference raw vs severity-corrected (right).

    ``stats`` is ``judges.bootstrap_judge_stats`` (drawn with its intervals, at ``level``) or
    the metrics dict of ``judges.judge_metrics`` (drawn as point estimates, labelled so). Shown
    together because the correction is the severity: a harsh judge's raw self-preference
    understates it.
    """
    long = _bias_table(stats)
    if judges is None:
        judges = list(dict.fromkeys(long.loc[long["stat"] == "severity", "judge"]))
    judges = list(judges)
    ci = bool(long[["low", "high"]].notna().all(axis=None))
    found = {stat: [_estimate(long, stat, j) for j in judges] for stat in JUDGE_STATS}
    use_style()
    nj = len(judges)
    fig, (ax_s, ax_p) = subplots(1, 2, figsize=(9.0, 0.55 * nj + 2.2), sharey=True,
                                 layout="constrained")
    _severity_panel(ax_s, judges, found["severity"], ci)
    drawn = _preference_panel(ax_p, found, ci, nj)
    if drawn:  # a legend only for markers drawn
        fig.legend(loc="outside lower center", ncol=2, frameon=False, fontsize=8)
    for ax in (ax_s, ax_p):
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        ax.xaxis.set_major_locator(MaxNLocator(5))
    ax_s.set_ylim(nj - 0.5, -0.5)
    note = f"{vocabulary.level_text(level)} bootstrap intervals" if ci \
        else POINT_ESTIMATES_SUBTITLE
    n_cands = stats.get("n_candidates") if isinstance(stats, Mapping) else None
    if n_cands:
        note += f"; over {int(n_cands)} candidates"
    if nj == 1:
        note += "; a single judge, so its severity is 0 by definition"
    fig.suptitle(f"Judge severity and self-preference: {subset}\n{note}", x=0.01, ha="left",
                 fontsize=10)
    return freeze_layout(fig)


def _bias_table(stats: pd.DataFrame | Mapping[str, Any]) -> pd.DataFrame:
    """Either input of :func:`judge_bias` as the long table (``stat, judge, estimate, low,
    high``; NaN ends where there is no interval)."""
    long = judge_stats_frame(stats) if isinstance(stats, Mapping) else stats.copy()
    require_columns(long, ["stat", "judge", "estimate"], "judge bias")
    for col in ("low", "high"):
        if col not in long.columns:
            long[col] = np.nan
    return long


def _estimate(long: pd.DataFrame, stat: str, judge: str) -> Estimate | None:
    """One judge's statistic, or ``None`` when the table has none for it."""
    r = long[(long["stat"] == stat) & (long["judge"] == judge)]
    if r.empty:
        return None
    r0 = r.iloc[0]
    return float(r0["estimate"]), float(r0["low"]), float(r0["high"])


def _xerr(v: Estimate, ci: bool) -> list[list[float]] | None:
    return [[v[0] - v[1]], [v[2] - v[0]]] if ci else None


def _pad_limits(ax: Axes, values: list[float]) -> None:
    """An x range around ``values`` and zero, with a quarter of its span to spare."""
    lo, hi = min([*values, 0.0]), max([*values, 0.0])
    span = (hi - lo) or 0.01
    ax.set_xlim(lo - 0.25 * span, hi + 0.25 * span)


def _severity_panel(ax: Axes, judges: Sequence[str], severity: Sequence[Estimate | None],
                    ci: bool) -> None:
    """Each judge's severity as a seaborn bar (with its interval), annotated with its signed
    value beyond the bar's end."""
    shown = [(j, v) for j, v in zip(judges, severity, strict=True) if v is not None]
    if shown:
        seaborn().barplot(x=[v[0] for _, v in shown], y=[j for j, _ in shown], order=judges,
                          orient="h", color=OKABE_ITO[0], saturation=1, width=0.5,
                          errorbar=None, zorder=2, ax=ax)
    values: list[float] = []
    for y, v in enumerate(severity):
        if v is not None and ci:
            ax.errorbar(v[0], y, xerr=_xerr(v, ci), fmt="none", ecolor="black", capsize=3,
                        lw=1, zorder=3)
        if v is not None:
            values += [v[1], v[2]] if ci else [v[0]]
    _pad_limits(ax, values)
    _severity_labels(ax, severity, ci)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(judges)), [_judge_label(j) for j in judges])
    ax.set_xlabel("severity: judge mean − grand mean\n(negative = harsher)")
    ax.set_ylabel("")
    ax.set_title("Severity", loc="left", fontsize=9)


def _severity_labels(ax: Axes, severity: Sequence[Estimate | None], ci: bool) -> None:
    """Each severity's signed value beyond its bar's end (or its interval's), on the side the
    bar points to."""
    span = np.diff(ax.get_xlim())[0]
    for y, v in enumerate(severity):
        if v is None:
            continue
        right = v[0] >= 0
        edge = (v[2] if right else v[1]) if ci else v[0]
        ax.text(edge + (0.02 if right else -0.02) * span, y, f"{v[0]:+.3f}",
                va="center", ha="left" if right else "right", fontsize=8)


PREFERENCE_SERIES = (("self_preference_raw", "raw", OKABE_ITO[1], "o", -0.14),
                     ("self_preference_corrected", "severity-corrected", OKABE_ITO[0], "s",
                      0.14))
"""Self-preference's two series: statistic, legend label, colour, marker, row offset."""


def _preference_labels(ax: Axes, found: Mapping[str, Sequence[Estimate | None]],
                       ci: bool) -> None:
    """Each self-preference marker's signed value beyond its interval's end."""
    span = np.diff(ax.get_xlim())[0]
    for stat, _, colour, _, dy in PREFERENCE_SERIES:
        for y, v in enumerate(found[stat]):
            if v is not None:
                ax.text((v[2] if ci else v[0]) + 0.03 * span, y + dy, f"{v[0]:+.3f}",
                        va="center", fontsize=7.5,
                        color=colour if colour != OKABE_ITO[1] else "#8a5a00")


def _preference_panel(ax: Axes, found: Mapping[str, Sequence[Estimate | None]], ci: bool,
                      nj: int) -> bool:
    """Raw and severity-corrected self-preference per judge (markers with intervals, each
    annotated), and why a judge has none; whether any marker was drawn."""
    values: list[float] = []
    for stat, name, colour, marker, dy in PREFERENCE_SERIES:
        first = True
        for y, v in enumerate(found[stat]):
            if v is None:
                continue
            ax.errorbar(v[0], y + dy, xerr=_xerr(v, ci), fmt=marker, color=colour, ms=6,
                        capsize=3, lw=1, label=name if first else None, zorder=3)
            first = False
            values += [v[1], v[2]] if ci else [v[0]]
    _pad_limits(ax, values)
    _preference_labels(ax, found, ci)
    # why a judge has no self-preference: a single judge has no other judges to compare with
    missing = ("no other judge to compare with" if nj == 1 else "own model not a candidate")
    for y, (raw, corrected) in enumerate(zip(found["self_preference_raw"],
                                             found["self_preference_corrected"], strict=True)):
        if raw is None and corrected is None:
            ax.text(0.5, y, missing, transform=ax.get_yaxis_transform(),
                    ha="center", va="center", fontsize=7.5, color=MUTED)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("self-preference: own-model score − other judges' mean\n"
                  "(positive = favours its own model)")
    ax.set_title("Self-preference", loc="left", fontsize=9)
    ax.tick_params(axis="y", length=0)
    return bool(values)
