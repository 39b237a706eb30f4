"""Without the inspect extra everything but the Inspect task works.

Each command runs in a child Python whose ``sitecustomize`` (on ``PYTHONPATH``, so notebook
kernels started by the run get it too) makes ``import inspect_ai`` fail as it does where the
extra is not installed. Whether the default lock leaves Inspect out is checked in
tests/test_environment.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import without_inspect
from without_inspect import run

from hbpsych_utils.core import sources

IMPORT_ALL = '''
import importlib, pkgutil, sys
import hbpsych_utils
names = [m.name for m in pkgutil.walk_packages(hbpsych_utils.__path__, "hbpsych_utils.")]
for name in names:
    if name != "hbpsych_utils.inspect_task":
        importlib.import_module(name)
assert not any(m.split(".")[0] == "inspect_ai" for m in sys.modules), "Inspect was imported"
try:
    importlib.import_module("hbpsych_utils.inspect_task")
except ModuleNotFoundError as exc:
    print("inspect_task:", exc)
print(len(names), "modules")
'''


@pytest.mark.slow
def test_the_blocker_blocks(tmp_path: Path) -> None:
    proc = run(tmp_path, "-c", "import inspect_ai")
    assert proc.returncode != 0 and "No module named 'inspect_ai'" in proc.stderr


@pytest.mark.slow
def test_every_module_but_the_task_imports_and_the_task_says_what_to_install(
    tmp_path: Path,
) -> None:
    proc = run(tmp_path, "-c", IMPORT_ALL)
    assert proc.returncode == 0, proc.stderr
    assert "pip install -e '.[inspect]'" in proc.stdout


@pytest.mark.slow
def test_commands_work_without_inspect(mirror: Path, tmp_path: Path) -> None:
    cli = ("-m", "hbpsych_utils")
    assert run(tmp_path, *cli, "--help").returncode == 0
    assert run(tmp_path, *cli, "profiles").returncode == 0

    ids = run(tmp_path, *cli, "ids", "--subset", "hard")
    assert ids.returncode == 0 and len(ids.stdout.splitlines()) == 119

    out = tmp_path / "hard.jsonl"
    export = run(tmp_path, *cli, "export", "--subset", "hard", "--output", str(out))
    assert export.returncode == 0 and "15/119" in export.stdout

    results = tmp_path / "scores.jsonl"
    hard = json.loads(sources.fetch("subset_hard_v1").read_text())["prompt_ids"][:5]
    results.write_text("".join(json.dumps({"judge": "j", "candidate": "c", "prompt_id": p,
                                           "score": 0.5}) + "\n" for p in hard))
    report = run(tmp_path, *cli, "filter-results", str(results), "--subset", "hard", "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["reports"][0]["n"] == 5


@pytest.mark.slow
@pytest.mark.notebook
def test_the_smoke_profile_runs_without_inspect(smoke_run: Path) -> None:
    """conftest's shared smoke run is made by ``python -m hbpsych_utils run smoke`` in a child
    that cannot import Inspect (one smoke run for both: this test's own was the same run)."""
    built = json.loads((smoke_run.parent / without_inspect.BUILT).read_text(encoding="utf-8"))
    assert built["blocker"] == without_inspect.BLOCKER
    assert built["args"][:3] == ["-m", "hbpsych_utils", "run"] and "smoke" in built["args"]
    assert built["returncode"] == 0, built["output"]
    manifest = json.loads((smoke_run / "manifest.json").read_text())
    assert manifest["notebooks"] and all(
        n["status"] == "ok" for n in manifest["notebooks"]), manifest["notebooks"]
