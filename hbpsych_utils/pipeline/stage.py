"""One notebook's output folder: metrics, tables and the artifacts it used.

Every stage writes under ``outputs/<profile>/<stage>/``: ``metrics.json`` (the stage's key
numbers, from its typed metrics model), its tables, ``stage.json`` (which external artifacts it
used, with their sha256), from which the run manifest is assembled, and ``build.json`` (who
made the outputs from what: :mod:`hbpsych_utils.pipeline.state`). Files are written atomically,
so an interrupted stage never leaves a half-written file behind. A stage reads an earlier
stage's file only through :meth:`Stage.upstream`, which refuses a file the stage graph
(:mod:`hbpsych_utils.pipeline.graph`) does not declare for it.

A stage's outputs are replaced only when its notebook succeeds. Under the runner, which sets
``HBPSYCH_STAGING`` for the kernel, the notebook's own stage (named like the notebook) writes
into ``outputs/<profile>/.staging/<stage>/`` and the runner swaps that folder into place after
papermill returns (:func:`publish_staged`) or, on failure, replaces the stage folder with a
failure record and keeps the partial outputs under ``.failed/`` (:func:`retire_stage`). A
notebook run by hand writes into ``outputs/<profile>/.hand/<stage>/`` (``write_dir``), swapped
into place when the chapter finishes; a hand run that fails leaves the runner's outputs as they
were. Earlier stages are always read from their final folders.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hbpsych_utils.core import paths, records, sources
from hbpsych_utils.core.writes import write_json, write_json_record, write_text
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import M, StageMetrics, parse
from hbpsych_utils.pipeline.state import FAILURE_RECORD

STAGING_ENV = "HBPSYCH_STAGING"
"""Set by the runner only, for the kernel: ``outputs/<profile>/.staging/<stage>``, where the
stage of the notebook it runs (named like the notebook) writes."""
STAGING_DIR = ".staging"
FAILED_DIR = ".failed"
HAND_DIR = ".hand"
"""Where a notebook run by hand stages its outputs until the chapter finishes."""


class UndeclaredInput(RuntimeError):
    """A stage read an earlier stage's file that the stage graph does not declare for it."""


class Stage:
    """The output folder of one notebook stage in one profile run."""

    def __init__(self, profile: str, name: str, outputs_root: str | Path,
                 write_dir: Path | None = None) -> None:
        self.profile = profile
        self.name = paths.plain_name(name, "stage name")
        paths.run_folder(Path(outputs_root).absolute(), profile)  # plain name, not the sources
        self.root = Path(outputs_root) / profile
        self.final_dir = self.root / name
        """Where the stage's outputs are read from once its notebook has succeeded."""
        staging = staging_dir(self.root, name)
        self.dir = staging if staging is not None else (write_dir or self.final_dir)
        """Where this stage writes: the staging folder under the runner, else ``write_dir``
        (a hand run's staging folder), else ``final_dir``; always inside the run folder."""
        paths.inside(self.dir, self.root, f"stage {name}: folder")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._record_path = self.dir / "stage.json"
        self._artifacts: dict[str, dict[str, Any]] = {}

    def fetch(self, artifact: str) -> Path:
        """``sources.fetch`` that also records the artifact and its hash for the manifest."""
        path = sources.fetch(artifact)
        self._artifacts[artifact] = sources.describe(artifact, path)
        self._save_record()
        return path

    def record_input(self, name: str, path: Path, **info: Any) -> None:
        """Record a non-registry input (a local corpus file, an earlier stage's output)."""
        self._artifacts[name] = {
            "name": name, "path": str(path), "sha256": sources.sha256_file(path), **info,
        }
        self._save_record()

    def path(self, filename: str) -> Path:
        """``filename`` in the stage's folder; a name that leads out of it (``../x``, an
        absolute path, a link to elsewhere) is :class:`~hbpsych_utils.core.paths.UnsafePath`."""
        return paths.inside(self.dir / filename, self.dir, f"stage {self.name}: file")

    def _check_declared(self, stage: str, filename: str) -> None:
        if self.name in graph.SPECS and not graph.spec(self.name).declares(stage, filename):
            raise UndeclaredInput(
                f"{self.name} read {stage}/{filename}, which the stage graph does not declare "
                f"as one of its inputs (hbpsych_utils.pipeline.graph.SPECS[{self.name!r}])")

    def upstream_optional(self, stage: str, filename: str) -> Path | None:
        """A file an earlier stage may have written (``None`` when it did not)."""
        self._check_declared(stage, filename)
        p = self.root / stage / filename
        return p if p.is_file() else None

    def upstream(self, stage: str, filename: str) -> Path:
        """A file an earlier stage of the same run wrote; a clear error when it is missing."""
        self._check_declared(stage, filename)
        p = self.root / stage / filename
        if not p.is_file() and (self.root / stage / FAILURE_RECORD).is_file():
            raise FileNotFoundError(
                f"{p} is missing: stage {stage!r} failed in the last run of profile "
                f"{self.profile!r} ({self.root / stage / FAILURE_RECORD}); fix it and run it "
                f"again before {self.name!r} (bash run_all.sh {self.profile})"
            )
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} is missing: stage {stage!r} must run before {self.name!r} in profile "
                f"{self.profile!r} (bash run_all.sh {self.profile})"
            )
        return p

    def upstream_metrics(self, stage: StageMetrics[M]) -> M:
        """The ``metrics.json`` an earlier stage of the same run wrote, as its model
        (``stage`` is its constant in :mod:`~hbpsych_utils.pipeline.metrics`; ``upstream``'s
        error when it has not run)."""
        path = self.upstream(stage.stage, graph.METRICS)
        return parse(stage, records.read_json(path), str(path))

    def write_metrics(self, metrics: dict[str, Any]) -> Path:
        return write_json(self.path("metrics.json"), metrics)

    def write_json(self, filename: str, data: Any) -> Path:
        return write_json(self.path(filename), data)

    def write_table(self, df: Any, filename: str) -> Path:
        """A pandas table as CSV (index kept only when it is named)."""
        p = self.path(filename)
        keep_index = any(n is not None for n in df.index.names)
        write_text(p, df.to_csv(index=keep_index, lineterminator="\n"))
        return p

    def _save_record(self) -> None:
        write_json(self._record_path, {"stage": self.name, "artifacts": self._artifacts})


