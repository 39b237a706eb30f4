"""Chapter 13_explorer's node of the stage graph: what it reads, when (``SPEC``)."""

from __future__ import annotations

from hbpsych_utils.pipeline.spec import (
    CATEGORIES_V1,
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    EXPLORER,
    GENERATION,
    GRADING,
    IN_LIVE,
    LIVE,
    PAPER,
    RESPONSES,
    SCORES_TABLE,
    SUBSET,
    SUBSET_IDS,
    VERDICTS,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)

SPEC = StageSpec(
    EXPLORER, "Explorer: inside the grades", None, None, evaluation_mode, (PAPER, LIVE),
    needs={PAPER: "a live run"},
    inputs=(Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
            Input(GENERATION, (RESPONSES,), IN_LIVE),
            Input(GRADING, (VERDICTS, SCORES_TABLE), IN_LIVE),
            Input(SUBSET, (CATEGORIES_V1, *SUBSET_IDS), IN_LIVE)),
    reads=(Read((EVALUATION_MODE,)),),
    artifacts=("harness_scores",),
    summary='every reply and verdict of a graded run, side by side')
