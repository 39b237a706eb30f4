"""HealthBench-Psych and Psych-Hard scores from per-conversation results a lab already has.

The subsets are lists of HealthBench ``prompt_id``s, so anyone who ran HealthBench can report
them by filtering their own per-conversation scores: no new generation, no new grading
(METHODS.md section 9). This module reads three layouts, filters them to a subset and reports,
per model and subset, n, the clipped mean with a seeded 95% percentile bootstrap interval (via
:mod:`hbpsych_utils.evaluation.scoring`, so the statistic is the study's), and the subset ids
the input lacks. Command line: ``python -m hbpsych_utils filter-results INPUT ...``.

Formats (``--format auto`` tells them apart by content and file extension):

``simple-evals``
    The ``<eval>_<model>_<YYYYmmdd_HHMMSS>[_DEBUG]_allresults.json`` that openai/simple-evals'
    ``simple_evals.py`` writes for ``--eval=healthbench`` (or ``_hard``/``_consensus``): one JSON
    object ``{score, metrics, htmls, convos, metadata}``. ``metadata.example_level_metadata``
    holds one entry per graded conversation; ``healthbench_eval.py`` puts the conversation's
    ``prompt_id`` and its unclipped ``score`` (met points / positive points) there, beside
    ``usage``, ``rubric_items``, ``prompt``, ``completion`` and ``completion_id``. The file does
    not name the model inside: it is taken from the file name (``--model`` overrides). An entry
    without ``prompt_id`` cannot be mapped to the subset and is an error. A run with
    ``--n-repeats`` > 1 lists each conversation more than once: also an error (one score each).

``inspect``
    A UK AISI Inspect eval log of inspect_evals' ``healthbench`` / ``healthbench_hard`` /
    ``healthbench_consensus`` task, read with ``json`` and ``zipfile`` only (Inspect need not be
    installed): a ``.eval`` zip (``header.json``, or ``_journal/start.json`` while a run is in
    progress, plus one ``samples/<id>_epoch_<n>.json`` per sample) or a ``.json`` log (one
    ``EvalLog`` object whose ``samples`` list holds the same sample objects). The model is
    ``eval.model``. A sample's ``id`` is the HealthBench ``prompt_id`` (inspect_evals also keeps
    it as ``metadata.prompt_id``, which wins when present). Its ``scores`` map a scorer name to
    a ``Score``; inspect_evals registers the HealthBench scorer as ``_scorer``, whose ``value``
    is ``{healthbench_score, criteria_met, total_criteria, ...}`` since inspect_evals 1.1.0 and a
    bare number before. The score used is ``healthbench_score`` (or the number). ``--scorer``
    picks a scorer when a log has several. A sample without scores (it errored) or with a NaN
    value (``Score.unscored()``) is reported as *unscored*. More than one epoch per sample is an
    error: the report takes one score per conversation.

``hbpsych``
    This compendium's per-conversation score export: JSONL (or CSV with a header), one record
    per (judge, candidate, conversation) with fields ``prompt_id``, ``candidate``, ``judge``,
    ``score`` (a number; ``null``/empty = that judge gave no verdict). Other fields are ignored.
    The per-conversation score of a candidate is the panel score: the equal-weight mean over the
    judges of the input, on the conversations every one of them scored
    (:func:`hbpsych_utils.evaluation.scoring.panel_conversation_scores`); the others are
    *unscored*. The
    study's responses JSONL (``model, prompt_id, text, ...``) holds replies, not scores: passing
    it is an error that says so.

Every input's prompt ids must be HealthBench ids (the 5,000 of the released screen); a record
that is malformed, scored above 1 (impossible in HealthBench, usually a percentage) or repeated
is an error naming the file, the record and the field. One file may hold several models (the
hbpsych layout); several files may be given; each model gets its own report.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
import zipfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_mod
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import scoring

FORMATS = ("simple-evals", "inspect", "hbpsych")
SUBSET_ARTIFACTS = study.SUBSET_ARTIFACTS
DEFAULT_SUBSETS = ("v1", "hard")
"""HealthBench-Psych v1 and HealthBench-Psych-Hard, the two the study reports."""

INSPECT_HEALTHBENCH_SCORER = "_scorer"
"""The name inspect_evals' HealthBench scorer gets in a log (its nested function's name)."""

_MAX_SCORE = 1.0 + 1e-9


class InteropError(ValueError):
    """Unreadable or inconsistent results; the message names the file, record and field."""


@dataclass(frozen=True)
class ConversationScore:
    """One model's score on one conversation, with where it came from (for error messages)."""

    model: str
    prompt_id: str
    score: float | None
    """Unclipped per-conversation score; ``None`` = in the input but not scored."""
    where: str


