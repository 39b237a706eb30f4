"""What a review round's chapter shows of its ratings (03 and 04 alike): the validated votes,
the tally with its stopping rule, and the agreement on relevance."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils.construction import ratings
from hbpsych_utils.construction.agreement import AgreementSummary
from hbpsych_utils.construction.tally import RoundTally
from hbpsych_utils.reporting.display import Shown
from hbpsych_utils.reporting.vocabulary import Table


@dataclass(frozen=True, repr=False)
class Votes(Shown):
    """Every reviewer's validated ratings file and the votes table (one row per item)."""

    rated: list[ratings.Ratings]
    table: pd.DataFrame

    def _repr_html_(self) -> str:
        return Table(ratings.empty_field_counts(self.rated), caption="Empty category and "
                     "confidence strings per reviewer (tolerated, counted)", index=False).html()


@dataclass(frozen=True, repr=False)
class Tally(Shown):
    """What the votes decide: inclusion by majority, and the stopping rule."""

    counted: RoundTally
    outcomes: pd.DataFrame
    """Items by kind and consensus tier (``tally.outcomes``)."""

    def _repr_html_(self) -> str:
        return Table(self.outcomes, caption="Items by kind and consensus tier, with how many "
                     "the majority included", value_kind="count").html()


@dataclass(frozen=True, repr=False)
class Agreement(Shown):
    """Agreement on relevance among the round's reviewers."""

    summary: AgreementSummary

    def _repr_html_(self) -> str:
        pairs = pd.DataFrame({"gwet_ac1": self.summary.ac1_pairs,
                              "cohen_kappa": self.summary.cohen_kappa_pairs}).rename_axis("pair")
        return Table(pairs, caption="Agreement on relevance per reviewer pair").html()
