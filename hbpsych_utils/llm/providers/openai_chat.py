"""OpenAI Chat Completions (and any OpenAI-compatible server) through the ``openai`` SDK.

Decoding parameters travel in ``extra_body`` so that the body sent is exactly the registry's
resolved config (``max_completion_tokens``, ``enable_thinking``, ...) whatever the SDK version
types. Responses are read as raw JSON, the same shape the Batch API writes to its output file,
so one parser serves both paths. Refusal: ``message.refusal`` set (structured outputs refuse
with ``finish_reason: stop``, ``content: null`` and the explanation in ``refusal``) or
``finish_reason: content_filter``. Prompt caching: ``usage.prompt_tokens_details.cached_tokens``
(included in ``prompt_tokens``) are the cache reads; a request arranged for the cache carries the
model's routing hint (``prompt_cache_key``: a hash of the shared prefix). Errors are read from
the error object's ``code`` and ``type`` (:func:`openai_fields`): OpenAI's own, and the same
envelope as vLLM and llama.cpp's servers write it (with the HTTP status as ``code``).
"""

from __future__ import annotations

import json
from typing import Any

import openai

from hbpsych_utils.core import jsonl
from hbpsych_utils.core.secrets import clip
from hbpsych_utils.llm.models import ModelSpec
from hbpsych_utils.llm.providers.base import (
    Adapter,
    CallError,
    ErrorFields,
    MalformedReply,
    Reply,
    cache_arranged,
    cache_hint,
    classify_error,
    error_codes,
    parse_retry_after,
)
from hbpsych_utils.llm.requests import Request

_DONE = ("completed", "failed", "expired", "cancelled")
BATCH_URL = "/v1/chat/completions"
"""The endpoint of every Batch line this compendium writes (OpenAI's Batch API, vLLM's
``run-batch`` and Ray Data read the same lines)."""


def batch_line(key: str, body: dict[str, Any]) -> str:
    """One line of an OpenAI Batch input file (no newline): the request key as ``custom_id``
    and the wire body exactly as a synchronous call sends it. The engine's batch path and the
    exported shards (:mod:`hbpsych_utils.llm.shards`) both write it, so a shard line is
    byte-identical to the line the engine would upload."""
    return json.dumps({"custom_id": key, "method": "POST", "url": BATCH_URL, "body": body},
                      ensure_ascii=False)


