"""Regressions from the review of the LLM engine: a batch submitted in this run is named with
its provider when it is left open, the shared-prefix hash is computed once per request, impossible
cache counts are cut where the reply is made (so pricing a reply changes nothing), and the sync
queue and the batch waves split a provider's items the same way."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path

import pytest
from lazy_modules import SDK_GROUP

from hbpsych_utils import study
from hbpsych_utils.llm import Engine, Request, load_registry
from hbpsych_utils.llm.providers import Reply
from hbpsych_utils.llm.run_context import Item, reply_cost, split_groups
from hbpsych_utils.llm.sync import SendQueue
from hbpsych_utils.llm.testing import Fault, Simulator, base_urls_for

REG = load_registry()
JUDGE_OF = {REG.providers[REG.model(j).provider].kind: j for j in study.JUDGE_PANEL}
FREE = {p: {"rpm": None, "tpm": None} for p in REG.providers}


def engine(sim: Simulator, store: Path) -> Engine:
    return Engine(store, REG, base_urls=base_urls_for(sim.url, REG), progress=False, env={},
                  limits=FREE, poll_interval=0.02, backoff_base=0.01, backoff_max=0.02)


def requests(model: str, n: int = 3) -> list[Request]:
    return [Request(model, [{"role": "user", "content": f"review {model} item {i}"}],
                    temperature=0, max_tokens=64) for i in range(n)]


# ------------------------------------------------------------ batch messages name the provider

@pytest.mark.slow
@pytest.mark.parametrize("api", ["openai", "anthropic", "google"])
@pytest.mark.parametrize("fault", ["batch_results_error", "batch_status_error"])
def test_a_batch_left_open_in_the_run_that_submitted_it_names_its_provider(
    tmp_path: Path, api: str, fault: str
) -> None:
    model = JUDGE_OF[api]
    provider = REG.model(model).provider
    with Simulator(faults=[Fault(fault, api=api)]) as sim:  # every read fails
        out = engine(sim, tmp_path / "s.db").run(requests(model), mode="batch")
    assert [r.status for r in out] == ["not_run"] * 3
    for r in out:
        assert f"({provider}): " in r.error and "()" not in r.error, r.error
        assert "stays open" in r.error


# ------------------------------------------------------------------ the prefix hash, once

@SDK_GROUP
def test_the_prefix_hash_is_computed_once_per_request(monkeypatch) -> None:
    e = Engine(":memory:", REG, progress=False, env={})
    prefix = "Conversation: " + "calm sleep mood plan " * 1500 + "\n# Rubric item\n"
    for model in JUDGE_OF.values():
        req = Request(model, [{"role": "user", "content": prefix + "[5] x"}],
                      temperature=0.0, max_tokens=64, cache_prefix_chars=len(prefix))
        hashed: list[int] = []
        real = hashlib.sha256

        def counting(data: bytes = b"", real=real, hashed=hashed):
            hashed.append(len(data))
            return real(data)

        monkeypatch.setattr(hashlib, "sha256", counting)
        it = e.resolve(req)
        monkeypatch.setattr(hashlib, "sha256", real)
        assert it.group is not None and it.group.endswith(str(req.cache_prefix_key()))
        assert len(hashed) == 2, model  # the request key and the prefix key, each once


# ------------------------------------------------------------------ cache counts cut at the source

def _item() -> Item:
    spec = REG.model(JUDGE_OF["openai"])
    req = Request(spec.name, [{"role": "user", "content": "x"}])
    return Item("k", req, spec, REG.providers[spec.provider], {}, {}, 1, 1)


def test_impossible_cache_counts_are_cut_when_the_reply_is_made(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="hbpsych_utils.llm"):
        reply = Reply("ok", "stop", False, 100, 5, cache_read_tokens=90, cache_write_tokens=40)
    assert (reply.cache_read_tokens, reply.cache_write_tokens) == (90, 10)
    assert "90 cache-read + 40 cache-write tokens reported for 100 prompt tokens" in caplog.text
    before = vars(reply).copy()
    cost = reply_cost(_item(), reply, "batch")
    assert vars(reply) == before  # pricing a reply does not change it
    assert cost == reply_cost(_item(), reply, "batch")
    sane = Reply("ok", "stop", False, 100, 5, cache_read_tokens=60, cache_write_tokens=40)
    assert (sane.cache_read_tokens, sane.cache_write_tokens) == (60, 40)


# ------------------------------------------------------------------ one split for both paths

def _grouped() -> list[Item]:
    spec = REG.model(JUDGE_OF["openai"])
    out = []
    for key, group in [("a0", "a"), ("x0", None), ("a1", "a"), ("b0", "b"), ("x1", None),
                       ("b1", "b"), ("a2", "a")]:
        req = Request(spec.name, [{"role": "user", "content": key}])
        out.append(Item(key, req, spec, REG.providers[spec.provider], {}, {}, 1, 1, group=group))
    return out


def test_the_sync_queue_and_the_batch_waves_split_items_alike() -> None:
    items = _grouped()
    first, later = split_groups(items)
    assert [it.key for it in first] == ["a0", "x0", "b0", "x1"]
    assert [it.key for it in later] == ["a1", "b1", "a2"]

    async def handed_out_before_any_returns() -> list[str]:
        q = SendQueue(items)
        out = []
        for _ in first:
            out.append((await q.next()).key)
        waiting = asyncio.ensure_future(q.next())
        await asyncio.sleep(0)
        assert not waiting.done()  # the rest wait for their group's first call
        waiting.cancel()
        return out

    assert asyncio.run(handed_out_before_any_returns()) == [it.key for it in first]
