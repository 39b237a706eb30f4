"""Request keys, the model registry's decoding quirks and the SQLite store."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from pathlib import Path

import pytest
from lazy_modules import SDK_GROUP

from hbpsych_utils.llm import ConfigError, Engine, Request, Result, Store, load_registry
from hbpsych_utils.llm.models import registry_from_dict, resolve_decoding
from hbpsych_utils.llm.requests import request_key
from hbpsych_utils.llm.store import SCHEMA_VERSION, SpendLine

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
        return resolve_decoding(s, REG.providers[s.provider].kind, t, cap, seed=None)

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


@SDK_GROUP
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


@SDK_GROUP
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
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        # nothing queries rows by status or model: the key's own index is the only one
        assert [r[1] for r in db.execute("PRAGMA index_list('result_rows')")] == [
            "sqlite_autoindex_result_rows_1"]


def _judged(e: Engine, prompt: str, **kw) -> Result:
    it = e.resolve(Request("gpt-4.1-2025-04-14", [{"role": "user", "content": prompt}],
                           temperature=0, max_tokens=100))
    fields = {"text": '{"criteria_met": true}', "config": dict(it.decoding), **kw}
    return Result(key=it.key, model=it.spec.name, provider=it.provider.name, status="ok",
                  **fields)


@SDK_GROUP
def test_store_layout_keys_names_configs_and_long_texts(tmp_path: Path) -> None:
    e = engine(tmp_path)
    long_text = "The reply names the crisis line and asks about safety. " * 20
    rows = [_judged(e, "a", input_tokens=30, output_tokens=9, cost=0.25, latency=1.5,
                    stop_reason="stop", mode="batch", tag="grade", attempts=2,
                    cache_read_tokens=24, cache_write_tokens=6),
            _judged(e, "b", text=long_text, stop_reason="stop", tag="grade"),
            _judged(e, "c", config={"temperature": 1.0})]
    e.store.put_many(rows, run_id="run-1")
    for want in rows:
        got = e.store.get(want.key)
        assert got is not None and got.cached
        assert {f: v for f, v in vars(got).items() if f not in ("cached", "metadata")} == {
            f: v for f, v in vars(want).items() if f not in ("cached", "metadata")}
    got = e.store.get(rows[0].key)
    got.config["temperature"] = 9  # type: ignore[union-attr]
    assert e.store.get(rows[0].key).config == rows[0].config  # type: ignore[union-attr]
    db = e.store._db
    # keys as their 32 bytes, names and configs once each, the long text compressed
    assert db.execute("SELECT DISTINCT typeof(key), length(key) FROM result_rows").fetchall() \
        == [("blob", 32)]
    assert db.execute("SELECT COUNT(*) FROM configs").fetchone()[0] == 2
    assert db.execute("SELECT COUNT(*) FROM names WHERE name = 'gpt-4.1-2025-04-14'"
                      ).fetchone()[0] == 1
    zipped = dict(db.execute("SELECT key, text_zlib FROM result_rows"))
    assert sorted(zipped.values()) == [0, 0, 1]
    (packed,) = db.execute("SELECT text FROM result_rows WHERE text_zlib = 1").fetchone()
    assert zlib.decompress(packed).decode() == long_text and len(packed) < len(long_text) / 2
    # the views show the first layout's columns for plain SQL
    assert db.execute("SELECT key, provider, model, status, tag, mode, config FROM results "
                      "WHERE key = ?", (rows[0].key,)).fetchone() == (
        rows[0].key, "openai", "gpt-4.1-2025-04-14", "ok", "grade", "batch",
        json.dumps(rows[0].config, sort_keys=True))
    assert db.execute("SELECT run_id, key, cache_read_tokens, cache_write_tokens, cost "
                      "FROM ledger").fetchall() == [("run-1", rows[0].key, 24, 6, 0.25)]


def test_store_keeps_keys_that_are_not_hex_as_text(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    upper = hashlib.sha256(b"x").hexdigest().upper()
    keys = ["k1", upper, upper.lower(), "é" * 64]
    s.put_many([_res(k, "ok", f"text {i}") for i, k in enumerate(keys)])
    got = s.get_many([*keys, "missing"])
    assert {k: r.text for k, r in got.items()} == {k: f"text {i}" for i, k in enumerate(keys)}
    assert s.completed_keys(keys) == set(keys)
    types = {k.hex() if isinstance(k, bytes) else k: t
             for k, t in s._db.execute("SELECT key, typeof(key) FROM result_rows")}
    assert types == {"k1": "text", upper: "text", upper.lower(): "blob", "é" * 64: "text"}


def test_ledger_has_every_paid_call_with_cached_tokens(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    s.put(_res("k1", "ok", "first", 0.5), run_id="r1")
    s.put(_res("k1", "ok", "again", 0.5), run_id="r2")  # not stored, but paid
    s.record_spend(run_id="r2", provider="p", model="m", key="k2", mode="batch",
                   input_tokens=100, output_tokens=0, cost=0.125, cache_read_tokens=80,
                   cache_write_tokens=20)
    s.record_spend(run_id=None, provider="p", model="m", key=None, mode="sync",
                   input_tokens=1, output_tokens=0, cost=0.001)
    assert s._db.execute("SELECT run_id, key, mode, cache_read_tokens, cost FROM ledger "
                         "ORDER BY rowid").fetchall() == [
        ("r1", "k1", "sync", 0, 0.5), ("r2", "k1", "sync", 0, 0.5),
        ("r2", "k2", "batch", 80, 0.125), (None, None, "sync", 0, 0.001)]
    total = s.spend()
    assert (total["calls"], total["input_tokens"], total["cache_read_tokens"],
            total["cache_write_tokens"]) == (4, 121, 80, 20)
    assert total["cost"] == pytest.approx(1.126)
    assert [(r["mode"], r["calls"]) for r in total["by_model"]] == [("batch", 1), ("sync", 3)]
    r2 = s.spend("r2")
    assert (r2["calls"], r2["cost"]) == (2, pytest.approx(0.625))
    assert s.spend("no-such-run") == {"calls": 0, "input_tokens": 0, "output_tokens": 0,
                                      "cache_read_tokens": 0, "cache_write_tokens": 0,
                                      "cost": 0, "by_model": []}


def test_spend_by_tag_divides_the_ledger_by_the_tag_of_what_it_paid_for(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    tagged = [Result(key=f"k{i}", model=m, provider="p", status="ok", text="t", cost=c, tag=t)
              for i, (m, t, c) in enumerate([("cand", "generate", 0.25),
                                             ("judge", "grade:cand", 0.5),
                                             ("judge", "grade:other", 0.125)])]
    s.put_many(tagged, run_id="r1")
    s.put(tagged[1], run_id="r2")  # answered again and paid again: the same tag
    # an empty reply paid before its key's answer was stored counts under that answer
    s.record_spend(run_id="r1", provider="p", model="judge", key="k2", mode="sync",
                   input_tokens=1, output_tokens=0, cost=0.0625)
    s.record_spend(run_id="r1", provider="p", model="judge", key="lost", mode="sync",
                   input_tokens=1, output_tokens=0, cost=0.001)
    rows = {(r["tag"], r["model"]): (r["calls"], r["cost"]) for r in s.spend_by_tag()}
    assert rows == {("generate", "cand"): (1, 0.25), ("grade:cand", "judge"): (2, 1.0),
                    ("grade:other", "judge"): (2, 0.1875), ("", "judge"): (1, 0.001)}
    first = {r["tag"]: (r["first_ts"], r["last_ts"]) for r in s.spend_by_tag()}
    assert first["grade:cand"][0] <= first["grade:cand"][1]


def test_what_earlier_runs_paid_for_the_answers_a_stage_used(tmp_path: Path) -> None:
    """A stage interrupted and run again: its first attempt (run r1) bought two answers, the
    second (runs r2, r3) reused them and bought the third. The ledger, by the keys the stage
    used, tells each attempt's share; an answer the stage did not use is not counted."""
    hexes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(4)]
    s = Store(tmp_path / "s.db")
    s.put_many([_res(hexes[0], "ok", cost=0.5), _res(hexes[1], "ok", cost=0.25)], run_id="r1")
    s.put(_res(hexes[3], "ok", cost=8.0), run_id="r1")  # another stage's answer
    s.record_spend(run_id="r2", provider="p", model="m", key=hexes[2], mode="sync",
                   input_tokens=1, output_tokens=0, cost=0.0625)  # an empty reply, retried
    s.put(_res(hexes[2], "ok", cost=0.125), run_id="r3")
    used = hexes[:3]
    assert s.paid_by_run(used) == {"r1": 0.75, "r2": 0.0625, "r3": 0.125}
    assert s.paid_by_run([]) == {}
    e = Engine(s, REG, progress=False, env={})
    assert e.paid_earlier(used, ["r2", "r3"]) == 0.75
    assert e.paid_earlier(used, ["r1", "r2", "r3"]) == 0.0  # one attempt bought them all
    assert e.paid_earlier(hexes, ["r2", "r3"]) == 8.75


