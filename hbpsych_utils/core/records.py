"""One validation style for every file the package reads: pydantic models, errors naming fields.

Every external file format (HealthBench corpus records, clinician ratings, the released screen,
keys, subsets, matrices, logs and harness scores) and every inter-stage file that is re-read
(responses, verdicts, scores) is a pydantic model in the module that reads it. ``FileRecord``
models are strict (a string is not a number, a bool is not a number) and ignore unknown keys;
``TextRecord`` models coerce (CSV cells arrive as text) and reject unknown keys. Errors become
the field paths a reader of the file recognises (``rubrics[0].points``,
``ratings[3].review_id``) and a short problem, so every loader reports file, line or record,
and field, in its own error type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

_EXPECTED = {
    "string_type": "str", "list_type": "list", "dict_type": "object", "model_type": "an object",
    "model_attributes_type": "an object", "int_type": "int", "float_type": "float",
    "bool_type": "bool",
}


class FileRecord(BaseModel):
    """Base of the file-format models: strict types, unknown keys ignored.

    ``parse`` validates one record and raises ``error`` (a subclass names its own) with the
    message ``<where>: field '<path>': <problem>`` for the first bad field.
    """

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    error: ClassVar[type[Exception]] = ValueError

    @classmethod
    def parse(cls, data: Any, where: str) -> Self:
        """The validated record; ``where`` (``file:line``) heads any error."""
        return validate(cls, data, where, cls.error)


class TextRecord(FileRecord):
    """A record whose values may arrive as text (CSV cells): pydantic's default coercion, and
    unknown keys are errors."""

    model_config = ConfigDict(strict=False, extra="forbid", frozen=True)


def invalid(problem: str) -> PydanticCustomError:
    """A validator's error whose message is ``problem`` verbatim (no pydantic prefix)."""
    return PydanticCustomError("invalid", problem)


def field_path(loc: Sequence[int | str]) -> str:
    """``("rubrics", 0, "points")`` -> ``rubrics[0].points``; the empty path is ``<record>``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<record>"


def problem_text(error: Any) -> str:
    """One pydantic error as the short problem the loaders report."""
    kind = error["type"]
    if kind == "missing":
        return "missing"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {type(error['input']).__name__}"
    return str(error["msg"])


def problems(exc: ValidationError, prefix: Sequence[int | str] = ()) -> list[tuple[str, str]]:
    """Every error of ``exc`` as ``(field path, problem)``, in the model's field order."""
    return [(field_path([*prefix, *err["loc"]]), problem_text(err)) for err in exc.errors()]


def validate(schema: type[BaseModel] | TypeAdapter[Any], data: Any, where: str,
             error: type[Exception] = ValueError, *, context: dict[str, Any] | None = None
             ) -> Any:
    """``data`` validated by a model class or a TypeAdapter, else ``error`` with the message
    ``<where>: field '<path>': <problem>`` for the first bad field."""
    try:
        if isinstance(schema, TypeAdapter):
            return schema.validate_python(data, context=context)
        return schema.model_validate(data, context=context)
    except ValidationError as exc:
        name, problem = problems(exc)[0]
        raise error(f"{where}: field {name!r}: {problem}") from None
