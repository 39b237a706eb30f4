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
"""

from __future__ import annotations

import json
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
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.pipeline.state import StageState

PAPER_NUMBERS = "paper_numbers.yaml"
"""The paper's printed numbers, in ``data/``."""

EQUAL, DIFFERS, NOT_COMPUTABLE = "equal", "differs", "not_computable"
NOT_CURRENT, OWN_REPLIES, TWEAKED = "not_current", "own_replies", "tweaked"
Comparison = Literal["equal", "differs", "not_computable"]
Status = Literal["equal", "differs", "not_computable", "not_current", "own_replies", "tweaked"]
STATUSES: tuple[str, ...] = (EQUAL, DIFFERS, NOT_COMPUTABLE, TWEAKED, NOT_CURRENT, OWN_REPLIES)
"""Every status, in the order the ledger counts them."""
STATUS_WORDS: dict[str, str] = {
    EQUAL: "equal", DIFFERS: "differs", NOT_COMPUTABLE: "not computable", TWEAKED: "tweaked",
    NOT_CURRENT: "not current", OWN_REPLIES: "own replies"}
"""How a status reads on the page."""


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


# --- the conditions of a value ------------------------------------------------------------------

PAPER_RUN = Profile(name="paper")
"""The paper's run as a profile: the profile model's defaults are the study's settings (the
``default`` profile changes none that a printed number depends on; a test keeps it so)."""

NOT_CONDITIONS = frozenset({
    *(k for r in graph.spec(graph.CORPUS).reads for k in r.keys),
    "screening.translation_model", "screening.translation_artifact",
    "subset.name", "subset.compare_with_release", "screening.compare_with_release",
    "harness_validation.published_source",
})
"""Keys the graph lists as read that no printed number depends on: the corpus's load options
(01's keys: the numbers here come from the released screen, ratings, logs and matrices, not
from the conversations a run holds; only live stages compute from those, and their mode is
itself a condition), the translations shown to reviewers beside the original, the subset files'
names, checks against the release that change no count, and a citation's text."""

PRIMARY: dict[str, Callable[[Any], Any]] = {
    "scores.subsets": lambda subsets: subsets[0] if subsets else None,
}
"""Keys of which a value depends on a part only: 08's numbers are its first (primary) subset's."""

_MODE_KEYS = frozenset({graph.EVALUATION_MODE} | {
    f"{s.section}.mode" for s in graph.SPECS.values() if s.modes and s.section})
"""Keys that set a stage's mode: the resolved modes are compared, not these."""


class Conditions(BaseModel):
    """What a printed number depends on: the chapters that give its value, the chapters those
    read from, each one's mode and the settings they read, as in the paper's run."""

    model_config = ConfigDict(frozen=True)

    stages: tuple[str, ...]
    """The chapters whose results give the value."""
    upstream: tuple[str, ...]
    """The chapters those read from (transitively, as the stage graph declares)."""
    modes: dict[str, str]
    """Each of those chapters with modes -> its mode in the paper's run."""
    keys: dict[str, Any]
    """Each setting they read that the number depends on -> the paper's run's value."""

    def sentence(self) -> str:
        """The conditions in words: "chapter 09 (paper mode); judges.subset = v1", "chapter 05,
        reading chapters 03 (replay mode), 04 (replay mode); recall.threshold = 0.05"."""
        def named(stages: Sequence[str]) -> str:
            listed = ", ".join(s[:2] + (f" ({self.modes[s]} mode)" if s in self.modes else "")
                               for s in stages)
            return ("chapters " if len(stages) > 1 else "chapter ") + listed

        where = named(self.stages) + (f", reading {named(self.upstream)}" if self.upstream
                                      else "")
        return "; ".join([where, *(setting(k, v) for k, v in self.keys.items())])


def stages_of(number: PaperNumber) -> tuple[str, ...]:
    """Every stage whose results give this number (its value's and its denominator's)."""
    found = [stage_of(number)] + ([number.per[0]] if number.per else [])
    return tuple(s for s in graph.STAGES if s in found)


def _upstream(stages: Sequence[str], *profiles: Profile) -> tuple[str, ...]:
    reached: set[str] = set()
    todo = list(stages)
    while todo:
        s = todo.pop()
        for profile in profiles:
            for u in graph.spec(s).upstream(profile):
                if u not in reached and u not in stages:
                    reached.add(u)
                    todo.append(u)
    return tuple(s for s in graph.STAGES if s in reached)


