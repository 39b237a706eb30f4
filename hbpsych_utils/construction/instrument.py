"""The review instrument: one self-contained HTML page per round that reviewers open from disk.

The page needs no server and no network: its CSS, script and the blinded items are inline, the
items as JSON in a ``<script type="application/json">`` block. Every ``<``, ``>`` and ``&`` in that
JSON is written as a ``\\u`` escape, so conversation text can never close the block or open a
tag. The page renders text through ``textContent`` only, and a Content-Security-Policy allows
nothing but the page's own script (by hash): markup hidden in a conversation shows as text and
runs nothing. Progress stays in the browser's localStorage, keyed by round, review set and
reviewer; the export is a ratings file in the released schema that ``ratings.load_ratings`` reads
(a partial export is a backup: import it with ``allow_unrated=True``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hbpsych_utils.construction.corpus import Conversation, Message
from hbpsych_utils.construction.review_set import (
    PACKET_ITEM_KEYS,
    PacketItem,
    build_packet,
    pairs_fingerprint,
    write_packet,
)
from hbpsych_utils.core.escape import html_text
from hbpsych_utils.core.writes import write_text

if TYPE_CHECKING:
    import pandas as pd

TEMPLATE = "instrument_template.html"
PACKET_FILE = "packet.json"
INSTRUMENT_FILE = "instrument.html"
"""The two files ``write_round`` leaves in a round's folder."""
BOOK_COPY = "instruments/{stage}.html"
"""Where a run's book carries a round's instrument (relative to the book's pages), so a reader
opens it from the chapter."""
_SCRIPT_RE = re.compile(r'<script id="instrument-js">(.*?)</script>', re.DOTALL)
_ROUND_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _template() -> str:
    package = resources.files("hbpsych_utils.construction")
    return package.joinpath(TEMPLATE).read_text(encoding="utf-8")


def embed_json(data: object) -> str:
    """JSON safe to place inside a ``<script>`` element: no character can end the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m.group(0)], text)


def items_fingerprint(items: Sequence[PacketItem]) -> str:
    """The set's fingerprint; saved progress is keyed on it, so a new set starts afresh."""
    return pairs_fingerprint((it["review_id"], it["prompt_id"]) for it in items)


def _check_items(items: Sequence[Mapping[str, Any]]) -> list[PacketItem]:
    """Packet items as built elsewhere (any mapping: checked here) in review-id order."""
    seen: set[str] = set()
    out: list[PacketItem] = []
    for i, it in enumerate(items):
        rid = it.get("review_id")
        extra = set(it) - set(PACKET_ITEM_KEYS)
        if extra:
            raise ValueError(
                f"item {i} ({rid}): keys {sorted(extra)} must not reach reviewers (allowed: "
                f"{PACKET_ITEM_KEYS}); build items with review_set.build_packet"
            )
        if not isinstance(rid, str) or not rid or not isinstance(it.get("prompt_id"), str):
            raise ValueError(f"item {i}: review_id and prompt_id must be non-empty strings")
        if rid in seen:
            raise ValueError(f"item {i}: duplicate review id {rid}")
        seen.add(rid)
        turns = it.get("turns", [])
        translation = it.get("translation")
        if translation is not None and len(translation) != len(turns):
            raise ValueError(
                f"item {rid}: translation has {len(translation)} turn(s), the conversation "
                f"{len(turns)}"
            )
        out.append(
            {
                "review_id": rid,
                "prompt_id": it["prompt_id"],
                "turns": [{"role": str(t["role"]), "content": str(t["content"])} for t in turns],
                "translation": None if translation is None else [
                    {"role": str(t["role"]), "content": str(t["content"])} for t in translation
                ],
                "available": bool(it.get("available", True)),
            }
        )
    return sorted(out, key=lambda it: it["review_id"])


def instrument_html(
    review_set_items: Sequence[Mapping[str, Any]],
    *,
    round_name: str,
    vocabulary: Iterable[str],
    packet: str | None = None,
    title: str | None = None,
) -> str:
    """The instrument page as a string (see ``write_instrument``)."""
    if not _ROUND_RE.match(round_name):
        raise ValueError(
            f"round_name {round_name!r}: use letters, digits, '.', '_' or '-' (it keys the "
            "reviewer's saved progress)"
        )
    vocab = list(vocabulary)
    if not vocab or len(set(vocab)) != len(vocab):
        raise ValueError(f"vocabulary must be non-empty without repeats, got {vocab}")
    items = _check_items(review_set_items)
    title = title or f"Blinded review · {round_name}"
    data = {
        "round": round_name,
        "packet": packet,
        "title": title,
        "set_hash": items_fingerprint(items),
        "vocabulary": vocab,
        "items": items,
    }
    page = _template()
    match = _SCRIPT_RE.search(page)
    if match is None:
        raise RuntimeError(f"{TEMPLATE}: the instrument script block is missing")
    digest = base64.b64encode(hashlib.sha256(match.group(1).encode("utf-8")).digest()).decode()
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
    values = {"CSP": csp, "TITLE": html_text(title), "DATA": embed_json(data)}
    # one pass, so nothing substituted (a title, a conversation) is scanned for placeholders
    return re.sub(r"\{\{(CSP|TITLE|DATA)\}\}", lambda m: values[m.group(1)], page)


def write_instrument(path: Path | str, review_set_items: Sequence[Mapping[str, Any]], *,
                     round_name: str, vocabulary: Iterable[str], packet: str | None = None,
                     title: str | None = None) -> Path:
    """Write the round's self-contained review page.

    ``review_set_items`` are packet items (``review_set.build_packet``): review id, prompt id,
    turns, optional translation. ``packet`` is copied into the exported ratings (round 2 of the
    study used ``"recovery"``); ``round_name`` keys the reviewer's saved progress.
    """
    page = instrument_html(
        review_set_items, round_name=round_name, vocabulary=vocabulary, packet=packet,
        title=title,
    )
    return write_text(Path(path), page)


def write_round(
    folder: Path,
    review: pd.DataFrame,
    conversations: Iterable[Conversation],
    translations: Mapping[str, Sequence[Message | Mapping[str, str]]],
    *,
    round_name: str,
    vocabulary: Iterable[str],
    packet: str | None = None,
) -> list[PacketItem]:
    """A round's reviewer materials in ``folder``: ``packet.json`` and ``instrument.html``.

    Conversations missing from a partial corpus become placeholders; machine translations sit
    beside the original. Returns the packet items (what the stages count and report).
    """
    items = build_packet(review, conversations, translations, on_missing="placeholder")
    write_packet(folder / PACKET_FILE, items, round_name=round_name, packet=packet)
    write_instrument(folder / INSTRUMENT_FILE, items, round_name=round_name,
                     vocabulary=vocabulary, packet=packet)
    return items
