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
    simple-evals writes the file only after every example was generated and graded (a failure
    raises and writes nothing), so its run is complete unless the file's own count
    (``metrics["score:n_samples"]`` or ``overall_score:n_samples``) disagrees with its entries.

``inspect``
    A UK AISI Inspect eval log of inspect_evals' ``healthbench`` / ``healthbench_hard`` /
    ``healthbench_consensus`` task, or of this package's ``healthbench_psych`` task (whose
    ``healthbench_score`` is the panel score), read with ``json``, ``zipfile`` and ``zstandard``
    (Inspect need not be installed; recent Inspect compresses members with Zstandard): a ``.eval``
    zip (``header.json``, or ``_journal/start.json`` while a run is in progress, plus one
    ``samples/<id>_epoch_<n>.json`` per sample) or a ``.json`` log (one ``EvalLog`` object whose
    ``samples`` list holds the same sample objects). The model is ``eval.model``. A sample's ``id``
    is the HealthBench ``prompt_id`` (inspect_evals also keeps it as ``metadata.prompt_id``, which
    wins when present). Its ``scores`` map a scorer name to a ``Score``; inspect_evals registers the
    HealthBench scorer as ``_scorer``, whose ``value`` is ``{healthbench_score, criteria_met,
    total_criteria, ...}`` since version 1.1.0 of that task (its changelog, 2025-12-10; the
    task is at version 3-B in the inspect_evals 0.26.0 release) and a bare number before. The
    score used is ``healthbench_score`` (or the number). ``--scorer`` picks a scorer when a log
    has several. A sample without scores (it errored: its ``error`` is set) or with a NaN value
    (``Score.unscored()``) is reported as *unscored*. More than one epoch per sample is an error:
    the report takes one score per conversation. The log's ``status`` says how the run ended:
    ``success``, ``error`` (the run failed; ``error.message`` says why), ``cancelled``, or
    ``started`` (still running, or stopped before Inspect recorded how it ended).

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

``--by-tag`` also reports, per model and subset, a score for every rubric axis and theme, with
simple-evals' per-tag semantics and the study's statistics (:mod:`~hbpsych_utils.evaluation.
breakdowns`, the same code the compendium's chapter 14 uses), for inputs that carry
per-criterion results: simple-evals' ``example_level_metadata[].rubric_items`` (criterion,
points, tags, ``criteria_met``); Inspect samples with the rubric in ``metadata.rubrics`` and the
verdicts in the HealthBench scorer's ``Score.metadata.detailed_results`` (``met`` or
``criteria_met`` per criterion), its ``Score.value`` (``_crit_<i>_met``), or this package's
task's ``Score.metadata.verdicts`` (per judge, and the panel). Themes come from
``metadata.example_tags``; simple-evals does not record them, so they are taken from the
HealthBench corpus for the conversations it holds (:func:`tag_reports`).

Every input's prompt ids must be HealthBench ids (the 5,000 of the released screen); a record
that is malformed, scored above 1 (impossible in HealthBench, usually a percentage) or repeated
is an error naming the file, the record and the field. Each layout's records are checked by a
pydantic model (:class:`SimpleEvalsExample`, :class:`InspectSample` and
:class:`HealthBenchValue`, :class:`HbpsychScore`); the error lists every bad field of the
record. One file may hold several models (the hbpsych layout); several files may be given; each
model gets its own report.

A run that did not finish is not a HealthBench-Psych result: each input's :class:`RunStatus`
(complete, failed, cancelled or incomplete, with the samples scored and errored) is reported,
and the command exits with :data:`EXIT_INCOMPLETE` without a report unless
``--allow-incomplete`` is given.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import struct
import sys
import zipfile
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pandas as pd
import zstandard
from pydantic import ConfigDict, Field, PlainValidator, TypeAdapter, model_validator

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_mod
from hbpsych_utils.core import arguments, jsonl, records, sources
from hbpsych_utils.core.wording import count
from hbpsych_utils.core.writes import describe_os_error
from hbpsych_utils.evaluation import breakdowns, grading, scoring
from hbpsych_utils.reporting.vocabulary import level_text

FORMATS = ("simple-evals", "inspect", "hbpsych")
DEFAULT_SUBSETS = ("v1", "hard")
"""HealthBench-Psych v1 and HealthBench-Psych-Hard, the two the study reports."""

EXIT_INCOMPLETE = 3
"""``filter-results`` exit code when an input's run failed, was cancelled or did not finish."""

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
    criteria: GradedRubric | None = None
    """The per-criterion results behind the score, when asked for and the input has them."""


RunState = Literal["complete", "failed", "cancelled", "incomplete"]

INSPECT_STATES: dict[str | None, RunState] = {
    "success": "complete", "error": "failed", "cancelled": "cancelled", "started": "incomplete"}
"""An Inspect log's ``status`` as a run state (any other status: incomplete)."""


