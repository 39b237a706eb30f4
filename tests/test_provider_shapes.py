"""Real provider shapes: the adapters on copies of real error bodies, the simulator on the SDKs'
own types.

1. Each fixture in ``tests/data/provider_errors/`` (see its README for the sources) is served —
   status, headers, body — to the adapter's own SDK client through an httpx mock transport, so
   the SDK raises its own exception class (or parses its own response) and the adapter
   classifies it: kind, retry delay, refusal flag.
2. Every kind of response the simulator sends on the synchronous path is validated with
   ``model_validate`` (not ``construct``) against ``openai.types.chat.ChatCompletion``,
   ``anthropic.types.Message`` and ``google.genai.types.GenerateContentResponse``; error bodies
   against ``openai.types.shared.ErrorObject`` and ``anthropic.types.ErrorResponse``. Fields the
   SDK types do not know are reported (the OpenAI and Anthropic types accept extras silently;
   the google-genai types forbid them). Gemini error bodies have no SDK type: they are read
   through ``google.genai.errors.APIError`` and their details checked against the documented
   ``google.rpc`` messages (``RetryInfo``, ``QuotaFailure``, ``Help``).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import JUDGE_BY_API as MODEL
from lazy_modules import SDK_GROUP, Lazy
from pydantic import BaseModel, ConfigDict

from hbpsych_utils.llm import load_registry
from hbpsych_utils.llm.faults import STOP_FAULT_KINDS, SYNC_FAULT_KINDS
from hbpsych_utils.llm.providers import CallError, Reply, make_adapter
from hbpsych_utils.llm.providers.base import (
    ErrorFields,
    classify_error,
    classify_status,
    is_daily_quota,
    parse_duration,
    retry_hint,
)
from hbpsych_utils.llm.testing import Fault, Simulator
from hbpsych_utils.llm.testing.simulator import REFUSAL_TEXT

pytestmark = SDK_GROUP
anthropic, openai = Lazy("anthropic"), Lazy("openai")
anthropic_types, anthropic_batches = Lazy("anthropic.types"), Lazy("anthropic.types.messages")
openai_chat_types, openai_shared = Lazy("openai.types.chat"), Lazy("openai.types.shared")
genai_errors, genai_types = Lazy("google.genai.errors"), Lazy("google.genai.types")
GOOGLE_GENAI = "hbpsych_utils.llm.providers.google_genai"
google_genai = Lazy(GOOGLE_GENAI)
anthropic_messages = Lazy("hbpsych_utils.llm.providers.anthropic_messages")
openai_chat = Lazy("hbpsych_utils.llm.providers.openai_chat")

FIXTURES = Path(__file__).parent / "data" / "provider_errors"
REG = load_registry()
PROVIDER = {api: REG.providers[REG.model(m).provider] for api, m in MODEL.items()}
PROVIDER["openai_compatible"] = REG.providers["local"]  # vLLM, llama.cpp: the OpenAI adapter


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ 1. adapters on real bodies
def _serve(fx: dict[str, Any]) -> httpx2.MockTransport:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(fx["status"], headers=fx["headers"],
                               content=json.dumps(fx["body"]).encode())

    return httpx2.MockTransport(handler)


def _wire_body(api: str) -> dict[str, Any]:
    msgs = [{"role": "user", "content": "hello"}]
    if api == "google":
        return {"model": MODEL[api], "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
                "config": {"max_output_tokens": 64}}
    model = MODEL.get(api, "local-model")
    body: dict[str, Any] = {"model": model, "messages": msgs, "max_tokens": 64}
    return body


def through_sdk(fx: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Reply | CallError:
    """The fixture served to the adapter's SDK client; the adapter's reply or its CallError."""
    api = fx["provider"]
    transport = _serve(fx)
    if api == "google":  # the adapter hands its transport to google-genai's async client
        monkeypatch.setattr(f"{GOOGLE_GENAI}._httpx_transport", lambda: transport)

    async def go() -> Reply | CallError:
        adapter = make_adapter(PROVIDER[api], "fixture-key", "https://provider.invalid", 10.0)
        if api in ("openai", "openai_compatible"):
            adapter.client = openai.AsyncOpenAI(  # type: ignore[attr-defined]
                api_key="fixture-key", base_url="https://provider.invalid/v1", max_retries=0,
                http_client=httpx2.AsyncClient(transport=transport))
        elif api == "anthropic":
            adapter.client = anthropic.AsyncAnthropic(  # type: ignore[attr-defined]
                api_key="fixture-key", base_url="https://provider.invalid", max_retries=0,
                http_client=httpx2.AsyncClient(transport=transport))
        try:
            return await adapter.call(_wire_body(api))
        except Exception as exc:
            return adapter.classify(exc)
        finally:
            await adapter.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(("name", "kind", "retry_after", "named"), [
    # Gemini: the delay is RetryInfo.retryDelay, placed after the message and two other details
    ("gemini_429_per_minute.json", "transient", 26.0,
     "GenerateContentInputTokensPerModelPerMinute-FreeTier"),
    # Gemini: a per-day quota stops the run (the RetryInfo it also carries does not help)
    ("gemini_429_per_day.json", "fatal", None, "GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
    ("gemini_400_thinking_budget.json", "permanent", None, "The thinking budget (52428)"),
    # OpenAI: no retry header in the copy; the wait is read from "Please try again in 3.89s"
    ("openai_429_rate_limit_exceeded.json", "transient", 3.89, "rate_limit_exceeded"),
    ("openai_429_insufficient_quota.json", "fatal", None, "insufficient_quota"),
    # Anthropic: retry-after in whole seconds; 529 overloaded; credit balance is fatal
    ("anthropic_429_rate_limit.json", "transient", 17.0, "rate_limit_error"),
    ("anthropic_529_overloaded.json", "transient", None, "overloaded_error"),
    ("anthropic_400_credit_balance.json", "fatal", None, "credit balance is too low"),
    # errors that mean "stop" whatever their status: a limit the account set, a bad key
    ("anthropic_400_usage_limits.json", "fatal", None, "specified API usage limits"),
    ("openai_400_billing_hard_limit.json", "fatal", None, "billing_hard_limit_reached"),
    ("gemini_400_api_key_invalid.json", "fatal", None, "API_KEY_INVALID"),
    # Gemini without RetryInfo: the wait is the message's "Please retry in", past character 500
    ("gemini_429_retry_in_message.json", "transient", 27.160771047,
     "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
    # the account cannot go on: a disabled organisation, an unserved location, no such model
    ("anthropic_400_organization_disabled.json", "fatal", None, "organization has been disabled"),
    ("anthropic_403_request_not_allowed.json", "fatal", None, "Request not allowed"),
    ("anthropic_404_model_not_found.json", "fatal", None, "model: claude-3-5-sonnet-20241022"),
    ("openai_401_account_deactivated.json", "fatal", None, "account_deactivated"),
    ("openai_403_unsupported_country.json", "fatal", None,
     "unsupported_country_region_territory"),
    ("openai_404_model_not_found.json", "fatal", None, "model_not_found"),
    ("gemini_400_location_unsupported.json", "fatal", None, "FAILED_PRECONDITION"),
    ("gemini_403_consumer_suspended.json", "fatal", None, "CONSUMER_SUSPENDED"),
    ("gemini_404_model_not_found.json", "fatal", None, "NOT_FOUND"),
    # OpenAI-compatible local servers: vLLM's and llama.cpp's own envelopes
    ("vllm_404_model_does_not_exist.json", "fatal", None, "does not exist"),
    ("llamacpp_401_invalid_api_key.json", "fatal", None, "authentication_error"),
    ("llamacpp_400_exceed_context_size.json", "permanent", None, "exceed_context_size_error"),
    ("llamacpp_503_loading_model.json", "transient", None, "unavailable_error"),
])
def test_adapters_classify_real_error_bodies(monkeypatch, name, kind, retry_after, named) -> None:
    fx = fixture(name)
    err = through_sdk(fx, monkeypatch)
    assert isinstance(err, CallError), err
    assert (err.kind, err.status) == (kind, fx["status"]), str(err)
    assert err.retry_after == (pytest.approx(retry_after) if retry_after is not None else None)
    assert named in str(err)


@pytest.mark.parametrize(("name", "cause"), [
    ("openai_429_insufficient_quota.json", "out of credit or quota"),
    ("openai_400_billing_hard_limit.json", "billing hard limit is reached"),
    ("anthropic_400_credit_balance.json", "credit balance is too low"),
    ("anthropic_400_usage_limits.json", "API usage limit set for the account is reached"),
    ("gemini_400_api_key_invalid.json", "API key is not valid"),
])
def test_a_stop_error_says_its_cause_and_what_to_do(monkeypatch, name, cause) -> None:
    err = through_sdk(fixture(name), monkeypatch)
    assert isinstance(err, CallError) and err.kind == "fatal"
    text = str(err)  # the cause in words first, then the provider's own message
    assert cause in text and text.index(cause) < text.index("HTTP"), text
    assert text.endswith("fix it in the provider's console (credit, limit or key), then re-run")


@pytest.mark.parametrize(("name", "cause", "action"), [
    ("anthropic_400_organization_disabled.json", "the organisation has been disabled",
     "restored with the provider"),
    ("openai_401_account_deactivated.json", "the account has been deactivated",
     "restored with the provider"),
    ("gemini_403_consumer_suspended.json", "project has been suspended",
     "restored with the provider"),
    ("openai_403_unsupported_country.json", "does not serve the country",
     "run from a country or region the provider serves"),
    ("gemini_400_location_unsupported.json", "does not serve this account where the run is made",
     "run from a country or region the provider serves"),
    ("openai_404_model_not_found.json", "the model does not exist here",
     "check the model's snapshot id in the registry"),
    ("anthropic_404_model_not_found.json", "the model does not exist here",
     "check the model's snapshot id in the registry"),
    ("gemini_404_model_not_found.json", "the model does not exist here",
     "check the model's snapshot id in the registry"),
    ("vllm_404_model_does_not_exist.json", "the model does not exist here",
     "check the model's snapshot id in the registry"),
])
def test_an_account_level_error_names_its_cause_and_what_to_do(monkeypatch, name, cause,
                                                               action) -> None:
    err = through_sdk(fixture(name), monkeypatch)
    assert isinstance(err, CallError) and err.kind == "fatal", err
    text = str(err)
    assert cause in text and text.index(cause) < text.index("HTTP"), text
    assert action in text.rsplit(";", 1)[1], text


QUOTED = ("my credit balance is too low and I feel hopeless", "Your credit balance is too low",
          "This organization has been disabled.", "You have reached your specified API usage "
          "limits", "insufficient_quota", "billing_hard_limit_reached", "API_KEY_INVALID",
          "billing account", "payment required", "FAILED_PRECONDITION", "model_not_found")


def _quoting_400(api: str, quoted: str) -> dict[str, Any]:
    """A 400 invalid-request error whose message quotes the request, in the API's envelope."""
    text = json.dumps(quoted)
    if api == "openai":
        return {"provider": api, "status": 400, "headers": {"content-type": "application/json"},
                "body": {"error": {"message": f"Invalid value at 'messages[0].content': {text}",
                                   "type": "invalid_request_error", "param": "messages[0].content",
                                   "code": "invalid_value"}}}
    if api == "anthropic":
        return {"provider": api, "status": 400, "headers": {"content-type": "application/json"},
                "body": {"type": "error", "request_id": "req_X", "error": {
                    "type": "invalid_request_error",
                    "message": f"messages.0.content: invalid text {text}"}}}
    message = f"Invalid value at 'contents[0].parts[0].text' (TYPE_STRING), {text}"
    return {"provider": api, "status": 400, "headers": {"content-type": "application/json"},
            "body": {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}}


