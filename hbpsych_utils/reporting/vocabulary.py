"""The one display vocabulary: how every table a reader sees names and shows what it holds.

A stage computes typed results whose tables keep the machine's column names and ids (the CSV
files keep them too); this module turns such a table into what a reader sees, the same way in
every chapter, on the landing page and on the figures page:

- **columns by readers' labels**, from one label table (``reporting.labels``: machine name ->
  label and kind), never renamed chapter by chapter; a column named by a model id or a category,
  theme or axis term takes that term's readers' name;
- **each value by its kind** (``labels.Kind``): models by display name
  (``study.DISPLAY_NAMES``; the API id only in a ``model_id`` column), categories, themes and
  axes by their prose labels (``study``), integers as integers with thousands separators,
  scores at the paper's precision (three decimals), differences signed, money as dollars,
  shares as percentages, an interval (``ci_low`` beside ``ci_high``) as one "[low, high]" cell
  labelled with the run's interval level, identifiers (prompt ids, hashes) shortened with the
  full value on hover;
- **names left, numbers right**; numbers, names and identifiers never wrap; a table wider than
  the text column scrolls inside its own frame with its first column kept in view; its caption
  sits above the frame and wraps within the column (:data:`TABLE_CSS_FILE`, the book's
  ``tables.css``, which each table also carries inline so JupyterLab shows it the same);
- **where it came from**: under each table the chapter that made it and the one command that
  re-makes it (:class:`Origin`, set when a chapter starts; the book puts the run's own command
  there).

The panel and the interval level are named here too (:func:`panel_name`, :func:`level_text`),
so a caption never says "three-judge" or "95%" unless the run's panel and level are those.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core import escape
from hbpsych_utils.reporting.labels import COLUMNS, NUMERIC, ONE_LINE, Kind, column, term_label

MISSING = "—"
"""What a cell without a value shows."""
SCORE_DECIMALS = 3
"""The paper's precision for scores and statistics."""
ID_SHOWN = 8
"""Characters of an identifier a cell shows before "…" (the whole value is on hover)."""


def level_text(level: float) -> str:
    """An interval level as captions and labels say it: 0.95 -> "95%", 0.9 -> "90%"."""
    return f"{100 * float(level):g}%"


def label(name: object, level: float | None) -> str:
    """A column's readers' label (:func:`column`), its ``{level}`` filled in with the run's
    interval level (``None``: a table without intervals; an interval's label then is an
    error, never the study's level by default)."""
    text = column(name).label
    if "{level}" not in text:
        return text
    if level is None:
        raise ValueError(f"column {name!r} is an interval: its table needs the run's interval "
                         "level")
    return text.replace("{level}", level_text(level))


# --- values ----------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, Real) and not isinstance(value, Integral) and math.isnan(value)


def _fixed(x: float, decimals: int, sign: bool = False) -> str:
    text = f"{x:+,.{decimals}f}" if sign else f"{x:,.{decimals}f}"
    if float(text.replace(",", "")) == 0.0:  # -0.000 reads as 0.000
        text = f"{0.0:,.{decimals}f}"
    return text


def money_decimals(values: Sequence[Any]) -> int:
    """Decimals that show a column of dollar amounts: cents, or two significant digits of the
    smallest non-zero amount (at most six decimals)."""
    small = [abs(float(v)) for v in values if isinstance(v, Real) and not _missing(v)
             and float(v) != 0.0]
    if not small:
        return 2
    return max(2, min(6, math.ceil(-math.log10(min(small))) + 1))


def value_text(value: Any, kind: Kind, *, decimals: int | None = None) -> str:
    """One value as a reader sees it, by ``kind`` (:data:`Kind`); :data:`MISSING` for none."""
    if isinstance(value, str) and kind in NUMERIC and kind != "scores":
        return value  # already laid out as a number (Table 1's cells)
    if kind in ("interval", "share_interval", "scores"):
        return _several_scores(value, kind)
    if _missing(value):
        return MISSING
    if kind == "code":
        return str(value)
    if kind == "flag" or isinstance(value, bool | np.bool_):
        return "yes" if bool(value) else "no"
    if kind in ("model", "term", "subset"):
        return _named(value, kind)
    if kind in NUMERIC:
        return _number(float(value), kind, decimals) if isinstance(value, Real) else str(value)
    return study.DISPLAY_NAMES.get(str(value), str(value))