@dataclass(frozen=True)
class RunStatus:
    """How the run behind an input ended, as its own file records it."""

    state: RunState
    recorded: str | None
    """The tool's own word for it (Inspect's ``status``), when it has one."""
    n_samples: int
    """Samples (conversations) in the file."""
    n_scored: int
    n_errored: int
    """Samples the file marks as errored (Inspect: the sample's ``error``)."""
    error: str | None = None
    """Why the run failed, as the file says (first line, shortened)."""

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def describe(self) -> str:
        """One clause: the state, what the file recorded, and the sample counts."""
        said = f"status {self.recorded!r}" if self.recorded else ""
        if self.error:
            said += (": " if said else "") + self.error
        head = {"complete": "the run completed", "failed": "the run FAILED",
                "cancelled": "the run was CANCELLED",
                "incomplete": "the run did NOT FINISH"}[self.state]
        return (f"{head}{f' ({said})' if said else ''}: {count(self.n_scored, 'sample')} "
                f"scored, {self.n_errored:,} errored, of {self.n_samples:,} in the file")

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "recorded": self.recorded, "n_samples": self.n_samples,
                "n_scored": self.n_scored, "n_errored": self.n_errored, "error": self.error}


@dataclass(frozen=True)
class InputSummary:
    path: str
    format: str
    models: tuple[str, ...]
    records: int
    details: dict[str, Any] = field(default_factory=dict)
    run: RunStatus | None = None
    """How the run behind the file ended (None: the compendium's own score export)."""


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
# Record models: one pydantic model per input layout, errors naming file, record and field


