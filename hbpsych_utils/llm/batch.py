"""The batch path: OpenAI Batch, Anthropic Message Batches, Gemini batch mode.

For each provider with a batch API: adopt the open batches recorded in the store that hold
keys of this run (a restarted run polls them instead of resubmitting), chunk the rest per model
to the provider's limits (items and bytes), submit each chunk and record its id and keys in the
same transaction, poll until every batch ends, map results back by custom id (the request key:
64 hex characters fits every provider's custom-id rule), store them, and send errored, missing
or empty items through the synchronous path. Requests for providers without a batch API run
synchronously alongside. The same request gives the same stored answer on both paths; only the
price differs (``batch_discount``). Requests arranged for the prompt cache keep their wire body
(OpenAI's hint, Anthropic's breakpoint) and go in two waves
(:func:`~hbpsych_utils.llm.run_context.split_groups`): the first call of every prefix group (with
every ungrouped request), then, once those batches have ended, the rest. Items of one batch run
side by side and none sees another's cache write, so a group's later calls can only read its
prefix from the cache in a later batch.

A batch is paid for once. Reading its status or its results is retried like any call
(bounded, jittered back-off) when the provider answers with a transport error, 429 or 5xx; a
batch whose status or results still cannot be read stays open in the store, its items are
``not_run`` in this run, and the next run adopts and collects it — nothing is re-sent. Only the
items the provider itself reports as errored, expired, cancelled or missing, and the items of a
batch the provider says does not exist or that failed as a whole, go through the synchronous
path. Every answer the provider billed is stored and in the ledger at the batch price, in the
same transaction as the batch's mark as collected, so a run killed between them books nothing
and the next run, collecting the batch again, books each billed reply once.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from hbpsych_utils.llm.providers import CallError, Reply
from hbpsych_utils.llm.requests import Result
from hbpsych_utils.llm.run_context import (
    Item,
    ProviderFatalError,
    RunContext,
    is_answer,
    split_groups,
)
from hbpsych_utils.llm.store import OPEN_BATCH, SpendLine
from hbpsych_utils.llm.sync import run_sync

MAX_POLL_ERRORS = 20
"""Consecutive failed status reads after which a batch is left open for the next run."""
COLLECT_ATTEMPTS = 6
"""Reads of a finished batch's results before it is left open for the next run."""
SUBMIT_ATTEMPTS = 4


def chunk_items(items: list[Item], max_items: int, max_bytes: int) -> list[list[Item]]:
    """Consecutive chunks within a provider's per-batch item and byte limits."""
    chunks: list[list[Item]] = []
    cur: list[Item] = []
    size = 0
    for it in items:
        n = len(json.dumps(it.body, ensure_ascii=False).encode("utf-8")) + 200
        if cur and (len(cur) >= max_items or size + n > max_bytes):
            chunks.append(cur)
            cur, size = [], 0
        cur.append(it)
        size += n
    if cur:
        chunks.append(cur)
    return chunks


async def run_batch(ctx: RunContext, items: list[Item]) -> dict[str, Result]:
    sync_items: list[Item] = []
    by_provider: dict[str, list[Item]] = {}
    for it in items:
        if ctx.adapter(it.provider).supports_batch:  # the registry's flag and the adapter's hooks
            by_provider.setdefault(it.provider.name, []).append(it)
        else:
            sync_items.append(it)
    results: dict[str, Result] = {}
    jobs = [_provider_waves(ctx, name, its, results) for name, its in by_provider.items()]
    if sync_items:
        jobs.append(_sync_into(ctx, sync_items, results))
    await asyncio.gather(*jobs)
    return results


async def _provider_waves(ctx: RunContext, provider: str, items: list[Item],
                          results: dict[str, Result]) -> None:
    first, later = split_groups(items)
    await _provider_batches(ctx, provider, first, results)
    if later:
        await _provider_batches(ctx, provider, later, results)


async def _sync_into(ctx: RunContext, items: list[Item], results: dict[str, Result]) -> None:
    results.update(await run_sync(ctx, items))


