"""Chapter 05_subset's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from hbpsych_utils import study
from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    METRICS,
    RECALL,
    REVIEW_ROUND1,
    SUBSET,
    VOTES,
    Input,
    Read,
    StageSpec,
    no_mode,
)


class Params(Section):
    """05_subset: assembling the subset under each control policy and checking the release."""

    name: str = study.SUBSET_NAME
    compare_with_release: bool = True
    """Compare each derived subset with the released file (only meaningful in replay)."""


SPEC = StageSpec(
    SUBSET, "The HealthBench-Psych subset", "subset", Params, no_mode, (),
    inputs=(Input(REVIEW_ROUND1, (VOTES,)), Input(RECALL, (METRICS, VOTES))),
    reads=(Read(("subset.name", "subset.compare_with_release")),),
    artifacts=("harness_scores", "subset_v1", "subset_v2", "subset_hard_v1"),
    summary=("derives HealthBench-Psych v1/v2 and Psych-Hard from the votes and checks them "
             "against the release"))