def _score(value: Any) -> float:
    """A finite per-conversation score; bools and strings are refused (they are not scores)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {value!r}")
    if x > _MAX_SCORE:
        raise ValueError(
            f"{x} is above 1, impossible for a HealthBench score (met points / positive "
            "points); is it a percentage?"
        )
    return x


def _score_or_none(value: Any) -> float | None:
    """A score, or ``None`` for a conversation in the input without one (``null``, or NaN:
    Inspect's ``Score.unscored()``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return _score(value)


def _csv_score(value: Any) -> float | None:
    """A CSV cell: empty means no verdict; anything else must read as a number."""
    raw = (value or "").strip()
    if raw == "":
        return None
    try:
        number = float(raw)
    except ValueError:
        raise ValueError(f"not a number: {raw!r}") from None
    return _score_or_none(number)


def _text(value: Any) -> str:
    """A non-empty string (an id or a name), stripped."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value.strip()


def _sample_id(value: Any) -> str | int | None:
    """Inspect's ``EvalSample.id``: a string or an integer."""
    if value is None or (isinstance(value, str | int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"expected a string or an integer, got {value!r}")


Score = Annotated[float, PlainValidator(_score)]
ScoreOrNone = Annotated[float | None, PlainValidator(_score_or_none)]
Text = Annotated[str, PlainValidator(_text)]
_TEXT = TypeAdapter(Text)
_SCORE_OR_NONE = TypeAdapter(ScoreOrNone)


class _Record(records.FileRecord):
    """An input record: the fields the report needs; the many others are ignored. Lax types
    (the scores have their own validators, :data:`Score`), and a missing field's
    ``missing_hints`` say what its absence tells about the file."""

    model_config = ConfigDict(strict=False, extra="ignore", frozen=True)


def _validate(schema: type[_Record] | TypeAdapter[Any], data: Any, where: str,
              *, within: tuple[str | int, ...] = ()) -> Any:
    """``data`` validated by ``schema``, or an :class:`InteropError` that names ``where`` (file
    and record) and every bad field (``records.validate(every=True)``; ``within`` prefixes the
    field path)."""
    return records.validate(schema, data, where, InteropError, every=True, prefix=within)


def _load_json(path: Path) -> Any:
    return records.read_json(path, error=InteropError)  # errors name the file and line


# --------------------------------------------------------------------------------------------
# simple-evals


class SimpleEvalsExample(_Record):
    """One entry of ``metadata.example_level_metadata``, as ``healthbench_eval.py`` writes it."""

    prompt_id: Text
    score: Score
    """Unclipped: met points / positive points."""

    missing_hints: ClassVar[Mapping[str, str]] = {
        "prompt_id": "this simple-evals output does not record which conversation each score "
        "belongs to, so it cannot be filtered to a subset; re-run with a healthbench_eval.py "
        "that stores prompt_id in example_level_metadata, or export the scores in the hbpsych "
        "layout",
    }


class SimpleEvalsMetadata(_Record):
    example_level_metadata: list[Any]
    """One :class:`SimpleEvalsExample` per graded conversation (validated one by one, so an
    error names its index)."""


class SimpleEvalsFile(_Record):
    """A simple-evals ``*_allresults.json``: ``{score, metrics, htmls, convos, metadata}``."""

    metadata: SimpleEvalsMetadata
    metrics: dict[str, Any] | None = None
    """The aggregate metrics; ``score:n_samples`` counts the graded examples."""

    missing_hints: ClassVar[Mapping[str, str]] = {
        name: "not a simple-evals HealthBench *_allresults.json"
        for name in ("metadata", "metadata.example_level_metadata")
    }


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
    path: Path | str, model: str | None = None, *, data: Any = None, criteria: bool = False
) -> list[ConversationScore]:
    """Per-conversation scores of a simple-evals HealthBench ``*_allresults.json`` (with
    ``criteria``, each entry's per-criterion results too: :func:`simple_evals_criteria`)."""
    return _simple_evals(path, model, data, criteria)[0]


_SIMPLE_EVALS_COUNTS = ("score:n_samples", "overall_score:n_samples")
"""Where simple-evals records how many examples it graded (``_aggregate_get_clipped_mean``)."""


def _simple_evals(path: Path | str, model: str | None, data: Any, criteria: bool = False
                  ) -> tuple[list[ConversationScore], RunStatus]:
    path = Path(path)
    if data is None:
        data = _load_json(path)
    doc = _validate(SimpleEvalsFile, data, str(path))
    model = model or simple_evals_model_name(path)
    out = []
    for i, item in enumerate(doc.metadata.example_level_metadata):
        where = f"{path}: metadata.example_level_metadata[{i}]"
        ex = _validate(SimpleEvalsExample, item, where)
        graded = simple_evals_criteria(item, where) if criteria else None
        out.append(ConversationScore(model, ex.prompt_id, ex.score, where, graded))
    counted = next((doc.metrics[k] for k in _SIMPLE_EVALS_COUNTS if k in (doc.metrics or {})),
                   None)
    whole = not isinstance(counted, int | float) or int(counted) == len(out)
    error = None if whole else (f"its metrics count {int(counted)} graded examples, its "
                                f"example_level_metadata holds {len(out)}")
    return out, RunStatus("complete" if whole else "incomplete", None, len(out), len(out), 0,
                          error)


# --------------------------------------------------------------------------------------------
# Inspect


class InspectEvalSpec(_Record):
    """The log's ``eval`` (``EvalSpec``): which task, which model."""

    task: str = ""
    model: str | None = None


class InspectHeader(_Record):
    """A ``.eval`` zip's ``header.json`` (or ``_journal/start.json`` while a run is going)."""

    eval: InspectEvalSpec
    status: str | None = None
    run_error: Any = Field(default=None, alias="error")
    """``error``: the ``EvalError`` of a failed run (``message``, ``traceback``)."""

    missing_hints: ClassVar[Mapping[str, str]] = {"eval": "not an Inspect eval log"}


class InspectLog(InspectHeader):
    """A ``.json`` log: one ``EvalLog`` object holding its samples."""

    status: str | None
    samples: list[Any] | None = None
    """``EvalSample`` objects (validated one by one, so an error names its index)."""

    missing_hints: ClassVar[Mapping[str, str]] = {
        "eval": "not an Inspect eval log", "status": "not an Inspect eval log"}


class InspectScore(_Record):
    """A ``Score``: ``value`` is read only for the scorer the report uses."""

    value: Any


class InspectSampleMetadata(_Record):
    prompt_id: Text | None = None
    """inspect_evals' copy of the HealthBench id; wins over the sample id when present."""


class InspectSample(_Record):
    """An ``EvalSample`` of inspect_evals' HealthBench task (id = HealthBench ``prompt_id``)."""

    id: Annotated[str | int | None, PlainValidator(_sample_id)] = None
    epoch: Annotated[int, Field(strict=True, ge=1)] = 1
    metadata: InspectSampleMetadata | None = None
    scores: dict[str, InspectScore] | None = None
    """Scorer name -> Score; empty or ``null`` when the sample errored (unscored)."""
    sample_error: Any = Field(default=None, alias="error")
    """``error``: the sample's ``EvalError`` when it errored."""


class HealthBenchValue(_Record):
    """``Score.value`` of the HealthBench scorer since version 1.1.0 of inspect_evals'
    healthbench task."""

    model_config = ConfigDict(extra="allow", frozen=True)
    healthbench_score: ScoreOrNone

    @model_validator(mode="before")
    @classmethod
    def _names_the_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "healthbench_score" not in data:
            raise ValueError(f"no 'healthbench_score' key (has {sorted(data)})")
        return data


def _is_inspect_json(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("eval"), dict) and "status" in data


def _pick_scorer(scores: Mapping[str, InspectScore], scorer: str | None, where: str) -> str:
    names = sorted(scores)
    if scorer is not None:
        if scorer not in scores:
            raise InteropError(f"{where}: field 'scores': no scorer {scorer!r} (has {names})")
        return scorer
    hb = [k for k, v in scores.items()
          if isinstance(v.value, dict) and "healthbench_score" in v.value]
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
    raw: Any, model: str, scorer: str | None, where: str, criteria: bool = False
) -> tuple[ConversationScore, InspectSample]:
    sid = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(sid, str | int) and not isinstance(sid, bool):
        where = f"{where} (id {sid!r}, epoch {raw.get('epoch', 1)})"
    sample = _validate(InspectSample, raw, where)
    if sample.metadata is not None and sample.metadata.prompt_id is not None:
        pid = sample.metadata.prompt_id
    else:
        pid = _validate(_TEXT, sample.id, where, within=("id",))
    if not sample.scores:
        return ConversationScore(model, pid, None, where), sample
    name = _pick_scorer(sample.scores, scorer, where)
    value = sample.scores[name].value
    within: tuple[str | int, ...] = ("scores", name, "value")
    if isinstance(value, dict):
        score = _validate(HealthBenchValue, value, where, within=within).healthbench_score
    else:
        score = _validate(_SCORE_OR_NONE, value, where, within=within)
    graded = inspect_criteria(raw, name, where) if criteria else None
    return ConversationScore(model, pid, score, where, graded), sample


