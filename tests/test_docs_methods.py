"""docs/methods.md against what could make it stale: chapters, profile keys and their default
values, paper sections, repository paths and links, and the page's Markdown shape."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hbpsych_utils.pipeline import profiles
from hbpsych_utils.pipeline.profiles import Profile

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "methods.md"
TEXT = DOC.read_text("utf-8")
PAPER = ROOT.parent / "shared" / "docs" / "paper.md"
"""The study paper's reference copy, beside the repository where the project keeps it (absent
from a clone elsewhere: then only the numbering below is checked)."""

PAPER_SECTIONS = {"1", "2", "3", "4", "5", "2.1", "2.2", "2.3", "2.4", "2.5",
                  "3.1", "3.2", "3.3", "3.4", "3.5"}
"""The paper's section numbering."""
PAPER_APPENDICES = set("ABCDEFGHI")
"""The appendix letters the paper refers to."""

CODE_SPAN = re.compile(r"`([^`]+)`")
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+")
FILE_SUFFIXES = {"json", "jsonl", "csv", "md", "yaml", "yml", "ipynb", "py", "html", "png",
                 "svg", "tex", "sqlite", "txt"}
REPO_DIRS = ("hbpsych_utils/", "params/", "data/", "notebooks/", "docs/", "tests/", "scripts/",
             "benchmarks/", "figures/")
NOTEBOOKS = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


def code_spans() -> list[str]:
    return CODE_SPAN.findall(TEXT)


def profile_key_exists(dotted: str) -> bool:
    model: type[BaseModel] = Profile
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        ann = field.annotation
        if i < len(parts) - 1:
            if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                return False
            model = ann
    return True


def profile_keys() -> set[str]:
    """Backticked dotted names that are not file names or Python names, and ``--set`` keys."""
    keys = set()
    for span in code_spans():
        if span.startswith("--set "):
            keys.add(span.removeprefix("--set ").split("=", 1)[0])
        elif DOTTED.fullmatch(span) and span.rsplit(".", 1)[1] not in FILE_SUFFIXES:
            keys.add(span)
    return keys


def test_every_chapter_named_is_a_notebook_and_every_notebook_is_named() -> None:
    named = set(re.findall(r"\b(\d{2}_[a-z][a-z0-9_]*)", TEXT))
    assert named - NOTEBOOKS == set(), "chapters named that are not notebooks"
    assert NOTEBOOKS - named == set(), "notebooks the methods page does not mention"


def test_every_step_names_its_chapter_and_paper_sections() -> None:
    steps = re.split(r"^## ", TEXT, flags=re.M)[1:]
    numbered = [s for s in steps if re.match(r"\d+\. ", s)]
    assert len(numbered) >= 12
    for step in numbered:
        title, _, body = step.partition("\n")
        assert re.search(r"^\*Chapter \d{2}_\w+\. Paper §", body.lstrip(), flags=re.M), title


def test_every_profile_key_named_exists_in_the_profile_model() -> None:
    keys = profile_keys()
    assert "review_round1.n_controls" in keys  # the extraction finds what it should
    unknown = sorted(k for k in keys if not profile_key_exists(k))
    assert unknown == []


def _value(text: str) -> Any:
    """A value as the page writes it in parentheses after a key, or None when it is prose."""
    text = text.strip().removesuffix(" in the default profile")
    if re.fullmatch(r"\d[\d,]*(\.\d+)?%", text):
        return float(text[:-1].replace(",", "")) / 100
    if re.fullmatch(r"\d[\d,]*(\.\d+)?", text):
        return float(text.replace(",", ""))
    if text in ("true", "false"):
        return text == "true"
    if text in ("v1", "v2", "hard"):
        return text
    return None


def test_values_quoted_beside_keys_are_the_default_profile_values() -> None:
    default = profiles.load_profile("default").model_dump()
    pairs = re.findall(r"`([a-z_0-9]+(?:\.[a-z_0-9]+)+)`\s+\(([^)]*)\)", TEXT)
    checked = 0
    for key, shown in pairs:
        expected = _value(shown)
        if expected is None:
            continue
        node: Any = default
        for part in key.split("."):
            node = node[part]
        same = node == pytest.approx(expected) if isinstance(expected, float) else node == expected
        assert same, f"{key}: the page says {shown}, the default profile has {node!r}"
        checked += 1
    assert checked >= 8


def test_python_names_resolve() -> None:
    for span in code_spans():
        if DOTTED.fullmatch(span) and span.startswith("hbpsych_utils."):
            module, _, attr = span.rpartition(".")
            assert hasattr(importlib.import_module(module), attr), span


def test_repository_paths_and_links_exist() -> None:
    for span in code_spans():
        if span.startswith(REPO_DIRS):
            assert (ROOT / span).exists(), span
    for target in re.findall(r"\]\(([^)]+)\)", TEXT):
        if target.startswith(("http://", "https://")):
            continue
        assert (DOC.parent / target.split("#", 1)[0]).is_file(), target


def test_paper_sections_cited_exist() -> None:
    cited = set(re.findall(r"§(\d+(?:\.\d+)?)", TEXT))
    assert cited and cited <= PAPER_SECTIONS, cited - PAPER_SECTIONS
    letters = set(re.findall(r"\bAppendix ([A-Z])\b", TEXT))
    for a, b in re.findall(r"\bAppendices ([A-Z]) and ([A-Z])\b", TEXT):
        letters |= {a, b}
    assert letters and letters <= PAPER_APPENDICES, letters - PAPER_APPENDICES


def test_the_numbering_is_the_papers() -> None:
    if not PAPER.is_file():
        pytest.skip(f"no reference copy of the paper at {PAPER}")
    paper = PAPER.read_text("utf-8")
    sections = set(re.findall(r"^(\d(?:\.\d)?) [A-Z]", paper, flags=re.M))
    assert sections == PAPER_SECTIONS
    letters = set(re.findall(r"\bAppendix ([A-Z])\b", paper))
    letters |= set(re.findall(r"\bFigure ([A-Z])\d", paper))
    letters |= set(re.findall(r"\bAppendices ([A-Z])\b", paper))
    assert letters == PAPER_APPENDICES


def test_plain_markdown_a_book_page_can_hold() -> None:
    lines = TEXT.splitlines()
    assert lines[0].startswith("# ")
    headings = [ln for ln in lines[1:] if ln.startswith("#")]
    assert all(h.startswith("## ") for h in headings), "below the title only ## headings"
    for block in TEXT.split("\n\n"):
        first, *rest = block.splitlines()
        if first.startswith("- "):
            rest = [ln for ln in rest if not ln.startswith("- ")]
        wrapped = [ln for ln in rest if re.match(r"\s*([-+*>]|\d+[.)])\s", ln)]
        assert wrapped == [], "a wrapped line that Markdown reads as a list or quote"
    prose = CODE_SPAN.sub("", TEXT)
    assert not re.search(r"<[A-Za-z!/]", prose), "raw HTML"
    assert "$" not in prose, "math markup"
