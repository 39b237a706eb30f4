"""The engine's shared pieces: one run context for both paths, one lazy adapter registry."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FREE
from conftest import JUDGE_BY_API as MODELS
from lazy_modules import SDK_GROUP

from hbpsych_utils.llm import Engine, Request, Store, call_cost, load_registry
from hbpsych_utils.llm.cost import Budget
from hbpsych_utils.llm.providers import Reply, adapter_class, make_adapter
from hbpsych_utils.llm.run_context import Progress, RunContext, RunReport, RunSettings
from hbpsych_utils.llm.testing import Fault, Simulator

REG = load_registry()
ROOT = Path(__file__).resolve().parent.parent
SDKS = ["openai", "anthropic", "google.genai"]


def _loaded_after(code: str) -> list[str]:
    """The SDK modules loaded by a fresh interpreter after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {SDKS!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_importing_the_engine_imports_no_sdk() -> None:
    assert _loaded_after("import hbpsych_utils.llm.engine") == []
    assert _loaded_after("import hbpsych_utils.llm") == []


@pytest.mark.slow
def test_an_sdk_is_imported_when_its_provider_is_first_used() -> None:
    # resolving an OpenAI request (wire body, API name for the key) loads openai only
    code = ("import pathlib, tempfile\n"
            "from hbpsych_utils.llm import Engine, Request, load_registry\n"
            "store = pathlib.Path(tempfile.mkdtemp()) / 's.db'\n"
            "Engine(store, load_registry(), progress=False, env={}).resolve(Request("
            f"{MODELS['openai']!r}, [{{'role': 'user', 'content': 'hi'}}]))")
    assert _loaded_after(code) == ["openai"]
    code = ("from hbpsych_utils.llm.providers import adapter_class\n"
            "adapter_class('google')")
    assert _loaded_after(code) == ["google.genai"]


@SDK_GROUP  # an adapter of each provider: its SDK imported
def test_one_registry_serves_request_bodies_and_clients() -> None:
    for name, p in REG.providers.items():
        cls = adapter_class(p.kind)
        assert adapter_class(p.kind) is cls  # resolved once
        adapter = make_adapter(p, "sk-test", "http://127.0.0.1:9/v1", 5.0)
        assert type(adapter) is cls, name
        asyncio.run(adapter.aclose())
    with pytest.raises(ValueError, match="unknown provider kind"):
        adapter_class("carrier_pigeon")  # type: ignore[arg-type]


def _context(store: Store) -> RunContext:
    settings = RunSettings(store, {}, 1, 0.01, 0.01, 0.01, connect=lambda p: None)  # type: ignore[arg-type,return-value]
    return RunContext(settings, "run-1", Budget(None), Progress(0, 0, False, ""),
                      RunReport("run-1", "sync", {}))


@SDK_GROUP
def test_empty_reply_accounting_is_one_ledger_line_per_paid_call(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    ctx = _context(store)
    e = Engine(store, REG, progress=False, env={"OPENAI_API_KEY": "x"})
    it = e.resolve(Request(MODELS["openai"], [{"role": "user", "content": "hi"}]))
    empty = Reply("", "stop", False, 1000, 0)
    spent_sync = ctx.pay_for_empty_reply(it, empty, "sync")
    spent_batch = ctx.pay_for_empty_reply(it, empty, "batch")
    price = REG.model(MODELS["openai"]).price
    assert spent_sync == pytest.approx(call_cost(price, 1000, 0)) and spent_sync > 0
    assert spent_batch == pytest.approx(call_cost(price, 1000, 0, batch=True))
    assert ctx.progress.spend == pytest.approx(spent_sync + spent_batch)
    rows = store._db.execute("SELECT run_id, provider, model, key, mode, input_tokens, "
                             "output_tokens, cost FROM ledger ORDER BY rowid").fetchall()
    assert rows == [("run-1", it.provider.name, it.spec.name, it.key, mode, 1000, 0, cost)
                    for mode, cost in (("sync", spent_sync), ("batch", spent_batch))]
    # nothing is paid for a reply that cost nothing, and no line is written for it
    assert ctx.pay_for_empty_reply(it, Reply("", None, False, 0, 0), "sync") == 0.0
    assert store._db.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] == 2


def _empty_reply_lines(db: Path, key: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT provider, model, key, mode, input_tokens, output_tokens, "
                           "cost FROM ledger WHERE key = ? ORDER BY rowid", (key,)).fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("api", sorted(MODELS))
def test_sync_and_batch_paths_record_the_same_empty_reply(tmp_path: Path, api: str) -> None:
    """An empty reply is paid for on both paths: the same ledger line (its own mode and
    price), counted in the run's spend, then retried synchronously to an answer."""
    text = f"empty once on {api}"
    req = Request(MODELS[api], [{"role": "user", "content": text}], temperature=0,
                  max_tokens=256)
    price = REG.model(MODELS[api]).price
    lines, spends = {}, {}
    with Simulator() as sim:
        for mode in ("sync", "batch"):
            sim.add_fault(Fault("empty", match=text, times=1))
            db = tmp_path / f"{mode}.db"
            e = Engine(db, REG, base_urls=sim.base_urls_for(REG), limits=FREE, progress=False,
                       env={}, backoff_base=0.01, poll_interval=0.02)
            [r] = e.run([req], mode=mode)  # type: ignore[arg-type]
            assert r.status == "ok" and r.mode == "sync" and r.text
            e.store.close()
            empty, answer = _empty_reply_lines(db, r.key)
            assert answer == (r.provider, r.model, r.key, "sync", r.input_tokens,
                              r.output_tokens, r.cost)
            lines[mode] = empty
            spends[mode] = e.last_report.spend  # type: ignore[union-attr]
            assert spends[mode] == pytest.approx(empty[-1] + r.cost, abs=1e-6)
    (p, m, k, mode_s, tin, tout, cost_s), (*same, mode_b, tin_b, tout_b, cost_b) = (
        lines["sync"], lines["batch"])
    assert (mode_s, mode_b) == ("sync", "batch")
    assert same == [p, m, k] and (tin_b, tout_b) == (tin, tout) and tin > 0 and tout == 0
    assert cost_s == pytest.approx(call_cost(price, tin, tout))
    assert cost_b == pytest.approx(call_cost(price, tin, tout, batch=True))
