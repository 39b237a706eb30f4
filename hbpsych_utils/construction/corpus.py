"""HealthBench conversations as typed records: loading, validation, coverage, ids and hashes.

Each line of the HealthBench OSS file is one conversation: ``prompt`` (messages ending in a user
turn), ``prompt_id``, ``rubrics`` (``criterion``, signed ``points``, ``tags``), ``example_tags``,
``ideal_completions_data`` and ``canary``. Points are kept exactly as written (an integer stays an
integer) because the grader prints them into its prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hbpsych_utils.core import paths
from hbpsych_utils.core.records import (
    FileRecord,
    NotUTF8,
    invalid,
    problems,
    read_csv,
    read_text,
    utf8_lines,
)

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

N_HEALTHBENCH = 5000
ROLES = ("system", "developer", "user", "assistant")


class CorpusError(ValueError):
    """A corpus record that is not valid HealthBench; names file, line and field (line 0: the
    file as a whole)."""

    def __init__(self, file: Path | str, line: int, field: str, problem: str) -> None:
        self.file, self.line, self.field, self.problem = str(file), line, field, problem
        super().__init__(f"{file}{f':{line}' if line else ''}: field {field!r}: {problem}")


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class RubricItem:
    criterion: str
    points: int | float
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Conversation:
    prompt_id: str
    prompt: tuple[Message, ...]
    rubrics: tuple[RubricItem, ...]
    example_tags: tuple[str, ...] = ()
    ideal_completions_data: dict[str, Any] | None = None
    canary: str | None = None

    @property
    def n_turns(self) -> int:
        return len(self.prompt)

    @property
    def positive_points(self) -> int | float:
        return sum(r.points for r in self.rubrics if r.points > 0)

    @property
    def user_text(self) -> str:
        return "\n".join(m.content for m in self.prompt if m.role == "user")

    @property
    def themes(self) -> tuple[str, ...]:
        return tuple(t.split(":", 1)[1] for t in self.example_tags if t.startswith("theme:"))


@dataclass
class LoadReport:
    """What ``load_corpus`` read: the records, and the lines it skipped (``skip`` mode)."""

    path: Path
    conversations: list[Conversation]
    skipped: list[CorpusError] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [c.prompt_id for c in self.conversations]


class _MessageRecord(FileRecord):
    role: str
    content: str


class _RubricRecord(FileRecord):
    criterion: str
    points: int | float
    tags: list[object] = Field(default_factory=list)

    @field_validator("points", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        """Points are finite numbers as written: an int stays an int, a bool is not a number,
        and NaN or Infinity (which JSON readers accept) would make every score NaN."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid(f"expected int or float, got {type(value).__name__}")
        if not math.isfinite(value):
            raise invalid(f"expected a finite number, got {value}")
        return value


class CorpusRecord(FileRecord):
    """One line of a HealthBench-layout JSONL file, as the file holds it (types only)."""

    prompt_id: str
    prompt: list[_MessageRecord]
    rubrics: list[_RubricRecord]
    example_tags: list[object] = Field(default_factory=list)
    ideal_completions_data: dict[str, Any] | None = None
    """HealthBench's own data, kept as JSON."""
    canary: str | None = None


def parse_record(rec: object, file: Path | str = "<memory>", line: int = 0) -> Conversation:
    """Validate one decoded JSON object and build its ``Conversation``.

    ``CorpusRecord`` checks the layout and types; the rules of a usable conversation (a known
    role in every turn, ending in a user turn, a criterion with positive points) follow.
    """
    where = (Path(file), line)
    if not isinstance(rec, dict):
        raise CorpusError(*where, "<record>", f"expected a JSON object, got {type(rec).__name__}")
    try:
        parsed = CorpusRecord.model_validate(rec)
    except ValidationError as exc:
        raise CorpusError(*where, *problems(exc)[0]) from None
    if not parsed.prompt_id:
        raise CorpusError(*where, "prompt_id", "empty")
    if not parsed.prompt:
        raise CorpusError(*where, "prompt", "empty conversation")
    for i, m in enumerate(parsed.prompt):
        if m.role not in ROLES:
            raise CorpusError(*where, f"prompt[{i}].role", f"unknown role {m.role!r}")
    last = parsed.prompt[-1].role
    if last != "user":
        raise CorpusError(*where, f"prompt[{len(parsed.prompt) - 1}].role",
                          f"conversation must end in a user turn, ends in {last!r}")
    if not any(r.points > 0 for r in parsed.rubrics):
        raise CorpusError(*where, "rubrics", "no criterion with positive points (score undefined)")
    return Conversation(
        prompt_id=parsed.prompt_id,
        prompt=tuple(Message(m.role, m.content) for m in parsed.prompt),
        rubrics=tuple(RubricItem(r.criterion, r.points, tuple(str(t) for t in r.tags))
                      for r in parsed.rubrics),
        example_tags=tuple(str(t) for t in parsed.example_tags),
        ideal_completions_data=rec.get("ideal_completions_data"),
        canary=parsed.canary,
    )


