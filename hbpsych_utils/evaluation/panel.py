"""Running the judge panel through the LLM engine: every (judge, reply, criterion) once.

Each criterion is one grader call (``grading.build_requests``). Replies are parsed with the
reference parser, then by pattern recovery of an emitted boolean (``recovered``); a criterion
with neither is asked again — a new call (``Request.sample`` = the attempt number) rather than a
cache hit — at most ``max_reasks`` times, then excluded and logged. An excluded verdict leaves
that conversation unscored for that judge; it is never counted as false. Judge calls go through
the configured mode (the providers' batch APIs in the study); re-asks go synchronously.

Candidate replies that are explicit refusals are graded as returned (an empty reply); replies
whose generation failed are not graded and are reported. A responses table with a ``sample``
column (several replies per conversation) is graded reply by reply, and the verdict table keeps
the column (``grading.graded_keys``); two samples with the same text are the same question, so
the store answers the second.
"""

from __future__ import annotations

import csv
import logging
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pandas as pd
from pydantic import Field

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.records import TextRecord
from hbpsych_utils.evaluation import grading

if TYPE_CHECKING:
    from hbpsych_utils.llm import Request, Result
    from hbpsych_utils.llm.engine import Engine, Mode
    from hbpsych_utils.llm.run_context import RunReport

log = logging.getLogger(__name__)

VERDICT_TABLE_COLUMNS = (*grading.VERDICT_COLUMNS, "attempts", "reason")

GRADE_TAG = "grade"
"""The tag of the evaluation's judge calls; the reply's candidate follows it (:func:`grade_tag`)."""


def grade_tag(candidate: str, tag: str = GRADE_TAG) -> str:
    """The tag of a judge call grading ``candidate``'s reply: it is stored with the answer (it
    never enters the request key), so the store's ledger says what grading one candidate
    cost (``Store.spend_by_tag``; ``reporting.publish``)."""
    return f"{tag}:{candidate}"


@dataclass(frozen=True)
class _Item:
    judge: str
    candidate: str
    prompt_id: str
    criterion_index: int
    request: grading.GraderRequest
    sample: int | None = None


class Spend(TypedDict):
    """What a grading paid a judge (or all of them), from the engine runs' reports."""

    spend_usd: float
    input_tokens: int
    """Every prompt token, those served from a prompt cache included."""
    cache_read_tokens: int
    cache_write_tokens: int


class PanelCounts(TypedDict):
    """What a grading did, in numbers (``GradingLiveMetrics`` fields)."""

    n_criteria_graded: int
    n_recovered: int
    n_reasked: int
    n_excluded: int
    n_replies_not_graded: int
    calls_by_attempt: dict[str, int]
    """Engine calls by attempt (``"1"`` = first ask, ``"2"`` = first re-ask, ...)."""


@dataclass
class PanelRun:
    verdicts: pd.DataFrame
    """One row per (judge, candidate, prompt_id, criterion): ``VERDICT_TABLE_COLUMNS``."""
    not_graded: pd.DataFrame
    """Replies that could not be graded (generation failed): candidate, prompt_id, status."""
    calls: Counter[int] = field(default_factory=Counter)
    """Engine requests by attempt (1 = first ask, 2 = first re-ask, ...)."""
    spend: dict[str, Spend] = field(default_factory=dict)
    """Judge -> what this grading paid (the engine runs' reports, cached answers free)."""
    run_ids: list[str] = field(default_factory=list)
    """The engine runs of this grading (their ledger lines carry these ids)."""
    keys: list[str] = field(default_factory=list)
    """The request key of every answer this grading used, re-asks included, whether it paid
    for it or found it in the store (``Engine.paid_earlier``)."""

    def spend_totals(self) -> Spend:
        """The sums over judges of :attr:`spend` (spend rounded to the micro-dollar)."""
        rows = self.spend.values()
        return Spend(input_tokens=sum(int(r["input_tokens"]) for r in rows),
                     cache_read_tokens=sum(int(r["cache_read_tokens"]) for r in rows),
                     cache_write_tokens=sum(int(r["cache_write_tokens"]) for r in rows),
                     spend_usd=round(sum(float(r["spend_usd"]) for r in rows), 6))

    def counts(self) -> PanelCounts:
        """What the run did, in numbers: criteria graded, verdicts recovered by pattern,
        criteria re-asked, verdicts excluded, replies not graded, engine calls per attempt."""
        v = self.verdicts
        return PanelCounts(
            n_criteria_graded=len(v),
            n_recovered=int(v.recovered.sum()),
            n_reasked=int((v.attempts > 1).sum()),
            n_excluded=int(v.excluded.sum()),
            n_replies_not_graded=len(self.not_graded),
            calls_by_attempt={str(k): n for k, n in sorted(self.calls.items())},
        )

    def census(self) -> pd.DataFrame:
        """Per judge: criteria graded, verdicts parsed, recovered, re-asked, excluded."""
        v = self.verdicts
        if v.empty:
            return pd.DataFrame()
        g = v.groupby("judge")
        return pd.DataFrame({
            "criteria": g.size(),
            "verdicts": g["excluded"].apply(lambda s: int((~s).sum())),
            "recovered": g["recovered"].sum().astype(int),
            "reasked": g["attempts"].apply(lambda s: int((s > 1).sum())),
            "excluded": g["excluded"].sum().astype(int),
            "call_failed": g["reason"].apply(lambda s: int((s == "call_failed").sum())),
        })


