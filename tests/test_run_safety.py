"""A run is safe to fail, to repeat and to stop: stage outputs are replaced only on success,
one run per outputs folder, a kernel that does not start is retried once, Ctrl-C ends cleanly."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq
from conftest import notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.core import config, runlock, sources
from hbpsych_utils.pipeline import profiles, stage


def make_store(out: Path) -> tuple[int, str]:
    """An LLM store in the run folder (as a live run leaves one): its inode and sha256."""
    from hbpsych_utils.llm.store import Store

    out.mkdir(parents=True, exist_ok=True)
    with Store(out / "llm_store.sqlite"):
        pass
    return store_identity(out)


RUN_ALL = Path(__file__).resolve().parent.parent / "run_all.sh"


def store_identity(out: Path) -> tuple[int, str]:
    path = out / "llm_store.sqlite"
    return path.stat().st_ino, sources.sha256_file(path)


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


# --- 4. a stage's outputs are replaced only when it succeeds ----------------------------------

STAGE_CELL = """\
import json
from pathlib import Path
import pandas as pd
from hbpsych_utils.pipeline.stage import Stage
n = max_conversations
stage = Stage(profile, "01_corpus", outputs_root)
src = Path(outputs_root).parent / f"input_{n}.txt"
src.write_text(str(n))
stage.record_input(f"input_{n}", src)
stage.write_table(pd.DataFrame({"n": [n]}), "partial.csv")
final = stage.final_dir / "corpus_source.json"
seen = {"writes_to": str(stage.dir),
        "final_meanwhile": json.loads(final.read_text()) if final.is_file() else None}
(Path(outputs_root).parent / f"seen_{n}.json").write_text(json.dumps(seen))"""
"""01_corpus's first cell: records an input and writes a partial table into its folder (the
staging folder under the runner), noting where it writes and what the final folder holds
meanwhile. ``max_conversations`` stands for the value that differs between runs."""
WRITE_CELL = ('stage.write_table(pd.DataFrame({"n": [n]}), "t.csv")\n'
              'stage.write_json("corpus_source.json", {"n": n})')
DOWNSTREAM_CELL = """\
from hbpsych_utils.core.records import read_json
from hbpsych_utils.pipeline.stage import Stage
stage = Stage(profile, "03_review_round1", outputs_root)
n = read_json(stage.upstream("01_corpus", "corpus_source.json"))["n"]
stage.write_json("upstream.json", {"upstream_n": n})"""
"""03_review_round1 reads 01's ``corpus_source.json`` (a file the graph declares for it)."""


@pytest.mark.slow
def test_stage_outputs_are_swapped_in_on_success_and_retired_on_failure(project: Path) -> None:
    write_profile(project, "01_corpus", "02_screening", "03_review_round1")
    notebook(project / "notebooks" / "01_corpus.ipynb", STAGE_CELL,
             "if n == 2:\n    raise ValueError('2 is refused')", WRITE_CELL,
             max_conversations=None)
    notebook(project / "notebooks" / "02_screening.ipynb", "y = 1")
    notebook(project / "notebooks" / "03_review_round1.ipynb", DOWNSTREAM_CELL)
    root, out = project / "outputs", project / "outputs" / "p"
    store = make_store(out)

    def run(n: int, lines: list[str] | None = None) -> runner.RunResult:
        echo = lines.append if lines is not None else (lambda _: None)
        return runner.run_profile("p", outputs_root=root,
                                  overrides={"corpus.max_conversations": n}, echo=echo)

    def read(path: Path) -> dict:
        return json.loads(path.read_text())

    assert run(1).ok
    seen = read(project / "seen_1.json")
    assert Path(seen["writes_to"]) == out / stage.STAGING_DIR / "01_corpus"  # not in place
    assert read(out / "03_review_round1" / "upstream.json") == {"upstream_n": 1}

    assert run(3).ok
    seen = read(project / "seen_3.json")
    assert seen["final_meanwhile"] == {"n": 1}  # the previous outputs stayed until success
    assert read(out / "01_corpus" / "corpus_source.json") == {"n": 3}
    # The downstream stage read the new outputs from the final folder.
    assert read(out / "03_review_round1" / "upstream.json") == {"upstream_n": 3}
    assert "input_3" in manifest_of(out)["artifacts"]
    assert not (out / stage.STAGING_DIR).exists()

    lines: list[str] = []
    result = run(2, lines)
    assert result.failed == "01_corpus"
    # No stale output, table, stage.json or build.json: only the failure record.
    assert sorted(p.name for p in (out / "01_corpus").iterdir()) == [stage.FAILURE_RECORD]
    record = read(out / "01_corpus" / stage.FAILURE_RECORD)
    assert record["notebook"] == "01_corpus" and record["status"] == "failed"
    assert record["error"] == {"cell": 3, "ename": "ValueError", "evalue": "2 is refused"}
    assert record["previous_outputs"] == "removed"
    kept = Path(record["partial_outputs"])
    assert kept == out / stage.FAILED_DIR / "01_corpus"
    assert (kept / "partial.csv").read_text() == "n\n2\n"  # what the failed attempt wrote
    assert Path(record["executed"]) == out / "notebooks" / "01_corpus.ipynb"
    manifest = manifest_of(out)
    # 03 reads 01: not run behind it; 02 reads nothing of 01 (replay) and is current
    assert [(n["notebook"], n["status"]) for n in manifest["notebooks"]] == [
        ("01_corpus", "failed"), ("03_review_round1", "not_run")]
    assert manifest["notebooks"][0]["failure_record"] == [str(out / "01_corpus" / "failed.json")]
    assert not {"input_1", "input_2", "input_3"} & set(manifest["artifacts"])  # no stale inputs
    states = {s["stage"]: s["state"] for s in manifest["stages"]}
    assert (states["01_corpus"], states["02_screening"], states["03_review_round1"]) == (
        "failed", "current", "not_current")
    failure = "\n".join(lines)
    assert "FAILED: 01_corpus at cell 3" in failure
    assert "previous outputs of 01_corpus removed (each folder holds only failed.json)" in failure
    assert f"what this attempt wrote is kept in {kept}" in failure
    assert "not current until it succeeds: 03_review_round1" in failure
    # A later stage asking for the failed one is told it failed, not that it never ran.
    with pytest.raises(FileNotFoundError, match="stage '01_corpus' failed in the last run"):
        stage.Stage("p", "03_review_round1", root).upstream("01_corpus", "corpus_source.json")

    assert run(4).ok
    assert sorted(p.name for p in (out / "01_corpus").iterdir()) == [
        "build.json", "corpus_source.json", "partial.csv", "stage.json", "t.csv"]
    assert not (out / stage.FAILED_DIR).exists()  # the failed attempt's files went with it
    assert read(out / "03_review_round1" / "upstream.json") == {"upstream_n": 4}
    assert store_identity(out) == store  # the same file, unchanged: never touched by a swap


