"""The shape the compendium promises a reader: chapters that show the method without logic, a
package whose layers import only downward, and the study's model ids written in one place only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import source_trees
import yaml

from hbpsych_utils.pipeline import graph, profiles

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hbpsych_utils"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CONSTANTS = PACKAGE / "study.py"
pytestmark = source_trees.GROUP

MAX_CODE_LINES = 40
MIN_SCIENCE_CALLS = 3
FEWER_CALLS_ALLOWED = {graph.FIGURES, graph.EXPLORER}
"""Chapters that lay out what earlier stages computed (figures, the explorer)."""
FORBIDDEN = {ast.If: "if", ast.IfExp: "if", ast.FunctionDef: "def", ast.AsyncFunctionDef: "def",
             ast.Lambda: "lambda", ast.ClassDef: "class", ast.Try: "try", ast.While: "while",
             ast.For: "for", ast.comprehension: "comprehension"}


def code_outside_parameters(nb: Path) -> list[str]:
    """Source lines of a notebook's code cells, the ``parameters`` cell left out."""
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return [line for c in cells if c["cell_type"] == "code"
            and "parameters" not in c.get("metadata", {}).get("tags", [])
            for line in "".join(c["source"]).splitlines()]


def package_calls(tree: ast.AST) -> list[str]:
    """The calls into ``hbpsych_utils`` a chapter makes (``scores.table1(...)``), by name:
    calls of a name bound by an import from the package, or of an attribute of one."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hbpsych_utils"):
            bound |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names
                      if a.name.startswith("hbpsych_utils")}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in bound:
            out.append(ast.unparse(node.func))
    return out


def chapter_problems(lines: list[str], min_calls: int = MIN_SCIENCE_CALLS) -> list[str]:
    """What breaks the chapter rules in these lines: no logic (branches, loops, definitions),
    at most ``MAX_CODE_LINES`` code lines, at least ``min_calls`` calls into the package."""
    problems = []
    magic = [ln for ln in lines if ln.lstrip().startswith(("%", "!"))]
    if magic:
        problems.append(f"shell or magic lines: {magic[:2]}")
    tree = ast.parse("\n".join(ln for ln in lines if ln not in magic))
    for node in ast.walk(tree):
        for kind, word in FORBIDDEN.items():
            if isinstance(node, kind):
                lineno = getattr(node, "lineno", None) or getattr(node.target, "lineno", "?")
                problems.append(f"line {lineno}: `{word}` (logic belongs in hbpsych_utils)")
    n_code = sum(1 for ln in lines if ln.strip() and not ln.strip().startswith("#"))
    if n_code > MAX_CODE_LINES:
        problems.append(f"{n_code} code lines outside the parameters cell "
                        f"(at most {MAX_CODE_LINES})")
    calls = package_calls(tree)
    if len(calls) < min_calls:
        problems.append(f"{len(calls)} call(s) into hbpsych_utils ({calls}); a chapter makes "
                        f"its stage's science calls by name (at least {min_calls})")
    return problems


def test_chapter_rules_catch_logic() -> None:
    """The checker itself: each rule fires on a line that breaks it, and not on plain calls."""
    ok = ["from hbpsych_utils.stages import s01_corpus as corpus", "run = corpus.start(x)",
          "table = corpus.describe(run)", "display(corpus.findings(table))"]
    assert chapter_problems(ok) == []
    for bad in (["if x:", "    y = 1"], ["def f():", "    pass"], ["try:", "    y", "except E:",
                "    z"], ["while x:", "    y"], ["class A:", "    pass"], ["y = 1 if x else 2"],
                ["for a in b:", "    show(a)"], ["e = [f for f in g]"]):
        assert chapter_problems([*ok, *bad]), bad
    assert chapter_problems([*ok, *(f"x{i} = {i}" for i in range(40))])
    assert chapter_problems([*ok, "!pip install x"])
    thin = ["from hbpsych_utils.stages import s01_corpus as corpus", "r = corpus.run(x)",
            "display(r)"]
    assert chapter_problems(thin) == [
        "1 call(s) into hbpsych_utils (['corpus.run']); a chapter makes its stage's science "
        "calls by name (at least 3)"]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_a_chapter(nb: Path) -> None:
    min_calls = 1 if nb.stem in FEWER_CALLS_ALLOWED else MIN_SCIENCE_CALLS
    assert chapter_problems(code_outside_parameters(nb), min_calls) == []


def test_every_stage_has_its_notebook() -> None:
    assert [nb.stem for nb in NOTEBOOKS] == list(graph.STAGES)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_the_default_profiles_resolved_values(nb: Path) -> None:
    """A chapter run by hand from ``notebooks/`` (JupyterLab "Run All") is the default run:
    its parameters cell declares exactly what the graph injects, with the default profile's
    resolved values."""
    import papermill

    declared = papermill.inspect_notebook(str(nb))
    expected = graph.notebook_parameters(profiles.load_profile("default"), nb.stem, "../outputs")
    assert list(declared) == list(expected)
    for key, value in expected.items():
        assert eval(declared[key]["default"]) == value, f"{nb.name}: {key}"


def test_notebooks_are_committed_clean() -> None:
    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text())["cells"]
        assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), nb.name


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
    for node in source_trees.nodes(path):
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


LAYERS = ("package", "study", "core", "pipeline", "llm", "construction", "evaluation",
          "reporting", "stages", "runner", "top")
"""The package's layers, lowest first (docs/modules.md): a module imports its own layer or a
lower one, never a higher one."""
TOP_LEVEL = {"hbpsych_utils": "package", "hbpsych_utils.study": "study",
             "hbpsych_utils.__main__": "top", "hbpsych_utils.inspect_task": "top"}


def layer_of(module: str) -> str:
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    return module.split(".")[1]


def test_layer_of_every_module_is_known() -> None:
    unknown = {m for m in package_modules() if layer_of(m) not in LAYERS}
    assert not unknown, f"modules outside the declared layers: {sorted(unknown)}"


def upward_imports(graph_: dict[str, set[str]]) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return sorted(f"{m} ({layer_of(m)}) -> {t} ({layer_of(t)})" for m, targets in graph_.items()
                  for t in targets if rank[layer_of(t)] > rank[layer_of(m)])


def test_layer_checker() -> None:
    assert upward_imports({"hbpsych_utils.core.config": {"hbpsych_utils.study"}}) == []
    assert upward_imports({"hbpsych_utils.core.config": {"hbpsych_utils.llm.models"}}) == [
        "hbpsych_utils.core.config (core) -> hbpsych_utils.llm.models (llm)"]


def test_imports_only_go_down_the_layers() -> None:
    modules = package_modules()
    found = upward_imports({name: imports_of(path, modules) for name, path in modules.items()})
    assert found == [], "upward imports:\n" + "\n".join(found)


def chapter_of(module: str) -> str | None:
    """The chapter a module belongs to (``hbpsych_utils.stages.s15_judge_accuracy``, for the
    chapter's module or any module of its package), ``None`` outside the chapters."""
    prefix = "hbpsych_utils.stages."
    if not module.startswith(prefix + "s"):
        return None
    return prefix + module.removeprefix(prefix).split(".")[0]


def test_stages_do_not_import_each_other() -> None:
    """A chapter (a stage module, or a package whose modules split one) imports no other
    chapter; the modules of one chapter's package import one another."""
    modules = package_modules()
    chapters = {m for m in modules if chapter_of(m) is not None}
    found = sorted(f"{m} -> {t}" for m in chapters for t in imports_of(modules[m], modules)
                   if t in chapters and chapter_of(t) != chapter_of(m))
    assert found == []
    assert chapter_of("hbpsych_utils.stages.s15_judge_accuracy.rows") == chapter_of(
        "hbpsych_utils.stages.s15_judge_accuracy") != chapter_of("hbpsych_utils.stages.s14_x")
    assert chapter_of("hbpsych_utils.stages.base") is None


def test_the_simulator_is_imported_only_where_a_profile_asks_for_it() -> None:
    """Runtime code never imports ``llm.testing`` at module level; the engine session opens it
    (inside a function) only for a profile with ``llm.simulator: true``."""
    modules = package_modules()
    importers = sorted(m for m, path in modules.items() if not m.startswith(
        "hbpsych_utils.llm.testing") and any(t.startswith("hbpsych_utils.llm.testing")
                                             for t in imports_of(path, modules)))
    assert importers == ["hbpsych_utils.llm.session"]
    session = source_trees.tree(modules["hbpsych_utils.llm.session"])
    top = [n for n in session.body if isinstance(n, ast.ImportFrom)
           and (n.module or "").startswith("hbpsych_utils.llm.testing")]
    assert top == []


def test_top_level_stays_small() -> None:
    top = [p for p in PACKAGE.glob("*.py")]
    assert len(top) <= 12, sorted(p.name for p in top)


# --- model ids live in study.py ----------------------------------------------------------------

def model_ids() -> set[str]:
    registry = yaml.safe_load((ROOT / "params" / "models.yaml").read_text(encoding="utf-8"))
    return set(registry["models"]) | {m["api_model"] for m in registry["models"].values()}


def string_literals(source: str | Path) -> set[str]:
    """The string constants of Python ``source``, or of the module at a path."""
    found = source_trees.nodes(source) if isinstance(source, Path) else ast.walk(ast.parse(source))
    return {n.value for n in found if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_model_ids_only_in_the_constants_module() -> None:
    ids = model_ids()
    assert ids & string_literals(CONSTANTS.read_text(encoding="utf-8")), "study.py names models"
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        if path != CONSTANTS and (found := ids & string_literals(path)):
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
