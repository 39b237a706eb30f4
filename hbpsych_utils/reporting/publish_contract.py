"""The mindbench-results v1 contract as typed records: one artifact per candidate on one
benchmark in one run, the per-item lines beside it, and the record of what was published from a
run. The contract itself (a JSON Schema, draft 2020-12) is the registry's ``results_schema``;
``publish`` validates every payload against it before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from hbpsych_utils import study

SCHEMA_ARTIFACT = "results_schema"
"""The registry's copy of the mindbench-results v1 schema."""
ARTIFACT_TYPE = "mindbench-results.v1"
BENCHMARK_SLUG = study.SUBSET_NAME


class PublishError(ValueError):
    """A run that cannot be published, or a payload that fails the contract: names the run
    folder or file, the record and the field, and what to do."""


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


def subset_metric(key: str, value: float, n: int, low: float | None = None,
                  high: float | None = None) -> Metric:
    return Metric(key=key, value=value, n=n, ci_low=low, ci_high=high)


def artifact_name(candidate: str) -> str:
    if "/" in candidate or candidate.startswith("."):
        raise PublishError(f"candidate {candidate!r}: not usable in a file name")
    return f"{BENCHMARK_SLUG}--{candidate}.json"


def items_name(candidate: str) -> str:
    return artifact_name(candidate).removesuffix(".json") + ".items.jsonl"