def test_a_stage_reads_only_the_upstream_files_the_graph_declares(tmp_path: Path) -> None:
    review = stage.Stage("p", "03_review_round1", tmp_path)
    (tmp_path / "p" / "01_corpus").mkdir(parents=True)
    (tmp_path / "p" / "01_corpus" / "corpus_source.json").write_text("{}")
    assert review.upstream("01_corpus", "corpus_source.json").is_file()
    (tmp_path / "p" / "01_corpus" / "languages.csv").write_text("")  # 02's, not 03's
    with pytest.raises(stage.UndeclaredInput, match=r"03_review_round1 read "
                                                    r"01_corpus/languages.csv, which the stage "
                                                    r"graph does not declare"):
        review.upstream("01_corpus", "languages.csv")
    with pytest.raises(stage.UndeclaredInput):
        review.upstream_optional("05_subset", "subsets.json")


def test_stage_writes_in_place_unless_the_runner_names_its_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(stage.STAGING_ENV, raising=False)
    by_hand = stage.Stage("p", "05_subset", tmp_path)
    assert by_hand.dir == by_hand.final_dir == tmp_path / "p" / "05_subset"
    hand_dir = tmp_path / "p" / stage.HAND_DIR / "05_subset"  # what a hand run passes
    assert stage.Stage("p", "05_subset", tmp_path, write_dir=hand_dir).dir == hand_dir
    monkeypatch.setenv(stage.STAGING_ENV,
                       str(tmp_path / "other" / stage.STAGING_DIR / "05_subset"))
    assert stage.Stage("p", "05_subset", tmp_path).dir == tmp_path / "p" / "05_subset"  # not ours
    monkeypatch.setenv(stage.STAGING_ENV, str(tmp_path / "p" / stage.STAGING_DIR / "05_subset"))
    staged = stage.Stage("p", "05_subset", tmp_path)
    assert staged.dir == tmp_path / "p" / stage.STAGING_DIR / "05_subset"
    assert staged.final_dir == tmp_path / "p" / "05_subset"
    # the runner's staging folder wins over a hand run's
    assert stage.Stage("p", "05_subset", tmp_path, write_dir=hand_dir).dir == staged.dir
    # Another stage opened by the same notebook is never staged, so never swapped over.
    assert stage.Stage("p", "04_recall", tmp_path).dir == tmp_path / "p" / "04_recall"


def test_publish_retire_and_clear(tmp_path: Path) -> None:
    profile_root, staging = tmp_path / "p", tmp_path / "p" / stage.STAGING_DIR
    (profile_root / "01_corpus").mkdir(parents=True)
    (profile_root / "01_corpus" / "old.csv").write_text("old")
    (staging / "01_corpus").mkdir(parents=True)
    (staging / "01_corpus" / "new.csv").write_text("new")
    store = make_store(profile_root)
    assert stage.publish_staged(staging, profile_root) == ["01_corpus"]
    assert [p.name for p in (profile_root / "01_corpus").iterdir()] == ["new.csv"]
    assert list(staging.iterdir()) == []  # nothing left aside
    (staging / "01_corpus").mkdir()
    (staging / "01_corpus" / "half.csv").write_text("half")
    record = stage.retire_stage(profile_root, "01_corpus", {"status": "interrupted"}, staging)
    assert [p.name for p in record.parent.iterdir()] == [stage.FAILURE_RECORD]
    assert json.loads(record.read_text())["status"] == "interrupted"
    assert (profile_root / stage.FAILED_DIR / "01_corpus" / "half.csv").read_text() == "half"
    # a hand run's staged folder is swapped in over the failure record, its partial outputs go
    hand = profile_root / stage.HAND_DIR / "01_corpus"
    hand.mkdir(parents=True)
    (hand / "by_hand.csv").write_text("hand")
    stage.publish_folder(hand, profile_root)
    assert [p.name for p in (profile_root / "01_corpus").iterdir()] == ["by_hand.csv"]
    assert not hand.exists() and not (profile_root / stage.FAILED_DIR / "01_corpus").exists()
    stage.retire_stage(profile_root, "01_corpus", {"status": "failed"})
    stage.clear_failure_record(profile_root, "01_corpus")
    assert not (profile_root / "01_corpus").exists()
    assert store_identity(profile_root) == store


