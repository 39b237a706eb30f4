"""The book's figures page: the tables and figures of 12_figures_tables in the paper's order,
under the paper's labels and with their captions, each with its downloads and where it came
from; Table 1 and Table I1 laid out by the display vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hbpsych_utils import study
from hbpsych_utils.core import records
from hbpsych_utils.pipeline.metrics import ScoresMetrics
from hbpsych_utils.reporting import catalogue
from hbpsych_utils.reporting.book_markdown import FIGURES_STAGE, cell, chapter_link, code
from hbpsych_utils.reporting.book_run import BookError


def _file_label(name: str) -> str:
    """How a download is named: its format, and the subset of a per-subset table."""
    stem, _, ext = name.rpartition(".")
    kind = {"md": "Markdown", "tex": "LaTeX"}.get(ext, ext.upper())
    key = stem.removeprefix("table1_")
    return f"{kind}, {study.SUBSET_TITLES[key]}" if key in study.SUBSET_TITLES else kind


def figure_page_tables(stage_dir: Path, made: catalogue.Catalogue,
                       scores: ScoresMetrics | None) -> dict[str, str]:
    """Table 1 and Table I1 as the display vocabulary shows them (HTML, by catalogue stem),
    from the Table 1 files 12_figures_tables wrote (``table1_<subset>.csv``), with the
    resamples and interval level of 08's metrics (``scores``)."""
    from hbpsych_utils.reporting import tables  # with pandas: loaded only to build a book

    item = next((i for i in made.items if i.stem == "table1"), None)
    if item is None:
        return {}
    frames = {name.removeprefix("table1_").removesuffix(".csv"):
              tables.read_table1_file(stage_dir / name) for name in item.files
              if name.startswith("table1_") and name.endswith(".csv")
              and (stage_dir / name).is_file()}
    if not frames:
        return {}
    first = next(iter(frames))
    judges = tables.judges_in(frames[first])
    level = (scores.ci_level if scores is not None else None) or study.CI_LEVEL
    intervals = all(tables.has_intervals(t) for t in frames.values())
    n_resamples = scores.n_resamples if scores is not None and intervals else None
    return {"table1": tables.paper_table1(frames, judges=judges, n_resamples=n_resamples,
                                          level=level).table().html(),
            "table_i1": tables.per_judge_table(frames[first], subset=first,
                                               judges=judges).table().html(style=False)}


def figures_markdown(stage_dir: Path, rel: str, chapters: Sequence[str], banner: str = "",
                     command: str = "", scores: ScoresMetrics | None = None,
                     card: str = "") -> str:
    """The tables and figures of 12_figures_tables in the paper's order, under the paper's
    labels and with their captions (its ``catalogue.json``), each with its downloads (``rel``:
    the folder of the files' copies, relative to the page) and where it came from: chapter 12
    and ``command``, which makes it again; ``banner`` when 12 is not current. The tables are
    laid out by the display vocabulary (``scores``: 08's metrics, for Table 1's interval level
    and resamples); Table 1 is followed by the headline score's comparability ``card``
    (Markdown)."""
    parts = ["# Figures and tables\n"]
    if banner:
        parts.append(f"```{{warning}}\n{banner}\n```\n")
    try:
        made = catalogue.read(stage_dir) if stage_dir.is_dir() else None
    except (ValueError, OSError) as exc:
        raise BookError(str(exc)) from exc
    if made is None or not made.items:
        parts.append(f"No figures: {chapter_link('chapter 12', FIGURES_STAGE, chapters)} did "
                     "not run.\n")
        return "\n".join(parts)
    parts.append(f"Drawn by {chapter_link('chapter 12', FIGURES_STAGE, chapters)}, in the "
                 "paper's order and under its labels; the compendium's own additions follow, "
                 "marked so. Each comes with its files.\n")
    laid_out = figure_page_tables(stage_dir, made, scores)
    if card and "table1" in laid_out:
        laid_out["table1"] += "\n" + card
    for item in made.items:
        parts += _item(item, stage_dir, rel, laid_out.get(item.stem))
        if command:
            parts.append(f"{chapter_link('Chapter 12', FIGURES_STAGE, chapters)} · "
                         f"{code(command, cell=False)}\n")
        parts.append("Files: " + " · ".join(
            f"{{download}}`{_file_label(name)} <{rel}/{name}>`" for name in item.files
            if (stage_dir / name).is_file()) + "\n")
    return "\n".join(parts)


def _item(item: catalogue.Item, stage_dir: Path, rel: str, laid_out: str | None) -> list[str]:
    """One table or figure under its heading: a table laid out by the vocabulary
    (``laid_out``), or the Markdown file 12 wrote, or the figure's image, each with its
    caption; marked when the paper does not have it."""
    parts = [f"## {cell(item.heading)}\n"]
    markdown = next((f for f in item.files if f.endswith(".md")), None)
    if laid_out is not None:
        parts.append(laid_out + "\n")
    elif markdown is not None and (stage_dir / markdown).is_file():
        text = records.read_text(stage_dir / markdown, error=BookError).strip()
        parts.append(cell(item.caption) + "\n")
        parts.append(text.split("\n\n", 1)[-1] + "\n")  # the table, below its caption line
    elif f"{item.stem}.png" in item.files:
        parts.append(f"![{cell(item.heading)}]({rel}/{item.stem}.png)\n")
        parts.append(cell(item.caption) + "\n")
    if not item.in_paper:
        parts.append("*Not in the paper: drawn by the compendium.*\n")
    return parts
