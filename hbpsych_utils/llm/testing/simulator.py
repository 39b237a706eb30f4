"""A loopback HTTP server that imitates the OpenAI, Anthropic and Gemini APIs the engine uses.

Tests, the smoke profile and the benchmarks point the real SDK clients at it (fake keys) instead
of the providers. It speaks, closely enough for the official SDKs:

- OpenAI: ``POST /v1/chat/completions``, ``POST /v1/files``, ``GET /v1/files/{id}/content``,
  ``POST /v1/batches``, ``GET /v1/batches/{id}``. OpenAI-compatible servers share these
  routes; any path prefix before ``/v1`` is accepted and logged as the ``tenant`` (so
  DeepSeek, Mistral, ... can each get their own base URL).
- Anthropic: ``POST /v1/messages``, ``POST /v1/messages/batches``, ``GET .../{id}``,
  ``GET .../{id}/results``.
- Gemini: ``POST /v1beta/models/{m}:generateContent``, ``POST .../{m}:batchGenerateContent``,
  ``GET /v1beta/batches/{id}``.

Answers are deterministic: a sha256 over (model, the messages' roles and texts, the schema,
and the sampling seed when the body carries one) picks the words, so the same request answered
synchronously or in a batch gets the same text, and replies sampled with different seeds differ.
A HealthBench grader prompt (its text mentions ``criteria_met``) gets a fenced grader JSON
verdict (hash-chosen, unless the prompt scripts it with a ``[sim-verdicts model=met ...]``
marker: :func:`scripted_verdict`); a synchronous call whose prompt holds :data:`ECHO_KEY` gets
a plain-text reply that quotes the API key the call carried (a careless proxy or model, for the
tests of key scrubbing); a request with a JSON schema gets an object generated from
the schema (enums: a hash-chosen value; strings, numbers, booleans: hash-derived; arrays:
``minItems`` items, or N items when the prompt says "N items/records/conversations/entries";
``$ref``/``anyOf``: first branch). Usage is ~4 characters per token.

Prompt caches are imitated per provider (:class:`PromptCaches`: OpenAI and Gemini implicit,
Anthropic at ``cache_control`` breakpoints; minimum length per model from the registry, a TTL,
hits only once the call that left a prefix has completed), and usage reports them in each
API's own fields: OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic
``cache_read_input_tokens`` / ``cache_creation_input_tokens`` (outside ``input_tokens``), Gemini
``cachedContentTokenCount``. ``prompt_cache=False`` switches them off; ``cache_ttl`` and
``cache_min_tokens`` (snapshot id -> minimum, None: never cached) override the defaults.

The flip setting imitates a judge that does not agree with itself: with ``flip_rate`` > 0 a
share ``flip_rate`` of grader prompts (chosen by ``flip_seed`` and the request's hash,
:func:`unstable`) get their usual verdict on the first call the simulator answers and the
other verdict on every later call of the same body (a re-grading), sync or batch; answers a
fault alters neither count nor flip, so a re-ask after a dropped verdict is answered as before.
The count lives in the simulator, so one restarted between a grading and its re-grading sees
the re-grading first (docs/self_consistency.md).

Configurable: ``latency`` (seconds per model call), ``rpm`` (per provider: a token bucket
holding one second's worth, as providers quantise their limits; excess calls get the provider's
own 429, see ``rate_limit`` in :data:`SYNC_FAULT_KINDS`), ``batch_latency`` (seconds before a
batch ends) and :class:`Fault` rules. Requests the real API rejects are rejected with its 400:
Anthropic ``thinking.budget_tokens`` below 1024 or not below ``max_tokens``; a Gemini
``thinkingBudget`` outside the model's range (2.5 Pro: 128-32768, thinking cannot be off;
others: 0-24576; -1 is dynamic). A Gemini budget above ``maxOutputTokens`` is accepted, as on
the real API: thoughts count against the cap (see ``reasoning_at_cap``).
Every model call (sync, or batch item when processed) is appended to ``log`` (api, model,
system and last user message cut to 200 characters, the user message's sha256, the body's
(``body_sha256``, of its canonical JSON: :func:`body_sha256`), status, fault,
``start`` and ``t``: when it arrived and when it was answered, ``cache_read`` / ``cache_write``;
``reply``: for a call or batch item that was answered, the answer text exactly as sent, read
from the response body as the engine reads it: empty for a refusal, cut at the cap).
Responses carry each provider's own headers: OpenAI ``x-request-id`` and
``x-ratelimit-*``, Anthropic ``request-id`` (an error body's ``request_id`` is the same) and
``anthropic-ratelimit-*``, counted over the provider's calls of the last minute against ``rpm``
or :data:`RATE_LIMITS`; Gemini sends neither. ``Simulator`` runs in a thread of the
current process; ``SimulatorProcess`` runs it in a child process (benchmarks), exposing the log
via ``GET /__sim/log``. HTTP is served by
aiohttp's web server; faults that break the connection abort its transport.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

from hbpsych_utils.core import jsonl
from hbpsych_utils.llm.faults import (
    BATCH_END_FAULT_KINDS,
    COLLECT_FAULT_KINDS,
    ENDPOINT_FAULT_KINDS,
    FAULT_KINDS,
    STOP_FAULT_KINDS,
)
from hbpsych_utils.llm.requests import canonical_json

FaultKind = str
"""One of ``FAULT_KINDS`` (checked when a :class:`Fault` is made)."""
MAX_REQUEST_BYTES = 1 << 30  # batch uploads are large; aiohttp's default is 1 MiB


@dataclass
class Fault:
    """Inject ``kind`` into matching model calls.

    A call matches when ``match`` (if given) occurs in any message text, ``api`` (if given:
    ``openai``, ``anthropic``, ``google``) is the API family, and ``model`` (if given) is the
    model. ``times`` limits the rule to the first N matching calls (None: every one). In
    batches, transport-level kinds make the item errored; ``batch_item_missing`` drops it.
    """

    kind: FaultKind
    match: str | None = None
    api: str | None = None
    model: str | None = None
    times: int | None = None
    retry_after: float = 1.0
    hits: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {FAULT_KINDS}")


_WORDS = (
    "support sleep anxiety clinician routine breathing follow-up safety plan symptoms "
    "evidence referral mood care therapy urgent gentle listen options risk calm steps "
    "doctor review monitor contact emergency hydration rest advice primary concern"
).split()


@dataclass
class _Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    action: str | None = None  # reset | hang | truncate
    request_id: str | None = None  # the id an Anthropic error body names (the header repeats it)


Handler = Callable[[web.Request], Awaitable[_Reply]]


def _json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply(status, json.dumps(obj).encode(), {"content-type": "application/json",
                                                     **(headers or {})})


# ---------------------------------------------------------------- request normalisation
def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(c) for c in content)
    if isinstance(content, dict):
        if "text" in content:
            return str(content["text"])
        if "parts" in content:
            return _text_of(content["parts"])
        if "content" in content:
            return _text_of(content["content"])
    return ""


def _norm_openai(body: dict[str, Any]) -> tuple[list[tuple[str, str]], Any, int | None]:
    msgs = [(m.get("role", ""), _text_of(m.get("content"))) for m in body.get("messages", [])]
    rf = body.get("response_format") or {}
    schema = None
    if rf.get("type") == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema") or {}
    elif rf.get("type") == "json_object":
        schema = {"type": "object"}
    cap = body.get("max_completion_tokens") or body.get("max_tokens")
    return msgs, schema, cap


def _norm_anthropic(body: dict[str, Any]) -> tuple[list[tuple[str, str]], Any, int | None]:
    msgs: list[tuple[str, str]] = []
    if body.get("system"):
        msgs.append(("system", _text_of(body["system"])))
    msgs += [(m.get("role", ""), _text_of(m.get("content"))) for m in body.get("messages", [])]
    fmt = ((body.get("output_config") or {}).get("format")) or body.get("output_format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    cap = body.get("max_tokens")
    thinking = (body.get("thinking") or {}).get("budget_tokens")
    if cap and thinking:
        cap = max(1, cap - int(thinking))
    return msgs, schema, cap


def _norm_google(body: dict[str, Any]) -> tuple[list[tuple[str, str]], Any, int | None]:
    msgs: list[tuple[str, str]] = []
    si = body.get("systemInstruction") or body.get("system_instruction")
    if si:
        msgs.append(("system", _text_of(si)))
    for c in body.get("contents", []):
        role = c.get("role", "user")
        msgs.append(("assistant" if role == "model" else role, _text_of(c.get("parts"))))
    gc = body.get("generationConfig") or {}
    schema = gc.get("responseJsonSchema") or gc.get("responseSchema")
    if schema is None and gc.get("responseMimeType") == "application/json":
        schema = {"type": "object"}
    return msgs, schema, gc.get("maxOutputTokens")


def sim_hash(model: str, messages: Iterable[tuple[str, str]], schema: Any,
             seed: int | None) -> str:
    """The simulator's deterministic seed for a request (independent of the API family); a
    sampling seed the request carries (:func:`request_seed`) is added, none leaves it as it was."""
    parts: list[Any] = [model, [list(m) for m in messages], schema]
    if seed is not None:
        parts.append(seed)
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def request_seed(api: str, body: dict[str, Any]) -> int | None:
    """The sampling seed a request body carries: OpenAI-compatible ``seed`` (or Mistral's
    ``random_seed``), Gemini ``generationConfig.seed``; Anthropic has none."""
    if api == "google":
        value = (body.get("generationConfig") or {}).get("seed")
    elif api == "openai":
        value = body.get("seed", body.get("random_seed"))
    else:
        value = None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---------------------------------------------------------------- answers
def unstable(h: str, flip_rate: float, flip_seed: int) -> bool:
    """Whether the grader prompt with simulator hash ``h`` is one whose verdict flips on
    re-grading: ``sha256(f"{flip_seed}:{h}")`` read as a number in [0, 1) is below
    ``flip_rate``, so a share ``flip_rate`` of prompts is, independently of everything else."""
    drawn = int(hashlib.sha256(f"{flip_seed}:{h}".encode()).hexdigest(), 16) / 2**256
    return drawn < flip_rate


_COUNT = re.compile(r"\b(\d{1,4})\s+(?:items|records|conversations|entries)\b", re.IGNORECASE)


def _from_schema(schema: Any, h: str, n_hint: int | None, defs: dict[str, Any],
                 name: str = "value", depth: int = 0) -> Any:
    seed = int(h[(depth * 7) % 56:(depth * 7) % 56 + 8], 16) + len(name)
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "$ref" in schema:
        ref = schema["$ref"].split("/")[-1]
        return _from_schema(defs.get(ref, {}), h, n_hint, defs, name, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            branches = [b for b in schema[key] if b.get("type") != "null"] or schema[key]
            return _from_schema(branches[0], h, n_hint, defs, name, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][seed % len(schema["enum"])]
    typ = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ == "object":
        props = schema.get("properties") or {}
        return {k: _from_schema(v, h, n_hint, defs, k, depth + 1) for k, v in props.items()}
    if typ == "array":
        n = n_hint if n_hint is not None else int(schema.get("minItems", 1))
        n = max(int(schema.get("minItems", 0)), min(n, int(schema.get("maxItems", n))))
        item = schema.get("items") or {"type": "string"}
        out = []
        for i in range(n):
            sub = hashlib.sha256(f"{h}:{name}:{i}".encode()).hexdigest()
            out.append(_from_schema(item, sub, None, defs, name, depth + 1))
        return out
    if typ == "integer":
        lo = int(schema.get("minimum", 0))
        hi = int(schema.get("maximum", lo + 9))
        return lo + seed % (hi - lo + 1)
    if typ == "number":
        lo = float(schema.get("minimum", 0.0))
        hi = float(schema.get("maximum", lo + 1.0))
        return round(lo + (seed % 1000) / 999 * (hi - lo), 3)
    if typ == "boolean":
        return seed % 2 == 0
    if typ == "null":
        return None
    text = f"{name}-{h[:6]}"
    if schema.get("maxLength"):
        text = text[: int(schema["maxLength"])]
    return text


_SCRIPTED = re.compile(r"\[sim-verdicts ([^\]]*)\]")

ECHO_KEY = "[sim-echo-key]"
"""A prompt holding this marker gets a reply that ends by quoting the API key of its call
(synchronous plain-text calls): the key as the SDK sent it (OpenAI ``Authorization: Bearer``,
Anthropic ``x-api-key``, Gemini ``x-goog-api-key`` or ``?key=``)."""


def call_key(request: web.Request) -> str:
    """The API key a call carried, as the provider's SDK sends it ("" when none)."""
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    return (bearer or request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
            or request.query.get("key") or "")


