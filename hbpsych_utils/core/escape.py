"""Text a user, a profile, a file name or the data supplies, made safe where it is shown.

The book (MyST renders Markdown and passes inline HTML through) and the HTML the package builds
(tables, galleries, the explorer, the review instrument) are opened by others, so no value
from outside the package may become markup there: every such value goes through one of these
functions where it is put into a page.

- ``html_text``: into HTML, as element text or a quoted attribute value.
- ``md_text``: into Markdown prose or a table cell (no HTML; Markdown's own markers shown as
  themselves; one line).
- ``md_code``: into Markdown as an inline code span, verbatim whatever backticks it holds.
- ``json_script``: data into a ``<script type="application/json">`` element, read back with
  ``JSON.parse``.

Markdown links cannot run code (markdown-it refuses ``javascript:`` and ``data:`` targets),
so raw HTML is the one way in, and escaping ``<`` and ``&`` closes it.

A value can also rearrange what a reader sees without any markup: Unicode's bidirectional
embedding, override and isolate controls (``BIDI_CONTROLS``, e.g. U+202E RIGHT-TO-LEFT OVERRIDE)
are invisible and reorder the text after them, to the end of the paragraph. All three functions
show each such control as its code point, ``<U+202E>``, so a value reads in the order it was
written and the page around it is untouched. Right-to-left script itself, and the
left-to-right and right-to-left marks, are kept as they are.
"""

from __future__ import annotations

import html
import json
import re

MD_MARKERS = "\\`*_[]|"
"""Characters Markdown reads as inline markup (``\\`` first: it escapes the others)."""

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The embeddings (LRE, RLE), overrides (LRO, RLO), their end (PDF) and the isolates (LRI,
RLI, FSI, PDI): the controls that reorder the text that follows them."""

_BIDI = re.compile(f"[{BIDI_CONTROLS}]")

_LOOSE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
"""An ``_`` that is not between two letters or digits (one that may open or close emphasis)."""


def bidi_shown(text: str) -> str:
    """``text`` with each of ``BIDI_CONTROLS`` shown as its code point (``<U+202E>``)."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def html_text(value: object) -> str:
    """``value`` as text inside HTML: ``& < > " '`` escaped (safe in a quoted attribute),
    bidirectional controls shown (``bidi_shown``)."""
    return html.escape(bidi_shown(str(value)), quote=True)


def md_text(value: object, *, markers: str = MD_MARKERS) -> str:
    """``value`` as text inside Markdown: HTML escaped, each of ``markers`` backslash-escaped,
    line breaks folded into spaces (a value never starts a block or leaves a table cell),
    bidirectional controls shown (``bidi_shown``).

    An ``_`` between two letters or digits stays as it is (Markdown never reads it as
    emphasis), so identifiers such as ``perinatal_mh`` read the same in the Markdown source.
    ``markers="\\\\|"`` keeps a Markdown file's source readable where only a table cell's
    ``|`` must be escaped (Table 1's ``.md``)."""
    out = html.escape(bidi_shown(str(value)), quote=False)
    for ch in markers:
        out = (_LOOSE_UNDERSCORE.sub(r"\\_", out) if ch == "_"
               else out.replace(ch, "\\" + ch))
    return re.sub(r"\r\n?|\n", " ", out)


def md_code(value: object, *, cell: bool = False) -> str:
    """``value`` as a Markdown inline code span, shown verbatim: the fence is one backtick
    longer than the longest run inside, and a space pads a value that starts or ends with a
    backtick (code spans pass no HTML, so nothing else needs escaping). In a table ``cell``,
    ``|`` is escaped too: a table splits its cells at every unescaped ``|``, even in code,
    which would leave the rest of the value outside the span. Bidirectional controls are shown
    (``bidi_shown``): a code span does not contain their reordering."""
    text = re.sub(r"\r\n?|\n", " ", bidi_shown(str(value)))
    if cell:
        text = text.replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                  "\u2029": "\\u2029"}


def json_script(data: object) -> str:
    """``data`` as the text of a ``<script type="application/json">`` element: JSON in which
    ``<``, ``>`` and ``&`` are written as ``\\u`` escapes, so no value can close the element
    (``</script>``) or open a comment (``<!--``) that changes how the browser reads it; U+2028
    and U+2029 too (line terminators to older JavaScript). ``JSON.parse`` gives ``data`` back
    exactly. Keys keep their order; no key of ``data`` may be other than a string."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_UNSAFE[m.group()], text)
