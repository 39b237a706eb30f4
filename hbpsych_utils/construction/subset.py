"""Assembling, hashing, writing and checking the released subsets.

The subset is derived from the two review rounds' votes, never loaded: the included
screened-in items of round 1, the included candidates of round 2, and — depending on the
versioned control policy — the controls that reached a majority. HealthBench-Psych-Hard is its
intersection with the HealthBench-Hard ids. Each subset is released as sorted ``prompt_ids``
with ``prompt_id_sha256 = sha256(json.dumps(sorted ids))``.

On the control policy: v1 holds round 1's nine majority controls and leaves out round 2's one;
v2 admits that one too (the procedure, the released files and v2's admission note agree).
``POLICIES`` encodes it per round, so another policy is a parameter away.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
from pydantic import TypeAdapter, ValidationError

from hbpsych_utils.construction.corpus import ids_hash
from hbpsych_utils.construction.review_set import CANDIDATE, CONTROL, SCREENED_IN
from hbpsych_utils.construction.tally import NO_CATEGORY_MAJORITY, included_ids, modal_categories
from hbpsych_utils.core.records import FileRecord, problems, read_csv, read_json, validate
from hbpsych_utils.core.writes import write_text

if TYPE_CHECKING:
    from hbpsych_utils.pipeline.stage import Stage


@dataclass(frozen=True)
class ControlPolicy:
    """Which rounds' majority-included controls a subset version admits."""

    name: str
    admit_round1_controls: bool
    admit_round2_controls: bool


POLICIES: dict[str, ControlPolicy] = {
    "v1": ControlPolicy("v1", admit_round1_controls=True, admit_round2_controls=False),
    "v2": ControlPolicy("v2", admit_round1_controls=True, admit_round2_controls=True),
}


def assemble(
    round1: pd.DataFrame, round2: pd.DataFrame | None, policy: ControlPolicy
) -> list[str]:
    """Sorted ids of the subset under ``policy`` from the rounds' votes tables."""
    kinds1 = [SCREENED_IN] + ([CONTROL] if policy.admit_round1_controls else [])
    ids = set(included_ids(round1, kinds1))
    if round2 is not None:
        kinds2 = [CANDIDATE] + ([CONTROL] if policy.admit_round2_controls else [])
        ids |= set(included_ids(round2, kinds2))
    return sorted(ids)


def hard_subset(ids: Iterable[str], hard_ids: Iterable[str]) -> list[str]:
    return sorted(set(ids) & set(hard_ids))


def subset_categories(
    ids: Iterable[str], round1: pd.DataFrame, round2: pd.DataFrame | None
) -> pd.Series:
    """Modal reviewer category per subset conversation; round-2 items use round-2 votes."""
    frames = [round1.assign(_round=1)]
    if round2 is not None:
        frames.append(round2.assign(_round=2))
    cats: dict[str, str] = {}
    for votes in frames:  # round 2 after round 1, so a round-2 item takes its round-2 votes
        modal = modal_categories(votes)
        cats.update(dict(zip(votes["prompt_id"], modal, strict=True)))
    wanted = sorted(set(ids))
    missing = [i for i in wanted if i not in cats]
    if missing:
        raise ValueError(f"{len(missing)} subset id(s) were not in any review round: {missing[:3]}")
    return pd.Series([cats[i] for i in wanted], index=pd.Index(wanted, name="prompt_id"),
                     name="category")


def read_categories(path: Path | str) -> pd.Series:
    """``categories_v1.csv`` as 05_subset wrote it (``subset_categories``): category by
    prompt_id, read back as text (an empty category stays ``""``, never NaN)."""
    table = read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in ("prompt_id", "category") if c not in table.columns]
    if missing:
        raise ValueError(f"{path}:1: missing column(s) {missing}")
    return table.set_index("prompt_id")["category"]


def category_counts(categories: pd.Series) -> dict[str, int]:
    """Conversations per category, largest first, 'no category majority' last."""
    counts = categories.value_counts()
    order = sorted(counts.index, key=lambda c: (c == NO_CATEGORY_MAJORITY, -counts[c], c))
    return {str(c): int(counts[c]) for c in order}


