"""The run manifest: what a profile run used and produced, and never a secret.

``outputs/<profile>/manifest.json`` records the profile, package version, git commit, the
notebooks run (status, seconds) and every artifact any stage used with its sha256. It is
rewritten after each notebook, so an interrupted run still says how far it got.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hbpsych_utils import __version__, paths
from hbpsych_utils.stage import write_json

SECRET_ENV_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "MOONSHOT_API_KEY",
    "MISTRAL_API_KEY",
    "DASHSCOPE_API_KEY",
    "HBPSYCH_API_KEY",
)


class SecretLeakError(RuntimeError):
    """Raised instead of writing a file that would contain an API key."""


def secret_values() -> list[str]:
    """Values of the API-key variables set in this environment (long enough to be keys)."""
    return [v for k in SECRET_ENV_VARS if len(v := os.environ.get(k, "")) >= 8]


def assert_no_secrets(text: str, where: str) -> None:
    for value in secret_values():
        if value in text:
            raise SecretLeakError(f"refusing to write {where}: it would contain an API key")


def git_commit(root: Path | None = None) -> dict[str, Any]:
    root = root or paths.project_root()
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root, capture_output=True, text=True, check=True,
            ).stdout.strip()
        )
        return {"commit": sha, "dirty": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def collect_artifacts(profile_dir: Path) -> dict[str, Any]:
    """Merge the ``stage.json`` records of every stage folder."""
    merged: dict[str, Any] = {}
    for rec in sorted(profile_dir.glob("*/stage.json")):
        data = json.loads(rec.read_text(encoding="utf-8"))
        for name, info in data.get("artifacts", {}).items():
            entry = merged.setdefault(name, {**info, "used_by": []})
            entry["used_by"].append(data.get("stage", rec.parent.name))
    return merged


def write_manifest(
    profile_dir: Path, profile: str, notebooks: list[dict[str, Any]], extra: dict | None = None
) -> Path:
    manifest = {
        "profile": profile,
        "package_version": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mirror": bool(os.environ.get("HBPSYCH_MIRROR")),
        "notebooks": notebooks,
        "artifacts": collect_artifacts(profile_dir),
        **(extra or {}),
    }
    path = profile_dir / "manifest.json"
    assert_no_secrets(json.dumps(manifest), str(path))
    return write_json(path, manifest)
