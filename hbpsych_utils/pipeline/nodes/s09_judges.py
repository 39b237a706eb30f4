"""Chapter 09_judges's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    EVALUATION_MODE,
    GRADED_SUBSETS,
    IN_LIVE,
    JUDGES,
    LIVE,
    MATRICES,
    PAPER,
    RELEASED_MATRICES,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """09_judges: rank agreement, severity and self-preference of the judge panel."""

    subset: Literal["v1", "v2", "hard"] = "v1"


SPEC = StageSpec(
    JUDGES, "The judges", "judges", Params, evaluation_mode, (PAPER, LIVE), inputs=GRADED_SUBSETS,
    reads=(Read((EVALUATION_MODE, "judges.subset")),
           Read(("seed", "ci_level", "n_resamples"), IN_LIVE, RELEASED_MATRICES)),
    artifacts=MATRICES,
    summary="Kendall's τ between judges, severity, raw and severity-corrected self-preference")
