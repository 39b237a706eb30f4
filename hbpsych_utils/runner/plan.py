"""What a run runs, and why: each stage's own state against its build record, with ``--only``
and ``--force`` applied.

A stage runs when it never ran, failed, was written outside the runner, a file it wrote (its
executed notebook included) is no longer what it wrote, its record cannot say (an older
version's), or any of its inputs changed (its parameters, notebook, the package code, an
artifact or an upstream stage); the others are reported up to date. ``force`` runs every stage;
``only`` runs the named stages and whichever of their dependents are then not current, and
refuses when an upstream of a named stage is not current (it would read stale inputs); both run
the named stages and all their dependents, current or not (never the rest of the profile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hbpsych_utils.core.config import ProfileError
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline.profiles import Profile


@dataclass(frozen=True)
class Step:
    """One stage of the plan: whether it runs, and why; ``current`` whether its outputs are
    already current (a stage neither run nor current is left as it is, and says why)."""

    stage: str
    run: bool
    reason: str
    current: bool = False


@dataclass(frozen=True)
class Selection:
    """What the command line selects: the stages named by ``--only`` (none: every stage of
    the profile), the stages downstream of them, and ``--force``."""

    named: frozenset[str]
    reach: frozenset[str]
    force: bool

    def decide(self, name: str, current: bool, why: str) -> tuple[bool, str]:
        """Whether stage ``name`` runs, by its own state (its upstream aside), and why."""
        if name in self.named:
            return True, "named by --only" + ("" if current else f": {why}")
        if self.named and name not in self.reach:
            return False, ("up to date" if current
                           else f"not current ({why}); not selected by --only")
        if self.force:  # every stage, or with --only every dependent of the named ones
            return True, "--force"
        return not current, why or "up to date"


def plan(profile: Profile, run_dir: Path, expected: Mapping[str, state.Inputs], *,
         only: list[str] | None = None, force: bool = False) -> list[Step]:
    """What runs and why, for each of the profile's stages in order (see the module doc)."""
    named = _named(profile, list(expected), only)
    selection = Selection(named, frozenset(graph.dependents(named, profile) if named else ()),
                          force)
    steps: list[Step] = []
    running: set[str] = set()
    for name in expected:
        current, why = state.self_state(run_dir, name, expected[name])
        run, reason = selection.decide(name, current, why)
        if run and named:
            stale = _stale_upstream(profile, run_dir, expected, name, running)
            if stale:
                run, reason = False, _left_as_is(name, why, stale, named)
        if run:
            running.add(name)
        steps.append(Step(name, run, reason, current))
    return steps


def _named(profile: Profile, stages: list[str], only: list[str] | None) -> frozenset[str]:
    """The stages ``--only`` names (none: no ``--only``); one that is not the profile's is a
    ``ProfileError``."""
    unknown = [s for s in only or () if s not in stages]
    if unknown:
        raise ProfileError(
            f"--only {' '.join(unknown)}: not a notebook of profile {profile.name!r} "
            f"(expected some of: {', '.join(stages) or 'none'})")
    return frozenset(only or ())


def _left_as_is(name: str, why: str, stale: list[str], named: frozenset[str]) -> str:
    """Why a dependent selected by ``--only`` is left as it is: an upstream of it that is not
    current is not selected. For a stage ``--only`` names, that is a ``ProfileError``."""
    if name in named:
        raise ProfileError(
            f"--only {name}: its upstream {_names(stale)} not current, so {name} would read "
            f"stale inputs; add {' '.join(stale)} to --only, or run without --only")
    return (f"not current ({why}); left as is: its upstream {_names(stale)} not current and "
            "not selected by --only")


def _stale_upstream(profile: Profile, run_dir: Path, expected: Mapping[str, state.Inputs],
                    name: str, running: set[str]) -> list[str]:
    """The upstream stages of ``name`` that are not current and that this run does not run
    before it."""
    return [u for u in graph.spec(name).upstream(profile) if u in expected
            and u not in running and not state.self_state(run_dir, u, expected[u])[0]]


def _names(stages: list[str]) -> str:
    """``a is`` / ``a, b are`` (the stages named in a sentence, with its verb)."""
    return f"{', '.join(stages)} {'is' if len(stages) == 1 else 'are'}"
