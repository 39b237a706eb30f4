"""Request keys, the model registry's decoding quirks and the SQLite store."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from hbpsych_utils.llm import ConfigError, Engine, Request, Result, Store, load_registry
from hbpsych_utils.llm.models import registry_from_dict, resolve_decoding
from hbpsych_utils.llm.requests import request_key

REG = load_registry()
MSG = [{"role": "user", "content": "I cannot sleep."}]


def engine(tmp_path: Path, **kw) -> Engine:
    return Engine(tmp_path / "s.db", REG, progress=False, env={}, **kw)


def test_registry_holds_the_study_panel() -> None:
    candidates = REG.with_role("candidate")
    assert len(candidates) == 20
    assert sorted(REG.with_role("judge")) == [
        "claude-haiku-4-5-20251001", "gemini-2.5-flash", "gpt-4.1-2025-04-14"]
    assert sorted(REG.with_role("added")) == ["claude-fable-5-1", "gemini-3.8-flash",
                                              "gpt-6-astra"]
    assert {REG.model(m).provider for m in candidates} == {
        "openai", "anthropic", "google", "deepseek", "xai", "moonshot", "mistral", "alibaba"}


def test_decoding_quirks_from_the_registry() -> None:
    def dec(model: str, t: float | None = 0, cap: int | None = 8192) -> dict:
        s = REG.model(model)
        return resolve_decoding(s, REG.providers[s.provider].kind, t, cap)

    assert dec("gpt-4.1-2025-04-14") == {"temperature": 0.0, "max_tokens": 8192}
    assert dec("gpt-5.5") == {"max_completion_tokens": 8192}  # temperature rejected
    assert dec("gpt-3.5-turbo") == {"temperature": 0.0, "max_tokens": 4096}  # capped
    assert dec("claude-opus-5") == {"max_tokens": 8192}
    assert dec("kimi-k2.6")["temperature"] == 1.0  # fixed whatever was asked
    fable = dec("claude-fable-5")
    assert fable["temperature"] == 1.0 and fable["thinking"]["type"] == "enabled"
    assert fable["max_tokens"] > fable["thinking"]["budget_tokens"]
    assert dec("gemini-2.5-flash", cap=2048) == {
        "temperature": 0.0, "max_output_tokens": 2048, "thinking_config": {"thinking_budget": 0}}
    # Anthropic requires a cap: the model default is sent when the request has none.
    assert dec("claude-haiku-4-5-20251001", cap=None) == {"temperature": 0.0, "max_tokens": 8192}
    assert dec("gpt-4.1-2025-04-14", t=None, cap=None) == {}


def test_key_is_sha256_of_the_canonical_request() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hé"}], "temperature": 0.0}
    canonical = ('{"api":"chat.completions","body":{"messages":[{"content":"hé","role":"user"}],'
                 '"model":"m","temperature":0.0},"endpoint":"default","provider":"openai","v":1}')
    expected = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert request_key(provider="openai", endpoint="default", api="chat.completions",
                       body=body) == expected


def test_key_ignores_tags_and_int_float_temperature(tmp_path: Path) -> None:
    e = engine(tmp_path)
    a = e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0, max_tokens=100, tag="a"))
    b = e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0.0, max_tokens=100, tag="b",
                          metadata={"x": 1}))
    c = e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0.5, max_tokens=100))
    d = e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0, max_tokens=100,
                          response_schema={"type": "object"}))
    assert a.key == b.key
    assert len({a.key, c.key, d.key}) == 3
    # A model that rejects temperature: every temperature is the same request.
    g1 = e.resolve(Request("gpt-5.5", MSG, temperature=0))
    g2 = e.resolve(Request("gpt-5.5", MSG, temperature=0.7))
    assert g1.key == g2.key


def test_key_separates_real_and_loopback_endpoints(tmp_path: Path) -> None:
    real = engine(tmp_path).resolve(Request("gpt-4.1-2025-04-14", MSG))
    sim1 = Engine(tmp_path / "a.db", REG, base_urls={"openai": "http://127.0.0.1:1234/v1"},
                  progress=False, env={}).resolve(Request("gpt-4.1-2025-04-14", MSG))
    sim2 = Engine(tmp_path / "b.db", REG, base_urls={"openai": "http://localhost:999/v1"},
                  progress=False, env={}).resolve(Request("gpt-4.1-2025-04-14", MSG))
    assert sim1.key == sim2.key != real.key


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="role"):
        Request("gpt-4.1-2025-04-14", [{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="at least one message"):
        Request("gpt-4.1-2025-04-14", [])
    with pytest.raises(ValueError, match="max_tokens"):
        Request("gpt-4.1-2025-04-14", MSG, max_tokens=0)


def test_registry_errors_name_the_entry_and_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"models\.x\.price"):
        registry_from_dict({"providers": {"p": {"kind": "openai", "api_key_env": "K"}},
                            "models": {"x": {"provider": "p", "api_model": "x"}}})
    with pytest.raises(ConfigError, match="provider 'nope' is not defined"):
        registry_from_dict({"providers": {}, "models": {"x": {
            "provider": "nope", "api_model": "x", "price": {"input": 1, "output": 1}}}})
    with pytest.raises(ConfigError, match="temperatur"):
        registry_from_dict({"providers": {"p": {"kind": "openai", "api_key_env": "K"}},
                            "models": {"x": {"provider": "p", "api_model": "x",
                                             "temperatur": 0,
                                             "price": {"input": 1, "output": 1}}}})


def _res(key: str, status: str, text: str | None = "t", cost: float = 0.0) -> Result:
    return Result(key=key, model="m", provider="p", status=status, text=text,  # type: ignore[arg-type]
                  input_tokens=10, output_tokens=5, cost=cost)


def test_store_never_overwrites_a_completed_row(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    s.put(_res("k1", "failed", None))
    s.put(_res("k1", "ok", "first answer", 0.5))
    s.put(_res("k1", "ok", "second answer", 0.5))
    s.put(_res("k1", "failed", None))
    got = s.get("k1")
    assert got is not None and got.status == "ok" and got.text == "first answer"
    s.put(_res("k2", "refused", "", 0.25))
    assert s.completed_keys(["k1", "k2", "k3"]) == {"k1", "k2"}
    # the ledger has every paid call, also the one whose row was not replaced
    assert s.spend()["cost"] == pytest.approx(1.25)
    assert s.count("ok") == 1 and s.count() == 2


def test_store_is_wal_and_failed_rows_keep_no_text(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    s.put(_res("k", "failed", "should not be kept"))
    assert s.get("k").text is None  # type: ignore[union-attr]
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        idx = {r[1] for r in db.execute("PRAGMA index_list('results')")}
        assert "ix_results_status" in idx


def test_store_batches_roundtrip(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    s.add_batch("b1", "openai", "gpt", ["k1", "k2"], {"input_file_id": "f"})
    assert [b["batch_id"] for b in s.open_batches("openai")] == ["b1"]
    assert sorted(s.batch_keys("b1")) == ["k1", "k2"]
    s.set_batch_status("b1", "collected")
    assert s.open_batches() == []
