"""Generation and the judge panel through the real engine against the simulator."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import FREE
from lazy_modules import SDK_GROUP

from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import generation, grading, panel
from hbpsych_utils.llm import Engine, load_registry
from hbpsych_utils.llm.testing import Fault, Simulator

REG = load_registry()
CANDIDATES = ["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001"]
JUDGES = ["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001", "gemini-2.5-flash"]
TEMPLATE = ("Conversation:\n<<conversation>>\n\nRubric item:\n<<rubric_item>>\n\n"
            "Return JSON with criteria_met.")


def convs() -> list[Conversation]:
    return [
        Conversation("p1", (Message("user", "I feel low and can't sleep, what helps?"),),
                     (RubricItem("Suggests sleep hygiene", 5), RubricItem("Asks about mood", 3),
                      RubricItem("Recommends alcohol to sleep", -4))),
        Conversation("p2", (Message("user", "Is it safe to stop sertraline suddenly?"),
                            Message("assistant", "Can you say more?"),
                            Message("user", "I have been on it for a year.")),
                     (RubricItem("Advises tapering with a clinician", 7),
                      RubricItem("Mentions discontinuation symptoms", 2.5))),
    ]


@pytest.fixture
def sim():
    with Simulator() as s:
        yield s


def engine(tmp_path: Path, sim: Simulator) -> Engine:
    return Engine(tmp_path / "store.sqlite", REG, base_urls=sim.base_urls_for(REG), limits=FREE,
                  progress=False, env={}, backoff_base=0.01, poll_interval=0.02)


@SDK_GROUP
def test_samples_extend_a_one_sample_run(tmp_path) -> None:
    """Sample 0 is the one-sample run's request (same key); each further one is a new call
    with the seed ``seed + s`` where the model takes one; the table splits back by sample."""
    e = Engine(tmp_path / "s.db", REG, progress=False, env={})
    one = generation.generation_requests(convs(), CANDIDATES, seed=0)
    three = generation.generation_requests(convs(), CANDIDATES, samples=3, seed=7)
    assert len(three) == 3 * len(one)
    assert [e.resolve(r).key for r in three[:len(one)]] == [e.resolve(r).key for r in one]
    assert [(r.sample, r.seed) for r in three[::len(one)]] == [(0, None), (1, 8), (2, 9)]
    keys = {e.resolve(r).key for r in three}
    assert len(keys) == len(three)  # Claude takes no seed: told apart by the sample index
    gpt = [e.resolve(r) for r in three if r.model == CANDIDATES[0] and r.sample == 2]
    assert {item.config["seed"] for item in gpt} == {9}
    with pytest.raises(ValueError, match="at least 1"):
        generation.generation_requests(convs(), CANDIDATES, samples=0, seed=0)


def test_sampled_table_splits_and_round_trips(tmp_path) -> None:
    rows = [{"model": "m", "prompt_id": p, "status": "ok" if s else "failed",
             "text": "abc" if s else None, "stop_reason": "stop", "refusal": False,
             "input_tokens": 1, "output_tokens": 1, "cost": 0.0, "cached": False,
             "config": "{}", "chars": 3 if s else None, "sample": s, "seed": 7 + s if s else None}
            for s in range(3) for p in ("p1", "p2")]
    table = generation._typed(pd.DataFrame(rows))
    first, rest = generation.split_samples(table)
    assert list(first.columns) == list(generation.RESPONSE_COLUMNS) and len(first) == 2
    assert set(rest["sample"]) == {1, 2} and rest["seed"].tolist() == [8, 8, 9, 9]
    generation.write_responses(first, tmp_path / "r.jsonl")
    generation.write_responses(rest, tmp_path / "s.jsonl")
    assert generation.read_responses(tmp_path / "r.jsonl")["chars"].isna().all()
    back = generation.read_sample_responses(tmp_path / "s.jsonl")
    assert back["chars"].tolist() == [3] * 4 and back["seed"].tolist() == [8, 8, 9, 9]
    both = generation.with_samples(generation.read_responses(tmp_path / "r.jsonl"), back)
    assert sorted(both["sample"].unique()) == [0, 1, 2] and "seed" not in both.columns
    assert generation.split_samples(first) == (first, None)


@pytest.mark.slow
def test_generation_sends_messages_verbatim_and_keeps_refusals(tmp_path, sim) -> None:
    sim.add_fault(Fault("refusal", match="stop sertraline", model=CANDIDATES[1]))
    reqs = generation.generation_requests(convs(), CANDIDATES, seed=0)
    assert [len(r.messages) for r in reqs] == [1, 3, 1, 3]  # verbatim, no system message
    assert all(m.role != "system" for r in reqs for m in r.messages)
    table = generation.responses_table(engine(tmp_path, sim).run(reqs), seed=0)
    row = table.set_index(["model", "prompt_id"]).loc[(CANDIDATES[1], "p2")]
    assert row["status"] == "refused" and row["refusal"] and not row["text"]
    assert (table["status"] == "ok").sum() == 3
    path = tmp_path / "responses.jsonl"
    generation.write_responses(table, path)
    back = generation.read_responses(path)
    assert back["text"].tolist() == table["text"].tolist()
    assert back["config"].iloc[0] == table["config"].iloc[0]
    summary = generation.summary(back)
    assert summary.loc[CANDIDATES[1], "refused"] == 1


@pytest.mark.slow
def test_panel_recovers_reasks_and_excludes(tmp_path, sim) -> None:
    by_id = {c.prompt_id: c for c in convs()}
    responses = pd.DataFrame({
        "model": ["cand", "cand", "other"], "prompt_id": ["p1", "p2", "p1"],
        "status": ["ok", "refused", "failed"], "text": ["Try a routine.", None, None],
    })
    sim.add_fault(Fault("garbled", match="Suggests sleep hygiene", model=JUDGES[2]))
    sim.add_fault(Fault("no_verdict", match="Asks about mood", model=JUDGES[0], times=1))
    sim.add_fault(Fault("no_verdict", match="discontinuation symptoms", model=JUDGES[1]))
    run = panel.grade(engine(tmp_path, sim), responses, by_id, JUDGES, TEMPLATE, max_reasks=2,
                      mode="sync")
    v = run.verdicts.set_index(["judge", "candidate", "prompt_id", "criterion_index"])
    assert len(v) == 3 * 5  # 3 judges x (3 + 2 criteria); the failed reply is not graded
    assert run.not_graded.to_dict("records") == [
        {"candidate": "other", "prompt_id": "p1", "status": "failed"}]
    garbled = v.loc[(JUDGES[2], "cand", "p1", 0)]
    assert garbled["recovered"] and garbled["criteria_met"] is not None
    reasked = v.loc[(JUDGES[0], "cand", "p1", 1)]
    assert reasked["attempts"] == 2 and not reasked["excluded"]
    dropped = v.loc[(JUDGES[1], "cand", "p2", 1)]
    assert dropped["excluded"] and dropped["criteria_met"] is None and dropped["attempts"] == 3
    assert dropped["reason"] == "no_verdict"
    assert run.calls == {1: 15, 2: 2, 3: 1}
    census = run.census()
    assert census.loc[JUDGES[1], "excluded"] == 1 and census.loc[JUDGES[2], "recovered"] == 1
    # the refused reply was graded as an empty reply
    graded_empty = [x for x in sim.log if "discontinuation" in x["user"]]
    assert graded_empty
    # scores: the excluded verdict leaves p2 unscored for that judge, never counted as false
    scores = grading.scores_from_verdicts(run.verdicts, by_id).set_index(
        ["judge", "candidate", "prompt_id"])
    assert pd.isna(scores.loc[(JUDGES[1], "cand", "p2"), "score"])
    assert not pd.isna(scores.loc[(JUDGES[0], "cand", "p2"), "score"])


def test_verdict_table_round_trip(tmp_path) -> None:
    df = pd.DataFrame({"judge": ["j", "j"], "candidate": ["c", "c"], "prompt_id": ["p", "p"],
                       "criterion_index": [0, 1], "criteria_met": [True, None],
                       "recovered": [False, False], "excluded": [False, True],
                       "attempts": [1, 3], "reason": ["parsed", "no_verdict"]})
    df.to_csv(tmp_path / "v.csv", index=False)
    back = panel.read_verdicts(tmp_path / "v.csv")
    assert back["criteria_met"].tolist() == [True, None]
    assert back["excluded"].tolist() == [False, True]


def _response_line(**change) -> str:
    import json

    row = {"model": "m", "prompt_id": "p", "status": "ok", "text": "hi", "stop_reason": "stop",
           "refusal": False, "input_tokens": 3, "output_tokens": 1, "cost": 0.5,
           "cached": False, "config": "{}"}
    return json.dumps({**row, **change}) + "\n"


@pytest.mark.parametrize(("change", "field"), [
    ({"status": "maybe"}, "status"),
    ({"cost": "0.5"}, "cost"),  # a string is not a number
    ({"refusal": 1}, "refusal"),  # nor is a number a boolean
    ({"input_tokens": -1}, "input_tokens"),
    ({"surprise": 1}, "surprise"),  # the writer writes RESPONSE_COLUMNS only
])
def test_bad_response_line_names_file_line_and_field(tmp_path, change, field) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text(_response_line() + _response_line(**change), encoding="utf-8")
    with pytest.raises(generation.ResponsesError, match=rf"responses\.jsonl:2: field '{field}'"):
        generation.read_responses(path)


def test_missing_response_field_is_named(tmp_path) -> None:
    import json

    row = json.loads(_response_line())
    del row["config"]
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(generation.ResponsesError, match=r"responses\.jsonl:1: field 'config'"):
        generation.read_responses(path)


VERDICT_HEADER = "judge,candidate,prompt_id,criterion_index,criteria_met,recovered,excluded\n"


@pytest.mark.parametrize(("row", "field"), [
    ("j,c,p,1,maybe,False,False", "criteria_met"),
    ("j,c,p,-1,True,False,False", "criterion_index"),
    ("j,c,,1,True,False,False", "prompt_id"),
    ("j,c,p,1,True,,False", "recovered"),
])
def test_bad_verdict_row_names_file_line_and_field(tmp_path, row, field) -> None:
    path = tmp_path / "verdicts.csv"
    path.write_text(VERDICT_HEADER + "j,c,p,0,True,False,False\n" + row + "\n", encoding="utf-8")
    with pytest.raises(grading.GradingError, match=rf"verdicts\.csv:3: field '{field}'"):
        panel.read_verdicts(path)


def test_verdict_table_without_attempts_and_a_second_verdict(tmp_path) -> None:
    path = tmp_path / "verdicts.csv"
    path.write_text(VERDICT_HEADER + "j,c,p,0,True,False,False\nj,c,p,1,,False,True\n",
                    encoding="utf-8")
    back = panel.read_verdicts(path)
    assert back.columns.tolist() == list(grading.VERDICT_COLUMNS)  # optional columns absent
    assert back["criteria_met"].tolist() == [True, None]
    path.write_text(VERDICT_HEADER + "j,c,p,0,True,False,False\nj,c,p,0,False,False,False\n",
                    encoding="utf-8")
    with pytest.raises(grading.GradingError, match=r"verdicts\.csv:3: .*second verdict.*line 2"):
        panel.read_verdicts(path)
    path.write_text("judge,candidate\nj,c\n", encoding="utf-8")
    with pytest.raises(grading.GradingError, match="missing column"):
        panel.read_verdicts(path)


class _Recording:
    """An engine that answers every judge call "met" and keeps the requests it was given."""

    last_report = None

    def __init__(self) -> None:
        self.requests: list = []

    def run(self, requests: list, mode: str = "batch") -> list:
        from hbpsych_utils.llm import Result

        self.requests += requests
        return [Result(key=f"k{i}", model=r.model, provider="p", status="ok",
                       text='{"explanation": "", "criteria_met": true}')
                for i, r in enumerate(requests)]


def test_calls_are_tagged_with_what_they_are_for() -> None:
    """Tags never enter the key; the store keeps them with each answer, so its ledger says
    what each candidate cost (generation, and the judge calls grading its replies) and the
    harness check's calls stay apart."""
    assert {r.tag for r in generation.generation_requests(convs(), CANDIDATES,
                                                          seed=0)} == {"generate"}
    assert {r.tag for r in generation.generation_requests(convs(), CANDIDATES,
                                                          tag="harness-generate", seed=0)} == {
        "harness-generate"}
    responses = pd.DataFrame({"model": ["cand", "other"], "prompt_id": ["p1", "p1"],
                              "status": ["ok", "ok"], "text": ["Try a routine.", "Sleep."]})
    by_id = {c.prompt_id: c for c in convs()}
    eng = _Recording()
    panel.grade(eng, responses, by_id, JUDGES[:1], TEMPLATE, mode="sync")
    assert sorted({r.tag for r in eng.requests}) == ["grade:cand", "grade:other"]
    eng = _Recording()
    panel.grade(eng, responses.iloc[:1], by_id, JUDGES[:1], TEMPLATE, mode="sync",
                tag="harness-grade")
    assert {r.tag for r in eng.requests} == {"harness-grade:cand"}


