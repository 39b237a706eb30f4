"""Another specialty, end to end: a toy dermatology carve through the real notebooks.

The corpus (30 synthetic conversations in HealthBench layout), the screening and recall rubrics
with their own vocabulary and buckets, the control counts and the thresholds all come from the
profile ``params/toy_specialty.yaml``; the screens go through the LLM engine against the
loopback simulator. The test plays three reviewers: it reads the blinded set each round
designs, writes ratings files for it from its own rules, and checks that the subset 05
assembles is the one those ratings imply, computed here without the package.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from hbpsych_utils import runner
from hbpsych_utils.core import paths

pytestmark = pytest.mark.notebook
DATA = Path(__file__).parent / "data" / "toy_specialty"
TRUTH: dict[str, str] = json.loads((DATA / "truth.json").read_text())
"""The test's reviewers' view: which conversations are dermatology, and their category."""
VOCAB = ("acne_rosacea", "eczema_dermatitis", "psoriasis", "skin_infection",
         "pigmentation_moles", "hair_nails", "other_derm", "none")
REVIEWERS = ("R1", "R2", "R3")


def run(profile_dir: Path, out: Path, notebooks: list[str], **changes: dict) -> None:
    """Run the shipped toy profile with some sections changed, from a temp copy."""
    raw = yaml.safe_load((paths.params_dir() / "toy_specialty.yaml").read_text())
    raw["notebooks"] = notebooks
    for section, values in changes.items():
        raw[section] = {**raw.get(section, {}), **values}
    path = profile_dir / "toy_specialty.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = runner.run_profile(str(path), outputs_root=out, echo=lambda _: None)
    assert result.ok, result.notebooks[-1]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_ratings(folder: Path, review_set: list[dict[str, str]], votes: dict[str, dict],
                  packet: str | None) -> list[str]:
    """One ratings file per reviewer in the released schema; ``votes[pid][reviewer]`` is
    ``(Y|N, category)``."""
    files = []
    for r in REVIEWERS:
        rows = [{"review_id": it["review_id"], "prompt_id": it["prompt_id"],
                 "is_mental_health": votes[it["prompt_id"]][r][0],
                 "category": votes[it["prompt_id"]][r][1], "confidence": "H", "notes": ""}
                for it in review_set]
        doc = {"reviewer": r, "exported_at": "2026-01-01T00:00:00Z", "n_total": len(rows),
               "n_rated": len(rows), "ratings": rows}
        if packet:
            doc["packet"] = packet
        p = folder / f"{packet or 'round1'}_{r}.json"
        p.write_text(json.dumps(doc))
        files.append(str(p))
    return files


def truthful(pid: str) -> dict[str, tuple[str, str]]:
    vote = ("Y", TRUTH[pid]) if pid in TRUTH else ("N", "none")
    return {r: vote for r in REVIEWERS}


def included(votes: dict[str, dict]) -> set[str]:
    return {pid for pid, v in votes.items() if sum(v[r][0] == "Y" for r in REVIEWERS) >= 2}


def modal(v: dict[str, tuple[str, str]]) -> str:
    cats = Counter(c for vote, c in v.values() if vote == "Y" and c)
    top = cats.most_common()
    if not top or top[0][1] < 2 or (len(top) > 1 and top[1][1] == top[0][1]):
        return "no category majority"
    return top[0][0]


def sha(ids: set[str]) -> str:
    return hashlib.sha256(json.dumps(sorted(ids)).encode()).hexdigest()


@pytest.mark.slow
def test_toy_dermatology_carve_end_to_end(tmp_path: Path, mirror: Path) -> None:
    out, prof = tmp_path / "out", tmp_path / "profile"
    prof.mkdir()
    root = out / "toy_specialty"

    # 1. corpus, live screen through the simulator, round-1 design (ratings not in yet)
    run(prof, out, ["01_corpus", "02_screening", "03_review_round1"])
    screen = {r["prompt_id"]: r for r in read_csv(root / "02_screening" / "screen.csv")}
    assert len(screen) == 30
    assert {r["category"] for r in screen.values()} <= set(VOCAB)
    assert json.loads((root / "02_screening" / "vocabulary.json").read_text()) == list(VOCAB)
    m02 = json.loads((root / "02_screening" / "metrics.json").read_text())
    assert m02["n_screened"] == 30 and "agreement_with_release" not in m02
    # the two Spanish conversations were flagged by 01 and translated turn by turn
    translations = json.loads((root / "02_screening" / "translations.json").read_text())
    assert sorted(translations) == ["toyderm-015", "toyderm-016"]
    assert all([t["role"] for t in v] == ["user"] for v in translations.values())

    set1 = read_csv(root / "03_review_round1" / "review_set.csv")
    screened_in = {p for p, r in screen.items() if r["label"] != "NOT_RELEVANT"}
    assert {it["prompt_id"] for it in set1 if it["kind"] == "screened_in"} == screened_in
    controls1 = sorted((it for it in set1 if it["kind"] == "control"),
                       key=lambda it: it["review_id"])
    assert len(controls1) == 4  # the profile's n_controls
    assert all(screen[it["prompt_id"]]["label"] == "NOT_RELEVANT" for it in controls1)
    packet = json.loads((root / "03_review_round1" / "packet.json").read_text())
    for item in packet["items"]:
        assert (item["translation"] is not None) == (item["prompt_id"] in translations)

    # 2. round-1 ratings: truthful, with a split exclusion, a split inclusion without a
    #    category majority, and two concealed controls the majority includes (2/4 > 0.3)
    votes1 = {it["prompt_id"]: truthful(it["prompt_id"]) for it in set1}
    derm_in = sorted(p for p in screened_in if p in TRUTH)
    assert len(derm_in) >= 2
    votes1[derm_in[0]] = {"R1": ("N", "none"), "R2": ("N", "none"),
                          "R3": ("Y", TRUTH[derm_in[0]])}
    other = "hair_nails" if TRUTH[derm_in[1]] != "hair_nails" else "psoriasis"
    votes1[derm_in[1]] = {"R1": ("Y", TRUTH[derm_in[1]]), "R2": ("Y", other),
                          "R3": ("N", "none")}
    for it in controls1[:2]:
        votes1[it["prompt_id"]] = {"R1": ("Y", "other_derm"), "R2": ("Y", "other_derm"),
                                   "R3": ("N", "none")}
    files1 = write_ratings(tmp_path, set1, votes1, None)
    inc1 = included(votes1)
    ctrl1_ids = {it["prompt_id"] for it in controls1}
    rate1 = len(inc1 & ctrl1_ids) / 4
    assert rate1 > 0.3

    # 3. round 1 tallied -> recall round: recall screen of the pool, round-2 design
    run(prof, out, ["03_review_round1", "04_recall"],
        review_round1={"ratings_files": files1})
    m03 = json.loads((root / "03_review_round1" / "metrics.json").read_text())
    assert m03["n_included"] == len(inc1)
    assert m03["control_inclusion_rate"] == rate1 and m03["recall_triggered"] is True
    m04 = json.loads((root / "04_recall" / "metrics.json").read_text())
    assert m04["round2"] == "awaiting_ratings"
    pool = {p for p, r in screen.items() if r["label"] == "NOT_RELEVANT"} - ctrl1_ids
    assert m04["n_recall_pool"] == len(pool) == m04["n_recall_screened"]
    recall = {r["prompt_id"]: r for r in read_csv(root / "04_recall" / "recall_screen.csv")}
    assert set(recall) == pool
    assert {r["bucket"] for r in recall.values()} <= {"A_cosmetic", "B_systemic_with_skin",
                                                      "standard", "none"}
    set2 = read_csv(root / "04_recall" / "review_set.csv")
    cands = {p for p, r in recall.items() if r["tier"] in ("CLEAR", "POSSIBLE")}
    assert {it["prompt_id"] for it in set2 if it["kind"] == "candidate"} == cands
    controls2 = [it for it in set2 if it["kind"] == "control"]
    assert len(controls2) == 1 and recall[controls2[0]["prompt_id"]]["tier"] == "NO"

    # 4. round-2 ratings (the fresh control included by the majority), then the subset
    votes2 = {it["prompt_id"]: truthful(it["prompt_id"]) for it in set2}
    votes2[controls2[0]["prompt_id"]] = {r: ("Y", "other_derm") for r in REVIEWERS}
    files2 = write_ratings(tmp_path, set2, votes2, "recovery")
    run(prof, out, ["04_recall", "05_subset"],
        review_round1={"ratings_files": files1}, recall={"ratings_files": files2})
    inc2 = included(votes2)
    ctrl2_ids = {controls2[0]["prompt_id"]}
    v1 = (inc1 & (screened_in | ctrl1_ids)) | (inc2 & cands)  # v1 admits round 1's controls
    v2 = v1 | (inc2 & ctrl2_ids)
    m05 = json.loads((root / "05_subset" / "metrics.json").read_text())
    assert (m05["n_v1"], m05["n_v2"]) == (len(v1), len(v2)) and len(v2) == len(v1) + 1
    assert m05["sha256_v1"] == sha(v1) and m05["sha256_v2"] == sha(v2)
    assert m05["n_hard"] == 0 and not any(k.startswith("matches_release") for k in m05)
    released = json.loads((root / "05_subset" / "toy-derm-v1.json").read_text())
    assert released["prompt_ids"] == sorted(v1)
    cats = {p: modal(votes2[p] if p in votes2 else votes1[p]) for p in v1}
    assert m05["category_counts"] == dict(Counter(cats.values()))
    assert sum(m05["category_counts"].values()) == len(v1)
    assert m05["n_no_category_majority"] == sum(c == "no category majority"
                                                for c in cats.values()) >= 1

    # 5. the same ratings with the round-1 threshold at the observed rate ("at or below" ends
    #    the loop): no recall round, and the subset is round 1's alone
    run(prof, out, ["03_review_round1", "04_recall", "05_subset"],
        review_round1={"ratings_files": files1, "threshold": rate1})
    m04 = json.loads((root / "04_recall" / "metrics.json").read_text())
    assert m04["round2"] == "not_needed" and m04["loop_terminated"] is True
    assert not (root / "04_recall" / "votes.csv").exists()
    m05 = json.loads((root / "05_subset" / "metrics.json").read_text())
    only1 = inc1 & (screened_in | ctrl1_ids)
    assert m05["n_v1"] == m05["n_v2"] == len(only1) and m05["sha256_v1"] == sha(only1)


def test_design_round2_from_a_recall_screen() -> None:
    import pandas as pd

    from hbpsych_utils.construction import review_set

    recall = pd.DataFrame({
        "prompt_id": ["a", "b", "c", "d", "e", "f"],
        "tier": ["CLEAR", "NO", "POSSIBLE", "NO", "NO", "CLEAR"],
        "bucket": ["A_x", "none", "B_y", "none", "none", "standard"],
        "reason": ["r-a", "r-b", "r-c", "r-d", "r-e", "r-f"],
    })
    s = review_set.design_round2(recall, 2, seed=3)
    assert list(s.columns) == ["review_id", "prompt_id", "kind", "recovery_tier",
                               "recovery_bucket", "recovery_reason"]
    assert list(s.review_id) == ["R0001", "R0002", "R0003", "R0004", "R0005"]
    cands = s[s.kind == "candidate"].set_index("prompt_id")
    assert sorted(cands.index) == ["a", "c", "f"]
    assert cands.loc["c", "recovery_bucket"] == "B_y" and cands.loc["f", "recovery_reason"] == "r-f"
    controls = s[s.kind == "control"]
    assert set(controls.prompt_id) <= {"b", "d", "e"} and len(controls) == 2
    assert set(controls.recovery_tier) == {"NO (control)"} and set(controls.recovery_bucket) == {""}
    # its own seeded stream: the same as design_round with the derived seed, not the profile's
    again = review_set.design_round(["a", "c", "f"], ["b", "d", "e"], 2,
                                    review_set.round_seed(3, 2), kinds=review_set.ROUND2_KINDS)
    assert list(again.prompt_id) == list(s.prompt_id)
    assert review_set.round_seed(3, 1) == 3
    assert review_set.round_seed(3, 2) != review_set.round_seed(4, 2)
    with pytest.raises(review_set.ReviewSetError, match="control pool holds 3"):
        review_set.design_round2(recall, 4, seed=3)
    with pytest.raises(review_set.ReviewSetError, match="MAYBE"):
        review_set.design_round2(recall.assign(tier=["MAYBE"] * 6), 0, seed=3)
