"""The compendium's figures, drawn from plain tables and deterministic for the same inputs.

Style: sorted bars, labelled axes and values, the Okabe–Ito colour-blind-safe palette, no
chart junk. ``save`` writes PNG and SVG with fixed metadata and SVG ids, so re-running a
profile on the same inputs reproduces the same files.

Most re-runs of a stage redraw figures whose data did not change (a tweak of the judges' subset
leaves the category, ranking and heatmap figures as they were). Each figure function therefore
computes a key of its inputs (:func:`_keyed`: its name, its arguments' contents, this module's
code and matplotlib's version). Given a ``cache`` folder that holds files saved for that key,
it returns them as a :class:`CachedFigure` instead of drawing; ``save`` copies them, and what it
renders it also keeps there. The files are the same bytes either way, since saving is
deterministic.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from hbpsych_utils import study
from hbpsych_utils.core import escape
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.display import Shown

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
MUTED = "#999999"


def _png_in_notebooks() -> None:
    """In IPython, display a Figure as PNG. The inline backend registers that formatter only
    once pyplot has drawn something, and these figures never go through pyplot."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import select_figure_formats
    except ImportError:  # not in IPython: figures are only files
        return
    shell = get_ipython()
    if shell is not None:
        select_figure_formats(shell, {"png"})


_png_in_notebooks()


_INPUTS_KEY = "_hbpsych_inputs"
_CODE = hashlib.sha256(Path(__file__).read_bytes() + matplotlib.__version__.encode()).hexdigest()
FORMATS = ("png", "svg")
CACHE_LIMIT = 256
"""Files a figure cache keeps (the most recently used): a few runs' worth of every figure."""


def _content(value: Any) -> str:
    """A deterministic text of a figure function's argument, for its inputs key."""
    if isinstance(value, pd.DataFrame | pd.Series):
        return value.to_csv()
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return json.dumps(value, sort_keys=True, default=repr)


@dataclass(frozen=True)
class CachedFigure:
    """A figure saved before from the same inputs: its files, shown as its PNG."""

    key: str
    files: dict[str, Path]
    """Format -> the cached file."""

    def _repr_png_(self) -> bytes:
        return self.files["png"].read_bytes()


def _cached(cache: Path | None, key: str) -> CachedFigure | None:
    if cache is None:
        return None
    files = {fmt: cache / f"{key}.{fmt}" for fmt in FORMATS}
    if not all(f.is_file() for f in files.values()):
        return None
    for f in files.values():
        f.touch()  # recently used: kept when the cache is trimmed
    return CachedFigure(key, files)


class Keyed(Protocol):
    """A figure function keyed by its inputs: it also takes ``cache=`` and may return the
    figure saved before (:func:`_keyed`)."""

    def __call__(self, *args: Any, cache: Path | None = None,
                 **kwargs: Any) -> Figure | CachedFigure: ...


def _keyed(draw: Callable[..., Figure]) -> Keyed:
    """Key a figure function by its inputs; with ``cache=`` (a folder), return the files saved
    for the same key instead of drawing (see the module doc)."""

    @functools.wraps(draw)
    def wrapper(*args: Any, cache: Path | None = None, **kwargs: Any) -> Figure | CachedFigure:
        parts = [draw.__name__, _CODE, *(_content(a) for a in args),
                 *(f"{k}={_content(v)}" for k, v in sorted(kwargs.items()))]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
        found = _cached(cache, key)
        if found is not None:
            return found
        fig = draw(*args, **kwargs)
        setattr(fig, _INPUTS_KEY, key)
        return fig

    return wrapper