def load_corpus(
    path: Path | str,
    *,
    invalid_records: Literal["error", "skip"] = "error",
    max_records: int | None = None,
) -> LoadReport:
    """Read a HealthBench JSONL file, validating every line.

    ``invalid_records="error"`` raises ``CorpusError`` at the first bad line; ``"skip"`` logs
    each bad line (bytes that are not UTF-8 included) and keeps going (the report counts them).
    ``max_records`` stops after that many valid records. A file with no valid record is an
    error in either mode: nothing downstream can run on it.
    """
    path = Path(path)
    report = LoadReport(path=path, conversations=[])
    seen: dict[str, int] = {}
    for lineno, line in utf8_lines(path):
        if max_records is not None and len(report.conversations) >= max_records:
            break
        try:
            if isinstance(line, NotUTF8):
                raise CorpusError(path, lineno, "<bytes>", line.problem)
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(path, lineno, "<json>", f"not valid JSON: {exc.msg}") from None
            conv = parse_record(rec, path, lineno)
            if conv.prompt_id in seen:
                raise CorpusError(
                    path, lineno, "prompt_id",
                    f"duplicate {conv.prompt_id} (first on line {seen[conv.prompt_id]})",
                )
        except CorpusError as err:
            if invalid_records == "error":
                raise
            log.warning("skipping invalid record: %s", err)
            report.skipped.append(err)
            continue
        seen[conv.prompt_id] = lineno
        report.conversations.append(conv)
    if not report.conversations:
        skipped = f"; {len(report.skipped)} invalid line(s) skipped" if report.skipped else ""
        raise CorpusError(path, 0, "<file>",
                          f"no conversation records (expected one HealthBench JSON object per "
                          f"line){skipped}")
    return report