def _several_scores(value: Any, kind: Kind) -> str:
    """An interval's (low, high) as "[low, high]" (percentages for a ``share_interval``;
    :data:`MISSING` when an end is), or several
    scores in one cell, "0.512, 0.498" (text already laid out as it is)."""
    if kind in ("interval", "share_interval"):
        if not isinstance(value, tuple) or any(_missing(v) for v in value):
            return MISSING
        low, high = value
        if kind == "share_interval":
            return f"[{_number(float(low), 'share', None)}, {_number(float(high), 'share', None)}]"
        return f"[{_fixed(float(low), SCORE_DECIMALS)}, {_fixed(float(high), SCORE_DECIMALS)}]"
    if isinstance(value, str):
        return value
    return ", ".join(_fixed(float(v), SCORE_DECIMALS) for v in value)


def _named(value: Any, kind: Kind) -> str:
    """A model or term by its readers' name; a subset key by its title."""
    if kind == "subset":
        return study.SUBSET_TITLES.get(str(value), term_label(value))
    return term_label(value)


def _number(x: float, kind: Kind, decimals: int | None) -> str:
    if kind == "count":
        return f"{int(x):,}" if x.is_integer() else _fixed(x, 1)
    if kind == "decimal":
        return _fixed(x, 1)
    if kind == "rounded":
        return _fixed(x, 0)
    if kind == "signed":
        return _fixed(x, SCORE_DECIMALS, sign=True)
    if kind == "money":
        return ("−$" if x < 0 else "$") + _fixed(abs(x), 2 if decimals is None else decimals)
    if kind == "share":
        return f"{100 * x:.1f}%"
    if kind == "p_value":
        return "< 0.001" if x < 0.001 else _fixed(x, SCORE_DECIMALS)
    return _fixed(x, SCORE_DECIMALS)


def identifier_html(value: object, shown: int = ID_SHOWN) -> str:
    """An identifier (a prompt id, a hash) as a page shows it: its first ``shown`` characters
    and "…", the whole value on hover (``title``); a short one whole."""
    text = str(value)
    short = text if len(text) <= shown + 2 else text[:shown] + "…"
    return (f'<span class="hb-id" title="{escape.html_text(text)}">'
            f"{escape.html_text(short)}</span>")


def cell_html(value: Any, kind: Kind, *, decimals: int | None = None) -> str:
    """One value as the HTML inside its cell (escaped; an identifier shortened)."""
    if kind == "identifier" and not _missing(value):
        return identifier_html(value)
    return escape.html_text(value_text(value, kind, decimals=decimals))


def css_class(kind: Kind) -> str:
    """The class of a cell of ``kind``: numbers right on one line, names and identifiers on
    one line, text that wraps."""
    if kind in NUMERIC:
        return "hb-num"
    if kind in ("identifier", "code"):
        return "hb-code"
    return "hb-name" if kind in ONE_LINE else "hb-text"


# --- the panel -------------------------------------------------------------------------------

NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten")


def panel_name(judges: Sequence[str]) -> str:
    """The panel a run used, by its size: "three-judge panel", "two-judge panel", "single
    judge" (the study's size only when the run's)."""
    n = len(judges)
    if n == 1:
        return "single judge"
    word = NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else f"{n:,}"
    return f"{word}-judge panel"


def model_names(models: Sequence[str]) -> str:
    """Models (a panel's judges, a run's candidates) by display name: "GPT-4.1, Claude Haiku
    4.5 and Gemini 2.5 Flash"."""
    names = [study.display_name(m) for m in models]
    if len(names) < 2:
        return "".join(names) or "none"
    return ", ".join(names[:-1]) + " and " + names[-1]


_MODEL_WORDS: dict[str, str] = {
    **{study.paper_name(m): study.display_name(m) for m in study.DISPLAY_NAMES},
    **{m: study.display_name(m) for m in study.DISPLAY_NAMES},
}
"""Each way a text may write one of the study's models (its id, the paper's name) -> its
display name."""
_MODEL_WORD = re.compile(
    r"(?<![\w.\-])("
    + "|".join(re.escape(w) for w in sorted(_MODEL_WORDS, key=len, reverse=True))
    + r")(?![\w\-]|\.\w)")


def models_named(text: str) -> str:
    """``text`` with each of the study's models it writes by id or as the paper names it
    ("kimi-k2.6", "claude-haiku-4.5") by its display name ("Kimi K2.6", "Claude Haiku 4.5"):
    sentences the compendium writes with a model's machine name, as readers see them."""
    return _MODEL_WORD.sub(lambda m: _MODEL_WORDS[m.group(1)], text)


