"""The engine: validated, resumable, rate-limited, budgeted execution of model requests.

``Engine.run(requests, mode="sync"|"batch")`` returns one :class:`Result` per request, in
request order. Before the first call it resolves every request against the registry (unknown
model, missing key and bad settings fail here, with the model and variable named), computes
keys, answers completed keys from the store and prints the plan. Then:

- sync: per provider, ``concurrency`` workers share a limiter (requests and tokens per minute,
  evenly spaced; a 429 pauses the whole provider for its ``Retry-After``). Transport errors,
  timeouts, unreadable bodies, 429 and 5xx are retried with jittered exponential back-off up
  to ``max_attempts``; quota, billing and auth errors stop the run (ProviderFatalError) after
  what finished is stored; other 4xx are stored as failed. A refusal is stored and never
  retried; an empty reply without a refusal stop reason is a transport failure: retried, never
  stored as an answer.
- batch: see :mod:`hbpsych_utils.llm.batch` (providers without a batch API run sync).

Each result is committed as it arrives (WAL), so a killed run loses only the calls in flight.
Keys never reach the store, results, logs or progress output: they are read from the
environment when the adapters are built and kept only inside the SDK clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from hbpsych_utils.llm.cost import (
    Budget,
    Plan,
    call_cost,
    estimate_input_tokens,
    estimate_output_tokens,
)
from hbpsych_utils.llm.models import (
    ConfigError,
    ModelSpec,
    ProviderSpec,
    Registry,
    load_registry,
    resolve_decoding,
)
from hbpsych_utils.llm.providers import Adapter, CallError, Reply, make_adapter
from hbpsych_utils.llm.providers.anthropic_messages import AnthropicAdapter
from hbpsych_utils.llm.providers.google_genai import GoogleAdapter
from hbpsych_utils.llm.providers.openai_chat import OpenAIAdapter
from hbpsych_utils.llm.requests import Request, Result, request_key
from hbpsych_utils.llm.store import Store

log = logging.getLogger("hbpsych_utils.llm")

Mode = Literal["sync", "batch"]
_ADAPTER_CLASSES: dict[str, type[Adapter]] = {
    "openai": OpenAIAdapter, "openai_compatible": OpenAIAdapter,
    "anthropic": AnthropicAdapter, "google": GoogleAdapter,
}
NO_KEY = "no-key-needed"


class ProviderFatalError(RuntimeError):
    """Quota, billing or authentication failure: the run stopped; finished work is stored."""


@dataclass
class Limits:
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

    def est_cost(self, batch: bool = False) -> float:
        return call_cost(self.spec.price, self.est_in, self.est_out, batch)


@dataclass
class RunReport:
    """What the last run did (also handy for the run manifest)."""

    run_id: str
    mode: str
    plan: dict[str, Any]
    done: int = 0
    cached: int = 0
    failed: int = 0
    refused: int = 0
    not_run: int = 0
    spend: float = 0.0
    stopped_by_budget: bool = False
    message: str = ""
    batches: list[str] = field(default_factory=list)
    fallback: int = 0


class _Limiter:
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


class _Progress:
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


def _endpoint_class(url: str | None) -> str:
    """The endpoint part of a key: the provider's own URL, loopback, or another host."""
    if not url:
        return "default"
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return "loopback"
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return "loopback"
    return f"host:{host}"


