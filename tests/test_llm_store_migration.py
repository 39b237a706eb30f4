"""A store written by the first layout (before the lean one) is migrated once when opened, and
keeps every result, batch (with its keys) and ledger line.

``data/llm_store_v1.sqlite`` was written by ``data/make_llm_store_v1.py`` with the pre-lean-layout
code (engine + simulator: ok, refused, failed results on the sync and batch paths, an empty
reply paid for and retried, an open batch, a long answer, hand-written rows);
``data/llm_store_v1.json`` is what that code's API read from it. Each test opens a copy.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest
from conftest import FREE

from hbpsych_utils.llm import Engine, Store, load_registry
from hbpsych_utils.llm.store import SCHEMA_VERSION, StoreError
from hbpsych_utils.llm.testing import Simulator

DATA = Path(__file__).resolve().parent / "data"
FIXTURE = DATA / "llm_store_v1.sqlite"
LISTING = json.loads((DATA / "llm_store_v1.json").read_text(encoding="utf-8"))
REG = load_registry()
LEDGER_COLS = ("ts", "run_id", "provider", "model", "key", "mode", "input_tokens",
               "output_tokens", "cost")


def _maker():
    """The fixture's own script, for the requests it sent (its main() is not run)."""
    spec = importlib.util.spec_from_file_location("make_llm_store_v1",
                                                  DATA / "make_llm_store_v1.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    dst = tmp_path / "llm_store.sqlite"
    shutil.copyfile(FIXTURE, dst)
    return dst


def test_the_fixture_is_a_first_layout_store(old_store: Path) -> None:
    with sqlite3.connect(old_store) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 0
        kinds = dict(db.execute("SELECT name, type FROM sqlite_master"))
        assert {kinds[t] for t in ("results", "ledger", "batch_items", "batches")} == {"table"}
        assert "result_rows" not in kinds
        assert db.execute("SELECT DISTINCT typeof(key) FROM results").fetchall() == [("text",)]
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == len(
            LISTING["results"])
    statuses = {r["status"] for r in LISTING["results"]}
    assert statuses == {"ok", "refused", "failed"}
    assert {b["status"] for b in LISTING["batches"]} == {"open", "collected"}
    assert any(line["key"] is None for line in LISTING["ledger"])
    empty_retried = [k for k in {line["key"] for line in LISTING["ledger"]}
                     if sum(line["key"] == k for line in LISTING["ledger"]) > 1]
    assert empty_retried  # the empty reply: paid twice, stored once


def test_every_result_is_read_back_as_the_first_layout_stored_it(old_store: Path) -> None:
    with Store(old_store) as s:
        got = s.get_many(LISTING["asked_keys"])
        assert sorted(got) == [r["key"] for r in LISTING["results"]]
        for want in LISTING["results"]:
            r = got[want["key"]]
            assert {f: getattr(r, f) for f in want} == want, want["key"]
            assert (r.cache_read_tokens, r.cache_write_tokens) == (0, 0)
        assert sorted(s.completed_keys(LISTING["asked_keys"])) == LISTING["completed_keys"]
        counts = {st: s.count(st) for st in ("ok", "refused", "failed")}
        assert counts | {"all": s.count()} == LISTING["counts"]


def test_batches_their_keys_and_the_ledger_are_kept(old_store: Path) -> None:
    with Store(old_store) as s:
        assert s.batches() == [{k: b[k] for k in ("batch_id", "provider", "model", "status",
                                                  "n_items")} for b in LISTING["batches"]]
        for b in LISTING["batches"]:
            assert s.batch_keys(b["batch_id"]) == b["keys"]
        assert [(b["batch_id"], b["info"]) for b in s.open_batches()] == [
            (b["batch_id"], b["info"]) for b in LISTING["batches"] if b["status"] == "open"]
        lines = s._db.execute(f"SELECT {', '.join(LEDGER_COLS)}, cache_read_tokens, "
                              "cache_write_tokens FROM ledger ORDER BY id").fetchall()
        assert [dict(zip(LEDGER_COLS, line[:-2], strict=True)) for line in lines] == \
            LISTING["ledger"]
        assert {line[-2:] for line in lines} == {(0, 0)}
        zero = {"cache_read_tokens": 0, "cache_write_tokens": 0}
        for run_id, want in [(None, LISTING["spend"]), *LISTING["spend_by_run"].items()]:
            spend = s.spend(run_id)
            assert spend == want | zero | {
                "by_model": [m | zero for m in want["by_model"]]}, run_id


def test_the_migration_runs_once_into_the_lean_layout(old_store: Path) -> None:
    Store(old_store).close()
    with sqlite3.connect(old_store) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        kinds = dict(db.execute("SELECT name, type FROM sqlite_master"))
        assert {kinds[t] for t in ("results", "ledger", "batch_items")} == {"view"}
        assert not {"v1_batches", "ix_results_status", "ix_ledger_run"} & set(kinds)
        hex_keys = [r["key"] for r in LISTING["results"] if not r["key"].startswith("legacy")]
        assert db.execute("SELECT COUNT(*) FROM result_rows WHERE typeof(key) = 'blob' "
                          "AND length(key) = 32").fetchone()[0] == len(hex_keys)
        configs = {json.dumps(r["config"], sort_keys=True) for r in LISTING["results"]
                   if r["config"]}
        assert {c for (c,) in db.execute("SELECT config FROM configs")} == configs
        long = max(LISTING["results"], key=lambda r: len(r["text"] or ""))
        (packed,) = db.execute("SELECT text FROM result_rows WHERE text_zlib = 1").fetchone()
        assert zlib.decompress(packed).decode() == long["text"]
        # ledger lines of stored results point at their row; the others keep their key
        assert db.execute("SELECT COUNT(*) FROM ledger_lines WHERE result IS NOT NULL "
                          "AND key IS NULL").fetchone()[0] == len(
            [x for x in LISTING["ledger"] if x["key"] in {r["key"] for r in LISTING["results"]}])
    before = old_store.read_bytes()
    with Store(old_store) as s:  # opening again changes nothing
        assert s.count() == len(LISTING["results"])
    assert old_store.read_bytes() == before


def test_a_migration_that_fails_leaves_the_old_store_untouched(old_store: Path) -> None:
    def dump() -> list[str]:
        with sqlite3.connect(old_store) as db:
            return [f"user_version {db.execute('PRAGMA user_version').fetchone()[0]}",
                    *db.iterdump()]

    with sqlite3.connect(old_store) as db:
        db.execute("UPDATE results SET status = 'done' WHERE key = 'legacy-failed'")
    before = dump()
    with pytest.raises(StoreError, match=r"llm_store\.sqlite: results row legacy-failed: "
                                         r"field status: 'done'"):
        Store(old_store)
    assert dump() == before  # every table and row as it was, still the first layout


@pytest.mark.slow
def test_the_engine_resumes_on_a_migrated_store(old_store: Path) -> None:
    """Completed answers are reused, the failed call is asked again, and the open batch is
    adopted (the simulator does not know it, so it is abandoned and its items re-sent)."""
    maker = _maker()
    stored = {r["key"]: r for r in LISTING["results"]}
    with Simulator() as sim:
        e = Engine(old_store, REG, base_urls=sim.base_urls_for(REG), progress=False, env={},
                   limits=FREE, poll_interval=0.02, backoff_base=0.01)
        out = e.run([*maker.sync_requests(), *maker.batch_requests()])
        assert [x["user"] for x in sim.log] == ["this always fails"]
        for r in out:
            if stored[r.key]["status"] != "failed":
                assert r.cached and r.text == stored[r.key]["text"]
            else:
                assert r.status == "ok" and not r.cached
        pending = maker.pending_requests()
        out = e.run(pending, mode="batch")
        assert maker.OPEN_BATCH_ID in e.last_report.batches  # type: ignore[union-attr]
        assert all(r.status == "ok" for r in out)
        assert {b["batch_id"]: b["status"] for b in e.store.batches()}[
            maker.OPEN_BATCH_ID] == "abandoned"
        assert e.store.open_batches() == []
        spend = e.store.spend()
        assert spend["calls"] == len(LISTING["ledger"]) + 1 + len(pending)
