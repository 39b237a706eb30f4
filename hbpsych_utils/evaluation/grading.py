"""The HealthBench grader: template, rendering, verdict parsing and recovery, conversation score.

Faithful to the reference implementation (``healthbench_eval.py`` of openai/simple-evals) so that
scores are comparable with published HealthBench numbers:

- the template is the reference's ``GRADER_TEMPLATE`` (fetched as the ``grader_template``
  artifact, sha256-checked here as well as by ``sources``), filled by plain ``str.replace`` of
  ``<<conversation>>`` and then ``<<rubric_item>>``, in that order, exactly as the reference does;
- the conversation is every prompt message plus the reply as ``role: content``, joined by a
  blank line;
- a rubric item is ``[points] criterion`` with the points formatted the way Python formats the
  number read from the JSON (``5`` stays ``5``, ``2.5`` stays ``2.5``, ``3.0`` stays ``3.0``);
- one judge call per criterion, system message "You are a helpful assistant.", 2,048 tokens;
- score = points of met criteria (negative ones subtract) / sum of positive points, unclipped.

This module makes no model call: it builds the request contents as plain data for the engine
(``hbpsych_utils.llm``) and parses and scores what comes back. Where the study departs from
the reference it says so: judges run at temperature 0 (reference 0.5); a malformed verdict is
first recovered by pattern extraction (flagged ``recovered``), then re-asked a bounded number of
times (the reference re-asks forever), and a verdict still missing excludes the conversation
for that judge instead of counting as false.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.core import sources

log = logging.getLogger(__name__)

TEMPLATE_ARTIFACT = "grader_template"
CONVERSATION_SLOT = "<<conversation>>"
RUBRIC_SLOT = "<<rubric_item>>"
SYSTEM_MESSAGE = "You are a helpful assistant."
MAX_TOKENS = study.GRADER_MAX_TOKENS
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}},
    "required": ["explanation", "criteria_met"],
}
"""The verdict the template asks for, as a JSON schema. Not sent by the reference grader: a
profile may constrain a judge's output with it (``grading.response_schema``), a documented
deviation meant for small local models that cannot otherwise keep to the JSON."""
DEFAULT_MAX_REASKS = 3
"""Re-asks after the first reply when nothing can be parsed or recovered (bounded, unlike the
reference, which loops until it gets a boolean)."""


class GradingError(ValueError):
    """Bad grader input (template, rubric, verdicts); the message names the file/record/field."""


# --------------------------------------------------------------------------------------------
# Template


def load_template(path: Path | str | None = None, *, expected_sha256: str | None = None) -> str:
    """The grader template, checked against the registry's sha256 before use.

    ``sources.fetch`` already verifies the cached copy; checking again here means a template
    passed in by path (or edited in the cache after the fetch) can never be used unverified.
    """
    path = Path(path) if path is not None else sources.fetch(TEMPLATE_ARTIFACT)
    if expected_sha256 is None:
        expected_sha256 = sources.artifact(TEMPLATE_ARTIFACT).sha256
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and got != expected_sha256:
        raise GradingError(
            f"{path}: grader template sha256 is {got}, the registry expects {expected_sha256} "
            f"(artifact {TEMPLATE_ARTIFACT!r}); the template must be the reference's "
            "GRADER_TEMPLATE byte for byte"
        )
    text = data.decode("utf-8")
    for slot in (CONVERSATION_SLOT, RUBRIC_SLOT):
        if text.count(slot) != 1:
            raise GradingError(
                f"{path}: grader template must contain the placeholder {slot} exactly once "
                f"(found {text.count(slot)})"
            )
    return text


# --------------------------------------------------------------------------------------------
# Rendering


def format_points(points: int | float) -> str:
    """Points as the reference prints them: Python's own formatting of the parsed JSON number."""
    if isinstance(points, bool) or not isinstance(points, int | float):
        raise GradingError(f"rubric points must be a number, got {points!r}")
    return f"{points}"


def render_rubric_item(item: RubricItem) -> str:
    """``[points] criterion``, as the reference's ``RubricItem.__str__``."""
    return f"[{format_points(item.points)}] {item.criterion}"


def _role_content(m: Message | Mapping[str, object]) -> tuple[str, str]:
    if isinstance(m, Mapping):
        return str(m["role"]), str(m["content"])
    return m.role, m.content