@dataclass(frozen=True)
class InputSummary:
    path: str
    format: str
    models: tuple[str, ...]
    records: int
    details: dict[str, Any] = field(default_factory=dict)


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


# --------------------------------------------------------------------------------------------
# Small validators


def _number(value: Any, where: str, name: str, *, allow_none: bool = False) -> float | None:
    """A finite per-conversation score; bools and strings are refused (they are not scores)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InteropError(f"{where}: field '{name}': expected a number, got {value!r}")
    x = float(value)
    if math.isnan(x) and allow_none:
        return None
    if not math.isfinite(x):
        raise InteropError(f"{where}: field '{name}': not a finite number: {value!r}")
    if x > _MAX_SCORE:
        raise InteropError(
            f"{where}: field '{name}': {x} is above 1, impossible for a HealthBench score "
            "(met points / positive points); is it a percentage?"
        )
    return x


def _prompt_id(value: Any, where: str, name: str = "prompt_id") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InteropError(f"{where}: field '{name}': expected a non-empty string, got {value!r}")
    return value.strip()


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InteropError(f"{path}: not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InteropError(f"{path}: not valid JSON: {exc}") from None


# --------------------------------------------------------------------------------------------
# simple-evals

_SIMPLE_EVALS_NAME = re.compile(
    r"^(?P<eval>healthbench(?:_hard|_consensus)?)_(?P<model>.+?)"
    r"_(?P<date>\d{8}_\d{4}(?:\d{2})?)(?:_DEBUG)?_allresults\.json$"
)


def simple_evals_model_name(path: Path | str) -> str:
    """Model name from simple-evals' ``<eval>_<model>_<date>[_DEBUG]_allresults.json`` name.

    Falls back to the file name without ``_allresults.json`` when it does not follow the pattern.
    """
    name = Path(path).name
    m = _SIMPLE_EVALS_NAME.match(name)
    if m:
        return m.group("model")
    return re.sub(r"(_allresults)?\.json$", "", name)


def _is_simple_evals(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("metadata"), dict)
        and "example_level_metadata" in data["metadata"]
    )


def read_simple_evals(
    path: Path | str, model: str | None = None, *, data: Any = None
) -> list[ConversationScore]:
    """Per-conversation scores of a simple-evals HealthBench ``*_allresults.json``."""
    path = Path(path)
    if data is None:
        data = _load_json(path)
    if not _is_simple_evals(data):
        raise InteropError(
            f"{path}: field 'metadata.example_level_metadata' is missing: not a simple-evals "
            "HealthBench *_allresults.json"
        )
    items = data["metadata"]["example_level_metadata"]
    if not isinstance(items, list):
        raise InteropError(f"{path}: field 'metadata.example_level_metadata': expected a list")
    model = model or simple_evals_model_name(path)
    out = []
    for i, ex in enumerate(items):
        where = f"{path}: metadata.example_level_metadata[{i}]"
        if not isinstance(ex, dict):
            raise InteropError(f"{where}: expected an object, got {type(ex).__name__}")
        if "prompt_id" not in ex:
            raise InteropError(
                f"{where}: field 'prompt_id' is missing. This simple-evals output does not record "
                "which conversation each score belongs to, so it cannot be filtered to a "
                "subset; re-run with a healthbench_eval.py that stores prompt_id in "
                "example_level_metadata, or export the scores in the hbpsych layout"
            )
        pid = _prompt_id(ex["prompt_id"], where)
        if "score" not in ex:
            raise InteropError(f"{where}: field 'score' is missing")
        out.append(ConversationScore(model, pid, _number(ex["score"], where, "score"), where))
    return out


# --------------------------------------------------------------------------------------------
# Inspect


def _is_inspect_json(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("eval"), dict) and "status" in data


def _pick_scorer(scores: Mapping[str, Any], scorer: str | None, where: str) -> str:
    names = sorted(scores)
    if scorer is not None:
        if scorer not in scores:
            raise InteropError(f"{where}: field 'scores': no scorer {scorer!r} (has {names})")
        return scorer
    hb = [
        k for k, v in scores.items()
        if isinstance(v, dict) and isinstance(v.get("value"), dict)
        and "healthbench_score" in v["value"]
    ]
    if len(hb) == 1:
        return hb[0]
    if len(scores) == 1:
        return names[0]
    for k in (INSPECT_HEALTHBENCH_SCORER, "healthbench_scorer"):
        if k in scores:
            return k
    raise InteropError(
        f"{where}: field 'scores': several scorers {names} and none is recognisably "
        "HealthBench's; choose one with --scorer"
    )


def _inspect_sample(
    sample: Any, model: str, scorer: str | None, where: str
) -> tuple[ConversationScore, Any, int]:
    if not isinstance(sample, dict):
        raise InteropError(f"{where}: expected a sample object, got {type(sample).__name__}")
    sid = sample.get("id")
    epoch = sample.get("epoch", 1)
    if isinstance(sid, str | int) and not isinstance(sid, bool):
        where = f"{where} (id {sid!r}, epoch {epoch})"
    meta = sample.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InteropError(f"{where}: field 'metadata': expected an object")
    if meta.get("prompt_id") is not None:
        pid = _prompt_id(meta["prompt_id"], where, "metadata.prompt_id")
    else:
        pid = _prompt_id(sid, where, "id")
    scores = sample.get("scores")
    if not scores:
        return ConversationScore(model, pid, None, where), sid, epoch
    if not isinstance(scores, dict):
        raise InteropError(f"{where}: field 'scores': expected an object")
    name = _pick_scorer(scores, scorer, where)
    entry = scores[name]
    if not isinstance(entry, dict) or "value" not in entry:
        raise InteropError(f"{where}: field 'scores.{name}.value' is missing")
    value = entry["value"]
    field_name = f"scores.{name}.value"
    if isinstance(value, dict):
        if "healthbench_score" not in value:
            raise InteropError(
                f"{where}: field '{field_name}': no 'healthbench_score' key (has {sorted(value)})"
            )
        value = value["healthbench_score"]
        field_name += ".healthbench_score"
    score = _number(value, where, field_name, allow_none=True)
    return ConversationScore(model, pid, score, where), sid, epoch


def _inspect_header(eval_spec: Any, path: Path, model: str | None) -> tuple[str, dict[str, Any]]:
    if not isinstance(eval_spec, dict):
        raise InteropError(f"{path}: field 'eval': expected an object (the log's EvalSpec)")
    task = str(eval_spec.get("task", ""))
    if "meta_eval" in task:
        raise InteropError(
            f"{path}: field 'eval.task' is {task!r}: the meta-evaluation grades the judge, not "
            "a model, and has no per-conversation model scores"
        )
    if model is None:
        model = eval_spec.get("model")
        if not isinstance(model, str) or not model:
            raise InteropError(f"{path}: field 'eval.model': missing; pass --model")
    return model, {"task": task}


def _check_epochs(records: list[tuple[ConversationScore, Any, int]], path: Path) -> None:
    epochs: dict[Any, list[int]] = {}
    for _, sid, epoch in records:
        epochs.setdefault(sid, []).append(epoch)
    multi = {k: v for k, v in epochs.items() if len(v) > 1}
    if multi:
        sid, eps = next(iter(sorted(multi.items(), key=lambda kv: str(kv[0]))))
        raise InteropError(
            f"{path}: sample {sid!r} appears {len(eps)} times (epochs {sorted(eps)}); "
            f"{len(multi)} sample(s) have several epochs. The report takes one score per "
            "conversation: use a log run with one epoch"
        )


def read_inspect(
    path: Path | str, model: str | None = None, *, scorer: str | None = None, data: Any = None
) -> tuple[list[ConversationScore], dict[str, Any]]:
    """Per-conversation scores of an Inspect HealthBench log (``.eval`` zip or ``.json``)."""
    path = Path(path)
    records: list[tuple[ConversationScore, Any, int]] = []
    if data is None and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                names = set(zf.namelist())
                head_name = next(
                    (n for n in ("header.json", "_journal/start.json") if n in names), None
                )
                if head_name is None:
                    raise InteropError(
                        f"{path}: neither header.json nor _journal/start.json: not an Inspect "
                        ".eval log"
                    )
                header = _zip_json(zf, head_name, path)
                eval_model, info = _inspect_header(
                    header.get("eval") if isinstance(header, dict) else None, path, model
                )
                info["status"] = header.get("status") if isinstance(header, dict) else None
                sample_names = sorted(
                    n for n in names if n.startswith("samples/") and n.endswith(".json")
                )
                for n in sample_names:
                    where = f"{path}: {n}"
                    records.append(_inspect_sample(_zip_json(zf, n, path), eval_model, scorer,
                                                   where))
        except zipfile.BadZipFile as exc:
            raise InteropError(f"{path}: damaged .eval zip: {exc}") from None
    else:
        if data is None and path.suffix.lower() == ".eval":
            raise InteropError(f"{path}: not a zip archive: a damaged or truncated .eval log")
        if data is None:
            data = _load_json(path)
        if not _is_inspect_json(data):
            raise InteropError(
                f"{path}: fields 'eval' and 'status' are missing: not an Inspect eval log"
            )
        eval_model, info = _inspect_header(data["eval"], path, model)
        info["status"] = data.get("status")
        samples = data.get("samples")
        if samples is None:
            raise InteropError(
                f"{path}: field 'samples' is missing or null: a header-only log (or one written "
                "without samples) has no per-conversation scores"
            )
        if not isinstance(samples, list):
            raise InteropError(f"{path}: field 'samples': expected a list")
        for i, s in enumerate(samples):
            records.append(_inspect_sample(s, eval_model, scorer, f"{path}: samples[{i}]"))
    if not records:
        raise InteropError(f"{path}: the log holds no samples")
    _check_epochs(records, path)
    return [r for r, _, _ in records], info


def _zip_json(zf: zipfile.ZipFile, name: str, path: Path) -> Any:
    try:
        return json.loads(zf.read(name).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InteropError(f"{path}: {name}: not valid JSON: {exc}") from None


# --------------------------------------------------------------------------------------------
# The compendium's own layout

HBPSYCH_FIELDS = ("prompt_id", "candidate", "judge", "score")


def _hbpsych_rows(path: Path) -> list[tuple[dict[str, Any], str]]:
    """Raw (record, where) pairs of a JSONL or CSV score export."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InteropError(f"{path}: not UTF-8 text ({exc})") from None
    rows: list[tuple[dict[str, Any], str]] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        missing = [f for f in HBPSYCH_FIELDS if f not in (reader.fieldnames or [])]
        if missing:
            raise InteropError(f"{path}: header lacks column(s) {missing}")
        for lineno, rec in enumerate(reader, start=2):
            raw = (rec.get("score") or "").strip()
            try:
                score: Any = None if raw == "" else float(raw)
            except ValueError:
                raise InteropError(
                    f"{path}:{lineno}: field 'score': not a number: {raw!r}"
                ) from None
            rows.append(({**rec, "score": score}, f"{path}:{lineno}"))
        return rows
    from hbpsych_utils.core import jsonl

    return [(rec, f"{path}:{lineno}") for lineno, rec in jsonl.records(path, error=InteropError)]


