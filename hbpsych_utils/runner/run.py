"""Run a profile: plan from the stage graph, execute what is not current, record, build the book.

Before anything runs, the profile is loaded and checked (:mod:`.checks`): a bad value, a bad
reference or a ``--set`` that no stage reads stops the run with exit 2. The plan then compares
every stage's build record with the inputs the profile implies now and with the files it
wrote (:mod:`hbpsych_utils.pipeline.state`): a stage runs when it never ran, failed, was written
outside the runner, a file it wrote (its executed notebook included) is no longer what it
wrote, its record cannot say (an older version's), or any of its inputs changed (its
parameters, notebook, the package code, an artifact or an upstream stage); the others are
reported up to date. ``force`` runs every stage; ``only`` runs the named stages and whichever
of their dependents are then not current, and refuses when an upstream of a named stage is not
current (it would read stale inputs); both run the named stages and all their dependents,
current or not (never the rest of the profile) (:mod:`.plan`).

The notebooks run up to ``jobs`` at a time, each as soon as the notebooks upstream of it in the
stage graph have succeeded (:mod:`.schedule`). Each runs in this process with papermill
(:mod:`.execute`), writing into a staging folder of its own that is swapped into place with its
``build.json`` (the sha256 of what it wrote and of the executed notebook) when the notebook
succeeds; a failed or interrupted notebook leaves its stage folder holding only
``failed.json``. A failure stops the notebooks downstream of it and nothing else. The manifest,
rewritten after each notebook (by one thread, one notebook at a time: :mod:`.record`), lists
every stage of the graph with its state; the book is built once, after the last notebook, and
after a failure too, so it marks what is not current; a folder it refuses (a stage's file that
differs from its record, left by ``only``) is one line, and the run is not ok. A damaged or
empty LLM store in the run folder stops the run before any notebook (the manifest says why).
Ctrl-C at any point, from loading the profile to the book, ends it with
:class:`RunInterrupted` (:class:`~hbpsych_utils.runner.execute.RunWatch`), naming every
notebook it stopped.

This module is what the package's ``runner`` names; the run itself is
:mod:`.orchestrate`'s, imported when a run starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hbpsych_utils.runner.result import RunInterrupted, RunResult

__all__ = ["RunInterrupted", "RunResult", "run_profile"]


def run_profile(
    profile_name: str,
    *,
    outputs_root: Path | None = None,
    only: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    force: bool = False,
    jobs: int | None = None,
    echo: Callable[[str], None] = print,
    command: str | None = None,
) -> RunResult:
    """Run the stages of ``profile_name`` that are not current (see the module doc).

    ``overrides`` (dotted key -> value, ``config.parse_overrides``) tweak the profile's values;
    ``jobs`` is how many notebooks may run at once (``None``: one per core of the machine; 1
    runs them one after another in the plan's order); ``command`` is how the run was started
    (recorded for a second run to name, and said again to resume after Ctrl-C). A bad profile,
    override or ``only`` raises ``config.ProfileError`` before anything is written; another run
    into the same outputs folder raises ``runlock.RunLocked``; an outputs root or run folder in
    the project's source tree raises ``paths.UnsafePath`` (both before anything is written, as a
    bad profile name's ``config.ProfileError``); a damaged LLM store in the run folder raises
    ``llm.store.StoreError`` before any notebook, once the manifest records it (``error``);
    Ctrl-C raises :class:`RunInterrupted` once the manifest records the notebooks it stopped."""
    # pydantic, the profile's readers and papermill load here, when a run starts: the command
    # line answers "already running" (runner.cli.lock_refusal) without them.
    from hbpsych_utils.runner import orchestrate

    return orchestrate.run_profile(profile_name, outputs_root=outputs_root, only=only,
                                   overrides=overrides or {}, force=force, jobs=jobs, echo=echo,
                                   command=command)