def _items(
    responses: pd.DataFrame,
    conversations: Mapping[str, Conversation],
    judges: Sequence[str],
    template: str,
    temperature: float,
    max_tokens: int,
) -> tuple[list[_Item], pd.DataFrame]:
    items: list[_Item] = []
    skipped = []
    sampled = "sample" in responses.columns
    for row in responses.itertuples(index=False):
        sample = int(row.sample) if sampled else None
        if row.status not in ("ok", "refused"):
            skipped.append({"candidate": row.model, "prompt_id": row.prompt_id,
                            "status": row.status, **({"sample": sample} if sampled else {})})
            continue
        conv = conversations.get(row.prompt_id)
        if conv is None:
            raise grading.GradingError(f"response for {row.prompt_id} has no conversation")
        reply = row.text if isinstance(row.text, str) else ""  # a refusal is graded as returned
        reqs = grading.build_requests(conv, reply, template, temperature=temperature,
                                      max_tokens=max_tokens)
        for judge in judges:
            items += [_Item(judge, row.model, row.prompt_id, r.criterion_index, r, sample)
                      for r in reqs]
    columns = ["candidate", "prompt_id", "status", *(["sample"] if sampled else [])]
    return items, pd.DataFrame(skipped, columns=columns)


def _request(item: _Item, attempt: int, schema: Mapping[str, object] | None,
             prompt_caching: bool = False, tag: str = GRADE_TAG, repeat: int = 0) -> Request:
    from hbpsych_utils.llm import ChatMessage, Request

    r = item.request
    return Request(
        model=item.judge,
        messages=tuple(ChatMessage(m["role"], m["content"]) for m in r.messages()),
        temperature=r.temperature,
        max_tokens=r.max_tokens, tag=grade_tag(item.candidate, tag), sample=attempt,
        repeat=repeat, response_schema=schema,
        metadata={"judge": item.judge, "candidate": item.candidate,
                  "prompt_id": item.prompt_id, "criterion_index": item.criterion_index,
                  **({"sample": item.sample} if item.sample is not None else {})},
        cache_prefix_chars=r.prefix_chars if prompt_caching else None,
    )


def _add_spend(spend: dict[str, Spend], report: RunReport | None) -> None:
    """Add one engine run's spend and prompt tokens per judge (from its report)."""
    for model, paid in (report.by_model if report is not None else {}).items():
        row = spend.setdefault(model, Spend(spend_usd=0.0, input_tokens=0,
                                            cache_read_tokens=0, cache_write_tokens=0))
        row["spend_usd"] += paid["spend_usd"]
        row["input_tokens"] += paid["input_tokens"]
        row["cache_read_tokens"] += paid["cache_read_tokens"]
        row["cache_write_tokens"] += paid["cache_write_tokens"]


def grade(
    engine: Engine,
    responses: pd.DataFrame,
    conversations: Mapping[str, Conversation],
    judges: Sequence[str],
    template: str,
    *,
    temperature: float = study.STUDY_TEMPERATURE,
    max_tokens: int = grading.MAX_TOKENS,
    max_reasks: int = grading.DEFAULT_MAX_REASKS,
    mode: Mode = "batch",
    response_schema: Mapping[str, object] | None = None,
    prompt_caching: bool = False,
    tag: str = GRADE_TAG,
    repeat: int = 0,
    only: Collection[tuple[str, str, int]] | None = None,
) -> PanelRun:
    """Grade every gradable reply with every judge; return the verdict table.

    ``tag`` names the part of the run the judge calls belong to (each call's tag adds the
    reply's candidate, :func:`grade_tag`), so the store's ledger can tell them apart.

    ``response_schema`` (e.g. ``grading.VERDICT_SCHEMA``) constrains the judges' output where
    the provider supports it; the reference sends none, so the study leaves it ``None``.
    ``prompt_caching`` (the profile's ``llm.prompt_caching``) tells the engine which part of
    each prompt the criteria of one reply share, so that it can arrange the calls for the
    providers' prompt caches; the prompts sent, and so the verdicts, are the same either way.
    ``repeat`` (``Request.repeat``): a non-zero value grades the same questions again as new
    calls and store entries (the judges' self-consistency); 0 is the grading itself. ``only``
    (``(candidate, prompt_id, criterion_index)`` triples) grades those criteria alone, built as
    the whole grading builds them (the same questions: a re-grading of a sample).
    """
    items, not_graded = _items(responses, conversations, judges, template, temperature,
                               max_tokens)
    if only is not None:
        wanted = set(only)
        items = [it for it in items if (it.candidate, it.prompt_id, it.criterion_index) in wanted]
    return _run(engine, items, not_graded, "sample" in responses.columns,
                max_reasks=max_reasks, mode=mode, response_schema=response_schema,
                prompt_caching=prompt_caching, tag=tag, repeat=repeat)


