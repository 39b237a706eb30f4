"""What a store's ledger says was paid: totals and the per-model breakdown (overall or for one
engine run), the USD paid for given answers by the run that paid, and the cost by tag.

Every function reads the store's connection with its lock held by the caller
(:class:`.store.Store`'s methods of the same names); ``name`` is the store's reader of the ids
in ``names``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from hbpsych_utils.llm.store_schema import db_key

Name = Callable[[int | None], str | None]
"""The name of an id of the ``names`` table (``None`` for ``None``)."""

TOTALS = ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
"""The counts :func:`spend` sums over its per-model rows (``cost`` is summed and rounded)."""


def spend(db: sqlite3.Connection, name: Name, run_id: str | None = None) -> dict[str, Any]:
    """Total calls, tokens and cost, overall or for one run, with a per-model breakdown
    (``by_model``: provider, model and mode, in that order; a mode-less line first)."""
    by_model = [
        {"provider": p, "model": m, "mode": mo, "calls": n, "input_tokens": ti or 0,
         "output_tokens": to or 0, "cache_read_tokens": cr or 0,
         "cache_write_tokens": cw or 0, "cost": round(c or 0.0, 6)}
        for p, m, mo, n, ti, to, cr, cw, c in _by_model(db, name, run_id)
    ]
    totals: dict[str, Any] = {k: sum(r[k] for r in by_model) for k in TOTALS}
    return {**totals, "cost": round(sum(r["cost"] for r in by_model), 6), "by_model": by_model}


def _by_model(db: sqlite3.Connection, name: Name, run_id: str | None) -> list[tuple[Any, ...]]:
    """The ledger's sums per (provider, model, mode), named and sorted."""
    where: str = ""
    args: tuple[Any, ...] = ()
    if run_id:
        got = db.execute("SELECT id FROM names WHERE name = ?", (run_id,)).fetchone()
        where, args = "WHERE run = ?", (got[0] if got else -1,)
    rows = db.execute(
        "SELECT provider, model, mode, COUNT(*), SUM(input_tokens), SUM(output_tokens), "
        "SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(cost) "
        f"FROM ledger_lines {where} GROUP BY provider, model, mode", args).fetchall()
    named = [(name(p), name(m), name(mo), *rest) for p, m, mo, *rest in rows]
    named.sort(key=lambda r: (r[0], r[1], r[2] is not None, r[2] or ""))
    return named


def paid_by_run(db: sqlite3.Connection, name: Name, keys: Iterable[str]) -> dict[str, float]:
    """USD the ledger holds for the answers to ``keys``, by the engine run that paid (its
    run id; "" for a line without one). A line without a stored result of its own (an empty
    reply, retried) counts under its key."""
    wanted = {db_key(k) for k in keys}
    out: dict[str, float] = {}
    rows = db.execute(
        "SELECT l.run, COALESCE(l.key, r.key), l.cost FROM ledger_lines l "
        "LEFT JOIN result_rows r ON r.id = l.result").fetchall()
    for run, key, cost in rows:
        if key in wanted:
            run_name = name(run) or ""
            out[run_name] = out.get(run_name, 0.0) + cost
    return out


def spend_by_tag(db: sqlite3.Connection, name: Name) -> list[dict[str, Any]]:
    """The ledger by the tag and model of the result each line paid for: calls, cost and the
    first and last charge (Unix time). A line without a stored result of its own counts under
    its key's result; one whose key never got a result has tag ``""``."""
    rows = db.execute(
        "SELECT r.tag, COALESCE(r.model, l.model), COUNT(*), SUM(l.cost), MIN(l.ts), "
        "MAX(l.ts) FROM ledger_lines l LEFT JOIN result_rows r ON r.id = "
        "COALESCE(l.result, (SELECT id FROM result_rows WHERE key = l.key)) "
        "GROUP BY r.tag, COALESCE(r.model, l.model)").fetchall()
    return [{"tag": name(tag) or "", "model": name(model), "calls": n,
             "cost": round(cost or 0.0, 6), "first_ts": first, "last_ts": last}
            for tag, model, n, cost, first, last in rows]
