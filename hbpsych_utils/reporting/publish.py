"""Results where labs publish them: a run's scores as mindbench-results v1 artifacts.

The MindBench results hub, where the study's leaderboard lives, takes one artifact per model x
benchmark x run, in the contract ``mindbench-results v1`` (a JSON Schema, draft 2020-12, in the
registry as ``results_schema``). ``python -m hbpsych_utils publish PROFILE`` writes one per
candidate of an existing run, for the main subset (``v1`` or ``v2``) with Psych-Hard beside it,
as the study's own exporter did: ``healthbench_score`` (the panel score on the main subset),
``healthbench_hard_score`` and ``per_judge_scores`` (each judge's clipped mean on both).

*Paper mode* (a run whose evaluation read the released matrices) re-exports the released
record: every candidate of the main subset's matrix (23 for v1: the study's 20 and the three
evaluated later), point estimates only, each value checked against the matrix as printed
(:func:`check_release`). *Live mode* publishes this run's grading: bootstrap intervals (the
run's seed and resamples, as 08_scores computes them), the measured ``n_errors``, what the
run's store paid for the candidate (its replies and the judge calls that graded them: the
ledger lines tagged for it), the decoding settings actually sent, and a per-conversation JSONL
(``items_artifact``). ``docs/publishing.md`` says what each field holds and where it comes
from.

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
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

import hbpsych_utils
from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.core import records, sources
from hbpsych_utils.core.config import Profile
from hbpsych_utils.core.writes import write_json
from hbpsych_utils.evaluation import generation, panel, scoring
from hbpsych_utils.evaluation.score_sources import (
    EvaluationSource,
    evaluation_source,
    matrix_n,
    read_matrix,
)
from hbpsych_utils.llm.models import ConfigError, profile_registry, resolve_decoding
from hbpsych_utils.llm.store import Store
from hbpsych_utils.pipeline import graph, metrics, state
from hbpsych_utils.reporting import comparability

SCHEMA_ARTIFACT = "results_schema"
"""The registry's copy of the mindbench-results v1 schema."""
ARTIFACT_TYPE = "mindbench-results.v1"
BENCHMARK_SLUG = study.SUBSET_NAME
HARNESS = "hbpsych_utils"
"""``run.harness`` of a live run: this compendium generated and graded it."""
HARD = "hard"
"""Psych-Hard, published beside the main subset in every artifact."""
MAIN_SUBSETS = ("v1", "v2")
PUBLISHED_DIR = "published"
"""Default output folder inside the run folder (one subfolder per subset)."""
RECORD = "published.json"
"""What was published from a run, in the run folder (the book reads it)."""
EXPORT_MANIFEST = "export-manifest.json"
NEEDED: dict[str, tuple[str, ...]] = {
    graph.PAPER: (graph.SUBSET, graph.SCORES),
    graph.LIVE: (graph.SUBSET, graph.GENERATION, graph.GRADING, graph.SCORES),
}
"""The stages whose outputs an artifact reports, by the run's evaluation mode: each must be
current."""
N_ERRORS_COUNTS = ("conversations of the subset the run set out to score for this candidate "
                   "that have no panel score (reply failed, or a judge's verdict excluded or "
                   "call failed); n_completed + n_errors = conversations attempted")


class PublishError(ValueError):
    """A run that cannot be published, or a payload that fails the contract: names the run
    folder or file, the record and the field, and what to do."""


# --------------------------------------------------------------------------------------------
# The contract's records (mindbench-results v1); the schema itself is the registry's


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Subsample(_Payload):
    n: int
    """Conversations of the subset the run evaluated (the first n of its sorted ids that the
    run's corpus held)."""


class DatasetManifest(_Payload):
    source: str
    revision: str | None
    split: str | None
    n_items: int
    subsample: Subsample | None
    checksum: str


class Benchmark(_Payload):
    slug: str
    dataset_manifest: DatasetManifest


class ModelInfo(_Payload):
    label: str
    api_model_id: str
    provider: str
    sampling: dict[str, Any]
    """How the model was sampled, as sent (the registry's decoding rules applied)."""


class RunInfo(_Payload):
    harness: str
    harness_commit: str | None
    adapter_version: str | None
    started_at: str
    finished_at: str
    cost_usd: float | None
    n_completed: int
    n_errors: int
    harness_config: dict[str, Any]


class JudgeInfo(_Payload):
    model: str
    prompt_version: str


