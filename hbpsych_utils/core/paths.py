"""Where the compendium's files live: project root, registry, cache, profiles and outputs.

Everything is resolved from the project root (the folder holding ``params/`` and ``data/``),
which is the parent of this package in a source checkout, or ``$HBPSYCH_ROOT`` when set. A path
the user gives — on the command line (``--outputs``, a profile file) or in the environment
(``$HBPSYCH_OUTPUTS``, ``$HBPSYCH_DATA_DIR``, ``$HBPSYCH_FIGURES``) — is the caller's: relative
to the directory the command was started from (:func:`from_caller`), although ``run_all.sh``
runs Python from the project folder.

What a run writes stays in its place: a profile's name is a plain name (:func:`plain_name`), so
``outputs/<profile>/`` is a folder of the outputs root and nothing else; and an outputs root or a
run folder is never the project's source tree (:func:`outside_source_tree`), so no run can
replace a notebook or write into the repository.
"""

from __future__ import annotations

import os
import re
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


OUTPUTS_DIR = "outputs"
"""The project's outputs folder (git-ignored), the default outputs root: the one place inside
the project where runs are written."""


def outputs_root() -> Path:
    env = os.environ.get("HBPSYCH_OUTPUTS")
    return from_caller(env) if env else project_root() / OUTPUTS_DIR


class UnsafePath(ValueError):
    """A name or folder that would let a command write outside its place: refused before
    anything is written (the command line says it in one line, exit 2)."""


NAME_RULE = ("a plain name: ASCII letters, digits, '_' and '-', with '.' only inside "
             "(not '.' or '..', not empty)")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.+[A-Za-z0-9_-]+)*")


def plain_name(value: str, what: str) -> str:
    """``value`` if it is a plain name (:data:`NAME_RULE`), else :class:`UnsafePath`. A plain
    name used as one path component always names a folder inside its parent: never the parent
    itself (``.``), its parent (``..``), a path (``a/b``) or a hidden file. ASCII only, so two
    names that read the same are the same folder."""
    if not is_plain_name(value):
        raise UnsafePath(f"{what} {value!r} is not {NAME_RULE}")
    return value


def profile_name(name_or_path: str | Path) -> str:
    """The name of a profile given by name (``smoke``) or by YAML path (its file's stem),
    when it is a plain name, else :class:`UnsafePath`: the name is the run's folder under the
    outputs root, so ``..`` (a file ``...yaml``), ``.`` (``..yaml``) or an empty name would
    write above or among the other runs."""
    text = str(name_or_path)
    p = Path(text)
    name = p.stem if text and p.suffix in (".yaml", ".yml") else text
    try:
        return plain_name(name, "profile name")
    except UnsafePath as exc:
        shown = f" (the file {text})" if name != text else ""
        raise UnsafePath(f"{exc}{shown}: rename the profile") from None


def is_plain_name(value: str) -> bool:
    """Whether :func:`plain_name` accepts ``value``."""
    return _PLAIN_NAME.fullmatch(value) is not None


def outside_source_tree(folder: str | Path, what: str, *, may_hold_project: bool = False
                        ) -> Path:
    """``folder`` (the caller's, symbolic links resolved) when a command may write into it,
    else :class:`UnsafePath`: an empty path, the project folder, a folder inside it other than
    its outputs folder (:data:`OUTPUTS_DIR`), or (unless ``may_hold_project``: an outputs root
    above the project is a root like any other) a folder holding the project would put a run's
    files among the sources (an executed notebook replacing ``notebooks/01_corpus.ipynb``)."""
    if str(folder) == "":
        raise UnsafePath(f"{what}: an empty path (expected a folder, e.g. {OUTPUTS_DIR})")
    resolved = from_caller(folder)
    project = Path(os.path.realpath(project_root()))
    allowed = Path(os.path.realpath(project / OUTPUTS_DIR))
    if resolved == project or (project.is_relative_to(resolved) and not may_hold_project):
        which = "is the project folder" if resolved == project else f"holds the project {project}"
        raise UnsafePath(f"{what} {resolved} {which} (expected a folder of its own, e.g. "
                         f"{allowed})")
    if resolved.is_relative_to(project) and not resolved.is_relative_to(allowed):
        raise UnsafePath(f"{what} {resolved} is inside the project's source tree {project} "
                         f"(expected {allowed} or a folder outside the project)")
    return resolved


def run_folder(root: str | Path, profile: str) -> Path:
    """``<root>/<profile>``, the run folder of a profile, once both are checked: the name is
    a plain name, the root outside the source tree (it may lie above the project), the folder
    (where a link leads) outside it and not holding it."""
    plain_name(profile, "profile name")
    root = outside_source_tree(root, "outputs root", may_hold_project=True)
    outside_source_tree(root / profile, f"run folder of profile {profile!r}")
    return root / profile


def inside(path: str | Path, folder: str | Path, what: str) -> Path:
    """``path`` when, symbolic links resolved, it lies in ``folder`` (resolved too), else
    :class:`UnsafePath`: what a stage writes stays in its folder."""
    resolved, base = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    if not resolved.is_relative_to(base) or resolved == base:
        raise UnsafePath(f"{what} {path} resolves to {resolved}, not inside {base}")
    return Path(path)


def figures_dir() -> Path:
    """Where the default profile publishes the paper's figures; ``$HBPSYCH_FIGURES`` overrides."""
    env = os.environ.get("HBPSYCH_FIGURES")
    return from_caller(env) if env else project_root() / "figures"


def resolve_path(value: str | Path) -> Path:
    """A path a profile gives: absolute as given, otherwise relative to the project root."""
    p = Path(value)
    return p if p.is_absolute() else project_root() / p