def test_a_failed_write_leaves_nothing_and_no_stale_ids(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    good = Result(key="k1", model="fresh-model", provider="fresh-provider", status="ok",
                  text="t", cost=0.5, tag="fresh-tag", config={"seed": 1})
    bad = Result(key="k2", model="m", provider="p", status="done")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"result k2: field status: 'done'"):
        s.put_many([good, bad])
    assert s.count() == 0 and s.spend()["calls"] == 0
    assert s._db.execute("SELECT COUNT(*) FROM names").fetchone()[0] == 0
    s.put(_res("k0", "ok"))  # another name takes the id the rolled-back one had
    s.put(good)
    got = s.get("k1")
    assert got is not None and (got.model, got.provider, got.tag, got.config) == (
        "fresh-model", "fresh-provider", "fresh-tag", {"seed": 1})


def test_two_connections_share_one_store(tmp_path: Path) -> None:
    a, b = Store(tmp_path / "s.db"), Store(tmp_path / "s.db")
    a.put(Result(key="ka", model="model-a", provider="pa", status="ok", text="A", tag="x"))
    b.put(Result(key="kb", model="model-b", provider="pb", status="ok", text="B", tag="y"))
    a.put(Result(key="kc", model="model-b", provider="pb", status="refused", text=""))
    for s in (a, b):
        got = s.get_many(["ka", "kb", "kc"])
        assert {k: (r.model, r.provider, r.text, r.tag) for k, r in got.items()} == {
            "ka": ("model-a", "pa", "A", "x"), "kb": ("model-b", "pb", "B", "y"),
            "kc": ("model-b", "pb", "", "")}