class Scoring(_Payload):
    method: Literal["llm_judge"] = "llm_judge"
    judge: JudgeInfo


class Metric(_Payload):
    key: str
    value: float | None = None
    value_json: Any = None
    n: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class Artifact(_Payload):
    """One mindbench-results v1 payload: one candidate on one benchmark in one run."""

    schema_version: Literal[1] = 1
    benchmark: Benchmark
    model: ModelInfo
    run: RunInfo
    scoring: Scoring
    metrics: list[Metric]
    items_artifact: str | None

    def payload(self) -> dict[str, Any]:
        """The JSON object written (a metric carries only the fields it was given)."""
        data = self.model_dump(mode="json")
        data["metrics"] = [m.model_dump(mode="json", exclude_unset=True) for m in self.metrics]
        return data


class ItemLine(BaseModel):
    """One line of the per-item JSONL: one conversation of the subset for one candidate."""

    model_config = ConfigDict(extra="forbid")

    prompt_id: str
    in_hard: bool
    reply: str
    """The reply's status in 06_generation: ok, refused (graded as returned) or failed."""
    scores: dict[str, float | None]
    """Judge -> the reply's unclipped score (null: that judge left it unscored)."""
    status: dict[str, str]
    """Judge -> scored, excluded_verdict, ... as 07_grading recorded it (not_graded: the reply
    failed, so no judge graded it)."""
    panel: float | None
    """Equal-weight mean over the judges when every judge scored it; else null."""


class Published(BaseModel):
    """One publication of a run, as ``published.json`` records it and the book shows it."""

    subset: str
    mode: str
    output: str
    """Where the files went: relative to the run folder when inside it (so a copied run folder
    still finds them), else absolute."""
    written_at: str
    files: dict[str, str]
    """File name -> sha256 (the artifacts, their items and the export manifest)."""
    stages: dict[str, str | None]
    """The fingerprints of the stages it reports, when it was written."""

    def place(self) -> tuple[str, bool]:
        """Where the files went, as a page shows it: ``(folder relative to the run folder,
        True)``, or ``(the folder's name, False)`` when it is outside the run folder (a book is
        shared: a path of the machine that wrote it tells readers nothing but that machine's
        layout)."""
        where = Path(self.output)
        return (where.name, False) if where.is_absolute() else (where.as_posix(), True)


# --------------------------------------------------------------------------------------------
# The run folder


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
    """Refuse a run whose reported stages are not current; return their fingerprints."""
    mirror = run.manifest.get("mirror")
    states = {s.stage: s for s in state.stage_states(
        run.root, run.profile, mirror=mirror if isinstance(mirror, bool) else None)}
    stale = [states[s] for s in NEEDED[run.mode] if not states[s].current]
    if stale:
        why = "; ".join(f"{s.stage} is {s.state.replace('_', ' ')} ({s.reason})" for s in stale)
        raise PublishError(f"{run.root}: {why}. The run's numbers are not current until the "
                           f"runner brings them up to date: {rerun}")
    out = {}
    for name in NEEDED[run.mode]:
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
                                    study.STUDY_TEMPERATURE, study.GENERATION_MAX_TOKENS)
    return ModelInfo(label=candidate, api_model_id=spec.api_model, provider=spec.provider,
                     sampling={**sampling, **spec.extra_body})


def compendium(run: RunFolder) -> dict[str, Any]:
    git = run.manifest.get("git") or {}
    return {"package": "hbpsych_utils", "version": run.manifest.get("package_version"),
            "commit": git.get("commit"), "uncommitted_changes": git.get("dirty")}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def subset_metric(key: str, value: float, n: int, low: float | None = None,
                  high: float | None = None) -> Metric:
    return Metric(key=key, value=value, n=n, ci_low=low, ci_high=high)


def artifact_name(candidate: str) -> str:
    if "/" in candidate or candidate.startswith("."):
        raise PublishError(f"candidate {candidate!r}: not usable in a file name")
    return f"{BENCHMARK_SLUG}--{candidate}.json"


def items_name(candidate: str) -> str:
    return artifact_name(candidate).removesuffix(".json") + ".items.jsonl"


# --------------------------------------------------------------------------------------------
# Paper mode: the released record


@dataclass(frozen=True)
class Released:
    """One released matrix: per (candidate, judge) the clipped mean as read and as printed."""

    key: str
    path: Path
    per_judge: pd.DataFrame
    """candidate x judge (NaN where the matrix has no line)."""
    n: pd.Series
    printed: dict[tuple[str, str], str]


