"""Independent notebooks run at once (``--jobs``): what waits for what, a failure that stops
only what depends on it, and Ctrl-C that stops every running notebook with one line."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.pipeline import graph, profiles
from hbpsych_utils.runner import schedule

# --- what waits for what (no kernel) ----------------------------------------------------------


def test_a_notebook_waits_for_the_planned_notebooks_upstream_of_it() -> None:
    default = profiles.load_profile("default")  # paper mode: 06 to 15 read released files
    to_run = graph.profile_stages(default)
    board = schedule.board(default, to_run)
    assert board.waits_for["03_review_round1"] == {"01_corpus", "02_screening"}
    assert board.waits_for["05_subset"] == {"01_corpus", "02_screening", "03_review_round1",
                                            "04_recall"}  # through 03 and 04
    assert board.waits_for["08_scores"] == set()
    # at the start, with one slot per stage, every stage that reads no other starts at once,
    # in the plan's order; with two slots, the first two of them
    free = [s for s in to_run if not graph.spec(s).upstream(default)]
    assert free[:2] == ["01_corpus", "02_screening"]
    assert board.ready(len(to_run)) == free
    assert board.ready(2) == free[:2]
    # no model is called in paper mode: nothing waits only for its turn at the store
    assert all(not after for after in board.after.values())


def test_a_stage_left_out_of_the_plan_still_orders_those_around_it() -> None:
    """03 does not run (current); 04 reads 03, which reads 01: 04 waits for 01."""
    default = profiles.load_profile("default")
    board = schedule.board(default, ["01_corpus", "04_recall"])
    assert board.waits_for == {"01_corpus": set(), "04_recall": {"01_corpus"}}


def test_the_notebooks_that_call_models_take_the_store_in_turn() -> None:
    """They share the run's LLM store, which they read (answers already paid for, the spend
    so far): one at a time, in the plan's order, whether or not the one before succeeded."""
    smoke = profiles.load_profile("smoke")
    to_run = graph.profile_stages(smoke)
    callers = [s for s in to_run if schedule.calls_models(smoke, s)]
    assert callers == ["06_generation", "07_grading", "11_harness_validation",
                       "15_judge_accuracy", "16_self_consistency"]
    board = schedule.board(smoke, to_run)
    assert board.after["11_harness_validation"] == {"06_generation", "07_grading"}
    assert board.waits_for["11_harness_validation"] == {"01_corpus"}  # what it reads
    board.succeeded |= {"01_corpus"}
    board.ended |= {"01_corpus", "06_generation"}
    board.waiting.remove("01_corpus")
    assert "11_harness_validation" not in board.ready(len(to_run))  # 07 has not ended
    board.ended.add("07_grading")  # failed: 11 reads nothing of it, and its turn has come
    assert "11_harness_validation" in board.ready(len(to_run))
    assert not any(schedule.calls_models(profiles.load_profile("default"), s) for s in to_run)


def test_jobs_must_be_a_whole_number_of_at_least_one(capsys) -> None:
    for bad in ("0", "-2", "two", "1.5"):
        assert runner.main(["default", "--jobs", bad]) == runner.EXIT_USAGE
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: hbpsych run: argument "
                                                             "--jobs: ")
        assert "1 or more" in err


