"""A batch is paid for once: collecting it survives transient faults, a batch whose results
cannot be read stays open for the next run, and only what the provider reports as errored,
expired, cancelled or missing is asked again synchronously.

Every test runs the real SDK clients against the simulator's batch endpoints and checks three
things independently of the engine's own report: what the provider was asked (the simulator's
log: batch items processed, sync calls made), what was stored, and the ledger against a
hand computation at the registry's prices.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from conftest import FREE, JUDGE_BY_API

from hbpsych_utils.llm import Engine, Request, load_registry
from hbpsych_utils.llm.batch import COLLECT_ATTEMPTS
from hbpsych_utils.llm.cost import call_cost
from hbpsych_utils.llm.faults import COLLECT_FAULT_KINDS
from hbpsych_utils.llm.testing import Fault, Simulator, base_urls_for

REG = load_registry()
APIS = ("openai", "anthropic", "google")
N = 12


def engine(sim: Simulator, store: Path) -> Engine:
    return Engine(store, REG, base_urls=base_urls_for(sim.url, REG), progress=False, env={},
                  limits=FREE, poll_interval=0.02, backoff_base=0.01, backoff_max=0.05)


def requests(model: str, n: int = N, tag: str = "collect") -> list[Request]:
    return [Request(model, [{"role": "user", "content": f"{tag} {model} item {i}"}],
                    temperature=0, max_tokens=256) for i in range(n)]


def asked(sim: Simulator, model: str) -> Counter:
    """How often the provider processed a call of ``model``, by path (batch item / sync)."""
    return Counter(x["kind"] for x in sim.log if x["model"] == REG.model(model).api_model)


def ledger(store: Path) -> list[tuple[str, str, int, int, float]]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT key, mode, input_tokens, output_tokens, cost FROM ledger "
                          "ORDER BY key, mode").fetchall()


def assert_ledger_is_billed_items(store: Path, model: str) -> None:
    """One ledger line per stored answer, at the batch price for batch answers."""
    price = REG.model(model).price
    with sqlite3.connect(store) as db:
        stored = dict(((k, m), (i, o)) for k, m, i, o in db.execute(
            "SELECT key, mode, input_tokens, output_tokens FROM results WHERE status='ok'"))
    lines = ledger(store)
    assert {(k, m) for k, m, *_ in lines} == set(stored)
    for key, mode, tin, tout, cost in lines:
        assert (tin, tout) == stored[key, mode]
        assert cost == pytest.approx(call_cost(price, tin, tout, batch=mode == "batch"))


@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kind", COLLECT_FAULT_KINDS)
def test_a_transient_collect_failure_rebuys_nothing(tmp_path: Path, api: str, kind: str) -> None:
    model = JUDGE_BY_API[api]
    store = tmp_path / "store.db"
    with Simulator(faults=[Fault(kind, api=api, times=2)]) as sim:
        out = engine(sim, store).run(requests(model), mode="batch")
        fault_hits = sim.state.faults[0].hits
        calls = asked(sim, model)
    assert fault_hits == 2, "the fault never hit the collect step it names"
    assert [r.status for r in out] == ["ok"] * N
    assert all(r.mode == "batch" for r in out)
    assert calls == {"batch": N}  # every item processed once, none re-sent synchronously
    assert_ledger_is_billed_items(store, model)


@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
def test_unreadable_results_stay_open_and_the_next_run_collects_them(
    tmp_path: Path, api: str
) -> None:
    model = JUDGE_BY_API[api]
    store = tmp_path / "store.db"
    fault = Fault("batch_results_error", api=api)  # every read of the results fails
    with Simulator(faults=[fault]) as sim:
        e = engine(sim, store)
        first = e.run(requests(model), mode="batch")
        assert [r.status for r in first] == ["not_run"] * N
        assert e.last_report.uncollected == N and e.last_report.fallback == 0
        assert "stays open" in first[0].error
        assert fault.hits >= COLLECT_ATTEMPTS
        assert ledger(store) == []  # nothing stored yet, nothing paid twice later
        batches = set(sim.state.batches)

        sim.state.faults.clear()
        second = engine(sim, store).run(requests(model), mode="batch")
        assert set(sim.state.batches) == batches  # adopted, not resubmitted
        calls = asked(sim, model)
    assert [r.status for r in second] == ["ok"] * N and all(r.mode == "batch" for r in second)
    assert calls == {"batch": N}
    assert_ledger_is_billed_items(store, model)


@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("end", ["batch_expired", "batch_cancelled", "batch_failed"])
def test_a_batch_that_ends_badly_resends_only_what_it_did_not_answer(
    tmp_path: Path, api: str, end: str
) -> None:
    model = JUDGE_BY_API[api]
    store = tmp_path / "store.db"
    with Simulator(faults=[Fault(end, api=api, times=1)]) as sim:
        out = engine(sim, store).run(requests(model), mode="batch")
        calls = asked(sim, model)
    assert [r.status for r in out] == ["ok"] * N
    by_mode = Counter(r.mode for r in out)
    answered_in_batch = 0 if (end == "batch_failed" or api == "google") else (N + 1) // 2
    if api == "anthropic" and end == "batch_failed":  # no such state: the batch completes
        answered_in_batch = N
    assert by_mode["batch"] == answered_in_batch
    assert calls["sync"] == N - answered_in_batch  # only the unanswered items are re-sent
    assert calls["batch"] == answered_in_batch
    assert_ledger_is_billed_items(store, model)


@pytest.mark.slow
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_items_reported_missing_or_errored_go_sync_and_the_rest_stay_batch(
    tmp_path: Path, api: str
) -> None:
    """Anthropic writes a line for every request (an unanswered one is ``expired``), OpenAI an
    error-file line with ``response: null``: both are asked again, nothing else is."""
    model = JUDGE_BY_API[api]
    store = tmp_path / "store.db"
    faults = [Fault("batch_item_missing", match="item 3", api=api, times=1),
              Fault("batch_item_error", match="item 5", api=api, times=1)]
    with Simulator(faults=faults) as sim:
        out = engine(sim, store).run(requests(model), mode="batch")
        sync_asked = [x["user"] for x in sim.log if x["kind"] == "sync"]
    assert [r.status for r in out] == ["ok"] * N
    assert sorted(sync_asked) == sorted(f"collect {model} item {i}" for i in (3, 5))
    assert_ledger_is_billed_items(store, model)


# --- the simulator's batch objects are what the SDKs' own types accept, strictly -------------


def _drive_openai_batch(sim: Simulator, end: str | None) -> tuple[dict, list[dict]]:
    import httpx

    sim.state.faults[:] = [Fault(end, api="openai", times=1)] if end else []
    base = f"{sim.url}/v1"
    body = {"model": REG.model(JUDGE_BY_API["openai"]).api_model, "max_tokens": 64,
            "messages": [{"role": "user", "content": "hello"}]}
    lines = "".join(
        f'{{"custom_id": "k{i}", "method": "POST", "url": "/v1/chat/completions", '
        f'"body": {json.dumps(body)}}}\n' for i in range(4))
    with httpx.Client(timeout=10) as http:
        f = http.post(f"{base}/files", data={"purpose": "batch"},
                      files={"file": ("b.jsonl", lines.encode())}).json()
        b = http.post(f"{base}/batches", json={"input_file_id": f["id"],
                                              "endpoint": "/v1/chat/completions",
                                              "completion_window": "24h"}).json()
        obj = http.get(f"{base}/batches/{b['id']}").json()
        out = []
        for fid in (obj.get("output_file_id"), obj.get("error_file_id")):
            if fid:
                out += [json.loads(x) for x in
                        http.get(f"{base}/files/{fid}/content").text.splitlines()]
    return obj, out


@pytest.mark.slow
@pytest.mark.parametrize("end", [None, "batch_expired", "batch_cancelled", "batch_failed"])
def test_openai_batch_objects_validate_against_the_sdk(end: str | None) -> None:
    from openai.types import Batch
    from openai.types.chat import ChatCompletion

    with Simulator() as sim:
        obj, lines = _drive_openai_batch(sim, end)
    batch = Batch.model_validate(obj)
    assert batch.status == {None: "completed", "batch_expired": "expired",
                            "batch_cancelled": "cancelled", "batch_failed": "failed"}[end]
    counts = batch.request_counts
    assert counts is not None and counts.completed + counts.failed == counts.total
    assert len(lines) == counts.total
    for line in lines:
        if line["response"] is not None:
            ChatCompletion.model_validate(line["response"]["body"])
        else:  # a request the batch never ran
            assert line["error"]["code"] in ("batch_expired", "batch_cancelled")


@pytest.mark.slow
@pytest.mark.parametrize("end", [None, "batch_expired", "batch_cancelled"])
def test_anthropic_batch_objects_validate_against_the_sdk(end: str | None) -> None:
    import httpx
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

    model = REG.model(JUDGE_BY_API["anthropic"]).api_model
    faults = [Fault("batch_item_error", match="item 1", api="anthropic")]
    if end:
        faults.append(Fault(end, api="anthropic", times=1))
    with Simulator(faults=faults) as sim, httpx.Client(timeout=10) as http:
        base = f"{sim.url}/v1/messages/batches"
        reqs = [{"custom_id": f"k{i}", "params": {
            "model": model, "max_tokens": 64,
            "messages": [{"role": "user", "content": f"item {i}"}]}} for i in range(4)]
        b = http.post(base, json={"requests": reqs}).json()
        obj = http.get(f"{base}/{b['id']}").json()
        lines = [json.loads(x) for x in http.get(f"{base}/{b['id']}/results").text.splitlines()]
    batch = MessageBatch.model_validate(obj)
    assert batch.processing_status == "ended"
    assert len(lines) == 4 == sum(batch.request_counts.model_dump().values())
    kinds = Counter(MessageBatchIndividualResponse.model_validate(x).result.type for x in lines)
    assert sum(kinds.values()) == 4 and kinds["errored"] >= (0 if end else 1)
    if end:
        gone = "expired" if end == "batch_expired" else "canceled"
        assert kinds[gone] == 2


@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
def test_raw_line_separators_in_answers_leave_results_readable(tmp_path: Path, api: str) -> None:
    # The results hold each answer raw (JSON allows U+2028 and U+0085 inside a string): read
    # line by line on "\n" only, every item is collected from the batch, none is asked again.
    model, value = JUDGE_BY_API[api], "one\u2028two\u0085three"
    schema = {"type": "object", "properties": {"answer": {"const": value}},
              "required": ["answer"], "additionalProperties": False}
    reqs = [Request(model, [{"role": "user", "content": f"separators\u2028inside {i}"}],
                    temperature=0, max_tokens=256, response_schema=schema) for i in range(4)]
    with Simulator() as sim:
        out = engine(sim, tmp_path / "store.db").run(reqs, mode="batch")
        calls = asked(sim, model)
    assert [(r.status, r.mode) for r in out] == [("ok", "batch")] * 4, out[0].error
    assert all(json.loads(r.text or "")["answer"] == value for r in out)
    assert calls == {"batch": 4}


@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
def test_a_crash_before_the_collected_mark_books_nothing_twice(tmp_path: Path, api: str) -> None:
    # A batch's results (its answers and the empty replies it was billed for) and its mark as
    # collected are one transaction. The crash is injected where a killed run would stop: the
    # mark fails after the results are written. The batch stays open with nothing booked, and
    # the next run collects it and books every billed reply once.
    store, reqs = tmp_path / "store.db", requests(JUDGE_BY_API[api])
    crash = ("CREATE TRIGGER crash_at_mark BEFORE UPDATE OF status ON batches WHEN "
             "NEW.status = 'collected' BEGIN SELECT RAISE(ABORT, 'crash'); END")
    with Simulator(faults=[Fault("empty", api=api, times=4)]) as sim:
        first = engine(sim, store)
        with sqlite3.connect(store) as db:
            db.execute(crash)
        with pytest.raises(sqlite3.DatabaseError, match="crash"):
            first.run(reqs, mode="batch")
        first.store.close()
        with sqlite3.connect(store) as db:
            db.execute("DROP TRIGGER crash_at_mark")
        again = engine(sim, store).run(reqs, mode="batch")
        served_empty = [x for x in sim.log if x["fault"] == "empty"]
    assert [r.status for r in again] == ["ok"] * N
    assert len(served_empty) == 4  # billed once, in the one batch
    empty_keys = {r.key for r in again if r.mode == "sync"}
    lines = ledger(store)
    assert len(empty_keys) == 4
    assert Counter(m for _, m, *_ in lines) == {"batch": N, "sync": 4}
    assert Counter(k for k, m, *_ in lines if m == "batch" and k in empty_keys) == {
        k: 1 for k in empty_keys}
