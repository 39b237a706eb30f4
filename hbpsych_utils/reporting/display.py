"""What a chapter displays besides its tables: a sentence, the findings as a paragraph, the
marker of a result this run has not (shown as nothing; the book drops a section that shows only
markers), and the base of a result that is shown through its rich representation.

A stage's science step returns a typed result that says which item shows it (its ``view``:
a table of the display vocabulary, ``reporting.vocabulary``, a figure, one of these); a chapter
shows it with ``stages.base.show``, and Jupyter and the book (MyST-NB) render the rich
representation, never a Python repr. The vocabulary escapes every text that comes from data or
from a profile where it is put into HTML (``core.escape``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hbpsych_utils.core import escape


@dataclass(frozen=True)
class Note:
    """A sentence or two of Markdown: what a section shows, or what a run lacks."""

    text: str

    def _repr_markdown_(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


NOT_IN_RUN = "hbpsych_not_in_run"
"""The metadata key of the marker output: a step's result that this run has not."""


@dataclass(frozen=True, repr=False)
class NotInRun:
    """What a chapter shows for a step this run's data cannot produce: nothing (an empty
    Markdown output carrying :data:`NOT_IN_RUN`). The chapter said once, at its top, what the
    run lacks; the book drops a section whose outputs are all this marker."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None
                          ) -> tuple[dict[str, str], dict[str, bool]]:
        return {"text/markdown": ""}, {NOT_IN_RUN: True}

    def __repr__(self) -> str:
        return ""


def is_not_in_run(output: Mapping[str, Any]) -> bool:
    """Whether a notebook output is the :class:`NotInRun` marker."""
    return bool((output.get("metadata") or {}).get(NOT_IN_RUN))


def without_sections_not_in_run(cells: Sequence[Any]) -> list[Any]:
    """A chapter's cells without the sections this run has nothing for: a section (a Markdown
    cell that starts with a heading, and the cells up to the next one) is dropped, heading
    included, when its code cells show nothing but :class:`NotInRun` markers; elsewhere the
    markers themselves are dropped."""
    sections: list[list[Any]] = [[]]
    for cell in cells:
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).lstrip().startswith("#"):
            sections.append([])
        sections[-1].append(cell)
    kept: list[Any] = []
    for section in sections:
        outputs = [o for c in section if c["cell_type"] == "code" for o in c.get("outputs", [])]
        if outputs and all(is_not_in_run(o) for o in outputs):
            continue
        for cell in section:
            if cell["cell_type"] == "code":
                cell["outputs"] = [o for o in cell.get("outputs", []) if not is_not_in_run(o)]
            kept.append(cell)
    return kept


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


@dataclass(frozen=True)
class Together:
    """Several shown things one after the other in one output (a section's tables, then its
    figure), each by its own rich representation."""

    parts: Sequence[Any]

    def _repr_html_(self) -> str:
        out = []
        for part in self.parts:
            html = getattr(part, "_repr_html_", None)
            out.append(html() if callable(html) else f"<p>{escape.html_text(str(part))}</p>")
        return "\n".join(out)

    def __repr__(self) -> str:
        return "\n\n".join(repr(p) for p in self.parts)


class Shown:
    """What a chapter's step returns, shown through its rich representation. Its plain-text
    form (which Jupyter stores beside the rich one) is that text in Markdown, or its type's
    name, never its data: a step's result can hold a whole corpus."""

    def __repr__(self) -> str:
        markdown = getattr(self, "_repr_markdown_", None)
        if callable(markdown):
            return str(markdown())
        return f"<{type(self).__name__}: shown as a table or a figure>"