@pytest.mark.parametrize("api", sorted(MODEL))
@pytest.mark.parametrize("quoted", QUOTED)
def test_text_quoted_from_the_request_never_stops_the_run(monkeypatch, api, quoted) -> None:
    # every phrase and code that stops a run, quoted from the conversation in a 400 that fails
    # this request alone: the request fails (permanent), the run goes on
    err = through_sdk(_quoting_400(api, quoted), monkeypatch)
    assert isinstance(err, CallError) and (err.kind, err.status) == ("permanent", 400), str(err)
    assert quoted in str(err) or json.dumps(quoted) in str(err)


def test_the_openings_that_stop_a_run_are_the_providers_own_first_words() -> None:
    # Anthropic's credit balance, usage limit and disabled organisation have no code of their
    # own (a 400 invalid_request_error): their opening words decide, whatever the spacing
    for message in ("Your credit balance is too low to access the Anthropic API.",
                    "  This organization has been\n disabled.",
                    "You have reached your specified API usage limits. You will regain access"):
        err = classify_error(anthropic_messages.anthropic_fields(400, {"type": "error", "error": {
            "type": "invalid_request_error", "message": message}}), "shown")
        assert err.kind == "fatal", message
    # anywhere else in the message they are text, as is a code named in the message
    for message in ("messages.0: Your credit balance is too low",
                    "The request names insufficient_quota", "Invalid: FAILED_PRECONDITION"):
        err = classify_error(ErrorFields(400, ("invalid_request_error",), message), "shown")
        assert err.kind == "permanent", message


