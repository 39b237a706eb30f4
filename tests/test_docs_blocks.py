"""The docs' chapter lists and the graph's table are written from the stage graph: they are
current, and a stage added to the graph reaches every one of them through ``python -m
hbpsych_utils docs`` with no hand edit."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from hbpsych_utils.__main__ import main
from hbpsych_utils.pipeline import docs_blocks, graph


def test_the_generated_parts_of_the_docs_are_current() -> None:
    assert docs_blocks.stale() == []
    assert main(["docs", "--check"]) == 0


def test_every_chapter_is_in_the_readme_and_the_module_map() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    modules = (ROOT / "docs" / "modules.md").read_text(encoding="utf-8")
    for name, spec in graph.SPECS.items():
        assert f"| `{name}` | {spec.summary}" in readme
        assert f"| `s{name}` | {name[:2]} | {spec.summary}" in modules


def test_a_stage_added_to_the_graph_reaches_every_list(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for block in docs_blocks.BLOCKS:
        (tmp_path / block.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / block.path, tmp_path / block.path)
    added = dataclasses.replace(graph.spec(graph.EXPLORER), name="16_added",
                                summary="a chapter added to the graph", doc="added.md")
    monkeypatch.setitem(graph.SPECS, "16_added", added)
    assert docs_blocks.stale(tmp_path) == ["README.md", "docs/modules.md", "docs/pipeline.md"]
    assert docs_blocks.refresh(tmp_path) == ["README.md", "docs/modules.md", "docs/pipeline.md"]
    assert docs_blocks.stale(tmp_path) == []
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "| `16_added` | a chapter added to the graph ([`docs/added.md`](docs/added.md)) |" \
        in readme
    assert "| `s16_added` | 16 |" in (tmp_path / "docs" / "modules.md").read_text("utf-8")
    assert "| 16_added |" in (tmp_path / "docs" / "pipeline.md").read_text("utf-8")


def test_a_file_without_its_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"README.md: no <!-- chapters:start -->"):
        docs_blocks.BLOCKS[0].put("# no block here\n")
