"""Every fault kind of the simulator, through the engine and the real SDK clients."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from conftest import FREE
from conftest import JUDGE_BY_API as MODELS

from hbpsych_utils.llm import (
    Engine,
    ProviderFatalError,
    Request,
    Result,
    call_cost,
    load_registry,
)
from hbpsych_utils.llm.faults import STOP_FAULT_KINDS
from hbpsych_utils.llm.providers import CallError, Reply, make_adapter
from hbpsych_utils.llm.testing import Fault, Simulator

REG = load_registry()
# OpenAI structured-output refusals stop normally and explain themselves in `message.refusal`
REFUSAL_STOP = {"openai": "stop", "anthropic": "refusal", "google": "SAFETY"}
# OpenAI sets `message.refusal` on Structured Outputs only: the refusals below ask for a schema
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}
CAP_STOP = {"openai": "length", "anthropic": "max_tokens", "google": "MAX_TOKENS"}


@pytest.fixture(scope="module")
def sim():
    with Simulator(hang=5.0) as s:
        yield s


@pytest.fixture(autouse=True)
def _clean(sim: Simulator):
    sim.clear()
    yield
    sim.clear()


def make_engine(tmp_path: Path, sim: Simulator, **kw) -> Engine:
    opts = {"max_attempts": 4, "backoff_base": 0.01, "backoff_max": 0.05, "timeout": 1.0,
            "progress": False, "poll_interval": 0.02, "limits": FREE, **kw}
    return Engine(tmp_path / "store.db", REG, base_urls=sim.base_urls_for(REG), env={}, **opts)


def req(api: str, text: str, **kw) -> Request:
    return Request(MODELS[api], [{"role": "user", "content": text}], temperature=0,
                   max_tokens=512, **kw)


def calls(sim: Simulator, text: str, kind: str = "sync") -> list[dict]:
    return [e for e in sim.log if e["user"] == text and e["kind"] == kind]


TRANSIENT = ["http_500", "http_503", "reset", "timeout", "malformed", "truncated", "rate_limit",
             "empty", "overloaded"]


@pytest.mark.parametrize("api", sorted(MODELS))
@pytest.mark.parametrize("kind", TRANSIENT)
def test_transient_faults_are_retried_then_answered(tmp_path, sim, api, kind) -> None:
    text = f"{kind} on {api}"
    sim.add_fault(Fault(kind, match=text, times=2, retry_after=0.05))  # type: ignore[arg-type]
    # a hung call is cut at the timeout; a loaded machine needs headroom for the answered one
    e = make_engine(tmp_path, sim, timeout=1.5)
    [r] = e.run([req(api, text)])
    assert r.status == "ok" and r.text and r.text.startswith(f"[sim {MODELS[api]}")
    assert r.attempts == 3
    assert [c["fault"] for c in calls(sim, text)] == [kind, kind, None]
    stored = e.store.get(r.key)
    assert stored is not None and stored.text == r.text


@pytest.mark.parametrize("api", sorted(MODELS))
def test_refusal_is_stored_with_the_provider_stop_reason_and_never_resampled(
        tmp_path, sim, api) -> None:
    text = f"refuse me on {api}"
    sim.add_fault(Fault("refusal", match=text))
    e = make_engine(tmp_path, sim)
    [r] = e.run([req(api, text, response_schema=SCHEMA)])
    assert r.status == "refused" and r.refusal and r.stop_reason == REFUSAL_STOP[api]
    assert r.attempts == 1 and r.text == ""
    [again] = e.run([req(api, text, response_schema=SCHEMA)])
    assert again.cached and again.status == "refused"
    assert len(calls(sim, text)) == 1


def test_a_plain_chat_refusal_on_openai_is_an_answer_and_a_filtered_one_a_refusal(
        tmp_path, sim) -> None:
    # On a plain chat request OpenAI's model refuses in words (no `refusal` field): an answer,
    # graded as written. A reply its content filter withheld is the refusal there.
    sim.add_fault(Fault("refusal", match="refuse in words"))
    sim.add_fault(Fault("content_filter", match="filter me"))
    e = make_engine(tmp_path, sim)
    words, filtered = e.run([req("openai", "refuse in words"), req("openai", "filter me")])
    assert (words.status, words.refusal, words.stop_reason) == ("ok", False, "stop")
    assert words.text == "I'm sorry, but I can't help with that."
    assert (filtered.status, filtered.refusal, filtered.text) == ("refused", True, "")
    assert filtered.stop_reason == "content_filter"


@pytest.mark.parametrize("api", sorted(MODELS))
@pytest.mark.parametrize(("fault", "error"), [("empty", "empty reply"),
                                              ("http_500", "gave up after 3 attempts")])
def test_persistent_failure_is_never_stored_as_output(tmp_path, sim, api, fault, error) -> None:
    # An empty reply without a refusal is a transport failure, like a 5xx: retried up to
    # max_attempts, stored as failed (never as the answer), and asked again by a later run.
    text = f"always {fault} on {api}"
    sim.add_fault(Fault(fault, match=text))
    e = make_engine(tmp_path, sim, max_attempts=3)
    [r] = e.run([req(api, text)])
    assert r.status == "failed" and r.text is None and error in (r.error or "")
    assert e.store.get(r.key).text is None  # type: ignore[union-attr]
    assert len(calls(sim, text)) == 3
    sim.clear()
    [r2] = e.run([req(api, text)])
    assert r2.status == "ok" and r2.text and len(calls(sim, text)) == 1


def test_retry_after_is_honoured(tmp_path, sim) -> None:
    text = "slow down"
    sim.add_fault(Fault("rate_limit", match=text, times=1, retry_after=0.4))
    e = make_engine(tmp_path, sim, backoff_base=0.001, backoff_max=0.001)
    [r] = e.run([req("openai", text)])
    first, second = calls(sim, text)
    assert r.status == "ok" and second["t"] - first["t"] >= 0.35


@pytest.mark.parametrize("api", sorted(MODELS))
def test_quota_error_fails_fast_and_keeps_finished_work(tmp_path, sim, api) -> None:
    provider = REG.model(MODELS[api]).provider
    e = make_engine(tmp_path, sim, limits={**FREE, provider: {"concurrency": 1}})
    [ok] = e.run([req(api, "paid before")])
    sim.add_fault(Fault("quota", api=api))
    texts = [f"quota {api} {i}" for i in range(5)]
    with pytest.raises(ProviderFatalError, match="stopping the run") as info:
        e.run([req(api, t) for t in texts])
    sent = [x for x in sim.log if x["user"].startswith(f"quota {api}")]
    assert len(sent) == 1  # no retry, no further request
    # each provider's real shape: OpenAI 429 insufficient_quota, Anthropic's credit-balance 400,
    # Gemini a 429 RESOURCE_EXHAUSTED naming a per-day quota (the message says which)
    assert sent[0]["status"] == QUOTA_STATUS[api]
    assert QUOTA_NAMED[api] in str(info.value)
    assert e.store.get(ok.key).status == "ok"  # type: ignore[union-attr]


QUOTA_STATUS = {"openai": 429, "anthropic": 400, "google": 429}
QUOTA_NAMED = {"openai": "insufficient_quota", "anthropic": "credit balance is too low",
               "google": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}

# Each stop fault's status and the cause the run's error names, per provider (the simulator
# sends each provider's real shape: see llm/faults.py)
STOPS = {
    "quota": {api: (QUOTA_STATUS[api], QUOTA_NAMED[api]) for api in QUOTA_STATUS},
    "invalid_key": {"openai": (401, "the API key is not valid"),
                    "anthropic": (401, "the API key was refused"),
                    "google": (400, "the API key is not valid")},
    "account_disabled": {"openai": (401, "the account has been deactivated"),
                         "anthropic": (400, "the organisation has been disabled"),
                         "google": (403, "the API key's project has been suspended")},
    "location_unsupported": {
        "openai": (403, "does not serve the country, region or territory"),
        "anthropic": (403, "access is refused (the key's permissions, the organisation or the "
                           "location)"),
        "google": (400, "does not serve this account where the run is made from")},
    "model_not_found": dict.fromkeys(("openai", "anthropic", "google"),
                                     (404, "the model does not exist here")),
}


@pytest.mark.parametrize("api", sorted(MODELS))
@pytest.mark.parametrize("kind", STOP_FAULT_KINDS)
def test_an_account_level_error_stops_the_run_after_one_call(tmp_path, sim, api, kind) -> None:
    # billing, a bad key, a disabled organisation, an unserved location (Gemini's
    # FAILED_PRECONDITION), a model that does not exist (OpenAI's 404 model_not_found): the
    # first call's error stops the run, naming the cause; nothing else is sent
    provider = REG.model(MODELS[api]).provider
    e = make_engine(tmp_path, sim, limits={**FREE, provider: {"concurrency": 1}})
    [ok] = e.run([req(api, f"before {kind}")])
    sim.add_fault(Fault(kind, api=api))
    texts = [f"{kind} {api} {i}" for i in range(5)]
    with pytest.raises(ProviderFatalError, match="stopping the run") as info:
        e.run([req(api, t) for t in texts])
    sent = [x for x in sim.log if x["user"].startswith(f"{kind} {api}")]
    status, cause = STOPS[kind][api]
    assert len(sent) == 1 and sent[0]["status"] == status and sent[0]["fault"] == kind
    assert cause in str(info.value), str(info.value)
    stored = [e.store.get(e.resolve(req(api, t)).key) for t in texts]
    assert [x.status for x in stored if x is not None] == ["failed"]  # the one call, no other
    assert e.store.get(ok.key).status == "ok"  # type: ignore[union-attr]


QUOTED = "my credit balance is too low and I feel hopeless"


@pytest.mark.parametrize("api", sorted(MODELS))
def test_a_400_quoting_the_conversation_fails_that_request_only(tmp_path, sim, api) -> None:
    # the provider's 400 quotes the user's words ("credit balance is too low"): that request
    # fails, once and for good; the run goes on and answers the others
    provider = REG.model(MODELS[api]).provider
    e = make_engine(tmp_path, sim, limits={**FREE, provider: {"concurrency": 1}})
    sim.add_fault(Fault("quoted_request", match=QUOTED))
    texts = [f"before the quote {api}", QUOTED, f"after the quote {api}"]
    rs = e.run([req(api, t) for t in texts])
    assert [r.status for r in rs] == ["ok", "failed", "ok"]
    assert rs[1].attempts == 1 and QUOTED in (rs[1].error or "")
    [quoted] = calls(sim, QUOTED)
    assert (quoted["status"], quoted["fault"]) == (400, "quoted_request")
    assert [c["status"] for t in texts[::2] for c in calls(sim, t)] == [200, 200]


@pytest.mark.parametrize("api", sorted(MODELS))
def test_an_account_level_batch_item_error_stops_the_run(tmp_path, sim, api) -> None:
    # the batch path reads an item's error with the same fields: a model that does not exist
    # stops the run with the batch collected; nothing goes through the synchronous path
    texts = [f"missing model batch {api} {i}" for i in range(3)]
    sim.add_fault(Fault("model_not_found", match=texts[1], times=1))
    e = make_engine(tmp_path, sim)
    with pytest.raises(ProviderFatalError, match="the model does not exist here") as info:
        e.run([req(api, t) for t in texts], mode="batch")
    assert "batch " in str(info.value)
    assert [x["user"] for x in sim.log if x["kind"] == "sync"] == []
    got = [e.store.get(e.resolve(req(api, t)).key) for t in texts]
    assert [x.status if x else None for x in got] == ["ok", None, "ok"]


@pytest.mark.parametrize("api", sorted(MODELS))
def test_a_batch_item_quoting_the_conversation_fails_that_item_only(tmp_path, sim, api) -> None:
    texts = [f"quote batch {api} 0", QUOTED + f" ({api})", f"quote batch {api} 2"]
    sim.add_fault(Fault("quoted_request", match=QUOTED))
    e = make_engine(tmp_path, sim)
    rs = e.run([req(api, t) for t in texts], mode="batch")
    assert [r.status for r in rs] == ["ok", "failed", "ok"]
    # errored in the batch, then once through the synchronous path (a 400: not retried)
    assert [x["kind"] for x in sim.log if x["user"] == texts[1]] == ["batch", "sync"]


def test_gemini_per_minute_429_waits_the_delay_from_its_details(tmp_path, sim) -> None:
    # Gemini sends no retry header: the delay is RetryInfo.retryDelay, after a long message and
    # two other details. The engine waits it (back-off alone would be ~1 ms here) and answers.
    text = "gemini slow down"
    sim.add_fault(Fault("rate_limit", api="google", match=text, times=1, retry_after=0.6))
    e = make_engine(tmp_path, sim, backoff_base=0.001, backoff_max=0.001)
    [r] = e.run([req("google", text)])
    first, second = calls(sim, text)
    assert (first["status"], first["fault"]) == (429, "rate_limit")
    assert r.status == "ok" and r.attempts == 2 and second["t"] - first["t"] >= 0.55


def _once(tmp_path, sim, api: str, kind: str) -> tuple[Engine, Result, str]:
    """One request to ``api`` whose first call meets the fault ``kind``."""
    text = f"{kind} once on {api}"
    sim.add_fault(Fault(kind, match=text, times=1))
    e = make_engine(tmp_path, sim)
    [r] = e.run([req(api, text)])
    return e, r, text


@pytest.mark.parametrize("api", sorted(MODELS))
def test_overloaded_is_anthropic_529_and_503_elsewhere_then_answered(tmp_path, sim, api) -> None:
    _, r, text = _once(tmp_path, sim, api, "overloaded")
    assert [c["status"] for c in calls(sim, text)] == [529 if api == "anthropic" else 503, 200]
    assert r.status == "ok" and r.attempts == 2


def _ledger(e: Engine, key: str) -> list[tuple]:
    return e.store._db.execute("SELECT mode, output_tokens, cost FROM ledger WHERE key = ? "
                               "ORDER BY rowid", (key,)).fetchall()


@pytest.mark.parametrize("api", sorted(MODELS))
def test_reasoning_that_uses_the_whole_cap_is_a_paid_empty_reply(tmp_path, sim, api) -> None:
    # Reasoning tokens count against the output cap; a reply can end at the cap with no text.
    # That is not a refusal: the call is paid (a ledger line at the cap), retried, and the
    # retry's answer is stored.
    e, r, _ = _once(tmp_path, sim, api, "reasoning_at_cap")
    assert r.status == "ok" and not r.refusal and r.text and r.attempts == 2
    price = REG.model(MODELS[api]).price
    (mode, out, cost), answer = _ledger(e, r.key)
    assert (mode, out) == ("sync", 512)  # the request's cap: all of it spent on reasoning
    assert cost == pytest.approx(call_cost(price, r.input_tokens, 512)) and cost > 0
    assert answer == ("sync", r.output_tokens, pytest.approx(r.cost))


@pytest.mark.parametrize("api", sorted(MODELS))
def test_reasoning_at_cap_every_time_is_failed_with_the_cap_named(tmp_path, sim, api) -> None:
    text = f"always think too long on {api}"
    sim.add_fault(Fault("reasoning_at_cap", match=text))
    e = make_engine(tmp_path, sim, max_attempts=2)
    [r] = e.run([req(api, text)])
    assert r.status == "failed" and not r.refusal and r.text is None
    assert CAP_STOP[api] in (r.error or "") and "output cap was reached" in (r.error or "")
    assert [x[1] for x in _ledger(e, r.key)] == [512, 512]  # both attempts paid


@pytest.mark.slow
def test_rate_limits_are_per_provider() -> None:
    # One request per second's worth of 6 rpm for each provider: a call to each of four
    # providers passes; a second call to the same provider gets that provider's own 429.
    bodies = {"openai": ("/v1/chat/completions", {"model": "m", "messages": [
                  {"role": "user", "content": "hi"}]}),
              "alibaba": ("/alibaba/v1/chat/completions", {"model": "m", "messages": [
                  {"role": "user", "content": "hi"}]}),
              "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 64, "messages": [
                  {"role": "user", "content": "hi"}]}),
              "google": ("/v1beta/models/m:generateContent", {"contents": [
                  {"role": "user", "parts": [{"text": "hi"}]}]})}
    with Simulator(rpm=6) as s, httpx.Client(base_url=s.url, timeout=30) as c:
        first = {name: c.post(path, json=body) for name, (path, body) in bodies.items()}
        second = {name: c.post(path, json=body) for name, (path, body) in bodies.items()}
    assert {n: r.status_code for n, r in first.items()} == dict.fromkeys(bodies, 200)
    assert {n: r.status_code for n, r in second.items()} == dict.fromkeys(bodies, 429)
    assert second["openai"].json()["error"]["code"] == "rate_limit_exceeded"
    assert second["anthropic"].json()["error"]["type"] == "rate_limit_error"
    assert second["anthropic"].headers["retry-after"].isdigit()
    assert "retry-after-ms" not in second["anthropic"].headers
    assert second["google"].json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "retry-after" not in second["google"].headers


def _call(sim: Simulator, api: str, body: dict) -> Reply | CallError:
    """One call through the provider's adapter (its real SDK) against the simulator."""
    provider = REG.providers[REG.model(MODELS[api]).provider]

    async def go() -> Reply | CallError:
        adapter = make_adapter(provider, "sim-key", sim.base_urls_for(REG)[provider.name], 10.0)
        try:
            return await adapter.call(body)
        except Exception as exc:
            return adapter.classify(exc)
        finally:
            await adapter.aclose()

    return asyncio.run(go())


