"""Benchmarks of the LLM engine against the provider simulator (run in a child process).

    .venv/bin/python benchmarks/engine.py                  # small defaults, a few minutes
    .venv/bin/python benchmarks/engine.py --overhead-n 20000 --rl-n 2000 --rl-rpm 600 \
        --resume-n 10000 --scale-n 1000000                 # the full sizes

- overhead: zero-latency simulator; N calls through the engine (store writes included) vs the
  same calls from a bare async httpx loop with the same concurrency.
- ratelimit: simulator limited to RPM with 0.5 s latency; N calls through the engine vs a
  120-thread pool with no limiter and 2^n back-off (the reference harness's approach).
- resume: a finished N-call job re-run: requests made (must be 0) and wall time.
- scale: N judge requests through the batch path (plan, chunk, submit, poll, collect, store):
  `results_per_s` of the run step and `bytes_per_result` (the store on disk after close,
  WAL and shared-memory files included, divided by the stored results).
- faults: N grader requests over the three judges' providers on the batch path, under a fault
  schedule on every endpoint (sync calls, batch items, batch status and results reads, a batch
  that expires), against a fault-free run of the same requests: answers lost, answers that
  differ, completed answers asked again, and batch answers the provider gave that were bought
  again synchronously (all must be 0 after at most one re-run).
Prints a JSON summary and a Markdown table (paste into docs/engine.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hbpsych_utils.llm import Engine, Request, load_registry
from hbpsych_utils.llm.faults import COLLECT_FAULT_KINDS
from hbpsych_utils.llm.providers import adapter_class
from hbpsych_utils.llm.testing import SimulatorProcess

REG = load_registry()
# The engine imports a provider's SDK on its first request. Import them all here, once, so the
# timed runs measure calls (as they did when the engine imported every SDK up front) and not
# the one-time import of openai / anthropic / google-genai (about a second together).
for _kind in sorted({p.kind for p in REG.providers.values()}):
    adapter_class(_kind)
MODEL = "gpt-4.1-2025-04-14"
JUDGES = ["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001", "gemini-2.5-flash"]
GRADER_TEXT = ("Your job is to look at a conversation and a rubric item, and score the last turn "
               "(i.e., the last assistant response) against it. Return a json object with "
               '"explanation" and "criteria_met".\n')


def free(concurrency: int, rpm: float | None = None) -> dict[str, dict]:
    return {p: {"concurrency": concurrency, "rpm": rpm, "tpm": None} for p in REG.providers}


def reqs(n: int, prefix: str, models: list[str] | None = None) -> list[Request]:
    models = models or [MODEL]
    return [Request(models[i % len(models)],
                    [{"role": "user", "content": f"{GRADER_TEXT}[{i % 7 - 2}] {prefix} item {i}"}],
                    temperature=0, max_tokens=2048) for i in range(n)]


def bench_overhead(n: int, concurrency: int, workdir: Path) -> dict:
    with SimulatorProcess(keep_log=False) as sim:
        rs = reqs(n, "overhead")
        e = Engine(workdir / "overhead.db", REG, base_urls=sim.base_urls_for(REG),
                   limits=free(concurrency), progress=False, env={})
        t0 = time.perf_counter()
        out = e.run(rs)
        t_engine = time.perf_counter() - t0
        assert all(r.status == "ok" for r in out)
        bodies = [e.resolve(r).body for r in reqs(n, "overhead-bare")]

        async def bare() -> None:
            sem = asyncio.Semaphore(concurrency)
            limits = httpx.Limits(max_connections=concurrency)
            async with httpx.AsyncClient(base_url=sim.base_urls["openai"], limits=limits,
                                         headers={"authorization": "Bearer x"}) as c:
                async def one(b: dict) -> None:
                    async with sem:
                        r = await c.post("/chat/completions", json=b)
                        r.raise_for_status()
                        r.json()

                await asyncio.gather(*[one(b) for b in bodies])

        t0 = time.perf_counter()
        asyncio.run(bare())
        t_bare = time.perf_counter() - t0
    return {"n": n, "concurrency": concurrency, "engine_calls_per_s": round(n / t_engine, 1),
            "bare_httpx_calls_per_s": round(n / t_bare, 1),
            "ratio_engine_over_bare": round(t_bare / t_engine, 3)}


def bench_ratelimit(n: int, rpm: float, latency: float, workdir: Path) -> dict:
    floor = n / (rpm / 60.0)
    with SimulatorProcess(rpm=rpm, latency=latency, keep_log=False) as sim:
        e = Engine(workdir / "rl.db", REG, base_urls=sim.base_urls_for(REG),
                   limits=free(64, rpm), progress=False, env={}, backoff_base=1.0)
        t0 = time.perf_counter()
        out = e.run(reqs(n, "ratelimit"))
        t_engine = time.perf_counter() - t0
        counts = sim.fetch_log()["counts"]
        engine_429 = counts.get("openai:429", 0)
        assert all(r.status == "ok" for r in out), "engine left failures"
        sim.clear()
        bodies = [e.resolve(r).body for r in reqs(n, "ratelimit-pool")]

        def pooled(body: dict) -> bool:
            with httpx.Client(base_url=sim.base_urls["openai"], timeout=120) as c:
                for attempt in range(10):
                    r = c.post("/chat/completions", json=body)
                    if r.status_code == 200:
                        return True
                    time.sleep(2 ** attempt)
            return False

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=120) as pool:
            ok = list(pool.map(pooled, bodies))
        t_pool = time.perf_counter() - t0
        pool_429 = sim.fetch_log()["counts"].get("openai:429", 0)
    return {"n": n, "rpm": rpm, "latency_s": latency, "floor_s": round(floor, 1),
            "engine_wall_s": round(t_engine, 1),
            "engine_share_of_limit": round(floor / t_engine, 3), "engine_429": engine_429,
            "pool120_wall_s": round(t_pool, 1), "pool120_429": pool_429,
            "pool120_failed": ok.count(False), "speedup_vs_pool120": round(t_pool / t_engine, 2)}


def bench_resume(n: int, workdir: Path) -> dict:
    with SimulatorProcess(keep_log=False) as sim:
        e = Engine(workdir / "resume.db", REG, base_urls=sim.base_urls_for(REG),
                   limits=free(64), progress=False, env={})
        rs = reqs(n, "resume", JUDGES)
        t0 = time.perf_counter()
        e.run(rs)
        t_first = time.perf_counter() - t0
        before = sum(sim.fetch_log()["counts"].values())
        t0 = time.perf_counter()
        out = e.run(rs)
        t_again = time.perf_counter() - t0
        after = sum(sim.fetch_log()["counts"].values())
    assert all(r.cached for r in out)
    return {"n": n, "first_run_s": round(t_first, 2), "rerun_s": round(t_again, 2),
            "rerun_requests": after - before}


def bench_scale(n: int, workdir: Path) -> dict:
    with SimulatorProcess(keep_log=False) as sim:
        db = workdir / "scale.db"
        e = Engine(db, REG, base_urls=sim.base_urls_for(REG), limits=free(64),
                   progress=False, env={}, poll_interval=0.5)
        t0 = time.perf_counter()
        rs = reqs(n, "scale", JUDGES)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        plan = e.plan(rs, mode="batch")
        t_plan = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = e.run(rs, mode="batch")
        t_run = time.perf_counter() - t0
        ok = sum(r.status == "ok" for r in out)
        stored = e.store.count()
        e.store.close()
        # the whole store on disk once closed: main file, WAL and shared-memory index
        size = sum(p.stat().st_size for p in workdir.glob("scale.db*"))
        rep = e.last_report
    return {"n": n, "build_requests_s": round(t_build, 1), "plan_s": round(t_plan, 1),
            "plan_est_cost_usd": round(plan.est_cost, 2), "run_s": round(t_run, 1),
            "results_per_s": round(n / t_run, 1),
            "ok": ok, "batches": len(rep.batches) if rep else None,
            "fallback": rep.fallback if rep else None, "store_mb": round(size / 2**20, 1),
            "stored_results": stored, "bytes_per_result": round(size / max(stored, 1), 1)}


def fault_schedule() -> list[dict]:
    """Every endpoint of every judge provider fails some of the time; nothing fails for good."""
    per_api = [("http_500", 15), ("http_503", 15), ("reset", 8), ("rate_limit", 8),
               ("truncated", 5), ("malformed", 5), ("empty", 5), ("timeout", 2),
               ("batch_item_error", 10), ("batch_item_missing", 10),
               *((k, 2) for k in COLLECT_FAULT_KINDS), ("batch_expired", 1)]
    return [{"kind": k, "api": api, "times": t, "retry_after": 0.05}
            for api in ("openai", "anthropic", "google") for k, t in per_api]


def _answers(db: Path, keys: list[str]) -> dict[str, str | None]:
    """The stored answers of ``keys`` (completed ones only), read through the store's API."""
    from hbpsych_utils.llm.store import Store

    with Store(db) as store:
        return {k: r.text for k, r in store.get_many(keys, completed_only=True).items()}


