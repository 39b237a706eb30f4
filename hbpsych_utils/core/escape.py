"""Text a user, a profile, a file name or the data supplies, made safe where it is shown.

The book (MyST renders Markdown and passes inline HTML through) and the HTML the package builds
(tables, galleries, the explorer, the review instrument) are opened by others, so no value
from outside the package may become markup there: every such value goes through one of these
functions where it is put into a page.

- ``html_text``: into HTML, as element text or a quoted attribute value.
- ``md_text``: into Markdown prose or a table cell (no HTML; Markdown's own markers shown as
  themselves; one line).
- ``md_code``: into Markdown as an inline code span, verbatim whatever backticks it holds.

Markdown links cannot run code (markdown-it refuses ``javascript:`` and ``data:`` targets),
so raw HTML is the one way in, and escaping ``<`` and ``&`` closes it.
"""

from __future__ import annotations

import html
import re

MD_MARKERS = "\\`*_[]|"
"""Characters Markdown reads as inline markup (``\\`` first: it escapes the others)."""

_LOOSE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
"""An ``_`` that is not between two letters or digits (one that may open or close emphasis)."""


def html_text(value: object) -> str:
    """``value`` as text inside HTML: ``& < > " '`` escaped (safe in a quoted attribute)."""
    return html.escape(str(value), quote=True)


def md_text(value: object, *, markers: str = MD_MARKERS) -> str:
    """``value`` as text inside Markdown: HTML escaped, each of ``markers`` backslash-escaped,
    line breaks folded into spaces (a value never starts a block or leaves a table cell).

    An ``_`` between two letters or digits stays as it is (Markdown never reads it as
    emphasis), so identifiers such as ``perinatal_mh`` read the same in the Markdown source.
    ``markers="\\\\|"`` keeps a Markdown file's source readable where only a table cell's
    ``|`` must be escaped (Table 1's ``.md``)."""
    out = html.escape(str(value), quote=False)
    for ch in markers:
        out = (_LOOSE_UNDERSCORE.sub(r"\\_", out) if ch == "_"
               else out.replace(ch, "\\" + ch))
    return re.sub(r"\r\n?|\n", " ", out)


def md_code(value: object, *, cell: bool = False) -> str:
    """``value`` as a Markdown inline code span, shown verbatim: the fence is one backtick
    longer than the longest run inside, and a space pads a value that starts or ends with a
    backtick (code spans pass no HTML, so nothing else needs escaping). In a table ``cell``,
    ``|`` is escaped too: a table splits its cells at every unescaped ``|``, even in code,
    which would leave the rest of the value outside the span."""
    text = re.sub(r"\r\n?|\n", " ", str(value))
    if cell:
        text = text.replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