@dataclass(frozen=True)
class Coverage:
    n_found: int
    n_expected: int
    missing: tuple[str, ...]

    @property
    def fraction(self) -> float:
        return self.n_found / self.n_expected if self.n_expected else 0.0

    @property
    def complete(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        if self.complete:
            return f"complete corpus: all {self.n_expected:,} conversations"
        return (
            f"PARTIAL corpus: {self.n_found:,} of {self.n_expected:,} conversations "
            f"({self.fraction:.1%}); {len(self.missing):,} missing"
        )


def check_coverage(
    ids: Iterable[str], expected_ids: Iterable[str], *, allow_partial: bool, source: str = "corpus"
) -> Coverage:
    """Verify a corpus by content: its ids must be the expected ids (or a subset, if allowed)."""
    ids = set(ids)
    expected = set(expected_ids)
    unknown = sorted(ids - expected)
    if unknown:
        raise CorpusError(
            source, 0, "prompt_id",
            f"{len(unknown)} id(s) are not HealthBench conversations (e.g. {unknown[:3]}); "
            "this is not the HealthBench OSS corpus",
        )
    cov = Coverage(len(ids), len(expected), tuple(sorted(expected - ids)))
    if not cov.complete and not allow_partial:
        raise CorpusError(
            source, 0, "prompt_id",
            f"{cov.describe()}. The full file must hold exactly the {len(expected):,} ids of the "
            "released screen; to run on a partial corpus set corpus.allow_partial: true in the "
            "profile",
        )
    return cov


def ids_hash(ids: Iterable[str]) -> str:
    """Content hash of a set of conversation ids, as the study releases it."""
    return hashlib.sha256(json.dumps(sorted(ids)).encode("utf-8")).hexdigest()


def hard_ids(harness_scores: Path | str) -> list[str]:
    """HealthBench-Hard ids: the prompt_ids of the released harness-validation scores."""
    out = []
    for lineno, line in utf8_lines(harness_scores):
        if isinstance(line, NotUTF8):
            raise CorpusError(harness_scores, lineno, "<bytes>", line.problem)
        if line.strip():
            try:
                out.append(json.loads(line)["prompt_id"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise CorpusError(harness_scores, lineno, "prompt_id", str(exc)) from None
    return out


def screening_ids(screening_labels: Path | str) -> list[str]:
    """The complete HealthBench id list: every prompt_id of the released screen."""
    return hard_ids(screening_labels)


@dataclass(frozen=True, slots=True)
class Language:
    code: str
    """ISO 639-1 code of the most likely language."""
    probability: float
    non_english: bool
    """Flagged only when the detector is confident: short or mixed texts stay unflagged."""


@cache
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect_language(text: str, *, min_letters: int = 20, min_probability: float = 0.8) -> Language:
    """Dominant language of ``text`` with py3langid, which ships its own model.

    Short texts ("45y F") and low-confidence guesses are not flagged as non-English: the flag
    decides who gets a machine translation, and a wrong flag costs more than a missed one.
    """
    code, prob = _identifier().classify(text)
    letters = sum(ch.isalpha() for ch in text)
    flagged = code != "en" and letters >= min_letters and prob >= min_probability
    return Language(code, float(prob), flagged)


def language_flags(conversations: Iterable[Conversation]) -> dict[str, Language]:
    """prompt_id -> detected language of the conversation's user turns."""
    return {c.prompt_id: detect_language(c.user_text) for c in conversations}


@dataclass
class ProfileCorpus:
    """The corpus a profile runs on, with how it was verified."""

    report: LoadReport
    coverage: Coverage
    source: str
    """``registry`` (HealthBench OSS via sources) or the path of a custom corpus file."""

    @property
    def conversations(self) -> list[Conversation]:
        return self.report.conversations

    def by_id(self) -> dict[str, Conversation]:
        return {c.prompt_id: c for c in self.report.conversations}


def load_for_profile(
    *,
    allow_partial: bool,
    invalid_records: Literal["error", "skip"] = "error",
    max_conversations: int | None = None,
    corpus_file: str | Path | None = None,
    fetch: Callable[[str], Path] | None = None,
) -> ProfileCorpus:
    """Load the profile's corpus and verify it by content.

    The registry corpus must hold exactly the ids of the released screen (``screening_labels``),
    or a subset of them when ``allow_partial``. A custom ``corpus_file`` (another specialty, a
    synthetic corpus) is checked only for its own validity. ``fetch`` is ``sources.fetch`` or a
    stage's recording version of it.
    """
    from hbpsych_utils.core import sources

    fetch = fetch or sources.fetch
    if corpus_file is not None:
        path = paths.resolve_path(corpus_file)
        report = load_corpus(path, invalid_records=invalid_records, max_records=max_conversations)
        ids = report.ids
        return ProfileCorpus(report, Coverage(len(ids), len(ids), ()), str(path))
    path = fetch("healthbench_oss")
    report = load_corpus(path, invalid_records=invalid_records, max_records=max_conversations)
    expected = screening_ids(fetch("screening_labels"))
    partial = allow_partial or max_conversations is not None
    coverage = check_coverage(report.ids, expected, allow_partial=partial, source=str(path))
    return ProfileCorpus(report, coverage, "registry")


class CorpusDescription(TypedDict):
    """``describe_corpus``: ``CorpusMetrics`` fields (the language ones with languages)."""

    n_conversations: int
    turns_mean: float | None
    turns_median: float | None
    turns_max: int | None
    n_multi_turn: int
    n_rubric_items: int
    rubric_items_mean: float | None
    n_negative_items: int
    positive_points_total: int | float
    negative_points_total: int | float
    points_all_integer: bool
    n_non_english: NotRequired[int]
    non_english_share: NotRequired[float | None]


def describe_corpus(
    conversations: list[Conversation], languages: dict[str, Language] | None = None
) -> CorpusDescription:
    """The numbers a reader wants first: size, turns, rubric items and points, languages."""
    import numpy as np

    turns = np.array([c.n_turns for c in conversations])
    n_items = np.array([len(c.rubrics) for c in conversations])
    turns_mean, turns_median, turns_max = _spread(turns)
    points = [r.points for c in conversations for r in c.rubrics]
    positive, negative = _signed_sums(points)
    out = CorpusDescription(
        n_conversations=len(conversations),
        turns_mean=turns_mean,
        turns_median=turns_median,
        turns_max=turns_max,
        n_multi_turn=int((turns > 1).sum()),
        n_rubric_items=int(n_items.sum()),
        rubric_items_mean=_spread(n_items)[0],
        n_negative_items=sum(1 for p in points if p < 0),
        positive_points_total=positive,
        negative_points_total=negative,
        points_all_integer=all(isinstance(p, int) for p in points),
    )
    if languages is not None:
        flagged = [pid for pid, lang in languages.items() if lang.non_english]
        out["n_non_english"] = len(flagged)
        out["non_english_share"] = len(flagged) / len(conversations) if conversations else None
    return out


def _spread(counts: np.ndarray) -> tuple[float | None, float | None, int | None]:
    """Mean, median and maximum of per-conversation counts; ``None`` each without any."""
    import numpy as np

    if not counts.size:
        return None, None, None
    return float(counts.mean()), float(np.median(counts)), int(counts.max())


def _signed_sums(points: list[int | float]) -> tuple[int | float, int | float]:
    """The sum of the positive points and the sum of the negative ones."""
    return sum(p for p in points if p > 0), sum(p for p in points if p < 0)


def theme_counts(conversations: Iterable[Conversation]) -> dict[str, int]:
    """How many conversations carry each ``theme:`` tag, most common first."""
    from collections import Counter

    counts = Counter(t for c in conversations for t in c.themes)
    return dict(counts.most_common())


def turn_distribution(conversations: Iterable[Conversation]) -> dict[int, int]:
    from collections import Counter

    return dict(sorted(Counter(c.n_turns for c in conversations).items()))


SOURCE_RECORD = "corpus_source.json"


class LoadOptions(BaseModel):
    """How 01_corpus read the corpus file; later stages reload it the same way."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    invalid_records: Literal["error", "skip"] = "error"
    max_conversations: int | None = None


class SourceRecord(BaseModel):
    """``corpus_source.json``: the corpus file 01_corpus used, its hash and load options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    sha256: str
    source: str
    options: LoadOptions
    n_conversations: int
    ids_sha256: str


def source_record(loaded: ProfileCorpus, options: Mapping[str, object]) -> dict[str, Any]:
    """What later stages need to reload exactly this corpus: file, its hash, load options."""
    from hbpsych_utils.core import sources

    return SourceRecord(
        path=str(loaded.report.path),
        sha256=sources.sha256_file(loaded.report.path),
        source=loaded.source,
        options=LoadOptions.model_validate(dict(options)),
        n_conversations=len(loaded.conversations),
        ids_sha256=ids_hash(loaded.report.ids),
    ).model_dump()


def read_source_record(record_path: Path | str) -> SourceRecord:
    """``corpus_source.json`` as 01_corpus wrote it, validated (errors name file and field)."""
    try:
        return SourceRecord.model_validate_json(read_text(record_path))
    except NotUTF8 as exc:
        raise CorpusError(record_path, exc.line, "<bytes>", exc.problem) from None
    except ValidationError as exc:
        raise CorpusError(record_path, 0, *problems(exc)[0]) from None


def load_recorded(record_path: Path | str) -> list[Conversation]:
    """Reload the corpus 01_corpus recorded, checking it is still the same file and ids."""
    from hbpsych_utils.core import sources

    rec = read_source_record(record_path)
    path = Path(rec.path)
    if not path.is_file() or sources.sha256_file(path) != rec.sha256:
        raise CorpusError(record_path, 0, "sha256",
                          f"the corpus file {path} changed or vanished since 01_corpus ran; "
                          "run the profile again from 01_corpus")
    report = load_corpus(path, invalid_records=rec.options.invalid_records,
                         max_records=rec.options.max_conversations)
    if ids_hash(report.ids) != rec.ids_sha256:
        raise CorpusError(record_path, 0, "ids_sha256", "reloaded corpus holds different ids")
    return report.conversations


def non_english_flags(
    languages_csv: Path | str | None, conversations: Iterable[Conversation]
) -> dict[str, bool]:
    """prompt_id -> flagged non-English: 01_corpus's ``languages.csv`` when it exists (the same
    flags the corpus report showed), else detected now."""
    if languages_csv is None or not Path(languages_csv).is_file():
        return {pid: lang.non_english for pid, lang in language_flags(conversations).items()}
    table = read_csv(Path(languages_csv), dtype={"prompt_id": str})
    return dict(zip(table["prompt_id"], table["non_english"].astype(str) == "True", strict=True))
