"""The declared, locked and conda environments agree.

pyproject.toml declares the dependencies; requirements.lock (made by scripts/lock.sh) pins them
and the dev extra with hashes for the .venv that scripts/ensure_env.sh installs,
requirements-inspect.lock pins the same plus the optional inspect extra and
requirements-all.lock every optional extra (inspect, ray); environment.yml lists
the dependencies and the dev extra as conda-forge packages. None of these tests needs the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
INSPECT_LOCK = ROOT / "requirements-inspect.lock"
FULL_LOCK = ROOT / "requirements-all.lock"
LOCKS = (LOCK, INSPECT_LOCK, FULL_LOCK)
REGENERATE = ("run `bash scripts/lock.sh` and commit requirements.lock, requirements-inspect.lock "
              "and requirements-all.lock")
OPTIONAL_EXTRAS = {"inspect", "ray"}
"""Extras that requirements.lock and environment.yml leave out (requirements-all.lock has
them all): installing the package without them must not install them."""
LOCK_EXTRAS = {LOCK: set(), INSPECT_LOCK: {"inspect"}, FULL_LOCK: OPTIONAL_EXTRAS}
"""The optional extras each lock holds."""

# The platform the lock targets (scripts/lock.sh: --python-version 3.11, Linux x86_64).
LOCK_MARKERS = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}

# conda-forge package name -> PyPI distribution name, where they differ.
CONDA_TO_PYPI = {
    "matplotlib-base": "matplotlib",
    "seaborn-base": "seaborn",
    "playwright-python": "playwright",
}
# Dependencies that conda-forge does not package: the only ones in environment.yml's pip section.
NOT_ON_CONDA_FORGE = {"py3langid"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _declared(*, optional: set[str] = OPTIONAL_EXTRAS) -> list[str]:
    """Every requirement string of [project.dependencies] and of every extra, of the
    OPTIONAL_EXTRAS only those in ``optional``."""
    project = _project()
    extras = project.get("optional-dependencies", {})
    return [*project.get("dependencies", []),
            *(r for name, reqs in extras.items() for r in reqs
              if name in optional or name not in OPTIONAL_EXTRAS)]


def _spec_hash() -> str:
    """The fingerprint scripts/lock.sh writes into the lock header (same normalisation)."""
    project = _project()

    def norm(reqs: list[str]) -> list[str]:
        return sorted("".join(r.split()) for r in reqs)

    spec = {
        "dependencies": norm(project.get("dependencies", [])),
        "optional-dependencies": {
            k: norm(v) for k, v in project.get("optional-dependencies", {}).items()
        },
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _lock_entries(lock: Path = LOCK) -> list[str]:
    """The lock's requirement lines, backslash continuations joined, comments dropped."""
    text = lock.read_text().replace("\\\n", " ")
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def _pins(lock: Path = LOCK) -> dict[str, str]:
    pins = {}
    for entry in _lock_entries(lock):
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", entry)
        assert match, f"{lock.name}: not an exact pin: {entry[:80]!r}"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_lock_is_current_with_pyproject(lock: Path) -> None:
    header = re.search(r"^# pyproject-dependencies-sha256: ([0-9a-f]{64})$", lock.read_text(),
                       re.M)
    assert header, f"{lock.name} has no dependency fingerprint: {REGENERATE}"
    assert header[1] == _spec_hash(), (
        f"pyproject.toml's dependencies changed since {lock.name} was made: {REGENERATE}"
    )


def _extra_names(extras: set[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name)
            for name, reqs in _project()["optional-dependencies"].items()
            if name in extras for r in reqs}


@pytest.mark.parametrize("lock", (LOCK, INSPECT_LOCK), ids=lambda p: p.name)
def test_lock_leaves_the_other_optional_extras_out(lock: Path) -> None:
    """requirements.lock (what run_all.sh installs) has neither Inspect nor Ray, and the inspect
    lock no Ray: none of the packages only the extras it leaves out need; every lock agrees
    with the full one on every package they share."""
    pins, full = _pins(lock), _pins(FULL_LOCK)
    held, left = _extra_names(LOCK_EXTRAS[lock]), _extra_names(OPTIONAL_EXTRAS - LOCK_EXTRAS[lock])
    assert left and left <= set(full)
    assert held <= set(pins)
    assert left & set(pins) == set()
    assert set(pins) < set(full)
    assert {n: (v, full[n]) for n, v in pins.items() if full[n] != v} == {}, (
        f"the locks pin shared packages differently: {REGENERATE}"
    )


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_lock_satisfies_every_declared_requirement(lock: Path) -> None:
    pins = _pins(lock)
    problems = []
    for text in _declared(optional=LOCK_EXTRAS[lock]):
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(LOCK_MARKERS):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req.name}: not in {lock.name}")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req.name}: locked {pinned} is outside {req.specifier}")
    assert problems == [], f"{problems}: {REGENERATE}"


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_every_pin_is_exact_and_hashed(lock: Path) -> None:
    entries = _lock_entries(lock)
    assert len(entries) >= len(_declared(optional=LOCK_EXTRAS[lock]))
    unhashed = [e.split()[0] for e in entries if "--hash=sha256:" not in e]
    assert unhashed == [], "pins without a sha256 hash (pip --require-hashes would refuse them)"
    _pins(lock)  # every entry is name==version


