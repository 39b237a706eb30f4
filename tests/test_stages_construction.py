"""The construction chapters' stage modules (01-05): findings, round-2 states, inter-stage readers,
and the sections a run cannot produce yet.

Findings are tested on crafted typed metrics, both sides of every qualitative claim: a sentence
the numbers do not support must not be printed. The stage runs themselves are covered by the
notebook tests (default, smoke and toy profiles); a live round without ratings is also driven
here through the chapters' calls, without a kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import chapter_parameters

from hbpsych_utils.construction import (
    corpus,
    ratings,
    review_round,
    review_set,
    screening,
    subset,
    tally,
)
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    CorpusMetrics,
    MetricsError,
    RecallMetrics,
    ReviewRound1Metrics,
    ScreeningMetrics,
    SubsetMetrics,
    dump,
)
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.reporting.display import Findings
from hbpsych_utils.stages import (
    s01_corpus,
    s02_screening,
    s03_review_round1,
    s04_recall,
    s05_subset,
)
from hbpsych_utils.stages.base import run_chapter, shown

# --- 01 ----------------------------------------------------------------------------------------

CORPUS = CorpusMetrics(
    corpus_source="registry", complete=False, n_conversations=712, n_expected=5000,
    coverage=0.1424, n_skipped=0, n_hard_ids=1000, n_hard_in_corpus=193, n_rubric_items=8541,
    n_non_english=101, non_english_share=101 / 712, ids_sha256="0", turns_mean=2.97,
    turns_median=1.0, turns_max=15, n_multi_turn=355, rubric_items_mean=11.9958,
    n_negative_items=2679, positive_points_total=38489, negative_points_total=-18150,
    points_all_integer=True,
)


def test_corpus_findings_partial_with_languages() -> None:
    text = " ".join(s01_corpus.findings(CORPUS))
    assert "**712** conversations (14.2% of the 5,000 expected; partial)" in text
    assert "8,541 rubric criteria (12.0 per conversation, 2,679 of them negative)" in text
    assert "355 conversations have more than one message" in text
    assert "193 of the 1,000 HealthBench-Hard" in text
    assert "101 conversations (14.2%) are confidently non-English" in text


def test_corpus_findings_complete_without_language_detection() -> None:
    m = CORPUS.model_copy(update={"complete": True, "n_conversations": 5000, "coverage": 1.0,
                                  "n_non_english": None, "non_english_share": None})
    found = s01_corpus.findings(m)
    assert isinstance(found, Findings)
    text = " ".join(found)
    assert "; complete)" in text and "partial" not in text
    assert "non-English" not in text
    assert list(s01_corpus.findings(m.model_copy(update={"n_conversations": 0}))) == [
        "The corpus holds no conversations (0 of the 5,000 expected)."]


def test_language_table_columns() -> None:
    table = s01_corpus.language_table({"a": corpus.Language("es", 0.99, True)})
    assert table.to_dict("records") == [
        {"prompt_id": "a", "language": "es", "probability": 0.99, "non_english": True}]


# --- 02 ----------------------------------------------------------------------------------------

SCREEN = {
    "mode": "replay", "n_screened": 5000, "n_relevant": 378, "n_borderline": 263,
    "n_not_relevant": 4359, "n_model_refused": 1, "n_screen_failed": 0,
    "confidence_counts": {"high": 4429, "medium": 407, "low": 164},
    "relevant_by_category": {"anxiety": 47, "perinatal_mh": 107, "sleep": 1,
                             "mood_depression_bipolar": 63},
    "borderline_by_category": {"sleep": 54},
}


def test_screening_findings_replay() -> None:
    found = s02_screening.findings(ScreeningMetrics(**SCREEN))
    text = " ".join(found)
    assert "**378** RELEVANT, **263** BORDERLINE and 4,359 NOT_RELEVANT" in text
    assert "1 item was refused by the screening model and routed to review." in text
    assert "no valid record" not in text
    # the three largest counts, largest first, whatever the dict order
    assert "Perinatal mental health (107), Mood disorders (63), Anxiety (47)." in text
    assert "641 conversations go to blinded clinician review" in text
    assert "released screen also covers" not in text and "translation" not in text


def test_screening_findings_live_with_failures_comparison_and_translations() -> None:
    m = ScreeningMetrics(**{
        **SCREEN, "mode": "live", "n_screen_failed": 2, "relevant_by_category": {},
        "model": "m", "batch_size": 50, "n_screen_problems": 0,
        "agreement_with_release": {"n_common": 100, "cohen_kappa": 0.8123,
                                   "percent_agreement": 0.91},
        "translation_model": "m", "n_translation_requested": 5,
        "n_translation_translated": 3, "n_translation_failed": 1,
        "n_translation_refused": 1, "n_translation_is_english": 0})
    text = " ".join(s02_screening.findings(m))
    assert "2 got no valid record after re-asks and were routed too" in text
    assert "The commonest RELEVANT categories: none." in text
    assert "On the 100 conversations" in text and "agrees on 91.0% of labels" in text
    assert "kappa 0.812" in text
    assert "3 of 5 non-English conversations got a reviewer translation (1 failed, 1 refused" \
        in text


# --- 03 ----------------------------------------------------------------------------------------

ROUND1 = ReviewRound1Metrics(
    mode="replay", n_reviewed=791, n_screened_in=641, n_controls=150, n_included=596,
    n_screened_in_included=587, n_controls_included=9, control_inclusion_rate=0.06,
    recall_triggered=True, ac1_pairs={"R1-R2": 0.78, "R1-R3": 0.82, "R2-R3": 0.77},
    ac1_pairwise_mean=0.79, ac1_multirater=0.78, fleiss_kappa=0.65,
    cohen_kappa_pairs={"R1-R2": 0.62, "R1-R3": 0.71, "R2-R3": 0.61},
    tier_counts={"0/3": 120, "1/3": 75, "2/3": 81, "3/3": 515}, threshold=0.05,
)
UNRATED = ReviewRound1Metrics(mode="live", n_reviewed=19, n_ratings_files=0)
"""Round 1 in live mode before its ratings are in."""


def test_round1_findings_above_threshold_triggers_recall() -> None:
    text = " ".join(s03_review_round1.findings(ROUND1))
    assert "rate of **6.0%** — above the 5% threshold, so a recall round is triggered." in text
    assert "at or below" not in text and "loop ends" not in text
    assert "mean pairwise AC1 0.790, multi-rater AC1 0.780, Fleiss' kappa 0.650" in text
    # kappa is NaN when every rating is in one category (null once written): named, not "nan"
    for undefined in (float("nan"), None):
        text = " ".join(s03_review_round1.findings(
            ROUND1.model_copy(update={"fleiss_kappa": undefined})))
        assert "Fleiss' kappa undefined." in text


def test_round1_findings_at_or_below_threshold_ends_the_loop() -> None:
    m = ROUND1.model_copy(update={"n_controls_included": 7, "control_inclusion_rate": 7 / 150,
                                  "recall_triggered": False})
    text = " ".join(s03_review_round1.findings(m))
    assert "— at or below the 5% threshold, so the loop ends here." in text
    assert "triggered" not in text and "above" not in text


def test_round1_findings_without_ratings() -> None:
    found = list(s03_review_round1.findings(UNRATED))
    assert len(found) == 1
    assert "19 conversations" in found[0] and "review_round1.ratings_files" in found[0]
    assert "threshold" not in found[0]


# --- 04 ----------------------------------------------------------------------------------------

ROUND2 = RecallMetrics(
    mode="replay", round2="tallied", n_recall_pool=4209, n_candidates=81, n_clear=9,
    n_possible=72, n_controls=25, n_candidates_included=14, n_clear_included=6,
    n_possible_included=8, n_controls_included=1, control_inclusion_rate=0.04,
    loop_terminated=True, ac1_pairwise_mean=0.488, ac1_multirater=0.51, fleiss_kappa=0.111,
    threshold=0.05, recall_triggered=False,
)
LOWER = "lower than round 1, as expected"


def test_round2_findings_tallied_lower_agreement_and_loop_ends() -> None:
    text = " ".join(s04_recall.findings(ROUND2, ROUND1))
    assert "put **81** of 4,209 pooled conversations forward (9 CLEAR, 72 POSSIBLE)" in text
    assert "included **14** of them (6 CLEAR, 8 POSSIBLE) and 1 of 25 fresh controls" in text
    assert "**4.0%**, at or below the 5% threshold, so the loop terminates." in text
    assert "(round 1: 0.790)" in text and "(round 1: 0.650)" in text
    assert LOWER in text


def test_round2_findings_not_lower_and_another_round_needed() -> None:
    m = ROUND2.model_copy(update={"ac1_pairwise_mean": 0.79, "control_inclusion_rate": 0.08,
                                  "loop_terminated": False, "recall_triggered": True})
    text = " ".join(s04_recall.findings(m, ROUND1))
    assert LOWER not in text  # equal to round 1 is not lower
    assert "above the 5% threshold, so another round would be needed." in text
    assert "terminates" not in text
    # with round 1 untallied (03 live without ratings) no comparison is claimed
    text = " ".join(s04_recall.findings(ROUND2, UNRATED))
    assert "round 1:" not in text and LOWER not in text
    # an undefined coefficient (NaN, null once written) is named so, and is never "lower"
    undefined = ROUND2.model_copy(update={"ac1_pairwise_mean": None})
    text = " ".join(s04_recall.findings(undefined, ROUND1))
    assert "mean pairwise AC1 undefined (round 1: 0.790)" in text and LOWER not in text


def test_round2_findings_in_every_other_state() -> None:
    waiting = s04_recall.findings(RecallMetrics(mode="live", round2="awaiting_round1_ratings",
                                                n_recall_pool=11), UNRATED)
    assert "Round 1's ratings are not in yet" in " ".join(waiting)
    ended = s04_recall.findings(RecallMetrics(mode="live", round2="not_needed", n_recall_pool=11,
                                              loop_terminated=True),
                                ROUND1.model_copy(update={"control_inclusion_rate": 0.02}))
    assert "Round 1 included 2.0% of its controls, at or below" in " ".join(ended)
    design = RecallMetrics(mode="live", round2="awaiting_ratings", n_recall_pool=11,
                           n_candidates=4, n_clear=1, n_possible=3, n_controls=1)
    text = " ".join(s04_recall.findings(design, ROUND1))
    assert "**4** of 11 pooled conversations forward (1 CLEAR, 3 POSSIBLE)" in text
    assert "with 1 fresh controls" in text and "recall.ratings_files" in text
    assert "terminates" not in text


ENDED = ROUND1.model_copy(update={"recall_triggered": False})


@pytest.mark.parametrize(("mode", "round1", "has_ratings", "state"), [
    ("replay", UNRATED, False, "tallied"),
    ("live", UNRATED, True, "awaiting_round1_ratings"),
    ("live", ENDED, True, "not_needed"),
    ("live", ROUND1, False, "awaiting_ratings"),
    ("live", ROUND1, True, "tallied"),
])
def test_round2_state_machine(mode: str, round1: ReviewRound1Metrics, has_ratings: bool,
                              state: str) -> None:
    assert review_round.round2_state(mode, round1, has_ratings) == state
    assert state in review_round.ROUND2_STATES


def test_round2_state_is_read_back_from_04s_metrics(tmp_path: Path) -> None:
    ended = RecallMetrics(mode="live", round2="not_needed", n_recall_pool=11,
                          loop_terminated=True)
    Stage("p", "04_recall", tmp_path).write_metrics(dump(ended))
    later = Stage("p", "05_subset", tmp_path)
    assert review_round.read_round2_state(later) == "not_needed"
    # 04's metrics are typed: a file without the state is an error naming the file and field
    Stage("p", "04_recall", tmp_path).write_metrics({"mode": "replay", "n_recall_pool": 3})
    with pytest.raises(MetricsError, match=r"04_recall/metrics\.json: field round2"):
        review_round.read_round2_state(later)


# --- 05 ----------------------------------------------------------------------------------------

SUBSET = {
    "n_v1": 610, "n_v2": 611, "n_hard": 119, "sha256_v1": "a", "sha256_v2": "b",
    "sha256_hard": "c", "matches_release_v1": True,
    "matches_release_v2": True, "matches_release_hard": True,
    "category_counts": {"perinatal_mh": 112, "anxiety": 84, "sleep": 43,
                        "no category majority": 65},
    "n_no_category_majority": 65,
}


def test_subset_findings_matches_release() -> None:
    text = " ".join(s05_subset.findings(SubsetMetrics(**SUBSET)))
    assert "v1 holds **610** conversations (v2: 611); **119** of them" in text
    assert ("HealthBench-Psych v1 matches the release, HealthBench-Psych v2 matches the "
            "release, HealthBench-Psych-Hard v1 matches the release.") in text
    assert "DIFFERS" not in text
    assert ("Largest categories: Perinatal mental health (112), Anxiety (84), Sleep (43); "
            "65 ") in text


def test_subset_findings_differs_and_without_comparison() -> None:
    text = " ".join(s05_subset.findings(SubsetMetrics(**{**SUBSET,
                                                         "matches_release_v2": False})))
    assert ("HealthBench-Psych v1 matches the release, HealthBench-Psych v2 DIFFERS from the "
            "release, HealthBench-Psych-Hard v1 matches") in text
    bare = {k: v for k, v in SUBSET.items() if not k.startswith("matches_release")}
    text = " ".join(s05_subset.findings(SubsetMetrics(**bare)))
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


# --- a live round before its ratings, through the chapters' calls -------------------------------

TOY = Path(__file__).parent / "data" / "toy_specialty"


def screen_by_hand(root: Path) -> None:
    """02's files for the toy corpus as a live screen would leave them: the test's truth
    RELEVANT, the rest NOT_RELEVANT."""
    truth = json.loads((TOY / "truth.json").read_text())
    ids = [json.loads(line)["prompt_id"]
           for line in (TOY / "corpus.jsonl").read_text().splitlines()]
    folder = root / graph.SCREENING
    folder.mkdir(parents=True)
    pd.DataFrame({"prompt_id": ids,
                  "label": ["RELEVANT" if p in truth else "NOT_RELEVANT" for p in ids],
                  "category": [truth.get(p, "none") for p in ids]}
                 ).to_csv(folder / graph.SCREEN, index=False)
    (folder / graph.VOCABULARY).write_text(json.dumps(sorted({*truth.values(), "none"})))


def test_sections_a_live_run_cannot_produce_say_why(tmp_path: Path, mirror: Path) -> None:
    """01 without language detection, then 03 and 04 live before any ratings: what a section
    has nothing to show for is said once (with the set, or the pool), the section is not made,
    nothing is written for it, and the metrics say which state the rounds are in."""
    params01 = chapter_parameters(graph.CORPUS, tmp_path, profile="t",
                                  corpus_file=str(TOY / "corpus.jsonl"), detect_language=False)
    run01 = s01_corpus.start(**params01)
    loaded = s01_corpus.load(run01, allow_partial=True, invalid_records="error",
                             max_conversations=None, corpus_file=params01["corpus_file"])
    languages = s01_corpus.languages(loaded, detect=False)
    assert languages.flags is None and "detect_language" in str(shown(languages))
    m01 = s01_corpus.metrics(loaded, s01_corpus.describe(run01, loaded, languages))
    assert m01.n_non_english is None and m01.non_english_share is None
    assert "non-English" not in " ".join(s01_corpus.findings(m01))
    run_chapter(graph.CORPUS, params01)
    root = tmp_path / "t"
    assert not (root / graph.CORPUS / graph.LANGUAGES).exists()
    screen_by_hand(root)

    run03 = s03_review_round1.start(**chapter_parameters(
        graph.REVIEW_ROUND1, tmp_path, profile="t", mode="live", seed=3, n_controls=4))
    review = s03_review_round1.review_set(run03, n_controls=4, seed=3, ratings_files=None)
    materials = s03_review_round1.instrument(run03, review)
    # the instrument is named relative to the run folder, the same on every machine
    assert materials.instrument == "03_review_round1/instrument.html"
    assert str(tmp_path) not in materials._repr_markdown_()
    assert review.rated is None and "review_round1.ratings_files" in shown(review).html()
    votes = s03_review_round1.votes(review.rated)
    counted = s03_review_round1.tally(votes, threshold=0.3)
    agreed = s03_review_round1.agreement(votes)
    assert votes is counted is agreed is None
    m03 = s03_review_round1.metrics(review, counted, agreed, threshold=0.3)
    assert dump(m03) == {"mode": "live", "n_reviewed": len(review.table), "n_ratings_files": 0}
    s03_review_round1.write(run03, m03, review, votes)
    assert {p.name for p in (root / graph.REVIEW_ROUND1).iterdir()} >= {
        graph.REVIEW_SET, "packet.json", "instrument.html", graph.METRICS}
    assert not (root / graph.REVIEW_ROUND1 / graph.VOTES).exists()

    params04 = chapter_parameters(graph.RECALL, tmp_path, profile="t", mode="live", seed=3,
                                  n_controls=1)
    run04 = s04_recall.start(**params04)
    pool = s04_recall.recall_pool(run04, ratings_files=None, rubric_artifact="recovery_rubric",
                                  rubric_file=None, model=None)
    assert pool.state == review_round.AWAITING_ROUND1 and not pool.round1.tallied
    assert pool.to_screen is None and "awaiting round 1's ratings" in str(shown(pool))
    screen = s04_recall.recall_screen(pool.to_screen, run04, batch_size=5, max_reasks=0)
    assert screen is None
    assert s04_recall.review_set(pool, screen, n_controls=1, seed=3) is None
    m04 = run_chapter(graph.RECALL, params04)
    assert dump(m04) == {"mode": "live", "round2": "awaiting_round1_ratings",
                         "n_recall_pool": len(pool.ids)}
    assert {p.name for p in (root / graph.RECALL).iterdir()} & {
        *review_round.ROUND2_FILES, graph.VOTES} == set()
