"""What the sync and batch paths of one run share: the resolved items, the run's settings,
limiters, budget, progress and report, and the bookkeeping of results and spend.

The engine (:mod:`.engine`) resolves requests into :class:`Item` objects and builds one
:class:`RunContext` per run; the sync path (:mod:`.sync`) and the batch path (:mod:`.batch`)
only talk to the context, so neither needs the engine and nothing imports in a circle.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hbpsych_utils.llm.cost import Budget, call_cost
from hbpsych_utils.llm.models import ModelSpec, ProviderSpec
from hbpsych_utils.llm.providers import Adapter, Reply
from hbpsych_utils.llm.requests import Request, Result
from hbpsych_utils.llm.store import SpendLine, Store

CallMode = Literal["sync", "batch"]


class ProviderFatalError(RuntimeError):
    """An account-level failure (quota, billing, key, organisation, location, model): the run
    stopped after the call that met it; finished work is stored."""


@dataclass
class Limits:
    """A provider's client-side limits: parallel calls, requests and tokens per minute."""

    concurrency: int
    rpm: float | None
    tpm: float | None


@dataclass
class Item:
    """One unique request, resolved: what is sent, where, and what it is expected to cost."""

    key: str
    request: Request
    spec: ModelSpec
    provider: ProviderSpec
    body: dict[str, Any]
    decoding: dict[str, Any]
    est_in: int
    est_out: int
    positions: list[int] = field(default_factory=list)
    group: str | None = None
    """Requests arranged for the prompt cache that share a prefix, on one model, have the same
    group: the sync path sends one of them first and the others once it has returned; the
    batch path sends the first of each group in one wave and the others in the next."""

    def est_cost(self, batch: bool = False) -> float:
        return call_cost(self.spec.price, self.est_in, self.est_out, batch)

    @property
    def config(self) -> dict[str, Any]:
        """What a result records as sent: the decoding parameters, and the model's cache mode
        (``prompt_caching``) when the request was arranged for the provider's prompt cache."""
        if self.group is None:
            return self.decoding
        return {**self.decoding, "prompt_caching": self.spec.cache_mode}


def split_groups(items: Sequence[Item]) -> tuple[list[Item], list[Item]]:
    """The items that can go at once (requests in no prefix group, and the first of each
    group) and those that wait for their group's first call to return (the rest of every
    group), each in request order. One split for both paths: the sync queue holds the second
    list back group by group, the batch path sends it as a second wave of batches."""
    first: list[Item] = []
    later: list[Item] = []
    seen: set[str] = set()
    for it in items:
        if it.group is not None and it.group in seen:
            later.append(it)
        else:
            first.append(it)
            if it.group is not None:
                seen.add(it.group)
    return first, later


