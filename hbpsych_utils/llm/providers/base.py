"""What every provider adapter gives the engine, and how provider errors are classified.

An adapter builds the wire body of a request (the same body goes into a batch line), sends it
through the vendor's official async SDK with SDK retries switched off (the engine owns retries),
and turns a response into a :class:`Reply`. Errors become :class:`CallError` with one of three
kinds: ``transient`` (retry with back-off: transport errors, timeouts, 408/409/429/5xx incl.
Anthropic's 529, unreadable bodies), ``fatal`` (stop the run after this one call: a bad key,
permission, exhausted quota, credit or billing, a usage or spend limit the account set, a
per-day quota, an organisation disabled, a location the provider does not serve, a model that
does not exist — whatever the status: several of these are 400s) and ``permanent`` (this request
will never work: other 4xx; stored as failed, not retried now).

The kind is decided on the error's structured fields (:class:`ErrorFields`: the HTTP status
and the codes the body carries — OpenAI's ``error.code`` / ``error.type``, Anthropic's
``error.details.error_code`` / ``error.type``, Google's ``ErrorInfo`` reasons and
``error.status``), and on the message only where no field tells the cause apart (Anthropic's
credit-balance, usage-limit and disabled-organisation errors are plain 400
``invalid_request_error``s): then the message must *begin* with the provider's own sentence.
A message may quote the request (a validation error, a server or proxy echoing the prompt), so
text found anywhere else in it — "my credit balance is too low" in a conversation — never stops
a run; that request fails alone (:func:`classify_error`).

How long to wait comes from wherever the provider puts it: the ``retry-after-ms`` /
``retry-after`` headers (OpenAI; Anthropic sends whole seconds), Google's structured
``google.rpc.RetryInfo`` detail (Gemini sends no header; the detail may sit after a long message
and other details, so it is read from the parsed details, never from a cut string), or the
message's own "try again in 1.5s" / "retry in 37s".
"""

from __future__ import annotations

import email.utils
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from hbpsych_utils.core.secrets import scrub
from hbpsych_utils.llm.cost import estimate_input_tokens
from hbpsych_utils.llm.models import ModelSpec, ProviderSpec
from hbpsych_utils.llm.requests import Request

ErrorKind = Literal["transient", "fatal", "permanent"]
log = logging.getLogger("hbpsych_utils.llm")

_ACCOUNT_ACTION = "fix it in the provider's console (credit, limit or key), then re-run"
_ACCESS_ACTION = ("the account must be restored with the provider (its console or support) "
                  "before a re-run")
_PLACE_ACTION = "run from a country or region the provider serves, then re-run"
_MODEL_ACTION = ("check the model's snapshot id in the registry (params/models.yaml or "
                 "llm.registry_file) and that the account may use it, then re-run")
MODEL_NOT_FOUND = "the model does not exist here, or the account has no access to it"