def panel_phrase(judges: Sequence[str]) -> str:
    """The panel named with its judges: "two-judge panel (GPT-4.1 and Claude Haiku 4.5)"."""
    return f"{panel_name(judges)} ({model_names(judges)})"


# --- where a table or figure came from -------------------------------------------------------

@dataclass(frozen=True)
class Origin:
    """The chapter that made a table or figure and the command that makes it again."""

    stage: str
    command: str

    @property
    def chapter(self) -> str:
        return f"Chapter {self.stage[:2]}"

    def html(self) -> str:
        return (f'<p class="hb-source" data-stage="{escape.html_text(self.stage)}">'
                f"{escape.html_text(self.chapter)} · "
                f'<code class="hb-command">{escape.html_text(self.command)}</code></p>')


def stage_command(profile: str, stage: str, *, options: str = "") -> str:
    """The one command that re-makes a stage's outputs in a run: ``bash run_all.sh PROFILE
    --only STAGE``, then ``options`` (the run's ``--outputs`` and ``--set``, quoted)."""
    return f"bash run_all.sh {shlex.quote(profile)} --only {stage}{options}"


_origin: Origin | None = None


def begin_chapter(origin: Origin | None) -> None:
    """What this process shows from now on comes from ``origin``'s chapter (a chapter's
    ``start`` says so; ``None``: no chapter). A kernel runs one chapter."""
    global _origin
    _origin = origin


def current_origin() -> Origin | None:
    """The chapter this process shows tables and figures for (``None`` outside a chapter)."""
    return _origin


# --- tables ----------------------------------------------------------------------------------

TABLE_CSS_FILE = Path(__file__).with_name("book_site") / "static" / "tables.css"
"""The stylesheet of tables: the book links it, and each table carries it inline
(:func:`table_style`) so that JupyterLab shows it as the book does."""


def table_style() -> str:
    """The tables' stylesheet as an inline ``<style>`` element."""
    return f"<style>{TABLE_CSS_FILE.read_text(encoding='utf-8')}</style>"


Columns = list[tuple[str, list[Any]]]
"""A table's columns in the order shown: (machine name, values)."""


_LOW_HIGH = re.compile(r"^(.*?)(low|high)$")


def _intervals(columns: Columns) -> Columns:
    """``X_low`` beside ``X_high`` (``ci_low``/``ci_high``, ``low``/``high``) as one column
    ``X_interval`` of (low, high) pairs, where the low one was."""
    names = [n for n, _ in columns]
    out = []
    for name, values in columns:
        m = _LOW_HIGH.match(name)
        if m and f"{m.group(1)}low" in names and f"{m.group(1)}high" in names:
            if m.group(2) == "low":
                highs = columns[names.index(f"{m.group(1)}high")][1]
                out.append((f"{m.group(1)}interval", list(zip(values, highs, strict=True))))
            continue
        out.append((name, values))
    return out


def _kind_of(name: str, values: pd.Series, value_kind: Kind | None,
             kinds: Mapping[str, Kind]) -> Kind:
    """A column's kind: named by the caller, by the label table, by ``value_kind`` (a column
    the table does not know), else read from its values."""
    if name in kinds:
        return kinds[name]
    if name in COLUMNS:
        return COLUMNS[name].kind
    if value_kind is not None:
        return value_kind
    if pd.api.types.is_bool_dtype(values):
        return "flag"
    if pd.api.types.is_integer_dtype(values):
        return "count"
    present = values.dropna()
    if pd.api.types.is_float_dtype(values):
        return "count" if len(present) and bool((present == present.round()).all()) else "score"
    if len(present) and all(isinstance(v, str) and v in study.DISPLAY_NAMES for v in present):
        return "model"
    return "text"


@dataclass(frozen=True)
class Layout:
    """A table laid out for readers: header labels (none: no header row), each cell's HTML,
    plain text and class, row by row."""

    labels: list[str]
    cells: list[list[str]]
    texts: list[list[str]]
    classes: list[list[str]]


