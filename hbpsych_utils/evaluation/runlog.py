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

from hbpsych_utils.core import jsonl
from hbpsych_utils.evaluation.refusals import ErrorEvent


def read_spend(path: Path | str) -> pd.DataFrame:
    """The spend ledger, validated line by line (errors name file, line and field)."""
    rows = []
    for lineno, rec in jsonl.records(path):
        for key in ("phase", "who", "cost"):
            if key not in rec:
                raise ValueError(f"{path}:{lineno}: field {key!r}: missing")
        cost = rec["cost"]
        if isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0:
            raise ValueError(f"{path}:{lineno}: field 'cost': {cost!r} is not a charge")
        rows.append({"ts": rec.get("ts"), "phase": rec["phase"], "who": rec["who"],
                     "cost": float(cost)})
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
