"""Prompt caching: cached-token prices, usage read on both paths, requests arranged for reuse, the
simulator's caches, and the grading ledger.

Costs are recomputed here by hand from the registry's prices (:func:`hand_cost`), not with
``call_cost``; what the providers report is read back from the simulator's own log.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from conftest import FREE
from conftest import JUDGE_BY_API as JUDGE
from lazy_modules import SDK_GROUP, Lazy

from hbpsych_utils.construction import corpus
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import grading, panel
from hbpsych_utils.llm import Engine, Request, load_registry
from hbpsych_utils.llm.cost import call_cost
from hbpsych_utils.llm.models import Price
from hbpsych_utils.llm.providers.base import cache_arranged
from hbpsych_utils.llm.run_context import Item
from hbpsych_utils.llm.sync import SendQueue
from hbpsych_utils.llm.testing import Simulator

pytestmark = SDK_GROUP
anthropic_messages = Lazy("hbpsych_utils.llm.providers.anthropic_messages")
openai_chat = Lazy("hbpsych_utils.llm.providers.openai_chat")
REG = load_registry()
SYSTEM = grading.SYSTEM_MESSAGE


def hand_cost(price: Price, mode: str, inp: int, out: int, read: int, write: int) -> float:
    """USD of one ledger line, written out: uncached input and output at the (batch) price,
    cached reads and writes at their multipliers of the input price, batch-discounted only
    where the provider stacks the discounts."""
    d = price.batch_discount if mode == "batch" else 1.0
    r = 1.0 if price.cache_read is None else price.cache_read
    w = 1.0 if price.cache_write is None else price.cache_write
    s = d if price.batch_cache_stacks else 1.0
    return ((inp - read - write) * price.input * d + out * price.output * d
            + read * price.input * r * s + write * price.input * w * s) / 1e6


def engine(path: Path, sim: Simulator, **kw) -> Engine:
    return Engine(path, REG, base_urls=sim.base_urls_for(REG), limits=FREE, progress=False,
                  env={}, backoff_base=0.01, poll_interval=0.02, **kw)


def words(n: int, seed: str) -> str:
    vocab = "calm sleep mood plan care rest talk walk note help call week day safe".split()
    return " ".join(vocab[(i * 7 + len(seed) * 3 + i // 5) % len(vocab)] for i in range(n))


def grader_like(model: str, prefix: str, item: str, **kw) -> Request:
    """A judge request whose user turn is ``prefix + item``, the prefix marked as shared."""
    return Request(model=model, messages=[{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": prefix + item}],
                   temperature=0.0, max_tokens=64, cache_prefix_chars=len(prefix), **kw)


# ------------------------------------------------------------------------------ cost arithmetic

def test_call_cost_prices_cached_and_written_tokens() -> None:
    gpt = REG.model(JUDGE["openai"]).price       # read 0.25, no write surcharge, no stacking
    haiku = REG.model(JUDGE["anthropic"]).price  # read 0.1, write 1.25, stacks with batch
    assert (gpt.cache_read, gpt.cache_write, gpt.batch_cache_stacks) == (0.25, None, False)
    assert (haiku.cache_read, haiku.cache_write, haiku.batch_cache_stacks) == (0.1, 1.25, True)
    # GPT-4.1, $2/$8: 1,000 prompt tokens of which 800 cached, 100 out
    assert call_cost(gpt, 1000, 100, cache_read_tokens=800) == pytest.approx(
        (200 * 2 + 800 * 0.5 + 100 * 8) / 1e6)
    # in a batch the uncached part is halved, the cached part keeps the sync cache price
    assert call_cost(gpt, 1000, 100, batch=True, cache_read_tokens=800) == pytest.approx(
        (200 * 1 + 100 * 4 + 800 * 0.5) / 1e6)
    # Haiku 4.5, $1/$5: 5,000 written at 1.25, 0 read; in a batch every part is halved
    assert call_cost(haiku, 6000, 10, cache_write_tokens=5000) == pytest.approx(
        (1000 * 1 + 5000 * 1.25 + 10 * 5) / 1e6)
    assert call_cost(haiku, 6000, 10, batch=True, cache_read_tokens=5000) == pytest.approx(
        (1000 * 0.5 + 5000 * 0.1 * 0.5 + 10 * 2.5) / 1e6)
    # no cache tokens: exactly the price without caching, to the last bit
    assert call_cost(gpt, 1234, 56, batch=True) == (1234 * 2 + 56 * 8) / 1e6 * 0.5
    with pytest.raises(ValueError, match="within the 10 prompt tokens"):
        call_cost(gpt, 10, 1, cache_read_tokens=8, cache_write_tokens=3)


def test_every_price_multiplier_is_what_hand_cost_reads() -> None:
    for name, spec in REG.models.items():
        p = spec.price
        got = call_cost(p, 5000, 300, batch=True, cache_read_tokens=2000, cache_write_tokens=1000)
        assert got == pytest.approx(hand_cost(p, "batch", 5000, 300, 2000, 1000)), name
        if spec.cache_mode != "none":
            assert spec.cache_min_tokens and p.cache_read is not None, name


def test_impossible_cache_counts_are_cut_to_the_prompt_not_fatal() -> None:
    from hbpsych_utils.llm.providers import Reply
    from hbpsych_utils.llm.run_context import reply_cost

    it = _items({"x": 1})[0]
    reply = Reply("ok", "stop", False, 100, 5, cache_read_tokens=150)  # a server's odd usage
    assert reply_cost(it, reply, "sync") == pytest.approx(
        hand_cost(it.spec.price, "sync", 100, 5, 100, 0))
    assert (reply.cache_read_tokens, reply.cache_write_tokens) == (100, 0)


# ------------------------------------------------------------------------------ arrangement

def test_anthropic_splits_the_prompt_at_the_prefix_with_a_breakpoint() -> None:
    spec = REG.model(JUDGE["anthropic"])
    prefix = "Conversation: " + words(5000, "a") + "\n# Rubric item\n"
    req = grader_like(spec.name, prefix, "[5] Suggests a routine.\n# Instructions ...")
    assert cache_arranged(spec, req)
    body = anthropic_messages.AnthropicAdapter.body(spec, req, {"max_tokens": 64})
    (user,) = body["messages"]
    blocks = user["content"]
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert "".join(b["text"] for b in blocks) == req.messages[-1].content  # the same prompt
    assert blocks[0]["text"] == prefix and blocks[0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in blocks[1] and body["system"] == SYSTEM
    # below Haiku's 4,096-token minimum nothing changes: the body is the uncached one
    short = grader_like(spec.name, "Conversation: hi\n", "[5] x")
    plain = Request(model=spec.name, messages=short.messages, temperature=0.0, max_tokens=64)
    assert not cache_arranged(spec, short)
    adapter = anthropic_messages.AnthropicAdapter
    assert adapter.body(spec, short, {"max_tokens": 64}) == adapter.body(
        spec, plain, {"max_tokens": 64})


def test_cache_blocks_never_sends_an_empty_text_block() -> None:
    msg = {"role": "user", "content": "shared prefix   "}
    # the rest is whitespace: one block
    whole = anthropic_messages.cache_blocks(msg, len("shared prefix"))
    assert whole["content"] == [{"type": "text", "text": "shared prefix   ",
                                 "cache_control": {"type": "ephemeral"}}]
    assert anthropic_messages.cache_blocks({"role": "user", "content": "   tail"}, 3) == {
        "role": "user", "content": "   tail"}  # an empty prefix: left as it was


def test_openai_hint_and_keys_of_arranged_requests(tmp_path) -> None:
    spec = REG.model(JUDGE["openai"])
    prefix = "Conversation: " + words(1200, "o") + "\n# Rubric item\n"
    a, b = (grader_like(spec.name, prefix, item) for item in ("[5] one", "[3] two"))
    body_a = openai_chat.OpenAIAdapter.body(spec, a, {"temperature": 0.0})
    body_b = openai_chat.OpenAIAdapter.body(spec, b, {})
    assert body_a["prompt_cache_key"] == body_b["prompt_cache_key"]
    assert body_a["messages"][-1]["content"] == a.messages[-1].content  # prompt unchanged
    e = Engine(tmp_path / "s.sqlite", REG, env={}, progress=False)
    for api, model in JUDGE.items():
        long_prefix = "Conversation: " + words(6000, api) + "\n# Rubric item\n"
        arranged = grader_like(model, long_prefix, "[5] one")
        plain = Request(model=model, messages=arranged.messages, temperature=0.0, max_tokens=64)
        it_a, it_p = e.resolve(arranged), e.resolve(plain)
        assert it_a.key != it_p.key, api  # never served an unarranged answer, nor vice versa
        assert it_a.group is not None and it_p.group is None
        assert it_a.config["prompt_caching"] == REG.model(model).cache_mode
        assert "prompt_caching" not in it_p.config
        # a shared prefix below the model's minimum: sent, keyed and recorded as uncached
        short = grader_like(model, "Conversation: hi\n", "[5] one")
        plain_short = Request(model=model, messages=short.messages, temperature=0.0,
                              max_tokens=64)
        assert e.resolve(short).key == e.resolve(plain_short).key
        assert e.resolve(short).group is None


def test_the_grader_prefix_is_where_the_rubric_item_starts() -> None:
    template = ("Look at this.\n# Conversation\n<<conversation>>\n# Rubric item\n<<rubric_item>>"
                "\n# Instructions\nReturn criteria_met.")
    conv = corpus.Conversation(
        "p", (corpus.Message("user", "hello"),),
        (corpus.RubricItem("Says hi", 5), corpus.RubricItem("Asks a question", -2)))
    reqs = grading.build_requests(conv, "hi there", template)
    n = reqs[0].prefix_chars
    assert n is not None and {r.prefix_chars for r in reqs} == {n}
    assert reqs[0].user[:n] == reqs[1].user[:n]  # shared ...
    assert reqs[0].user[n:].startswith("[5] Says hi") and reqs[1].user[n:].startswith("[-2]")
    # the rendered prompt is the reference's, byte for byte
    assert reqs[1].user == grading.render_grader_prompt(template, conv.prompt, "hi there",
                                                        conv.rubrics[1])


# ------------------------------------------------------------------------------ group ordering

def _items(groups: dict[str, int]) -> list[Item]:
    spec = REG.model(JUDGE["openai"])
    out = []
    for g, n in groups.items():
        for i in range(n):
            req = Request(model=spec.name, messages=[{"role": "user", "content": f"{g}{i}"}])
            out.append(Item(f"{g}{i}", req, spec, REG.providers[spec.provider], {}, {}, 1, 1,
                            group=None if g == "x" else g))
    return out


def test_send_queue_holds_a_group_until_its_first_call_returns() -> None:
    async def scenario() -> list[str]:
        q = SendQueue(_items({"a": 3, "x": 1, "b": 2}))
        order = []
        firsts = [await q.next() for _ in range(3)]  # a0, x0, b0: groups start side by side
        order += [it.key for it in firsts]
        waiting = asyncio.ensure_future(q.next())
        await asyncio.sleep(0)
        assert not waiting.done()  # a1, a2 and b1 wait for their group's first call
        await q.done(firsts[1])    # x0 returning releases nothing
        await asyncio.sleep(0)
        assert not waiting.done()
        await q.done(firsts[2])    # b0 returned: b1 may go
        order.append((await waiting).key)
        await q.done(firsts[0])    # a0 returned: a1 and a2 go, in order
        order += [(await q.next()).key, (await q.next()).key]
        assert await q.next() is None
        return order

    assert asyncio.run(scenario()) == ["a0", "x0", "b0", "b1", "a1", "a2"]


@pytest.mark.slow
def test_sync_path_sends_a_groups_first_call_before_the_others(tmp_path) -> None:
    spec = REG.model(JUDGE["openai"])
    prefixes = {g: f"Conversation {g}: " + words(4500, g) + "\n# Rubric item\n" for g in "pqr"}
    reqs = [grader_like(spec.name, prefixes[g], f"[{i}] criterion {g}{i}")
            for i in range(4) for g in "pqr"]  # groups interleaved in request order
    with Simulator(latency=0.3) as sim:
        results = engine(tmp_path / "s.sqlite", sim).run(reqs)
        log = [x for x in sim.log if x["kind"] == "sync"]
    assert all(r.status == "ok" for r in results) and len(log) == 12
    by_group: dict[str, list[dict]] = {}
    for x in log:
        by_group.setdefault(x["user"][:14], []).append(x)
    assert len(by_group) == 3
    for calls in by_group.values():
        first = min(calls, key=lambda x: x["start"])
        later = [x for x in calls if x is not first]
        assert all(first["t"] <= x["start"] for x in later)  # returned before the others left
        assert first["cache_read"] == 0 and all(x["cache_read"] > 0 for x in later)
    # the groups ran side by side: every group's first call left before any call returned
    firsts = [min(c, key=lambda x: x["start"]) for c in by_group.values()]
    assert max(f["start"] for f in firsts) < min(x["t"] for x in log)


# ------------------------------------------------------------------------------ usage parsing

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "batch"])
@pytest.mark.parametrize("api", sorted(JUDGE))
def test_usage_read_from_each_providers_real_response(tmp_path, api, mode) -> None:
    """The engine arranges one prefix group per provider; what the simulator reported (its
    log, the response's usage fields) is what each result and ledger line holds."""
    model = JUDGE[api]
    spec = REG.model(model)
    prefix = "Conversation: " + words(5200, api) + "\n# Rubric item\n"  # > 4,096 tokens
    reqs = [grader_like(model, prefix, f"[{i}] criterion number {i}") for i in range(4)]
    with Simulator() as sim:
        e = engine(tmp_path / "s.sqlite", sim)
        results = e.run(reqs, mode=mode)
        log = {x["user_sha256"]: x for x in sim.log if x["model"] == spec.api_model}
    assert {x["kind"] for x in log.values()} == {mode}
    prompt_tokens = -(-(len(SYSTEM) + len(reqs[0].messages[-1].content)) // 4)
    shared = (len(SYSTEM) + len(prefix))
    for r, req in zip(results, reqs, strict=True):
        x = log[hashlib.sha256(req.messages[-1].content.encode()).hexdigest()]
        assert (r.cache_read_tokens, r.cache_write_tokens) == (x["cache_read"], x["cache_write"])
        # every prompt token, cached or not (Anthropic's own input_tokens leaves them out)
        assert abs(r.input_tokens - prompt_tokens) <= 2
        assert r.cost == pytest.approx(hand_cost(spec.price, mode, r.input_tokens,
                                                 r.output_tokens, r.cache_read_tokens,
                                                 r.cache_write_tokens))
    first, later = results[0], results[1:]
    assert first.cache_read_tokens == 0
    if api == "anthropic":  # the breakpoint's prefix is written once, then read
        assert first.cache_write_tokens == -(-shared // 4)
        assert all(r.cache_read_tokens == -(-shared // 4) for r in later)
    else:  # implicit: the longest cached 128-token step at or above the minimum
        step = (shared // 4 - spec.cache_min_tokens) // 128 * 128 + spec.cache_min_tokens
        assert all(r.cache_read_tokens == step for r in later)
    assert all(r.cache_write_tokens == 0 for r in later)
    spend = e.spend()
    assert spend["cache_read_tokens"] == sum(r.cache_read_tokens for r in results)
    assert spend["cost"] == pytest.approx(sum(r.cost for r in results), abs=1e-6)


@pytest.mark.slow
def test_parsers_read_the_simulators_raw_responses() -> None:
    """The same prompt twice, straight to the simulator's endpoints: each adapter's parser
    (the one that also reads batch results) finds the second call's cached tokens."""
    import httpx
    from google.genai.types import GenerateContentResponse

    from hbpsych_utils.llm.providers.anthropic_messages import parse_message
    from hbpsych_utils.llm.providers.google_genai import parse_response
    from hbpsych_utils.llm.providers.openai_chat import parse_chat

    text = words(3600, "raw")  # > 4,096 tokens at ~4 characters each
    tokens = -(-len(text) // 4)
    with Simulator() as sim:
        def twice(path: str, body: dict) -> dict:
            httpx.post(sim.url + path, json=body, timeout=30).raise_for_status()
            return httpx.post(sim.url + path, json=body, timeout=30).json()

        o = parse_chat(twice("/v1/chat/completions", {
            "model": REG.model(JUDGE["openai"]).api_model, "max_tokens": 8,
            "messages": [{"role": "user", "content": text}]}))
        a = parse_message(twice("/v1/messages", {
            "model": REG.model(JUDGE["anthropic"]).api_model, "max_tokens": 8,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}]}))
        raw = twice(f"/v1beta/models/{REG.model(JUDGE['google']).api_model}:generateContent",
                    {"contents": [{"role": "user", "parts": [{"text": text}]}]})
        g = parse_response(GenerateContentResponse.model_validate(raw))
    assert o.input_tokens == tokens and o.cache_read_tokens == (tokens - 1024) // 128 * 128 + 1024
    assert (a.input_tokens, a.cache_read_tokens, a.cache_write_tokens) == (tokens, tokens, 0)
    assert g.input_tokens == tokens and g.cache_read_tokens == (tokens - 2048) // 128 * 128 + 2048
    assert raw["usageMetadata"]["cachedContentTokenCount"] == g.cache_read_tokens


# ------------------------------------------------------------------------------ grading

N_CONV, CANDIDATES = 12, ("short", "mid", "long", "longest")
REPLY_WORDS = {"short": 40, "mid": 800, "long": 1800, "longest": 3600}
"""Reply lengths so the shared prefixes reach no judge's minimum, GPT-4.1's (1,024), also Gemini
2.5 Flash's (2,048), and every judge's (Claude Haiku 4.5: 4,096)."""


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    template = grading.load_template()
    convs = corpus.load_corpus(sources.fetch("healthbench_oss"), max_records=N_CONV).conversations
    rows = [{"model": c, "prompt_id": conv.prompt_id, "status": "ok",
             "text": words(REPLY_WORDS[c], conv.prompt_id + c)}
            for c in CANDIDATES for conv in convs]
    responses = pd.DataFrame(rows)
    by_id = {c.prompt_id: c for c in convs}
    out: dict = {}
    for name, mode, caching in (("batch", "batch", True), ("sync", "sync", True),
                                ("off", "batch", False)):
        path = tmp_path_factory.mktemp(name) / "store.sqlite"
        with Simulator() as sim:
            run = panel.grade(engine(path, sim), responses, by_id, list(JUDGE.values()),
                              template, mode=mode, prompt_caching=caching)
        out[name] = (run, path)
    # each (candidate, conversation): characters every criterion's prompt shares (system
    # message and the template up to the rubric item), and how many criteria share them
    out["groups"] = {
        (r["model"], r["prompt_id"]): (
            len(SYSTEM) + grading.shared_prefix_chars(template, by_id[r["prompt_id"]].prompt,
                                                      r["text"]),
            len(by_id[r["prompt_id"]].rubrics))
        for r in rows}
    return out


def expected_cache(judge: str, groups: dict) -> tuple[int, int, int]:
    """By hand: each group's first call finds nothing; every later one reads the shared prefix
    — Anthropic exactly at the breakpoint, written once by the first call; OpenAI and Gemini
    the longest 128-token step of it from the minimum on (a later call may find a little more
    where two rubric items begin alike: the third number bounds that)."""
    spec = REG.model(judge)
    minimum = int(spec.cache_min_tokens or 0)
    reads = writes = slack = 0
    for chars, n in groups.values():
        tokens = -(-chars // 4)
        if tokens < minimum:
            continue
        if spec.cache_mode == "breakpoint":
            reads += (n - 1) * tokens
            writes += tokens
        else:
            reads += (n - 1) * ((chars // 4 - minimum) // 128 * 128 + minimum)
            slack += (n - 1) * 128
    return reads, writes, slack


def _ledger(path: Path, run_ids: list[str]) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT model, mode, input_tokens, output_tokens, cache_read_tokens, "
            "cache_write_tokens, cost FROM ledger WHERE run_id IN "
            f"({','.join('?' * len(run_ids))})", run_ids).fetchall()


@pytest.mark.parametrize("name", ["batch", "sync"])
def test_grading_earns_hits_wherever_the_prefix_reaches_the_minimum(graded, name) -> None:
    """12 conversations x 4 candidates x every criterion x 3 judges, arranged for caching."""
    run, path = graded[name]
    groups = graded["groups"]
    reached = {j: {c for (c, _), (chars, _) in groups.items()
                   if -(-chars // 4) >= REG.model(j).cache_min_tokens} for j in JUDGE.values()}
    assert reached == {JUDGE["openai"]: {"mid", "long", "longest"},  # the data are as meant
                       JUDGE["google"]: {"long", "longest"}, JUDGE["anthropic"]: {"longest"}}
    for judge in JUDGE.values():
        reads, writes, slack = expected_cache(judge, groups)
        got = run.spend[judge]
        assert reads > 0 and reads <= got["cache_read_tokens"] <= reads + slack, judge
        assert got["cache_write_tokens"] == writes, judge
    # the ledger is the hand computation, line by line and in total
    lines = _ledger(path, run.run_ids)
    assert len(lines) == len(run.verdicts)
    total = 0.0
    for model, mode, inp, out, read, write, cost in lines:
        expected = hand_cost(REG.model(model).price, mode, inp, out, read, write)
        assert cost == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert mode == ("batch" if name == "batch" else "sync")
        total += expected
    assert run.spend_totals()["spend_usd"] == pytest.approx(total, abs=1e-6)
    assert run.spend_totals()["cache_read_tokens"] == sum(x[4] for x in lines)


def test_grading_verdicts_are_the_same_with_and_without_caching(graded) -> None:
    on, off = graded["batch"][0], graded["off"][0]
    pd.testing.assert_frame_equal(on.verdicts, off.verdicts)
    pd.testing.assert_frame_equal(graded["sync"][0].verdicts, off.verdicts)
    assert off.spend_totals()["cache_read_tokens"] == 0  # batch items never hit each other
    assert on.spend_totals()["spend_usd"] < off.spend_totals()["spend_usd"]
    # arranged requests record it in their config
    with sqlite3.connect(graded["batch"][1]) as db:
        configs = {json.loads(c).get("prompt_caching") for (c,) in
                   db.execute("SELECT config FROM results")}
    assert configs == {None, "implicit", "breakpoint"}


# ------------------------------------------------------------------------------ the smoke run

SMOKE_UP_TO_GRADING = ["01_corpus", "02_screening", "03_review_round1", "04_recall",
                       "05_subset", "06_generation", "07_grading"]


@pytest.fixture(scope="module")
def smoke_on_off(smoke_run, tmp_path_factory, mirror) -> dict[bool, Path]:
    """The smoke profile with ``llm.prompt_caching`` on (the default: the session's smoke run,
    which these tests only read) and off, the latter up to grading.

    The profile's notebooks list stops the second at grading (``--only`` would also run the
    stages downstream of those it names, 08-13, as they are not current). The tests read 07's
    tables and the ledger lines of 07's own calls (tag ``grade:``), which the later stages of
    the session's run leave as they are.

    01-05 read nothing of ``llm``: the second run starts from a copy of the session run's (up
    to date there, as the run says) and runs 06 and 07, with a store of its own."""
    from conftest import copy_stages

    from hbpsych_utils import runner

    root = tmp_path_factory.mktemp("smoke-caching-False")
    copy_stages(smoke_run, root / "smoke", SMOKE_UP_TO_GRADING[:5])
    result = runner.run_profile("smoke", outputs_root=root, echo=print,
                                overrides={"notebooks": SMOKE_UP_TO_GRADING,
                                           "llm.prompt_caching": False})
    assert result.ok, result.notebooks
    assert [n["notebook"] for n in result.notebooks] == SMOKE_UP_TO_GRADING[5:]
    return {True: smoke_run, False: root / "smoke"}


@pytest.mark.slow
@pytest.mark.notebook
def test_smoke_grading_spend_is_the_ledger_at_cached_token_prices(smoke_on_off) -> None:
    run = smoke_on_off[True]
    m = json.loads((run / "07_grading" / "metrics.json").read_text())
    assert m["prompt_caching"] is True and m["cache_read_tokens"] > 0
    with sqlite3.connect(run / "llm_store.sqlite") as db:
        lines = db.execute(
            "SELECT l.model, l.mode, l.input_tokens, l.output_tokens, l.cache_read_tokens, "
            "l.cache_write_tokens, l.cost FROM ledger l JOIN results r ON r.key = l.key "
            "WHERE r.tag LIKE 'grade:%'").fetchall()
    assert len(lines) == sum(int(n) for n in m["calls_by_attempt"].values())
    by_hand = [hand_cost(REG.model(model).price, mode, inp, out, read, write)
               for model, mode, inp, out, read, write, _ in lines]
    assert [x[6] for x in lines] == pytest.approx(by_hand, rel=1e-12, abs=1e-15)
    assert m["spend_usd"] == pytest.approx(sum(by_hand), abs=1e-6)
    assert m["cache_read_tokens"] == sum(x[4] for x in lines)
    assert m["spend_usd"] == pytest.approx(sum(j["spend_usd"] for j in
                                               m["spend_by_judge"].values()), abs=1e-5)


@pytest.mark.slow
@pytest.mark.notebook
def test_smoke_verdicts_and_scores_are_the_same_with_caching_off(smoke_on_off) -> None:
    on, off = smoke_on_off[True], smoke_on_off[False]
    for table in ("verdicts.csv", "scores.csv", "census.csv"):
        assert (on / "07_grading" / table).read_bytes() == (off / "07_grading" / table).read_bytes()
    assert json.loads((off / "07_grading" / "metrics.json").read_text())["prompt_caching"] is False


@pytest.mark.slow
def test_a_profiles_simulator_takes_cache_minimums_from_the_runs_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry file that changes a judge's minimum decides what the run's simulator caches."""
    import yaml

    from hbpsych_utils import study
    from hbpsych_utils.core import paths
    from hbpsych_utils.llm import testing
    from hbpsych_utils.llm.session import open_engine

    raw = yaml.safe_load((paths.params_dir() / "models.yaml").read_text(encoding="utf-8"))
    judge = study.JUDGE_PANEL[0]
    raw["models"][judge]["cache_min_tokens"] = 4321
    registry_file = tmp_path / "models.yaml"
    registry_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
    snapshot = load_registry(registry_file).model(judge).api_model
    made: list[Simulator] = []

    class Recording(testing.Simulator):
        def __init__(self, **options) -> None:
            super().__init__(**options)
            made.append(self)

    monkeypatch.setattr(testing, "Simulator", Recording)
    with open_engine({"simulator": True, "registry_file": str(registry_file)}, tmp_path,
                     progress=False):
        (sim,) = made
        assert sim.state.caches.minimum("openai", snapshot) == 4321
