"""Clinicians' ratings files: reading and validating them, and the votes table they make.

A ratings file is what the review instrument exports and what the study released, one per
reviewer: ``{reviewer, exported_at, packet?, n_total, n_rated, ratings: [{review_id, prompt_id,
is_mental_health, category, confidence, notes}]}``. ``RatingsFile`` and ``RatingRow`` are that
format; ``load_ratings`` checks a file against the round's review set and the category
vocabulary and reports every problem at once, each naming file, review id and field. The
votes table (one row per item, each reviewer's vote and category, the majority) is what the
tally and the subset are computed from; ``read_votes`` reads it back from a stage's CSV.
``check_format`` checks a file on its own (no review set yet), as a profile's
``ratings_files`` are checked when the profile loads.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, ValidationError, ValidationInfo, field_validator

from hbpsych_utils.construction.review_set import SET_COLUMNS, ReviewSetError, check_set
from hbpsych_utils.core.records import (
    FileRecord,
    NotJSON,
    NotUTF8,
    invalid,
    problems,
    read_csv,
    read_json,
)

VOTES = ("Y", "N")
CONFIDENCES = ("H", "M", "L")
RATING_FIELDS = ("review_id", "prompt_id", "is_mental_health", "category", "confidence", "notes")
VOTES_FILE = "votes.csv"
VOTE_COLUMNS = ("n_yes", "included", "tier")
"""The columns ``votes_table`` adds after the reviewers' own."""
CATEGORY_SUFFIX = "_category"
"""A reviewer's categories are the votes table's column ``<reviewer><CATEGORY_SUFFIX>``."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a ratings file: which file, which review id, which field."""

    file: str
    review_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = (f"review {self.review_id}" if self.review_id
                 else "file" if self.field.startswith("<") else "file header")
        return f"{self.file}: {where}: field {self.field!r}: {self.message}"


class RatingsError(ValueError):
    """A ratings file that fails validation; ``problems`` lists every issue found, not the first."""

    MAX_LISTED = 40

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        lines = [str(p) for p in self.problems[: self.MAX_LISTED]]
        more = len(self.problems) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more problem(s)")
        files = sorted({p.file for p in self.problems})
        super().__init__(
            f"{len(self.problems)} problem(s) in ratings file(s) {', '.join(files)}:\n  "
            + "\n  ".join(lines)
        )


# ---------------------------------------------------------------------------------------------
# The file format


class RatingRow(FileRecord):
    """One rating. ``category`` is checked against the vocabulary given as validation context
    (when there is one); an empty category or confidence is allowed (the released files have a
    few)."""

    # the validators below word the errors (a missing id is ``None`` to them)
    review_id: str = Field(default=None, validate_default=True)
    prompt_id: str = Field(default=None, validate_default=True)
    """Checked against the review set by ``load_ratings``."""
    is_mental_health: str = Field(default=None, validate_default=True)
    """``Y`` or ``N`` (``VOTES``)."""
    category: str = ""
    confidence: str = ""
    notes: str = ""

    @field_validator("review_id", "prompt_id", mode="before")
    @classmethod
    def _id(cls, value: object) -> object:
        if not isinstance(value, str) or not value:
            raise invalid(f"missing or not a string: {value!r}")
        return value

    @field_validator("is_mental_health", mode="before")
    @classmethod
    def _vote(cls, value: object) -> object:
        if value not in VOTES:
            raise invalid(f"{value!r} is not one of {'|'.join(VOTES)}")
        return value

    @field_validator("category", "confidence", mode="before")
    @classmethod
    def _empty_or_allowed(cls, value: object, info: ValidationInfo) -> object:
        """A string that is empty (real exports have a few) or one of the allowed values: the
        category vocabulary (given as validation context), or ``H|M|L``."""
        if not isinstance(value, str):
            raise invalid(f"expected str, got {type(value).__name__}")
        if info.field_name == "category":
            vocabulary = (info.context or {}).get("vocabulary")
            if value != "" and vocabulary is not None and value not in vocabulary:
                raise invalid(f"{value!r} is not in the category vocabulary")
        elif value != "" and value not in CONFIDENCES:
            raise invalid(f"{value!r} is not one of {'|'.join(CONFIDENCES)} or empty")
        return value


