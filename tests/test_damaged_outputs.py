"""Outputs verified before they are trusted: a stage's file that is no longer what the runner
wrote (cut, emptied, deleted, overwritten with NULs) is run again by the next ``run``, saying
why, and refused by ``book`` and ``publish`` in one line naming it; a damaged executed notebook
or ``metrics.json`` is one line, never a traceback; an empty LLM store is refused like a
damaged one.

The fast tests craft run folders (build records written as the runner writes them); the slow
ones damage a private copy of the session's smoke run and run the real runner on it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FAKE_KEYS, notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.pipeline import graph, profiles, state
from hbpsych_utils.reporting import book, publish
from hbpsych_utils.runner import cli

DEFAULT = profiles.load_profile("default")
FILES = {graph.SUBSET: {"subsets.json": b'{"v1": "v1.json"}', "v1.json": b"[1]"},
         graph.SCORES: {"metrics.json": b'{"mode": "paper"}', "table1_v1.csv": b"a,b\n1,2\n"}}
EXECUTED = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def one_line(text: str) -> str:
    """The only line of ``text`` (an error the user reads), which holds no traceback."""
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def crafted_run(root: Path) -> Path:
    """``root/default``: every stage of the default profile built by the runner (05 and 08 with
    files and executed notebooks), and the manifest ``book`` and ``publish`` read the profile
    from."""
    run = root / "default"
    for name, inputs in state.expected_inputs(DEFAULT).items():
        folder = run / name
        folder.mkdir(parents=True)
        executed = None
        for rel, data in FILES.get(name, {}).items():
            (folder / rel).write_bytes(data)
            executed = state.executed_path(run, name)
            executed.parent.mkdir(exist_ok=True)
            executed.write_bytes(EXECUTED)
        state.write_build(folder, name, by=state.RUNNER, inputs=inputs, executed=executed)
    (run / "manifest.json").write_text(json.dumps({
        "profile": "default", "profile_values": DEFAULT.model_dump(mode="json"),
        "mirror": True}))
    return run


# --- book and publish refuse a folder whose files are not what its records say ------------------

def test_book_and_publish_refuse_a_changed_file_in_one_line(tmp_path: Path, capsys) -> None:
    run = crafted_run(tmp_path)
    table = run / graph.SCORES / "table1_v1.csv"
    table.write_bytes(b"a,b\n")  # cut
    assert cli.book_main(["default", "--outputs", str(tmp_path)]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"error: {table}: changed since the runner wrote it for 08_scores")
    assert line.endswith(f"bash run_all.sh default --outputs {tmp_path}")
    assert not (run / book.BOOK_DIR).exists() and not (run / book.BUILD_DIR).exists()
    assert cli.publish_main(["default", "--outputs", str(tmp_path), "--no-book"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"error: {table}: changed since the runner wrote it for 08_scores")
    assert not (run / publish.PUBLISHED_DIR).exists()


def test_book_refuses_a_deleted_or_nul_executed_notebook(tmp_path: Path, capsys) -> None:
    run = crafted_run(tmp_path)
    executed = state.executed_path(run, graph.SUBSET)
    executed.write_bytes(b"\0" * len(EXECUTED))
    with pytest.raises(book.BookError, match=rf"^{executed}: changed since the runner wrote"):
        book.check_records(run)
    executed.unlink()
    assert cli.book_main(["default", "--outputs", str(tmp_path)]) == 1
    assert one_line(capsys.readouterr().err).startswith(
        f"error: {executed}: missing; the runner wrote it for 05_subset")
    with pytest.raises(publish.PublishError, match=rf"^{executed}: missing; "):
        publish.publish(run)


def test_a_stage_the_profile_does_not_run_is_not_checked(tmp_path: Path) -> None:
    """The book leaves such a stage out, and nothing can rebuild it under this profile."""
    run = crafted_run(tmp_path)
    (run / graph.SCORES / "table1_v1.csv").write_bytes(b"")
    scoreless = DEFAULT.model_copy(update={"notebooks": [graph.CORPUS, graph.SUBSET]})
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["profile_values"] = scoreless.model_dump(mode="json")
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert book.check_records(run) is None


@pytest.mark.parametrize("content", [b"\0" * 400, EXECUTED[: len(EXECUTED) // 2], b"[]",
                                     b'{"cells": 5, "nbformat": 4}'])
def test_an_executed_notebook_that_is_not_one_is_a_book_error_naming_it(
        tmp_path: Path, content: bytes) -> None:
    """What the records cannot vouch for (a hand run's stage, an older version's record) is
    still read safely: one error naming the file, never nbformat's traceback."""
    src = tmp_path / "08_scores.ipynb"
    src.write_bytes(content)
    with pytest.raises(book.BookError) as caught:
        book.prepare_notebook(src, tmp_path / "out.ipynb")
    message = str(caught.value)
    assert message.startswith(f"{src}:") and "\n" not in message
    assert not (tmp_path / "out.ipynb").exists()


