"""Chapter 11_harness_validation's node of the stage graph: its profile section's model
(``Params``) and what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils import study
from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    GRADING_CALL_KEYS,
    HARNESS,
    IN_LIVE,
    LIVE,
    REPLAY,
    Input,
    Read,
    StageSpec,
    harness_mode,
)


class Params(Section):
    """11_harness_validation: the GPT-4.1 HealthBench-Hard run against the published figure."""

    mode: Literal["replay", "live"] | None = None
    """``replay`` summarises the released run; ``live`` re-runs it through the engine; ``None``
    follows the profile's ``evaluation_mode`` (paper: replay). The one evaluation stage whose
    mode may differ from the rest, because it depends on nothing else of the evaluation: a live
    re-run of the candidates may keep the released harness check (the ``live`` profile does)."""
    published: float | None = Field(default=study.PUBLISHED_HARNESS_SCORE, ge=0, le=1)
    """The published score the check compares against (a fraction): by default OpenAI's
    HealthBench-Hard score for GPT-4.1, as the study compared; ``None``: no difference."""
    published_source: str = study.PUBLISHED_HARNESS_SOURCE
    """Where ``published`` comes from (citation), recorded beside it."""
    candidate: str | None = None
    """Live mode: the model that answers; ``None`` is the study's (``study.HARNESS_MODEL``,
    GPT-4.1). The stage resolves it and reports it under ``settings``."""
    judge: str | None = None
    """Live mode: the model that grades; ``None`` is the study's (``study.HARNESS_MODEL``)."""
    temperature: float = study.REFERENCE_TEMPERATURE
    """The reference setting, for candidate and judge alike."""
    max_tokens: int = Field(default=study.GRADER_MAX_TOKENS, ge=1)
    n_conversations: int | None = Field(default=None, ge=1)
    """Live mode: only the first N Hard conversations of the corpus (sorted ids)."""

    def model_of(self, role: Literal["candidate", "judge"]) -> str:
        """The model a run uses in ``role``: the one named, or ``study.HARNESS_MODEL``."""
        name = getattr(self, role)
        return study.HARNESS_MODEL if name is None else name


SPEC = StageSpec(
    HARNESS, "Harness validation", "harness_validation", Params, harness_mode, (REPLAY, LIVE),
    inputs=(Input(CORPUS, (CORPUS_RECORD,)),),
    reads=(
        Read((EVALUATION_MODE, "harness_validation.mode", "harness_validation.published",
              "harness_validation.published_source", "seed", "ci_level",
              "n_resamples")),
        Read(("harness_validation.candidate", "harness_validation.judge",
              "harness_validation.temperature", "harness_validation.max_tokens",
              "harness_validation.n_conversations", *GRADING_CALL_KEYS), IN_LIVE,
             "replay mode summarises the released GPT-4.1 run, made at the reference "
             "settings; these apply to a live re-run"),
    ),
    artifacts=("harness_scores", "harness_results", "grader_template"),
    summary="GPT-4.1 on HealthBench-Hard against OpenAI's published 0.16")
