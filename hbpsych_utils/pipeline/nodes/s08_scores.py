"""Chapter 08_scores's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    EVALUATION_MODE,
    GENERATION,
    GRADED_SUBSETS,
    IN_LIVE,
    IN_PAPER,
    LIVE,
    MATRICES,
    PAPER,
    RELEASED_MATRICES,
    RESPONSES,
    SCORES,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """08_scores: per-judge and panel scores, intervals, paired differences."""

    subsets: list[Literal["v1", "v2", "hard"]] = Field(default=["v1", "hard"])
    include_later: bool = False
    """Also show the three candidates added after the study (flagged ``in_study: false``)."""
    top_k: int = Field(default=5, ge=2)
    """Live mode: paired differences among the top-k candidates, Holm-adjusted."""


SPEC = StageSpec(
    SCORES, "Scores and the leaderboard", "scores", Params, evaluation_mode, (PAPER, LIVE),
    inputs=(*GRADED_SUBSETS, Input(GENERATION, (RESPONSES,), IN_LIVE)),
    reads=(
        Read((EVALUATION_MODE, "scores.subsets")),
        Read(("scores.include_later",), IN_PAPER,
             "live mode scores the candidates this run generated; the three candidates "
             "added after the study exist only in the released matrices"),
        Read(("scores.top_k", "seed", "ci_level", "n_resamples"), IN_LIVE,
             RELEASED_MATRICES),
        Read(("analyses.length_penalty",), IN_LIVE,
             "the what-if's length-adjusted choice needs each reply's length, in live mode"),
    ),
    artifacts=MATRICES,
    parameters={"length_penalty": "analyses.length_penalty"},
    summary=('Table 1: per-judge and panel scores, bootstrap intervals, paired differences; the '
             'what-if panel (Table 1 under other scoring choices; ipywidgets in JupyterLab)'))