def _inspect_header(
    spec: InspectEvalSpec, path: Path, model: str | None
) -> tuple[str, dict[str, Any]]:
    if "meta_eval" in spec.task:
        raise InteropError(
            f"{path}: field 'eval.task' is {spec.task!r}: the meta-evaluation grades the judge, "
            "not a model, and has no per-conversation model scores"
        )
    model = model or spec.model
    if not model:
        raise InteropError(f"{path}: field 'eval.model': missing; pass --model")
    return model, {"task": spec.task}


def _check_epochs(records: list[tuple[ConversationScore, InspectSample]], path: Path) -> None:
    epochs: dict[Any, list[int]] = {}
    for _, sample in records:
        epochs.setdefault(sample.id, []).append(sample.epoch)
    multi = {k: v for k, v in epochs.items() if len(v) > 1}
    if multi:
        sid, eps = next(iter(sorted(multi.items(), key=lambda kv: str(kv[0]))))
        raise InteropError(
            f"{path}: sample {sid!r} appears {len(eps)} times (epochs {sorted(eps)}); "
            f"{count(len(multi), 'sample')} {'has' if len(multi) == 1 else 'have'} several "
            "epochs. The report takes one score per conversation: use a log run with one epoch"
        )


def _error_message(error: Any) -> str | None:
    """The first line of an ``EvalError``'s message (or of a bare string), shortened."""
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str) or not message.strip():
        return None
    line = message.strip().splitlines()[0]
    return line if len(line) <= 200 else line[:199] + "…"


def inspect_run_status(header: InspectHeader,
                       records: Sequence[tuple[ConversationScore, InspectSample]]
                       ) -> RunStatus:
    """How an Inspect run ended (its log's ``status``), with the samples scored and errored."""
    state = INSPECT_STATES.get(header.status, "incomplete")
    return RunStatus(
        state, header.status, len(records), sum(r.score is not None for r, _ in records),
        sum(bool(sample.sample_error) for _, sample in records),
        _error_message(header.run_error) if state != "complete" else None)


def read_inspect(
    path: Path | str, model: str | None = None, *, scorer: str | None = None, data: Any = None,
    criteria: bool = False,
) -> tuple[list[ConversationScore], dict[str, Any], RunStatus]:
    """Per-conversation scores of an Inspect HealthBench log (``.eval`` zip or ``.json``), its
    task and status, and how its run ended (with ``criteria``, each sample's per-criterion
    results too: :func:`inspect_criteria`)."""
    path = Path(path)
    records: list[tuple[ConversationScore, InspectSample]] = []
    header: InspectHeader
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
                header = _validate(InspectHeader, _zip_json(zf, head_name, path),
                                   f"{path}: {head_name}")
                eval_model, info = _inspect_header(header.eval, path, model)
                info["status"] = header.status
                sample_names = sorted(
                    n for n in names if n.startswith("samples/") and n.endswith(".json")
                )
                for n in sample_names:
                    records.append(_inspect_sample(_zip_json(zf, n, path), eval_model, scorer,
                                                   f"{path}: {n}", criteria))
        except zipfile.BadZipFile as exc:
            raise InteropError(f"{path}: damaged .eval zip: {exc}") from None
    else:
        if data is None and path.suffix.lower() == ".eval":
            raise InteropError(f"{path}: not a zip archive: a damaged or truncated .eval log")
        if data is None:
            data = _load_json(path)
        log = header = _validate(InspectLog, data, str(path))
        eval_model, info = _inspect_header(log.eval, path, model)
        info["status"] = log.status
        if log.samples is None:
            raise InteropError(
                f"{path}: field 'samples' is missing or null: a header-only log (or one written "
                "without samples) has no per-conversation scores"
            )
        for i, s in enumerate(log.samples):
            records.append(_inspect_sample(s, eval_model, scorer, f"{path}: samples[{i}]",
                                           criteria))
    if not records:
        what = {"error": "the run failed", "cancelled": "the run was cancelled",
                "started": "the run did not finish"}.get(str(header.status))
        why = _error_message(header.run_error)
        raise InteropError(f"{path}: the log holds no samples"
                           + (f" ({what}{f': {why}' if why else ''})" if what else ""))
    _check_epochs(records, path)
    return [r for r, _ in records], info, inspect_run_status(header, records)


ZIP_ZSTANDARD = 93
"""Zip method id of Zstandard, which Inspect (0.3.2xx and later) uses for ``.eval`` members."""


