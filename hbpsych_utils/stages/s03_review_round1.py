"""Chapter 03, blinded clinician review round 1: the set, the packet, the ratings, the tally.

The chapter's calls, in order: :func:`start` (its parameters, checked); :func:`review_set`
(the resolver: ``replay``, the released set, the screening key's ``in_blinded_set`` rows under
the review ids the released ratings carry, and the released ratings; ``live``, designed from
this run's screen, every screened-in item plus seeded concealed controls, and the ratings files
the profile lists); :func:`instrument` (the reviewers' packet and HTML instrument);
:func:`votes` (each reviewer's ratings file validated against the set, and the votes table);
:func:`tally` (inclusion and the stopping rule: controls included above the threshold trigger a
recall round); :func:`agreement` (on relevance, among the reviewers); :func:`metrics`,
:func:`write` and :func:`findings`. Until a live round's ratings files are listed, the votes,
the tally and the agreement are not made (the set says so once), the metrics say how many
items await ratings, and no ``votes.csv`` is written (a stale one is removed), so 05 never
assembles a subset from an earlier run's votes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from hbpsych_utils.construction import ratings, review_round
from hbpsych_utils.construction import review_set as review_sets
from hbpsych_utils.construction.tally import outcomes, tally_round1
from hbpsych_utils.core.config import resolve_path
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import ReviewRound1Metrics
from hbpsych_utils.reporting.display import Findings
from hbpsych_utils.reporting.rounds import Agreement, Tally, Votes
from hbpsych_utils.reporting.vocabulary import Table
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.REVIEW_ROUND1
SCREENED_IN_LABELS = ("RELEVANT", "BORDERLINE")
RELEASED_REVIEWERS = (1, 2, 3)
"""The released round-1 ratings files: ``ratings_round1_R1`` ... ``R3``."""
start = base.starter(STAGE)


@dataclass(frozen=True)
class ReviewSet:
    """The blinded set (``review_id``, ``prompt_id``, ``kind``), what it was built from, and the
    ratings files that rate it (none, live, until the profile lists them)."""

    mode: Literal["replay", "live"]
    table: pd.DataFrame
    inputs: review_round.RoundInputs
    ratings_paths: list[Path]
    how: str
    """How the set was made, as the chapter says it."""

    @property
    def rated(self) -> ReviewSet | None:
        """This set when its ratings are listed (what the votes need), else ``None``."""
        return self if self.ratings_paths else None

    def view(self) -> Table:
        how = self.how
        kinds = self.table.kind.value_counts().rename("conversations").to_frame()
        waiting = ([] if self.ratings_paths else [
            "No ratings are in yet: the round stops after the instrument until the profile's "
            "`review_round1.ratings_files` lists the reviewers' exports."])
        return Table(kinds, caption=f"The review set: {len(self.table):,} conversations, "
                     f"{how}", notes=waiting)


@base.resolver
def review_set(run: StageRun, *, n_controls: int, seed: int,
               ratings_files: list[str] | None) -> ReviewSet:
    """The round-1 set, replayed (with the released ratings) or designed from this run's
    screen with ``n_controls`` concealed controls in an order seeded by ``seed`` (with the
    ``ratings_files`` the profile lists), and checked against the screen (every screened-in
    item once, the controls from ``NOT_RELEVANT``, as many as ``n_controls``)."""
    stage = run.stage
    inputs = review_round.round_inputs(stage)
    screen = inputs.screen
    if run.mode == graph.REPLAY:
        paths = [stage.fetch(f"ratings_round1_R{i}") for i in RELEASED_REVIEWERS]
        table = review_sets.replay_round1(stage.fetch("screening_key"),
                                          ratings.released_assignment(paths))
    else:
        paths = [resolve_path(p) for p in (ratings_files or [])]
        screened_in = screen.loc[screen.label.isin(SCREENED_IN_LABELS), "prompt_id"]
        pool = screen.loc[screen.label == "NOT_RELEVANT", "prompt_id"]
        table = review_sets.design_round(screened_in, pool, n_controls, seed)
    review_sets.check_round1_design(table, screen, n_controls=n_controls)
    if run.mode == graph.REPLAY:
        return ReviewSet(graph.REPLAY, table, inputs, paths, "the released set, under the "
                         "review ids the released ratings carry")
    return ReviewSet(graph.LIVE, table, inputs, paths,
                     "designed from this run's screen in one seeded order")


def instrument(run: StageRun, review: ReviewSet) -> review_round.Materials:
    """The reviewers' packet (review id, conversation, translation: nothing about the screen)
    and the self-contained HTML instrument they open from disk."""
    return review_round.write_materials(run.stage, review.table, review.inputs,
                                        round_name="round1")


@base.needs
def votes(review: ReviewSet) -> Votes:
    """Each ratings file validated against the set (every review id once, prompt ids
    matching, ``Y|N``, vocabulary, confidence; all problems raised at once), then the votes.
    Needs the round's ratings (``ReviewSet.rated``)."""
    rated = ratings.load_round(review.ratings_paths, review.table,
                               vocabulary=review.inputs.vocabulary)
    return Votes(rated, ratings.votes_table(review.table, rated))


