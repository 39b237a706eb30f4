"""A finished run's folder as ``publish`` reads it, and what every artifact of the run shares:
the run's profile and stages (each must be current), the subset as its 05_subset wrote it, the
dataset manifest, the judges and a candidate's model as the registry names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core import records, sources
from hbpsych_utils.llm.models import ConfigError, profile_registry, resolve_decoding
from hbpsych_utils.pipeline import graph, metrics, state
from hbpsych_utils.pipeline.nodes.s16_self_consistency import SELF_CONSISTENCY
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.reporting.publish_contract import (
    BENCHMARK_SLUG,
    Benchmark,
    DatasetManifest,
    JudgeInfo,
    ModelInfo,
    PublishError,
    Scoring,
    Subsample,
)

HARD = "hard"
"""Psych-Hard, published beside the main subset in every artifact."""
NEEDED: dict[str, tuple[str, ...]] = {
    graph.PAPER: (graph.SUBSET, graph.SCORES),
    graph.LIVE: (graph.SUBSET, graph.GENERATION, graph.GRADING, graph.SCORES),
}
"""The stages whose outputs an artifact reports, by the run's evaluation mode: each must be
current."""
OPTIONAL: dict[str, tuple[str, ...]] = {graph.LIVE: (SELF_CONSISTENCY,)}
"""Stages whose outputs an artifact reports when they are current (the judges' flip rates of
16_self_consistency), left out otherwise."""


@dataclass(frozen=True)
class RunFolder:
    """A finished run's folder, read as its stages read each other (``upstream``,
    ``upstream_metrics``, ``fetch``), so the score readers of ``evaluation`` serve it as is."""

    root: Path
    profile: Profile
    manifest: dict[str, Any]

    @property
    def mode(self) -> str:
        return str(graph.stage_mode(self.profile, graph.SCORES))

    def upstream(self, stage: str, filename: str) -> Path:
        path = self.root / stage / filename
        if not path.is_file():
            raise PublishError(f"{path} is missing: stage {stage} did not write it; run the "
                               f"profile {self.profile.name!r} again")
        return path

    def upstream_metrics(self, stage: metrics.StageMetrics[metrics.M]) -> metrics.M:
        path = self.upstream(stage.stage, graph.METRICS)
        return metrics.parse(stage, records.read_json(path, error=PublishError), str(path))

    def fetch(self, artifact: str) -> Path:
        return sources.fetch(artifact)


def open_run(run_dir: Path, rerun: str = "") -> RunFolder:
    """A run folder the runner wrote, with the profile it ran (``manifest.json``'s values);
    ``rerun`` is the command that makes it, named when it is missing."""
    run_dir = Path(run_dir)
    where = f"{run_dir}: "
    rerun = rerun or f"bash run_all.sh {run_dir.name}"
    if not run_dir.is_dir():
        raise PublishError(f"{where}no run folder; run the profile first: {rerun}")
    path = run_dir / "manifest.json"
    if not path.is_file():
        raise PublishError(f"{where}no manifest.json: not a run the runner wrote; run the "
                           f"profile: {rerun}")
    manifest = records.read_json(path, error=PublishError)
    try:
        profile = Profile.model_validate((manifest or {}).get("profile_values"))
    except ValidationError as exc:
        raise PublishError(f"{path}: field profile_values: not a profile this version reads "
                           f"({exc.error_count()} problem(s)); run the profile again") from None
    if graph.SCORES not in graph.profile_stages(profile):
        raise PublishError(f"{where}profile {profile.name!r} does not run {graph.SCORES}: "
                           "it has no scores to publish")
    return RunFolder(run_dir, profile, manifest)


def require_current(run: RunFolder, rerun: str) -> dict[str, str | None]:
    """Refuse a run whose reported stages are not current; return their fingerprints, with
    those of the :data:`OPTIONAL` stages that are current."""
    mirror = run.manifest.get("mirror")
    states = {s.stage: s for s in state.stage_states(
        run.root, run.profile, mirror=mirror if isinstance(mirror, bool) else None)}
    stale = [states[s] for s in NEEDED[run.mode] if not states[s].current]
    if stale:
        why = "; ".join(f"{s.stage} is {s.state.replace('_', ' ')} ({s.reason})" for s in stale)
        raise PublishError(f"{run.root}: {why}. The run's numbers are not current until the "
                           f"runner brings them up to date: {rerun}")
    out = {}
    current = [s for s in OPTIONAL.get(run.mode, ()) if s in states and states[s].current]
    for name in (*NEEDED[run.mode], *current):
        build = state.read_build(run.root, name)
        out[name] = build.fingerprint if build else None
    return out


# --------------------------------------------------------------------------------------------
# What every artifact of a run shares


@dataclass(frozen=True)
class SubsetInfo:
    key: str
    name: str
    n: int
    sha256: str
    ids: tuple[str, ...]
    version: str | None
    """The released file's version when the run's subset is the released one (same hash)."""


def subset_info(run: RunFolder, key: str) -> SubsetInfo:
    """Subset ``key`` as the run's 05_subset wrote it, with the release's version if equal."""
    index = subset_files.read_index(run.upstream(graph.SUBSET, subset_files.INDEX))
    if key not in index:
        raise PublishError(f"{run.root / graph.SUBSET}: no subset {key!r} (it wrote "
                           f"{sorted(index)})")
    data = subset_files.load_subset(run.upstream(graph.SUBSET, index[key]))
    released = subset_files.load_subset(run.fetch(study.SUBSET_ARTIFACTS[key]))
    same = released.get("prompt_id_sha256") == data["prompt_id_sha256"]
    version = released.get("version") if same else None
    return SubsetInfo(key, str(data.get("name") or study.SUBSET_TITLES[key]),
                      len(data["prompt_ids"]), data["prompt_id_sha256"],
                      tuple(data["prompt_ids"]), str(version) if version else None)


def benchmark(info: SubsetInfo, evaluated: int | None = None) -> Benchmark:
    """The dataset manifest: the corpus release, the subset's name, size and id hash."""
    return Benchmark(slug=BENCHMARK_SLUG, dataset_manifest=DatasetManifest(
        source=sources.artifact("healthbench_oss").url,
        revision=f"{info.name} {info.version}" if info.version else None, split=info.name,
        n_items=info.n,
        subsample=Subsample(n=evaluated) if evaluated is not None and evaluated < info.n
        else None,
        checksum=f"sha256:{info.sha256}"))


def judge_info(judges: Sequence[str], template_sha256: str, temperature: float) -> Scoring:
    return Scoring(judge=JudgeInfo(
        model=" + ".join(sorted(judges)),
        prompt_version=f"HealthBench grader template sha256:{template_sha256}, "
                       f"temperature {temperature:g}"))


def model_info(run: RunFolder, candidate: str, sampling: Mapping[str, Any] | None) -> ModelInfo:
    """Label, the registry's snapshot id and provider, and the sampling settings sent
    (``sampling``; None: what the registry sends at the study's settings), with the fields the
    registry adds to the request body (``extra_body``: qwen3-8b's thinking switch)."""
    registry = profile_registry(run.profile.llm.registry_file)
    try:
        spec = registry.model(candidate)
    except ConfigError as exc:
        raise PublishError(f"candidate {candidate}: {exc}") from None
    if sampling is None:
        sampling = resolve_decoding(spec, registry.providers[spec.provider].kind,
                                    study.STUDY_TEMPERATURE, study.GENERATION_MAX_TOKENS,
                                    seed=None)  # the study sent no seed
    return ModelInfo(label=candidate, api_model_id=spec.api_model, provider=spec.provider,
                     sampling={**sampling, **spec.extra_body})


def compendium(run: RunFolder) -> dict[str, Any]:
    git = run.manifest.get("git") or {}
    return {"package": "hbpsych_utils", "version": run.manifest.get("package_version"),
            "commit": git.get("commit"), "uncommitted_changes": git.get("dirty")}


def iso_time(ts: float) -> str:
    """A timestamp (seconds since the epoch) as the contract writes times: UTC, ISO 8601."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
