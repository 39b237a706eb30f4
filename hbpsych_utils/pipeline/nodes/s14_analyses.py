"""Chapter 14_analyses's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    ANALYSES,
    CATEGORIES_V1,
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    GENERATION,
    GRADING,
    IN_LIVE,
    LIVE,
    METRICS,
    PAPER,
    RESPONSE_SAMPLES,
    RESPONSES,
    SCORE_SAMPLES,
    SCORES_TABLE,
    SUBSET,
    SUBSET_IDS,
    VERDICT_SAMPLES,
    VERDICTS,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """14_analyses: where and how reliably models fail (live mode: per-criterion grades)."""

    subset: Literal["v1", "v2", "hard"] = "v1"
    """Which subset 05_subset wrote to analyse (this run's graded conversations of it)."""
    length_penalty: Literal["healthbench", "hard", "consensus", "professional"] = "healthbench"
    """The HealthBench variant whose penalty the length-adjusted score uses (reported beside the
    raw score; ``evaluation.length.PENALTIES``). HealthBench-Psych is drawn from the full
    HealthBench."""


SPEC = StageSpec(
    ANALYSES, "Where and how reliably models fail", "analyses", Params, evaluation_mode,
    (PAPER, LIVE), needs={PAPER: "a live run"},
    inputs=(Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
            Input(SUBSET, (*SUBSET_IDS, CATEGORIES_V1), IN_LIVE),
            Input(GENERATION, (RESPONSES, RESPONSE_SAMPLES), IN_LIVE),
            Input(GRADING, (METRICS, VERDICTS, VERDICT_SAMPLES, SCORES_TABLE, SCORE_SAMPLES),
                  IN_LIVE)),
    reads=(Read((EVALUATION_MODE,)),
           Read(("analyses.subset", "analyses.length_penalty", "seed", "ci_level",
                 "n_resamples"), IN_LIVE,
                "paper mode has the released matrices only (one clipped mean per candidate "
                "and judge): no per-criterion grade, reply or second sample to analyse")),
    summary=("where and how reliably models fail (live runs): scores by rubric axis, theme and "
             "category, reply length, worst-at-k"),
    doc='analyses.md')
