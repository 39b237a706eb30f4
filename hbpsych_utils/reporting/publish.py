"""Results where labs publish them: a run's scores as mindbench-results v1 artifacts.

The MindBench results hub, where the study's leaderboard lives, takes one artifact per model x
benchmark x run, in the contract ``mindbench-results v1`` (a JSON Schema, draft 2020-12, in the
registry as ``results_schema``). ``python -m hbpsych_utils publish PROFILE`` writes one per
candidate of an existing run, for the main subset (``v1`` or ``v2``) with Psych-Hard beside it,
as the study's own exporter did: ``healthbench_score`` (the panel score on the main subset),
``healthbench_hard_score`` and ``per_judge_scores`` (each judge's clipped mean on both), and
in a live run that re-graded a sample the judges' flip rates (``judge_flip_rates``,
``panel_flip_rate``, ``score_spread_across_repeats``).

*Paper mode* (a run whose evaluation read the released matrices) re-exports the released
record: every candidate of the main subset's matrix (23 for v1: the study's 20 and the three
evaluated later), point estimates only, each value checked against the matrix as printed
(``publish_paper.check_release``). *Live mode* publishes this run's grading: bootstrap
intervals (the run's seed and resamples, as 08_scores computes them), the measured
``n_errors``, what the run's store paid for the candidate (its replies and the judge calls that
graded them: the ledger lines tagged for it), the decoding settings actually sent, and a
per-conversation JSONL (``items_artifact``). ``docs/publishing.md`` says what each field holds
and where it comes from.

``n_errors`` counts conversations, measured from the run: those of the subset the run set out to
score for the candidate that have no panel score (its reply failed, or a judge left it unscored:
a verdict excluded after the re-asks, or a judge call that failed). ``n_completed`` is the
conversations with a panel score, the ``n`` of ``healthbench_score``; the two add up to the
conversations attempted. Paper mode counts from the matrices' ``n_prompts``.

Every payload is validated against the registry's schema with ``jsonschema`` before anything is
written; one that fails writes nothing and names the file, the field and the rule. The files go
to ``--output`` (default ``outputs/<profile>/published/<subset>/``) with ``export-manifest.json``
(their sha256), swapped into place whole; ``outputs/<profile>/published.json`` records what was
published from the run, which the book's provenance page links.

This module validates, writes and records (the command and what the book shows); the contract's
records are :mod:`~hbpsych_utils.reporting.publish_contract`'s, the run folder and what its
artifacts share :mod:`~hbpsych_utils.reporting.publish_run`'s, and each mode's artifacts
:mod:`~hbpsych_utils.reporting.publish_paper`'s and :mod:`~hbpsych_utils.reporting.publish_live`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hbpsych_utils.core import records, sources
from hbpsych_utils.core.writes import write_json
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline.nodes.s16_self_consistency import SELF_CONSISTENCY
from hbpsych_utils.reporting.publish_contract import (
    ARTIFACT_TYPE,
    SCHEMA_ARTIFACT,
    Artifact,
    ItemLine,
    Published,
    PublishError,
    artifact_name,
)
from hbpsych_utils.reporting.publish_live import FLIP_RATES, live_artifacts
from hbpsych_utils.reporting.publish_paper import check_release, paper_artifacts
from hbpsych_utils.reporting.publish_run import RunFolder, compendium, open_run, require_current

MAIN_SUBSETS = ("v1", "v2")
PUBLISHED_DIR = "published"
"""Default output folder inside the run folder (one subfolder per subset)."""
RECORD = "published.json"
"""What was published from a run, in the run folder (the book reads it)."""
EXPORT_MANIFEST = "export-manifest.json"


# --------------------------------------------------------------------------------------------
# Validation and writing


def load_schema(path: Path | None = None) -> dict[str, Any]:
    """The registry's mindbench-results v1 schema (fetched and sha256-checked)."""
    schema = records.read_json(path or sources.fetch(SCHEMA_ARTIFACT), error=PublishError)
    if not isinstance(schema, dict):
        raise PublishError(f"{path}: not a JSON Schema object")
    return schema


def schema_problems(payload: Any, schema: Mapping[str, Any]) -> list[str]:
    """Every place ``payload`` breaks the schema, as ``field: rule`` (empty: valid)."""
    import jsonschema  # imported when validating: its format checkers take a second to load

    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    problems = []
    for err in sorted(validator.iter_errors(payload), key=lambda e: [str(p) for p in e.path]):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        problems.append(f"field {where.lstrip('.') or '(top level)'}: {err.message}")
    return problems