def test_a_batch_is_collected_whole_or_not_at_all(tmp_path: Path) -> None:
    # its answers, the empty replies it was billed for and its mark: one transaction
    s = Store(tmp_path / "s.db")
    s.add_batch("b1", "openai", "gpt", ["k1", "k2"], {"input_file_id": "f"})
    answer = _res("k1", "ok", "answer", 0.5)
    empty = SpendLine("openai", "gpt", "k2", "batch", 10, 0, 0.25)
    s._db.execute("CREATE TRIGGER crash BEFORE UPDATE OF status ON batches "
                  "BEGIN SELECT RAISE(ABORT, 'crash at the mark'); END")
    with pytest.raises(sqlite3.DatabaseError, match="crash at the mark"):
        s.collect_batch("b1", {"output_file_id": "o"}, [answer], [empty], run_id="r1")
    assert (s.count(), s.spend()["calls"]) == (0, 0)
    assert [b["batch_id"] for b in s.open_batches()] == ["b1"]
    s._db.execute("DROP TRIGGER crash")
    s.collect_batch("b1", {"output_file_id": "o"}, [answer], [empty], run_id="r1")
    assert s.open_batches() == [] and s.get("k1").text == "answer"  # type: ignore[union-attr]
    assert s._db.execute("SELECT key, mode, cost FROM ledger ORDER BY rowid").fetchall() == [
        ("k1", "sync", 0.5), ("k2", "batch", 0.25)]


def test_store_batches_roundtrip(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    s.add_batch("b1", "openai", "gpt", ["k1", "k2"], {"input_file_id": "f"})
    assert [b["batch_id"] for b in s.open_batches("openai")] == ["b1"]
    assert sorted(s.batch_keys("b1")) == ["k1", "k2"]
    s.set_batch_status("b1", "collected")
    assert s.open_batches() == []
    # the same batch id again: open again, its keys the union (as the first layout did)
    k = hashlib.sha256(b"k").hexdigest()
    s.add_batch("b1", "openai", "gpt", ["k2", k], {"input_file_id": "g"})
    assert s.open_batches() == [{"batch_id": "b1", "provider": "openai", "model": "gpt",
                                 "status": "open", "n_items": 2,
                                 "info": {"input_file_id": "g"}}]
    assert s.batch_keys("b1") == ["k1", "k2", k]
    assert s._db.execute("SELECT batch_id, key FROM batch_items").fetchall() == [
        ("b1", "k1"), ("b1", "k2"), ("b1", k)]
    assert s.batch_keys("no-such-batch") == []


def test_a_seed_is_sent_where_the_api_takes_one() -> None:
    def dec(model: str, seed: int | None) -> dict:
        s = REG.model(model)
        return resolve_decoding(s, REG.providers[s.provider].kind, 0, 100, seed)

    assert dec("gpt-4.1-2025-04-14", 8)["seed"] == 8
    assert dec("gemini-2.5-flash", 8)["seed"] == 8
    assert dec("mistral-large-latest", 8)["random_seed"] == 8  # the registry's seed_param
    assert "seed" not in dec("claude-haiku-4-5-20251001", 8)  # Anthropic takes none
    assert "seed" not in dec("gpt-4.1-2025-04-14", None)


@SDK_GROUP
def test_no_seed_leaves_the_key_as_it_was(tmp_path: Path) -> None:
    e = engine(tmp_path)
    plain = e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0)).key
    assert e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0, seed=None)).key == plain
    seeded = e.resolve(Request("gpt-4.1-2025-04-14", MSG, temperature=0, seed=3))
    assert seeded.key != plain and seeded.config["seed"] == 3
    # a model without a seed parameter: the same body, told apart by the sample index only
    claude = e.resolve(Request("claude-haiku-4-5-20251001", MSG, temperature=0, seed=3))
    assert claude.key == e.resolve(Request("claude-haiku-4-5-20251001", MSG, temperature=0)).key
    assert e.resolve(Request("claude-haiku-4-5-20251001", MSG, temperature=0, seed=3,
                             sample=1)).key != claude.key


