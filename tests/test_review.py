"""The blinded review: set design, packets, ratings validation, votes, tally, modal category.

Synthetic cases use expected values worked out by hand in the comments. The tests on the
released data check the tally against numbers the release states in its own text (the subset
files' provenance fields, the recovery rubric) and against the released subsets' ids and hashes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import released_json

from hbpsych_utils.construction import ratings, review_set, tally
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem, hard_ids, ids_hash
from hbpsych_utils.construction.screening import vocabulary_from_rubric
from hbpsych_utils.core import sources

VOCAB = ("anxiety", "sleep", "substance_use", "none")


# ---------------------------------------------------------------------------------------------
# helpers


def conv(pid: str, *texts: str) -> Conversation:
    roles = ["user", "assistant"] * len(texts)
    msgs = tuple(Message(roles[i], t) for i, t in enumerate(texts))
    return Conversation(pid, msgs, (RubricItem("ok", 1),))


def small_set() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "review_id": ["R0001", "R0002", "R0003", "R0004"],
            "prompt_id": ["p-a", "p-b", "p-c", "p-d"],
            "kind": ["screened_in", "control", "screened_in", "control"],
        }
    )


def rating(rid: str, pid: str, vote: str = "Y", cat: str = "anxiety", conf: str = "H",
           notes: str = "") -> dict:
    return {"review_id": rid, "prompt_id": pid, "is_mental_health": vote, "category": cat,
            "confidence": conf, "notes": notes}


def ratings_doc(reviewer: str, rows: list[dict], n_total: int = 4, **extra) -> dict:
    return {"reviewer": reviewer, **extra, "exported_at": "2026-01-01T00:00:00.000Z",
            "n_total": n_total, "n_rated": len(rows), "ratings": rows}


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def file_for(tmp_path: Path, reviewer: str, votes: str, cats: tuple[str, ...] | None = None,
             review_set: pd.DataFrame | None = None) -> Path:
    s = small_set() if review_set is None else review_set
    cats = cats or tuple("anxiety" if v == "Y" else "none" for v in votes)
    rows = [rating(r, p, v, c) for (r, p), v, c in
            zip(zip(s["review_id"], s["prompt_id"], strict=True), votes, cats, strict=True)]
    return write(tmp_path / f"{reviewer}.json", ratings_doc(reviewer, rows, n_total=len(s)))


# ---------------------------------------------------------------------------------------------
# design


def test_review_ids_are_zero_padded_and_widen_when_needed() -> None:
    assert review_set.review_ids(3) == ["R0001", "R0002", "R0003"]
    assert review_set.review_ids(10001)[-1] == "R10001"


def test_design_round_composition() -> None:
    tested = [f"s{i}" for i in range(30)]
    pool = [f"c{i}" for i in range(100)]
    df = review_set.design_round(tested, pool, n_controls=10, seed=7)
    assert list(df.columns) == ["review_id", "prompt_id", "kind"]
    assert list(df["review_id"]) == [f"R{i:04d}" for i in range(1, 41)]
    assert df["kind"].value_counts().to_dict() == {"screened_in": 30, "control": 10}
    assert set(df.loc[df["kind"] == "screened_in", "prompt_id"]) == set(tested)
    assert set(df.loc[df["kind"] == "control", "prompt_id"]) <= set(pool)
    assert df["prompt_id"].is_unique
    # shuffled into one order: the controls are not all at the end
    assert set(df["kind"].iloc[-10:]) != {"control"}


def test_design_round_is_seeded_and_independent_of_input_order() -> None:
    tested = [f"s{i}" for i in range(30)]
    pool = [f"c{i}" for i in range(100)]
    a = review_set.design_round(tested, pool, 10, seed=7)
    b = review_set.design_round(list(reversed(tested)), list(reversed(pool)), 10, seed=7)
    c = review_set.design_round(tested, pool, 10, seed=8)
    pd.testing.assert_frame_equal(a, b)
    assert list(a["prompt_id"]) != list(c["prompt_id"])


def test_design_round_two_uses_candidate_kinds() -> None:
    df = review_set.design_round(["x", "y"], ["c1", "c2", "c3"], 2, seed=1,
                                 kinds=review_set.ROUND2_KINDS)
    assert sorted(df["kind"]) == ["candidate", "candidate", "control", "control"]


def test_design_round_rejects_bad_inputs() -> None:
    with pytest.raises(review_set.ReviewSetError, match="both under test and in the control pool"):
        review_set.design_round(["a", "b"], ["b", "c"], 1, seed=0)
    with pytest.raises(review_set.ReviewSetError, match="control pool holds 2"):
        review_set.design_round(["a"], ["b", "c"], 3, seed=0)


# ---------------------------------------------------------------------------------------------
# packet


def test_packet_carries_no_screen_information_and_marks_missing_conversations() -> None:
    s = small_set().assign(screening_label=["RELEVANT", "NOT_RELEVANT", "BORDERLINE", "X"])
    convs = [conv("p-a", "I feel low", "ok", "still low"), conv("p-b", "knee pain")]
    items = review_set.build_packet(s, convs, {"p-b": [Message("user", "knee pain (en)")]},
                            on_missing="placeholder")
    assert [it["review_id"] for it in items] == ["R0001", "R0002", "R0003", "R0004"]
    for it in items:
        assert set(it) == set(review_set.PACKET_ITEM_KEYS)
        assert "screened_in" not in json.dumps(it) and "RELEVANT" not in json.dumps(it)
    assert items[0]["turns"] == [
        {"role": "user", "content": "I feel low"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "still low"},
    ]
    assert items[0]["translation"] is None
    assert items[1]["translation"] == [{"role": "user", "content": "knee pain (en)"}]
    assert items[2] == {"review_id": "R0003", "prompt_id": "p-c", "turns": [],
                        "translation": None, "available": False}


def test_packet_errors() -> None:
    s = small_set()
    convs = [conv(p, "hi") for p in s["prompt_id"]]
    with pytest.raises(review_set.ReviewSetError, match="no conversation in the corpus"):
        review_set.build_packet(s, convs[:2])
    two_turns = [Message("user", "x"), Message("assistant", "y")]
    with pytest.raises(review_set.ReviewSetError,
                       match=r"translation of p-a \(review R0001\) has 2"):
        review_set.build_packet(s, convs, {"p-a": two_turns})


def test_write_packet_refuses_items_that_reveal_the_screen(tmp_path: Path) -> None:
    item = {"review_id": "R0001", "prompt_id": "p", "turns": [], "translation": None,
            "available": True, "kind": "control"}
    with pytest.raises(review_set.ReviewSetError, match="kind"):
        review_set.write_packet(tmp_path / "p.json", [item], round_name="round1")
    del item["kind"]
    out = review_set.write_packet(tmp_path / "p.json", [item], round_name="round1")
    assert json.loads(out.read_text())["n_total"] == 1


# ---------------------------------------------------------------------------------------------
# ratings validation


def test_valid_file_loads_and_counts_empty_fields(tmp_path: Path) -> None:
    rows = [
        rating("R0001", "p-a", "Y", "anxiety", "H", "note"),
        rating("R0002", "p-b", "N", "", "M"),
        rating("R0003", "p-c", "Y", "sleep", ""),
        rating("R0004", "p-d", "N", "", ""),
    ]
    path = write(tmp_path / "R1.json", ratings_doc("R1", rows))
    r = ratings.load_ratings(path, small_set(), vocabulary=VOCAB)
    assert r.reviewer == "R1" and r.complete and r.n_rated == 4
    assert (r.n_empty_category, r.n_empty_confidence) == (2, 2)
    assert list(r.table.columns) == list(ratings.RATING_FIELDS)
    assert r.table["is_mental_health"].tolist() == ["Y", "N", "Y", "N"]


@pytest.mark.parametrize(
    ("mutate", "review_id", "needle"),
    [
        (lambda rows: rows.append(dict(rows[1])), "R0002", "duplicate review id"),
        (lambda rows: rows[2].update(prompt_id="p-zzz"), "R0003", "unknown prompt id 'p-zzz'"),
        (lambda rows: rows[2].update(prompt_id="p-a"), "R0003", "belongs to review R0001"),
        (lambda rows: rows[0].update(is_mental_health="maybe"), "R0001", "'maybe' is not one of"),
        (lambda rows: rows[3].update(category="cardiology"), "R0004", "not in the category"),
        (lambda rows: rows[3].update(confidence="X"), "R0004", "'X' is not one of H|M|L"),
        (lambda rows: rows[3].update(review_id="R0099"), "R0099", "not a review id of this"),
    ],
)
def test_malformed_files_are_rejected_naming_file_and_review_id(
    tmp_path: Path, mutate, review_id: str, needle: str
) -> None:
    rows = [rating(r, p) for r, p in zip(small_set()["review_id"], small_set()["prompt_id"],
                                         strict=True)]
    mutate(rows)
    path = write(tmp_path / "R2.json", ratings_doc("R2", rows))
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_ratings(path, small_set(), vocabulary=VOCAB)
    msg = str(info.value)
    assert needle in msg
    hit = [p for p in info.value.problems if needle in p.message or needle in str(p)]
    assert hit and hit[0].file == str(path) and hit[0].review_id == review_id
    assert f"{path}: review {review_id}:" in msg


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    rows = [rating(r, p) for r, p in zip(small_set()["review_id"], small_set()["prompt_id"],
                                         strict=True)]
    rows[0]["is_mental_health"] = "maybe"
    rows[1]["prompt_id"] = "p-unknown"
    rows.append(dict(rows[3]))
    path = write(tmp_path / "R3.json", ratings_doc("R3", rows))
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_ratings(path, small_set(), vocabulary=VOCAB)
    by_id = {(p.review_id, p.field) for p in info.value.problems}
    assert {("R0001", "is_mental_health"), ("R0002", "prompt_id"),
            ("R0004", "review_id")} <= by_id


def test_unrated_items_need_the_partial_mode(tmp_path: Path) -> None:
    s = small_set()
    rows = [rating("R0001", "p-a"), rating("R0003", "p-c", "N", "none", "L")]
    path = write(tmp_path / "R1.partial.json", ratings_doc("R1", rows))
    with pytest.raises(ratings.RatingsError, match=r"2 review id\(s\) of the set are not rated"):
        ratings.load_ratings(path, s, vocabulary=VOCAB)
    r = ratings.load_ratings(path, s, vocabulary=VOCAB, allow_unrated=True)
    assert r.unrated == ("R0002", "R0004") and not r.complete
    with pytest.raises(review_set.ReviewSetError, match="unrated"):
        ratings.votes_table(s, [r])


def test_header_problems_are_named(tmp_path: Path) -> None:
    rows = [rating(r, p) for r, p in zip(small_set()["review_id"], small_set()["prompt_id"],
                                         strict=True)]
    doc = ratings_doc("", rows, n_total=5)
    doc["n_rated"] = 3
    path = write(tmp_path / "bad.json", doc)
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_ratings(path, small_set(), vocabulary=VOCAB, expected_packet="recovery")
    fields = {p.field for p in info.value.problems if p.review_id is None}
    assert fields == {"reviewer", "n_total", "n_rated", "packet"}
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{", encoding="utf-8")
    with pytest.raises(ratings.RatingsError, match=r"broken\.json: file: field '<json>'"):
        ratings.load_ratings(bad_json, small_set(), vocabulary=VOCAB)


@pytest.mark.parametrize("name", ["prompt_id", "review_id", "R2_category"])
def test_a_reviewer_named_like_a_votes_column_is_refused(tmp_path: Path, name: str) -> None:
    """A reviewer's votes become a column of the votes table under the reviewer's name (and
    ``<name>_category``): a name the table already uses would overwrite that column."""
    files = [file_for(tmp_path, "R1", "YYYN"), file_for(tmp_path, "R2", "YYNN"),
             file_for(tmp_path, name, "YNNN")]
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_round(files, small_set(), vocabulary=VOCAB)
    [problem] = info.value.problems
    assert (problem.file, problem.field) == (str(files[2]), "reviewer")
    message = str(info.value)
    assert f"{name}.json" in message and repr(name) in message
    for reserved in ("review_id", "prompt_id", "kind", "n_yes", "included", "tier",
                     "_category"):
        assert reserved in message
    with pytest.raises(ratings.RatingsError, match="reviewer"):
        ratings.check_format(files[2])  # as a profile's ratings_files are checked on loading


def test_votes_table_refuses_a_reviewer_named_like_its_columns(tmp_path: Path) -> None:
    rated = ratings.load_round([file_for(tmp_path, "R1", "YYYN")], small_set(),
                               vocabulary=VOCAB)
    rated[0].reviewer = "review_id"  # a Ratings record made without load_ratings
    with pytest.raises(review_set.ReviewSetError, match=r"R1\.json.*'review_id'"):
        ratings.votes_table(small_set(), rated)


def test_load_round_rejects_a_reviewer_twice(tmp_path: Path) -> None:
    a = file_for(tmp_path, "R1", "YYYY")
    b = write(tmp_path / "copy.json", json.loads(a.read_text()))
    with pytest.raises(ratings.RatingsError, match="appears in more than one file"):
        ratings.load_round([a, b], small_set(), vocabulary=VOCAB)


@pytest.mark.parametrize("other", ["r1", "\uff321", "R1 ", " r1\u3000"])
def test_reviewer_names_that_read_the_same_are_refused(tmp_path: Path, other: str) -> None:
    """``R1``, ``r1``, a full-width ``Ｒ1`` and ``R1 `` are different strings but read the same in
    the votes table and the book: after NFKC normalisation, case folding and stripping they are
    one name, and the second file is refused naming both names and both files."""
    assert ratings.reviewer_key(other) == ratings.reviewer_key("R1") == "r1"
    first = file_for(tmp_path, "R1", "YYYN")
    second = write(tmp_path / "second.json",
                   ratings_doc(other, json.loads(first.read_text())["ratings"]))
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_round([first, second, file_for(tmp_path, "R3", "YNNN")], small_set(),
                           vocabulary=VOCAB)
    [problem] = info.value.problems
    assert (problem.file, problem.field) == (str(second), "reviewer")
    assert repr(other) in problem.message and "'R1'" in problem.message
    assert str(first) in problem.message
    rated = ratings.load_round([first, file_for(tmp_path, "R2", "YYNN")], small_set(),
                               vocabulary=VOCAB)
    rated[1].reviewer = other  # Ratings records made without load_round
    with pytest.raises(review_set.ReviewSetError, match=r"second|R2\.json.*reads the same"):
        ratings.votes_table(small_set(), rated)


def test_reviewer_names_that_differ_stay_apart() -> None:
    assert len({ratings.reviewer_key(n) for n in ("R1", "R2", "R 1", "R1a", "Rı")}) == 5


# ---------------------------------------------------------------------------------------------
# votes and tally


def test_votes_table_and_round1_tally_by_hand(tmp_path: Path) -> None:
    s = small_set()  # R0001 in, R0002 ctrl, R0003 in, R0004 ctrl
    # votes per item (R1 R2 R3): R0001 YYY -> 3/3 in; R0002 YYN -> 2/3 in (control!);
    # R0003 YNN -> 1/3 out; R0004 NNN -> 0/3 out
    files = [file_for(tmp_path, "R1", "YYYN"), file_for(tmp_path, "R2", "YYNN"),
             file_for(tmp_path, "R3", "YNNN")]
    rated = ratings.load_round(files, s, vocabulary=VOCAB)
    votes = ratings.votes_table(s, rated)
    assert votes["n_yes"].tolist() == [3, 2, 1, 0]
    assert votes["included"].tolist() == [True, True, False, False]
    assert votes["tier"].tolist() == ["3/3", "2/3", "1/3", "0/3"]
    assert votes["R2"].tolist() == ["Y", "Y", "N", "N"]
    t = tally.tally_round1(votes)
    assert t.metrics() == {
        "n_reviewed": 4, "n_screened_in": 2, "n_controls": 2, "n_included": 2,
        "n_screened_in_included": 1, "n_controls_included": 1,
        "control_inclusion_rate": 0.5, "recall_triggered": True,
    }
    assert t.tier_counts == {"0/3": 1, "1/3": 1, "2/3": 1, "3/3": 1}
    out = tally.outcomes(votes)
    assert out.loc["control", "included"] == 1 and out.loc["screened_in", "3/3"] == 1
    assert tally.included_ids(votes) == ["p-a", "p-b"]
    assert tally.included_ids(votes, kinds=["screened_in"]) == ["p-a"]
    assert ratings.relevance_ratings(votes)["R3"] == ["Y", "N", "N", "N"]


def test_stopping_rule_is_strictly_above_the_threshold() -> None:
    def votes_with(n_controls: int, n_included: int) -> pd.DataFrame:
        return pd.DataFrame({
            "review_id": [f"R{i:04d}" for i in range(n_controls + 1)],
            "prompt_id": [f"p{i}" for i in range(n_controls + 1)],
            "kind": ["screened_in"] + ["control"] * n_controls,
            "included": [True] + [i < n_included for i in range(n_controls)],
            "tier": ["3/3"] * (n_controls + 1),
        })

    at = tally.tally_round1(votes_with(20, 1))  # 1/20 = 0.05: not above 5%
    assert at.control_inclusion_rate == 0.05 and not at.recall_triggered
    above = tally.tally_round1(votes_with(20, 2))  # 2/20 = 0.10
    assert above.recall_triggered
    assert not tally.tally_round1(votes_with(20, 2), threshold=0.10).recall_triggered
    with pytest.raises(review_set.ReviewSetError, match="no controls"):
        tally.tally_round1(votes_with(0, 0))


def test_round2_tally_breaks_candidates_down_by_recall_tier() -> None:
    votes = pd.DataFrame({
        "review_id": ["R0001", "R0002", "R0003", "R0004", "R0005"],
        "prompt_id": list("abcde"),
        "kind": ["candidate", "candidate", "candidate", "control", "control"],
        "recovery_tier": ["CLEAR", "POSSIBLE", "POSSIBLE", "NO (control)", "NO (control)"],
        "included": [True, True, False, False, False],
        "tier": ["3/3", "2/3", "0/3", "0/3", "1/3"],
    })
    t = tally.tally_round2(votes)
    assert t.metrics() == {
        "n_candidates": 3, "n_clear": 1, "n_possible": 2, "n_controls": 2,
        "n_candidates_included": 2, "n_clear_included": 1, "n_possible_included": 1,
        "n_controls_included": 0, "control_inclusion_rate": 0.0, "loop_terminated": True,
    }
    assert (t.n_reviewed, t.n_included, t.recall_triggered) == (5, 2, False)
    bad = votes.assign(recovery_tier=["CLEAR", "MAYBE", "POSSIBLE", "NO", "NO"])
    with pytest.raises(review_set.ReviewSetError, match="MAYBE"):
        tally.tally_round2(bad)


@pytest.mark.parametrize(
    ("votes", "cats", "expected"),
    [
        (("Y", "Y", "N"), ("anxiety", "anxiety", "sleep"), "anxiety"),
        (("Y", "Y", "Y"), ("anxiety", "sleep", "anxiety"), "anxiety"),
        (("Y", "Y", "Y"), ("anxiety", "sleep", "none"), tally.NO_CATEGORY_MAJORITY),
        # N-voters do not count, even if they agree with the Y-voter
        (("Y", "N", "N"), ("sleep", "sleep", "sleep"), tally.NO_CATEGORY_MAJORITY),
        # an empty category is no category
        (("Y", "Y", "Y"), ("", "", "sleep"), tally.NO_CATEGORY_MAJORITY),
        # four reviewers split 2-2: no majority
        (("Y", "Y", "Y", "Y"), ("a", "a", "b", "b"), tally.NO_CATEGORY_MAJORITY),
    ],
)
def test_modal_category(votes, cats, expected) -> None:
    assert tally.modal_category(votes, cats) == expected


def test_modal_categories_over_a_votes_table(tmp_path: Path) -> None:
    s = small_set()
    files = [
        file_for(tmp_path, "R1", "YYYN", ("sleep", "anxiety", "sleep", "none")),
        file_for(tmp_path, "R2", "YYNN", ("sleep", "sleep", "none", "none")),
        file_for(tmp_path, "R3", "YNNN", ("anxiety", "none", "none", "none")),
    ]
    votes = ratings.votes_table(s, ratings.load_round(files, s, vocabulary=VOCAB))
    assert tally.modal_categories(votes).tolist() == [
        "sleep", tally.NO_CATEGORY_MAJORITY, tally.NO_CATEGORY_MAJORITY, tally.NO_CATEGORY_MAJORITY,
    ]


# ---------------------------------------------------------------------------------------------
# the released data


ROUND1 = [f"ratings_round1_R{i}" for i in (1, 2, 3)]
ROUND2 = [f"ratings_round2_R{i}" for i in (1, 2, 3)]


@pytest.fixture(scope="module")
def released(request: pytest.FixtureRequest) -> dict:
    request.getfixturevalue("mirror")
    vocab = vocabulary_from_rubric(sources.fetch("screening_rubric").read_text())
    f1 = [sources.fetch(n) for n in ROUND1]
    f2 = [sources.fetch(n) for n in ROUND2]
    s1 = review_set.replay_round1(sources.fetch("screening_key"), ratings.released_assignment(f1))
    s2 = review_set.replay_round2(sources.fetch("recovery_screening_key"),
                                  ratings.released_assignment(f2))
    r1 = ratings.load_round(f1, s1, vocabulary=vocab)
    r2 = ratings.load_round(f2, s2, vocabulary=vocab, expected_packet="recovery")
    return {"vocab": vocab, "f1": f1, "f2": f2, "s1": s1, "s2": s2, "r1": r1, "r2": r2,
            "v1": ratings.votes_table(s1, r1), "v2": ratings.votes_table(s2, r2)}


def test_replayed_round1_set_matches_the_key(released: dict) -> None:
    s1 = released["s1"]
    # the recovery rubric: 150 clinician-reviewed controls; 4,209 NOT_RELEVANT left over
    assert len(s1) == 791
    assert s1["kind"].value_counts().to_dict() == {"screened_in": 641, "control": 150}
    assert (s1.loc[s1["kind"] == "control", "screening_label"] == "NOT_RELEVANT").all()
    assert list(s1["review_id"]) == review_set.review_ids(791)


def test_live_design_on_the_released_screen(mirror: Path) -> None:
    labels = [json.loads(line) for line in
              sources.fetch("screening_labels").read_text(encoding="utf-8").splitlines() if line]
    screened_in = [r["prompt_id"] for r in labels if r["label"] in ("RELEVANT", "BORDERLINE")]
    pool = [r["prompt_id"] for r in labels if r["label"] == "NOT_RELEVANT"]
    s = review_set.design_round(screened_in, pool, n_controls=150, seed=20250507)
    # the key's crosstab: 378 RELEVANT + 263 BORDERLINE in the set, 150 of 4,359 NOT_RELEVANT
    assert (len(screened_in), len(pool)) == (641, 4359)
    assert len(s) == 791 and (s["kind"] == "control").sum() == 150
    items = review_set.build_packet(s, [], on_missing="placeholder")
    assert all(set(it) == set(review_set.PACKET_ITEM_KEYS) for it in items)


def test_round1_design_check(released: dict) -> None:
    screen = pd.read_json(sources.fetch("screening_labels"), lines=True, dtype=False)
    review_set.check_round1_design(released["s1"], screen, n_controls=150)
    with pytest.raises(review_set.ReviewSetError, match="n_controls=100"):
        review_set.check_round1_design(released["s1"], screen, n_controls=100)
    broken = released["s1"].copy()
    broken.loc[0, "kind"] = review_set.CONTROL  # R0001 is RELEVANT in the screen
    with pytest.raises(review_set.ReviewSetError, match=r"control\(s\) the screen included"):
        review_set.check_round1_design(broken, screen, n_controls=151)


def test_real_empty_fields_are_tolerated_and_counted(released: dict) -> None:
    counts = ratings.empty_field_counts(released["r1"]).set_index("reviewer")
    assert counts["empty_category"].to_dict() == {"R1": 2, "R2": 0, "R3": 0}
    assert counts["empty_confidence"].to_dict() == {"R1": 3, "R2": 4, "R3": 5}
    assert ratings.empty_field_counts(released["r2"])[["empty_category", "empty_confidence"]] \
        .to_numpy().sum() == 0


def test_round1_tally_reproduces_the_release(released: dict) -> None:
    t = tally.tally_round1(released["v1"])
    # subset files: "round-1 subset, n=596"; v2 file: "Round 1 admitted its nine majority
    # controls"; recovery rubric: controls missed "~6% by expert majority" (9/150 = 0.06)
    assert t.n_reviewed == 791 and t.n_included == 596
    assert t.n_controls == 150 and t.n_controls_included == 9
    assert t.n_tested_included == t.metrics()["n_screened_in_included"] == 596 - 9
    assert t.control_inclusion_rate == pytest.approx(9 / 150)
    assert t.recall_triggered


def test_round2_tally_reproduces_the_release(released: dict) -> None:
    key = pd.read_csv(sources.fetch("recovery_screening_key"), dtype=str)
    v2 = released["v2"]
    t = tally.tally_round2(v2)
    m = t.metrics()
    assert m["n_candidates"] == (key["kind"] == "candidate").sum() == 81
    assert m["n_controls"] == 25
    assert m["n_clear"] + m["n_possible"] == 81
    # v2 file: "round 2 admitted its 14 majority candidates but not this control" (R0090,
    # R1 Y/L, R2 Y/M, R3 N/H): one of 25 controls = 4%, at or below 5%, so the loop ends
    assert m["n_candidates_included"] == 14
    assert m["n_controls_included"] == 1
    row = v2.set_index("review_id").loc["R0090"]
    assert (row["kind"], row["R1"], row["R2"], row["R3"], row["tier"]) == (
        "control", "Y", "Y", "N", "2/3")
    assert m["control_inclusion_rate"] == pytest.approx(0.04)
    assert m["loop_terminated"] and not t.recall_triggered


def test_tally_rebuilds_the_released_subsets(released: dict) -> None:
    v1, v2 = released["v1"], released["v2"]
    r1_included = tally.included_ids(v1)
    r2_candidates = tally.included_ids(v2, kinds=[review_set.CANDIDATE])
    r2_controls = tally.included_ids(v2, kinds=[review_set.CONTROL])
    s1, s2, hard = (released_json(n) for n in ("subset_v1", "subset_v2", "subset_hard_v1"))

    # the round-1 subset the release cites as "n=596 (sha 65cb46f5c770)": its hash is over the
    # sorted ids joined by newlines, not the json.dumps form the final subsets use
    assert len(r1_included) == 596
    assert hashlib.sha256("\n".join(r1_included).encode()).hexdigest()[:12] == "65cb46f5c770"

    # v1 = every round-1 majority item (its 9 controls included) + round-2 majority candidates
    v1_ids = sorted(set(r1_included) | set(r2_candidates))
    assert r2_candidates == sorted(s1["round2_added_prompt_ids"])
    assert v1_ids == sorted(s1["prompt_ids"]) and len(v1_ids) == s1["n"] == 610
    assert ids_hash(v1_ids) == s1["prompt_id_sha256"]
    # leaving round-1's included controls out would NOT reproduce the release
    r1_screened_in = tally.included_ids(v1, kinds=[review_set.SCREENED_IN])
    assert len(set(r1_screened_in) | set(r2_candidates)) == 601 != s1["n"]

    # v2 additionally admits the round-2 control that reached a majority
    v2_ids = sorted(set(v1_ids) | set(r2_controls))
    assert r2_controls == s2["v2_admitted_prompt_ids"]
    assert v2_ids == sorted(s2["prompt_ids"]) and ids_hash(v2_ids) == s2["prompt_id_sha256"]

    # Psych-Hard: v1 intersected with the HealthBench-Hard ids
    hard_ids_v1 = sorted(set(v1_ids) & set(hard_ids(sources.fetch("harness_scores"))))
    assert hard_ids_v1 == sorted(hard["prompt_ids"])
    assert ids_hash(hard_ids_v1) == hard["prompt_id_sha256"]


def test_a_changed_vote_changes_the_tally(released: dict, tmp_path: Path) -> None:
    """Derived, not loaded: flip one Y of a 2/3 item and it loses its majority."""
    v1 = released["v1"]
    target = v1[(v1["tier"] == "2/3") & (v1["kind"] == review_set.SCREENED_IN) & (v1["R1"] == "Y")]
    rid = target["review_id"].iloc[0]
    doc = json.loads(released["f1"][0].read_text(encoding="utf-8"))
    edited = copy.deepcopy(doc)
    for r in edited["ratings"]:
        if r["review_id"] == rid:
            r["is_mental_health"], r["category"] = "N", "none"
    path = write(tmp_path / "R1.json", edited)
    s1 = released["s1"]
    rated = ratings.load_round([path, *released["f1"][1:]], s1, vocabulary=released["vocab"])
    votes = ratings.votes_table(s1, rated)
    t = tally.tally_round1(votes)
    assert t.n_included == 595 and t.metrics()["n_screened_in_included"] == 586
    assert not votes.set_index("review_id").loc[rid, "included"]


def test_malformed_copies_of_real_files_are_rejected(released: dict, tmp_path: Path) -> None:
    doc = json.loads(released["f1"][1].read_text(encoding="utf-8"))
    doc["ratings"][4]["is_mental_health"] = "maybe"  # R0005
    doc["ratings"][9]["prompt_id"] = "00000000-0000-0000-0000-000000000000"  # R0010
    doc["ratings"].append(dict(doc["ratings"][20]))  # R0021 twice
    doc["n_rated"] = len(doc["ratings"])
    path = write(tmp_path / "R2.json", doc)
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_ratings(path, released["s1"], vocabulary=released["vocab"])
    got = {(p.review_id, p.field) for p in info.value.problems}
    assert got == {("R0005", "is_mental_health"), ("R0010", "prompt_id"), ("R0021", "review_id")}
    assert all(p.file == str(path) for p in info.value.problems)


def test_replay_detects_ratings_that_disagree_with_the_key(released: dict,
                                                           tmp_path: Path) -> None:
    doc = json.loads(released["f1"][2].read_text(encoding="utf-8"))
    doc["ratings"][0]["prompt_id"] = doc["ratings"][1]["prompt_id"]
    path = write(tmp_path / "R3.json", doc)
    with pytest.raises(ratings.RatingsError, match=r"R3\.json: review R0001: field 'prompt_id'"):
        ratings.released_assignment([*released["f1"][:2], path])
    doc = json.loads(released["f2"][0].read_text(encoding="utf-8"))
    doc["ratings"] = doc["ratings"][:-1]
    path = write(tmp_path / "R1.json", doc)
    with pytest.raises(review_set.ReviewSetError, match="disagree"):
        review_set.replay_round2(sources.fetch("recovery_screening_key"),
                                 ratings.released_assignment([path]))


def test_votes_feed_the_agreement_module(released: dict) -> None:
    agreement = pytest.importorskip("hbpsych_utils.construction.agreement")
    summary = agreement.summarize(ratings.relevance_ratings(released["v1"]),
                                  categories=ratings.VOTES)
    assert set(summary.ac1_pairs) == {"R1-R2", "R1-R3", "R2-R3"}
    assert all(-1 <= v <= 1 for v in summary.ac1_pairs.values())


def test_row_shape_problems_name_the_row_or_the_review(tmp_path: Path) -> None:
    rows = [rating(r, p) for r, p in zip(small_set()["review_id"], small_set()["prompt_id"],
                                         strict=True)]
    rows[1]["notes"] = 7
    rows[2] = "R0003"
    del rows[3]["review_id"]
    doc = ratings_doc("R1", rows)
    doc["exported_at"] = 20260101
    path = write(tmp_path / "R1.json", doc)
    with pytest.raises(ratings.RatingsError) as info:
        ratings.load_ratings(path, small_set(), vocabulary=VOCAB, allow_unrated=True)
    got = {(p.review_id, p.field, p.message) for p in info.value.problems}
    assert ("R0002", "notes", "expected str, got int") in got
    assert (None, "ratings[2]", "expected an object") in got
    assert (None, "ratings[3].review_id", "missing or not a string: None") in got
    assert (None, "exported_at", "expected str, got int") in got


def test_released_keys_are_validated_row_by_row(tmp_path: Path) -> None:
    key = tmp_path / "recovery.csv"
    key.write_text("review_id,prompt_id,kind\nR0001,a,candidate\nR0002,b,maybe\n")
    with pytest.raises(review_set.ReviewSetError,
                       match=r"recovery\.csv: review R0002: field 'kind': 'maybe' is not one of"):
        review_set.replay_round2(key)
    key.write_text("review_id,prompt_id\nR0001,a\n")
    with pytest.raises(review_set.ReviewSetError, match=r"review R0001: field 'kind': missing"):
        review_set.replay_round2(key)
    screening_key = tmp_path / "key.csv"
    screening_key.write_text("prompt_id,screening_label\na,RELEVANT\n")
    with pytest.raises(review_set.ReviewSetError,
                       match=r"key\.csv: line 2: field 'in_blinded_set': missing"):
        review_set.replay_round1(screening_key, {"R0001": "a"})
