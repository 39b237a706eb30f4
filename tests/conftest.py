"""Shared fixtures: the offline mirror, a scratch outputs root, isolated artifact caches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MIRROR = ROOT.parent / "shared" / "mirror"


def mirror_path() -> Path | None:
    env = os.environ.get("HBPSYCH_MIRROR")
    if env:
        return Path(env)
    return DEFAULT_MIRROR if DEFAULT_MIRROR.is_dir() else None


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The offline mirror of the external artifacts (tests that need real data use it)."""
    path = mirror_path()
    if path is None or not path.is_dir():
        pytest.skip("no offline mirror: set HBPSYCH_MIRROR to run tests on the released data")
    return path


@pytest.fixture(autouse=True)
def _use_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees the mirror through HBPSYCH_MIRROR, as CI does, unless it unsets it."""
    path = mirror_path()
    if path is not None:
        monkeypatch.setenv("HBPSYCH_MIRROR", str(path))


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty artifact cache, so a test sees fetch() do its work from scratch."""
    cache = tmp_path / "external"
    monkeypatch.setenv("HBPSYCH_DATA_DIR", str(cache))
    return cache
