"""Where the compendium's files live: project root, registry, cache, profiles and outputs.

Everything is resolved from the project root (the folder holding ``params/`` and ``data/``),
which is the parent of this package in a source checkout, or ``$HBPSYCH_ROOT`` when set. A path
the user gives — on the command line (``--outputs``, a profile file) or in the environment
(``$HBPSYCH_OUTPUTS``, ``$HBPSYCH_DATA_DIR``, ``$HBPSYCH_FIGURES``) — is the caller's: relative
to the directory the command was started from (:func:`from_caller`), although ``run_all.sh``
runs Python from the project folder.
"""

from __future__ import annotations

import os
from pathlib import Path

CALLER_DIR_ENV = "HBPSYCH_CALLER_DIR"
"""The directory a command was started from, when Python runs elsewhere: ``run_all.sh`` sets it
before it changes to the project folder, and the runner passes it on to the kernels."""


def caller_dir() -> Path:
    """The directory the command was started from (``$HBPSYCH_CALLER_DIR``, else the current
    directory)."""
    env = os.environ.get(CALLER_DIR_ENV)
    return Path(env) if env else Path.cwd()


def from_caller(value: str | Path) -> Path:
    """A path the user gave, as they meant it: absolute as given, otherwise relative to the
    directory the command was started from (not the project folder); symbolic links resolved
    where they lead somewhere (a loop is left for the file system to name when it is used)."""
    return Path(os.path.realpath(caller_dir() / value))


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
    return from_caller(env) if env else project_root() / "data" / "external"


def params_dir() -> Path:
    return project_root() / "params"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def outputs_root() -> Path:
    env = os.environ.get("HBPSYCH_OUTPUTS")
    return from_caller(env) if env else project_root() / "outputs"


def figures_dir() -> Path:
    """Where the default profile publishes the paper's figures; ``$HBPSYCH_FIGURES`` overrides."""
    env = os.environ.get("HBPSYCH_FIGURES")
    return from_caller(env) if env else project_root() / "figures"


def resolve_path(value: str | Path) -> Path:
    """A path a profile gives: absolute as given, otherwise relative to the project root."""
    p = Path(value)
    return p if p.is_absolute() else project_root() / p
