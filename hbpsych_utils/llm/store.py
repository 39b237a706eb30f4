"""Content-addressed SQLite store of model calls: what makes every run resumable and idempotent.

One row per request key. A row whose status is ``ok`` or ``refused`` is final: it is never
overwritten and its key is never requested again. ``failed`` rows keep the last error and are
retried by the next run. Open provider batches and their items are recorded so a restarted run
polls them instead of resubmitting. A ledger keeps every paid call.

WAL journal with ``synchronous=NORMAL``: each commit survives a killed process (``kill -9``);
only an operating-system crash can lose the last commits, and nothing already committed is
ever rewritten. Writes are grouped in transactions by the caller (``put_many``) so that
hundreds of thousands of rows do not cost one fsync each. API keys are never written here.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hbpsych_utils.llm.requests import COMPLETED, Result

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    text TEXT,
    stop_reason TEXT,
    refusal INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    latency REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    mode TEXT,
    config TEXT,
    tag TEXT,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_results_status ON results(status);
CREATE INDEX IF NOT EXISTS ix_results_model ON results(model);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    n_items INTEGER NOT NULL,
    submitted_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    info TEXT
);
CREATE INDEX IF NOT EXISTS ix_batches_status ON batches(status);
CREATE TABLE IF NOT EXISTS batch_items (
    batch_id TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (batch_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_batch_items_key ON batch_items(key);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    run_id TEXT,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    key TEXT,
    mode TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_ledger_run ON ledger(run_id);
"""

_COLS = ("key", "provider", "model", "status", "text", "stop_reason", "refusal", "input_tokens",
         "output_tokens", "cost", "latency", "attempts", "error", "mode", "config", "tag",
         "updated_at")

# A final row (ok/refused) is never replaced; anything else may be.
_UPSERT = (
    f"INSERT INTO results ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))}) "
    "ON CONFLICT(key) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in _COLS[1:])
    + " WHERE results.status NOT IN ('ok', 'refused')"
)

OPEN_BATCH = "open"