def _zstd_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A Zstandard-compressed member's bytes, CRC-checked.

    Python's ``zipfile`` reads this method only from 3.14; ``zipfile-zstd`` (what Inspect uses)
    teaches it by patching the standard module process-wide, which a reader imported by other
    code should not do. So: the raw member after its local header, decoded by ``zstandard``.
    """
    fp = zf.fp
    if fp is None:
        raise zipfile.BadZipFile("archive is closed")
    fp.seek(info.header_offset)
    header = fp.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    fp.seek(info.header_offset + 30 + name_len + extra_len)
    raw = fp.read(info.compress_size)
    data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"{info.filename}: size or CRC-32 does not match")
    return data


def _zip_json(zf: zipfile.ZipFile, name: str, path: Path) -> Any:
    info = zf.getinfo(name)
    try:
        data = _zstd_member(zf, info) if info.compress_type == ZIP_ZSTANDARD else zf.read(name)
        return records.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InteropError(f"{path}: {name}: not valid JSON: {exc}") from None
    except NotImplementedError as exc:
        raise InteropError(f"{path}: {name}: {exc} (zip method {info.compress_type})") from None
    except zipfile.BadZipFile as exc:
        raise InteropError(f"{path}: {name}: damaged member: {exc}") from None
    except zstandard.ZstdError as exc:
        raise InteropError(f"{path}: {name}: damaged Zstandard data: {exc}") from None


# --------------------------------------------------------------------------------------------
# The compendium's own layout


class HbpsychScore(_Record):
    """One record of the compendium's per-conversation score export (a JSON line)."""

    prompt_id: Text
    candidate: Text
    judge: Text
    score: ScoreOrNone
    """Required; ``null`` = that judge gave no verdict."""

    @model_validator(mode="before")
    @classmethod
    def _not_a_reply(cls, data: Any) -> Any:
        if isinstance(data, dict) and "score" not in data and {"text", "model"} <= set(data):
            raise ValueError(
                "a responses record (model, prompt_id, text): it holds replies, not scores. "
                "Pass the grades/scores export (prompt_id, candidate, judge, score)"
            )
        return data


class HbpsychCsvScore(HbpsychScore):
    """The same record as a CSV row: every cell is text, an empty score = no verdict."""

    score: Annotated[float | None, PlainValidator(_csv_score)]


HBPSYCH_FIELDS = tuple(HbpsychScore.model_fields)


def _hbpsych_rows(path: Path) -> list[tuple[HbpsychScore, str]]:
    """Validated (record, where) pairs of a JSONL or CSV score export."""
    text = records.read_text(path, error=InteropError, newline="")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        missing = [f for f in HBPSYCH_FIELDS if f not in (reader.fieldnames or [])]
        if missing:
            raise InteropError(f"{path}: header lacks column(s) {missing}")
        return [(_validate(HbpsychCsvScore, rec, f"{path}:{lineno}"), f"{path}:{lineno}")
                for lineno, rec in enumerate(reader, start=2)]
    return [(_validate(HbpsychScore, rec, f"{path}:{lineno}"), f"{path}:{lineno}")
            for lineno, rec in jsonl.records(path, error=InteropError)]


def read_hbpsych(path: Path | str) -> pd.DataFrame:
    """The score export as a table ``judge, candidate, prompt_id, score, where`` (NaN = none)."""
    path = Path(path)
    out = [{"judge": rec.judge, "candidate": rec.candidate, "prompt_id": rec.prompt_id,
            "score": float("nan") if rec.score is None else rec.score, "where": where}
           for rec, where in _hbpsych_rows(path)]
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
        data = records.read_json(path)
    except (records.NotUTF8, records.NotJSON):
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
    criteria: bool = False,
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
            recs, run = _simple_evals(p, model, None, criteria)
            details: dict[str, Any] = {}
            m = _SIMPLE_EVALS_NAME.match(p.name)
            if m:
                details["eval"] = m.group("eval")
        elif kind == "inspect":
            recs, details, run = read_inspect(p, model, scorer=scorer, criteria=criteria)
        else:
            frame = read_hbpsych(p)
            hb_frames.append(frame)
            hb_paths.append(p)
            inputs.append(InputSummary(str(p), kind, tuple(sorted(frame["candidate"].unique())),
                                       len(frame), {"judges": sorted(frame["judge"].unique())}))
            continue
        records.extend(recs)
        inputs.append(InputSummary(str(p), kind, tuple(sorted({r.model for r in recs})),
                                   len(recs), details, run))
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
    name = data.get("name") if isinstance(data.get("name"), str) else path.stem
    return Subset(spec, name, tuple(sorted(ids)))


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
    if values:
        ci = scoring.bootstrap_ci(values, n_resamples=n_resamples, seed=seed, level=level)
        est, lo, hi = ci.estimate, _bound(ci.low), _bound(ci.high)
    else:
        est = lo = hi = None
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