def lay_out(frame: pd.DataFrame, *, index: bool = True, kinds: Mapping[str, Kind] | None = None,
            value_kind: Kind | None = None, level: float | None,
            header: bool = True, lead: Sequence[str] = ()) -> Layout:
    """``frame`` as readers see it (the module doc): its index (unless ``index`` is false or it
    is the default 0..n-1) as the first columns, intervals as one column, every label from the
    label table and every value by its column's kind. ``kinds`` names a column's kind where
    the label table has none (or another); ``value_kind`` is the kind of every other column
    the table does not know (a wide table's scores or counts). An unnamed index holds row
    labels (terms, or models). ``lead`` names columns shown first, the first of them kept in
    view as the row header (a table's models before its phases)."""
    row_labels = _index_columns(frame) if index else []
    columns = _intervals(row_labels + _data_columns(frame, lead, level))
    found = _column_kinds(columns, len(row_labels), dict(kinds or {}), value_kind)
    cells, texts, classes = _cells(columns, found, len(frame))
    _blank_repeated_labels(columns, len(row_labels), cells, texts)
    labels = [label(name, level) if name else "" for name, _ in columns]
    return Layout(labels if header and any(labels) else [], cells, texts, classes)


def _index_columns(frame: pd.DataFrame) -> Columns:
    """The frame's index as columns of row labels (none for the default 0..n-1 index)."""
    idx = frame.index
    if (isinstance(idx, pd.RangeIndex) and idx.name is None and idx.start == 0
            and idx.step == 1):
        return []
    return [("" if n is None else str(n), list(idx.get_level_values(i)))
            for i, n in enumerate(idx.names)]


def _data_columns(frame: pd.DataFrame, lead: Sequence[str], level: float | None) -> Columns:
    """The frame's columns (a column named by a tuple as its parts' labels), ``lead`` first."""
    data = []
    for i, c in enumerate(frame.columns):
        name = " · ".join(label(x, level) for x in c) if isinstance(c, tuple) else str(c)
        data.append((name, list(frame.iloc[:, i])))
    first = [c for name in lead for c in data if c[0] == name]
    return first + [c for c in data if c not in first]


def _column_kinds(columns: Columns, n_labels: int, kinds: Mapping[str, Kind],
                  value_kind: Kind | None) -> list[Kind]:
    """Each column's kind; a row label column the label table does not know holds models or
    terms."""
    found: list[Kind] = []
    for i, (name, values) in enumerate(columns):
        series = pd.Series(values, dtype=object if not values else None)
        if i < n_labels and name not in kinds and name not in COLUMNS:
            found.append("model" if _kind_of("", series, None, {}) == "model" else "term")
        else:
            found.append(_kind_of(name, series, None if i < n_labels else value_kind, kinds))
    return found


def _cells(columns: Columns, found: Sequence[Kind], n_rows: int
           ) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """Every cell's HTML, plain text and class, row by row (a money column with the decimals
    its smallest amount needs)."""
    decimals = {i: money_decimals(values) for i, ((_, values), k) in
                enumerate(zip(columns, found, strict=True)) if k == "money"}
    cells, texts, classes = [], [], []
    for r in range(n_rows):
        row = [(values[r], k, decimals.get(i)) for i, ((_, values), k) in
               enumerate(zip(columns, found, strict=True))]
        cells.append([cell_html(v, k, decimals=d) for v, k, d in row])
        texts.append([value_text(v, k, decimals=d) for v, k, d in row])
        classes.append([css_class(k) for k in found])
    return cells, texts, classes


def _blank_repeated_labels(columns: Columns, n_labels: int, cells: list[list[str]],
                           texts: list[list[str]]) -> None:
    """A row label repeated from the row above (with every label before it) left blank."""
    for r in range(len(cells) - 1, 0, -1):
        for i in range(n_labels - 1):
            if all(columns[j][1][r] == columns[j][1][r - 1] for j in range(i + 1)):
                cells[r][i] = texts[r][i] = ""


def table_html(shown: Layout, *, caption: str = "", notes: Sequence[str] = (),
               origin: Origin | None = None, style: bool = True) -> str:
    """A laid-out table as HTML: its caption above a frame that scrolls sideways when the table
    is wider than the column (its first column kept in view), notes and its origin below."""
    parts = [table_style()] if style else []
    parts.append('<div class="hb-block">')
    if caption:
        parts.append(f'<p class="hb-caption">{escape.html_text(caption)}</p>')
    parts.append('<div class="hb-scroll" tabindex="0"><table class="hb-table">')
    heads = shown.classes[0] if shown.classes else ["hb-name"] * len(shown.labels)
    if shown.labels:
        parts.append("<thead><tr>" + "".join(
            f'<th class="{c}" scope="col">{escape.html_text(lab)}</th>'
            for lab, c in zip(shown.labels, heads, strict=True)) + "</tr></thead>")
    parts.append("<tbody>")
    for row, classes in zip(shown.cells, shown.classes, strict=True):
        cells = [f'<th class="{classes[0]}" scope="row">{row[0]}</th>']
        cells += [f'<td class="{c}">{v}</td>' for v, c in zip(row[1:], classes[1:],
                                                               strict=True)]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table></div>")
    parts += [f'<p class="hb-note">{escape.html_text(n)}</p>' for n in notes if n]
    if origin is not None:
        parts.append(origin.html())
    parts.append("</div>")
    return "\n".join(parts)