def test_lock_has_no_gpu_stack() -> None:
    gpu = sorted(n for n in _pins(FULL_LOCK) if n in {"torch", "triton"} or n.startswith("nvidia-"))
    assert gpu == [], "the compendium runs on CPU; a GPU stack must not be locked"


def test_venv_matches_lock() -> None:
    """The .venv that ensure_env.sh made holds exactly the locked versions (hand upgrades show)."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("not running in this checkout's .venv (ensure_env.sh installs the lock there)")
    stamp = ROOT / ".venv" / ".hbpsych-stamp"
    which = ROOT / ".venv" / ".hbpsych-lock"
    lock = ROOT / which.read_text().strip() if which.exists() else LOCK
    current = hashlib.sha256(lock.read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    if not stamp.exists() or stamp.read_text().strip() != current.hexdigest():
        pytest.skip(f".venv predates {lock.name}; the next run_tests.sh reinstalls it")
    differ = {}
    for name, pinned in _pins(lock).items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != pinned:
            differ[name] = (pinned, installed)
    assert differ == {}, f"installed versions differ from {lock.name} (locked, installed)"


UV_VERSION = re.search(r'^HBPSYCH_UV_VERSION="([^"]+)"$', (ROOT / "scripts" / "uv.sh").read_text(),
                       re.M)[1]
"""The uv that ensure_env.sh installs with and lock.sh resolves with (pinned once, in uv.sh)."""


def _fake_python(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout copy whose .venv/bin/python only logs its calls (ensure_env.sh's view of pip),
    and ``fake-uv`` beside it, which logs its calls too (``uv venv DIR`` makes DIR/bin/python)."""
    for name in ("scripts/ensure_env.sh", "scripts/uv.sh", "pyproject.toml",
                 *(p.name for p in LOCKS)):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    log = tmp_path / "calls.log"
    template = tmp_path / "fake-python"
    template.write_text(f'#!/bin/sh\necho "python $*" >> "{log}"\ncat > /dev/null\nexit 0\n')
    template.chmod(0o755)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_bytes(template.read_bytes())
    python.chmod(0o755)
    uv = tmp_path / "fake-uv"
    uv.write_text(f'#!/bin/sh\necho "uv $*" >> "{log}"\n'
                  'if [ "$1" = venv ]; then for last; do :; done\n'
                  f'  mkdir -p "$last/bin" && cp "{template}" "$last/bin/python"; fi\nexit 0\n')
    uv.chmod(0o755)
    return tmp_path, log


def _source_ensure_env(root: Path, extras: str = "",
                       **env: str) -> subprocess.CompletedProcess[str]:
    """Source ensure_env.sh in ``root`` (uv: the fake one, unless ``env`` says otherwise)."""
    base = {k: v for k, v in os.environ.items()
            if k not in {"HBPSYCH_PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX", "HBPSYCH_EXTRAS",
                         "HBPSYCH_INSTALLER", "UV"}}
    return subprocess.run(
        ["bash", "-c", 'source scripts/ensure_env.sh && echo "PY=$PY"'],
        cwd=root, env={**base, "HBPSYCH_EXTRAS": extras, "UV": str(root / "fake-uv"), **env},
        capture_output=True, text=True, timeout=60, check=False,
    )


