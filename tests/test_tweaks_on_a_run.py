"""Tweaks on a finished default run, as a user makes them: what re-runs, what is refused, what
the book and the manifest say afterwards (hand runs, a tweak that fails early)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from hbpsych_utils import runner
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import book

ROOT = Path(__file__).resolve().parent.parent


def text_of(page: Path) -> str:
    """A book page's visible text (tags dropped, entities decoded, spaces collapsed)."""
    raw = page.read_text(encoding="utf-8")
    body = raw[raw.find("<body"):]
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", body)))


@pytest.fixture
def copy_of_default(default_run: Path, tmp_path: Path) -> Path:
    """A private copy of the session's default run (outputs root), to tweak."""
    shutil.copytree(default_run, tmp_path / "default")
    return tmp_path


def states(run: Path) -> dict[str, dict]:
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    return {s["stage"]: s for s in manifest["stages"]}


def test_a_tweak_no_stage_reads_is_refused_before_anything_runs(tmp_path: Path, capsys) -> None:
    code = runner.main(["default", "--outputs", str(tmp_path), "--set",
                        "scores.top_k=3"])
    err = capsys.readouterr().err
    assert code == runner.EXIT_USAGE
    assert "scores.top_k" in err and "paper mode" in err and "08_scores" in err
    assert not (tmp_path / "default").exists()


@pytest.mark.slow
@pytest.mark.notebook
def test_judges_subset_tweak_reruns_09_and_what_depends_on_it(hard_run: Path,
                                                              tmp_path: Path) -> None:
    """conftest's shared ``hard_run`` is this tweak on a copy of the default run (its build
    asserted the run's result.ok and kept what the runner said); run again here on a copy."""
    from conftest import HARD_RUN_LINES

    lines = json.loads((hard_run.parent / HARD_RUN_LINES).read_text(encoding="utf-8"))
    manifest = json.loads((hard_run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["overrides"] == {"judges.subset": "hard"}
    assert [(n["notebook"], n["status"]) for n in manifest["notebooks"]] == [
        (graph.JUDGES, "ok"), (graph.FIGURES, "ok")]
    for stage in graph.STAGES[:8]:
        assert f"  {stage}: up to date" in lines
    run = hard_run
    assert json.loads((run / graph.JUDGES / "metrics.json").read_text())["subset"] == "hard"
    assert {s["state"] for s in states(run).values()} == {"current"}
    index = text_of(run / "book" / "index.html")
    assert re.search(r"Kendall.s τ\) [0-9.]+ to [0-9.]+ on HealthBench-Psych-Hard v1", index)
    chapter = text_of(run / "book" / "09_judges.html")
    assert "HealthBench-Psych-Hard v1" in chapter and "Not current" not in chapter
    figures = run / "book" / "figures.html"
    assert "fig_judges_hard" in figures.read_text() and "fig_judges_v1" not in figures.read_text()
    # the same command again changes nothing (on a copy: the session's run stays as it is)
    shutil.copytree(hard_run, tmp_path / "default", ignore=shutil.ignore_patterns(".run.lock"))
    again: list[str] = []
    result = runner.run_profile("default", outputs_root=tmp_path,
                                overrides={"judges.subset": "hard"}, echo=again.append)
    assert result.notebooks == [] and len(result.up_to_date) == len(graph.STAGES)


@pytest.mark.slow
@pytest.mark.notebook
def test_a_hand_run_of_a_chapter_is_marked_not_current(copy_of_default: Path) -> None:
    """papermill on the shipped notebook (its own defaults, ``-p subset hard``; the outputs root
    given so the session's run is not touched), then ``book``: chapter 09 and the landing page
    say it is not current, and so is 12, which read the runner's 09."""
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "09_judges.ipynb"),
         str(copy_of_default / "09.ipynb"), "-p", "subset", "hard", "-p", "outputs_root",
         str(copy_of_default), "--no-progress-bar"],
        cwd=copy_of_default, env={**os.environ, "HBPSYCH_FIGURES": str(copy_of_default / "f")},
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    project = copy_of_default
    assert not (project / "default" / ".hand").exists()
    run = project / "default"
    assert json.loads((run / graph.JUDGES / "metrics.json").read_text())["subset"] == "hard"
    index = book.build_book(run)
    landing = text_of(index)
    assert re.search(r"09 · The judges paper not current ?: its outputs were written "
                     r"outside the runner \(papermill or JupyterLab, with [^)]*subset=\W*hard",
                     landing)
    assert re.search(r"12 · Figures and tables .* not current ?: its upstream 09_judges is not "
                     r"current", landing)
    assert re.search(r"Kendall.s τ\) [0-9.]+ to [0-9.]+ \( ?not current ?\)", landing)
    chapter = text_of(index.parent / "09_judges.html")
    assert "Not current" in chapter and "bash run_all.sh default" in chapter


@pytest.mark.slow
@pytest.mark.notebook
def test_a_rerun_that_fails_early_leaves_what_depends_on_it_not_current(
        copy_of_default: Path) -> None:
    """The offline corpus is partial: insisting on all 5,000 conversations fails in 01, and
    every stage that reads 01 (directly or not) is then not current in the manifest and the
    book; stages that read nothing of 01 keep their state."""
    lines: list[str] = []
    result = runner.run_profile("default", outputs_root=copy_of_default,
                                overrides={"corpus.allow_partial": False}, echo=lines.append)
    assert not result.ok and result.failed == graph.CORPUS
    run = copy_of_default / "default"
    got = states(run)
    assert got[graph.CORPUS]["state"] == "failed"
    behind = graph.dependents([graph.CORPUS], runner_profile(allow_partial=False))
    assert behind and all(got[s]["state"] == "not_current" for s in behind)
    assert {got[s]["state"] for s in graph.STAGES if s not in {graph.CORPUS, *behind}} == {
        "current"}
    landing = text_of(run / "book" / "index.html")
    assert f"{len(behind) + 1} of {len(graph.STAGES)} chapters are not current" in landing
    for stage in behind:
        assert "Not current" in text_of(run / "book" / f"{stage}.html"), stage


