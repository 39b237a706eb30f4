"""docs/contributing.md's walkthrough, followed: its toy chapter built in a copy of the project
from the page's own blocks, then run through the runner. The chapter touches five hand-edited
files; its profile section, its place in the run, the book, the manifest and the docs' chapter
lists follow from the graph."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import ROOT

PAGE = ROOT / "docs" / "contributing.md"
BLOCK = re.compile(r"^```(\w+) (file|cell)=(\S+)(?: tags=(\S+))?\n(.*?)^```$", re.M | re.S)
COPIED = ("hbpsych_utils", "notebooks", "params", "docs", "README.md", "pyproject.toml")
STAGE = "17_penalties"

if TYPE_CHECKING:  # imported where used: it brings jsonschema (~1 s at collection)
    import nbformat


def walkthrough() -> tuple[dict[str, str], list[nbformat.NotebookNode]]:
    """The page's files (path -> text) and its notebook's cells, in order."""
    import nbformat

    files: dict[str, str] = {}
    cells: list[nbformat.NotebookNode] = []
    for lang, kind, path, tags, body in BLOCK.findall(PAGE.read_text(encoding="utf-8")):
        if kind == "file":
            files[path] = body
            continue
        assert path == f"notebooks/{STAGE}.ipynb", path
        cell = (nbformat.v4.new_markdown_cell(body.rstrip("\n")) if lang == "markdown"
                else nbformat.v4.new_code_cell(body.rstrip("\n")))
        if tags:
            cell.metadata["tags"] = tags.split(",")
        cells.append(cell)
    return files, cells


def test_the_walkthrough_touches_five_hand_edited_files() -> None:
    files, cells = walkthrough()
    touched = {*files, f"notebooks/{STAGE}.ipynb"} if cells else set(files)
    assert touched == {
        "hbpsych_utils/pipeline/nodes/s17_penalties.py",   # its graph node and section model
        "hbpsych_utils/pipeline/metrics/s17_penalties.py",  # its metrics model
        "hbpsych_utils/stages/s17_penalties.py",           # its stage module
        "notebooks/17_penalties.ipynb",                     # its notebook
        "docs/penalties.md",                                # its docs page
    }
    assert [c.metadata.get("tags") for c in cells].count(["parameters"]) == 1


def _build(project: Path) -> None:
    """A copy of the project's sources with the walkthrough's chapter added, as its page says."""
    import nbformat

    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, project / name)
    (project / "data").mkdir()
    for name in ("registry.yaml", "paper_numbers.yaml"):
        shutil.copy(ROOT / "data" / name, project / "data" / name)
    files, cells = walkthrough()
    for path, text in files.items():
        assert not (project / path).exists(), f"{path}: the walkthrough would overwrite it"
        (project / path).write_text(text, encoding="utf-8")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.cells = cells
    nbformat.write(notebook, str(project / "notebooks" / f"{STAGE}.ipynb"))


def _command(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hbpsych_utils", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=900)


def _expected(corpus_record: Path, min_conversations: int) -> dict[str, object]:
    """The chapter's numbers counted here from the corpus file 01_corpus recorded."""
    path = Path(json.loads(corpus_record.read_text(encoding="utf-8"))["path"])
    criteria = penalties = 0
    themes: dict[str, list[int]] = {}
    n = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        n += 1
        points = [item["points"] for item in record["rubrics"]]
        criteria += len(points)
        penalties += sum(p < 0 for p in points)
        for tag in record.get("example_tags", []):
            if tag.startswith("theme:"):
                counts = themes.setdefault(tag.split(":", 1)[1], [0, 0, 0])
                counts[0] += 1
                counts[1] += len(points)
                counts[2] += sum(p < 0 for p in points)
    return {"n_conversations": n, "n_criteria": criteria, "n_penalties": penalties,
            "by_theme": {t: c[2] / c[1] for t, c in themes.items() if c[0] >= min_conversations}}


@pytest.mark.slow
def test_the_walkthroughs_chapter_runs_through_the_runner(tmp_path: Path, mirror: Path) -> None:
    project, outputs = tmp_path / "project", tmp_path / "outputs"
    project.mkdir()
    _build(project)
    env = {**os.environ, "PYTHONPATH": str(project), "HBPSYCH_ROOT": str(project),
           "HBPSYCH_MIRROR": str(mirror), "HBPSYCH_DATA_DIR": str(tmp_path / "external"),
           "HBPSYCH_FIGURES": str(tmp_path / "figures")}
    env.pop("HBPSYCH_OUTPUTS", None)

    # the docs' chapter lists: written from the graph, which now has the chapter
    assert _command(project, env, "docs", "--check").returncode == 1
    docs = _command(project, env, "docs")
    assert docs.returncode == 0, docs.stderr
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert ("| `17_penalties` | the share of the rubrics' criteria that take points away, by "
            "theme ([`docs/penalties.md`](docs/penalties.md)) |") in readme
    assert "| 17_penalties |" in (project / "docs" / "pipeline.md").read_text("utf-8")

    # its profile section exists in every profile without an edit: --set reaches it
    ran = _command(project, env, "run", "default", "--outputs", str(outputs),
                   "--set", f"notebooks=[01_corpus, {STAGE}]",
                   "--set", "penalties.min_conversations=100")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    run = outputs / "default"
    assert (run / STAGE / "penalties.csv").is_file()

    metrics = json.loads((run / STAGE / "metrics.json").read_text(encoding="utf-8"))
    expected = _expected(run / "01_corpus" / "corpus_source.json", 100)
    assert metrics["min_conversations"] == 100
    assert {k: metrics[k] for k in ("n_conversations", "n_criteria", "n_penalties")} == {
        k: expected[k] for k in ("n_conversations", "n_criteria", "n_penalties")}
    corpus = json.loads((run / "01_corpus" / "metrics.json").read_text(encoding="utf-8"))
    assert (metrics["n_conversations"], metrics["n_criteria"], metrics["n_penalties"]) == (
        corpus["n_conversations"], corpus["n_rubric_items"], corpus["n_negative_items"])
    assert 0 < metrics["n_penalties"] < metrics["n_criteria"]
    assert metrics["by_theme"] == pytest.approx(expected["by_theme"])
    assert len(metrics["by_theme"]) >= 2

    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    states = {s["stage"]: s["state"] for s in manifest["stages"]}
    assert list(states)[-1] == STAGE and len(states) == 17  # the graph's stages, in order
    assert (states["01_corpus"], states[STAGE]) == ("current", "current")
    assert set(states.values()) == {"current", "not_in_profile"}
    assert manifest["profile_values"]["penalties"] == {"min_conversations": 100}

    chapter = (run / "book" / f"{STAGE}.html").read_text(encoding="utf-8")
    assert "How much of a rubric penalises?" in chapter
    assert "take points away." in chapter  # the findings, from its metrics
    landing = (run / "book" / "index.html").read_text(encoding="utf-8")
    assert "How much of a rubric penalises?" in landing and f"{STAGE}.html" in landing
