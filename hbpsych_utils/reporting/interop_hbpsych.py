"""This compendium's own per-conversation score export, read for ``filter-results``.

``hbpsych``
    This compendium's per-conversation score export: JSONL (or CSV with a header), one record
    per (judge, candidate, conversation) with fields ``prompt_id``, ``candidate``, ``judge``,
    ``score`` (a number; ``null``/empty = that judge gave no verdict). Other fields are ignored.
    The per-conversation score of a candidate is the panel score: the equal-weight mean over the
    judges of the input, on the conversations every one of them scored
    (:func:`hbpsych_utils.evaluation.scoring.panel_conversation_scores`); the others are
    *unscored*. The
    study's responses JSONL (``model, prompt_id, text, ...``) holds replies, not scores: passing
    it is an error that says so.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from pydantic import PlainValidator, model_validator

from hbpsych_utils.core import jsonl, records
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.reporting.interop_records import (
    ConversationScore,
    InputRecord,
    InteropError,
    ScoreOrNone,
    Text,
    score_or_none,
    validate,
)


def _csv_score(value: Any) -> float | None:
    """A CSV cell: empty means no verdict; anything else must read as a number."""
    raw = (value or "").strip()
    if raw == "":
        return None
    try:
        number = float(raw)
    except ValueError:
        raise ValueError(f"not a number: {raw!r}") from None
    return score_or_none(number)


class HbpsychScore(InputRecord):
    """One record of the compendium's per-conversation score export (a JSON line)."""

    prompt_id: Text
    candidate: Text
    judge: Text
    score: ScoreOrNone
    """Required; ``null`` = that judge gave no verdict."""

    @model_validator(mode="before")
    @classmethod
    def _not_a_reply(cls, data: Any) -> Any:
        if isinstance(data, dict) and "score" not in data and {"text", "model"} <= set(data):
            raise ValueError(
                "a responses record (model, prompt_id, text): it holds replies, not scores. "
                "Pass the grades/scores export (prompt_id, candidate, judge, score)"
            )
        return data


class HbpsychCsvScore(HbpsychScore):
    """The same record as a CSV row: every cell is text, an empty score = no verdict."""

    score: Annotated[float | None, PlainValidator(_csv_score)]


HBPSYCH_FIELDS = tuple(HbpsychScore.model_fields)


def _hbpsych_rows(path: Path) -> list[tuple[HbpsychScore, str]]:
    """Validated (record, where) pairs of a JSONL or CSV score export."""
    text = records.read_text(path, error=InteropError, newline="")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        missing = [f for f in HBPSYCH_FIELDS if f not in (reader.fieldnames or [])]
        if missing:
            raise InteropError(f"{path}: header lacks column(s) {missing}")
        return [(validate(HbpsychCsvScore, rec, f"{path}:{lineno}"), f"{path}:{lineno}")
                for lineno, rec in enumerate(reader, start=2)]
    return [(validate(HbpsychScore, rec, f"{path}:{lineno}"), f"{path}:{lineno}")
            for lineno, rec in jsonl.records(path, error=InteropError)]


def read_hbpsych(path: Path | str) -> pd.DataFrame:
    """The score export as a table ``judge, candidate, prompt_id, score, where`` (NaN = none)."""
    path = Path(path)
    out = [{"judge": rec.judge, "candidate": rec.candidate, "prompt_id": rec.prompt_id,
            "score": float("nan") if rec.score is None else rec.score, "where": where}
           for rec, where in _hbpsych_rows(path)]
    if not out:
        raise InteropError(f"{path}: no records")
    return pd.DataFrame(out, columns=[*scoring.SCORE_COLUMNS, "where"])


def hbpsych_panel_scores(rows: pd.DataFrame) -> list[ConversationScore]:
    """Panel score per (candidate, conversation) over every judge of ``rows``.

    A conversation that some judge did not score is kept as unscored, so it is reported rather
    than silently dropped; a candidate that a judge never scored is an error.
    """
    key = ["judge", "candidate", "prompt_id"]
    dup = rows.duplicated(key, keep=False)
    if dup.any():
        d = rows[dup].sort_values(key, kind="mergesort")
        first, second = d.iloc[0], d.iloc[1]
        raise InteropError(
            f"{second['where']}: duplicate record for judge {first['judge']}, candidate "
            f"{first['candidate']}, prompt_id {first['prompt_id']} (first at {first['where']})"
        )
    judges = sorted(rows["judge"].unique())
    out = []
    for cand in sorted(rows["candidate"].unique()):
        sub = rows[rows["candidate"] == cand]
        try:
            panel = scoring.panel_conversation_scores(sub, cand, judges)
        except scoring.ScoringError as exc:
            raise InteropError(f"{sub.iloc[0]['where'].rsplit(':', 1)[0]}: {exc}") from None
        where = sub.groupby("prompt_id")["where"].first()
        for pid in sorted(sub["prompt_id"].unique()):
            score = float(panel[pid]) if pid in panel.index else None
            out.append(ConversationScore(cand, pid, score, where[pid]))
    return out
