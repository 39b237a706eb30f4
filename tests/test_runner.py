"""run_all's engine: the profile's stages in the graph's order, the parameters each declares
injected, a failure stops what depends on it and nothing else, a second run does only what
changed, ``--only``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import notebook, write_profile

from hbpsych_utils import runner, study
from hbpsych_utils.core import config
from hbpsych_utils.pipeline import profiles, state
from hbpsych_utils.runner import plan as run_plan

SEEN = "open(f'{outputs_root}/{profile}/seen.txt', 'a').write(f'{NAME} {VALUE}\\n')"
"""A cell that appends the notebook's ``NAME`` and ``VALUE`` to ``seen.txt`` of the run."""


def states(out: Path) -> dict[str, str]:
    manifest = json.loads((out / "manifest.json").read_text())
    return {s["stage"]: s["state"] for s in manifest["stages"]}


@pytest.mark.slow
def test_runs_in_order_and_a_failure_stops_only_what_depends_on_it(project: Path) -> None:
    # Listed out of order: the graph's order is the run order (one at a time with jobs=1).
    # 03 reads 02, which fails, so 03 does not run; 08 (paper mode) reads nothing of 01, 02
    # or 03, so it runs after the failure.
    write_profile(project, "08_scores", "03_review_round1", "02_screening", "01_corpus",
                  text="corpus: {max_conversations: 42}\n")
    notebook(project / "notebooks" / "01_corpus.ipynb",
             f"NAME, VALUE = 'first', max_conversations\n{SEEN}", max_conversations=None)
    notebook(project / "notebooks" / "02_screening.ipynb", "x = 1",
             "raise ValueError('boom here')")
    notebook(project / "notebooks" / "03_review_round1.ipynb", f"NAME, VALUE = 'never', 0\n{SEEN}")
    notebook(project / "notebooks" / "08_scores.ipynb", f"NAME, VALUE = 'last', seed\n{SEEN}",
             seed=0)
    lines: list[str] = []
    result = runner.run_profile("p", outputs_root=project / "outputs", echo=lines.append,
                                jobs=1)
    assert not result.ok and result.failed == "02_screening"
    assert (result.failures, result.not_run) == (["02_screening"], ["03_review_round1"])
    out = project / "outputs" / "p"
    assert (out / "seen.txt").read_text() == f"first 42\nlast {study.SEED}\n"  # 03 never ran
    assert [line for line in lines if line.startswith("[")] == [
        "[1/4] 01_corpus ...", f"[1/4] 01_corpus done in {result.notebooks[0]['seconds']:.1f}s",
        "[2/4] 02_screening ...",
        "[3/4] 08_scores ...", f"[3/4] 08_scores done in {result.notebooks[3]['seconds']:.1f}s"]
    failure = next(line for line in lines if line.startswith("FAILED"))
    assert "02_screening" in failure and "cell 3 (raise ValueError" in failure
    assert "boom here" in failure
    assert "not current until it succeeds: 03_review_round1" in failure
    assert lines[-1] == (f"profile 'p': 2 notebooks ran, 1 failed (02_screening), 1 not run "
                         f"as an upstream failed (03_review_round1), 0 up to date; outputs in "
                         f"{out}")
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(n["notebook"], n["status"]) for n in manifest["notebooks"]] == [
        ("01_corpus", "ok"), ("02_screening", "failed"), ("03_review_round1", "not_run"),
        ("08_scores", "ok")]
    assert manifest["notebooks"][1]["error"] == {
        "cell": 3, "ename": "ValueError", "evalue": "boom here"}
    assert manifest["notebooks"][2] == {
        "notebook": "03_review_round1", "status": "not_run", "seconds": 0.0, "started": False,
        "reason": "its upstream 02_screening failed"}
    assert (out / "notebooks" / "02_screening.ipynb").is_file()
    assert not (out / "notebooks" / "03_review_round1.ipynb").exists()
    assert states(out) == {**{s: "not_in_profile" for s in states(out)}, "01_corpus": "current",
                           "02_screening": "failed", "03_review_round1": "not_run",
                           "08_scores": "current"}


