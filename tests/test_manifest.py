"""The manifest records the installed versions of what the package depends on."""

from __future__ import annotations

import json
import platform
import re
from importlib import metadata
from pathlib import Path

import pytest

from hbpsych_utils.runner import manifest


def test_installed_packages_cover_requirements_and_dev_extra() -> None:
    packages = manifest.installed_packages()
    assert packages["python"] == platform.python_version()
    assert packages["hbpsych_utils"] == metadata.version("hbpsych_utils")
    for name in ("papermill", "pydantic", "pyyaml", "ipykernel", "pytest", "ruff"):
        assert packages[name] == metadata.version(name), name
    declared = {re.match(r"[A-Za-z0-9._-]+", r).group().lower()  # type: ignore[union-attr]
                for r in metadata.requires("hbpsych_utils") or []}
    assert declared <= {k.lower() for k in packages}


def test_manifest_records_packages_overrides_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = manifest.write_manifest(tmp_path, "p", [], overrides={"seed": 1},
                                   profile_values={"seed": 1, "name": "p"})
    data = json.loads(path.read_text())
    assert data["packages"] == manifest.installed_packages()
    assert data["overrides"] == {"seed": 1} and data["profile_values"]["seed"] == 1
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secretvalue0123456789")
    with pytest.raises(manifest.SecretLeakError):
        manifest.write_manifest(tmp_path, "p", [],
                                profile_values={"llm": {"x": "sk-secretvalue0123456789"}})
