"""Chapter 06_generation's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from hbpsych_utils import study
from hbpsych_utils.core.config import Section, distinct_names
from hbpsych_utils.pipeline.spec import (
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    GENERATION,
    IN_LIVE,
    LIVE,
    LLM_CALL_KEYS,
    PAPER,
    SAMPLING,
    SUBSET,
    SUBSET_IDS,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """06_generation: candidate responses (paper mode summarises the released run's logs)."""

    candidates: list[str] = Field(default=[])
    """Live mode: models to generate with (names in params/models.yaml), each once."""
    subset: Literal["v1", "v2", "hard"] = "v1"
    """Live mode: which subset 05_subset wrote to generate on (restricted to the corpus)."""
    n_conversations: int | None = Field(default=None, ge=1)
    """Live mode: only the first N subset conversations (sorted ids); ``None`` for all."""
    temperature: float | None = 0.0
    max_tokens: int = Field(default=study.GENERATION_MAX_TOKENS, ge=1)
    samples: int = Field(default=1, ge=1)
    """Live mode: replies per (candidate, conversation), every one graded by the panel (the
    study: 1). The first is the reply a one-sample run makes; each further one is sent with
    its own recorded seed (the profile's ``seed`` plus its index) where the provider takes one.
    Worst-at-k and the spread across runs (notebook 14) need at least 2. At temperature 0 the
    samples come out nearly identical."""

    @field_validator("candidates")
    @classmethod
    def _distinct_candidates(cls, value: list[str]) -> list[str]:
        return distinct_names(value, "candidate")


SPEC = StageSpec(
    GENERATION, "Candidate responses", "generation", Params, evaluation_mode, (PAPER, LIVE),
    inputs=(Input(CORPUS, (CORPUS_RECORD,)), Input(SUBSET, SUBSET_IDS, IN_LIVE)),
    reads=(
        Read((EVALUATION_MODE, "generation.subset", "generation.candidates",
              "grading.judges", "llm.mode", "llm.prompt_caching", "llm.registry_file")),
        Read(("generation.n_conversations", "generation.temperature",
              "generation.max_tokens", "generation.samples", "llm.external",
              *LLM_CALL_KEYS), IN_LIVE,
             "paper mode summarises the released generation logs and plans the study's "
             "design; these settings apply to a live generation"),
        Read(("seed",), SAMPLING, "one reply per conversation is sent without a seed; "
             "the further samples' seeds derive from it"),
    ),
    artifacts=("grader_template", "run_spend", "run_errors", "subset_v1", "subset_v2",
               "subset_hard_v1"),
    parameters={"judges": "grading.judges"},
    summary=("candidate replies (paper mode: the released run's spend and anomalies) and the "
             "cost plan"))
