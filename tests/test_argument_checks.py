"""Every argument validated at load: a profile's judges, candidates, seed and resample counts
are refused when the profile loads (before notebook 01), and every subcommand of
``python -m hbpsych_utils`` answers a bad argument in one line with exit code 2."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import notebook, write_profile

from hbpsych_utils import runner, study
from hbpsych_utils.__main__ import main as cli
from hbpsych_utils.core import config
from hbpsych_utils.pipeline import profiles

MUST_NOT_RUN = "raise SystemExit('must not run')"


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# --- a profile's values, at load ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "key", "problem"), [
    ("grading: {judges: [gpt-4.1, gpt-4.1]}", "grading.judges", "'gpt-4.1' listed more than once"),
    ("grading: {judges: []}", "grading.judges", "an empty panel"),
    ("grading: {judges: [gpt-4.1, '  ']}", "grading.judges", "judge[1] is an empty name"),
    ("generation: {candidates: [a, b, a]}", "generation.candidates", "'a' listed more than once"),
    ("seed: -1", "seed", "greater than or equal to 0"),
    (f"seed: {study.MAX_SEED + 1}", "seed", f"less than or equal to {study.MAX_SEED}"),
    (f"n_resamples: {study.MAX_RESAMPLES + 1}", "n_resamples",
     f"less than or equal to {study.MAX_RESAMPLES}"),
    ("n_resamples: 9", "n_resamples", "greater than or equal to 10"),
    ("judges: {n_resamples: 1000}", "judges.n_resamples",
     "a run has one number of bootstrap resamples: set n_resamples at the top of the profile"),
])
def test_bad_values_are_refused_when_the_profile_loads(tmp_path: Path, text: str, key: str,
                                                       problem: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"description: x\n{text}\n")
    with pytest.raises(config.ProfileError) as caught:
        profiles.load_profile(path)
    assert f"  - {key}: " in str(caught.value) and problem in str(caught.value), caught.value
    assert "Value error," not in str(caught.value)  # the validator's own words


def test_the_limits_themselves_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"description: x\nseed: {study.MAX_SEED}\n"
                    f"n_resamples: {study.MAX_RESAMPLES}\n"
                    "grading: {judges: [gpt-4.1]}\n")
    profile = profiles.load_profile(path)
    assert (profile.seed, profile.n_resamples) == (study.MAX_SEED, study.MAX_RESAMPLES)
    assert profiles.load_profile(path, {"seed": 0}).seed == 0


@pytest.mark.parametrize(("text", "overrides", "problem"), [
    ("evaluation_mode: live\ngrading: {judges: [gpt-4.1, gpt-4.1]}\n", [],
     "listed more than once"),
    ("evaluation_mode: live\ngrading: {judges: []}\n", [], "an empty panel"),
    ("seed: -1\n", [], "seed: Input should be greater than or equal to 0"),
    ("", ["--set", "seed=-1"], "seed: Input should be greater than or equal to 0"),
    ("", ["--set", "grading.judges=[gpt-4.1, gpt-4.1]"], "listed more than once"),
])
def test_the_runner_refuses_them_before_any_notebook_runs(
        project: Path, capsys, text: str, overrides: list[str], problem: str) -> None:
    """A duplicate judge or an empty panel passed the profile load and failed in 07 or 08;
    ``--set seed=-1`` failed in 11 after 01 had run. Now exit 2 at load, nothing written."""
    write_profile(project, "01_corpus", "07_grading", "11_harness_validation", text=text)
    for stage in ("01_corpus", "07_grading", "11_harness_validation"):
        notebook(project / "notebooks" / f"{stage}.ipynb", MUST_NOT_RUN)
    out = project / "outputs"
    assert runner.main(["p", "--outputs", str(out), *overrides]) == runner.EXIT_USAGE
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err, err
    assert not out.exists()


# --- the command line: one line and exit 2 for every bad argument -------------------------------

@pytest.mark.parametrize("argv", [
    ["run", "--nope"], ["run", "a", "b"], ["run", "--outputs"], ["book", "--nope"],
    ["publish", "--subset", "hard"], ["publish", "--output", ""], ["ids"],
    ["ids", "--subset", "v1", "--format", "xml"], ["ids", "--subset", "v9"],
    ["export", "--subset", "v1"], ["export", "--subset", "v1", "--output", ""],
    ["filter-results"], ["filter-results", "x.json", "--format", "nope"],
    ["filter-results", "x.json", "--subset", "nosuch.json"],
    ["filter-results", "x.json", "--resamples", "0"],
    ["filter-results", "x.json", "--resamples", "1000000000"],
    ["filter-results", "x.json", "--resamples", "many"],
    ["filter-results", "x.json", "--seed", "-1"],
    ["filter-results", "x.json", "--seed", str(study.MAX_SEED + 1)],
    ["fetch", "nosuch"], ["profiles", "extra"], ["nosuch"],
], ids=lambda argv: " ".join(argv) or "empty")
def test_every_subcommand_answers_a_bad_argument_in_one_line(capsys, argv: list[str]) -> None:
    assert cli(argv) == 2
    captured = capsys.readouterr()
    one_error_line(captured.err)
    assert captured.out == ""


def test_resamples_and_seed_out_of_range_name_the_range(capsys) -> None:
    """``--resamples 1000000000`` and ``--seed -1`` raised tracebacks (a MemoryError,
    numpy's ValueError)."""
    assert cli(["filter-results", "x.json", "--resamples", "1000000000"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"from 1 to {study.MAX_RESAMPLES}" in line and "--resamples" in line
    assert cli(["filter-results", "x.json", "--seed", "-1"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"from 0 to {study.MAX_SEED}" in line and "--seed" in line


@pytest.mark.parametrize("kind", ["folder", "proc", "missing-folder", "device"])
def test_export_refuses_an_output_it_cannot_write_before_reading_the_corpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, kind: str) -> None:
    """``export --output`` on a folder or on ``/proc/version`` raised a traceback after the
    corpus was verified; a device would have been replaced by the rename."""
    from hbpsych_utils.reporting import export

    output = {"folder": tmp_path, "proc": Path("/proc/version"),
              "missing-folder": tmp_path / "nowhere" / "v1.jsonl",
              "device": Path("/dev/null")}[kind]
    if kind == "proc" and not output.is_file():
        pytest.skip("no /proc/version on this system")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the corpus was read before the output was checked")

    monkeypatch.setattr(export, "verified_corpus", never)
    assert cli(["export", "--subset", "v1", "--output", str(output)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--output" in line and str(output) in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no probe left behind


def test_an_output_file_that_can_be_written_is_accepted(tmp_path: Path) -> None:
    from hbpsych_utils.core import arguments

    assert arguments.writable_file_problem(tmp_path / "v1.jsonl") is None
    (tmp_path / "old.jsonl").write_text("x")
    assert arguments.writable_file_problem(tmp_path / "old.jsonl") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]


def test_a_run_usage_error_is_one_line_for_run_all_too(capsys) -> None:
    """run_all.sh's early lock check leaves a usage error to the run itself."""
    assert runner.cli.lock_refusal(["--nope"]) is None
    assert runner.main(["--nope"]) == 2
    one_error_line(capsys.readouterr().err)


# --- book: the run lock, Ctrl-C ------------------------------------------------------------------

def test_book_refuses_a_folder_another_command_holds(tmp_path: Path, capsys) -> None:
    """``book`` during a run rendered the half-finished run while every other command was
    refused: now it is refused too (exit 3), and nothing of the book is written."""
    from hbpsych_utils.core import runlock

    run = tmp_path / "default"
    run.mkdir()
    with runlock.run_lock(run, "default", "the first run"):
        assert cli(["book", "default", "--outputs", str(tmp_path)]) == runner.EXIT_LOCKED
        line = one_error_line(capsys.readouterr().err)
        assert f"profile 'default' is already running into {run}" in line
        assert "the first run" in line
    assert not (run / "book").exists() and not (run / ".book-build").exists()


def test_book_holds_the_folder_while_it_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys) -> None:
    """A run (or publish) started while the book renders is refused in its turn."""
    from hbpsych_utils.core import runlock
    from hbpsych_utils.reporting import book

    run = tmp_path / "default"
    run.mkdir()
    seen: list[str] = []

    def render(folder: Path) -> book.BuildReport:
        try:
            runlock.refuse_if_running(folder, folder.name)
        except runlock.RunLocked as exc:
            seen.append(str(exc))
        return book.BuildReport(index=folder / "book" / "index.html", warnings=[], seconds=0.0)

    monkeypatch.setattr(book, "render", render)
    assert cli(["book", "default", "--outputs", str(tmp_path)]) == 0
    assert len(seen) == 1 and "-m hbpsych_utils book default --outputs" in seen[0]
    assert capsys.readouterr().out.startswith(f"book: {run / 'book' / 'index.html'}")
    assert not (run / runlock.HOLDER_FILE).exists()  # released


def test_book_interrupted_while_rendering_is_one_line_and_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from hbpsych_utils.reporting import book

    (tmp_path / "default").mkdir()

    def interrupted(folder: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(book, "render", interrupted)
    assert cli(["book", "default", "--outputs", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"interrupted: the book of {tmp_path / 'default'} was not finished; run again with: "
        f"{sys.executable} -m hbpsych_utils book default --outputs {tmp_path}"]


class _InterruptingImport:
    """A meta-path finder that raises KeyboardInterrupt when ``name`` is imported (as Ctrl-C
    during a command's imports does)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == self.name:
            raise KeyboardInterrupt


@pytest.mark.parametrize(("argv", "module"), [
    (["book", "default"], "hbpsych_utils.runner.cli"),
    (["book", "default"], "hbpsych_utils.runner.execute"),
    (["book", "default"], "hbpsych_utils.reporting.book"),
    (["filter-results", "x.json"], "hbpsych_utils.reporting.interop"),
    (["export", "--subset", "v1", "--output", "x.jsonl"], "hbpsych_utils.reporting.export"),
])
def test_ctrl_c_during_a_commands_imports_is_one_line_and_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, argv: list[str],
        module: str) -> None:
    """``book`` interrupted during its imports printed a 25-48-line traceback. Before the
    command's own handling the dispatcher answers; once ``book`` runs, it does (naming its
    run folder)."""
    import importlib

    (tmp_path / "default").mkdir()
    parent, _, leaf = module.rpartition(".")
    monkeypatch.delitem(sys.modules, module)
    monkeypatch.delattr(importlib.import_module(parent), leaf)
    monkeypatch.setattr(sys, "meta_path", [_InterruptingImport(module), *sys.meta_path])
    monkeypatch.setenv("HBPSYCH_OUTPUTS", str(tmp_path))
    handler = signal.getsignal(signal.SIGINT)
    assert cli(argv) == 130
    assert signal.getsignal(signal.SIGINT) is handler  # called in-process: left as it was
    err = capsys.readouterr().err
    if module == "hbpsych_utils.reporting.book":  # imported by book's own code
        assert err.splitlines() == [
            f"interrupted: the book of {tmp_path / 'default'} was not finished; run again "
            f"with: {sys.executable} -m hbpsych_utils book default"]
    else:
        assert err.splitlines() == [
            f"interrupted: python -m hbpsych_utils {shlex.join(argv)} stopped by Ctrl-C "
            "before it finished; run it again"]


PACKAGE = Path(cli.__code__.co_filename).parent


@pytest.mark.slow
def test_book_interrupted_anywhere_is_one_line_and_130(tmp_path: Path) -> None:
    """A real Ctrl-C (SIGINT) at moments from the start of the process to the end of the
    build: every answer is one line (or the book, if it finished first), never a traceback.
    The interpreter's own start (site, the import system finding the package: some 50 ms)
    comes before any code of the package; a signal that lands there (the process killed by
    it, or a traceback with no frame of the package) is not the command's to answer and is
    left out."""
    (tmp_path / "default").mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    answers = []
    for delay in (0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 1.6, 2.5, 4.0):
        proc = subprocess.Popen(
            [sys.executable, "-m", "hbpsych_utils", "book", "default", "--outputs",
             str(tmp_path)], env=env, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
        killed = proc.returncode == -signal.SIGINT and not err  # before Python's handler
        if killed or ("Traceback" in err and f"{PACKAGE}{os.sep}" not in err):
            continue  # before the package's first line ran
        answers.append((delay, proc.returncode, err))
        assert "Traceback" not in err, (delay, err)
        if proc.returncode == 0:  # it finished first
            assert out.startswith("book: ")
            continue
        assert proc.returncode == 130, (delay, proc.returncode, out, err)
        assert len(err.splitlines()) == 1 and err.startswith("interrupted: "), (delay, err)
    assert sum(code == 130 for _, code, _ in answers) >= 4, answers

