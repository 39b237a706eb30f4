"""UK AISI Inspect eval logs of HealthBench tasks, read for ``filter-results``.

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

With ``--by-tag``, a sample's per-criterion results (:func:`inspect_criteria`): the rubric in
``metadata.rubrics`` and the verdicts in the HealthBench scorer's ``Score.metadata.
detailed_results`` (``met`` or ``criteria_met`` per criterion), its ``Score.value``
(``_crit_<i>_met``), or this package's task's ``Score.metadata.verdicts`` (per judge, and the
panel); themes from ``metadata.example_tags``.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

import zstandard
from pydantic import ConfigDict, Field, PlainValidator, model_validator

from hbpsych_utils.core import records
from hbpsych_utils.core.wording import count
from hbpsych_utils.reporting.interop_records import (
    GRADER,
    RUBRIC,
    SCORE_OR_NONE,
    TAGS,
    TEXT,
    VERDICTS,
    ConversationScore,
    Details,
    GradedRubric,
    InputRecord,
    InteropError,
    RubricEntry,
    RunState,
    RunStatus,
    ScoreOrNone,
    Text,
    VerdictEntry,
    load_json,
    rubric_items,
    validate,
)

INSPECT_HEALTHBENCH_SCORER = "_scorer"
"""The name inspect_evals' HealthBench scorer gets in a log (its nested function's name)."""

INSPECT_STATES: dict[str | None, RunState] = {
    "success": "complete", "error": "failed", "cancelled": "cancelled", "started": "incomplete"}
"""An Inspect log's ``status`` as a run state (any other status: incomplete)."""


