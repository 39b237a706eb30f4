"""Chapter 04, the recall round (round 2): what the screen missed, reviewed blind.

Round 2 is in one of four states, decided here and written as ``round2`` in the metrics:

- ``tallied``: its ratings are in and counted (``replay`` always: the released set, tiers and
  ratings; ``live`` once ``ratings_files`` lists the reviewers' exports);
- ``awaiting_round1_ratings``: live, and round 1 has no stopping decision yet (03 had no
  ratings);
- ``not_needed``: live, and round 1 met the stopping rule, so the loop ended after round 1;
- ``awaiting_ratings``: live, round 1 triggered a recall round, and this run screened the
  recall pool with the recall rubric, designed the round-2 set and wrote its packet and
  instrument; the ratings are not in yet.

Without a round-2 set, files an earlier run's round 2 left behind are removed, and without a
tally so is ``votes.csv``: 05 reads ``round2`` and the votes, and must never mix runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils.construction import (
    instrument,
    ratings,
    review_set,
    screening,
    tally,
)
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.config import RecallParams, resolve_path, unset_live_model
from hbpsych_utils.stages import base, s03_review_round1
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "04_recall"
TALLIED = "tallied"
AWAITING_ROUND1 = "awaiting_round1_ratings"
NOT_NEEDED = "not_needed"
AWAITING_RATINGS = "awaiting_ratings"
ROUND2_STATES = (TALLIED, AWAITING_ROUND1, NOT_NEEDED, AWAITING_RATINGS)
ROUND2_FILES = ("review_set.csv", "packet.json", "instrument.html", "recall_screen.csv",
                "recall_problems.csv")
"""What a round 2 writes besides its votes; removed when this run has no round-2 set."""


def round2_state(mode: str, round1: dict[str, Any], has_ratings: bool) -> str:
    """Which of the four states round 2 is in, from the mode and round 1's metrics."""
    if mode == "replay":
        return TALLIED
    if "recall_triggered" not in round1:
        return AWAITING_ROUND1
    if not round1["recall_triggered"]:
        return NOT_NEEDED
    return TALLIED if has_ratings else AWAITING_RATINGS


def read_round2_state(stage: Any) -> str:
    """04's ``round2`` state as its metrics recorded it (05 reads it; an older run without the
    key had always tallied)."""
    return str(stage.upstream_metrics(STAGE).get("round2", TALLIED))


def start(namespace: Mapping[str, Any]) -> StageRun[RecallParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[RecallParams]) -> StageResult:
    """Decide round 2's state; screen the recall pool, design, write and tally as it allows."""
    params = run.params
    stage = run.stage
    inputs = s03_review_round1.round_inputs(stage)
    conversations, vocabulary = inputs.conversations, inputs.vocabulary
    round1_set = review_set.read_set(
        stage.upstream(s03_review_round1.STAGE, review_set.SET_FILE))
    round1 = stage.upstream_metrics(s03_review_round1.STAGE)
    pool = review_set.recall_pool(inputs.screen, round1_set)
    ratings_paths = [resolve_path(p) for p in (params.ratings_files or [])]
    state = round2_state(run.mode, round1, bool(ratings_paths))
    metrics: dict[str, Any] = {"mode": run.mode, "round2": state, "n_recall_pool": len(pool)}
    tables: dict[str, pd.DataFrame] = {}
    views: dict[str, Any] = {"pool": f"Recall pool: **{len(pool):,}** NOT_RELEVANT "
                                     "conversations not used as round-1 controls."}

    review = None
    if run.mode == "replay":
        ratings_paths = [stage.fetch(f"ratings_round2_R{i}") for i in (1, 2, 3)]
        review = review_set.replay_round2(stage.fetch("recovery_screening_key"),
                                          ratings.released_assignment(ratings_paths))
    elif state in (TALLIED, AWAITING_RATINGS):
        recall = _recall_screen(run, params, stage, conversations, pool)
        tables["recall_screen.csv"] = recall.table
        tables["recall_problems.csv"] = pd.DataFrame(recall.log,
                                                     columns=list(screening.LOG_COLUMNS))
        provenance = recall.table.provenance
        metrics.update(recall_model=params.model, n_recall_screened=len(recall.table),
                       n_recall_refused=int((provenance == "model_refused").sum()),
                       n_recall_failed=int((provenance == "screen_failed").sum()),
                       n_recall_problems=len(recall.log))
        review = review_set.design_round2(recall.table, params.n_controls, run.seed)

    views.update(set_note=f"No round-2 set: **{state.replace('_', ' ')}**.",
                 by_tier=pd.DataFrame(), by_bucket=pd.DataFrame(), instrument="",
                 empty_fields=pd.DataFrame(), outcomes=pd.DataFrame())
    if review is None:
        for stale in ROUND2_FILES:
            stage.path(stale).unlink(missing_ok=True)  # nothing from an earlier run's round 2
    else:
        review_set.check_round2_design(review, pool, n_controls=params.n_controls)
        tables[review_set.SET_FILE] = review
        items = instrument.write_round(stage.dir, review, conversations, inputs.translations,
                                       round_name="round2", vocabulary=vocabulary,
                                       packet="recovery")
        views.update(
            set_note=f"Round-2 set: {len(review):,} conversations.",
            by_tier=pd.crosstab(review.kind, review.recovery_tier),
            by_bucket=pd.crosstab(review.recovery_bucket, review.recovery_tier),
            instrument=(f"{sum(it['available'] for it in items):,} of {len(items):,} round-2 "
                        "conversations are available in this corpus; "
                        f"{sum(it['translation'] is not None for it in items):,} with a machine "
                        "translation."))

    if state == TALLIED:
        rated = ratings.load_round(ratings_paths, review, vocabulary=vocabulary,
                                   expected_packet="recovery")
        votes = ratings.votes_table(review, rated)
        tables[ratings.VOTES_FILE] = votes
        counted, agree = s03_review_round1.count_votes(votes, tally.tally_round2,
                                                       params.threshold)
        metrics.update(**counted.metrics(), **agree.metrics(),
                       recall_triggered=counted.recall_triggered,
                       tier_counts=counted.tier_counts, threshold=params.threshold)
        views.update(empty_fields=ratings.empty_field_counts(rated),
                     outcomes=tally.outcomes(votes))
    else:
        stage.path(ratings.VOTES_FILE).unlink(missing_ok=True)  # no votes from an earlier run
        if review is not None:
            metrics.update(tally.design_counts(review))
        if state == NOT_NEEDED:
            metrics["loop_terminated"] = True
    result = StageResult(run, metrics, tables=tables, views=views,
                         findings=findings(metrics, round1))
    return result.write()