def test_the_gemini_retry_hint_in_the_message_is_read_before_the_message_is_cut() -> None:
    body = fixture("gemini_429_retry_in_message.json")["body"]
    assert body["error"]["message"].index("Please retry in") > 300
    assert not [d for d in body["error"]["details"] if d["@type"].endswith("RetryInfo")]
    err = google_genai.classify_error(429, body)
    assert (err.kind, err.retry_after) == ("transient", pytest.approx(27.160771047))
    assert "(retry in 27.1608s)" in str(err)


def test_a_code_late_in_a_long_body_still_decides_the_kind(monkeypatch) -> None:
    # Anthropic's monthly spend cap: the rate-limit 429 with error.details.error_code (see the
    # Anthropic errors page); behind the long message it lies past the 500 characters kept for
    # the stored message, and must still make the error fatal (no retry cures it until the
    # next month).
    fx = fixture("anthropic_429_rate_limit.json")
    fx["body"]["error"]["details"] = {"error_code": "enforced_spend_limit_reached"}
    assert json.dumps(fx["body"]).index("enforced_spend_limit_reached") > 500
    err = through_sdk(fx, monkeypatch)
    assert isinstance(err, CallError) and (err.kind, err.status) == ("fatal", 429)


def test_the_gemini_retry_delay_sits_beyond_what_a_cut_string_would_keep() -> None:
    # Why the details are parsed as structures: cut to the 500 characters the adapter used to
    # keep, the per-minute body has lost its RetryInfo; the structured reading still finds it.
    body = fixture("gemini_429_per_minute.json")["body"]
    flat = json.dumps(body)
    assert flat.index("RetryInfo") > 500 and "retryDelay" not in flat[:500]
    err = google_genai.classify_error(429, body)
    assert (err.kind, err.retry_after) == ("transient", 26.0)
    assert "(retry in 26s)" in str(err)


def test_gemini_daily_quota_message_names_the_quota_and_the_reset() -> None:
    err = google_genai.classify_error(429, fixture("gemini_429_per_day.json")["body"])
    assert err.kind == "fatal" and err.retry_after is None
    text = str(err)
    assert "GenerateRequestsPerDayPerProjectPerModel-FreeTier" in text
    assert "generate_content_free_tier_requests" in text and "gemini-2.0-flash" in text
    assert "midnight Pacific time" in text
    # the per-minute violations listed alongside are not called daily
    assert "PerMinute" not in text.split("daily quota exhausted:")[1].split(". Per-day")[0]


def test_openai_structured_output_refusal_sets_the_refusal_flag(monkeypatch) -> None:
    fx = fixture("openai_200_refusal.json")
    reply = through_sdk(fx, monkeypatch)
    assert isinstance(reply, Reply)
    assert reply.refusal and reply.text == "" and reply.stop_reason == "stop"
    assert (reply.input_tokens, reply.output_tokens) == (81, 11)


