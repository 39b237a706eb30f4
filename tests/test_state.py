"""Fingerprints, build records and stage states on crafted run folders (no kernel)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from hbpsych_utils.pipeline import graph, profiles, state

DEFAULT = profiles.load_profile("default")


def built(run: Path, profile: profiles.Profile = DEFAULT) -> dict[str, state.Inputs]:
    """A run folder in which the runner built every stage of ``profile`` from its inputs."""
    expected = state.expected_inputs(profile, mirror=True)
    for name, inputs in expected.items():
        (run / name).mkdir(parents=True, exist_ok=True)
        state.write_build(run / name, name, by=state.RUNNER, inputs=inputs)
    return expected


def states(run: Path, profile: profiles.Profile = DEFAULT) -> dict[str, state.StageState]:
    return {s.stage: s for s in state.stage_states(run, profile, mirror=True)}


def test_a_tweak_changes_the_fingerprints_of_its_stage_and_what_depends_on_it() -> None:
    before = state.expected_inputs(DEFAULT, mirror=True)
    tweaked = profiles.load_profile("default", {"judges.subset": "hard"})
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
    profile = profiles.load_profile("default", {"corpus.corpus_file": str(corpus)})
    first = state.expected_inputs(profile, mirror=True)[graph.CORPUS]
    corpus.write_text("two\n")
    second = state.expected_inputs(profile, mirror=True)[graph.CORPUS]
    assert state.changes(first, second) == ["file corpus.corpus_file changed"]


def test_every_stage_built_from_its_inputs_is_current(tmp_path: Path) -> None:
    built(tmp_path)
    got = states(tmp_path)
    assert [s.state for s in got.values()] == ["current"] * len(graph.STAGES)
    local = profiles.load_profile("local")
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
    assert behind == [graph.REVIEW_ROUND1, graph.RECALL, graph.GENERATION,
                      graph.HARNESS]  # they read 01
    # further down, the reason names the first upstream that is not current
    assert got[graph.SUBSET].reason == "its upstream 03_review_round1 is not current"
    assert got[graph.FIGURES].reason == "its upstream 05_subset is not current"
    # stages that read nothing of 01 keep their state
    assert got[graph.SCREENING].current and got[graph.SCORES].current


def test_changed_inputs_missing_outputs_and_unreadable_records(tmp_path: Path) -> None:
    built(tmp_path)
    tweaked = profiles.load_profile("default", {"scores.subsets": ["v1"]})
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
    tweaked = state.expected_inputs(profiles.load_profile("default", {"judges.subset": "v2"}),
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


# --- a build record holds the hashes of what the stage wrote; a file that changed is not trusted


def wrote(run: Path, name: str, inputs: state.Inputs, files: dict[str, bytes],
          executed: bytes | None = b'{"cells": []}') -> Path:
    """A runner build of stage ``name`` that wrote ``files`` (path in its folder -> bytes) and,
    unless ``None``, the executed notebook ``executed``; returns the stage folder."""
    folder = run / name
    folder.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    nb = None
    if executed is not None:
        nb = state.executed_path(run, name)
        nb.parent.mkdir(parents=True, exist_ok=True)
        nb.write_bytes(executed)
    state.write_build(folder, name, by=state.RUNNER, inputs=inputs, executed=nb)
    return folder


SCORES = b"candidate,judge,prompt_id,score\n" + b"gpt-4.1,o3,p1,0.5\n" * 40
GRADING_FILES = {"scores.csv": SCORES, "metrics.json": b'{"mode": "paper"}',
                 "items/a.json": b"[1, 2]"}


def test_a_runner_build_records_the_sha256_of_every_file_it_wrote(tmp_path: Path) -> None:
    expected = built(tmp_path)
    wrote(tmp_path, graph.GRADING, expected[graph.GRADING], GRADING_FILES, b"{}")
    record = json.loads((tmp_path / graph.GRADING / "build.json").read_text())
    assert record["outputs"] == {
        **{f"07_grading/{rel}": hashlib.sha256(data).hexdigest()
           for rel, data in GRADING_FILES.items()},
        "notebooks/07_grading.ipynb": hashlib.sha256(b"{}").hexdigest()}
    assert states(tmp_path)[graph.GRADING].current
    # a hand run's record holds none: nothing vouches for its files (and it is not current)
    state.write_build(tmp_path / graph.JUDGES, graph.JUDGES, by=state.HAND)
    assert state.read_build(tmp_path, graph.JUDGES).outputs is None


def test_scores_cut_in_half_is_not_current_and_the_plan_runs_it_saying_why(
        tmp_path: Path) -> None:
    from hbpsych_utils.runner import plan as run_plan

    expected = built(tmp_path)
    folder = wrote(tmp_path, graph.GRADING, expected[graph.GRADING], GRADING_FILES)
    scores = folder / "scores.csv"
    scores.write_bytes(SCORES[:len(SCORES) // 2])
    got = states(tmp_path)
    assert got[graph.GRADING].state == "not_current"
    assert got[graph.GRADING].reason == "its output scores.csv changed since it was written"
    steps = {s.stage: s for s in run_plan.plan(DEFAULT, tmp_path, expected)}
    assert (steps[graph.GRADING].run, steps[graph.GRADING].reason) == (
        True, "its output scores.csv changed since it was written")
    assert [s for s, step in steps.items() if step.run] == [graph.GRADING]
    # a second file gone as well: the first is named, the others counted
    (folder / "items" / "a.json").unlink()
    assert states(tmp_path)[graph.GRADING].reason == (
        "its output items/a.json is missing (and 1 more file)")
    with pytest.raises(state.OutputsChanged) as caught:
        state.check_outputs(tmp_path, "bash run_all.sh default")
    message = str(caught.value)
    assert message.startswith(f"{folder / 'items' / 'a.json'}: missing; the runner wrote it "
                              "for 07_grading (its sha256 is in 07_grading/build.json) (and 1 "
                              "more file).")
    assert message.endswith(": bash run_all.sh default") and "\n" not in message
    # written back as it was: trusted again
    scores.write_bytes(SCORES)
    (folder / "items" / "a.json").write_bytes(b"[1, 2]")
    assert states(tmp_path)[graph.GRADING].current
    assert state.check_outputs(tmp_path, "x") is None


def test_a_deleted_or_nul_executed_notebook_is_not_current(tmp_path: Path) -> None:
    from hbpsych_utils.runner import plan as run_plan

    expected = built(tmp_path)
    wrote(tmp_path, graph.SCORES, expected[graph.SCORES], {"metrics.json": b"{}"},
          b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    executed = state.executed_path(tmp_path, graph.SCORES)
    assert executed == tmp_path / "notebooks" / "08_scores.ipynb"
    executed.write_bytes(b"\0" * executed.stat().st_size)
    reason = "its executed notebook notebooks/08_scores.ipynb changed since it was written"
    assert states(tmp_path)[graph.SCORES].reason == reason
    executed.unlink()
    reason = "its executed notebook notebooks/08_scores.ipynb is missing"
    got = states(tmp_path)
    assert (got[graph.SCORES].state, got[graph.SCORES].reason) == ("not_current", reason)
    assert got[graph.FIGURES].reason == "its upstream 08_scores is not current"
    steps = {s.stage: s for s in run_plan.plan(DEFAULT, tmp_path, expected)}
    assert (steps[graph.SCORES].run, steps[graph.SCORES].reason) == (True, reason)
    [problem] = state.damaged_outputs(tmp_path)
    assert (problem.stage, problem.file, problem.problem) == (
        graph.SCORES, "notebooks/08_scores.ipynb", "missing")
    # a stage its profile does not run is not checked when the caller names the stages
    assert state.damaged_outputs(tmp_path, [graph.GRADING]) == []


def test_a_record_without_hashes_is_not_verified_and_is_run_again(tmp_path: Path) -> None:
    """An older version's record: nothing vouches for its files, so the stage is not current
    and the runner runs it again (not refused: nothing is known to be wrong)."""
    from hbpsych_utils.runner import plan as run_plan

    expected = built(tmp_path)
    path = state.build_path(tmp_path, graph.JUDGES)
    record = json.loads(path.read_text())
    del record["outputs"]
    path.write_text(json.dumps(record))
    got = states(tmp_path)
    assert (got[graph.JUDGES].state, got[graph.JUDGES].reason) == (
        "not_current", state.UNVERIFIED)
    steps = {s.stage: s for s in run_plan.plan(DEFAULT, tmp_path, expected)}
    assert [s for s, step in steps.items() if step.run] == [graph.JUDGES]
    assert steps[graph.JUDGES].reason == state.UNVERIFIED
    assert state.damaged_outputs(tmp_path) == []


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", ""])
def test_a_record_naming_a_file_outside_the_run_folder_is_no_record(
        tmp_path: Path, name: str) -> None:
    built(tmp_path)
    path = state.build_path(tmp_path, graph.JUDGES)
    record = json.loads(path.read_text())
    record["outputs"] = {name: "0" * 64}
    path.write_text(json.dumps(record))
    assert state.read_build(tmp_path, graph.JUDGES) is None
    assert "no build record" in states(tmp_path)[graph.JUDGES].reason


def test_a_file_rewritten_in_the_tick_it_was_hashed_in_is_read_again(tmp_path: Path) -> None:
    """Same size, times put back: a hash remembered by the file's times alone would be stale."""
    f = tmp_path / "scores.csv"
    f.write_bytes(b"a" * 100)
    before = os.stat(f)
    assert state.file_sha256(f) == hashlib.sha256(b"a" * 100).hexdigest()
    f.write_bytes(b"b" * 100)
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert state.file_sha256(f) == hashlib.sha256(b"b" * 100).hexdigest()


def test_a_settled_file_is_hashed_once_per_process(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from hbpsych_utils.core import sources

    f = tmp_path / "scores.csv"
    f.write_bytes(b"a" * 100)
    reads: list[Path] = []
    real = sources.sha256_file

    def counted(path: Path) -> str:
        reads.append(Path(path))
        return real(path)

    monkeypatch.setattr(sources, "sha256_file", counted)
    later = time.time_ns() + 60_000_000_000  # a minute on: the file has settled
    monkeypatch.setattr(state.time, "time_ns", lambda: later)
    state.clear_hash_cache()
    first = state.file_sha256(f)
    assert state.file_sha256(f) == first and reads == [f]
    f.write_bytes(b"a" * 101)  # written since: read again
    assert state.file_sha256(f) == hashlib.sha256(b"a" * 101).hexdigest() and len(reads) == 2