class Store:
    """A SQLite file; safe to share between the engine's threads (one connection + a lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                   timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)

    # ---- results
    def put(self, result: Result, run_id: str | None = None, ledger: bool = True) -> None:
        self.put_many([result], run_id=run_id, ledger=ledger)

    def put_many(self, results: Sequence[Result], run_id: str | None = None,
                 ledger: bool = True) -> None:
        """Write results (and their spend) in one transaction."""
        if not results:
            return
        now = time.time()
        rows = [_row(r, now) for r in results]
        paid = [
            (now, run_id, r.provider, r.model, r.key, r.mode, r.input_tokens, r.output_tokens,
             r.cost)
            for r in results if ledger and (r.cost or r.input_tokens or r.output_tokens)
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(_UPSERT, rows)
                if paid:
                    self._db.executemany(
                        "INSERT INTO ledger (ts, run_id, provider, model, key, mode, "
                        "input_tokens, output_tokens, cost) VALUES (?,?,?,?,?,?,?,?,?)", paid)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def record_spend(self, *, run_id: str | None, provider: str, model: str, key: str | None,
                     mode: str, input_tokens: int, output_tokens: int, cost: float) -> None:
        """Spend of a call whose result is not stored (e.g. an empty reply that is retried)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO ledger (ts, run_id, provider, model, key, mode, input_tokens, "
                "output_tokens, cost) VALUES (?,?,?,?,?,?,?,?,?)",
                (time.time(), run_id, provider, model, key, mode, input_tokens, output_tokens,
                 cost))

    def get(self, key: str) -> Result | None:
        got = self.get_many([key])
        return got.get(key)

    def get_many(self, keys: Iterable[str], completed_only: bool = False) -> dict[str, Result]:
        """Rows for the given keys (chunked IN queries)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, Result] = {}
        where = " AND status IN ('ok','refused')" if completed_only else ""
        with self._lock:
            for i in range(0, len(keys), 900):
                chunk = keys[i:i + 900]
                q = (f"SELECT {', '.join(_COLS)} FROM results WHERE key IN "
                     f"({','.join('?' * len(chunk))}){where}")
                for row in self._db.execute(q, chunk):
                    r = _result(row)
                    out[r.key] = r
        return out

    def completed_keys(self, keys: Iterable[str]) -> set[str]:
        return set(self.get_many(keys, completed_only=True))

    def count(self, status: str | None = None) -> int:
        with self._lock:
            if status is None:
                return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            return self._db.execute(
                "SELECT COUNT(*) FROM results WHERE status = ?", (status,)).fetchone()[0]

    # ---- ledger
    def spend(self, run_id: str | None = None) -> dict[str, Any]:
        """Total calls, tokens and cost, overall or for one run, with a per-model breakdown."""
        where, args = ("WHERE run_id = ?", (run_id,)) if run_id else ("", ())
        with self._lock:
            rows = self._db.execute(
                "SELECT provider, model, mode, COUNT(*), SUM(input_tokens), SUM(output_tokens), "
                f"SUM(cost) FROM ledger {where} GROUP BY provider, model, mode "
                "ORDER BY provider, model, mode", args).fetchall()
        by_model = [
            {"provider": p, "model": m, "mode": mo, "calls": n, "input_tokens": ti or 0,
             "output_tokens": to or 0, "cost": round(c or 0.0, 6)}
            for p, m, mo, n, ti, to, c in rows
        ]
        return {
            "calls": sum(r["calls"] for r in by_model),
            "input_tokens": sum(r["input_tokens"] for r in by_model),
            "output_tokens": sum(r["output_tokens"] for r in by_model),
            "cost": round(sum(r["cost"] for r in by_model), 6),
            "by_model": by_model,
        }

    # ---- batches
    def add_batch(self, batch_id: str, provider: str, model: str, keys: Sequence[str],
                  info: dict[str, Any]) -> None:
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO batches (batch_id, provider, model, status, n_items, "
                    "submitted_at, updated_at, info) VALUES (?,?,?,?,?,?,?,?)",
                    (batch_id, provider, model, OPEN_BATCH, len(keys), now, now,
                     json.dumps(info)))
                self._db.executemany(
                    "INSERT OR IGNORE INTO batch_items (batch_id, key) VALUES (?, ?)",
                    [(batch_id, k) for k in keys])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def set_batch_status(self, batch_id: str, status: str,
                         info: dict[str, Any] | None = None) -> None:
        with self._lock:
            if info is None:
                self._db.execute(
                    "UPDATE batches SET status = ?, updated_at = ? WHERE batch_id = ?",
                    (status, time.time(), batch_id))
            else:
                self._db.execute(
                    "UPDATE batches SET status = ?, updated_at = ?, info = ? WHERE batch_id = ?",
                    (status, time.time(), json.dumps(info), batch_id))

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
            return [r[0] for r in self._db.execute(
                "SELECT key FROM batch_items WHERE batch_id = ?", (batch_id,))]

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


def _row(r: Result, now: float) -> tuple[Any, ...]:
    text = r.text if r.status in COMPLETED else None
    return (r.key, r.provider, r.model, r.status, text, r.stop_reason, int(r.refusal),
            r.input_tokens, r.output_tokens, r.cost, r.latency, r.attempts, r.error, r.mode,
            json.dumps(r.config, sort_keys=True), r.tag, now)


def _result(row: Sequence[Any]) -> Result:
    (key, provider, model, status, text, stop, refusal, tin, tout, cost, latency, attempts,
     error, mode, config, tag, _updated) = row
    return Result(key=key, model=model, provider=provider, status=status, text=text,
                  stop_reason=stop, refusal=bool(refusal), input_tokens=tin, output_tokens=tout,
                  cost=cost, latency=latency, attempts=attempts, error=error, mode=mode or "sync",
                  cached=True, config=json.loads(config or "{}"), tag=tag or "")