@dataclass
class RunReport:
    """What the last run did (also handy for the run manifest)."""

    run_id: str
    mode: str
    plan: dict[str, Any]
    done: int = 0
    cached: int = 0
    """Answered from the store: already paid for, sent nowhere."""
    failed: int = 0
    refused: int = 0
    not_run: int = 0
    """Not sent: the spend cap was reached, or a provider error stopped the run."""
    spend: float = 0.0
    stopped_by_budget: bool = False
    message: str = ""
    batches: list[str] = field(default_factory=list)
    fallback: int = 0
    """Batch items answered through the synchronous path (errored, expired or missing)."""
    uncollected: int = 0
    """Items of batches left open because their status or results could not be read; the next
    run collects them (they are ``not_run`` in this one)."""
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Model -> what this run paid for (paid empty replies included): ``spend_usd``,
    ``input_tokens`` (every prompt token), ``cache_read_tokens``, ``cache_write_tokens``."""

    def count_paid(self, model: str, cost: float, input_tokens: int, cache_read: int,
                   cache_write: int) -> None:
        row = self.by_model.setdefault(model, {
            "spend_usd": 0.0, "input_tokens": 0, "cache_read_tokens": 0,
            "cache_write_tokens": 0})
        row["spend_usd"] += cost
        row["input_tokens"] += input_tokens
        row["cache_read_tokens"] += cache_read
        row["cache_write_tokens"] += cache_write

    @property
    def cache_read_tokens(self) -> int:
        return sum(r["cache_read_tokens"] for r in self.by_model.values())

    @property
    def cache_write_tokens(self) -> int:
        return sum(r["cache_write_tokens"] for r in self.by_model.values())


@dataclass(frozen=True)
class RunSettings:
    """What the workers of a run need from the engine that started it.

    ``connect`` builds a provider's adapter (the engine supplies key, base URL and timeout), so
    keys stay inside the engine and the SDK clients.
    """

    store: Store
    limits: Mapping[str, Limits]
    max_attempts: int
    backoff_base: float
    backoff_max: float
    poll_interval: float
    connect: Callable[[ProviderSpec], Adapter]


class Limiter:
    """Evenly spaced requests (rpm) and a token allowance (tpm), with a shared pause."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.interval = 60.0 / rpm if rpm else 0.0
        self.next_at = 0.0
        self.tpm = tpm
        self.tokens = (tpm / 6.0) if tpm else 0.0  # up to ten seconds' worth at once
        self.refilled = time.monotonic()
        self.paused_until = 0.0

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)

    async def acquire(self, tokens: int) -> None:
        while True:
            now = time.monotonic()
            if self.paused_until > now:
                await asyncio.sleep(self.paused_until - now)
                continue
            wait = 0.0
            if self.interval:
                slot = max(now, self.next_at)
                self.next_at = slot + self.interval
                wait = slot - now
            if self.tpm:
                rate = self.tpm / 60.0
                self.tokens = min(self.tpm / 6.0, self.tokens + (now - self.refilled) * rate)
                self.refilled = now
                self.tokens -= tokens
                if self.tokens < 0:
                    wait = max(wait, -self.tokens / rate)
            if wait > 0:
                await asyncio.sleep(wait)
                if self.paused_until > time.monotonic():
                    continue
            return


