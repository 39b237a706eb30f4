"""One engine for every model call: screening, recall, translation, generation and grading.

Public API
----------
``Request(model, messages, temperature=None, max_tokens=None, response_schema=None, tag="",
metadata={}, cache_prefix_chars=None)``
    One call as a stage wants it. ``model`` is a name in ``params/models.yaml``; ``messages``
    are dicts or objects with ``role``/``content`` (corpus messages work as they are). The
    registry applies the model's quirks (temperature rejected or fixed, token-cap name and
    limit, thinking settings). ``response_schema`` is a JSON schema for structured output.
    ``tag``/``metadata`` come back on the result and never change the request key.
    ``cache_prefix_chars``: where the prefix shared with other requests ends in the last
    message (the grader sets it; ``llm.prompt_caching``): the engine then groups such requests
    and arranges them for the provider's prompt cache (docs/engine.md, *Prompt caching*).

``Engine(store, registry=None, *, base_urls=None, limits=None, max_cost=None, max_attempts=6,
backoff_base=1.0, backoff_max=60.0, timeout=600.0, progress=True, poll_interval=30.0)``
    ``store``: path of the SQLite store (content-addressed; re-runs cost nothing).
    ``registry``: None for ``params/models.yaml``, or a path / :class:`Registry`.
    ``base_urls``: provider name or kind -> URL (e.g. a simulator's ``base_urls_for(registry)``,
    or ``{"local": "http://127.0.0.1:8000/v1"}``). ``limits``: provider -> ``{concurrency, rpm,
    tpm}``. ``max_cost``: USD cap on new spend per run.

``engine.plan(requests, mode="sync") -> Plan``
    Calls to make, cached count, estimated tokens and cost; no network, no key needed.
``engine.run(requests, mode="sync"|"batch") -> list[Result]``
    In request order; works in scripts and in Jupyter. ``arun`` is the async form.
``engine.last_report``, ``engine.spend(run_id=None)``
    What the last run did (plan, counts, spend, batches, budget stop) and the cost ledger.

``Result``: ``key, model, provider, status (ok|refused|failed|not_run), text, stop_reason,
refusal, input_tokens (all prompt tokens), output_tokens, cache_read_tokens,
cache_write_tokens, cost (at cached-token prices), latency, attempts, error, mode, cached,
config (the decoding parameters actually sent), tag, metadata``; ``result.json()`` parses
structured output.

Errors before the first call: :class:`ConfigError` (unknown model, missing key variable, bad
registry or limits). During a run: :class:`ProviderFatalError` (quota, billing, auth, a
disabled organisation, an unserved location, a model that does not exist), raised after
everything finished is stored.

The loopback provider simulator for tests, the smoke profile and benchmarks is not part of this
API: it lives in :mod:`hbpsych_utils.llm.testing` (``Simulator``, ``SimulatorProcess``,
``Fault``).
"""

from __future__ import annotations

from hbpsych_utils.llm.cost import Plan, call_cost
from hbpsych_utils.llm.engine import Engine
from hbpsych_utils.llm.models import ConfigError, ModelSpec, Registry, load_registry
from hbpsych_utils.llm.requests import ChatMessage, Request, Result, request_key
from hbpsych_utils.llm.run_context import ProviderFatalError, RunReport
from hbpsych_utils.llm.store import Store

__all__ = [
    "ChatMessage",
    "ConfigError",
    "Engine",
    "ModelSpec",
    "Plan",
    "ProviderFatalError",
    "Registry",
    "Request",
    "Result",
    "RunReport",
    "Store",
    "call_cost",
    "load_registry",
    "request_key",
]
