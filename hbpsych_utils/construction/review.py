"""The blinded clinician review: review sets, reviewer packets, ratings import, votes and tally.

A review round shows clinicians a shuffled set of conversations under neutral ids (``R0001``…)
with the screen's verdict withheld. The set mixes the items under test (round 1: the screen's
RELEVANT + BORDERLINE, ``kind="screened_in"``; round 2: the recall screen's CLEAR + POSSIBLE,
``kind="candidate"``) with concealed controls the screen excluded (``kind="control"``). The
share of controls the reviewers' majority includes estimates what the screen misses; above a
threshold it triggers another (recall) round.

Everything here is a plain function over DataFrames or small dataclasses, so the notebooks only
call and display. Agreement statistics live in :mod:`hbpsych_utils.construction.agreement`,
not here.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation, Message
from hbpsych_utils.core.stage import write_json

SCREENED_IN = "screened_in"
CANDIDATE = "candidate"
CONTROL = "control"
ROUND1_KINDS = (SCREENED_IN, CONTROL)
ROUND2_KINDS = (CANDIDATE, CONTROL)

VOTES = ("Y", "N")
CONFIDENCES = ("H", "M", "L")
NO_CATEGORY_MAJORITY = "no category majority"

SET_COLUMNS = ("review_id", "prompt_id", "kind")
RATING_FIELDS = ("review_id", "prompt_id", "is_mental_health", "category", "confidence", "notes")
PACKET_ITEM_KEYS = ("review_id", "prompt_id", "turns", "translation", "available")
"""The only keys a packet item carries: nothing that reveals the screen's verdict."""


class ReviewSetError(ValueError):
    """A review set that cannot be built or does not line up with the ratings."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a ratings file: which file, which review id, which field."""

    file: str
    review_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"review {self.review_id}" if self.review_id else "file header"
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
# Designing a round


def review_ids(n: int, prefix: str = "R", width: int = 4) -> list[str]:
    """Neutral, order-only ids: R0001, R0002, …"""
    width = max(width, len(str(n)))
    return [f"{prefix}{i:0{width}d}" for i in range(1, n + 1)]


