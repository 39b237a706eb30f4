"""Every file-system error names its path: a full disk while papermill saves an executed copy,
while Sphinx or ``shutil`` writes the book, or a ``book/`` that is a symbolic link, is one line
naming the file or folder, never "(no path)"."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from conftest import notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.__main__ import main as cli

MUST_NOT_RUN = "raise SystemExit('must not run')"


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def full_disk(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")  # as a full disk: no file named


def test_a_full_disk_during_a_notebook_names_the_executed_copy(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """ENOSPC during 07 said "(no path)": papermill saving the executed copy names no file."""
    from hbpsych_utils.runner import execute

    write_profile(project, "07_grading")
    notebook(project / "notebooks" / "07_grading.ipynb", MUST_NOT_RUN)
    monkeypatch.setattr(execute, "execute", full_disk)
    out = project / "outputs"
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    line = one_error_line(capsys.readouterr().err)
    assert line == (f"error: {out / 'p' / 'notebooks' / '07_grading.ipynb'}: no space left on "
                    "the device: free some space, then run again")


@pytest.mark.parametrize("error", ["full-disk", "copytree"])
def test_a_full_disk_while_the_book_is_built_names_the_book(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys, error: str) -> None:
    """ENOSPC during the book said "(no path)" (Sphinx and shutil name no file; copytree's
    error lists the files it could not copy)."""
    from hbpsych_utils.reporting import book
    from hbpsych_utils.runner import execute

    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    monkeypatch.setattr(execute, "execute", lambda *args: None)  # a notebook, without a kernel
    out = project / "outputs"
    copy_target = out / "p" / ".book-new" / "index.html"

    def failing(*args: object, **kwargs: object) -> None:
        if error == "copytree":
            raise shutil.Error([(str(out / "p" / ".book-build" / "html" / "index.html"),
                                 str(copy_target), "[Errno 28] No space left on device")])
        full_disk()

    monkeypatch.setattr(book, "build_book", failing)
    monkeypatch.setattr(book, "render", failing)
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    expected = (f"error: {out / 'p' / 'book'}: no space left on the device: free some space, "
                "then run again" if error == "full-disk" else
                f"error: {copy_target}: [Errno 28] No space left on device")
    assert one_error_line(capsys.readouterr().err) == expected
    assert cli(["book", "p", "--outputs", str(out)]) == 1
    assert one_error_line(capsys.readouterr().err) == expected


def test_a_book_folder_that_is_a_link_is_named_and_left_alone(
        project: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``book/`` a symbolic link to a folder said "(no path): Cannot call rmtree on a symbolic
    link". Now the book, from ``run`` or ``book``, names the link, and neither the link nor
    the folder it leads to is touched."""
    from hbpsych_utils.runner import execute

    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", "y = 1")
    monkeypatch.setattr(execute, "execute", lambda *args: None)
    out = project / "outputs"
    (out / "p").mkdir(parents=True)
    elsewhere = tmp_path_factory.mktemp("shared-book")
    (elsewhere / "keep.html").write_text("mine")
    (out / "p" / "book").symlink_to(elsewhere)
    expected = (f"error: {out / 'p' / 'book'}: a symbolic link (to {elsewhere}) where the book's "
                "folder is written whole: remove the link, or render into another outputs "
                "folder")
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    assert one_error_line(capsys.readouterr().err) == expected
    assert cli(["book", "p", "--outputs", str(out)]) == 1
    assert one_error_line(capsys.readouterr().err) == expected
    assert (out / "p" / "book").is_symlink()
    assert [p.name for p in elsewhere.iterdir()] == ["keep.html"]


def test_an_error_naming_no_path_never_says_no_path(tmp_path: Path) -> None:
    from hbpsych_utils.core.writes import describe_os_error, with_path

    bare = OSError(errno.ENOSPC, "No space left on device")
    assert describe_os_error(bare, tmp_path) == (
        f"{tmp_path}: no space left on the device: free some space, then run again")
    assert "(no path)" not in describe_os_error(bare)
    named = OSError(errno.EACCES, "Permission denied", str(tmp_path / "x"))
    assert with_path(named, tmp_path) is named  # a path already named is kept