# Codes that mean "stop" rather than "slow down" or "this request is wrong", each with what it
# means for the person running the study and what to do. Codes are provider enums, never text
# of the request; a code names the cause whatever the HTTP status (OpenAI's billing hard limit
# is a 400, Anthropic's monthly spend cap a 429, a bad Gemini key a 400).
_FATAL_CODES: dict[str, tuple[str, str]] = {
    # OpenAI error.code / error.type
    "insufficient_quota": ("the account is out of credit or quota", _ACCOUNT_ACTION),
    "billing_hard_limit_reached": ("the organisation's billing hard limit is reached",
                                   _ACCOUNT_ACTION),
    "billing_not_active": ("the account's billing is not active", _ACCOUNT_ACTION),
    "invalid_api_key": ("the API key is not valid", _ACCOUNT_ACTION),
    "account_deactivated": ("the account has been deactivated", _ACCESS_ACTION),
    "unsupported_country_region_territory": (
        "the provider does not serve the country, region or territory the run is made from",
        _PLACE_ACTION),
    "model_not_found": (MODEL_NOT_FOUND, _MODEL_ACTION),
    # Anthropic error.details.error_code / error.type (llama.cpp's server uses the same types)
    "enforced_spend_limit_reached": ("the account's spend limit is reached", _ACCOUNT_ACTION),
    "contract_spend_limit_reached": ("the contract's spend limit is reached", _ACCOUNT_ACTION),
    "linked_organization_spend_limit_reached": (
        "the linked organisation's spend limit or credit is reached", _ACCOUNT_ACTION),
    "linked_organization_billing_unavailable": (
        "the linked organisation cannot be billed", _ACCOUNT_ACTION),
    "organization_on_hold": ("the organisation has been disabled (on hold)", _ACCESS_ACTION),
    "billing_error": ("the provider reports a billing error", _ACCOUNT_ACTION),
    "authentication_error": ("the API key was refused", _ACCOUNT_ACTION),
    "permission_error": ("the API key lacks permission for this model or project",
                         _ACCOUNT_ACTION),
    # Google ErrorInfo reasons / error.status
    "API_KEY_INVALID": ("the API key is not valid", _ACCOUNT_ACTION),
    "CONSUMER_SUSPENDED": ("the API key's project has been suspended", _ACCESS_ACTION),
    "BILLING_DISABLED": ("billing is disabled for the project", _ACCOUNT_ACTION),
    "SERVICE_DISABLED": ("the API is not enabled for the project", _ACCOUNT_ACTION),
    "UNAUTHENTICATED": ("the API key was refused", _ACCOUNT_ACTION),
    "PERMISSION_DENIED": ("the API key lacks permission for this model or project",
                          _ACCOUNT_ACTION),
    "FAILED_PRECONDITION": (
        "the provider does not serve this account where the run is made from "
        "(FAILED_PRECONDITION: an unsupported location, or a free tier not offered there)",
        _PLACE_ACTION),
}
_FATAL_STATUS: dict[int, tuple[str, str]] = {
    401: ("the API key was refused", _ACCOUNT_ACTION),
    402: ("the provider asks for payment", _ACCOUNT_ACTION),
    403: ("access is refused (the key's permissions, the organisation or the location)",
          _ACCOUNT_ACTION)}
# The provider's own first words where no field tells the cause apart (Anthropic's 400
# invalid_request_error carries these): matched at the start of the message only.
_FATAL_OPENINGS: tuple[tuple[str, tuple[str, str]], ...] = (
    ("your credit balance is too low", ("the credit balance is too low", _ACCOUNT_ACTION)),
    ("you have reached your specified api usage limits",
     ("the API usage limit set for the account is reached", _ACCOUNT_ACTION)),
    ("this organization has been disabled",
     ("the organisation has been disabled", _ACCESS_ACTION)),
)
# A 429 that no wait will cure: OpenAI's "Request too large for <model> ... on tokens per min".
_PERMANENT_429_OPENINGS = ("request too large for",)


@dataclass(frozen=True)
class ErrorFields:
    """A provider error as its structured fields give it (each adapter reads its own shape).

    ``status``: the HTTP status (a batch item's, or the one its error type stands for).
    ``codes``: the machine-readable names the body carries, most specific first; an HTTP status
    repeated as a code (local servers write ``"code": 404``) is not one. ``message``: the
    provider's message, which may quote the request: read only where no code decides, and only
    from its start."""

    status: int | None
    codes: tuple[str, ...] = ()
    message: str = ""


def error_codes(*values: Any) -> tuple[str, ...]:
    """The values that are codes: non-empty strings that are not a number (an HTTP status)."""
    return tuple(v.strip() for v in values
                 if isinstance(v, str) and v.strip() and not v.strip().isdigit())


def stop_cause(err: ErrorFields, *, model_call: bool = True) -> tuple[str, str] | None:
    """Why ``err`` must stop the run, and what to do, or None when it need not.

    In this order: a code of :data:`_FATAL_CODES` (the most specific first); on a model call, a
    404 (the model or the endpoint does not exist: every request to it fails the same way —
    never on a batch endpoint, where a 404 says the batch is gone); 401, 402 or 403; the
    provider's own opening sentence (:data:`_FATAL_OPENINGS`)."""
    for code in err.codes:
        if code in _FATAL_CODES:
            return _FATAL_CODES[code]
    if model_call and err.status == 404:
        return MODEL_NOT_FOUND, _MODEL_ACTION
    if err.status in _FATAL_STATUS:
        return _FATAL_STATUS[err.status]
    opening = " ".join(err.message.split()).lower()
    return next((stop for start, stop in _FATAL_OPENINGS if opening.startswith(start)), None)


