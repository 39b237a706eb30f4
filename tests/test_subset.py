"""Subset assembly: control policies, hard intersection, categories, hashes, release check.

The release test derives the subsets from the released screen and ratings with the package's
functions and compares them with the released subset files; the perturbation test flips one
reviewer's vote in a temp copy and watches the subset change — the subset is derived, not loaded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import released_json

from hbpsych_utils.construction import corpus, ratings, review_set, screening, subset
from hbpsych_utils.core import sources


def votes(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    """rows of (prompt_id, kind, R1, R2, R3) with every Y-voter choosing category 'mood'."""
    out = []
    for i, (pid, kind, *vs) in enumerate(rows, start=1):
        rec = {"review_id": f"R{i:04d}", "prompt_id": pid, "kind": kind}
        for name, v in zip(("R1", "R2", "R3"), vs, strict=True):
            rec[name] = v
            rec[f"{name}_category"] = "mood" if v == "Y" else "none"
        rec["n_yes"] = sum(v == "Y" for v in vs)
        rec["included"] = rec["n_yes"] >= 2
        out.append(rec)
    return pd.DataFrame(out)


R1 = votes([("a", "screened_in", "Y", "Y", "Y"), ("b", "screened_in", "Y", "N", "N"),
            ("c", "control", "Y", "Y", "N"), ("d", "control", "N", "N", "N")])
R2 = votes([("e", "candidate", "Y", "Y", "N"), ("f", "control", "Y", "N", "Y"),
            ("g", "candidate", "N", "N", "Y")])


def test_policies() -> None:
    assert subset.assemble(R1, R2, subset.POLICIES["v1"]) == ["a", "c", "e"]
    assert subset.assemble(R1, R2, subset.POLICIES["v2"]) == ["a", "c", "e", "f"]
    strict = subset.ControlPolicy("strict", False, False)
    assert subset.assemble(R1, R2, strict) == ["a", "e"]
    assert subset.assemble(R1, None, strict) == ["a"]
    assert subset.hard_subset(["a", "c", "e"], ["e", "a", "zz"]) == ["a", "e"]


def test_categories_use_the_latest_round() -> None:
    r2 = R2.copy()
    r2.loc[0, ["R1_category", "R2_category"]] = ["anxiety", "anxiety"]
    cats = subset.subset_categories(["a", "e"], R1, r2)
    assert cats.to_dict() == {"a": "mood", "e": "anxiety"}
    counts = subset.category_counts(pd.Series(["x", "no category majority", "y", "y"]))
    assert list(counts) == ["y", "x", "no category majority"]
    with pytest.raises(ValueError, match="not in any review round"):
        subset.subset_categories(["zz"], R1, R2)


def test_record_hash_and_round_trip(tmp_path: Path) -> None:
    rec = subset.subset_record("toy", ["b", "a"], version="1.0")
    assert rec["prompt_ids"] == ["a", "b"] and rec["n"] == 2
    assert rec["prompt_id_sha256"] == hashlib.sha256(b'["a", "b"]').hexdigest()
    path = subset.write_subset(tmp_path / "toy.json", rec)
    assert subset.load_subset(path) == rec
    bad = {**rec, "prompt_id_sha256": "0" * 64}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="prompt_id_sha256"):
        subset.load_subset(tmp_path / "bad.json")
    cmp = subset.compare_with_release("toy", ["a", "c"], rec)
    assert cmp.only_derived == ("c",) and cmp.only_released == ("b",) and not cmp.matches


def derive(round1_files: list[Path]) -> dict[str, list[str]]:
    """The subsets from released screen + ratings, through the package's functions only."""
    vocab = screening.vocabulary_from_rubric(sources.fetch("screening_rubric").read_text())
    set1 = review_set.replay_round1(sources.fetch("screening_key"),
                                    ratings.released_assignment(round1_files))
    r1 = ratings.votes_table(set1, ratings.load_round(round1_files, set1, vocabulary=vocab))
    files2 = [sources.fetch(f"ratings_round2_R{i}") for i in (1, 2, 3)]
    set2 = review_set.replay_round2(sources.fetch("recovery_screening_key"),
                                    ratings.released_assignment(files2))
    r2 = ratings.votes_table(set2, ratings.load_round(files2, set2, vocabulary=vocab))
    out = {v: subset.assemble(r1, r2, p) for v, p in subset.POLICIES.items()}
    out["hard"] = subset.hard_subset(out["v1"], corpus.hard_ids(sources.fetch("harness_scores")))
    return out


def test_derived_subsets_match_the_release(mirror: Path) -> None:
    ids = derive([sources.fetch(f"ratings_round1_R{i}") for i in (1, 2, 3)])
    for key, art in (("v1", "subset_v1"), ("v2", "subset_v2"), ("hard", "subset_hard_v1")):
        rel = released_json(art)
        assert ids[key] == rel["prompt_ids"], key
        assert corpus.ids_hash(ids[key]) == rel["prompt_id_sha256"], key
    assert (len(ids["v1"]), len(ids["v2"]), len(ids["hard"])) == (610, 611, 119)


def test_one_changed_vote_changes_the_subset(mirror: Path, tmp_path: Path) -> None:
    files = []
    for i in (1, 2, 3):
        dst = tmp_path / f"R{i}.json"
        dst.write_bytes(sources.fetch(f"ratings_round1_R{i}").read_bytes())
        files.append(dst)
    docs = [json.loads(f.read_text()) for f in files]
    by_review = [{r["review_id"]: r for r in d["ratings"]} for d in docs]
    # a conversation included 2/3 with R1 among the Y-voters, in the hard subset if possible
    hard = set(released_json("subset_hard_v1")["prompt_ids"])
    two_of_three = [rid for rid, r in by_review[0].items()
                    if r["is_mental_health"] == "Y"
                    and sum(b[rid]["is_mental_health"] == "Y" for b in by_review) == 2]
    target = next((rid for rid in two_of_three if by_review[0][rid]["prompt_id"] in hard),
                  two_of_three[0])
    pid = by_review[0][target]["prompt_id"]
    by_review[0][target]["is_mental_health"] = "N"
    files[0].write_text(json.dumps(docs[0], indent=1))

    ids = derive(files)
    rel = released_json("subset_v1")
    assert pid in rel["prompt_ids"] and pid not in ids["v1"]
    assert len(ids["v1"]) == len(rel["prompt_ids"]) - 1
    assert corpus.ids_hash(ids["v1"]) != rel["prompt_id_sha256"]
    assert pid not in ids["v2"] and len(ids["v2"]) == 610
    if pid in hard:
        assert len(ids["hard"]) == 118


def test_write_all_and_stage_ids(tmp_path: Path) -> None:
    from hbpsych_utils.pipeline.stage import Stage

    stage = Stage("p", "05_subset", tmp_path)
    index = subset.write_all(stage, {"v1": subset.subset_record("toy-v1", ["b", "a"]),
                                     "hard": subset.subset_record("toy-hard-v1", ["a"])})
    assert index == {"v1": "toy-v1.json", "hard": "toy-hard-v1.json"}
    later = Stage("p", "06_generation", tmp_path)
    assert subset.stage_ids(later, "v1") == ["a", "b"]
    with pytest.raises(KeyError, match="no subset 'v2'"):
        subset.stage_ids(later, "v2")
