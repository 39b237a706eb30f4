"""Chapter 04, the recall round (round 2): what the screen missed, reviewed blind.

The chapter's calls, in order: :func:`start` (its parameters, checked); :func:`recall_pool`
(the resolver: round 1's decision, the pool of ``NOT_RELEVANT`` conversations that were not
round-1 controls, and the state round 2 is in, ``review_round.ROUND2_STATES``, written as
``round2`` in the metrics; replay, the released round-2 set and ratings; live, once round 1
triggered a recall round, the pool to screen); :func:`recall_screen` (the recall rubric over the
pool through the LLM engine); :func:`review_set` (replay: the released recovery key; live:
candidates plus fresh seeded controls from the recall screen's ``NO`` pool);
:func:`instrument`; :func:`votes`, :func:`tally` and :func:`agreement` (once round 2 is
tallied); :func:`metrics`, :func:`write` and :func:`findings`. What this run's state cannot
produce is said once, with the pool, and not made. Without a round-2 set, files an earlier
run's round 2 left behind are removed, and without a tally so is ``votes.csv``: 05 reads
``round2`` and the votes, and must never mix runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import ratings, review_round, screening
from hbpsych_utils.construction import review_set as review_sets
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.construction.review_round import (
    AWAITING_RATINGS,
    AWAITING_ROUND1,
    NOT_NEEDED,
    TALLIED,
)
from hbpsych_utils.construction.tally import design_counts, outcomes, tally_round2
from hbpsych_utils.core.config import resolve_path, unset_live_model
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import REVIEW_ROUND1, RecallMetrics, ReviewRound1Metrics
from hbpsych_utils.pipeline.profiles import RecallParams
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.rounds import Agreement, Tally, Votes
from hbpsych_utils.reporting.vocabulary import Table, Tables
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.RECALL
RELEASED_REVIEWERS = (1, 2, 3)
"""The released round-2 ratings files: ``ratings_round2_R1`` ... ``R3``."""
STATES: dict[str, tuple[str, str]] = {
    TALLIED: ("tallied", "its ratings are in and counted"),
    AWAITING_ROUND1: ("awaiting round 1's ratings",
                      "without them round 1's stopping decision is unknown"),
    NOT_NEEDED: ("not needed", "round 1 met the stopping rule, so the loop ended after round 1"),
    AWAITING_RATINGS: ("awaiting its ratings",
                       "no ratings files are listed in `recall.ratings_files` yet"),
}
"""Each round-2 state as the chapter says it: a label and why."""
start = base.starter(STAGE)


@dataclass(frozen=True)
class Round2Set:
    """The round-2 set (the recovery key's columns: kind, recall tier, bucket, reason) and the
    ratings files that rate it (none while they are awaited)."""

    table: pd.DataFrame
    ratings_paths: list[Path]

    def view(self) -> Tables:
        t = self.table
        return Tables([
            Table(pd.crosstab(t.kind, t.recovery_tier), caption="Items by kind and recall tier",
                  value_kind="count"),
            Table(pd.crosstab(t.recovery_bucket, t.recovery_tier), value_kind="count",
                  caption="Items by miss bucket and recall tier"),
        ], note=f"Round-2 set: {len(t):,} conversations.")


@dataclass(frozen=True)
class ToScreen:
    """Live, once round 1 triggered a recall round: the recall rubric, the pooled
    conversations and the model that screens them."""

    spec: screening.ScreenSpec
    pooled: list[Conversation]
    conversations: list[Conversation]
    """01's corpus (simulator faults may name any of its conversations)."""
    model: str


@dataclass(frozen=True)
class RecallPool:
    """Round 1's decision, the recall pool, the state round 2 is in, and what this run has of
    round 2: the released set (replay) or the pool to screen (live, when a recall round is
    triggered)."""

    mode: Literal["replay", "live"]
    inputs: review_round.RoundInputs
    round1: ReviewRound1Metrics
    ids: list[str]
    """The pool: every ``NOT_RELEVANT`` conversation that was not a round-1 control."""
    state: str
    ratings_paths: list[Path]
    """Live: the round-2 ratings files the profile lists (none yet, or all three)."""
    released_set: Round2Set | None = None
    to_screen: ToScreen | None = None
    lacking: str = ""
    """What this run's state cannot produce, said once."""

    def view(self) -> Note:
        label, why = STATES[self.state]
        return Note(f"Recall pool: **{len(self.ids):,}** NOT_RELEVANT conversations not used "
                    f"as round-1 controls. Round 2 is **{label}**: {why}.{self.lacking}")


@base.resolver
def recall_pool(run: StageRun, *, ratings_files: list[str] | None, rubric_artifact: str,
                rubric_file: str | None, model: str | None) -> RecallPool:
    """The pool the recall screen runs over, and which state round 2 is in (the mode, round 1's
    stopping decision from its metrics, and whether round-2 ``ratings_files`` are listed);
    replay: the released round-2 set (from the recovery key, checked against the review ids
    the released ratings carry) and its ratings; live, once round 1 triggered a recall round:
    the recall rubric and the screening ``model`` (a live recall without one is refused)."""
    stage = run.stage
    inputs = review_round.round_inputs(stage)
    round1_set = review_sets.read_set(stage.upstream(graph.REVIEW_ROUND1, graph.REVIEW_SET))
    round1 = stage.upstream_metrics(REVIEW_ROUND1)
    pool = review_sets.recall_pool(inputs.screen, round1_set)
    paths = [resolve_path(p) for p in (ratings_files or [])]
    state = review_round.round2_state(run.mode, round1, bool(paths))
    if run.mode == graph.REPLAY:
        released = [stage.fetch(f"ratings_round2_R{i}") for i in RELEASED_REVIEWERS]
        table = review_sets.replay_round2(stage.fetch("recovery_screening_key"),
                                          ratings.released_assignment(released))
        return RecallPool(graph.REPLAY, inputs, round1, pool, state, paths,
                          released_set=Round2Set(table, released), lacking=(
                              " In replay there is no recall screen: the released recovery "
                              "key carries each candidate's tier and bucket."))
    if state not in (TALLIED, AWAITING_RATINGS):
        return RecallPool(graph.LIVE, inputs, round1, pool, state, paths, lacking=(
            " So there is no recall screen, round-2 set, instrument, votes, tally or agreement "
            "in this run."))
    if problem := unset_live_model("recall", RecallParams(mode="live", model=model)):
        raise ValueError(problem)  # a notebook run by hand
    assert model is not None
    spec = screening.recall_spec(screening.rubric_text(rubric_artifact, rubric_file,
                                                       stage.fetch))
    by_id = {c.prompt_id: c for c in inputs.conversations}
    todo = ToScreen(spec, [by_id[p] for p in pool if p in by_id], inputs.conversations, model)
    waiting = (" Votes, tally and agreement follow once the ratings are listed."
               if state == AWAITING_RATINGS else "")
    return RecallPool(graph.LIVE, inputs, round1, pool, state, paths, to_screen=todo,
                      lacking=waiting)


@dataclass(frozen=True)
class RecallScreen:
    """The recall rubric's verdict on every pooled conversation: a tier ``CLEAR | POSSIBLE |
    NO`` and a miss bucket."""

    model: str
    batch_size: int
    live: screening.LiveScreen

    @property
    def n_refused(self) -> int:
        return int((self.live.table.provenance == "model_refused").sum())

    @property
    def n_failed(self) -> int:
        return int((self.live.table.provenance == "screen_failed").sum())

    def view(self) -> Note:
        return Note(f"Screened {len(self.live.table):,} pooled conversations with "
                    f"{md_text(study.display_name(self.model))} in batches of "
                    f"{self.batch_size}: {self.n_refused} refused (each a POSSIBLE candidate), "
                    f"{self.n_failed} without a valid record after re-asks; "
                    f"{count(len(self.live.log), 'problem')} logged "
                    f"(`{review_round.RECALL_PROBLEMS_FILE}`).")


@base.needs
def recall_screen(todo: ToScreen, run: StageRun, *, batch_size: int,
                  max_reasks: int) -> RecallScreen:
    """The recall rubric over the pool through the engine (batches of ``batch_size``, at most
    ``max_reasks`` re-asks; a refusal makes the item a ``POSSIBLE`` candidate), once round 1
    has triggered a recall round (``RecallPool.to_screen``)."""
    with run.open_engine(conversations=todo.conversations) as engine:
        ask = screening.engine_ask(engine, todo.model, mode=run.llm.mode, tag="recall")
        live = screening.run_screen(todo.spec, todo.pooled, ask, batch_size=batch_size,
                                    max_reasks=max_reasks)
    return RecallScreen(todo.model, batch_size, live)


def review_set(pool: RecallPool, recall: RecallScreen | None, *, n_controls: int,
               seed: int) -> Round2Set | None:
    """The round-2 set: replay, the released one the resolver read; live, the recall screen's
    candidates with ``n_controls`` fresh controls from its ``NO`` pool, in a new order seeded
    by ``seed``; ``None`` without a recall screen (the pool said why). Either way checked
    against the pool."""
    found = pool.released_set
    if found is None and recall is not None:
        found = Round2Set(review_sets.design_round2(recall.live.table, n_controls, seed),
                          pool.ratings_paths)
    if found is not None:
        review_sets.check_round2_design(found.table, pool.ids, n_controls=n_controls)
    return found


@base.needs
def instrument(review: Round2Set, run: StageRun,
               pool: RecallPool) -> review_round.Materials:
    """The round-2 packet and instrument (the same clinicians, packet ``recovery``)."""
    return review_round.write_materials(run.stage, review.table, pool.inputs,
                                        round_name="round2", packet="recovery")


@base.needs
def votes(review: Round2Set, pool: RecallPool) -> Votes | None:
    """Each round-2 ratings file validated against the set (packet ``recovery``), then the
    votes; ``None`` while the ratings are awaited (the pool said so)."""
    if not review.ratings_paths:
        return None
    rated = ratings.load_round(review.ratings_paths, review.table,
                               vocabulary=pool.inputs.vocabulary, expected_packet="recovery")
    return Votes(rated, ratings.votes_table(review.table, rated))


@base.needs
def tally(votes: Votes, *, threshold: float) -> Tally:
    """Inclusion and the stopping rule on the fresh controls: the loop ends when their
    inclusion rate is at or below ``threshold`` (``tally.tally_round2``)."""
    return Tally(tally_round2(votes.table, threshold=threshold), outcomes(votes.table))


@base.needs
def agreement(votes: Votes) -> Agreement:
    """Gwet's AC1 per reviewer pair and their mean, the multi-rater AC1, Fleiss' and Cohen's
    kappa (``review_round.relevance_agreement``)."""
    return Agreement(review_round.relevance_agreement(votes.table))


def metrics(pool: RecallPool, recall: RecallScreen | None, review: Round2Set | None,
            tally: Tally | None, agreement: Agreement | None, *,
            threshold: float) -> RecallMetrics:
    """04's metrics: the state and the pool; live, the recall screen; with a tally, its counts,
    the agreement and the ``threshold``; while awaiting ratings, what the set holds; when no
    round 2 is needed, that the loop has ended."""
    fields: dict[str, Any] = {"mode": pool.mode, "round2": pool.state,
                              "n_recall_pool": len(pool.ids)}
    if recall is not None:
        fields.update(recall_model=recall.model, n_recall_screened=len(recall.live.table),
                      n_recall_refused=recall.n_refused, n_recall_failed=recall.n_failed,
                      n_recall_problems=len(recall.live.log))
    if tally is not None and agreement is not None:
        counted = tally.counted
        fields.update(**counted.metrics(), **agreement.summary.metrics(),
                      recall_triggered=counted.recall_triggered,
                      tier_counts=counted.tier_counts, threshold=threshold)
    else:
        if review is not None:
            fields.update(design_counts(review.table))
        if pool.state == NOT_NEEDED:
            fields["loop_terminated"] = True
    return RecallMetrics(**fields)


def write(run: StageRun, m: RecallMetrics, recall: RecallScreen | None,
          review: Round2Set | None, votes: Votes | None) -> Written:
    """The recall screen and its problems, the round-2 set and its votes (05 reads them) as far
    as this run has them, then ``metrics.json``."""
    stage = run.stage
    tables: dict[str, pd.DataFrame] = {}
    if recall is not None:
        tables[review_round.RECALL_SCREEN_FILE] = recall.live.table
        tables[review_round.RECALL_PROBLEMS_FILE] = pd.DataFrame(
            recall.live.log, columns=list(screening.LOG_COLUMNS))
    if review is not None:
        tables[graph.REVIEW_SET] = review.table
    else:
        for stale in review_round.ROUND2_FILES:
            stage.path(stale).unlink(missing_ok=True)  # nothing from an earlier run's round 2
    if votes is not None:
        tables[graph.VOTES] = votes.table
    else:
        stage.path(graph.VOTES).unlink(missing_ok=True)  # no votes from an earlier run
    return base.write(run, m, tables=tables)


def _stat(value: float | None) -> str:
    """A coefficient to three decimals; "undefined" where it is not a number (NaN, null)."""
    return "undefined" if value is None or value != value else f"{value:.3f}"


def _below(a: float | None, b: float | None) -> bool:
    """``a < b`` where both are numbers (an undefined coefficient is never lower)."""
    return a is not None and b is not None and a < b


def findings(m: RecallMetrics, round1: ReviewRound1Metrics) -> Findings:
    """What round 2 decided (or why it has not), from 04's and 03's metrics.

    The loop ends when the new controls' inclusion rate is at or below the threshold
    (``loop_terminated``). Round 2's agreement is called "lower than round 1" only when its
    mean pairwise AC1 is strictly below round 1's; the reason offered (a pool of items the
    screen found ambiguous) is the study's reading of that drop, stated only with it.
    """
    if m.round2 == AWAITING_ROUND1:
        return Findings(["Round 1's ratings are not in yet, so its stopping decision is "
                         "unknown: run again once `review_round1.ratings_files` lists the "
                         "reviewers' exports."])
    if m.round2 == NOT_NEEDED:
        return Findings([f"Round 1 included {round1.control_inclusion_rate:.1%} of its "
                         "controls, at or below its threshold: the screen's miss rate is "
                         "acceptable, no recall round is needed and the loop ends after "
                         "round 1."])
    forward = (f"The recall screen put **{m.n_candidates}** of {m.n_recall_pool:,} pooled "
               f"conversations forward ({m.n_clear} CLEAR, {m.n_possible} POSSIBLE)")
    if m.round2 == AWAITING_RATINGS:
        return Findings([f"{forward}; with {m.n_controls} fresh controls they make the round-2 "
                         "instrument.", "Its ratings are awaited: list the reviewers' exports "
                         "in `recall.ratings_files` and run again."])
    ended = m.loop_terminated
    out = [
        f"{forward}.",
        f"The clinicians' majority included **{m.n_candidates_included}** of them "
        f"({m.n_clear_included} CLEAR, {m.n_possible_included} POSSIBLE) and "
        f"{m.n_controls_included} of {m.n_controls} fresh controls: a control-inclusion "
        f"rate of **{m.control_inclusion_rate:.1%}**, "
        f"{'at or below' if ended else 'above'} the {m.threshold:.0%} threshold, so "
        + ("the loop terminates." if ended else "another round would be needed."),
    ]
    text = (f"Agreement on relevance: mean pairwise AC1 {_stat(m.ac1_pairwise_mean)}, "
            f"Fleiss' kappa {_stat(m.fleiss_kappa)}")
    if round1.tallied:
        text = (f"Agreement on relevance: mean pairwise AC1 {_stat(m.ac1_pairwise_mean)} "
                f"(round 1: {_stat(round1.ac1_pairwise_mean)}), Fleiss' kappa "
                f"{_stat(m.fleiss_kappa)} (round 1: {_stat(round1.fleiss_kappa)})")
        if _below(m.ac1_pairwise_mean, round1.ac1_pairwise_mean):
            text += ("; lower than round 1, as expected for a pool of items the screen found "
                     "ambiguous")
    out.append(text + ".")
    return Findings(out)
