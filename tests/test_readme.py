"""The front door: a short README whose links, and the docs' links, all resolve inside the
repository (or go to the web), anchors included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
MAX_README_LINES = 180


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def test_the_readme_is_a_quick_start_and_a_map() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES
    # the procedure is the repository's own, not a file outside it
    assert "docs/methods.md" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_link_stays_in_the_repository_or_goes_to_the_web(doc: Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if target.startswith(("https://", "http://")):
            continue
        file, _, fragment = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        assert path.is_relative_to(ROOT), (doc.name, target)
        assert path.exists(), (doc.name, target)
        if fragment and path.suffix == ".md":
            assert fragment in anchors(path), (doc.name, target)


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash run_tests.sh" in README.read_text(encoding="utf-8")
    assert re.search(r"^bash run_tests\.sh$", ci, flags=re.M)