def _sample_id(value: Any) -> str | int | None:
    """Inspect's ``EvalSample.id``: a string or an integer."""
    if value is None or (isinstance(value, str | int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"expected a string or an integer, got {value!r}")


class InspectEvalSpec(InputRecord):
    """The log's ``eval`` (``EvalSpec``): which task, which model."""

    task: str = ""
    model: str | None = None


class InspectHeader(InputRecord):
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


class InspectScore(InputRecord):
    """A ``Score``: ``value`` is read only for the scorer the report uses."""

    value: Any


class InspectSampleMetadata(InputRecord):
    prompt_id: Text | None = None
    """inspect_evals' copy of the HealthBench id; wins over the sample id when present."""


class InspectSample(InputRecord):
    """An ``EvalSample`` of inspect_evals' HealthBench task (id = HealthBench ``prompt_id``)."""

    id: Annotated[str | int | None, PlainValidator(_sample_id)] = None
    epoch: Annotated[int, Field(strict=True, ge=1)] = 1
    metadata: InspectSampleMetadata | None = None
    scores: dict[str, InspectScore] | None = None
    """Scorer name -> Score; empty or ``null`` when the sample errored (unscored)."""
    sample_error: Any = Field(default=None, alias="error")
    """``error``: the sample's ``EvalError`` when it errored."""


class HealthBenchValue(InputRecord):
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


def is_inspect_json(data: Any) -> bool:
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
    sample = validate(InspectSample, raw, where)
    if sample.metadata is not None and sample.metadata.prompt_id is not None:
        pid = sample.metadata.prompt_id
    else:
        pid = validate(TEXT, sample.id, where, within=("id",))
    if not sample.scores:
        return ConversationScore(model, pid, None, where), sample
    name = _pick_scorer(sample.scores, scorer, where)
    value = sample.scores[name].value
    within: tuple[str | int, ...] = ("scores", name, "value")
    if isinstance(value, dict):
        score = validate(HealthBenchValue, value, where, within=within).healthbench_score
    else:
        score = validate(SCORE_OR_NONE, value, where, within=within)
    graded = inspect_criteria(raw, name, where) if criteria else None
    return ConversationScore(model, pid, score, where, graded), sample


def _inspect_header(
    spec: InspectEvalSpec, path: Path, model: str | None
) -> tuple[str, Details]:
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


Sampled = list[tuple[ConversationScore, InspectSample]]
"""A log's samples as read: each one's score record and its validated sample."""


def read_inspect(
    path: Path | str, model: str | None = None, *, scorer: str | None = None, data: Any = None,
    criteria: bool = False,
) -> tuple[list[ConversationScore], Details, RunStatus]:
    """Per-conversation scores of an Inspect HealthBench log (``.eval`` zip or ``.json``), its
    task and status, and how its run ended (with ``criteria``, each sample's per-criterion
    results too: :func:`inspect_criteria`)."""
    path = Path(path)
    if data is None and zipfile.is_zipfile(path):
        header, info, found = _read_eval_zip(path, model, scorer, criteria)
    else:
        header, info, found = _read_json_log(path, model, scorer, data, criteria)
    if not found:
        what = {"error": "the run failed", "cancelled": "the run was cancelled",
                "started": "the run did not finish"}.get(str(header.status))
        why = _error_message(header.run_error)
        raise InteropError(f"{path}: the log holds no samples"
                           + (f" ({what}{f': {why}' if why else ''})" if what else ""))
    _check_epochs(found, path)
    return [r for r, _ in found], info, inspect_run_status(header, found)


def _read_eval_zip(path: Path, model: str | None, scorer: str | None, criteria: bool
                   ) -> tuple[InspectHeader, Details, Sampled]:
    """A ``.eval`` zip: its header (``header.json``, or ``_journal/start.json`` while the run
    is going), task and status, and every ``samples/*.json`` member in name order."""
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
            header = validate(InspectHeader, _zip_json(zf, head_name, path),
                              f"{path}: {head_name}")
            eval_model, info = _inspect_header(header.eval, path, model)
            info["status"] = header.status
            found = [_inspect_sample(_zip_json(zf, n, path), eval_model, scorer, f"{path}: {n}",
                                     criteria)
                     for n in sorted(n for n in names
                                     if n.startswith("samples/") and n.endswith(".json"))]
    except zipfile.BadZipFile as exc:
        raise InteropError(f"{path}: damaged .eval zip: {exc}") from None
    return header, info, found


def _read_json_log(path: Path, model: str | None, scorer: str | None, data: Any,
                   criteria: bool) -> tuple[InspectLog, Details, Sampled]:
    """A ``.json`` log (``data`` when already read): the log, its task and status, and its
    samples in order."""
    if data is None and path.suffix.lower() == ".eval":
        raise InteropError(f"{path}: not a zip archive: a damaged or truncated .eval log")
    if data is None:
        data = load_json(path)
    log = validate(InspectLog, data, str(path))
    eval_model, info = _inspect_header(log.eval, path, model)
    info["status"] = log.status
    if log.samples is None:
        raise InteropError(
            f"{path}: field 'samples' is missing or null: a header-only log (or one written "
            "without samples) has no per-conversation scores"
        )
    return log, info, [_inspect_sample(s, eval_model, scorer, f"{path}: samples[{i}]", criteria)
                       for i, s in enumerate(log.samples)]


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


_CRIT = re.compile(r"^_crit_(\d+)_met$")


def inspect_criteria(raw: Any, scorer: str, where: str) -> GradedRubric | None:
    """The per-criterion results of one Inspect sample, ``None`` when it has none: the rubric
    of ``metadata.rubrics`` (or the scorer's ``detailed_results``), the verdicts of the
    scorer's ``Score.metadata.detailed_results``, of its ``Score.value`` ``_crit_<i>_met``
    entries, or of this package's task's ``Score.metadata.verdicts`` (one per judge); example
    tags from ``metadata.example_tags``."""
    meta = raw.get("metadata") or {}
    score = (raw.get("scores") or {}).get(scorer) or {}
    score_meta = score.get("metadata") or {}
    tags = meta.get("example_tags")
    example_tags = (tuple(validate(TAGS, tags, where, within=("metadata", "example_tags")))
                    if tags is not None else None)
    rubric = (validate(RUBRIC, meta["rubrics"], where, within=("metadata", "rubrics"))
              if meta.get("rubrics") is not None else None)
    within = ("scores", scorer, "metadata")
    if isinstance(score_meta.get("detailed_results"), list):
        entries = validate(RUBRIC, score_meta["detailed_results"], where,
                           within=(*within, "detailed_results"))
        return _detailed_results(entries, rubric, example_tags)
    if rubric is None:
        return None
    if isinstance(score_meta.get("verdicts"), list):
        rows = validate(VERDICTS, score_meta["verdicts"], where, within=(*within, "verdicts"))
        return _judges_verdicts(rows, rubric, example_tags, f"{where}: field "
                                f"'scores.{scorer}.metadata.verdicts'")
    return _criterion_values(score.get("value"), rubric, example_tags,
                             f"{where}: field 'scores.{scorer}.value'")


def _detailed_results(entries: list[RubricEntry], rubric: list[RubricEntry] | None,
                      example_tags: tuple[str, ...] | None) -> GradedRubric:
    """inspect_evals' ``detailed_results``: one grader's verdict per criterion; the tags live
    in the sample's rubric, in the same order, when the entries carry none."""
    if rubric is not None and len(rubric) == len(entries) and not any(e.tags for e in entries):
        entries = [e.model_copy(update={"tags": r.tags})
                   for e, r in zip(entries, rubric, strict=True)]
    return GradedRubric(rubric_items(entries), {GRADER: tuple(e.verdict for e in entries)},
                        example_tags)


def _judges_verdicts(rows: list[VerdictEntry], rubric: list[RubricEntry],
                     example_tags: tuple[str, ...] | None, where: str) -> GradedRubric:
    """This package's task's verdicts: each judge's per criterion (``None`` where a judge gave
    none); an index beyond the rubric is an error naming ``where``."""
    by_judge: dict[str, list[bool | None]] = {}
    for row in rows:
        by_judge.setdefault(row.judge, [None] * len(rubric))
        if row.criterion_index >= len(rubric):
            raise InteropError(f"{where}: criterion_index {row.criterion_index} beyond the "
                               f"{len(rubric)} rubric criteria")
        by_judge[row.judge][row.criterion_index] = row.criteria_met
    return GradedRubric(rubric_items(rubric), {j: tuple(v) for j, v in by_judge.items()},
                        example_tags)


def _criterion_values(value: Any, rubric: list[RubricEntry],
                      example_tags: tuple[str, ...] | None, where: str) -> GradedRubric | None:
    """The HealthBench scorer's ``_crit_<i>_met`` entries of ``Score.value``: one grader's
    verdicts, which must cover the rubric (``None`` when there are none)."""
    found = {int(m.group(1)): v for k, v in (value.items() if isinstance(value, dict) else ())
             if (m := _CRIT.match(str(k)))}
    if not found:
        return None
    if sorted(found) != list(range(len(rubric))):
        raise InteropError(f"{where}: _crit_<i>_met entries {sorted(found)} do not cover the "
                           f"{len(rubric)} rubric criteria")
    return GradedRubric(rubric_items(rubric), {GRADER: tuple(
        None if found[i] is None else bool(found[i]) for i in range(len(rubric)))},
        example_tags)