def read_released(key: str, path: Path) -> Released:
    """A released matrix through the package's reader, and its printed values as text."""
    try:
        matrix = read_matrix(path)
    except scoring.ScoringError as exc:
        raise PublishError(str(exc)) from None
    wide = matrix.pivot(index="candidate", columns="judge", values="clipped_mean_score")
    text = records.read_text(path, error=PublishError, newline="")
    printed = {(r["candidate"].strip(), r["judge"].strip()): r["clipped_mean_score"].strip()
               for r in csv.DictReader(io.StringIO(text))}
    return Released(key, Path(path), wide, matrix_n(matrix), printed)


def released_cell(released: Released, candidate: str, judge: str) -> float:
    """One (candidate, judge) value; a candidate the judge did not score is refused."""
    table = released.per_judge
    value = (table.at[candidate, judge]
             if candidate in table.index and judge in table.columns else math.nan)
    if pd.isna(value):
        raise PublishError(
            f"{released.path}: candidate {candidate} has no score from judge {judge} (the "
            f"{study.SUBSET_TITLES[released.key]} matrix); the panel score needs all "
            f"{len(study.JUDGE_PANEL)} judges, so no artifact can carry it")
    return float(value)


def paper_scores(main: Released, hard: Released, judges: Sequence[str] = study.JUDGE_PANEL
                 ) -> dict[str, dict[str, Any]]:
    """Per candidate of the main matrix: each judge's released value on the main subset and
    Psych-Hard, the panel means (the mean of the judges') and the conversations behind them."""
    out = {}
    for cand in sorted(main.per_judge.index):
        per_judge = {r.key: {j: released_cell(r, cand, j) for j in sorted(judges)}
                     for r in (main, hard)}
        out[cand] = {
            "per_judge": per_judge,
            "panel": {k: sum(v.values()) / len(v) for k, v in per_judge.items()},
            "n": {r.key: int(r.n[cand]) for r in (main, hard)},
        }
    return out


def check_release(payloads: Mapping[str, Mapping[str, Any]], released: Sequence[Released]
                  ) -> None:
    """Every per-judge value written equals the released matrix's at its printed precision,
    and each panel value is the mean of the judges' (read back from the payloads)."""
    for name, payload in payloads.items():
        cand = payload["model"]["label"]
        got = {m["key"]: m for m in payload["metrics"]}
        per_judge = got["per_judge_scores"]["value_json"]
        for r in released:
            for judge, value in per_judge[r.key].items():
                printed = r.printed.get((cand, judge))
                places = len(printed.partition(".")[2]) if printed else 0
                if printed is None or f"{value:.{places}f}" != printed:
                    raise PublishError(
                        f"{name}: metrics.per_judge_scores.{r.key}.{judge} is {value!r}, the "
                        f"released {r.path.name} prints {printed!r}; nothing was written")
            key = "healthbench_score" if r.key != HARD else "healthbench_hard_score"
            mean = sum(per_judge[r.key].values()) / len(per_judge[r.key])
            if not math.isclose(got[key]["value"], mean, rel_tol=0, abs_tol=1e-12):
                raise PublishError(f"{name}: metrics.{key} is {got[key]['value']!r}, not the "
                                   f"mean of its judges' {mean!r}; nothing was written")


