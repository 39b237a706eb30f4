"""Fingerprints, build records and stage states on crafted run folders (no kernel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hbpsych_utils.core import config
from hbpsych_utils.pipeline import graph, state

DEFAULT = config.load_profile("default")


def built(run: Path, profile: config.Profile = DEFAULT) -> dict[str, state.Inputs]:
    """A run folder in which the runner built every stage of ``profile`` from its inputs."""
    expected = state.expected_inputs(profile, mirror=True)
    for name, inputs in expected.items():
        (run / name).mkdir(parents=True, exist_ok=True)
        state.write_build(run / name, name, by=state.RUNNER, inputs=inputs)
    return expected


def states(run: Path, profile: config.Profile = DEFAULT) -> dict[str, state.StageState]:
    return {s.stage: s for s in state.stage_states(run, profile, mirror=True)}


def test_a_tweak_changes_the_fingerprints_of_its_stage_and_what_depends_on_it() -> None:
    before = state.expected_inputs(DEFAULT, mirror=True)
    tweaked = config.load_profile("default", {"judges.subset": "hard"})
    after = state.expected_inputs(tweaked, mirror=True)
    changed = [s for s in before if before[s].fingerprint() != after[s].fingerprint()]
    assert changed == [graph.JUDGES, graph.FIGURES]
    assert state.changes(before[graph.JUDGES], after[graph.JUDGES]) == [
        'judges.subset changed ("v1" → "hard")']
    assert state.changes(before[graph.FIGURES], after[graph.FIGURES]) == [
        "its upstream 09_judges changed"]


def test_the_artifact_source_is_part_of_the_corpus_inputs() -> None:
    mirror = state.expected_inputs(DEFAULT, mirror=True)[graph.CORPUS]
    download = state.expected_inputs(DEFAULT, mirror=False)[graph.CORPUS]
    assert mirror.artifacts["healthbench_oss"] is not None  # the partial copy's hash
    assert download.artifacts["healthbench_oss"] is None  # the full file: checked by content
    assert mirror.fingerprint() != download.fingerprint()


def test_a_local_file_a_stage_reads_is_fingerprinted_by_content(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("one\n")
    profile = config.load_profile("default", {"corpus.corpus_file": str(corpus)})
    first = state.expected_inputs(profile, mirror=True)[graph.CORPUS]
    corpus.write_text("two\n")
    second = state.expected_inputs(profile, mirror=True)[graph.CORPUS]
    assert state.changes(first, second) == ["file corpus.corpus_file changed"]


def test_every_stage_built_from_its_inputs_is_current(tmp_path: Path) -> None:
    built(tmp_path)
    got = states(tmp_path)
    assert [s.state for s in got.values()] == ["current"] * len(graph.STAGES)
    local = config.load_profile("local")
    assert states(tmp_path, local)[graph.JUDGES].state == "not_in_profile"


def test_a_hand_run_marks_its_stage_and_its_dependents_not_current(tmp_path: Path) -> None:
    built(tmp_path)
    state.write_build(tmp_path / graph.JUDGES, graph.JUDGES, by=state.HAND,
                      parameters={"profile": "default", "subset": "hard"})
    got = states(tmp_path)
    assert got[graph.JUDGES].state == "not_current"
    assert "written outside the runner" in got[graph.JUDGES].reason
    assert 'subset="hard"' in got[graph.JUDGES].reason
    assert got[graph.FIGURES].reason == "its upstream 09_judges is not current"
    assert got[graph.SCORES].current and got[graph.REFUSALS].current


def test_a_failed_stage_and_what_reads_it(tmp_path: Path) -> None:
    built(tmp_path)
    (tmp_path / graph.CORPUS / "build.json").unlink()
    (tmp_path / graph.CORPUS / "failed.json").write_text(json.dumps({
        "stage": graph.CORPUS, "status": "failed",
        "error": {"ename": "CorpusError", "evalue": "incomplete corpus"}}))
    got = states(tmp_path)
    assert got[graph.CORPUS].state == "failed"
    assert "CorpusError: incomplete corpus" in got[graph.CORPUS].reason
    behind = [s for s, st in got.items() if st.reason == "its upstream 01_corpus failed"]
    assert behind == [graph.REVIEW_ROUND1, graph.RECALL, graph.GENERATION]  # they read 01
    # further down, the reason names the first upstream that is not current
    assert got[graph.SUBSET].reason == "its upstream 03_review_round1 is not current"
    assert got[graph.FIGURES].reason == "its upstream 05_subset is not current"
    # stages that read nothing of 01 keep their state
    assert got[graph.SCREENING].current and got[graph.SCORES].current


def test_changed_inputs_missing_outputs_and_unreadable_records(tmp_path: Path) -> None:
    built(tmp_path)
    tweaked = config.load_profile("default", {"scores.subsets": ["v1"]})
    got = states(tmp_path, tweaked)
    assert got[graph.SCORES].reason == 'scores.subsets changed (["v1", "hard"] → ["v1"])'
    assert got[graph.FIGURES].state == "not_current"
    (tmp_path / graph.REFUSALS / "build.json").write_text("{not json")
    import shutil

    shutil.rmtree(tmp_path / graph.HARNESS)
    got = states(tmp_path)
    assert "no build record" in got[graph.REFUSALS].reason
    assert got[graph.HARNESS].state == "not_run"


def test_self_state_is_what_the_runner_plans_by(tmp_path: Path) -> None:
    expected = built(tmp_path)
    assert state.self_state(tmp_path, graph.JUDGES, expected[graph.JUDGES]) == (True, "")
    tweaked = state.expected_inputs(config.load_profile("default", {"judges.subset": "v2"}),
                                    mirror=True)
    ok, why = state.self_state(tmp_path, graph.JUDGES, tweaked[graph.JUDGES])
    assert not ok and why == 'judges.subset changed ("v1" → "v2")'


def test_code_hash_leaves_out_what_never_changes_a_stages_outputs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner, the book and publish read or render a run; editing them re-runs nothing."""
    for rel in ("evaluation/scoring.py", "runner/run.py", "reporting/book.py",
                "reporting/publish.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    monkeypatch.setattr(state, "_PACKAGE", tmp_path)
    before = state.code_hash.__wrapped__()
    for rel in ("runner/run.py", "reporting/book.py", "reporting/publish.py"):
        (tmp_path / rel).write_text("x = 2\n")
    assert state.code_hash.__wrapped__() == before
    (tmp_path / "evaluation/scoring.py").write_text("x = 2\n")
    assert state.code_hash.__wrapped__() != before
