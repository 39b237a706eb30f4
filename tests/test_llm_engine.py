"""The engine end to end against the simulator: plan, order, batch == sync, budget, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from conftest import FREE, JUDGE_BY_API

from hbpsych_utils.llm import ConfigError, Engine, Request, call_cost, load_registry
from hbpsych_utils.llm.testing import Fault, Simulator

REG = load_registry()
JUDGES = list(JUDGE_BY_API.values())


@pytest.fixture(scope="module")
def sim():
    with Simulator() as s:
        yield s


def make_engine(path: Path, sim: Simulator, **kw) -> Engine:
    opts = {"backoff_base": 0.01, "progress": False, "poll_interval": 0.02, "env": {},
            "limits": FREE, **kw}
    return Engine(path, REG, base_urls=sim.base_urls_for(REG), **opts)


def reqs(models: list[str], n: int, prefix: str = "q") -> list[Request]:
    return [Request(m, [{"role": "user", "content": f"{prefix} {m} {i}"}], temperature=0,
                    max_tokens=1024, tag=f"{m}/{i}") for m in models for i in range(n)]


def test_plan_before_anything_runs(tmp_path, sim) -> None:
    e = make_engine(tmp_path / "s.db", sim)
    rs = [Request("gpt-4.1-2025-04-14", [{"role": "user", "content": "x" * 400}],
                  max_tokens=100)] * 2 + [
          Request("gpt-4.1-2025-04-14", [{"role": "user", "content": "y" * 400}],
                  max_tokens=1000)]
    p = e.plan(rs)
    # 400 chars -> 100 input tokens; output estimate = min(cap, 400)
    assert (p.requests, p.unique, p.cached, p.calls) == (3, 2, 0, 2)
    assert (p.est_input_tokens, p.est_output_tokens) == (200, 100 + 400)
    # gpt-4.1 at $2 / $8 per million: 200*2/1e6 + 500*8/1e6
    assert p.est_cost == pytest.approx(0.0004 + 0.004)
    assert sim.log == [] or all(x["user"][0] not in "xy" for x in sim.log)
    e.run(rs[:1])
    assert e.plan(rs).cached == 1 and e.plan(rs).calls == 1
    assert e.plan(rs, mode="batch").est_cost == pytest.approx(call_cost(
        REG.model("gpt-4.1-2025-04-14").price, 100, 400, batch=True))


def test_results_in_request_order_with_duplicates_answered_once(tmp_path, sim) -> None:
    sim.clear()
    rs = reqs([*JUDGES, "qwen3-8b"], 3)
    rs = [*rs, rs[0]]
    e = make_engine(tmp_path / "s.db", sim)
    out = e.run(rs)
    assert [r.tag for r in out] == [r.tag for r in rs]
    assert all(r.status == "ok" for r in out)
    assert out[0].text == out[-1].text and out[0].key == out[-1].key
    assert len(sim.log) == 12
    assert {x["tenant"] for x in sim.log if x["model"] == "qwen3-8b"} == {"alibaba"}
    for r, q in zip(out, rs, strict=True):
        assert r.text.startswith(f"[sim {REG.model(q.model).api_model} ")  # type: ignore[union-attr]


def test_rerun_makes_no_request(tmp_path, sim) -> None:
    e = make_engine(tmp_path / "s.db", sim)
    first = e.run(reqs(JUDGES, 4, "resume"))
    sim.clear()
    again = e.run(reqs(JUDGES, 4, "resume"))
    assert sim.log == [] and all(r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in first]
    assert e.last_report.spend == 0  # type: ignore[union-attr]


def test_batch_and_sync_paths_store_the_same_answers(tmp_path, sim) -> None:
    schema = {"type": "object", "properties": {
        "label": {"enum": ["RELEVANT", "BORDERLINE", "NOT_RELEVANT"]},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "ok": {"type": "boolean"}}}}}}
    rs = reqs([*JUDGES, "mistral-small-latest"], 5, "same") + [
        Request(m, [{"role": "user", "content": "Screen these 3 items."}],
                temperature=0, response_schema=schema) for m in JUDGES]
    sync = make_engine(tmp_path / "sync.db", sim).run(rs, mode="sync")
    eb = make_engine(tmp_path / "batch.db", sim)
    batch = eb.run(rs, mode="batch")
    assert [r.key for r in sync] == [r.key for r in batch]
    assert [r.text for r in sync] == [r.text for r in batch]
    assert [r.mode for r in batch].count("batch") == 18  # mistral has no batch API: sync
    assert len(eb.last_report.batches) == 3  # type: ignore[union-attr]
    for r in batch[-3:]:
        obj = r.json()
        assert obj["label"] in ("RELEVANT", "BORDERLINE", "NOT_RELEVANT")
        assert len(obj["items"]) == 3 and isinstance(obj["items"][0]["ok"], bool)
    # batch calls are charged the discounted price
    b, s = batch[0], sync[0]
    assert b.cost == pytest.approx(s.cost * 0.5)


def test_grader_prompts_get_a_grader_verdict(tmp_path, sim) -> None:
    prompt = ('Return a json object with "explanation" and "criteria_met".\n'
              "[5] Recommends contacting a crisis line")
    [r] = make_engine(tmp_path / "s.db", sim).run([Request(
        "gpt-4.1-2025-04-14", [{"role": "system", "content": "You are a helpful assistant."},
                               {"role": "user", "content": prompt}], temperature=0,
        max_tokens=2048)])
    body = r.text.strip().removeprefix("```json").removesuffix("```")  # type: ignore[union-attr]
    verdict = json.loads(body)
    assert set(verdict) == {"explanation", "criteria_met"}
    assert isinstance(verdict["criteria_met"], bool)


def test_max_cost_stops_new_work_and_says_so(tmp_path, sim, capsys) -> None:
    sim.clear()
    e = make_engine(tmp_path / "s.db", sim, limits={**FREE, "openai": {"concurrency": 1}},
                    max_cost=0.01, progress=True)
    rs = reqs(["gpt-4.1-2025-04-14"], 40, "budget")
    out = e.run(rs)
    ok = [r for r in out if r.status == "ok"]
    not_run = [r for r in out if r.status == "not_run"]
    assert ok and not_run and len(ok) + len(not_run) == 40
    spent = sum(r.cost for r in ok)
    assert spent >= 0.01 and spent < 0.01 + max(r.cost for r in ok)  # one call of overshoot
    assert len(sim.log) == len(ok)  # nothing was sent after the cap was reached
    rep = e.last_report
    assert rep is not None and rep.stopped_by_budget and rep.not_run == len(not_run)
    assert "max_cost $0.0100 reached" in capsys.readouterr().out
    assert all("max_cost" in (r.error or "") for r in not_run)
    # not_run rows are not stored: a later run with a larger budget finishes the job
    e.max_cost = None
    assert all(r.status == "ok" for r in e.run(rs))
    assert len(sim.log) == 40


def test_config_errors_before_the_first_call(tmp_path, sim) -> None:
    sim.clear()
    e = Engine(tmp_path / "s.db", REG, progress=False, env={})
    with pytest.raises(ConfigError, match="unknown model 'gpt-9'"):
        e.run([Request("gpt-9", [{"role": "user", "content": "x"}])])
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY .*gpt-4\.1-2025-04-14"):
        e.run(reqs(["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001"], 1))
    with pytest.raises(ConfigError, match="limits for unknown provider"):
        Engine(tmp_path / "t.db", REG, limits={"openia": {"rpm": 5}}, env={})
    with pytest.raises(ConfigError, match="mode must be"):
        e.run(reqs(JUDGES, 1), mode="async")  # type: ignore[arg-type]
    assert sim.log == []


def test_run_works_inside_a_running_event_loop(tmp_path, sim) -> None:
    e = make_engine(tmp_path / "s.db", sim)

    async def notebook_cell() -> list:
        return e.run(reqs(JUDGES, 1, "jupyter"))  # what a Jupyter cell does

    out = asyncio.run(notebook_cell())
    assert [r.status for r in out] == ["ok"] * 3


def test_keys_never_reach_files_or_logs(tmp_path, sim, monkeypatch, caplog) -> None:
    secret = {"OPENAI_API_KEY": "sk-test-OPENAIsecretVALUE123",
              "ANTHROPIC_API_KEY": "-".join(["sk", "ant", "ANTHROPICsecretVALUE456"]),
              "GEMINI_API_KEY": "AIzaGEMINIsecretVALUE789",
              "DASHSCOPE_API_KEY": "sk-DASHSCOPEsecretVALUE000"}
    for k, v in secret.items():
        monkeypatch.setenv(k, v)
    caplog.set_level(logging.DEBUG)
    e = Engine(tmp_path / "run" / "store.db", REG, base_urls=sim.base_urls_for(REG),
               progress=True, poll_interval=0.02)
    out = e.run(reqs([*JUDGES, "qwen3-8b"], 2, "secret"), mode="batch")
    out += e.run(reqs(JUDGES, 2, "secret-sync"))
    assert all(r.completed for r in out)
    e.store.close()
    blobs = [p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert blobs
    text = caplog.text + repr(out) + json.dumps(e.last_report.__dict__, default=str)
    for v in secret.values():
        assert all(v.encode() not in b for b in blobs)
        assert v not in text


def test_sample_index_makes_a_reask_a_new_call(tmp_path, sim) -> None:
    """An unparseable verdict is re-asked with sample=1: a new key, a new call, a fresh answer."""
    sim.clear()
    text = "criteria_met please decide: sample test"
    sim.add_fault(Fault("no_verdict", match=text, times=1))
    first = Request(JUDGES[0], [{"role": "user", "content": text}], temperature=0, max_tokens=64)
    again = Request(JUDGES[0], [{"role": "user", "content": text}], temperature=0, max_tokens=64,
                    sample=1)
    e = make_engine(tmp_path / "s.db", sim)
    a = e.run([first])[0]
    assert "criteria_met" not in a.text  # the fault dropped the verdict
    assert e.run([first])[0].cached  # asking the same thing again is a cache hit ...
    b = e.run([again])[0]
    assert not b.cached and b.key != a.key  # ... a re-ask with sample=1 is a new call
    assert b.text != a.text
    assert len([x for x in sim.log if x["user"].startswith("criteria_met please")]) == 2
    with pytest.raises(ValueError, match="sample"):
        Request(JUDGES[0], [{"role": "user", "content": "x"}], sample=-1)