def _calls(log: Path, tool: str) -> list[str]:
    """The logged calls of ``tool`` ("uv" or "python"), without its name."""
    return [c.split(" ", 1)[1] for c in log.read_text().splitlines() if c.startswith(f"{tool} ")]


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_ensure_env_installs_the_lock_and_reinstalls_when_it_changes(
        tmp_path: Path, installer: str) -> None:
    """uv by default (HBPSYCH_INSTALLER=pip asks for pip): the same lock, hash-checked, then the
    package editable without dependencies; nothing when nothing changed."""
    root, log = _fake_python(tmp_path)
    venv_python = root / ".venv" / "bin" / "python"
    env = {"HBPSYCH_INSTALLER": installer}

    first = _source_ensure_env(root, **env)
    assert first.returncode == 0, first.stderr
    if installer == "uv":
        installs = _calls(log, "uv")
        assert all(c.startswith(f"pip install --python {venv_python} ") for c in installs), installs
        assert all("--compile-bytecode" in c for c in installs)  # the .pyc files pip writes too
        assert [c for c in _calls(log, "python") if "pip install" in c] == []
    else:
        installs = [c for c in _calls(log, "python") if c.startswith("-m pip ")]
        assert _calls(log, "uv") == []
    assert any(f"--require-hashes -r {root}/requirements.lock" in c for c in installs), installs
    assert any(f"--no-deps -e {root}" in c for c in installs), installs

    log.write_text("")
    again = _source_ensure_env(root, **env)
    assert again.returncode == 0 and "setting up" not in again.stderr
    assert " install " not in log.read_text(), "reinstalled although nothing changed"

    with (root / "requirements.lock").open("a") as lock:
        lock.write("# changed\n")
    changed = _source_ensure_env(root, **env)
    assert changed.returncode == 0 and "setting up" in changed.stderr
    assert "--require-hashes" in log.read_text()


@pytest.mark.slow
def test_ensure_env_makes_a_missing_venv_with_uv_and_pip_in_it(tmp_path: Path) -> None:
    root, log = _fake_python(tmp_path)
    shutil.rmtree(root / ".venv")
    result = _source_ensure_env(root)
    assert result.returncode == 0, result.stderr
    venv, *installs = _calls(log, "uv")
    assert venv.startswith("venv ") and "--seed" in venv.split()  # pip too, for hand installs
    assert venv.endswith(f" {root}/.venv")
    assert any(f"--require-hashes -r {root}/requirements.lock" in c for c in installs), installs
    assert (root / ".venv" / ".hbpsych-stamp").is_file()


def _failing_base_python(tmp_path: Path) -> Path:
    base = tmp_path / "base-python"
    base.write_text('#!/bin/sh\necho "ERROR: No matching distribution found for uv" >&2\nexit 1\n')
    base.chmod(0o755)
    return base


@pytest.mark.slow
def test_ensure_env_falls_back_to_pip_with_one_line_when_uv_cannot_be_installed(
        tmp_path: Path) -> None:
    root, log = _fake_python(tmp_path)
    cache = tmp_path / "cache"
    result = _source_ensure_env(root, UV="", XDG_CACHE_HOME=str(cache),
                                HBPSYCH_BASE_PYTHON=str(_failing_base_python(tmp_path)))
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "pip instead" in line]
    assert len(said) == 1 and f"uv=={UV_VERSION}" in said[0], result.stderr
    assert "No matching distribution found for uv" in said[0]  # why, in the same line
    pip = [c for c in _calls(log, "python") if c.startswith("-m pip ")]
    assert any(f"--require-hashes -r {root}/requirements.lock" in c for c in pip), pip
    assert list((cache / "hbpsych").iterdir()) == []  # nothing half-installed left behind


@pytest.mark.slow
def test_uv_is_installed_once_at_its_pin_and_reused(tmp_path: Path) -> None:
    """scripts/uv.sh installs uv==UV_VERSION with pip into a virtualenv of its own under the cache
    folder, once; lock.sh takes its uv from there too (the pin is written once)."""
    log = tmp_path / "calls.log"
    venv_python = (f'#!/bin/sh\necho "venv-python $*" >> "{log}"\n'
                   'bin="$(dirname "$0")"\n'
                   'printf \'#!/bin/sh\\necho "uv 0"\\n\' > "$bin/uv" && chmod +x "$bin/uv"\n')
    base = tmp_path / "base-python"
    base.write_text(f'#!/bin/sh\necho "base $*" >> "{log}"\nmkdir -p "$3/bin"\n'
                    f"cat > \"$3/bin/python\" <<'EOF'\n{venv_python}EOF\n"
                    'chmod +x "$3/bin/python"\n')
    base.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "UV"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    script = (f'source {ROOT}/scripts/uv.sh; for i in 1 2; do hbpsych_uv {base} || exit 1; '
              'echo "$HBPSYCH_UV"; done')
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    tools = tmp_path / "cache" / "hbpsych" / f"uv-{UV_VERSION}"
    assert result.stdout.split() == [str(tools / "bin" / "uv")] * 2
    calls = log.read_text().splitlines()
    assert [c.split()[:3] for c in calls] == [["base", "-m", "venv"],
                                             ["venv-python", "-m", "pip"]]  # once
    assert f"uv=={UV_VERSION}" in calls[1].split()
    assert sorted(p.name for p in tools.parent.iterdir()) == [tools.name]
    lock_sh = (ROOT / "scripts" / "lock.sh").read_text()
    assert "source scripts/uv.sh" in lock_sh and UV_VERSION not in lock_sh