def staging_dir(profile_root: Path, name: str) -> Path | None:
    """The staging folder the runner named for this kernel, if it is that of stage ``name`` of
    ``profile_root``. Any other stage (a notebook run by hand, or one that opens another
    stage's folder) writes in place, so a swap can only ever replace the running stage."""
    value = os.environ.get(STAGING_ENV)
    if not value:
        return None
    staging = Path(value)
    if staging.name != name or staging.parent.name != STAGING_DIR:
        return None
    return staging if staging.parent.parent.resolve() == Path(profile_root).resolve() else None


def _swap_in(new: Path, final: Path, aside: Path) -> None:
    """Replace ``final`` by ``new``: old folder renamed aside, new renamed in, old deleted."""
    if aside.exists():
        shutil.rmtree(aside)
    if final.exists():
        os.rename(final, aside)
    os.rename(new, final)
    shutil.rmtree(aside, ignore_errors=True)


def publish_staged(staging: Path, profile_root: Path) -> list[str]:
    """Move every stage folder written into ``staging`` into ``profile_root``, replacing the
    previous outputs of that stage (and the partial outputs of an earlier failed attempt);
    return the stage names. Nothing outside the stage folders (the LLM store, the manifest,
    executed notebooks) is touched."""
    names = sorted(staged_names(staging))
    for name in names:
        _swap_in(staging / name, profile_root / name, staging / f".replaced-{name}")
        shutil.rmtree(profile_root / FAILED_DIR / name, ignore_errors=True)
    failed = profile_root / FAILED_DIR
    if failed.is_dir() and not any(failed.iterdir()):
        failed.rmdir()
    return names


def publish_folder(folder: Path, profile_root: Path) -> None:
    """Swap one staged stage folder (a hand run's) into ``profile_root``, replacing that
    stage's previous outputs or failure record."""
    name = folder.name
    _swap_in(folder, profile_root / name, folder.parent / f".replaced-{name}")
    shutil.rmtree(profile_root / FAILED_DIR / name, ignore_errors=True)


def retire_stage(profile_root: Path, name: str, record: dict[str, Any],
                 staging: Path | None = None) -> Path:
    """After a failed or interrupted notebook: keep what it wrote for stage ``name`` under
    ``.failed/<name>/`` and replace ``<name>/`` (the previous run's outputs) with a folder that
    holds only ``failed.json`` (``record``, plus where the partial outputs are). Returns the
    record's path."""
    attempt = staging / name if staging is not None else None
    previous = (profile_root / name).exists()
    kept: Path | None = None
    if attempt is not None and attempt.is_dir():
        kept = profile_root / FAILED_DIR / name
        if kept.exists():
            shutil.rmtree(kept)
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.rename(attempt, kept)
    work = profile_root / STAGING_DIR / f".record-{name}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    write_json_record(work / FAILURE_RECORD, {
        "stage": name, **record,
        "partial_outputs": str(kept) if kept is not None else None,
        "previous_outputs": "removed" if previous else None,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
    })
    _swap_in(work, profile_root / name, profile_root / STAGING_DIR / f".replaced-{name}")
    return profile_root / name / FAILURE_RECORD


def staged_names(staging: Path) -> set[str]:
    """The stage folders a notebook wrote into ``staging`` so far."""
    if not staging.is_dir():
        return set()
    return {p.name for p in staging.iterdir() if p.is_dir() and not p.name.startswith(".")}


def clear_failure_record(profile_root: Path, name: str) -> None:
    """Remove ``<name>/`` when it holds only an earlier failure record (its notebook has now
    succeeded without writing that folder)."""
    folder = profile_root / name
    if folder.is_dir() and [p.name for p in folder.iterdir()] == [FAILURE_RECORD]:
        shutil.rmtree(folder)
