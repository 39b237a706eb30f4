"""Artifact registry and fetch: mirror copies, sha256 checks, derivations, helpful errors."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from hbpsych_utils.core import sources


def test_registry_covers_every_mirror_file_with_same_hash(mirror: Path) -> None:
    rows = list(csv.DictReader(open(mirror / "MANIFEST.tsv"), delimiter="\t"))
    by_path = {a.mirror_path: a for a in sources.registry().values() if not a.online_only}
    assert set(by_path) == {r["relpath"] for r in rows}
    for r in rows:
        art = by_path[r["relpath"]]
        assert art.expected_sha256(from_mirror=True) == r["sha256"], art.name
        assert art.licence == r["licence"]
        assert "/blob/" not in art.url and art.url.startswith("https://")


def test_registry_pins_commits_and_explains_derived_artifacts() -> None:
    reg = sources.registry()
    for art in reg.values():
        if "github" in art.url:
            commit = art.url.split("/")[5]
            assert len(commit) >= 8 and all(c in "0123456789abcdef" for c in commit), art.name
    assert reg["grader_template"].derive == "python_string_constant"
    assert reg["harness_scores"].derive == "harness_scores"
    assert reg["healthbench_oss"].sha256 is None  # verified by content
    assert "5,000" in reg["healthbench_oss"].derive_how
    for name in ("grader_template", "harness_scores", "healthbench_oss"):
        assert reg[name].derive_how, name


def test_online_only_artifacts_are_verified_by_content_and_absent_from_the_mirror(
        mirror: Path) -> None:
    """The meta-evaluation file is registered like the corpus's upstream: no hash known
    offline, a content check stated, not in the mirror's manifest."""
    rows = {r["relpath"] for r in csv.DictReader(open(mirror / "MANIFEST.tsv"), delimiter="\t")}
    online = {n: a for n, a in sources.registry().items() if a.online_only}
    assert set(online) == {"healthbench_meta_eval"}
    art = online["healthbench_meta_eval"]
    assert art.sha256 is None and art.mirror_sha256 is None and art.derive is None
    assert art.mirror_path not in rows
    assert "binary_labels" in art.derive_how and "5,000" in art.derive_how
    assert art.licence == "MIT (OpenAI)"
    assert art.url.endswith("2025-05-07-06-14-12_oss_meta_eval.jsonl")


