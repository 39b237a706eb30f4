"""Anthropic Messages and Message Batches through the ``anthropic`` SDK.

System/developer messages become the ``system`` parameter; structured output uses
``output_config.format``. Thinking blocks are not part of the answer. Refusal: ``stop_reason:
refusal``. Errors (:func:`anthropic_fields`): ``error.details.error_code`` (e.g.
``enforced_spend_limit_reached``, ``organization_on_hold``) before ``error.type``; a 429 carries
``retry-after`` in whole seconds (no ``retry-after-ms``); 529 ``overloaded_error`` is transient;
"Your credit balance is too low", "You have reached your specified API usage limits" and "This
organization has been disabled" are plain 400 ``invalid_request_error``s, fatal by the message's
opening words (see :func:`.base.classify_error`).
Prompt caching: a request arranged for the cache sends its last user turn as two text blocks
(shared prefix, then the rest) with a ``cache_control`` breakpoint after the prefix; usage's
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are the cache reads and writes.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from hbpsych_utils.core.secrets import clip
from hbpsych_utils.llm.models import ModelSpec
from hbpsych_utils.llm.providers.base import (
    Adapter,
    CallError,
    ErrorFields,
    MalformedReply,
    Reply,
    cache_arranged,
    classify_error,
    error_codes,
    parse_retry_after,
    split_system,
)
from hbpsych_utils.llm.requests import Request


class AnthropicAdapter(Adapter):
    kind = "anthropic"
    api = "messages"
    max_batch_items = 100_000
    max_batch_bytes = 240 * 1024 * 1024

    def __init__(self, provider: Any, api_key: str, base_url: str | None, timeout: float) -> None:
        super().__init__(provider, api_key, base_url, timeout)
        self.client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                               timeout=timeout)

    @staticmethod
    def body(spec: ModelSpec, req: Request, decoding: dict[str, Any]) -> dict[str, Any]:
        system, messages = split_system(req)
        if cache_arranged(spec, req):
            messages[-1] = cache_blocks(messages[-1], int(req.cache_prefix_chars or 0))
        body: dict[str, Any] = {"model": spec.api_model, "messages": messages, **decoding}
        if system is not None:
            body["system"] = system
        if req.response_schema is not None and spec.schema_mode != "none":
            body["output_config"] = {"format": {"type": "json_schema",
                                                "schema": dict(req.response_schema)}}
        return body

    async def call(self, body: dict[str, Any]) -> Reply:
        rest = {k: v for k, v in body.items() if k not in ("model", "messages", "max_tokens")}
        raw = await self.client.messages.with_raw_response.create(
            model=body["model"], messages=body["messages"], max_tokens=body["max_tokens"],
            extra_body=rest)
        try:
            data = json.loads(raw.http_response.content)
        except ValueError as exc:
            raise MalformedReply(f"response body is not JSON: {exc}") from None
        return parse_message(data)

    def classify(self, exc: BaseException, *, model_call: bool = True) -> CallError:
        if isinstance(exc, CallError):
            return exc
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body if exc.body is not None else exc.message
            msg = f"HTTP {exc.status_code}: {clip(json.dumps(body), 500)}"
            return classify_error(anthropic_fields(exc.status_code, body), msg,
                                  parse_retry_after(exc.response.headers), model_call=model_call)
        return CallError("transient", clip(f"{type(exc).__name__}: {exc}", 500))

    async def aclose(self) -> None:
        await self.client.close()

    # ---- batch
    async def batch_submit(self, model: str, items: list[tuple[str, dict[str, Any]]]
                           ) -> tuple[str, dict[str, Any]]:
        b = await self.client.messages.batches.create(
            requests=[{"custom_id": key, "params": body} for key, body in items])  # type: ignore[misc]
        return b.id, {"status": b.processing_status}

    async def batch_poll(self, batch_id: str, info: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        b = await self.client.messages.batches.retrieve(batch_id)
        return b.processing_status == "ended", {**info, "status": b.processing_status}

    async def batch_collect(self, batch_id: str, info: dict[str, Any]
                            ) -> dict[str, Reply | CallError]:
        out: dict[str, Reply | CallError] = {}
        async for r in await self.client.messages.batches.results(batch_id):
            res = r.result
            if res.type == "succeeded":
                try:
                    out[r.custom_id] = parse_message(res.message.model_dump())
                except MalformedReply as exc:
                    out[r.custom_id] = CallError("transient", str(exc))
            elif res.type == "errored":  # the error the call would have had, without a status
                err = res.error.model_dump() if hasattr(res.error, "model_dump") else res.error
                out[r.custom_id] = classify_error(
                    anthropic_fields(None, err),
                    f"batch item errored: {clip(json.dumps(err, default=str), 400)}")
            else:
                out[r.custom_id] = CallError("transient", f"batch item {res.type}")
        return out


ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                "overloaded_error": 529}
"""The HTTP status each of Anthropic's error types comes with (a batch item's error has a type
and no status)."""


def anthropic_fields(status: int | None, body: Any) -> ErrorFields:
    """An Anthropic error body (``{"type": "error", "error": {"type", "message", "details":
    {"error_code"}}, "request_id"}``) as fields; without a status (a batch item), the one its
    type comes with (:data:`ERROR_STATUS`; an unknown type counts as a server error)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return ErrorFields(status if status is not None else 500, (),
                           "" if body is None else str(body))
    details = err.get("details") if isinstance(err.get("details"), dict) else {}
    if status is None:
        status = ERROR_STATUS.get(str(err.get("type")), 500)
    return ErrorFields(status, error_codes(details.get("error_code"), err.get("type")),
                       str(err.get("message") or ""))


def cache_blocks(message: dict[str, Any], prefix_chars: int) -> dict[str, Any]:
    """A user message as two text blocks whose concatenation is its text, with a
    ``cache_control`` breakpoint after the first ``prefix_chars`` characters (the shared prefix).
    A part that is empty or only whitespace (which the API rejects as a text block) is not split
    off: the breakpoint then closes the whole text, or the message is left as it was."""
    text = message["content"]
    head, tail = text[:prefix_chars], text[prefix_chars:]
    if not head.strip():
        return message
    if not tail.strip():
        head, tail = text, ""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": head, "cache_control": EPHEMERAL}]
    if tail:
        blocks.append({"type": "text", "text": tail})
    return {"role": message["role"], "content": blocks}


EPHEMERAL = {"type": "ephemeral"}
"""Anthropic's default (5-minute) cache breakpoint."""


def parse_message(data: dict[str, Any]) -> Reply:
    content = data.get("content")
    if not isinstance(content, list) or "stop_reason" not in data:
        raise MalformedReply(f"not a message: {clip(json.dumps(data), 200)}")
    text = "".join(b.get("text") or "" for b in content if b.get("type") == "text")
    stop = data.get("stop_reason")
    usage = data.get("usage") or {}
    # Anthropic's input_tokens leaves out the tokens read from or written to the cache: the
    # Reply counts every prompt token, as the other APIs do
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return Reply(text=text, stop_reason=stop, refusal=stop == "refusal",
                 input_tokens=int(usage.get("input_tokens") or 0) + read + write,
                 output_tokens=int(usage.get("output_tokens") or 0),
                 cache_read_tokens=read, cache_write_tokens=write)