def render_conversation(prompt: Iterable[Message | Mapping[str, object]], reply: str) -> str:
    """Prompt messages plus the reply as the final assistant turn, ``role: content``, blank-line
    separated. The reply is used exactly as stored (an empty refusal renders as ``assistant: ``).
    """
    turns = [_role_content(m) for m in prompt]
    turns.append(("assistant", reply))
    return "\n\n".join(f"{role}: {content}" for role, content in turns)


def render_grader_prompt(
    template: str,
    prompt: Iterable[Message | Mapping[str, object]],
    reply: str,
    item: RubricItem,
) -> str:
    """The user message of one judge call.

    Replacement order is the reference's: the conversation first, then the rubric item. A
    conversation that itself contains the text ``<<rubric_item>>`` therefore gets it replaced
    too, as it would in the reference; we keep that for comparability.
    """
    return template.replace(CONVERSATION_SLOT, render_conversation(prompt, reply)).replace(
        RUBRIC_SLOT, render_rubric_item(item)
    )


def shared_prefix_chars(template: str, prompt: Iterable[Message | Mapping[str, object]],
                        reply: str) -> int:
    """Characters at the start of every criterion's user message for one reply: the filled
    template up to where the rubric item goes. The conversation is filled in first (as the
    reference does), so the first ``<<rubric_item>>`` left is where the criteria differ (one in
    the conversation itself counts: it is replaced by the rubric item too)."""
    return template.replace(CONVERSATION_SLOT, render_conversation(prompt, reply)).index(
        RUBRIC_SLOT)


@dataclass(frozen=True)
class GraderRequest:
    """Everything one judge call sends, as plain data for the engine.

    ``prefix_chars``: how much of ``user`` every criterion of the same reply shares (the
    template's opening and the conversation), for the engine's prompt-cache arrangement; it
    changes nothing in what is sent."""

    prompt_id: str
    criterion_index: int
    system: str
    user: str
    max_tokens: int
    temperature: float
    prefix_chars: int | None = None

    def messages(self) -> list[dict[str, str]]:
        """Chat messages in the reference's layout: system message, then the filled template."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ]

    def as_dict(self) -> dict[str, object]:
        return {
            "prompt_id": self.prompt_id,
            "criterion_index": self.criterion_index,
            "messages": self.messages(),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }


def build_requests(
    conversation: Conversation,
    reply: str,
    template: str,
    *,
    temperature: float = study.STUDY_TEMPERATURE,
    max_tokens: int = MAX_TOKENS,
    system: str = SYSTEM_MESSAGE,
) -> list[GraderRequest]:
    """One request per rubric criterion, in rubric order (criterion index = position)."""
    if reply is None:
        raise GradingError(f"prompt_id {conversation.prompt_id}: reply is None (no response)")
    prefix = shared_prefix_chars(template, conversation.prompt, reply)
    return [
        GraderRequest(
            prompt_id=conversation.prompt_id,
            criterion_index=i,
            system=system,
            user=render_grader_prompt(template, conversation.prompt, reply, item),
            max_tokens=max_tokens,
            temperature=temperature,
            prefix_chars=prefix or None,
        )
        for i, item in enumerate(conversation.rubrics)
    ]


# --------------------------------------------------------------------------------------------
# Verdict parsing


@dataclass(frozen=True)
class Verdict:
    """One criterion's verdict: ``criteria_met`` is ``None`` when no boolean could be obtained."""

    criteria_met: bool | None
    recovered: bool = False
    """True when the boolean came from pattern recovery, not from the reference parser."""
    attempts: int = 1
    """Replies consumed to reach this verdict (1 = the first reply, 2 = one re-ask, ...)."""
    explanation: str | None = None

    @property
    def ok(self) -> bool:
        return self.criteria_met is not None

    @property
    def excluded(self) -> bool:
        return self.criteria_met is None


def _strip_json_fence(text: str) -> str:
    """What the reference's clean-up does: trim, drop a leading ```json fence and the whitespace
    after it, drop a trailing ``` fence and the whitespace before it. A bare leading ``` (no
    ``json``) is left alone, as in the reference."""
    s = text.strip()
    if s.startswith("```json"):
        s = s[len("```json") :].lstrip()
    if s.endswith("```"):
        s = s[: -len("```")].rstrip()
    return s


def parse_reference(text: str | None) -> dict[str, Any] | None:
    """The reference parser: the decoded object when it holds a JSON boolean ``criteria_met``,
    else ``None`` (the reference would re-ask)."""
    if text is None:
        return None
    try:
        obj = json.loads(_strip_json_fence(text))
    except json.JSONDecodeError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("criteria_met"), bool):
        return obj
    return None


