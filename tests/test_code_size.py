"""Every function small and every module short enough to read, measured with radon.

Outside the provider simulator (``llm/testing/``, which mimics three providers' wire formats
for the tests), no function or method (closures included) is longer than
``MAX_FUNCTION_LINES`` lines (end line − start line + 1 of its node, as radon's blocks give it)
or has a cyclomatic complexity (``radon cc``) above ``MAX_COMPLEXITY``, and no module is
longer than ``MAX_MODULE_LINES`` lines. A longer function is split into a named helper per
step; a longer module along what its parts do.

``STILL_BEING_SPLIT`` names the parts of the package that are being decomposed now (the
stage modules and the stage metrics models, now done): they are
exempt until that work lands. The list only shrinks: an entry whose code meets the limits
fails :func:`test_every_exemption_is_still_needed`, so it is removed when its part is done,
and the list is meant to end empty. ``python tests/test_code_size.py`` prints what exceeds the
limits, exemptions included (the counts in docs/testing.md).
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import source_trees
from radon.complexity import cc_visit, cc_visit_ast
from radon.visitors import Class, Function

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hbpsych_utils"
pytestmark = source_trees.GROUP

MAX_FUNCTION_LINES = 60
MAX_COMPLEXITY = 15
MAX_MODULE_LINES = 600

SIMULATOR = "llm/testing/"
"""Not measured: the provider simulator (test scaffolding, not the study's code)."""

STILL_BEING_SPLIT: tuple[str, ...] = ()
"""Paths (relative to the package; a folder ends with ``/``) exempt while they are decomposed.
Remove an entry once its part meets the limits; the list is meant to be empty."""


@dataclass(frozen=True)
class Excess:
    """One function or module over a limit: where, what, and by how much."""

    path: str
    """Relative to the package (``llm/store.py``)."""
    name: str
    """The function's qualified name (``Store.spend``, ``outer.inner``); ``""`` for a module."""
    lines: int
    complexity: int = 0

    def __str__(self) -> str:
        if not self.name:
            return f"{self.path}: {self.lines} lines (module)"
        return f"{self.path}:{self.name}: {self.lines} lines, complexity {self.complexity}"


def functions(blocks: Iterable[Function | Class], prefix: str = ""
              ) -> Iterator[tuple[str, Function]]:
    """Every function radon finds in ``blocks``, by qualified name: methods of classes (nested
    ones too) and closures. Radon lists a class's methods both under the class and on their
    own; only the former are followed here, so each function comes once."""
    for block in blocks:
        if isinstance(block, Class):
            yield from functions(block.methods, f"{prefix}{block.name}.")
            yield from functions(block.inner_classes, f"{prefix}{block.name}.")
        elif not block.is_method or prefix:
            yield f"{prefix}{block.name}", block
            yield from functions(block.closures, f"{prefix}{block.name}.")


def measure(path: str, source: str, tree: ast.Module | None = None) -> list[Excess]:
    """What in one module's ``source`` exceeds the limits (``path`` names it); ``tree`` is
    ``source`` parsed, where the caller has it (``source_trees``)."""
    return list(_measured(path, source, tree))


@functools.cache
def _measured(path: str, source: str, tree: ast.Module | None) -> tuple[Excess, ...]:
    """:func:`measure`, once per module text in a process (three tests measure the package)."""
    found = []
    n_lines = len(source.splitlines())
    if n_lines > MAX_MODULE_LINES:
        found.append(Excess(path, "", n_lines))
    for name, f in functions(cc_visit(source) if tree is None else cc_visit_ast(tree)):
        lines = f.endline - f.lineno + 1
        if lines > MAX_FUNCTION_LINES or f.complexity > MAX_COMPLEXITY:
            found.append(Excess(path, name, lines, f.complexity))
    return tuple(found)


def package_excesses() -> list[Excess]:
    """What exceeds the limits in the package, the simulator left out, exemptions included."""
    found = []
    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(PACKAGE).as_posix()
        if not path.startswith(SIMULATOR):
            found += measure(path, file.read_text(encoding="utf-8"), source_trees.tree(file))
    return found


def covers(entry: str, path: str) -> bool:
    """Whether an entry of ``STILL_BEING_SPLIT`` (a file, or a folder ending with ``/``)
    covers ``path``."""
    return path == entry or (entry.endswith("/") and path.startswith(entry))


def exempt(path: str) -> bool:
    return any(covers(entry, path) for entry in STILL_BEING_SPLIT)


def test_the_measure_finds_long_and_complex_functions_and_long_modules() -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(15))
    complex_ = f"def branchy(x):\n{branches}    return -1\n"  # complexity 16, 32 lines
    long_body = "".join(f"    y = {i}\n" for i in range(60))
    long_method = f"class C:\n    def long(self):\n{long_body.replace('    ', '        ')}"
    closure = f"def outer():\n    def inner(x):\n{branches.replace('    ', '        ')}"
    assert [(e.name, e.lines, e.complexity) for e in measure("m.py", complex_)] == [
        ("branchy", 32, 16)]
    assert [(e.name, e.lines) for e in measure("m.py", long_method)] == [("C.long", 61)]
    assert [(e.name, e.complexity) for e in measure("m.py", closure)] == [("outer.inner", 16)]
    ok = f"def short(x):\n{branches[: branches.index('    if x == 14')]}    return -1\n"
    assert measure("m.py", ok) == []  # complexity 15, 30 lines: at the limits, not over
    module = "x = 1\n" * (MAX_MODULE_LINES + 1)
    assert [str(e) for e in measure("big.py", module)] == ["big.py: 601 lines (module)"]
    assert measure("fits.py", "x = 1\n" * MAX_MODULE_LINES) == []


