"""LLM screening of the corpus against a written rubric, and replay of the released screen.

The study screens every conversation, judged on its user turns, in independent batches of 50:
each batch gets the verbatim rubric and returns one schema-constrained record per conversation.
A record outside the schema is re-asked (only the conversations that lack a valid record, a
bounded number of times); a model refusal routes the whole batch to human review
(``BORDERLINE`` with ``model_refused`` provenance). The same machinery runs the recall-round
screen with the recovery rubric (tiers instead of labels): a ``ScreenSpec`` says which fields a
record has and which values each may take, so another specialty is a new spec, not new code.

Model calls are made by a caller-supplied ``ask`` function (the LLM engine in notebooks, a fake in
unit tests): it takes a list of ``ScreenPrompt`` and returns one ``ScreenReply`` per prompt.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd
from pydantic import TypeAdapter, ValidationInfo, field_validator

from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core import jsonl
from hbpsych_utils.core.records import FileRecord, invalid, read_csv, read_json, read_text, validate

if TYPE_CHECKING:
    from hbpsych_utils.llm import Result
    from hbpsych_utils.llm.engine import Engine, Mode

log = logging.getLogger(__name__)

LABELS = ("RELEVANT", "BORDERLINE", "NOT_RELEVANT")
CONFIDENCES = ("high", "medium", "low")
RECALL_CANDIDATE_TIERS = ("CLEAR", "POSSIBLE")
"""The recall screen's tiers that make a round-2 candidate (the subgroups of its tally)."""
RECALL_NO_TIER = "NO"
"""The recall screen's tier that stays out: round 2 draws its controls from it."""
RECALL_TIERS = (*RECALL_CANDIDATE_TIERS, RECALL_NO_TIER)
RECALL_BUCKETS = (
    "A_substance", "B_somatic_emotion", "C_topical", "D_nonenglish", "standard", "none",
)
MAX_REASON_WORDS = 15


class ScreenError(ValueError):
    """A screen record or file that breaks the schema; names file, line and field."""


@dataclass(frozen=True)
class ScreenSpec:
    """What one screen asks for: record fields, allowed values, and what a refusal means."""

    name: str
    rubric: str
    choices: dict[str, tuple[str, ...]]
    """Enumerated fields and their allowed values (e.g. label, category, confidence)."""
    reason_field: str
    decision_field: str
    refusal_record: dict[str, str]
    """The record a refused item gets (routed to human review)."""

    def record_schema(self, *, with_prompt_id: bool = True) -> dict[str, Any]:
        """JSON schema of one record: the enumerated fields and the short reason."""
        props: dict[str, Any] = {"prompt_id": {"type": "string"}} if with_prompt_id else {}
        props.update({k: {"type": "string", "enum": list(v)} for k, v in self.choices.items()})
        props[self.reason_field] = {
            "type": "string",
            "description": f"at most {MAX_REASON_WORDS} words",
        }
        return {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }

    def schema(self, prompt_ids: Sequence[str] | None = None) -> dict[str, Any]:
        """JSON schema of a batch reply.

        With the batch's ``prompt_ids`` (what the live screen sends), ``records`` is an object
        with exactly one required property per prompt id, each holding that conversation's
        record: the schema itself then forbids a missing, duplicated or invented id, which a
        list of records cannot. Without ids, ``records`` is a list of records that carry their
        ``prompt_id`` (the layout of the released screen).
        """
        if prompt_ids is None:
            records: dict[str, Any] = {"type": "array", "items": self.record_schema()}
        else:
            item = self.record_schema(with_prompt_id=False)
            records = {
                "type": "object",
                "properties": {pid: item for pid in prompt_ids},
                "required": list(prompt_ids),
                "additionalProperties": False,
            }
        return {
            "title": f"{self.name}_batch",
            "type": "object",
            "properties": {"records": records},
            "required": ["records"],
            "additionalProperties": False,
        }


def vocabulary_from_rubric(rubric: str) -> tuple[str, ...]:
    """The category vocabulary a rubric declares: the backticked terms on its vocabulary line.

    Read from the rubric rather than written into code, so another specialty's rubric brings
    its own vocabulary. Of the lines mentioning a "controlled vocabulary", the one with the most
    backticked terms is the list (a table row that merely mentions it has one or two).
    """
    candidates = [
        tuple(re.findall(r"`([^`]+)`", line))
        for line in rubric.splitlines()
        if "controlled vocabulary" in line.lower()
    ]
    terms = max(candidates, key=len, default=())
    if len(terms) < 3:
        raise ScreenError(
            "the rubric has no line naming a 'controlled vocabulary' with backticked terms; "
            "pass the vocabulary explicitly"
        )
    if len(set(terms)) != len(terms):
        raise ScreenError(f"the rubric's category vocabulary repeats a term: {terms}")
    return terms


