"""The syntax trees of the project's Python files, each parsed once per test process.

The shape tests (imports and layers, defaults, model ids, YAML reads, code size) each walk every
module of the package, and parsing them is most of their time (so they share one worker:
:data:`GROUP`). A file that changed (its size or its modification time) is parsed again.
Callers read the trees and never change them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

GROUP = pytest.mark.xdist_group("source-trees")
"""The mark of the tests that read the package's trees: under xdist they run on one worker,
which parses the package once (each worker parsing it took about two seconds)."""


def tree(path: Path) -> ast.Module:
    """``path`` parsed: the same tree object for as long as the file is unchanged."""
    stat = path.stat()
    return _parse(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parse(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s tree, in ``ast.walk``'s order: walked once per tree, as the
    shape tests go over each module's nodes many times (walking them was most of their time once
    the trees were parsed once)."""
    return _walk(tree(path))


@functools.cache
def _walk(module: ast.Module) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(module))