class Progress:
    """tqdm (notebook-aware) with done / cached / failed / spend, throttled postfix updates."""

    def __init__(self, total: int, cached: int, enabled: bool, desc: str) -> None:
        self.bar = None
        self.done = self.failed = self.refused = self.not_run = 0
        self.cached = cached
        self.spend = 0.0
        self._last = 0.0
        if enabled and total:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=cached, desc=desc, unit="call", mininterval=0.5)
            self._postfix(force=True)

    def add(self, r: Result) -> None:
        if r.status == "ok":
            self.done += 1
        elif r.status == "refused":
            self.done += 1
            self.refused += 1
        elif r.status == "failed":
            self.failed += 1
        else:
            self.not_run += 1
        self.spend += r.cost
        if self.bar is not None:
            self.bar.update(1)
            self._postfix()

    def _postfix(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.bar is None or (not force and now - self._last < 0.5):
            return
        self._last = now
        self.bar.set_postfix(done=self.done, cached=self.cached, failed=self.failed,
                             spend=f"${self.spend:.4f}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self._postfix(force=True)
            self.bar.close()


def is_answer(reply: Reply) -> bool:
    """A reply worth storing: some text, or a refusal. An empty reply without a refusal stop
    reason is a transport failure, whatever the status code said."""
    return bool(reply.text or reply.refusal)


class RunContext:
    """State shared by the workers of one run (sync and batch paths alike)."""

    def __init__(self, settings: RunSettings, run_id: str, budget: Budget, progress: Progress,
                 report: RunReport) -> None:
        self.settings = settings
        self.store = settings.store
        self.run_id = run_id
        self.budget = budget
        self.progress = progress
        self.report = report
        self.adapters: dict[str, Adapter] = {}
        self.limiters: dict[str, Limiter] = {}
        self.fatal: ProviderFatalError | None = None

    def adapter(self, p: ProviderSpec) -> Adapter:
        if p.name not in self.adapters:
            self.adapters[p.name] = self.settings.connect(p)
        return self.adapters[p.name]

    def limiter(self, p: ProviderSpec) -> Limiter:
        if p.name not in self.limiters:
            lim = self.settings.limits[p.name]
            self.limiters[p.name] = Limiter(lim.rpm, lim.tpm)
        return self.limiters[p.name]

    async def close(self) -> None:
        for a in self.adapters.values():
            with contextlib.suppress(Exception):
                await a.aclose()

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Jittered exponential back-off, never shorter than the provider's Retry-After."""
        s = self.settings
        delay = min(s.backoff_max, s.backoff_base * (2 ** (attempt - 1)))
        delay *= random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return delay

    # ---- results
    def make_result(self, it: Item, reply: Reply, attempts: int, latency: float,
                    mode: CallMode) -> Result:
        cost = reply_cost(it, reply, mode)
        return Result(key=it.key, model=it.spec.name, provider=it.provider.name,
                      status="refused" if reply.refusal else "ok", text=reply.text,
                      stop_reason=reply.stop_reason, refusal=reply.refusal,
                      input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                      cache_read_tokens=reply.cache_read_tokens,
                      cache_write_tokens=reply.cache_write_tokens, cost=cost, latency=latency,
                      attempts=attempts, mode=mode, config=it.config, tag=it.request.tag,
                      metadata=it.request.metadata)

    def failed(self, it: Item, status: str, error: str, attempts: int, mode: CallMode = "sync"
               ) -> Result:
        return Result(key=it.key, model=it.spec.name, provider=it.provider.name,
                      status=status, error=error, attempts=attempts, mode=mode,  # type: ignore[arg-type]
                      config=it.config, tag=it.request.tag, metadata=it.request.metadata)

    def record(self, results: Sequence[Result]) -> list[Result]:
        """Commit results (one transaction) and count them; return them as stored (scrubbed of
        API keys, ``Store.put_many``), which is what the run hands back."""
        kept = iter(self.store.put_many([r for r in results if r.status != "not_run"],
                                        run_id=self.run_id))
        stored = [r if r.status == "not_run" else next(kept) for r in results]
        self._count(stored)
        return stored

    def record_batch(self, batch_id: str, info: dict[str, Any], results: Sequence[Result],
                     spent: Sequence[SpendLine]) -> list[Result]:
        """Commit a finished batch — its answers, the ledger lines of the empty replies it was
        billed for, its mark as collected — in one transaction (``Store.collect_batch``), then
        count them: a crash before the commit books nothing, so nothing is booked twice.
        Returns the answers as stored."""
        stored = self.store.collect_batch(batch_id, info, results, spent, run_id=self.run_id)
        self._count(stored)
        for line in spent:
            self._count_line(line)
        return stored

    def _count(self, results: Sequence[Result]) -> None:
        for r in results:
            self.progress.add(r)
            if r.status != "not_run" and (r.cost or r.input_tokens or r.output_tokens):
                self.report.count_paid(r.model, r.cost, r.input_tokens, r.cache_read_tokens,
                                       r.cache_write_tokens)

    def _count_line(self, line: SpendLine) -> None:
        self.progress.spend += line.cost
        self.report.count_paid(line.model, line.cost, line.input_tokens,
                               line.cache_read_tokens, line.cache_write_tokens)

    def empty_reply_line(self, it: Item, reply: Reply, mode: CallMode) -> SpendLine | None:
        """The ledger line of an empty reply without a refusal (a paid transport failure,
        retried; there is no result row to carry its spend), or None when it cost nothing."""
        spent = reply_cost(it, reply, mode)
        if not spent:
            return None
        return SpendLine(it.provider.name, it.spec.name, it.key, mode, reply.input_tokens,
                         reply.output_tokens, spent, reply.cache_read_tokens,
                         reply.cache_write_tokens)

    def pay_for_empty_reply(self, it: Item, reply: Reply, mode: CallMode) -> float:
        """Account for an empty reply without a refusal at once: its ledger line committed,
        the progress spend and the report; the returned cost is what the caller counts against
        the budget. (A batch's empty replies are booked with the batch: :meth:`record_batch`.)
        """
        line = self.empty_reply_line(it, reply, mode)
        if line is None:
            return 0.0
        self.store.record_line(self.run_id, line)
        self._count_line(line)
        return line.cost


def reply_cost(it: Item, reply: Reply, mode: CallMode) -> float:
    """What one reply costs at the registry's prices, cached and cache-write tokens included
    (a :class:`Reply` already holds its cache counts within its prompt)."""
    return call_cost(it.spec.price, reply.input_tokens, reply.output_tokens, mode == "batch",
                     cache_read_tokens=reply.cache_read_tokens,
                     cache_write_tokens=reply.cache_write_tokens)