@base.needs
def tally(votes: Votes, *, threshold: float) -> Tally:
    """Inclusion (at least two of three ``Y``) and the stopping rule: a control-inclusion rate
    strictly above ``threshold`` triggers a recall round (``tally.tally_round1``)."""
    return Tally(tally_round1(votes.table, threshold=threshold), outcomes(votes.table))


@base.needs
def agreement(votes: Votes) -> Agreement:
    """Gwet's AC1 per reviewer pair and their mean, the multi-rater AC1, Fleiss' and Cohen's
    kappa (``review_round.relevance_agreement``)."""
    return Agreement(review_round.relevance_agreement(votes.table))


def metrics(review: ReviewSet, tally: Tally | None, agreement: Agreement | None, *,
            threshold: float) -> ReviewRound1Metrics:
    """03's metrics: the tally, the agreement and the ``threshold``; without ratings, only the
    size of the set and that no ratings file is in."""
    if tally is None or agreement is None:
        return ReviewRound1Metrics(mode=review.mode,
                                   n_reviewed=len(review.table),
                                   n_ratings_files=len(review.ratings_paths))
    counted = tally.counted
    return ReviewRound1Metrics.model_validate({
        "mode": review.mode, **counted.metrics(), **agreement.summary.metrics(),
        "tier_counts": counted.tier_counts, "threshold": threshold})


def write(run: StageRun, m: ReviewRound1Metrics, review: ReviewSet,
          votes: Votes | None) -> Written:
    """The review set and, with ratings, the votes (05 reads them), then ``metrics.json``."""
    tables = {graph.REVIEW_SET: review.table}
    if votes is not None:
        tables[graph.VOTES] = votes.table
    else:
        run.stage.path(graph.VOTES).unlink(missing_ok=True)  # no votes from an earlier run
    return base.write(run, m, tables=tables)


def _stat(value: float | None) -> str:
    """A coefficient to three decimals; "undefined" where it is not a number (NaN, null)."""
    return "undefined" if value is None or value != value else f"{value:.3f}"


def findings(m: ReviewRound1Metrics) -> Findings:
    """What round 1 decided, from 03's metrics.

    The stopping rule is the tally's: a control-inclusion rate strictly above the threshold
    (``recall_triggered``) triggers a recall round, otherwise the loop ends. Without ratings
    the only finding is that the round awaits them.
    """
    if not m.tallied:
        return Findings([
            f"The blinded set holds {m.n_reviewed:,} conversations and no ratings are in yet: "
            "send the instrument to the reviewers, then list their exports in the profile's "
            "`review_round1.ratings_files` and run again."])
    triggered = m.recall_triggered
    return Findings([
        f"{m.n_reviewed:,} conversations were reviewed ({m.n_screened_in:,} screened in, "
        f"{m.n_controls:,} concealed controls).",
        f"The majority included **{m.n_included:,}**: {m.n_screened_in_included:,} "
        f"screened-in items and {m.n_controls_included:,} controls, a control-inclusion rate "
        f"of **{m.control_inclusion_rate:.1%}** — "
        f"{'above' if triggered else 'at or below'} the {m.threshold:.0%} threshold, so "
        + ("a recall round is triggered." if triggered else "the loop ends here."),
        f"Agreement on relevance: mean pairwise AC1 {_stat(m.ac1_pairwise_mean)}, multi-rater "
        f"AC1 {_stat(m.ac1_multirater)}, Fleiss' kappa {_stat(m.fleiss_kappa)}.",
    ])
