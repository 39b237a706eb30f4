"""Machine translations for reviewers: prompt, schema, validation, re-asks, packet wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hbpsych_utils.construction import review_set, translation
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.core import sources
from hbpsych_utils.llm import Result

PROMPT_DOC = """# Notes for readers

Where this prompt came from.

---

Translate it.
STEP 1 - Read: <per-item input file: ex_<N>.json>
STEP 2 - Return structured output.
"""


def conv(pid: str, *turns: tuple[str, str]) -> Conversation:
    return Conversation(pid, tuple(Message(r, t) for r, t in turns), (RubricItem("c", 1),))


ES = conv("es1", ("user", "Me duele la cabeza"), ("assistant", "¿Desde cuándo?"),
          ("user", "Desde ayer"))


def reply(pid: str = "es1", roles=("user", "assistant", "user"), is_english=False,
          lang="Spanish") -> str:
    turns = [{"role": r, "text": f"turn {i}"} for i, r in enumerate(roles)]
    return json.dumps({"prompt_id": pid, "source_language": lang, "is_english": is_english,
                       "turns_en": [] if is_english else turns})


def test_instructions_are_the_prompt_after_the_rule_with_the_input_inline() -> None:
    instructions = translation.prompt_instructions(PROMPT_DOC)
    assert instructions.startswith("Translate it.") and "readers" not in instructions
    text = translation.translation_messages(instructions, ES)[0]["content"]
    assert "<per-item input file" not in text
    assert "Read: the JSON object at the end of this message" in text
    assert "has 3 turns" in text and "turns_en holds 3 entries" in text
    payload = json.loads(text[text.rindex("\n") + 1:])
    assert payload == {"prompt_id": "es1", "turns": [["user", "Me duele la cabeza"],
                                                     ["assistant", "¿Desde cuándo?"],
                                                     ["user", "Desde ayer"]]}
    assert translation.prompt_instructions("no rule here\n") == "no rule here"


def test_the_released_prompt_loads(mirror: Path) -> None:
    text = translation.prompt_instructions(sources.fetch("translation_prompt").read_text())
    assert text.startswith("You are a professional medical translator")
    assert "Recovered" not in text  # the provenance notes stay out of the prompt
    message = translation.translation_messages(text, ES)[0]["content"]
    assert "<per-item input file" not in message and message.endswith('["user", "Desde ayer"]]}')


def test_schema_pins_the_id_and_the_roles_that_occur() -> None:
    schema = translation.translation_schema(ES)
    props = schema["properties"]
    assert props["prompt_id"]["enum"] == ["es1"]
    assert props["turns_en"]["items"]["properties"]["role"]["enum"] == ["assistant", "user"]
    assert schema["required"] == ["prompt_id", "source_language", "is_english", "turns_en"]


def test_parse_accepts_a_matching_translation() -> None:
    parsed = translation.parse_translation(reply(), ES)
    assert parsed.status == "translated" and parsed.source_language == "Spanish"
    assert parsed.turns == [{"role": "user", "content": "turn 0"},
                            {"role": "assistant", "content": "turn 1"},
                            {"role": "user", "content": "turn 2"}]
    fenced = translation.parse_translation("```json\n" + reply() + "\n```", ES)
    assert fenced.status == "translated"
    english = translation.parse_translation(reply(is_english=True, lang="English"), ES)
    assert english.status == "is_english" and english.turns is None


@pytest.mark.parametrize(("text", "problem"), [
    (reply(roles=("user", "assistant")), "'turns_en': 2 turn(s), the conversation has 3"),
    (reply(roles=("user", "user", "user")), "'turns_en[1].role': 'user'"),
    (reply(pid="other"), "'prompt_id': 'other' is not 'es1'"),
    (reply(lang=""), "'source_language' missing"),
    ('{"prompt_id": "es1", "source_language": "Spanish", "is_english": "no", "turns_en": []}',
     "'is_english': 'no' is not a boolean"),
    ('{"prompt_id": "es1", "source_', "not valid JSON"),
    ("", "empty reply"),
])
def test_parse_rejects_what_does_not_line_up(text: str, problem: str) -> None:
    parsed = translation.parse_translation(text, ES)
    assert parsed.status == "invalid" and problem in parsed.problem


class ScriptedEngine:
    """Answers each request from a script keyed by (prompt_id, sample); records every run."""

    def __init__(self, script: dict[tuple[str, int], tuple[str, str | None]]) -> None:
        self.script = script
        self.runs: list[tuple[str, list]] = []

    def run(self, requests, mode="sync"):
        self.runs.append((mode, list(requests)))
        out = []
        for r in requests:
            status, text = self.script[(r.metadata["prompt_id"], r.sample)]
            out.append(Result(key=f"{r.metadata['prompt_id']}-{r.sample}", model=r.model,
                              provider="p", status=status, text=text,
                              refusal=status == "refused", error="boom" if status == "failed"
                              else None))
        return out


def test_translate_reasks_then_logs_and_keeps_refusals() -> None:
    pt = conv("pt1", ("user", "Estou muito cansado"))
    ru = conv("ru1", ("user", "Болит голова"))
    fr = conv("fr1", ("user", "J'ai mal"))
    engine = ScriptedEngine({
        ("es1", 0): ("ok", reply(roles=("user",))),           # wrong turn count
        ("es1", 1): ("ok", reply()),                          # fixed on the re-ask
        ("pt1", 0): ("refused", None),                        # kept, never re-asked
        ("ru1", 0): ("failed", None),
        ("ru1", 1): ("ok", "not json"),
        ("ru1", 2): ("ok", reply(pid="ru1", roles=("assistant",))),
        ("fr1", 0): ("ok", reply(pid="fr1", roles=(), is_english=True, lang="English")),
    })
    run = translation.translate(engine, "m", [ES, pt, ru, fr], "Translate.", max_reasks=2)
    assert [mode for mode, _ in engine.runs] == ["batch", "sync", "sync"]
    assert [[(r.metadata["prompt_id"], r.sample) for r in reqs] for _, reqs in engine.runs] == [
        [("es1", 0), ("pt1", 0), ("ru1", 0), ("fr1", 0)], [("es1", 1), ("ru1", 1)],
        [("ru1", 2)]]
    assert all(r.temperature is None and r.tag == "translate" for _, rs in engine.runs for r in rs)
    table = run.table.set_index("prompt_id")
    assert table["status"].to_dict() == {"es1": "translated", "pt1": "refused",
                                         "ru1": "failed", "fr1": "is_english"}
    assert table["attempts"].to_dict() == {"es1": 2, "pt1": 1, "ru1": 3, "fr1": 1}
    assert list(run.translations) == ["es1"]
    assert [p["problem"].split(":")[0] for p in run.log if p["prompt_id"] == "ru1"] == [
        "call failed", "reply is not valid JSON (Expecting value)", "field 'turns_en[0].role'"]
    assert run.metrics() == {"n_translation_requested": 4, "n_translation_translated": 1,
                             "n_translation_is_english": 1, "n_translation_refused": 1,
                             "n_translation_failed": 1}


@pytest.mark.slow
def test_translate_through_the_simulator(tmp_path: Path) -> None:
    from hbpsych_utils.llm.session import open_engine

    single = conv("de1", ("user", "Ich habe seit Tagen Kopfschmerzen und kann kaum schlafen"))
    with open_engine({"simulator": True}, tmp_path, progress=False) as engine:
        run = translation.translate(engine, "claude-haiku-4-5-20251001", [single], "Translate.")
    # the simulator answers from the schema: the id is pinned and the role can only be "user";
    # "1 entries" in the prompt makes it generate one turn
    assert run.table.loc[0, "status"] == "translated"
    assert [t["role"] for t in run.translations["de1"]] == ["user"]
    assert (tmp_path / "llm_store.sqlite").is_file()


def test_translations_reach_the_reviewer_packet(tmp_path: Path) -> None:
    path = tmp_path / "translations.json"
    turns = translation.parse_translation(reply(), ES).turns
    path.write_text(json.dumps({"es1": turns}))
    loaded = translation.read_translations(path)
    set_table = pd.DataFrame({"review_id": ["R0001"], "prompt_id": ["es1"],
                               "kind": ["screened_in"]})
    items = review_set.build_packet(set_table, [ES], loaded)
    assert items[0]["translation"] == turns and items[0]["turns"][0]["content"].startswith("Me")
    path.write_text(json.dumps({"es1": [{"role": "user"}]}))
    with pytest.raises(translation.TranslationError, match="translation of es1"):
        translation.read_translations(path)


def test_non_english_ids_reads_flags() -> None:
    from hbpsych_utils.construction.corpus import Language

    flags = {"a": Language("es", 0.99, True), "b": Language("en", 0.99, False), "c": True}
    assert translation.non_english_ids(flags) == ["a", "c"]