def runner_profile(**corpus: object):
    from hbpsych_utils.pipeline import profiles

    return profiles.load_profile("default", {f"corpus.{k}": v for k, v in corpus.items()})


def papermill(notebook: str, out: Path, outputs_root: Path, *params: str
              ) -> subprocess.CompletedProcess:
    """papermill on a shipped notebook with its own defaults, the outputs root given."""
    return subprocess.run(
        [sys.executable, "-m", "papermill", str(ROOT / "notebooks" / f"{notebook}.ipynb"),
         str(out), "-p", "outputs_root", str(outputs_root), *params, "--no-progress-bar"],
        cwd=out.parent, env={**os.environ, "HBPSYCH_FIGURES": str(out.parent / "figures")},
        capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
@pytest.mark.notebook
def test_every_chapter_runs_by_hand_with_its_shipped_defaults(
        copy_of_default: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a default run, each notebook runs by hand offline with the defaults it ships (the
    default profile's values) and reproduces the runner's numbers; its build says so.

    Papermill's own entry point, in this process: what its command line calls with ``-p
    outputs_root``, without a Python and papermill's imports per chapter (about 2 s of CPU
    each); each chapter still runs in a kernel of its own."""
    import papermill as pm

    run = copy_of_default / "default"
    before = {s: (run / s / "metrics.json").read_text() for s in graph.STAGES
              if (run / s / "metrics.json").is_file()}
    monkeypatch.setenv("HBPSYCH_FIGURES", str(copy_of_default / "figures"))
    for stage in graph.STAGES:
        try:
            pm.execute_notebook(str(ROOT / "notebooks" / f"{stage}.ipynb"),
                                str(copy_of_default / f"{stage}.ipynb"),
                                parameters={"outputs_root": str(copy_of_default)},
                                cwd=str(copy_of_default), progress_bar=False)
        except pm.PapermillExecutionError as exc:
            pytest.fail(f"{stage}: {str(exc)[-2000:]}")
        build = json.loads((run / stage / "build.json").read_text())
        assert build["by"] == "hand", stage
    after = {s: (run / s / "metrics.json").read_text() for s in before}
    assert after == before


@pytest.mark.slow
@pytest.mark.notebook
def test_a_failed_hand_run_leaves_the_runners_outputs_as_they_were(copy_of_default: Path) -> None:
    run = copy_of_default / "default"
    files = {p.relative_to(run): p.read_bytes() for p in (run / graph.CORPUS).iterdir()}
    proc = papermill(graph.CORPUS, copy_of_default / "01.ipynb", copy_of_default,
                     "-p", "allow_partial", "False")
    assert proc.returncode != 0 and "5,000" in proc.stdout + proc.stderr
    assert {p.relative_to(run): p.read_bytes() for p in (run / graph.CORPUS).iterdir()} == files
    assert json.loads((run / graph.CORPUS / "build.json").read_text())["by"] == "runner"


@pytest.mark.slow
@pytest.mark.notebook
def test_a_mixed_run_keeps_the_released_harness_check(smoke_run: Path, tmp_path: Path) -> None:
    """The one section that may leave the evaluation mode: a live smoke run whose harness check
    replays the released GPT-4.1 run re-runs 11 alone, in replay."""
    shutil.copytree(smoke_run, tmp_path / "smoke")
    result = runner.run_profile("smoke", outputs_root=tmp_path,
                                overrides={"harness_validation.mode": "replay"},
                                echo=lambda _: None)
    assert result.ok and [n["notebook"] for n in result.notebooks] == [graph.HARNESS]
    run = tmp_path / "smoke"
    harness = json.loads((run / graph.HARNESS / "metrics.json").read_text())
    assert harness["mode"] == "replay" and harness["n_scored"] == 1000
    assert json.loads((run / graph.SCORES / "metrics.json").read_text())["mode"] == "live"


@pytest.mark.slow
@pytest.mark.notebook
def test_the_figures_folder_holds_exactly_the_last_runs_figures(
        copy_of_default: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tweak's figure (``fig_judges_hard``) leaves ``figures/`` when the tweak is undone: the
    folder holds the files of the last run that published there, and its README and a file
    the project did not write stay."""
    figures = copy_of_default / "figures"
    figures.mkdir()
    (figures / "README.md").write_text("the last run's figures\n", encoding="utf-8")
    (figures / "mine.png").write_bytes(b"not the project's")
    monkeypatch.setenv("HBPSYCH_FIGURES", str(figures))
    run = copy_of_default / "default"
    for overrides, kept, gone in (({"judges.subset": "hard"}, "hard", "v1"),
                                  ({}, "v1", "hard")):
        result = runner.run_profile("default", outputs_root=copy_of_default,
                                    overrides=overrides, echo=lambda _: None)
        assert result.ok and graph.FIGURES in [n["notebook"] for n in result.notebooks]
        files = json.loads((run / graph.FIGURES / "metrics.json").read_text())["files"]
        assert f"fig_judges_{kept}.png" in files
        shown = {p.name for p in figures.iterdir() if not p.name.startswith(".")}
        assert shown == {*files, "README.md", "mine.png"}, overrides
        assert not (figures / f"fig_judges_{gone}.svg").exists()
        for name in files:
            assert (figures / name).read_bytes() == (run / graph.FIGURES / name).read_bytes()