def _recall_screen(run: StageRun[Any], params: RecallParams, stage: Any,
                   conversations: list[Conversation], pool: list[str]) -> Any:
    """The recall rubric over the pool, through the engine (a refusal makes a candidate)."""
    if problem := unset_live_model("recall", params):  # a notebook run by hand
        raise ValueError(problem)
    spec = screening.recall_spec(
        screening.rubric_text(params.rubric_artifact, params.rubric_file, stage.fetch))
    by_id = {c.prompt_id: c for c in conversations}
    pool_conversations = [by_id[p] for p in pool if p in by_id]
    with run.open_engine(conversations=conversations) as engine:
        ask = screening.engine_ask(engine, params.model, mode=run.llm.mode, tag="recall")
        return screening.run_screen(spec, pool_conversations, ask, batch_size=params.batch_size,
                                    max_reasks=params.max_reasks)


def findings(metrics: dict[str, Any], round1: dict[str, Any]) -> list[str]:
    """What round 2 decided (or why it has not), from 04's and 03's metrics.

    The loop ends when the new controls' inclusion rate is at or below the threshold
    (``loop_terminated``). Round 2's agreement is called "lower than round 1" only when its
    mean pairwise AC1 is strictly below round 1's; the reason offered (a pool of items the
    screen found ambiguous) is the study's reading of that drop, stated only with it.
    """
    m = metrics
    state = m["round2"]
    if state == AWAITING_ROUND1:
        return ["Round 1's ratings are not in yet, so its stopping decision is unknown: run "
                "again once `review_round1.ratings_files` lists the reviewers' exports."]
    if state == NOT_NEEDED:
        return [f"Round 1 included {round1['control_inclusion_rate']:.1%} of its controls, at "
                "or below its threshold: the screen's miss rate is acceptable, no recall round "
                "is needed and the loop ends after round 1."]
    forward = (f"The recall screen put **{m['n_candidates']}** of {m['n_recall_pool']:,} pooled "
               f"conversations forward ({m['n_clear']} CLEAR, {m['n_possible']} POSSIBLE)")
    if state == AWAITING_RATINGS:
        return [f"{forward}; with {m['n_controls']} fresh controls they make the round-2 "
                "instrument.", "Its ratings are awaited: list the reviewers' exports in "
                "`recall.ratings_files` and run again."]
    ended = m["loop_terminated"]
    out = [
        f"{forward}.",
        f"The clinicians' majority included **{m['n_candidates_included']}** of them "
        f"({m['n_clear_included']} CLEAR, {m['n_possible_included']} POSSIBLE) and "
        f"{m['n_controls_included']} of {m['n_controls']} fresh controls: a control-inclusion "
        f"rate of **{m['control_inclusion_rate']:.1%}**, "
        f"{'at or below' if ended else 'above'} the {m['threshold']:.0%} threshold, so "
        + ("the loop terminates." if ended else "another round would be needed."),
    ]
    agreement_text = (f"Agreement on relevance: mean pairwise AC1 {m['ac1_pairwise_mean']:.3f}, "
                      f"Fleiss' kappa {m['fleiss_kappa']:.3f}")
    if "ac1_pairwise_mean" in round1:
        agreement_text = (
            f"Agreement on relevance: mean pairwise AC1 {m['ac1_pairwise_mean']:.3f} "
            f"(round 1: {round1['ac1_pairwise_mean']:.3f}), Fleiss' kappa "
            f"{m['fleiss_kappa']:.3f} (round 1: {round1['fleiss_kappa']:.3f})")
        if m["ac1_pairwise_mean"] < round1["ac1_pairwise_mean"]:
            agreement_text += ("; lower than round 1, as expected for a pool of items the "
                               "screen found ambiguous")
    out.append(agreement_text + ".")
    return out