# --- 5. one run per outputs folder; a kernel that does not start ------------------------------

SLOW_CELLS = (
    "import os, pathlib, time\n"
    "pathlib.Path(outputs_root, profile, 'kernel.pid').write_text(str(os.getpid()))",
    "if seed != 0:\n    pathlib.Path(outputs_root, profile, 'sleeping.txt').write_text('')\n"
    "    time.sleep(120)",
    "pathlib.Path(outputs_root, profile, 'after.txt').write_text('ran')",
)
"""The slow notebook's cells after its parameters: 2 leaves ``kernel.pid``, 3 leaves
``sleeping.txt`` and sleeps unless ``seed`` is 0, 4 leaves ``after.txt``. The slow stage is
11_harness_validation, which reads ``seed`` in the default (paper, so replay) mode; the fast one
is 01_corpus, which reads no ``seed`` (11 reads its corpus record, for the rubrics)."""
SLOW = "11_harness_validation"


def fast_and_slow(project: Path, *slow_cells: str, text: str = "seed: 1\n") -> None:
    write_profile(project, "01_corpus", SLOW, text=text)
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    notebook(project / "notebooks" / f"{SLOW}.ipynb", *(slow_cells or SLOW_CELLS), seed=0)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "hbpsych_utils", "run", "p", *args]


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.notebook
def test_second_run_into_the_same_folder_is_refused_at_once(project: Path) -> None:
    fast_and_slow(project)
    out = project / "outputs"
    env = {**os.environ, "HBPSYCH_ROOT": str(project)}
    first = subprocess.Popen(cli("--outputs", str(out)), env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(out / "p" / "kernel.pid", first)  # the first run holds the lock, mid-notebook
        # The acceptance asks for "at once": refused before the profile is even read. So the
        # profile is now one that reading refuses (exit 2), and the second run still gets 3.
        profile = project / "params" / "p.yaml"
        valid = profile.read_text()
        profile.write_text("description: test\ncorpus: {max_conversations: -1}\n")
        with pytest.raises(config.ProfileError, match="max_conversations"):
            profiles.load_profile("p")
        second = subprocess.run(cli("--outputs", str(out)), env=env, text=True,
                                capture_output=True, timeout=60, check=False)
        assert second.returncode == runner.EXIT_LOCKED, second.stderr
        message = second.stderr.strip()
        assert message.startswith(f"error: profile 'p' is already running into {out / 'p'} "
                                  f"(pid {first.pid} on "), message
        assert f"-m hbpsych_utils run p --outputs {out}" in message
        assert "Traceback" not in message and second.stdout == ""
        profile.write_text(valid)
        # Another outputs folder is another run (seed 0: its 11 does not sleep).
        other = subprocess.run(cli("--outputs", str(project / "outputs" / "other"),
                                   "--set", "seed=0"),
                               env=env, text=True, capture_output=True, timeout=300,
                               check=False)
        assert other.returncode == 0, other.stdout + other.stderr
        assert "[1/2] 01_corpus done in" in other.stdout
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert not (out / "p" / runlock.HOLDER_FILE).exists()  # released with the run


def test_held_lock_refuses_in_process_too(project: Path, capsys) -> None:
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "raise SystemExit('must not run')")
    out = project / "outputs"
    with runlock.run_lock(out / "p", "p", "the first run"):
        assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_LOCKED
        err = capsys.readouterr().err
        assert f"profile 'p' is already running into {out / 'p'} (pid {os.getpid()}" in err
        assert "the first run" in err
        with pytest.raises(runlock.RunLocked):  # the library call is refused as well
            runner.run_profile("p", outputs_root=out, echo=lambda _: None)
    assert not (out / "p" / "notebooks").exists()


def flaky_execute(monkeypatch: pytest.MonkeyPatch, error: BaseException, times: int,
                  *, after_cell: int | None = None) -> list[int]:
    """papermill.execute_notebook failing ``times`` times with ``error`` (after the hook saw
    cell ``after_cell`` start, if given), then executing for real."""
    import papermill  # here, not at collection: papermill imports nbformat and jsonschema

    real, calls = papermill.execute_notebook, []

    def execute(*args, **kwargs):
        calls.append(1)
        if len(calls) <= times:
            if after_cell is not None:
                kwargs["on_cell_start"](cell=None, cell_index=after_cell)
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    return calls


