"""The synchronous path: per-provider workers, limiter, retries with back-off.

Per provider, ``concurrency`` workers share a limiter (requests and tokens per minute, evenly
spaced; a 429 pauses the whole provider for its ``Retry-After``). Transport errors, timeouts,
unreadable bodies, 429 and 5xx are retried with jittered exponential back-off up to
``max_attempts``; an account-level error (quota, billing, key, a disabled organisation, an
unserved location, a model that does not exist: :func:`.providers.base.classify_error`) stops
the run (:class:`ProviderFatalError`) after what finished is stored; other 4xx are stored as
failed. A refusal is stored and never
retried; an empty reply without a refusal stop reason is a paid transport failure
(:meth:`RunContext.pay_for_empty_reply`): retried, never stored as an answer. That includes a
reply cut at its output cap before any text (reasoning tokens count against the cap): paid,
not a refusal, retried, and if it stays empty, stored as failed with the cap named.

Requests arranged for the providers' prompt caches (``Item.group``) go group by group: the first
call of a group alone, the rest once it has returned (:class:`SendQueue`); groups run side by
side. Everything else goes in request order, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence

from hbpsych_utils.llm.providers import CallError, Reply
from hbpsych_utils.llm.requests import Result
from hbpsych_utils.llm.run_context import (
    Item,
    ProviderFatalError,
    RunContext,
    is_answer,
    split_groups,
)

log = logging.getLogger("hbpsych_utils.llm")


async def run_sync(ctx: RunContext, items: Sequence[Item]) -> dict[str, Result]:
    """Answer every item synchronously; returns key -> result (each already committed)."""
    by_provider: dict[str, list[Item]] = {}
    for it in items:
        by_provider.setdefault(it.provider.name, []).append(it)
    results: dict[str, Result] = {}

    async def worker(queue: SendQueue) -> None:
        while (it := await queue.next()) is not None:
            try:
                if ctx.fatal is not None:
                    results[it.key] = ctx.failed(it, "not_run", f"not run: {ctx.fatal}", 0)
                else:
                    results[it.key] = await call_one(ctx, it)
            finally:
                await queue.done(it)

    tasks = []
    for name, its in by_provider.items():
        queue = SendQueue(its)
        n = min(ctx.settings.limits[name].concurrency, len(its))
        tasks += [asyncio.create_task(worker(queue)) for _ in range(n)]
    await asyncio.gather(*tasks)
    return results


class SendQueue:
    """One provider's items in the order they are sent, for its workers to share.

    Items outside a prefix group go in request order. Of a prefix group (``Item.group``: calls
    arranged for the prompt cache that share a prefix), the first item goes when its turn
    comes and the others wait until it has returned (answered, failed or not run), so that the
    provider's cache holds the prefix when they are sent; they then go ahead of items not yet
    started, while the cache is warm. Groups run concurrently, each led by its first item.
    """

    def __init__(self, items: Sequence[Item]) -> None:
        first, later = split_groups(items)
        self._ready: deque[Item] = deque(first)
        # the first item of every group that has not returned yet, and what waits for it
        self._leaders = {it.key for it in first if it.group is not None}
        self._waiting: dict[str, list[Item]] = {}
        for it in later:
            self._waiting.setdefault(str(it.group), []).append(it)
        self._changed = asyncio.Condition()

    async def next(self) -> Item | None:
        """The next item to send; None once every item has been handed out."""
        async with self._changed:
            while not self._ready and self._leaders:
                await self._changed.wait()
            return self._ready.popleft() if self._ready else None

    async def done(self, it: Item) -> None:
        """``it`` has returned: if it led a group, the rest of the group may go now."""
        if it.key not in self._leaders:
            return
        async with self._changed:
            self._leaders.discard(it.key)
            self._ready.extendleft(reversed(self._waiting.pop(str(it.group), [])))
            self._changed.notify_all()


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
            return ctx.record([r])[0]
        if not ctx.budget.try_start(est):
            r = ctx.failed(it, "not_run", ctx.budget.message(), attempt)
            return ctx.record([r])[0]
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
                return ctx.record([r])[0]
            ctx.budget.finish(est, ctx.pay_for_empty_reply(it, reply, "sync"))
            err = CallError("transient", empty_reply_message(reply))
        last_error = str(err)
        if err.kind == "fatal":
            ctx.fatal = ProviderFatalError(
                f"provider {it.provider.name} ({it.spec.name}): {err} — stopping the run; "
                "finished calls are stored and will be reused")
            r = ctx.failed(it, "failed", last_error, attempt)
            return ctx.record([r])[0]
        if err.kind == "permanent":
            r = ctx.failed(it, "failed", last_error, attempt)
            return ctx.record([r])[0]
        if attempt < max_attempts:
            delay = ctx.backoff(attempt, err.retry_after)
            if err.status == 429:
                limiter.pause(delay)
            log.debug("retry %s attempt %d in %.2fs: %s", it.key[:12], attempt, delay, err)
            await asyncio.sleep(delay)
    r = ctx.failed(it, "failed", f"gave up after {attempt} attempts: {last_error}", attempt)
    return ctx.record([r])[0]
