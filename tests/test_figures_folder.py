"""The top-level ``figures/`` folder holds exactly the last publishing run's files
(``reporting.figures_folder``); its README and files the project did not write stay."""

from __future__ import annotations

import json
from pathlib import Path

from hbpsych_utils.reporting import figures_folder


def stage(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(f"{folder.name}:{name}", encoding="utf-8")
    return folder


def test_a_publication_removes_the_files_an_earlier_one_wrote_and_this_one_did_not(
        tmp_path: Path) -> None:
    target = stage(tmp_path / "figures", "README.md", "mine.png")
    first = stage(tmp_path / "hard", "fig_judges_hard.png", "table1.md")
    assert figures_folder.publish(first, ["fig_judges_hard.png", "table1.md"], target) == []
    second = stage(tmp_path / "v1", "fig_judges_v1.png", "table1.md")
    removed = figures_folder.publish(second, ["table1.md", "fig_judges_v1.png"], target)
    assert removed == ["fig_judges_hard.png"]
    visible = {p.name for p in target.iterdir() if p.name != figures_folder.RECORD}
    assert visible == {"README.md", "mine.png", "fig_judges_v1.png", "table1.md"}
    assert (target / "table1.md").read_text(encoding="utf-8") == "v1:table1.md"
    assert figures_folder.written(target) == {"fig_judges_v1.png", "table1.md"}


def test_only_recorded_plain_names_are_ever_removed(tmp_path: Path) -> None:
    """A damaged record removes nothing; a name with a folder in it, or the folder's README, is
    never the project's."""
    target = stage(tmp_path / "figures", "README.md", "a.png")
    outside = stage(tmp_path / "elsewhere", "keep.txt")
    (target / figures_folder.RECORD).write_text(
        json.dumps({"files": ["README.md", "../elsewhere/keep.txt", 3, "a.png"]}),
        encoding="utf-8")
    assert figures_folder.written(target) == {"a.png"}
    (target / figures_folder.RECORD).write_text("{not json", encoding="utf-8")
    assert figures_folder.written(target) == set()
    figures_folder.publish(stage(tmp_path / "run", "b.png"), ["b.png"], target)
    assert {p.name for p in target.iterdir()} >= {"README.md", "a.png", "b.png"}
    assert (outside / "keep.txt").is_file()
