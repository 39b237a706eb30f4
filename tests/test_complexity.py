"""Orchestration stays decomposed by responsibility: in the runner and the command line, no
function over 60 lines or above cyclomatic complexity 15, and no module over 600 lines, as
radon measures them (a function's lines from its ``def`` to its last line, docstring included;
methods and nested functions are functions of their own)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_visit

PACKAGE = Path(__file__).resolve().parent.parent / "hbpsych_utils"
MEASURED = (PACKAGE / "runner", PACKAGE / "__main__.py")
"""What the limits hold for (docs/testing.md keeps the measurement)."""
MAX_FUNCTION_LINES, MAX_COMPLEXITY, MAX_MODULE_LINES = 60, 15, 600


@dataclass(frozen=True)
class Measure:
    module: str
    function: str
    lines: int
    complexity: int


def measure(source: str, module: str) -> list[Measure]:
    """Every function, method and nested function of ``source``, with its lines and its
    cyclomatic complexity."""
    out: list[Measure] = []

    def visit(blocks: list, prefix: str = "") -> None:
        for block in blocks:
            name = f"{prefix}{block.name}"
            if hasattr(block, "methods"):  # a class: its methods
                visit(block.methods, f"{name}.")
                continue
            out.append(Measure(module, name, block.endline - block.lineno + 1,
                               block.complexity))
            visit(block.closures, f"{name}.")

    visit(cc_visit(source))
    return out


def modules() -> list[Path]:
    return sorted(p for root in MEASURED
                  for p in ([root] if root.is_file() else root.rglob("*.py")))


def over_the_limits(paths: list[Path], root: Path = PACKAGE.parent) -> list[str]:
    """What breaks a limit, one line each (files named relative to ``root``)."""
    found = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        name = path.relative_to(root).as_posix()
        n = len(source.splitlines())
        if n > MAX_MODULE_LINES:
            found.append(f"{name}: {n} lines (at most {MAX_MODULE_LINES})")
        found += [f"{name}:{m.function}: {m.lines} lines, complexity {m.complexity}"
                  for m in measure(source, name)
                  if m.lines > MAX_FUNCTION_LINES or m.complexity > MAX_COMPLEXITY]
    return found


def test_the_runner_and_the_command_line_keep_within_the_limits() -> None:
    assert len(modules()) >= 10  # the runner's modules and __main__.py were found
    assert over_the_limits(modules()) == []


BRANCHY = "def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(16))
LONG = "def g():\n" + "".join(f"    y{i} = {i}\n" for i in range(60))
NESTED = ("class C:\n    def m(self):\n        def inner():\n            return 1\n"
          "        return inner\n")


def test_the_measure_sees_branches_lines_methods_and_nested_functions(tmp_path: Path) -> None:
    by_name = {m.function: m for m in measure(BRANCHY + LONG + NESTED, "x.py")}
    assert (by_name["f"].complexity, by_name["g"].lines) == (17, 61)
    assert {"C.m", "C.m.inner"} <= set(by_name)
    module = tmp_path / "m.py"
    module.write_text(BRANCHY + LONG + "x = 1\n" * 600)
    assert over_the_limits([module], tmp_path) == [
        "m.py: 694 lines (at most 600)", "m.py:f: 33 lines, complexity 17",
        "m.py:g: 61 lines, complexity 1"]
