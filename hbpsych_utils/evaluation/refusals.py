"""Refusals: which conversations each model refused, and scores with them left out.

Study policy (METHODS.md section 6): an empty reply with an explicit refusal stop reason is the
model's answer; it is graded as returned and never re-sampled. An empty reply from a transport
failure is re-requested and never stored. So a refusal is an empty (or whitespace-only) stored
reply whose stop reason is a refusal/safety stop, or which the provider flagged as a refusal.
The sensitivity analysis recomputes scores with those conversations excluded.

*Paper mode*: the census comes from the released error log (``run_errors``, errors.jsonl), whose
``kind`` values are classified in ``KIND_CLASSES`` (see there for why).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

import pandas as pd
from pydantic import Field

from hbpsych_utils.core import jsonl
from hbpsych_utils.core.records import FileRecord, validate
from hbpsych_utils.evaluation import scoring

log = logging.getLogger(__name__)

REFUSAL_STOP_REASONS: frozenset[str] = frozenset(
    {
        "refusal",  # Anthropic stop_reason
        "content_filter",  # OpenAI finish_reason
        "safety",  # Google finishReason SAFETY
        "prohibited_content",  # Google
        "blocklist",  # Google
        "spii",  # Google (sensitive personal information)
    }
)
"""Stop reasons that mean the provider withheld the answer on policy grounds (compared
case-insensitively). Length limits and normal stops are not refusals."""


class RefusalError(ValueError):
    """Bad refusal input; the message names the file, record and field."""


# --------------------------------------------------------------------------------------------
# From a responses table (live and smoke runs)

REFUSAL_INPUT_COLUMNS = ("model", "prompt_id", "text", "stop_reason")
"""The columns of a responses table that ``refused`` needs (a subset of
``generation.RESPONSE_COLUMNS``; ``refusal``, the provider's flag, is used when present)."""


def is_refusal(
    text: str | None,
    stop_reason: str | None,
    refusal_flag: bool | None = None,
    *,
    stop_reasons: Iterable[str] = REFUSAL_STOP_REASONS,
) -> bool:
    """Empty reply plus a refusal stop reason (or the provider's own refusal flag)."""
    if text is not None and not (isinstance(text, float) and pd.isna(text)) and str(text).strip():
        return False
    reasons = {r.lower() for r in stop_reasons}
    by_reason = isinstance(stop_reason, str) and stop_reason.strip().lower() in reasons
    by_flag = refusal_flag is not None and not pd.isna(refusal_flag) and bool(refusal_flag)
    return by_reason or by_flag


def refused(
    responses: pd.DataFrame,
    *,
    stop_reasons: Iterable[str] = REFUSAL_STOP_REASONS,
    categories: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The refused (model, prompt_id) rows of a responses table.

    ``responses`` has columns model, prompt_id, text, stop_reason and optionally ``refusal``
    (the provider's flag). ``categories`` (prompt_id -> category) adds a ``category`` column.
    """
    missing = set(REFUSAL_INPUT_COLUMNS) - set(responses.columns)
    if missing:
        raise RefusalError(f"responses table: missing column(s) {sorted(missing)}")
    stop_reasons = tuple(stop_reasons)
    flags = responses["refusal"] if "refusal" in responses.columns else [None] * len(responses)
    mask = [
        is_refusal(t, s, f, stop_reasons=stop_reasons)
        for t, s, f in zip(responses["text"], responses["stop_reason"], flags, strict=True)
    ]
    out = responses.loc[mask, ["model", "prompt_id", "stop_reason"]].copy()
    if categories is not None:
        out["category"] = [categories.get(p, "") for p in out["prompt_id"]]
    return out.sort_values(["model", "prompt_id"]).reset_index(drop=True)


def refused_by_model(
    refusals: pd.DataFrame, models: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """model -> sorted refused prompt_ids (models listed in ``models`` get [] when none)."""
    out: dict[str, list[str]] = {m: [] for m in models} if models is not None else {}
    for m, grp in refusals.groupby("model", sort=True):
        out[str(m)] = sorted(set(grp["prompt_id"]))
    return out


def refusal_counts(
    refusals: pd.DataFrame | Mapping[str, Iterable[str]], models: Iterable[str] | None = None
) -> dict[str, int]:
    """model -> number of refused conversations."""
    by = refused_by_model(refusals, models) if isinstance(refusals, pd.DataFrame) else {
        **({m: [] for m in models} if models is not None else {}),
        **{m: sorted(set(p)) for m, p in refusals.items()},
    }
    return {m: len(p) for m, p in sorted(by.items())}


def exclude_refused(
    scores: pd.DataFrame,
    refused_ids: Mapping[str, Iterable[str]],
    *,
    scope: Literal["own", "all"] = "own",
) -> pd.DataFrame:
    """Per-conversation score rows without the refused conversations.

    ``scope="own"`` drops each candidate's own refusals (its score over what it answered);
    ``"all"`` drops every conversation any model refused from every candidate (a common set,
    for paired comparisons).
    """
    if "candidate" not in scores.columns or "prompt_id" not in scores.columns:
        raise RefusalError("score table: needs 'candidate' and 'prompt_id' columns")
    if scope == "all":
        drop = set().union(*map(set, refused_ids.values())) if refused_ids else set()
        return scores[~scores["prompt_id"].isin(drop)].copy()
    if scope != "own":
        raise RefusalError(f"scope must be 'own' or 'all', got {scope!r}")
    pairs = {(m, p) for m, ps in refused_ids.items() for p in ps}
    keep = [
        (c, p) not in pairs for c, p in zip(scores["candidate"], scores["prompt_id"], strict=True)
    ]
    return scores[keep].copy()


def sensitivity(
    per_conversation: pd.DataFrame,
    refused_ids: Mapping[str, Iterable[str]],
    *,
    scope: Literal["own", "all"] = "own",
) -> pd.DataFrame:
    """Clipped mean per candidate with and without refused conversations.

    ``per_conversation`` has columns candidate, prompt_id, score (e.g. the panel's
    per-conversation scores, or one judge's). Returns candidate, n_refused, n_primary,
    mean_primary, n_excluded, mean_excluded, delta (excluded minus primary).
    """
    need = {"candidate", "prompt_id", "score"}
    if need - set(per_conversation.columns):
        raise RefusalError(f"score table: missing column(s) {sorted(need - set(per_conversation))}")
    primary = per_conversation.dropna(subset=["score"])
    reduced = exclude_refused(primary, refused_ids, scope=scope)
    rows = []
    for cand, grp in primary.groupby("candidate", sort=True):
        red = reduced[reduced["candidate"] == cand]
        m_red = scoring.clipped_mean(red["score"]) if len(red) else float("nan")
        m_pri = scoring.clipped_mean(grp["score"])
        rows.append({
            "candidate": cand,
            "n_refused": len(set(refused_ids.get(cand, ()))),
            "n_primary": len(grp),
            "mean_primary": m_pri,
            "n_excluded": len(red),
            "mean_excluded": m_red,
            "delta": m_red - m_pri,
        })
    return pd.DataFrame(rows).set_index("candidate")


# --------------------------------------------------------------------------------------------
# Paper mode: the released error log

KindClass = Literal[
    "candidate_empty", "empty_replaced", "transport", "judge", "correction", "unclassified"
]

KIND_CLASSES: dict[str, KindClass] = {
    # An empty stored candidate reply. Transport failures are re-requested and never stored
    # (METHODS 6), so a logged empty reply that no later correction replaced is a refusal. The
    # log corroborates this: some lines carry "stop_reason=refusal", and the correction of
    # 2026-07-31 says the Opus/Fable empties were re-verified as genuine refusals.
    "empty_response": "candidate_empty",
    # A correction saying an earlier empty reply was a transient API failure, replaced by a
    # full response and regraded: that empty reply is not a refusal.
    "transient_empty_replaced": "empty_replaced",
    # A failed generation call (e.g. HTTP 429): retried, no reply stored.
    "call_failed": "transport",
    # Judge-side events: a verdict recovered by synchronous re-asks, or no verdict at all.
    "grade_fallback": "judge",
    "grade_no_verdict": "judge",
    # Edits of stored text that change nothing about refusals.
    "whitespace_stripped": "correction",
}


@dataclass(frozen=True)
class ErrorEvent:
    line: int
    phase: str
    kind: str
    candidate: str | None
    prompt_id: str | None
    detail: str
    judge: str | None = None
    ts: str | None = None
    raw: dict[str, object] = field(default_factory=dict, compare=False, repr=False)


class ErrorRecord(FileRecord):
    """One line of the released anomaly log (``errors.jsonl``); other keys are ignored here and
    kept in ``ErrorEvent.raw``."""

    phase: str = Field(min_length=1)
    """``generate``, ``grade``, ``correction`` ..."""
    kind: str = Field(min_length=1)
    """What happened; classified by ``KIND_CLASSES``."""
    candidate: str | None = None
    prompt_id: str | None = None
    judge: str | None = None
    detail: str | None = None
    ts: str | None = None


def read_error_log(path: Path | str) -> list[ErrorEvent]:
    """The released errors.jsonl, one event per line, each validated (``ErrorRecord``: errors
    name file, line and field)."""
    out = []
    for lineno, rec in jsonl.records(path, error=RefusalError):
        r = validate(ErrorRecord, rec, f"{path}:{lineno}", RefusalError)
        out.append(ErrorEvent(
            line=lineno, phase=r.phase, kind=r.kind, candidate=r.candidate,
            prompt_id=r.prompt_id, detail=r.detail or "", judge=r.judge, ts=r.ts, raw=rec,
        ))
    return out


@dataclass
class Census:
    """Refusals found in an error log, with what was set aside and why."""

    refusals: pd.DataFrame
    """model, prompt_id, evidence (the detail text or 'empty reply, not replaced'), line."""
    replaced: list[tuple[str, str]]
    """(model, prompt_id) empty replies later replaced as transient failures."""
    unclassified: list[ErrorEvent]

    def counts(self, models: Iterable[str] | None = None) -> dict[str, int]:
        return refusal_counts(self.refusals, models)

    def by_model(self, models: Iterable[str] | None = None) -> dict[str, list[str]]:
        return refused_by_model(self.refusals, models)


class _RefusalRow(TypedDict):
    model: str
    prompt_id: str
    evidence: str
    line: int


def _reply_of(e: ErrorEvent) -> tuple[str, str]:
    """The (model, prompt_id) of a reply the event is about; an event about a reply must name
    both."""
    if not e.candidate or not e.prompt_id:
        raise RefusalError(
            f"error log line {e.line}: kind {e.kind!r} without candidate/prompt_id"
        )
    return e.candidate, e.prompt_id


def _add_refusal(rows: dict[tuple[str, str], _RefusalRow], key: tuple[str, str],
                 e: ErrorEvent) -> None:
    """Count the reply ``key`` once, on its first event, with the most explicit evidence of its
    events (one that says "refusal" over one that does not)."""
    evidence = e.detail or "empty reply, not replaced"
    if key not in rows:
        rows[key] = {"model": key[0], "prompt_id": key[1], "evidence": evidence, "line": e.line}
    elif "refusal" in evidence and "refusal" not in rows[key]["evidence"]:
        rows[key]["evidence"] = evidence


def refusal_census(
    events: Iterable[ErrorEvent], *, prompt_ids: Iterable[str] | None = None
) -> Census:
    """Refusals per model from the released error log (see ``KIND_CLASSES`` for the rules).

    ``prompt_ids`` restricts the census to a subset's conversations. Repeated events for the
    same (model, prompt_id) count once.
    """
    events = list(events)
    keep = set(prompt_ids) if prompt_ids is not None else None
    replaced = {_reply_of(e) for e in events if KIND_CLASSES.get(e.kind) == "empty_replaced"}
    unclassified = [e for e in events if e.kind not in KIND_CLASSES]
    for e in unclassified:
        log.warning("error log line %d: unknown kind %r not classified", e.line, e.kind)
    rows: dict[tuple[str, str], _RefusalRow] = {}
    for e in events:
        if KIND_CLASSES.get(e.kind) == "candidate_empty":
            key = _reply_of(e)
            if key not in replaced and (keep is None or key[1] in keep):
                _add_refusal(rows, key, e)
    df = pd.DataFrame(list(rows.values()), columns=["model", "prompt_id", "evidence", "line"])
    df = df.sort_values(["model", "prompt_id"]).reset_index(drop=True)
    return Census(df, sorted(replaced), unclassified)
