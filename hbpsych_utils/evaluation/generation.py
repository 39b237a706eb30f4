"""Candidate responses: one per (model, conversation), through the LLM engine.

The HealthBench messages go out verbatim — no system message, no prompt changes — at
temperature 0 with an 8,192-token cap; the model registry (``params/models.yaml``) applies each
model's quirks (temperature fixed or rejected, a smaller cap, the token parameter's name) and
the engine records the configuration actually sent. An explicit refusal (the provider's own
stop reason) is kept as the model's answer; a transport failure is retried by the engine and
never stored as output, so it appears here as ``status == "failed"`` with no text. Each reply
keeps its length in characters (``chars``, as the reference's length adjustment counts it).

Several replies per (model, conversation) (``generation.samples`` = k > 1, for worst-at-k):
sample 0 is the reply a one-sample run makes, sent exactly as then (same store key, so raising
k extends a run); sample s > 0 is a new call (``Request.sample`` = s) with the seed ``seed + s``
where the provider takes one (``llm.models.resolve_decoding``). Sample 0 stays in
``responses.jsonl``; the others go to their own file with ``sample`` and ``seed``
(:func:`split_samples`), so the stages that read one reply per conversation read what they
always read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import ConfigDict, Field

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.records import TextRecord
from hbpsych_utils.evaluation import length

if TYPE_CHECKING:
    from hbpsych_utils.llm import Request, Result
    from hbpsych_utils.llm.cost import Plan

TEMPERATURE = study.STUDY_TEMPERATURE
MAX_TOKENS = study.GENERATION_MAX_TOKENS
GENERATE_TAG = "generate"
"""The tag of the evaluation's candidate calls (each call's model is the candidate)."""
RESPONSE_COLUMNS = (
    "model", "prompt_id", "status", "text", "stop_reason", "refusal", "input_tokens",
    "output_tokens", "cost", "cached", "config", "chars",
)
"""Columns of the responses table (``responses.jsonl``), one row per (model, conversation)."""
SAMPLE_COLUMNS = ("sample", "seed")
"""What the further samples' table adds (``responses_samples.jsonl``)."""


class ResponsesError(ValueError):
    """A malformed ``responses.jsonl`` line; the message names file, line and field."""


class ResponseRecord(TextRecord):
    """One line of ``responses.jsonl`` as ``write_responses`` writes it (``RESPONSE_COLUMNS``;
    strict types, no other keys)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    error = ResponsesError

    model: str = Field(min_length=1)
    prompt_id: str = Field(min_length=1)
    status: Literal["ok", "refused", "failed", "not_run"]
    """The engine's outcome: an answer, the provider's refusal, retries exhausted, not sent."""
    text: str | None
    """The reply (``""`` for an explicit refusal); ``None`` when no call completed."""
    stop_reason: str | None
    refusal: bool
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost: float = Field(ge=0, allow_inf_nan=False)
    cached: bool
    config: str
    """The decoding configuration actually sent, as sorted-key JSON."""
    chars: int | None = Field(default=None, ge=0)
    """The reply's length in characters (``len`` of ``text``); ``None`` without a reply."""


class SampleResponseRecord(ResponseRecord):
    """One line of ``responses_samples.jsonl``: a further sampled reply."""

    sample: int = Field(ge=1)
    seed: int | None
    """The seed asked for (sent where the provider takes one: see ``config``)."""


def generation_requests(
    conversations: Iterable[Conversation],
    candidates: Sequence[str],
    *,
    temperature: float | None = TEMPERATURE,
    max_tokens: int | None = MAX_TOKENS,
    tag: str = GENERATE_TAG,
    samples: int = 1,
    seed: int,
) -> list[Request]:
    """One engine request per (candidate, conversation), conversation-major within a model;
    ``tag`` names the part of the run they belong to in the store's ledger; with ``samples``
    > 1, that list again for each further sample s (``sample`` = s, seed ``seed + s``; module
    doc)."""
    from hbpsych_utils.llm import ChatMessage, Request

    convs = list(conversations)
    if samples < 1:
        raise ValueError(f"generation.samples must be at least 1, got {samples}")
    return [
        Request(
            model=model,
            messages=tuple(ChatMessage(m.role, m.content) for m in conv.prompt),
            temperature=temperature,
            max_tokens=max_tokens,
            tag=tag,
            metadata={"candidate": model, "prompt_id": conv.prompt_id,
                      **({"sample": s} if samples > 1 else {})},
            sample=s,
            seed=seed + s if s else None,
        )
        for s in range(samples)
        for model in candidates
        for conv in convs
    ]


