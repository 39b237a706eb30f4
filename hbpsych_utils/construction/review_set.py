"""The blinded review set: designing a round, replaying a released one, the reviewers' packet.

A review round shows clinicians a shuffled set of conversations under neutral ids (``R0001``…)
with the screen's verdict withheld. The set mixes the items under test (round 1: the screen's
RELEVANT + BORDERLINE, ``kind="screened_in"``; round 2: the recall screen's CLEAR + POSSIBLE,
``kind="candidate"``) with concealed controls the screen excluded (``kind="control"``). The
share of controls the reviewers' majority includes estimates what the screen misses
(:mod:`hbpsych_utils.construction.tally`); the reviewers' files are read by
:mod:`hbpsych_utils.construction.ratings`.

A set is a DataFrame with at least ``review_id, prompt_id, kind``; everything here is a plain
function over it, so the stages only call them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypedDict

import numpy as np
import pandas as pd
from pydantic import field_validator

from hbpsych_utils.construction.corpus import Conversation, Message
from hbpsych_utils.construction.screening import RECALL_CANDIDATE_TIERS, RECALL_NO_TIER
from hbpsych_utils.core.records import FileRecord, invalid, read_csv, validate
from hbpsych_utils.core.writes import write_json

SCREENED_IN = "screened_in"
CANDIDATE = "candidate"
CONTROL = "control"
ROUND1_KINDS = (SCREENED_IN, CONTROL)
ROUND2_KINDS = (CANDIDATE, CONTROL)

SET_FILE = "review_set.csv"
SET_COLUMNS = ("review_id", "prompt_id", "kind")
PACKET_ITEM_KEYS = ("review_id", "prompt_id", "turns", "translation", "available")
"""The only keys a packet item carries: nothing that reveals the screen's verdict."""


class Turn(TypedDict):
    role: str
    content: str


class PacketItem(TypedDict):
    """One item of a reviewers' packet (``PACKET_ITEM_KEYS``)."""

    review_id: str
    prompt_id: str
    turns: list[Turn]
    translation: list[Turn] | None
    """The turn-by-turn English translation, beside the original."""
    available: bool
    """False for a conversation a partial corpus lacks (no turns)."""


class ReviewSetError(ValueError):
    """A review set that cannot be built or does not line up with the ratings."""


class ScreeningKeyRow(FileRecord):
    """A row of the released screening key (``screening_key``): the label and set membership."""

    prompt_id: str
    screening_label: str
    in_blinded_set: str


class RecoveryKeyRow(FileRecord):
    """A row of the released recovery key (``recovery_screening_key``): round 2's set."""

    review_id: str
    prompt_id: str
    kind: str

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in ROUND2_KINDS:
            raise invalid(f"{value!r} is not one of {ROUND2_KINDS}")
        return value


def _read_key(path: Path | str, row_model: type[FileRecord]) -> pd.DataFrame:
    """A released key CSV, every column a string, each row validated by ``row_model``."""
    key = read_csv(path, error=ReviewSetError, dtype=str, keep_default_na=False)
    for i, row in enumerate(key.to_dict("records")):
        where = f"review {row['review_id']}" if row.get("review_id") else f"line {i + 2}"
        validate(row_model, row, f"{path}: {where}", ReviewSetError)
    return key


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
    drawn = (rng.choice(len(pool), size=n_controls, replace=False) if n_controls
             else np.array([], dtype=int))
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



# ---------------------------------------------------------------------------------------------
# Replaying a released round


def replay_round1(screening_key: Path | str, assignment: Mapping[str, str]) -> pd.DataFrame:
    """Round 1's released set: key rows with ``in_blinded_set == yes``, ids from the ratings.

    Controls are the set's items the screen called NOT_RELEVANT. The review ids are not in the
    key; the released ratings carry them (``assignment``: review_id -> prompt_id, from
    ``ratings.released_assignment``), and must cover exactly the key's set. The
    ``screening_label`` column is kept for the tally, never for the reviewers' packet.
    """
    key = _read_key(screening_key, ScreeningKeyRow)
    in_set = key[key["in_blinded_set"].str.strip().str.lower() == "yes"]
    by_prompt = {pid: rid for rid, pid in assignment.items()}
    key_ids, rated_ids = set(in_set["prompt_id"]), set(by_prompt)
    if key_ids != rated_ids:
        extra, absent = sorted(rated_ids - key_ids), sorted(key_ids - rated_ids)
        raise ReviewSetError(
            f"{screening_key} and the ratings files disagree on the round-1 set: {len(extra)} "
            f"rated prompt id(s) not in the key's set "
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
    recovery_key: Path | str, assignment: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Round 2's released set, straight from the recovery key (it carries the review ids).

    With the ratings files' ``assignment`` (``ratings.released_assignment``), checks that they
    assign the same prompt id to every review id.
    """
    key = _read_key(recovery_key, RecoveryKeyRow)
    for col in ("review_id", "prompt_id"):
        dup = key[key[col].duplicated()][col]
        if len(dup):
            raise ReviewSetError(f"{recovery_key}: duplicate {col} {dup.iloc[0]}")
    if assignment is not None:
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


def check_set(review_set: pd.DataFrame) -> None:
    """A review set has the set columns and each review id and prompt id once."""
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


def _turns(messages: Sequence[Message | Mapping[str, str]]) -> list[Turn]:
    out: list[Turn] = []
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
) -> list[PacketItem]:
    """The reviewers' items in review-id order: id, prompt id, turns, translation if any.

    Nothing about the screen (kind, label, tier) goes in. ``translations`` maps a prompt id to
    its turn-by-turn English translation, which must have the conversation's turn count.
    A conversation absent from ``conversations`` (a partial corpus) is an error, or with
    ``on_missing="placeholder"`` an item with no turns and ``available: false``.
    """
    check_set(review_set)
    by_id = {c.prompt_id: c for c in conversations}
    translations = translations or {}
    items: list[PacketItem] = []
    absent = []
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
    path: Path | str, items: Sequence[Mapping[str, object]], *, round_name: str,
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
# Checking a design, the recall pool, round 2


def check_round1_design(
    review_set: pd.DataFrame, screen: pd.DataFrame, *, n_controls: int,
    screened_in_labels: Sequence[str] = ("RELEVANT", "BORDERLINE"),
) -> None:
    """A round-1 set must hold every screened-in item and ``n_controls`` screened-out ones.

    Checked in replay too: a released set that disagreed with the released screen (or with the
    profile's ``n_controls``) would make every later number meaningless.
    """
    check_set(review_set)
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
    candidate_tiers: Sequence[str] = RECALL_CANDIDATE_TIERS,
    no_tier: str = RECALL_NO_TIER,
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
    check_set(review_set)
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


def read_set(path: Path | str) -> pd.DataFrame:
    """A review set as a stage wrote it to CSV (``review_set.csv``), every column a string."""
    review_set = read_csv(path, error=ReviewSetError, dtype=str, keep_default_na=False)
    try:
        check_set(review_set)
    except ReviewSetError as exc:
        raise ReviewSetError(f"{path}: {exc}") from None
    return review_set
