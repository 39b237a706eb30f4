"""Chapter 02_screening's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CORPUS,
    CORPUS_RECORD,
    IN_LIVE,
    LANGUAGES,
    LIVE,
    LIVE_OR_TRANSLATING,
    LLM_CALL_KEYS,
    REPLAY,
    SCREENING,
    TRANSLATING,
    Input,
    Read,
    StageSpec,
    section_mode,
)


class Params(Section):
    """02_screening: replay the released screen, or screen the corpus live through the engine."""

    mode: Literal["replay", "live"] = "replay"
    rubric_artifact: str = "screening_rubric"
    """Registry name of the screening rubric (used verbatim in live mode; its vocabulary always)."""
    rubric_file: str | None = None
    """A local rubric instead of the registry's (another specialty)."""
    vocabulary: list[str] | None = None
    """Category vocabulary; ``None`` reads it from the rubric's 'controlled vocabulary' line."""
    batch_size: int = Field(default=50, ge=1)
    max_reasks: int = Field(default=2, ge=0)
    model: str | None = None
    """Live mode: the screening model (a name in params/models.yaml)."""
    translation_model: str | None = None
    """The model that machine-translates the non-English conversations for reviewers, in either
    mode (``None``: no translations)."""
    translation_artifact: str = "translation_prompt"
    compare_with_release: bool = True
    """Live mode: report agreement with the released screen on the ids both cover."""


SPEC = StageSpec(
    SCREENING, "LLM screening", "screening", Params, section_mode("screening"), (REPLAY, LIVE),
    inputs=(Input(CORPUS, (CORPUS_RECORD,), LIVE_OR_TRANSLATING),
            Input(CORPUS, (LANGUAGES,), TRANSLATING)),
    reads=(
        Read(("screening.mode", "screening.rubric_artifact", "screening.rubric_file",
              "screening.vocabulary", "screening.translation_model")),
        Read(("screening.model", "screening.batch_size", "screening.compare_with_release"),
             IN_LIVE, "replay mode reads the released screen; the screening model, its "
             "batches and the comparison with the release belong to a live screen"),
        Read(("screening.max_reasks", *LLM_CALL_KEYS), LIVE_OR_TRANSLATING,
             "no model is called: the screen is replayed and no translation_model is set"),
        Read(("screening.translation_artifact",), TRANSLATING,
             "no translation_model is set, so nothing is translated"),
    ),
    artifacts=("screening.rubric_artifact", "screening_labels",
               "screening.translation_artifact"),
    summary='the LLM screen of the corpus (replays the released one, or runs live)')