def _bound(x: float) -> float | None:
    """An interval's end as a report holds it: ``None`` where it is undefined (NaN)."""
    return None if math.isnan(x) else float(x)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return f"no interval ({scoring.ONE_CONVERSATION})"
    return f"[{_fmt(low)}, {_fmt(high)}]"


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
            body = f"clipped mean {_fmt(r.clipped_mean)} {_interval(r.ci_low, r.ci_high)}"
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


# --------------------------------------------------------------------------------------------
# Per-tag breakdown (--by-tag): inputs with per-criterion results

def _points(value: Any) -> int | float:
    """Rubric points as the log holds them: a finite number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return value


Points = Annotated[int | float, PlainValidator(_points)]


class RubricEntry(_Record):
    """A rubric criterion as a log records it: simple-evals' ``rubric_items`` entry (with
    ``criteria_met``), inspect_evals' ``metadata.rubrics`` entry, or a ``detailed_results``
    entry (with ``met``)."""

    criterion: str = ""
    points: Points
    tags: list[str] = Field(default_factory=list)
    criteria_met: bool | None = None
    met: bool | None = None

    @property
    def verdict(self) -> bool | None:
        return self.criteria_met if self.criteria_met is not None else self.met


class VerdictEntry(_Record):
    """One verdict of this package's ``healthbench_psych`` task (``Score.metadata.verdicts``)."""

    judge: Text
    criterion_index: Annotated[int, Field(ge=0)]
    criteria_met: bool | None = None


_RUBRIC = TypeAdapter(list[RubricEntry])
_VERDICTS = TypeAdapter(list[VerdictEntry])
_TAGS = TypeAdapter(list[str])
_CRIT = re.compile(r"^_crit_(\d+)_met$")
GRADER = "grader"
"""The scorer name of a log graded by one grader (simple-evals, inspect_evals)."""


@dataclass(frozen=True)
class GradedRubric:
    """One conversation's rubric and the verdicts behind its score, from a log."""

    rubrics: tuple[corpus.RubricItem, ...]
    verdicts: Mapping[str, tuple[bool | None, ...]]
    """Grader (``grader``, or each judge of a panel) -> ``criteria_met`` in rubric order."""
    example_tags: tuple[str, ...] | None
    """``None`` when the log does not record them (simple-evals)."""


def _items(entries: Sequence[RubricEntry]) -> tuple[corpus.RubricItem, ...]:
    return tuple(corpus.RubricItem(e.criterion, e.points, tuple(e.tags)) for e in entries)


def simple_evals_criteria(item: Any, where: str) -> GradedRubric | None:
    """The per-criterion results of one ``example_level_metadata`` entry: its ``rubric_items``
    (criterion, points, tags, ``criteria_met``, as ``healthbench_eval.py`` writes them);
    ``None`` when the entry has none. The file does not record example tags."""
    if not isinstance(item, dict) or item.get("rubric_items") is None:
        return None
    entries = _validate(_RUBRIC, item["rubric_items"], where, within=("rubric_items",))
    return GradedRubric(_items(entries), {GRADER: tuple(e.verdict for e in entries)}, None)


def inspect_criteria(raw: Any, scorer: str, where: str) -> GradedRubric | None:
    """The per-criterion results of one Inspect sample, ``None`` when it has none: the rubric
    of ``metadata.rubrics`` (or the scorer's ``detailed_results``), the verdicts of the
    scorer's ``Score.metadata.detailed_results``, of its ``Score.value`` ``_crit_<i>_met``
    entries, or of this package's task's ``Score.metadata.verdicts`` (one per judge); example
    tags from ``metadata.example_tags``."""
    meta = raw.get("metadata") or {}
    score = (raw.get("scores") or {}).get(scorer) or {}
    score_meta = score.get("metadata") or {}
    value = score.get("value")
    tags = meta.get("example_tags")
    example_tags = (tuple(_validate(_TAGS, tags, where, within=("metadata", "example_tags")))
                    if tags is not None else None)
    rubric = (_validate(_RUBRIC, meta["rubrics"], where, within=("metadata", "rubrics"))
              if meta.get("rubrics") is not None else None)
    within = ("scores", scorer, "metadata")
    if isinstance(score_meta.get("detailed_results"), list):
        entries = _validate(_RUBRIC, score_meta["detailed_results"], where,
                            within=(*within, "detailed_results"))
        if rubric is not None and len(rubric) == len(entries) and not any(e.tags
                                                                           for e in entries):
            # the tags live in the sample's rubric, in the same order
            entries = [e.model_copy(update={"tags": r.tags})
                       for e, r in zip(entries, rubric, strict=True)]
        verdicts = {GRADER: tuple(e.verdict for e in entries)}
        return GradedRubric(_items(entries), verdicts, example_tags)
    if rubric is None:
        return None
    if isinstance(score_meta.get("verdicts"), list):
        rows = _validate(_VERDICTS, score_meta["verdicts"], where, within=(*within, "verdicts"))
        by_judge: dict[str, list[bool | None]] = {}
        for row in rows:
            by_judge.setdefault(row.judge, [None] * len(rubric))
            if row.criterion_index >= len(rubric):
                raise InteropError(f"{where}: field 'scores.{scorer}.metadata.verdicts': "
                                   f"criterion_index {row.criterion_index} beyond the "
                                   f"{len(rubric)} rubric criteria")
            by_judge[row.judge][row.criterion_index] = row.criteria_met
        return GradedRubric(_items(rubric), {j: tuple(v) for j, v in by_judge.items()},
                            example_tags)
    found = {int(m.group(1)): v for k, v in (value.items() if isinstance(value, dict) else ())
             if (m := _CRIT.match(str(k)))}
    if not found:
        return None
    if sorted(found) != list(range(len(rubric))):
        raise InteropError(f"{where}: field 'scores.{scorer}.value': _crit_<i>_met entries "
                           f"{sorted(found)} do not cover the {len(rubric)} rubric criteria")
    return GradedRubric(_items(rubric), {GRADER: tuple(
        None if found[i] is None else bool(found[i]) for i in range(len(rubric)))},
        example_tags)