async def _provider_batches(ctx: RunContext, provider: str, items: list[Item],
                            results: dict[str, Result]) -> None:
    """Adopt this provider's open batches that hold these items, submit the rest in chunks,
    collect every batch, and send what no batch answered through the synchronous path."""
    adapter = ctx.adapter(items[0].provider)
    by_key = {it.key: it for it in items}
    tracked = _adopt(ctx, provider, by_key)
    covered = {k for b in tracked for k in b["keys"]}
    fallback: list[Item] = []
    by_model: dict[str, list[Item]] = {}
    for it in items:
        if it.key not in covered:
            by_model.setdefault(it.body["model"], []).append(it)
    for model, its in by_model.items():
        for chunk in chunk_items(its, adapter.max_batch_items, adapter.max_batch_bytes):
            submitted, unsent = await _send_chunk(ctx, adapter, provider, model, chunk, results)
            tracked += [submitted] if submitted is not None else []
            fallback += unsent
    outs = await asyncio.gather(*[_finish(ctx, adapter, b, by_key, results) for b in tracked])
    for out in outs:
        fallback.extend(out)
    if fallback and ctx.fatal is None:
        ctx.report.fallback += len(fallback)
        results.update(await run_sync(ctx, fallback))
    elif fallback:
        _not_run(ctx, fallback, results, f"not run: {ctx.fatal}")


def _adopt(ctx: RunContext, provider: str, by_key: dict[str, Item]) -> list[dict[str, Any]]:
    """The provider's open batches (oldest first) that hold keys of this run, each with the
    keys it holds that no earlier one claimed: polled and collected, never sent again."""
    tracked: list[dict[str, Any]] = []
    covered: set[str] = set()
    for b in ctx.store.open_batches(provider):
        keys = [k for k in ctx.store.batch_keys(b["batch_id"])
                if k in by_key and k not in covered]
        if keys:
            covered.update(keys)
            tracked.append({**b, "keys": keys, "reserved": 0.0, "submitted": time.time()})
            ctx.report.batches.append(b["batch_id"])
    return tracked


async def _send_chunk(ctx: RunContext, adapter: Any, provider: str, model: str,
                      chunk: list[Item], results: dict[str, Result]
                      ) -> tuple[dict[str, Any] | None, list[Item]]:
    """Submit one chunk as a batch, recorded in the store: its record to track, or ``None``
    and the items for the synchronous path (a submission that failed). Not sent at all when an
    error stopped the run or the budget cannot cover it (its items are ``not_run``)."""
    if ctx.fatal is not None:
        _not_run(ctx, chunk, results, f"not run: {ctx.fatal}")
        return None, []
    est = sum(it.est_cost(batch=True) for it in chunk)
    if not ctx.budget.try_reserve(est):
        _not_run(ctx, chunk, results, ctx.budget.message())
        return None, []
    submitted = await _submit(ctx, adapter, model, chunk)
    if submitted is None:
        ctx.budget.finish(est, 0.0)
        return None, chunk
    bid, info = submitted
    keys = [it.key for it in chunk]
    ctx.store.add_batch(bid, provider, model, keys, info)
    ctx.report.batches.append(bid)
    # the same fields as an adopted batch (Store.open_batches), so messages name both
    return {"batch_id": bid, "provider": provider, "model": model, "info": info, "keys": keys,
            "reserved": est, "submitted": time.time()}, []


def _not_run(ctx: RunContext, items: list[Item], results: dict[str, Result], why: str) -> None:
    rs = ctx.record([ctx.failed(it, "not_run", why, 0, "batch") for it in items])
    results.update({r.key: r for r in rs})


async def _submit(ctx: RunContext, adapter: Any, model: str, chunk: list[Item]
                  ) -> tuple[str, dict[str, Any]] | None:
    for attempt in range(1, SUBMIT_ATTEMPTS + 1):
        try:
            return await adapter.batch_submit(model, [(it.key, it.body) for it in chunk])
        except Exception as exc:
            err = adapter.classify(exc, model_call=False)
            if err.kind == "fatal":
                ctx.fatal = ProviderFatalError(
                    f"provider {chunk[0].provider.name}: batch submission: {err}")
                return None
            if err.kind == "permanent" or attempt == SUBMIT_ATTEMPTS:
                return None  # the chunk goes through the synchronous path
            await asyncio.sleep(ctx.backoff(attempt, err.retry_after))
    return None


async def _finish(ctx: RunContext, adapter: Any, b: dict[str, Any], by_key: dict[str, Item],
                  results: dict[str, Result]) -> list[Item]:
    """Poll one batch to its end, store its answers; return the items that need sync calls."""
    items = [by_key[k] for k in b["keys"]]
    outcome, info = await _poll(ctx, adapter, b)
    replies: dict[str, Reply | CallError] | None = None
    problem = outcome
    if outcome == "done":
        replies, problem = await _collect(ctx, adapter, b["batch_id"], info)
    if outcome == "gone" or replies is None:
        return _uncollected(ctx, b, info, items, results, problem, gone=outcome == "gone")
    stored, spent, fallback = _sort_replies(ctx, b, items, replies,
                                            time.time() - b["submitted"])
    # answers, billed empty replies and the collected mark: one transaction
    stored = ctx.record_batch(b["batch_id"], info, stored, spent)  # as stored: scrubbed of keys
    results.update({r.key: r for r in stored})
    ctx.budget.finish(b["reserved"], sum(r.cost for r in stored) + sum(x.cost for x in spent))
    return fallback