class RatingsFile(FileRecord):
    """A reviewer's ratings file: the header, and its rows (each validated as a ``RatingRow``)."""

    reviewer: str = Field(default=None, validate_default=True)
    exported_at: str | None = None
    packet: Any = None
    n_total: Any = None
    n_rated: Any = None
    """The header's own values, as the file has them: ``load_ratings`` checks them against the
    review set."""
    ratings: list[object] = Field(default=None, validate_default=True)

    @field_validator("reviewer", mode="before")
    @classmethod
    def _reviewer(cls, value: object) -> object:
        if not isinstance(value, str) or not value.strip():
            raise invalid(f"expected a non-empty string, got {value!r}")
        return value

    @field_validator("ratings", mode="before")
    @classmethod
    def _rows(cls, value: object) -> object:
        if not isinstance(value, list):
            raise invalid("missing or not a list")
        return value


class _Assigned(FileRecord):
    review_id: str
    prompt_id: str


def _read_json(path: Path) -> Any:
    try:
        return read_json(path)
    except (NotUTF8, NotJSON) as exc:
        where = "<bytes>" if isinstance(exc, NotUTF8) else "<json>"
        raise RatingsError([Problem(str(path), None, where,
                                    f"line {exc.line}: {exc.problem}")]) from None


def reviewer_name_problem(name: str, set_columns: Iterable[str] = SET_COLUMNS) -> str | None:
    """Why ``name`` cannot name a reviewer in the votes table of a review set with
    ``set_columns`` (None when it can). The reviewer's votes become the column ``name`` and
    the categories ``<name>_category``: a name the table already uses would overwrite that
    column and corrupt the tally without an error."""
    reserved = list(dict.fromkeys([*set_columns, *VOTE_COLUMNS]))
    if name not in reserved and not name.endswith(CATEGORY_SUFFIX):
        return None
    return (f"reviewer {name!r} would overwrite a column of the votes table: a reviewer may "
            f"not be named {', '.join(reserved)}, nor end in {CATEGORY_SUFFIX!r} (every "
            "reviewer's category column); give the reviewer another name in this file")


def reviewer_key(name: str) -> str:
    """What a reader tells reviewers apart by: ``name`` after Unicode compatibility
    normalisation (NFKC: a full-width ``Ｒ1`` is ``R1``), case folding and stripping of
    surrounding space. ``R1``, ``r1``, ``Ｒ1`` and ``R1 `` read the same in a table, so they
    are one name."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return folded.strip()


def reviewer_collisions(named: Iterable[tuple[Path | str, str]]) -> list[Problem]:
    """One problem for each ratings file whose reviewer (``(file, name)`` pairs, in order)
    reads the same as an earlier file's (``reviewer_key``): the votes table and the book
    would show two reviewers under one name, or merge them. Names both names and files."""
    first: dict[str, tuple[str, str]] = {}
    found = []
    for path, name in named:
        key = reviewer_key(name)
        if key not in first:
            first[key] = (str(path), name)
            continue
        other_file, other = first[key]
        why = (f"reviewer {name!r} appears in more than one file (also in {other_file})"
               if name == other else
               f"reviewer {name!r} reads the same as reviewer {other!r} of {other_file} "
               "(names are compared after Unicode normalisation, case folding and "
               "stripping spaces); give one of them another name")
        found.append(Problem(str(path), None, "reviewer", why))
    return found


def _read_file(path: Path, set_columns: Iterable[str] = SET_COLUMNS
               ) -> tuple[dict[str, Any], RatingsFile, list[Problem]]:
    """A ratings file's JSON object, its header and the header's problems (an invalid header
    comes back unvalidated, so the rows can still be checked and every problem reported);
    ``set_columns``: the columns of the review set the reviewer's name must not take."""
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise RatingsError([Problem(str(path), None, "<root>", "expected a JSON object")])
    try:
        header, found = RatingsFile.model_validate(doc), []
    except ValidationError as exc:
        found = [Problem(str(path), None, fld, msg) for fld, msg in problems(exc)]
        header = RatingsFile.model_construct(**doc)
    name = header.reviewer
    if isinstance(name, str) and (why := reviewer_name_problem(name, set_columns)):
        found.append(Problem(str(path), None, "reviewer", why))
    return doc, header, found


