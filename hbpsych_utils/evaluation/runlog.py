"""The released run's own logs: the spend ledger and the anomaly log, summarised by phase.

``spend.jsonl`` holds one line per charge (``ts, phase, who, cost`` in USD); ``errors.jsonl``
one line per anomaly (``ts, phase, kind, candidate/judge, prompt_id, detail``; read with
:func:`hbpsych_utils.evaluation.refusals.read_error_log`). Paper mode of the generation and grading
notebooks reports these, since the responses and verdicts themselves are not released.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from pydantic import ConfigDict, Field

from hbpsych_utils.core import jsonl
from hbpsych_utils.core.records import TextRecord
from hbpsych_utils.evaluation.refusals import ErrorEvent

GENERATE, GRADE = "generate", "grade"
"""The released logs' names of the generation and grading phases."""
NO_VERDICT = "grade_no_verdict"
"""The anomaly log's kind for a verdict still missing after the bounded re-asks."""


class SpendError(ValueError):
    """A malformed spend-ledger line; the message names file, line and field."""


class SpendLine(TextRecord):
    """One charge of the released spend ledger (strict types; other keys are ignored)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    error = SpendError

    ts: str | None = None
    """When it was charged (ISO 8601), if recorded."""
    phase: str
    """``generate``, ``grade``, ... (what the money was spent on)."""
    who: str
    """The model charged."""
    cost: float = Field(ge=0, allow_inf_nan=False)
    """USD; a number (not a string or a boolean), never negative."""


def read_spend(path: Path | str) -> pd.DataFrame:
    """The spend ledger, validated line by line (``SpendLine``: errors name file, line, field)."""
    rows = [SpendLine.parse(rec, f"{path}:{lineno}").model_dump()
            for lineno, rec in jsonl.records(path, error=SpendError)]
    return pd.DataFrame(rows, columns=["ts", "phase", "who", "cost"])


def spend_by(spend: pd.DataFrame, phase: str) -> pd.Series:
    """USD per model (``who``) in one phase, largest first."""
    sel = spend[spend["phase"] == phase]
    return sel.groupby("who")["cost"].sum().sort_values(ascending=False).rename("usd")


def anomalies(events: Iterable[ErrorEvent], phase: str) -> pd.DataFrame:
    """Counts of each anomaly kind per model in one phase (rows: model; columns: kind)."""
    rows = [{"model": e.judge or e.candidate or "?", "kind": e.kind}
            for e in events if e.phase == phase]
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    return pd.crosstab(df["model"], df["kind"])
