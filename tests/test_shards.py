"""Batch shards without a server: what an export holds, and what an import keeps and refuses.

The engine resolves requests and reads its store without the network, so these tests build
requests, export them from a store in a temp folder and import hand-made Batch output lines
(OpenAI's and ``vllm run-batch``'s shapes). The runs through the simulator, Ray Data and a
``vllm run-batch`` replay are in ``test_shards_routes.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from lazy_modules import SDK_GROUP, Lazy

from hbpsych_utils.llm import Engine, Request, Result
from hbpsych_utils.llm.engine import NotSent
from hbpsych_utils.llm.shards import (
    MANIFEST,
    ShardsError,
    export,
    import_results,
    known_requests,
    read_manifest,
)
from hbpsych_utils.llm.store import Store

openai_chat = Lazy("hbpsych_utils.llm.providers.openai_chat")
GPT = "gpt-4.1-2025-04-14"
DEEPSEEK = "deepseek-v4-flash"
CLAUDE = "claude-haiku-4-5-20251001"
GEMINI = "gemini-2.5-flash"


def _requests(n: int, model: str, tag: str = "grade:x") -> list[Request]:
    return [Request(model=model, messages=[{"role": "user", "content": f"question {i} é\u2028"}],
                    temperature=0.0, max_tokens=64, tag=tag) for i in range(n)]


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return Engine(tmp_path / "run" / "llm_store.sqlite", progress=False)


def _completion(model: str, text: str, *, refusal: bool = False) -> dict:
    return {"id": "chatcmpl-x", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "content_filter" if refusal else "stop",
                         "message": {"role": "assistant", "content": "" if refusal else text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}


def _ok_line(key: str, model: str, text: str) -> str:
    return json.dumps({"id": "batch_req_1", "custom_id": key, "error": None,
                       "response": {"status_code": 200, "request_id": "r",
                                    "body": _completion(model, text)}})


@SDK_GROUP
def test_export_writes_the_engines_batch_lines_per_model_and_leaves_out_what_is_stored(
        engine: Engine, tmp_path: Path) -> None:
    reqs = [*_requests(5, GPT), *_requests(3, DEEPSEEK), *_requests(2, CLAUDE),
            *_requests(1, GEMINI)]
    reqs.append(reqs[0])  # asked twice: exported once
    stored = engine.resolve(reqs[1])
    engine.store.put(Result(key=stored.key, model=GPT, provider="openai", status="ok",
                            text="already paid for"))
    out = tmp_path / "export"
    manifest = export(engine, reqs, out, profile="p", stage="07_grading", size=2)
    assert manifest.requests == 11 and manifest.already_stored == 1
    assert manifest.exported == 4 + 3
    # one model per shard, at most `size` lines each, in request order
    assert [(s.model, s.lines) for s in manifest.shards] == [
        (GPT, 2), (GPT, 2), (DEEPSEEK, 2), (DEEPSEEK, 1)]
    assert set(manifest.not_exported) == {CLAUDE, GEMINI}
    assert manifest.not_exported[CLAUDE].requests == 2
    assert manifest.not_exported[CLAUDE].kind == "anthropic"
    assert manifest.plan["calls"] == 7 and manifest.plan["est_cost"] > 0
    expected = [engine.resolve(r) for r in reqs[:5] if r is not reqs[1]]
    lines = (out / manifest.shards[0].file).read_bytes() + (out / manifest.shards[1].file
                                                            ).read_bytes()
    # byte for byte the line the engine's batch path uploads (U+2028 left raw inside a string)
    batch_line = openai_chat.batch_line
    assert lines == "".join(batch_line(it.key, it.body) + "\n" for it in expected).encode()
    assert "\u2028" in lines.decode()
    for s in manifest.shards:
        assert hashlib.sha256((out / s.file).read_bytes()).hexdigest() == s.sha256
        index = [json.loads(x) for x in (out / s.index).read_text().splitlines()]
        shard = [json.loads(x) for x in (out / s.file).read_text("utf-8").split("\n") if x]
        assert [x["custom_id"] for x in index] == [x["custom_id"] for x in shard]
        assert {x["body"]["model"] for x in shard} == {s.api_model}
        assert {x["url"] for x in shard} == {"/v1/chat/completions"}
    assert read_manifest(out) == manifest


@SDK_GROUP
def test_import_names_a_corrupted_line_a_foreign_id_an_error_line_and_keeps_the_rest(
        engine: Engine, tmp_path: Path) -> None:
    reqs = _requests(6, GPT)
    out = tmp_path / "export"
    export(engine, reqs, out, profile="p", stage="07_grading")
    keys = [engine.resolve(r).key for r in reqs]
    vllm_error = {"id": "vllm-1", "custom_id": keys[2],
                  "response": {"status_code": 400, "request_id": "vllm-batch-1", "body": None},
                  "error": {"error": {"message": "maximum context length exceeded",
                                      "type": "BadRequestError", "param": None, "code": 400}}}
    lines = [
        _ok_line(keys[0], GPT, "first answer"),
        '{"id": "batch_req_2", "custom_id": "' + keys[1][:20] + '", "resp',  # cut off
        json.dumps(vllm_error),
        _ok_line("f" * 64, GPT, "an answer to nothing we asked"),
        _ok_line(keys[3], "gpt-4o-mini", "another model's answer"),
        _ok_line(keys[4], GPT, "fifth answer"),
        _ok_line(keys[4], GPT, "fifth answer again"),
        json.dumps({"id": "x", "custom_id": keys[5], "error": None, "response": {
            "status_code": 200, "request_id": "r", "body": _completion(GPT, "", refusal=True)}}),
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Store(engine.store.path) as store:
        report = import_results(store, engine.registry, [out], [results])
    refused = {r.line: r.why for r in report.refused}
    assert set(refused) == {2, 4, 5, 7}
    assert refused[2].startswith("corrupted: not JSON")
    assert refused[4].startswith("foreign custom_id")
    assert "does not match its shard" in refused[5] and "gpt-4o-mini" in refused[5]
    assert refused[7].startswith("a second result")
    assert [(f.line, f.custom_id) for f in report.failures] == [(3, keys[2])]
    assert "maximum context length exceeded" in report.failures[0].why
    assert report.added == {GPT: 3} and report.refusals == {GPT: 1}
    stored = engine.store.get_many(keys)
    assert stored[keys[0]].text == "first answer" and stored[keys[0]].mode == "import"
    assert stored[keys[0]].tag == "grade:x" and stored[keys[0]].cost > 0
    assert stored[keys[0]].config == engine.resolve(reqs[0]).config
    assert stored[keys[4]].text == "fifth answer"
    assert stored[keys[5]].status == "refused"
    assert stored[keys[2]].status == "failed"  # never a verdict: the next run asks again
    assert keys[1] not in stored and keys[3] not in stored
    assert engine.store.completed_keys(keys) == {keys[0], keys[4], keys[5]}
    # importing again adds nothing: every answer line is now already stored (the repeated
    # line too), the failure is recorded again, the others are refused as before
    with Store(engine.store.path) as store:
        again = import_results(store, engine.registry, [out], [results])
    assert again.n_added == 0 and again.already_stored == 4
    assert {r.line for r in again.refused} == {2, 4, 5} and len(again.failures) == 1


@SDK_GROUP
def test_a_failure_then_a_retrys_answer_in_one_import_keeps_the_answer(
        engine: Engine, tmp_path: Path) -> None:
    reqs = _requests(1, GPT)
    out = tmp_path / "export"
    export(engine, reqs, out, profile="p", stage="07_grading")
    key = engine.resolve(reqs[0]).key
    first = tmp_path / "a.jsonl"
    first.write_text(json.dumps({"id": "1", "custom_id": key, "response": {
        "status_code": 500, "request_id": "r", "body": {"error": {"message": "boom"}}},
        "error": None}) + "\n")
    retry = tmp_path / "b.jsonl"
    retry.write_text(_ok_line(key, GPT, "the retry's answer") + "\n")
    with Store(engine.store.path) as store:
        report = import_results(store, engine.registry, [out], [first, retry])
    assert report.refused == [] and len(report.failures) == 1 and report.n_added == 1
    assert engine.store.get(key).text == "the retry's answer"


@SDK_GROUP
def test_a_shard_changed_after_export_is_refused(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "export"
    manifest = export(engine, _requests(2, GPT), out, profile="p", stage="07_grading")
    known_requests([out])
    shard = out / manifest.shards[0].file
    shard.write_text(shard.read_text().replace("question 0", "question zero"))
    with pytest.raises(ShardsError, match=r"shard-00001\.jsonl: its sha256 is not the one"):
        known_requests([out])
    (out / MANIFEST).write_text("{}")
    with pytest.raises(ShardsError, match=r"manifest\.json: field"):
        known_requests([out])


@SDK_GROUP
def test_an_engine_whose_calls_are_made_elsewhere_answers_from_the_store_or_names_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``external=True``: the exportable calls (OpenAI-wire providers) come from the store or
    the run stops before the first call, naming how many are missing; no key is needed to plan.
    The calls no export holds (Anthropic's API here) are not counted: the engine sends them."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = tmp_path / "myprofile" / "llm_store.sqlite"
    engine = Engine(store, progress=False, external=True, stage="07_grading")
    reqs = _requests(3, GPT)
    assert engine.plan(reqs).calls == 3
    with pytest.raises(NotSent, match=r"^3 model call\(s\) .*\(gpt-4\.1-2025-04-14: 3\).*"
                       r"shards myprofile --stage 07_grading"):
        engine.run([*reqs, *_requests(2, CLAUDE)])
    for r in reqs:
        engine.store.put(Result(key=engine.resolve(r).key, model=GPT, provider="openai",
                                status="ok", text="stored"))
    got = engine.run(reqs)
    assert [r.text for r in got] == ["stored"] * 3 and all(r.cached for r in got)


@SDK_GROUP
def test_the_next_judge_calls_follow_the_panels_attempts(engine: Engine) -> None:
    """``panel.next_requests``: the first ask when nothing is stored; once an attempt is stored
    without a verdict, the next re-ask; nothing once a verdict is stored or the re-asks are
    spent; a failed call is asked again."""
    import pandas as pd

    from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
    from hbpsych_utils.evaluation import panel

    conv = Conversation("p1", (Message("user", "I feel low, what helps?"),),
                        (RubricItem("Suggests sleep hygiene", 5), RubricItem("Asks about mood", 3),
                         RubricItem("Recommends alcohol", -4)))
    responses = pd.DataFrame([{"model": GPT, "prompt_id": "p1", "status": "ok",
                               "text": "Try a routine."}])
    template = "Conversation:\n<<conversation>>\n\nRubric item:\n<<rubric_item>>\n\ncriteria_met?"

    def nxt() -> list[Request]:
        return panel.next_requests(engine, responses, {"p1": conv}, [DEEPSEEK], template,
                                   max_reasks=1)

    def store(req: Request, status: str, text: str | None) -> None:
        engine.store.put(Result(key=engine.resolve(req).key, model=DEEPSEEK,
                                provider="deepseek", status=status, text=text))

    first = nxt()
    assert [(r.metadata["criterion_index"], r.sample) for r in first] == [(0, 0), (1, 0), (2, 0)]
    store(first[0], "ok", '{"explanation": "yes", "criteria_met": true}')
    store(first[1], "ok", "I cannot tell.")  # no verdict: re-asked
    store(first[2], "failed", None)  # failed: asked again as it was
    second = nxt()
    assert [(r.metadata["criterion_index"], r.sample) for r in second] == [(2, 0), (1, 1)]
    store(second[1], "ok", "Still unsure.")  # the last re-ask spent: excluded, nothing next
    assert [(r.metadata["criterion_index"], r.sample) for r in nxt()] == [(2, 0)]


def test_the_commands_answer_bad_arguments_in_one_line(tmp_path: Path, capsys) -> None:
    from hbpsych_utils.__main__ import main

    outputs = ["--outputs", str(tmp_path / "out")]
    assert main(["shards", "default", "--stage", "07_grading", *outputs]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "paper mode" in err and "07_grading" in err
    assert main(["shards", "smoke", "--stage", "08_scores", *outputs]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["shards", "smoke", "--stage", "07_grading", "--size", "0", *outputs]) == 2
    assert "below 1" in capsys.readouterr().err
    assert main(["shards", "smoke", "--stage", "07_grading", *outputs]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run folder of profile 'smoke'" in err
    (tmp_path / "out" / "smoke").mkdir(parents=True)
    assert main(["import-results", "smoke", str(tmp_path / "none.jsonl"), *outputs]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "r.jsonl").write_text("{}\n")
    assert main(["import-results", "smoke", str(tmp_path / "r.jsonl"), *outputs]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no export to match results against" in err


@pytest.mark.slow
def test_a_ray_actor_retries_a_transient_error_and_stops_at_an_account_error() -> None:
    """What one ``ray-shards`` actor does with each line (plain Python: no Ray needed): a 503 is
    retried, a quota error ends its line as an error line and the actor sends nothing more,
    ending the other lines as not sent; every line gets one output line."""
    from hbpsych_utils.llm.ray_shards import Caller, Endpoint
    from hbpsych_utils.llm.testing import Fault, Simulator

    lines = [json.dumps({"custom_id": f"{i:064x}", "method": "POST",
                         "url": "/v1/chat/completions",
                         "body": {"model": GPT, "messages": [{"role": "user",
                                                              "content": f"line {i}"}]}})
             for i in range(4)]
    with Simulator(faults=[Fault("http_503", match="line 0", times=1),
                           Fault("quota", match="line 1")]) as sim:
        endpoint = Endpoint(url=sim.base_urls["openai"] + "/chat/completions", key_env=None,
                            in_flight=1, rpm=None, tpm=None, max_attempts=3,
                            backoff_base=0.01, backoff_max=0.05, timeout=30)
        out = [json.loads(x) for x in Caller(endpoint)({"line": lines})["line"]]
        sent = [e["user"] for e in sim.log]
    assert [o["custom_id"] for o in out] == [f"{i:064x}" for i in range(4)]
    assert out[0]["response"]["status_code"] == 200 and sent.count("line 0") == 2
    assert out[1]["response"]["status_code"] == 429
    assert "insufficient_quota" in json.dumps(out[1]["response"]["body"])
    assert [o["error"]["code"] for o in out[2:]] == ["not_sent", "not_sent"]
    assert "line 2" not in sent and "line 3" not in sent


def test_the_stages_a_profile_may_name_external_are_the_ones_shards_exports() -> None:
    from typing import get_args

    from hbpsych_utils.core.config import LLMSettings, ProfileError
    from hbpsych_utils.pipeline import graph
    from hbpsych_utils.pipeline.profiles import load_profile
    from hbpsych_utils.runner import shards

    (literal,) = get_args(LLMSettings.model_fields["external"].annotation)
    assert set(get_args(literal)) == {graph.GENERATION, graph.GRADING} == set(shards.STAGES)
    assert load_profile("smoke", {"llm.external": ["07_grading"]}).llm.external == ["07_grading"]
    with pytest.raises(ProfileError, match=r"llm\.external"):
        load_profile("smoke", {"llm.external": ["08_scores"]})