@pytest.mark.slow
def test_cli_exit_codes(project: Path, capsys) -> None:
    write_profile(project, "01_corpus", name="good")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 2")
    notebook(project / "notebooks" / "02_screening.ipynb", "raise ValueError('no')")
    assert runner.main(["good", "--outputs", str(project / "outputs")]) == 0
    assert runner.main(["missing", "--outputs", str(project / "outputs")]) == runner.EXIT_USAGE
    assert "does not exist" in capsys.readouterr().err
    write_profile(project, "01_corpus", text="corpus: {max_conversations: -1}\n", name="bad")
    assert runner.main(["bad"]) == runner.EXIT_USAGE
    write_profile(project, "02_screening", name="broken")
    assert runner.main(["broken", "--outputs", str(project / "outputs")]) == runner.EXIT_FAILED


@pytest.mark.slow
def test_overrides_reach_the_notebooks_and_the_manifest(project: Path) -> None:
    # 01 reads corpus.*, 11 (replay under the default paper mode) reads the top-level seed
    write_profile(project, "01_corpus", "11_harness_validation", text="seed: 42\n")
    notebook(project / "notebooks" / "01_corpus.ipynb",
             "open(f'{outputs_root}/{profile}/seen_01.txt', 'w').write(f'{max_conversations}')",
             max_conversations=None)
    notebook(project / "notebooks" / "11_harness_validation.ipynb",
             "open(f'{outputs_root}/{profile}/seen_11.txt', 'w').write(f'{mode} {seed}')",
             mode=None, seed=0)
    out = project / "outputs" / "p"

    def seen() -> tuple[str, str]:
        return (out / "seen_01.txt").read_text(), (out / "seen_11.txt").read_text()

    overrides = {"seed": 123, "corpus.max_conversations": 3}
    result = runner.run_profile("p", outputs_root=project / "outputs", overrides=overrides,
                                echo=lambda _: None)
    assert result.ok
    assert seen() == ("3", "replay 123")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["overrides"] == {"seed": 123, "corpus.max_conversations": 3}
    assert manifest["profile_values"]["seed"] == 123
    assert manifest["profile_values"]["corpus"]["max_conversations"] == 3
    assert manifest["profile_values"]["description"] == "test"
    # Without overrides the manifest says so and records the file's values; both stages read
    # a value that changed, so both run again with the file's values.
    result = runner.run_profile("p", outputs_root=project / "outputs", echo=lambda _: None)
    assert [n["notebook"] for n in result.notebooks] == ["01_corpus", "11_harness_validation"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["overrides"] == {} and manifest["profile_values"]["seed"] == 42
    assert seen() == ("None", "replay 42")


@pytest.mark.slow
def test_a_second_run_does_only_what_changed(project: Path) -> None:
    """Nothing changed: nothing runs and every stage is said up to date. A changed value
    re-runs the stage that reads it and the stages downstream of it, and only those."""
    write_profile(project, "01_corpus", "02_screening", "03_review_round1")
    for name, param in (("01_corpus", "max_conversations"), ("02_screening", "vocabulary"),
                        ("03_review_round1", "n_controls")):
        notebook(project / "notebooks" / f"{name}.ipynb",
                 f"NAME, VALUE = {name!r}, {param}\n{SEEN}", **{param: None})
    root, out = project / "outputs", project / "outputs" / "p"
    assert runner.run_profile("p", outputs_root=root, echo=lambda _: None, jobs=1).ok
    first = (out / "seen.txt").read_text()
    assert first.splitlines() == ["01_corpus None", "02_screening None", "03_review_round1 150"]

    lines: list[str] = []
    result = runner.run_profile("p", outputs_root=root, echo=lines.append)
    assert result.ok and result.notebooks == []
    assert result.up_to_date == ["01_corpus", "02_screening", "03_review_round1"]
    assert [line for line in lines if line.startswith("  ")] == [
        "  01_corpus: up to date", "  02_screening: up to date", "  03_review_round1: up to date"]
    assert lines[0].startswith("profile 'p': 0 of 3 notebooks to run")
    assert lines[-1].startswith("profile 'p': 0 notebooks ran, 3 up to date; outputs in")
    assert (out / "seen.txt").read_text() == first  # no notebook ran
    assert set(states(out).values()) == {"current", "not_in_profile"}

    # 01 reads corpus.max_conversations; 03 reads 01, so it runs again; 02 (replay) does not.
    lines.clear()
    result = runner.run_profile("p", outputs_root=root, echo=lines.append,
                                overrides={"corpus.max_conversations": 5}, jobs=1)
    assert [n["notebook"] for n in result.notebooks] == ["01_corpus", "03_review_round1"]
    assert result.up_to_date == ["02_screening"]
    assert "  01_corpus: runs (corpus.max_conversations changed (null → 5))" in lines
    assert "  03_review_round1: runs (its upstream 01_corpus changed)" in lines
    assert (out / "seen.txt").read_text().splitlines()[3:] == ["01_corpus 5",
                                                               "03_review_round1 150"]
    # --force runs every stage of the profile, current or not
    result = runner.run_profile("p", outputs_root=root, echo=lambda _: None, force=True,
                                overrides={"corpus.max_conversations": 5}, jobs=1)
    assert [n["notebook"] for n in result.notebooks] == [
        "01_corpus", "02_screening", "03_review_round1"]


def built(project: Path, out: Path, *stages: str, text: str = "") -> profiles.Profile:
    """A run folder in which ``stages`` have build records matching the profile (as if the
    runner had run them): the plan can then be checked without starting a kernel."""
    write_profile(project, "01_corpus", "02_screening", "03_review_round1", "04_recall",
                  text=text)
    for name in ("01_corpus", "02_screening", "03_review_round1", "04_recall"):
        notebook(project / "notebooks" / f"{name}.ipynb", "y = 1")
    profile = profiles.load_profile("p")
    expected = state.expected_inputs(profile)
    for name in stages:
        (out / name).mkdir(parents=True)
        state.write_build(out / name, name, by=state.RUNNER, inputs=expected[name])
    return profile


def planned(profile: profiles.Profile, out: Path, **kw) -> dict[str, tuple[bool, str]]:
    steps = run_plan.plan(profile, out, state.expected_inputs(profile), **kw)
    return {s.stage: (s.run, s.reason) for s in steps}


def test_only_runs_the_named_stages_and_the_dependents_then_not_current(project: Path) -> None:
    out = project / "outputs" / "p"
    profile = built(project, out, "01_corpus", "02_screening", "03_review_round1", "04_recall")
    assert planned(profile, out) == {s: (False, "up to date") for s in (
        "01_corpus", "02_screening", "03_review_round1", "04_recall")}
    # A current stage named by --only runs; its dependents run only if not current themselves
    # (a stage's fingerprint is that of its inputs, which running it again does not change).
    got = planned(profile, out, only=["02_screening"])
    assert got["02_screening"] == (True, "named by --only")
    assert got["01_corpus"] == (False, "up to date")
    assert not got["03_review_round1"][0] and not got["04_recall"][0]
    # 03's outputs are gone: --only 01 runs 01, and 03 (a dependent, not current) with it
    (out / "03_review_round1" / state.BUILD_RECORD).unlink()
    got = planned(profile, out, only=["01_corpus"])
    assert got["01_corpus"] == (True, "named by --only")
    assert got["02_screening"] == (False, "up to date")  # not downstream of 01 in replay
    assert got["03_review_round1"][0]
    assert got["03_review_round1"][1].startswith("it has no build record")
    assert got["04_recall"] == (False, "up to date")


def test_force_with_only_runs_the_selection_whatever_its_state_and_nothing_else(
        project: Path) -> None:
    out = project / "outputs" / "p"
    profile = built(project, out, "01_corpus", "02_screening", "03_review_round1", "04_recall")
    assert {s: r for s, (r, _) in planned(profile, out, force=True).items()} == {
        "01_corpus": True, "02_screening": True, "03_review_round1": True, "04_recall": True}
    # --only 02 --force: 02 and its dependents 03 and 04 (current, run anyway); 01 is not
    # downstream of 02, so it is left alone (it used to run: --force overrode --only)
    got = planned(profile, out, only=["02_screening"], force=True)
    assert got == {"01_corpus": (False, "up to date"),
                   "02_screening": (True, "named by --only"),
                   "03_review_round1": (True, "--force"), "04_recall": (True, "--force")}


def test_only_refuses_a_stage_whose_upstream_is_not_current(project: Path) -> None:
    out = project / "outputs" / "p"
    profile = built(project, out, "01_corpus", "02_screening")
    with pytest.raises(config.ProfileError) as exc:
        planned(profile, out, only=["04_recall"])
    assert str(exc.value) == (
        "--only 04_recall: its upstream 03_review_round1 is not current, so 04_recall would "
        "read stale inputs; add 03_review_round1 to --only, or run without --only")
    got = planned(profile, out, only=["03_review_round1", "04_recall"])
    assert got["03_review_round1"][0] and got["04_recall"][0]
    # a dependent whose other upstream is not current and not selected is left as it is
    profile = built(project, project / "out2" / "p", "01_corpus", "04_recall")
    got = planned(profile, project / "out2" / "p", only=["01_corpus"])
    assert got["01_corpus"][0] and not got["03_review_round1"][0]
    assert "its upstream 02_screening is not current and not selected by --only" in (
        got["03_review_round1"][1])


def test_an_upstream_the_profile_does_not_run_leaves_its_dependents_alone(
        project: Path) -> None:
    """03 reads 02, which this profile leaves out: 03 is current when its own inputs are, and
    --only 03 runs it (the profile cannot bring 02 up to date, so 02 neither blocks nor
    refuses it)."""
    write_profile(project, "01_corpus", "03_review_round1")
    for name in ("01_corpus", "03_review_round1"):
        notebook(project / "notebooks" / f"{name}.ipynb", "y = 1")
    profile = profiles.load_profile("p")
    out = project / "outputs" / "p"
    expected = state.expected_inputs(profile)
    assert expected["03_review_round1"].upstream == {
        "01_corpus": expected["01_corpus"].fingerprint(), "02_screening": None}
    for name in expected:
        (out / name).mkdir(parents=True)
        state.write_build(out / name, name, by=state.RUNNER, inputs=expected[name])
    got = {s.stage: s.state for s in state.stage_states(out, profile)}
    assert (got["01_corpus"], got["02_screening"], got["03_review_round1"]) == (
        "current", "not_in_profile", "current")
    assert planned(profile, out, only=["03_review_round1"]) == {
        "01_corpus": (False, "up to date"), "03_review_round1": (True, "named by --only")}
    (out / "03_review_round1" / state.BUILD_RECORD).unlink()
    assert planned(profile, out, only=["01_corpus"])["03_review_round1"][0]


def test_cli_set_errors_before_any_notebook_runs(project: Path, capsys) -> None:
    write_profile(project, "01_corpus", name="default")
    notebook(project / "notebooks" / "01_corpus.ipynb", "raise SystemExit('must not run')")
    out = project / "outputs"
    for argv in (["default", "--set", "nosuch.key=1"], ["--set", "nosuch.key=1"],
                 ["--set", "seed=1", "--set", "nosuch.key=1", "default"]):
        assert runner.main([*argv, "--outputs", str(out)]) == runner.EXIT_USAGE
        err = capsys.readouterr().err
        assert "nosuch: unknown key (expected one of:" in err and "seed" in err, err
        assert "Traceback" not in err
    # a valid key that no stage of the profile reads changes nothing: refused too
    assert runner.main(["default", "--set", "seed=1", "--outputs", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no stage reads this key, so the tweak would change nothing:\n  - seed: " in err
    assert "Traceback" not in err
    assert runner.main(["--only", "01_nope", "--outputs", str(out)]) == runner.EXIT_USAGE
    assert "--only 01_nope: not a notebook of profile 'default'" in capsys.readouterr().err
    assert not out.exists()  # nothing ran, nothing was written


@pytest.mark.slow
@pytest.mark.notebook
def test_run_output_is_progress_lines_only(project: Path) -> None:
    """No kernel transport warning (or anything else) between the progress lines."""
    import os
    import re
    import subprocess
    import sys

    write_profile(project, "01_corpus", "02_screening")
    notebook(project / "notebooks" / "01_corpus.ipynb", "print('inside the notebook')")
    notebook(project / "notebooks" / "02_screening.ipynb", "y = 2")
    proc = subprocess.run(
        [sys.executable, "-m", "hbpsych_utils", "run", "p", "--set",
         "corpus.max_conversations=5", "--outputs", str(project / "outputs")],
        env={**os.environ, "HBPSYCH_ROOT": str(project)},
        capture_output=True, text=True, timeout=300, check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Kernel is running over TCP" not in output
    progress = re.compile(r"profile 'p'( with --set corpus.max_conversations=5)?: "
                          r"|  (01_corpus|02_screening): runs \(it has not run yet\)$"
                          r"|\[[12]/2\] (01_corpus|02_screening) |book: ")
    assert [line for line in output.splitlines() if not progress.match(line)] == []
    assert "[2/2] 02_screening done in" in proc.stdout
