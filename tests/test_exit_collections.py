"""Processes that end with their work skip the interpreter's last garbage collections: a chapter's
kernel started by the runner, and the command line. Seen from a finaliser that only such a
collection would run (an object in a reference cycle, alive until the process exits): it runs
at the exit of a kernel or process started without the setting, and not with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import notebook, write_profile

from hbpsych_utils import runner

CYCLE = """\
import pathlib
class _Cycle:
    def __init__(self, path):
        self.write, self.me = pathlib.Path(path).write_text, self  # freed by a collection only
    def __del__(self):
        self.write("finalised")
keep = _Cycle({path!r})"""
"""An object that lives until its process exits, then is freed only by a garbage collection,
whose finaliser writes ``path``."""


@pytest.mark.slow
@pytest.mark.notebook
def test_a_chapters_kernel_exits_without_the_last_collections(project: Path) -> None:
    import papermill

    marker = project / "finalised.txt"
    write_profile(project, "01_corpus")
    path = project / "notebooks" / "01_corpus.ipynb"
    notebook(path, CYCLE.format(path=str(marker)))

    # the same notebook in a kernel papermill starts as it would by itself: collected at exit
    papermill.execute_notebook(str(path), str(project / "plain.ipynb"), kernel_name="python3",
                               progress_bar=False, parameters={"outputs_root": str(project)})
    assert marker.read_text() == "finalised"
    marker.unlink()

    result = runner.run_profile("p", outputs_root=project / "outputs", echo=lambda _: None)
    assert result.ok, result.notebooks
    assert not marker.exists()  # the runner's kernel ran the cell, then exited uncollected


@pytest.mark.slow
@pytest.mark.parametrize("ends_with_command", [True, False])
def test_the_command_line_exits_without_the_last_collections(
        tmp_path: Path, ends_with_command: bool) -> None:
    """``main()`` with the process's own arguments ends the process: no collection at its
    exit; called with arguments, as a caller that goes on would, it leaves the exit as it is."""
    marker = tmp_path / "finalised.txt"
    call = "main()" if ends_with_command else "main(['profiles'])"
    script = (CYCLE.format(path=str(marker))
              + f"\nfrom hbpsych_utils.__main__ import main\nraise SystemExit({call})")
    done = subprocess.run([sys.executable, "-c", script, "profiles"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "default" in done.stdout  # the command did its work
    assert marker.exists() is not ends_with_command