def _validated_rows(
    path: Path, rows: Sequence[Any], found: list[Problem], context: dict[str, Any] | None = None
) -> Iterator[tuple[int, dict[str, Any], RatingRow | None, list[tuple[str, str]]]]:
    """``(index, row, RatingRow or None, its problems)`` for every object row; a row that is
    not an object is added to ``found`` and skipped."""
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            found.append(Problem(str(path), None, f"ratings[{i}]", "expected an object"))
            continue
        try:
            row, errors = RatingRow.model_validate(r, context=context), []
        except ValidationError as exc:
            row, errors = None, problems(exc)
        yield i, r, row, errors


def _rows_of(doc: Any) -> list[Any] | None:
    """The ``ratings`` list of a decoded file, or None when there is none."""
    rows = doc.get("ratings") if isinstance(doc, dict) else None
    return rows if isinstance(rows, list) else None


def released_assignment(ratings_files: Sequence[Path | str]) -> dict[str, str]:
    """review_id -> prompt_id as the released ratings files assign them (all files must agree).

    The released round-1 key has no review ids; the ratings files carry them, which is how
    ``review_set.replay_round1`` rebuilds the set.
    """
    assignment: dict[str, tuple[str, str]] = {}  # review_id -> (prompt_id, file that said so)
    by_prompt: dict[str, str] = {}
    problems_found: list[Problem] = []
    for f in ratings_files:
        rows = _rows_of(_read_json(Path(f)))
        if rows is None:
            problems_found.append(Problem(str(f), None, "ratings", "missing or not a list"))
            continue
        for i, r in enumerate(rows):
            try:
                row = _Assigned.model_validate(r)
            except ValidationError:
                problems_found.append(Problem(str(f), None, f"ratings[{i}]",
                                              "no review_id/prompt_id"))
                continue
            rid, pid = row.review_id, row.prompt_id
            if rid in assignment and assignment[rid][0] != pid:
                problems_found.append(Problem(
                    str(f), rid, "prompt_id",
                    f"{pid} here but {assignment[rid][0]} in {assignment[rid][1]}",
                ))
                continue
            if pid in by_prompt and by_prompt[pid] != rid:
                problems_found.append(Problem(
                    str(f), rid, "prompt_id", f"{pid} is also under review id {by_prompt[pid]}"
                ))
                continue
            assignment[rid] = (pid, str(f))
            by_prompt[pid] = rid
    if problems_found:
        raise RatingsError(problems_found)
    return {rid: pid for rid, (pid, _) in assignment.items()}


# ---------------------------------------------------------------------------------------------
# Reading a round


@dataclass
class Ratings:
    """One reviewer's validated ratings file."""

    path: Path
    reviewer: str
    exported_at: str | None
    packet: str | None
    n_total: int
    n_rated: int
    table: pd.DataFrame
    """One row per rating, columns ``RATING_FIELDS``, in the file's order."""
    n_empty_category: int
    n_empty_confidence: int
    unrated: tuple[str, ...] = ()
    """Review ids of the set that this (partial) file does not rate."""

    @property
    def complete(self) -> bool:
        return not self.unrated


def load_ratings(
    path: Path | str,
    review_set: pd.DataFrame,
    *,
    vocabulary: Iterable[str],
    allow_unrated: bool = False,
    expected_packet: str | None = None,
) -> Ratings:
    """Read and validate one reviewer's ratings file against the review set.

    ``RatingsFile``/``RatingRow`` check the format (``is_mental_health`` in Y|N, category in
    ``vocabulary``, confidence in H|M|L, an empty category or confidence tolerated and
    counted); against the set, every review id must be rated exactly once
    (``allow_unrated=True`` accepts a partial export, as the instrument writes before a
    reviewer finishes; the tally still needs complete files), each prompt id must be the set's
    for that review id, and the header counts must match. All problems are collected and raised
    together as one ``RatingsError``.
    """
    path = Path(path)
    check_set(review_set)
    context = {"vocabulary": frozenset(vocabulary)}
    expected = dict(zip(review_set["review_id"], review_set["prompt_id"], strict=True))
    doc, header, found = _read_file(path, review_set.columns)
    if expected_packet is not None and header.packet != expected_packet:
        found.append(Problem(str(path), None, "packet",
                             f"expected {expected_packet!r}, got {header.packet!r}"))
    rows = _rows_of(doc)
    if rows is None:
        raise RatingsError(found)
    read = _check_rows(path, rows, found, expected, context)
    unrated = tuple(sorted(set(expected) - read.seen))
    found += _counts_against_set(str(path), header, len(expected), len(rows), unrated,
                                 allow_unrated)
    if found:
        raise RatingsError(found)
    return Ratings(
        path=path, reviewer=header.reviewer, exported_at=header.exported_at,
        packet=header.packet, n_total=header.n_total, n_rated=header.n_rated,
        table=pd.DataFrame(read.good, columns=list(RATING_FIELDS)),
        n_empty_category=read.n_empty_category, n_empty_confidence=read.n_empty_confidence,
        unrated=unrated,
    )


