"""Corpus loading: typed records, line-level errors, coverage, hashes, languages."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hbpsych_utils.construction import corpus
from hbpsych_utils.core import sources


def record(pid: str = "p1", **over) -> dict:
    rec = {
        "prompt": [{"role": "user", "content": "I can't sleep and feel hopeless."}],
        "prompt_id": pid,
        "rubrics": [
            {"criterion": "Asks about safety", "points": 7, "tags": ["axis:completeness"]},
            {"criterion": "Gives a dose", "points": -2.5, "tags": []},
        ],
        "example_tags": ["theme:emergency_referrals"],
        "ideal_completions_data": None,
        "canary": "healthbench:x",
    }
    rec.update(over)
    return rec


def write_jsonl(tmp_path: Path, lines: list) -> Path:
    p = tmp_path / "corpus.jsonl"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return p


def test_points_keep_their_type() -> None:
    conv = corpus.parse_record(record())
    assert [type(r.points) for r in conv.rubrics] == [int, float]
    assert conv.positive_points == 7
    assert conv.themes == ("emergency_referrals",)
    assert conv.rubrics[0].tags == ("axis:completeness",)


def test_missing_rubrics_names_file_and_line(tmp_path: Path) -> None:
    bad = record("p2")
    del bad["rubrics"]
    path = write_jsonl(tmp_path, [record("p1"), bad])
    with pytest.raises(corpus.CorpusError) as exc:
        corpus.load_corpus(path)
    assert str(exc.value) == f"{path}:2: field 'rubrics': missing"
    assert (exc.value.line, exc.value.field) == (2, "rubrics")


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        ("{not json", "<json>", "not valid JSON"),
        (record(prompt_id=5), "prompt_id", "expected str, got int"),
        (record(prompt=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]),
         "prompt[1].role", "must end in a user turn"),
        (record(rubrics=[{"criterion": "c", "points": -1, "tags": []}]), "rubrics",
         "no criterion with positive points"),
        (record(rubrics=[{"criterion": "c", "points": "5", "tags": []}]), "rubrics[0].points",
         "expected int or float, got str"),
        (record(rubrics=[{"criterion": "c", "points": True, "tags": []}]), "rubrics[0].points",
         "got bool"),
        (record(prompt=[{"role": "robot", "content": "q"}]), "prompt[0].role", "unknown role"),
        (record(prompt=[{"role": "user"}]), "prompt[0].content", "missing"),
    ],
)
def test_invalid_lines(tmp_path: Path, line, field: str, problem: str) -> None:
    path = write_jsonl(tmp_path, [record("ok"), line])
    with pytest.raises(corpus.CorpusError) as exc:
        corpus.load_corpus(path)
    assert exc.value.line == 2 and exc.value.field == field and problem in exc.value.problem


def test_duplicate_prompt_id(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [record("a"), record("b"), record("a")])
    with pytest.raises(corpus.CorpusError, match=r":3: field 'prompt_id': duplicate a .*line 1"):
        corpus.load_corpus(path)


def test_skip_mode_logs_and_counts(tmp_path: Path, caplog) -> None:
    path = write_jsonl(tmp_path, [record("a"), "{bad", record("a"), record("c")])
    report = corpus.load_corpus(path, invalid_records="skip")
    assert report.ids == ["a", "c"]
    assert [e.line for e in report.skipped] == [2, 3]
    assert "skipping invalid record" in caplog.text


def test_max_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [record(str(i)) for i in range(5)])
    assert corpus.load_corpus(path, max_records=3).ids == ["0", "1", "2"]


def test_coverage_partial_and_complete() -> None:
    expected = ["a", "b", "c", "d"]
    cov = corpus.check_coverage(["a", "b"], expected, allow_partial=True)
    assert (cov.n_found, cov.n_expected, cov.fraction, cov.missing) == (2, 4, 0.5, ("c", "d"))
    assert "PARTIAL" in cov.describe()
    assert corpus.check_coverage(expected, expected, allow_partial=False).complete
    with pytest.raises(corpus.CorpusError, match="allow_partial"):
        corpus.check_coverage(["a"], expected, allow_partial=False)
    with pytest.raises(corpus.CorpusError, match="not HealthBench conversations"):
        corpus.check_coverage(["a", "zz"], expected, allow_partial=True)


def test_ids_hash_is_sha256_of_sorted_json() -> None:
    ids = ["b", "a", "c"]
    expected = hashlib.sha256(b'["a", "b", "c"]').hexdigest()
    assert corpus.ids_hash(ids) == expected


def test_ids_hash_matches_released_subset(mirror: Path) -> None:
    subset = json.loads(sources.fetch("subset_hard_v1").read_text())
    assert corpus.ids_hash(subset["prompt_ids"]) == subset["prompt_id_sha256"]


def test_language_detection() -> None:
    es = corpus.detect_language("Hola, desde hace dos semanas no puedo dormir y me siento triste")
    assert es.code == "es" and es.non_english
    en = corpus.detect_language("I have had trouble sleeping for two weeks and feel very sad")
    assert en.code == "en" and not en.non_english
    assert not corpus.detect_language("45y F").non_english  # too short to call


def test_partial_corpus_from_mirror(mirror: Path) -> None:
    loaded = corpus.load_for_profile(allow_partial=True)
    assert loaded.coverage.n_found == 712 and loaded.coverage.n_expected == 5000
    assert not loaded.coverage.complete
    with pytest.raises(corpus.CorpusError, match="712 of 5,000"):
        corpus.load_for_profile(allow_partial=False)
    hard = corpus.hard_ids(sources.fetch("harness_scores"))
    assert len(hard) == len(set(hard)) == 1000


def test_describe_corpus_counts() -> None:
    convs = [corpus.parse_record(record("a")), corpus.parse_record(record("b", rubrics=[
        {"criterion": "x", "points": 3, "tags": []}]))]
    stats = corpus.describe_corpus(convs)
    assert stats["n_conversations"] == 2
    assert stats["n_rubric_items"] == 3
    assert stats["n_negative_items"] == 1
    assert stats["positive_points_total"] == 10
    assert stats["points_all_integer"] is False


def test_non_english_flags_from_01s_table_or_detected(tmp_path: Path) -> None:
    spanish = "Hola, desde hace dos semanas no puedo dormir y me siento triste"
    es = corpus.parse_record(record("es", prompt=[{"role": "user", "content": spanish}]))
    en = corpus.parse_record(record("en"))
    missing = tmp_path / "languages.csv"
    assert corpus.non_english_flags(missing, [es, en]) == {"es": True, "en": False}
    missing.write_text("prompt_id,language,probability,non_english\nes,es,0.99,False\n"
                       "en,en,0.99,True\n")
    # the recorded flags win over a fresh detection (reviewers get what the report showed)
    assert corpus.non_english_flags(missing, [es, en]) == {"es": False, "en": True}


def test_layout_errors_name_the_nested_field(tmp_path: Path) -> None:
    bad_tags = record("t", rubrics=[{"criterion": "c", "points": 1, "tags": "axis"}])
    not_object = record("o", prompt=["hello"])
    for line, field, problem in ((bad_tags, "rubrics[0].tags", "expected list, got str"),
                                 (not_object, "prompt[0]", "expected an object, got str"),
                                 ([1, 2], "<record>", "expected a JSON object, got list")):
        path = write_jsonl(tmp_path, [line])
        with pytest.raises(corpus.CorpusError) as exc:
            corpus.load_corpus(path)
        assert (exc.value.line, exc.value.field, exc.value.problem) == (1, field, problem)
    # an extra key in a record is not an error (the upstream file may grow fields)
    assert corpus.parse_record(record("x", extra_field=1)).prompt_id == "x"