def _uncollected(ctx: RunContext, b: dict[str, Any], info: dict[str, Any], items: list[Item],
                 results: dict[str, Result], problem: str, *, gone: bool) -> list[Item]:
    """A batch without readable results. One the provider does not know (``gone``) billed
    nothing: it is abandoned and its items re-sent. Otherwise its status or results could not
    be read: it stays open for the next run, and its items are ``not_run`` in this one."""
    bid = b["batch_id"]
    ctx.store.set_batch_status(bid, "abandoned" if gone else OPEN_BATCH, info)
    ctx.budget.finish(b["reserved"], 0.0)
    if gone:
        return items
    ctx.report.uncollected += len(items)
    _not_run(ctx, items, results,
             f"batch {bid} ({b['provider']}): {problem}; it stays open and the next "
             "run collects it")
    return []


def _sort_replies(ctx: RunContext, b: dict[str, Any], items: list[Item],
                  replies: dict[str, Reply | CallError], turnaround: float
                  ) -> tuple[list[Result], list[SpendLine], list[Item]]:
    """A collected batch's replies as the answers to store, the ledger lines of the empty
    replies it billed, and the items for the synchronous path (errored, expired, missing or
    empty); a fatal item error stops the run."""
    stored: list[Result] = []
    spent: list[SpendLine] = []
    fallback: list[Item] = []
    for it in items:
        rep = replies.get(it.key)
        if isinstance(rep, Reply) and is_answer(rep):
            stored.append(ctx.make_result(it, rep, 1, turnaround, "batch"))
            continue
        if isinstance(rep, Reply):  # empty without refusal: paid for, retried synchronously
            line = ctx.empty_reply_line(it, rep, "batch")
            spent += [line] if line is not None else []
        if isinstance(rep, CallError) and rep.kind == "fatal" and ctx.fatal is None:
            ctx.fatal = ProviderFatalError(
                f"provider {b['provider']} ({it.spec.name}): batch {b['batch_id']}: {rep} — "
                "stopping the run; finished calls are stored and will be reused")
        # errored or expired (CallError), missing (None) or empty: the synchronous path, unless
        # an error stopped the run (then they are not run)
        fallback.append(it)
    return stored, spent, fallback


async def _poll(ctx: RunContext, adapter: Any, b: dict[str, Any]
                ) -> tuple[str, dict[str, Any]]:
    """Wait for the batch to end: ``done``, ``gone`` (the provider does not know it), or why its
    status could not be read (then it stays open)."""
    bid, info = b["batch_id"], dict(b.get("info") or {})
    errors = 0
    while True:
        try:
            done, info = await adapter.batch_poll(bid, info)
            errors = 0
        except Exception as exc:
            err = adapter.classify(exc, model_call=False)
            if err.kind == "fatal":
                ctx.fatal = ctx.fatal or ProviderFatalError(
                    f"provider {b['provider']}: batch status: {err}")
                return f"status unreadable ({err})", info
            if err.kind == "permanent":
                return ("gone", info) if err.status == 404 else (
                    f"status refused ({err})", info)
            errors += 1
            if errors >= MAX_POLL_ERRORS:
                return f"status unreadable after {errors} attempts ({err})", info
            await asyncio.sleep(ctx.backoff(errors, err.retry_after))
            continue
        if done:
            return "done", info
        await asyncio.sleep(ctx.settings.poll_interval)


async def _collect(ctx: RunContext, adapter: Any, bid: str, info: dict[str, Any]
                   ) -> tuple[dict[str, Reply | CallError] | None, str]:
    """A finished batch's results, read again after transient failures (a partly read results
    stream is read again from the start); ``None`` and the reason when they stay unreadable."""
    for attempt in range(1, COLLECT_ATTEMPTS + 1):
        try:
            return await adapter.batch_collect(bid, info), ""
        except Exception as exc:
            err = adapter.classify(exc, model_call=False)
            if err.kind == "fatal":
                ctx.fatal = ctx.fatal or ProviderFatalError(f"batch {bid}: results: {err}")
                return None, f"results unreadable ({err})"
            if err.kind == "permanent" or attempt == COLLECT_ATTEMPTS:
                return None, f"results unreadable after {attempt} attempt(s) ({err})"
            await asyncio.sleep(ctx.backoff(attempt, err.retry_after))
    return None, "results unreadable"
