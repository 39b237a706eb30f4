"""Gemini ``generateContent`` and batch mode through the ``google-genai`` SDK.

Assistant turns become role ``model``; system/developer messages become
``system_instruction``; structured output uses ``response_json_schema``. The SDK's own retries
are switched off (one attempt). Thought parts are not part of the answer. Refusal: a finish
reason among the safety ones, or a prompt blocked before any candidate. Prompt caching is
implicit (no hint, no breakpoint): ``usageMetadata.cachedContentTokenCount`` are the cache reads.
"""

from __future__ import annotations

from typing import Any

from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gtypes

from hbpsych_utils.core.secrets import clip
from hbpsych_utils.llm.models import ModelSpec
from hbpsych_utils.llm.providers import base
from hbpsych_utils.llm.requests import Request

REFUSAL_REASONS = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"}
_DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


class GoogleAdapter(base.Adapter):
    kind = "google"
    api = "generate_content"
    max_batch_items = 10_000
    max_batch_bytes = 18 * 1024 * 1024  # inline batch requests are capped at 20 MB

    def __init__(self, provider: Any, api_key: str, base_url: str | None, timeout: float) -> None:
        super().__init__(provider, api_key, base_url, timeout)
        opts: dict[str, Any] = {"timeout": int(timeout * 1000),
                                "retry_options": gtypes.HttpRetryOptions(attempts=1),
                                "async_client_args": {"transport": _httpx_transport()}}
        if base_url:
            opts.update(base_url=base_url, api_version="v1beta")
        self.client = genai.Client(api_key=api_key, http_options=gtypes.HttpOptions(**opts))

    @staticmethod
    def body(spec: ModelSpec, req: Request, decoding: dict[str, Any]) -> dict[str, Any]:
        system, messages = base.split_system(req)
        contents = [{"role": "model" if m["role"] == "assistant" else "user",
                     "parts": [{"text": m["content"]}]} for m in messages]
        config: dict[str, Any] = dict(decoding)
        if system is not None:
            config["system_instruction"] = system
        if req.response_schema is not None and spec.schema_mode != "none":
            config["response_mime_type"] = "application/json"
            if spec.schema_mode == "json_schema":
                config["response_json_schema"] = dict(req.response_schema)
        return {"model": spec.api_model, "contents": contents, "config": config}

    async def call(self, body: dict[str, Any]) -> base.Reply:
        resp = await self.client.aio.models.generate_content(
            model=body["model"], contents=body["contents"], config=body["config"])
        return parse_response(resp)

    def classify(self, exc: BaseException, *, model_call: bool = True) -> base.CallError:
        if isinstance(exc, base.CallError):
            return exc
        if isinstance(exc, genai_errors.APIError):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return classify_error(exc.code, exc.details, headers, model_call=model_call)
        return base.CallError("transient", clip(f"{type(exc).__name__}: {exc}", 500))

    async def aclose(self) -> None:
        await self.client.aio.aclose()

    # ---- batch
    async def batch_submit(self, model: str, items: list[tuple[str, dict[str, Any]]]
                           ) -> tuple[str, dict[str, Any]]:
        src = [{"contents": body["contents"], "config": body["config"], "metadata": {"key": key}}
               for key, body in items]
        job = await self.client.aio.batches.create(
            model=items[0][1]["model"], src=src,  # type: ignore[arg-type]
            config={"display_name": f"hbpsych-{items[0][0][:12]}"})
        return str(job.name), {"status": _state(job)}

    async def batch_poll(self, batch_id: str, info: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        job = await self.client.aio.batches.get(name=batch_id)
        return _state(job) in _DONE, {**info, "status": _state(job)}

    async def batch_collect(self, batch_id: str, info: dict[str, Any]
                            ) -> dict[str, base.Reply | base.CallError]:
        job = await self.client.aio.batches.get(name=batch_id)
        out: dict[str, base.Reply | base.CallError] = {}
        dest = job.dest
        for r in (dest.inlined_responses if dest and dest.inlined_responses else []):
            key = (r.metadata or {}).get("key")
            if key is None:
                continue
            if r.error is not None:  # a google.rpc.Status: a numeric code, no status name
                out[key] = item_error(r.error.code, r.error.message)
                continue
            if r.response is None:
                out[key] = base.CallError("transient", "batch item with neither response nor error")
                continue
            try:
                out[key] = parse_response(r.response)
            except base.MalformedReply as exc:
                out[key] = base.CallError("transient", str(exc))
        return out


RPC_CODES: dict[int, tuple[str, int]] = {
    1: ("CANCELLED", 499), 2: ("UNKNOWN", 500), 3: ("INVALID_ARGUMENT", 400),
    4: ("DEADLINE_EXCEEDED", 504), 5: ("NOT_FOUND", 404), 6: ("ALREADY_EXISTS", 409),
    7: ("PERMISSION_DENIED", 403), 8: ("RESOURCE_EXHAUSTED", 429),
    9: ("FAILED_PRECONDITION", 400), 10: ("ABORTED", 409), 11: ("OUT_OF_RANGE", 400),
    12: ("UNIMPLEMENTED", 501), 13: ("INTERNAL", 500), 14: ("UNAVAILABLE", 503),
    15: ("DATA_LOSS", 500), 16: ("UNAUTHENTICATED", 401)}
"""``google.rpc.Code``: the status name and HTTP status of each numeric code (a batch item's
error is a ``google.rpc.Status``, which carries the number alone)."""


def item_error(code: int | None, message: str | None) -> base.CallError:
    """A batch item's ``google.rpc.Status`` classified as the same error of a call would be."""
    name, status = RPC_CODES.get(int(code or 2), ("UNKNOWN", 500))
    return classify_error(status, {"error": {"code": status, "message": message or "",
                                             "status": name}}, prefix="batch item error: ")


def classify_error(code: int | None, body: Any, headers: Any = None, *,
                   model_call: bool = True, prefix: str = "") -> base.CallError:
    """A Gemini error body (``{"error": {code, message, status, details}}``) as a CallError.

    The fields decide (:func:`.base.classify_error`): the ``ErrorInfo`` reasons (a bad key is a
    400 whose reason is ``API_KEY_INVALID``, a suspended key a 403 ``CONSUMER_SUSPENDED``), then
    ``error.status`` (``FAILED_PRECONDITION``: a location Gemini does not serve, fatal;
    ``PERMISSION_DENIED``, ``UNAUTHENTICATED``; ``NOT_FOUND`` on a model call: the model does not
    exist). The details are read as structures: ``RetryInfo.retryDelay`` wherever it sits (Gemini
    sends no retry header), ``QuotaFailure`` violations. A 429 naming a per-day quota is fatal:
    the quota resets at midnight Pacific time, so the run stops and says which quota; a
    per-minute one stays transient and waits the delay Gemini asks for, from ``RetryInfo`` or
    else from the message's "Please retry in 27.2s", read from the whole message before it is
    cut for storing.
    """
    err = body.get("error", body) if isinstance(body, dict) else {}
    err = err if isinstance(err, dict) else {}
    details = err.get("details")
    status = err.get("status") or ""
    text = str(err.get("message") or (body if not isinstance(body, dict) else ""))
    violations = base.rpc_quota_violations(details)
    daily = [v for v in violations if base.is_daily_quota(v)]
    if code == 429 and daily:
        return base.CallError(
            "fatal", f"HTTP 429: {status} daily quota exhausted: "
            f"{'; '.join(base.describe_quota(v) for v in daily)}. Per-day quotas reset at "
            "midnight Pacific time; re-run after the reset (or raise the quota)", code)
    reason_codes = base.error_codes(*(d.get("reason")
                                      for d in base.rpc_details(details, "ErrorInfo")))
    msg = _error_message(prefix, code, status, text, reason_codes, violations)
    retry = _retry_delay(headers, details, text)
    if retry is not None and code == 429:
        msg += f" (retry in {retry:g}s)"
    fields = base.ErrorFields(code, (*reason_codes, *base.error_codes(status)), text)
    return base.classify_error(fields, msg, retry, model_call=model_call)


def _error_message(prefix: str, code: int | None, status: str, text: str,
                   reason_codes: tuple[str, ...], violations: list[dict[str, Any]]) -> str:
    """One line: HTTP code, status, the message (cut), the ``ErrorInfo`` reasons and the first
    quota violations."""
    reasons = " ".join(reason_codes)
    quotas = "; ".join(base.describe_quota(v) for v in violations[:4])
    return (f"{prefix}HTTP {code}: {status} {clip(text, 300)}"
            + (f" [reason: {reasons}]" if reasons else "")
            + (f" [quota: {quotas}]" if quotas else ""))


def _retry_delay(headers: Any, details: Any, text: str) -> float | None:
    """The wait Gemini asks for: a retry header, else ``RetryInfo.retryDelay``, else the
    message's "Please retry in 27.2s" (read from the whole message)."""
    retry = base.parse_retry_after(headers)
    if retry is None:
        retry = base.rpc_retry_delay(details)
    if retry is None:
        retry = base.retry_hint(text)
    return retry


def _httpx_transport() -> Any:
    """An httpx transport for the SDK's async client.

    google-genai sends async calls through aiohttp whenever aiohttp is importable (it is: the
    simulator is built on it), unless it is given a transport. This keeps Gemini on the httpx
    stack of its default backend (``httpx2`` when installed), like the other two SDKs.
    """
    try:
        import httpx2 as backend
    except ImportError:  # pragma: no cover - google-genai without its httpx2 backend
        import httpx as backend  # type: ignore[no-redef]
    return backend.AsyncHTTPTransport()


def _state(job: Any) -> str:
    s = job.state
    return str(getattr(s, "value", s))


def _enum(v: Any) -> str | None:
    if v is None:
        return None
    return str(getattr(v, "value", v))


def _usage(usage: Any) -> tuple[int, int, int]:
    """Prompt tokens (cached ones included), output tokens (thoughts included) and cached
    prompt tokens of a response's ``usage_metadata`` (zeros without one)."""
    if not usage:
        return 0, 0, 0
    tout = int(usage.candidates_token_count or 0) + int(usage.thoughts_token_count or 0)
    return (int(getattr(usage, "prompt_token_count", 0) or 0), tout,
            int(usage.cached_content_token_count or 0))


def parse_response(resp: Any) -> base.Reply:
    """A ``GenerateContentResponse`` (sync, or an inlined batch response) as a Reply; the
    prompt count includes ``cachedContentTokenCount``, the tokens served from the cache."""
    tin, tout, cached = _usage(resp.usage_metadata)
    cands = resp.candidates or []
    if not cands:
        fb = resp.prompt_feedback
        reason = _enum(getattr(fb, "block_reason", None)) if fb else None
        if reason:
            return base.Reply("", f"BLOCKED_{reason}", True, tin, tout, cached)
        raise base.MalformedReply("response has neither candidates nor a block reason")
    cand = cands[0]
    finish = _enum(cand.finish_reason)
    parts = (cand.content.parts if cand.content and cand.content.parts else [])
    text = "".join(p.text or "" for p in parts if not getattr(p, "thought", False))
    return base.Reply(text, finish, finish in REFUSAL_REASONS, tin, tout, cached)
