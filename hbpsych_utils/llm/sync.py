"""The synchronous path: per-provider workers, limiter, retries with back-off.

Per provider, ``concurrency`` workers share a limiter (requests and tokens per minute, evenly
spaced; a 429 pauses the whole provider for its ``Retry-After``). Transport errors, timeouts,
unreadable bodies, 429 and 5xx are retried with jittered exponential back-off up to
``max_attempts``; quota, billing and auth errors stop the run (:class:`ProviderFatalError`)
after what finished is stored; other 4xx are stored as failed. A refusal is stored and never
retried; an empty reply without a refusal stop reason is a paid transport failure
(:meth:`RunContext.pay_for_empty_reply`): retried, never stored as an answer. That includes a
reply cut at its output cap before any text (reasoning tokens count against the cap): paid,
not a refusal, retried, and if it stays empty, stored as failed with the cap named.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from hbpsych_utils.llm.providers import CallError, Reply
from hbpsych_utils.llm.requests import Result
from hbpsych_utils.llm.run_context import Item, ProviderFatalError, RunContext, is_answer

log = logging.getLogger("hbpsych_utils.llm")


async def run_sync(ctx: RunContext, items: Sequence[Item]) -> dict[str, Result]:
    """Answer every item synchronously; returns key -> result (each already committed)."""
    by_provider: dict[str, list[Item]] = {}
    for it in items:
        by_provider.setdefault(it.provider.name, []).append(it)
    results: dict[str, Result] = {}

    async def worker(queue: list[Item]) -> None:
        while queue:
            it = queue.pop()
            if ctx.fatal is not None:
                results[it.key] = ctx.failed(it, "not_run", f"not run: {ctx.fatal}", 0)
                continue
            r = await call_one(ctx, it)
            results[it.key] = r

    tasks = []
    for name, its in by_provider.items():
        queue = list(reversed(its))
        n = min(ctx.settings.limits[name].concurrency, len(its))
        tasks += [asyncio.create_task(worker(queue)) for _ in range(n)]
    await asyncio.gather(*tasks)
    return results


_AT_CAP = {"length", "max_tokens", "MAX_TOKENS"}
"""Stop reasons meaning the output cap was reached (OpenAI, Anthropic, Gemini)."""


def empty_reply_message(reply: Reply) -> str:
    """Why an empty reply is not an answer; at the cap, say that reasoning used it up."""
    msg = f"empty reply (stop reason {reply.stop_reason!r}, no refusal)"
    if reply.stop_reason in _AT_CAP:
        msg += (f": the output cap was reached with no text ({reply.output_tokens} output "
                "tokens; reasoning tokens count against the cap)")
    return msg


async def call_one(ctx: RunContext, it: Item) -> Result:
    """One request through retries; its result is committed before this returns."""
    max_attempts = ctx.settings.max_attempts
    adapter = ctx.adapter(it.provider)
    limiter = ctx.limiter(it.provider)
    est = it.est_cost()
    last_error = ""
    attempt = 0
    while attempt < max_attempts:
        if ctx.fatal is not None:
            r = ctx.failed(it, "not_run", f"not run: {ctx.fatal}", attempt)
            ctx.record([r])
            return r
        if not ctx.budget.try_start(est):
            r = ctx.failed(it, "not_run", ctx.budget.message(), attempt)
            ctx.record([r])
            return r
        attempt += 1
        await limiter.acquire(it.est_in + it.est_out)
        t0 = time.perf_counter()
        err: CallError
        try:
            reply = await adapter.call(it.body)
        except Exception as exc:
            err = adapter.classify(exc)
            ctx.budget.finish(est, 0.0)
        else:
            latency = time.perf_counter() - t0
            if is_answer(reply):
                r = ctx.make_result(it, reply, attempt, latency, "sync")
                ctx.budget.finish(est, r.cost)
                ctx.record([r])
                return r
            ctx.budget.finish(est, ctx.pay_for_empty_reply(it, reply, "sync"))
            err = CallError("transient", empty_reply_message(reply))
        last_error = str(err)
        if err.kind == "fatal":
            ctx.fatal = ProviderFatalError(
                f"provider {it.provider.name} ({it.spec.name}): {err} — stopping the run; "
                "finished calls are stored and will be reused")
            r = ctx.failed(it, "failed", last_error, attempt)
            ctx.record([r])
            return r
        if err.kind == "permanent":
            r = ctx.failed(it, "failed", last_error, attempt)
            ctx.record([r])
            return r
        if attempt < max_attempts:
            delay = ctx.backoff(attempt, err.retry_after)
            if err.status == 429:
                limiter.pause(delay)
            log.debug("retry %s attempt %d in %.2fs: %s", it.key[:12], attempt, delay, err)
            await asyncio.sleep(delay)
    r = ctx.failed(it, "failed", f"gave up after {attempt} attempts: {last_error}", attempt)
    ctx.record([r])
    return r