def test_an_error_that_ends_the_run_lets_the_notebook_beside_it_finish(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A full disk while papermill saves 01's executed copy ends the run (one line naming the
    file, exit 1), but only once 02, running beside it, has ended and been recorded: no
    kernel is left behind; 03, which reads both, never starts."""
    from hbpsych_utils.runner import execute

    write_profile(project, "01_corpus", "02_screening", "03_review_round1")
    for name in ("01_corpus", "02_screening", "03_review_round1"):
        notebook(project / "notebooks" / f"{name}.ipynb", "y = 1")
    beside = threading.Event()
    ran: list[str] = []

    def fake(nb: Path, target: Path, params: dict, staging: Path, *_: object) -> None:
        ran.append(nb.stem)
        if nb.stem == "01_corpus":
            assert beside.wait(10)  # 02 is running
            raise OSError(errno.ENOSPC, "No space left on device")
        beside.set()
        time.sleep(1)  # still running when 01 ends the run
        (staging / nb.stem).mkdir(parents=True)
        (staging / nb.stem / "t.csv").write_text("n\n1\n")

    monkeypatch.setattr(execute, "execute", fake)
    out = project / "outputs"
    assert runner.main(["p", "--outputs", str(out), "--jobs", "2"]) == runner.EXIT_FAILED
    err = capsys.readouterr().err
    assert err == (f"error: {out / 'p' / 'notebooks' / '01_corpus.ipynb'}: no space left on "
                   "the device: free some space, then run again\n")
    assert sorted(ran) == ["01_corpus", "02_screening"]
    manifest = json.loads((out / "p" / "manifest.json").read_text())
    assert [(n["notebook"], n["status"]) for n in manifest["notebooks"]] == [
        ("02_screening", "ok")]
    assert (out / "p" / "02_screening" / "t.csv").read_text() == "n\n1\n"


# --- two branches at once: one fails, the other completes (slow) --------------------------------

MEET = """\
import pathlib, time
here = pathlib.Path(outputs_root, profile)
(here / f'{NAME}.started').write_text('')
for _ in range(600):  # both notebooks run at once, or neither gets past this cell
    if (here / f'{OTHER}.started').is_file():
        break
    time.sleep(0.1)
else:
    raise TimeoutError(f'{OTHER} did not run beside {NAME}')"""
"""A cell that waits until the other notebook has started too (a minute at most)."""
SEEN = "pathlib.Path(outputs_root, profile, f'{NAME}.done').write_text('')"


@pytest.mark.slow
def test_a_failed_branch_stops_its_dependents_and_the_other_branch_completes(
        project: Path) -> None:
    # paper mode: 03 reads 01 and 02, 06 reads 01 only; 01 and 02 read nothing
    write_profile(project, "01_corpus", "02_screening", "03_review_round1", "06_generation")
    nbs = project / "notebooks"
    notebook(nbs / "01_corpus.ipynb", "NAME, OTHER = '01_corpus', '02_screening'\n" + MEET,
             SEEN)
    notebook(nbs / "02_screening.ipynb", "NAME, OTHER = '02_screening', '01_corpus'\n" + MEET,
             "raise ValueError('02 is broken')")
    notebook(nbs / "03_review_round1.ipynb", "import pathlib\nNAME = '03_review_round1'",
             SEEN)
    notebook(nbs / "06_generation.ipynb", "import pathlib\nNAME = '06_generation'", SEEN)
    lines: list[str] = []
    result = runner.run_profile("p", outputs_root=project / "outputs", echo=lines.append,
                                jobs=2)
    out = project / "outputs" / "p"
    assert not result.ok
    assert (result.failures, result.not_run) == (["02_screening"], ["03_review_round1"])
    done = sorted(p.name for p in out.glob("*.done"))
    assert done == ["01_corpus.done", "06_generation.done"]  # 03 never ran
    # the lines: both started before either ended, each line names its notebook
    progress = [line for line in lines if line.startswith("[")]
    assert progress[:2] == ["[1/4] 01_corpus ...", "[2/4] 02_screening ..."]
    assert sorted(progress) == sorted([
        "[1/4] 01_corpus ...", "[2/4] 02_screening ...", "[3/4] 06_generation ...",
        *(f"[{i}/4] {n} done in {_seconds(result, n):.1f}s"
          for i, n in ((1, "01_corpus"), (3, "06_generation")))])
    failure = next(line for line in lines if line.startswith("FAILED"))
    assert failure.startswith("FAILED: 02_screening at cell 3 (raise ValueError")
    assert "not current until it succeeds: 03_review_round1" in failure
    assert lines[-1] == ("profile 'p': 2 notebooks ran, 1 failed (02_screening), 1 not run as "
                         f"an upstream failed (03_review_round1), 0 up to date; outputs in "
                         f"{out}")
    # the manifest says which
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(n["notebook"], n["status"]) for n in manifest["notebooks"]] == [
        ("01_corpus", "ok"), ("02_screening", "failed"), ("03_review_round1", "not_run"),
        ("06_generation", "ok")]
    assert manifest["notebooks"][2]["reason"] == "its upstream 02_screening failed"
    states = {s["stage"]: (s["state"], s["reason"]) for s in manifest["stages"]}
    assert states["01_corpus"] == states["06_generation"] == ("current", "")
    assert states["02_screening"] == ("failed", "its last run was failed: ValueError: 02 is "
                                                "broken")
    assert states["03_review_round1"] == ("not_run", "it has not run yet")
    # and so does the book, built once after both branches
    assert sum(line.startswith("book: ") for line in lines) == 1
    provenance = table_rows((out / "book" / "provenance.html").read_text())
    assert [r for r in provenance if r[0] in ("01_corpus", "02_screening", "03_review_round1",
                                             "06_generation") and len(r) == 3] == [
        ["01_corpus", "ok", str(_seconds(result, "01_corpus"))],
        ["02_screening", "failed", str(_seconds(result, "02_screening"))],
        ["03_review_round1", "not_run", "0.0"],
        ["06_generation", "ok", str(_seconds(result, "06_generation"))]]
    stage_rows = {r[0]: r[1] for r in provenance if len(r) == 4}
    assert stage_rows["01_corpus"] == stage_rows["06_generation"] == "current"
    assert stage_rows["02_screening"].startswith("failed: its last run was failed: ValueError")
    assert stage_rows["03_review_round1"] == "not run: it has not run yet"
    landing = table_rows((out / "book" / "index.html").read_text())
    assert [(r[0][:2], r[2].split(":")[0]) for r in landing[1:]] == [
        ("01", "current"), ("02", "failed"), ("03", "not run"), ("06", "current")]


def _seconds(result: runner.RunResult, name: str) -> float:
    return next(n["seconds"] for n in result.notebooks if n["notebook"] == name)


class _Rows(HTMLParser):
    """The text of each table row of a page, cell by cell."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    parser = _Rows()
    parser.feed(html)
    return parser.rows


