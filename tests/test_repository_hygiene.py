"""Nothing external or generated is tracked by git."""

from __future__ import annotations

import csv
import hashlib
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return [f for f in git("ls-files", "-z").split("\0") if f]


def test_generated_folders_are_ignored() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("outputs/default/manifest.json", "data/external/x.jsonl", "figures/fig1.png",
                 ".venv/bin/python", ".mypy_cache/3.11/x.json"):
        assert git("check-ignore", path).strip() == path, path


def test_no_tracked_file_is_generated(tracked: list[str]) -> None:
    assert not [f for f in tracked if f.startswith(("outputs/", "data/external/", ".venv/"))]


def test_no_mirror_artifact_is_tracked(tracked: list[str], mirror: Path) -> None:
    hashes = {r["sha256"] for r in csv.DictReader(open(mirror / "MANIFEST.tsv"), delimiter="\t")}
    for f in tracked:
        p = ROOT / f
        if p.is_file() and p.stat().st_size > 256:
            assert hashlib.sha256(p.read_bytes()).hexdigest() not in hashes, f
