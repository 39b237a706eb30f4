"""What a chapter displays besides its tables: one sentence where a section cannot be
produced, the findings as a paragraph, and the base of a step's result that is shown through
its rich representation.

A stage's science step returns something a notebook shows with a bare ``display(...)``: Jupyter
and the book (MyST-NB) render the rich representation, never a Python repr. Tables are laid
out by the display vocabulary (``reporting.vocabulary``), which escapes every text that comes
from data or from a profile where it is put into HTML (``core.escape``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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
