"""Tweaking a parameter, as the README's "Tweak a parameter" section says: ``--set`` through
run_all.sh, and a notebook run on its own from ``notebooks/`` (JupyterLab, papermill ``-p``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args", [["default", "--set", "nosuch.key=1"],
                                  ["--set", "nosuch.key=1"]], ids=["profile-first", "set-first"])
def test_run_all_rejects_an_unknown_key_before_running(tmp_path: Path, args: list[str]) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "run_all.sh"), *args, "--outputs", str(tmp_path / "out")],
        env={**os.environ, "HBPSYCH_PYTHON": sys.executable},
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nosuch: unknown key (expected one of:" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "out").exists()


@pytest.mark.notebook
def test_notebook_runs_standalone_from_notebooks_folder(default_run: Path,
                                                        tmp_path: Path) -> None:
    """After a run, a clean notebook runs by itself with its own defaults (profile "default",
    outputs "../outputs") plus papermill's ``-p`` — the README's command, in a copy of the
    project layout so the session's run is not touched."""
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "09_judges.ipynb", tmp_path / "notebooks")
    shutil.copytree(default_run, tmp_path / "outputs" / "default")
    executed = tmp_path / "09.ipynb"
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", "notebooks/09_judges.ipynb", str(executed),
         "-p", "subset", "hard", "--cwd", "notebooks", "--no-progress-bar"],
        cwd=tmp_path, env={**os.environ, "HBPSYCH_FIGURES": str(tmp_path / "figures")},
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert executed.is_file()
    metrics = json.loads((tmp_path / "outputs" / "default" / "09_judges" / "metrics.json")
                         .read_text())
    assert metrics["subset"] == "hard"  # the -p value reached the stage, in ../outputs
    assert json.loads((default_run / "09_judges" / "metrics.json").read_text())["subset"] == "v1"
