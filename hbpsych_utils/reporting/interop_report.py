"""The ``filter-results`` report: a subset (released or a local file), and per model and subset
n, the clipped mean with a seeded percentile bootstrap interval (the study's statistic, from
:mod:`hbpsych_utils.evaluation.scoring`) and the subset ids the input lacks or left unscored,
as text or JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hbpsych_utils import study
from hbpsych_utils.construction import subset as subset_mod
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.reporting.interop_records import (
    ConversationScore,
    InputSummary,
    InteropError,
    LoadedResults,
    interval_end,
)


@dataclass(frozen=True)
class Subset:
    key: str
    """What the user asked for: ``v1``, ``v2``, ``hard`` or the path given."""
    name: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class SubsetReport:
    model: str
    subset: str
    subset_name: str
    subset_size: int
    n: int
    """Subset conversations found in the input with a score."""
    clipped_mean: float | None
    ci_low: float | None
    ci_high: float | None
    missing: tuple[str, ...]
    """Subset ids absent from the input."""
    unscored: tuple[str, ...]
    """Subset ids in the input without a usable score."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "subset": self.subset, "subset_name": self.subset_name,
            "subset_size": self.subset_size, "n": self.n, "clipped_mean": self.clipped_mean,
            "ci_low": self.ci_low, "ci_high": self.ci_high,
            "n_missing": len(self.missing), "missing": list(self.missing),
            "n_unscored": len(self.unscored), "unscored": list(self.unscored),
        }


def resolve_subset(spec: str) -> Subset:
    """``v1``, ``v2`` or ``hard`` (the released subsets, fetched and hash-checked), or a local
    subset JSON with ``prompt_ids`` (its ``prompt_id_sha256`` is checked when present), read by
    :func:`hbpsych_utils.construction.subset.load_subset` like every subset file."""
    if spec in study.SUBSET_ARTIFACTS:
        path = sources.fetch(study.SUBSET_ARTIFACTS[spec])
    else:
        path = Path(spec)
        if not path.is_file():
            raise InteropError(
                f"subset {spec!r}: neither a released subset "
                f"({', '.join(study.SUBSET_ARTIFACTS)}) nor an existing subset JSON file"
            )
    try:
        data = subset_mod.load_subset(path)
    except ValueError as exc:
        raise InteropError(str(exc)) from None
    ids = data["prompt_ids"]
    if len(set(ids)) != len(ids):
        raise InteropError(f"{path}: field 'prompt_ids': repeated ids")
    name = data.get("name")
    return Subset(spec, name if isinstance(name, str) else path.stem, tuple(sorted(ids)))


def subset_argument(text: str) -> str:
    """A ``--subset`` value: a released subset's key or an existing file (what
    :func:`resolve_subset` then reads), else a one-line usage error."""
    if text in study.SUBSET_ARTIFACTS or Path(text).is_file():
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a released subset ({', '.join(study.SUBSET_ARTIFACTS)}) nor an "
        "existing subset JSON file")


def subset_report(
    model: str,
    scores: Mapping[str, ConversationScore],
    subset: Subset,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int,
    level: float,
) -> SubsetReport:
    """One model on one subset: clipped mean and seeded percentile bootstrap over the
    subset conversations it has scores for."""
    missing = tuple(i for i in subset.ids if i not in scores)
    unscored = tuple(i for i in subset.ids if i in scores and scores[i].score is None)
    values = [scores[i].score for i in subset.ids if i in scores and scores[i].score is not None]
    est: float | None = None
    lo = hi = None
    if values:
        ci = scoring.bootstrap_ci(values, n_resamples=n_resamples, seed=seed, level=level)
        est, lo, hi = ci.estimate, interval_end(ci.low), interval_end(ci.high)
    return SubsetReport(model, subset.key, subset.name, len(subset.ids), len(values), est, lo,
                        hi, missing, unscored)


def filter_results(
    results: LoadedResults,
    subsets: Iterable[Subset],
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int,
    level: float,
) -> list[SubsetReport]:
    """A report per model (sorted) and subset (in the order given)."""
    subsets = list(subsets)
    return [
        subset_report(m, results.by_model[m], s, n_resamples=n_resamples, seed=seed, level=level)
        for m in sorted(results.by_model)
        for s in subsets
    ]


def score_text(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def interval_text(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return f"no interval ({scoring.ONE_CONVERSATION})"
    return f"[{score_text(low)}, {score_text(high)}]"


def format_text(
    reports: Sequence[SubsetReport], inputs: Sequence[InputSummary], *, n_resamples: int,
    seed: int, level: float,
) -> str:
    lines = []
    for inp in inputs:
        lines.append(f"input {inp.path}: {inp.format}, {inp.records} record(s), "
                     f"model(s) {', '.join(inp.models)}"
                     + (f"; {inp.run.describe()}" if inp.run is not None else ""))
    lines.append(f"clipped mean over the subset conversations found, {round(level * 100)}% "
                 f"percentile bootstrap ({n_resamples} resamples, seed {seed})")
    model = None
    for r in reports:
        if r.model != model:
            model = r.model
            lines.append(f"\n{model}")
        head = f"  {r.subset_name}: n = {r.n} of {r.subset_size}"
        if r.clipped_mean is None:
            body = "no scored conversation of this subset in the input"
        else:
            body = f"clipped mean {score_text(r.clipped_mean)} {interval_text(r.ci_low, r.ci_high)}"
        tail = f"{len(r.missing)} missing"
        if r.unscored:
            tail += f", {len(r.unscored)} unscored"
        lines.append(f"{head}, {body}; {tail}")
    return "\n".join(lines)


def reports_json(
    reports: Sequence[SubsetReport], inputs: Sequence[InputSummary], *, n_resamples: int,
    seed: int, level: float,
) -> dict[str, Any]:
    return {
        "inputs": [{"path": i.path, "format": i.format, "models": list(i.models),
                    "records": i.records, **i.details,
                    "run": i.run.as_dict() if i.run is not None else None} for i in inputs],
        "n_resamples": n_resamples,
        "seed": seed,
        "level": level,
        "reports": [r.as_dict() for r in reports],
    }
