"""Chapter 15_judge_accuracy's node of the stage graph: its profile section's model (``Params``)
and what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CATEGORIES_V1,
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    GRADING,
    GRADING_CALL_KEYS,
    IN_LIVE,
    JUDGE_ACCURACY,
    LIVE,
    METRICS,
    PAPER,
    SUBSET,
    SUBSET_IDS,
    VERDICTS,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """15_judge_accuracy: the judges' verdicts against HealthBench's physician labels (live)."""

    meta_eval: Literal["registry", "fixture"] = "registry"
    """Live mode: the rows graded. ``registry`` is HealthBench's meta-evaluation file (online
    only: downloaded, verified by content); ``fixture`` is the compendium's thirteen-row format
    fixture (twelve rows on the Psych subset, one outside it), whose completions script the
    simulator's verdicts (smoke and tests)."""
    max_rows: int | None = Field(default=None, ge=1)
    """Live mode: only the first N rows of the file (``None``: all of them)."""


SPEC = StageSpec(
    JUDGE_ACCURACY, "Are the judges right?", "judge_accuracy", Params, evaluation_mode,
    (PAPER, LIVE), needs={PAPER: "the physician labels"},
    inputs=(Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
            Input(SUBSET, (*SUBSET_IDS, CATEGORIES_V1), IN_LIVE),
            Input(GRADING, (VERDICTS, METRICS), IN_LIVE)),
    reads=(Read((EVALUATION_MODE,)),
           Read(("judge_accuracy.meta_eval", "judge_accuracy.max_rows",
                 "grading.judges", "grading.temperature",
                 "grading.max_tokens", "grading.max_reasks", "seed", "ci_level",
                 "n_resamples", *GRADING_CALL_KEYS),
                IN_LIVE,
                "paper mode neither downloads the physicians' labels (online only) nor "
                "calls a judge; they are graded in live mode")),
    artifacts=("grader_template", "healthbench_meta_eval", "screening_labels"),
    parameters={"judges": "grading.judges", "grading_temperature": "grading.temperature",
                "grading_max_tokens": "grading.max_tokens",
                "max_reasks": "grading.max_reasks"},
    summary=("are the judges right? The judges and the panel against HealthBench's physician "
             "labels on the Psych subset's conversations (live runs; the labels are online "
             "only): macro-F1, sensitivity/specificity, placement among physicians, by theme and"
             " Psych category, corrected rates; about $3 per 1,000 rows for the panel in batch"),
    doc='judge_accuracy.md')