def screening_spec(rubric: str, vocabulary: Sequence[str] | None = None) -> ScreenSpec:
    vocab = tuple(vocabulary) if vocabulary else vocabulary_from_rubric(rubric)
    return ScreenSpec(
        name="screening",
        rubric=rubric,
        choices={"label": LABELS, "category": vocab, "confidence": CONFIDENCES},
        reason_field="rationale",
        decision_field="label",
        refusal_record={"label": "BORDERLINE", "category": "none", "confidence": "low",
                        "rationale": "model refused to screen"},
    )


def buckets_from_rubric(rubric: str, field_name: str = "bucket") -> tuple[str, ...]:
    """The values a rubric's output table allows for ``field_name`` (its backticked terms).

    The recall rubric lists its buckets in the row of its output table whose first cell is
    `` `bucket` ``; reading them from there lets another specialty's recall rubric bring its
    own miss types.
    """
    for line in rubric.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] == f"`{field_name}`":
            terms = tuple(re.findall(r"`([^`]+)`", "|".join(cells[1:])))
            if len(terms) >= 2 and len(set(terms)) == len(terms):
                return terms
    raise ScreenError(
        f"the rubric has no output-table row for `{field_name}` listing its backticked values; "
        "pass the buckets explicitly"
    )


def recall_spec(rubric: str, buckets: Sequence[str] | None = None) -> ScreenSpec:
    """The recall-round screen: tiers CLEAR/POSSIBLE/NO, the rubric's buckets (read from it
    when not given), confidence and a reason; a refusal makes the item a POSSIBLE candidate."""
    if buckets is None:
        buckets = buckets_from_rubric(rubric)
    return ScreenSpec(
        name="recall",
        rubric=rubric,
        choices={"tier": RECALL_TIERS, "bucket": tuple(buckets), "confidence": CONFIDENCES},
        reason_field="reason",
        decision_field="tier",
        refusal_record={"tier": "POSSIBLE", "bucket": "none", "confidence": "low",
                        "reason": "model refused to screen"},
    )


# --- replay -------------------------------------------------------------------------------


class ReleasedScreenRecord(FileRecord):
    """One line of the released screen (``screening_labels``): the record and its provenance.

    ``category`` is checked against the rubric's vocabulary, passed as validation context.
    """

    prompt_id: str
    label: str
    category: str
    confidence: str
    rationale: str = ""
    provenance: str = "model"

    @field_validator("label", "category", "confidence", mode="before")
    @classmethod
    def _allowed(cls, value: object, info: ValidationInfo) -> object:
        assert info.field_name is not None  # a field validator's
        allowed = {"label": LABELS, "confidence": CONFIDENCES,
                   "category": tuple((info.context or {}).get("vocabulary", ()))}[info.field_name]
        if value not in allowed:
            raise invalid(f"{value!r} is not one of {allowed}")
        return value


def load_released_screen(path: Path | str, vocabulary: Sequence[str]) -> pd.DataFrame:
    """The released screen (one JSON record per line), validated line by line."""
    path = Path(path)
    rows = []
    seen: set[str] = set()
    context = {"vocabulary": tuple(vocabulary)}
    for lineno, rec in jsonl.records(path, error=ScreenError):
        parsed = validate(ReleasedScreenRecord, rec, f"{path}:{lineno}", ScreenError,
                          context=context)
        if parsed.prompt_id in seen:
            raise ScreenError(f"{path}:{lineno}: field 'prompt_id': duplicate {parsed.prompt_id}")
        seen.add(parsed.prompt_id)
        rows.append(parsed.model_dump())
    if not rows:
        raise ScreenError(f"{path}: no records (expected one screened conversation per line)")
    return pd.DataFrame(rows, columns=list(ReleasedScreenRecord.model_fields))


SCREEN_FILE = "screen.csv"
VOCABULARY_FILE = "vocabulary.json"


def read_screen(path: Path | str) -> pd.DataFrame:
    """02's ``screen.csv`` as later stages read it: every column a string, nothing as NaN."""
    screen = read_csv(path, error=ScreenError, dtype=str, keep_default_na=False)
    missing = {"prompt_id", "label"} - set(screen.columns)
    if missing:
        raise ScreenError(f"{path}: missing column(s) {sorted(missing)}")
    return screen