def scripted_verdict(model: str, text: str) -> bool | None:
    """The verdict a grader prompt scripts for ``model``, or ``None``: a marker
    ``[sim-verdicts <model>=met <other>=not-met ...]`` anywhere in the prompt (the meta-evaluation
    fixture, ``evaluation.judge_accuracy.fixture_rows``, puts one in each completion) names the
    model as the request names it (its ``api_model``). A model the marker does not name gets
    its usual hash-chosen verdict, so tests can set a judge's error rates exactly."""
    for m in _SCRIPTED.finditer(text):
        for part in m.group(1).split():
            name, _, value = part.rpartition("=")
            if name == model and value in ("met", "not-met"):
                return value == "met"
    return None


def answer_text(model: str, messages: list[tuple[str, str]], schema: Any, h: str,
                *, flipped: bool = False) -> str:
    """The simulated model answer for a request (see the module docstring); ``flipped``: a
    grader prompt's verdict is the other one (the flip setting, :meth:`_State.flipped`)."""
    joined = "\n".join(t for _, t in messages)
    if schema is not None:
        m = _COUNT.search(joined)
        hint = int(m.group(1)) if m else None
        defs = {**schema.get("$defs", {}), **schema.get("definitions", {})}
        obj = _from_schema(schema, h, hint, defs)
        if flipped and isinstance(obj, dict) and isinstance(obj.get("criteria_met"), bool):
            obj["criteria_met"] = not obj["criteria_met"]
        return json.dumps(obj, ensure_ascii=False)
    if "criteria_met" in joined:
        scripted = scripted_verdict(model, joined)
        met = int(h[:2], 16) % 2 == 0 if scripted is None else scripted
        met = met != flipped
        verdict = {"explanation": f"Simulated judgement {h[:8]}.", "criteria_met": met}
        return "```json\n" + json.dumps(verdict, indent=2) + "\n```"
    n = 20 + int(h[2:4], 16) % 60
    words = [_WORDS[(int(h[(i * 2) % 62:(i * 2) % 62 + 2], 16) + i) % len(_WORDS)]
             for i in range(n)]
    return f"[sim {model} {h[:12]}] " + " ".join(words) + "."


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


# ---------------------------------------------------------------- prompt caches
DEFAULT_CACHE_MIN_TOKENS = {"openai": 1024, "anthropic": 1024, "google": 1024}
"""The shortest cached prefix of a model the registry does not know, per API family."""
CACHE_STEP = {"openai": 128, "google": 128}
"""Implicit caches count cached tokens in these steps above the minimum (OpenAI: 1,024, then
increments of 128; Gemini publishes no step, the simulator uses OpenAI's)."""
DEFAULT_CACHE_TTL = 300.0
"""Seconds a cached prefix lives after its last use (OpenAI: 5-10 minutes of inactivity;
Anthropic: 5 minutes, refreshed on use; a breakpoint with ``ttl: 1h`` lives an hour)."""
MAX_CACHE_ENTRIES = 500_000


@dataclass
class CacheUse:
    """What one model call reads from and writes to the prompt cache. ``store``: the prefix
    hashes the call leaves in the cache when it completes, with their lifetimes."""

    read: int = 0
    write: int = 0
    store: list[tuple[str, float]] = field(default_factory=list)


NO_CACHE = CacheUse()


