"""How the compendium's figures are drawn, shown and saved: one style, figures kept off pyplot,
deterministic PNG and SVG files, a cache keyed by a figure's inputs, and the captioned displays
a chapter shows.

Style: sorted bars, labelled axes and values, the Okabe–Ito colour-blind-safe palette, no
chart junk; heatmaps and annotated bars are seaborn's (:func:`seaborn`), the rest matplotlib's.
``save`` writes PNG and SVG with fixed metadata and SVG ids, so re-running a profile on the
same inputs reproduces the same files.

Most re-runs of a stage redraw figures whose data did not change (a tweak of the judges' subset
leaves the category, ranking and heatmap figures as they were). Each figure function therefore
computes a key of its inputs (:func:`keyed`: its name, its arguments' contents, the code of its
module and of this one, and matplotlib's and seaborn's versions). Given a ``cache`` folder that
holds files saved for that key, it returns them as a :class:`CachedFigure` instead of drawing;
``save`` copies them, and what it renders it also keeps there. The files are the same bytes
either way, since saving is deterministic.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine

from hbpsych_utils.core import escape
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


def seaborn() -> ModuleType:
    """seaborn, which draws the heatmaps and annotated bars. Loaded when a figure first needs
    it (it brings pyplot, most of a second): most chapters draw none, and a figure the cache
    holds is not drawn. It draws on the axes it is given; no figure goes through pyplot."""
    import seaborn as sns

    return sns


_INPUTS_KEY = "_hbpsych_inputs"
_LIBRARIES = f"matplotlib {matplotlib.__version__}, seaborn {metadata.version('seaborn')}"
FORMATS = ("png", "svg")
CACHE_LIMIT = 256
"""Files a figure cache keeps (the most recently used): a few runs' worth of every figure."""


@functools.cache
def _code(module: str) -> str:
    """The key of the code that draws: the figure function's module, this module and the
    drawing libraries' versions (a change to any draws anew)."""
    files = {Path(__file__), Path(str(getattr(sys.modules[module], "__file__", __file__)))}
    text = b"".join(f.read_bytes() for f in sorted(files)) + _LIBRARIES.encode()
    return hashlib.sha256(text).hexdigest()


def _content(value: Any) -> str:
    """A deterministic text of a figure function's argument, for its inputs key."""
    if isinstance(value, pd.DataFrame | pd.Series):
        return str(value.to_csv())
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
    figure saved before (:func:`keyed`)."""

    def __call__(self, *args: Any, cache: Path | None = None,
                 **kwargs: Any) -> Figure | CachedFigure: ...


def keyed(draw: Callable[..., Figure]) -> Keyed:
    """Key a figure function by its inputs; with ``cache=`` (a folder), return the files saved
    for the same key instead of drawing (see the module doc)."""

    @functools.wraps(draw)
    def wrapper(*args: Any, cache: Path | None = None, **kwargs: Any) -> Figure | CachedFigure:
        parts = [draw.__name__, _code(draw.__module__), *(_content(a) for a in args),
                 *(f"{k}={_content(v)}" for k, v in sorted(kwargs.items()))]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
        found = _cached(cache, key)
        if found is not None:
            return found
        fig = draw(*args, **kwargs)
        setattr(fig, _INPUTS_KEY, key)
        return fig

    return wrapper


Layout = Literal["constrained", "compressed", "tight"] | None


def subplots(*grid: int, figsize: tuple[float, float], layout: Layout = None,
             **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes, not registered with pyplot: no backend is involved (the figures
    are files, and in a notebook only the cell that displays a figure shows it), and IPython's
    inline PNG formatter still renders it when displayed."""
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*grid, **kwargs)


def use_style() -> None:
    """The figures' style: small type, no top or right spine, SVG ids that do not change."""
    matplotlib.rcParams.update({
        "svg.hashsalt": "hbpsych",  # stable element ids in SVG output
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


def require_columns(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Refuse a table without ``columns``, naming the figure (``what``) and what it lacks."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what}: table has no column(s) {missing}")


def heatmap(ax: Axes, values: np.ndarray, cmap: str) -> None:
    """``values`` as a seaborn heatmap on ``ax``, every cell annotated with its value to three
    decimals ('–' where there is none), no ticks or spines, and its colour bar of clipped mean
    scores (as tall as a short heatmap, so that its label stays inside the figure). Cell
    ``(row i, column k)`` spans ``[k, k + 1] x [i, i + 1]``, row 0 on top."""
    vmin, vmax = float(np.nanmin(values)), float(np.nanmax(values))
    if vmax - vmin < 1e-9:
        vmin, vmax = vmin - 0.05, vmax + 0.05
    rows = values.shape[0]
    seaborn().heatmap(values, ax=ax, cmap=cmap, vmin=vmin, vmax=vmax, annot=True, fmt=".3f",
                      annot_kws={"fontsize": 7.5}, xticklabels=False, yticklabels=False,
                      cbar_kws={"shrink": 0.5 if rows > 10 else 1.0, "aspect": 15,
                                "pad": 0.02})
    mesh = ax.collections[0]
    for text in ax.texts:  # seaborn's annotations, in the colour that reads best on the cell
        x, y = text.get_position()
        text.set_color(_ink(tuple(mesh.cmap(mesh.norm(values[int(y), int(x)])))))
    for i, k in zip(*np.nonzero(np.isnan(values)), strict=True):
        ax.text(k + 0.5, i + 0.5, "–", ha="center", va="center", fontsize=7.5, color="black")
    ax.tick_params(length=0)
    cbar = mesh.colorbar
    assert cbar is not None  # seaborn draws it (cbar=True)
    cbar.ax.set_title("clipped\nmean\nscore", fontsize=7.5, loc="left", pad=4)
    cbar.outline.set_visible(False)


def _ink(background: Sequence[float]) -> str:
    """Black or white text, whichever reads on ``background``: black where its perceived
    brightness (Rec. 601 weights on the sRGB values) is above one half. seaborn's own rule
    (relative luminance above 0.408) puts white on the cividis map's mid tones, where it
    reads poorly."""
    r, g, b = background[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


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
