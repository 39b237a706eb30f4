"""The engine: validated, resumable, rate-limited, budgeted execution of model requests.

``Engine.run(requests, mode="sync"|"batch")`` returns one :class:`Result` per request, in
request order. Before the first call it resolves every request against the registry (unknown
model, missing key and bad settings fail here, with the model and variable named), computes
keys, answers completed keys from the store and prints the plan. Then:

- sync: see :mod:`hbpsych_utils.llm.sync` (per-provider workers, limiter, retries).
- batch: see :mod:`hbpsych_utils.llm.batch` (providers without a batch API run sync).

Both paths work on one :class:`~hbpsych_utils.llm.run_context.RunContext` per run (items,
settings, limiters, budget, progress, report); the engine builds it and neither path imports
the engine.

A request that names a shared prefix long enough for its model's prompt cache
(``Request.cache_prefix_chars``, ``providers.base.cache_arranged``) is resolved into an item of a
prefix group, with the provider's hint or breakpoint in its wire body, the cache mode in its key
and in its recorded config; both paths send a group's first call before the others
(``docs/engine.md``, *Prompt caching*).

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
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from hbpsych_utils.llm.batch import run_batch
from hbpsych_utils.llm.cost import Budget, Plan, estimate_input_tokens, estimate_output_tokens
from hbpsych_utils.llm.models import (
    ConfigError,
    ProviderSpec,
    Registry,
    load_registry,
    resolve_decoding,
)
from hbpsych_utils.llm.providers import OPENAI_WIRE_KINDS, Adapter, adapter_class, make_adapter
from hbpsych_utils.llm.providers.base import cache_arranged
from hbpsych_utils.llm.requests import Request, Result, request_key
from hbpsych_utils.llm.run_context import (
    Item,
    Limits,
    Progress,
    RunContext,
    RunReport,
    RunSettings,
)
from hbpsych_utils.llm.store import Store
from hbpsych_utils.llm.sync import run_sync

log = logging.getLogger("hbpsych_utils.llm")

Mode = Literal["sync", "batch"]
NO_KEY = "no-key-needed"


class NotSent(RuntimeError):
    """An engine whose exportable calls are made elsewhere (``external=True``) was asked for
    answers of such calls its store lacks."""

    def __init__(self, calls: int, models: str, store: Path, stage: str | None) -> None:
        self.calls = calls
        profile = store.parent.name  # the store lives in the run folder, named after its profile
        stage = stage or "STAGE"
        super().__init__(
            f"{calls:,} model call(s) are not answered in the store {store} ({models}), and "
            f"{stage}'s calls to OpenAI-compatible APIs are made elsewhere (llm.external), so "
            "none is sent from here: "
            f"export them with `python -m hbpsych_utils shards {profile} --stage {stage}`, run "
            f"the shards, import their output with `python -m hbpsych_utils import-results "
            f"{profile} OUTPUT`, then run the profile again (docs/scale.md)")


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
    (default ``os.environ``). external: the calls that can be exported as batch shards (to a
    provider of ``OPENAI_WIRE_KINDS``: :mod:`hbpsych_utils.llm.shards`) are made elsewhere and
    must be answered in the store: a run missing any raises :class:`NotSent` before the first
    call; the other calls (Anthropic's, Google's APIs) are sent as usual. ``stage`` names the
    stage whose calls those are, for its message.
    """

    def __init__(self, store: str | Path | Store, registry: Registry | str | Path | None = None,
                 *, base_urls: Mapping[str, str] | None = None,
                 limits: Mapping[str, Mapping[str, Any]] | None = None,
                 max_cost: float | None = None, max_attempts: int = 6,
                 backoff_base: float = 1.0, backoff_max: float = 60.0, timeout: float = 600.0,
                 progress: bool = True, poll_interval: float = 30.0,
                 env: Mapping[str, str] | None = None, external: bool = False,
                 stage: str | None = None) -> None:
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
        self.external = external
        self.stage = stage
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
        decoding = resolve_decoding(spec, provider.kind, req.temperature, req.max_tokens,
                                    req.seed)
        cls = adapter_class(provider.kind)
        body = cls.body(spec, req, decoding)
        arranged = cache_arranged(spec, req)
        key = request_key(provider=provider.name, endpoint=_endpoint_class(self.base_url(provider)),
                          api=cls.api, body=body, sample=req.sample, repeat=req.repeat,
                          cache=spec.cache_mode if arranged else None)
        cap = decoding.get(spec.max_tokens_param or "max_tokens") or decoding.get(
            "max_output_tokens") or decoding.get("max_completion_tokens")
        group = (f"{provider.name}/{spec.api_model}/{req.cache_prefix_key()}" if arranged
                 else None)
        return Item(key, req, spec, provider, body, decoding,
                    estimate_input_tokens(req.prompt_chars()), estimate_output_tokens(cap),
                    group=group)

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

    def require_keys(self, providers: Iterable[str]) -> None:
        """:class:`ConfigError` naming every key variable ``providers`` need and the environment
        lacks (a loopback endpoint needs none)."""
        self._check_keys(providers)

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

    def _connect(self, p: ProviderSpec) -> Adapter:
        """The provider's SDK client: the key is read here and stays inside the client."""
        return make_adapter(p, self._api_key(p), self.base_url(p), self.timeout)

    def plan(self, requests: Sequence[Request], mode: Mode = "sync") -> Plan:
        """Calls, estimated tokens and cost, and how many are already stored. No network."""
        if self.external:  # the exported calls are not sent: no key is needed for them
            return self._plan_stored(requests, mode)
        return self._prepare(requests, mode)[2]

    def _plan_stored(self, requests: Sequence[Request], mode: str, *,
                     exportable: bool = False) -> Plan:
        """The plan, from the store alone (``exportable``: of the exportable calls only)."""
        items = {}
        for req in requests:
            it = self.resolve(req)
            if not exportable or it.provider.kind in OPENAI_WIRE_KINDS:
                items.setdefault(it.key, it)
        stored = self.store.completed_keys(items)
        plan = Plan(requests=len(requests), unique=len(items), cached=len(stored), mode=mode)
        for key, it in items.items():
            if key not in stored:
                batch = mode == "batch" and it.provider.batch
                plan.add(it.spec.name, it.provider.name, it.est_in, it.est_out,
                         it.est_cost(batch))
        return plan

    def _refuse_to_send(self, requests: Sequence[Request], mode: str) -> None:
        """:class:`NotSent` when an exportable one of ``requests`` is not answered in the
        store."""
        plan = self._plan_stored(requests, mode, exportable=True)
        if plan.calls:
            models = ", ".join(f"{m}: {row['calls']:,}" for m, row in sorted(plan.by_model.items()))
            raise NotSent(plan.calls, models, self.store.path, self.stage)

    def spend(self, run_id: str | None = None) -> dict[str, Any]:
        """The ledger: actual spend overall (or of one run), per provider/model/mode."""
        return self.store.spend(run_id)

    def paid_earlier(self, keys: Iterable[str], run_ids: Iterable[str]) -> float:
        """USD the store's ledger holds for the answers to ``keys`` that engine runs other
        than ``run_ids`` paid for: what earlier attempts of a stage (one interrupted, or run
        before with the same requests) bought and this attempt, made of ``run_ids``, reused
        from the store for nothing. 0.0 when this attempt bought every answer it needed."""
        ours = set(run_ids)
        return round(sum(cost for run, cost in self.store.paid_by_run(keys).items()
                         if run not in ours), 6)

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
        if self.external:
            self._refuse_to_send(requests, mode)
        pending, cached, plan, keys = self._prepare(requests, mode)
        run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        report = RunReport(run_id=run_id, mode=mode, plan=plan.as_dict(), cached=len(cached))
        self.last_report = report
        log.info("llm plan: %s", plan)
        if self.progress and pending:
            print(plan)
        results: dict[str, Result] = {}
        settings = RunSettings(self.store, self.limits, self.max_attempts, self.backoff_base,
                               self.backoff_max, self.poll_interval, self._connect)
        ctx = RunContext(settings, run_id, Budget(self.max_cost),
                         Progress(len(pending) + len(cached), len(cached), self.progress,
                                  f"llm {mode}"), report)
        try:
            if pending:
                if mode == "batch":
                    results.update(await run_batch(ctx, pending))
                else:
                    results.update(await run_sync(ctx, pending))
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