def grade_requests(
    engine: Engine,
    requests: Sequence[grading.GraderRequest],
    judges: Sequence[str],
    *,
    candidate: str,
    max_reasks: int = grading.DEFAULT_MAX_REASKS,
    mode: Mode = "batch",
    response_schema: Mapping[str, object] | None = None,
    tag: str = GRADE_TAG,
    repeat: int = 0,
    prompt_caching: bool = False,
) -> PanelRun:
    """Grade ready-made grader requests (one criterion each, keyed by their ``prompt_id`` and
    ``criterion_index``) with every judge, as :func:`grade` grades replies: the same re-asks,
    exclusions, spend and verdict table, ``candidate`` naming what was graded (``repeat`` and
    ``prompt_caching`` as there)."""
    items = [_Item(judge, candidate, r.prompt_id, r.criterion_index, r)
             for r in requests for judge in judges]
    return _run(engine, items, pd.DataFrame(columns=["candidate", "prompt_id", "status"]),
                False, max_reasks=max_reasks, mode=mode, response_schema=response_schema,
                prompt_caching=prompt_caching, tag=tag, repeat=repeat)


def _run(engine: Engine, items: list[_Item], not_graded: pd.DataFrame, sampled: bool, *,
         max_reasks: int, mode: Mode, response_schema: Mapping[str, object] | None,
         prompt_caching: bool, tag: str, repeat: int = 0) -> PanelRun:
    verdicts: dict[int, grading.Verdict] = {}
    reasons: dict[int, str] = {}
    refused: set[int] = set()
    calls: Counter[int] = Counter()
    spend: dict[str, Spend] = {}
    run_ids: list[str] = []
    keys: list[str] = []
    pending = list(range(len(items)))
    for attempt in range(max_reasks + 1):
        if not pending:
            break
        results = engine.run([_request(items[i], attempt, response_schema, prompt_caching, tag,
                                       repeat) for i in pending],
                             mode=mode if attempt == 0 else "sync")
        calls[attempt + 1] += len(pending)
        keys += [res.key for res in results]
        report = getattr(engine, "last_report", None)
        _add_spend(spend, report)
        if report is not None:
            run_ids.append(report.run_id)
        again = []
        for i, res in zip(pending, results, strict=True):
            verdicts[i], reason = _verdict_of(res, attempt)
            if reason is None:
                again.append(i)
                # the last answer decides what an item that stays without a verdict is called
                (refused.add if res.status == "refused" else refused.discard)(i)
            else:
                reasons[i] = reason
        pending = again
    for i in pending:
        it = items[i]
        reasons[i] = "judge_refused" if i in refused else "no_verdict"
        log.warning("judge %s, candidate %s, %s, criterion %d: no verdict after %d re-asks%s; "
                    "excluded", it.judge, it.candidate, it.prompt_id, it.criterion_index,
                    max_reasks, " (the judge's provider refused it)" if i in refused else "")
    table = _verdict_table(items, verdicts, reasons, sampled)
    return PanelRun(table, not_graded, calls, spend, run_ids, keys)


def _verdict_of(res: Result, attempt: int) -> tuple[grading.Verdict, str | None]:
    """A judge call's verdict and its ``reason`` (``VERDICT_TABLE_COLUMNS``); ``None`` for a
    reply without a verdict, which is asked again. A call the judge's provider refused or
    filtered (``status == "refused"``, e.g. OpenAI's ``finish_reason=content_filter``) has no
    verdict either: asked again like an unparsed one, and when none of the re-asks gets a
    verdict its reason is ``judge_refused`` (``_run``), never a verdict of not met."""
    if res.status in ("failed", "not_run"):
        # the engine already retried transport failures; a later run retries the call
        reason = "call_failed" if res.status == "failed" else "not_run"
        return grading.Verdict(None, False, attempt + 1), reason
    verdict = grading.parse_verdict(res.text if res.completed else None, attempt=attempt + 1)
    if not verdict.ok:
        return verdict, None
    return verdict, "recovered" if verdict.recovered else "parsed"