# --- Ctrl-C with two notebooks running (slow) ----------------------------------------------------

SLEEP = """\
import os, pathlib, time
here = pathlib.Path(outputs_root, profile)
(here / f'kernel_{NAME}.pid').write_text(str(os.getpid()))
(here / f'sleeping_{NAME}.txt').write_text('')
time.sleep(120)"""
AFTER = "(here / f'after_{NAME}.txt').write_text('ran')"


@pytest.mark.slow
@pytest.mark.notebook
def test_ctrl_c_with_two_notebooks_running_stops_both_with_one_line(project: Path) -> None:
    write_profile(project, "01_corpus", "02_screening")
    for name in ("01_corpus", "02_screening"):
        notebook(project / "notebooks" / f"{name}.ipynb", f"NAME = {name!r}", SLEEP, AFTER)
    out = project / "outputs"
    run = out / "p"
    env = {**os.environ, "HBPSYCH_ROOT": str(project)}
    command = [sys.executable, "-m", "hbpsych_utils", "run", "p", "--outputs", str(out),
               "--jobs", "2"]
    proc = subprocess.Popen(command, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    for name in ("01_corpus", "02_screening"):
        _wait_for(run / f"sleeping_{name}.txt", proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == runner.EXIT_INTERRUPTED, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert stderr.splitlines() == [
        "interrupted: 01_corpus (at cell 3) and 02_screening (at cell 3) of profile 'p'; "
        f"resume with: {shlex.join(command)}"], stderr
    # (a kernel that did not start is started once more, and says so: not what this is about)
    progress = re.compile(r"profile 'p': |  0[12]_\w+: runs \(it has not run yet\)$"
                          r"|\[[12]/2\] 0[12]_\w+ \.\.\.$"
                          r"|  0[12]_\w+: the kernel did not start .*; starting it once more$")
    assert [line for line in stdout.splitlines() if not progress.match(line)] == []
    manifest = json.loads((run / "manifest.json").read_text())
    assert [(n["notebook"], n["status"], n["error"]["cell"]) for n in manifest["notebooks"]] == [
        ("01_corpus", "interrupted", 3), ("02_screening", "interrupted", 3)]
    assert {s["stage"]: s["state"] for s in manifest["stages"]
            if s["stage"] in ("01_corpus", "02_screening")} == {
        "01_corpus": "failed", "02_screening": "failed"}
    assert not list(run.glob("after_*.txt"))  # no later cell ran
    assert not (run / "book").exists()  # the run stopped before its book
    for name in ("01_corpus", "02_screening"):
        _assert_gone(int((run / f"kernel_{name}.pid").read_text()))


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"kernel {pid} still running"
        time.sleep(0.2)
