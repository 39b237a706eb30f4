"""Content-addressed SQLite store of model calls: what makes every run resumable and idempotent.

One row per request key. A row whose status is ``ok`` or ``refused`` is final: it is never
overwritten and its key is never requested again. ``failed`` rows keep the last error and are
retried by the next run. Open provider batches and their items are recorded so a restarted run
polls them instead of resubmitting; a batch's results, the ledger lines it was billed for and its
mark as collected are written in one transaction (``collect_batch``). A ledger keeps every paid
call.

WAL journal with ``synchronous=NORMAL``: each commit survives a killed process (``kill -9``);
only an operating-system crash can lose the last commits, and nothing already committed is
ever rewritten. Writes are grouped in transactions by the caller (``put_many``) so that
hundreds of thousands of rows do not cost one fsync each. API keys are never written here: a
row's error and text are scrubbed of every key set in the environment
(:func:`hbpsych_utils.core.secrets.scrub`), whatever a server sent back, and ``put_many`` hands
back the results as stored, so what the engine returns and every table made from it hold the
same text as the store. Each reply stored with a key's value replaced is counted in the table
``scrubbed`` (request key, variable, occurrences; made on the first such reply), which
:meth:`Store.scrubbed` sums for the run manifest. (The keys are read once per store, when it is
opened, not per write: reading the environment on every write cost the engine about 5% of its
calls per second in the overhead benchmark.)

The layout on disk (schema 2: keys as bytes, names and configs as ids, long texts compressed,
views in the first layout's shape for plain SQL) is :mod:`.store_schema`'s; a store in the first
layout is migrated when opened, once, in one transaction (:mod:`.store_v1`). What the ledger
says was paid is read by :mod:`.store_ledger`; the errors of a file this code cannot read are
in :mod:`.store_errors`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hbpsych_utils.core.secrets import scrubber
from hbpsych_utils.llm import store_ledger, store_v1
from hbpsych_utils.llm.requests import COMPLETED, Result
from hbpsych_utils.llm.store_errors import StoreError, damaged, emptied, unreadable
from hbpsych_utils.llm.store_schema import (
    _COLS,
    _FINAL,
    _LEDGER_COLS,
    _STATUS,
    _STATUS_NAME,
    _TABLES,
    _VIEWS,
    SCHEMA_VERSION,
    _decode_text,
    _encode_text,
    _statements,
    db_key,
    key_str,
)

STORE_NAME = "llm_store.sqlite"
"""The store's file in a run folder: one per run, shared by its stages."""

# A final row (ok/refused) is never replaced; anything else may be.
_UPSERT = (
    f"INSERT INTO result_rows ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))}) "
    "ON CONFLICT(key) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in _COLS[1:])
    + f" WHERE result_rows.status NOT IN ({', '.join(map(str, _FINAL))})"
)
_LEDGER_INSERT = (f"INSERT INTO ledger_lines ({', '.join(_LEDGER_COLS)}) "
                  f"VALUES ({', '.join('?' * len(_LEDGER_COLS))})")
# the line of a stored result: its row id, looked up in the same transaction as the upsert
_LEDGER_OF_RESULT = (
    "INSERT INTO ledger_lines (ts, run, provider, model, result, mode, input_tokens, "
    "output_tokens, cache_read_tokens, cache_write_tokens, cost) "
    "VALUES (?, ?, ?, ?, (SELECT id FROM result_rows WHERE key = ?), ?, ?, ?, ?, ?, ?)")
_READ_COLS = ", ".join(c for c in _COLS if c != "updated_at")

SCRUBBED_TABLE = "scrubbed"
_SCRUBBED = f"""
CREATE TABLE IF NOT EXISTS {SCRUBBED_TABLE} (
    key BLOB NOT NULL,
    variable TEXT NOT NULL,
    occurrences INTEGER NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (key, variable)
) WITHOUT ROWID"""
"""A stored reply whose text had a key's value replaced: how many occurrences, of which
variable's value. Made on the first such reply, so a store that never met one is unchanged."""

OPEN_BATCH = "open"
COLLECTED_BATCH = "collected"


@dataclass(frozen=True)
class SpendLine:
    """The ledger line of a paid call whose result is not stored (an empty reply, retried)."""

    provider: str
    model: str
    key: str | None
    mode: str
    input_tokens: int
    output_tokens: int
    cost: float
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


