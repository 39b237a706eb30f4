"""What a run records as it goes: each finished step's outputs swapped into place with their
build record (or retired behind a failure record), the notebooks' entries, the terminal lines,
and the manifest rewritten after each step.

Everything here runs in the runner's main thread, one step at a time, however many notebooks
run at once: the manifest, the build and failure records and the run folder's stage folders
are never written by two threads.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hbpsych_utils.core.writes import take_replaced
from hbpsych_utils.pipeline import graph, stage, state
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.runner import manifest
from hbpsych_utils.runner.step import Outcome


@dataclass
class Recorder:
    """The manifest of one run and the lines that go with it (``echo``, already scrubbed).

    ``order`` is the plan's order of the stages: the manifest lists this invocation's
    notebooks in it, whichever finished first."""

    profile: Profile
    out: Path
    command: str
    applied: dict[str, Any]
    """The ``--set`` overrides with the values the run used."""
    echo: Callable[[str], None]
    order: list[str]
    notebooks: list[dict[str, Any]] = field(default_factory=list)
    """This invocation's notebooks: status ``ok``, ``failed``, ``interrupted`` or
    ``not_run`` (an upstream failed), seconds."""
    scrubbed: list[dict[str, Any]] = field(default_factory=list)
    """Records this invocation wrote with keys replaced."""
    replies: list[dict[str, Any]] = field(default_factory=list)
    """The store's scrubbed entries as last said."""

    @property
    def staging(self) -> Path:
        return self.out / stage.STAGING_DIR

    def write(self, **extra: Any) -> None:
        """Rewrite ``manifest.json`` (every stage of the graph with its state as it is now)."""
        stages = [s.model_dump() for s in state.stage_states(self.out, self.profile)]
        manifest.write_manifest(self.out, self.profile.name, self.notebooks, extra,
                                overrides=self.applied,
                                profile_values=self.profile.model_dump(mode="json"),
                                stages=stages, command=self.command, scrubbed=self.scrubbed)

    def add(self, entry: dict[str, Any]) -> None:
        """A notebook's entry, in the plan's order."""
        rank = {name: i for i, name in enumerate(self.order)}
        self.notebooks.append(entry)
        self.notebooks.sort(key=lambda e: rank.get(e["notebook"], len(rank)))

    def say_scrubbed(self) -> None:
        """Say (and keep for the manifest) where keys were replaced since the last call: in
        records this process wrote, and in replies a stage stored."""
        for path, counts in take_replaced():
            self.scrubbed.append(manifest.record_entry(self.out, path, counts))
            self.echo(f"  {manifest.describe_entry(self.scrubbed[-1])}")
        now = manifest.store_entries(self.out)
        for entry in manifest.new_store_entries(self.replies, now):
            self.echo(f"  {manifest.describe_entry(entry)}")
        self.replies = now

    def succeeded(self, outcome: Outcome, inputs: state.Inputs) -> None:
        """A notebook that succeeded: its staged folder, with its build record, replaces the
        stage's previous outputs."""
        job = outcome.job
        folder = self.staging / job.stage
        folder.mkdir(parents=True, exist_ok=True)
        state.write_build(folder, job.stage, by=state.RUNNER, inputs=inputs, executed=job.target)
        stage.publish_folder(folder, self.out)
        failed = self.out / stage.FAILED_DIR
        if failed.is_dir() and not any(failed.iterdir()):
            failed.rmdir()
        self.add({"notebook": job.stage, "executed": str(job.target), "status": "ok",
                  "seconds": outcome.seconds})
        self.echo(f"{job.label} done in {outcome.seconds:.1f}s")
        self.finish()

    def stopped(self, outcome: Outcome) -> tuple[bool, bool]:
        """A notebook that started and did not succeed: its stage folder keeps no stale output,
        only a failure record; what it wrote is kept under ``.failed/``. Returns whether
        previous outputs were removed and whether partial ones were kept."""
        job = outcome.job
        previous = (self.out / job.stage).exists()
        partial = (self.staging / job.stage).is_dir()
        entry = {"notebook": job.stage, "executed": str(job.target), "status": outcome.status,
                 "seconds": outcome.seconds, "error": outcome.error}
        info = {"notebook": job.stage, "status": outcome.status, "error": outcome.error,
                "executed": str(job.target)}
        record = stage.retire_stage(self.out, job.stage, info, self.staging)
        entry["failure_record"] = [str(record)]
        self.add(entry)
        self.finish()
        return previous, partial

    def failed(self, outcome: Outcome) -> None:
        """A notebook that failed: recorded, and said with what is not current behind it."""
        job = outcome.job
        previous, partial = self.stopped(outcome)
        lines = [outcome.message]
        if outcome.cell is not None:
            lines.append(f"  executed copy with the traceback: {job.target}")
        if previous:
            lines.append(f"  previous outputs of {job.stage} removed (each folder holds only "
                         f"{stage.FAILURE_RECORD})")
        if partial:
            lines.append(f"  what this attempt wrote is kept in "
                         f"{self.out / stage.FAILED_DIR / job.stage}")
        behind = graph.dependents([job.stage], self.profile)
        if behind:
            lines.append(f"  not current until it succeeds: {', '.join(behind)}")
        self.echo("\n".join(lines))

    def not_started(self, name: str, status: str, **extra: Any) -> None:
        """A notebook of the plan that did not start: Ctrl-C came first (``interrupted``), or
        an upstream of it failed (``not_run``, with the ``reason``)."""
        self.add({"notebook": name, "status": status, "seconds": 0.0, "started": False,
                  **extra})

    def finish(self) -> None:
        """After a step: where keys were replaced, and the manifest."""
        self.say_scrubbed()
        self.write()


def clear_staging(out: Path) -> None:
    """Remove the run folder's staging folder (what an earlier run left, or this run's once
    every step is recorded)."""
    shutil.rmtree(out / stage.STAGING_DIR, ignore_errors=True)
