"""The shape the compendium promises a reader: chapters without logic, a package without import
cycles, and the study's model ids written in one place only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hbpsych_utils"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CONSTANTS = PACKAGE / "study.py"

MAX_CODE_LINES = 25
MAX_FOR_LOOPS = 2
FORBIDDEN = {ast.If: "if", ast.IfExp: "if", ast.FunctionDef: "def", ast.AsyncFunctionDef: "def",
             ast.Lambda: "lambda", ast.ClassDef: "class", ast.Try: "try", ast.While: "while"}


def code_outside_parameters(nb: Path) -> list[str]:
    """Source lines of a notebook's code cells, the ``parameters`` cell left out."""
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return [line for c in cells if c["cell_type"] == "code"
            and "parameters" not in c.get("metadata", {}).get("tags", [])
            for line in "".join(c["source"]).splitlines()]


def chapter_problems(lines: list[str]) -> list[str]:
    """What breaks the chapter rules in these lines (see the issue: notebooks as one story)."""
    problems = []
    magic = [ln for ln in lines if ln.lstrip().startswith(("%", "!"))]
    if magic:
        problems.append(f"shell or magic lines: {magic[:2]}")
    tree = ast.parse("\n".join(ln for ln in lines if ln not in magic))
    for node in ast.walk(tree):
        for kind, word in FORBIDDEN.items():
            if isinstance(node, kind):
                problems.append(f"line {node.lineno}: `{word}` (logic belongs in hbpsych_utils)")
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For | ast.comprehension)]
    if len(loops) > MAX_FOR_LOOPS:
        problems.append(f"{len(loops)} for loops or comprehensions (at most {MAX_FOR_LOOPS})")
    n_code = sum(1 for ln in lines if ln.strip() and not ln.strip().startswith("#"))
    if n_code > MAX_CODE_LINES:
        problems.append(f"{n_code} code lines outside the parameters cell "
                        f"(at most {MAX_CODE_LINES})")
    return problems


def test_chapter_rules_catch_logic() -> None:
    """The checker itself: each rule fires on a line that breaks it, and not on plain calls."""
    assert chapter_problems(["result = s01.run(run, params)", "display(result.views['x'])"]) == []
    for bad in (["if x:", "    y = 1"], ["def f():", "    pass"], ["try:", "    y", "except E:",
                "    z"], ["while x:", "    y"], ["class A:", "    pass"], ["y = 1 if x else 2"]):
        assert chapter_problems(bad), bad
    loops = ["for a in b:", "    show(a)", "for c in d:", "    show(c)", "e = [f for f in g]"]
    assert chapter_problems(loops) == ["3 for loops or comprehensions (at most 2)"]
    assert chapter_problems([f"x{i} = {i}" for i in range(26)])
    assert chapter_problems(["!pip install x"])


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_a_chapter(nb: Path) -> None:
    assert chapter_problems(code_outside_parameters(nb)) == []


# --- import cycles -----------------------------------------------------------------------------

def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Package modules ``path`` imports anywhere in it (top level, functions, TYPE_CHECKING)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.add(target if target in modules else base)
    return {m for m in out if m in modules and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_inside_the_package() -> None:
    modules = package_modules()
    graph = {name: imports_of(path, modules) for name, path in modules.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_top_level_stays_small() -> None:
    top = [p for p in PACKAGE.glob("*.py")]
    assert len(top) <= 12, sorted(p.name for p in top)


# --- model ids live in study.py ----------------------------------------------------------------

def model_ids() -> set[str]:
    registry = yaml.safe_load((ROOT / "params" / "models.yaml").read_text(encoding="utf-8"))
    return set(registry["models"]) | {m["api_model"] for m in registry["models"].values()}


def string_literals(source: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_model_ids_only_in_the_constants_module() -> None:
    ids = model_ids()
    assert ids & string_literals(CONSTANTS.read_text(encoding="utf-8")), "study.py names models"
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        if path != CONSTANTS and (found := ids & string_literals(path.read_text("utf-8"))):
            offenders[str(path.relative_to(ROOT))] = sorted(found)
    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if found := ids & string_literals(source):
            offenders[nb.name] = sorted(found)
    assert not offenders, f"model id literals outside {CONSTANTS.name}: {offenders}"


def test_study_constants_agree_with_the_registry() -> None:
    from hbpsych_utils import study
    from hbpsych_utils.llm import load_registry

    registry = load_registry()
    for model in (*study.CANDIDATES, *study.LATER_CANDIDATES, *study.JUDGE_PANEL,
                  study.HARNESS_MODEL, study.LOCAL_MODEL):
        assert model in registry.models, model
    assert {m for m, s in registry.models.items() if "judge" in s.roles} == set(study.JUDGE_PANEL)
    assert {m for m, s in registry.models.items() if "candidate" in s.roles} == set(
        study.CANDIDATES)
