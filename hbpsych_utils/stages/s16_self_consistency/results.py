"""Chapter 16's statistics as the chapter shows them: flip rates, the criteria that flip,
scores per repeat and the judges' own refusals (``evaluation.consistency`` computes them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from hbpsych_utils.evaluation import consistency
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.vocabulary import Table, Tables
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s16_self_consistency.regrading import Regraded


def _undefined_note(reasons: Mapping[str, str], what: str) -> list[str]:
    """Under a table: each undefined value's reason (shown as — in the table)."""
    if not reasons:
        return []
    return [f"{vocabulary.MISSING} ({what} undefined): " + "; ".join(
        f"{vocabulary.term_label(k)}: {v}" for k, v in reasons.items()) + "."]


@dataclass(frozen=True)
class Flips:
    """Each judge's flip rate and the panel majority's, with their intervals and AC1 between
    repeats."""

    rates: list[consistency.FlipRate]
    ac1: dict[str, float | None]
    ac1_undefined: dict[str, str]
    level: float

    @property
    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{
            "judge": r.judge, "n_items": r.n_items, "n_flipped": r.n_flipped,
            "n_left_out": r.n_left_out, "flip_rate": r.rate, "low": r.low, "high": r.high,
            "repeat_ac1": self.ac1.get(r.judge)} for r in self.rates]).set_index("judge")

    def view(self) -> Table:
        why = {r.judge: r.undefined for r in self.rates if r.undefined}
        shown = self.frame.rename(columns={"low": "flip_rate_low", "high": "flip_rate_high"})
        return Table(shown, level=self.level,
                     caption="Flip rate per judge and for the panel majority (the share of "
                     "items whose verdicts are not unanimous across the repeats)",
                     notes=[*_undefined_note(why, "flip rate or interval"),
                            *_undefined_note(self.ac1_undefined, "AC1")])


@base.needs
def flips(regraded: Regraded, *, n_resamples: int, seed: int, level: float) -> Flips:
    """Each judge's and the panel majority's flip rate with its percentile interval at
    ``level`` (``n_resamples`` resamples of the conversations, seeded ``seed``), and Gwet's AC1
    between the repeats (``consistency.flip_rates``, ``consistency.repeat_agreement``)."""
    judges = regraded.data.judges
    rates = consistency.flip_rates(regraded.repeats, judges, n_resamples=n_resamples,
                                   seed=seed, level=level)
    both = regraded.repeats
    if len(judges) > 1:
        both = pd.concat([both, consistency.panel_repeats(both, judges)], ignore_index=True)
    return Flips(rates, consistency.repeat_agreement(both),
                 consistency.repeat_agreement_undefined(both), level)


@dataclass(frozen=True)
class FlippingCriteria:
    """The flip rate by a label of the item: theme, rubric axis, Psych category."""

    by: dict[str, pd.DataFrame]

    @property
    def frame(self) -> pd.DataFrame:
        return pd.concat([f.rename(columns={label: "label"}).assign(by=label)
                          for label, f in self.by.items()], ignore_index=True)[
            ["by", "label", "judge", "n_items", "n_flipped", "rate"]]

    def view(self) -> Tables:
        tables = [Table(f[f["judge"] == consistency.POOLED].drop(columns="judge")
                        .rename(columns={"rate": "flip_rate"}), index=False,
                        caption=f"Flip rate by {vocabulary.label(label, None).lower()}, all "
                        "judges pooled (highest first)")
                  for label, f in self.by.items()]
        return Tables(tables, note="Which criteria flip: the items of all judges pooled, by "
                      "their label (`flips_by_label.csv` has each judge's too).")


@base.needs
def flipping_criteria(regraded: Regraded) -> FlippingCriteria:
    """The flip rate by the items' theme, rubric axis and Psych category
    (``consistency.flips_by``), the judges pooled and each judge."""
    return FlippingCriteria({label: consistency.flips_by(regraded.repeats, regraded.data.labels,
                                                         label)
                             for label in consistency.FLIP_LABELS})


# --- scores and ranking ------------------------------------------------------------------------

@dataclass(frozen=True)
class Scores:
    """Each candidate's panel score per repeat, its spread, and tau between the rankings."""

    spread: pd.DataFrame
    taus: dict[str, float | None]
    taus_undefined: dict[str, str]

    def view(self) -> Tables:
        frame = self.spread.drop(columns="undefined")
        why = {str(c): "; ".join(f"{k}: {v}" for k, v in r.items())
               for c, r in self.spread["undefined"].items() if r}
        taus = pd.DataFrame({"kendall_tau": self.taus}).rename_axis("repeat_pair")
        taus.index = [" and ".join(pair.split("|")) for pair in taus.index]
        taus.index.name = "repeat_pair"
        return Tables([
            Table(frame, value_kind="score", caption="Each candidate's panel score (Table 1's "
                  "clipped mean) with each repeat's verdicts, and its spread",
                  notes=_undefined_note(why, "score")),
            Table(taus, caption="Kendall's τ between the candidates' rankings of each pair of "
                  "repeats", notes=_undefined_note(self.taus_undefined, "τ"))])


@base.needs
def scores(regraded: Regraded) -> Scores:
    """Each repeat's scores (07's verdicts with the sample's replaced by that repeat's:
    ``consistency.repeat_scores``), each candidate's panel score per repeat and its spread
    (``consistency.score_spread``), and Kendall's tau between the repeats' rankings."""
    s = consistency.repeat_scores(regraded.data.verdicts, regraded.repeats,
                                  regraded.data.conversations)
    return Scores(consistency.score_spread(s), consistency.ranking_taus(s),
                  consistency.ranking_tau_undefined(s))


# --- the judges' refusals ----------------------------------------------------------------------

@dataclass(frozen=True)
class Refusals:
    """The judges' refused or filtered verdicts per judge and Psych category, in 07's grading
    and in the re-gradings."""

    grading: pd.DataFrame
    repeats: pd.DataFrame

    @property
    def frame(self) -> pd.DataFrame:
        return pd.concat([self.grading.assign(where="grading"),
                          self.repeats.assign(where="repeats")], ignore_index=True)

    def view(self) -> Tables:
        shown = [Table(f.set_index(["judge", "category"]), caption=caption)
                 for f, caption in ((self.grading, "In this run's grading (07)"),
                                    (self.repeats, "In the re-gradings"))]
        return Tables(shown, note="Verdicts the judge's provider refused or filtered, apart "
                      "from those it answered without a usable verdict and from failed calls; "
                      "never read as not met (the candidates' refusals are chapter 10's).")


@base.needs
def refusals(regraded: Regraded) -> Refusals:
    """Per judge and Psych category (suicidality first): verdicts refused or filtered by the
    judge's provider, answered without a verdict, and graded (``consistency.judge_refusals``),
    in 07's verdicts of the first replies and in the re-gradings."""
    data = regraded.data
    v = data.verdicts[data.verdicts["judge"].isin(data.judges)]
    if "reason" not in v.columns:
        v = v.assign(reason=None)
    return Refusals(consistency.judge_refusals(v, data.categories),
                    consistency.judge_refusals(regraded.repeats[regraded.repeats["repeat"] > 0],
                                               data.categories))


# --- metrics, outputs, findings ----------------------------------------------------------------