def _subplots(*grid: int, figsize: tuple[float, float], layout: str | None = None,
              **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes, not registered with pyplot: no backend is involved (the figures
    are files, and in a notebook only the cell that displays a figure shows it), and IPython's
    inline PNG formatter still renders it when displayed."""
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*grid, **kwargs)


def _style() -> None:
    matplotlib.rcParams.update({
        "svg.hashsalt": "hbpsych",  # stable element ids in SVG output
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


@_keyed
def category_distribution(
    counts: Mapping[str, int], *, title: str, muted: tuple[str, ...] = ("no category majority",)
) -> Figure:
    """Horizontal bars, largest first; the 'no category majority' bucket greyed at the end."""
    _style()
    labels = list(counts)
    values = [counts[k] for k in labels]
    total = sum(values)
    fig, ax = _subplots(figsize=(6.5, 0.28 * len(labels) + 1.0), layout="constrained")
    colours = [MUTED if k in muted else OKABE_ITO[0] for k in labels]
    ax.barh(range(len(labels)), values, color=colours)
    ax.set_yticks(range(len(labels)), [k if k in muted else study.category_label(k)
                                       for k in labels])
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v, i, f" {v} ({v / total:.1%})", va="center", fontsize=8)
    ax.set_xlabel("conversations")
    ax.set_xlim(0, max(values) * 1.2 if values else 1)
    fig.suptitle(f"{title} (n = {total})", x=0.01, ha="left")
    return freeze_layout(fig)


def freeze_layout(fig: Figure) -> Figure:
    """Run the figure's layout engine once and keep its result.

    Constrained layout re-solves on every draw and, with a colorbar, suptitle or figure
    legend, alternates between two solutions, so saving the same figure twice would give
    different bytes. A frozen layout makes every save of the figure identical.
    """
    engine = fig.get_layout_engine()
    if engine is not None and not isinstance(engine, PlaceHolderLayoutEngine):
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    return fig


def save(fig: Figure | CachedFigure, stem: Path, formats: tuple[str, ...] = FORMATS,
         cache: Path | None = None) -> list[Path]:
    """Write ``stem.<fmt>`` for each format with reproducible metadata; returns the paths.

    A :class:`CachedFigure` is copied. With ``cache``, a drawn figure's files are also kept
    there under its inputs key (the least recently used trimmed to ``CACHE_LIMIT`` files)."""
    if isinstance(fig, CachedFigure):
        return [_copy(fig.files[fmt], stem.with_suffix(f".{fmt}")) for fmt in formats]
    freeze_layout(fig)
    out = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"Date": None} if fmt == "svg" else {"Software": None} if fmt == "png" else None
        # the salt is read at save time, so pin it here too (rcParams may have been reset)
        with matplotlib.rc_context({"svg.hashsalt": "hbpsych"}):
            fig.savefig(path, dpi=150, bbox_inches="tight", metadata=meta)
        out.append(path)
    key = getattr(fig, _INPUTS_KEY, None)
    if cache is not None and key is not None and set(formats) == set(FORMATS):
        for path in out:
            _copy(path, cache / f"{key}{path.suffix}")
        kept = sorted(cache.glob("*.*"), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in kept[CACHE_LIMIT:]:
            old.unlink(missing_ok=True)
    return out


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def png_bytes(fig: Figure | CachedFigure) -> bytes:
    """The figure as PNG, for showing it: the bytes ``save`` writes (a cached figure's file)."""
    if isinstance(fig, CachedFigure):
        return fig.files["png"].read_bytes()
    buf = io.BytesIO()
    freeze_layout(fig)
    fig.savefig(buf, format="png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


@dataclass(frozen=True, repr=False)
class Captioned(Shown):
    """A figure as the paper shows it: its heading ("Figure G2. Panel ranking ...") and a
    caption saying what is plotted, under the image, then the chapter that drew it and the
    command that draws it again (``vocabulary.current_origin``)."""

    figure: Figure | CachedFigure
    heading: str
    caption: str

    def _repr_html_(self) -> str:
        data = base64.b64encode(png_bytes(self.figure)).decode("ascii")
        origin = vocabulary.current_origin()
        return (f'<figure class="hb-figure"><img alt="{escape.html_text(self.heading)}" '
                f'src="data:image/png;base64,{data}"/>'
                f"<figcaption><strong>{escape.html_text(self.heading)}.</strong> "
                f"{escape.html_text(self.caption)}</figcaption></figure>"
                + (origin.html() if origin is not None else ""))

    def __repr__(self) -> str:
        return f"[{self.heading}] {self.caption}"


@dataclass(frozen=True, repr=False)
class Gallery(Shown):
    """Several figures shown one after the other (a chapter's section), after the sentences
    saying what was left out and why; each figure keeps the file stem it is saved under."""

    figures: Mapping[str, Captioned]
    notes: Sequence[str] = field(default_factory=tuple)
    """Plain sentences shown before the figures (escaped)."""

    def _repr_html_(self) -> str:
        parts = [f"<p>{escape.html_text(note)}</p>" for note in self.notes]
        parts += [fig._repr_html_() for fig in self.figures.values()]
        return "\n".join(parts)

    def __repr__(self) -> str:
        return "\n".join([*self.notes, *(repr(f) for f in self.figures.values())])


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


def _require(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what}: table has no column(s) {missing}")


@_keyed
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
    _require(table, ["panel_mean"], "panel ranking")
    order = _ordered(table, table["panel_mean"])
    t = table.loc[order]
    ci = _has_intervals(t)
    late = _later_set(t, later)
    judge_set = set(judge_models)
    n = len(order)
    _style()
    fig, ax = _subplots(figsize=(7.0, 0.27 * n + 1.8), layout="constrained")
    groups = {
        "study candidate": dict(marker="o", color=OKABE_ITO[0], mfc=OKABE_ITO[0]),
        "judge model (also a candidate)": dict(marker="D", color=OKABE_ITO[3], mfc=OKABE_ITO[3]),
        LATER_LABEL: dict(marker="o", color=MUTED, mfc="white"),
    }

    def group(c: str) -> str:
        if c in late:
            return LATER_LABEL
        return "judge model (also a candidate)" if c in judge_set else "study candidate"

    est = t["panel_mean"].to_numpy(dtype=float)
    lo = t["ci_low"].to_numpy(dtype=float) if ci else est
    hi = t["ci_high"].to_numpy(dtype=float) if ci else est
    seen: set[str] = set()
    for i, c in enumerate(order):
        g = group(c)
        style = groups[g]
        ax.errorbar(
            est[i], i, xerr=[[est[i] - lo[i]], [hi[i] - est[i]]] if ci else None,
            fmt=style["marker"], color=style["color"], mfc=style["mfc"], ms=5, capsize=2,
            lw=1, label=g if g not in seen else None, zorder=3,
        )
        seen.add(g)
    span = float(np.nanmax(hi) - np.nanmin(lo)) or 0.1
    for i in range(n):
        ax.text(hi[i] + 0.015 * span, i, f"{est[i]:.3f}", va="center", fontsize=7.5)
    ax.set_yticks(range(n), [study.display_name(c) for c in order])
    for tick, c in zip(ax.get_yticklabels(), order, strict=True):
        if c in late:
            tick.set_color("#555555")
            tick.set_fontstyle("italic")
    ax.set_ylim(n - 0.4, -0.6)
    ax.set_xlim(max(0.0, float(np.nanmin(lo)) - 0.05 * span),
                min(1.0, float(np.nanmax(hi)) + 0.12 * span))
    ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
    ax.set_xlabel("panel score (clipped mean over conversations, 0–1)")
    ns = next((t[c] for c in ("n_panel", "n") if c in t.columns), None)
    if ci:
        note = f"{vocabulary.level_text(level)} bootstrap intervals"
        if ns is not None and ns.nunique() == 1:
            note += f", n = {int(ns.iloc[0])} conversations"
    else:
        note = POINT_ESTIMATES_SUBTITLE
    ax.set_title(f"Panel ranking: {subset}\n{note}", loc="left", fontsize=10)
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=8)
    return freeze_layout(fig)


def _judge_label(j: str) -> str:
    return study.display_name(j)


def _heatmap_cells(ax: Axes, m: np.ndarray, cmap: str) -> Any:
    """``m`` drawn as a heatmap on ``ax``, every cell annotated with its value to 3 decimals
    ('–' where NaN) in black or white by the cell's luminance; the image, for a colour bar."""
    colormap = matplotlib.colormaps[cmap]
    vmin, vmax = float(np.nanmin(m)), float(np.nanmax(m))
    if vmax - vmin < 1e-9:
        vmin, vmax = vmin - 0.05, vmax + 0.05
    norm = matplotlib.colors.Normalize(vmin, vmax)
    im = ax.imshow(m, cmap=colormap, norm=norm, aspect="auto", interpolation="nearest")
    for i in range(m.shape[0]):
        for k in range(m.shape[1]):
            v = m[i, k]
            if np.isnan(v):
                ax.text(k, i, "–", ha="center", va="center", fontsize=7.5, color="black")
                continue
            r, g, b, _ = colormap(norm(v))
            light = 0.299 * r + 0.587 * g + 0.114 * b > 0.5
            ax.text(k, i, f"{v:.3f}", ha="center", va="center", fontsize=7.5,
                    color="black" if light else "white")
    return im


def _heatmap_frame(fig: Figure, ax: Axes, im: Any, rows: int) -> None:
    """No ticks or spines around a heatmap, and its colour bar of clipped mean scores (as tall
    as a short heatmap, so that its label stays inside the figure)."""
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    cbar = fig.colorbar(im, ax=ax, shrink=0.5 if rows > 10 else 1.0, aspect=15, pad=0.02)
    cbar.ax.set_title("clipped\nmean\nscore", fontsize=7.5, loc="left", pad=4)
    cbar.outline.set_visible(False)


@_keyed
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
    _require(per_judge, judges, "judge heatmap")
    own = dict(own) if own is not None else {j: j for j in judges}
    vals = per_judge[judges].astype(float)
    panel = (per_judge["panel_mean"] if "panel_mean" in per_judge.columns
             else vals.mean(axis=1))
    order = _ordered(per_judge, panel)
    late = _later_set(per_judge, later)
    m = vals.loc[order].to_numpy()
    n = len(order)
    _style()
    fig, ax = _subplots(figsize=(1.25 * len(judges) + 3.4, 0.27 * n + 1.7),
                        layout="constrained")
    im = _heatmap_cells(ax, m, cmap)
    outlined = False
    for k, j in enumerate(judges):
        c = own.get(j)
        if c in order:
            i = order.index(c)
            ax.add_patch(Rectangle((k - 0.5, i - 0.5), 1, 1, fill=False, ec=OKABE_ITO[3],
                                   lw=2.0, zorder=3))
            outlined = True
    ax.set_xticks(range(len(judges)), [_judge_label(j) for j in judges])
    ax.xaxis.tick_top()
    ax.set_yticks(range(n), [study.display_name(c) for c in order])
    for tick, c in zip(ax.get_yticklabels(), order, strict=True):
        if c in late:
            tick.set_color("#555555")
            tick.set_fontstyle("italic")
    _heatmap_frame(fig, ax, im, n)
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


@_keyed
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
    long = judge_stats_frame(stats) if isinstance(stats, Mapping) else stats.copy()
    n_cands = stats.get("n_candidates") if isinstance(stats, Mapping) else None
    _require(long, ["stat", "judge", "estimate"], "judge bias")
    for col in ("low", "high"):
        if col not in long.columns:
            long[col] = np.nan
    if judges is None:
        judges = list(dict.fromkeys(long.loc[long["stat"] == "severity", "judge"]))
    judges = list(judges)
    ci = bool(long[["low", "high"]].notna().all(axis=None))

    def get(stat: str, j: str) -> tuple[float, float, float] | None:
        r = long[(long["stat"] == stat) & (long["judge"] == j)]
        if r.empty:
            return None
        r0 = r.iloc[0]
        return float(r0["estimate"]), float(r0["low"]), float(r0["high"])

    _style()
    nj = len(judges)
    fig, (ax_s, ax_p) = _subplots(1, 2, figsize=(9.0, 0.55 * nj + 2.2), sharey=True,
                                  layout="constrained")
    ys = np.arange(nj)
    labels = [_judge_label(j) for j in judges]

    def xerr(v: tuple[float, float, float]) -> list[list[float]] | None:
        return [[v[0] - v[1]], [v[2] - v[0]]] if ci else None

    def pad_limits(ax: Axes, values: list[float]) -> None:
        lo, hi = min([*values, 0.0]), max([*values, 0.0])
        span = (hi - lo) or 0.01
        ax.set_xlim(lo - 0.25 * span, hi + 0.25 * span)

    sev_vals: list[float] = []
    for y, j in zip(ys, judges, strict=True):
        v = get("severity", j)
        if v is None:
            continue
        ax_s.barh(y, v[0], height=0.5, color=OKABE_ITO[0], zorder=2)
        if ci:
            ax_s.errorbar(v[0], y, xerr=xerr(v), fmt="none", ecolor="black", capsize=3, lw=1,
                          zorder=3)
        sev_vals += [v[1], v[2]] if ci else [v[0]]
    pad_limits(ax_s, sev_vals)
    span_s = np.diff(ax_s.get_xlim())[0]
    for y, j in zip(ys, judges, strict=True):
        v = get("severity", j)
        if v is not None:
            edge = (v[2] if v[0] >= 0 else v[1]) if ci else v[0]
            ax_s.text(edge + (0.02 if v[0] >= 0 else -0.02) * span_s, y, f"{v[0]:+.3f}",
                      va="center", ha="left" if v[0] >= 0 else "right", fontsize=8)
    ax_s.axvline(0, color="black", lw=0.8)
    ax_s.set_yticks(ys, labels)
    ax_s.set_ylim(nj - 0.5, -0.5)
    ax_s.set_xlabel("severity: judge mean − grand mean\n(negative = harsher)")
    ax_s.set_title("Severity", loc="left", fontsize=9)

    series = (("self_preference_raw", "raw", OKABE_ITO[1], "o", -0.14),
              ("self_preference_corrected", "severity-corrected", OKABE_ITO[0], "s", 0.14))
    pref_vals: list[float] = []
    for stat, name, colour, marker, dy in series:
        first = True
        for y, j in zip(ys, judges, strict=True):
            v = get(stat, j)
            if v is None:
                continue
            ax_p.errorbar(v[0], y + dy, xerr=xerr(v), fmt=marker, color=colour, ms=6,
                          capsize=3, lw=1, label=name if first else None, zorder=3)
            first = False
            pref_vals += [v[1], v[2]] if ci else [v[0]]
    pad_limits(ax_p, pref_vals)
    span_p = np.diff(ax_p.get_xlim())[0]
    for stat, _, colour, _, dy in series:
        for y, j in zip(ys, judges, strict=True):
            v = get(stat, j)
            if v is None:
                continue
            right = v[2] if ci else v[0]
            ax_p.text(right + 0.03 * span_p, y + dy, f"{v[0]:+.3f}", va="center", fontsize=7.5,
                      color=colour if colour != OKABE_ITO[1] else "#8a5a00")
    # why a judge has no self-preference: a single judge has no other judges to compare with
    missing = ("no other judge to compare with" if nj == 1 else "own model not a candidate")
    for y, j in zip(ys, judges, strict=True):
        if get("self_preference_raw", j) is None and get("self_preference_corrected", j) is None:
            ax_p.text(0.5, y, missing, transform=ax_p.get_yaxis_transform(),
                      ha="center", va="center", fontsize=7.5, color=MUTED)
    ax_p.axvline(0, color="black", lw=0.8)
    ax_p.set_xlabel("self-preference: own-model score − other judges' mean\n"
                    "(positive = favours its own model)")
    ax_p.set_title("Self-preference", loc="left", fontsize=9)
    if pref_vals:  # a legend only for markers drawn
        fig.legend(loc="outside lower center", ncol=2, frameon=False, fontsize=8)
    ax_p.tick_params(axis="y", length=0)
    for ax in (ax_s, ax_p):
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        ax.xaxis.set_major_locator(MaxNLocator(5))
    note = f"{vocabulary.level_text(level)} bootstrap intervals" if ci \
        else POINT_ESTIMATES_SUBTITLE
    if n_cands:
        note += f"; over {int(n_cands)} candidates"
    if nj == 1:
        note += "; a single judge, so its severity is 0 by definition"
    fig.suptitle(f"Judge severity and self-preference: {subset}\n{note}", x=0.01, ha="left",
                 fontsize=10)
    return freeze_layout(fig)


# --------------------------------------------------------------------------------------------
# Where and how reliably models fail: scores by slice, length, worst-at-k (notebook 14)

LINESTYLES = ("-", "--", ":")
"""Line styles that tell series apart once the palette's colours repeat (more than eight)."""


def _series_style(i: int) -> dict[str, Any]:
    return {"color": OKABE_ITO[i % len(OKABE_ITO)],
            "linestyle": LINESTYLES[(i // len(OKABE_ITO)) % len(LINESTYLES)]}


@_keyed
def score_heatmap(table: pd.DataFrame, *, title: str, note: str = "",
                  cmap: str = "cividis") -> Figure:
    """Candidate x slice scores (rows and columns in the order given), every cell annotated, '–'
    where a candidate has no score for the slice; ``note`` is the title's second line."""
    m = table.to_numpy(dtype=float)
    n_rows, n_cols = m.shape
    _style()
    fig, ax = _subplots(figsize=(0.85 * n_cols + 3.6, 0.27 * n_rows + 2.4),
                        layout="constrained")
    im = _heatmap_cells(ax, m, cmap)
    ax.set_xticks(range(n_cols), [vocabulary.term_label(c) for c in table.columns],
                  rotation=35, ha="left", rotation_mode="anchor")
    ax.xaxis.tick_top()
    ax.set_yticks(range(n_rows), [study.display_name(str(r)) for r in table.index])
    _heatmap_frame(fig, ax, im, n_rows)
    ax.set_title(title + (f"\n{note}" if note else ""), loc="left", fontsize=10, pad=8)
    return freeze_layout(fig)


@_keyed
def length_scatter(table: pd.DataFrame, *, title: str, note: str = "",
                   center: float = 2000.0) -> Figure:
    """Each candidate's score against its mean reply length: the raw score (filled) and the
    length-adjusted one (open), joined by an arrow; ``table`` is indexed by candidate with
    ``mean_chars``, ``clipped_mean`` and ``adjusted_mean``."""
    _require(table, ["mean_chars", "clipped_mean", "adjusted_mean"], "length figure")
    t = table.sort_index()
    x = t["mean_chars"].to_numpy(float)
    raw = t["clipped_mean"].to_numpy(float)
    adj = t["adjusted_mean"].to_numpy(float)
    _style()
    fig, ax = _subplots(figsize=(6.8, 4.4), layout="constrained")
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


@_keyed
def worst_at_k_curves(table: pd.DataFrame, *, title: str, note: str = "") -> Figure:
    """Worst-at-k against k, one line per candidate with its bootstrap band, as HealthBench
    draws its reliability figure; ``table`` is long: candidate, k, clipped_mean, ci_low,
    ci_high (``note``, the subtitle, says the band's level)."""
    _require(table, ["candidate", "k", "clipped_mean", "ci_low", "ci_high"], "worst-at-k figure")
    _style()
    fig, ax = _subplots(figsize=(6.8, 4.4), layout="constrained")
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


@_keyed
def f1_placement(table: pd.DataFrame, *, title: str, note: str = "") -> Figure:
    """Graders placed among physicians, one row per category (``all`` first): each physician's
    leave-one-out balanced F1 (grey dots), the physicians pooled (a bar) and each judge's
    pairwise balanced F1 (coloured markers) and the panel's (a black square; kind ``panel``), as
    HealthBench places its grader; ``table`` is
    ``evaluation.judge_accuracy.pairwise_f1``'s (rater, kind, category, balanced_f1). An
    undefined (NaN) F1 is not drawn; its category keeps its row."""
    _require(table, ["rater", "kind", "category", "balanced_f1"], "F1 placement figure")
    cats = ["all", *sorted(c for c in table["category"].unique() if c != "all")]
    # an undefined F1 (a class one side never uses) is not a point: no marker, no bar; each
    # judge keeps its colour and offset whatever of it is drawn
    judge_names = sorted(table.loc[table["kind"] == "judge", "rater"].unique())
    table = table[table["balanced_f1"].notna()]
    _style()
    fig, ax = _subplots(figsize=(6.8, 1.2 + 0.55 * len(cats)), layout="constrained")
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
