"""run_all's engine: notebooks in order, parameters injected, first failure stops the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import notebook

from hbpsych_utils import runner


def test_runs_in_order_and_stops_at_first_failure(project: Path) -> None:
    (project / "params" / "p.yaml").write_text("description: test\nseed: 42\n")
    write = "open(f'{outputs_root}/{profile}/seen.txt', 'a').write(f'{NAME} {seed}\\n')"
    notebook(project / "notebooks" / "01_first.ipynb", f"NAME = 'first'\n{write}")
    notebook(project / "notebooks" / "02_broken.ipynb", "x = 1", "raise ValueError('boom here')")
    notebook(project / "notebooks" / "03_never.ipynb", f"NAME = 'never'\n{write}")
    lines: list[str] = []
    result = runner.run_profile("p", outputs_root=project / "out", echo=lines.append)
    assert not result.ok and result.failed == "02_broken"
    assert (project / "out" / "p" / "seen.txt").read_text() == "first 42\n"  # 03 never ran
    failure = next(line for line in lines if line.startswith("FAILED"))
    assert "02_broken" in failure and "cell 3 (raise ValueError" in failure
    assert "boom here" in failure
    manifest = json.loads((project / "out" / "p" / "manifest.json").read_text())
    assert [n["status"] for n in manifest["notebooks"]] == ["ok", "failed"]
    assert manifest["notebooks"][1]["error"] == {
        "cell": 3, "ename": "ValueError", "evalue": "boom here"}
    assert (project / "out" / "p" / "notebooks" / "02_broken.ipynb").is_file()


def test_cli_exit_codes(project: Path, capsys) -> None:
    (project / "params" / "good.yaml").write_text("description: ok\n")
    notebook(project / "notebooks" / "01_ok.ipynb", "y = 2")
    assert runner.main(["good", "--outputs", str(project / "out")]) == 0
    assert runner.main(["missing", "--outputs", str(project / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = "notebooks: [01_ok]\ncorpus: {max_conversations: -1}\n"
    (project / "params" / "bad.yaml").write_text(bad)
    assert runner.main(["bad"]) == 2


def test_overrides_reach_the_notebooks_and_the_manifest(project: Path) -> None:
    (project / "params" / "p.yaml").write_text("description: test\nseed: 42\n")
    notebook(project / "notebooks" / "01_corpus.ipynb",
             "open(f'{outputs_root}/{profile}/seen.txt', 'w').write(f'{seed} {max_conversations}')",
             params='profile = "x"\noutputs_root = "."\nseed = 0\nmax_conversations = None')
    overrides = {"seed": 123, "corpus.max_conversations": 3}
    result = runner.run_profile("p", outputs_root=project / "out", overrides=overrides,
                                echo=lambda _: None)
    assert result.ok
    assert (project / "out" / "p" / "seen.txt").read_text() == "123 3"
    manifest = json.loads((project / "out" / "p" / "manifest.json").read_text())
    assert manifest["overrides"] == {"seed": 123, "corpus.max_conversations": 3}
    assert manifest["profile_values"]["seed"] == 123
    assert manifest["profile_values"]["corpus"]["max_conversations"] == 3
    assert manifest["profile_values"]["description"] == "test"
    # Without overrides the manifest says so and records the file's values.
    runner.run_profile("p", outputs_root=project / "out", echo=lambda _: None)
    manifest = json.loads((project / "out" / "p" / "manifest.json").read_text())
    assert manifest["overrides"] == {} and manifest["profile_values"]["seed"] == 42
    assert (project / "out" / "p" / "seen.txt").read_text() == "42 None"


def test_cli_set_errors_before_any_notebook_runs(project: Path, capsys) -> None:
    (project / "params" / "default.yaml").write_text("description: ok\n")
    notebook(project / "notebooks" / "01_ok.ipynb", "raise SystemExit('must not run')")
    out = project / "out"
    for argv in (["default", "--set", "nosuch.key=1"], ["--set", "nosuch.key=1"],
                 ["--set", "seed=1", "--set", "nosuch.key=1", "default"]):
        assert runner.main([*argv, "--outputs", str(out)]) == 2
        err = capsys.readouterr().err
        assert "nosuch: unknown key (expected one of:" in err and "seed" in err, err
        assert "Traceback" not in err
    assert runner.main(["--only", "01_nope", "--outputs", str(out)]) == 2
    assert "--only 01_nope: not a notebook of profile 'default'" in capsys.readouterr().err
    assert not out.exists()  # nothing ran, nothing was written


@pytest.mark.notebook
def test_run_output_is_progress_lines_only(project: Path) -> None:
    """No kernel transport warning (or anything else) between the progress lines."""
    import os
    import re
    import subprocess
    import sys

    (project / "params" / "p.yaml").write_text("description: quiet\n")
    notebook(project / "notebooks" / "01_a.ipynb", "print('inside the notebook')")
    notebook(project / "notebooks" / "02_b.ipynb", "y = 2")
    proc = subprocess.run(
        [sys.executable, "-m", "hbpsych_utils", "run", "p", "--set", "seed=5",
         "--outputs", str(project / "out")],
        env={**os.environ, "HBPSYCH_ROOT": str(project)},
        capture_output=True, text=True, timeout=300, check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Kernel is running over TCP" not in output
    progress = re.compile(r"profile 'p'( with --set seed=5)?: |\[[12]/2\] (01_a|02_b) |book: ")
    assert [line for line in output.splitlines() if not progress.match(line)] == []
    assert "[2/2] 02_b done in" in proc.stdout