def bench_faults(n: int, workdir: Path) -> dict:
    import hashlib

    rs = reqs(n, "faults", JUDGES)
    opts = {"batch_latency": 0.2, "hang": 3.0}
    engine_opts = {"limits": free(32), "progress": False, "env": {}, "poll_interval": 0.1,
                   "backoff_base": 0.05, "backoff_max": 0.5, "timeout": 2.0}
    with SimulatorProcess(keep_log=False, **opts) as sim:
        clean = Engine(workdir / "clean.db", REG, base_urls=sim.base_urls_for(REG),
                       **engine_opts)
        keys = [r.key for r in clean.run(rs, mode="batch")]
        reference = _answers(workdir / "clean.db", keys)
    sha = dict(zip(keys, (hashlib.sha256(r.messages[-1].content.encode()).hexdigest()
                          for r in rs), strict=True))
    with SimulatorProcess(keep_log=True, faults=fault_schedule(), **opts) as sim:
        e = Engine(workdir / "faults.db", REG, base_urls=sim.base_urls_for(REG), **engine_opts)
        t0 = time.perf_counter()
        e.run(rs, mode="batch")
        first = _answers(workdir / "faults.db", keys)
        rerun_at, reruns = float("inf"), 0
        if len(first) < len(rs):  # left for the next run (e.g. a batch still uncollected)
            rerun_at, reruns = time.time(), 1
            e.run(rs, mode="batch")
        t_run = time.perf_counter() - t0
        final = _answers(workdir / "faults.db", keys)
        log = sim.fetch_log()
    entries = log["log"]
    answered_in_batch = {x["user_sha256"] for x in entries
                         if x["kind"] == "batch" and x["status"] == 200 and x["fault"] is None}
    sync_calls = [x["user_sha256"] for x in entries if x["kind"] == "sync"]
    completed_first = {sha[k] for k in first}
    kinds = {f["kind"] for f in fault_schedule()}
    return {
        "n": n, "reruns": reruns, "run_s": round(t_run, 1),
        "faults_injected": sum(x["fault"] is not None for x in entries) + sum(
            v for k, v in log["counts"].items() if k.split(":", 1)[1] in kinds),
        "lost": sum(k not in final for k in reference),
        "differing": sum(k in final and final[k] != t for k, t in reference.items()),
        "completed_resent": sum(x["user_sha256"] in completed_first for x in entries
                                if x["t"] >= rerun_at),
        "batch_items_resent_sync": sum(s in answered_in_batch for s in sync_calls),
        "sync_calls": len(sync_calls), "batches": len(e.store.batches()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--overhead-n", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rl-n", type=int, default=600)
    ap.add_argument("--rl-rpm", type=float, default=600)
    ap.add_argument("--rl-latency", type=float, default=0.5)
    ap.add_argument("--resume-n", type=int, default=3000)
    ap.add_argument("--scale-n", type=int, default=30000)
    ap.add_argument("--faults-n", type=int, default=1500)
    ap.add_argument("--only", nargs="*",
                    default=["overhead", "ratelimit", "resume", "scale", "faults"])
    ap.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    a = ap.parse_args()
    res: dict = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as d:
        w = Path(d)
        if "overhead" in a.only:
            res["overhead"] = bench_overhead(a.overhead_n, a.concurrency, w)
            print(json.dumps(res["overhead"]), flush=True)
        if "ratelimit" in a.only:
            res["ratelimit"] = bench_ratelimit(a.rl_n, a.rl_rpm, a.rl_latency, w)
            print(json.dumps(res["ratelimit"]), flush=True)
        if "resume" in a.only:
            res["resume"] = bench_resume(a.resume_n, w)
            print(json.dumps(res["resume"]), flush=True)
        if "scale" in a.only:
            res["scale"] = bench_scale(a.scale_n, w)
            print(json.dumps(res["scale"]), flush=True)
        if "faults" in a.only:
            res["faults"] = bench_faults(a.faults_n, w)
            print(json.dumps(res["faults"]), flush=True)
    print(json.dumps(res, indent=2))
    if a.out:
        a.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
