"""Chapter 16_self_consistency's node of the stage graph: what it reads, when (``SPEC``). Its
settings are the grading section's (``grading.repeats``, ``grading.repeat_sample`` and the
grading settings it re-grades with), taken as parameters."""

from __future__ import annotations

from hbpsych_utils.pipeline.spec import (
    CATEGORIES_V1,
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    GENERATION,
    GRADING,
    GRADING_CALL_KEYS,
    IN_LIVE,
    LIVE,
    METRICS,
    PAPER,
    RESPONSES,
    SUBSET,
    VERDICTS,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)

SELF_CONSISTENCY = "16_self_consistency"

SPEC = StageSpec(
    SELF_CONSISTENCY, "Do the judges agree with themselves?", None, None, evaluation_mode,
    (PAPER, LIVE), needs={PAPER: "a live run"},
    inputs=(Input(GRADING, (VERDICTS, METRICS), IN_LIVE),
            Input(GENERATION, (RESPONSES,), IN_LIVE),
            Input(CORPUS, (CORPUS_RECORD,), IN_LIVE),
            Input(SUBSET, (CATEGORIES_V1,), IN_LIVE)),
    reads=(Read((EVALUATION_MODE,)),
           Read(("grading.repeats", "grading.repeat_sample", "grading.judges",
                 "grading.temperature", "grading.max_tokens", "grading.max_reasks",
                 "grading.response_schema", "seed", "ci_level", "n_resamples",
                 "llm.simulator_flip_rate", *GRADING_CALL_KEYS),
                IN_LIVE,
                "the released files hold one verdict per item, so there is nothing to repeat; "
                "the judges re-grade in live mode")),
    artifacts=("grader_template",),
    parameters={"repeats": "grading.repeats", "repeat_sample": "grading.repeat_sample",
                "judges": "grading.judges", "grading_temperature": "grading.temperature",
                "grading_max_tokens": "grading.max_tokens", "max_reasks": "grading.max_reasks",
                "response_schema": "grading.response_schema"},
    summary=("do the judges agree with themselves? A seeded sample of (reply, criterion) items "
             "re-graded `grading.repeats` times (live): each judge's and the panel majority's "
             "flip rate, agreement between repeats, the criteria that flip, what re-grading "
             "does to the scores and the ranking, and the judges' own refusals"),
    doc="self_consistency.md")
