"""Chapter 15's grading: every row graded by every judge through the run's engine."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils.evaluation import grading, panel
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.reporting.vocabulary import Table, Tables
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun
from hbpsych_utils.stages.s15_judge_accuracy.rows import MetaEval

GRADE_TAG = "meta_eval"
"""The ledger tag of this chapter's judge calls (the store tells them from 07's)."""


# --- the judges' verdicts ------------------------------------------------------------------------

@dataclass(frozen=True)
class Graded:
    """Live: every (judge, row) verdict, joined with the physician majority."""

    source: MetaEval
    verdicts: pd.DataFrame
    """judge, row, criteria_met (None: excluded), recovered, excluded, attempts, reason."""
    spend_usd: float
    paid_earlier: float
    """USD earlier attempts of this grading paid for answers this one reused from the store."""

    @property
    def joined(self) -> pd.DataFrame:
        """Each judge's verdicts with the physician majority."""
        return ja.with_truth(self.verdicts, self.source.labels)

    @property
    def rated(self) -> pd.DataFrame:
        """:attr:`joined` and the panel's verdicts (the judges' majority) as one more rater."""
        v = self.verdicts[["judge", "row", "criteria_met"]]
        both = pd.concat([v, ja.panel_verdicts(v, self.source.judges)], ignore_index=True)
        return ja.with_truth(both, self.source.labels)

    @property
    def empty(self) -> bool:
        """No judge returned a verdict on any row: nothing to compare with the physicians."""
        return self.joined.empty

    @property
    def n_excluded(self) -> int:
        return int(self.verdicts["excluded"].sum())

    def view(self) -> Tables:
        v = self.verdicts
        g = v.groupby("judge", sort=False)
        frame = pd.DataFrame({"rows": g.size(), "met": g["criteria_met"].apply(
            lambda s: int((s == True).sum())),  # noqa: E712 - None is neither
            "not_met": g["criteria_met"].apply(lambda s: int((s == False).sum())),  # noqa: E712
            "recovered": g["recovered"].sum().astype(int),
            "reasked": g["attempts"].apply(lambda s: int((s > 1).sum())),
            "excluded": g["excluded"].sum().astype(int)})
        note = (f"This grading paid ${self.spend_usd:,.4f} (answers already in the store cost "
                "nothing)" + (f"; earlier attempts in this run folder paid "
                              f"${self.paid_earlier:,.4f} for the answers it reused"
                              if self.paid_earlier else "")
                + ". An excluded verdict is left out of every statistic, never read as not met."
                + (" No judge returned a verdict on any row, so nothing is compared with the "
                   "physicians." if self.empty else ""))
        return Tables([Table(frame, caption="Verdicts per judge")], note=note)


@base.needs
def grade(rows: MetaEval, run: StageRun, *, temperature: float, max_tokens: int,
          max_reasks: int) -> Graded:
    """Every row graded by every judge through the run's engine, with the reference grader
    template (``judge_accuracy.grader_prompt``) at ``temperature`` and ``max_tokens`` (the
    study's grading settings), a missing verdict re-asked at most ``max_reasks`` times
    (``panel.grade_requests``); the plan was shown first."""
    requests = [grading.GraderRequest(
        prompt_id=ja.row_key(i), criterion_index=0, system=grading.SYSTEM_MESSAGE,
        user=ja.grader_prompt(rows.template, r), max_tokens=max_tokens,
        temperature=temperature) for i, r in enumerate(rows.rows)]
    with run.open_engine(conversations=rows.conversations) as engine:
        done = panel.grade_requests(engine, requests, rows.judges, candidate=GRADE_TAG,
                                    max_reasks=max_reasks, mode=run.llm.mode, tag=GRADE_TAG)
        earlier = engine.paid_earlier(done.keys, done.run_ids)
    verdicts = done.verdicts.rename(columns={"prompt_id": "row"}).drop(
        columns=["candidate", "criterion_index"])
    return Graded(rows, verdicts, float(done.spend_totals()["spend_usd"]), earlier)