def _keys(stages: Sequence[str], profile: Profile, number: PaperNumber) -> dict[str, Any]:
    return {k: v for s in stages for k, v in graph.keys_read(profile, s).items()
            if k not in NOT_CONDITIONS and k not in _MODE_KEYS and k not in number.unaffected_by}


def conditions(number: PaperNumber, paper: Profile = PAPER_RUN) -> Conditions:
    """The paper's conditions of one number, derived from the stage graph: the keys its stages
    and their upstream stages read under the paper's modes (but :data:`NOT_CONDITIONS` and the
    entry's ``unaffected_by``), and those stages' modes."""
    stages = stages_of(number)
    upstream = _upstream(stages, paper)
    both = [s for s in graph.STAGES if s in stages or s in upstream]
    return Conditions(
        stages=stages, upstream=upstream,
        modes={s: m for s in both if (m := graph.stage_mode(paper, s)) is not None},
        keys=_keys(both, paper, number))


def setting(key: str, value: Any) -> str:
    """A setting as a ``--set`` writes it: "judges.subset = hard", "scores.subsets = [v1]"."""
    return f"{key} = {_yaml_value(value)}"


def _yaml_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return json.dumps(value, default=str)


@dataclass(frozen=True)
class RunConditions:
    """What a run was made with and where its stages stand: the profile it ran (its values,
    ``--set`` overrides applied, as the manifest records them) and each stage's state."""

    profile: Profile | None
    states: Mapping[str, StageState]


def _mode_setting(profile: Profile, stage: str) -> str:
    """The key that set ``stage``'s mode in ``profile`` (for "tweaked: screening.mode = live")."""
    spec = graph.spec(stage)
    if stage == graph.HARNESS and profile.harness_validation.mode is not None:
        return "harness_validation.mode"
    if graph.EVALUATION_MODE in {k for r in spec.reads for k in r.keys}:
        return graph.EVALUATION_MODE
    return f"{spec.section}.mode"


def _evaluates(stage: str) -> bool:
    """Whether a stage is one of the evaluation's (its mode follows ``evaluation_mode``)."""
    return any(graph.EVALUATION_MODE in r.keys for r in graph.spec(stage).reads)


def _value(profile: Profile, key: str) -> Any:
    value = graph.value_at(profile, key)
    return PRIMARY[key](value) if key in PRIMARY else value


@dataclass(frozen=True)
class Departure:
    """How a run's conditions for a number differ from the paper's."""

    status: Status
    note: str
    settings: tuple[str, ...] = ()


def departure(number: PaperNumber, cond: Conditions, run: RunConditions) -> Departure | None:
    """How this run's conditions for one number differ from the paper's, or ``None`` when they
    are the paper's: a chapter not current first, then a chapter that ran live on its own
    replies, then the settings tweaked."""
    for s in cond.stages:
        st = run.states.get(s)
        if st is not None and st.state in ("not_current", "failed"):
            return Departure(NOT_CURRENT, f"{chapter(s)}: {st.reason}")
    profile = run.profile
    if profile is None:
        return None
    upstream = _upstream(cond.stages, PAPER_RUN, profile)
    stages = (*cond.stages, *upstream)  # its own chapters first, then what they read
    for s in stages:
        if _evaluates(s) and graph.stage_mode(profile, s) == graph.LIVE:
            return Departure(OWN_REPLIES, f"{chapter(s)} ran live, on replies this run "
                                          "generated and graded")
    tweaks = []
    for s in stages:
        mode = graph.stage_mode(profile, s)
        if mode != graph.stage_mode(PAPER_RUN, s):
            tweaks.append(setting(_mode_setting(profile, s), mode))
    keys = {**_keys(stages, PAPER_RUN, number), **_keys(stages, profile, number)}
    tweaks += [setting(k, graph.value_at(profile, k)) for k in keys
               if _value(profile, k) != _value(PAPER_RUN, k)]
    tweaks = list(dict.fromkeys(tweaks))
    return Departure(TWEAKED, "; ".join(tweaks), tuple(tweaks)) if tweaks else None


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


def ledger(metrics: Metrics, numbers: Sequence[PaperNumber] | None = None,
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
