"""The reproduction ledger: every number the study paper prints that the release determines,
beside this run's value, with a status.

The paper's side is data (``data/paper_numbers.yaml``, its values as printed); this run's side
comes from the stages' typed metrics only, never from a second copy. A printed value sets the
precision of the comparison: ``0.157`` compares the run's value rounded to three decimals,
``7.6%`` its percentage to one decimal, ``4,359`` the integer exactly (written with the paper's
thousands separator), ``claude-haiku-4.5`` the model the paper names so (``study.PAPER_NAMES``).

A value is only the paper's quantity under the paper's conditions, so each entry has them
(:class:`Conditions`, derived by :func:`conditions`): the chapters its value comes from, the
chapters those read from, each one's mode and the profile keys they read, at the values of the
paper's run (the profile model's defaults). A run whose conditions differ says so first:

- ``not_current``: a chapter the value comes from is not current (run by hand, failed, or
  behind an upstream change: ``pipeline.state``), so the value is not this run's;
- ``own_replies``: it ran live, generating and grading replies of its own, so the paper's
  evaluation numbers are not expected;
- ``tweaked``: a setting it depends on differs from the paper's (the row names it,
  "judges.subset = hard").

Under the paper's conditions the value is compared:

- ``equal``: the run's value, rounded as the paper prints it, is the printed value;
- ``differs``: it is not (the row says by how much, in the paper's unit);
- ``not_computable``: this run has not what the number needs, and the row says why (a stage
  that did not run; an interval the released matrices cannot give, having no per-conversation
  grades; a paired comparison this run did not make).

A row whose conditions differ keeps the comparison it would have had (``compared``) for readers
who want it; the status and the summary count the conditions first.

The paper's numbers are read by :mod:`~hbpsych_utils.reporting.ledger_numbers`, this run's
values found by :mod:`~hbpsych_utils.reporting.ledger_values` and the conditions derived by
:mod:`~hbpsych_utils.reporting.ledger_conditions`; this module compares, judges and counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from hbpsych_utils import study
from hbpsych_utils.reporting.ledger_conditions import (
    NOT_CURRENT,
    OWN_REPLIES,
    TWEAKED,
    RunConditions,
    conditions,
    departure,
)
from hbpsych_utils.reporting.ledger_numbers import PaperNumber, Printed, load_numbers, printed
from hbpsych_utils.reporting.ledger_values import MEASURES, Missing, Value, at
from hbpsych_utils.reporting.run_metrics import RunMetrics

EQUAL: Final = "equal"
DIFFERS: Final = "differs"
NOT_COMPUTABLE: Final = "not_computable"
Comparison = Literal["equal", "differs", "not_computable"]
Status = Literal["equal", "differs", "not_computable", "not_current", "own_replies", "tweaked"]
STATUSES: tuple[str, ...] = (EQUAL, DIFFERS, NOT_COMPUTABLE, TWEAKED, NOT_CURRENT, OWN_REPLIES)
"""Every status, in the order the ledger counts them."""
STATUS_WORDS: dict[str, str] = {
    EQUAL: "equal", DIFFERS: "differs", NOT_COMPUTABLE: "not computable", TWEAKED: "tweaked",
    NOT_CURRENT: "not current", OWN_REPLIES: "own replies"}
"""How a status reads on the page."""


class Row(BaseModel):
    """One line of the ledger."""

    model_config = ConfigDict(frozen=True)

    number: PaperNumber
    run: str
    """This run's value at the paper's precision ("" when not computable)."""
    status: Status
    note: str = ""
    """How much it differs, why it cannot be computed, which setting was tweaked ("judges.subset
    = hard"), why its chapter is not current, or which chapter ran live."""
    settings: tuple[str, ...] = ()
    """The settings tweaked away from the paper's ("judges.subset = hard"), for ``tweaked``."""
    compared: Comparison
    """What the value alone says (equal, differs, not computable): the status itself unless the
    run's conditions differ from the paper's."""
    compared_note: str = ""

    def label(self) -> str:
        """The status as the page says it: "tweaked: judges.subset = hard"."""
        word = STATUS_WORDS[self.status]
        return f"{word}: {self.note}" if self.note else word


# --- comparing a printed value ---------------------------------------------------------------


def shown(value: float | int, p: Printed) -> str:
    """A run's value written as the paper writes ``p``: same decimals, sign, separators, unit."""
    x = 100 * value if p.percent else value
    sign = "+" if p.signed else ""
    group = "," if p.grouped else ""
    return f"{x:{sign}{group}.{p.decimals}f}" + ("%" if p.percent else "")


def compare(number: PaperNumber, value: Value) -> Row:
    """The row for one printed number and the run's value, under the paper's conditions."""
    if isinstance(value, Missing):
        return _row(number, "", NOT_COMPUTABLE, value.reason)
    p = printed(number.paper)
    if p.number is None or isinstance(value, str):
        run = study.paper_name(str(value))
        return _row(number, run, EQUAL if run == number.paper else DIFFERS)
    if isinstance(value, bool) or not math.isfinite(value):
        return _row(number, str(value), NOT_COMPUTABLE, "the run's value is not a number")
    run = shown(value, p)
    if Decimal(run.removesuffix("%").replace(",", "")) == p.number:
        return _row(number, run, EQUAL)
    delta = Decimal(str(100 * value if p.percent else value)) - p.number
    unit = " percentage points" if p.percent else ""
    digits = p.decimals + 1 if p.decimals else 0
    group = "," if p.grouped else ""
    return _row(number, run, DIFFERS, f"by {float(delta):+{group}.{digits}f}{unit}")


def _row(number: PaperNumber, run: str, status: Comparison, note: str = "") -> Row:
    return Row(number=number, run=run, status=status, note=note, compared=status,
               compared_note=note)


def run_value(number: PaperNumber, metrics: RunMetrics) -> Value:
    """This run's value for one printed number."""
    if number.measure is not None:
        return MEASURES[number.measure](metrics, *number.args)
    assert number.value is not None
    value = at(metrics, number.value)
    if number.per is None or isinstance(value, Missing):
        return value
    per = at(metrics, number.per)
    if isinstance(per, Missing):
        return per
    if isinstance(value, str) or isinstance(per, str) or not per:
        return Missing("the share's denominator is not a positive number")
    return value / per


def judge(number: PaperNumber, value: Value, run: RunConditions | None = None) -> Row:
    """The row for one printed number: the comparison of ``value`` with the paper's, unless
    the run's conditions for it differ from the paper's (then the status says how)."""
    row = compare(number, value)
    if run is None:
        return row
    differs = departure(number, conditions(number), run)
    if differs is None:
        return row
    return row.model_copy(update={"status": differs.status, "note": differs.note,
                                  "settings": differs.settings})


# --- the ledger -----------------------------------------------------------------------------


def ledger(metrics: RunMetrics, numbers: Sequence[PaperNumber] | None = None,
           run: RunConditions | None = None) -> list[Row]:
    """Every printed number beside this run's value, in the data file's order; with ``run``
    (the run's profile and stage states), each judged against the paper's conditions first."""
    return [judge(n, run_value(n, metrics), run) for n in (numbers or load_numbers())]


class Summary(BaseModel):
    """How many printed numbers the run reproduces, differs on or cannot compute, and how many
    it made under conditions other than the paper's."""

    model_config = ConfigDict(frozen=True)

    total: int
    equal: int
    differs: int
    not_computable: int
    tweaked: int = 0
    not_current: int = 0
    own_replies: int = 0
    settings: list[str] = Field(default_factory=list)
    """The tweaked settings, each once ("judges.subset = hard")."""

    def sentence(self) -> str:
        """The landing page's and the ledger page's line: a count of every status."""
        parts = [f"{self.equal} of {self.total} numbers the paper prints are reproduced exactly "
                 f"(at the paper's precision)", f"{self.differs} differ",
                 f"{self.not_computable} need data this run does not have"]
        if self.tweaked:
            parts.append(f"{self.tweaked} come from settings tweaked away from the paper's "
                         f"({'; '.join(self.settings)}), so they are not compared")
        if self.not_current:
            parts.append(f"{self.not_current} are not current (their chapter was run by hand, "
                         "failed or is behind an upstream change)")
        if self.own_replies:
            parts.append(f"{self.own_replies} come from replies this run generated and graded "
                         "itself, so the paper's values are not expected")
        return "; ".join(parts) + "."


def summary(rows: Sequence[Row]) -> Summary:
    """Counts of each status, and the settings tweaked."""
    count = {s: sum(r.status == s for r in rows) for s in STATUSES}
    settings = dict.fromkeys(x for r in rows if r.status == TWEAKED for x in r.settings)
    return Summary(total=len(rows), equal=count[EQUAL], differs=count[DIFFERS],
                   not_computable=count[NOT_COMPUTABLE], tweaked=count[TWEAKED],
                   not_current=count[NOT_CURRENT], own_replies=count[OWN_REPLIES],
                   settings=list(settings))