def _verdict_table(items: Sequence[_Item], verdicts: Mapping[int, grading.Verdict],
                   reasons: Mapping[int, str], sampled: bool) -> pd.DataFrame:
    """One row per item (``VERDICT_TABLE_COLUMNS``, with ``sample`` when replies were
    sampled)."""
    rows = []
    for i, it in enumerate(items):
        v = verdicts[i]
        rows.append({"judge": it.judge, "candidate": it.candidate, "prompt_id": it.prompt_id,
                     "sample": it.sample,
                     "criterion_index": it.criterion_index, "criteria_met": v.criteria_met,
                     "recovered": v.recovered, "excluded": v.criteria_met is None,
                     "attempts": v.attempts, "reason": reasons[i]})
    columns = list(VERDICT_TABLE_COLUMNS)
    if sampled:
        columns.insert(3, "sample")
    return pd.DataFrame(rows, columns=columns)


def next_requests(
    engine: Engine,
    responses: pd.DataFrame,
    conversations: Mapping[str, Conversation],
    judges: Sequence[str],
    template: str,
    *,
    temperature: float = study.STUDY_TEMPERATURE,
    max_tokens: int = grading.MAX_TOKENS,
    max_reasks: int = grading.DEFAULT_MAX_REASKS,
    response_schema: Mapping[str, object] | None = None,
    prompt_caching: bool = False,
    tag: str = GRADE_TAG,
) -> list[Request]:
    """The judge calls :func:`grade`, given the same arguments, would send next, found from
    the engine's store without sending anything (what ``shards`` exports).

    For each criterion, as :func:`grade` walks its attempts: the first ask when the store has
    no answer to it; the next re-ask when every stored attempt so far is an answer without a
    verdict (at most ``max_reasks``); nothing when a stored attempt has a verdict or the
    re-asks are spent. A failed call is asked again, as the next run would."""
    items, _ = _items(responses, conversations, judges, template, temperature, max_tokens)
    out: list[Request] = []
    waiting = list(range(len(items)))
    for attempt in range(max_reasks + 1):
        if not waiting:
            break
        requests = [_request(items[i], attempt, response_schema, prompt_caching, tag)
                    for i in waiting]
        keys = [engine.resolve(r).key for r in requests]
        stored = engine.store.get_many(keys, completed_only=True)
        again = []
        for i, req, key in zip(waiting, requests, keys, strict=True):
            res = stored.get(key)
            if res is None:
                out.append(req)
            elif not grading.parse_verdict(res.text, attempt=attempt + 1).ok:
                again.append(i)
        waiting = again
    return out


class VerdictRow(TextRecord):
    """One row of ``verdicts.csv`` (``VERDICT_TABLE_COLUMNS``; ``attempts`` and ``reason`` may be
    absent from tables written by other tools)."""

    error = grading.GradingError

    judge: str = Field(min_length=1)
    candidate: str = Field(min_length=1)
    prompt_id: str = Field(min_length=1)
    criterion_index: int = Field(ge=0)
    criteria_met: bool | None
    """Empty in the file when no verdict was obtained (excluded, never read as false)."""
    recovered: bool = False
    excluded: bool = False
    attempts: int | None = Field(default=None, ge=1)
    reason: str | None = None
    sample: int | None = Field(default=None, ge=0)
    """The reply's sample index, in a table of several replies per conversation."""


def read_verdicts(path: Path | str) -> pd.DataFrame:
    """A verdict table as ``07_grading`` wrote it, every row validated (``VerdictRow``: errors
    name file, line and field), booleans and empty verdicts restored; a second verdict for the
    same (judge, candidate, conversation, criterion) is an error."""
    rows: list[dict[str, object]] = []
    seen: dict[tuple[object, ...], int] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = set(grading.VERDICT_COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise grading.GradingError(f"{path}:1: missing column(s) {sorted(missing)}")
        columns = [c for c in (*VERDICT_TABLE_COLUMNS, "sample") if c in (reader.fieldnames or ())]
        keys = (*grading.graded_keys(pd.DataFrame(columns=columns)), "criterion_index")
        for raw in reader:
            where = f"{path}:{reader.line_num}"
            row = VerdictRow.parse({k: (v if v != "" else None) for k, v in raw.items()
                                    if k in columns}, where).model_dump()
            key = tuple(row[k] for k in keys)
            if key in seen:
                named = ", ".join(f"{k} {v!r}" for k, v in zip(keys[:-1], key, strict=False))
                raise grading.GradingError(
                    f"{where}: {named}, criterion_index {key[-1]}: a second verdict for the "
                    f"same criterion (first on line {seen[key]})"
                )
            seen[key] = reader.line_num
            rows.append({c: row[c] for c in columns})
    df = pd.DataFrame(rows, columns=columns)
    df["criteria_met"] = df["criteria_met"].astype(object)
    return df
