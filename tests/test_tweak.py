"""Tweaking a parameter, as docs/running.md's "Tweak a parameter" section says: ``--set`` through
run_all.sh (a key no stage reads under the profile's modes is refused), and a notebook run on its
own from ``notebooks/`` (JupyterLab, papermill ``-p``), which the run then marks not current."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hbpsych_utils.core import config, paths
from hbpsych_utils.pipeline import profiles, state
from hbpsych_utils.runner import checks

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize(("args", "error"), [
    (["default", "--set", "nosuch.key=1"], "nosuch: unknown key (expected one of:"),
    (["--set", "nosuch.key=1"], "nosuch: unknown key (expected one of:"),
    (["default", "--set", "scores.top_k=3"],
     "no stage reads this key, so the tweak would change nothing:\n"
     "  - scores.top_k: 08_scores reads it only in live mode"),
], ids=["profile-first", "set-first", "unread-in-paper-mode"])
def test_run_all_rejects_a_bad_or_unread_key_before_running(tmp_path: Path, args: list[str],
                                                            error: str) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "run_all.sh"), *args, "--outputs", str(tmp_path / "out")],
        env={**os.environ, "HBPSYCH_PYTHON": sys.executable},
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert error in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("overrides", "why"), [
    ({"scores.top_k": 3},
     "08_scores reads it only in live mode (paper mode reads the released matrices, which "
     "carry one clipped mean per candidate and judge (point estimates only); bootstrap "
     "intervals and paired differences need per-conversation grades, in live mode); this "
     "profile runs 08_scores in paper mode"),
    ({"llm.max_cost": 5},
     "no stage of this profile calls a model under its modes (02_screening replay, 04_recall "
     "replay, 06_generation paper, 07_grading paper, 11_harness_validation replay, "
     "15_judge_accuracy paper, 16_self_consistency paper); the engine's settings apply when "
     "a stage runs live"),
    ({"screening.batch_size": 10}, "02_screening reads it only in live mode"),
], ids=["paper-mode", "no-model-called", "replay-mode"])
def test_a_set_no_stage_reads_names_why(overrides: dict, why: str) -> None:
    key = next(iter(overrides))
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run("default", overrides)
    assert str(exc.value).startswith(
        f"profile 'default' ({config.profile_path('default')}; --set {key}=")
    assert f"  - {key}: {why}" in str(exc.value)
    assert profiles.load_profile("default", overrides)  # a valid value: only the runner refuses


def test_a_set_some_stage_reads_is_accepted() -> None:
    profile, unread = checks.load_for_run("default", {"judges.subset": "hard", "seed": 3})
    assert (profile.judges.subset, profile.seed) == ("hard", 3)
    assert unread == []
    smoke, _ = checks.load_for_run("smoke", {"n_resamples": 100, "llm.max_cost": 5})
    assert smoke.n_resamples == 100  # live: the bootstraps are drawn, the engine is called


@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_runs_standalone_from_notebooks_folder(default_run: Path,
                                                        tmp_path: Path) -> None:
    """After a run, a clean notebook runs by itself with its own defaults (profile "default",
    outputs "../outputs") plus papermill's ``-p`` — the documented command, in a copy of the
    project layout so the session's run is not touched. A relative outputs folder is taken from
    the project's notebooks/ folder, so the copy is the project (HBPSYCH_ROOT).

    The hand run's outputs are swapped into place with a build record saying so: the stage,
    and the stages that read it, are then not current until the runner runs them again."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "data").mkdir()
    shutil.copy(ROOT / "notebooks" / "09_judges.ipynb", tmp_path / "notebooks")
    shutil.copytree(ROOT / "params", tmp_path / "params")
    shutil.copy(paths.registry_file(), tmp_path / "data")
    shutil.copytree(default_run, tmp_path / "outputs" / "default")
    executed = tmp_path / "09.ipynb"
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", "notebooks/09_judges.ipynb", str(executed),
         "-p", "subset", "hard", "--cwd", "notebooks", "--no-progress-bar"],
        cwd=tmp_path, env={**os.environ, "HBPSYCH_ROOT": str(tmp_path),
                           "HBPSYCH_DATA_DIR": str(paths.external_dir()),
                           "HBPSYCH_FIGURES": str(tmp_path / "figures")},
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert executed.is_file()
    run = tmp_path / "outputs" / "default"
    metrics = json.loads((run / "09_judges" / "metrics.json").read_text())
    assert metrics["subset"] == "hard"  # the -p value reached the stage, in ../outputs
    assert json.loads((default_run / "09_judges" / "metrics.json").read_text())["subset"] == "v1"
    build = state.read_build(run, "09_judges")
    assert build is not None and build.by == state.HAND
    assert build.parameters["subset"] == "hard"
    assert not (run / ".hand" / "09_judges").exists()  # swapped into place
    states = {s.stage: s for s in state.stage_states(run, profiles.load_profile("default"))}
    assert states["09_judges"].state == "not_current"
    assert states["09_judges"].reason.startswith(
        "its outputs were written outside the runner (papermill or JupyterLab, with ")
    assert 'subset="hard"' in states["09_judges"].reason
    assert states["12_figures_tables"].reason == "its upstream 09_judges is not current"
    assert states["08_scores"].current  # what does not read 09 stays current
