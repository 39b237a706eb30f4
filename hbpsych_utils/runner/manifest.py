"""The run manifest: what a profile run used and produced, and never a secret (it is written
scrubbed of every API key set in the environment, :mod:`hbpsych_utils.core.secrets`).

``outputs/<profile>/manifest.json`` records the profile (the values the run used and the
``--set`` overrides among them), package version, git commit, the installed versions of the
package's dependencies, the notebooks run (status ``ok``, ``failed`` or ``interrupted``,
seconds, the error) and every artifact any stage used with its sha256. It is rewritten after
each notebook, so an interrupted run still says how far it got. Artifacts come from the
``stage.json`` of each stage folder; the folder of a stage that failed holds only its failure
record, so the manifest never names the inputs of a previous run's outputs as this run's.

``scrubbed`` says every place where the value of an API key was replaced by ``[NAME removed]``:
the model replies of the run's LLM store that quoted one (:func:`store_entries`: by model, tag
and variable, with the replies and occurrences; tables made from them hold the same text), the
records this invocation wrote (:func:`record_entry`: failure records, build records, executed
notebooks) and the manifest itself; an empty list when none. ``key_placeholders`` names the key
variables set to a placeholder rather than a key (nothing is scrubbed of them).
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
from hbpsych_utils.core import paths, records, secrets
from hbpsych_utils.core.writes import json_text, write_record
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


STORE_REPLIES = "model replies"
"""What a ``scrubbed`` entry of the LLM store describes."""
RECORD = "record"
"""What a ``scrubbed`` entry of a record the project wrote describes."""


def record_entry(profile_dir: Path, path: Path, counts: dict[str, int]) -> dict[str, Any]:
    """A ``scrubbed`` entry for a record written with keys replaced: its file (relative to the
    run folder when inside it) and the occurrences replaced, by variable."""
    path = Path(path)
    try:
        where = str(path.resolve().relative_to(Path(profile_dir).resolve()))
    except ValueError:
        where = str(path)
    return {"file": where, "what": RECORD, "replaced": dict(sorted(counts.items()))}


def store_entries(profile_dir: Path) -> list[dict[str, Any]]:
    """The ``scrubbed`` entries of the run's LLM store: its replies stored with a key's value
    replaced, by model, tag and variable (empty when there is no store, or none was)."""
    from hbpsych_utils.llm.store import STORE_NAME, Store, StoreError

    store = profile_dir / STORE_NAME
    if not store.is_file():
        return []
    try:
        with Store(store) as db:
            return _store_entries(db)
    except StoreError:  # the manifest says why it cannot be read (store_error)
        return []


def _store_entries(db: Any) -> list[dict[str, Any]]:
    from hbpsych_utils.llm.store import STORE_NAME

    return [{"file": STORE_NAME, "what": STORE_REPLIES, "model": e["model"], "tag": e["tag"],
             "rows": e["rows"], "replaced": {e["variable"]: e["occurrences"]}}
            for e in db.scrubbed()]


def new_store_entries(before: list[dict[str, Any]], after: list[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """The store's entries of ``after`` less those of ``before``: the replies a stage stored
    with keys replaced (rows and occurrences added since ``before``)."""
    def key(e: dict[str, Any]) -> tuple[str, str, str]:
        return e["model"], e["tag"], next(iter(e["replaced"]))

    old = {key(e): e for e in before}
    out = []
    for e in after:
        was = old.get(key(e))
        rows = e["rows"] - (was["rows"] if was else 0)
        if rows > 0:
            name, n = next(iter(e["replaced"].items()))
            out.append({**e, "rows": rows,
                        "replaced": {name: n - (was["replaced"][name] if was else 0)}})
    return out


def describe_entry(entry: dict[str, Any]) -> str:
    """One line for the terminal: where keys were replaced, and how many."""
    names = ", ".join(f"[{name} removed]" for name in entry["replaced"])
    if entry["what"] == STORE_REPLIES:
        n = entry["rows"]
        return (f"{entry['file']}: {n} model repl{'y' if n == 1 else 'ies'} of "
                f"{entry['model']}{' (' + entry['tag'] + ')' if entry['tag'] else ''} quoted "
                f"{secrets.describe_counts(entry['replaced'])}: replaced by {names} in the "
                "store and in every table made from them")
    return (f"{entry['file']}: {secrets.describe_counts(entry['replaced'])} replaced by "
            f"{names}")


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
                facts["scrubbed"] = _store_entries(db)
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
    scrubbed: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``manifest.json``; ``overrides`` are the ``--set`` keys with the values the run
    used, ``profile_values`` the whole validated profile (overrides applied), ``notebooks``
    this invocation's notebooks, ``stages`` every stage of the graph with its state
    (:func:`hbpsych_utils.pipeline.state.stage_states`), ``command`` how the run was started,
    ``scrubbed`` the records this invocation wrote with keys replaced (:func:`record_entry`;
    the store's entries and the manifest's own are added here). A stage file it cannot read (a
    damaged one, which the runner rebuilds: it differs from its build record) is named under
    ``unreadable`` instead of stopping the run."""
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
        "key_placeholders": secrets.placeholders(),
        **collect_run_facts(profile_dir, unreadable),
        **(extra or {}),
    }
    manifest["scrubbed"] = [*manifest.get("scrubbed", []), *(scrubbed or [])]
    path = profile_dir / "manifest.json"
    own = secrets.scrubber().count(json_text(manifest))
    if own:  # a profile value or an error quoted a key: the manifest says so, of itself too
        manifest["scrubbed"].append(record_entry(profile_dir, path, own))
    return write_record(path, json_text(manifest), note=False)
