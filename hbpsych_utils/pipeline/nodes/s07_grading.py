"""Chapter 07_grading's node of the stage graph: its profile section's model (``Params``) and
what it reads, when (``SPEC``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from hbpsych_utils import study
from hbpsych_utils.core.config import Section, distinct_names
from hbpsych_utils.pipeline.spec import (
    CORPUS,
    CORPUS_RECORD,
    EVALUATION_MODE,
    GENERATION,
    GRADING,
    GRADING_CALL_KEYS,
    IN_LIVE,
    LIVE,
    PAPER,
    RESPONSE_SAMPLES,
    RESPONSES,
    Input,
    Read,
    StageSpec,
    evaluation_mode,
)


class Params(Section):
    """07_grading: the judge panel's verdicts (paper mode summarises the released logs)."""

    judges: list[str] | None = None
    """Live mode: the judge models (names in params/models.yaml), at least one, each once;
    ``None`` is the study's panel (``study.JUDGE_PANEL``). The stage resolves it and reports
    the judges it used."""
    temperature: float = 0.0
    """0 in the study; the HealthBench reference uses 0.5."""
    max_tokens: int = Field(default=study.GRADER_MAX_TOKENS, ge=1)
    max_reasks: int = Field(default=3, ge=0)
    response_schema: bool = False
    """Constrain judge output to the verdict JSON schema where the server supports it. A
    deviation from the reference (which sends none), for small local models; off in the study."""
    repeats: int = Field(default=1, ge=1)
    """Live: how many times the judges grade a sample of (reply, criterion) items, this grading
    included: 1 (the study's) grades once; k >= 2 has chapter 16 re-grade the sample k - 1
    more times, each repeat a new request and store entry. Read by 16, not by this stage."""
    repeat_sample: int = Field(default=200, ge=1)
    """Live: how many (reply, criterion) items chapter 16 re-grades, drawn with the profile's
    ``seed`` from this grading's first replies (every judge re-grades the same items)."""

    @field_validator("judges")
    @classmethod
    def _a_panel(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty panel (expected at least one judge, or null for the "
                             "study's panel)")
        return value if value is None else distinct_names(value, "judge")

    def judge_panel(self) -> list[str]:
        """The judges a run uses: ``judges``, or the study's panel when it names none."""
        return list(study.JUDGE_PANEL) if self.judges is None else list(self.judges)


SPEC = StageSpec(
    GRADING, "Grading with the judge panel", "grading", Params, evaluation_mode, (PAPER, LIVE),
    inputs=(Input(GENERATION, (RESPONSES, RESPONSE_SAMPLES), IN_LIVE),
            Input(CORPUS, (CORPUS_RECORD,), IN_LIVE)),
    reads=(
        Read((EVALUATION_MODE,)),
        Read(("grading.judges", "grading.temperature", "grading.max_tokens",
              "grading.max_reasks", "grading.response_schema", "llm.external",
              *GRADING_CALL_KEYS),
             IN_LIVE, "paper mode reads the released grading logs; the judges and their "
             "settings apply when grading live"),
    ),
    artifacts=("grader_template", "run_spend", "run_errors"),
    summary=("the judge panel (the study's three judges unless `grading.judges` names others) "
             "with the reference grader (paper mode: the released run's log)"))
