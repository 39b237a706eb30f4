"""What a review round's votes decide: inclusion, the stopping rule, the modal category.

Both rounds are tallied the same way: items under test against concealed controls, the share
of controls the majority includes against a threshold (strictly above it triggers another,
recall, round), and optionally the tested items broken down by a column (round 2: the recall
screen's tier). ``RoundTally`` holds those generic numbers once; each round's ``metrics.json``
names them differently (round 1 tests ``screened_in`` items, round 2 ``candidate`` items by
tier), so a round is a name map (``ROUND1_NAMES``, ``ROUND2_NAMES``), not another class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction.ratings import CATEGORY_SUFFIX, reviewer_names
from hbpsych_utils.construction.review_set import CANDIDATE, CONTROL, SCREENED_IN, ReviewSetError
from hbpsych_utils.construction.screening import RECALL_CANDIDATE_TIERS

NO_CATEGORY_MAJORITY = "no category majority"

ROUND1_NAMES: dict[str, str] = {
    "n_reviewed": "n_reviewed",
    "n_tested": "n_screened_in",
    "n_controls": "n_controls",
    "n_included": "n_included",
    "n_tested_included": "n_screened_in_included",
    "n_controls_included": "n_controls_included",
    "control_inclusion_rate": "control_inclusion_rate",
    "recall_triggered": "recall_triggered",
}
"""Round 1's metrics: generic tally name -> the key 03_review_round1 writes, in its order."""

ROUND2_NAMES: dict[str, str] = {
    "n_tested": "n_candidates",
    "CLEAR": "n_clear",
    "POSSIBLE": "n_possible",
    "n_controls": "n_controls",
    "n_tested_included": "n_candidates_included",
    "CLEAR_included": "n_clear_included",
    "POSSIBLE_included": "n_possible_included",
    "n_controls_included": "n_controls_included",
    "control_inclusion_rate": "control_inclusion_rate",
    "loop_terminated": "loop_terminated",
}
"""Round 2's metrics (04_recall): candidates and their recall tiers (``CLEAR`` counts the CLEAR
candidates, ``CLEAR_included`` those the majority included)."""


def modal_category(
    votes: Sequence[str], categories: Sequence[str], *, min_agree: int = 2
) -> str:
    """The category most Y-voters chose, if at least ``min_agree`` of them chose it.

    Only reviewers who voted Y count; an empty category is no category. A tie for the top
    count (possible with four or more reviewers) is no majority either.
    """
    chosen = [c for v, c in zip(votes, categories, strict=True) if v == "Y" and c]
    counts = Counter(chosen).most_common()
    if not counts or counts[0][1] < min_agree:
        return NO_CATEGORY_MAJORITY
    if len(counts) > 1 and counts[1][1] == counts[0][1]:
        return NO_CATEGORY_MAJORITY
    return counts[0][0]


def modal_categories(votes: pd.DataFrame, *, min_agree: int = 2) -> pd.Series:
    """``modal_category`` for every row of a votes table, indexed like it."""
    names = reviewer_names(votes)
    return pd.Series(
        [
            modal_category([row[n] for n in names], [row[n + CATEGORY_SUFFIX] for n in names],
                           min_agree=min_agree)
            for _, row in votes.iterrows()
        ],
        index=votes.index,
        name="modal_category",
        dtype=object,
    )


def included_ids(votes: pd.DataFrame, kinds: Iterable[str] | None = None) -> list[str]:
    """Sorted prompt ids the majority included, optionally only of the given kinds."""
    sel = votes["included"]
    if kinds is not None:
        sel = sel & votes["kind"].isin(list(kinds))
    return sorted(votes.loc[sel, "prompt_id"])


def outcomes(votes: pd.DataFrame) -> pd.DataFrame:
    """Items by kind and consensus tier, with the included count and share per kind."""
    tiers = sorted(votes["tier"].unique(), key=lambda t: -int(t.split("/")[0]))
    table = pd.crosstab(votes["kind"], votes["tier"]).reindex(columns=tiers, fill_value=0)
    table["n"] = votes.groupby("kind").size()
    table["included"] = votes.groupby("kind")["included"].sum().astype(int)
    table["included_share"] = table["included"] / table["n"]
    table.columns.name = None
    return table


