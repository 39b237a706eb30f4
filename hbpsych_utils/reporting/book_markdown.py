"""How the book's pages write what they show: values as escaped Markdown text or verbatim code,
links to chapters and to files the book carries, tables and YAML blocks, and the pages' names.

Every value from a user, a profile, a file name or the data goes into a page through
``core.escape`` (:func:`cell` for text, :func:`code` for a verbatim span).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import yaml

from hbpsych_utils.core import escape
from hbpsych_utils.reporting import vocabulary

FIGURES_PAGE = "figures"
PROVENANCE_PAGE = "provenance"
LEDGER_PAGE = "ledger"
METHODS_PAGE = "methods"
SEARCH_PAGE = "search.html"
FIGURES_STAGE = "12_figures_tables"
"""The chapter whose tables and figures the figures page shows."""


def cell(text: object) -> str:
    """A value shown as text in Markdown prose or a table cell (``escape.md_text``)."""
    return escape.md_text(text)


def code(text: object, cell: bool = True) -> str:
    """A value shown verbatim as inline code (``escape.md_code``), by default in a table cell."""
    return escape.md_code(text, cell=cell)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def hashes(text: str) -> str:
    """Markdown text with each sha256 in it shortened, the whole hash on hover
    (``vocabulary.identifier_html``)."""
    return _HASH.sub(lambda m: vocabulary.identifier_html(m.group(0), shown=12), text)


def yaml_block(data: object) -> str:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"```yaml\n{text}```\n"


def chapter_link(text: str, chapter: str, chapters: Sequence[str]) -> str:
    """``text`` linking to a chapter: a Markdown link to the chapter's notebook, its text
    escaped once like any other (``cell``). A ``{doc}`` role cannot carry every text: its
    title has no escape for a ``<``, which would start the role's target."""
    if chapter not in chapters:
        return cell(text)
    return f"[{cell(text)}]({chapter}.ipynb)"


def url(url: object) -> str:
    """A web address as a link that wraps (anything else as text)."""
    text = str(url or "?")
    if not text.startswith(("https://", "http://")):
        return code(text, cell=False)
    return f'<a class="url" href="{escape.html_text(text)}">{escape.html_text(text)}</a>'


def html_link(text: str, href: str) -> str:
    """A link to a file the book carries that is not a page (MyST passes inline HTML)."""
    return f'<a href="{escape.html_text(href)}">{escape.html_text(text)}</a>'


def nowrap(markdown: str) -> str:
    """A cell's content kept on one line ("App. I" never splits mid-token)."""
    return f'<span style="white-space: nowrap">{markdown}</span>'
