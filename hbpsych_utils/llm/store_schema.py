"""The store's layout on disk: its tables and views, and the stored forms of keys and texts.

Layout (schema 2, about a third of the first layout's bytes per judge result): a request key
is stored as its 32 bytes (any key that is not 64 lowercase hex characters as text); provider,
model, run id, mode, tag and stop reason are ids into ``names``; a resolved decoding config is
stored once in ``configs`` and rows hold its id; a text of at least ``COMPRESS_FROM`` bytes is
stored zlib-compressed when that is shorter (``text_zlib`` = 1); ``result_rows`` are appended in
write order (a unique index finds a key) so that a ledger line refers to its result by row id
instead of repeating the key. The views ``results``, ``ledger`` and ``batch_items`` show the
tables as the first layout had them (hex keys, names, JSON config; a compressed text shows as
its zlib bytes, with ``text_zlib`` = 1) for reading with plain SQL. A store in the first layout
is migrated when opened, once, in one transaction (:mod:`.store_v1`).

The names here are the store modules' own (:mod:`.store`, :mod:`.store_v1`,
:mod:`.store_ledger`); everything else reads and writes through :class:`.store.Store`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from hbpsych_utils.llm.requests import COMPLETED

SCHEMA_VERSION = 2
COMPRESS_FROM = 128
"""Texts of at least this many UTF-8 bytes are stored zlib-compressed when that is shorter."""

_STATUS = {"ok": 0, "refused": 1, "failed": 2, "not_run": 3}
_STATUS_NAME = {v: k for k, v in _STATUS.items()}
_FINAL = tuple(_STATUS[s] for s in COMPLETED)

_TABLES = """
CREATE TABLE names (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
CREATE TABLE configs (
    id INTEGER PRIMARY KEY,
    config TEXT NOT NULL UNIQUE
);
CREATE TABLE result_rows (
    id INTEGER PRIMARY KEY,
    key BLOB NOT NULL UNIQUE,
    provider INTEGER NOT NULL,
    model INTEGER NOT NULL,
    status INTEGER NOT NULL,
    text,
    text_zlib INTEGER NOT NULL DEFAULT 0,
    stop_reason INTEGER,
    refusal INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    latency REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    mode INTEGER,
    config INTEGER,
    tag INTEGER,
    updated_at REAL NOT NULL
);
CREATE TABLE batches (
    id INTEGER PRIMARY KEY,
    batch_id TEXT NOT NULL UNIQUE,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    n_items INTEGER NOT NULL,
    submitted_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    info TEXT
);
CREATE INDEX ix_batches_status ON batches(status);
CREATE TABLE batch_members (
    batch INTEGER NOT NULL,
    key BLOB NOT NULL,
    PRIMARY KEY (batch, key)
) WITHOUT ROWID;
CREATE TABLE ledger_lines (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    run INTEGER,
    provider INTEGER NOT NULL,
    model INTEGER NOT NULL,
    result INTEGER,
    key BLOB,
    mode INTEGER,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL
)
"""
# ledger_lines.result is a result_rows id (the line of a stored result); ledger_lines.key is set
# instead when the call has no row of its own (an empty reply that was retried).

_HEX_KEY = "CASE WHEN typeof({c}) = 'blob' THEN lower(hex({c})) ELSE {c} END"
_VIEWS = f"""
CREATE VIEW results AS SELECT
    {_HEX_KEY.format(c="r.key")} AS key, p.name AS provider, m.name AS model,
    CASE r.status WHEN 0 THEN 'ok' WHEN 1 THEN 'refused' WHEN 2 THEN 'failed'
        ELSE 'not_run' END AS status,
    r.text AS text, r.text_zlib AS text_zlib, s.name AS stop_reason, r.refusal AS refusal,
    r.input_tokens AS input_tokens, r.output_tokens AS output_tokens,
    r.cache_read_tokens AS cache_read_tokens, r.cache_write_tokens AS cache_write_tokens,
    r.cost AS cost, r.latency AS latency, r.attempts AS attempts, r.error AS error,
    mo.name AS mode, c.config AS config, COALESCE(t.name, '') AS tag, r.updated_at AS updated_at
FROM result_rows r JOIN names p ON p.id = r.provider JOIN names m ON m.id = r.model
    LEFT JOIN names s ON s.id = r.stop_reason LEFT JOIN names mo ON mo.id = r.mode
    LEFT JOIN configs c ON c.id = r.config LEFT JOIN names t ON t.id = r.tag;
CREATE VIEW ledger AS SELECT
    l.id AS id, l.id AS rowid, l.ts AS ts, ru.name AS run_id, p.name AS provider,
    m.name AS model, {_HEX_KEY.format(c="COALESCE(l.key, r.key)")} AS key, mo.name AS mode,
    l.input_tokens AS input_tokens, l.output_tokens AS output_tokens,
    l.cache_read_tokens AS cache_read_tokens, l.cache_write_tokens AS cache_write_tokens,
    l.cost AS cost
FROM ledger_lines l JOIN names p ON p.id = l.provider JOIN names m ON m.id = l.model
    LEFT JOIN names ru ON ru.id = l.run LEFT JOIN names mo ON mo.id = l.mode
    LEFT JOIN result_rows r ON r.id = l.result;
CREATE VIEW batch_items AS SELECT b.batch_id AS batch_id, {_HEX_KEY.format(c="i.key")} AS key
FROM batch_members i JOIN batches b ON b.id = i.batch
"""

_COLS = ("key", "provider", "model", "status", "text", "text_zlib", "stop_reason", "refusal",
         "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost",
         "latency", "attempts", "error", "mode", "config", "tag", "updated_at")
_LEDGER_COLS = ("ts", "run", "provider", "model", "result", "key", "mode", "input_tokens",
                "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost")


def db_key(key: str) -> bytes | str:
    """The stored form of a request key: its 32 bytes when it is 64 lowercase hex characters
    (every key ``request_key`` makes), the string itself otherwise."""
    if len(key) == 64:
        try:
            raw = bytes.fromhex(key)
        except ValueError:
            return key
        if raw.hex() == key:
            return raw
    return key


def key_str(value: bytes | str) -> str:
    return value.hex() if isinstance(value, bytes) else value


def _encode_text(text: str | None) -> tuple[str | bytes | None, int]:
    if text is None:
        return None, 0
    raw = text.encode("utf-8")
    if len(raw) >= COMPRESS_FROM:
        packed = zlib.compress(raw, 6)
        if len(packed) < len(raw):
            return packed, 1
    return text, 0


def _decode_text(value: str | bytes | None, zipped: int) -> str | None:
    if zipped:
        return zlib.decompress(value).decode("utf-8")  # type: ignore[arg-type]
    return value  # type: ignore[return-value]


def _statements(script: str) -> Iterator[str]:
    return (s for s in (p.strip() for p in script.split(";")) if s)
