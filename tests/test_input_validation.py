"""Bad input is stopped at the door and named.

Point 2: a profile's references (models, fault kinds, providers in limits and base URLs, the
model registry, the corpus, ratings and rubric files) are checked when the runner loads it
(``runner.checks.load_for_run``; ``profiles.load_profile`` validates its values only), so a bad
one fails before any notebook runs. Point 3: YAML is read strictly (a key written twice is an error
naming both lines), a section of the wrong type is named, bytes that are not UTF-8 are reported
with file and line (skip modes skip and count them), and empty inputs, NaN/infinite numbers
and wrong-typed fields are errors naming file, record and field.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import source_trees
from conftest import chapter_parameters

from hbpsych_utils import study
from hbpsych_utils.construction import corpus, ratings, review_set, screening, subset, translation
from hbpsych_utils.core import config, jsonl, records, sources, yaml_loader
from hbpsych_utils.evaluation import score_sources, scoring
from hbpsych_utils.llm import ConfigError, load_registry
from hbpsych_utils.llm.faults import FAULT_KINDS
from hbpsych_utils.pipeline import profiles
from hbpsych_utils.reporting import interop, interop_simple_evals
from hbpsych_utils.runner import checks

ROOT = Path(__file__).resolve().parent.parent
TOY_CORPUS = ROOT / "tests" / "data" / "toy_specialty" / "corpus.jsonl"
NOT_UTF8 = b"\xff"


def write_profile(tmp_path: Path, text: str, name: str = "bad") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def record(pid: str = "p1", points: object = 5) -> dict:
    return {"prompt": [{"role": "user", "content": "I cannot sleep."}], "prompt_id": pid,
            "rubrics": [{"criterion": "Asks about safety", "points": points, "tags": []}]}


def lines_of(path: Path, text: str) -> list[int]:
    """1-based numbers of the lines of ``path`` that are ``text`` (found in the file, not typed
    in, so the loader's line numbers are checked against the file itself)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [i for i, line in enumerate(lines, start=1) if line == text]


def tiny_registry(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_models.yaml"
    path.write_text("providers:\n  here:\n    kind: openai_compatible\n    api_key_env: null\n"
                    "    base_url: http://127.0.0.1:9/v1\nmodels:\n  tiny:\n    provider: here\n"
                    "    api_model: tiny\n    price: {input: 0, output: 0}\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Point 3: strict YAML


def test_a_repeated_profile_section_is_an_error_naming_key_and_both_lines(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "corpus:\n  allow_partial: true\nseed: 3\n"
                                   "corpus:\n  max_conversations: 3\n")
    with pytest.raises(config.ProfileError) as exc:
        profiles.load_profile(path)
    first, second = lines_of(path, "corpus:")
    assert str(path) in str(exc.value) and "'bad'" in str(exc.value)
    assert f"key 'corpus' appears twice in the same mapping (lines {first} and {second})" in str(
        exc.value)


def test_a_repeated_nested_key_is_an_error(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "corpus:\n  allow_partial: true\n  allow_partial: false\n")
    with pytest.raises(config.ProfileError, match=r"key 'allow_partial' appears twice .*"
                                                  r"\(lines 2 and 3\)"):
        profiles.load_profile(path)


def test_merge_keys_still_work_and_an_explicit_key_overrides_the_merged_one() -> None:
    data = yaml_loader.load_text("base: &b {rpm: 1, tpm: 2}\nopenai:\n  <<: *b\n  rpm: 5\n")
    assert data["openai"] == {"rpm": 5, "tpm": 2}


def test_a_text_read_again_is_the_same_document_and_the_callers_own_copy(tmp_path: Path) -> None:
    """A text is parsed once per process: reading it again gives a document equal to a fresh
    parse, shared aliases included, that the caller may change without changing the next
    reading; a changed file is read anew and a bad text raises every time."""
    import pickle

    text = "base: &b {rpm: 1, tpm: [2, 3]}\nopenai: *b\nanthropic:\n  <<: *b\n  rpm: 5\n"
    fresh = yaml_loader._parse.__wrapped__(text, "x.yaml")  # parsed anew, not the kept one
    first = yaml_loader.load_text(text, "x.yaml")
    assert first == fresh and pickle.dumps(first) == pickle.dumps(fresh)
    assert first["openai"] is first["base"]  # the alias is one object, as PyYAML makes it
    first["openai"]["rpm"] = 99
    first["anthropic"]["tpm"].append(4)
    again = yaml_loader.load_text(text, "x.yaml")
    assert again == fresh and again["base"]["rpm"] == 1 and again["openai"] is again["base"]
    path = tmp_path / "p.yaml"
    path.write_text("a: 1\n")
    assert yaml_loader.load_file(path) == {"a": 1}
    path.write_text("a: 2\n")
    assert yaml_loader.load_file(path) == {"a": 2}
    for _ in range(2):
        with pytest.raises(yaml_loader.DuplicateKeyError, match=r"y.yaml:2: key 'a'"):
            yaml_loader.load_text("a: 1\na: 2\n", "y.yaml")
    assert yaml_loader.load_text("", "z.yaml") is None
    assert yaml_loader.load_text("", "z.yaml") is None


def test_a_repeated_key_in_a_set_value_is_an_error() -> None:
    with pytest.raises(config.ProfileError, match=r"--set .*key 'rpm' appears twice"):
        config.parse_overrides(["llm.limits={openai: {rpm: 1, rpm: 2}}"])


def test_model_registry_with_a_repeated_model_is_an_error(tmp_path: Path) -> None:
    path = tiny_registry(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text + text.split("models:\n")[1], encoding="utf-8")  # 'tiny' again
    first, second = lines_of(path, "  tiny:")
    with pytest.raises(ConfigError, match=rf"{path}:{second}: key 'tiny' appears twice in the "
                                          rf"same mapping \(lines {first} and {second}\)"):
        load_registry(path)


def test_artifact_registry_with_a_repeated_name_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    entry = "  url: https://example.org/a\n  mirror_path: a/b\n  licence: MIT\n"
    path.write_text(f"a:\n{entry}b:\n{entry}a:\n{entry}", encoding="utf-8")
    first, second = lines_of(path, "a:")
    with pytest.raises(sources.ArtifactError,
                       match=rf"key 'a' appears twice .*\(lines {first} and {second}\)"):
        sources._registry(path)


def test_artifact_registry_entry_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text("a: [1, 2]\n", encoding="utf-8")
    with pytest.raises(sources.ArtifactError, match=r"entry 'a': expected a mapping with url"):
        sources._registry(path)


@pytest.mark.parametrize(("text", "pattern"), [
    ("providers: {}\nmodels: [a, b]\n", r"models: expected a mapping of model name -> settings "
                                        r"\(not a list\), got list"),
    ("providers: [openai]\nmodels: {}\n", r"providers: expected a mapping of provider name"),
    ("providers: {}\nmodels:\n  m: 3\n", r"models.m: expected a mapping of settings, got int"),
    ("- providers\n- models\n", r"<top level>: expected a mapping with 'providers' and 'models'"),
    ("", r"is empty"),
], ids=["models-list", "providers-list", "model-scalar", "top-list", "empty"])
def test_registry_sections_of_the_wrong_type_are_named(tmp_path: Path, text: str,
                                                       pattern: str) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=pattern) as exc:
        load_registry(path)
    assert str(path) in str(exc.value)


@pytest.mark.parametrize(("text", "key"), [
    ("corpus: [a]\n", "corpus"), ("llm:\n  limits: [openai]\n", "llm.limits"),
    ("llm:\n  faults: {kind: reset}\n", "llm.faults"), ("generation: 3\n", "generation"),
])
def test_profile_sections_of_the_wrong_type_are_named(tmp_path: Path, text: str,
                                                      key: str) -> None:
    path = write_profile(tmp_path, text)
    with pytest.raises(config.ProfileError, match=rf"\({path}\) is invalid:\n  - {key}: Input "
                                                  r"should be a valid (list|dictionary)"):
        profiles.load_profile(path)


@source_trees.GROUP
def test_no_yaml_is_read_outside_the_strict_loader() -> None:
    """Every YAML the package, its scripts and benchmarks read goes through core.yaml_loader."""
    offenders = []
    for folder in ("hbpsych_utils", "scripts", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            # a file whose text never says "yaml" has no ``yaml.<name>`` node: not walked
            if path.name == "yaml_loader.py" or "yaml" not in path.read_text(encoding="utf-8"):
                continue
            for node in source_trees.nodes(path):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id == "yaml" and "load" in node.attr):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: yaml.{node.attr}")
    assert not offenders


# ---------------------------------------------------------------------------------------------
# Point 3: text that is not UTF-8


def test_not_utf8_is_located_by_line_and_character_column(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes("first\nsé" .encode() + NOT_UTF8 + b"x\nthird\n")
    with pytest.raises(records.NotUTF8) as exc:
        records.read_text(path)
    assert (exc.value.file, exc.value.line, exc.value.column) == (str(path), 2, 3)
    assert str(exc.value).startswith(f"{path}:2: not UTF-8 text: byte 0xff at column 3")
    lines = list(records.utf8_lines(path))
    assert [n for n, _ in lines] == [1, 2, 3] and isinstance(lines[1][1], records.NotUTF8)
    assert lines[1][1].line == 2 and lines[2][1] == "third\n"


def corpus_with_bad_bytes(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    good = [json.dumps(record(f"p{i}")).encode() for i in range(3)]
    bad = json.dumps(record("pX")).encode().replace(b"sleep", b"sl" + NOT_UTF8 + b"ep")
    path.write_bytes(b"\n".join([good[0], bad, good[1], good[2]]) + b"\n")
    return path


def test_corpus_bytes_that_are_not_utf8_are_named(tmp_path: Path) -> None:
    path = corpus_with_bad_bytes(tmp_path)
    with pytest.raises(corpus.CorpusError) as exc:
        corpus.load_corpus(path)
    assert (exc.value.file, exc.value.line, exc.value.field) == (str(path), 2, "<bytes>")
    assert "not UTF-8" in exc.value.problem


def test_corpus_skip_mode_skips_and_counts_lines_that_are_not_utf8(tmp_path: Path) -> None:
    report = corpus.load_corpus(corpus_with_bad_bytes(tmp_path), invalid_records="skip")
    assert report.ids == ["p0", "p1", "p2"]
    assert [(e.line, e.field) for e in report.skipped] == [(2, "<bytes>")]


@pytest.mark.parametrize(("reader", "error"), [
    (lambda p: list(jsonl.records(p, error=screening.ScreenError)), screening.ScreenError),
    (lambda p: corpus.hard_ids(p), corpus.CorpusError),
    (lambda p: screening.load_released_screen(p, ["anxiety"]), screening.ScreenError),
], ids=["jsonl", "hard-ids", "released-screen"])
def test_jsonl_readers_name_file_and_line_of_bytes_that_are_not_utf8(tmp_path: Path, reader,
                                                                     error) -> None:
    path = tmp_path / "x.jsonl"
    first = {"prompt_id": "a", "label": "RELEVANT", "category": "anxiety", "confidence": "high"}
    path.write_bytes(json.dumps(first).encode() + b'\n{"prompt_id": "' + NOT_UTF8 + b'"}\n')
    with pytest.raises(error, match=rf"{path}:2: .*not UTF-8"):
        reader(path)


def test_ratings_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "R1.json"
    path.write_bytes(b'{"reviewer": "R1",\n "ratings": ["' + NOT_UTF8 + b'"]}')
    with pytest.raises(ratings.RatingsError) as exc:
        ratings.check_format(path)
    (problem,) = exc.value.problems
    assert (problem.file, problem.field) == (str(path), "<bytes>")
    assert problem.message.startswith("line 2: not UTF-8 text")


@pytest.mark.parametrize(("name", "reader", "error"), [
    ("review_set.csv", review_set.read_set, review_set.ReviewSetError),
    ("votes.csv", ratings.read_votes, review_set.ReviewSetError),
    ("screen.csv", screening.read_screen, screening.ScreenError),
    ("categories_v1.csv", subset.read_categories, ValueError),
    ("matrix.csv", score_sources.read_matrix, scoring.ScoringError),
    ("scores.csv", score_sources.read_scores, scoring.ScoringError),
    ("subset.json", subset.load_subset, ValueError),
    ("subsets.json", subset.read_index, ValueError),
    ("vocabulary.json", screening.read_vocabulary, screening.ScreenError),
    ("translations.json", translation.read_translations, translation.TranslationError),
    ("corpus_source.json", corpus.read_source_record, corpus.CorpusError),
    ("languages.csv", lambda p: corpus.non_english_flags(p, []), ValueError),
])
def test_every_table_reader_names_file_and_line_of_bytes_that_are_not_utf8(
        tmp_path: Path, name: str, reader, error) -> None:
    path = tmp_path / name
    path.write_bytes(b"prompt_id,category\n" + b"a,x" + NOT_UTF8 + b"\n")
    with pytest.raises(error, match=rf"{path}:2: .*not UTF-8 text: byte 0xff at column 4"):
        reader(path)


@pytest.mark.parametrize(("reader", "error"), [
    (records.read_json, records.NotJSON),
    (subset.load_subset, ValueError),
    (subset.read_index, ValueError),
    (screening.read_vocabulary, screening.ScreenError),
    (interop_simple_evals.read_simple_evals, interop.InteropError),
    (lambda p: interop.resolve_subset(str(p)), interop.InteropError),
], ids=["records", "subset", "subset-index", "vocabulary", "simple-evals", "interop-subset"])
def test_every_json_reader_names_file_and_line_of_text_that_is_not_json(
        tmp_path: Path, reader, error) -> None:
    path = tmp_path / "x_allresults.json"
    path.write_text('{"prompt_ids": [],\n oops}', encoding="utf-8")
    with pytest.raises(error, match=rf"{path}:2: not valid JSON: Expecting property name"):
        reader(path)


def test_a_ratings_file_that_is_not_json_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "R1.json"
    path.write_text('{"reviewer": "R1",\n oops}', encoding="utf-8")
    with pytest.raises(ratings.RatingsError) as exc:
        ratings.check_format(path)
    (problem,) = exc.value.problems
    assert (problem.file, problem.field) == (str(path), "<json>")
    assert problem.message.startswith("line 2: not valid JSON: Expecting property name")


def test_an_upstream_metrics_file_that_is_not_json_is_named_with_its_line(tmp_path: Path) -> None:
    from hbpsych_utils.pipeline import metrics
    from hbpsych_utils.pipeline.stage import Stage

    path = tmp_path / "p" / "08_scores" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"mode": "paper",\n oops}', encoding="utf-8")
    with pytest.raises(records.NotJSON, match=rf"{path}:2: not valid JSON"):
        Stage("p", "12_figures_tables", tmp_path).upstream_metrics(metrics.SCORES)


def test_a_validators_own_message_is_reported_without_pydantics_prefix(tmp_path: Path) -> None:
    path = tmp_path / "matrix.csv"
    path.write_text("candidate,judge,clipped_mean_score,n_prompts\nc,j,1.5,10\n",
                    encoding="utf-8")
    with pytest.raises(scoring.ScoringError) as exc:
        score_sources.read_matrix(path)
    assert str(exc.value) == f"{path}:2: field 'clipped_mean_score': 1.5 outside [0, 1]"


@pytest.mark.parametrize(("reader", "error"), [
    (review_set.read_set, review_set.ReviewSetError),
    (screening.read_screen, screening.ScreenError),
    (score_sources.read_scores, scoring.ScoringError),
])
def test_an_empty_table_is_an_error_naming_the_file(tmp_path: Path, reader, error) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(error, match=rf"{path}: empty file"):
        reader(path)


# ---------------------------------------------------------------------------------------------
# Point 3: empty inputs, NaN and infinity, wrong-typed fields


@pytest.mark.parametrize("text", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
def test_an_empty_corpus_is_an_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(corpus.CorpusError, match=rf"^{path}: field '<file>': no conversation"):
        corpus.load_corpus(path)


def test_a_corpus_with_no_valid_line_is_an_error_in_skip_mode_too(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text("{bad\n[1]\n", encoding="utf-8")
    with pytest.raises(corpus.CorpusError, match=r"no conversation records.*2 invalid line"):
        corpus.load_corpus(path, invalid_records="skip")


def test_an_empty_released_screen_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "screen.jsonl"
    path.write_text("", encoding="utf-8")
    with pytest.raises(screening.ScreenError, match=rf"{path}: no records"):
        screening.load_released_screen(path, ["anxiety"])


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_rubric_points_must_be_finite(tmp_path: Path, literal: str) -> None:
    path = tmp_path / "corpus.jsonl"
    line = json.dumps(record("p1", points="__P__")).replace('"__P__"', literal)
    path.write_text(json.dumps(record("p0")) + "\n" + line + "\n", encoding="utf-8")
    assert json.loads(line)["rubrics"][0]["points"] != 5  # the JSON reader itself lets it in
    with pytest.raises(corpus.CorpusError) as exc:
        corpus.load_corpus(path)
    assert (exc.value.line, exc.value.field) == (2, "rubrics[0].points")
    assert "expected a finite number" in exc.value.problem
    skipped = corpus.load_corpus(path, invalid_records="skip")
    assert skipped.ids == ["p0"] and len(skipped.skipped) == 1


@pytest.mark.parametrize("base", [records.FileRecord, records.TextRecord])
def test_no_file_record_accepts_nan_or_infinity(base: type[records.FileRecord]) -> None:
    class Cell(base):  # type: ignore[misc, valid-type]
        value: float

    assert Cell.parse({"value": 0.5}, "f:1").value == 0.5
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match=r"f:1: field 'value': .*finite number"):
            Cell.parse({"value": bad}, "f:1")


def small_set() -> pd.DataFrame:
    return pd.DataFrame({"review_id": ["R0001", "R0002"], "prompt_id": ["p-a", "p-b"],
                         "kind": ["screened_in", "control"]})


def ratings_file(tmp_path: Path, **row_over: object) -> Path:
    rows = [{"review_id": "R0001", "prompt_id": "p-a", "is_mental_health": "Y",
             "category": "anxiety", "confidence": "H", "notes": ""},
            {"review_id": "R0002", "prompt_id": "p-b", "is_mental_health": "N",
             "category": "", "confidence": "M", "notes": ""}]
    rows[1].update(row_over)
    path = tmp_path / "R1.json"
    path.write_text(json.dumps({"reviewer": "R1", "n_total": 2, "n_rated": 2, "ratings": rows}),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("category", ["anxiety"], "expected str, got list"),
    ("category", {"a": 1}, "expected str, got dict"),
    ("confidence", ["H"], "expected str, got list"),
    ("is_mental_health", ["Y"], "['Y'] is not one of Y|N"),
    ("prompt_id", ["p-b"], "missing or not a string: ['p-b']"),
    ("notes", 3.5, "expected str, got float"),
])
def test_wrong_typed_rating_fields_are_named_not_a_type_error(tmp_path: Path, field: str,
                                                             value: object, problem: str) -> None:
    path = ratings_file(tmp_path, **{field: value})
    for check in (lambda: ratings.load_ratings(path, small_set(), vocabulary=["anxiety"]),
                  lambda: ratings.check_format(path)):
        with pytest.raises(ratings.RatingsError) as exc:
            check()
        assert [(p.file, p.review_id, p.field, p.message) for p in exc.value.problems] == [
            (str(path), "R0002", field, problem)]


def test_check_format_leaves_the_vocabulary_and_set_to_load_ratings(tmp_path: Path) -> None:
    path = ratings_file(tmp_path, category="cardiology", prompt_id="p-elsewhere")
    ratings.check_format(path)  # a well-formed file: vocabulary and set are not known yet
    with pytest.raises(ratings.RatingsError) as exc:
        ratings.load_ratings(path, small_set(), vocabulary=["anxiety"])
    assert {p.field for p in exc.value.problems} == {"category", "prompt_id"}


# ---------------------------------------------------------------------------------------------
# Point 2: a profile's references are checked when the runner loads it


def test_shipped_profiles_pass_the_reference_checks() -> None:
    for name in config.available_profiles():
        checks.load_for_run(name)  # includes check_references; raises on any problem


def test_load_profile_validates_values_and_the_runner_checks_references(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "grading:\n  judges: [no-such-model]\n")
    assert profiles.load_profile(path).grading.judges == ["no-such-model"]  # a valid value
    with pytest.raises(config.ProfileError, match="unknown model 'no-such-model'"):
        checks.load_for_run(path)  # that names no model of the registry


REGISTRY = load_registry()
KNOWN = sorted(REGISTRY.models)[0]


@pytest.mark.parametrize("text", [
    "screening:\n  model: no-such-model\n",
    "screening:\n  translation_model: no-such-model\n",
    "recall:\n  model: no-such-model\n",
    f"generation:\n  candidates: [{KNOWN}, no-such-model]\n",
    "grading:\n  judges: [no-such-model]\n",
    "harness_validation:\n  candidate: no-such-model\n",
    "harness_validation:\n  judge: no-such-model\n",
], ids=["screening", "translation", "recall", "candidates", "judges", "harness-candidate",
        "harness-judge"])
def test_every_model_key_is_checked_against_the_registry(tmp_path: Path, text: str) -> None:
    path = write_profile(tmp_path, text)
    key = text.split(":")[0] + "." + text.split("\n  ")[1].split(":")[0]
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(path)
    msg = str(exc.value)
    assert msg.startswith(f"profile 'bad' ({path}) is invalid:")
    assert f"{key}" in msg and "unknown model 'no-such-model'" in msg
    assert study.HARNESS_MODEL in msg and str(REGISTRY.source) in msg  # the allowed values


def test_model_references_list_every_key_and_the_study_defaults_in_live_mode() -> None:
    profile = profiles.load_profile("smoke")
    refs = checks.model_references(profile)
    assert [m for k, m in refs if k.startswith("generation.candidates")] == list(
        profile.generation.candidates)
    assert [m for k, m in refs if k.startswith("grading.judges")] == list(study.JUDGE_PANEL)
    assert ("harness_validation.candidate (null: the study's harness model)",
            study.HARNESS_MODEL) in refs
    assert checks.model_references(profiles.load_profile("default")) == []  # paper: none called


def test_null_judges_are_the_study_panel_and_checked_only_when_live(tmp_path: Path) -> None:
    reg = tiny_registry(tmp_path)
    paper = write_profile(tmp_path, f"llm:\n  registry_file: {reg}\n", "paper")
    assert checks.load_for_run(paper)[0].grading.judges is None  # paper mode calls no judge
    live = write_profile(tmp_path, f"llm:\n  registry_file: {reg}\nevaluation_mode: live\n"
                                   "harness_validation: {mode: replay}\n", "live")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(live)
    msg = str(exc.value)
    for judge in study.JUDGE_PANEL:
        assert f"grading.judges (null: the study's panel): unknown model {judge!r}" in msg
    assert f"(expected a model of {reg}: tiny)" in msg
    ok = write_profile(tmp_path, f"llm:\n  registry_file: {reg}\nevaluation_mode: live\n"
                                 "harness_validation: {mode: replay}\ngrading:\n"
                                 "  judges: [tiny]\n", "ok")
    assert checks.load_for_run(ok)[0].grading.judges == ["tiny"]
    # 11 follows evaluation_mode unless harness_validation.mode says otherwise: live, its null
    # models are the study's harness model, checked too
    harness = write_profile(tmp_path, f"llm:\n  registry_file: {reg}\nevaluation_mode: live\n"
                                      "grading:\n  judges: [tiny]\n", "harness")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(harness)
    for role in ("candidate", "judge"):
        assert (f"harness_validation.{role} (null: the study's harness model): unknown model "
                f"{study.HARNESS_MODEL!r}") in str(exc.value)


def test_a_broken_registry_file_fails_the_profile(tmp_path: Path) -> None:
    reg = tmp_path / "models.yaml"
    reg.write_text("providers: {}\nmodels: [a]\n", encoding="utf-8")
    path = write_profile(tmp_path, f"llm:\n  registry_file: {reg}\n")
    with pytest.raises(config.ProfileError, match=rf"llm.registry_file: {reg}: models: expected"):
        checks.load_for_run(path)


def test_fault_kinds_models_and_apis_are_checked(tmp_path: Path) -> None:
    faults = "".join(f"    - {{kind: {k}}}\n" for k in FAULT_KINDS)
    good = write_profile(tmp_path, f"llm:\n  simulator: true\n  faults:\n{faults}", "good")
    assert [f.kind for f in checks.load_for_run(good)[0].llm.faults] == list(FAULT_KINDS)
    bad = write_profile(tmp_path, "llm:\n  faults:\n    - {kind: explode}\n"
                                  f"    - {{kind: {FAULT_KINDS[0]}, model: nobody}}\n")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(bad)
    msg = str(exc.value)
    assert f"llm.faults[0].kind: unknown fault kind 'explode' (expected one of: " \
           f"{', '.join(FAULT_KINDS)})" in msg
    assert "llm.faults[1].model: unknown model 'nobody'" in msg
    api = write_profile(tmp_path, "llm:\n  faults:\n    - {kind: reset, api: mistral}\n", "api")
    with pytest.raises(config.ProfileError, match=r"llm.faults.0.api: .*'openai', 'anthropic' or "
                                                  r"'google'"):
        checks.load_for_run(api)


def test_limits_name_registry_providers_and_known_keys(tmp_path: Path) -> None:
    provider = next(iter(REGISTRY.providers))
    ok = write_profile(
        tmp_path, f"llm:\n  limits:\n    {provider}: {{rpm: null, concurrency: 2}}\n", "ok")
    assert checks.load_for_run(ok)[0].llm.limits == {provider: {"rpm": None, "concurrency": 2}}
    bad = write_profile(tmp_path, "llm:\n  limits:\n    nobody: {rpm: 10}\n"
                                  f"    {provider}: {{burst: 3, rpm: 0, concurrency: null}}\n")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(bad)
    msg = str(exc.value)
    assert (f"llm.limits.nobody: unknown provider (expected one of the providers of "
            f"{REGISTRY.source}: {', '.join(REGISTRY.providers)})") in msg
    assert f"llm.limits.{provider}.burst: unknown key (expected one of: concurrency, rpm, tpm)" \
        in msg
    assert f"llm.limits.{provider}.rpm: Input should be greater than 0 (got 0)" in msg
    assert f"llm.limits.{provider}.concurrency: " in msg


def test_base_urls_name_a_provider_or_a_kind_and_a_url(tmp_path: Path) -> None:
    ok = write_profile(tmp_path, "llm:\n  base_urls: {openai_compatible: 'http://127.0.0.1:8/v1'}\n",
                       "ok")
    assert checks.load_for_run(ok)[0].llm.base_urls
    bad = write_profile(tmp_path, "llm:\n  base_urls: {nobody: 'http://h/v1', local: 'h:8000'}\n")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(bad)
    msg = str(exc.value)
    assert "llm.base_urls.nobody: unknown provider (expected a provider of" in msg
    assert "openai_compatible" in msg
    assert "llm.base_urls.local: 'h:8000' is not an http(s) URL" in msg


def test_corpus_file_is_validated_when_the_profile_loads(tmp_path: Path) -> None:
    bad = corpus_with_bad_bytes(tmp_path)
    path = write_profile(tmp_path, f"corpus:\n  corpus_file: {bad}\n")
    with pytest.raises(config.ProfileError, match=rf"corpus.corpus_file: {bad}:2: field "
                                                  r"'<bytes>': not UTF-8"):
        checks.load_for_run(path)
    skip = write_profile(tmp_path, f"corpus:\n  corpus_file: {bad}\n  invalid_records: skip\n",
                         "skip")
    checks.load_for_run(skip)  # skip mode: the bad line is skipped, as 01 will do
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    path = write_profile(tmp_path, f"corpus:\n  corpus_file: {empty}\n", "empty")
    with pytest.raises(config.ProfileError, match=rf"corpus.corpus_file: {empty}: .*no conversa"):
        checks.load_for_run(path)
    toy = write_profile(tmp_path, f"corpus:\n  corpus_file: {TOY_CORPUS}\n", "toy")
    assert checks.load_for_run(toy)[0].corpus.corpus_file == str(TOY_CORPUS)


def test_ratings_and_rubric_files_are_validated_when_the_profile_loads(tmp_path: Path) -> None:
    rated = ratings_file(tmp_path, category=["anxiety"])
    rubric = tmp_path / "rubric.md"
    rubric.write_bytes(b"# Rubric\n\ncontrolled vocabulary: a, b" + NOT_UTF8 + b"\n")
    path = write_profile(tmp_path, f"review_round1:\n  ratings_files: [{rated}]\n"
                                   f"recall:\n  rubric_file: {rubric}\n")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(path)
    msg = str(exc.value)
    assert f"review_round1.ratings_files[0]: 1 problem(s) in ratings file(s) {rated}" in msg
    assert f"{rated}: review R0002: field 'category': expected str, got list" in msg
    assert f"recall.rubric_file: {rubric}:3: not UTF-8 text" in msg


def test_ratings_files_whose_reviewers_read_the_same_are_refused_at_load(tmp_path: Path) -> None:
    """Two ratings files of one round whose reviewers differ only by case, width or a trailing
    space (``R1`` and ``Ｒ1 ``) are refused when the profile loads, naming both."""
    first = ratings_file(tmp_path)
    doc = json.loads(first.read_text(encoding="utf-8"))
    second = tmp_path / "R1-again.json"
    second.write_text(json.dumps({**doc, "reviewer": "\uff321 "}), encoding="utf-8")
    path = write_profile(tmp_path, f"review_round1:\n  ratings_files: [{first}, {second}]\n")
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(path)
    msg = str(exc.value)
    assert f"review_round1.ratings_files: {second}: file header: field 'reviewer'" in msg
    assert "'\uff321 '" in msg and "'R1'" in msg and str(first) in msg


def test_a_profile_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"description: caf" + b"\xe9" + b"\n")
    with pytest.raises(config.ProfileError, match=rf"profile 'latin': {path}:1: not UTF-8"):
        profiles.load_profile(path)


@pytest.mark.slow
def test_a_profile_naming_an_unknown_model_fails_before_any_notebook_runs(tmp_path: Path) -> None:
    """``python -m hbpsych_utils run`` exits 2 naming profile, key and
    allowed values, and no notebook ran (nothing written under the outputs folder)."""
    path = write_profile(tmp_path, "description: a typo in a candidate\nevaluation_mode: live\n"
                                   f"generation:\n  candidates: [{study.HARNESS_MODEL}, gpt-4.2]\n",
                         "typo_model")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "hbpsych_utils", "run", str(path), "--outputs", str(out)],
        cwd=ROOT, env={**os.environ, "HBPSYCH_FIGURES": str(tmp_path / "figures")},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"profile 'typo_model' ({path}) is invalid:" in proc.stderr
    assert "generation.candidates[1]: unknown model 'gpt-4.2' (expected a model of" in proc.stderr
    assert all(m in proc.stderr for m in study.JUDGE_PANEL)  # the allowed values are listed
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not list(out.glob("*/notebooks/*.ipynb")) and not out.exists()


@pytest.mark.parametrize(("stage", "parameter", "text", "option"), [
    ("08_scores", "subsets", "[v1, hard]", "-y 'subsets: [v1, hard]'"),
    ("08_scores", "subsets", "hard", "-y 'subsets: [hard]'"),
    ("07_grading", "judges", "gpt-4.1-2025-04-14", "-y 'judges: [gpt-4.1-2025-04-14]'"),
    ("07_grading", "llm", "{mode: sync}", "-y 'llm: {mode: sync}'"),
])
def test_a_list_or_mapping_given_as_text_points_to_papermills_yaml_option(
        tmp_path: Path, stage: str, parameter: str, text: str, option: str) -> None:
    """``papermill -p subsets "[v1, hard]"`` passes text where the chapter takes a list: the
    error names the parameter and shows the ``-y`` option that passes it as YAML, which works."""
    import importlib

    import yaml

    from hbpsych_utils.stages.base import ParameterError

    module = importlib.import_module(f"hbpsych_utils.stages.s{stage}")
    with pytest.raises(ParameterError) as info:
        module.start(**chapter_parameters(stage, tmp_path, **{parameter: text}))
    message = str(info.value)
    assert f"{parameter} = {text!r}" in message and option in message
    assert f"notebook {stage}:" in message and "-p passes text" in message
    value = yaml.safe_load(option.removeprefix("-y ").strip("'"))[parameter]
    run = module.start(**chapter_parameters(stage, tmp_path, **{parameter: value}))  # -y
    assert run.parameters[parameter] == value


def test_a_chapter_starts_from_every_parameter_by_name(tmp_path: Path) -> None:
    """A chapter's start takes each parameter of its parameters cell by name: one missing or
    unknown is refused, naming it and the parameters the cell declares; a value is checked as
    strictly as the profile's field (a resample count given as text is refused, not read)."""
    from hbpsych_utils.pipeline import graph
    from hbpsych_utils.stages import s08_scores
    from hbpsych_utils.stages.base import ParameterError

    params = chapter_parameters(graph.SCORES, tmp_path)
    del params["seed"]
    with pytest.raises(ParameterError, match=r"notebook 08_scores: missing seed \(its start "
                       r"takes every parameter .*: profile, outputs_root, mode, seed"):
        s08_scores.start(**params)
    with pytest.raises(ParameterError, match=r"unknown n_resample\b"):
        s08_scores.start(**chapter_parameters(graph.SCORES, tmp_path, n_resample=10))
    with pytest.raises(ParameterError, match=r"n_resamples = '200'"):
        s08_scores.start(**chapter_parameters(graph.SCORES, tmp_path, n_resamples="200"))
    with pytest.raises(ParameterError, match=r"ci_level = 1.5: Input should be less than 1"):
        s08_scores.start(**chapter_parameters(graph.SCORES, tmp_path, ci_level=1.5))