class PromptCaches:
    """The providers' prompt caches, imitated (one per simulator).

    OpenAI and Gemini cache on their own (``implicit``): a call reads the longest prefix, at
    least the model's minimum and in steps of :data:`CACHE_STEP`, that an earlier call has
    left. Anthropic caches what ``cache_control`` marks (a block's breakpoint, or the last block
    for a top-level ``cache_control``): a call reads the longest marked prefix in the cache and
    writes the last marked prefix it did not find; marked prefixes shorter than the minimum
    are not cached. A call's prefixes enter the cache only when it has completed (a synchronous
    call when it is answered; the items of a batch, which run side by side, when the batch
    ends), so calls in flight together never hit each other. Entries live ``ttl`` seconds
    after their last use. The minimum of a model comes from the registry (its
    ``cache_min_tokens``; a model whose ``cache_mode`` is ``none`` is never cached), else
    :data:`DEFAULT_CACHE_MIN_TOKENS`. Tokens are counted as in the replies (~4 characters).
    """

    def __init__(self, ttl: float = DEFAULT_CACHE_TTL,
                 min_tokens: dict[str, int | None] | None = None, enabled: bool = True) -> None:
        self.ttl = ttl
        self.enabled = enabled
        self._min = dict(min_tokens) if min_tokens is not None else None
        self._entries: dict[str, float] = {}
        self._lock = threading.Lock()

    def minimum(self, api: str, model: str) -> int | None:
        if self._min is None:
            self._min = _registry_cache_minimums()
        if model in self._min:
            return self._min[model]
        return DEFAULT_CACHE_MIN_TOKENS.get(api)

    def lookup(self, api: str, tenant: str, model: str, body: dict[str, Any],
               msgs: list[tuple[str, str]]) -> CacheUse:
        """What a call would read and write if it started now (nothing is stored yet)."""
        minimum = self.minimum(api, model) if self.enabled else None
        if minimum is None:
            return NO_CACHE
        seed = f"{api}/{tenant}/{model}"
        if api == "anthropic":
            return self._breakpoints(seed, body, minimum)
        step = CACHE_STEP.get(api, 128)
        chars = sum(len(t) for _, t in msgs)
        cuts = [b * 4 for b in range(minimum, chars // 4 + 1, step)]
        if not cuts:
            return NO_CACHE
        hashes = _prefix_hashes(seed, msgs, cuts)
        now = time.monotonic()
        with self._lock:
            read = max((c // 4 for c, h in zip(cuts, hashes, strict=True) if self._alive(h, now)),
                       default=0)
        return CacheUse(read=read, store=[(h, self.ttl) for h in hashes])

    def _breakpoints(self, seed: str, body: dict[str, Any], minimum: int) -> CacheUse:
        segments, marks = _anthropic_segments(body)
        if not marks:
            return NO_CACHE
        cuts = [c for c, _ in marks]
        hashes = _prefix_hashes(seed, segments, cuts)
        eligible = [(-(-c // 4), h, ttl) for (c, ttl), h in zip(marks, hashes, strict=True)
                    if -(-c // 4) >= minimum]
        if not eligible:
            return NO_CACHE
        now = time.monotonic()
        with self._lock:
            read = max((tok for tok, h, _ in eligible if self._alive(h, now)), default=0)
            last_tok, last_hash, _ = eligible[-1]
            write = 0 if self._alive(last_hash, now) else last_tok - read
        ttl = {"1h": 3600.0}
        return CacheUse(read=read, write=write,
                        store=[(h, ttl.get(t or "", self.ttl)) for _, h, t in eligible])

    def commit(self, use: CacheUse) -> None:
        """The call has completed: its prefixes are in the cache (or live on)."""
        if not use.store:
            return
        now = time.monotonic()
        with self._lock:
            for h, ttl in use.store:
                self._entries.pop(h, None)
                self._entries[h] = now + ttl
            while len(self._entries) > MAX_CACHE_ENTRIES:
                self._entries.pop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _alive(self, h: str, now: float) -> bool:
        expires = self._entries.get(h)
        if expires is None:
            return False
        if expires <= now:
            del self._entries[h]
            return False
        return True


def cache_minimums(registry: Any) -> dict[str, int | None]:
    """A registry's cache minimum per snapshot id (None: the model is not cached): what
    ``Simulator(cache_min_tokens=...)`` takes so that a run's own registry decides."""
    return {m.api_model: (m.cache_min_tokens if m.cache_mode != "none" else None)
            for m in registry.models.values()}


def _registry_cache_minimums() -> dict[str, int | None]:
    """The default registry's cache minimums (a simulator started without its run's)."""
    from hbpsych_utils.llm.models import load_registry

    return cache_minimums(load_registry())


def _prefix_hashes(seed: str, msgs: list[tuple[str, str]], cuts: list[int]) -> list[str]:
    """sha256 of the prompt's first ``c`` characters for each of the sorted ``cuts`` (counted
    over the texts alone; each message's role enters the hash where the message starts)."""
    h = hashlib.sha256(seed.encode())
    out: list[str] = []
    pos = i = 0
    for role, text in msgs:
        h.update(b"\x1e" + role.encode() + b"\x1f")
        fed = 0
        while i < len(cuts) and cuts[i] - pos <= len(text):
            k = cuts[i] - pos
            h.update(text[fed:k].encode())
            fed = k
            out.append(h.copy().hexdigest())
            i += 1
        h.update(text[fed:].encode())
        pos += len(text)
    return out


def _anthropic_segments(body: dict[str, Any]
                        ) -> tuple[list[tuple[str, str]], list[tuple[int, str | None]]]:
    """A Messages body as (role, text) per message (system first; blocks of one message joined,
    as the model reads them) and its cache breakpoints: (characters up to the end of the
    marked block, the breakpoint's ttl), in prompt order. A top-level ``cache_control`` marks
    the last block."""
    segments: list[tuple[str, str]] = []
    marks: list[tuple[int, str | None]] = []
    pos = 0

    def add(role: str, content: Any) -> None:
        nonlocal pos
        blocks = content if isinstance(content, list) else [{"text": content or ""}]
        texts = []
        for b in blocks:
            text = _text_of(b) if isinstance(b, dict) else str(b)
            texts.append(text)
            pos += len(text)
            cc = b.get("cache_control") if isinstance(b, dict) else None
            if isinstance(cc, dict):
                marks.append((pos, cc.get("ttl")))
        segments.append((role, "".join(texts)))

    if body.get("system"):
        add("system", body["system"])
    for m in body.get("messages", []):
        add(str(m.get("role", "")), m.get("content"))
    top = body.get("cache_control")
    if isinstance(top, dict) and pos and (not marks or marks[-1][0] != pos):
        marks.append((pos, top.get("ttl")))
    return segments, marks


# ---------------------------------------------------------------- the server
RATE_LIMITS: dict[str, dict[str, int]] = {
    "openai": {"requests": 10_000, "tokens": 30_000_000},
    "anthropic": {"requests": 4_000, "input-tokens": 2_000_000, "output-tokens": 400_000},
}
"""Per-minute limits the rate-limit headers report when the simulator has no ``rpm`` (a made-up
high tier: the headers are for clients that read them, the simulator enforces only ``rpm``)."""
REQUEST_ID_HEADER = {"openai": "x-request-id", "anthropic": "request-id"}
"""Where each API puts the id of a response (Gemini sends none; its body has ``responseId``)."""


@dataclass
class _Minute:
    """One provider's calls of the last 60 seconds, with running totals."""

    calls: deque[tuple[float, int, int]] = field(default_factory=deque)
    input: int = 0
    output: int = 0

    def add(self, now: float, input_tokens: int, output_tokens: int) -> None:
        self.calls.append((now, input_tokens, output_tokens))
        self.input += input_tokens
        self.output += output_tokens

    def used(self, now: float) -> dict[str, int]:
        """Requests and tokens of the last minute, named like the limits they count against."""
        while self.calls and self.calls[0][0] <= now - 60.0:
            _, tin, tout = self.calls.popleft()
            self.input -= tin
            self.output -= tout
        return {"requests": len(self.calls), "tokens": self.input + self.output,
                "input-tokens": self.input, "output-tokens": self.output}


@dataclass
class _State:
    """Everything the handlers share; touched only from the server's event loop."""

    latency: float
    rpm: float | None
    faults: list[Fault]
    batch_latency: float
    hang: float
    keep_log: bool
    caches: PromptCaches = field(default_factory=PromptCaches)
    log: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    """provider -> (tokens, updated at)"""
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    minute: dict[str, _Minute] = field(default_factory=dict)
    """provider -> its calls of the last minute (for the rate-limit headers)"""
    flip_rate: float = 0.0
    flip_seed: int = 0
    answered: dict[str, int] = field(default_factory=dict)
    """sim_hash -> grader prompts of that body answered so far (the flip setting)"""

    def flipped(self, h: str, msgs: list[tuple[str, str]]) -> bool:
        """Whether this answer to a grader prompt (one asking for ``criteria_met``) gets the
        other verdict: a share ``flip_rate`` of bodies, chosen by ``flip_seed`` and the body's
        hash, is unstable; the first call of an unstable body gets the usual verdict, every
        later one the other. Counted as the answer is made, sync calls and batch items alike;
        an answer a fault alters neither counts nor flips (the callers ask only without one),
        so a re-ask after a dropped verdict gets the usual verdict as before."""
        if not self.flip_rate or not any("criteria_met" in t for _, t in msgs):
            return False
        with self.lock:
            seen = self.answered.get(h, 0)
            self.answered[h] = seen + 1
        return seen > 0 and unstable(h, self.flip_rate, self.flip_seed)

    def rate_headers(self, api: str, provider: str, input_tokens: int, output_tokens: int,
                     limited: float | None = None) -> dict[str, str]:
        """The provider's rate-limit headers after a call (``limited``: it was refused for this
        many seconds by the ``rpm`` limit), over its calls of the last minute: OpenAI's
        ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (resets as durations, "1s",
        "6m0s"), Anthropic's ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
        {limit,remaining,reset}`` (resets as RFC 3339 times); Gemini sends none. The limits are
        ``rpm`` when set, else :data:`RATE_LIMITS`' made-up tier."""
        if api not in RATE_LIMITS:
            return {}
        now = time.time()
        window = self.minute.setdefault(provider, _Minute())
        if limited is None:
            window.add(now, input_tokens, output_tokens)
        spent = window.used(now)
        limits = {**RATE_LIMITS[api], **({"requests": int(self.rpm)} if self.rpm else {})}
        # per limit: (limit, remaining, seconds until it is whole again)
        state = {name: (limit, max(0, limit - spent[name]), 60.0 * min(spent[name], limit) / limit)
                 for name, limit in limits.items()}
        if limited is not None:
            state["requests"] = (limits["requests"], 0, limited)
        if api == "openai":
            return {f"x-ratelimit-{part}-{name}": value
                    for name, (limit, left, reset) in state.items()
                    for part, value in (("limit", str(limit)), ("remaining", str(left)),
                                        ("reset", _go_duration(reset)))}
        # Anthropic's tokens headers repeat the most restrictive of its input and output limits
        tight = min(("input-tokens", "output-tokens"), key=lambda n: state[n][1] / state[n][0])
        state["tokens"] = state[tight]
        return {f"anthropic-ratelimit-{name}-{part}": value
                for name, (limit, left, reset) in state.items()
                for part, value in (("limit", str(limit)), ("remaining", str(left)),
                                    ("reset", _rfc3339(now + reset)))}

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def fault_for(self, api: str, model: str, msgs: list[tuple[str, str]]) -> Fault | None:
        for f in self.faults:
            if f.kind in ENDPOINT_FAULT_KINDS:
                continue
            if f.api and f.api != api:
                continue
            if f.model and f.model != model:
                continue
            if f.match and not any(f.match in t for _, t in msgs):
                continue
            if f.times is not None and f.hits >= f.times:
                continue
            f.hits += 1
            return f
        return None

    def endpoint_fault(self, api: str, kinds: tuple[str, ...]) -> Fault | None:
        """The first rule of one of ``kinds`` for ``api`` with calls left (counted as a hit)."""
        for f in self.faults:
            if f.kind not in kinds or (f.api and f.api != api):
                continue
            if f.times is not None and f.hits >= f.times:
                continue
            f.hits += 1
            self.count(f"{api}:{f.kind}")
            return f
        return None

    def rate_limited(self, provider: str) -> float | None:
        """Token bucket of one second's worth of ``rpm`` (providers quantise limits per second),
        one bucket per provider: an API family, and each OpenAI-compatible tenant on its own, as
        real limits are per provider (per project / organisation), not shared between them.

        Returns None when the call may proceed, else the seconds until it would.
        """
        if not self.rpm:
            return None
        now = time.monotonic()
        rate = self.rpm / 60.0
        cap = max(1.0, rate)
        tokens, at = self.buckets.get(provider, (cap, now))
        tokens = min(cap, tokens + (now - at) * rate)
        if tokens < 1.0:
            self.buckets[provider] = (tokens, now)
            return (1.0 - tokens) / rate
        self.buckets[provider] = (tokens - 1.0, now)
        return None

    def record(self, **entry: Any) -> None:
        self.count(f"{entry.get('api')}:{entry.get('status')}")
        if self.keep_log:
            entry["t"] = time.time()
            with self.lock:
                self.log.append(entry)


class Simulator:
    """The simulator in a background thread; use as a context manager.

    >>> with Simulator(latency=0.0) as sim:
    ...     sim.base_urls["openai"]   # http://127.0.0.1:<port>/v1
    """

    def __init__(self, *, latency: float = 0.0, rpm: float | None = None,
                 faults: Iterable[Fault] = (), batch_latency: float = 0.0, hang: float = 30.0,
                 keep_log: bool = True, host: str = "127.0.0.1", port: int = 0,
                 prompt_cache: bool = True, cache_ttl: float = DEFAULT_CACHE_TTL,
                 cache_min_tokens: dict[str, int | None] | None = None,
                 flip_rate: float = 0.0, flip_seed: int = 0) -> None:
        if not 0.0 <= flip_rate <= 1.0:
            raise ValueError(f"flip_rate must be in 0..1, got {flip_rate!r}")
        caches = PromptCaches(cache_ttl, cache_min_tokens, enabled=prompt_cache)
        self.state = _State(latency, rpm, list(faults), batch_latency, hang, keep_log,
                            caches if caches is not None else PromptCaches(),
                            flip_rate=flip_rate, flip_seed=flip_seed)
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # public view -------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_urls(self) -> dict[str, str]:
        """Base URLs for each API family, in the form each SDK expects."""
        return {"openai": f"{self.url}/v1", "anthropic": self.url, "google": self.url,
                "openai_compatible": f"{self.url}/v1"}

    def base_urls_for(self, registry: Any) -> dict[str, str]:
        """A base URL per provider of a registry (see :func:`base_urls_for`)."""
        return base_urls_for(self.url, registry)

    @property
    def log(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.log)

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.state.counts)

    def add_fault(self, fault: Fault) -> Fault:
        self.state.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Forget faults, the log, the rate window, the prompt caches and the grader prompts
        answered so far (the flip setting); batches and files stay."""
        with self.state.lock:
            self.state.log.clear()
            self.state.answered.clear()
        self.state.faults.clear()
        self.state.counts.clear()
        self.state.buckets.clear()
        self.state.caches.clear()

    # lifecycle -----------------------------------------------------------------
    def start(self) -> Simulator:
        """Serve on ``host:port`` (port 0: a free one) from an event loop in a daemon thread."""
        ready = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            # access_log=None: no per-request logging; a short shutdown_timeout so stop() does
            # not wait for calls held open by a ``timeout`` fault.
            runner = web.AppRunner(self._app(), access_log=None, handle_signals=False,
                                   shutdown_timeout=0.5)
            try:
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, self.host, self.port, backlog=1024)
                loop.run_until_complete(site.start())
                self.port = runner.addresses[0][1]
            except BaseException as exc:  # pragma: no cover - bind failure
                error.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="llm-simulator", daemon=True)
        self._thread.start()
        ready.wait()
        if error:
            raise error[0]
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = None

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # routing -------------------------------------------------------------------
    def _app(self) -> web.Application:
        """The aiohttp application: one route per provider endpoint, each also reachable under
        a path prefix (the ``tenant``: OpenAI-compatible providers get their own base URL)."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        endpoints: list[tuple[str, str, str, Handler]] = [
            ("openai", "POST", "/v1/chat/completions", self._openai_chat),
            ("anthropic", "POST", "/v1/messages", self._anthropic_message),
            ("openai", "POST", "/v1/files", self._openai_file_upload),
            ("openai", "GET", "/v1/files/{id}/content", self._openai_file_content),
            ("openai", "POST", "/v1/batches", self._openai_batch_create),
            ("openai", "GET", "/v1/batches/{id}", self._openai_batch_get),
            ("anthropic", "POST", "/v1/messages/batches", self._anthropic_batch_create),
            ("anthropic", "GET", "/v1/messages/batches/{id}", self._anthropic_batch_get),
            ("anthropic", "GET", "/v1/messages/batches/{id}/results",
             self._anthropic_batch_results),
            ("google", "GET", "/v1beta/batches/{id}", self._google_batch_get),
        ]
        for version in ("v1", "v1beta"):
            endpoints += [
                ("google", "POST", f"/{version}/models/{{model:[^/:]+}}:generateContent",
                 self._google_generate),
                ("google", "POST", f"/{version}/models/{{model:[^/:]+}}:batchGenerateContent",
                 self._google_batch_create),
            ]
        app.router.add_route("*", "/__sim/{what}", self._serve(self._admin))
        for api, method, path, handler in endpoints:
            app.router.add_route(method, path, self._serve(handler, api))
            app.router.add_route(method, "/{tenant:.+}" + path, self._serve(handler, api))
        app.router.add_route("*", "/{path:.*}", self._serve(self._no_route))
        return app

    def _serve(self, handler: Handler, api: str | None = None
               ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """An aiohttp handler answering with ``handler``'s :class:`_Reply` (faults included),
        with the request id header of ``api`` (see :data:`REQUEST_ID_HEADER`)."""

        async def serve(request: web.Request) -> web.StreamResponse:
            try:
                reply = await handler(request)
            except Exception as exc:  # a bug in the simulator: answer 500, keep serving
                reply = _json_reply({"error": {"message": f"simulator error: {exc!r}",
                                               "type": "server_error"}}, 500)
            if api in REQUEST_ID_HEADER:
                reply.headers.setdefault(REQUEST_ID_HEADER[api],
                                         reply.request_id or _request_id(api))
            return await self._respond(request, reply)

        return serve

    async def _respond(self, request: web.Request, reply: _Reply) -> web.StreamResponse:
        headers = {"content-type": "application/json", **reply.headers}
        if reply.action is None:
            return web.Response(status=reply.status, body=reply.body, headers=headers)
        resp = web.StreamResponse(status=reply.status, headers=headers)
        if reply.action == "truncate":  # the headers promise the whole body; half of it comes
            resp.content_length = len(reply.body)
            await resp.prepare(request)
            await resp.write(reply.body[: len(reply.body) // 2])
        elif reply.action == "hang":  # no answer until the client gives up (at most ``hang`` s)
            deadline = time.monotonic() + self.state.hang
            while _connected(request) and time.monotonic() < deadline:
                await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        elif reply.action == "reset" and request.transport is not None:  # RST, not FIN
            sock = request.transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if request.transport is not None:
            request.transport.abort()
        # aiohttp finds the connection gone when it finishes this response, and drops it
        return resp

    async def _no_route(self, request: web.Request) -> _Reply:
        return _json_reply({"error": {
            "message": f"simulator: no route {request.method} {request.path}",
            "type": "not_found"}}, 404)

    async def _admin(self, request: web.Request) -> _Reply:
        what, method = request.match_info["what"], request.method
        if what == "log":
            with self.state.lock:
                return _json_reply({"log": self.state.log, "counts": self.state.counts})
        if what == "clear" and method == "POST":
            self.clear()
            return _json_reply({"ok": True})
        if what == "faults" and method == "POST":
            for f in _loads(await request.read()).get("faults", []):
                self.state.faults.append(Fault(**f))
            return _json_reply({"ok": True})
        return _json_reply({"error": "unknown admin path"}, 404)

    # endpoints -------------------------------------------------------------------
    async def _openai_chat(self, request: web.Request) -> _Reply:
        return await self._model_call("openai", _tenant(request), _loads(await request.read()),
                                      key=call_key(request))

    async def _anthropic_message(self, request: web.Request) -> _Reply:
        return await self._model_call("anthropic", _tenant(request),
                                      _loads(await request.read()), key=call_key(request))

    async def _google_generate(self, request: web.Request) -> _Reply:
        return await self._model_call("google", _tenant(request), _loads(await request.read()),
                                      model=request.match_info["model"], key=call_key(request))

    async def _openai_file_content(self, request: web.Request) -> _Reply:
        data = self.state.files.get(request.match_info["id"])
        if data is None:
            return _json_reply({"error": {"message": "no such file", "type": "invalid"}}, 404)
        return self._results_reply("openai", data, "application/octet-stream")

    def _results_reply(self, api: str, data: bytes, content_type: str) -> _Reply:
        """A batch's results, or the collect fault a rule asks for."""
        fault = self.state.endpoint_fault(api, COLLECT_FAULT_KINDS[1:])
        kind = fault.kind if fault else None
        if kind == "batch_results_error":
            return _error(api, 503, "simulated failure reading batch results")
        if kind == "batch_results_reset":
            return _Reply(action="reset")
        reply = _Reply(200, data, {"content-type": content_type})
        if kind == "batch_results_truncated":
            reply.action = "truncate"
        return reply

    def _status_fault(self, api: str) -> _Reply | None:
        if self.state.endpoint_fault(api, ("batch_status_error",)):
            return _error(api, 503, "simulated failure reading batch status")
        return None

    # sync model calls ------------------------------------------------------------
    async def _model_call(self, api: str, tenant: str, body: dict[str, Any],
                          model: str | None = None, key: str = "") -> _Reply:
        st = self.state
        model = model or str(body.get("model", ""))
        msgs, schema, cap = _NORM[api](body)
        h = sim_hash(model, msgs, schema, request_seed(api, body))
        entry = {"api": api, "tenant": tenant, "model": model, "hash": h, "kind": "sync",
                 "body_sha256": body_sha256(body),
                 "user": _last_user(msgs), "user_sha256": _last_user_sha256(msgs),
                 "system": "\n".join(t for r, t in msgs if r == "system")[:200],
                 "start": time.time()}
        wait = st.rate_limited(f"{api}/{tenant}")
        if wait is not None:
            st.record(**entry, status=429, fault="rpm")
            reply = _rate_limit_error(api, model, wait, st.rpm)
            reply.headers.update(st.rate_headers(api, f"{api}/{tenant}", 0, 0, limited=wait))
            return reply
        invalid = _invalid_request(api, model, body)
        if invalid is not None:
            st.record(**entry, status=400, fault="invalid_request")
            return _error(api, 400, invalid)
        fault = st.fault_for(api, model, msgs)
        use = st.caches.lookup(api, tenant, model, body, msgs)  # as the call arrives
        if st.latency:
            await asyncio.sleep(st.latency)
        kind = fault.kind if fault else None
        status = 200
        reply: _Reply
        if kind in ("http_500", "http_503", "batch_item_error"):
            status = 503 if kind == "http_503" else 500
            reply = _error(api, status, "simulated server error")
        elif kind == "rate_limit":
            status = 429
            assert fault is not None
            reply = _rate_limit_error(api, model, fault.retry_after)
        elif kind in _ERROR_FAULTS:
            reply = _provider_error(api, kind, model, msgs)
            status = reply.status
        elif kind == "overloaded":
            reply = _overloaded_error(api)
            status = reply.status
        elif kind == "reset":
            status, reply = 0, _Reply(action="reset")
        elif kind == "timeout":
            status, reply = 0, _Reply(action="hang")
        elif kind == "malformed":
            reply = _Reply(200, b'{"id": "x", "choices": [<<not json>>', {})
        else:
            text = answer_text(model, msgs, schema, h,
                               flipped=kind is None and st.flipped(h, msgs))
            if schema is None and key and any(ECHO_KEY in t for _, t in msgs):
                text = f"{text} The key you sent: {key}"
            text = _fault_text(kind, text)
            body_obj = _BUILD[api](model, msgs, h, text, kind, cap, body, use)
            st.caches.commit(use)  # answered: the prefix is in the cache from now on
            reply = _json_reply(body_obj)
            entry.update(reply=sent_text(api, body_obj), cache_read=use.read,
                         cache_write=use.write)
            if kind == "truncated":
                reply.action = "truncate"
        st.record(**entry, status=status, fault=kind)
        reply.headers.update(st.rate_headers(api, f"{api}/{tenant}", _tokens(
            "".join(t for _, t in msgs)), int(cap or 0)))
        return reply

    # OpenAI batches ----------------------------------------------------------------
    async def _openai_file_upload(self, request: web.Request) -> _Reply:
        parts = await _form_parts(request)
        data = parts.get("file", b"")
        fid = "file-" + uuid.uuid4().hex[:24]
        self.state.files[fid] = data
        return _json_reply({"id": fid, "object": "file", "bytes": len(data),
                            "created_at": int(time.time()), "filename": "batch.jsonl",
                            "purpose": (parts.get("purpose") or b"batch").decode(),
                            "status": "processed"})

    async def _openai_batch_create(self, request: web.Request) -> _Reply:
        body, tenant = _loads(await request.read()), _tenant(request)
        fid = body.get("input_file_id", "")
        if fid not in self.state.files:
            return _error("openai", 400, f"input file {fid} not found")
        bid = "batch_" + uuid.uuid4().hex[:24]
        lines = [json.loads(x) for x in jsonl.lines(self.state.files[fid].decode("utf-8"))]
        self.state.batches[bid] = {
            "api": "openai", "tenant": tenant, "created": time.time(), "items": lines,
            "obj": {"id": bid, "object": "batch", "endpoint": body.get("endpoint"),
                    "errors": None, "input_file_id": fid,
                    "completion_window": body.get("completion_window", "24h"),
                    "status": "in_progress", "output_file_id": None, "error_file_id": None,
                    "created_at": int(time.time()), "in_progress_at": int(time.time()),
                    "completed_at": None, "metadata": body.get("metadata"),
                    "request_counts": {"total": len(lines), "completed": 0, "failed": 0}},
        }
        return _json_reply(self.state.batches[bid]["obj"])

    async def _openai_batch_get(self, request: web.Request) -> _Reply:
        bid = request.match_info["id"]
        b = self.state.batches.get(bid)
        if b is None:
            return _error("openai", 404, f"batch {bid} not found")
        if (fault := self._status_fault("openai")) is not None:
            return fault
        if b["obj"]["status"] == "in_progress" and self._due(b):
            end = self.state.endpoint_fault("openai", BATCH_END_FAULT_KINDS)
            if end is not None and end.kind == "batch_failed":
                b["obj"].update(status="failed", failed_at=int(time.time()), errors={
                    "object": "list", "data": [{
                        "code": "invalid_json_line", "line": 1, "param": None,
                        "message": "This line is not parseable as valid JSON."}]},
                    request_counts={"total": 0, "completed": 0, "failed": 0})
                b["items"] = []
                return _json_reply(b["obj"])
            processed, unprocessed = _split_for_end(b["items"], end)
            out, err = [], []
            done: list[CacheUse] = []
            for line in processed:
                body = line.get("body", {})
                res = self._item("openai", str(body.get("model", "")), body, done)
                rid = "batch_req_" + uuid.uuid4().hex[:16]
                if isinstance(res, dict):
                    out.append({"id": rid, "custom_id": line.get("custom_id"),
                                "response": {"status_code": 200, "request_id": rid,
                                             "body": res}, "error": None})
                elif res is None:  # OpenAI reports every request: an unanswered one expired
                    err.append(_openai_unprocessed(line, "batch_expired"))
                else:  # the call's own error: its status and body
                    err.append({"id": rid, "custom_id": line.get("custom_id"),
                                "response": {"status_code": res.status, "request_id": rid,
                                             "body": json.loads(res.body)},
                                "error": None})
            why = "batch_cancelled" if end is not None and end.kind == "batch_cancelled" else (
                "batch_expired")
            err += [_openai_unprocessed(line, why) for line in unprocessed]
            self._batch_ended(done)
            obj = b["obj"]
            if out:
                fid = "file-" + uuid.uuid4().hex[:24]
                self.state.files[fid] = _jsonl(out)
                obj["output_file_id"] = fid
            if err:
                fid = "file-" + uuid.uuid4().hex[:24]
                self.state.files[fid] = _jsonl(err)
                obj["error_file_id"] = fid
            status = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(
                end.kind if end else "", "completed")
            obj.update(status=status, **{f"{status}_at": int(time.time())},
                       request_counts={"total": len(b["items"]), "completed": len(out),
                                       "failed": len(err)})
            b["items"] = []
        return _json_reply(b["obj"])

    # Anthropic batches -------------------------------------------------------------
    async def _anthropic_batch_create(self, request: web.Request) -> _Reply:
        body = _loads(await request.read())
        bid = "msgbatch_" + uuid.uuid4().hex[:24]
        reqs = body.get("requests", [])
        now = _iso(time.time())
        self.state.batches[bid] = {
            "api": "anthropic", "created": time.time(), "items": reqs, "results": b"",
            "obj": {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                    "request_counts": {"processing": len(reqs), "succeeded": 0, "errored": 0,
                                       "canceled": 0, "expired": 0},
                    "ended_at": None, "created_at": now, "expires_at": _iso(time.time() + 86400),
                    "archived_at": None, "cancel_initiated_at": None, "results_url": None},
        }
        return _json_reply(self.state.batches[bid]["obj"])

    async def _anthropic_batch_get(self, request: web.Request) -> _Reply:
        bid = request.match_info["id"]
        b = self.state.batches.get(bid)
        if b is None:
            return _error("anthropic", 404, f"batch {bid} not found")
        if (fault := self._status_fault("anthropic")) is not None:
            return fault
        if b["obj"]["processing_status"] == "in_progress" and self._due(b):
            end = self.state.endpoint_fault("anthropic", BATCH_END_FAULT_KINDS)
            processed, unprocessed = _split_for_end(b["items"], end)
            counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0,
                      "expired": 0}
            lines = []
            done = []
            for r in processed:
                params = r.get("params", {})
                res = self._item("anthropic", str(params.get("model", "")), params, done)
                if isinstance(res, dict):
                    result: dict[str, Any] = {"type": "succeeded", "message": res}
                elif res is None:  # Anthropic writes a line for every request
                    result = {"type": "expired"}
                else:  # the call's error body, without its status
                    result = {"type": "errored", "error": _anthropic_item_error(res)}
                counts[result["type"]] += 1
                lines.append({"custom_id": r.get("custom_id"), "result": result})
            self._batch_ended(done)
            gone = "canceled" if end is not None and end.kind == "batch_cancelled" else "expired"
            for r in unprocessed:
                counts[gone] += 1
                lines.append({"custom_id": r.get("custom_id"), "result": {"type": gone}})
            b["results"] = _jsonl(lines)
            b["obj"].update(
                processing_status="ended", ended_at=_iso(time.time()),
                results_url=f"{self.url}/v1/messages/batches/{bid}/results",
                request_counts=counts)
            b["items"] = []
        return _json_reply(b["obj"])

    async def _anthropic_batch_results(self, request: web.Request) -> _Reply:
        bid = request.match_info["id"]
        b = self.state.batches.get(bid)
        if b is None or b["obj"]["processing_status"] != "ended":
            return _error("anthropic", 404, f"batch {bid} has no results")
        return self._results_reply("anthropic", b["results"], "application/binary")

    # Gemini batches ------------------------------------------------------------------
    async def _google_batch_create(self, request: web.Request) -> _Reply:
        model, body = request.match_info["model"], _loads(await request.read())
        bid = uuid.uuid4().hex[:20]
        batch = body.get("batch", {})
        reqs = (((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")) or []
        self.state.batches[bid] = {
            "api": "google", "created": time.time(), "items": reqs, "model": model,
            "obj": {"name": f"batches/{bid}", "metadata": {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta."
                         "GenerateContentBatch",
                "model": f"models/{model}", "displayName": batch.get("displayName", bid),
                "state": "BATCH_STATE_PENDING", "createTime": _iso(time.time()),
                "name": f"batches/{bid}"}},
        }
        return _json_reply(self.state.batches[bid]["obj"])

    async def _google_batch_get(self, request: web.Request) -> _Reply:
        bid = request.match_info["id"]
        b = self.state.batches.get(bid)
        if b is None:
            return _error("google", 404, f"batch {bid} not found")
        meta = b["obj"]["metadata"]
        if b["obj"].get("done"):  # fetching a finished batch is how its results are read
            data = json.dumps(b["obj"]).encode()
            return self._results_reply("google", data, "application/json")
        if (fault := self._status_fault("google")) is not None:
            return fault
        if not self._due(b):
            meta["state"] = "BATCH_STATE_RUNNING"  # real batches are seen running when polled
            return _json_reply(b["obj"])
        end = self.state.endpoint_fault("google", BATCH_END_FAULT_KINDS)
        if end is not None:  # ended otherwise than succeeded: no responses to read
            state = {"batch_expired": "BATCH_STATE_EXPIRED",
                     "batch_cancelled": "BATCH_STATE_CANCELLED"}.get(end.kind,
                                                                     "BATCH_STATE_FAILED")
            meta.update(state=state, endTime=_iso(time.time()))
            b["obj"]["done"] = True
            if state == "BATCH_STATE_FAILED":
                b["obj"]["error"] = {"code": 13, "message": "simulated batch failure"}
            b["items"] = []
            return _json_reply(b["obj"])
        out = []
        done = []
        for r in b["items"]:
            res = self._item("google", b["model"], r.get("request", {}), done)
            if res is None:
                continue
            if isinstance(res, dict):
                out.append({"response": res, "metadata": r.get("metadata")})
            else:
                # a google.rpc.Status: the numeric code and the message, no status name
                # (google-genai types its details as strings: none are sent)
                error = json.loads(res.body)["error"]
                out.append({"error": {"code": RPC_CODES.get(error["status"], 2),
                                      "message": error["message"]},
                            "metadata": r.get("metadata")})
        self._batch_ended(done)
        meta.update(state="BATCH_STATE_SUCCEEDED", endTime=_iso(time.time()),
                    output={"inlinedResponses": {"inlinedResponses": out}})
        b["obj"]["done"] = True
        b["items"] = []
        return _json_reply(b["obj"])

    def _due(self, b: dict[str, Any]) -> bool:
        return time.time() - b["created"] >= self.state.batch_latency

    def _item(self, api: str, model: str, body: dict[str, Any], done: list[CacheUse]
              ) -> dict[str, Any] | _Reply | None:
        """One batch item: a response body, the error the call would get (a :class:`_Reply`:
        status and the API's error body; transport faults a 500) or None (dropped). The items
        of a batch run side by side: each reads the prompt cache as it was when the batch
        started; what an answered item leaves in it (appended to ``done``) is stored when the
        batch ends (:meth:`_batch_ended`)."""
        st = self.state
        msgs, schema, cap = _NORM[api](body)
        h = sim_hash(model, msgs, schema, request_seed(api, body))
        fault = st.fault_for(api, model, msgs)
        kind = fault.kind if fault else None
        use = NO_CACHE
        if kind not in ("batch_item_missing", *_ITEM_FAILURES, *_ERROR_FAULTS):
            use = st.caches.lookup(api, "", model, body, msgs)
        entry = {"api": api, "tenant": "", "model": model, "hash": h, "kind": "batch",
                 "body_sha256": body_sha256(body),
                 "user": _last_user(msgs), "user_sha256": _last_user_sha256(msgs),
                 "status": 0 if kind == "batch_item_missing" else 200, "fault": kind,
                 "start": time.time(), "cache_read": use.read, "cache_write": use.write}
        invalid = _invalid_request(api, model, body)
        failed = kind in _ITEM_FAILURES or kind in _ERROR_FAULTS or invalid is not None
        if kind == "batch_item_missing" or failed:
            if kind == "batch_item_missing":
                st.record(**entry)
                return None
            # the real API errors the item as it would the call
            if invalid is not None:
                error = _error(api, 400, invalid)
            elif kind in _ITEM_FAILURES:
                error = _error(api, 500, f"simulated batch item failure ({kind})")
            else:
                error = _provider_error(api, str(kind), model, msgs)
            st.record(**{**entry, "status": error.status})
            return error
        text = _fault_text(kind, answer_text(model, msgs, schema, h,
                                             flipped=kind is None and st.flipped(h, msgs)))
        done.append(use)
        built = _BUILD[api](model, msgs, h, text, kind, cap, body, use)
        st.record(**entry, reply=sent_text(api, built))
        return built

    def _batch_ended(self, done: list[CacheUse]) -> None:
        """The batch's answered items have completed: their prefixes enter the cache."""
        for use in done:
            self.state.caches.commit(use)


_ITEM_FAILURES = ("http_500", "http_503", "batch_item_error", "reset", "timeout", "malformed",
                  "truncated", "rate_limit", "quota", "overloaded")
"""Fault kinds that make a batch item errored with a server error (500)."""
_ERROR_FAULTS = (*STOP_FAULT_KINDS, "quoted_request")
"""Fault kinds answered with the provider's error for that cause (:func:`_provider_error`), on a
call and on a batch item alike, but ``quota``, which errors a batch item as a server error
(:data:`_ITEM_FAILURES`)."""
RPC_CODES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
             "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7,
             "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
             "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
             "DATA_LOSS": 15, "UNAUTHENTICATED": 16}
"""``google.rpc.Code`` numbers by name: a Gemini batch item's error carries the number."""


def _anthropic_item_error(reply: _Reply) -> dict[str, Any]:
    """An errored batch item's ``error``: the call's error body (an ``ErrorResponse``). The
    edge's 403 "Request not allowed" is no API error body: an item gets ``permission_error``."""
    body = json.loads(reply.body)
    if body.get("type") != "error":
        body = {"type": "error", "request_id": _request_id("anthropic"), "error": {
            "type": "permission_error", "message": str(body["error"]["message"])}}
    return body


def _split_for_end(items: list[Any], end: Fault | None) -> tuple[list[Any], list[Any]]:
    """The items a batch processed and those it did not: half of them when it expired or was
    cancelled, all of them otherwise."""
    if end is None or end.kind not in ("batch_expired", "batch_cancelled"):
        return list(items), []
    half = (len(items) + 1) // 2
    return list(items[:half]), list(items[half:])


def _openai_unprocessed(line: dict[str, Any], code: str) -> dict[str, Any]:
    """An OpenAI error-file line for a request the batch never ran (``response`` is null)."""
    message = {"batch_expired": "This request could not be executed before the completion "
                                "window expired.",
               "batch_cancelled": "This request was not executed because the batch was "
                                  "cancelled."}[code]
    return {"id": "batch_req_" + uuid.uuid4().hex[:16], "custom_id": line.get("custom_id"),
            "response": None, "error": {"code": code, "message": message}}


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    """Batch results as the providers write them: one JSON object per line, UTF-8 text unescaped
    (so a reply holding U+2028 or U+0085 holds them raw, as JSON allows)."""
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in records).encode("utf-8")


def _fault_text(kind: str | None, text: str) -> str:
    """Answer text damaged as a fault asks: ``garbled`` breaks the JSON but keeps the emitted
    boolean (recoverable); ``no_verdict`` drops the verdict altogether (needs a re-ask)."""
    if kind == "garbled":
        return text.replace("}", "").replace("```", "") + ' "criteria_met": tru'
    if kind == "no_verdict":
        return "I am not able to decide whether this criterion is met."
    return text


def base_urls_for(url: str, registry: Any) -> dict[str, str]:
    """Base URLs pointing every provider of a registry at a simulator running at ``url``.

    OpenAI-compatible providers get their name as a path prefix, logged as the ``tenant``.
    """
    out = {}
    for name, p in registry.providers.items():
        if p.kind == "openai_compatible":
            out[name] = f"{url}/{name}/v1"
        elif p.kind == "openai":
            out[name] = f"{url}/v1"
        else:
            out[name] = url
    return out


# ---------------------------------------------------------------- provider bodies
def _cut(text: str, cap: int | None) -> tuple[str, bool]:
    if cap and _tokens(text) > cap:
        return text[: cap * 4], True
    return text, False


def _openai_body(model: str, msgs: list[tuple[str, str]], h: str, text: str, kind: str | None,
                 cap: int | None, req: dict[str, Any], use: CacheUse = NO_CACHE
                 ) -> dict[str, Any]:
    structured = (req.get("response_format") or {}).get("type") == "json_schema"
    if kind == "refusal" and not structured:  # plain chat: the model refuses in words
        text = REFUSAL_TEXT
    text, cut = _cut(text, cap)
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    finish = "length" if cut else "stop"
    reasoning = 0
    refusal_tokens = 0
    if kind == "refusal" and structured:  # Structured Outputs: stops normally, no content
        message.update(content=None, refusal=REFUSAL_TEXT)
        text, finish, refusal_tokens = "", "stop", _tokens(REFUSAL_TEXT)
    elif kind == "content_filter":  # the provider's filter withheld the reply
        message["content"], text, finish = None, "", "content_filter"
    elif kind == "empty":
        message["content"] = ""
        text = ""
    elif kind == "reasoning_at_cap":  # reasoning tokens used the whole cap: no text
        message["content"], text, finish = "", "", "length"
        reasoning = _reasoning_cap(cap)
    pt = _tokens("".join(t for _, t in msgs))
    ct = (_tokens(text) if text else 0) + reasoning + refusal_tokens
    return {"id": f"chatcmpl-{h[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct,
                      "prompt_tokens_details": {"cached_tokens": use.read, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": reasoning}}}


def _anthropic_body(model: str, msgs: list[tuple[str, str]], h: str, text: str,
                    kind: str | None, cap: int | None, req: dict[str, Any],
                    use: CacheUse = NO_CACHE) -> dict[str, Any]:
    text, cut = _cut(text, cap)
    content: list[dict[str, Any]] = []
    thinking = (req.get("thinking") or {}).get("type") == "enabled"
    if thinking or kind == "reasoning_at_cap":
        content.append({"type": "thinking", "thinking": f"(simulated thoughts {h[:6]})",
                        "signature": "c2ltdWxhdGVk"})
    stop = "max_tokens" if cut else "end_turn"
    out = 0
    if kind in ("refusal", "content_filter"):  # the safety classifiers' stop
        stop, text = "refusal", ""
    elif kind == "empty":
        text = ""
    elif kind == "reasoning_at_cap":  # thinking used all of max_tokens: no text block at all
        stop, text = "max_tokens", ""
        out = int(req.get("max_tokens") or _reasoning_cap(cap))
    if text or kind == "empty":
        content.append({"type": "text", "text": text})
    pt = _tokens("".join(t for _, t in msgs))
    one_hour = any((b.get("cache_control") or {}).get("ttl") == "1h"
                   for m in req.get("messages", []) if isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict))
    # input_tokens leaves out what was read from or written to the cache
    usage = {"input_tokens": pt - use.read - use.write,
             "cache_creation_input_tokens": use.write, "cache_read_input_tokens": use.read,
             "cache_creation": {"ephemeral_5m_input_tokens": 0 if one_hour else use.write,
                                "ephemeral_1h_input_tokens": use.write if one_hour else 0},
             "output_tokens": out or (_tokens(text) if text else 0), "service_tier": "standard"}
    return {"id": f"msg_{h[:24]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def _google_body(model: str, msgs: list[tuple[str, str]], h: str, text: str, kind: str | None,
                 cap: int | None, req: dict[str, Any], use: CacheUse = NO_CACHE
                 ) -> dict[str, Any]:
    text, cut = _cut(text, cap)
    pt = _tokens("".join(t for _, t in msgs))
    usage: dict[str, Any] = {"promptTokenCount": pt}
    if use.read:  # counted in promptTokenCount; sent only when there is a hit
        usage.update(cachedContentTokenCount=use.read,
                     cacheTokensDetails=[{"modality": "TEXT", "tokenCount": use.read}])
    if kind in ("refusal", "content_filter"):  # the safety filter's stop
        cand = {"index": 0, "finishReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
             "blocked": True}]}
        usage["totalTokenCount"] = pt
    elif kind == "reasoning_at_cap":  # thoughts count against maxOutputTokens: no parts left
        thoughts = _reasoning_cap(cap)
        cand = {"index": 0, "content": {"role": "model"}, "finishReason": "MAX_TOKENS"}
        usage.update(thoughtsTokenCount=thoughts, totalTokenCount=pt + thoughts)
    else:
        if kind == "empty":
            text = ""
        ct = _tokens(text) if text else 0
        cand = {"index": 0, "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "MAX_TOKENS" if cut else "STOP"}
        usage.update(candidatesTokenCount=ct, totalTokenCount=pt + ct)
    return {"candidates": [cand], "usageMetadata": usage, "modelVersion": model,
            "responseId": h[:20]}


REFUSAL_TEXT = "I'm sorry, but I can't help with that."
"""What the simulated model says when it refuses (OpenAI: as content on a plain chat request, in
``message.refusal`` on a Structured Outputs one)."""


def sent_text(api: str, body: dict[str, Any]) -> str:
    """The answer text of a response body as the engine's parsers read it (OpenAI the message
    content; Anthropic its text blocks; Gemini its parts that are not thoughts): what the log
    records as ``reply``, so that it is what was sent."""
    if api == "openai":
        return str(body["choices"][0]["message"].get("content") or "")
    if api == "anthropic":
        return "".join(b.get("text") or "" for b in body["content"] if b.get("type") == "text")
    parts = ((body["candidates"][0].get("content") or {}).get("parts")) or []
    return "".join(p.get("text") or "" for p in parts if not p.get("thought"))


def _reasoning_cap(cap: int | None) -> int:
    """The reasoning tokens of a reply cut at its cap (a default cap when the request set none)."""
    return int(cap) if cap else 4096


_NORM = {"openai": _norm_openai, "anthropic": _norm_anthropic, "google": _norm_google}
_BUILD = {"openai": _openai_body, "anthropic": _anthropic_body, "google": _google_body}

def _error(api: str, status: int, message: str, retry_after: float | None = None) -> _Reply:
    """An error in the API family's own envelope (Anthropic: ``{"type": "error", "error":
    {type, message}, "request_id"}``; Gemini: ``{"error": {code, message, status, details}}``;
    OpenAI: ``{"error": {message, type, param, code}}``)."""
    headers = {}
    if retry_after is not None and api != "google":  # Gemini sends no retry header
        headers["retry-after"] = str(max(1, int(retry_after + 0.999)))
        if api != "anthropic":  # Anthropic sends whole seconds only
            headers["retry-after-ms"] = str(int(retry_after * 1000))
    if api == "anthropic":
        etype = {401: "authentication_error", 402: "billing_error", 403: "permission_error",
                 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                 500: "api_error", 503: "overloaded_error", 504: "timeout_error",
                 529: "overloaded_error"}.get(status, "invalid_request_error")
        rid = _request_id(api)
        reply = _json_reply({"type": "error", "error": {"type": etype, "message": message},
                             "request_id": rid}, status, headers)
        reply.request_id = rid
        return reply
    if api == "google":
        gstatus = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                   429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}.get(
            status, "INVALID_ARGUMENT")
        details = []
        if retry_after is not None:
            details.append({"@type": _RPC + "RetryInfo", "retryDelay": _duration(retry_after)})
        return _json_reply({"error": {"code": status, "message": message, "status": gstatus,
                                      "details": details}}, status, headers)
    etype = {429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}.get(
        status, "invalid_request_error")
    return _json_reply({"error": {"message": message, "type": etype, "param": None,
                                  "code": etype}}, status, headers)


_RPC = "type.googleapis.com/google.rpc."
_GEMINI_QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. "
    "To monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. ")
_GEMINI_REQUESTS = "generativelanguage.googleapis.com/generate_content_free_tier_requests"


def _duration(seconds: float) -> str:
    """A ``google.protobuf.Duration`` as JSON: "37s", "0.25s"."""
    return f"{seconds:.9g}s"


def _gemini_quota_429(model: str, quota_id: str, limit: int, retry_after: float) -> _Reply:
    """Gemini's 429: no retry header; QuotaFailure, Help, then RetryInfo, after a long message."""
    message = (_GEMINI_QUOTA_MESSAGE + f"\n* Quota exceeded for metric: {_GEMINI_REQUESTS}, "
               f"limit: {limit}, model: {model}")
    details = [
        {"@type": _RPC + "QuotaFailure", "violations": [{
            "quotaMetric": _GEMINI_REQUESTS, "quotaId": quota_id,
            "quotaDimensions": {"location": "global", "model": model},
            "quotaValue": str(limit)}]},
        {"@type": _RPC + "Help", "links": [{
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
        {"@type": _RPC + "RetryInfo", "retryDelay": _duration(retry_after)},
    ]
    return _json_reply({"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED",
                                  "details": details}}, 429)


def _rate_limit_error(api: str, model: str, retry_after: float, rpm: float | None = None
                      ) -> _Reply:
    """Each provider's own "slow down" 429 (see ``rate_limit`` in :data:`SYNC_FAULT_KINDS`)."""
    limit = int(rpm or 60)
    if api == "google":
        return _gemini_quota_429(model, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                                 limit, retry_after)
    if api == "anthropic":
        return _error(api, 429, (
            f"This request would exceed the rate limit for your organization of {limit} requests "
            "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You "
            "can see the response headers for current usage. Please reduce the prompt length or "
            "the maximum tokens requested, or try again later."), retry_after)
    reply = _error(api, 429, (
        f"Rate limit reached for {model} in organization org-simulator on requests per min "
        f"(RPM): Limit {limit}, Used {limit}, Requested 1. Please try again in "
        f"{retry_after:.3g}s. Visit https://platform.openai.com/account/rate-limits to learn "
        "more."), retry_after)
    body = json.loads(reply.body)
    body["error"]["type"] = "requests"  # OpenAI: type names the limit, code says what happened
    reply.body = json.dumps(body).encode()
    return reply


def _overloaded_error(api: str) -> _Reply:
    """The provider is overloaded (not your limit): Anthropic 529, 503 elsewhere."""
    if api == "anthropic":
        return _error(api, 529, "Overloaded")
    if api == "google":
        return _error(api, 503, "The model is overloaded. Please try again later.")
    return _error(api, 503, "The engine is currently overloaded, please try again later.")


def _quota_error(api: str, model: str = "") -> _Reply:
    """Out of money or quota for the day: the run cannot go on (fatal to the engine)."""
    if api == "openai":
        return _json_reply({"error": {
            "message": "You exceeded your current quota, please check your plan and billing "
                       "details. For more information on this error, read the docs: "
                       "https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}, 429)
    if api == "anthropic":
        return _error(api, 400, "Your credit balance is too low to access the Anthropic API. "
                                "Please go to Plans & Billing to upgrade or purchase credits.")
    return _gemini_quota_429(model, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", 250,
                             40.0)


_ERROR_FAULT_STATUS = {
    "invalid_key": {"openai": 401, "anthropic": 401, "google": 400},
    "account_disabled": {"openai": 401, "anthropic": 400, "google": 403},
    "location_unsupported": {"openai": 403, "anthropic": 403, "google": 400},
    "model_not_found": {"openai": 404, "anthropic": 404, "google": 404},
    "quoted_request": {"openai": 400, "anthropic": 400, "google": 400},
}
"""The HTTP status of each provider's error for a fault of :data:`_ERROR_FAULTS`."""
_GEMINI_SERVICE = "generativelanguage.googleapis.com"
_SIM_PROJECT = "projects/000000000000"
_MAX_QUOTE = 300
"""Characters of the user's message a ``quoted_request`` error repeats."""


def _provider_error(api: str, kind: str, model: str, msgs: list[tuple[str, str]]) -> _Reply:
    """The provider's own error for ``kind`` (``quota``, ``quoted_request`` and the other
    :data:`STOP_FAULT_KINDS`; see their docstrings in :mod:`hbpsych_utils.llm.faults`)."""
    if kind == "quota":
        return _quota_error(api, model)
    status = _ERROR_FAULT_STATUS[kind][api]
    if kind == "quoted_request":
        sent = [(r, t) for r, t in msgs if api == "openai" or r != "system"]  # as on the wire
        index = max((i for i, (role, _) in enumerate(sent) if role == "user"), default=0)
        quoted = json.dumps(sent[index][1][:_MAX_QUOTE] if sent else "", ensure_ascii=False)
        if api == "openai":
            param = f"messages[{index}].content"
            return _openai_error(status, f"Invalid value at '{param}': {quoted}",
                                 "invalid_request_error", "invalid_value", param)
        if api == "anthropic":
            return _error(api, status, f"messages.{index}.content: invalid text {quoted}")
        field = f"contents[{index}].parts[0].text"
        message = f"Invalid value at '{field}' (TYPE_STRING), {quoted}"
        return _google_error(status, "INVALID_ARGUMENT", message, [
            {"@type": _RPC + "BadRequest",
             "fieldViolations": [{"field": field, "description": message}]}])
    if api == "openai":
        return {
            "invalid_key": lambda: _openai_error(
                status, "Incorrect API key provided: sim-****. You can find your API key at "
                "https://platform.openai.com/account/api-keys.", "invalid_request_error",
                "invalid_api_key"),
            "account_disabled": lambda: _openai_error(
                status, "The OpenAI account associated with this API key has been "
                "deactivated. If you are the developer for this OpenAI app, please check your "
                "email for more information. If you are seeing this error while using another "
                "app or site, please reach out to them for more help.", "invalid_request_error",
                "account_deactivated"),
            "location_unsupported": lambda: _openai_error(
                status, "Country, region, or territory not supported", "request_forbidden",
                "unsupported_country_region_territory"),
            "model_not_found": lambda: _openai_error(
                status, f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error", "model_not_found"),
        }[kind]()
    if api == "anthropic":
        if kind == "location_unsupported":  # the edge's refusal: no "type": "error" envelope
            return _json_reply({"error": {"type": "forbidden", "message": "Request not allowed"}},
                               status)
        return _error(api, status, {
            "invalid_key": "invalid x-api-key",
            "account_disabled": "This organization has been disabled.",
            "model_not_found": f"model: {model}"}[kind])
    if kind == "invalid_key":
        message = "API key not valid. Please pass a valid API key."
        return _google_error(status, "INVALID_ARGUMENT", message, [
            {"@type": _RPC + "ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com", "metadata": {"service": _GEMINI_SERVICE}},
            {"@type": _RPC + "LocalizedMessage", "locale": "en-US", "message": message}])
    if kind == "account_disabled":  # Gemini names the key; the simulator names the project
        return _google_error(
            status, "PERMISSION_DENIED",
            f"Permission denied: Consumer '{_SIM_PROJECT}' has been suspended.",
            [{"@type": _RPC + "ErrorInfo", "reason": "CONSUMER_SUSPENDED",
              "domain": "googleapis.com",
              "metadata": {"service": _GEMINI_SERVICE, "consumer": _SIM_PROJECT}}])
    if kind == "location_unsupported":
        return _google_error(status, "FAILED_PRECONDITION",
                             "User location is not supported for the API use.")
    return _google_error(
        status, "NOT_FOUND", f"models/{model} is not found for API version v1beta, or is not "
        "supported for generateContent. Call ListModels to see the list of available models "
        "and their supported methods.")


def _openai_error(status: int, message: str, etype: str, code: str | None,
                  param: str | None = None) -> _Reply:
    """OpenAI's error envelope: ``{"error": {message, type, param, code}}``."""
    return _json_reply({"error": {"message": message, "type": etype, "param": param,
                                  "code": code}}, status)


def _google_error(status: int, name: str, message: str,
                  details: list[dict[str, Any]] | None = None) -> _Reply:
    """Gemini's error envelope: ``{"error": {code, message, status[, details]}}``."""
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if details:
        error["details"] = details
    return _json_reply({"error": error}, status)


def _invalid_request(api: str, model: str, body: dict[str, Any]) -> str | None:
    """The message of the 400 the real API gives a request it rejects, or None.

    Anthropic: a text block must hold non-whitespace text and at most 4 blocks may carry
    ``cache_control``; extended thinking needs ``budget_tokens`` >= 1024 and < ``max_tokens``.
    Gemini: a
    ``thinkingBudget`` outside the model's range (2.5 Pro 128-32768 and thinking cannot be
    switched off; others 0-24576; -1 is dynamic). Gemini accepts a budget above
    ``maxOutputTokens``: the thoughts then count against the cap.
    """
    if api == "anthropic":
        blocks = [b for m in body.get("messages", []) if isinstance(m.get("content"), list)
                  for b in m["content"] if isinstance(b, dict)]
        if isinstance(body.get("system"), list):
            blocks += [b for b in body["system"] if isinstance(b, dict)]
        if any(b.get("type") == "text" and not str(b.get("text") or "").strip() for b in blocks):
            return "messages: text content blocks must contain non-whitespace text"
        marked = sum(isinstance(b.get("cache_control"), dict) for b in blocks)
        if marked > 4:
            return f"A maximum of 4 blocks with cache_control may be provided. Found {marked}."
        thinking = body.get("thinking") or {}
        if thinking.get("type") != "enabled":
            return None
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int):
            return "thinking.enabled.budget_tokens: Field required"
        if budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= int(body.get("max_tokens") or 0):
            return ("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult "
                    "our documentation at https://docs.claude.com/en/docs/build-with-claude/"
                    "extended-thinking#max-tokens-and-context-window-size")
        return None
    if api == "google":
        # protobuf JSON takes lowerCamelCase and the proto names alike (the SDK sends both)
        gc = body.get("generationConfig") or body.get("generation_config") or {}
        config = gc.get("thinkingConfig") or gc.get("thinking_config") or {}
        budget = config.get("thinkingBudget", config.get("thinking_budget"))
        if budget is None or budget == -1:
            return None
        pro = "pro" in model
        if pro and budget == 0:
            return "Budget 0 is invalid. This model only works in thinking mode."
        low, high = (128, 32768) if pro else (0, 24576)
        if not low <= budget <= high:
            return f"The thinking budget ({budget}) is invalid."
    return None


# ---------------------------------------------------------------- helpers
def _loads(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body or b"{}")
    except json.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _last_user(msgs: list[tuple[str, str]]) -> str:
    for role, text in reversed(msgs):
        if role == "user":
            return text[:200]
    return ""


def body_sha256(body: Any) -> str:
    """sha256 of a request body as received, in canonical JSON (sorted keys, no spaces, UTF-8:
    ``llm.requests.canonical_json``): equal for two bodies exactly when they are the same JSON,
    key order and the client's spacing aside (an int and a float, a null and a missing key
    differ)."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def _last_user_sha256(msgs: list[tuple[str, str]]) -> str:
    """sha256 of the whole last user message (the log keeps only its first 200 characters)."""
    text = next((t for r, t in reversed(msgs) if r == "user"), "")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _rfc3339(t: float) -> str:
    """A time as Anthropic's rate-limit resets give it: RFC 3339, UTC, whole seconds."""
    return _iso(math.ceil(t))


def _go_duration(seconds: float) -> str:
    """A wait as OpenAI's ``x-ratelimit-reset-*`` headers write it: "17ms", "1s", "6m0s"."""
    if seconds < 1.0:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60.0)
    rest_text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{rest_text}" if minutes else rest_text


def _request_id(api: str) -> str:
    """A fresh response id in the API's form (OpenAI ``req_`` + 32 hex; Anthropic ``req_`` +
    24 characters)."""
    return "req_" + (uuid.uuid4().hex if api == "openai" else "sim" + uuid.uuid4().hex[:21])


def _connected(request: web.Request) -> bool:
    transport = request.transport
    return transport is not None and not transport.is_closing()


def _tenant(request: web.Request) -> str:
    """The path prefix before ``/v1``: which OpenAI-compatible provider was asked."""
    return request.match_info.get("tenant", "").strip("/")


async def _form_parts(request: web.Request) -> dict[str, bytes]:
    """The fields of a multipart/form-data upload (the OpenAI SDK's file upload)."""
    out: dict[str, bytes] = {}
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if isinstance(part, BodyPartReader) and part.name:
            out[part.name] = bytes(await part.read())
    return out


# ---------------------------------------------------------------- child-process variant
class SimulatorProcess:
    """The simulator in a child process (so benchmarks do not share the GIL with it)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_urls(self) -> dict[str, str]:
        return {"openai": f"{self.url}/v1", "anthropic": self.url, "google": self.url,
                "openai_compatible": f"{self.url}/v1"}

    base_urls_for = Simulator.base_urls_for

    def __enter__(self) -> SimulatorProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from hbpsych_utils.llm.testing.simulator "
             "import _main; _main(sys.argv[1:])", json.dumps(self.options)],
            stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().strip())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def fetch_log(self) -> dict[str, Any]:
        import httpx

        return httpx.get(f"{self.url}/__sim/log", timeout=60).json()

    def clear(self) -> None:
        import httpx

        httpx.post(f"{self.url}/__sim/clear", timeout=60)


def _main(argv: list[str]) -> None:
    options = json.loads(argv[0]) if argv else {}
    faults = [Fault(**f) for f in options.pop("faults", [])]
    sim = Simulator(faults=faults, **options).start()
    print(sim.port, flush=True)
    parent = os.getppid()
    try:
        while os.getppid() == parent:  # exit with the process that started us
            time.sleep(1.0)
    except KeyboardInterrupt:  # pragma: no cover
        pass
    sim.stop()


if __name__ == "__main__":
    _main(sys.argv[1:])