class Engine:
    """Every model call of the compendium goes through one of these.

    store: path of the SQLite store (or a :class:`Store`). registry: a :class:`Registry`, a
    path, or None for ``params/models.yaml``. base_urls: provider name (or provider kind, e.g.
    ``openai_compatible``) -> base URL, overriding the registry (point a profile at the
    simulator or a local server). limits: provider -> {concurrency, rpm, tpm} overrides.
    max_cost: USD cap on this engine's new spend per run. env: where keys are read from
    (default ``os.environ``).
    """

    def __init__(self, store: str | Path | Store, registry: Registry | str | Path | None = None,
                 *, base_urls: Mapping[str, str] | None = None,
                 limits: Mapping[str, Mapping[str, Any]] | None = None,
                 max_cost: float | None = None, max_attempts: int = 6,
                 backoff_base: float = 1.0, backoff_max: float = 60.0, timeout: float = 600.0,
                 progress: bool = True, poll_interval: float = 30.0,
                 env: Mapping[str, str] | None = None) -> None:
        self.registry = registry if isinstance(registry, Registry) else load_registry(registry)
        self.store = store if isinstance(store, Store) else Store(store)
        self.base_urls = dict(base_urls or {})
        self.max_cost = max_cost
        if max_cost is not None and max_cost < 0:
            raise ConfigError(f"max_cost must be >= 0, got {max_cost}")
        if max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {max_attempts}")
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.progress = progress
        self.poll_interval = poll_interval
        self._env = env if env is not None else os.environ
        self.limits: dict[str, Limits] = {}
        unknown = set(limits or {}) - set(self.registry.providers)
        if unknown:
            raise ConfigError(f"limits for unknown provider(s) {sorted(unknown)}")
        for name, p in self.registry.providers.items():
            o = dict((limits or {}).get(name, {}))
            bad = set(o) - {"concurrency", "rpm", "tpm"}
            if bad:
                raise ConfigError(f"limits.{name}: unknown key(s) {sorted(bad)}")
            lim = Limits(int(o.get("concurrency", p.concurrency)), o.get("rpm", p.rpm),
                         o.get("tpm", p.tpm))
            if lim.concurrency < 1:
                raise ConfigError(f"limits.{name}.concurrency must be >= 1")
            self.limits[name] = lim
        self.last_report: RunReport | None = None

    # ---------------------------------------------------------------- resolution
    def base_url(self, provider: ProviderSpec) -> str | None:
        return (self.base_urls.get(provider.name) or self.base_urls.get(provider.kind)
                or provider.base_url)

    def resolve(self, req: Request) -> Item:
        """Registry lookup, quirks, wire body and key for one request (no network)."""
        spec = self.registry.model(req.model)
        provider = self.registry.providers[spec.provider]
        decoding = resolve_decoding(spec, provider.kind, req.temperature, req.max_tokens)
        cls = _ADAPTER_CLASSES[provider.kind]
        body = cls.body(spec, req, decoding)
        key = request_key(provider=provider.name, endpoint=_endpoint_class(self.base_url(provider)),
                          api=cls.api, body=body, sample=req.sample)
        cap = decoding.get(spec.max_tokens_param or "max_tokens") or decoding.get(
            "max_output_tokens") or decoding.get("max_completion_tokens")
        return Item(key, req, spec, provider, body, decoding,
                    estimate_input_tokens(req.prompt_chars()), estimate_output_tokens(cap))

    def _prepare(self, requests: Sequence[Request], mode: str
                 ) -> tuple[list[Item], dict[str, Result], Plan, list[str]]:
        if mode not in ("sync", "batch"):
            raise ConfigError(f"mode must be 'sync' or 'batch', got {mode!r}")
        items: dict[str, Item] = {}
        keys: list[str] = []
        for i, req in enumerate(requests):
            if not isinstance(req, Request):
                raise ConfigError(f"request {i} is a {type(req).__name__}, not an llm.Request")
            try:
                it = self.resolve(req)
            except ConfigError as exc:
                raise ConfigError(f"request {i} (tag {req.tag!r}): {exc}") from None
            keys.append(it.key)
            if it.key in items:
                items[it.key].positions.append(i)
            else:
                it.positions.append(i)
                items[it.key] = it
        cached = self.store.get_many(items, completed_only=True)
        pending = [it for k, it in items.items() if k not in cached]
        plan = Plan(requests=len(requests), unique=len(items), cached=len(cached), mode=mode)
        for it in pending:
            batch = mode == "batch" and it.provider.batch
            plan.add(it.spec.name, it.provider.name, it.est_in, it.est_out, it.est_cost(batch))
        self._check_keys({it.provider.name for it in pending})
        return pending, cached, plan, keys

    def _check_keys(self, providers: Iterable[str]) -> None:
        missing = []
        for name in sorted(providers):
            p = self.registry.providers[name]
            if p.api_key_env and not self._env.get(p.api_key_env):
                if _endpoint_class(self.base_url(p)) == "loopback":
                    continue
                models = [m for m, s in self.registry.models.items() if s.provider == name]
                missing.append(f"{p.api_key_env} (provider {name}: {', '.join(models)})")
        if missing:
            raise ConfigError("missing API key environment variable(s): " + "; ".join(missing)
                              + ". Keys are read from the environment only.")

    def _api_key(self, p: ProviderSpec) -> str:
        if not p.api_key_env:
            return NO_KEY
        return self._env.get(p.api_key_env) or NO_KEY

    def plan(self, requests: Sequence[Request], mode: Mode = "sync") -> Plan:
        """Calls, estimated tokens and cost, and how many are already stored. No network."""
        return self._prepare(requests, mode)[2]

    def spend(self, run_id: str | None = None) -> dict[str, Any]:
        """The ledger: actual spend overall (or of one run), per provider/model/mode."""
        return self.store.spend(run_id)

    # ---------------------------------------------------------------- running
    def run(self, requests: Sequence[Request], mode: Mode = "sync") -> list[Result]:
        """Synchronous entry point; works inside Jupyter (runs its loop in a worker thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(requests, mode))
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = asyncio.run(self.arun(requests, mode))
            except BaseException as exc:
                box["error"] = exc

        t = threading.Thread(target=target, name="llm-engine", daemon=True)
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["value"]

    async def arun(self, requests: Sequence[Request], mode: Mode = "sync") -> list[Result]:
        pending, cached, plan, keys = self._prepare(requests, mode)
        run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        report = RunReport(run_id=run_id, mode=mode, plan=plan.as_dict(), cached=len(cached))
        self.last_report = report
        log.info("llm plan: %s", plan)
        if self.progress and pending:
            print(plan)
        results: dict[str, Result] = {}
        ctx = _RunContext(self, run_id, Budget(self.max_cost),
                          _Progress(len(pending) + len(cached), len(cached), self.progress,
                                    f"llm {mode}"), report)
        try:
            if pending:
                if mode == "batch":
                    from hbpsych_utils.llm.batch import run_batch

                    results.update(await run_batch(ctx, pending))
                else:
                    results.update(await ctx.run_sync(pending))
        finally:
            await ctx.close()
            ctx.progress.close()
        if ctx.fatal is not None:
            raise ctx.fatal
        for r in results.values():
            if r.status in ("ok", "refused"):
                report.done += 1
            if r.status == "refused":
                report.refused += 1
            elif r.status == "failed":
                report.failed += 1
            elif r.status == "not_run":
                report.not_run += 1
        report.spend = round(ctx.budget.spent, 6)
        if ctx.budget.stopped:
            report.stopped_by_budget = True
            report.message = (f"{ctx.budget.message()}; {report.not_run} request(s) not run "
                              "(status not_run). Raise max_cost and re-run to finish; "
                              "finished calls are reused.")
            log.warning(report.message)
            if self.progress:
                print(report.message)
        return _in_order(requests, keys, cached, results)


def _in_order(requests: Sequence[Request], keys: list[str], cached: dict[str, Result],
              results: dict[str, Result]) -> list[Result]:
    """One result per request position; duplicates share the answer, with their own tag."""
    out = []
    for req, key in zip(requests, keys, strict=True):
        r = results.get(key) or cached[key]
        if r.tag != req.tag or r.metadata is not req.metadata:
            r = dataclasses.replace(r, tag=req.tag, metadata=req.metadata)
        out.append(r)
    return out


class _RunContext:
    """State shared by the workers of one run."""

    def __init__(self, engine: Engine, run_id: str, budget: Budget, progress: _Progress,
                 report: RunReport) -> None:
        self.engine = engine
        self.run_id = run_id
        self.budget = budget
        self.progress = progress
        self.report = report
        self.adapters: dict[str, Adapter] = {}
        self.limiters: dict[str, _Limiter] = {}
        self.fatal: ProviderFatalError | None = None

    def adapter(self, p: ProviderSpec) -> Adapter:
        if p.name not in self.adapters:
            e = self.engine
            self.adapters[p.name] = make_adapter(p, e._api_key(p), e.base_url(p), e.timeout)
        return self.adapters[p.name]

    def limiter(self, p: ProviderSpec) -> _Limiter:
        if p.name not in self.limiters:
            lim = self.engine.limits[p.name]
            self.limiters[p.name] = _Limiter(lim.rpm, lim.tpm)
        return self.limiters[p.name]

    async def close(self) -> None:
        for a in self.adapters.values():
            with contextlib.suppress(Exception):
                await a.aclose()

    # ---- results
    def make_result(self, it: Item, reply: Reply, attempts: int, latency: float,
                    mode: str) -> Result:
        cost = call_cost(it.spec.price, reply.input_tokens, reply.output_tokens, mode == "batch")
        return Result(key=it.key, model=it.spec.name, provider=it.provider.name,
                      status="refused" if reply.refusal else "ok", text=reply.text,
                      stop_reason=reply.stop_reason, refusal=reply.refusal,
                      input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                      cost=cost, latency=latency, attempts=attempts, mode=mode,
                      config=it.decoding, tag=it.request.tag, metadata=it.request.metadata)

    def failed(self, it: Item, status: str, error: str, attempts: int, mode: str = "sync"
               ) -> Result:
        return Result(key=it.key, model=it.spec.name, provider=it.provider.name,
                      status=status, error=error, attempts=attempts, mode=mode,  # type: ignore[arg-type]
                      config=it.decoding, tag=it.request.tag, metadata=it.request.metadata)

    def record(self, results: Sequence[Result]) -> None:
        """Commit results (one transaction) and count them."""
        stored = [r for r in results if r.status != "not_run"]
        self.engine.store.put_many(stored, run_id=self.run_id)
        for r in results:
            self.progress.add(r)

    # ---- sync path
    async def run_sync(self, items: Sequence[Item]) -> dict[str, Result]:
        by_provider: dict[str, list[Item]] = {}
        for it in items:
            by_provider.setdefault(it.provider.name, []).append(it)
        results: dict[str, Result] = {}

        async def worker(queue: list[Item]) -> None:
            while queue:
                it = queue.pop()
                if self.fatal is not None:
                    results[it.key] = self.failed(it, "not_run", f"not run: {self.fatal}", 0)
                    continue
                r = await self.call_one(it)
                results[it.key] = r

        tasks = []
        for name, its in by_provider.items():
            queue = list(reversed(its))
            n = min(self.engine.limits[name].concurrency, len(its))
            tasks += [asyncio.create_task(worker(queue)) for _ in range(n)]
        await asyncio.gather(*tasks)
        return results

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        e = self.engine
        delay = min(e.backoff_max, e.backoff_base * (2 ** (attempt - 1)))
        delay *= random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return delay

    async def call_one(self, it: Item) -> Result:
        """One request through retries; its result is committed before this returns."""
        e = self.engine
        adapter = self.adapter(it.provider)
        limiter = self.limiter(it.provider)
        est = it.est_cost()
        last_error = ""
        attempt = 0
        while attempt < e.max_attempts:
            if self.fatal is not None:
                r = self.failed(it, "not_run", f"not run: {self.fatal}", attempt)
                self.record([r])
                return r
            if not self.budget.try_start(est):
                r = self.failed(it, "not_run", self.budget.message(), attempt)
                self.record([r])
                return r
            attempt += 1
            await limiter.acquire(it.est_in + it.est_out)
            t0 = time.perf_counter()
            err: CallError
            try:
                reply = await adapter.call(it.body)
            except Exception as exc:
                err = adapter.classify(exc)
                self.budget.finish(est, 0.0)
            else:
                latency = time.perf_counter() - t0
                if reply.text or reply.refusal:
                    r = self.make_result(it, reply, attempt, latency, "sync")
                    self.budget.finish(est, r.cost)
                    self.record([r])
                    return r
                # Empty reply without a refusal stop reason: a transport failure. Pay, retry.
                spent = call_cost(it.spec.price, reply.input_tokens, reply.output_tokens)
                self.budget.finish(est, spent)
                if spent:
                    e.store.record_spend(run_id=self.run_id, provider=it.provider.name,
                                         model=it.spec.name, key=it.key, mode="sync",
                                         input_tokens=reply.input_tokens,
                                         output_tokens=reply.output_tokens, cost=spent)
                    self.progress.spend += spent
                err = CallError("transient",
                                f"empty reply (stop reason {reply.stop_reason!r}, no refusal)")
            last_error = str(err)
            if err.kind == "fatal":
                self.fatal = ProviderFatalError(
                    f"provider {it.provider.name} ({it.spec.name}): {err} — stopping the run; "
                    "finished calls are stored and will be reused")
                r = self.failed(it, "failed", last_error, attempt)
                self.record([r])
                return r
            if err.kind == "permanent":
                r = self.failed(it, "failed", last_error, attempt)
                self.record([r])
                return r
            if attempt < e.max_attempts:
                delay = self.backoff(attempt, err.retry_after)
                if err.status == 429:
                    limiter.pause(delay)
                log.debug("retry %s attempt %d in %.2fs: %s", it.key[:12], attempt, delay, err)
                await asyncio.sleep(delay)
        r = self.failed(it, "failed", f"gave up after {attempt} attempts: {last_error}", attempt)
        self.record([r])
        return r
