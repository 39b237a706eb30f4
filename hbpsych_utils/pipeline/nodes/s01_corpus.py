"""Chapter 01_corpus's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline.spec import (
    CORPUS,
    Read,
    StageSpec,
    no_mode,
)


class Params(Section):
    """01_corpus: which corpus file, how strict to be about it, and how much of it to use."""

    allow_partial: bool = False
    """Accept a corpus that holds only some of the 5,000 HealthBench ids and report coverage."""
    invalid_records: Literal["error", "skip"] = "error"
    """``error`` stops at the first bad line; ``skip`` logs it, counts it and goes on."""
    max_conversations: int | None = Field(default=None, ge=1)
    """Use only the first N records in file order (tiny runs); ``None`` uses all."""
    corpus_file: str | None = None
    """A local HealthBench-layout JSONL to use instead of the registry's corpus (another corpus,
    a synthetic one in tests). Relative paths are taken from the project root."""
    detect_language: bool = True
    """Flag non-English conversations with the language detector."""


SPEC = StageSpec(
    CORPUS, "The HealthBench corpus", "corpus", Params, no_mode, (),
    reads=(Read(("corpus.allow_partial", "corpus.invalid_records", "corpus.max_conversations",
                 "corpus.corpus_file", "corpus.detect_language")),),
    artifacts=("healthbench_oss", "screening_labels", "harness_scores"),
    summary=("loads HealthBench, verified by content; coverage, turns, rubric criteria, themes, "
             "languages"))
