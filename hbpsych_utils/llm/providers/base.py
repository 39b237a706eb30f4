"""What every provider adapter gives the engine, and how provider errors are classified.

An adapter builds the wire body of a request (the same body goes into a batch line), sends it
through the vendor's official async SDK with SDK retries switched off (the engine owns retries),
and turns a response into a :class:`Reply`. Errors become :class:`CallError` with one of three
kinds: ``transient`` (retry with back-off: transport errors, timeouts, 408/409/429/5xx,
unreadable bodies), ``fatal`` (stop the run: bad key, permission, exhausted quota or billing) and
``permanent`` (this request will never work: other 4xx; stored as failed, not retried now).
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from hbpsych_utils.llm.models import ModelSpec, ProviderSpec
from hbpsych_utils.llm.requests import Request

ErrorKind = Literal["transient", "fatal", "permanent"]

# Phrases by which providers say "no money / no quota" rather than "slow down".
_FATAL_PHRASES = ("insufficient_quota", "credit balance", "credits are depleted",
                  "billing is not enabled", "billing account", "billing_error",
                  "payment required")


@dataclass
class Reply:
    """A provider answer reduced to what the engine stores."""

    text: str
    stop_reason: str | None
    refusal: bool
    input_tokens: int
    output_tokens: int


class CallError(Exception):
    def __init__(self, kind: ErrorKind, message: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after


class MalformedReply(ValueError):
    """A 200 response whose body is not the provider's response shape."""


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms:
            return max(0.0, float(ms) / 1000.0)
        ra = headers.get("retry-after")
    except Exception:
        return None
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(ra)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


_RETRY_DELAY = re.compile(r"retryDelay'?\"?\s*[:=]\s*'?\"?([\d.]+)s")


def classify_status(status: int | None, message: str, retry_after: float | None) -> CallError:
    low = message.lower()
    if status is None:
        return CallError("transient", message, None, retry_after)
    if any(p in low for p in _FATAL_PHRASES):
        return CallError("fatal", message, status)
    if status in (401, 403):
        return CallError("fatal", message, status)
    if status in (408, 409, 425, 429) or status >= 500:
        if retry_after is None:
            m = _RETRY_DELAY.search(message)
            retry_after = float(m.group(1)) if m else None
        return CallError("transient", message, status, retry_after)
    return CallError("permanent", message, status)


class Adapter:
    """Base class; subclasses implement :meth:`body`, :meth:`call` and the batch hooks."""

    kind = "base"
    api = "base"

    def __init__(self, provider: ProviderSpec, api_key: str, base_url: str | None,
                 timeout: float) -> None:
        self.provider = provider
        self.base_url = base_url
        self.timeout = timeout
        self._api_key = api_key
        # a provider the registry marks as batch-capable, with an adapter that has batch hooks
        self.supports_batch = bool(provider.batch) and self.max_batch_items > 0

    @staticmethod
    def body(spec: ModelSpec, req: Request, decoding: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def call(self, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def classify(self, exc: BaseException) -> CallError:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    # batch hooks (adapters of providers with batch APIs override them and the limits)
    supports_batch = False
    max_batch_items = 0
    max_batch_bytes = 0

    async def batch_submit(self, model: str, items: list[tuple[str, dict[str, Any]]]
                           ) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    async def batch_poll(self, batch_id: str, info: dict[str, Any]
                         ) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    async def batch_collect(self, batch_id: str, info: dict[str, Any]
                            ) -> dict[str, Reply | CallError]:
        raise NotImplementedError


def split_system(req: Request) -> tuple[str | None, list[dict[str, str]]]:
    """System/developer messages joined into one system text; the rest as role/content dicts."""
    system = [m.content for m in req.messages if m.role in ("system", "developer")]
    rest = [{"role": m.role, "content": m.content} for m in req.messages
            if m.role not in ("system", "developer")]
    return ("\n\n".join(system) if system else None), rest
