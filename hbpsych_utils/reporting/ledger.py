"""The reproduction ledger: every number the study paper prints that the release determines,
beside this run's value, with a status.

The paper's side is data (``data/paper_numbers.yaml``, its values as printed); this run's side
comes from the stages' typed metrics only, never from a second copy. A printed value sets the
precision of the comparison: ``0.157`` compares the run's value rounded to three decimals,
``7.6%`` its percentage to one decimal, ``4,359`` the integer exactly (written with the paper's
thousands separator), ``claude-haiku-4.5`` the model the paper names so (``study.PAPER_NAMES``).
Three statuses:

- ``equal``: the run's value, rounded as the paper prints it, is the printed value;
- ``differs``: it is not (the row says by how much, in the paper's unit);
- ``not_computable``: this run has not what the number needs, and the row says why (a stage
  that did not run; an interval the released matrices cannot give, having no per-conversation
  grades; a paired comparison this run did not make).

The ledger judges agreement only; whether a chapter is current is the landing page's business.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hbpsych_utils import study
from hbpsych_utils.construction.tally import NO_CATEGORY_MAJORITY
from hbpsych_utils.core import paths, records, yaml_loader
from hbpsych_utils.pipeline import graph

PAPER_NUMBERS = "paper_numbers.yaml"
"""The paper's printed numbers, in ``data/``."""

EQUAL, DIFFERS, NOT_COMPUTABLE = "equal", "differs", "not_computable"
Status = Literal["equal", "differs", "not_computable"]


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
        printed(self.paper)
        return self


class Row(BaseModel):
    """One line of the ledger."""

    model_config = ConfigDict(frozen=True)

    number: PaperNumber
    run: str
    """This run's value at the paper's precision ("" when not computable)."""
    status: Status
    note: str = ""
    """How much it differs, or why it cannot be computed."""


@dataclass(frozen=True)
class Missing:
    """A value this run cannot give, and why (one clause, e.g. "08_scores did not run")."""

    reason: str


Value = float | int | str | Missing


# --- printed values -----------------------------------------------------------------------------


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
    decimals = -number.as_tuple().exponent if "." in body else 0
    return Printed(text, number, int(decimals), percent, body.startswith(("+", "-")), grouped)


def shown(value: float | int, p: Printed) -> str:
    """A run's value written as the paper writes ``p``: same decimals, sign, separators, unit."""
    x = 100 * value if p.percent else value
    sign = "+" if p.signed else ""
    group = "," if p.grouped else ""
    return f"{x:{sign}{group}.{p.decimals}f}" + ("%" if p.percent else "")


def compare(number: PaperNumber, value: Value) -> Row:
    """The row for one printed number and the run's value."""
    if isinstance(value, Missing):
        return Row(number=number, run="", status=NOT_COMPUTABLE, note=value.reason)
    p = printed(number.paper)
    if p.number is None or isinstance(value, str):
        run = study.paper_name(str(value))
        status = EQUAL if run == number.paper else DIFFERS
        return Row(number=number, run=run, status=status)
    if isinstance(value, bool) or not math.isfinite(value):
        return Row(number=number, run=str(value), status=NOT_COMPUTABLE,
                   note="the run's value is not a number")
    run = shown(value, p)
    if Decimal(run.removesuffix("%").replace(",", "")) == p.number:
        return Row(number=number, run=run, status=EQUAL)
    delta = Decimal(str(100 * value if p.percent else value)) - p.number
    unit = " percentage points" if p.percent else ""
    digits = p.decimals + 1 if p.decimals else 0
    group = "," if p.grouped else ""
    return Row(number=number, run=run, status=DIFFERS,
               note=f"by {float(delta):+{group}.{digits}f}{unit}")


# --- the run's values ---------------------------------------------------------------------------

Metrics = Mapping[str, Any]


def chapter(stage: str) -> str:
    """A stage as a reader knows it: "chapter 08 (Scores and the leaderboard)"."""
    return f"chapter {stage[:2]} ({graph.spec(stage).title})"


def _stage(metrics: Metrics, stage: str) -> Any:
    m = metrics.get(stage)
    if m is None:
        return Missing(f"{chapter(stage)} did not run")
    return m


def at(metrics: Metrics, path: Sequence[str]) -> Value:
    """The value at ``[stage, field, key, ...]`` of the stages' metrics, or why it is missing."""
    node = _stage(metrics, path[0])
    if isinstance(node, Missing):
        return node
    for part in path[1:]:
        node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
        if node is None:
            return Missing(f"{chapter(path[0])} reports no such value in this run")
    if isinstance(node, int | float | str):
        return node
    return Missing(f"{chapter(path[0])} reports no single value for it")