def test_requests_the_real_api_rejects_are_permanent_400s(sim) -> None:
    msgs = [{"role": "user", "content": "validate me"}]
    haiku, flash = MODELS["anthropic"], MODELS["google"]
    rejected = {
        "`max_tokens` must be greater than `thinking.budget_tokens`": ("anthropic", {
            "model": haiku, "messages": msgs, "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 2048}}),
        "greater than or equal to 1024": ("anthropic", {
            "model": haiku, "messages": msgs, "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 512}}),
        "The thinking budget (30000) is invalid.": ("google", {
            "model": flash, "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "config": {"max_output_tokens": 256, "thinking_config": {"thinking_budget": 30000}}}),
        "This model only works in thinking mode": ("google", {
            "model": "gemini-2.5-pro", "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "config": {"thinking_config": {"thinking_budget": 0}}}),
    }
    for message, (api, body) in rejected.items():
        err = _call(sim, api, body)
        assert isinstance(err, CallError), message
        assert (err.kind, err.status) == ("permanent", 400) and message in str(err), str(err)
    # Gemini takes a thinking budget above the output cap (thoughts then count against it)
    ok = _call(sim, "google", {
        "model": flash, "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "config": {"max_output_tokens": 256, "thinking_config": {"thinking_budget": 8192}}})
    assert isinstance(ok, Reply) and ok.text


def test_the_registry_never_sends_a_thinking_budget_the_api_rejects(tmp_path, sim) -> None:
    # claude-fable-5 thinks with a 4096-token budget; a request capped below it is sent with
    # max_tokens raised above the budget (resolve_decoding), so the simulator accepts it.
    e = make_engine(tmp_path, sim)
    [r] = e.run([Request("claude-fable-5", [{"role": "user", "content": "think briefly"}],
                         max_tokens=1024)])
    assert r.status == "ok" and r.config["max_tokens"] > r.config["thinking"]["budget_tokens"]


def test_garbled_text_is_stored_as_the_answer(tmp_path, sim) -> None:
    # A content-level fault (the judge's JSON is broken): the engine stores it as returned; the
    # grading stage recovers the verdict.
    text = "grade this; answer with criteria_met"
    sim.add_fault(Fault("garbled", match=text))
    e = make_engine(tmp_path, sim)
    [r] = e.run([req("openai", text)])
    assert r.status == "ok" and r.text and r.text.endswith('"criteria_met": tru')


@pytest.mark.parametrize("api", sorted(MODELS))
@pytest.mark.parametrize("kind", ["batch_item_error", "batch_item_missing", "refusal", "empty"])
def test_batch_item_faults(tmp_path, sim, api, kind) -> None:
    texts = [f"{kind} batch {api} {i}" for i in range(4)]
    sim.add_fault(Fault(kind, match=texts[1], times=1))  # type: ignore[arg-type]
    e = make_engine(tmp_path, sim)
    rs = e.run([req(api, t, response_schema=SCHEMA) for t in texts], mode="batch")
    assert [r.status for r in rs] == ["ok", "refused" if kind == "refusal" else "ok", "ok", "ok"]
    batch_items = [x for x in sim.log if x["kind"] == "batch"]
    assert len(batch_items) == 4
    sync_calls = [x for x in sim.log if x["kind"] == "sync"]
    if kind == "refusal":
        assert rs[1].mode == "batch" and sync_calls == []
        assert e.last_report.fallback == 0  # type: ignore[union-attr]
    else:  # errored, dropped or empty items go through the synchronous path
        assert [x["user"] for x in sync_calls] == [texts[1]]
        assert rs[1].mode == "sync" and e.last_report.fallback == 1  # type: ignore[union-attr]
