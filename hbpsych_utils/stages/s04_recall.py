"""Chapter 04, the recall round (round 2): what the screen missed, reviewed blind.

The chapter's calls, in order: :func:`start` (its parameters, checked); :func:`recall_pool`
(round 1's decision, the pool of ``NOT_RELEVANT`` conversations that were not round-1 controls,
and the state round 2 is in: ``review_round.ROUND2_STATES``, written as ``round2`` in the
metrics); :func:`recall_screen` (live, once round 1 triggered a recall round: the recall rubric
over the pool through the LLM engine); :func:`review_set` (replay: the released recovery key;
live: candidates plus fresh seeded controls from the recall screen's ``NO`` pool);
:func:`instrument`; :func:`votes`, :func:`tally` and :func:`agreement` (once round 2 is
tallied); :func:`metrics`, :func:`write` and :func:`findings`. Each step this run's state cannot
produce says why instead. Without a round-2 set, files an earlier run's round 2 left behind are
removed, and without a tally so is ``votes.csv``: 05 reads ``round2`` and the votes, and must
never mix runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import ratings, review_round, screening
from hbpsych_utils.construction import review_set as review_sets
from hbpsych_utils.construction.review_round import (
    AWAITING_RATINGS,
    AWAITING_ROUND1,
    NOT_NEEDED,
    TALLIED,
)
from hbpsych_utils.construction.tally import design_counts, outcomes, tally_round2
from hbpsych_utils.core.config import RecallParams, resolve_path, unset_live_model
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import REVIEW_ROUND1, RecallMetrics, ReviewRound1Metrics
from hbpsych_utils.reporting.display import Findings, Note, Shown, unavailable
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


start = base.starter(STAGE, RecallParams)


def _not_in(what: str, state: str) -> Note:
    label, why = STATES[state]
    return unavailable(f"No {what}: round 2 is {label}; {why}.")


@dataclass(frozen=True, repr=False)
class RecallPool(Shown):
    """Round 1's decision, the recall pool, and the state round 2 is in."""

    inputs: review_round.RoundInputs
    round1: ReviewRound1Metrics
    ids: list[str]
    """The pool: every ``NOT_RELEVANT`` conversation that was not a round-1 control."""
    state: str
    ratings_paths: list[Path]
    """Live: the round-2 ratings files the profile lists (none yet, or all three)."""

    def _repr_markdown_(self) -> str:
        label, why = STATES[self.state]
        return (f"Recall pool: **{len(self.ids):,}** NOT_RELEVANT conversations not used as "
                f"round-1 controls. Round 2 is **{label}**: {why}.")


def recall_pool(run: StageRun[RecallParams]) -> RecallPool:
    """The pool the recall screen runs over, and which state round 2 is in (the mode, round 1's
    stopping decision from its metrics, and whether round-2 ratings are listed)."""
    stage = run.stage
    inputs = review_round.round_inputs(stage)
    round1_set = review_sets.read_set(stage.upstream(graph.REVIEW_ROUND1, graph.REVIEW_SET))
    round1 = stage.upstream_metrics(REVIEW_ROUND1)
    pool = review_sets.recall_pool(inputs.screen, round1_set)
    paths = [resolve_path(p) for p in (run.params.ratings_files or [])]
    state = review_round.round2_state(run.mode, round1, bool(paths))
    return RecallPool(inputs, round1, pool, state, paths)


@dataclass(frozen=True, repr=False)
class RecallScreen(Shown):
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

    def _repr_markdown_(self) -> str:
        return (f"Screened {len(self.live.table):,} pooled conversations with "
                f"{md_text(study.display_name(self.model))} in batches of {self.batch_size}: "
                f"{self.n_refused} "
                f"refused (each a POSSIBLE candidate), {self.n_failed} without a valid record "
                f"after re-asks; {count(len(self.live.log), 'problem')} logged "
                f"(`{review_round.RECALL_PROBLEMS_FILE}`).")


def recall_screen(run: StageRun[RecallParams], pool: RecallPool) -> RecallScreen | Note:
    """The recall rubric over the pool through the engine (batches of ``batch_size``, bounded
    re-asks; a refusal makes the item a ``POSSIBLE`` candidate), once round 1 has triggered a
    recall round."""
    if run.mode == graph.REPLAY:
        return unavailable("No recall screen in replay mode: the released recovery key carries "
                           "each candidate's tier and bucket.")
    if pool.state not in (TALLIED, AWAITING_RATINGS):
        return _not_in("recall screen", pool.state)
    params = run.params
    if problem := unset_live_model("recall", params):  # a notebook run by hand
        raise ValueError(problem)
    spec = screening.recall_spec(
        screening.rubric_text(params.rubric_artifact, params.rubric_file, run.stage.fetch))
    conversations = pool.inputs.conversations
    by_id = {c.prompt_id: c for c in conversations}
    pooled = [by_id[p] for p in pool.ids if p in by_id]
    with run.open_engine(conversations=conversations) as engine:
        ask = screening.engine_ask(engine, params.model, mode=run.llm.mode, tag="recall")
        live = screening.run_screen(spec, pooled, ask, batch_size=params.batch_size,
                                    max_reasks=params.max_reasks)
    return RecallScreen(str(params.model), params.batch_size, live)


