"""The store's first layout (hex keys, names and JSON configs in every row, uncompressed texts)
migrated to the current one (:mod:`.store_schema`): every row, batch (with its keys) and
ledger line copied, the old tables dropped, in the write transaction in which
:class:`.store.Store` opens such a store, once."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hbpsych_utils.llm.store_errors import StoreError
from hbpsych_utils.llm.store_schema import (
    _COLS,
    _LEDGER_COLS,
    _STATUS,
    _TABLES,
    _VIEWS,
    SCHEMA_VERSION,
    _encode_text,
    _statements,
    db_key,
)

NameId = Callable[[str | None], int | None]
"""The store's id of a name, added if new (``Store._name_id``)."""
ConfigId = Callable[[dict[str, Any]], int | None]
"""The store's id of a decoding config, added if new (``Store._config_id``)."""

CHUNK = 5000
"""Rows read and written at a time."""


def migrate(db: sqlite3.Connection, path: Path, name_id: NameId, config_id: ConfigId) -> None:
    """Copy every row, batch (with its keys) and ledger line of the first layout (inside a
    write transaction); ``path`` names the store in errors."""
    db.execute("ALTER TABLE batches RENAME TO v1_batches")
    db.execute("DROP INDEX IF EXISTS ix_batches_status")
    for stmt in _statements(_TABLES):
        db.execute(stmt)
    _copy_results(db, path, name_id, config_id)
    _copy_batches(db)
    _copy_ledger(db, name_id)
    for table in ("results", "batch_items", "ledger", "v1_batches"):
        db.execute(f"DROP TABLE {table}")  # their indexes go with them
    for stmt in _statements(_VIEWS):
        db.execute(stmt)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _copy_results(db: sqlite3.Connection, path: Path, name_id: NameId,
                  config_id: ConfigId) -> None:
    read = db.cursor()
    read.execute(
        "SELECT key, provider, model, status, text, stop_reason, refusal, input_tokens, "
        "output_tokens, cost, latency, attempts, error, mode, config, tag, updated_at "
        "FROM results ORDER BY key")
    while chunk := read.fetchmany(CHUNK):
        rows = []
        for (key, provider, model, status, text, stop, refusal, tin, tout, cost, latency,
             attempts, error, mode, config, tag, updated) in chunk:
            if status not in _STATUS:
                raise StoreError(f"{path}: results row {key}: field status: "
                                 f"{status!r} is not one of {sorted(_STATUS)}")
            packed, zipped = _encode_text(text)
            rows.append((db_key(key), name_id(provider), name_id(model),
                         _STATUS[status], packed, zipped, name_id(stop),
                         int(refusal or 0), tin, tout, 0, 0, cost, latency, attempts, error,
                         name_id(mode), config_id(json.loads(config or "{}")),
                         name_id(tag or None), updated))
        db.executemany(f"INSERT INTO result_rows ({', '.join(_COLS)}) "
                       f"VALUES ({', '.join('?' * len(_COLS))})", rows)


def _copy_batches(db: sqlite3.Connection) -> None:
    read = db.cursor()
    read.execute("SELECT batch_id, provider, model, status, n_items, submitted_at, "
                 "updated_at, info FROM v1_batches ORDER BY submitted_at, rowid")
    db.executemany("INSERT INTO batches (batch_id, provider, model, status, n_items, "
                   "submitted_at, updated_at, info) VALUES (?,?,?,?,?,?,?,?)",
                   read.fetchall())
    # an item whose batch row is missing (not made by this code) keeps a batch of its own
    db.execute("INSERT INTO batches (batch_id, provider, model, status, n_items, "
               "submitted_at, updated_at, info) SELECT batch_id, '', '', 'orphaned', "
               "COUNT(*), 0, 0, NULL FROM batch_items WHERE batch_id NOT IN "
               "(SELECT batch_id FROM batches) GROUP BY batch_id")
    batch_ids = dict(db.execute("SELECT batch_id, id FROM batches"))
    read.execute("SELECT batch_id, key FROM batch_items ORDER BY batch_id, key")
    while chunk := read.fetchmany(CHUNK):
        db.executemany("INSERT INTO batch_members (batch, key) VALUES (?, ?)",
                       [(batch_ids[b], db_key(k)) for b, k in chunk])


def _copy_ledger(db: sqlite3.Connection, name_id: NameId) -> None:
    """Each line keeps its id; it refers to its result's row where the key has one."""
    read = db.cursor()
    read.execute("SELECT id, ts, run_id, provider, model, key, mode, input_tokens, "
                 "output_tokens, cost FROM ledger ORDER BY id")
    while chunk := read.fetchmany(CHUNK):
        lines = []
        for line_id, ts, run_id, provider, model, key, mode, tin, tout, cost in chunk:
            stored = key if key is None else db_key(key)
            row = None if key is None else db.execute(
                "SELECT id FROM result_rows WHERE key = ?", (stored,)).fetchone()
            lines.append((line_id, ts, name_id(run_id), name_id(provider),
                          name_id(model), row[0] if row else None,
                          None if row else stored, name_id(mode), tin, tout, 0, 0,
                          cost))
        db.executemany(f"INSERT INTO ledger_lines (id, {', '.join(_LEDGER_COLS)}) "
                       f"VALUES (?, {', '.join('?' * len(_LEDGER_COLS))})", lines)
