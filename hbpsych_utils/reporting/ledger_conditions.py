"""What each printed number depends on, and how a run departs from it.

A value is only the paper's quantity under the paper's conditions (:class:`Conditions`, derived
by :func:`conditions` from the stage graph): the chapters its value comes from, the chapters
those read from, each one's mode and the profile keys they read, at the values of the paper's
run (the profile model's defaults). A run whose conditions differ says so first
(:func:`departure`): a chapter not current, a chapter that ran live on replies of its own, or
the settings tweaked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting.ledger_numbers import PaperNumber, stages_of
from hbpsych_utils.reporting.ledger_values import chapter

NOT_CURRENT: Final = "not_current"
OWN_REPLIES: Final = "own_replies"
TWEAKED: Final = "tweaked"
DepartureStatus = Literal["not_current", "own_replies", "tweaked"]
"""How a run's conditions for a number differ from the paper's."""

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

    status: DepartureStatus
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