def read_vocabulary(path: Path | str) -> tuple[str, ...]:
    """02's ``vocabulary.json``: the category vocabulary the reviewers choose from."""
    data = read_json(path, error=ScreenError)
    return validate(TypeAdapter(tuple[str, ...]), data, str(path), ScreenError)


def screen_tables(screen: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Label x category and label x confidence counts, with totals."""
    by_cat = pd.crosstab(screen["category"], screen["label"], margins=True, margins_name="total")
    by_conf = pd.crosstab(screen["confidence"], screen["label"], margins=True, margins_name="total")
    order = [c for c in (*LABELS, "total") if c in by_cat.columns]
    conf_order = [c for c in (*CONFIDENCES, "total") if c in by_conf.index]
    return by_cat[order], by_conf.loc[conf_order, order]


class ScreenCounts(TypedDict):
    """A screen's counts (``ScreeningMetrics`` fields)."""

    n_screened: int
    n_relevant: int
    n_borderline: int
    n_not_relevant: int
    n_model_refused: int
    n_screen_failed: int
    confidence_counts: dict[str, int]
    relevant_by_category: dict[str, int]
    borderline_by_category: dict[str, int]


def screen_metrics(screen: pd.DataFrame) -> ScreenCounts:
    labels = screen["label"].value_counts()

    def by_category(label: str) -> dict[str, int]:
        counts = screen.loc[screen["label"] == label, "category"].value_counts()
        return {str(k): int(v) for k, v in counts.items()}

    return ScreenCounts(
        n_screened=len(screen),
        n_relevant=int(labels.get("RELEVANT", 0)),
        n_borderline=int(labels.get("BORDERLINE", 0)),
        n_not_relevant=int(labels.get("NOT_RELEVANT", 0)),
        n_model_refused=int((screen["provenance"] == "model_refused").sum()),
        n_screen_failed=int((screen["provenance"] == "screen_failed").sum()),
        confidence_counts={
            str(k): int(v) for k, v in screen["confidence"].value_counts().items()
        },
        relevant_by_category=by_category("RELEVANT"),
        borderline_by_category=by_category("BORDERLINE"),
    )


# --- live -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScreenPrompt:
    """One batch request: chat messages plus the JSON schema the reply must follow."""

    batch: int
    attempt: int
    prompt_ids: tuple[str, ...]
    messages: tuple[dict[str, str], ...]
    schema: dict[str, Any]


@dataclass(frozen=True)
class ScreenReply:
    """A model's answer to one batch prompt. ``error`` says why a call gave no answer (the
    reply then fails validation like an unreadable one, so the batch is re-asked)."""

    text: str
    refused: bool = False
    error: str | None = None


Ask = Callable[[list[ScreenPrompt]], list[ScreenReply]]


def user_turns(conv: Conversation) -> list[str]:
    """What the screen judges: the user side of the conversation, in order."""
    return [m.content for m in conv.prompt if m.role == "user"]


def batch_messages(spec: ScreenSpec, conversations: Sequence[Conversation]
                   ) -> tuple[dict[str, str], ...]:
    """The verbatim rubric, then the batch as JSON; no examples, no shared context."""
    items = [{"prompt_id": c.prompt_id, "user_turns": user_turns(c)} for c in conversations]
    fields = ", ".join([*spec.choices, spec.reason_field])
    instruction = (
        f"{spec.rubric}\n\n---\n\nApply the rubric above to each of the {len(items)} "
        f"conversations below (user turns only). Return an object whose `records` maps each "
        f"conversation's prompt_id to exactly one record with the fields {fields}; the "
        f"{spec.reason_field} has at most {MAX_REASON_WORDS} words."
        f"\n\n{json.dumps(items, ensure_ascii=False)}"
    )
    return ({"role": "user", "content": instruction},)


def parse_batch_reply(
    spec: ScreenSpec, text: str, expected_ids: Sequence[str]
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Valid records by prompt_id, and a list of problems (missing, invalid, unexpected)."""
    problems: list[str] = []
    try:
        data = json.loads(_strip_fences(text))
    except json.JSONDecodeError as exc:
        return {}, [f"reply is not valid JSON ({exc.msg})"]
    records = data.get("records") if isinstance(data, dict) else data
    if isinstance(records, dict):  # the keyed layout the live schema asks for
        records = [
            {**rec, "prompt_id": pid} if isinstance(rec, dict) else rec
            for pid, rec in records.items()
        ]
    if not isinstance(records, list):
        return {}, ["reply has no 'records' object or list"]
    wanted = set(expected_ids)
    valid: dict[str, dict[str, str]] = {}
    for i, rec in enumerate(records):
        problem = _record_problem(spec, rec)
        pid = rec.get("prompt_id") if isinstance(rec, dict) else None
        if problem:
            problems.append(f"record {i} ({pid}): {problem}")
        elif pid not in wanted:
            problems.append(f"record {i}: prompt_id {pid!r} is not in this batch")
        elif pid in valid:
            problems.append(f"record {i}: duplicate prompt_id {pid}")
        else:
            valid[pid] = {k: rec[k] for k in (*spec.choices, spec.reason_field)}
    problems += [f"{pid}: no record" for pid in expected_ids if pid not in valid]
    return valid, problems


def _strip_fences(text: str) -> str:
    return re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())


def _record_problem(spec: ScreenSpec, rec: object) -> str | None:
    if not isinstance(rec, dict):
        return "not an object"
    for key, allowed in spec.choices.items():
        if rec.get(key) not in allowed:
            return f"field {key!r}: {rec.get(key)!r} not in the allowed values"
    reason = rec.get(spec.reason_field)
    if not isinstance(reason, str):
        return f"field {spec.reason_field!r} missing"
    if len(reason.split()) > MAX_REASON_WORDS:
        return f"field {spec.reason_field!r} has more than {MAX_REASON_WORDS} words"
    return None


LOG_COLUMNS = ("batch", "attempt", "prompt_id", "problem")
"""The columns of a live screen's problem log (``LiveScreen.log``), as 02 and 04 write it."""


class ScreenProblem(TypedDict):
    """A problem a live screen met (``LOG_COLUMNS``)."""

    batch: int
    attempt: int
    prompt_id: str | None
    problem: str


@dataclass
class LiveScreen:
    table: pd.DataFrame
    log: list[ScreenProblem] = field(default_factory=list)
    """Every problem met: batch, attempt, prompt_id (when known) and what was wrong
    (``LOG_COLUMNS``)."""


def run_screen(
    spec: ScreenSpec,
    conversations: Sequence[Conversation],
    ask: Ask,
    *,
    batch_size: int = 50,
    max_reasks: int = 2,
) -> LiveScreen:
    """Screen ``conversations`` in independent batches; re-ask only what lacks a valid record.

    After ``max_reasks`` further attempts an item still without a record is logged and routed
    to human review like a refusal, with ``screen_failed`` provenance: an unscreened item must
    never silently become an exclusion.
    """
    by_id = {c.prompt_id: c for c in conversations}
    ids = list(by_id)
    pending = {b: ids[i : i + batch_size] for b, i in enumerate(range(0, len(ids), batch_size))}
    screened = _Screened()
    for attempt in range(max_reasks + 1):
        if not pending:
            break
        prompts = [
            ScreenPrompt(b, attempt, tuple(pids), batch_messages(spec, [by_id[p] for p in pids]),
                         spec.schema(pids))
            for b, pids in pending.items()
        ]
        pending = {}
        for prompt, reply in zip(prompts, ask(prompts), strict=True):
            missing = _take_reply(spec, prompt, reply, screened)
            if missing:
                pending[prompt.batch] = missing
    for pids in pending.values():
        for pid in pids:
            failed = dict(spec.refusal_record)
            failed[spec.reason_field] = "no valid record after re-asks"
            screened.keep(pid, failed, "screen_failed")
            log.warning("%s screen: no valid record for %s after %d re-asks", spec.name, pid,
                        max_reasks)
    rows = [{"prompt_id": pid, **screened.records[pid], "provenance": screened.provenance[pid]}
            for pid in ids]
    return LiveScreen(pd.DataFrame(rows), screened.problems)


@dataclass
class _Screened:
    """A live screen so far: each item's record and where it came from, and the problems."""

    records: dict[str, dict[str, str]] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)
    problems: list[ScreenProblem] = field(default_factory=list)

    def keep(self, pid: str, record: dict[str, str], provenance: str) -> None:
        self.records[pid] = record
        self.provenance[pid] = provenance

    def problem(self, prompt: ScreenPrompt, problem: str) -> None:
        self.problems.append({"batch": prompt.batch, "attempt": prompt.attempt,
                              "prompt_id": None, "problem": problem})


def _take_reply(spec: ScreenSpec, prompt: ScreenPrompt, reply: ScreenReply,
                screened: _Screened) -> list[str]:
    """Keep what one batch's reply settles; return the prompt ids to ask again. A refusal
    settles the whole batch (routed to human review, not re-asked)."""
    if reply.refused:
        for pid in prompt.prompt_ids:
            screened.keep(pid, dict(spec.refusal_record), "model_refused")
        screened.problem(prompt, "model refused the batch")
        return []
    valid: dict[str, dict[str, str]]
    if reply.error is not None:
        valid, issues = {}, [f"no answer: {reply.error}"]
    else:
        valid, issues = parse_batch_reply(spec, reply.text, prompt.prompt_ids)
    for pid, rec in valid.items():
        screened.keep(pid, rec, "model")
    for issue in issues:
        screened.problem(prompt, issue)
    return [p for p in prompt.prompt_ids if p not in valid]


SCREEN_MAX_TOKENS = 8192
"""Output cap of a screening call: 50 records of a few dozen tokens each fit well inside."""


def engine_ask(
    engine: Engine,
    model: str,
    *,
    mode: Mode = "batch",
    tag: str = "screen",
    max_tokens: int = SCREEN_MAX_TOKENS,
) -> Ask:
    """An ``Ask`` that sends screen prompts through the LLM engine.

    Default sampling (no temperature), as the study screened. A re-ask is a new call, not a
    cache hit: the attempt number is the request's ``sample``. First attempts use ``mode``
    (batch APIs where the provider has one); re-asks, few and small, go synchronously. A
    provider refusal becomes ``refused``; a call that failed (retries exhausted, budget cap)
    becomes a reply with an ``error``, which ``run_screen`` re-asks and finally routes to
    human review.
    """
    from hbpsych_utils.llm import ChatMessage, Request

    def ask(prompts: list[ScreenPrompt]) -> list[ScreenReply]:
        if not prompts:
            return []
        requests = [
            Request(model=model,
                    messages=tuple(ChatMessage(m["role"], m["content"]) for m in p.messages),
                    temperature=None, max_tokens=max_tokens,
                    response_schema=p.schema, tag=tag, sample=p.attempt,
                    metadata={"batch": p.batch, "attempt": p.attempt,
                              "n_conversations": len(p.prompt_ids)})
            for p in prompts
        ]
        first = all(p.attempt == 0 for p in prompts)
        results = engine.run(requests, mode=mode if first else "sync")
        return [reply_from_result(r) for r in results]

    return ask


def reply_from_result(result: Result) -> ScreenReply:
    """Map an engine ``Result`` onto a ``ScreenReply`` (see ``engine_ask``)."""
    if result.status == "refused" or result.refusal:
        return ScreenReply("", refused=True)
    if result.status == "ok" and result.text is not None:
        return ScreenReply(result.text)
    return ScreenReply("", error=f"call {result.status}: {result.error or 'no text'}")


class ReleaseAgreement(TypedDict):
    """A live screen against the released one, on the conversations both screened."""

    n_common: int
    confusion: pd.DataFrame
    """Released labels (rows) by live labels (columns)."""
    cohen_kappa: float
    percent_agreement: float


def agreement_with_release(live: pd.DataFrame, released: pd.DataFrame) -> ReleaseAgreement:
    """Confusion matrix (released rows x live columns) and Cohen's kappa on common items."""
    from hbpsych_utils.construction.agreement import cohen_kappa

    merged = released[["prompt_id", "label"]].merge(
        live[["prompt_id", "label"]], on="prompt_id", suffixes=("_released", "_live")
    )
    confusion = pd.crosstab(merged["label_released"], merged["label_live"]).reindex(
        index=list(LABELS), columns=list(LABELS), fill_value=0
    )
    kappa = cohen_kappa(merged["label_released"].tolist(), merged["label_live"].tolist(),
                        categories=LABELS) if len(merged) else float("nan")
    return ReleaseAgreement(
        n_common=len(merged), confusion=confusion, cohen_kappa=kappa,
        percent_agreement=float((merged["label_released"] == merged["label_live"]).mean())
        if len(merged) else float("nan"))


def rubric_text(rubric_artifact: str, rubric_file: str | None, fetch: Callable[[str], Path]) -> str:
    """The rubric a profile names: a local file when given, else the registry artifact."""
    if rubric_file is not None:
        from hbpsych_utils.core.paths import resolve_path

        return read_text(resolve_path(rubric_file), error=ScreenError)
    return read_text(fetch(rubric_artifact), error=ScreenError)
