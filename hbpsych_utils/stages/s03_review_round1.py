"""Chapter 03, blinded clinician review round 1: the set, the packet, the ratings, the tally.

``run`` resolves the mode: ``replay`` rebuilds the released set (the screening key's
``in_blinded_set`` rows under the review ids the released ratings carry) and reads the released
ratings; ``live`` designs a set from this run's screen (every screened-in item plus seeded
concealed controls) and reads whatever ratings files the profile lists. Either way it writes
the reviewers' packet and instrument. With ratings it writes the votes table and tallies the
round: inclusion, the stopping rule (controls included above the threshold trigger a recall
round) and inter-rater agreement. Without ratings yet it says so, and removes a stale
``votes.csv`` so that 05 never assembles a subset from an earlier run's votes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from hbpsych_utils.construction import (
    agreement,
    corpus,
    instrument,
    ratings,
    review_set,
    screening,
    tally,
    translation,
)
from hbpsych_utils.core.config import ReviewParams, resolve_path
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "03_review_round1"
SCREENED_IN_LABELS = ("RELEVANT", "BORDERLINE")


@dataclass(frozen=True)
class RoundInputs:
    """What a review round (03, and 04's round 2) reads from the stages before it."""

    screen: pd.DataFrame
    vocabulary: tuple[str, ...]
    conversations: list[corpus.Conversation]
    translations: dict[str, list[dict[str, str]]]
    """02's machine translations for the reviewers; empty when 02 made none."""


def round_inputs(stage: Any) -> RoundInputs:
    """02's screen and vocabulary, 01's corpus and 02's translations, each through its reader."""
    return RoundInputs(
        screen=screening.read_screen(stage.upstream("02_screening", screening.SCREEN_FILE)),
        vocabulary=screening.read_vocabulary(
            stage.upstream("02_screening", screening.VOCABULARY_FILE)),
        conversations=corpus.load_recorded(stage.upstream("01_corpus", corpus.SOURCE_RECORD)),
        translations=translation.read_translations(
            stage.upstream_optional("02_screening", translation.TRANSLATIONS_FILE)),
    )


def start(namespace: Mapping[str, Any]) -> StageRun[ReviewParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[ReviewParams]) -> StageResult:
    """Build or replay the round-1 set, write packet and instrument, tally the ratings."""
    params = run.params
    stage = run.stage
    inputs = round_inputs(stage)
    screen, vocabulary = inputs.screen, inputs.vocabulary

    if run.mode == "replay":
        ratings_paths = [stage.fetch(f"ratings_round1_R{i}") for i in (1, 2, 3)]
        review = review_set.replay_round1(stage.fetch("screening_key"),
                                          ratings.released_assignment(ratings_paths))
    else:
        ratings_paths = [resolve_path(p) for p in (params.ratings_files or [])]
        screened_in = screen.loc[screen.label.isin(SCREENED_IN_LABELS), "prompt_id"]
        pool = screen.loc[screen.label == "NOT_RELEVANT", "prompt_id"]
        review = review_set.design_round(screened_in, pool, params.n_controls, run.seed)
    review_set.check_round1_design(review, screen, n_controls=params.n_controls)
    tables: dict[str, pd.DataFrame] = {review_set.SET_FILE: review}
    views: dict[str, Any] = {"kinds": review.kind.value_counts().to_frame()}
    items = instrument.write_round(stage.dir, review, inputs.conversations, inputs.translations,
                                   round_name="round1", vocabulary=vocabulary)
    views["instrument"] = (
        f"Instrument: `{stage.final_dir / 'instrument.html'}` — "
        f"{sum(it['available'] for it in items):,} of {len(items):,} conversations available "
        f"in this corpus; {sum(it['translation'] is not None for it in items):,} with a machine "
        "translation.")

    rated = ratings.load_round(ratings_paths, review, vocabulary=vocabulary)
    views["empty_fields"] = ratings.empty_field_counts(rated)
    if rated:
        votes = ratings.votes_table(review, rated)
        tables[ratings.VOTES_FILE] = votes
        counted, agree = count_votes(votes, tally.tally_round1, params.threshold)
        metrics = {"mode": run.mode, **counted.metrics(), **agree.metrics(),
                   "tier_counts": counted.tier_counts, "threshold": params.threshold}
        views["outcomes"] = tally.outcomes(votes)
        views["ac1_pairs"] = pd.Series(agree.ac1_pairs, name="Gwet AC1").to_frame()
    else:
        stage.path(ratings.VOTES_FILE).unlink(missing_ok=True)  # no votes from an earlier run
        metrics = {"mode": run.mode, "n_reviewed": len(review), "n_ratings_files": 0}
        views["outcomes"] = pd.DataFrame()
        views["ac1_pairs"] = pd.DataFrame()
    result = StageResult(run, metrics, tables=tables, views=views, findings=findings(metrics))
    return result.write()


def count_votes(votes: pd.DataFrame, count: Callable[..., tally.RoundTally],
                threshold: float) -> tuple[tally.RoundTally, agreement.AgreementSummary]:
    """A round's tally (``tally.tally_round1`` or ``tally_round2``) and its agreement on
    relevance: what 03 and 04 both report."""
    return (count(votes, threshold=threshold),
            agreement.summarize(ratings.relevance_ratings(votes), categories=ratings.VOTES))


def findings(metrics: dict[str, Any]) -> list[str]:
    """What round 1 decided, from 03's metrics.

    The stopping rule is the tally's: a control-inclusion rate strictly above the threshold
    (``recall_triggered``) triggers a recall round, otherwise the loop ends. Without ratings
    the only finding is that the round awaits them.
    """
    m = metrics
    if "recall_triggered" not in m:
        return [f"The blinded set holds {m['n_reviewed']:,} conversations and no ratings are in "
                "yet: send the instrument to the reviewers, then list their exports in the "
                "profile's `review_round1.ratings_files` and run again."]
    triggered = m["recall_triggered"]
    return [
        f"{m['n_reviewed']:,} conversations were reviewed ({m['n_screened_in']:,} screened in, "
        f"{m['n_controls']:,} concealed controls).",
        f"The majority included **{m['n_included']:,}**: {m['n_screened_in_included']:,} "
        f"screened-in items and {m['n_controls_included']:,} controls, a control-inclusion rate "
        f"of **{m['control_inclusion_rate']:.1%}** — "
        f"{'above' if triggered else 'at or below'} the {m['threshold']:.0%} threshold, so "
        + ("a recall round is triggered." if triggered else "the loop ends here."),
        f"Agreement on relevance: mean pairwise AC1 {m['ac1_pairwise_mean']:.3f}, multi-rater "
        f"AC1 {m['ac1_multirater']:.3f}, Fleiss' kappa {m['fleiss_kappa']:.3f}.",
    ]
