"""Chapter 15's corrected criterion-met rates: this run's rates with each judge's errors against
the physicians taken out (Rogan-Gladen)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.reporting.display import Note
from hbpsych_utils.reporting.vocabulary import Table, Tables
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s15_judge_accuracy.physicians import Accuracy
from hbpsych_utils.stages.s15_judge_accuracy.undefined import rater, undefined_note


@dataclass(frozen=True)
class Corrected:
    """Each judge's criterion-met rate on this run's grading, corrected (Rogan-Gladen)."""

    rates: list[ja.CorrectedRate]
    level: float
    """The level of the corrected rates' intervals."""

    @property
    def empty(self) -> bool:
        """No judge graded both this run's replies and the rows."""
        return not self.rates

    @property
    def table(self) -> pd.DataFrame:
        """One row per rate (``corrected_rates.csv``); why a value is undefined is said under
        the chapter's table."""
        return pd.DataFrame([{k: v for k, v in r.__dict__.items() if k != "interval_undefined"}
                             for r in self.rates])

    def view(self) -> Tables | Note:
        if self.empty:
            return Note("No judge graded both this run's replies (07) and the rows, so no "
                        "criterion-met rate can be corrected.")
        shown = self.table.set_index("judge")[[
            "n_verdicts", "observed", "sensitivity", "specificity", "corrected", "low", "high"]]
        note = ("The share of this run's criteria (07, first reply) each judge calls met, and "
                "the rate it implies once the judge's sensitivity and specificity against the "
                "physicians are taken out: (observed + specificity - 1) / (sensitivity + "
                "specificity - 1), clipped to [0, 1]. The interval resamples this run's "
                "conversations and the calibration rows' conversations together, so the "
                "calibration's own uncertainty widens it. It assumes that what physicians "
                "said of HealthBench's completions stands in for what they would say of the "
                "candidates' replies: the judge errs at the same rates on both.")
        why = undefined_note([(rater(r.judge), "this run", name, reason)
                               for r in self.rates
                               for name, reason in ja.corrected_undefined(r).items()],
                              self.level)
        return Tables([Table(shown, caption="Criterion-met rates, observed and corrected",
                             level=self.level, notes=[why])], note=note)


@base.needs
def corrected(acc: Accuracy, *, n_resamples: int, seed: int, level: float) -> Corrected:
    """For each judge that graded both this run (07's verdicts, the first reply) and the rows,
    and for the panel (the judges' majority on each criterion of each reply, and on each row):
    its criterion-met rate and the Rogan-Gladen correction with an interval of ``n_resamples``
    seeded resamples at ``level`` that resamples both (``judge_accuracy.corrected_rate``). The
    transfer assumption: the judge's sensitivity and specificity on HealthBench's completions,
    against physicians, hold on the candidates' replies."""
    source = acc.graded.source
    keys = ["candidate", "prompt_id", "criterion_index"]
    mine = source.run_verdicts
    run_panel = ja.panel_verdicts(mine[["judge", *keys, "criteria_met"]], source.judges, keys)
    verdicts = pd.concat([mine, run_panel], ignore_index=True)
    rated = acc.graded.rated
    rates = []
    for judge in [*source.judges, ja.PANEL]:
        own = verdicts[verdicts["judge"] == judge]
        cal = rated[rated["judge"] == judge]
        if own["criteria_met"].notna().any() and not cal.empty:
            rates.append(ja.corrected_rate(judge, own, cal, n_resamples=n_resamples,
                                           seed=seed, level=level))
    return Corrected(rates, level)


