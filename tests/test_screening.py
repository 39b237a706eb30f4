"""Screening: rubric vocabulary, released-screen replay, batched live screen with re-asks."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hbpsych_utils import screening, sources
from hbpsych_utils.corpus import Conversation, Message, RubricItem

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
    assert seen[0].schema["properties"]["records"]["items"]["properties"]["category"]["enum"] == [
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