_MET_PATTERN = re.compile(
    r"""["']?criteria_met["']?\s*[:=]\s*["']?(true|false)\b["']?""", re.IGNORECASE
)


def recover_boolean(text: str | None) -> bool | None:
    """The ``criteria_met`` boolean the judge emitted in output the reference cannot parse.

    Matches ``"criteria_met": true|false`` (any case, quoted or not, ``:`` or ``=``) anywhere in
    the text: truncated JSON, prose around the JSON, single quotes, a stringified boolean. When
    the text states both values, nothing is recovered (it is ambiguous).
    """
    if not text:
        return None
    values = {m.group(1).lower() == "true" for m in _MET_PATTERN.finditer(text)}
    if len(values) == 1:
        return values.pop()
    return None


def parse_verdict(text: str | None, *, attempt: int = 1) -> Verdict:
    """Reference parser first, then pattern recovery; ``criteria_met=None`` if both fail."""
    obj = parse_reference(text)
    if obj is not None:
        expl = obj.get("explanation")
        return Verdict(obj["criteria_met"], False, attempt, expl if isinstance(expl, str) else None)
    met = recover_boolean(text)
    if met is not None:
        return Verdict(met, True, attempt)
    return Verdict(None, False, attempt)


def needs_reask(verdict: Verdict, *, max_reasks: int = DEFAULT_MAX_REASKS) -> bool:
    """Whether the caller should ask the judge again for this criterion.

    Only when nothing could be parsed or recovered, and at most ``max_reasks`` times after the
    first reply (``verdict.attempts`` counts the replies already used).
    """
    return verdict.criteria_met is None and verdict.attempts <= max_reasks


def resolve_verdict(
    replies: Sequence[str | None], *, max_reasks: int = DEFAULT_MAX_REASKS, context: str = ""
) -> Verdict:
    """The verdict from a criterion's successive replies (the first, then each re-ask).

    The first reply that parses or is recovered wins. If none does within ``1 + max_reasks``
    replies, the verdict is excluded (``criteria_met=None``) and logged — never read as false.
    ``context`` (e.g. "judge j, candidate c, prompt_id p, criterion 3") goes into the log line.
    """
    if not replies:
        raise GradingError("resolve_verdict needs at least one reply")
    verdict = Verdict(None, False, 0)
    for i, text in enumerate(replies[: 1 + max_reasks], start=1):
        verdict = parse_verdict(text, attempt=i)
        if verdict.ok:
            return verdict
    log.warning("%sno verdict after %d replies: excluded", f"{context}: " if context else "",
                verdict.attempts)
    return verdict


# --------------------------------------------------------------------------------------------
# Scores

ScoreStatus = Literal["scored", "excluded_verdict", "no_positive_points"]


def conversation_score(
    points: Sequence[int | float], met: Sequence[bool | None]
) -> float | None:
    """Met points / positive points, unclipped; ``None`` when undefined.

    Undefined means: no criterion has positive points, or any verdict is missing (``None``) —
    a missing verdict makes the whole conversation unscored for that judge, it is never false.
    Sums run in rubric order, as in the reference, so floats agree to the last bit.
    """
    if len(points) != len(met):
        raise GradingError(
            f"{len(met)} verdicts for {len(points)} rubric criteria: they must pair one to one"
        )
    if any(m is None for m in met):
        return None
    possible = sum(p for p in points if p > 0)
    if possible == 0:
        return None
    achieved = sum(p for p, m in zip(points, met, strict=True) if m)
    return achieved / possible


@dataclass(frozen=True)
class ConversationScore:
    prompt_id: str
    score: float | None
    status: ScoreStatus
    n_criteria: int
    n_excluded: int
    n_recovered: int


def score_conversation(
    conversation: Conversation, verdicts: Sequence[Verdict | bool | None]
) -> ConversationScore:
    """Score one graded conversation; verdicts in rubric order (booleans accepted for replay)."""
    if len(verdicts) != len(conversation.rubrics):
        raise GradingError(
            f"prompt_id {conversation.prompt_id}: {len(verdicts)} verdicts for "
            f"{len(conversation.rubrics)} rubric criteria"
        )
    met = [v.criteria_met if isinstance(v, Verdict) else v for v in verdicts]
    n_excluded = sum(m is None for m in met)
    n_recovered = sum(isinstance(v, Verdict) and v.recovered for v in verdicts)
    points = [r.points for r in conversation.rubrics]
    score = conversation_score(points, met)
    if n_excluded:
        status: ScoreStatus = "excluded_verdict"
        log.warning(
            "prompt_id %s: %d of %d verdicts missing; conversation not scored for this judge",
            conversation.prompt_id, n_excluded, len(met),
        )
    elif score is None:
        status = "no_positive_points"
    else:
        status = "scored"
    return ConversationScore(
        conversation.prompt_id, score, status, len(met), n_excluded, n_recovered
    )