def test_openai_batch_results_are_split_on_newline_only() -> None:
    # A batch output file holds one JSON object per line; JSON allows U+2028 and U+0085 raw
    # inside a string, and a reply that contains them must not cut its line in two.
    texts = {"k0": "one\u2028line", "k1": "next\u0085line"}
    lines = [{"id": f"batch_req_{k}", "custom_id": k, "error": None,
              "response": {"status_code": 200, "request_id": f"req_{k}", "body": {
                  "id": f"chatcmpl-{k}", "object": "chat.completion", "created": 1,
                  "model": MODEL["openai"], "choices": [{
                      "index": 0, "finish_reason": "stop", "logprobs": None,
                      "message": {"role": "assistant", "content": t, "refusal": None}}],
                  "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}}}
             for k, t in texts.items()]
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    assert len(data.decode("utf-8").splitlines()) == 4  # what str.splitlines() would read

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/files/file-out/content"
        return httpx2.Response(200, content=data,
                               headers={"content-type": "application/octet-stream"})

    async def go() -> dict[str, Reply | CallError]:
        adapter = make_adapter(PROVIDER["openai"], "fixture-key", "https://provider.invalid", 10.0)
        adapter.client = openai.AsyncOpenAI(  # type: ignore[attr-defined]
            api_key="fixture-key", base_url="https://provider.invalid/v1", max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
        try:
            return await adapter.batch_collect("batch_x", {"output_file_id": "file-out"})
        finally:
            await adapter.aclose()

    got = asyncio.run(go())
    assert {k: r.text for k, r in got.items() if isinstance(r, Reply)} == texts


@pytest.mark.parametrize(("fields", "kind"), [
    # OpenAI: a request larger than the whole per-minute allowance never succeeds
    (("openai", 429, {"message": "Request too large for gpt-4o in organization org-X on "
                                 "tokens per min (TPM): Limit 30000, Requested 30601.",
                      "type": "tokens", "code": "rate_limit_exceeded"}), "permanent"),
    # Anthropic: the monthly spend cap is a 429 with the rate-limit type, but no wait cures it
    (("anthropic", 429, {"type": "error", "error": {
        "type": "rate_limit_error", "message": "Your organization has reached its limit.",
        "details": {"error_code": "enforced_spend_limit_reached"}}}), "fatal"),
    # ... while a ramp limit (how fast usage may grow) is waited out
    (("anthropic", 429, {"type": "error", "error": {
        "type": "rate_limit_error", "message": "Slow down.",
        "details": {"error_code": "ramp_limit_exceeded"}}}), "transient"),
    (("anthropic", 402, {"type": "error", "error": {
        "type": "billing_error", "message": "payment method declined"}}), "fatal"),
    # a batch item's error has a type and no status: the type's status
    (("anthropic", None, {"type": "error", "error": {
        "type": "not_found_error", "message": "model: claude-x"}}), "fatal"),
    (("anthropic", None, {"type": "error", "error": {
        "type": "api_error", "message": "Internal server error"}}), "transient"),
    # OpenAI: an account whose billing is not active (a 429 that no wait cures)
    (("openai", 429, {"message": "Your account is not active, please check your billing "
                                 "details on our website.", "type": "billing_not_active",
                      "code": "billing_not_active"}), "fatal"),
    (("openai", 429, {"message": "Rate limit reached for gpt-4.1 on requests per min (RPM)",
                      "type": "requests", "code": "rate_limit_exceeded"}), "transient"),
    # a server that writes the status as the code: the code is not a name
    (("openai", 400, {"message": "bad", "type": "BadRequestError", "code": 400}),
     "permanent"),
    # a body that is not JSON: the status alone
    (("openai", 401, "<html>401 Authorization Required</html>"), "fatal"),
    (("openai", 400, "<html>400 Bad Request</html>"), "permanent"),
])
def test_the_fields_decide_the_kind(fields, kind) -> None:
    api, status, error = fields  # read into fields by the provider's module, as its adapter does
    read = anthropic_messages.anthropic_fields if api == "anthropic" else openai_chat.openai_fields
    assert classify_error(read(status, error), "shown").kind == kind


def test_a_404_stops_a_model_call_but_not_a_batch_endpoint() -> None:
    # on a model call a 404 says the model (or the endpoint) does not exist: every request to it
    # fails; on a batch's status or results it says the batch is gone (re-sent, see batch.py)
    gone = openai_chat.openai_fields(404, {"message": "No batch found with id 'batch_x'.",
                               "type": "invalid_request_error", "code": None})
    assert classify_error(gone, "shown").kind == "fatal"
    assert classify_error(gone, "shown", model_call=False).kind == "permanent"
    google_gone = google_genai.classify_error(404, {"error": {
        "code": 404, "message": "batches/x not found", "status": "NOT_FOUND"}}, model_call=False)
    assert (google_gone.kind, google_gone.status) == ("permanent", 404)


def test_an_error_known_by_its_status_alone() -> None:
    assert classify_status(401, "Unauthorized").kind == "fatal"
    assert classify_status(503, "Service Unavailable, try again in 2s").retry_after == 2.0
    assert classify_status(None, "connection reset").kind == "transient"


@pytest.mark.parametrize(("code", "kind"), [
    (9, "fatal"), (7, "fatal"), (16, "fatal"), (5, "fatal"), (3, "permanent"),
    (13, "transient"), (14, "transient"), (8, "transient"), (None, "transient")])
def test_a_gemini_batch_item_error_is_read_by_its_numeric_code(code, kind) -> None:
    # a batch item's google.rpc.Status has the number, not the name (FAILED_PRECONDITION is 9,
    # PERMISSION_DENIED 7, UNAUTHENTICATED 16, NOT_FOUND 5, RESOURCE_EXHAUSTED 8)
    assert google_genai.item_error(code, "User location is not supported").kind == kind


@pytest.mark.parametrize(("text", "seconds"), [
    ("Please try again in 174ms.", 0.174), ("Please try again in 1.574s.", 1.574),
    ("Please retry in 55.576865699s.", 55.576865699), ("'retryDelay': '47s'", 47.0),
    ("no wait named here", None)])
def test_retry_hints_in_messages(text, seconds) -> None:
    assert retry_hint(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_google_durations_and_daily_quotas() -> None:
    assert parse_duration("45.837906927s") == pytest.approx(45.837906927)
    assert parse_duration({"seconds": 3, "nanos": 250_000_000}) == pytest.approx(3.25)
    assert parse_duration("soon") is None and parse_duration(None) is None
    assert is_daily_quota({"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"})
    assert is_daily_quota({"quotaId": "GenerateContentInputTokensPerModelPerDay"})
    assert not is_daily_quota({"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"})
    assert not is_daily_quota({})


def test_the_fixtures_are_the_sdk_shapes() -> None:
    """The copies themselves validate against the SDKs' types (where the SDKs have them)."""
    for path in sorted(FIXTURES.glob("*.json")):
        fx = json.loads(path.read_text(encoding="utf-8"))
        body, api = fx["body"], fx["provider"]
        if api == "openai" and fx["status"] == 200:
            reply = openai_chat_types.ChatCompletion.model_validate(body)
            assert unknown_fields(reply) == [], path.name
        elif api == "openai_compatible":  # a local server's envelope: no SDK type to meet
            error = body.get("error", body)
            assert {"message", "type", "code"} <= set(error), path.name
            assert error["code"] == fx["status"] and fx["server"] in ("vLLM", "llama.cpp")
        elif api == "anthropic" and "type" not in body:  # the edge's refusal, not the API's
            assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}
        elif api == "openai":
            assert set(body) == {"error"}, path.name
            error_object = openai_shared.ErrorObject.model_validate(body["error"])
            assert unknown_fields(error_object) == [], path.name
        elif api == "anthropic":
            error_response = anthropic_types.ErrorResponse.model_validate(body)
            assert unknown_fields(error_response) == [], path.name
        else:
            check_google_error(fx["status"], body)


# ------------------------------------------------------------------ 2. the simulator, SDK types
def unknown_fields(obj: Any, where: str = "") -> list[str]:
    """Paths of fields an SDK model accepted as extras (i.e. that its type does not declare)."""
    out: list[str] = []
    if isinstance(obj, BaseModel):
        out += [f"{where}.{k}" for k in (obj.model_extra or {})]
        for name in type(obj).model_fields:
            out += unknown_fields(getattr(obj, name), f"{where}.{name}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            out += unknown_fields(v, f"{where}[{i}]")
    return out


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _RetryInfo(_Strict):  # google.rpc.RetryInfo: retryDelay is a Duration ("37s")
    type: str = ""
    retryDelay: str


class _Violation(_Strict):  # google.rpc.QuotaFailure.Violation
    subject: str | None = None
    description: str | None = None
    apiService: str | None = None
    quotaMetric: str | None = None
    quotaId: str | None = None
    quotaDimensions: dict[str, str] | None = None
    quotaValue: str | None = None  # int64, written as a string in JSON
    futureQuotaValue: str | None = None


class _QuotaFailure(_Strict):
    type: str = ""
    violations: list[_Violation]


class _Link(_Strict):
    description: str
    url: str


class _Help(_Strict):
    type: str = ""
    links: list[_Link]


class _ErrorInfo(_Strict):  # google.rpc.ErrorInfo
    type: str = ""
    reason: str
    domain: str
    metadata: dict[str, str] | None = None


class _LocalizedMessage(_Strict):  # google.rpc.LocalizedMessage
    type: str = ""
    locale: str
    message: str


class _FieldViolation(_Strict):  # google.rpc.BadRequest.FieldViolation
    field: str
    description: str
    reason: str | None = None


class _BadRequest(_Strict):  # google.rpc.BadRequest
    type: str = ""
    fieldViolations: list[_FieldViolation]


_RPC_TYPES: dict[str, type[_Strict]] = {"RetryInfo": _RetryInfo, "QuotaFailure": _QuotaFailure,
                                        "Help": _Help, "ErrorInfo": _ErrorInfo,
                                        "LocalizedMessage": _LocalizedMessage,
                                        "BadRequest": _BadRequest}
_RPC_CODES = {400: {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"},
              401: {"UNAUTHENTICATED"}, 403: {"PERMISSION_DENIED"},
              404: {"NOT_FOUND"}, 429: {"RESOURCE_EXHAUSTED"}, 500: {"INTERNAL"},
              503: {"UNAVAILABLE"}}


def check_google_error(status: int, body: dict[str, Any]) -> None:
    """A Gemini error body as google-genai reads it, with documented google.rpc details."""
    assert set(body) == {"error"}
    assert set(body["error"]) <= {"code", "message", "status", "details"}
    exc = genai_errors.APIError(status, body)
    assert (exc.code, exc.message) == (status, body["error"]["message"])
    assert exc.status in _RPC_CODES[status] and body["error"]["code"] == status
    assert exc.details == body  # what the adapter classifies: the whole parsed body
    for d in body["error"].get("details") or []:
        kind = d["@type"].removeprefix("type.googleapis.com/google.rpc.")
        payload = {k: v for k, v in d.items() if k != "@type"}
        _RPC_TYPES[kind].model_validate(payload)
        if kind == "RetryInfo":
            assert d["retryDelay"].endswith("s") and float(d["retryDelay"][:-1]) >= 0


def _wire(api: str, text: str, cap: int, *, schema: bool = False, thinking: bool = False
          ) -> tuple[str, dict[str, Any]]:
    """The URL path and raw JSON of one model call, as each SDK puts it on the wire."""
    sch = {"type": "object", "properties": {"answer": {"type": "string"}},
           "required": ["answer"], "additionalProperties": False}
    if api == "openai":
        body: dict[str, Any] = {"model": MODEL[api], "max_tokens": cap,
                                "messages": [{"role": "user", "content": text}]}
        if schema:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": sch}}
        return "/v1/chat/completions", body
    if api == "anthropic":
        body = {"model": MODEL[api], "max_tokens": cap,
                "messages": [{"role": "user", "content": text}]}
        if schema:
            body["output_config"] = {"format": {"type": "json_schema", "schema": sch}}
        if thinking:
            body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
            body["max_tokens"] = cap + 1024
        return "/v1/messages", body
    gc: dict[str, Any] = {"maxOutputTokens": cap}
    if schema:
        gc.update(responseMimeType="application/json", responseJsonSchema=sch)
    if thinking:
        gc["thinkingConfig"] = {"thinkingBudget": 1024}
    return (f"/v1beta/models/{MODEL[api]}:generateContent",
            {"contents": [{"role": "user", "parts": [{"text": text}]}], "generationConfig": gc})


_OK_KINDS = (None, "refusal", "content_filter", "empty", "garbled", "no_verdict",
             "reasoning_at_cap")
_ERROR_KINDS = ("http_500", "http_503", "rate_limit", "overloaded", "quoted_request",
                *STOP_FAULT_KINDS)


def test_every_sync_fault_kind_is_covered_below() -> None:
    # transport-level kinds send no body (reset, timeout) or a broken one on purpose
    # (malformed, truncated); every other kind is validated by the tests below
    broken = {"reset", "timeout", "malformed", "truncated"}
    assert set(SYNC_FAULT_KINDS) == broken | {k for k in _OK_KINDS if k} | set(_ERROR_KINDS)


def _validate_success(api: str, body: dict[str, Any]) -> Any:
    if api == "openai":
        obj: Any = openai_chat_types.ChatCompletion.model_validate(body)
    elif api == "anthropic":
        obj = anthropic_types.Message.model_validate(body)
    else:
        obj = genai_types.GenerateContentResponse.model_validate(body)  # extra="forbid"
    assert unknown_fields(obj) == [], unknown_fields(obj)
    return obj


def _validate_error(api: str, status: int, body: dict[str, Any]) -> None:
    if api == "openai":
        assert set(body) == {"error"}
        assert unknown_fields(openai_shared.ErrorObject.model_validate(body["error"])) == []
    elif api == "anthropic" and status == 403 and "type" not in body:
        # a location Anthropic does not serve: its edge answers, not the API (no "type": "error")
        assert body == {"error": {"type": "forbidden", "message": "Request not allowed"}}
    elif api == "anthropic":
        err = anthropic_types.ErrorResponse.model_validate(body)
        assert unknown_fields(err) == [] and err.request_id
    else:
        check_google_error(status, body)


@pytest.fixture(scope="module")
def sim():
    with Simulator() as s:
        yield s


# OpenAI's Chat Completions has no thinking block to imitate: no "thinking" variant there.
_REPLY_CASES = [(api, variant) for api in sorted(MODEL)
                for variant in ("plain", "schema", "cut", "thinking")
                if not (variant == "thinking" and api == "openai")]


@pytest.mark.parametrize(("api", "variant"), _REPLY_CASES)
@pytest.mark.parametrize("kind", _OK_KINDS)
def test_simulator_replies_validate_against_the_sdk_types(sim, api, kind, variant) -> None:
    text = f"shape {api} {kind} {variant}"
    cap = 4 if variant == "cut" else 256
    path, body = _wire(api, text, cap, schema=variant == "schema", thinking=variant == "thinking")
    if kind:
        sim.add_fault(Fault(kind, match=text, times=1))
    r = httpx.post(sim.url + path, json=body, timeout=30)
    assert r.status_code == 200, r.text
    obj = _validate_success(api, r.json())
    # the log records the reply that was sent
    (logged,) = [x for x in sim.log if x["user"] == text]
    assert logged["reply"] == answer_of(api, obj)
    flagged = kind in ("refusal", "content_filter")
    if api == "openai":
        choice = obj.choices[0]
        stop, refusal = choice.finish_reason, choice.message.refusal
        structured = variant == "schema"
        # OpenAI sets `refusal` on Structured Outputs only: stops normally, no content
        assert bool(refusal) == (kind == "refusal" and structured)
        if kind == "refusal" and structured:
            assert (stop, choice.message.content) == ("stop", None)
        elif kind == "refusal":  # a plain chat refusal is ordinary content text
            assert choice.message.content == REFUSAL_TEXT[:cap * 4]
            assert stop == ("length" if variant == "cut" else "stop")
        if kind == "content_filter":
            assert (stop, choice.message.content) == ("content_filter", None)
    elif api == "anthropic":
        stop = obj.stop_reason
        assert flagged == (stop == "refusal")
        if variant == "thinking" or kind == "reasoning_at_cap":
            assert obj.content[0].type == "thinking"
    else:
        stop = obj.candidates[0].finish_reason.value
        assert flagged == (stop == "SAFETY")
    if kind == "reasoning_at_cap":
        full_cap = body["max_tokens"] if api != "google" else cap
        assert stop == {"openai": "length", "anthropic": "max_tokens", "google": "MAX_TOKENS"}[api]
        if api == "openai":
            usage = obj.usage
            assert obj.choices[0].message.content == ""
            assert usage.completion_tokens == usage.completion_tokens_details.reasoning_tokens
            assert usage.completion_tokens == full_cap
        elif api == "anthropic":
            assert [b.type for b in obj.content] == ["thinking"]
            assert obj.usage.output_tokens == full_cap
        else:
            assert obj.candidates[0].content.parts is None
            assert obj.usage_metadata.thoughts_token_count == full_cap
    elif variant == "cut" and kind is None:
        assert stop in ("length", "max_tokens", "MAX_TOKENS")


def answer_of(api: str, obj: Any) -> str:
    """The answer text of a validated SDK response, read as each SDK's users read it."""
    if api == "openai":
        return obj.choices[0].message.content or ""
    if api == "anthropic":
        return "".join(b.text for b in obj.content if b.type == "text")
    parts = obj.candidates[0].content.parts if obj.candidates[0].content else None
    return "".join(p.text or "" for p in parts or [] if not p.thought)


_RATE_HEADERS = {
    "openai": [f"x-ratelimit-{p}-{n}" for n in ("requests", "tokens")
               for p in ("limit", "remaining", "reset")],
    "anthropic": [f"anthropic-ratelimit-{n}-{p}"
                  for n in ("requests", "tokens", "input-tokens", "output-tokens")
                  for p in ("limit", "remaining", "reset")],
}
_REQUEST_ID = {"openai": ("x-request-id", r"req_[0-9a-f]{32}"),
               "anthropic": ("request-id", r"req_[0-9A-Za-z]{24}")}


def check_rate_headers(api: str, headers: httpx.Headers, requests_left: int | None = None
                       ) -> None:
    """Each provider's own rate-limit headers (Gemini sends none), their values parseable."""
    named = {k.lower() for k in headers if "ratelimit" in k.lower()}
    assert named == set(_RATE_HEADERS.get(api, [])), named
    for name in named:
        value = headers[name]
        if name.endswith(("-limit", "-remaining")) or "-limit-" in name or "-remaining-" in name:
            assert value.isdigit(), (name, value)
        elif api == "openai":  # a duration: "17ms", "1s", "6m0s"
            assert re.fullmatch(r"(\d+m)?\d+(\.\d+)?(ms|s)", value), (name, value)
        else:  # RFC 3339
            datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    if requests_left is not None and api != "google":
        key = {"openai": "x-ratelimit-remaining-requests",
               "anthropic": "anthropic-ratelimit-requests-remaining"}[api]
        assert int(headers[key]) == requests_left


@pytest.mark.parametrize("api", sorted(MODEL))
def test_simulator_sends_each_providers_request_id_and_rate_limit_headers(sim, api) -> None:
    path, body = _wire(api, f"headers {api}", 64)
    r = httpx.post(sim.url + path, json=body, timeout=30)
    assert r.status_code == 200
    check_rate_headers(api, r.headers)
    if api == "google":  # its id is the body's responseId; it sends no request id header
        assert not {"x-request-id", "request-id"} & {k.lower() for k in r.headers}
        assert r.json()["responseId"]
        return
    header, form = _REQUEST_ID[api]
    assert re.fullmatch(form, r.headers[header]), r.headers[header]
    # the SDKs read the id from there
    if api == "openai":
        client = openai.OpenAI(api_key="sim", base_url=sim.url + "/v1", max_retries=0)
        got = client.chat.completions.create(model=MODEL[api], messages=body["messages"],
                                             max_tokens=64)
    else:
        client = anthropic.Anthropic(api_key="sim", base_url=sim.url, max_retries=0)
        got = client.messages.create(model=MODEL[api], messages=body["messages"],
                                     max_tokens=64)
    assert re.fullmatch(form, got._request_id or ""), got._request_id


def _batch_results(sim: Simulator, api: str, items: dict[str, dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """One batch of ``items`` (custom id -> wire body) through the simulator's batch endpoints
    as each SDK calls them; the raw result records (OpenAI output and error lines, Anthropic
    result lines, Gemini inlined responses)."""
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        if api == "openai":
            data = "".join(json.dumps({"custom_id": k, "method": "POST",
                                       "url": "/v1/chat/completions", "body": b}) + "\n"
                           for k, b in items.items())
            fid = http.post("/v1/files", data={"purpose": "batch"},
                            files={"file": ("batch.jsonl", data.encode())}).json()["id"]
            bid = http.post("/v1/batches", json={"input_file_id": fid, "completion_window": "24h",
                                                 "endpoint": "/v1/chat/completions"}).json()["id"]
            obj = http.get(f"/v1/batches/{bid}").json()
            assert unknown_fields(openai.types.Batch.model_validate(obj)) == []
            return [json.loads(x) for f in ("output_file_id", "error_file_id") if obj[f]
                    for x in http.get(f"/v1/files/{obj[f]}/content").text.split("\n") if x]
        if api == "anthropic":
            reqs = [{"custom_id": k, "params": b} for k, b in items.items()]
            bid = http.post("/v1/messages/batches", json={"requests": reqs}).json()["id"]
            http.get(f"/v1/messages/batches/{bid}")
            text = http.get(f"/v1/messages/batches/{bid}/results").text
            return [json.loads(x) for x in text.split("\n") if x]
        reqs = [{"request": {"contents": b["contents"], "generationConfig": b["generationConfig"]},
                 "metadata": {"key": k}} for k, b in items.items()]
        name = http.post(f"/v1beta/models/{MODEL[api]}:batchGenerateContent",
                         json={"batch": {"displayName": "shapes", "inputConfig": {
                             "requests": {"requests": reqs}}}}).json()["name"]
        obj = http.get(f"/v1beta/{name}").json()
        return obj["metadata"]["output"]["inlinedResponses"]["inlinedResponses"]


@pytest.mark.parametrize("api", sorted(MODEL))
def test_simulator_batch_items_validate_against_the_sdk_types(sim, api) -> None:
    # every kind of answer a batch item can carry, and an errored item, strictly validated
    kinds = [*_OK_KINDS, "batch_item_error"]
    items, texts = {}, {}
    for i, kind in enumerate(kinds):
        for variant in ("plain", "schema"):
            key, text = f"k{i}{variant[0]}", f"batch shape {api} {kind} {variant}"
            items[key] = _wire(api, text, 256, schema=variant == "schema")[1]
            texts[key] = text
            if kind:
                sim.add_fault(Fault(kind, match=text, times=1))
    records = _batch_results(sim, api, items)
    sent = {x["user"]: x.get("reply") for x in sim.log if x["kind"] == "batch"}
    answers, errors = {}, 0
    for rec in records:
        if api == "openai":
            assert set(rec) == {"id", "custom_id", "response", "error"}
            body = rec["response"]["body"]
            if rec["response"]["status_code"] == 200:
                answers[rec["custom_id"]] = _validate_success(api, body)
            else:
                errors += 1
                assert unknown_fields(openai_shared.ErrorObject.model_validate(body["error"])) == []
        elif api == "anthropic":
            got = anthropic_batches.MessageBatchIndividualResponse.model_validate(rec)
            assert unknown_fields(got) == [], unknown_fields(got)
            if got.result.type == "succeeded":
                answers[got.custom_id] = got.result.message
            else:
                errors += 1
        else:
            got = genai_types.InlinedResponse.model_validate(rec)  # extra="forbid": none undeclared
            if got.error is not None:
                errors += 1
                assert (got.error.code, got.response) == (13, None)
            else:
                answers[got.metadata["key"]] = got.response
    assert errors == 2 and len(answers) == len(items) - 2
    for key, obj in answers.items():  # the log records the reply each item was sent
        assert sent[texts[key]] == answer_of(api, obj), key


def _through_adapter(sim: Simulator, api: str, go: Any) -> Any:
    """``go(adapter)`` with the provider's adapter (its real SDK) pointed at the simulator."""
    provider = PROVIDER[api]

    async def run() -> Any:
        adapter = make_adapter(provider, "sim-key", sim.base_urls_for(REG)[provider.name], 10.0)
        try:
            return await go(adapter)
        finally:
            await adapter.aclose()

    return asyncio.run(run())


def _adapter_body(api: str, text: str) -> dict[str, Any]:
    body = _wire_body(api)
    if api == "google":
        body["contents"][0]["parts"][0]["text"] = text
    else:
        body["messages"][0]["content"] = text
    return body


_ITEM_KINDS = ("quoted_request", "invalid_key", "account_disabled", "location_unsupported",
               "model_not_found", "batch_item_error")


@pytest.mark.parametrize("api", sorted(MODEL))
def test_a_batch_item_error_is_classified_as_the_same_error_of_a_call(sim, api) -> None:
    # each fault on a call and on a batch item, through the adapter's own SDK: the item's error
    # (OpenAI's status and body, Anthropic's typed error, Gemini's numeric google.rpc code) is
    # read by the same fields and gets the same kind
    sync_kind, item_kind = {}, {}
    for kind in _ITEM_KINDS:
        text = f"call {api} {kind}"
        sim.add_fault(Fault(kind, match=text, times=1))

        async def call(adapter: Any, text: str = text) -> CallError:
            try:
                await adapter.call(_adapter_body(api, text))
            except Exception as exc:
                return adapter.classify(exc)
            raise AssertionError("the fault was not injected")

        sync_kind[kind] = _through_adapter(sim, api, call).kind
        sim.add_fault(Fault(kind, match=f"item {api} {kind}", times=1))

    async def batch(adapter: Any) -> dict[str, Any]:
        items = [(f"k{i}", _adapter_body(api, f"item {api} {kind}"))
                 for i, kind in enumerate(_ITEM_KINDS)]
        bid, info = await adapter.batch_submit(MODEL[api], items)
        done = False
        while not done:
            done, info = await adapter.batch_poll(bid, info)
        return await adapter.batch_collect(bid, info)

    replies = _through_adapter(sim, api, batch)
    for i, kind in enumerate(_ITEM_KINDS):
        assert isinstance(replies[f"k{i}"], CallError), kind
        item_kind[kind] = replies[f"k{i}"].kind
    expected = {"quoted_request": "permanent", "batch_item_error": "transient",
                **dict.fromkeys(STOP_FAULT_KINDS, "fatal")}
    assert sync_kind == {k: expected[k] for k in _ITEM_KINDS}
    if api == "google":  # a google.rpc.Status in a batch carries no ErrorInfo (google-genai
        # types its details as strings): a bad key is a plain INVALID_ARGUMENT there
        assert item_kind.pop("invalid_key") == "permanent"
        sync_kind.pop("invalid_key")
    assert item_kind == sync_kind


STOP_STATUS = {"invalid_key": {"openai": 401, "anthropic": 401, "google": 400},
               "account_disabled": {"openai": 401, "anthropic": 400, "google": 403},
               "location_unsupported": {"openai": 403, "anthropic": 403, "google": 400},
               "model_not_found": {"openai": 404, "anthropic": 404, "google": 404},
               "quoted_request": {"openai": 400, "anthropic": 400, "google": 400}}
"""Each provider's status for the simulator's account-level faults (see llm/faults.py)."""


# The simulator rejects no OpenAI request (it validates thinking budgets, which OpenAI lacks).
_ERROR_CASES = [(api, kind) for api in sorted(MODEL)
                for kind in (*_ERROR_KINDS, "rpm", "invalid_request")
                if not (kind == "invalid_request" and api == "openai")]


@pytest.mark.slow
@pytest.mark.parametrize(("api", "kind"), _ERROR_CASES)
def test_simulator_errors_validate_against_the_sdk_types(api, kind) -> None:
    text = f"error {api} {kind}"
    thinking = kind == "invalid_request" and api != "openai"
    path, body = _wire(api, text, 256, thinking=thinking)
    if kind == "invalid_request":
        if api == "anthropic":
            body["max_tokens"] = 1024  # not above the 1024-token thinking budget
        else:
            body["generationConfig"]["thinkingConfig"]["thinkingBudget"] = 99999
    faults = [] if kind in ("rpm", "invalid_request") else [Fault(kind, match=text)]
    with Simulator(rpm=6 if kind == "rpm" else None, faults=faults) as s:
        if kind == "rpm":
            assert httpx.post(s.url + path, json=body, timeout=30).status_code == 200
        r = httpx.post(s.url + path, json=body, timeout=30)
    expected = {"http_500": 500, "http_503": 503, "rate_limit": 429, "rpm": 429,
                "quota": {"openai": 429, "anthropic": 400, "google": 429}[api],
                "overloaded": 529 if api == "anthropic" else 503, "invalid_request": 400,
                **{k: v[api] for k, v in STOP_STATUS.items()}}[kind]
    assert r.status_code == expected, r.text
    _validate_error(api, r.status_code, r.json())
    if api == "anthropic" and "request_id" in r.json():  # the body names the header's id
        assert r.json()["request_id"] == r.headers["request-id"]
    if api == "openai":
        assert re.fullmatch(_REQUEST_ID[api][1], r.headers["x-request-id"])
    if kind != "invalid_request":
        check_rate_headers(api, r.headers, requests_left=0 if kind == "rpm" else None)
    if r.status_code == 429 and api == "anthropic":
        assert r.headers["retry-after"].isdigit() and "retry-after-ms" not in r.headers
    if r.status_code == 429 and api == "google":
        assert "retry-after" not in r.headers
        details = r.json()["error"]["details"]
        assert [d["@type"].rsplit(".", 1)[1] for d in details] == [
            "QuotaFailure", "Help", "RetryInfo"]
        quota = details[0]["violations"][0]["quotaId"]
        assert ("PerDay" in quota) == (kind == "quota")