def render(artifacts: Sequence[Artifact], lines: Mapping[str, Sequence[ItemLine]],
           schema: Mapping[str, Any]) -> dict[str, bytes]:
    """Every file's bytes, each payload validated against ``schema`` first: one that breaks
    it raises :class:`PublishError` naming the file and the field, and nothing is written."""
    files: dict[str, bytes] = {}
    broken = []
    for art in artifacts:
        name = artifact_name(art.model.label)
        payload = art.payload()
        broken += [f"{name}: {p}" for p in schema_problems(payload, schema)]
        files[name] = (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode()
        if art.items_artifact:
            files[art.items_artifact] = "".join(
                line.model_dump_json() + "\n" for line in lines[art.model.label]).encode()
    if broken:
        more = f" (and {len(broken) - 5} more)" if len(broken) > 5 else ""
        raise PublishError("payloads that break mindbench-results v1: " + "; ".join(broken[:5])
                           + f"{more}; nothing was written")
    return files


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export_manifest(run: RunFolder, key: str, files: Mapping[str, bytes]) -> bytes:
    schema = sources.describe(SCHEMA_ARTIFACT)
    doc = {
        "artifact_type": ARTIFACT_TYPE,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "producer": compendium(run),
        "run": {"profile": run.profile.name, "folder": str(run.root), "mode": run.mode},
        "subset": key,
        "schema": {"artifact": SCHEMA_ARTIFACT, "sha256": schema["sha256"],
                   "url": schema["url"]},
        "files": {name: f"sha256:{_sha(data)}" for name, data in sorted(files.items())},
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def write_folder(out: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` as folder ``out``, whole: staged beside it, then swapped in. A folder
    already there must be an earlier publication (it holds an export manifest) or empty."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / EXPORT_MANIFEST).is_file())):
        raise PublishError(f"{out}: exists and is not an earlier publication (no "
                           f"{EXPORT_MANIFEST}); choose an empty or new --output folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    staged, aside = out.parent / f".{out.name}.new", out.parent / f".{out.name}.old"
    for folder in (staged, aside):
        shutil.rmtree(folder, ignore_errors=True)
    staged.mkdir()
    for name, data in files.items():
        (staged / name).write_bytes(data)
    if out.exists():
        os.rename(out, aside)
    os.rename(staged, out)
    shutil.rmtree(aside, ignore_errors=True)


def read_records(run_dir: Path) -> dict[str, Published]:
    """What ``published.json`` of a run folder records, by subset (empty when nothing was)."""
    path = Path(run_dir) / RECORD
    if not path.is_file():
        return {}
    data = records.read_json(path, error=PublishError)
    try:
        return {k: Published.model_validate(v) for k, v in (data or {}).items()}
    except (ValidationError, AttributeError) as exc:
        raise PublishError(f"{path}: not a publication record ({exc})") from None


@dataclass(frozen=True)
class Report:
    output: Path
    files: dict[str, str]
    artifacts: list[Artifact]


def publish(run_dir: Path, *, subset: str = "v1", output: Path | None = None,
            rerun: str = "") -> Report:
    """Publish a run folder's scores on ``subset`` (see the module doc); ``rerun`` is the
    command that brings the run up to date, named when a stage is not current."""
    if subset not in MAIN_SUBSETS:
        raise PublishError(f"--subset {subset!r}: one of {', '.join(MAIN_SUBSETS)} (Psych-Hard "
                           "is published beside it)")
    run = open_run(run_dir, rerun)
    rerun = rerun or f"bash run_all.sh {run.profile.name}"
    try:  # a file that is no longer what its stage wrote is never read
        state.check_outputs(run.root, rerun, graph.profile_stages(run.profile))
    except state.OutputsChanged as exc:
        raise PublishError(str(exc)) from None
    stages = require_current(run, rerun)
    schema = load_schema()
    lines: dict[str, list[ItemLine]] = {}
    if run.mode == graph.PAPER:
        artifacts, released = paper_artifacts(run, subset)
    else:
        artifacts, lines = live_artifacts(run, subset, flips=SELF_CONSISTENCY in stages)
        if not any(m.key == FLIP_RATES for a in artifacts for m in a.metrics):
            stages.pop(SELF_CONSISTENCY, None)  # 16 re-graded nothing: it reports nothing
    files = render(artifacts, lines, schema)
    if run.mode == graph.PAPER:
        check_release({n: json.loads(b) for n, b in files.items() if n.endswith(".json")},
                      released)
    files[EXPORT_MANIFEST] = export_manifest(run, subset, files)
    out = Path(output) if output is not None else run.root / PUBLISHED_DIR / subset
    write_folder(out, files)
    shas = {name: _sha(data) for name, data in files.items()}
    done = read_records(run.root)
    where = out.resolve()
    if where.is_relative_to(run.root.resolve()):
        where = where.relative_to(run.root.resolve())
    done[subset] = Published(subset=subset, mode=run.mode, output=str(where),
                             written_at=datetime.now(UTC).isoformat(timespec="seconds"),
                             files=shas, stages=stages)
    write_json(run.root / RECORD, {k: v.model_dump(mode="json") for k, v in done.items()})
    return Report(out, shas, artifacts)


# --------------------------------------------------------------------------------------------
# For the book


@dataclass(frozen=True)
class Shown:
    """A publication as the book shows it: its record, whether its files are still those it
    wrote (``files_ok``), and whether the stages it reports changed since (``stale``)."""

    record: Published
    folder: Path
    files_ok: bool
    stale: list[str]


def for_book(run_dir: Path) -> list[Shown]:
    """Every publication of a run folder, checked against its files and the stages now."""
    shown = []
    for rec in read_records(run_dir).values():
        folder = Path(run_dir) / rec.output  # an absolute output stays as it is
        ok = all((folder / n).is_file() and sources.sha256_file(folder / n) == sha
                 for n, sha in rec.files.items())
        stale = []
        for name, fingerprint in rec.stages.items():
            build = state.read_build(Path(run_dir), name)
            if build is None or build.fingerprint != fingerprint:
                stale.append(name)
        shown.append(Shown(rec, folder, ok, stale))
    return shown