def paper_artifacts(run: RunFolder, key: str) -> tuple[list[Artifact], list[Released]]:
    """The released record of subset ``key`` (and Psych-Hard), one artifact per candidate."""
    main = read_released(key, run.fetch(study.MATRIX_ARTIFACTS[key]))
    hard = read_released(HARD, run.fetch(study.MATRIX_ARTIFACTS[HARD]))
    info = subset_info(run, key)
    spend = records.read_text(run.fetch("run_spend"), error=PublishError).splitlines()
    stamps = sorted(json.loads(line)["ts"] for line in spend if line.strip())
    template = sources.artifact("grader_template").sha256 or ""
    config = {
        "evaluation_mode": graph.PAPER,
        "source": {name: {"url": sources.artifact(name).url,
                          "sha256": sources.artifact(name).sha256} for name in (
            study.MATRIX_ARTIFACTS[key], study.MATRIX_ARTIFACTS[HARD], "run_spend")},
        "run_dates": "the released spend ledger's first and last charge (the release keeps "
                     "no per-candidate dates)",
        "cost_usd": "null: the released ledger charges grading per judge, not per candidate",
        "n_errors": "subset conversations without a score in the released matrix "
                    "(n_items - the least-covered judge's n_prompts)",
        "exported_by": compendium(run),
    }
    out = []
    card = comparability.exported(run.root, run.profile, run.manifest, key)
    for cand, s in paper_scores(main, hard).items():
        n = s["n"][key]
        out.append(Artifact(
            benchmark=benchmark(info), model=model_info(run, cand, None),
            run=RunInfo(harness=study.STUDY_HARNESS, harness_commit=None,
                        adapter_version=hbpsych_utils.__version__, started_at=stamps[0],
                        finished_at=stamps[-1], cost_usd=None, n_completed=n,
                        n_errors=info.n - n,
                        harness_config={**config, "comparability": card([n])}),
            scoring=judge_info(study.JUDGE_PANEL, template, study.STUDY_TEMPERATURE),
            metrics=[subset_metric("healthbench_score", s["panel"][key], n),
                     subset_metric("healthbench_hard_score", s["panel"][HARD],
                                   s["n"][HARD]),
                     Metric(key="per_judge_scores", value_json=s["per_judge"])],
            items_artifact=None))
    return out, [main, hard]


# --------------------------------------------------------------------------------------------
# Live mode: this run's grading


def ledger_by_candidate(store_path: Path) -> dict[str, dict[str, Any]]:
    """Per candidate, what the run's store paid for its replies and for grading them, and
    when: the ledger lines tagged for it (``generation.GENERATE_TAG`` with the candidate as
    model, ``panel.grade_tag``). ``untagged`` counts judge calls stored without a candidate."""
    if not store_path.is_file():
        return {}
    with Store(store_path) as store:
        rows = store.spend_by_tag()
    out: dict[str, dict[str, Any]] = {}
    prefix = panel.grade_tag("")
    for r in rows:
        if r["tag"] == generation.GENERATE_TAG:
            cand = r["model"]
        elif r["tag"].startswith(prefix):
            cand = r["tag"][len(prefix):]
        else:
            continue
        got = out.setdefault(cand, {"cost": 0.0, "first": r["first_ts"], "last": r["last_ts"]})
        got["cost"] += r["cost"]
        got["first"] = min(got["first"], r["first_ts"])
        got["last"] = max(got["last"], r["last_ts"])
    if any(r["tag"] == panel.GRADE_TAG for r in rows):
        for got in out.values():
            got["untagged"] = True
    return out


def items(source: EvaluationSource, responses: pd.DataFrame, candidate: str,
          hard_ids: set[str]) -> list[ItemLine]:
    """The candidate's conversations of the subset: each judge's score and the panel's."""
    assert source.scores is not None and source.panel_long is not None
    mine = source.scores[source.scores["candidate"] == candidate]
    panel_scores = source.panel_long[source.panel_long["candidate"] == candidate]
    panel_by_id = dict(zip(panel_scores["prompt_id"], panel_scores["score"], strict=True))
    out = []
    for row in responses.sort_values("prompt_id").itertuples(index=False):
        graded = mine[mine["prompt_id"] == row.prompt_id].set_index("judge")
        scores = {j: (float(graded.at[j, "score"]) if j in graded.index
                      and pd.notna(graded.at[j, "score"]) else None) for j in source.judges}
        status = {j: (str(graded.at[j, "status"]) if j in graded.index
                      and "status" in graded.columns else "not_graded") for j in source.judges}
        value = panel_by_id.get(row.prompt_id)
        out.append(ItemLine(prompt_id=row.prompt_id, in_hard=row.prompt_id in hard_ids,
                            reply=str(row.status), scores=scores, status=status,
                            panel=None if value is None else float(value)))
    return out


