"""What a chapter displays: tables as HTML tables, one sentence where a section cannot be
produced, and the findings as a paragraph.

Each class here is what a stage's science step returns (or wraps its result in) so that a
notebook shows it with a bare ``display(...)``: Jupyter and the book (MyST-NB) render the rich
representation, never a Python repr. Every text that comes from data or from a profile is
HTML-escaped where it is put into HTML (``core.escape``): cells, row and column labels,
captions and notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hbpsych_utils.core import escape


@dataclass(frozen=True)
class Note:
    """A sentence or two of Markdown: what a section shows, or why this mode cannot show it."""

    text: str

    def _repr_markdown_(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def unavailable(reason: str) -> Note:
    """The one sentence a section shows when the resolved mode cannot produce it."""
    return Note(reason)


@dataclass(frozen=True)
class Table:
    """A table with a caption, shown as an HTML ``<table>`` (numbers rounded as given)."""

    frame: pd.DataFrame
    caption: str = ""
    precision: int = 3
    formats: Mapping[str, str] = field(default_factory=dict)
    """Column -> format string (``"{:+.4f}"``), for columns that need their own."""
    index: bool = True

    def html(self) -> str:
        # the Styler escapes cells and labels when asked, but never the axes' names
        names = {axis: [None if n is None else escape.html_text(n) for n in labels.names]
                 for axis, labels in (("index", self.frame.index),
                                      ("columns", self.frame.columns))}
        frame = self.frame.rename_axis(**names)
        styler = (frame.style.format(precision=self.precision, na_rep="–", escape="html")
                  .format_index(escape="html", axis=0).format_index(escape="html", axis=1))
        for column, fmt in self.formats.items():
            if column in frame.columns:
                styler = styler.format(fmt, subset=[column], na_rep="–", escape="html")
        if self.caption:
            styler = styler.set_caption(escape.html_text(self.caption))
        if not self.index:
            styler = styler.hide(axis="index")
        return styler.to_html()

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return f"{self.caption}\n{self.frame.to_string()}" if self.caption else \
            self.frame.to_string()


@dataclass(frozen=True)
class Tables:
    """Several captioned tables shown one after the other (e.g. Table 1 per subset)."""

    tables: Sequence[Table]
    note: str = ""
    """A sentence shown before the tables (plain text, escaped)."""

    def _repr_html_(self) -> str:
        head = f"<p>{escape.html_text(self.note)}</p>\n" if self.note else ""
        return head + "\n".join(t.html() for t in self.tables)

    def __repr__(self) -> str:
        return "\n\n".join([self.note, *(repr(t) for t in self.tables)]).strip()


@dataclass(frozen=True)
class Findings:
    """The sentences of "What we found", as one paragraph."""

    sentences: Sequence[str]

    def _repr_markdown_(self) -> str:
        return " ".join(self.sentences)

    def __str__(self) -> str:
        return " ".join(self.sentences)

    def __iter__(self) -> Any:
        return iter(self.sentences)

    def __len__(self) -> int:
        return len(self.sentences)


class Shown:
    """What a chapter's step returns, shown through its rich representation. Its plain-text
    form (which Jupyter stores beside the rich one) is that text in Markdown, or its type's
    name, never its data: a step's result can hold a whole corpus."""

    def __repr__(self) -> str:
        markdown = getattr(self, "_repr_markdown_", None)
        if callable(markdown):
            return str(markdown())
        return f"<{type(self).__name__}: shown as a table or a figure>"