@dataclass
class Reply:
    """A provider answer reduced to what the engine stores.

    ``input_tokens`` counts every prompt token (for Anthropic, whose ``input_tokens`` leaves
    them out, the adapter adds the cache reads and writes); ``cache_read_tokens`` of them were
    read from the provider's prompt cache and ``cache_write_tokens`` written to it. A provider
    reporting more cache tokens than prompt tokens (a server's own usage fields) has its cache
    counts cut to the prompt here, with a warning, so that what is priced and what is stored
    agree and the run goes on."""

    text: str
    stop_reason: str | None
    refusal: bool
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __post_init__(self) -> None:
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            log.warning("%d cache-read + %d cache-write tokens reported for %d prompt tokens "
                        "(stop reason %r); counted within the prompt", self.cache_read_tokens,
                        self.cache_write_tokens, self.input_tokens, self.stop_reason)
            self.cache_read_tokens = min(self.cache_read_tokens, self.input_tokens)
            self.cache_write_tokens = min(self.cache_write_tokens,
                                          self.input_tokens - self.cache_read_tokens)


class CallError(Exception):
    """A failed call, as the engine stores and reports it. Its message is scrubbed of every API
    key (:func:`core.secrets.scrub`): a proxy or an OpenAI-compatible server may answer 401
    with the key it was sent, and the message goes on to the store, the notebook and the
    terminal."""

    def __init__(self, kind: ErrorKind, message: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(scrub(message, cut=True))
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
_RETRY_HINT = re.compile(r"(?:try again|retry) in ([\d.]+)\s*(ms|s)\b", re.IGNORECASE)
_RPC = "type.googleapis.com/google.rpc."


def retry_hint(message: str) -> float | None:
    """Seconds to wait as a message says it: ``retryDelay: 37s``, "Please try again in 174ms",
    "Please retry in 55.57s" (OpenAI and Gemini write them into the message text)."""
    m = _RETRY_DELAY.search(message)
    if m:
        return float(m.group(1))
    m = _RETRY_HINT.search(message)
    if m:
        return float(m.group(1)) / (1000.0 if m.group(2).lower() == "ms" else 1.0)
    return None


def parse_duration(value: Any) -> float | None:
    """A ``google.protobuf.Duration`` in its JSON form ("37s", "45.837906927s") or as
    ``{"seconds": .., "nanos": ..}``; None when it is neither."""
    if isinstance(value, str) and value.strip().endswith("s"):
        try:
            return max(0.0, float(value.strip()[:-1]))
        except ValueError:
            return None
    if isinstance(value, dict) and ("seconds" in value or "nanos" in value):
        try:
            return max(0.0, float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9)
        except (TypeError, ValueError):
            return None
    return None


def rpc_details(details: Any, kind: str) -> list[dict[str, Any]]:
    """The entries of a Google error's ``details`` list whose ``@type`` is ``google.rpc.<kind>``."""
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, dict) and d.get("@type") == _RPC + kind]


def rpc_retry_delay(details: Any) -> float | None:
    """``RetryInfo.retryDelay`` in seconds, wherever it sits in the details list."""
    for d in rpc_details(details, "RetryInfo"):
        delay = parse_duration(d.get("retryDelay"))
        if delay is not None:
            return delay
    return None


def rpc_quota_violations(details: Any) -> list[dict[str, Any]]:
    """Every ``QuotaFailure`` violation of a Google error (quotaId, quotaMetric, dimensions)."""
    return [v for d in rpc_details(details, "QuotaFailure")
            for v in (d.get("violations") or []) if isinstance(v, dict)]


