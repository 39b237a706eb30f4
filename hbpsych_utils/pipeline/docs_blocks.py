"""The parts of the docs that are written from the stage graph, so a chapter added to the graph
is in every list of chapters without a hand edit: the README's table of notebooks, the table of
stage modules in ``docs/modules.md`` and the graph's table in ``docs/pipeline.md``.

Each is a block between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in its file;
``python -m hbpsych_utils docs`` rewrites the blocks that differ from the graph and ``--check``
only lists them (exit 1), as the fast tests do.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hbpsych_utils.core import paths
from hbpsych_utils.core.writes import write_text
from hbpsych_utils.pipeline import graph


def readme_chapters() -> str:
    """The README's notebooks: each stage's name and what it does, with its docs page."""
    rows = ["| notebook | what it does |", "|---|---|"]
    for s in graph.SPECS.values():
        page = f" ([`docs/{s.doc}`](docs/{s.doc}))" if s.doc else ""
        rows.append(f"| `{s.name}` | {s.summary}{page} |")
    return "\n".join(rows) + "\n"


def stage_modules() -> str:
    """``docs/modules.md``'s stage modules: one per chapter, its notebook, what it does."""
    rows = ["| module | notebook | what it computes |", "|---|---|---|"]
    for s in graph.SPECS.values():
        page = f" ([{s.doc}]({s.doc}))" if s.doc else ""
        rows.append(f"| `s{s.name}` | {s.name[:2]} | {s.summary}{page} |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Block:
    """A generated part of a file: where (relative to the project root), its marker name, and
    what writes it."""

    path: str
    name: str
    text: Callable[[], str]

    def put(self, document: str) -> str:
        """``document`` with this block's text between its markers."""
        start, end = f"<!-- {self.name}:start -->\n", f"<!-- {self.name}:end -->"
        head, found, rest = document.partition(start)
        _, found_end, tail = rest.partition(end)
        if not (found and found_end):
            raise ValueError(f"{self.path}: no {start.strip()} ... {end} block")
        return head + start + self.text() + end + tail


BLOCKS = (
    Block("README.md", "chapters", readme_chapters),
    Block("docs/modules.md", "stage-modules", stage_modules),
    Block("docs/pipeline.md", "graph", graph.describe_markdown),
)


def stale(root: Path | None = None) -> list[str]:
    """The files (relative to ``root``, the project by default) whose blocks differ from the
    graph."""
    base = root or paths.project_root()
    out = []
    for path in dict.fromkeys(b.path for b in BLOCKS):
        text = (base / path).read_text(encoding="utf-8")
        if _written(path, text) != text:
            out.append(path)
    return out


def refresh(root: Path | None = None) -> list[str]:
    """Rewrite the blocks that differ from the graph; the files changed."""
    base = root or paths.project_root()
    changed = stale(base)
    for path in changed:
        write_text(base / path, _written(path, (base / path).read_text(encoding="utf-8")))
    return changed


def _written(path: str, text: str) -> str:
    for block in BLOCKS:
        if block.path == path:
            text = block.put(text)
    return text


def main(argv: list[str]) -> int:
    """``python -m hbpsych_utils docs [--check]``."""
    ap = argparse.ArgumentParser(prog="python -m hbpsych_utils docs",
                                 description="Write the docs' chapter lists and the graph's "
                                             "table from the stage graph.")
    ap.add_argument("--check", action="store_true",
                    help="only list the files whose generated parts are out of date (exit 1)")
    args = ap.parse_args(argv)
    files = stale() if args.check else refresh()
    verb = "out of date" if args.check else "rewritten"
    print(f"{verb}: {', '.join(files)}" if files else "the docs' generated parts are current")
    return 1 if args.check and files else 0