def test_the_simulator_answers_by_seed_and_as_before_without_one() -> None:
    from hbpsych_utils.llm.testing.simulator import request_seed, sim_hash

    msgs = [("user", "I cannot sleep.")]
    before = hashlib.sha256(json.dumps(["m", [list(m) for m in msgs], None], sort_keys=True,
                                       separators=(",", ":")).encode()).hexdigest()
    assert sim_hash("m", msgs, None, seed=None) == before == sim_hash("m", msgs, None, None)
    assert sim_hash("m", msgs, None, 1) != sim_hash("m", msgs, None, 2) != before
    assert request_seed("openai", {"seed": 4}) == 4
    assert request_seed("openai", {"random_seed": 5}) == 5
    assert request_seed("google", {"generationConfig": {"seed": 6}}) == 6
    assert request_seed("anthropic", {"seed": 7}) is None
    assert request_seed("openai", {"seed": True}) is None


# --- a damaged store is named, with what to do, before anything reads it -----------------------

def filled_store(path: Path, n: int = 400) -> Path:
    with Store(path) as store:
        store.put_many([Result(key=f"{i:064x}", model="m", provider="p", status="ok",
                               text=f"reply {i} " + "x" * 300) for i in range(n)])
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the file itself
    return path


def test_a_store_that_is_not_a_database_is_named_with_what_to_do(tmp_path: Path) -> None:
    from hbpsych_utils.llm import store as store_module

    path = tmp_path / "llm_store.sqlite"
    path.write_bytes(b"this is not SQLite " * 300)
    for attempt in (lambda: store_module.check(path), lambda: Store(path)):
        with pytest.raises(store_module.StoreError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"{path}: damaged (file is not a database)"), message
        assert f"mv {path} {path}.damaged" in message
        assert "answers paid for in it are lost" in message and ".recover" not in message
    assert path.read_bytes() == b"this is not SQLite " * 300  # left as it was


def test_an_empty_store_file_is_refused_like_a_damaged_one(tmp_path: Path) -> None:
    """SQLite would take a 0-byte file for a new database: every answer bought again."""
    from hbpsych_utils.llm import store as store_module

    path = tmp_path / "llm_store.sqlite"
    path.write_bytes(b"")
    for attempt in (lambda: store_module.check(path), lambda: Store(path)):
        with pytest.raises(store_module.StoreError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"{path}: damaged (an empty file, 0 bytes"), message
        assert f"mv {path} {path}.damaged" in message and "\n" not in message
    assert path.read_bytes() == b""  # left as it was, and no journal files beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llm_store.sqlite"]
    # a store that does not exist yet is created, and is not empty once opened
    fresh = tmp_path / "new" / "llm_store.sqlite"
    with Store(fresh):
        pass
    assert fresh.stat().st_size > 0 and store_module.check(fresh) is None


def test_a_store_with_damaged_pages_is_named_and_may_be_recovered_by_hand(
        tmp_path: Path) -> None:
    from hbpsych_utils.llm import store as store_module

    path = filled_store(tmp_path / "llm_store.sqlite")
    assert store_module.check(path) is None  # a sound store passes
    with open(path, "r+b") as fh:  # a few pages in the middle overwritten
        fh.seek(4096 * 20)
        fh.write(b"\xff" * 4096 * 3)
    with pytest.raises(store_module.StoreError, match=r"llm_store\.sqlite: damaged \(") as caught:
        store_module.check(path)
    assert ".recover" in str(caught.value) and "\n" not in str(caught.value)
