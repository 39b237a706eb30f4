"""Where the compendium's files live: project root, registry, cache, profiles and outputs.

Everything is resolved from the project root (the folder holding ``params/`` and ``data/``),
which is the parent of this package in a source checkout, or ``$HBPSYCH_ROOT`` when set.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("HBPSYCH_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def registry_file() -> Path:
    return project_root() / "data" / "registry.yaml"


def external_dir() -> Path:
    """Download cache for external artifacts (git-ignored); ``$HBPSYCH_DATA_DIR`` overrides it."""
    env = os.environ.get("HBPSYCH_DATA_DIR")
    return Path(env).resolve() if env else project_root() / "data" / "external"


def params_dir() -> Path:
    return project_root() / "params"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def outputs_root() -> Path:
    env = os.environ.get("HBPSYCH_OUTPUTS")
    return Path(env).resolve() if env else project_root() / "outputs"


def figures_dir() -> Path:
    """Where the default profile publishes the paper's figures; ``$HBPSYCH_FIGURES`` overrides."""
    env = os.environ.get("HBPSYCH_FIGURES")
    return Path(env).resolve() if env else project_root() / "figures"


def resolve_path(value: str | Path) -> Path:
    """A path a profile gives: absolute as given, otherwise relative to the project root."""
    p = Path(value)
    return p if p.is_absolute() else project_root() / p
