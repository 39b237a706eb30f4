"""Chapter 04_recall's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

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
    LLM_CALL_KEYS,
    METRICS,
    RECALL,
    REPLAY,
    REVIEW_ROUND1,
    REVIEW_SET,
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
    """04_recall: the recall screen of the remaining excludes and the round-2 review."""

    mode: Literal["replay", "live"] = "replay"
    rubric_artifact: str = "recovery_rubric"
    rubric_file: str | None = None
    batch_size: int = Field(default=50, ge=1)
    max_reasks: int = Field(default=2, ge=0)
    model: str | None = None
    n_controls: int = Field(default=study.ROUND2_CONTROLS, ge=0)
    threshold: float = Field(default=study.CONTROL_THRESHOLD, ge=0, le=1)
    ratings_files: list[str] | None = None


SPEC = StageSpec(
    RECALL, "Recall round (round 2)", "recall", Params, section_mode("recall"), (REPLAY, LIVE),
    inputs=(Input(CORPUS, (CORPUS_RECORD,)),
            Input(SCREENING, (SCREEN, VOCABULARY, TRANSLATIONS)),
            Input(REVIEW_ROUND1, (REVIEW_SET, METRICS))),
    reads=(
        Read(("recall.mode", "recall.n_controls", "recall.threshold")),
        Read(("recall.rubric_artifact", "recall.rubric_file", "recall.batch_size",
              "recall.max_reasks", "recall.model", "recall.ratings_files", "seed",
              *LLM_CALL_KEYS), IN_LIVE,
             "replay mode uses the released recall screen, round-2 set and ratings"),
    ),
    artifacts=("ratings_round2_R1", "ratings_round2_R2", "ratings_round2_R3",
               "recovery_screening_key", "recall.rubric_artifact"),
    summary='the recall round: recall screen, round-2 set, its tally and stopping rule')