def design_round(
    screened_in_ids: Iterable[str],
    control_pool_ids: Iterable[str],
    n_controls: int,
    seed: int,
    *,
    kinds: tuple[str, str] = ROUND1_KINDS,
    id_prefix: str = "R",
) -> pd.DataFrame:
    """A blinded review set: every item under test plus ``n_controls`` drawn from the pool.

    One numpy Generator seeded with ``seed`` first draws the controls, then shuffles the whole
    set into the order that assigns the review ids. Inputs are sorted first, so the result
    depends on the ids and the seed only, never on the order the caller listed them in.
    ``kinds`` names the two groups (round 2: ``ROUND2_KINDS``).
    """
    tested = sorted(set(screened_in_ids))
    pool = sorted(set(control_pool_ids))
    overlap = sorted(set(tested) & set(pool))
    if overlap:
        raise ReviewSetError(
            f"{len(overlap)} id(s) are both under test and in the control pool, e.g. {overlap[:3]}"
        )
    if not 0 <= n_controls <= len(pool):
        raise ReviewSetError(
            f"n_controls={n_controls} but the control pool holds {len(pool)} conversation(s)"
        )
    rng = np.random.default_rng(seed)
    drawn = rng.choice(len(pool), size=n_controls, replace=False) if n_controls else []
    controls = sorted(pool[i] for i in drawn)
    items = [(pid, kinds[0]) for pid in tested] + [(pid, kinds[1]) for pid in controls]
    order = rng.permutation(len(items))
    shuffled = [items[i] for i in order]
    return pd.DataFrame(
        {
            "review_id": review_ids(len(shuffled), id_prefix),
            "prompt_id": [p for p, _ in shuffled],
            "kind": [k for _, k in shuffled],
        }
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RatingsError([Problem(str(path), None, "<json>", f"not valid JSON: {exc}")]) from None


def _released_assignment(ratings_files: Sequence[Path | str]) -> dict[str, str]:
    """review_id -> prompt_id as the released ratings files assign them (all files must agree)."""
    assignment: dict[str, tuple[str, str]] = {}  # review_id -> (prompt_id, file that said so)
    by_prompt: dict[str, str] = {}
    problems: list[Problem] = []
    for f in ratings_files:
        doc = _read_json(Path(f))
        rows = doc.get("ratings") if isinstance(doc, dict) else None
        if not isinstance(rows, list):
            problems.append(Problem(str(f), None, "ratings", "missing or not a list"))
            continue
        for i, r in enumerate(rows):
            rid = r.get("review_id") if isinstance(r, dict) else None
            pid = r.get("prompt_id") if isinstance(r, dict) else None
            if not isinstance(rid, str) or not isinstance(pid, str):
                problems.append(Problem(str(f), None, f"ratings[{i}]", "no review_id/prompt_id"))
                continue
            if rid in assignment and assignment[rid][0] != pid:
                problems.append(Problem(
                    str(f), rid, "prompt_id",
                    f"{pid} here but {assignment[rid][0]} in {assignment[rid][1]}",
                ))
                continue
            if pid in by_prompt and by_prompt[pid] != rid:
                problems.append(Problem(
                    str(f), rid, "prompt_id", f"{pid} is also under review id {by_prompt[pid]}"
                ))
                continue
            assignment[rid] = (pid, str(f))
            by_prompt[pid] = rid
    if problems:
        raise RatingsError(problems)
    return {rid: pid for rid, (pid, _) in assignment.items()}


def replay_round1(screening_key: Path | str, ratings_files: Sequence[Path | str]) -> pd.DataFrame:
    """Round 1's released set: key rows with ``in_blinded_set == yes``, ids from the ratings.

    Controls are the set's items the screen called NOT_RELEVANT. The review ids are not in the
    key; the released ratings carry them, so every file must agree on them and together cover
    exactly the key's set. The ``screening_label`` column is kept for the tally, never for
    the reviewers' packet.
    """
    key = pd.read_csv(screening_key, dtype=str, keep_default_na=False)
    missing = {"prompt_id", "screening_label", "in_blinded_set"} - set(key.columns)
    if missing:
        raise ReviewSetError(f"{screening_key}: missing column(s) {sorted(missing)}")
    in_set = key[key["in_blinded_set"].str.strip().str.lower() == "yes"]
    assignment = _released_assignment(ratings_files)
    by_prompt = {pid: rid for rid, pid in assignment.items()}
    key_ids, rated_ids = set(in_set["prompt_id"]), set(by_prompt)
    if key_ids != rated_ids:
        extra, absent = sorted(rated_ids - key_ids), sorted(key_ids - rated_ids)
        raise ReviewSetError(
            f"{screening_key} and the ratings files {[str(f) for f in ratings_files]} disagree on "
            f"the round-1 set: {len(extra)} rated prompt id(s) not in the key's set "
            f"(e.g. {[(by_prompt[p], p) for p in extra[:3]]}), {len(absent)} set item(s) "
            f"rated by nobody (e.g. {absent[:3]})"
        )
    out = pd.DataFrame(
        {
            "review_id": [by_prompt[p] for p in in_set["prompt_id"]],
            "prompt_id": list(in_set["prompt_id"]),
            "kind": [
                CONTROL if lab == "NOT_RELEVANT" else SCREENED_IN
                for lab in in_set["screening_label"]
            ],
            "screening_label": list(in_set["screening_label"]),
        }
    )
    return out.sort_values("review_id", ignore_index=True)


def replay_round2(
    recovery_key: Path | str, ratings_files: Sequence[Path | str] = ()
) -> pd.DataFrame:
    """Round 2's released set, straight from the recovery key (it carries the review ids).

    With ``ratings_files``, checks that they assign the same prompt id to every review id.
    """
    key = pd.read_csv(recovery_key, dtype=str, keep_default_na=False)
    missing = {"review_id", "prompt_id", "kind"} - set(key.columns)
    if missing:
        raise ReviewSetError(f"{recovery_key}: missing column(s) {sorted(missing)}")
    bad = key[~key["kind"].isin(ROUND2_KINDS)]
    if len(bad):
        raise ReviewSetError(
            f"{recovery_key}: review {bad['review_id'].iloc[0]}: field 'kind': "
            f"{bad['kind'].iloc[0]!r} is not one of {ROUND2_KINDS}"
        )
    for col in ("review_id", "prompt_id"):
        dup = key[key[col].duplicated()][col]
        if len(dup):
            raise ReviewSetError(f"{recovery_key}: duplicate {col} {dup.iloc[0]}")
    if ratings_files:
        assignment = _released_assignment(ratings_files)
        expected = dict(zip(key["review_id"], key["prompt_id"], strict=True))
        if assignment != expected:
            diff = sorted(
                set(assignment.items()) ^ set(expected.items()), key=lambda t: t[0]
            )
            raise ReviewSetError(
                f"{recovery_key} and the ratings files disagree on {len(diff)} "
                f"(review_id, prompt_id) pair(s), e.g. {diff[:3]}"
            )
    return key.sort_values("review_id", ignore_index=True)


def _check_set(review_set: pd.DataFrame) -> None:
    missing = set(SET_COLUMNS) - set(review_set.columns)
    if missing:
        raise ReviewSetError(f"review set lacks column(s) {sorted(missing)}")
    for col in ("review_id", "prompt_id"):
        if review_set[col].duplicated().any():
            dup = review_set.loc[review_set[col].duplicated(), col].iloc[0]
            raise ReviewSetError(f"review set has duplicate {col} {dup}")


def pairs_fingerprint(pairs: Iterable[tuple[str, str]]) -> str:
    """sha256 over sorted (review_id, prompt_id) pairs: names one exact review set."""
    return hashlib.sha256(json.dumps(sorted(pairs)).encode("utf-8")).hexdigest()


def set_fingerprint(review_set: pd.DataFrame) -> str:
    """``pairs_fingerprint`` of a review-set table (for manifests; the instrument keys on it)."""
    return pairs_fingerprint(zip(review_set["review_id"], review_set["prompt_id"], strict=True))


# ---------------------------------------------------------------------------------------------
# Reviewer packet


def _turns(messages: Sequence[Message | Mapping[str, str]]) -> list[dict[str, str]]:
    out = []
    for m in messages:
        role, content = (m.role, m.content) if isinstance(m, Message) else (m["role"], m["content"])
        out.append({"role": str(role), "content": str(content)})
    return out


def build_packet(
    review_set: pd.DataFrame,
    conversations: Iterable[Conversation],
    translations: Mapping[str, Sequence[Message | Mapping[str, str]]] | None = None,
    *,
    on_missing: Literal["error", "placeholder"] = "error",
) -> list[dict[str, Any]]:
    """The reviewers' items in review-id order: id, prompt id, turns, translation if any.

    Nothing about the screen (kind, label, tier) goes in. ``translations`` maps a prompt id to
    its turn-by-turn English translation, which must have the conversation's turn count.
    A conversation absent from ``conversations`` (a partial corpus) is an error, or with
    ``on_missing="placeholder"`` an item with no turns and ``available: false``.
    """
    _check_set(review_set)
    by_id = {c.prompt_id: c for c in conversations}
    translations = translations or {}
    items, absent = [], []
    for rid, pid in sorted(zip(review_set["review_id"], review_set["prompt_id"], strict=True)):
        conv = by_id.get(pid)
        if conv is None:
            absent.append((rid, pid))
            items.append(
                {"review_id": rid, "prompt_id": pid, "turns": [], "translation": None,
                 "available": False}
            )
            continue
        translation = None
        if pid in translations:
            translation = _turns(translations[pid])
            if len(translation) != len(conv.prompt):
                raise ReviewSetError(
                    f"translation of {pid} (review {rid}) has {len(translation)} turn(s), the "
                    f"conversation has {len(conv.prompt)}"
                )
        items.append(
            {"review_id": rid, "prompt_id": pid, "turns": _turns(conv.prompt),
             "translation": translation, "available": True}
        )
    if absent and on_missing == "error":
        raise ReviewSetError(
            f"{len(absent)} review item(s) have no conversation in the corpus, e.g. "
            f"{absent[:3]}; pass on_missing='placeholder' to write a packet for a partial corpus"
        )
    return items


def write_packet(
    path: Path | str, items: Sequence[Mapping[str, Any]], *, round_name: str,
    packet: str | None = None,
) -> Path:
    """The packet as JSON: ``{round, packet, n_total, items}``."""
    for it in items:
        leaked = set(it) - set(PACKET_ITEM_KEYS)
        if leaked:
            raise ReviewSetError(
                f"packet item {it.get('review_id')} carries {sorted(leaked)}; only "
                f"{PACKET_ITEM_KEYS} may reach reviewers"
            )
    doc = {"round": round_name, "packet": packet, "n_total": len(items), "items": list(items)}
    return write_json(Path(path), doc)


# ---------------------------------------------------------------------------------------------
# Ratings import


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

    Checks: every review id of the set exactly once (``allow_unrated=True`` accepts a partial
    export, as the instrument writes before a reviewer finishes; the tally still needs complete
    files), each prompt id matches the set's for that review id, ``is_mental_health`` in Y|N,
    category in ``vocabulary``, confidence in H|M|L, and the header counts. An empty category
    or confidence string is tolerated (the released data has a few) and counted. All problems
    are collected and raised together as one ``RatingsError``.
    """
    path = Path(path)
    f = str(path)
    _check_set(review_set)
    vocab = set(vocabulary)
    expected = dict(zip(review_set["review_id"], review_set["prompt_id"], strict=True))
    owner = {pid: rid for rid, pid in expected.items()}
    doc = _read_json(path)
    problems: list[Problem] = []

    def bad(rid: str | None, fld: str, msg: str) -> None:
        problems.append(Problem(f, rid, fld, msg))

    if not isinstance(doc, dict):
        raise RatingsError([Problem(f, None, "<root>", "expected a JSON object")])
    reviewer = doc.get("reviewer")
    if not isinstance(reviewer, str) or not reviewer.strip():
        bad(None, "reviewer", f"expected a non-empty string, got {reviewer!r}")
    exported_at = doc.get("exported_at")
    if exported_at is not None and not isinstance(exported_at, str):
        bad(None, "exported_at", f"expected a string, got {exported_at!r}")
    packet = doc.get("packet")
    if expected_packet is not None and packet != expected_packet:
        bad(None, "packet", f"expected {expected_packet!r}, got {packet!r}")
    rows = doc.get("ratings")
    if not isinstance(rows, list):
        bad(None, "ratings", "missing or not a list")
        raise RatingsError(problems)

    seen: set[str] = set()
    good: list[dict[str, str]] = []
    n_empty_cat = n_empty_conf = 0
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            bad(None, f"ratings[{i}]", "expected an object")
            continue
        rid = r.get("review_id")
        if not isinstance(rid, str) or not rid:
            bad(None, f"ratings[{i}].review_id", f"missing or not a string: {rid!r}")
            continue
        ok = True
        if rid in seen:
            bad(rid, "review_id", "rated more than once (duplicate review id)")
            ok = False
        elif rid not in expected:
            bad(rid, "review_id", "not a review id of this review set")
            ok = False
        seen.add(rid)
        pid = r.get("prompt_id")
        if rid in expected and pid != expected[rid]:
            if pid in owner:
                bad(rid, "prompt_id", f"{pid!r} belongs to review {owner[pid]}, "
                    f"review {rid} is {expected[rid]!r}")
            else:
                bad(rid, "prompt_id", f"unknown prompt id {pid!r} (review {rid} is "
                    f"{expected[rid]!r})")
            ok = False
        vote = r.get("is_mental_health")
        if vote not in VOTES:
            bad(rid, "is_mental_health", f"{vote!r} is not one of {'|'.join(VOTES)}")
            ok = False
        cat = r.get("category", "")
        if cat == "":
            n_empty_cat += 1
        elif cat not in vocab:
            bad(rid, "category", f"{cat!r} is not in the category vocabulary")
            ok = False
        conf = r.get("confidence", "")
        if conf == "":
            n_empty_conf += 1
        elif conf not in CONFIDENCES:
            bad(rid, "confidence", f"{conf!r} is not one of {'|'.join(CONFIDENCES)} or empty")
            ok = False
        notes = r.get("notes", "")
        if not isinstance(notes, str):
            bad(rid, "notes", f"expected a string, got {type(notes).__name__}")
            ok = False
        if ok:
            good.append({"review_id": rid, "prompt_id": pid, "is_mental_health": vote,
                         "category": cat, "confidence": conf, "notes": notes})

    unrated = tuple(sorted(set(expected) - seen))
    if unrated and not allow_unrated:
        bad(unrated[0], "review_id",
            f"{len(unrated)} review id(s) of the set are not rated (first {list(unrated[:5])})")
    n_total, n_rated = doc.get("n_total"), doc.get("n_rated")
    if n_total != len(expected):
        bad(None, "n_total", f"{n_total!r}, but the review set has {len(expected)} items")
    if n_rated != len(rows):
        bad(None, "n_rated", f"{n_rated!r}, but the file holds {len(rows)} rating(s)")
    if problems:
        raise RatingsError(problems)
    table = pd.DataFrame(good, columns=list(RATING_FIELDS))
    return Ratings(
        path=path, reviewer=reviewer, exported_at=exported_at, packet=packet,
        n_total=n_total, n_rated=n_rated, table=table, n_empty_category=n_empty_cat,
        n_empty_confidence=n_empty_conf, unrated=unrated,
    )


def load_round(
    paths: Sequence[Path | str],
    review_set: pd.DataFrame,
    *,
    vocabulary: Iterable[str],
    expected_packet: str | None = None,
) -> list[Ratings]:
    """Every reviewer's file of a round, validated together; all problems raised at once."""
    vocabulary = tuple(vocabulary)
    out, problems = [], []
    for p in paths:
        try:
            out.append(load_ratings(p, review_set, vocabulary=vocabulary,
                                    expected_packet=expected_packet))
        except RatingsError as err:
            problems.extend(err.problems)
    names = Counter(r.reviewer for r in out)
    for r in out:
        if names[r.reviewer] > 1:
            problems.append(Problem(str(r.path), None, "reviewer",
                                    f"reviewer {r.reviewer!r} appears in more than one file"))
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
# Votes and tally


def votes_table(
    review_set: pd.DataFrame, ratings: Sequence[Ratings], *, min_yes: int = 2
) -> pd.DataFrame:
    """One row per review item: the set's columns, each reviewer's vote and category, the count.

    Columns: the set's columns, then per reviewer ``<name>`` (Y/N) and ``<name>_category``, then
    ``n_yes``, ``included`` (``n_yes >= min_yes``) and ``tier`` (``"<n_yes>/<n reviewers>"``).
    Every reviewer must have rated every item.
    """
    _check_set(review_set)
    if not ratings:
        raise ReviewSetError("no ratings files to tally")
    names = [r.reviewer for r in ratings]
    if len(set(names)) != len(names):
        raise ReviewSetError(f"reviewer names repeat: {names}")
    out = review_set.sort_values("review_id", ignore_index=True).copy()
    for r in ratings:
        if not r.complete:
            raise ReviewSetError(
                f"{r.path}: reviewer {r.reviewer} has {len(r.unrated)} unrated item(s) "
                f"(e.g. {list(r.unrated[:3])}); the tally needs complete ratings"
            )
        t = r.table.set_index("review_id")
        out[r.reviewer] = out["review_id"].map(t["is_mental_health"])
        out[f"{r.reviewer}_category"] = out["review_id"].map(t["category"])
    out["n_yes"] = (out[names] == "Y").sum(axis=1).astype(int)
    out["included"] = out["n_yes"] >= min_yes
    out["tier"] = out["n_yes"].map(lambda n: f"{n}/{len(names)}")
    return out


def reviewer_names(votes: pd.DataFrame) -> list[str]:
    """The reviewer vote columns of a votes table (each has a ``<name>_category`` partner)."""
    return [c[: -len("_category")] for c in votes.columns if c.endswith("_category")]


def relevance_ratings(votes: pd.DataFrame) -> dict[str, list[str]]:
    """Each reviewer's Y/N votes in review-id order: the input ``agreement.summarize`` takes."""
    ordered = votes.sort_values("review_id")
    return {name: ordered[name].tolist() for name in reviewer_names(votes)}


def modal_category(
    votes: Sequence[str], categories: Sequence[str], *, min_agree: int = 2
) -> str:
    """The category most Y-voters chose, if at least ``min_agree`` of them chose it.

    Only reviewers who voted Y count; an empty category is no category. A tie for the top
    count (possible with four or more reviewers) is no majority either.
    """
    chosen = [c for v, c in zip(votes, categories, strict=True) if v == "Y" and c]
    counts = Counter(chosen).most_common()
    if not counts or counts[0][1] < min_agree:
        return NO_CATEGORY_MAJORITY
    if len(counts) > 1 and counts[1][1] == counts[0][1]:
        return NO_CATEGORY_MAJORITY
    return counts[0][0]


def modal_categories(votes: pd.DataFrame, *, min_agree: int = 2) -> pd.Series:
    """``modal_category`` for every row of a votes table, indexed like it."""
    names = reviewer_names(votes)
    return pd.Series(
        [
            modal_category([row[n] for n in names], [row[f"{n}_category"] for n in names],
                           min_agree=min_agree)
            for _, row in votes.iterrows()
        ],
        index=votes.index,
        name="modal_category",
        dtype=object,
    )


def included_ids(votes: pd.DataFrame, kinds: Iterable[str] | None = None) -> list[str]:
    """Sorted prompt ids the majority included, optionally only of the given kinds."""
    sel = votes["included"]
    if kinds is not None:
        sel = sel & votes["kind"].isin(list(kinds))
    return sorted(votes.loc[sel, "prompt_id"])


def outcomes(votes: pd.DataFrame) -> pd.DataFrame:
    """Items by kind and consensus tier, with the included count and share per kind."""
    tiers = sorted(votes["tier"].unique(), key=lambda t: -int(t.split("/")[0]))
    table = pd.crosstab(votes["kind"], votes["tier"]).reindex(columns=tiers, fill_value=0)
    table["n"] = votes.groupby("kind").size()
    table["included"] = votes.groupby("kind")["included"].sum().astype(int)
    table["included_share"] = table["included"] / table["n"]
    table.columns.name = None
    return table


@dataclass(frozen=True)
class RoundTally:
    """What a round's votes decide, for any pair of kinds (``tally``)."""

    test_kind: str
    control_kind: str
    n_reviewed: int
    n_tested: int
    n_controls: int
    n_included: int
    n_tested_included: int
    n_controls_included: int
    control_inclusion_rate: float
    threshold: float
    recall_triggered: bool
    tier_counts: dict[str, int]
    """Items per consensus tier ("3/3", "2/3", …)."""
    subgroups: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tested items per value of the subgroup column: ``{"n": …, "included": …}``."""

    @property
    def loop_terminated(self) -> bool:
        return not self.recall_triggered


def tally(
    votes: pd.DataFrame,
    *,
    test_kind: str = SCREENED_IN,
    control_kind: str = CONTROL,
    threshold: float = study.CONTROL_THRESHOLD,
    subgroup_column: str | None = None,
) -> RoundTally:
    """Count a round's outcomes and apply the stopping rule.

    The control-inclusion rate is the share of controls the majority included; a rate strictly
    above ``threshold`` triggers a recall round. ``subgroup_column`` (round 2:
    ``"recovery_tier"``) breaks the tested items down by that column's values.
    """
    unknown = set(votes["kind"]) - {test_kind, control_kind}
    if unknown:
        raise ReviewSetError(
            f"votes table has kind(s) {sorted(unknown)}; expected {test_kind!r} or {control_kind!r}"
        )
    tested = votes[votes["kind"] == test_kind]
    controls = votes[votes["kind"] == control_kind]
    if controls.empty:
        raise ReviewSetError(
            "the review set has no controls: the stopping rule needs concealed controls"
        )
    n_ctrl_inc = int(controls["included"].sum())
    rate = n_ctrl_inc / len(controls)
    subgroups: dict[str, dict[str, int]] = {}
    if subgroup_column is not None:
        for value, grp in tested.groupby(subgroup_column, sort=True):
            subgroups[str(value)] = {"n": len(grp), "included": int(grp["included"].sum())}
    return RoundTally(
        test_kind=test_kind,
        control_kind=control_kind,
        n_reviewed=len(votes),
        n_tested=len(tested),
        n_controls=len(controls),
        n_included=int(votes["included"].sum()),
        n_tested_included=int(tested["included"].sum()),
        n_controls_included=n_ctrl_inc,
        control_inclusion_rate=rate,
        threshold=threshold,
        recall_triggered=rate > threshold,
        tier_counts={t: int(n) for t, n in votes["tier"].value_counts().sort_index().items()},
        subgroups=subgroups,
    )


@dataclass(frozen=True)
class Round1Tally:
    """Round 1's numbers, named as the stage's ``metrics.json`` names them."""

    n_reviewed: int
    n_screened_in: int
    n_controls: int
    n_included: int
    n_screened_in_included: int
    n_controls_included: int
    control_inclusion_rate: float
    recall_triggered: bool
    threshold: float
    tier_counts: dict[str, int]

    @property
    def loop_terminated(self) -> bool:
        return not self.recall_triggered

    def metrics(self) -> dict[str, Any]:
        """The issue's round-1 keys (the agreement keys come from ``agreement``)."""
        return {k: getattr(self, k) for k in (
            "n_reviewed", "n_screened_in", "n_controls", "n_included", "n_screened_in_included",
            "n_controls_included", "control_inclusion_rate", "recall_triggered",
        )}


@dataclass(frozen=True)
class Round2Tally:
    """Round 2's numbers: candidates by recall tier versus fresh controls."""

    n_reviewed: int
    n_candidates: int
    n_clear: int
    n_possible: int
    n_controls: int
    n_included: int
    n_candidates_included: int
    n_clear_included: int
    n_possible_included: int
    n_controls_included: int
    control_inclusion_rate: float
    recall_triggered: bool
    threshold: float
    tier_counts: dict[str, int]

    @property
    def loop_terminated(self) -> bool:
        """The stopping rule is met: no further round is needed."""
        return not self.recall_triggered

    def metrics(self) -> dict[str, Any]:
        """The issue's round-2 keys except ``n_recall_pool`` (the recall screen's) and agreement."""
        out = {k: getattr(self, k) for k in (
            "n_candidates", "n_clear", "n_possible", "n_controls", "n_candidates_included",
            "n_clear_included", "n_possible_included", "n_controls_included",
            "control_inclusion_rate",
        )}
        out["loop_terminated"] = self.loop_terminated
        return out


def tally_round1(votes: pd.DataFrame, *, threshold: float = study.CONTROL_THRESHOLD) -> Round1Tally:
    """Round 1: screened-in items versus concealed controls, and the stopping decision."""
    t = tally(votes, test_kind=SCREENED_IN, threshold=threshold)
    return Round1Tally(
        n_reviewed=t.n_reviewed, n_screened_in=t.n_tested, n_controls=t.n_controls,
        n_included=t.n_included, n_screened_in_included=t.n_tested_included,
        n_controls_included=t.n_controls_included,
        control_inclusion_rate=t.control_inclusion_rate, recall_triggered=t.recall_triggered,
        threshold=threshold, tier_counts=t.tier_counts,
    )


def tally_round2(
    votes: pd.DataFrame, *, threshold: float = study.CONTROL_THRESHOLD,
    tier_column: str = "recovery_tier", tiers: tuple[str, str] = ("CLEAR", "POSSIBLE"),
) -> Round2Tally:
    """Round 2: recall candidates (by recall tier, joined from the key) versus fresh controls."""
    t = tally(votes, test_kind=CANDIDATE, threshold=threshold, subgroup_column=tier_column)
    other = sorted(set(t.subgroups) - set(tiers))
    if other:
        raise ReviewSetError(
            f"candidates with recall tier(s) {other} in column {tier_column!r}; expected {tiers}"
        )
    clear, possible = (t.subgroups.get(x, {"n": 0, "included": 0}) for x in tiers)
    return Round2Tally(
        n_reviewed=t.n_reviewed, n_candidates=t.n_tested, n_clear=clear["n"],
        n_possible=possible["n"], n_controls=t.n_controls, n_included=t.n_included,
        n_candidates_included=t.n_tested_included, n_clear_included=clear["included"],
        n_possible_included=possible["included"], n_controls_included=t.n_controls_included,
        control_inclusion_rate=t.control_inclusion_rate, recall_triggered=t.recall_triggered,
        threshold=threshold, tier_counts=t.tier_counts,
    )


def check_round1_design(
    review_set: pd.DataFrame, screen: pd.DataFrame, *, n_controls: int,
    screened_in_labels: Sequence[str] = ("RELEVANT", "BORDERLINE"),
) -> None:
    """A round-1 set must hold every screened-in item and ``n_controls`` screened-out ones.

    Checked in replay too: a released set that disagreed with the released screen (or with the
    profile's ``n_controls``) would make every later number meaningless.
    """
    _check_set(review_set)
    labels = dict(zip(screen["prompt_id"], screen["label"], strict=True))
    unknown = sorted(set(review_set["prompt_id"]) - set(labels))
    tested = set(review_set.loc[review_set["kind"] == SCREENED_IN, "prompt_id"])
    controls = review_set.loc[review_set["kind"] == CONTROL, "prompt_id"]
    expected = {p for p, lab in labels.items() if lab in screened_in_labels}
    problems = []
    if unknown:
        problems.append(f"{len(unknown)} item(s) not in the screen, e.g. {unknown[:3]}")
    if tested != expected:
        problems.append(
            f"screened-in items differ from the screen's {'/'.join(screened_in_labels)}: "
            f"{len(expected - tested)} missing, {len(tested - expected)} extra"
        )
    bad_controls = sorted(p for p in controls if labels.get(p) in screened_in_labels)
    if bad_controls:
        problems.append(f"control(s) the screen included, e.g. {bad_controls[:3]}")
    if len(controls) != n_controls:
        problems.append(f"{len(controls)} controls, the profile asks for n_controls={n_controls}")
    if problems:
        raise ReviewSetError("round-1 review set does not match the screen: " + "; ".join(problems))


def recall_pool(screen: pd.DataFrame, round1_set: pd.DataFrame) -> list[str]:
    """The recall round's pool: every NOT_RELEVANT item that was not a round-1 control."""
    excluded = set(screen.loc[screen["label"] == "NOT_RELEVANT", "prompt_id"])
    used = set(round1_set.loc[round1_set["kind"] == CONTROL, "prompt_id"])
    return sorted(excluded - used)


def round_seed(seed: int, round_number: int) -> int:
    """The seed of review round ``round_number``, derived from the profile's seed.

    Round 1 uses the profile seed itself (so its released design is unchanged); later rounds
    get their own stream, so a round's control draw and order do not repeat round 1's.
    """
    if round_number == 1:
        return seed
    digest = hashlib.sha256(f"{seed}:review-round-{round_number}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


CONTROL_TIER = "NO (control)"
"""What the released recovery key puts in ``recovery_tier`` for a round-2 control."""


def design_round2(
    recall: pd.DataFrame,
    n_controls: int,
    seed: int,
    *,
    candidate_tiers: Sequence[str] = ("CLEAR", "POSSIBLE"),
    no_tier: str = "NO",
) -> pd.DataFrame:
    """Round 2 from a recall screen: its candidates plus fresh controls from its ``NO`` pool.

    ``recall`` has ``prompt_id, tier, bucket, reason`` (``screening.run_screen`` with the
    recall spec). The set gets a new seeded order (``round_seed(seed, 2)``) and the released
    recovery key's columns: ``review_id, prompt_id, kind, recovery_tier, recovery_bucket,
    recovery_reason`` (controls: tier ``NO (control)``, no bucket or reason).
    """
    missing = {"prompt_id", "tier", "bucket", "reason"} - set(recall.columns)
    if missing:
        raise ReviewSetError(f"recall screen table lacks column(s) {sorted(missing)}")
    unknown = sorted(set(recall["tier"]) - {*candidate_tiers, no_tier})
    if unknown:
        raise ReviewSetError(f"recall screen has tier(s) {unknown}; expected "
                             f"{[*candidate_tiers, no_tier]}")
    candidates = recall.loc[recall["tier"].isin(list(candidate_tiers)), "prompt_id"]
    no_pool = recall.loc[recall["tier"] == no_tier, "prompt_id"]
    out = design_round(candidates, no_pool, n_controls, round_seed(seed, 2), kinds=ROUND2_KINDS)
    info = recall.set_index("prompt_id")
    is_cand = out["kind"] == CANDIDATE
    out["recovery_tier"] = [info.at[p, "tier"] if c else CONTROL_TIER
                            for p, c in zip(out["prompt_id"], is_cand, strict=True)]
    for col, src in (("recovery_bucket", "bucket"), ("recovery_reason", "reason")):
        out[col] = [info.at[p, src] if c else ""
                    for p, c in zip(out["prompt_id"], is_cand, strict=True)]
    return out


def check_round2_design(review_set: pd.DataFrame, pool: Iterable[str], *, n_controls: int) -> None:
    """Round 2's candidates and fresh controls must all come from the recall pool."""
    _check_set(review_set)
    pool = set(pool)
    outside = sorted(set(review_set["prompt_id"]) - pool)
    n_ctrl = int((review_set["kind"] == CONTROL).sum())
    problems = []
    if outside:
        problems.append(f"{len(outside)} item(s) outside the recall pool, e.g. {outside[:3]}")
    if n_ctrl != n_controls:
        problems.append(f"{n_ctrl} controls, the profile asks for n_controls={n_controls}")
    if problems:
        raise ReviewSetError("round-2 review set does not match the recall pool: "
                             + "; ".join(problems))


def read_votes(path: Path | str) -> pd.DataFrame:
    """A votes table as ``votes_table`` wrote it to CSV (types restored)."""
    votes = pd.read_csv(path, dtype=str, keep_default_na=False)
    votes["n_yes"] = votes["n_yes"].astype(int)
    votes["included"] = votes["included"].map({"True": True, "False": False})
    if votes["included"].isna().any():
        raise ReviewSetError(f"{path}: column 'included' must hold True/False")
    return votes