def test_exemptions_match_folders_and_files_only() -> None:
    assert covers("stages/", "stages/base.py") and covers("pipeline/graph.py", "pipeline/graph.py")
    assert not covers("stages/", "stagesx.py") and not covers("pipeline/graph.py", "pipeline/g.py")
    assert not any(exempt(e.path) for e in package_excesses())  # nothing over the limits is exempt


def test_no_function_or_module_over_the_limits() -> None:
    found = [str(e) for e in package_excesses() if not exempt(e.path)]
    assert found == [], (
        f"over {MAX_FUNCTION_LINES} lines or complexity {MAX_COMPLEXITY} (functions), over "
        f"{MAX_MODULE_LINES} lines (modules); split along what the parts do:\n"
        + "\n".join(found))


def test_every_exemption_is_still_needed() -> None:
    found = package_excesses()
    done = [entry for entry in STILL_BEING_SPLIT if not any(covers(entry, e.path) for e in found)]
    assert done == [], f"within the limits now: remove {done} from STILL_BEING_SPLIT"


def largest() -> tuple[int, tuple[int, str], tuple[int, str], tuple[int, str]]:
    """Outside the simulator and the exemptions: how many functions, and the highest
    complexity, the longest function and the longest module, each with where it is."""
    n, complexity, length, module = 0, (0, ""), (0, ""), (0, "")
    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(PACKAGE).as_posix()
        if path.startswith(SIMULATOR) or exempt(path):
            continue
        source = file.read_text(encoding="utf-8")
        module = max(module, (len(source.splitlines()), path))
        for name, f in functions(cc_visit(source)):
            n += 1
            complexity = max(complexity, (f.complexity, f"{path}:{name}"))
            length = max(length, (f.endline - f.lineno + 1, f"{path}:{name}"))
    return n, complexity, length, module


if __name__ == "__main__":
    excesses = package_excesses()
    for e in excesses:
        print(("exempt  " if exempt(e.path) else "        ") + str(e))
    funcs = [e for e in excesses if e.name]
    print(f"{len(funcs)} functions over the limits ({sum(not exempt(e.path) for e in funcs)} "
          f"not exempt), {len(excesses) - len(funcs)} modules over {MAX_MODULE_LINES} lines "
          f"({sum(not exempt(e.path) for e in excesses if not e.name)} not exempt)")
    n, complexity, length, module = largest()
    print(f"outside the exemptions: {n} functions; highest complexity {complexity[0]} "
          f"({complexity[1]}), longest function {length[0]} lines ({length[1]}), longest "
          f"module {module[0]} lines ({module[1]})")
    sys.exit(0)