def corpus_themes(results: LoadedResults) -> dict[str, tuple[str, ...]]:
    """Example tags from the HealthBench corpus, for the conversations whose log records none
    (simple-evals): prompt id -> tags, for those the corpus holds (offline, the partial one)."""
    wanted = {pid for recs in results.by_model.values() for pid, r in recs.items()
              if r.criteria is not None and r.criteria.example_tags is None}
    if not wanted:
        return {}
    held = corpus.load_for_profile(allow_partial=True).by_id()
    return {pid: held[pid].example_tags for pid in wanted if pid in held}


@dataclass(frozen=True)
class TagReport:
    model: str
    subset: str
    subset_name: str
    scorer: str
    tag: str
    n: int
    clipped_mean: float
    ci_low: float | None
    ci_high: float | None
    """``None`` where there is no interval (one conversation)."""
    bootstrap_std: float
    n_graded: int
    """Subset conversations of the input with per-criterion results."""
    n_without_themes: int
    """Of those, how many have no example tags (neither in the log nor in the corpus)."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def tag_reports(
    results: LoadedResults, subsets: Iterable[Subset], *,
    corpus_tags: Mapping[str, Sequence[str]] | None = None,
    n_resamples: int = study.N_RESAMPLES, seed: int, level: float,
) -> list[TagReport]:
    """Per model and subset, every rubric axis and theme scored from the input's per-criterion
    results, as the compendium scores them (``breakdowns.tag_scores``, the panel's with
    ``breakdowns.with_panel`` when a log has several judges, ``breakdowns.summarise``); example
    tags the log lacks from ``corpus_tags``. Models and subsets without per-criterion results
    give no rows."""
    corpus_tags = corpus_tags or {}
    out = []
    for model in sorted(results.by_model):
        for sub in subsets:
            ids = set(sub.ids)
            graded = {pid: r.criteria for pid, r in results.by_model[model].items()
                      if pid in ids and r.criteria is not None}
            if not graded:
                continue
            convs = {pid: corpus.Conversation(
                pid, (), g.rubrics, g.example_tags if g.example_tags is not None
                else tuple(corpus_tags.get(pid, ()))) for pid, g in graded.items()}
            rows = [(grader, model, pid, i, met) for pid, g in sorted(graded.items())
                    for grader, mets in g.verdicts.items() for i, met in enumerate(mets)]
            verdicts = pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id",
                                                   "criterion_index", "criteria_met"])
            try:
                tags = breakdowns.tag_scores(verdicts, convs, keep=lambda t: t.startswith(
                    (breakdowns.AXIS, breakdowns.THEME)))
            except grading.GradingError as exc:
                raise InteropError(f"model {model}: {exc}") from None
            graders = sorted({g for r in graded.values() for g in r.verdicts})
            long = (breakdowns.with_panel(tags, graders) if len(graders) > 1
                    else tags.rename(columns={"judge": "scorer"}))
            summary = breakdowns.summarise(long, n_resamples=n_resamples, seed=seed,
                                           level=level)
            bare = sum(not c.example_tags for c in convs.values())
            out += [TagReport(model, sub.key, sub.name, str(r.scorer), str(r.tag), int(r.n),
                              float(r.clipped_mean), _bound(r.ci_low), _bound(r.ci_high),
                              float(r.bootstrap_std), len(graded), bare)
                    for r in summary.itertuples(index=False)]
    return out


def format_tags(tags: Sequence[TagReport], results: LoadedResults) -> str:
    """The per-tag report as text: per model, subset and scorer, one line per tag."""
    if not tags:
        return ("\nby tag: no input carries per-criterion results (a rubric with a verdict "
                "per criterion), so no tag can be scored")
    lines = ["\nby tag (simple-evals' per-tag rule; clipped mean over the conversations with "
             f"a score for the tag, n, {level_text(study.CI_LEVEL)} bootstrap interval)"]
    head = None
    for t in tags:
        if (t.model, t.subset_name, t.scorer) != head:
            head = (t.model, t.subset_name, t.scorer)
            themes = (f"; {t.n_without_themes} without themes (not in the log or the corpus)"
                      if t.n_without_themes else "")
            lines.append(f"\n{t.model} on {t.subset_name}, {t.scorer}: {t.n_graded} "
                         f"conversation(s) with per-criterion results{themes}")
        lines.append(f"  {t.tag}: n = {t.n}, {_fmt(t.clipped_mean)} "
                     f"{_interval(t.ci_low, t.ci_high)}")
    without = sorted(m for m in results.by_model if m not in {t.model for t in tags})
    if without:
        lines.append(f"\nno per-criterion results for: {', '.join(without)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line


def _default_seed() -> int:
    from hbpsych_utils.pipeline import profiles

    return int(profiles.Profile.model_fields["seed"].default)


def subset_argument(text: str) -> str:
    """A ``--subset`` value: a released subset's key or an existing file (what
    :func:`resolve_subset` then reads), else a one-line usage error."""
    if text in study.SUBSET_ARTIFACTS or Path(text).is_file():
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a released subset ({', '.join(study.SUBSET_ARTIFACTS)}) nor an "
        "existing subset JSON file")


def _parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="python -m hbpsych_utils filter-results",
        description="Report HealthBench-Psych / Psych-Hard from per-conversation HealthBench "
        "results you already have (no generation, no grading).",
        epilog=f"exit codes: 0 reported, 1 bad input, 2 bad usage, {EXIT_INCOMPLETE} an "
        "input's run failed, was cancelled or did not finish (nothing reported unless "
        "--allow-incomplete)",
    )
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="simple-evals *_allresults.json, Inspect .eval/.json log, or hbpsych "
                    "scores .jsonl/.csv")
    ap.add_argument("--format", default="auto", choices=("auto", *FORMATS))
    ap.add_argument("--subset", action="append", metavar="v1|v2|hard|PATH.json",
                    type=subset_argument,
                    help="subset to report (repeatable; default: v1 and hard)")
    ap.add_argument("--seed", type=arguments.seed, default=None,
                    help="bootstrap seed, 0 to 2**32-1 (default: the default profile's seed)")
    ap.add_argument("--resamples", type=arguments.resamples, default=study.N_RESAMPLES,
                    help=f"bootstrap resamples, 1 to {study.MAX_RESAMPLES:,} "
                    f"(default {study.N_RESAMPLES})")
    ap.add_argument("--json", action="store_true", help="print JSON (with the missing ids)")
    ap.add_argument("--model", default=None,
                    help="model name for simple-evals/Inspect inputs (default: from the file)")
    ap.add_argument("--scorer", default=None,
                    help="Inspect scorer to read when a log has several")
    ap.add_argument("--allow-incomplete", action="store_true",
                    help="report the scores of a run that failed, was cancelled or did not "
                    "finish (its status is printed with them)")
    ap.add_argument("--by-tag", action="store_true",
                    help="also report every rubric axis and theme, for inputs with "
                    "per-criterion results (simple-evals and Inspect logs)")
    return ap


def unfinished_runs(inputs: Sequence[InputSummary]) -> list[str]:
    """One line per input whose run did not complete: file and what its log says."""
    return [f"{i.path}: {i.run.describe()}" for i in inputs
            if i.run is not None and not i.run.complete]


def main(argv: list[str] | None = None) -> int:
    """``filter-results``: 0 on success, 1 on bad input, 2 on bad usage, 3
    (:data:`EXIT_INCOMPLETE`) when an input's run did not complete and ``--allow-incomplete``
    was not given."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse's own exit (a one-line usage error or --help)
        return int(exc.code or 0)
    seed = _default_seed() if args.seed is None else args.seed
    try:
        results = load_results(args.inputs, args.format, model=args.model, scorer=args.scorer,
                               criteria=args.by_tag)
        check_known_ids(results, healthbench_ids())
        subsets = [resolve_subset(s) for s in (args.subset or DEFAULT_SUBSETS)]
        reports = filter_results(results, subsets, n_resamples=args.resamples, seed=seed,
                                 level=study.CI_LEVEL)
        tags = (tag_reports(results, subsets, corpus_tags=corpus_themes(results),
                            n_resamples=args.resamples, seed=seed, level=study.CI_LEVEL)
                if args.by_tag else None)
    except (InteropError, sources.ArtifactError, corpus.CorpusError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # an input that cannot be read (a folder, no permission): named
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return 1
    unfinished = unfinished_runs(results.inputs)
    if unfinished and not args.allow_incomplete:
        for line in unfinished:
            print(f"error: {line}; its scores are not a result of the whole run, so none are "
                  "reported (--allow-incomplete reports them, with this status)", file=sys.stderr)
        return EXIT_INCOMPLETE
    if args.json:
        doc = reports_json(reports, results.inputs, n_resamples=args.resamples, seed=seed,
                           level=study.CI_LEVEL)
        if tags is not None:
            doc["tags"] = [t.as_dict() for t in tags]
        print(json.dumps(doc, indent=2))
    else:
        print(format_text(reports, results.inputs, n_resamples=args.resamples, seed=seed,
                          level=study.CI_LEVEL))
        if tags is not None:
            print(format_tags(tags, results))
    return 0