def read_hbpsych(path: Path | str) -> pd.DataFrame:
    """The score export as a table ``judge, candidate, prompt_id, score, where`` (NaN = none)."""
    path = Path(path)
    out = []
    for rec, where in _hbpsych_rows(path):
        if "score" not in rec and "text" in rec and "model" in rec:
            raise InteropError(
                f"{where}: a responses record (model, prompt_id, text): it holds replies, not "
                "scores. Pass the grades/scores export (prompt_id, candidate, judge, score)"
            )
        for f in HBPSYCH_FIELDS:
            if f not in rec:
                raise InteropError(f"{where}: field '{f}' is missing")
        score = _number(rec["score"], where, "score", allow_none=True)
        cand = _prompt_id(rec["candidate"], where, "candidate")
        judge = _prompt_id(rec["judge"], where, "judge")
        out.append({"judge": judge, "candidate": cand,
                    "prompt_id": _prompt_id(rec["prompt_id"], where),
                    "score": float("nan") if score is None else score, "where": where})
    if not out:
        raise InteropError(f"{path}: no records")
    return pd.DataFrame(out, columns=[*scoring.SCORE_COLUMNS, "where"])


def hbpsych_panel_scores(rows: pd.DataFrame) -> list[ConversationScore]:
    """Panel score per (candidate, conversation) over every judge of ``rows``.

    A conversation that some judge did not score is kept as unscored, so it is reported rather
    than silently dropped; a candidate that a judge never scored is an error.
    """
    key = ["judge", "candidate", "prompt_id"]
    dup = rows.duplicated(key, keep=False)
    if dup.any():
        d = rows[dup].sort_values(key, kind="mergesort")
        first, second = d.iloc[0], d.iloc[1]
        raise InteropError(
            f"{second['where']}: duplicate record for judge {first['judge']}, candidate "
            f"{first['candidate']}, prompt_id {first['prompt_id']} (first at {first['where']})"
        )
    judges = sorted(rows["judge"].unique())
    out = []
    for cand in sorted(rows["candidate"].unique()):
        sub = rows[rows["candidate"] == cand]
        try:
            panel = scoring.panel_conversation_scores(sub, cand, judges)
        except scoring.ScoringError as exc:
            raise InteropError(f"{sub.iloc[0]['where'].rsplit(':', 1)[0]}: {exc}") from None
        where = sub.groupby("prompt_id")["where"].first()
        for pid in sorted(sub["prompt_id"].unique()):
            score = float(panel[pid]) if pid in panel.index else None
            out.append(ConversationScore(cand, pid, score, where[pid]))
    return out