def subset_record(name: str, ids: Iterable[str], **fields: object) -> dict[str, object]:
    """A subset file's content in the released layout: provenance fields, n, hash, sorted ids."""
    ids = sorted(set(ids))
    return {"name": name, **fields, "n": len(ids), "prompt_id_sha256": ids_hash(ids),
            "prompt_ids": ids}


def write_subset(path: Path, record: Mapping[str, object]) -> Path:
    """Write a subset file as the release does (one-space indent, newline-free end)."""
    return write_text(path, json.dumps(record, indent=1, ensure_ascii=False))


class SubsetFile(FileRecord):
    """A subset file (released or written here): sorted ``prompt_ids`` and, when present,
    their ``prompt_id_sha256``; its other provenance fields are kept as they are."""

    prompt_ids: list[str]
    prompt_id_sha256: str | None = None


def load_subset(path: Path | str) -> dict[str, Any]:
    """Read a subset file and check that its hash matches its ids."""
    data = read_json(path)
    try:
        parsed = SubsetFile.model_validate(data)
    except ValidationError as exc:
        field_name, problem = problems(exc)[0]
        raise ValueError(f"{path}: field {field_name!r}: {problem} (prompt_ids must be a list "
                         "of strings)") from None
    declared = parsed.prompt_id_sha256
    if declared is not None and ids_hash(parsed.prompt_ids) != declared:
        raise ValueError(
            f"{path}: field 'prompt_id_sha256' is {parsed.prompt_id_sha256} but the ids hash to "
            f"{ids_hash(parsed.prompt_ids)}"
        )
    return data


@dataclass(frozen=True)
class ReleaseComparison:
    name: str
    n_derived: int
    n_released: int
    only_derived: tuple[str, ...]
    only_released: tuple[str, ...]
    sha256_derived: str
    sha256_released: str

    @property
    def ids_match(self) -> bool:
        return not self.only_derived and not self.only_released

    @property
    def hash_match(self) -> bool:
        return self.sha256_derived == self.sha256_released

    @property
    def matches(self) -> bool:
        return self.ids_match and self.hash_match


def compare_with_release(
    name: str, ids: Iterable[str], released: Mapping[str, Any]
) -> ReleaseComparison:
    derived = set(ids)
    rel = set(released["prompt_ids"])
    return ReleaseComparison(
        name=name,
        n_derived=len(derived),
        n_released=len(rel),
        only_derived=tuple(sorted(derived - rel)),
        only_released=tuple(sorted(rel - derived)),
        sha256_derived=ids_hash(derived),
        sha256_released=str(released.get("prompt_id_sha256", ids_hash(rel))),
    )


INDEX = "subsets.json"
"""05_subset's index: subset key (v1, v2, hard) -> the file it wrote."""


class UpstreamFiles(Protocol):
    """What reads an earlier stage's files of a run: a stage's folder (``Stage``) or a finished
    run (``reporting.publish.RunFolder``)."""

    def upstream(self, stage: str, filename: str) -> Path: ...


def write_all(stage: Stage, records: Mapping[str, Mapping[str, object]]) -> dict[str, str]:
    """Write each subset as ``<name>.json`` in the stage folder, plus the index later stages
    read (so they need not know the subset's name)."""
    index = {}
    for key, rec in records.items():
        filename = f"{rec['name']}.json"
        write_subset(stage.path(filename), rec)
        index[key] = filename
    stage.write_json(INDEX, index)
    return index


_INDEX = TypeAdapter(dict[str, str])


def read_index(path: Path | str) -> dict[str, str]:
    """05_subset's ``subsets.json``: subset key -> file name, validated."""
    return validate(_INDEX, read_json(path), str(path))


def stage_ids(stage: UpstreamFiles, key: str) -> list[str]:
    """The ids of subset ``key`` as this run's 05_subset wrote it (hash-checked)."""
    index = read_index(stage.upstream("05_subset", INDEX))
    if key not in index:
        raise KeyError(f"05_subset wrote no subset {key!r} (it has {sorted(index)})")
    return load_subset(stage.upstream("05_subset", index[key]))["prompt_ids"]