def _per_judge_only(scores: Any) -> Missing:
    return Missing("needs per-conversation grades; the released matrices hold one mean per "
                   "candidate and judge" if scores.point_estimates_only
                   else "this run's paired comparisons do not include this pair")


def _ranked(metrics: Metrics, rank: str) -> Value:
    scores = _stage(metrics, graph.SCORES)
    if isinstance(scores, Missing):
        return scores
    i = int(rank) - 1
    return scores.ranking[i] if i < len(scores.ranking) else Missing(
        f"this run ranks {len(scores.ranking)} candidates")


def _rank_range(metrics: Metrics, first: str, last: str, end: str) -> Value:
    scores = _stage(metrics, graph.SCORES)
    if isinstance(scores, Missing):
        return scores
    models = scores.ranking[int(first) - 1:int(last)]
    if len(models) < int(last) - int(first) + 1:
        return Missing(f"this run ranks {len(scores.ranking)} candidates")
    values = [scores.panel_mean[m] for m in models]
    return min(values) if end == "low" else max(values)


def _top_under_judge(metrics: Metrics, judge: str) -> Value:
    scores = _stage(metrics, graph.SCORES)
    if isinstance(scores, Missing):
        return scores
    means = scores.per_judge.get(judge)
    if not means:
        return Missing(f"this run has no judge {judge}")
    return max(means, key=lambda m: means[m])


def _pair_rows(scores: Any) -> list[Any]:
    return list(scores.paired_differences or [])


def _separated_pairs(metrics: Metrics, how: str) -> Value:
    scores = _stage(metrics, graph.SCORES)
    if isinstance(scores, Missing):
        return scores
    rows = _pair_rows(scores)
    if not rows:
        return _per_judge_only(scores)
    if how == "holm":
        return sum(r.p_holm < study.ALPHA for r in rows)
    return sum(r.ci_low > 0 or r.ci_high < 0 for r in rows)


def _pair(scores: Any, a: str, b: str) -> tuple[Any, float] | None:
    """The paired row of ``a`` and ``b`` and the sign that turns it into ``a − b``."""
    for r in _pair_rows(scores):
        if (r.a, r.b) == (a, b):
            return r, 1.0
        if (r.a, r.b) == (b, a):
            return r, -1.0
    return None


def _difference(metrics: Metrics, a: str, b: str) -> Value:
    """``a − b``: the paired estimate where the run made one, else the panel means' difference
    (the same number when both are means over the same conversations)."""
    scores = _stage(metrics, graph.SCORES)
    if isinstance(scores, Missing):
        return scores
    found = _pair(scores, a, b)
    if found is not None:
        return found[1] * found[0].difference
    if a not in scores.panel_mean or b not in scores.panel_mean:
        return Missing(f"this run did not score both {a} and {b}")
    return scores.panel_mean[a] - scores.panel_mean[b]


def _difference_interval(metrics: Metrics, a: str, b: str, end: str) -> Value:
    scores = _stage(metrics, graph.SCORES)
    if isinstance(scores, Missing):
        return scores
    found = _pair(scores, a, b)
    if found is None:
        return _per_judge_only(scores)
    r, sign = found
    ends = (sign * r.ci_low, sign * r.ci_high)
    return min(ends) if end == "low" else max(ends)


def _best_pair_ac1(metrics: Metrics, stage: str) -> Value:
    m = _stage(metrics, stage)
    if isinstance(m, Missing):
        return m
    pairs = [v for v in (m.ac1_pairs or {}).values() if v is not None and math.isfinite(v)]
    if not pairs:
        return Missing(f"{chapter(stage)} has no pairwise agreement in this run")
    return max(pairs)


def _categories_at_most(metrics: Metrics, limit: str) -> Value:
    m = _stage(metrics, graph.SUBSET)
    if isinstance(m, Missing):
        return m
    return sum(1 for cat, n in m.category_counts.items()
               if cat != NO_CATEGORY_MAJORITY and n <= int(limit))


def _kendall_tau(metrics: Metrics, a: str, b: str) -> Value:
    m = _stage(metrics, graph.JUDGES)
    if isinstance(m, Missing):
        return m
    for key in (f"{a}|{b}", f"{b}|{a}"):
        if m.kendall_tau.get(key) is not None:
            return m.kendall_tau[key]
    return Missing(f"this run has no τ for {a} and {b}")


