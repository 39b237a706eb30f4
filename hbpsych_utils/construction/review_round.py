"""What the two blinded review rounds share (03's round 1, 04's round 2): the files they read
from the stages before them, the reviewers' materials, agreement on relevance, and the state
round 2 is in.

Round 2 is in one of four states, decided by 04 and written as ``round2`` in its metrics:

- ``tallied``: its ratings are in and counted (replay always: the released set, tiers and
  ratings; live once ``recall.ratings_files`` lists the reviewers' exports);
- ``awaiting_round1_ratings``: live, and round 1 has no stopping decision yet (03 had no
  ratings);
- ``not_needed``: live, and round 1 met the stopping rule, so the loop ended after round 1;
- ``awaiting_ratings``: live, round 1 triggered a recall round, and the round-2 set is designed
  and its instrument written; the ratings are not in yet.

05 reads the state back (:func:`read_round2_state`): a tallied round 2 adds its votes to the
subset, ``not_needed`` leaves the subset to round 1, and any other state has no subset yet.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils.construction import (
    agreement,
    corpus,
    instrument,
    ratings,
    screening,
    translation,
)
from hbpsych_utils.construction.review_set import SET_FILE
from hbpsych_utils.pipeline import graph, metrics
from hbpsych_utils.pipeline.metrics import ReviewRound1Metrics
from hbpsych_utils.pipeline.stage import Stage

# --- what a round reads -----------------------------------------------------------------------


@dataclass(frozen=True)
class RoundInputs:
    """What a review round reads from the stages before it."""

    screen: pd.DataFrame
    vocabulary: tuple[str, ...]
    conversations: list[corpus.Conversation]
    translations: dict[str, list[dict[str, str]]]
    """02's machine translations for the reviewers; empty when 02 made none."""


def round_inputs(stage: Stage) -> RoundInputs:
    """02's screen and vocabulary, 01's corpus and 02's translations, each through its reader."""
    return RoundInputs(
        screen=screening.read_screen(stage.upstream(graph.SCREENING, graph.SCREEN)),
        vocabulary=screening.read_vocabulary(stage.upstream(graph.SCREENING, graph.VOCABULARY)),
        conversations=corpus.load_recorded(stage.upstream(graph.CORPUS, graph.CORPUS_RECORD)),
        translations=translation.read_translations(
            stage.upstream_optional(graph.SCREENING, graph.TRANSLATIONS)),
    )


# --- the reviewers' materials -----------------------------------------------------------------


@dataclass(frozen=True)
class Materials:
    """A round's packet and instrument as written: where the instrument is (relative to the run
    folder, so the sentence is the same on every machine) and what its items hold."""

    instrument: str
    n_items: int
    n_available: int
    """Items whose conversation is in this run's corpus (the rest are placeholders)."""
    n_translated: int

    def _repr_markdown_(self) -> str:
        stage = self.instrument.split("/", 1)[0]
        href = instrument.BOOK_COPY.format(stage=stage)
        return (f'The reviewers\' instrument, <a href="{href}">open it here</a> (in the run '
                f"folder: `{self.instrument}`): {self.n_available:,} of {self.n_items:,} "
                f"conversations available in this corpus; {self.n_translated:,} with a machine "
                "translation.")


def write_materials(stage: Stage, review: pd.DataFrame, inputs: RoundInputs, *,
                    round_name: str, packet: str | None = None) -> Materials:
    """The round's ``packet.json`` and ``instrument.html`` in the stage's folder
    (``instrument.write_round``): missing conversations as placeholders, translations beside
    the original."""
    items = instrument.write_round(stage.dir, review, inputs.conversations, inputs.translations,
                                   round_name=round_name, vocabulary=inputs.vocabulary,
                                   packet=packet)
    return Materials(instrument=f"{stage.name}/{instrument.INSTRUMENT_FILE}",
                     n_items=len(items), n_available=sum(it["available"] for it in items),
                     n_translated=sum(it["translation"] is not None for it in items))


# --- votes ------------------------------------------------------------------------------------


def relevance_agreement(votes: pd.DataFrame) -> agreement.AgreementSummary:
    """Agreement on relevance (Y/N) among a round's reviewers: what 03 and 04 both report."""
    return agreement.summarize(ratings.relevance_ratings(votes), categories=ratings.VOTES)


# --- round 2's state --------------------------------------------------------------------------

TALLIED = "tallied"
AWAITING_ROUND1 = "awaiting_round1_ratings"
NOT_NEEDED = "not_needed"
AWAITING_RATINGS = "awaiting_ratings"
ROUND2_STATES = (TALLIED, AWAITING_ROUND1, NOT_NEEDED, AWAITING_RATINGS)

RECALL_SCREEN_FILE = "recall_screen.csv"
RECALL_PROBLEMS_FILE = "recall_problems.csv"
ROUND2_FILES = (SET_FILE, instrument.PACKET_FILE, instrument.INSTRUMENT_FILE,
                RECALL_SCREEN_FILE, RECALL_PROBLEMS_FILE)
"""What a round 2 writes besides its votes; removed when a run has no round-2 set."""


def round2_state(mode: str | None, round1: ReviewRound1Metrics, has_ratings: bool) -> str:
    """Which of the four states round 2 is in, from the mode and round 1's metrics."""
    if mode == graph.REPLAY:
        return TALLIED
    if not round1.tallied:
        return AWAITING_ROUND1
    if not round1.recall_triggered:
        return NOT_NEEDED
    return TALLIED if has_ratings else AWAITING_RATINGS


def read_round2_state(stage: Stage) -> str:
    """04's ``round2`` state as its metrics recorded it (05 reads it)."""
    return stage.upstream_metrics(metrics.RECALL).round2
