"""Thin stages, measured on the source: the mode is read once per chapter, by its resolver; no
step checks it, dispatches on a result's type or returns a "not available" value; a bootstrap's
resamples are one profile key; and no function of the package defaults the judges, the seed or
the interval level (a caller that forgets one is an error, not the study's value)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import source_trees
from pydantic import BaseModel

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.profiles import Profile

ROOT = Path(__file__).resolve().parent.parent
pytestmark = source_trees.GROUP
PACKAGE = ROOT / "hbpsych_utils"
STAGES = PACKAGE / "stages"

MODE_VALUES = {graph.LIVE, graph.PAPER, graph.REPLAY}
MODE_NAMES = {"LIVE", "PAPER", "REPLAY"}
CONSUMERS = {"findings"}
"""Functions that may read the mode a chapter's metrics record (a sentence names the run it
describes): never ``run.mode``, only the metrics' own field."""
NO_DEFAULT = ("judges", "seed", "level")
ENTRY_POINTS = {"inspect_task.py:healthbench_psych": (
    "the Inspect task's parameters are its command line (`inspect eval ...@healthbench_psych "
    "-T seed=...`): one not given takes the study's value, as docs/publishing.md says")}
"""Functions whose defaults are a command line's, with why (not a call inside the package)."""


def chapter_files() -> list[Path]:
    """Every module of a chapter (``stages/sNN_*.py``, or the modules of a chapter package)."""
    return sorted(p for p in STAGES.rglob("*.py")
                  if p.relative_to(STAGES).parts[0].startswith("s")
                  and p.relative_to(STAGES).parts[0][1:3].isdigit())


def functions(nodes: Iterable[ast.AST]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def is_resolver(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ast.unparse(d).split(".")[-1] == "resolver" for d in fn.decorator_list)


def _is_mode_value(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in MODE_NAMES:
        return True
    return isinstance(node, ast.Constant) and node.value in MODE_VALUES


def problems(source: str, where: str = "") -> list[str]:
    """What breaks the thin-stage rules in a chapter module's source: a call of ``unavailable``
    or ``isinstance`` anywhere; ``run.mode`` outside the resolver; a comparison with a mode
    outside the resolver and the findings."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in (
                "unavailable", "isinstance"):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node.func)}(...)")
    for fn in functions(ast.walk(tree)):
        if is_resolver(fn):
            continue
        for node in ast.walk(fn):
            if (isinstance(node, ast.Attribute) and node.attr == "mode"
                    and isinstance(node.value, ast.Name) and node.value.id == "run"):
                found.append(f"{where}:{node.lineno}: run.mode in {fn.name}")
            if (isinstance(node, ast.Compare) and fn.name not in CONSUMERS
                    and any(_is_mode_value(x) for x in [node.left, *node.comparators])):
                found.append(f"{where}:{node.lineno}: a mode check in {fn.name}")
    return sorted(set(found))


def test_the_checker_finds_mode_checks_type_dispatch_and_unavailable_exits() -> None:
    good = ("@base.resolver\ndef inputs(run):\n    if run.mode == graph.LIVE:\n        x = 1\n"
            "def step(data):\n    return data.rows\n"
            "def findings(m):\n    return 'live' if m.mode == graph.LIVE else 'paper'\n")
    assert problems(good) == []
    assert problems("def step(run):\n    if run.mode == 'live':\n        pass\n") == [
        ":2: a mode check in step", ":2: run.mode in step"]
    assert problems("def step(x):\n    return isinstance(x, int)\n") == [":2: isinstance(...)"]
    assert problems("def step(x):\n    return unavailable('no')\n") == [":2: unavailable(...)"]
    assert problems("def metrics(s):\n    return s.mode != graph.PAPER\n") == [
        ":2: a mode check in metrics"]


def test_the_mode_is_read_only_by_each_chapters_resolver() -> None:
    """0 mode checks, 0 type dispatches and 0 ``unavailable`` exits in the steps of every
    chapter: what a mode cannot produce is decided by the resolver, once."""
    found = [p for path in chapter_files()
             for p in problems(path.read_text(encoding="utf-8"),
                               str(path.relative_to(ROOT)))]
    assert found == []


def test_every_chapter_with_modes_has_one_resolver() -> None:
    for name in graph.STAGES:
        files = [p for p in chapter_files() if p.relative_to(STAGES).parts[0].startswith(
            f"s{name}")]
        resolvers = [fn.name for p in files
                     for fn in functions(source_trees.nodes(p))
                     if is_resolver(fn)]
        assert len(resolvers) == (1 if graph.spec(name).modes else len(resolvers)), (
            name, resolvers)
        assert len(resolvers) <= 1, (name, resolvers)


def profile_fields(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, info in model.model_fields.items():
        yield prefix + name
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from profile_fields(ann, f"{prefix}{name}.")


def test_a_profile_has_one_n_resamples_beside_seed_and_ci_level() -> None:
    fields = list(profile_fields(Profile))
    assert [f for f in fields if f.rsplit(".", 1)[-1] == "n_resamples"] == ["n_resamples"]
    assert {"seed", "ci_level", "n_resamples"} <= set(fields)


def defaults(nodes: Iterable[ast.AST]) -> Iterator[tuple[int, str, str]]:
    """(line, function, parameter) of every parameter named in ``NO_DEFAULT`` that has a
    default, in every function and lambda among a tree's ``nodes``."""
    for node in nodes:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        a = node.args
        positional = [*a.posonlyargs, *a.args]
        named = positional[len(positional) - len(a.defaults):]
        named += [k for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        for arg in named:
            if arg.arg in NO_DEFAULT:
                yield node.lineno, getattr(node, "name", "lambda"), arg.arg


def test_the_checker_finds_a_default_for_the_judges_the_seed_or_the_level() -> None:
    source = ("def a(x, seed=0):\n    pass\ndef b(*, judges=None, n=1):\n    pass\n"
              "def c(level):\n    pass\nf = lambda level=0.9: level\n")
    assert sorted(defaults(ast.walk(ast.parse(source)))) == [(1, "a", "seed"), (3, "b", "judges"),
                                                   (7, "lambda", "level")]


def test_no_function_of_the_package_defaults_the_judges_the_seed_or_the_level() -> None:
    found = [f"{path.relative_to(PACKAGE)}:{line}: {fn}({arg}=...)"
             for path in sorted(PACKAGE.rglob("*.py"))
             for line, fn, arg in defaults(source_trees.nodes(path))
             if f"{path.relative_to(PACKAGE)}:{fn}" not in ENTRY_POINTS]
    assert found == []
    entry = {f"{path.relative_to(PACKAGE)}:{fn}" for path in sorted(PACKAGE.rglob("*.py"))
             for _, fn, _ in defaults(source_trees.nodes(path))}
    assert set(ENTRY_POINTS) <= entry  # each exemption still has a default to explain