def responses_table(results: Iterable[Result], seed: int) -> pd.DataFrame:
    """The engine's results as the responses table later stages read (one row per request);
    with ``sample`` and ``seed`` columns when the requests were sampled (their ``seed``: the
    one :func:`generation_requests` derived them from)."""
    rows = []
    for r in results:
        text = r.text if r.completed else None
        row = {
            "model": r.metadata.get("candidate", r.model),
            "prompt_id": r.metadata["prompt_id"],
            "status": r.status,
            "text": text,
            "stop_reason": r.stop_reason,
            "refusal": bool(r.refusal),
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "cost": r.cost,
            "cached": r.cached,
            "config": json.dumps(r.config, sort_keys=True),
            "chars": length.chars(text),
        }
        if "sample" in r.metadata:
            s = int(r.metadata["sample"])
            row |= {"sample": s, "seed": seed + s if s else None}
        rows.append(row)
    sampled = any("sample" in row for row in rows)
    return _typed(pd.DataFrame(rows, columns=[*RESPONSE_COLUMNS,
                                              *(SAMPLE_COLUMNS if sampled else ())]))


INTEGER_COLUMNS = ("chars", "sample", "seed")
"""Whole numbers that may be missing (no reply, no seed): nullable integers, so a missing one
does not turn the column into floats (which the readers refuse)."""


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in INTEGER_COLUMNS if c in table.columns]
    return table.astype(dict.fromkeys(cols, "Int64")) if cols else table


def split_samples(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """A table with a ``sample`` column split into sample 0 (without the sample columns: the
    layout of a one-sample run) and the further samples (``None`` when there are none). A table
    without the column is all sample 0."""
    if "sample" not in table.columns:
        return table, None
    first = table[table["sample"] == 0].drop(
        columns=[c for c in SAMPLE_COLUMNS if c in table.columns]).reset_index(drop=True)
    rest = table[table["sample"] > 0].reset_index(drop=True)
    return first, (rest if len(rest) else None)


def with_samples(first: pd.DataFrame, rest: pd.DataFrame | None) -> pd.DataFrame:
    """Sample 0 and the further samples as one table with a ``sample`` column (the first
    alone, unchanged, when there are no further samples)."""
    if rest is None:
        return first
    return pd.concat([first.assign(sample=0), rest.drop(columns=["seed"], errors="ignore")],
                     ignore_index=True)


def write_responses(df: pd.DataFrame, path: Path) -> None:
    """JSON Lines, one response per line: text and stop reasons survive exactly (CSV would not)."""
    from hbpsych_utils.core.writes import write_text

    lines = [json.dumps({k: _plain(v) for k, v in row.items()}, ensure_ascii=False)
             for row in df.to_dict(orient="records")]
    write_text(path, "".join(line + "\n" for line in lines))


def read_responses(path: Path | str) -> pd.DataFrame:
    """``responses.jsonl`` back as the responses table, every line validated
    (``ResponseRecord``: errors name file, line and field)."""
    return _read(path, ResponseRecord, RESPONSE_COLUMNS)


def read_sample_responses(path: Path | str) -> pd.DataFrame:
    """``responses_samples.jsonl`` back (``SampleResponseRecord``): the responses table with
    ``sample`` and ``seed``."""
    return _read(path, SampleResponseRecord, (*RESPONSE_COLUMNS, *SAMPLE_COLUMNS))


def _read(path: Path | str, record: type[ResponseRecord], columns: Sequence[str]
          ) -> pd.DataFrame:
    from hbpsych_utils.core import jsonl

    rows = [record.parse(rec, f"{path}:{lineno}").model_dump()
            for lineno, rec in jsonl.records(path, error=ResponsesError)]
    return _typed(pd.DataFrame(rows, columns=list(columns)))


def _plain(value: object) -> object:
    if value is pd.NA:
        return None
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and value != value:  # NaN
        return None
    return value


def decoding_sent(responses: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per model, the decoding configuration the engine actually sent (its first response's):
    what the manifest records, since the registry may fix or drop a requested setting."""
    first = responses.drop_duplicates("model").set_index("model")["config"]
    return {str(m): json.loads(c) for m, c in first.items()}


def plan_table(plan: Plan) -> pd.DataFrame:
    """The engine's cost plan (``Engine.plan``) per model, with a total row: calls still to
    make (stored answers are not counted), estimated tokens and USD. What a live chapter
    shows beside the plan the engine prints before it sends anything."""
    rows = {model: {"calls": row["calls"], "est_input_tokens": row["est_input_tokens"],
                    "est_output_tokens": row["est_output_tokens"], "est_cost": row["est_cost"]}
            for model, row in sorted(plan.by_model.items())}
    rows["total"] = {"calls": plan.calls, "est_input_tokens": plan.est_input_tokens,
                     "est_output_tokens": plan.est_output_tokens, "est_cost": plan.est_cost}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def summary(responses: pd.DataFrame) -> pd.DataFrame:
    """Per model: responses, refusals, failures, tokens and cost."""
    g = responses.groupby("model")
    return pd.DataFrame({
        "n": g.size(),
        "ok": g["status"].apply(lambda s: int((s == "ok").sum())),
        "refused": g["refusal"].sum().astype(int),
        "failed": g["status"].apply(lambda s: int((s == "failed").sum())),
        "output_tokens": g["output_tokens"].sum(),
        "cost": g["cost"].sum(),
    })