def table_text(shown: Layout, caption: str = "") -> str:
    """A laid-out table as plain text (what Jupyter stores beside the HTML)."""
    rows = ([shown.labels] if shown.labels else []) + shown.texts
    if not rows:
        return caption
    right = [c == "hb-num" for c in (shown.classes[0] if shown.classes else [])] or \
        [False] * len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if rt else c.ljust(w)
                       for c, w, rt in zip(r, widths, right, strict=True)).rstrip()
             for r in rows]
    return "\n".join([caption, *lines] if caption else lines)


@dataclass(frozen=True, repr=False)
class Table:
    """A table a chapter shows: a frame with the machine's column names and values (the
    vocabulary lays it out), its caption (what it shows) and notes under it."""

    frame: pd.DataFrame
    caption: str = ""
    index: bool = True
    kinds: Mapping[str, Kind] = field(default_factory=dict)
    """Kinds of columns the label table does not know (or knows otherwise here)."""
    value_kind: Kind | None = None
    """The kind of every column the label table does not know (a wide table's scores)."""
    level: float | None = study.CI_LEVEL
    """The interval level its interval columns are labelled with (``None``: a table without
    intervals)."""
    notes: Sequence[str] = ()
    lead: Sequence[str] = ()
    """Columns shown first, the first kept in view as the row header."""

    def shown(self) -> Layout:
        return lay_out(self.frame, index=self.index, kinds=self.kinds,
                       value_kind=self.value_kind, level=self.level, lead=self.lead)

    def html(self, *, style: bool = True) -> str:
        return table_html(self.shown(), caption=self.caption, notes=self.notes,
                          origin=current_origin(), style=style)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return "\n".join([table_text(self.shown(), self.caption), *self.notes])


@dataclass(frozen=True, repr=False)
class Facts(Table):
    """One value per row, each labelled from the label table and shown by its own kind (a
    corpus's size, a run's summary): two columns, no header. ``frame`` holds the values as one
    row, under their machine names."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def shown(self) -> Layout:
        cells, texts, classes = [], [], []
        for key, value in self.values.items():
            kind = self.kinds.get(key, column(key).kind)
            name = label(key, self.level)
            cells.append([escape.html_text(name), cell_html(value, kind)])
            texts.append([name, value_text(value, kind)])
            classes.append(["hb-name", css_class(kind)])
        return Layout([], cells, texts, classes)


def facts(values: Mapping[str, Any], caption: str = "", *,
          kinds: Mapping[str, Kind] | None = None, level: float | None,
          notes: Sequence[str] = ()) -> Facts:
    """A :class:`Facts` table of ``values`` (machine name -> value)."""
    return Facts(pd.DataFrame([dict(values)]), caption, kinds=dict(kinds or {}), level=level,
                 notes=notes, values=dict(values))


@dataclass(frozen=True, repr=False)
class Tables:
    """Several tables shown one after the other, after a sentence saying what they show."""

    tables: Sequence[Table]
    note: str = ""

    def _repr_html_(self) -> str:
        head = f'<p class="hb-lead">{escape.html_text(self.note)}</p>\n' if self.note else ""
        return head + "\n".join(t.html(style=i == 0) for i, t in enumerate(self.tables))

    def __repr__(self) -> str:
        return "\n\n".join([self.note, *(repr(t) for t in self.tables)]).strip()


# --- Markdown tables (the book's own pages) --------------------------------------------------

def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]],
                   kinds: Sequence[Kind] | None = None) -> str:
    """A Markdown table of cells already written as Markdown (the book's landing page and
    provenance): names left, numbers right, by each column's kind."""
    kinds = list(kinds or ["text"] * len(header))
    align = ["---:" if k in NUMERIC else ":---" for k in kinds]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
