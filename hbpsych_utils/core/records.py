"""One validation style for every file the package reads: pydantic models, errors naming fields.

Every external file format (HealthBench corpus records, clinician ratings, the released screen,
keys, subsets, matrices, logs and harness scores) and every inter-stage file that is re-read
(responses, verdicts, scores) is a pydantic model in the module that reads it. ``FileRecord``
models are strict (a string is not a number, a bool is not a number) and ignore unknown keys;
``TextRecord`` models coerce (CSV cells arrive as text) and reject unknown keys. No record
accepts a NaN or infinite number (JSON readers let ``NaN`` through). Errors become the field
paths a reader of the file recognises (``rubrics[0].points``, ``ratings[3].review_id``) and a
short problem, so every loader reports file, line or record, and field, in its own error type.
The compendium's loaders report the first bad field; ``validate(..., every=True)`` reports every
one in prose, with a model's ``missing_hints`` (the style of the results reader
:mod:`hbpsych_utils.reporting.interop`, whose users fix files written by other tools).

Files are decoded here too: :func:`read_text` and :func:`utf8_lines` turn bytes that are not
UTF-8 into a :class:`NotUTF8` error naming the file, the line and the column, instead of a bare
``UnicodeDecodeError`` (``utf8_lines`` hands it back per line, so a skip mode can count the line
and go on); :func:`read_json` adds :class:`NotJSON`, naming the file and the line, for text that
does not parse.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")
B = TypeVar("B", bound=BaseModel)

_EXPECTED = {
    "string_type": "str", "list_type": "list", "dict_type": "object", "model_type": "an object",
    "model_attributes_type": "an object", "int_type": "int", "float_type": "float",
    "bool_type": "bool",
}
_EXPECTED_PROSE = {"dict_type": "an object", "model_type": "an object",
                   "model_attributes_type": "an object", "list_type": "a list"}


class FileRecord(BaseModel):
    """Base of the file-format models: strict types, unknown keys ignored.

    ``parse`` validates one record and raises ``error`` (a subclass names its own) with the
    message ``<where>: field '<path>': <problem>`` for the first bad field.
    """

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, allow_inf_nan=False)
    error: ClassVar[type[Exception]] = ValueError
    missing_hints: ClassVar[Mapping[str, str]] = {}
    """Field path -> what its absence tells about the file, added to a missing field's problem
    when :func:`validate` reports every bad field (e.g. "not an Inspect eval log")."""

    @classmethod
    def parse(cls, data: object, where: str) -> Self:
        """The validated record; ``where`` (``file:line``) heads any error."""
        return validate(cls, data, where, cls.error)


class TextRecord(FileRecord):
    """A record whose values may arrive as text (CSV cells): pydantic's default coercion, and
    unknown keys are errors."""

    model_config = ConfigDict(strict=False, extra="forbid", frozen=True, allow_inf_nan=False)


def invalid(problem: str) -> PydanticCustomError:
    """A validator's error whose message is ``problem`` verbatim (no pydantic prefix)."""
    return PydanticCustomError("invalid", problem)


def field_path(loc: Sequence[int | str]) -> str:
    """``("rubrics", 0, "points")`` -> ``rubrics[0].points``; the empty path is ``<record>``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<record>"


def problem_text(error: ErrorDetails, *, prose: bool = False) -> str:
    """One pydantic error as the short problem the loaders report. A validator's own
    ``ValueError`` reads as raised (no pydantic prefix); a wrong type as ``expected str, got
    int``. With ``prose``: ``expected an object`` / ``expected a list``, and any other failed
    check names the value given (``Input should be a valid integer, got '2'``)."""
    kind = error["type"]
    if kind == "missing":
        return "missing"
    if kind == "value_error":
        return str((error.get("ctx") or {}).get("error", error["msg"]))
    got = type(error["input"]).__name__
    if prose:
        if kind in _EXPECTED_PROSE:
            return f"expected {_EXPECTED_PROSE[kind]}, got {got}"
        return f"{error['msg']}, got {error['input']!r}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {got}"
    return str(error["msg"])


def problems(exc: ValidationError, prefix: Sequence[int | str] = ()) -> list[tuple[str, str]]:
    """Every error of ``exc`` as ``(field path, problem)``, in the model's field order."""
    return [(field_path([*prefix, *err["loc"]]), problem_text(err)) for err in exc.errors()]


def _problem_sentences(exc: ValidationError, prefix: Sequence[int | str] = (),
                       hints: Mapping[str, str] | None = None) -> list[str]:
    """Every error of ``exc`` in prose: ``field 'a.b': <problem>``, ``field 'a' is missing``
    with its hint (``hints``: field path without ``prefix`` -> text; each hint is given once,
    so two missing fields with one hint do not repeat it), or the bare problem when the record
    itself is wrong (``expected an object, got str``)."""
    left = dict(hints or {})
    out = []
    for err in exc.errors():
        loc = [*prefix, *err["loc"]]
        name = field_path(loc) if loc else ""
        if err["type"] == "missing":
            hint = left.get(field_path(err["loc"]))
            left = {k: v for k, v in left.items() if v != hint}
            out.append(f"field '{name}' is missing" + (f": {hint}" if hint else ""))
        else:
            problem = problem_text(err, prose=True)
            out.append(f"field '{name}': {problem}" if name else problem)
    return out


@overload
def validate(schema: type[B], data: object, where: str, error: type[Exception] = ValueError, *,
             context: Mapping[str, object] | None = None, every: bool = False,
             prefix: Sequence[int | str] = ()) -> B: ...