def is_daily_quota(violation: dict[str, Any]) -> bool:
    """A quota counted per day (``GenerateRequestsPerDayPerProjectPerModel-FreeTier``, a tokens
    per day limit): it resets at midnight Pacific time, so no retry within a run can succeed."""
    return "perday" in str(violation.get("quotaId") or "").replace("_", "").lower()


def describe_quota(violation: dict[str, Any]) -> str:
    """One violation named for a person: quota id, metric, model and limit where given."""
    dims = violation.get("quotaDimensions") or {}
    parts = [f"metric {violation['quotaMetric']}"] if violation.get("quotaMetric") else []
    if isinstance(dims, dict) and dims.get("model"):
        parts.append(f"model {dims['model']}")
    if violation.get("quotaValue"):
        parts.append(f"limit {violation['quotaValue']}")
    name = str(violation.get("quotaId") or "unnamed quota")
    return f"{name} ({', '.join(parts)})" if parts else name


def classify_error(err: ErrorFields, shown: str, retry_after: float | None = None, *,
                   model_call: bool = True) -> CallError:
    """The kind of a provider error from its fields (see the module docstring).

    ``shown`` is what the stored and printed message says of the error (the adapter's cut of the
    body); a fatal error's message says the cause in words and what to do, then ``shown``.
    ``model_call``: the error answered a model call (sync, or a batch item), not a batch
    endpoint. The wait of a transient error is ``retry_after`` (headers, Google's RetryInfo),
    else the one the message names."""
    status = err.status
    if status is None:
        return CallError("transient", shown, None, retry_after)
    stop = stop_cause(err, model_call=model_call)
    if stop is not None:
        cause, action = stop
        return CallError("fatal", f"{cause} ({shown}); {action}", status)
    opening = " ".join(err.message.split()).lower()
    if status == 429 and opening.startswith(_PERMANENT_429_OPENINGS):
        return CallError("permanent", shown, status)
    if status in (408, 409, 425, 429) or status >= 500:
        if retry_after is None:
            retry_after = retry_hint(err.message)
        return CallError("transient", shown, status, retry_after)
    return CallError("permanent", shown, status)


def classify_status(status: int | None, message: str, retry_after: float | None = None
                    ) -> CallError:
    """The kind of an error known only by its status and message (a body that is not the
    provider's JSON envelope: a proxy's page, plain text)."""
    return classify_error(ErrorFields(status, (), message), message, retry_after)


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

    def classify(self, exc: BaseException, *, model_call: bool = True) -> CallError:
        """``exc`` as a :class:`CallError`; ``model_call`` is False for a batch endpoint's
        error (submit, status, results), where a 404 means the batch is gone."""
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    # batch hooks (adapters of providers with batch APIs override them and the limits)
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


def cache_arranged(spec: ModelSpec, req: Request) -> bool:
    """Whether ``req`` is sent arranged for ``spec``'s prompt cache: it names a shared prefix
    (``Request.cache_prefix_chars``) and that prefix — earlier messages and the shared start of
    the last one, at ~4 characters per token — reaches the model's ``cache_min_tokens``. The
    engine groups such requests, adapters add the provider's hint or breakpoint, and the key
    and the recorded config say so; every other request is sent exactly as without caching."""
    prefix = req.shared_prefix()
    if prefix is None:
        return False
    return spec.caches_prefix(estimate_input_tokens(sum(len(m.content) for m in prefix)))


def cache_hint(req: Request) -> str:
    """The routing hint for a request's shared prefix (OpenAI's ``prompt_cache_key``): the
    same for every request of the group, 36 characters."""
    return "hbp-" + str(req.cache_prefix_key())[:32]


def split_system(req: Request) -> tuple[str | None, list[dict[str, str]]]:
    """System/developer messages joined into one system text; the rest as role/content dicts."""
    system = [m.content for m in req.messages if m.role in ("system", "developer")]
    rest = [{"role": m.role, "content": m.content} for m in req.messages
            if m.role not in ("system", "developer")]
    return ("\n\n".join(system) if system else None), rest
