"""The book as the last step of ``run``, and the call ``run``, ``book`` and ``publish`` make to
build it (:func:`book_call`). Sphinx and the book's module are imported when a book is built:
the command line imports this module before it knows it will."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hbpsych_utils.core.writes import with_path
from hbpsych_utils.runner.result import RunInterrupted, RunResult

if TYPE_CHECKING:
    from hbpsych_utils.runner.execute import RunWatch

T = TypeVar("T")

def book_call(run_dir: Path, build: Callable[[Path], T]) -> T:
    """``build(run_dir)`` (``reporting.book``'s ``build_book`` or ``render``), for ``run``,
    ``book`` and ``publish`` alike, with every file-system error naming its path: a ``book/``
    that is a symbolic link is refused before the build (the finished site replaces the folder
    whole, which neither follows nor removes a link), and an error a library raises without a
    file (a full disk while Sphinx or ``shutil`` writes) names the book's folder."""
    from hbpsych_utils.reporting import book

    target = run_dir / book.BOOK_DIR
    if target.is_symlink():
        raise OSError(None, f"a symbolic link (to {os.readlink(target)}) where the book's "
                      "folder is written whole: remove the link, or render into another "
                      "outputs folder", str(target))
    try:
        return build(run_dir)
    except OSError as exc:
        raise with_path(exc, target) from None


def build_book(result: RunResult, watch: RunWatch, echo: Callable[[str], None],
               where: str) -> None:
    """The run's book, once every notebook that could run has. Ctrl-C stops it, even one that
    a library swallowed (``where`` names what it stopped). A run folder the book refuses (a
    stage's files that differ from its build record, left as they are by ``--only``) is one
    line, and the run is not ok (``result.book_error``)."""
    try:
        from hbpsych_utils.reporting import book  # the run's offline reading copy

        try:
            echo(f"book: {book_call(result.outputs, book.build_book)}")
        except book.BookError as exc:
            result.book_error = str(exc)
            echo(f"FAILED: the book: {exc}")
    except KeyboardInterrupt:
        watch.requested = True
    if watch.requested:
        watch.stopping()
        raise RunInterrupted(result.profile, result.outputs, [], where)