def _self_preference_interval(metrics: Metrics, judge: str, end: str) -> Value:
    m = _stage(metrics, graph.JUDGES)
    if isinstance(m, Missing):
        return m
    for r in m.intervals or []:
        if r.stat == "self_preference_corrected" and r.judge == judge:
            v = r.low if end == "low" else r.high
            return v if v is not None else Missing("the interval is undefined in this run")
    return Missing("needs per-conversation grades; the released matrices hold one mean per "
                   "candidate and judge" if m.mode == "paper"
                   else f"this run has no interval for {judge}")


def _refusing_models(metrics: Metrics) -> Value:
    m = _stage(metrics, graph.REFUSALS)
    if isinstance(m, Missing):
        return m
    return sum(1 for n in m.refusals.values() if n > 0)


def _mean_without_refusals(metrics: Metrics, model: str) -> Value:
    m = _stage(metrics, graph.REFUSALS)
    if isinstance(m, Missing):
        return m
    for r in m.sensitivity or []:
        if r.candidate == model and r.mean_excluded is not None:
            return r.mean_excluded
    return Missing("needs per-conversation grades; the released matrices hold one mean per "
                   "candidate and judge" if m.mode == "paper"
                   else f"this run has no refusal sensitivity for {model}")


MEASURES: dict[str, Callable[..., Value]] = {
    "ranked": _ranked,
    "rank_range": _rank_range,
    "top_under_judge": _top_under_judge,
    "separated_pairs": _separated_pairs,
    "difference": _difference,
    "difference_interval": _difference_interval,
    "best_pair_ac1": _best_pair_ac1,
    "categories_at_most": _categories_at_most,
    "kendall_tau": _kendall_tau,
    "self_preference_interval": _self_preference_interval,
    "refusing_models": _refusing_models,
    "mean_without_refusals": _mean_without_refusals,
}
"""Named measures for numbers that are not one metrics field (``measure:`` in the data)."""


MEASURE_STAGES: dict[str, str] = {
    "ranked": graph.SCORES, "rank_range": graph.SCORES, "top_under_judge": graph.SCORES,
    "separated_pairs": graph.SCORES, "difference": graph.SCORES,
    "difference_interval": graph.SCORES, "categories_at_most": graph.SUBSET,
    "kendall_tau": graph.JUDGES, "self_preference_interval": graph.JUDGES,
    "refusing_models": graph.REFUSALS, "mean_without_refusals": graph.REFUSALS,
}
"""The stage each named measure reads (``best_pair_ac1`` names its stage in its argument)."""


def stage_of(number: PaperNumber) -> str:
    """The stage whose results give this run's value (what the ledger's row links to)."""
    if number.value is not None:
        return number.value[0]
    assert number.measure is not None
    return MEASURE_STAGES.get(number.measure) or number.args[0]


def run_value(number: PaperNumber, metrics: Metrics) -> Value:
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


# --- the ledger ---------------------------------------------------------------------------------


def load_numbers(path: Path | None = None) -> list[PaperNumber]:
    """The paper's printed numbers (``data/paper_numbers.yaml``), validated, ids unique."""
    path = path or paths.project_root() / "data" / PAPER_NUMBERS
    try:
        data = yaml_loader.load_file(path)
    except yaml_loader.YAMLFileError as exc:
        raise LedgerError(str(exc)) from exc
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read the paper's numbers ({exc.strerror})") from exc
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


def ledger(metrics: Metrics, numbers: Sequence[PaperNumber] | None = None) -> list[Row]:
    """Every printed number beside this run's value, in the data file's order."""
    return [compare(n, run_value(n, metrics)) for n in (numbers or load_numbers())]


class Summary(BaseModel):
    """How many printed numbers the run reproduces, differs on, or cannot compute."""

    model_config = ConfigDict(frozen=True)

    total: int
    equal: int
    differs: int
    not_computable: int

    def sentence(self) -> str:
        """The landing page's line."""
        return (f"{self.equal} of {self.total} numbers the paper prints are reproduced exactly "
                f"(at the paper's precision); {self.differs} differ; {self.not_computable} "
                f"need data this run does not have.")


def summary(rows: Sequence[Row]) -> Summary:
    """Counts of each status."""
    return Summary(total=len(rows), equal=sum(r.status == EQUAL for r in rows),
                   differs=sum(r.status == DIFFERS for r in rows),
                   not_computable=sum(r.status == NOT_COMPUTABLE for r in rows))

