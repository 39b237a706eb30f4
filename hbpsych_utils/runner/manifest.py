"""The run manifest: what a profile run used and produced, and never a secret (it is written
scrubbed of every API key set in the environment, :mod:`hbpsych_utils.core.secrets`).

``outputs/<profile>/manifest.json`` records the profile (the values the run used and the
``--set`` overrides among them), package version, git commit, the installed versions of the
package's dependencies, the notebooks run (status ``ok``, ``failed`` or ``interrupted``,
seconds, the error) and every artifact any stage used with its sha256. It is rewritten after
each notebook, so an interrupted run still says how far it got. Artifacts come from the
``stage.json`` of each stage folder; the folder of a stage that failed holds only its failure
record, so the manifest never names the inputs of a previous run's outputs as this run's.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from hbpsych_utils import __version__
from hbpsych_utils.core import paths, records
from hbpsych_utils.core.writes import write_json
from hbpsych_utils.pipeline import graph, metrics


def git_commit(root: Path | None = None) -> dict[str, Any]:
    root = root or paths.project_root()
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root, capture_output=True, text=True, check=True,
            ).stdout.strip()
        )
        return {"commit": sha, "dirty": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


@cache
def installed_packages(distribution: str = "hbpsych_utils") -> dict[str, str | None]:
    """Python's version and the installed version of ``distribution`` and of every package it
    requires, ``[dev]`` extra included (``None`` for one not installed here). Read once per
    process: a run does not change its environment."""
    packages: dict[str, str | None] = {"python": platform.python_version()}
    try:
        packages[distribution] = metadata.version(distribution)
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return packages
    for name in sorted({Requirement(r).name for r in requirements}, key=str.lower):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    return packages


def collect_artifacts(profile_dir: Path, unreadable: list[str] | None = None
                      ) -> dict[str, Any]:
    """Merge the ``stage.json`` records of every stage folder; one that cannot be read (a
    damaged file, which the runner rebuilds: it differs from its build record) is skipped and
    its error appended to ``unreadable``."""
    merged: dict[str, Any] = {}
    for rec in sorted(profile_dir.glob("*/stage.json")):
        try:
            data = records.read_json(rec)
        except ValueError as exc:
            if unreadable is not None:
                unreadable.append(str(exc))
            continue
        if not isinstance(data, dict):
            if unreadable is not None:
                unreadable.append(f"{rec}: not a JSON object")
            continue
        for name, info in (data.get("artifacts") or {}).items():
            entry = merged.setdefault(name, {**info, "used_by": []})
            entry["used_by"].append(data.get("stage", rec.parent.name))
    return merged


def _metrics(profile_dir: Path, stage: str, unreadable: list[str]) -> Any:
    """A stage's typed metrics, or ``None`` when it has none (or a failure record instead), or
    one that cannot be read (its error appended to ``unreadable``: a damaged file, which the
    runner rebuilds, as it differs from the stage's build record)."""
    if not (profile_dir / stage / graph.METRICS).is_file():
        return None
    try:
        return metrics.read(profile_dir, stage)
    except metrics.MetricsError as exc:
        unreadable.append(str(exc))
        return None


def collect_run_facts(profile_dir: Path, unreadable: list[str] | None = None
                      ) -> dict[str, Any]:
    """What a manifest must say about a run's model calls and subsets, from the stages' files:
    subset hashes, models and decoding parameters sent, grader-template hash, error counts and
    the spend recorded in the run's LLM store (none of which can hold a key), or why the store
    cannot be read; ``unreadable`` (given, or made) lists the stage files that could not be
    read, after those already in it."""
    facts: dict[str, Any] = {}
    unreadable = [] if unreadable is None else unreadable
    subset = _metrics(profile_dir, graph.SUBSET, unreadable)
    if subset is not None:
        facts["subset_sha256"] = subset.hashes()
    gen = _metrics(profile_dir, graph.GENERATION, unreadable)
    if isinstance(gen, metrics.GenerationLiveMetrics):
        facts["generation"] = gen.model_dump(mode="json", include={
            "candidates", "n_conversations", "decoding_sent", "n_refused", "n_failed"})
    grade = _metrics(profile_dir, graph.GRADING, unreadable)
    if isinstance(grade, metrics.GradingLiveMetrics):
        facts["grading"] = grade.model_dump(mode="json", include={
            "judges", "temperature", "grader_template_sha256", "n_recovered", "n_reasked",
            "n_excluded", "census"})
    elif grade is not None:
        facts["grader_template_sha256"] = grade.grader_template_sha256
    from hbpsych_utils.llm.store import STORE_NAME, Store, StoreError

    store = profile_dir / STORE_NAME
    if store.is_file():
        try:
            with Store(store) as db:
                facts["spend"] = db.spend()
        except StoreError as exc:  # damaged: a run says so and stops before any notebook
            facts["store_error"] = str(exc)
    if unreadable:
        facts["unreadable"] = unreadable
    return facts


def write_manifest(
    profile_dir: Path,
    profile: str,
    notebooks: list[dict[str, Any]],
    extra: dict | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    profile_values: Mapping[str, Any] | None = None,
    stages: list[dict[str, Any]] | None = None,
    command: str | None = None,
) -> Path:
    """Write ``manifest.json``; ``overrides`` are the ``--set`` keys with the values the run
    used, ``profile_values`` the whole validated profile (overrides applied), ``notebooks``
    this invocation's notebooks, ``stages`` every stage of the graph with its state
    (:func:`hbpsych_utils.pipeline.state.stage_states`), ``command`` how the run was started.
    A stage file it cannot read (a damaged one, which the runner rebuilds: it differs from its
    build record) is named under ``unreadable`` instead of stopping the run."""
    unreadable: list[str] = []
    manifest = {
        "profile": profile,
        "command": command,
        "overrides": dict(overrides or {}),
        "profile_values": dict(profile_values or {}),
        "package_version": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "packages": dict(installed_packages()),
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mirror": bool(os.environ.get("HBPSYCH_MIRROR")),
        "notebooks": notebooks,
        "stages": list(stages or []),
        "artifacts": collect_artifacts(profile_dir, unreadable),
        **collect_run_facts(profile_dir, unreadable),
        **(extra or {}),
    }
    return write_json(profile_dir / "manifest.json", manifest)  # scrubbed of every API key