class OpenAIAdapter(Adapter):
    kind = "openai"
    api = "chat.completions"
    max_batch_items = 50_000
    max_batch_bytes = 190 * 1024 * 1024

    def __init__(self, provider: Any, api_key: str, base_url: str | None, timeout: float) -> None:
        super().__init__(provider, api_key, base_url, timeout)
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                         timeout=timeout)

    @staticmethod
    def body(spec: ModelSpec, req: Request, decoding: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": spec.api_model,
            "messages": [{"role": m.role, "content": m.content} for m in req.messages],
            **decoding,
            **spec.extra_body,
        }
        if spec.cache_key_param and cache_arranged(spec, req):
            body[spec.cache_key_param] = cache_hint(req)
        if req.response_schema is not None:
            if spec.schema_mode == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": str(req.response_schema.get("title", "response"))[:64],
                    "schema": dict(req.response_schema)}}
            elif spec.schema_mode == "json_object":
                body["response_format"] = {"type": "json_object"}
            elif spec.schema_mode == "json_object_schema":  # llama.cpp's server takes this form
                body["response_format"] = {"type": "json_object",
                                           "schema": dict(req.response_schema)}
        return body

    async def call(self, body: dict[str, Any]) -> Reply:
        rest = {k: v for k, v in body.items() if k not in ("model", "messages")}
        raw = await self.client.chat.completions.with_raw_response.create(
            model=body["model"], messages=body["messages"], extra_body=rest)
        try:
            data = json.loads(raw.http_response.content)
        except ValueError as exc:
            raise MalformedReply(f"response body is not JSON: {exc}") from None
        return parse_chat(data)

    def classify(self, exc: BaseException, *, model_call: bool = True) -> CallError:
        if isinstance(exc, CallError):
            return exc
        if isinstance(exc, openai.APIStatusError):
            # the SDK's body is the error object (``body["error"]``, or the whole body when a
            # server writes it at the top level, as older vLLM does)
            body = exc.body if exc.body is not None else exc.message
            fields = openai_fields(exc.status_code, body)
            code = fields.codes[0] if fields.codes else ""
            msg = f"HTTP {exc.status_code}: {code} {clip(json.dumps(body), 500)}"
            # the wait: retry-after-ms / retry-after, else the message's "try again in 1.5s"
            return classify_error(fields, msg, parse_retry_after(exc.response.headers),
                                  model_call=model_call)
        return CallError("transient", clip(f"{type(exc).__name__}: {exc}", 500))

    async def aclose(self) -> None:
        await self.client.close()

    # ---- batch
    async def batch_submit(self, model: str, items: list[tuple[str, dict[str, Any]]]
                           ) -> tuple[str, dict[str, Any]]:
        data = "".join(batch_line(key, body) + "\n" for key, body in items).encode("utf-8")
        f = await self.client.files.create(file=("batch.jsonl", data), purpose="batch")
        b = await self.client.batches.create(input_file_id=f.id, endpoint=BATCH_URL,
                                             completion_window="24h")
        return b.id, {"input_file_id": f.id, "status": b.status}

    async def batch_poll(self, batch_id: str, info: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        b = await self.client.batches.retrieve(batch_id)
        info = {**info, "status": b.status, "output_file_id": b.output_file_id,
                "error_file_id": b.error_file_id}
        return b.status in _DONE, info

    async def batch_collect(self, batch_id: str, info: dict[str, Any]
                            ) -> dict[str, Reply | CallError]:
        out: dict[str, Reply | CallError] = {}
        for fid in (info.get("output_file_id"), info.get("error_file_id")):
            if not fid:
                continue
            content = await self.client.files.content(fid)
            for line in jsonl.lines(content.text):  # on "\n" only: see core.jsonl
                rec = json.loads(line)
                out[rec.get("custom_id")] = batch_result(rec)
        return out


def batch_result(rec: dict[str, Any]) -> Reply | CallError:
    """One line of a Batch output or error file as the engine reads a reply: the parsed answer
    of a 200 without an error, else the item's error, classified. Reads OpenAI's lines and
    ``vllm run-batch``'s (whose ``error`` is the server's error object, ``{"error": {...}}``,
    or a plain message, with no response body)."""
    resp = rec.get("response")
    resp = resp if isinstance(resp, dict) else {}
    body = resp.get("body")
    if resp.get("status_code") == 200 and not rec.get("error"):
        try:
            return parse_chat(body if isinstance(body, dict) else {})
        except MalformedReply as exc:
            return CallError("transient", str(exc))
    # an item the model call refused, or one the batch never ran
    err = rec.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
    if isinstance(err, dict) and isinstance(err.get("error"), dict):
        err = err["error"]
    status = resp.get("status_code") or 500
    return classify_error(openai_fields(status, err),
                          f"batch item error: HTTP {status}: {clip(json.dumps(err), 300)}")


def openai_fields(status: int | None, error: Any) -> ErrorFields:
    """An OpenAI-format error object (``{"message", "type", "param", "code"}``) as fields:
    ``code`` (``insufficient_quota``, ``model_not_found``, ...) before ``type``; a server that
    writes the HTTP status as ``code`` (vLLM, llama.cpp) gives its ``type`` alone."""
    if not isinstance(error, dict):
        return ErrorFields(status, (), "" if error is None else str(error))
    return ErrorFields(status, error_codes(error.get("code"), error.get("type")),
                       str(error.get("message") or ""))


def parse_chat(data: dict[str, Any]) -> Reply:
    try:
        choice = data["choices"][0]
        msg = choice.get("message") or {}
    except (KeyError, IndexError, TypeError):
        raise MalformedReply(f"no choices in response: {clip(json.dumps(data), 200)}") from None
    finish = choice.get("finish_reason")
    # The reply is the message content; a refusal's explanation (``message.refusal``) is the
    # provider's metadata, not the model's answer, so a refused reply is stored empty and is
    # graded as returned (METHODS section 6).
    text = msg.get("content") or ""
    refusal = bool(msg.get("refusal")) or finish == "content_filter"
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    # prompt_tokens counts the cached ones too; DeepSeek reports its hits at the top level
    read = details.get("cached_tokens")
    if read is None:
        read = usage.get("prompt_cache_hit_tokens")
    return Reply(text=text, stop_reason=finish, refusal=refusal,
                 input_tokens=int(usage.get("prompt_tokens") or 0),
                 output_tokens=int(usage.get("completion_tokens") or 0),
                 cache_read_tokens=int(read or 0),
                 cache_write_tokens=int(details.get("cache_write_tokens") or 0))
