"""Typed request and result records, and the canonical request key.

A request's key is the sha256 of the canonical JSON of everything that determines the model's
answer: provider, endpoint class (the provider's own URL, a loopback server, or another host),
API, and the wire body (snapshot id, messages, the decoding parameters actually sent, response
schema). Tags and metadata are for the caller and do not enter the key, so
the same question asked by two stages is answered (and paid for) once.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

KEY_VERSION = 1

Status = Literal["ok", "refused", "failed", "not_run"]
COMPLETED = ("ok", "refused")


class ChatMessage(NamedTuple):
    role: str
    content: str


_ROLES = {"system", "developer", "user", "assistant"}


def _normalise_messages(messages: Iterable[Any]) -> tuple[ChatMessage, ...]:
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, Mapping):
            role, content = m.get("role"), m.get("content")
        else:  # corpus.Message, ChatMessage, or any object with role/content
            role, content = getattr(m, "role", None), getattr(m, "content", None)
        if role not in _ROLES:
            raise ValueError(f"message {i}: role {role!r} is not one of {sorted(_ROLES)}")
        if not isinstance(content, str):
            raise ValueError(f"message {i}: content must be a string, got {type(content).__name__}")
        out.append(ChatMessage(role, content))
    if not out:
        raise ValueError("a request needs at least one message")
    return tuple(out)


@dataclass(frozen=True, eq=False)
class Request:
    """One model call as a stage wants it; decoding quirks are applied by the engine.

    ``messages`` accepts dicts or objects with ``role``/``content`` (e.g. corpus messages).
    ``tag`` and ``metadata`` travel to the result and never enter the key. ``sample`` is a
    replicate index: it is never sent, but a non-zero value enters the key, so a deliberate
    re-ask of the same question (an unparseable judge verdict) or another sampled reply is a
    new call, not a cache hit. ``repeat`` is a deliberate re-grading of the same question (the
    judges' self-consistency): never sent either, a non-zero value enters the key, so each
    repeat is its own store entry while re-asks inside it still count ``sample``. ``seed`` is
    a sampling seed, sent (and so part of the key) only to a model whose API takes one
    (``models.resolve_decoding``); the config a result records says whether it was.

    ``cache_prefix_chars`` says that the first that many characters of the last message (a user
    turn), with every message before it, are shared with other requests (grading: every
    criterion of one reply). The prompt sent is the same; the engine uses it to arrange calls
    for the providers' prompt caches when the prefix is long enough for the model's cache
    (``docs/engine.md``, *Prompt caching*).
    """

    model: str
    messages: tuple[ChatMessage, ...]
    temperature: float | None = None
    max_tokens: int | None = None
    response_schema: Mapping[str, Any] | None = None
    tag: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sample: int = 0
    repeat: int = 0
    cache_prefix_chars: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _normalise_messages(self.messages))
        if self.sample < 0:
            raise ValueError(f"sample must be >= 0, got {self.sample}")
        if self.repeat < 0:
            raise ValueError(f"repeat must be >= 0, got {self.repeat}")
        if self.max_tokens is not None and int(self.max_tokens) < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        n = self.cache_prefix_chars
        if n is not None:
            last = self.messages[-1]
            if last.role != "user":
                raise ValueError(f"cache_prefix_chars: the last message must be a user turn, "
                                 f"got {last.role!r}")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(last.content):
                raise ValueError(f"cache_prefix_chars must be an int in 1..{len(last.content)} "
                                 f"(the last message's length), got {n!r}")

    def prompt_chars(self) -> int:
        return sum(len(m.content) for m in self.messages)

    def shared_prefix(self) -> tuple[ChatMessage, ...] | None:
        """The messages shared with the other requests of a prefix group (the last one cut at
        ``cache_prefix_chars``), or None when the request names no shared prefix."""
        n = self.cache_prefix_chars
        if n is None:
            return None
        last = self.messages[-1]
        return (*self.messages[:-1], ChatMessage(last.role, last.content[:n]))

    def cache_prefix_key(self) -> str | None:
        """sha256 of the shared prefix and the response schema (which providers put in front of
        the prompt); the same for every request of a prefix group, whatever the model."""
        return self._prefix_key

    @functools.cached_property
    def _prefix_key(self) -> str | None:
        # computed once per request: the engine (prefix group) and the adapter's body (OpenAI's
        # routing hint) both need it, and the prefix is the long part of a grading prompt
        prefix = self.shared_prefix()
        if prefix is None:
            return None
        blob = {"prefix": [list(m) for m in prefix],
                "schema": dict(self.response_schema) if self.response_schema else None}
        return hashlib.sha256(canonical_json(blob).encode("utf-8")).hexdigest()


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(
    *, provider: str, endpoint: str, api: str, body: Mapping[str, Any], sample: int = 0,
    cache: str | None = None, repeat: int = 0,
) -> str:
    """sha256 of the canonical request: provider, endpoint class, API and the wire body.

    The wire body holds the snapshot id, the messages, the decoding parameters actually sent
    (after the registry's quirks) and the response schema. A non-zero ``sample`` (replicate
    index) is added; sample 0 leaves the key as it always was; so is a non-zero ``repeat`` (a
    deliberate re-grading), repeat 0 leaving it unchanged. ``cache`` (the model's cache mode
    when the request is arranged for its prompt cache) is added too, so an arranged request
    never shares a key with an unarranged one, even where the wire body is the same (Gemini).
    """
    blob = {"v": KEY_VERSION, "provider": provider, "endpoint": endpoint, "api": api,
            "body": body}
    if sample:
        blob["sample"] = sample
    if repeat:
        blob["repeat"] = repeat
    if cache:
        blob["cache"] = cache
    return hashlib.sha256(canonical_json(blob).encode("utf-8")).hexdigest()


@dataclass
class Result:
    """The outcome of one request. ``text`` is the model's answer only when status is ok.

    status: ``ok`` (answer stored), ``refused`` (the provider's own refusal stop reason; stored,
    never re-sampled), ``failed`` (retries exhausted or a permanent error; retried on the next
    run), ``not_run`` (stopped by ``max_cost`` or a fatal provider error before it was sent).
    ``cache_read_tokens`` / ``cache_write_tokens``: prompt tokens the provider reports as read
    from / written to its prompt cache (stored with the result and in the ledger; 0 when none
    are reported).
    """

    key: str
    model: str
    provider: str
    status: Status
    text: str | None = None
    stop_reason: str | None = None
    refusal: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    """USD, at the registry's prices for the path taken (batch, cached tokens)."""
    latency: float = 0.0
    attempts: int = 0
    """Calls made for it, re-asks and retries included."""
    error: str | None = None
    mode: str = "sync"
    cached: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    tag: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.status in COMPLETED

    def json(self) -> Any:
        """The answer parsed as JSON (structured output); ValueError naming the key otherwise."""
        if self.text is None:
            raise ValueError(f"result {self.key[:12]} ({self.model}) has no text: {self.status}")
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"result {self.key[:12]} ({self.model}) is not JSON: {exc}"
            ) from None
