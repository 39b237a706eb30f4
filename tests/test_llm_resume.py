"""kill -9 of a run mid-way, then a re-run: nothing completed is lost or requested twice."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest
from conftest import FREE, JUDGE_BY_API

from hbpsych_utils.llm import Engine, Request, call_cost, load_registry
from hbpsych_utils.llm.testing import Simulator

REG = load_registry()
MODELS = list(JUDGE_BY_API.values())  # one model per provider API
N = 40  # per model

CHILD = """
import sys
from hbpsych_utils.llm import Engine, Request, load_registry
from hbpsych_utils.llm.testing import base_urls_for
url, store, mode = sys.argv[1:4]
reg = load_registry()
models = {models!r}
reqs = [Request(m, [{{"role": "user", "content": f"kill {{m}} {{i}}"}}], temperature=0,
                max_tokens=512) for m in models for i in range({n})]
Engine(store, reg, base_urls=base_urls_for(url, reg), progress=False, env={{}},
       limits={{p: {{"concurrency": 1, "rpm": None, "tpm": None}} for p in reg.providers}},
       poll_interval=0.05).run(reqs, mode=mode)
"""


def requests() -> list[Request]:
    return [Request(m, [{"role": "user", "content": f"kill {m} {i}"}], temperature=0,
                    max_tokens=512) for m in MODELS for i in range(N)]


def completed(store: Path) -> dict[str, str]:
    if not store.exists():
        return {}
    try:
        with sqlite3.connect(store) as db:  # a long text is stored zlib-compressed
            rows = db.execute("SELECT key, text, text_zlib FROM results WHERE status = 'ok'")
            return {k: zlib.decompress(t).decode() if z else t for k, t, z in rows}
    except sqlite3.OperationalError:  # the child has not created the tables yet
        return {}


def open_batches(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store) as db:
            return db.execute("SELECT COUNT(*) FROM batches WHERE status='open'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def start_child(url: str, store: Path, mode: str) -> subprocess.Popen:
    code = CHILD.format(models=MODELS, n=N)
    return subprocess.Popen([sys.executable, "-c", code, url, str(store), mode],
                            cwd=Path(__file__).resolve().parent.parent)


def wait_for(cond, proc: subprocess.Popen, limit: float = 60.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert proc.poll() is None, "the child run ended before it could be killed"
        assert time.monotonic() - t0 < limit, "the child run made no progress"
        time.sleep(0.02)


@pytest.mark.slow
def test_kill_9_during_a_sync_run_then_resume(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with Simulator(latency=0.05) as sim:
        child = start_child(sim.url, store, "sync")
        wait_for(lambda: len(completed(store)) >= 30, child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        before = completed(store)
        assert 30 <= len(before) < len(MODELS) * N
        n_log = len(sim.log)
        e = Engine(store, REG, base_urls=sim.base_urls_for(REG), progress=False, env={},
                   limits=FREE)
        keys = {e.resolve(r).key: r.messages[0].content for r in requests()}
        out = e.run(requests())
        after_kill = sim.log[n_log:]
        # no completed key requested again
        asked_again = {x["user"] for x in after_kill}
        assert not asked_again & {keys[k] for k in before}
        # nothing completed lost, nothing changed
        assert all(out_r.status == "ok" for out_r in out)
        final = {r.key: r.text for r in out}
        assert all(final[k] == t for k, t in before.items())
        # identical to an uninterrupted run on a fresh store
        fresh = Engine(tmp_path / "fresh.db", REG, base_urls=sim.base_urls_for(REG),
                       progress=False, env={}, limits=FREE).run(requests())
        assert [r.text for r in fresh] == [r.text for r in out]


@pytest.mark.slow
def test_kill_9_while_batches_are_open_then_resume_polls_them(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with Simulator(batch_latency=3600) as sim:
        child = start_child(sim.url, store, "batch")
        wait_for(lambda: open_batches(store) == len(MODELS), child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        submitted = dict(sim.state.batches)
        assert len(submitted) == len(MODELS)
        sim.state.batch_latency = 0.0  # the provider finishes the batches meanwhile
        e = Engine(store, REG, base_urls=sim.base_urls_for(REG), progress=False, env={},
                   poll_interval=0.02, limits=FREE)
        out = e.run(requests(), mode="batch")
        assert set(sim.state.batches) == set(submitted)  # polled, not resubmitted
        assert all(r.status == "ok" and r.mode == "batch" for r in out)
        items = Counter(x["model"] for x in sim.log if x["kind"] == "batch")
        assert items == {REG.model(m).api_model: N for m in MODELS}  # each item processed once
        assert not [x for x in sim.log if x["kind"] == "sync"]
        assert e.store.open_batches() == []
        # Paid once per item, at the batch price, whatever the run that collected it.
        with sqlite3.connect(store) as db:
            ledger = db.execute("SELECT model, input_tokens, output_tokens, cost, mode "
                                "FROM ledger").fetchall()
        for m in MODELS:
            rows = [r for r in ledger if r[0] == m]
            assert len(rows) == N and {r[4] for r in rows} == {"batch"}
            assert sum(r[3] for r in rows) == pytest.approx(
                sum(call_cost(REG.model(m).price, r[1], r[2], batch=True) for r in rows))
        sync = Engine(tmp_path / "sync.db", REG, base_urls=sim.base_urls_for(REG),
                      progress=False, env={}, limits=FREE).run(requests())
        assert [r.text for r in sync] == [r.text for r in out]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_second_run_of_a_finished_job_makes_no_request(tmp_path: Path, mode: str) -> None:
    with Simulator() as sim:
        e = Engine(tmp_path / "s.db", REG, base_urls=sim.base_urls_for(REG), progress=False,
                   env={}, poll_interval=0.02, limits=FREE)
        e.run(requests(), mode=mode)  # type: ignore[arg-type]
        n = len(sim.log)
        e.run(requests(), mode=mode)  # type: ignore[arg-type]
        assert len(sim.log) == n


@pytest.mark.slow
@pytest.mark.notebook
def test_a_chapter_run_again_says_what_its_earlier_attempts_paid(
        tmp_path: Path, mirror: Path, smoke_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two attempts of one smoke run folder: the first stopped by a spend cap part-way through
    06 and 07 (and failing at 08, which has no scores; 15 may run beside them and pay too),
    the second without it. The second attempt's ``spend_usd`` is what it paid;
    ``spend_earlier_attempts_usd`` is what the first paid for the answers it reused (the
    store's ledger for the chapter's tag after the first attempt); together they are the
    store's ledger for the tag, to the micro-dollar, and the chapter says so.

    Both attempts run the chapters up to 08 and 15 (the profile's notebooks list): the
    chapters whose spend is asserted and the one that fails; the others would only run twice
    in sync mode, paying nothing this test reads. The folder starts from a copy of the session
    smoke run's 01-05, which make no model call and read nothing of ``llm`` (up to date here,
    as the first attempt says), and no store."""
    from conftest import FAKE_KEYS, copy_stages

    from hbpsych_utils import runner
    from hbpsych_utils.llm import Store
    from hbpsych_utils.pipeline import graph

    monkeypatch.setenv("HBPSYCH_MIRROR", str(mirror))
    for name, value in FAKE_KEYS.items():
        monkeypatch.setenv(name, value)
    run = tmp_path / "smoke"

    def metrics(stage: str) -> dict:
        return json.loads((run / stage / "metrics.json").read_text(encoding="utf-8"))

    def ledger() -> dict[str, float]:
        by_tag: dict[str, float] = {}
        for row in Store(run / "llm_store.sqlite").spend_by_tag():
            part = row["tag"].split(":")[0]
            by_tag[part] = by_tag.get(part, 0.0) + row["cost"]
        return by_tag

    construction = [graph.CORPUS, graph.SCREENING, graph.REVIEW_ROUND1, graph.RECALL,
                    graph.SUBSET]
    chapters = [*construction, graph.GENERATION, graph.GRADING, graph.SCORES,
                graph.JUDGE_ACCURACY]
    copy_stages(smoke_run, run, construction)
    first_attempt = runner.run_profile("smoke", outputs_root=tmp_path, echo=lambda _: None,
                                       overrides={"notebooks": chapters, "llm.mode": "sync",
                                                  "llm.max_cost": 0.005})
    paid = ledger()
    first = {s: metrics(s)["spend_usd"] for s in (graph.GENERATION, graph.GRADING)}
    assert metrics(graph.GENERATION)["stopped_by_budget"] and all(first.values())
    assert first[graph.GENERATION] == pytest.approx(paid["generate"], abs=2e-6)
    ran = {n["notebook"]: n["status"] for n in first_attempt.notebooks}
    assert set(ran) == set(chapters) - set(construction)
    assert [name for name, status in ran.items() if status != "ok"] == [graph.SCORES]
    again = runner.run_profile("smoke", outputs_root=tmp_path, echo=lambda _: None,
                               overrides={"notebooks": chapters, "llm.mode": "sync"})
    assert again.ok
    by_tag = ledger()
    for stage, tag in ((graph.GENERATION, "generate"), (graph.GRADING, "grade"),
                       (graph.JUDGE_ACCURACY, "meta_eval")):
        m = metrics(stage)
        earlier = paid.get(tag, 0.0)
        assert m["spend_earlier_attempts_usd"] == pytest.approx(earlier, abs=2e-6), stage
        assert m["spend_usd"] + m["spend_earlier_attempts_usd"] == pytest.approx(
            by_tag[tag], abs=5e-6), stage
    chapter = (run / "notebooks" / f"{graph.GRADING}.ipynb").read_text(encoding="utf-8")
    assert "This attempt of the grading paid" in chapter
    assert "earlier attempts in this run folder paid" in chapter
