"""Machine translations of non-English conversations, as a reference for the reviewers.

The study gave reviewers an English translation of every non-English conversation in review:
one LLM call per conversation, with the released translation prompt, returning structured
output ``{prompt_id, source_language, is_english, turns_en: [{role, text}]}``. A translation is
only useful if it lines up with the conversation turn by turn, so a reply is accepted only with
the same number of turns in the same roles; anything else is re-asked a bounded number of
times and then logged, and the reviewer sees the original text alone. A translation never
replaces the original: the packet carries both.

The prompt is data (``translation_prompt`` in the registry). Its per-item variation was an
input file path; here the same input object (``{"prompt_id", "turns": [[role, content], ...]}``)
is given inline, at the end of the message, in place of that path.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import pandas as pd
from pydantic import TypeAdapter, ValidationError

from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.records import FileRecord, problems, read_text

if TYPE_CHECKING:
    from hbpsych_utils.llm import Request, Result
    from hbpsych_utils.llm.engine import Engine, Mode

log = logging.getLogger(__name__)

TRANSLATION_MAX_TOKENS = 8192
_PLACEHOLDER = re.compile(r"<per-item input file:[^>]*>")
LOG_COLUMNS = ("prompt_id", "attempt", "status", "problem")
STATUSES = ("translated", "is_english", "refused", "failed")


class TranslationError(ValueError):
    """A translation prompt that cannot be used."""


def prompt_instructions(prompt_doc: str) -> str:
    """The prompt given to the model: the released file's text after its first ``---`` line.

    The file opens with provenance notes for readers, separated from the verbatim prompt by a
    horizontal rule. A file without a rule is taken whole.
    """
    lines = prompt_doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "---":
            body = "\n".join(lines[i + 1 :]).strip()
            if not body:
                raise TranslationError("the translation prompt is empty after its '---' line")
            return body
    return prompt_doc.strip()


def translation_input(conv: Conversation) -> dict[str, str | list[list[str]]]:
    """The object the prompt describes: prompt id and ``[role, content]`` turns."""
    return {"prompt_id": conv.prompt_id, "turns": [[m.role, m.content] for m in conv.prompt]}


def translation_schema(conv: Conversation) -> dict[str, Any]:
    """The structured output for one conversation.

    ``prompt_id`` may only be this conversation's id and a turn's ``role`` only a role that
    occurs in it; the turn count and the order of roles are checked after the call (a JSON
    schema cannot pin an array's items position by position portably).
    """
    roles = sorted({m.role for m in conv.prompt})
    turn = {
        "type": "object",
        "properties": {"role": {"type": "string", "enum": roles}, "text": {"type": "string"}},
        "required": ["role", "text"],
        "additionalProperties": False,
    }
    return {
        "title": "translation",
        "type": "object",
        "properties": {
            "prompt_id": {"type": "string", "enum": [conv.prompt_id]},
            "source_language": {"type": "string"},
            "is_english": {"type": "boolean"},
            "turns_en": {"type": "array", "items": turn},
        },
        "required": ["prompt_id", "source_language", "is_english", "turns_en"],
        "additionalProperties": False,
    }


def translation_messages(instructions: str, conv: Conversation) -> tuple[dict[str, str], ...]:
    """The prompt with the conversation given inline where the study gave a file path."""
    where = "the JSON object at the end of this message"
    text = _PLACEHOLDER.sub(where, instructions)
    n = len(conv.prompt)
    text += (
        f"\n\nThe conversation has {n} turns: if it is not in English, turns_en holds {n} "
        f"entries.\n\n{json.dumps(translation_input(conv), ensure_ascii=False)}"
    )
    return ({"role": "user", "content": text},)


@dataclass(frozen=True)
class Parsed:
    """One reply, checked: ``status`` is ``translated``, ``is_english`` or ``invalid``."""

    status: str
    turns: list[dict[str, str]] | None = None
    source_language: str | None = None
    problem: str | None = None


def parse_translation(text: str | None, conv: Conversation) -> Parsed:
    """Check a reply against the conversation: its id, and same turn count and roles."""
    data = _reply_object(text)
    if isinstance(data, str):
        return Parsed("invalid", problem=data)
    problem = _header_problem(data, conv)
    if problem is not None:
        return Parsed("invalid", problem=problem)
    if data["is_english"]:
        return Parsed("is_english", source_language=data["source_language"])
    turns = _english_turns(data.get("turns_en"), conv)
    if isinstance(turns, str):
        return Parsed("invalid", problem=turns)
    return Parsed("translated", turns=turns, source_language=data["source_language"])


def _reply_object(text: str | None) -> dict[str, Any] | str:
    """The reply's JSON object (a markdown fence around it tolerated), or what is wrong."""
    if not text:
        return "empty reply"
    try:
        data = json.loads(re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip()))
    except json.JSONDecodeError as exc:
        return f"reply is not valid JSON ({exc.msg})"
    if not isinstance(data, dict):
        return "reply is not a JSON object"
    return data