VERDICT_COLUMNS = (
    "judge", "candidate", "prompt_id", "criterion_index", "criteria_met", "recovered", "excluded",
)
GRADED_KEYS = ("judge", "candidate", "prompt_id")
"""What names one graded reply in a verdict table; ``sample`` follows when the table has that
column (a run with several replies per conversation: ``generation.samples``)."""


def graded_keys(verdicts: pd.DataFrame) -> tuple[str, ...]:
    """The columns that name one graded reply of ``verdicts``: :data:`GRADED_KEYS`, and
    ``sample`` when the table has it."""
    return (*GRADED_KEYS, "sample") if "sample" in verdicts.columns else GRADED_KEYS


def graded_replies(
    verdicts: pd.DataFrame, conversations: Mapping[str, Conversation] | Iterable[Conversation]
) -> Iterator[tuple[tuple[object, ...], Conversation, list[Verdict]]]:
    """Each graded reply of a verdict table: its key (the values of :func:`graded_keys`), its
    conversation and its verdicts in rubric order.

    ``verdicts`` has the columns of ``VERDICT_COLUMNS`` (``recovered``/``excluded`` optional;
    a null ``criteria_met`` or ``excluded`` True = no verdict). Every criterion of a
    conversation must be present exactly once.
    """
    convs = conversations if isinstance(conversations, Mapping) else {
        c.prompt_id: c for c in conversations
    }
    missing_cols = {"judge", "candidate", "prompt_id", "criterion_index", "criteria_met"} - set(
        verdicts.columns
    )
    if missing_cols:
        raise GradingError(f"verdict table: missing column(s) {sorted(missing_cols)}")
    keys = graded_keys(verdicts)
    ordered = verdicts.sort_values([*keys, "criterion_index"], kind="mergesort")
    n = len(ordered)
    recovered = (
        ordered["recovered"].astype("boolean").fillna(False).astype(bool).tolist()
        if "recovered" in ordered else [False] * n
    )
    excluded = (
        ordered["excluded"].astype("boolean").fillna(False).astype(bool).tolist()
        if "excluded" in ordered else [False] * n
    )
    met = [
        None if (ex or pd.isna(m)) else bool(m)
        for m, ex in zip(ordered["criteria_met"].tolist(), excluded, strict=True)
    ]
    records = zip(
        *(ordered[k].tolist() for k in keys),
        ordered["criterion_index"].astype(int).tolist(), met, recovered, strict=True,
    )
    width = len(keys)
    # Plain iteration over the sorted rows: a pandas groupby loop is ~10x slower at study size.
    for key, grp in itertools.groupby(records, key=lambda r: r[:width]):
        items = list(grp)
        judge, cand, pid = key[:3]
        conv = convs.get(pid)
        if conv is None:
            raise GradingError(f"verdict table: prompt_id {pid} has no rubric in the corpus given")
        idx = [r[width] for r in items]
        if idx != list(range(len(conv.rubrics))):
            raise GradingError(
                f"verdict table: judge {judge}, candidate {cand}, prompt_id {pid}: "
                f"criterion_index values {idx} do not cover the "
                f"{len(conv.rubrics)} rubric criteria exactly once"
            )
        yield key, conv, [Verdict(r[width + 1], r[width + 2]) for r in items]


def scores_from_verdicts(
    verdicts: pd.DataFrame, conversations: Mapping[str, Conversation] | Iterable[Conversation]
) -> pd.DataFrame:
    """Per-(judge, candidate, conversation) scores from a verdict table (:func:`graded_replies`;
    per sample too when the table has a ``sample`` column).

    Returns judge, candidate, prompt_id, [sample,] score (NaN when unscored), status,
    n_criteria, n_excluded, n_recovered.
    """
    keys = graded_keys(verdicts)
    rows = []
    for key, conv, found in graded_replies(verdicts, conversations):
        cs = score_conversation(conv, found)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "score": float("nan") if cs.score is None else cs.score,
                "status": cs.status,
                "n_criteria": cs.n_criteria,
                "n_excluded": cs.n_excluded,
                "n_recovered": cs.n_recovered,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[*keys, "score", "status", "n_criteria", "n_excluded", "n_recovered"],
    )
