"""What every reader of ``filter-results`` shares: the records an input's scores become, how
the run behind an input ended, the validation of a file's records (errors naming the file, the
record and every bad field), and the per-criterion results ``--by-tag`` scores.

Each layout's reader (:mod:`~hbpsych_utils.reporting.interop_simple_evals`,
:mod:`~hbpsych_utils.reporting.interop_inspect`, :mod:`~hbpsych_utils.reporting.interop_hbpsych`)
validates its records with a pydantic model built on :class:`InputRecord` and returns
:class:`ConversationScore` records; :mod:`~hbpsych_utils.reporting.interop` loads any input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, PlainValidator, TypeAdapter

from hbpsych_utils.construction import corpus
from hbpsych_utils.core import records
from hbpsych_utils.core.wording import count

_MAX_SCORE = 1.0 + 1e-9


class InteropError(ValueError):
    """Unreadable or inconsistent results; the message names the file, record and field."""


@dataclass(frozen=True)
class ConversationScore:
    """One model's score on one conversation, with where it came from (for error messages)."""

    model: str
    prompt_id: str
    score: float | None
    """Unclipped per-conversation score; ``None`` = in the input but not scored."""
    where: str
    criteria: GradedRubric | None = None
    """The per-criterion results behind the score, when asked for and the input has them."""


RunState = Literal["complete", "failed", "cancelled", "incomplete"]
"""How the run behind an input ended."""


@dataclass(frozen=True)
class RunStatus:
    """How the run behind an input ended, as its own file records it."""

    state: RunState
    recorded: str | None
    """The tool's own word for it (Inspect's ``status``), when it has one."""
    n_samples: int
    """Samples (conversations) in the file."""
    n_scored: int
    n_errored: int
    """Samples the file marks as errored (Inspect: the sample's ``error``)."""
    error: str | None = None
    """Why the run failed, as the file says (first line, shortened)."""

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def describe(self) -> str:
        """One clause: the state, what the file recorded, and the sample counts."""
        said = f"status {self.recorded!r}" if self.recorded else ""
        if self.error:
            said += (": " if said else "") + self.error
        head = {"complete": "the run completed", "failed": "the run FAILED",
                "cancelled": "the run was CANCELLED",
                "incomplete": "the run did NOT FINISH"}[self.state]
        return (f"{head}{f' ({said})' if said else ''}: {count(self.n_scored, 'sample')} "
                f"scored, {self.n_errored:,} errored, of {self.n_samples:,} in the file")

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "recorded": self.recorded, "n_samples": self.n_samples,
                "n_scored": self.n_scored, "n_errored": self.n_errored, "error": self.error}


Details = dict[str, str | list[str] | None]
"""What an input says of itself, reported beside it: simple-evals' ``eval``, an Inspect log's
``task`` and ``status``, the judges of the compendium's export."""


@dataclass(frozen=True)
class InputSummary:
    path: str
    format: str
    models: tuple[str, ...]
    records: int
    details: Details = field(default_factory=dict)
    run: RunStatus | None = None
    """How the run behind the file ended (None: the compendium's own score export)."""


@dataclass
class LoadedResults:
    """Every input's scores, one per (model, conversation), and what each input was."""

    by_model: dict[str, dict[str, ConversationScore]]
    inputs: list[InputSummary]


# --------------------------------------------------------------------------------------------
# Record models: errors naming file, record and field


def _score(value: Any) -> float:
    """A finite per-conversation score; bools and strings are refused (they are not scores)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {value!r}")
    if x > _MAX_SCORE:
        raise ValueError(
            f"{x} is above 1, impossible for a HealthBench score (met points / positive "
            "points); is it a percentage?"
        )
    return x


def score_or_none(value: Any) -> float | None:
    """A score, or ``None`` for a conversation in the input without one (``null``, or NaN:
    Inspect's ``Score.unscored()``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return _score(value)


def _text(value: Any) -> str:
    """A non-empty string (an id or a name), stripped."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value.strip()


Score = Annotated[float, PlainValidator(_score)]
ScoreOrNone = Annotated[float | None, PlainValidator(score_or_none)]
Text = Annotated[str, PlainValidator(_text)]
TEXT = TypeAdapter(Text)
SCORE_OR_NONE = TypeAdapter(ScoreOrNone)


class InputRecord(records.FileRecord):
    """An input record: the fields the report needs; the many others are ignored. Lax types
    (the scores have their own validators, :data:`Score`), and a missing field's
    ``missing_hints`` say what its absence tells about the file."""

    model_config = ConfigDict(strict=False, extra="ignore", frozen=True)


def validate(schema: type[InputRecord] | TypeAdapter[Any], data: Any, where: str,
             *, within: tuple[str | int, ...] = ()) -> Any:
    """``data`` validated by ``schema``, or an :class:`InteropError` that names ``where`` (file
    and record) and every bad field (``records.validate(every=True)``; ``within`` prefixes the
    field path)."""
    return records.validate(schema, data, where, InteropError, every=True, prefix=within)


def load_json(path: Path) -> Any:
    """An input file's JSON (a JSON boundary: its records are validated by the readers)."""
    return records.read_json(path, error=InteropError)  # errors name the file and line


# --------------------------------------------------------------------------------------------
# Per-criterion results (--by-tag)


def _points(value: Any) -> int | float:
    """Rubric points as the log holds them: a finite number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return value


Points = Annotated[int | float, PlainValidator(_points)]


class RubricEntry(InputRecord):
    """A rubric criterion as a log records it: simple-evals' ``rubric_items`` entry (with
    ``criteria_met``), inspect_evals' ``metadata.rubrics`` entry, or a ``detailed_results``
    entry (with ``met``)."""

    criterion: str = ""
    points: Points
    tags: list[str] = Field(default_factory=list)
    criteria_met: bool | None = None
    met: bool | None = None

    @property
    def verdict(self) -> bool | None:
        return self.criteria_met if self.criteria_met is not None else self.met


class VerdictEntry(InputRecord):
    """One verdict of this package's ``healthbench_psych`` task (``Score.metadata.verdicts``)."""

    judge: Text
    criterion_index: Annotated[int, Field(ge=0)]
    criteria_met: bool | None = None


RUBRIC = TypeAdapter(list[RubricEntry])
VERDICTS = TypeAdapter(list[VerdictEntry])
TAGS = TypeAdapter(list[str])
GRADER = "grader"
"""The scorer name of a log graded by one grader (simple-evals, inspect_evals)."""


@dataclass(frozen=True)
class GradedRubric:
    """One conversation's rubric and the verdicts behind its score, from a log."""

    rubrics: tuple[corpus.RubricItem, ...]
    verdicts: Mapping[str, tuple[bool | None, ...]]
    """Grader (``grader``, or each judge of a panel) -> ``criteria_met`` in rubric order."""
    example_tags: tuple[str, ...] | None
    """``None`` when the log does not record them (simple-evals)."""


def rubric_items(entries: Sequence[RubricEntry]) -> tuple[corpus.RubricItem, ...]:
    """A log's rubric entries as the corpus's rubric items (criterion, points, tags)."""
    return tuple(corpus.RubricItem(e.criterion, e.points, tuple(e.tags)) for e in entries)


def interval_end(x: float) -> float | None:
    """An interval's end as a report holds it: ``None`` where it is undefined (NaN)."""
    return None if math.isnan(x) else float(x)