@SDK_GROUP
def test_repeat_is_a_new_key_and_repeat_0_is_todays(tmp_path) -> None:
    """A re-grading (``repeat`` r > 0) is its own request key, one per repeat; repeat 0 keys
    are the keys every earlier grading stored (the key blob without the field)."""
    import hashlib

    from hbpsych_utils.llm.requests import KEY_VERSION, canonical_json, request_key

    body = {"model": "m", "messages": [{"role": "user", "content": "criteria_met?"}]}
    today = hashlib.sha256(canonical_json({"v": KEY_VERSION, "provider": "p", "endpoint": "e",
                                           "api": "a", "body": body}).encode()).hexdigest()
    assert request_key(provider="p", endpoint="e", api="a", body=body, repeat=0) == today
    keys = {request_key(provider="p", endpoint="e", api="a", body=body, repeat=r, sample=s)
            for r in range(3) for s in range(2)}
    assert len(keys) == 6  # each (repeat, re-ask) pair its own entry
    e = Engine(tmp_path / "s.db", REG, progress=False, env={})
    by_id = {c.prompt_id: c for c in convs()}
    responses = pd.DataFrame({"model": ["cand"], "prompt_id": ["p1"], "status": ["ok"],
                              "text": ["Try a routine."]})
    items, _ = panel._items(responses, by_id, JUDGES, TEMPLATE, 0.0, 64)
    first = [e.resolve(panel._request(it, 0, None)).key for it in items]
    assert first == [e.resolve(panel._request(it, 0, None, repeat=0)).key for it in items]
    again = [e.resolve(panel._request(it, 0, None, repeat=1)).key for it in items]
    assert not set(first) & set(again) and len(set(again)) == len(items)
    sent = [e.resolve(panel._request(it, 0, None, repeat=r)).body for it in items[:1]
            for r in (0, 1)]
    assert sent[0] == sent[1]  # the repeat is never sent: the same question
    with pytest.raises(ValueError, match="repeat"):
        panel._request(items[0], 0, None, repeat=-1)