def live_artifacts(run: RunFolder, key: str) -> tuple[list[Artifact], dict[str, list[ItemLine]]]:
    """This run's grading of subset ``key`` (and Psych-Hard), one artifact per candidate."""
    gen = run.upstream_metrics(metrics.GENERATION)
    grading = run.upstream_metrics(metrics.GRADING)
    if not isinstance(gen, metrics.GenerationLiveMetrics) or not isinstance(
            grading, metrics.GradingLiveMetrics):
        raise PublishError(f"{run.root}: 06 and 07 did not run live; nothing was graded")
    info = subset_info(run, key)
    hard = subset_info(run, HARD)
    try:
        source = evaluation_source(run, key, mode=graph.LIVE)
        hard_source = evaluation_source(run, HARD, mode=graph.LIVE)
    except scoring.ScoringError as exc:
        raise PublishError(str(exc)) from None
    if source is None:
        raise PublishError(f"{run.root}: this run graded no conversation of "
                           f"{study.SUBSET_TITLES[key]}; publish the subset it generated on "
                           f"(--subset {gen.subset})")
    n_resamples, seed = run.profile.scores.n_resamples, run.profile.seed
    level = run.profile.ci_level
    table = source.table1(n_resamples=n_resamples, seed=seed, level=level)
    hard_table = (hard_source.table1(n_resamples=n_resamples, seed=seed, level=level)
                  if hard_source is not None else None)
    responses = generation.read_responses(run.upstream(graph.GENERATION, graph.RESPONSES))
    responses = responses[responses["prompt_id"].isin(set(info.ids))]
    ledger = ledger_by_candidate(run.root / "llm_store.sqlite")
    graded_at = state.read_build(run.root, graph.GRADING)
    assert graded_at is not None  # 07_grading is current (require_current)
    llm = run.profile.llm
    config = {
        "evaluation_mode": graph.LIVE, "llm_mode": llm.mode, "limits": llm.limits,
        "max_cost": llm.max_cost, "prompt_caching": llm.prompt_caching,
        "simulator": llm.simulator, "judge_max_reasks": run.profile.grading.max_reasks,
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "level": level},
        "n_errors": N_ERRORS_COUNTS, "exported_by": compendium(run),
    }
    scoring_info = judge_info(source.judges, grading.grader_template_sha256,
                              grading.temperature)
    judges = source.judges
    card = comparability.exported(run.root, run.profile, run.manifest, key)
    out, lines = [], {}
    for cand in gen.candidates:
        mine = responses[responses["model"] == cand]
        if cand not in table.index or mine.empty:
            raise PublishError(f"{run.root}: candidate {cand} has no graded conversation of "
                               f"{study.SUBSET_TITLES[key]}")
        row = table.loc[cand]
        done = int(row["n_panel"])
        paid = ledger.get(cand)
        stamps = ((_iso(paid["first"]), _iso(paid["last"])) if paid
                  else (graded_at.written_at,) * 2)
        cost = None if paid is None or paid.get("untagged") else round(paid["cost"], 6)
        per_judge = {key: {j: float(row[j]) for j in sorted(judges) if pd.notna(row[j])}}
        found = [subset_metric("healthbench_score", float(row["panel_mean"]), done,
                               float(row["ci_low"]), float(row["ci_high"]))]
        if hard_table is not None and cand in hard_table.index:
            h = hard_table.loc[cand]
            found.append(subset_metric("healthbench_hard_score", float(h["panel_mean"]),
                                       int(h["n_panel"]), float(h["ci_low"]),
                                       float(h["ci_high"])))
            per_judge[HARD] = {j: float(h[j]) for j in sorted(judges)
                                         if pd.notna(h[j])}
        found.append(Metric(key="per_judge_scores", value_json=per_judge))
        lines[cand] = items(source, mine, cand, set(hard.ids))
        out.append(Artifact(
            benchmark=benchmark(info, len(mine)),
            model=model_info(run, cand, gen.decoding_sent.get(cand)),
            run=RunInfo(harness=HARNESS, harness_commit=compendium(run)["commit"],
                        adapter_version=hbpsych_utils.__version__, started_at=stamps[0],
                        finished_at=stamps[1], cost_usd=cost, n_completed=done,
                        n_errors=len(mine) - done,
                        harness_config={**config, "cost_usd": _cost_note(paid),
                                        "comparability": card([done])}),
            scoring=scoring_info, metrics=found, items_artifact=items_name(cand)))
    return out, lines


def _cost_note(paid: Mapping[str, Any] | None) -> str:
    if paid is None:
        return "null: the run's store has no ledger line for this candidate"
    if paid.get("untagged"):
        return ("null: some judge calls in the run's store were recorded without their "
                "candidate, so grading cannot be divided among candidates")
    return ("what the run's store paid for this candidate's replies and the judge calls that "
            "graded them (every invocation that produced them)")


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
        artifacts, lines = live_artifacts(run, subset)
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