# --------------------------------------------------------------------------------------------
# Loading any input


def detect_format(path: Path | str) -> str:
    """``simple-evals``, ``inspect`` or ``hbpsych``, judged from the content."""
    path = Path(path)
    if not path.is_file():
        raise InteropError(f"{path}: no such file")
    if zipfile.is_zipfile(path) or path.suffix.lower() == ".eval":
        return "inspect"
    if path.suffix.lower() in (".jsonl", ".csv"):
        return "hbpsych"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "hbpsych"  # not one JSON document: JSON lines, or an error reported there
    if _is_simple_evals(data):
        return "simple-evals"
    if _is_inspect_json(data):
        return "inspect"
    if isinstance(data, dict) and set(HBPSYCH_FIELDS) <= set(data):
        return "hbpsych"  # a one-line JSONL file
    raise InteropError(
        f"{path}: not a recognised results file (simple-evals *_allresults.json, Inspect "
        ".eval/.json log, or the hbpsych scores JSONL); name the format with --format"
    )


@dataclass
class LoadedResults:
    by_model: dict[str, dict[str, ConversationScore]]
    inputs: list[InputSummary]


def load_results(
    paths: Sequence[Path | str],
    fmt: str = "auto",
    *,
    model: str | None = None,
    scorer: str | None = None,
) -> LoadedResults:
    """Read every input, one score per (model, conversation); a repeat anywhere is an error.

    ``model`` renames the model of simple-evals and Inspect inputs (the hbpsych layout names its
    candidates itself). hbpsych files are pooled before the panel is formed, so judges may come
    in separate files.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise InteropError(f"unknown format {fmt!r}; one of auto, {', '.join(FORMATS)}")
    records: list[ConversationScore] = []
    inputs: list[InputSummary] = []
    hb_frames: list[pd.DataFrame] = []
    hb_paths: list[Path] = []
    for p in map(Path, paths):
        kind = detect_format(p) if fmt == "auto" else fmt
        if not p.is_file():
            raise InteropError(f"{p}: no such file")
        if kind == "simple-evals":
            recs = read_simple_evals(p, model)
            details: dict[str, Any] = {}
            m = _SIMPLE_EVALS_NAME.match(p.name)
            if m:
                details["eval"] = m.group("eval")
        elif kind == "inspect":
            recs, details = read_inspect(p, model, scorer=scorer)
        else:
            frame = read_hbpsych(p)
            hb_frames.append(frame)
            hb_paths.append(p)
            inputs.append(InputSummary(str(p), kind, tuple(sorted(frame["candidate"].unique())),
                                       len(frame), {"judges": sorted(frame["judge"].unique())}))
            continue
        records.extend(recs)
        inputs.append(InputSummary(str(p), kind, tuple(sorted({r.model for r in recs})),
                                   len(recs), details))
    if hb_frames:
        records.extend(hbpsych_panel_scores(pd.concat(hb_frames, ignore_index=True)))
    by_model: dict[str, dict[str, ConversationScore]] = {}
    for r in records:
        seen = by_model.setdefault(r.model, {})
        if r.prompt_id in seen:
            raise InteropError(
                f"{r.where}: duplicate result for model {r.model}, prompt_id {r.prompt_id} "
                f"(first at {seen[r.prompt_id].where}); the report takes one score per "
                "conversation (simple-evals --n-repeats, reference-completion runs and "
                "repeated inputs list one more than once)"
            )
        seen[r.prompt_id] = r
    return LoadedResults(by_model, inputs)


def check_known_ids(results: LoadedResults, known_ids: Collection[str]) -> None:
    """Every prompt id must be a HealthBench conversation id."""
    known = set(known_ids)
    unknown = [r for recs in results.by_model.values() for r in recs.values()
               if r.prompt_id not in known]
    if unknown:
        r = unknown[0]
        raise InteropError(
            f"{r.where}: field 'prompt_id': {r.prompt_id!r} is not a HealthBench conversation "
            f"id ({len(unknown)} unknown id(s) in the input; the {len(known)} known ids are "
            "those of the released screen)"
        )


def healthbench_ids() -> list[str]:
    """The 5,000 HealthBench ids (every prompt_id of the released screen)."""
    return corpus.screening_ids(sources.fetch("screening_labels"))


# --------------------------------------------------------------------------------------------
# Subsets and the report


def load_subset(spec: str) -> Subset:
    """``v1``, ``v2`` or ``hard`` (the released subsets, fetched and hash-checked), or a local
    subset JSON with ``prompt_ids`` (its ``prompt_id_sha256`` is checked when present)."""
    if spec in SUBSET_ARTIFACTS:
        path = sources.fetch(SUBSET_ARTIFACTS[spec])
    else:
        path = Path(spec)
        if not path.is_file():
            raise InteropError(
                f"subset {spec!r}: neither a released subset ({', '.join(SUBSET_ARTIFACTS)}) "
                "nor an existing subset JSON file"
            )
    try:
        data = subset_mod.load_subset(path)
    except json.JSONDecodeError as exc:
        raise InteropError(f"{path}: not valid JSON: {exc}") from None
    except ValueError as exc:
        raise InteropError(str(exc)) from None
    ids = data["prompt_ids"]
    if len(set(ids)) != len(ids):
        raise InteropError(f"{path}: field 'prompt_ids': repeated ids")
    name = data.get("name") if isinstance(data.get("name"), str) else path.stem
    return Subset(spec, name, tuple(sorted(ids)))


def subset_report(
    model: str,
    scores: Mapping[str, ConversationScore],
    subset: Subset,
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int = 0,
    level: float = study.CI_LEVEL,
) -> SubsetReport:
    """One model on one subset: clipped mean and seeded percentile bootstrap over the
    subset conversations it has scores for."""
    missing = tuple(i for i in subset.ids if i not in scores)
    unscored = tuple(i for i in subset.ids if i in scores and scores[i].score is None)
    values = [scores[i].score for i in subset.ids if i in scores and scores[i].score is not None]
    if values:
        ci = scoring.bootstrap_ci(values, n_resamples=n_resamples, seed=seed, level=level)
        est, lo, hi = ci.estimate, ci.low, ci.high
    else:
        est = lo = hi = None
    return SubsetReport(model, subset.key, subset.name, len(subset.ids), len(values), est, lo,
                        hi, missing, unscored)


def filter_results(
    results: LoadedResults,
    subsets: Iterable[Subset],
    *,
    n_resamples: int = study.N_RESAMPLES,
    seed: int = 0,
    level: float = study.CI_LEVEL,
) -> list[SubsetReport]:
    """A report per model (sorted) and subset (in the order given)."""
    subsets = list(subsets)
    return [
        subset_report(m, results.by_model[m], s, n_resamples=n_resamples, seed=seed, level=level)
        for m in sorted(results.by_model)
        for s in subsets
    ]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def format_text(
    reports: Sequence[SubsetReport], inputs: Sequence[InputSummary], *, n_resamples: int,
    seed: int, level: float = study.CI_LEVEL,
) -> str:
    lines = []
    for inp in inputs:
        lines.append(f"input {inp.path}: {inp.format}, {inp.records} record(s), "
                     f"model(s) {', '.join(inp.models)}")
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
            body = (f"clipped mean {_fmt(r.clipped_mean)} "
                    f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]")
        tail = f"{len(r.missing)} missing"
        if r.unscored:
            tail += f", {len(r.unscored)} unscored"
        lines.append(f"{head}, {body}; {tail}")
    return "\n".join(lines)


def reports_json(
    reports: Sequence[SubsetReport], inputs: Sequence[InputSummary], *, n_resamples: int,
    seed: int, level: float = study.CI_LEVEL,
) -> dict[str, Any]:
    return {
        "inputs": [{"path": i.path, "format": i.format, "models": list(i.models),
                    "records": i.records, **i.details} for i in inputs],
        "n_resamples": n_resamples,
        "seed": seed,
        "level": level,
        "reports": [r.as_dict() for r in reports],
    }


# --------------------------------------------------------------------------------------------
# Command line


def _default_seed() -> int:
    from hbpsych_utils.core import config

    return int(config.Profile.model_fields["seed"].default)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m hbpsych_utils filter-results",
        description="Report HealthBench-Psych / Psych-Hard from per-conversation HealthBench "
        "results you already have (no generation, no grading).",
    )
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="simple-evals *_allresults.json, Inspect .eval/.json log, or hbpsych "
                    "scores .jsonl/.csv")
    ap.add_argument("--format", default="auto", choices=("auto", *FORMATS))
    ap.add_argument("--subset", action="append", metavar="v1|v2|hard|PATH.json",
                    help="subset to report (repeatable; default: v1 and hard)")
    ap.add_argument("--seed", type=int, default=None,
                    help="bootstrap seed (default: the default profile's seed)")
    ap.add_argument("--resamples", type=int, default=study.N_RESAMPLES)
    ap.add_argument("--json", action="store_true", help="print JSON (with the missing ids)")
    ap.add_argument("--model", default=None,
                    help="model name for simple-evals/Inspect inputs (default: from the file)")
    ap.add_argument("--scorer", default=None,
                    help="Inspect scorer to read when a log has several")
    return ap


def main(argv: list[str] | None = None) -> int:
    """``filter-results``: 0 on success, 1 on bad input, 2 on bad usage."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse's own exit (usage error or --help)
        return int(exc.code or 0)
    if args.resamples < 1:
        print("error: --resamples must be at least 1", file=sys.stderr)
        return 2
    seed = _default_seed() if args.seed is None else args.seed
    try:
        results = load_results(args.inputs, args.format, model=args.model, scorer=args.scorer)
        check_known_ids(results, healthbench_ids())
        subsets = [load_subset(s) for s in (args.subset or DEFAULT_SUBSETS)]
        reports = filter_results(results, subsets, n_resamples=args.resamples, seed=seed)
    except (InteropError, sources.ArtifactError, corpus.CorpusError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(reports_json(reports, results.inputs, n_resamples=args.resamples,
                                      seed=seed), indent=2))
    else:
        print(format_text(reports, results.inputs, n_resamples=args.resamples, seed=seed))
    return 0