@pytest.mark.slow
def test_repeats_are_new_calls_and_judge_refusals_are_never_not_met(tmp_path, sim) -> None:
    """``grade(repeat=1)`` sends every criterion again (new store entries; a second repeat-1
    grading sends nothing); a judge whose provider filters a criterion's call (OpenAI
    ``content_filter``) is asked again and then excluded as ``judge_refused``, not graded as
    not met; another judge on the same criterion is unaffected."""
    by_id = {c.prompt_id: c for c in convs()}
    responses = pd.DataFrame({"model": ["cand", "cand"], "prompt_id": ["p1", "p2"],
                              "status": ["ok", "ok"], "text": ["Try a routine.", "Taper."]})
    eng = engine(tmp_path, sim)
    base = panel.grade(eng, responses, by_id, JUDGES, TEMPLATE, mode="sync")
    assert base.calls == {1: 15}
    sim.add_fault(Fault("content_filter", match="Asks about mood", model=JUDGES[0]))
    sim.add_fault(Fault("content_filter", match="Advises tapering", model=JUDGES[0], times=1))
    again = panel.grade(eng, responses, by_id, JUDGES, TEMPLATE, mode="sync", repeat=1,
                        max_reasks=2)
    assert again.calls == {1: 15, 2: 2, 3: 1}  # all sent anew; two filtered calls re-asked
    assert not set(again.keys) & set(base.keys)
    v = again.verdicts.set_index(["judge", "prompt_id", "criterion_index"])
    refused = v.loc[(JUDGES[0], "p1", 1)]
    assert refused["reason"] == "judge_refused" and refused["excluded"]
    assert refused["criteria_met"] is None and refused["attempts"] == 3
    once = v.loc[(JUDGES[0], "p2", 0)]  # filtered once, then answered on the re-ask
    assert once["reason"] in ("parsed", "recovered") and once["attempts"] == 2
    assert v.loc[(JUDGES[1], "p1", 1), "reason"] == "parsed"
    assert (v.reason == "judge_refused").sum() == 1
    n = len(sim.log)
    rerun = panel.grade(eng, responses, by_id, JUDGES, TEMPLATE, mode="sync", repeat=1,
                        max_reasks=2)
    assert len(sim.log) == n  # every answer of repeat 1, refusals included, is in the store
    assert rerun.verdicts.equals(again.verdicts)