@pytest.mark.slow
def test_ensure_env_with_extras_installs_their_lock(tmp_path: Path) -> None:
    root, log = _fake_python(tmp_path)
    assert _source_ensure_env(root).returncode == 0
    log.write_text("")
    result = _source_ensure_env(root, extras="inspect")
    assert result.returncode == 0 and "requirements-inspect.lock" in result.stderr
    assert f"--require-hashes -r {root}/requirements-inspect.lock" in log.read_text()
    assert (root / ".venv" / ".hbpsych-lock").read_text().strip() == "requirements-inspect.lock"
    log.write_text("")
    every = _source_ensure_env(root, extras="all")
    assert every.returncode == 0 and "requirements-all.lock" in every.stderr
    assert f"--require-hashes -r {root}/requirements-all.lock" in log.read_text()
    assert (root / ".venv" / ".hbpsych-lock").read_text().strip() == "requirements-all.lock"
    bad = _source_ensure_env(root, extras="gpu")
    assert bad.returncode != 0 and "HBPSYCH_EXTRAS=gpu" in bad.stderr and "inspect" in bad.stderr


@pytest.mark.slow
def test_ensure_env_names_a_missing_lock(tmp_path: Path) -> None:
    root, _ = _fake_python(tmp_path)
    (root / "requirements.lock").unlink()
    result = _source_ensure_env(root)
    assert result.returncode != 0
    assert "requirements.lock is missing" in result.stderr and "scripts/lock.sh" in result.stderr


# --- environment.yml -------------------------------------------------------------------------


def _environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def _conda_and_pip() -> tuple[list[str], list[str]]:
    deps = _environment()["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    return conda, pip


def _as_pypi(spec: str) -> tuple[str, str]:
    """(PyPI name, version bounds) of a conda-forge or pip line such as 'matplotlib-base>=3.8'."""
    name, bounds = re.match(r"^([A-Za-z0-9._-]+)\s*(.*)$", spec.strip()).groups()
    name = canonicalize_name(name)
    return canonicalize_name(CONDA_TO_PYPI.get(name, name)), bounds.replace(" ", "")


def test_environment_yml_matches_pyproject() -> None:
    declared = {canonicalize_name(r.name): str(r.specifier)
                for r in map(Requirement, _declared(optional=set()))}
    declared = {k: ",".join(sorted(v.split(","))) for k, v in declared.items()}
    conda, pip = _conda_and_pip()
    listed = dict(_as_pypi(d) for d in [*conda, *pip]
                  if not d.startswith("-") and _as_pypi(d)[0] not in {"python", "pip"})
    listed = {k: ",".join(sorted(v.split(","))) for k, v in listed.items()}
    only = {"pyproject.toml": sorted(set(declared) - set(listed)),
            "environment.yml": sorted(set(listed) - set(declared))}
    assert only == {"pyproject.toml": [], "environment.yml": []}, (
        f"declared in only one file (conda-forge names in environment.yml): {only}"
    )
    assert {k: (declared[k], listed[k]) for k in declared if declared[k] != listed[k]} == {}, (
        "version bounds differ (pyproject.toml, environment.yml)"
    )


def test_environment_yml_takes_from_pip_only_what_conda_forge_lacks() -> None:
    assert _environment()["channels"] == ["conda-forge"]
    _, pip = _conda_and_pip()
    from_pip = {_as_pypi(d)[0] for d in pip if not d.startswith("-")}
    assert from_pip == NOT_ON_CONDA_FORGE


def test_uses_maintained_google_sdk() -> None:
    names = {canonicalize_name(Requirement(r).name) for r in _declared()}
    assert "google-genai" in names
    assert "google-generativeai" not in names


def test_environment_installs_this_package() -> None:
    conda, pip = _conda_and_pip()
    assert "-e ." in pip
    assert any(d.replace(" ", "").startswith("python>=3.11") for d in conda)