def _header_problem(data: dict[str, Any], conv: Conversation) -> str | None:
    """What is wrong with the reply's ``prompt_id``, ``source_language`` or ``is_english``."""
    if data.get("prompt_id") != conv.prompt_id:
        return f"field 'prompt_id': {data.get('prompt_id')!r} is not {conv.prompt_id!r}"
    lang = data.get("source_language")
    if not isinstance(lang, str) or not lang.strip():
        return "field 'source_language' missing or empty"
    is_english = data.get("is_english")
    if not isinstance(is_english, bool):
        return f"field 'is_english': {is_english!r} is not a boolean"
    return None


def _english_turns(turns: object, conv: Conversation) -> list[dict[str, str]] | str:
    """The reply's ``turns_en`` as ``{role, content}`` turns, one per turn of the conversation
    in the same roles, or what is wrong."""
    if not isinstance(turns, list):
        return "field 'turns_en' missing or not a list"
    if len(turns) != len(conv.prompt):
        return (f"field 'turns_en': {len(turns)} turn(s), the conversation has "
                f"{len(conv.prompt)}")
    out = []
    for i, (t, m) in enumerate(zip(turns, conv.prompt, strict=True)):
        if not isinstance(t, dict) or t.get("role") != m.role:
            role = t.get("role") if isinstance(t, dict) else None
            return (f"field 'turns_en[{i}].role': {role!r}, the conversation's turn {i} is "
                    f"{m.role!r}")
        if not isinstance(t.get("text"), str) or not t["text"].strip():
            return f"field 'turns_en[{i}].text' missing or empty"
        out.append({"role": m.role, "content": t["text"]})
    return out


class TranslationProblem(TypedDict):
    """A problem a translation met: which conversation, at which attempt, what came back."""

    prompt_id: str
    attempt: int
    status: Literal["refused", "invalid"]
    problem: str


class TranslationCounts(TypedDict):
    """What came of the conversations asked (``ScreeningMetrics`` fields; ``STATUSES``)."""

    n_translation_requested: int
    n_translation_translated: int
    n_translation_is_english: int
    n_translation_refused: int
    n_translation_failed: int


@dataclass
class TranslationRun:
    translations: dict[str, list[dict[str, str]]]
    """prompt_id -> turn-by-turn English ``{role, content}`` (``review_set.build_packet``)."""
    table: pd.DataFrame
    """One row per conversation asked: prompt_id, status, source_language, attempts."""
    log: list[TranslationProblem] = field(default_factory=list)
    """Every problem met."""

    def metrics(self) -> TranslationCounts:
        counts = self.table["status"].value_counts() if len(self.table) else {}
        return TranslationCounts(
            n_translation_requested=len(self.table),
            n_translation_translated=int(counts.get("translated", 0)),
            n_translation_is_english=int(counts.get("is_english", 0)),
            n_translation_refused=int(counts.get("refused", 0)),
            n_translation_failed=int(counts.get("failed", 0)))


