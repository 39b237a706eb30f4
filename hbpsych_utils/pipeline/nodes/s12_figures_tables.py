"""Chapter 12_figures_tables's node of the stage graph: its profile section's model (``Params``)
and what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CATEGORIES_V1,
    EVALUATION_MODE,
    FIGURES,
    GRADING,
    IN_LIVE,
    JUDGES,
    LIVE,
    MATRICES,
    METRICS,
    PAPER,
    SCORES,
    SCORES_TABLE,
    SUBSET,
    SUBSET_IDS,
    TABLE1,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """12_figures_tables: the paper's figures and Table 1."""

    subsets: list[Literal["v1", "v2", "hard"]] = Field(default=["v1", "hard"])
    publish: bool = True
    """Also copy the figures and tables to the top-level ``figures/`` folder, which then holds
    this run's files and no earlier run's (the default profile's job; test profiles keep theirs
    under ``outputs/<profile>/``)."""


SPEC = StageSpec(
    FIGURES, "Figures and tables", "figures_tables", Params, evaluation_mode, (PAPER, LIVE),
    inputs=(Input(SUBSET, (CATEGORIES_V1,)),
            Input(SCORES, (METRICS, TABLE1.format(subset="*"))),
            Input(JUDGES, (METRICS,)),
            Input(GRADING, (SCORES_TABLE, METRICS), IN_LIVE),
            Input(SUBSET, SUBSET_IDS, IN_LIVE)),
    reads=(Read((EVALUATION_MODE, "figures_tables.subsets", "figures_tables.publish")),),
    artifacts=MATRICES,
    summary="the paper's tables and figures as CSV, Markdown, LaTeX, PNG and SVG")
