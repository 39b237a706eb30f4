"""Chapter 10_refusals's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CATEGORIES_V1,
    EVALUATION_MODE,
    GENERATION,
    GRADING,
    IN_LIVE,
    LIVE,
    METRICS,
    PAPER,
    REFUSALS,
    RESPONSES,
    SCORES_TABLE,
    SUBSET,
    SUBSET_IDS,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """10_refusals: refused conversations per model and the sensitivity analysis."""

    subset: Literal["v1", "v2", "hard"] = "v1"


SPEC = StageSpec(
    REFUSALS, "Refusals", "refusals", Params, evaluation_mode, (PAPER, LIVE),
    inputs=(Input(SUBSET, (*SUBSET_IDS, CATEGORIES_V1)),
            Input(GENERATION, (RESPONSES,), IN_LIVE),
            Input(GRADING, (SCORES_TABLE, METRICS), IN_LIVE)),
    reads=(Read((EVALUATION_MODE, "refusals.subset")),),
    artifacts=("run_errors",),
    summary='refused conversations and the panel score without them')
