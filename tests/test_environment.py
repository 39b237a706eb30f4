"""pyproject.toml and environment.yml must declare the same dependencies."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _pyproject() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = data["project"]["dependencies"] + data["project"]["optional-dependencies"]["dev"]
    return {_name(r): r.replace(" ", "") for r in reqs}


def _environment() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_name(r): r.replace(" ", "") for r in pip if not r.startswith("-e")}


def test_environment_yml_matches_pyproject() -> None:
    py, env = _pyproject(), _environment()
    assert sorted(set(py) ^ set(env)) == [], "packages declared in only one of the two files"
    assert {k: py[k] for k in py if py[k] != env[k]} == {}, "version specifiers differ"


def test_uses_maintained_google_sdk() -> None:
    names = set(_pyproject())
    assert "google-genai" in names
    assert "google-generativeai" not in names


def test_environment_installs_this_package() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip
    assert any(str(d).startswith("python>=3.11") for d in env["dependencies"])