@pytest.mark.slow
def test_kernel_that_does_not_start_is_started_once_more(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    calls = flaky_execute(monkeypatch,
                          RuntimeError("Kernel died before replying to kernel_info"), 1)
    lines: list[str] = []
    result = runner.run_profile("p", outputs_root=project / "outputs", echo=lines.append)
    assert result.ok and len(calls) == 2
    assert any("01_corpus: the kernel did not start (RuntimeError: Kernel died before replying "
               "to kernel_info); starting it once more" in line for line in lines), lines
    assert manifest_of(project / "outputs" / "p")["notebooks"][0]["status"] == "ok"


@pytest.mark.slow
def test_kernel_that_fails_twice_is_a_clean_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    write_profile(project, "01_corpus", text="corpus: {max_conversations: 1}\n")
    notebook(project / "notebooks" / "01_corpus.ipynb", STAGE_CELL, WRITE_CELL,
             max_conversations=None)
    out = project / "outputs"
    assert runner.main(["p", "--outputs", str(out)]) == 0  # a first run leaves outputs
    assert (out / "p" / "01_corpus" / "corpus_source.json").is_file()
    calls = flaky_execute(monkeypatch, zmq.error.ZMQError(errno.EADDRINUSE), 2)
    capsys.readouterr()
    # --force: 01 is up to date, so a plain second run would start no kernel at all
    assert runner.main(["p", "--outputs", str(out), "--force"]) == runner.EXIT_FAILED
    assert len(calls) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "  01_corpus: runs (--force)" in captured.out
    assert ("FAILED: 01_corpus: its kernel did not start (2 attempts): ZMQError: Address "
            "already in use") in captured.out
    error = {"cell": None, "ename": "ZMQError", "evalue": "Address already in use",
             "kernel": "did not start (2 attempts)"}
    entry = manifest_of(out / "p")["notebooks"][0]
    assert entry["status"] == "failed" and entry["error"] == error
    # The previous run's outputs do not pass for this run's.
    assert sorted(p.name for p in (out / "p" / "01_corpus").iterdir()) == [stage.FAILURE_RECORD]
    record = json.loads((out / "p" / "01_corpus" / stage.FAILURE_RECORD).read_text())
    assert record["error"] == error and record["partial_outputs"] is None


@pytest.mark.slow
@pytest.mark.notebook
def test_kernel_that_never_starts_for_real_is_one_clean_error(project: Path) -> None:
    """A kernel whose process exits at once (an ipykernel_launcher that does): jupyter_client's
    own 'Kernel died before replying to kernel_info', retried once, then the notebook fails."""
    broken = project / "broken"
    broken.mkdir()
    (broken / "ipykernel_launcher.py").write_text("import sys\nsys.exit(3)\n")
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    out = project / "outputs"
    env = {**os.environ, "HBPSYCH_ROOT": str(project), "PYTHONPATH": str(broken)}
    proc = subprocess.run(cli("--outputs", str(out)), env=env, text=True, capture_output=True,
                          timeout=300, check=False)
    assert proc.returncode == runner.EXIT_FAILED
    assert proc.stderr == ""  # nbclient's own log line and any traceback are not shown
    assert proc.stdout.splitlines()[3:] == [
        "  01_corpus: the kernel did not start (RuntimeError: Kernel died before replying to "
        "kernel_info); starting it once more",
        "FAILED: 01_corpus: its kernel did not start (2 attempts): RuntimeError: Kernel died "
        "before replying to kernel_info",
        f"book: {out / 'p' / 'book' / 'index.html'}",  # the book marks 01 failed
        f"profile 'p': 0 notebooks ran, 1 failed (01_corpus), 0 up to date; outputs in "
        f"{out / 'p'}"]
    entry = manifest_of(out / "p")["notebooks"][0]
    assert entry["status"] == "failed" and entry["error"]["kernel"] == "did not start (2 attempts)"


def test_kernel_dying_during_a_cell_is_not_retried(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    from nbclient.exceptions import DeadKernelError

    calls = flaky_execute(monkeypatch, DeadKernelError("Kernel died"), 1, after_cell=1)
    lines: list[str] = []
    result = runner.run_profile("p", outputs_root=project / "outputs", echo=lines.append)
    assert result.failed == "01_corpus" and len(calls) == 1
    entry = manifest_of(project / "outputs" / "p")["notebooks"][0]
    assert entry["error"] == {"cell": 2, "ename": "DeadKernelError", "evalue": "Kernel died",
                              "kernel": "died"}
    assert any(line.startswith("FAILED: 01_corpus at cell 2: its kernel died") for line in lines)


# --- 6. Ctrl-C -----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.notebook
def test_ctrl_c_stops_cleanly_with_one_line_and_exit_130(project: Path) -> None:
    staged = ("from hbpsych_utils.pipeline.stage import Stage\n"
              f"stage = Stage(profile, {SLOW!r}, outputs_root)\n"
              'stage.write_json("partial.json", {"seed": seed})\n' + SLOW_CELLS[0])
    fast_and_slow(project, staged, *SLOW_CELLS[1:],
                  'stage.write_json("harness.json", {"seed": seed})')
    out = project / "outputs"
    env = {**os.environ, "HBPSYCH_ROOT": str(project), runner.LAUNCHER_ENV: "bash run_all.sh"}
    args = ["--outputs", str(out), "--set", "seed=0"]
    done = subprocess.run(cli(*args), env=env, text=True, capture_output=True,
                          timeout=300, check=False)  # seed 0: a full run, nothing slow
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "p" / SLOW / "harness.json").is_file()
    store = make_store(out / "p")
    (out / "p" / "kernel.pid").unlink()
    (out / "p" / "after.txt").unlink()

    # seed 1: 11 reads seed, so it runs again (and sleeps); 01 does not, so it is up to date
    args = ["--outputs", str(out), "--set", "seed=1"]
    proc = subprocess.Popen(cli(*args), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(out / "p" / "sleeping.txt", proc)  # in the sleeping cell (3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stdout + stderr
    # Exactly one line besides the progress lines, naming the notebook and the way back.
    assert stderr.splitlines() == [
        f"interrupted: {SLOW} (at cell 3) of profile 'p'; resume with: bash run_all.sh p "
        f"--outputs {out} --set seed=1 (model calls already paid are reused from "
        f"{out / 'p' / 'llm_store.sqlite'})"], stderr
    progress = re.compile(rf"profile 'p' with --set seed=1: |  01_corpus: up to date$"
                          rf"|  {SLOW}: runs \(seed changed \(0 → 1\)\)$|\[1/1\] {SLOW} ")
    assert [line for line in stdout.splitlines() if not progress.match(line)] == []
    manifest = manifest_of(out / "p")
    assert [(n["notebook"], n["status"]) for n in manifest["notebooks"]] == [
        (SLOW, "interrupted")]
    assert manifest["notebooks"][0]["error"]["cell"] == 3
    states = {s["stage"]: s for s in manifest["stages"]}
    assert states["01_corpus"]["state"] == "current"  # the earlier stage's outputs stand
    assert states[SLOW]["state"] == "failed"
    assert states[SLOW]["reason"] == "its last run was interrupted: KeyboardInterrupt: Ctrl-C"
    record = json.loads((out / "p" / SLOW / stage.FAILURE_RECORD).read_text())
    assert record["status"] == "interrupted" and record["previous_outputs"] == "removed"
    assert not (out / "p" / SLOW / "harness.json").exists()
    assert json.loads((Path(record["partial_outputs"]) / "partial.json").read_text()) == {
        "seed": 1}
    assert not (out / "p" / "after.txt").exists()  # no later cell ran
    assert store_identity(out / "p") == store
    assert_gone(int((out / "p" / "kernel.pid").read_text()))
    assert not (out / "p" / runlock.HOLDER_FILE).exists()


def assert_gone(kernel: int) -> None:
    """The kernel was shut down or killed, not left behind."""
    deadline = time.monotonic() + 30
    while True:
        try:
            os.kill(kernel, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, f"kernel {kernel} still running"
        time.sleep(0.2)


MARKER = "open(f'{outputs_root}/{profile}/after.txt', 'w').write('ran')"
"""A cell that leaves ``after.txt`` behind if it runs (it must not after a Ctrl-C)."""

SWALLOWED_SIGINT = ("import os, signal, time\ntry:\n    os.kill(os.getppid(), signal.SIGINT)\n"
                    "    time.sleep(60)\nexcept KeyboardInterrupt:\n    pass")
"""A cell that sends the runner a Ctrl-C and catches the KeyboardInterrupt the runner forwards."""


@pytest.mark.slow
def test_ctrl_c_forwarded_to_the_kernel_stops_the_cell(project: Path) -> None:
    """In process: the notebook sends SIGINT to this (the runner's) process, as a terminal
    would; the runner forwards it to the kernel and raises RunInterrupted once recorded."""
    interrupt = "import os, signal, time\nos.kill(os.getppid(), signal.SIGINT)\ntime.sleep(60)"
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", interrupt, MARKER)
    out = project / "outputs" / "p"
    handler = signal.getsignal(signal.SIGINT)
    start = time.monotonic()
    with pytest.raises(runner.RunInterrupted) as caught:
        runner.run_profile("p", outputs_root=project / "outputs", echo=lambda _: None)
    assert time.monotonic() - start < 55  # the sleep was cut short, not waited out
    assert caught.value.notebook == "01_corpus"
    assert caught.value.where == "01_corpus (at cell 2)"
    assert isinstance(caught.value, KeyboardInterrupt)
    assert not (out / "after.txt").exists()
    entry = manifest_of(out)["notebooks"][0]
    assert entry["status"] == "interrupted" and entry["error"]["cell"] == 2
    assert signal.getsignal(signal.SIGINT) is handler  # the run's handler is gone


@pytest.mark.slow
def test_ctrl_c_swallowed_by_a_cell_still_stops_before_the_next(project: Path) -> None:
    # 02 (replay) does not read 01: only the Ctrl-C keeps it from running (one notebook at a
    # time: with two, 02 would start beside 01)
    write_profile(project, "01_corpus", "02_screening")
    notebook(project / "notebooks" / "01_corpus.ipynb", SWALLOWED_SIGINT, MARKER)
    notebook(project / "notebooks" / "02_screening.ipynb", MARKER)
    with pytest.raises(runner.RunInterrupted) as caught:
        runner.run_profile("p", outputs_root=project / "outputs", echo=lambda _: None,
                           jobs=1)
    assert caught.value.notebook == "01_corpus"
    out = project / "outputs" / "p"
    assert not (out / "after.txt").exists()  # neither the next cell nor 02 ran
    assert [(n["notebook"], n["status"]) for n in manifest_of(out)["notebooks"]] == [
        ("01_corpus", "interrupted")]


@pytest.mark.slow
def test_ctrl_c_after_a_notebook_finished_stops_before_the_next(project: Path) -> None:
    swallow = (SWALLOWED_SIGINT + '\nStage(profile, "01_corpus", outputs_root)'
               '.write_json("corpus_source.json", {"done": True})')
    write_profile(project, "01_corpus", "02_screening")
    notebook(project / "notebooks" / "01_corpus.ipynb",
             "from hbpsych_utils.pipeline.stage import Stage", swallow)
    notebook(project / "notebooks" / "02_screening.ipynb", MARKER)
    with pytest.raises(runner.RunInterrupted) as caught:
        runner.run_profile("p", outputs_root=project / "outputs", echo=lambda _: None,
                           jobs=1)
    assert caught.value.where == "02_screening (before it started)"
    out = project / "outputs" / "p"
    assert not (out / "after.txt").exists()
    # kept, with the runner's build record
    assert json.loads((out / "01_corpus" / "corpus_source.json").read_text()) == {"done": True}
    assert (out / "01_corpus" / "build.json").is_file()
    assert manifest_of(out)["notebooks"] == [
        {**manifest_of(out)["notebooks"][0], "notebook": "01_corpus", "status": "ok"},
        {"notebook": "02_screening", "status": "interrupted", "seconds": 0.0, "started": False}]


# --- 06's cost plan prices the judges of the run's profile, however the profile was given -----


def priced_judges(run_dir: Path) -> list[str]:
    """The judges the grading rows of 06's ``cost_plan.csv`` price."""
    import pandas as pd

    plan = pd.read_csv(run_dir / "06_generation" / "cost_plan.csv")
    return sorted(plan[(plan.phase == "grading") & (plan.model != "total")].model)


@pytest.mark.slow
@pytest.mark.notebook
def test_06_prices_the_judges_of_a_set_override_and_of_a_profile_given_by_path(
        tmp_path: Path, mirror: Path) -> None:
    from hbpsych_utils import study

    one, two = study.JUDGE_PANEL[1], study.JUDGE_PANEL[2]
    out = tmp_path / "out"
    # 06 reads 01's corpus record: --only names both (06 alone would read a stale 01)
    only = ["01_corpus", "06_generation"]
    assert runner.run_profile("default", outputs_root=out, only=only,
                              overrides={"grading.judges": [one]}, echo=print).ok
    assert priced_judges(out / "default") == [one]
    path = tmp_path / "elsewhere" / "mine.yaml"  # no params/mine.yaml to fall back on
    path.parent.mkdir()
    path.write_text(f"description: judges of its own\ngrading:\n  judges: [{one}, {two}]\n"
                    "corpus:\n  allow_partial: true\n")  # the offline mirror's corpus, as default
    assert runner.run_profile(str(path), outputs_root=out, only=only, echo=print).ok
    assert priced_judges(out / "mine") == sorted([one, two])


# --- a damaged LLM store stops the run before any notebook -------------------------------------

def test_a_damaged_store_stops_the_run_before_any_notebook(project: Path, capsys) -> None:
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "raise SystemExit('must not run')")
    out = project / "outputs"
    (out / "p").mkdir(parents=True)
    store = out / "p" / "llm_store.sqlite"
    store.write_bytes(b"garbage " * 1000)
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert captured.err.startswith(f"error: {store}: damaged (file is not a database)")
    assert len(captured.err.splitlines()) == 1 and "01_corpus ..." not in captured.out
    assert not (out / "p" / "notebooks" / "01_corpus.ipynb").exists()
    manifest = manifest_of(out / "p")
    assert manifest["notebooks"] == []
    assert manifest["error"] == captured.err.strip().removeprefix("error: ")
    assert store.read_bytes() == b"garbage " * 1000


# --- 8. Ctrl-C at any point; the file system; the caller's paths; the lock before the set-up ----

def test_ctrl_c_swallowed_during_the_book_build_still_stops_the_run(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A library that catches the KeyboardInterrupt of a Ctrl-C (a bare ``except:``) while the
    book is built: the run still ends with exit 130 and one line, not 0."""
    from hbpsych_utils.reporting import book
    from hbpsych_utils.runner import execute

    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    monkeypatch.setattr(execute, "execute", lambda *args: None)  # a notebook, without a kernel

    def swallowing(out: Path) -> Path:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        return out / "book" / "index.html"

    monkeypatch.setattr(book, "build_book", swallowing)
    out = project / "outputs"
    handler = signal.getsignal(signal.SIGINT)
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"interrupted: the book (every notebook ran) of profile 'p'; resume with: "
        f"{sys.executable} -m hbpsych_utils run p --outputs {out}"], err
    assert signal.getsignal(signal.SIGINT) is handler


SIGINT_IGNORING_CELL = """\
import pathlib, time
pathlib.Path(outputs_root, profile, 'sleeping.txt').write_text('')
for _ in range(1200):
    try:
        time.sleep(0.1)
    except KeyboardInterrupt:
        pathlib.Path(outputs_root, profile, 'caught.txt').write_text('')"""
"""A cell that catches every KeyboardInterrupt the runner forwards: only a second Ctrl-C
stops it."""


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("when", ["while-the-kernel-starts", "twice-in-a-row",
                                  "the-cell-ignores-the-first"])
def test_a_second_ctrl_c_stops_at_once_with_one_line(project: Path, when: str) -> None:
    """Ctrl-C twice while the kernel starts (it is not sent the first: it would print a
    traceback of its own), twice in a row in a cell, or a second for a cell that caught the
    first: one line, exit 130, the kernel gone."""
    cell = SIGINT_IGNORING_CELL if when == "the-cell-ignores-the-first" else SLOW_CELLS[1]
    fast_and_slow(project, SLOW_CELLS[0], cell)
    out = project / "outputs"
    env = {**os.environ, "HBPSYCH_ROOT": str(project), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cli("--outputs", str(out)), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if when == "while-the-kernel-starts":
        assert proc.stdout is not None
        while not proc.stdout.readline().startswith(f"[2/2] {SLOW} ..."):
            assert proc.poll() is None
        time.sleep(0.2)  # the kernel is importing what it needs
    else:
        wait_for(out / "p" / "sleeping.txt", proc)
    proc.send_signal(signal.SIGINT)
    if when == "the-cell-ignores-the-first":
        wait_for(out / "p" / "caught.txt", proc)  # the cell caught it and sleeps on
    else:
        time.sleep(0.15)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - start < 20
    assert proc.returncode == runner.EXIT_INTERRUPTED, stdout + stderr
    assert "Traceback" not in stdout + stderr
    # while the kernel starts, no cell has run (on a fast machine the first may have begun)
    where = re.escape(SLOW) + (r" \(at cell \d\)" if when != "while-the-kernel-starts" else
                               r"( \(at cell \d\))?")
    assert len(stderr.splitlines()) == 1 and re.fullmatch(
        f"interrupted: {where} of profile 'p'; resume with: "
        + re.escape(f"{shlex.join(cli())} --outputs {out}"), stderr.strip()), stderr
    if when != "while-the-kernel-starts":
        assert_gone(int((out / "p" / "kernel.pid").read_text()))
    entry = manifest_of(out / "p")["notebooks"][-1]
    assert (entry["notebook"], entry["status"]) == (SLOW, "interrupted")


@pytest.mark.slow
def test_ctrl_c_reaches_a_kernel_only_while_a_cell_runs() -> None:
    """A kernel that is still starting is not sent SIGINT (it would print a traceback of its
    own: the run stops before the first cell); a second Ctrl-C kills it."""
    from types import SimpleNamespace

    from hbpsych_utils.runner.execute import RunWatch

    kernel = subprocess.Popen(["sleep", "60"], start_new_session=True)
    handler = signal.getsignal(signal.SIGINT)
    try:
        with RunWatch() as watch, watch.running_notebooks():
            watch.notebook("01_corpus").kernels.append(
                SimpleNamespace(provisioner=SimpleNamespace(pgid=kernel.pid)))
            os.kill(os.getpid(), signal.SIGINT)  # while the kernel starts: noted only
            assert watch.requested and kernel.poll() is None
            os.kill(os.getpid(), signal.SIGINT)  # again: killed
            assert kernel.wait(timeout=10) == -signal.SIGKILL
        assert signal.getsignal(signal.SIGINT) is handler  # restored after the interruption
    finally:
        signal.signal(signal.SIGINT, handler)
        kernel.kill()
        kernel.wait()


def test_file_system_errors_are_one_line_naming_the_path(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "raise SystemExit('must not run')")
    root = project / "outputs" / "a-file"
    root.parent.mkdir()
    root.write_text("not a folder")
    assert runner.main(["p", "--outputs", str(root)]) == runner.EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.err == (f"error: {root}: a file where a folder is needed: move it, or write "
                            "somewhere else\n")
    assert "Traceback" not in captured.out

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(out / "p"))

    from hbpsych_utils.runner import orchestrate

    out = project / "outputs"
    monkeypatch.setattr(orchestrate, "_run_locked", read_only)
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    assert capsys.readouterr().err == (f"error: {out / 'p'}: permission denied: "
                                       "make it writable, or write somewhere else\n")


def test_a_failed_write_names_its_file_and_the_problem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hbpsych_utils.core import writes

    def full(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # as a full disk: no file named

    monkeypatch.setattr(writes.os, "replace", full)
    target = tmp_path / "01_corpus" / "failed.json"
    with pytest.raises(OSError) as caught:
        writes.write_json(target, {"status": "failed"})
    assert writes.describe_os_error(caught.value) == (
        f"{target}: no space left on the device: free some space, then run again")
    assert list(target.parent.iterdir()) == []  # no temp file left behind


def test_a_book_folder_that_is_a_link_loop_is_named(tmp_path: Path) -> None:
    from hbpsych_utils.core.writes import describe_os_error

    book = tmp_path / "book"
    book.symlink_to(book)  # book -> book
    (tmp_path / ".book-new").mkdir()
    with pytest.raises(OSError) as caught:
        (tmp_path / ".book-new").rename(book)  # what the book build does last
    assert describe_os_error(caught.value) == (
        f"{book}: a symbolic link that leads nowhere (a loop, or its target is missing): "
        "remove it, or point it at a folder")


def test_paths_on_the_command_line_are_the_callers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_all.sh runs Python from the project folder and says where it was started."""
    from hbpsych_utils.core import paths
    from hbpsych_utils.runner import cli as runner_cli

    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.setenv(paths.CALLER_DIR_ENV, str(caller))
    assert runner_cli.profile_dir("default", Path("rel")) == caller / "rel" / "default"
    assert runner_cli.profile_dir("mine/p.yaml", Path("/abs")) == Path("/abs/p")
    assert config.profile_path("mine/p.yaml") == caller / "mine" / "p.yaml"
    assert config.profile_path("default") == paths.params_dir() / "default.yaml"
    monkeypatch.setenv("HBPSYCH_OUTPUTS", "elsewhere")
    assert paths.outputs_root() == caller / "elsewhere"


@pytest.mark.slow
@pytest.mark.notebook
def test_run_all_writes_a_relative_outputs_folder_where_it_was_started(
        project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    caller = tmp_path_factory.mktemp("elsewhere")  # outside the project: not its sources
    (caller / "mine.yaml").write_text("description: a profile file beside the caller\n"
                                      "notebooks: [01_corpus]\n")
    env = {**os.environ, "HBPSYCH_ROOT": str(project), "HBPSYCH_PYTHON": sys.executable}
    for profile, name in (("p", "p"), ("mine.yaml", "mine")):
        args = [profile, "--outputs", "rel", "--jobs", "1"]  # run_all.sh passes --jobs on
        proc = subprocess.run(["bash", str(RUN_ALL), *args], cwd=caller,
                              env=env, text=True, capture_output=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (caller / "rel" / name / "01_corpus" / "build.json").is_file()
        manifest = json.loads((caller / "rel" / name / "manifest.json").read_text())
        assert manifest["command"] == f"bash {shlex.quote(str(RUN_ALL))} {shlex.join(args)}"
    assert not (RUN_ALL.parent / "rel").exists()


@pytest.mark.slow
def test_run_all_refuses_a_second_run_before_its_environment_check(project: Path) -> None:
    write_profile(project, "01_corpus")
    out = project / "outputs"
    # A Python that does not exist: the environment check would fail; the lock comes first.
    env = {**os.environ, "HBPSYCH_ROOT": str(project), "HBPSYCH_PYTHON": "/nonexistent/python",
           "HBPSYCH_BASE_PYTHON": sys.executable}
    with runlock.run_lock(out / "p", "p", "the first run"):
        start = time.monotonic()
        proc = subprocess.run(["bash", str(RUN_ALL), "p", "--outputs", "outputs"], cwd=project,
                              env=env, text=True, capture_output=True, timeout=60, check=False)
        seconds = time.monotonic() - start
    assert proc.returncode == runner.EXIT_LOCKED, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stdout == ""
    assert proc.stderr.startswith(
        f"error: profile 'p' is already running into {out / 'p'} (pid {os.getpid()} on ")
    assert "the first run); wait for that run to finish" in proc.stderr
    assert seconds < 3, seconds


def test_a_kernels_error_lines_are_named_cleaned_and_dropped_after_ctrl_c(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a kernel prints on its own error stream reaches the terminal named by its notebook
    and without keys, until Ctrl-C; then it is read and dropped (a stopping kernel's complaints
    about its closed sockets are not news)."""
    from hbpsych_utils.runner.execute import NotebookWatch, RunWatch

    key = "sk-proj-" + "Zq8vR2xLm4Tn7Wc1Yb6Hs9Kd3Jf5Pg0A"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    run = RunWatch()
    watch = NotebookWatch(run, "07_grading")
    lines: list[str] = []
    read_end, write_end = os.pipe()
    os.write(write_end, f"first {key}\n".encode())
    os.close(write_end)
    watch.forward_errors(read_end, lines.append)
    assert lines == ["  07_grading (kernel): first [OPENAI_API_KEY removed]\n"]

    run.requested = True
    read_end, write_end = os.pipe()
    os.write(write_end, b"Traceback (most recent call last):\n  zmq.error.ZMQError\n")
    os.close(write_end)
    watch.forward_errors(read_end, lines.append)
    assert len(lines) == 1


def test_ctrl_c_while_an_outcome_is_recorded_waits_for_the_record() -> None:
    """A Ctrl-C that would stop the runner at once (no kernel left to kill) while a notebook's
    outcome is being recorded is raised only once the record is written: the manifest never
    lacks the notebook the interruption line names."""
    from hbpsych_utils.runner.execute import RunWatch

    watch, written = RunWatch(), []
    with watch.running_notebooks():
        watch._on_sigint(signal.SIGINT, None)  # the first: noted (no kernel running)
        with pytest.raises(KeyboardInterrupt), watch.recording():
            watch._on_sigint(signal.SIGINT, None)  # the second, mid-record: held
            written.append("manifest")
        assert written == ["manifest"]
        with pytest.raises(KeyboardInterrupt):
            watch._on_sigint(signal.SIGINT, None)  # outside a record: at once