@overload
def validate(schema: TypeAdapter[T], data: object, where: str,
             error: type[Exception] = ValueError, *, context: Mapping[str, object] | None = None,
             every: bool = False, prefix: Sequence[int | str] = ()) -> T: ...
def validate(schema: type[B] | TypeAdapter[T], data: object, where: str,
             error: type[Exception] = ValueError, *, context: Mapping[str, object] | None = None,
             every: bool = False, prefix: Sequence[int | str] = ()) -> B | T:
    """``data`` validated by a model class or a TypeAdapter, else ``error`` with the message
    ``<where>: field '<path>': <problem>`` for the first bad field; with ``every``,
    ``<where>: `` and every problem (:func:`_problem_sentences`, with the model's
    ``missing_hints``) joined by ``; ``. ``prefix`` heads every field path (``data`` sits
    there in its file)."""
    try:
        if isinstance(schema, TypeAdapter):
            return schema.validate_python(data, context=context)
        return schema.model_validate(data, context=context)
    except ValidationError as exc:
        if every:
            hints = getattr(schema, "missing_hints", None)
            raise error(f"{where}: {'; '.join(_problem_sentences(exc, prefix, hints))}") from None
        name, problem = problems(exc, prefix)[0]
        raise error(f"{where}: field {name!r}: {problem}") from None


class NotUTF8(ValueError):
    """Bytes of a text file that are not UTF-8; names file, line and column (1-based)."""

    def __init__(self, file: Path | str, line: int, column: int, byte: int) -> None:
        self.file, self.line, self.column = str(file), line, column
        self.problem = (f"not UTF-8 text: byte 0x{byte:02x} at column {column} "
                        "(save the file as UTF-8)")
        super().__init__(f"{file}:{line}: {self.problem}")


def _not_utf8(file: Path | str, data: bytes, exc: UnicodeDecodeError, first_line: int = 1
              ) -> NotUTF8:
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    return NotUTF8(file, first_line + data.count(b"\n", 0, exc.start),
                   len(data[line_start:exc.start].decode("utf-8", "replace")) + 1,
                   data[exc.start])


def read_text(path: Path | str, *, error: type[Exception] | None = None,
              newline: str | None = None) -> str:
    """A whole text file, decoded as UTF-8. Bytes that are not UTF-8 raise :class:`NotUTF8`
    (or ``error`` with its message), naming the file, line and column. ``newline`` is
    ``open``'s: ``None`` reads ``\\r\\n`` and ``\\r`` as ``\\n`` (as ``Path.read_text``
    does), ``""`` keeps line ends as written (CSV readers)."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = _not_utf8(path, data, exc)
        raise (bad if error is None else error(str(bad))) from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if newline is None else text


class NotJSON(ValueError):
    """A JSON file's text that does not parse; names file and line (1-based)."""

    def __init__(self, file: Path | str, line: int, detail: str) -> None:
        self.file, self.line = str(file), line
        self.problem = f"not valid JSON: {detail}"
        super().__init__(f"{file}:{line}: {self.problem}")


def loads(text: str) -> Any:
    """``json.loads``, with text nested too deeply for the parser (Python's recursion limit:
    ``[[[[...`` a hundred thousand deep) raised as the ``json.JSONDecodeError`` it is, at the
    first bracket past the limit, instead of a ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        limit = sys.getrecursionlimit()
        raise json.JSONDecodeError(
            f"arrays and objects nested more than {limit} deep (too deep to read)", text,
            _first_bracket_deeper_than(text, limit)) from None


def _first_bracket_deeper_than(text: str, limit: int) -> int:
    """Position of the first ``[`` or ``{`` (outside strings) at nesting depth ``limit + 1``
    (0 if there is none)."""
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return i
        elif ch in "]}":
            depth -= 1
    return 0


def read_json(path: Path | str, *, error: type[Exception] | None = None) -> Any:
    """A whole JSON file, decoded. Bytes that are not UTF-8 raise :class:`NotUTF8` and text
    that does not parse (or is nested too deeply to, :func:`loads`) :class:`NotJSON` (or
    ``error`` with their message: ``<file>:<line>: ...``), so every reader of a JSON file
    names the file and the line."""
    text = read_text(path, error=error)
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        bad = NotJSON(path, exc.lineno, exc.msg)
        raise (bad if error is None else error(str(bad))) from None


def utf8_lines(path: Path | str) -> Iterator[tuple[int, str | NotUTF8]]:
    """``(line number, text)`` for every line of a file split on ``\\n`` (JSON Lines), the text
    decoded as UTF-8; a line whose bytes are not UTF-8 comes as its :class:`NotUTF8` error
    instead, so the caller decides whether to stop or to skip and count it."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield lineno, _not_utf8(path, raw, exc, first_line=lineno)


def read_csv(path: Path | str, *, error: type[Exception] = ValueError, **options: object
             ) -> pd.DataFrame:
    """A CSV file as ``pandas.read_csv(path, **options)`` reads it, decoded as UTF-8 first
    (:func:`read_text`: errors name file and line); an empty file raises ``error`` naming it
    instead of pandas' unnamed ``EmptyDataError``."""
    import io

    import pandas as pd

    text = read_text(path, error=error, newline="")
    if not text.strip():
        raise error(f"{path}: empty file (expected a CSV header line and rows)")
    return pd.read_csv(io.StringIO(text), **options)
