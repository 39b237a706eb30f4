"""The book's chapters: each executed notebook of the run, copied for the book (code folded, a
widget replaced by its own static version where it carries one and else by a note, each table
and figure saying the run's own command, a warning on a chapter that is not current).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hbpsych_utils.core import escape, records
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting import display
from hbpsych_utils.reporting.book_run import BookError

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "*An interactive widget stood here (ipywidgets). It needs a running kernel: open this "
    "notebook in JupyterLab to use it. The book shows the static output that follows.*"
)


PARAMETER_PROMPTS = {
    "parameters": "Show the notebook's default parameters",
    "injected-parameters": "Show this run's parameters",
}


_SOURCE = re.compile(r'(<p class="hb-source" data-stage="[^"]*">.*?<code class="hb-command">)'
                     r"(.*?)(</code>)", re.S)
"""Where a table or figure says the command that makes it again (``vocabulary.Origin``)."""


def with_command(html: str, command: str) -> str:
    """An output's HTML with the command under each of its tables and figures replaced by
    ``command`` (the book's: the run's own options, never the executing machine's paths)."""
    return _SOURCE.sub(lambda m: m.group(1) + escape.html_text(command) + m.group(3), html)


def prepare_notebook(src: Path, dst: Path, banner: str = "", command: str = "") -> None:
    """Copy an executed notebook for the book: code folded behind a click, widget views
    replaced by their own static version where they carry one (``text/html``) and else by a
    note (the static outputs after them stay), widget state dropped (nothing to load);
    ``banner`` (Markdown), when given, is put under the chapter's title as a warning;
    ``command``, when given, is what each table and figure says makes it again."""
    import nbformat

    text = records.read_text(src, error=BookError)
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises schema, key, type and attribute errors alike
        records.read_json(src, error=BookError)  # text that is not JSON: named with its line
        raise BookError(f"{src}: not a Jupyter notebook ({type(exc).__name__}: "
                        f"{(str(exc).strip().splitlines() or [''])[0][:200]})") from None
    nb.metadata.pop("widgets", None)
    nb.cells = display.without_sections_not_in_run(nb.cells)
    for cell in nb.cells:
        if cell.cell_type == "code":
            _fold(cell)
            for out in cell.get("outputs", []):
                _for_the_book(out, command)
    if banner:
        warning = nbformat.v4.new_markdown_cell(
            f"```{{warning}}\n{banner}\n```")
        first = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        nb.cells.insert(first, warning)
    nbformat.write(nb, str(dst))


def _fold(cell: Any) -> None:
    """A code cell folded behind a click (its parameters cells say which parameters)."""
    tags = cell.metadata.setdefault("tags", [])
    if "hide-input" not in tags:
        tags.append("hide-input")
    for tag, prompt in PARAMETER_PROMPTS.items():
        if tag in tags:
            cell.metadata.setdefault("mystnb", {})["code_prompt_show"] = prompt


def _for_the_book(out: Any, command: str) -> None:
    """One output as the book shows it: a widget view replaced by its own static version (or
    else a note), and ``command`` (when given) under each table and figure."""
    if WIDGET_VIEW in out.get("data", {}):
        static = out["data"].get("text/html")  # a widget's own static version
        out["data"] = {"text/html": static} if static else {"text/markdown": WIDGET_NOTE}
        out["metadata"] = {}
    html = out.get("data", {}).get("text/html")
    if command and html:
        text = "".join(html) if isinstance(html, list) else html
        out["data"]["text/html"] = with_command(text, command)


def chapters_of(profile_dir: Path, states: Mapping[str, StageState] | None = None
                ) -> list[Path]:
    """The executed notebooks of a run folder, in order: every stage of the graph the profile
    runs (a stage that is not current keeps its page, marked so)."""
    found = sorted((Path(profile_dir) / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    states = states or {}
    return [nb for nb in found if nb.stem in graph.SPECS
            and (nb.stem not in states or states[nb.stem].state != "not_in_profile")]
