"""The construction chapters' stage modules (01-05): findings, round-2 states, inter-stage readers.

Findings are tested on crafted metrics, both sides of every qualitative claim: a sentence the
numbers do not support must not be printed. The stage runs themselves are covered by the
notebook tests (default, smoke and toy profiles).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hbpsych_utils.construction import corpus, ratings, review_set, screening, subset, tally
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import (
    s01_corpus,
    s02_screening,
    s03_review_round1,
    s04_recall,
    s05_subset,
)

# --- 01 ----------------------------------------------------------------------------------------

CORPUS = {
    "complete": False, "n_conversations": 712, "n_expected": 5000, "coverage": 0.1424,
    "n_hard_ids": 1000, "n_hard_in_corpus": 193, "n_rubric_items": 8541,
    "n_non_english": 101, "non_english_share": 101 / 712, "rubric_items_mean": 11.9958,
    "n_negative_items": 2679, "n_multi_turn": 355,
}


def test_corpus_findings_partial_with_languages() -> None:
    text = " ".join(s01_corpus.findings(CORPUS))
    assert "**712** conversations (14.2% of the 5,000 expected; partial)" in text
    assert "8,541 rubric criteria (12.0 per conversation, 2,679 of them negative)" in text
    assert "355 conversations have more than one message" in text
    assert "193 of the 1,000 HealthBench-Hard" in text
    assert "101 conversations (14.2%) are confidently non-English" in text


def test_corpus_findings_complete_without_language_detection() -> None:
    m = {**CORPUS, "complete": True, "n_conversations": 5000, "coverage": 1.0,
         "n_non_english": None, "non_english_share": None}
    text = " ".join(s01_corpus.findings(m))
    assert "; complete)" in text and "partial" not in text
    assert "non-English" not in text
    assert s01_corpus.findings({**m, "n_conversations": 0}) == [
        "The corpus holds no conversations (0 of the 5,000 expected)."]


def test_language_table_columns() -> None:
    table = s01_corpus.language_table({"a": corpus.Language("es", 0.99, True)})
    assert table.to_dict("records") == [
        {"prompt_id": "a", "language": "es", "probability": 0.99, "non_english": True}]


# --- 02 ----------------------------------------------------------------------------------------

SCREEN = {
    "mode": "replay", "n_screened": 5000, "n_relevant": 378, "n_borderline": 263,
    "n_not_relevant": 4359, "n_model_refused": 1, "n_screen_failed": 0,
    "relevant_by_category": {"anxiety": 47, "perinatal_mh": 107, "sleep": 1,
                             "mood_depression_bipolar": 63},
}


def test_screening_findings_replay() -> None:
    found = s02_screening.findings(SCREEN)
    text = " ".join(found)
    assert "**378** RELEVANT, **263** BORDERLINE and 4,359 NOT_RELEVANT" in text
    assert "1 item(s) were refused by the screening model and routed to review." in text
    assert "no valid record" not in text
    # the three largest counts, largest first, whatever the dict order
    assert "perinatal_mh (107), mood_depression_bipolar (63), anxiety (47)." in text
    assert "641 conversations go to blinded clinician review" in text
    assert "released screen also covers" not in text and "translation" not in text


def test_screening_findings_live_with_failures_comparison_and_translations() -> None:
    m = {**SCREEN, "mode": "live", "n_screen_failed": 2, "relevant_by_category": {},
         "agreement_with_release": {"n_common": 100, "cohen_kappa": 0.8123,
                                    "percent_agreement": 0.91},
         "translation_model": "m", "n_translation_requested": 5,
         "n_translation_translated": 3, "n_translation_failed": 1,
         "n_translation_refused": 1, "n_translation_is_english": 0}
    text = " ".join(s02_screening.findings(m))
    assert "2 got no valid record after re-asks and were routed too" in text
    assert "The commonest RELEVANT categories: none." in text
    assert "On the 100 conversations" in text and "agrees on 91.0% of labels" in text
    assert "kappa 0.812" in text
    assert "3 of 5 non-English conversations got a reviewer translation (1 failed, 1 refused" \
        in text


# --- 03 ----------------------------------------------------------------------------------------

ROUND1 = {
    "mode": "replay", "n_reviewed": 791, "n_screened_in": 641, "n_controls": 150,
    "n_included": 596, "n_screened_in_included": 587, "n_controls_included": 9,
    "control_inclusion_rate": 0.06, "recall_triggered": True, "ac1_pairwise_mean": 0.79,
    "ac1_multirater": 0.78, "fleiss_kappa": 0.65, "threshold": 0.05,
}


def test_round1_findings_above_threshold_triggers_recall() -> None:
    text = " ".join(s03_review_round1.findings(ROUND1))
    assert "rate of **6.0%** — above the 5% threshold, so a recall round is triggered." in text
    assert "at or below" not in text and "loop ends" not in text
    assert "mean pairwise AC1 0.790, multi-rater AC1 0.780, Fleiss' kappa 0.650" in text


def test_round1_findings_at_or_below_threshold_ends_the_loop() -> None:
    m = {**ROUND1, "n_controls_included": 7, "control_inclusion_rate": 7 / 150,
         "recall_triggered": False}
    text = " ".join(s03_review_round1.findings(m))
    assert "— at or below the 5% threshold, so the loop ends here." in text
    assert "triggered" not in text and "above" not in text


def test_round1_findings_without_ratings() -> None:
    found = s03_review_round1.findings({"mode": "live", "n_reviewed": 19, "n_ratings_files": 0})
    assert len(found) == 1
    assert "19 conversations" in found[0] and "review_round1.ratings_files" in found[0]
    assert "threshold" not in found[0]


# --- 04 ----------------------------------------------------------------------------------------

ROUND2 = {
    "mode": "replay", "round2": "tallied", "n_recall_pool": 4209, "n_candidates": 81,
    "n_clear": 9, "n_possible": 72, "n_controls": 25, "n_candidates_included": 14,
    "n_clear_included": 6, "n_possible_included": 8, "n_controls_included": 1,
    "control_inclusion_rate": 0.04, "loop_terminated": True, "ac1_pairwise_mean": 0.488,
    "fleiss_kappa": 0.111, "threshold": 0.05, "recall_triggered": False,
}
LOWER = "lower than round 1, as expected"


def test_round2_findings_tallied_lower_agreement_and_loop_ends() -> None:
    text = " ".join(s04_recall.findings(ROUND2, ROUND1))
    assert "put **81** of 4,209 pooled conversations forward (9 CLEAR, 72 POSSIBLE)" in text
    assert "included **14** of them (6 CLEAR, 8 POSSIBLE) and 1 of 25 fresh controls" in text
    assert "**4.0%**, at or below the 5% threshold, so the loop terminates." in text
    assert "(round 1: 0.790)" in text and "(round 1: 0.650)" in text
    assert LOWER in text


def test_round2_findings_not_lower_and_another_round_needed() -> None:
    m = {**ROUND2, "ac1_pairwise_mean": 0.79, "control_inclusion_rate": 0.08,
         "loop_terminated": False, "recall_triggered": True}
    text = " ".join(s04_recall.findings(m, ROUND1))
    assert LOWER not in text  # equal to round 1 is not lower
    assert "above the 5% threshold, so another round would be needed." in text
    assert "terminates" not in text
    # with round 1 untallied (03 live without ratings) no comparison is claimed
    text = " ".join(s04_recall.findings(ROUND2, {"n_reviewed": 19}))
    assert "round 1:" not in text and LOWER not in text


def test_round2_findings_in_every_other_state() -> None:
    waiting = s04_recall.findings({**ROUND2, "round2": "awaiting_round1_ratings"}, {})
    assert "Round 1's ratings are not in yet" in " ".join(waiting)
    ended = s04_recall.findings({"round2": "not_needed", "n_recall_pool": 11,
                                 "loop_terminated": True},
                                {**ROUND1, "control_inclusion_rate": 0.02})
    assert "Round 1 included 2.0% of its controls, at or below" in " ".join(ended)
    design = {"round2": "awaiting_ratings", "n_recall_pool": 11, "n_candidates": 4,
              "n_clear": 1, "n_possible": 3, "n_controls": 1}
    text = " ".join(s04_recall.findings(design, ROUND1))
    assert "**4** of 11 pooled conversations forward (1 CLEAR, 3 POSSIBLE)" in text
    assert "with 1 fresh controls" in text and "recall.ratings_files" in text
    assert "terminates" not in text


@pytest.mark.parametrize(("mode", "round1", "has_ratings", "state"), [
    ("replay", {}, False, "tallied"),
    ("live", {"n_reviewed": 3}, True, "awaiting_round1_ratings"),
    ("live", {"recall_triggered": False}, True, "not_needed"),
    ("live", {"recall_triggered": True}, False, "awaiting_ratings"),
    ("live", {"recall_triggered": True}, True, "tallied"),
])
def test_round2_state_machine(mode: str, round1: dict, has_ratings: bool, state: str) -> None:
    assert s04_recall.round2_state(mode, round1, has_ratings) == state
    assert state in s04_recall.ROUND2_STATES


def test_round2_state_is_read_back_from_04s_metrics(tmp_path: Path) -> None:
    Stage("p", "04_recall", tmp_path).write_metrics({"round2": "not_needed"})
    later = Stage("p", "05_subset", tmp_path)
    assert s04_recall.read_round2_state(later) == "not_needed"
    Stage("p", "04_recall", tmp_path).write_metrics({"mode": "replay"})
    assert s04_recall.read_round2_state(later) == "tallied"  # written before the key existed


# --- 05 ----------------------------------------------------------------------------------------

SUBSET = {
    "n_v1": 610, "n_v2": 611, "n_hard": 119, "matches_release_v1": True,
    "matches_release_v2": True, "matches_release_hard": True,
    "category_counts": {"perinatal_mh": 112, "anxiety": 84, "sleep": 43,
                        "no category majority": 65},
    "n_no_category_majority": 65,
}


def test_subset_findings_matches_release() -> None:
    text = " ".join(s05_subset.findings(SUBSET))
    assert "v1 holds **610** conversations (v2: 611); **119** of them" in text
    assert "v1: matches the release, v2: matches the release, hard: matches the release." in text
    assert "DIFFERS" not in text
    assert "Largest categories: perinatal_mh (112), anxiety (84), sleep (43); 65 " in text


def test_subset_findings_differs_and_without_comparison() -> None:
    text = " ".join(s05_subset.findings({**SUBSET, "matches_release_v2": False}))
    assert "v1: matches the release, v2: DIFFERS from the release, hard: matches" in text
    bare = {k: v for k, v in SUBSET.items() if not k.startswith("matches_release")}
    text = " ".join(s05_subset.findings(bare))
    assert "release" not in text and "Largest categories" in text


# --- one tally type, named per round ------------------------------------------------------------

def votes_frame(kinds: list[str], included: list[bool], tiers: list[str] | None = None
                ) -> pd.DataFrame:
    n = len(kinds)
    out = pd.DataFrame({"review_id": [f"R{i:04d}" for i in range(1, n + 1)],
                        "prompt_id": [f"p{i}" for i in range(n)], "kind": kinds,
                        "included": included, "tier": ["3/3" if x else "0/3" for x in included]})
    if tiers is not None:
        out["recovery_tier"] = tiers
    return out


def test_one_tally_type_renamed_per_round() -> None:
    r1 = tally.tally_round1(votes_frame(["screened_in", "screened_in", "control"],
                                        [True, False, True]))
    r2 = tally.tally_round2(votes_frame(["candidate", "control"], [True, False],
                                        ["POSSIBLE", "NO (control)"]))
    assert type(r1) is type(r2) is tally.RoundTally
    assert list(r1.metrics()) == list(tally.ROUND1_NAMES.values())
    assert list(r2.metrics()) == list(tally.ROUND2_NAMES.values())
    # a tier without candidates is reported as zeros, not left out
    assert (r2.metrics()["n_clear"], r2.metrics()["n_clear_included"]) == (0, 0)
    assert r2.metrics()["n_possible_included"] == 1 and r2.metrics()["loop_terminated"]
    assert r1.metrics()["n_screened_in"] == r1.n_tested == 2 and r1.recall_triggered


def test_design_counts_use_the_round_names() -> None:
    design = pd.DataFrame({"review_id": ["R1", "R2", "R3"], "prompt_id": ["a", "b", "c"],
                           "kind": ["candidate", "candidate", "control"],
                           "recovery_tier": ["CLEAR", "POSSIBLE", "NO (control)"]})
    assert tally.design_counts(design) == {"n_candidates": 2, "n_clear": 1, "n_possible": 1,
                                           "n_controls": 1}


# --- inter-stage files, each through its one reader ---------------------------------------------

def test_screen_and_vocabulary_readers(tmp_path: Path) -> None:
    (tmp_path / "screen.csv").write_text("prompt_id,label,rationale\na,RELEVANT,\n")
    screen = screening.read_screen(tmp_path / "screen.csv")
    assert screen.loc[0, "rationale"] == ""  # empty stays a string, never NaN
    (tmp_path / "bad.csv").write_text("id,label\na,RELEVANT\n")
    with pytest.raises(screening.ScreenError, match=r"bad\.csv: missing column\(s\)"):
        screening.read_screen(tmp_path / "bad.csv")
    (tmp_path / "vocabulary.json").write_text(json.dumps(["a", "none"]))
    assert screening.read_vocabulary(tmp_path / "vocabulary.json") == ("a", "none")
    (tmp_path / "vocabulary.json").write_text(json.dumps(["a", 3]))
    with pytest.raises(screening.ScreenError, match=r"vocabulary\.json: field '\[1\]'"):
        screening.read_vocabulary(tmp_path / "vocabulary.json")


def test_review_set_and_votes_readers(tmp_path: Path) -> None:
    path = tmp_path / "review_set.csv"
    path.write_text("review_id,prompt_id,kind\nR0001,a,control\nR0002,a,screened_in\n")
    with pytest.raises(review_set.ReviewSetError, match=r"review_set\.csv: .*duplicate prompt_id"):
        review_set.read_set(path)
    votes = tmp_path / "votes.csv"
    votes.write_text("review_id,prompt_id,kind,n_yes,included,tier\nR0001,a,control,2,True,2/3\n")
    assert ratings.read_votes(votes)["included"].tolist() == [True]
    votes.write_text("review_id,prompt_id,kind,n_yes,included,tier\nR0001,a,control,2,yes,2/3\n")
    with pytest.raises(review_set.ReviewSetError, match="included"):
        ratings.read_votes(votes)


def test_subset_index_reader(tmp_path: Path) -> None:
    (tmp_path / "subsets.json").write_text(json.dumps({"v1": "x-v1.json"}))
    assert subset.read_index(tmp_path / "subsets.json") == {"v1": "x-v1.json"}
    (tmp_path / "subsets.json").write_text(json.dumps({"v1": ["x-v1.json"]}))
    with pytest.raises(ValueError, match=r"subsets\.json: field 'v1': expected str, got list"):
        subset.read_index(tmp_path / "subsets.json")


def test_corpus_source_record_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "corpus_source.json"
    path.write_text(json.dumps({"path": "x", "sha256": "0", "source": "registry",
                                "options": {"invalid_records": "sometimes"},
                                "n_conversations": 1, "ids_sha256": "0"}))
    with pytest.raises(corpus.CorpusError) as exc:
        corpus.load_recorded(path)
    assert exc.value.field == "options.invalid_records" and exc.value.file == str(path)