def test_online_only_artifact_is_downloaded_even_with_a_mirror_set(
        mirror: Path, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pooch

    asked = []

    def offline(url, **kwargs):
        asked.append(url)
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(pooch, "retrieve", offline)
    with pytest.raises(sources.ArtifactError, match=r"'healthbench_meta_eval'.*online only"):
        sources.fetch("healthbench_meta_eval")
    assert asked == [sources.artifact("healthbench_meta_eval").url]


def test_fetch_from_mirror_verifies_and_caches(mirror: Path, fresh_cache: Path) -> None:
    path = sources.fetch("grader_template")
    assert path.is_relative_to(fresh_cache)
    assert sources.sha256_file(path) == sources.artifact("grader_template").sha256
    original = mirror / sources.artifact("grader_template").mirror_path
    assert path.read_bytes() == original.read_bytes()
    assert sources.fetch("grader_template") == path  # cached


def corrupt_mirror(mirror: Path, tmp_path: Path, name: str) -> Path:
    copy = tmp_path / "mirror"
    rel = sources.artifact(name).mirror_path
    (copy / rel).parent.mkdir(parents=True)
    shutil.copyfile(mirror / rel, copy / rel)
    data = bytearray((copy / rel).read_bytes())
    data[len(data) // 2] ^= 0x01  # flip one bit of one byte
    (copy / rel).write_bytes(bytes(data))
    return copy


def test_flipped_byte_in_mirror_fails_with_name_and_both_hashes(
    mirror: Path, tmp_path: Path, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = corrupt_mirror(mirror, tmp_path, "subset_v1")
    monkeypatch.setenv("HBPSYCH_MIRROR", str(bad))
    expected = sources.artifact("subset_v1").sha256
    got = hashlib.sha256((bad / sources.artifact("subset_v1").mirror_path).read_bytes()).hexdigest()
    with pytest.raises(sources.ArtifactError) as exc:
        sources.fetch("subset_v1")
    msg = str(exc.value)
    assert "'subset_v1'" in msg and expected in msg and got in msg
    assert not sources.local_path("subset_v1").exists()  # nothing unverified is cached


def test_corrupted_cache_is_replaced(mirror: Path, fresh_cache: Path) -> None:
    path = sources.fetch("subset_hard_v1")
    path.write_bytes(b"tampered")
    again = sources.fetch("subset_hard_v1")
    assert sources.sha256_file(again) == sources.artifact("subset_hard_v1").sha256


def test_missing_mirror_file_names_artifact(tmp_path: Path, fresh_cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("HBPSYCH_MIRROR", str(tmp_path / "empty-mirror"))
    with pytest.raises(sources.ArtifactError, match=r"'matrix_v1'.*missing from the mirror"):
        sources.fetch("matrix_v1")


def test_no_network_and_no_mirror_says_what_to_do(fresh_cache: Path, monkeypatch) -> None:
    import pooch

    monkeypatch.delenv("HBPSYCH_MIRROR", raising=False)

    def offline(*args, **kwargs):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(pooch, "retrieve", offline)
    with pytest.raises(sources.ArtifactError) as exc:
        sources.fetch("screening_key")
    msg = str(exc.value)
    assert "'screening_key'" in msg and "HBPSYCH_MIRROR" in msg and "could not download" in msg


def test_online_download_of_a_derived_artifact(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch, mirror: Path
) -> None:
    """An online fetch derives the template from the module source and checks its hash."""
    template = (mirror / sources.artifact("grader_template").mirror_path).read_text()
    module = f'import json\n\nGRADER_TEMPLATE = """\n{template}\n""".strip()\n\nOTHER = 1\n'
    monkeypatch.delenv("HBPSYCH_MIRROR", raising=False)

    def fake_retrieve(url, known_hash, fname, path, progressbar):
        assert known_hash is None  # the upstream .py has no registered hash; the derived bytes do
        p = Path(path) / fname
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(module)
        return str(p)

    import pooch

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    path = sources.fetch("grader_template")
    assert path.read_text() == template
    assert sources.sha256_file(path) == sources.artifact("grader_template").sha256


def test_online_download_hash_mismatch_after_derivation(fresh_cache: Path, monkeypatch) -> None:
    import pooch

    monkeypatch.delenv("HBPSYCH_MIRROR", raising=False)

    def fake_retrieve(url, known_hash, fname, path, progressbar):
        p = Path(path) / fname
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text('GRADER_TEMPLATE = "something else"\n')
        return str(p)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    with pytest.raises(sources.ArtifactError, match=r"'grader_template'.*sha256 mismatch"):
        sources.fetch("grader_template")


def test_derive_python_string_constant_variants() -> None:
    src = b'A = 1\nX = """\n  hi  \n""".strip()\nY = "plain"\n'
    assert sources.derive_python_string_constant(src, "X") == b"hi"
    assert sources.derive_python_string_constant(src, "Y") == b"plain"
    with pytest.raises(sources.ArtifactError):
        sources.derive_python_string_constant(src, "Z")


def test_derive_harness_scores_keeps_three_fields(mirror: Path) -> None:
    upstream = [
        {"prompt_id": "a", "score": 0.5, "response_text": "long text",
         "grades": [{"criteria_met": True, "explanation": "x"}, {"criteria_met": False}]},
        {"prompt_id": "b", "score": -0.25, "grades": [False, True]},
    ]
    raw = "\n".join(json.dumps(u) for u in upstream).encode()
    out = sources.derive_harness_scores(raw).decode()
    assert out == (
        '{"prompt_id": "a", "score": 0.5, "grades": [true, false]}\n'
        '{"prompt_id": "b", "score": -0.25, "grades": [false, true]}\n'
    )


def test_derive_harness_scores_splits_lines_on_newline_only() -> None:
    # JSON allows U+2028 and U+0085 raw inside a string; str.splitlines() cuts a line there
    line = ('{"prompt_id": "a", "score": 1.0, "response_text": "one\u2028two\u0085three", '
            '"grades": [true]}')
    assert "\u2028" in line and len(line.splitlines()) == 3
    out = sources.derive_harness_scores((line + "\n").encode())
    assert out == b'{"prompt_id": "a", "score": 1.0, "grades": [true]}\n'


def test_unknown_artifact_lists_known() -> None:
    with pytest.raises(sources.ArtifactError, match=r"unknown artifact 'nope'.*grader_template"):
        sources.artifact("nope")


def test_harness_scores_recipe_reproduces_the_registered_bytes_from_harness_results(
    mirror: Path, fresh_cache: Path
) -> None:
    """The derived scores file is what the recipe makes of the upstream byte copy, line for line."""
    derived = sources.derive_harness_scores(sources.fetch("harness_results").read_bytes())
    assert hashlib.sha256(derived).hexdigest() == sources.artifact("harness_scores").sha256
    assert derived == sources.fetch("harness_scores").read_bytes()
    assert len(derived.splitlines()) == 1000


def test_results_schema_is_a_draft_2020_12_schema(mirror: Path, fresh_cache: Path) -> None:
    schema = json.loads(sources.fetch("results_schema").read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert {"schema_version", "benchmark", "model", "run", "scoring", "metrics"} <= set(
        schema["required"]
    )