@dataclass(frozen=True, repr=False)
class Round2Set(Shown):
    """The round-2 set (the recovery key's columns: kind, recall tier, bucket, reason) and the
    ratings files that rate it."""

    table: pd.DataFrame
    ratings_paths: list[Path]

    def _repr_html_(self) -> str:
        t = self.table
        return Tables([
            Table(pd.crosstab(t.kind, t.recovery_tier), caption="Items by kind and recall tier",
                  value_kind="count"),
            Table(pd.crosstab(t.recovery_bucket, t.recovery_tier), value_kind="count",
                  caption="Items by miss bucket and recall tier"),
        ], note=f"Round-2 set: {len(t):,} conversations.")._repr_html_()


def review_set(run: StageRun[RecallParams], pool: RecallPool,
               recall: RecallScreen | Note) -> Round2Set | Note:
    """Replay: the released round-2 set from the recovery key (checked against the review ids
    the released ratings carry). Live: the recall screen's candidates with fresh controls from
    its ``NO`` pool, in a new seeded order. Either way checked against the pool."""
    params, stage = run.params, run.stage
    if run.mode == graph.REPLAY:
        paths = [stage.fetch(f"ratings_round2_R{i}") for i in RELEASED_REVIEWERS]
        table = review_sets.replay_round2(stage.fetch("recovery_screening_key"),
                                          ratings.released_assignment(paths))
    elif isinstance(recall, RecallScreen):
        paths = pool.ratings_paths
        table = review_sets.design_round2(recall.live.table, params.n_controls, run.seed)
    else:
        return _not_in("round-2 set", pool.state)
    review_sets.check_round2_design(table, pool.ids, n_controls=params.n_controls)
    return Round2Set(table, paths)


def instrument(run: StageRun[RecallParams], pool: RecallPool,
               review: Round2Set | Note) -> review_round.Materials | Note:
    """The round-2 packet and instrument (the same clinicians, packet ``recovery``)."""
    if not isinstance(review, Round2Set):
        return _not_in("round-2 instrument", pool.state)
    return review_round.write_materials(run.stage, review.table, pool.inputs,
                                        round_name="round2", packet="recovery")


def votes(run: StageRun[RecallParams], pool: RecallPool, review: Round2Set | Note) -> Votes | Note:
    """Each round-2 ratings file validated against the set (packet ``recovery``), then the
    votes; only once round 2 is tallied."""
    if pool.state != TALLIED or not isinstance(review, Round2Set):
        return _not_in("round-2 votes", pool.state)
    rated = ratings.load_round(review.ratings_paths, review.table,
                               vocabulary=pool.inputs.vocabulary, expected_packet="recovery")
    return Votes(rated, ratings.votes_table(review.table, rated))


def tally(run: StageRun[RecallParams], pool: RecallPool, votes: Votes | Note) -> Tally | Note:
    """Inclusion and the stopping rule on the fresh controls: the loop ends when their
    inclusion rate is at or below ``threshold`` (``tally.tally_round2``)."""
    if not isinstance(votes, Votes):
        return _not_in("round-2 tally", pool.state)
    return Tally(tally_round2(votes.table, threshold=run.params.threshold),
                 outcomes(votes.table))


def agreement(pool: RecallPool, votes: Votes | Note) -> Agreement | Note:
    """Gwet's AC1 per reviewer pair and their mean, the multi-rater AC1, Fleiss' and Cohen's
    kappa (``review_round.relevance_agreement``)."""
    if not isinstance(votes, Votes):
        return _not_in("round-2 agreement", pool.state)
    return Agreement(review_round.relevance_agreement(votes.table))


def metrics(run: StageRun[RecallParams], pool: RecallPool, recall: RecallScreen | Note,
            review: Round2Set | Note, tally: Tally | Note,
            agreement: Agreement | Note) -> RecallMetrics:
    """04's metrics: the state and the pool; live, the recall screen; with a tally, its counts,
    the agreement and the threshold; while awaiting ratings, what the set holds; when no round
    2 is needed, that the loop has ended."""
    fields: dict[str, Any] = {"mode": run.mode, "round2": pool.state,
                              "n_recall_pool": len(pool.ids)}
    if isinstance(recall, RecallScreen):
        fields.update(recall_model=recall.model, n_recall_screened=len(recall.live.table),
                      n_recall_refused=recall.n_refused, n_recall_failed=recall.n_failed,
                      n_recall_problems=len(recall.live.log))
    if isinstance(tally, Tally) and isinstance(agreement, Agreement):
        counted = tally.counted
        fields.update(**counted.metrics(), **agreement.summary.metrics(),
                      recall_triggered=counted.recall_triggered,
                      tier_counts=counted.tier_counts, threshold=run.params.threshold)
    else:
        if isinstance(review, Round2Set):
            fields.update(design_counts(review.table))
        if pool.state == NOT_NEEDED:
            fields["loop_terminated"] = True
    return RecallMetrics(**fields)


def write(run: StageRun[RecallParams], m: RecallMetrics, recall: RecallScreen | Note,
          review: Round2Set | Note, votes: Votes | Note) -> Written:
    """The recall screen and its problems, the round-2 set and its votes (05 reads them) as far
    as this run has them, then ``metrics.json``."""
    stage = run.stage
    tables: dict[str, pd.DataFrame] = {}
    if isinstance(recall, RecallScreen):
        tables[review_round.RECALL_SCREEN_FILE] = recall.live.table
        tables[review_round.RECALL_PROBLEMS_FILE] = pd.DataFrame(
            recall.live.log, columns=list(screening.LOG_COLUMNS))
    if isinstance(review, Round2Set):
        tables[graph.REVIEW_SET] = review.table
    else:
        for stale in review_round.ROUND2_FILES:
            stage.path(stale).unlink(missing_ok=True)  # nothing from an earlier run's round 2
    if isinstance(votes, Votes):
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