@dataclass(frozen=True)
class RoundTally:
    """What a round's votes decide, in generic names; ``metrics`` names them for the round."""

    names: Mapping[str, str]
    """Generic name (a field, or a subgroup value and ``<value>_included``) -> metrics key."""
    n_reviewed: int
    n_tested: int
    n_controls: int
    n_included: int
    n_tested_included: int
    n_controls_included: int
    control_inclusion_rate: float
    threshold: float
    recall_triggered: bool
    tier_counts: dict[str, int]
    """Items per consensus tier ("3/3", "2/3", …)."""
    subgroups: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tested items per value of the subgroup column: ``{"n": …, "included": …}``."""

    @property
    def loop_terminated(self) -> bool:
        """The stopping rule is met: no further round is needed."""
        return not self.recall_triggered

    def counts(self) -> dict[str, float | bool]:
        """Every number of the tally under its generic name (counts, the control inclusion
        rate and the threshold, the two decisions)."""
        out: dict[str, float | bool] = {
            k: getattr(self, k) for k in (
                "n_reviewed", "n_tested", "n_controls", "n_included", "n_tested_included",
                "n_controls_included", "control_inclusion_rate", "threshold",
                "recall_triggered", "loop_terminated",
            )
        }
        for value, group in self.subgroups.items():
            out[value] = group["n"]
            out[f"{value}_included"] = group["included"]
        return out

    def metrics(self) -> dict[str, float | bool]:
        """The round's metrics keys (the agreement keys come from ``agreement``)."""
        counts = self.counts()
        return {key: counts[name] for name, key in self.names.items()}


def tally(
    votes: pd.DataFrame,
    *,
    names: Mapping[str, str],
    test_kind: str = SCREENED_IN,
    control_kind: str = CONTROL,
    threshold: float = study.CONTROL_THRESHOLD,
    subgroup_column: str | None = None,
    subgroups: Sequence[str] = (),
) -> RoundTally:
    """Count a round's outcomes and apply the stopping rule.

    The control-inclusion rate is the share of controls the majority included; a rate strictly
    above ``threshold`` triggers a recall round. ``subgroup_column`` (round 2:
    ``"recovery_tier"``) breaks the tested items down by that column's values, which must be
    among ``subgroups`` (each of them is reported, with zeros when absent).
    """
    unknown = set(votes["kind"]) - {test_kind, control_kind}
    if unknown:
        raise ReviewSetError(
            f"votes table has kind(s) {sorted(unknown)}; expected {test_kind!r} or {control_kind!r}"
        )
    tested = votes[votes["kind"] == test_kind]
    controls = votes[votes["kind"] == control_kind]
    if controls.empty:
        raise ReviewSetError(
            "the review set has no controls: the stopping rule needs concealed controls"
        )
    n_ctrl_inc = int(controls["included"].sum())
    rate = n_ctrl_inc / len(controls)
    groups: dict[str, dict[str, int]] = {}
    if subgroup_column is not None:
        groups = {v: {"n": 0, "included": 0} for v in subgroups}
        for value, grp in tested.groupby(subgroup_column, sort=True):
            groups[str(value)] = {"n": len(grp), "included": int(grp["included"].sum())}
        other = sorted(set(groups) - set(subgroups))
        if other:
            raise ReviewSetError(
                f"{test_kind} items with {subgroup_column} value(s) {other}; expected "
                f"{tuple(subgroups)}"
            )
    return RoundTally(
        names=names,
        n_reviewed=len(votes),
        n_tested=len(tested),
        n_controls=len(controls),
        n_included=int(votes["included"].sum()),
        n_tested_included=int(tested["included"].sum()),
        n_controls_included=n_ctrl_inc,
        control_inclusion_rate=rate,
        threshold=threshold,
        recall_triggered=rate > threshold,
        tier_counts={t: int(n) for t, n in votes["tier"].value_counts().sort_index().items()},
        subgroups=groups,
    )


def tally_round1(votes: pd.DataFrame, *, threshold: float = study.CONTROL_THRESHOLD) -> RoundTally:
    """Round 1: screened-in items versus concealed controls, and the stopping decision."""
    return tally(votes, names=ROUND1_NAMES, test_kind=SCREENED_IN, threshold=threshold)


def tally_round2(
    votes: pd.DataFrame, *, threshold: float = study.CONTROL_THRESHOLD,
    tier_column: str = "recovery_tier",
) -> RoundTally:
    """Round 2: recall candidates (by recall tier, joined from the key) versus fresh controls."""
    return tally(votes, names=ROUND2_NAMES, test_kind=CANDIDATE, threshold=threshold,
                 subgroup_column=tier_column, subgroups=RECALL_CANDIDATE_TIERS)


def design_counts(
    review_set: pd.DataFrame, *, names: Mapping[str, str] = ROUND2_NAMES,
    test_kind: str = CANDIDATE, subgroup_column: str = "recovery_tier",
    subgroups: Sequence[str] = RECALL_CANDIDATE_TIERS,
) -> dict[str, int]:
    """What a designed round holds before any vote, under the round's metrics names: items
    under test, each subgroup, controls (04_recall while it awaits its ratings)."""
    tested = review_set[review_set["kind"] == test_kind]
    counts = {"n_tested": len(tested),
              "n_controls": int((review_set["kind"] == CONTROL).sum()),
              **{v: int((tested[subgroup_column] == v).sum()) for v in subgroups}}
    return {key: counts[name] for name, key in names.items() if name in counts}