def translate(
    engine: Engine,
    model: str,
    conversations: Sequence[Conversation],
    instructions: str,
    *,
    mode: Mode = "batch",
    max_reasks: int = 2,
    max_tokens: int = TRANSLATION_MAX_TOKENS,
) -> TranslationRun:
    """Translate each conversation with one call; re-ask invalid replies, then log and give up.

    Default sampling (no temperature). A re-ask is a new call (``sample`` = attempt); a
    refusal is kept and not re-asked, as for every other refusal in the study. A reply saying
    the conversation is already English is accepted as such (no translation, not a failure).
    """
    by_id = {c.prompt_id: c for c in conversations}
    outcome: dict[str, Parsed] = {}
    attempts: dict[str, int] = {}
    problems: list[TranslationProblem] = []
    pending = list(by_id)
    for attempt in range(max_reasks + 1):
        if not pending:
            break
        requests = [_request(model, instructions, by_id[pid], attempt, max_tokens)
                    for pid in pending]
        results = engine.run(requests, mode=mode if attempt == 0 else "sync")
        again = []
        for pid, res in zip(pending, results, strict=True):
            attempts[pid] = attempt + 1
            outcome[pid] = _read_result(res, by_id[pid])
            if outcome[pid].status in ("refused", "invalid"):
                problems.append(_problem(pid, attempt, outcome[pid]))
            if outcome[pid].status == "invalid":
                again.append(pid)
        pending = again
    for pid in pending:
        outcome[pid] = Parsed("failed", problem=outcome[pid].problem)
        log.warning("translation of %s: no valid reply after %d re-asks; reviewers get the "
                    "original only", pid, max_reasks)
    rows = [{"prompt_id": pid, "status": outcome[pid].status,
             "source_language": outcome[pid].source_language or "", "attempts": attempts[pid]}
            for pid in by_id]
    table = pd.DataFrame(rows, columns=["prompt_id", "status", "source_language", "attempts"])
    translations = {pid: p.turns for pid, p in outcome.items() if p.turns is not None}
    return TranslationRun(translations, table, problems)


def _request(model: str, instructions: str, conv: Conversation, attempt: int,
             max_tokens: int) -> Request:
    """The call translating ``conv`` at ``attempt`` (0 first; a re-ask is a new sample)."""
    from hbpsych_utils.llm import ChatMessage, Request

    pid = conv.prompt_id
    return Request(model=model, messages=tuple(
                       ChatMessage(m["role"], m["content"])
                       for m in translation_messages(instructions, conv)),
                   temperature=None, max_tokens=max_tokens,
                   response_schema=translation_schema(conv), tag="translate",
                   sample=attempt, metadata={"prompt_id": pid, "attempt": attempt})


def _read_result(res: Result, conv: Conversation) -> Parsed:
    """A call's result as a checked reply: ``refused``, or :func:`parse_translation`'s verdict
    (a call that gave no text is ``invalid``, and re-asked)."""
    if res.status == "refused" or res.refusal:
        return Parsed("refused", problem="model refused to translate")
    if res.status != "ok":
        return Parsed("invalid", problem=f"call {res.status}: {res.error or 'no text'}")
    return parse_translation(res.text, conv)


def _problem(pid: str, attempt: int, parsed: Parsed) -> TranslationProblem:
    assert parsed.problem is not None  # a refused or invalid reply says why
    status: Literal["refused", "invalid"] = "refused" if parsed.status == "refused" else "invalid"
    return {"prompt_id": pid, "attempt": attempt, "status": status, "problem": parsed.problem}


def non_english_ids(flags: Mapping[str, object]) -> list[str]:
    """Prompt ids flagged non-English (values: ``corpus.Language`` or plain booleans)."""
    return sorted(pid for pid, f in flags.items() if bool(getattr(f, "non_english", f)))


class TranslatedTurn(FileRecord):
    """One turn of a stored translation: the conversation's role and the English text."""

    role: str
    content: str


_TRANSLATIONS = TypeAdapter(dict[str, list[TranslatedTurn]])

TRANSLATIONS_FILE = "translations.json"


def read_translations(path: Path | str | None, *, missing_ok: bool = False
                      ) -> dict[str, list[dict[str, str]]]:
    """``translations.json`` as 02 writes it: prompt_id -> ``[{role, content}, ...]``.

    ``None`` (or, with ``missing_ok``, no file) means no translations: 02 ran without a
    translation model.
    """
    if path is None or (missing_ok and not Path(path).is_file()):
        return {}
    try:
        data = _TRANSLATIONS.validate_json(read_text(path, error=TranslationError))
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err["loc"]:
            raise TranslationError(
                f"{path}: expected an object mapping prompt_id to turns") from None
        where, problem = problems(exc)[0]
        raise TranslationError(f"{path}: translation of {err['loc'][0]}: field {where!r}: "
                               f"{problem} (expected a list of {{role, content}} turns)") from None
    return {pid: [t.model_dump() for t in turns] for pid, turns in data.items()}
