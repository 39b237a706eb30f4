"""Screening: rubric vocabulary, released-screen replay, batched live screen with re-asks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from hbpsych_utils.construction import screening
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.core import sources

RUBRIC = "Screen it.\n\n**Category controlled vocabulary:** `mood`, `anxiety`, `none`.\n"


def conv(pid: str, *texts: str) -> Conversation:
    msgs = []
    for i, t in enumerate(texts):
        msgs.append(Message("user" if i % 2 == 0 else "assistant", t))
    return Conversation(pid, tuple(msgs), (RubricItem("c", 1),))


def test_vocabulary_from_the_real_rubric_has_18_terms(mirror: Path) -> None:
    vocab = screening.vocabulary_from_rubric(sources.fetch("screening_rubric").read_text())
    assert len(vocab) == 18 and vocab[0] == "mood_depression_bipolar" and vocab[-1] == "none"


def test_vocabulary_is_the_longest_backticked_list_on_a_vocabulary_line() -> None:
    rubric = ("| `category` | topic (controlled vocabulary below); `none` if excluded |\n"
              "**Category controlled vocabulary:** `cardio`, `renal`, `none`.\n")
    assert screening.vocabulary_from_rubric(rubric) == ("cardio", "renal", "none")
    with pytest.raises(screening.ScreenError, match="controlled vocabulary"):
        screening.vocabulary_from_rubric("no list here\n")
    with pytest.raises(screening.ScreenError, match="repeats"):
        screening.vocabulary_from_rubric("controlled vocabulary: `a`, `b`, `a`")


def test_replay_counts_match_an_independent_count(mirror: Path) -> None:
    path = sources.fetch("screening_labels")
    vocab = screening.vocabulary_from_rubric(sources.fetch("screening_rubric").read_text())
    screen = screening.load_released_screen(path, vocab)
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    m = screening.screen_metrics(screen)
    assert m["n_screened"] == len(raw) == 5000
    assert m["n_relevant"] == sum(r["label"] == "RELEVANT" for r in raw)
    assert m["n_borderline"] == sum(r["label"] == "BORDERLINE" for r in raw)
    assert m["n_model_refused"] == sum(r.get("provenance") == "model_refused" for r in raw) == 1
    assert sum(m["relevant_by_category"].values()) == m["n_relevant"]
    by_cat, by_conf = screening.screen_tables(screen)
    assert by_cat.loc["total", "total"] == 5000 and by_conf.loc["total", "total"] == 5000


def test_replay_rejects_bad_label(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"prompt_id": "a", "label": "RELEVANT", "category": "mood",
                             "confidence": "high", "rationale": "x"}) + "\n" +
                 json.dumps({"prompt_id": "b", "label": "MAYBE", "category": "mood",
                             "confidence": "high", "rationale": "x"}) + "\n")
    with pytest.raises(screening.ScreenError, match=r"s.jsonl:2: field 'label': 'MAYBE'"):
        screening.load_released_screen(p, ["mood", "none"])


def reply_for(prompt: screening.ScreenPrompt, override=None) -> str:
    recs = []
    for pid in prompt.prompt_ids:
        rec = {"prompt_id": pid, "label": "RELEVANT", "category": "mood",
               "confidence": "high", "rationale": "sad mood"}
        if override:
            rec = override(pid, rec)
        if rec is not None:
            recs.append(rec)
    return json.dumps({"records": recs})


def test_batches_of_50_user_turns_only() -> None:
    spec = screening.screening_spec(RUBRIC)
    convs = [conv(f"p{i:03d}", f"user says {i}", "assistant secret", "user again")
             for i in range(120)]
    seen: list[screening.ScreenPrompt] = []

    def ask(prompts):
        seen.extend(prompts)
        return [screening.ScreenReply(reply_for(p)) for p in prompts]

    result = screening.run_screen(spec, convs, ask)
    assert [len(p.prompt_ids) for p in seen] == [50, 50, 20]
    content = seen[0].messages[0]["content"]
    assert content.startswith(RUBRIC) and "user says 0" in content and "user again" in content
    assert "assistant secret" not in content
    assert len(result.table) == 120 and set(result.table.provenance) == {"model"}
    records = seen[2].schema["properties"]["records"]
    assert records["required"] == [f"p{i:03d}" for i in range(100, 120)]
    assert records["additionalProperties"] is False
    assert records["properties"]["p100"]["properties"]["category"]["enum"] == [
        "mood", "anxiety", "none"]


def test_invalid_records_are_reasked_then_routed_to_humans() -> None:
    spec = screening.screening_spec(RUBRIC)
    convs = [conv(p, "hello") for p in ("a", "b", "c", "d")]
    calls: list[tuple[str, ...]] = []

    def ask(prompts):
        out = []
        for p in prompts:
            calls.append(p.prompt_ids)

            def bad(pid, rec, attempt=p.attempt):
                if pid == "b":
                    return {**rec, "category": "astrology"}  # outside the vocabulary, always
                if pid == "c" and attempt == 0:
                    return {**rec, "rationale": " ".join(["word"] * 16)}  # too long once
                if pid == "d" and attempt == 0:
                    return None  # missing once
                return rec

            out.append(screening.ScreenReply(reply_for(p, bad)))
        return out

    result = screening.run_screen(spec, convs, ask, batch_size=4, max_reasks=2)
    assert calls == [("a", "b", "c", "d"), ("b", "c", "d"), ("b",)]
    table = result.table.set_index("prompt_id")
    assert table.loc["c", "label"] == "RELEVANT" and table.loc["c", "provenance"] == "model"
    assert table.loc["b", "label"] == "BORDERLINE"
    assert table.loc["b", "provenance"] == "screen_failed"
    assert any("astrology" in p["problem"] for p in result.log)


def test_refusal_and_malformed_json() -> None:
    spec = screening.screening_spec(RUBRIC)
    convs = [conv(p, "hello") for p in ("a", "b", "c")]

    def ask(prompts):
        out = []
        for p in prompts:
            if "a" in p.prompt_ids:
                out.append(screening.ScreenReply("", refused=True))
            elif p.attempt == 0:
                out.append(screening.ScreenReply('{"records": [{"prompt_id": "b", "lab'))
            else:
                out.append(screening.ScreenReply("```json\n" + reply_for(p) + "\n```"))
        return out

    result = screening.run_screen(spec, convs, ask, batch_size=1)
    table = result.table.set_index("prompt_id")
    assert table.loc["a", "label"] == "BORDERLINE"
    assert table.loc["a", "provenance"] == "model_refused"
    assert (table.loc[["b", "c"], "provenance"] == "model").all()
    assert screening.screen_metrics(result.table)["n_model_refused"] == 1


def test_agreement_with_release() -> None:
    released = pd.DataFrame({"prompt_id": list("abcd"),
                             "label": ["RELEVANT", "RELEVANT", "NOT_RELEVANT", "NOT_RELEVANT"]})
    live = pd.DataFrame({"prompt_id": list("abcde"),
                         "label": ["RELEVANT", "NOT_RELEVANT", "NOT_RELEVANT", "NOT_RELEVANT",
                                   "RELEVANT"]})
    out = screening.agreement_with_release(live, released)
    assert out["n_common"] == 4 and out["percent_agreement"] == 0.75
    assert out["confusion"].loc["RELEVANT", "NOT_RELEVANT"] == 1
    # po = 3/4; pe = (2/4)(1/4) + (2/4)(3/4) = 1/2 -> kappa = (3/4 - 1/2)/(1/2) = 1/2
    assert out["cohen_kappa"] == pytest.approx(0.5)


# --- schema layouts, recall buckets ---------------------------------------------------------


def test_keyed_replies_are_read_like_record_lists() -> None:
    spec = screening.screening_spec(RUBRIC)
    rec = {"label": "BORDERLINE", "category": "anxiety", "confidence": "low", "rationale": "x"}
    keyed = json.dumps({"records": {"a": rec, "zz": rec}})
    valid, problems = screening.parse_batch_reply(spec, keyed, ["a", "b"])
    assert valid == {"a": rec}
    assert problems == ["record 1: prompt_id 'zz' is not in this batch", "b: no record"]
    listed = spec.schema()["properties"]["records"]
    assert listed["type"] == "array" and "prompt_id" in listed["items"]["required"]


def test_recall_buckets_come_from_the_rubric(mirror: Path) -> None:
    real = sources.fetch("recovery_rubric").read_text()
    assert screening.buckets_from_rubric(real) == screening.RECALL_BUCKETS
    toy = (Path(__file__).parent / "data" / "toy_specialty" / "recall_rubric.md").read_text()
    spec = screening.recall_spec(toy)
    assert spec.choices["bucket"] == ("A_cosmetic", "B_systemic_with_skin", "standard", "none")
    assert spec.choices["tier"] == ("CLEAR", "POSSIBLE", "NO")
    with pytest.raises(screening.ScreenError, match="bucket"):
        screening.buckets_from_rubric("| `tier` | `CLEAR` · `NO` |\n")


# --- through the LLM engine and the provider simulator --------------------------------------

MODEL = "claude-haiku-4-5-20251001"


@pytest.fixture
def sim_engine(tmp_path: Path):
    """An engine pointed at a fresh simulator; yields (engine, simulator)."""
    from hbpsych_utils.llm import Engine, load_registry
    from hbpsych_utils.llm.testing import Simulator

    registry = load_registry()
    with Simulator() as sim:
        engine = Engine(tmp_path / "store.sqlite", registry, base_urls=sim.base_urls_for(registry),
                        progress=False, max_attempts=1, backoff_base=0.0)
        yield engine, sim


@pytest.mark.slow
def test_engine_ask_refusal_routes_the_batch_to_humans(sim_engine) -> None:
    from hbpsych_utils.llm.testing import Fault

    engine, sim = sim_engine
    spec = screening.screening_spec(RUBRIC)
    convs = [conv("a", "I cannot sleep and feel hopeless"), conv("b", "rash on my arm"),
             conv("c", "knee pain"), conv("d", "low mood for weeks")]
    sim.add_fault(Fault("refusal", match="I cannot sleep and feel hopeless"))
    ask = screening.engine_ask(engine, MODEL, mode="sync")
    result = screening.run_screen(spec, convs, ask, batch_size=2)
    table = result.table.set_index("prompt_id")
    assert list(table.loc[["a", "b"], "label"]) == ["BORDERLINE", "BORDERLINE"]
    assert set(table.loc[["a", "b"], "provenance"]) == {"model_refused"}
    assert set(table.loc[["c", "d"], "provenance"]) == {"model"}
    assert set(table.loc[["c", "d"], "label"]) <= set(screening.LABELS)
    assert set(table.loc[["c", "d"], "category"]) <= {"mood", "anxiety", "none"}
    # two batches, one call each: the refusal is kept, never re-asked
    assert len(sim.log) == 2
    assert screening.screen_metrics(result.table)["n_model_refused"] == 2


@pytest.mark.slow
def test_engine_ask_reasks_an_unreadable_reply_as_a_new_call(sim_engine) -> None:
    from hbpsych_utils.llm.testing import Fault

    engine, sim = sim_engine
    spec = screening.screening_spec(RUBRIC)
    convs = [conv("a", "panic attacks at work"), conv("b", "bad sunburn")]
    sim.add_fault(Fault("no_verdict", match="panic attacks at work", times=1))
    seen: list[list[screening.ScreenPrompt]] = []
    inner = screening.engine_ask(engine, MODEL, mode="batch")

    def ask(prompts):
        seen.append(prompts)
        return inner(prompts)

    result = screening.run_screen(spec, convs, ask, batch_size=2, max_reasks=2)
    assert [[p.attempt for p in ps] for ps in seen] == [[0], [1]]
    assert set(result.table.provenance) == {"model"}
    assert result.log[0]["attempt"] == 0 and "not valid JSON" in result.log[0]["problem"]
    # the same prompt twice reached the provider: the re-ask was not served from the store
    assert len(sim.log) == 2
    assert seen[0][0].messages == seen[1][0].messages


@pytest.mark.slow
def test_engine_ask_failed_calls_end_as_screen_failed(sim_engine) -> None:
    from hbpsych_utils.llm.testing import Fault

    engine, sim = sim_engine
    spec = screening.screening_spec(RUBRIC)
    sim.add_fault(Fault("http_500", match="always broken"))
    result = screening.run_screen(spec, [conv("a", "always broken")],
                                  screening.engine_ask(engine, MODEL, mode="sync"), max_reasks=1)
    row = result.table.iloc[0]
    assert (row["label"], row["provenance"]) == ("BORDERLINE", "screen_failed")
    assert [p["attempt"] for p in result.log] == [0, 1]
    assert all(p["problem"].startswith("no answer: call failed") for p in result.log)


def test_reply_from_result_maps_statuses() -> None:
    from hbpsych_utils.llm import Result

    def res(status, text=None, refusal=False):
        return Result(key="k", model="m", provider="p", status=status, text=text,
                      refusal=refusal, error="boom" if status == "failed" else None)

    assert screening.reply_from_result(res("ok", "{}")) == screening.ScreenReply("{}")
    assert screening.reply_from_result(res("refused", "", True)).refused
    failed = screening.reply_from_result(res("failed"))
    assert not failed.refused and failed.error == "call failed: boom"
    assert screening.reply_from_result(res("not_run")).error.startswith("call not_run")


# --- 02_screening live, through the notebook ------------------------------------------------


def cohen_kappa_by_hand(a: list[str], b: list[str]) -> float:
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pe = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    return (po - pe) / (1 - pe) if pe < 1 else float("nan")


@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_02_live_on_the_partial_corpus(tmp_path: Path, mirror: Path) -> None:
    import csv

    import yaml

    from hbpsych_utils import runner

    first = [json.loads(line)["prompt_id"] for line in
             sources.fetch("healthbench_oss").read_text().splitlines()[:8]]
    profile = tmp_path / "live02.yaml"
    profile.write_text(yaml.safe_dump({
        "seed": 5, "notebooks": ["01_corpus", "02_screening"],
        "llm": {"simulator": True, "mode": "batch",
                "faults": [{"kind": "refusal", "prompt_id": first[5]}]},
        "corpus": {"allow_partial": True, "max_conversations": 8, "detect_language": False},
        "screening": {"mode": "live", "model": MODEL, "batch_size": 4},
    }))
    result = runner.run_profile(str(profile), outputs_root=tmp_path, echo=lambda _: None)
    assert result.ok, result.notebooks[-1]
    out = tmp_path / "live02" / "02_screening"
    m = json.loads((out / "metrics.json").read_text())
    rows = list(csv.DictReader((out / "screen.csv").open()))
    assert [r["prompt_id"] for r in rows] == first
    # the refusal hit the second batch of four: all four routed to review
    assert [r["provenance"] for r in rows] == ["model"] * 4 + ["model_refused"] * 4
    assert m["n_screened"] == 8 and m["n_model_refused"] == 4
    assert m["n_borderline"] == sum(r["label"] == "BORDERLINE" for r in rows) >= 4
    released = {json.loads(x)["prompt_id"]: json.loads(x)["label"]
                for x in sources.fetch("screening_labels").read_text().splitlines()}
    live = [r["label"] for r in rows]
    rel = [released[p] for p in first]
    a = m["agreement_with_release"]
    assert a["n_common"] == 8
    assert a["percent_agreement"] == sum(x == y for x, y in zip(live, rel, strict=True)) / 8
    kappa = cohen_kappa_by_hand(live, rel)
    if math.isnan(kappa):  # one label everywhere: kappa undefined, written as null
        assert a["cohen_kappa"] is None
    else:
        assert a["cohen_kappa"] == pytest.approx(kappa)
    confusion = list(csv.DictReader((out / "agreement_with_release.csv").open()))
    assert sum(int(r[c]) for r in confusion for c in screening.LABELS) == 8
    problems = list(csv.DictReader((out / "screen_problems.csv").open()))
    assert [p["problem"] for p in problems] == ["model refused the batch"]
    assert not (out / "translations.json").exists()


def test_replay_rejects_unknown_category_and_duplicate_ids(tmp_path: Path) -> None:
    good = {"prompt_id": "a", "label": "RELEVANT", "category": "mood", "confidence": "high"}
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(good) + "\n" + json.dumps({**good, "category": "cardio"}) + "\n")
    with pytest.raises(screening.ScreenError, match=r"s.jsonl:2: field 'category': 'cardio'"):
        screening.load_released_screen(p, ["mood", "none"])
    p.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(screening.ScreenError, match=r"s.jsonl:2: field 'prompt_id': duplicate a"):
        screening.load_released_screen(p, ["mood", "none"])
    p.write_text(json.dumps(good) + "\n")
    row = screening.load_released_screen(p, ["mood", "none"]).iloc[0].to_dict()
    assert row == {**good, "rationale": "", "provenance": "model"}
