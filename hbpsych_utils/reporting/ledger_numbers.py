"""The paper's side of the reproduction ledger: its printed numbers as data
(``data/paper_numbers.yaml``), each with how this run's value is found and the stages it comes
from, and a printed value's precision (what the comparison rounds to).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hbpsych_utils.core import paths, records, yaml_loader
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting.ledger_values import MEASURE_STAGES, MEASURES

PAPER_NUMBERS = "paper_numbers.yaml"
"""The paper's printed numbers, in ``data/``."""


class LedgerError(ValueError):
    """``paper_numbers.yaml`` is malformed (names the entry and the field)."""


class PaperNumber(BaseModel):
    """One printed number of the paper and how this run's value is found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    section: str
    quantity: str
    paper: str
    value: list[str] | None = None
    per: list[str] | None = None
    measure: str | None = None
    args: list[str] = Field(default_factory=list)
    unaffected_by: list[str] = Field(default_factory=list)
    """Profile keys its chapters read that cannot change this number (kept out of its
    conditions, so a run that sets them is not called tweaked for it)."""

    @model_validator(mode="after")
    def _one_source(self) -> PaperNumber:
        if (self.value is None) == (self.measure is None):
            raise ValueError("give exactly one of 'value' (a metrics path) and 'measure'")
        if self.per is not None and self.value is None:
            raise ValueError("'per' divides a 'value'; it cannot go with a 'measure'")
        if self.measure is not None and self.measure not in MEASURES:
            raise ValueError(f"unknown measure {self.measure!r} (known: {', '.join(MEASURES)})")
        for path in (self.value, self.per):
            if path is not None and (len(path) < 2 or path[0] not in graph.SPECS):
                raise ValueError(f"a metrics path is [stage, field, ...] with a stage of the "
                                 f"graph; got {path}")
        for key in self.unaffected_by:
            if not graph.readers(key):
                raise ValueError(f"unaffected_by: no stage reads {key!r}")
        printed(self.paper)
        return self


@dataclass(frozen=True)
class Printed:
    """A printed value: a number with its decimals (and whether it is a percentage, signed, or
    written with thousands separators), or text."""

    text: str
    number: Decimal | None
    decimals: int
    percent: bool
    signed: bool
    grouped: bool = False


_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
"""A number written with thousands separators ("4,359", "1,000")."""


def printed(text: str) -> Printed:
    """Parse a printed value ("0.157", "+0.077", "-0.003", "7.6%", "4,359", "kimi-k2.6")."""
    s = text.strip().replace("−", "-")
    percent = s.endswith("%")
    body = s.removesuffix("%")
    grouped = _GROUPED.fullmatch(body) is not None
    if grouped:
        body = body.replace(",", "")
    try:
        number = Decimal(body)
    except InvalidOperation:
        return Printed(text, None, 0, False, False)
    exponent = number.as_tuple().exponent  # an int for a finite number
    decimals = -exponent if "." in body and isinstance(exponent, int) else 0
    return Printed(text, number, decimals, percent, body.startswith(("+", "-")), grouped)


def stage_of(number: PaperNumber) -> str:
    """The stage whose results give this run's value (what the ledger's row links to)."""
    if number.value is not None:
        return number.value[0]
    assert number.measure is not None
    return MEASURE_STAGES.get(number.measure) or number.args[0]


def stages_of(number: PaperNumber) -> tuple[str, ...]:
    """Every stage whose results give this number (its value's and its denominator's)."""
    found = [stage_of(number)] + ([number.per[0]] if number.per else [])
    return tuple(s for s in graph.STAGES if s in found)


_LOADED: dict[tuple[str, str], list[PaperNumber]] = {}
"""The numbers already read in this process, by file and text: each book build would parse the
same YAML again. Keyed by the text read, so an edited file is parsed anew."""


def load_numbers(path: Path | None = None) -> list[PaperNumber]:
    """The paper's printed numbers (``data/paper_numbers.yaml``), validated, ids unique."""
    path = path or paths.project_root() / "data" / PAPER_NUMBERS
    try:
        text = records.read_text(path, error=yaml_loader.YAMLFileError)
    except yaml_loader.YAMLFileError as exc:
        raise LedgerError(str(exc)) from exc
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read the paper's numbers ({exc.strerror})") from exc
    key = (str(path), text)
    if key not in _LOADED:
        _LOADED[key] = _parse_numbers(path, text)
    return list(_LOADED[key])  # the numbers are frozen; the list is the caller's


def _parse_numbers(path: Path, text: str) -> list[PaperNumber]:
    try:
        data = yaml_loader.load_text(text, str(path))
    except yaml_loader.YAMLFileError as exc:
        raise LedgerError(str(exc)) from exc
    if not isinstance(data, list):
        raise LedgerError(f"{path}: expected a list of entries")
    numbers = []
    for i, entry in enumerate(data):
        where = f"{path}: entry {i + 1}"
        if isinstance(entry, dict) and "id" in entry:
            where += f" ({entry['id']})"
        numbers.append(records.validate(PaperNumber, entry, where, LedgerError))
    seen: set[str] = set()
    for n in numbers:
        if n.id in seen:
            raise LedgerError(f"{path}: id {n.id!r} appears twice")
        seen.add(n.id)
    return numbers