def check(path: Path) -> None:
    """Raise :class:`StoreError` if the store at ``path`` (an existing file) is damaged or
    empty (:func:`emptied`), before anything reads it. ``PRAGMA quick_check`` reads every page
    once, read-only (about a second for a few hundred MB); it writes nothing, not even a
    checkpoint."""
    if emptied(path):
        raise damaged(path, "an empty file, 0 bytes: not a store", readable=False)
    # without a write-ahead log to read, immutable: SQLite creates no -wal or -shm file either
    quiet = "" if Path(f"{path}-wal").exists() else "&immutable=1"
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro{quiet}", uri=True)
        try:
            problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise unreadable(path, exc) from None
    if problems != ["ok"]:
        more = f", and {len(problems) - 1} more problems" if len(problems) > 1 else ""
        raise damaged(path, f"quick_check: {problems[0]}{more}", readable=True)


class Store:
    """A SQLite file; safe to share between the engine's threads (one connection + a lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if emptied(self.path):  # a new store is created, an emptied one refused
            raise damaged(self.path, "an empty file, 0 bytes: not a store", readable=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                   timeout=30)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise unreadable(self.path, exc) from None
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        # names and configs by value and by id; only committed entries (cleared on rollback)
        self._name_ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._config_ids: dict[str, int] = {}
        self._configs: dict[int, str] = {}
        self._clean, self._clean_error = scrubber(), scrubber(cut=True)
        try:
            self._open_schema()
        except BaseException:
            self._db.close()
            raise

    # ---- schema
    def _version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _open_schema(self) -> None:
        """Create the tables, or migrate a first-layout store, once (one transaction)."""
        if self._version() == SCHEMA_VERSION:
            return
        migrated = False
        with self._lock, self._write():
            version = self._version()
            kinds = dict(self._db.execute(
                "SELECT name, type FROM sqlite_master WHERE name IN ('results', 'result_rows')"))
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path}: store schema {version} was written by a newer "
                                 f"version of this code (this one reads up to {SCHEMA_VERSION})")
            if version == SCHEMA_VERSION:
                return  # another process created or migrated it meanwhile
            if kinds.get("results") == "table" and "result_rows" not in kinds:
                store_v1.migrate(self._db, self.path, self._name_id, self._config_id)
                migrated = True
            elif not kinds:
                self._create()
            else:
                raise StoreError(f"{self.path}: unknown store layout (user_version {version}, "
                                 f"tables {sorted(kinds)})")
        if migrated:  # give the first layout's pages back to the file system
            try:
                self._db.execute("VACUUM")
            except sqlite3.OperationalError:
                pass  # another connection is reading; the free pages are reused by new rows

    def _create(self) -> None:
        for stmt in (*_statements(_TABLES), *_statements(_VIEWS)):
            self._db.execute(stmt)
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ---- transactions, names and configs
    def _write(self) -> _Transaction:
        return _Transaction(self)

    def _forget_uncommitted(self) -> None:
        """After a rollback: ids handed out in it may not exist; reload on demand."""
        self._name_ids.clear()
        self._names.clear()
        self._config_ids.clear()
        self._configs.clear()

    def _name_id(self, name: str | None) -> int | None:
        """The id of a name, added if new (inside a write transaction)."""
        if name is None:
            return None
        got = self._name_ids.get(name)
        if got is None:
            self._db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (name,))
            got = self._db.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()[0]
            self._name_ids[name] = got
            self._names[got] = name
        return got

    def _name(self, name_id: int | None) -> str | None:
        if name_id is None:
            return None
        got = self._names.get(name_id)
        if got is None:
            got = self._db.execute("SELECT name FROM names WHERE id = ?", (name_id,)).fetchone()[0]
            self._names[name_id] = got
        return got

    def _config_id(self, config: dict[str, Any]) -> int | None:
        if not config:
            return None
        text = json.dumps(config, sort_keys=True)
        got = self._config_ids.get(text)
        if got is None:
            self._db.execute("INSERT OR IGNORE INTO configs (config) VALUES (?)", (text,))
            got = self._db.execute("SELECT id FROM configs WHERE config = ?",
                                   (text,)).fetchone()[0]
            self._config_ids[text] = got
            self._configs[got] = text
        return got

    def _config(self, config_id: int | None) -> dict[str, Any]:
        if config_id is None:
            return {}
        text = self._configs.get(config_id)
        if text is None:
            text = self._db.execute("SELECT config FROM configs WHERE id = ?",
                                    (config_id,)).fetchone()[0]
            self._configs[config_id] = text
        return json.loads(text)  # a fresh dict for every result

    # ---- results
    def put(self, result: Result, run_id: str | None = None, ledger: bool = True) -> None:
        self.put_many([result], run_id=run_id, ledger=ledger)

    def put_many(self, results: Sequence[Result], run_id: str | None = None,
                 ledger: bool = True) -> list[Result]:
        """Write results (and their spend) in one transaction; return them as stored (scrubbed
        of API keys: the same objects when they held none)."""
        if not results:
            return []
        with self._lock, self._write():
            return self._put_rows(results, run_id, ledger, time.time())

    def _as_stored(self, r: Result) -> Result:
        """``r`` with its text and error scrubbed of every key (``r`` itself when unchanged)."""
        text = self._clean(r.text) if r.text else r.text
        error = self._clean_error(r.error) if r.error else r.error
        if text is r.text and error is r.error:
            return r
        return replace(r, text=text, error=error)

    def _put_rows(self, results: Sequence[Result], run_id: str | None, ledger: bool,
                  now: float) -> list[Result]:
        """Upsert results and their ledger lines (inside a write transaction); return the
        results as stored."""
        stored = [self._as_stored(r) for r in results]
        scrubbed = [r for r, s in zip(results, stored, strict=True)
                    if s.text is not r.text and r.status in COMPLETED]
        final = self._final_keys(r.key for r in scrubbed) if scrubbed else set()
        rows = [self._row(r, now) for r in stored]
        self._db.executemany(_UPSERT, rows)
        paid = self._paid_lines(results, rows, run_id, now) if ledger else []
        if paid:
            self._db.executemany(_LEDGER_OF_RESULT, paid)
        self._mark_scrubbed(scrubbed, final, now)
        return stored

    def _paid_lines(self, results: Sequence[Result], rows: Sequence[tuple[Any, ...]],
                    run_id: str | None, now: float) -> list[tuple[Any, ...]]:
        """The ledger line of each result that cost anything, referring to its row."""
        return [
            (now, self._name_id(run_id), row[1], row[2], row[0], row[16], r.input_tokens,
             r.output_tokens, r.cache_read_tokens, r.cache_write_tokens, r.cost)
            for r, row in zip(results, rows, strict=True)
            if r.cost or r.input_tokens or r.output_tokens
            or r.cache_read_tokens or r.cache_write_tokens
        ]

    def _mark_scrubbed(self, scrubbed: Sequence[Result], final: set[bytes | str],
                       now: float) -> None:
        """Count the key values replaced in each of ``scrubbed`` (replies before scrubbing) that
        had no final row yet: a final row is never replaced, the count of its first write
        stands."""
        marks = [(db_key(r.key), name, n, now) for r in scrubbed if db_key(r.key) not in final
                 for name, n in sorted(self._clean.count(r.text or "").items())]
        if marks:
            self._db.execute(_SCRUBBED)
            self._db.executemany(f"INSERT OR REPLACE INTO {SCRUBBED_TABLE} "
                                 "(key, variable, occurrences, at) VALUES (?, ?, ?, ?)", marks)

    def _final_keys(self, keys: Iterable[str]) -> set[bytes | str]:
        """The stored forms of those of ``keys`` that already have a final row."""
        return {k for (k,) in self._select("key", keys, completed_only=True)}

    def _row(self, r: Result, now: float) -> tuple[Any, ...]:
        """The row of a result already scrubbed (:meth:`_as_stored`)."""
        status = _STATUS.get(r.status)
        if status is None:
            raise ValueError(f"result {r.key}: field status: {r.status!r} is not one of "
                             f"{sorted(_STATUS)}")
        text, zipped = _encode_text(r.text if r.status in COMPLETED else None)
        return (db_key(r.key), self._name_id(r.provider), self._name_id(r.model), status, text,
                zipped, self._name_id(r.stop_reason), int(r.refusal), r.input_tokens,
                r.output_tokens, r.cache_read_tokens, r.cache_write_tokens, r.cost, r.latency,
                r.attempts, r.error, self._name_id(r.mode),
                self._config_id(r.config),
                self._name_id(r.tag or None), now)

    def record_spend(self, *, run_id: str | None, provider: str, model: str, key: str | None,
                     mode: str, input_tokens: int, output_tokens: int, cost: float,
                     cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> None:
        """Spend of a call whose result is not stored (e.g. an empty reply that is retried)."""
        self.record_line(run_id, SpendLine(provider, model, key, mode, input_tokens,
                                           output_tokens, cost, cache_read_tokens,
                                           cache_write_tokens))

    def record_line(self, run_id: str | None, line: SpendLine) -> None:
        """One :class:`SpendLine` in the ledger, committed at once."""
        with self._lock, self._write():
            self._insert_line(run_id, line, time.time())

    def _insert_line(self, run_id: str | None, line: SpendLine, now: float) -> None:
        self._db.execute(_LEDGER_INSERT, (
            now, self._name_id(run_id), self._name_id(line.provider), self._name_id(line.model),
            None, None if line.key is None else db_key(line.key), self._name_id(line.mode),
            line.input_tokens, line.output_tokens, line.cache_read_tokens,
            line.cache_write_tokens, line.cost))

    def get(self, key: str) -> Result | None:
        got = self.get_many([key])
        return got.get(key)

    def _select(self, cols: str, keys: Iterable[str], completed_only: bool) -> Iterator[tuple]:
        """Rows for the given keys (chunked IN queries); call with the lock held."""
        stored = list(dict.fromkeys(db_key(k) for k in keys))
        where = f" AND status IN ({', '.join(map(str, _FINAL))})" if completed_only else ""
        for i in range(0, len(stored), 900):
            chunk = stored[i:i + 900]
            yield from self._db.execute(
                f"SELECT {cols} FROM result_rows WHERE key IN "
                f"({','.join('?' * len(chunk))}){where}", chunk)

    def get_many(self, keys: Iterable[str], completed_only: bool = False) -> dict[str, Result]:
        """Rows for the given keys."""
        out: dict[str, Result] = {}
        with self._lock:
            for row in self._select(_READ_COLS, keys, completed_only):
                r = self._result(row)
                out[r.key] = r
        return out

    def _result(self, row: Sequence[Any]) -> Result:
        (key, provider, model, status, text, zipped, stop, refusal, tin, tout, cache_read,
         cache_write, cost, latency, attempts, error, mode, config, tag) = row
        return Result(key=key_str(key), model=self._name(model), provider=self._name(provider),  # type: ignore[arg-type]
                      status=_STATUS_NAME[status], text=_decode_text(text, zipped),  # type: ignore[arg-type]
                      stop_reason=self._name(stop), refusal=bool(refusal), input_tokens=tin,
                      output_tokens=tout, cache_read_tokens=cache_read,
                      cache_write_tokens=cache_write, cost=cost, latency=latency,
                      attempts=attempts, error=error, mode=self._name(mode) or "sync",
                      cached=True, config=self._config(config), tag=self._name(tag) or "")

    def completed_keys(self, keys: Iterable[str]) -> set[str]:
        with self._lock:
            return {key_str(k) for (k,) in self._select("key", keys, completed_only=True)}

    def count(self, status: str | None = None) -> int:
        with self._lock:
            if status is None:
                return self._db.execute("SELECT COUNT(*) FROM result_rows").fetchone()[0]
            if status not in _STATUS:
                return 0
            return self._db.execute("SELECT COUNT(*) FROM result_rows WHERE status = ?",
                                    (_STATUS[status],)).fetchone()[0]

    # ---- ledger
    def spend(self, run_id: str | None = None) -> dict[str, Any]:
        """Total calls, tokens and cost, overall or for one run, with a per-model breakdown."""
        with self._lock:
            return store_ledger.spend(self._db, self._name, run_id)

    def paid_by_run(self, keys: Iterable[str]) -> dict[str, float]:
        """USD the ledger holds for the answers to ``keys``, by the engine run that paid (its
        run id; "" for a line without one): every call bought for them, whichever run of this
        store made it, so a stage run again after an interruption can tell what its earlier
        attempts paid for the answers it reused."""
        with self._lock:
            return store_ledger.paid_by_run(self._db, self._name, keys)

    def spend_by_tag(self) -> list[dict[str, Any]]:
        """The ledger by the tag and model of the result each line paid for, so a caller that
        tags its requests (grading tags each reply's candidate) can say what one part of a run
        cost: calls, cost and the first and last charge (Unix time)."""
        with self._lock:
            return store_ledger.spend_by_tag(self._db, self._name)

    # ---- scrubbed replies
    def scrubbed(self) -> list[dict[str, Any]]:
        """The stored replies whose text had an API key's value replaced, by model, tag and
        variable: ``rows`` (replies) and ``occurrences`` (values replaced); empty when none."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (SCRUBBED_TABLE,)).fetchone() is None:
                return []
            rows = self._db.execute(
                f"SELECT r.model, r.tag, s.variable, COUNT(*), SUM(s.occurrences) FROM "
                f"{SCRUBBED_TABLE} s JOIN result_rows r ON r.key = s.key "
                "GROUP BY r.model, r.tag, s.variable").fetchall()
            found = [{"model": self._name(model), "tag": self._name(tag) or "",
                      "variable": variable, "rows": n, "occurrences": occurrences}
                     for model, tag, variable, n, occurrences in rows]
        return sorted(found, key=lambda e: (e["model"], e["tag"], e["variable"]))

    # ---- batches
    def add_batch(self, batch_id: str, provider: str, model: str, keys: Sequence[str],
                  info: dict[str, Any]) -> None:
        now = time.time()
        # in key order: the batch's members are appended, not scattered
        members = sorted({db_key(k) for k in keys}, key=lambda k: (isinstance(k, bytes), k))
        with self._lock, self._write():
            self._db.execute(
                "INSERT INTO batches (batch_id, provider, model, status, n_items, submitted_at, "
                "updated_at, info) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(batch_id) DO UPDATE SET "
                "provider=excluded.provider, model=excluded.model, status=excluded.status, "
                "n_items=excluded.n_items, submitted_at=excluded.submitted_at, "
                "updated_at=excluded.updated_at, info=excluded.info",
                (batch_id, provider, model, OPEN_BATCH, len(keys), now, now, json.dumps(info)))
            (bid,) = self._db.execute("SELECT id FROM batches WHERE batch_id = ?",
                                      (batch_id,)).fetchone()
            self._db.executemany("INSERT OR IGNORE INTO batch_members (batch, key) VALUES (?, ?)",
                                 [(bid, k) for k in members])

    def set_batch_status(self, batch_id: str, status: str,
                         info: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._mark_batch(batch_id, status, info)

    def _mark_batch(self, batch_id: str, status: str, info: dict[str, Any] | None) -> None:
        if info is None:
            self._db.execute("UPDATE batches SET status = ?, updated_at = ? WHERE batch_id = ?",
                             (status, time.time(), batch_id))
        else:
            self._db.execute(
                "UPDATE batches SET status = ?, updated_at = ?, info = ? WHERE batch_id = ?",
                (status, time.time(), json.dumps(info), batch_id))

    def collect_batch(self, batch_id: str, info: dict[str, Any], results: Sequence[Result],
                      spent: Sequence[SpendLine], run_id: str | None = None) -> list[Result]:
        """A finished batch's answers (with their ledger lines), the ledger lines of the empty
        replies it was billed for, and its mark as collected, in one transaction: a run killed
        before the commit leaves the batch open with none of them written, so the next run
        collects it again and books each billed reply once. Returns the answers as stored."""
        with self._lock, self._write():
            now = time.time()
            stored = self._put_rows(results, run_id, True, now)
            for line in spent:
                self._insert_line(run_id, line, now)
            self._mark_batch(batch_id, COLLECTED_BATCH, info)
        return stored

    def open_batches(self, provider: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT batch_id, provider, model, status, n_items, info FROM batches WHERE status = ?"
        args: tuple[Any, ...] = (OPEN_BATCH,)
        if provider:
            q += " AND provider = ?"
            args += (provider,)
        with self._lock:
            rows = self._db.execute(q + " ORDER BY submitted_at", args).fetchall()
        return [
            {"batch_id": b, "provider": p, "model": m, "status": s, "n_items": n,
             "info": json.loads(i or "{}")}
            for b, p, m, s, n, i in rows
        ]

    def batch_keys(self, batch_id: str) -> list[str]:
        with self._lock:
            return [key_str(k) for (k,) in self._db.execute(
                "SELECT key FROM batch_members WHERE batch = "
                "(SELECT id FROM batches WHERE batch_id = ?)", (batch_id,))]

    def batches(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT batch_id, provider, model, status, n_items FROM batches "
                "ORDER BY submitted_at").fetchall()
        return [{"batch_id": b, "provider": p, "model": m, "status": s, "n_items": n}
                for b, p, m, s, n in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; on any exception ``ROLLBACK`` and forget the name
    and config ids handed out inside it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.store._db.execute("COMMIT")
        else:
            self.store._db.execute("ROLLBACK")
            self.store._forget_uncommitted()