# --- the runner: a damaged file runs its stage again; what it leaves is one line ----------------

def fake_execute(files: dict[str, bytes]):
    """``execute.execute`` without a kernel: writes ``files`` into the stage's staging folder
    and an executed notebook, as a notebook that succeeded would."""

    def execute(nb: Path, target: Path, params: dict, staging: Path, *_: object) -> None:
        folder = staging / nb.stem
        folder.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            (folder / rel).write_bytes(data)
        target.write_bytes(EXECUTED)

    return execute


def test_the_runner_reruns_a_damaged_stage_and_a_book_it_cannot_build_is_one_line(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from hbpsych_utils.runner import execute

    write_profile(project, "01_corpus", "02_screening")  # in replay 02 reads nothing of 01
    for name in ("01_corpus", "02_screening"):
        notebook(project / "notebooks" / f"{name}.ipynb", "y = 1")
    monkeypatch.setattr(execute, "execute", fake_execute({"t.csv": b"n\n1\n2\n3\n"}))
    out = project / "outputs"
    lines: list[str] = []
    assert runner.run_profile("p", outputs_root=out, echo=lines.append).ok
    run = out / "p"
    (run / "01_corpus" / "t.csv").write_bytes(b"n\n1\n")
    # --only leaves 01 as it is and says why; the book refuses the folder, in one line
    assert runner.main(["p", "--outputs", str(out), "--only", "02_screening"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert ("  01_corpus: not current (its output t.csv changed since it was written); not "
            "selected by --only") in captured.out.splitlines()
    [failed] = [x for x in captured.out.splitlines() if x.startswith("FAILED")]
    assert failed.startswith(f"FAILED: the book: {run / '01_corpus' / 't.csv'}: changed since")
    # the next run runs 01 again, saying why, and the folder is whole again
    lines.clear()
    result = runner.run_profile("p", outputs_root=out, echo=lines.append)
    assert "  01_corpus: runs (its output t.csv changed since it was written)" in lines
    assert [n["notebook"] for n in result.notebooks] == ["01_corpus"]
    assert (run / "01_corpus" / "t.csv").read_bytes() == b"n\n1\n2\n3\n"
    assert state.damaged_outputs(run) == []


def test_an_empty_store_stops_the_run_before_any_notebook(project: Path, capsys) -> None:
    """A 0-byte llm_store.sqlite would be taken by SQLite for a new store: every answer bought
    again. It is refused like a damaged one, naming the mv that sets it aside."""
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "raise SystemExit('must not run')")
    out = project / "outputs"
    (out / "p").mkdir(parents=True)
    store = out / "p" / "llm_store.sqlite"
    store.write_bytes(b"")
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith(f"error: {store}: damaged (an empty file, 0 bytes")
    assert f"mv {store} {store}.damaged" in line
    assert "01_corpus ..." not in captured.out
    assert store.stat().st_size == 0  # left as it was


# --- the real runner on a damaged copy of the session's smoke run (slow) -------------------------

@pytest.fixture
def smoke_copy(smoke_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the session's smoke run (never damage the shared one), in the
    environment it was made in (the mirror is part of its stages' inputs)."""
    for key, value in FAKE_KEYS.items():
        monkeypatch.setenv(key, value)
    return Path(shutil.copytree(smoke_run, tmp_path / "runs" / "smoke", symlinks=True))


def cut_in_half(path: Path) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return data


def run_again(run: Path) -> tuple[runner.RunResult, list[str]]:
    lines: list[str] = []
    return runner.run_profile("smoke", outputs_root=run.parent, echo=lines.append), lines


@pytest.mark.slow
def test_scores_cut_in_half_is_refused_by_publish_and_run_again(smoke_copy: Path,
                                                                capsys) -> None:
    scores = smoke_copy / graph.GRADING / "scores.csv"
    whole = cut_in_half(scores)
    assert cli.publish_main(["smoke", "--outputs", str(smoke_copy.parent), "--no-book"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"error: {scores}: changed since the runner wrote it for 07_grading")
    result, lines = run_again(smoke_copy)
    assert result.ok
    assert "  07_grading: runs (its output scores.csv changed since it was written)" in lines
    assert [n["notebook"] for n in result.notebooks] == [graph.GRADING]
    assert scores.read_bytes() == whole  # rebuilt from the store: the same answers
    assert cli.publish_main(["smoke", "--outputs", str(smoke_copy.parent), "--no-book"]) == 0


@pytest.mark.slow
def test_a_deleted_executed_notebook_is_run_again(smoke_copy: Path) -> None:
    executed = smoke_copy / "notebooks" / "07_grading.ipynb"
    executed.unlink()
    result, lines = run_again(smoke_copy)
    assert result.ok
    assert ("  07_grading: runs (its executed notebook notebooks/07_grading.ipynb is missing)"
            in lines)
    assert [n["notebook"] for n in result.notebooks] == [graph.GRADING]
    assert executed.is_file()
    assert (smoke_copy / book.BOOK_DIR / "07_grading.html").is_file()


@pytest.mark.slow
def test_a_nul_executed_notebook_is_one_line_in_book_and_run_again(smoke_copy: Path,
                                                                   capsys) -> None:
    executed = smoke_copy / "notebooks" / "08_scores.ipynb"
    executed.write_bytes(b"\0" * executed.stat().st_size)
    assert cli.book_main(["smoke", "--outputs", str(smoke_copy.parent)]) == 1
    assert one_line(capsys.readouterr().err).startswith(f"error: {executed}: changed since")
    result, lines = run_again(smoke_copy)
    assert result.ok and [n["notebook"] for n in result.notebooks] == [graph.SCORES]
    assert ("  08_scores: runs (its executed notebook notebooks/08_scores.ipynb changed since "
            "it was written)") in lines
    assert json.loads(executed.read_text())["cells"]


@pytest.mark.slow
def test_a_damaged_metrics_file_is_one_line_in_run_and_book(smoke_copy: Path, capsys) -> None:
    metrics = smoke_copy / graph.GRADING / "metrics.json"
    whole = cut_in_half(metrics)
    assert cli.book_main(["smoke", "--outputs", str(smoke_copy.parent)]) == 1
    assert one_line(capsys.readouterr().err).startswith(f"error: {metrics}: changed since")
    # a run that leaves 07 as it is (--only): the manifest names the file, the book refuses
    assert runner.main(["smoke", "--outputs", str(smoke_copy.parent), "--only",
                        graph.HARNESS]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err and not captured.err
    [failed] = [x for x in captured.out.splitlines() if x.startswith("FAILED")]
    assert failed.startswith(f"FAILED: the book: {metrics}: changed since")
    manifest = json.loads((smoke_copy / "manifest.json").read_text())
    assert [u.split(":")[0] for u in manifest["unreadable"]] == [str(metrics)]
    # a whole run rebuilds it
    result, lines = run_again(smoke_copy)
    assert result.ok and [n["notebook"] for n in result.notebooks] == [graph.GRADING]
    assert "  07_grading: runs (its output metrics.json changed since it was written)" in lines
    # the same results; what this attempt paid differs (every answer came from the store)
    paid = ("spend", "cost", "tokens")
    rebuilt, before = json.loads(metrics.read_text()), json.loads(whole)
    assert rebuilt.keys() == before.keys()
    assert {k: v for k, v in rebuilt.items() if not any(w in k for w in paid)} == {
        k: v for k, v in before.items() if not any(w in k for w in paid)}