@dataclass
class _RowsRead:
    """What the rows of one ratings file gave: the review ids rated, the rows without a
    problem (``RATING_FIELDS``), and how many left the category or the confidence empty."""

    seen: set[str] = field(default_factory=set)
    good: list[dict[str, str]] = field(default_factory=list)
    n_empty_category: int = 0
    n_empty_confidence: int = 0


def _check_rows(path: Path, rows: Sequence[Any], found: list[Problem],
                expected: Mapping[str, str], context: dict[str, Any]) -> _RowsRead:
    """Every row checked on its own (``RatingRow``) and against the review set (``expected``:
    review id -> prompt id); its problems are added to ``found`` in the order of the rows."""
    f = str(path)
    owner = {pid: rid for rid, pid in expected.items()}
    read = _RowsRead()
    for i, r, row, errors in _validated_rows(path, rows, found, context):
        if any(fld == "review_id" for fld, _ in errors):
            found.append(Problem(f, None, f"ratings[{i}].review_id", dict(errors)["review_id"]))
            continue
        rid = r.get("review_id")
        assert isinstance(rid, str)  # RatingRow's check of review_id passed
        against = _ids_against_set(rid, r.get("prompt_id"), expected, owner, read.seen)
        read.seen.add(rid)
        found += [Problem(f, rid, fld, msg) for fld, msg in (*against, *errors)]
        read.n_empty_category += r.get("category", "") == ""
        read.n_empty_confidence += r.get("confidence", "") == ""
        if not against and not errors and row is not None:
            read.good.append({k: getattr(row, k) for k in RATING_FIELDS})
    return read


def _ids_against_set(rid: str, pid: object, expected: Mapping[str, str],
                     owner: Mapping[str, str], seen: set[str]) -> list[tuple[str, str]]:
    """A row's review id and prompt id against the review set (``owner``: prompt id -> review
    id) and the rows before it (``seen``): ``(field, problem)`` pairs, none when they fit."""
    out = []
    if rid in seen:
        out.append(("review_id", "rated more than once (duplicate review id)"))
    elif rid not in expected:
        out.append(("review_id", "not a review id of this review set"))
    if rid in expected and isinstance(pid, str) and pid != expected[rid]:
        if pid in owner:
            why = f"{pid!r} belongs to review {owner[pid]}, review {rid} is {expected[rid]!r}"
        else:
            why = f"unknown prompt id {pid!r} (review {rid} is {expected[rid]!r})"
        out.append(("prompt_id", why))
    return out


def _counts_against_set(f: str, header: RatingsFile, n_set: int, n_rows: int,
                        unrated: tuple[str, ...], allow_unrated: bool) -> list[Problem]:
    """The review ids left unrated (unless ``allow_unrated``) and the header's counts against
    the review set's size and the rows the file holds."""
    out = []
    if unrated and not allow_unrated:
        out.append(Problem(f, unrated[0], "review_id", f"{len(unrated)} review id(s) of the "
                           f"set are not rated (first {list(unrated[:5])})"))
    if header.n_total != n_set:
        out.append(Problem(f, None, "n_total",
                           f"{header.n_total!r}, but the review set has {n_set} items"))
    if header.n_rated != n_rows:
        out.append(Problem(f, None, "n_rated",
                           f"{header.n_rated!r}, but the file holds {n_rows} rating(s)"))
    return out


def check_format(path: Path | str) -> str:
    """A ratings file checked on its own, before any review set exists (how a profile's
    ``ratings_files`` are checked when it loads): UTF-8 JSON, the header's and every row's
    fields and types. The category vocabulary and the review set are checked by
    ``load_ratings``. Every problem is raised at once as one ``RatingsError``; a good file
    gives its reviewer's name (for ``reviewer_collisions`` across a round's files)."""
    path = Path(path)
    doc, header, found = _read_file(path)
    for i, r, _, errors in _validated_rows(path, _rows_of(doc) or [], found):
        rid = r.get("review_id") if isinstance(r.get("review_id"), str) else None
        found += [Problem(str(path), rid, fld if rid else f"ratings[{i}].{fld}", msg)
                  for fld, msg in errors]
    if found:
        raise RatingsError(found)
    return header.reviewer


