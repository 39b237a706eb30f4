"""Every fault kind of the simulator, through the engine and the real SDK clients."""

from __future__ import annotations

from pathlib import Path

import pytest

from hbpsych_utils.llm import Engine, ProviderFatalError, Request, load_registry
from hbpsych_utils.llm.testing import Fault, Simulator

REG = load_registry()
FREE = {p: {"rpm": None, "tpm": None} for p in REG.providers}  # no client-side rate limit
MODELS = {"openai": "gpt-4.1-2025-04-14", "anthropic": "claude-haiku-4-5-20251001",
          "google": "gemini-2.5-flash"}
REFUSAL_STOP = {"openai": "content_filter", "anthropic": "refusal", "google": "SAFETY"}


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
             "empty"]


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
    [r] = e.run([req(api, text)])
    assert r.status == "refused" and r.refusal and r.stop_reason == REFUSAL_STOP[api]
    assert r.attempts == 1
    [again] = e.run([req(api, text)])
    assert again.cached and again.status == "refused"
    assert len(calls(sim, text)) == 1


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
    with pytest.raises(ProviderFatalError, match="stopping the run"):
        e.run([req(api, t) for t in texts])
    sent = [x for x in sim.log if x["user"].startswith(f"quota {api}")]
    assert len(sent) == 1  # no retry, no further request
    assert e.store.get(ok.key).status == "ok"  # type: ignore[union-attr]


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
    rs = e.run([req(api, t) for t in texts], mode="batch")
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
