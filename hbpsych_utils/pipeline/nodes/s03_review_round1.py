"""Chapter 03_review_round1's node of the stage graph: its profile section's model (``Params``)
and what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils import study
from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CORPUS,
    CORPUS_RECORD,
    IN_LIVE,
    LIVE,
    REPLAY,
    REVIEW_ROUND1,
    SCREEN,
    SCREENING,
    TRANSLATIONS,
    VOCABULARY,
    Input,
    Read,
    StageSpec,
    section_mode,
)


class Params(Section):
    """03_review_round1: the blinded review set, the reviewers' ratings and their tally."""

    mode: Literal["replay", "live"] = "replay"
    """``replay`` uses the released set and ratings; ``live`` designs a set from this run's
    screen and tallies the ratings files named in ``ratings_files`` (if any yet)."""
    n_controls: int = Field(default=study.ROUND1_CONTROLS, ge=0)
    threshold: float = Field(default=study.CONTROL_THRESHOLD, ge=0, le=1)
    """A control-inclusion rate above this triggers a recall round."""
    ratings_files: list[str] | None = None
    """Live mode: the reviewers' exported ratings files (relative to the project root)."""


SPEC = StageSpec(
    REVIEW_ROUND1, "Blinded clinician review, round 1", "review_round1", Params,
    section_mode("review_round1"), (REPLAY, LIVE),
    inputs=(Input(SCREENING, (SCREEN, VOCABULARY, TRANSLATIONS)),
            Input(CORPUS, (CORPUS_RECORD,))),
    reads=(
        Read(("review_round1.mode", "review_round1.n_controls", "review_round1.threshold")),
        Read(("review_round1.ratings_files", "seed"), IN_LIVE,
             "replay mode uses the released review set and ratings; a seeded set is "
             "designed, and ratings files are read, only in live mode"),
    ),
    artifacts=("ratings_round1_R1", "ratings_round1_R2", "ratings_round1_R3",
               "screening_key"),
    summary=("the blinded review set with concealed controls, the reviewers' instrument, the "
             "tally, Gwet's AC1, the stopping rule"))