def load_round(
    paths: Sequence[Path | str],
    review_set: pd.DataFrame,
    *,
    vocabulary: Iterable[str],
    expected_packet: str | None = None,
) -> list[Ratings]:
    """Every reviewer's file of a round, validated together (no two reviewers whose names read
    the same: ``reviewer_collisions``); all problems raised at once."""
    vocabulary = tuple(vocabulary)
    out, problems = [], []
    for p in paths:
        try:
            out.append(load_ratings(p, review_set, vocabulary=vocabulary,
                                    expected_packet=expected_packet))
        except RatingsError as err:
            problems.extend(err.problems)
    problems += reviewer_collisions((r.path, r.reviewer) for r in out)
    if problems:
        raise RatingsError(problems)
    return out


def empty_field_counts(ratings: Sequence[Ratings]) -> pd.DataFrame:
    """Per reviewer: how many tolerated empty category / confidence strings their file had."""
    return pd.DataFrame(
        [{"reviewer": r.reviewer, "file": r.path.name, "n_ratings": len(r.table),
          "empty_category": r.n_empty_category, "empty_confidence": r.n_empty_confidence}
         for r in ratings]
    )


# ---------------------------------------------------------------------------------------------
# The votes table


def votes_table(
    review_set: pd.DataFrame, ratings: Sequence[Ratings], *, min_yes: int = 2
) -> pd.DataFrame:
    """One row per review item: the set's columns, each reviewer's vote and category, the count.

    Columns: the set's columns, then per reviewer ``<name>`` (Y/N) and ``<name>_category``, then
    ``n_yes``, ``included`` (``n_yes >= min_yes``) and ``tier`` (``"<n_yes>/<n reviewers>"``).
    Every reviewer must have rated every item, under a name no other column has
    (``reviewer_name_problem``) and that reads unlike every other reviewer's
    (``reviewer_collisions``).
    """
    check_set(review_set)
    if not ratings:
        raise ReviewSetError("no ratings files to tally")
    names = [r.reviewer for r in ratings]
    if same := reviewer_collisions((r.path, r.reviewer) for r in ratings):
        raise ReviewSetError(str(same[0]))
    for r in ratings:
        if why := reviewer_name_problem(r.reviewer, review_set.columns):
            raise ReviewSetError(f"{r.path}: field 'reviewer': {why}")
    out = review_set.sort_values("review_id", ignore_index=True).copy()
    for r in ratings:
        if not r.complete:
            raise ReviewSetError(
                f"{r.path}: reviewer {r.reviewer} has {len(r.unrated)} unrated item(s) "
                f"(e.g. {list(r.unrated[:3])}); the tally needs complete ratings"
            )
        t = r.table.set_index("review_id")
        out[r.reviewer] = out["review_id"].map(t["is_mental_health"])
        out[f"{r.reviewer}{CATEGORY_SUFFIX}"] = out["review_id"].map(t["category"])
    out["n_yes"] = (out[names] == "Y").sum(axis=1).astype(int)
    out["included"] = out["n_yes"] >= min_yes
    out["tier"] = out["n_yes"].map(lambda n: f"{n}/{len(names)}")
    return out


def reviewer_names(votes: pd.DataFrame) -> list[str]:
    """The reviewer vote columns of a votes table (each has a ``<name>_category`` partner)."""
    return [c[: -len(CATEGORY_SUFFIX)] for c in votes.columns if c.endswith(CATEGORY_SUFFIX)]


def relevance_ratings(votes: pd.DataFrame) -> dict[str, list[str]]:
    """Each reviewer's Y/N votes in review-id order: the input ``agreement.summarize`` takes."""
    ordered = votes.sort_values("review_id")
    return {name: ordered[name].tolist() for name in reviewer_names(votes)}


def read_votes(path: Path | str) -> pd.DataFrame:
    """A votes table as ``votes_table`` wrote it to CSV (types restored)."""
    votes = read_csv(path, error=ReviewSetError, dtype=str, keep_default_na=False)
    votes["n_yes"] = votes["n_yes"].astype(int)
    votes["included"] = votes["included"].map({"True": True, "False": False})
    if votes["included"].isna().any():
        raise ReviewSetError(f"{path}: column 'included' must hold True/False")
    return votes
