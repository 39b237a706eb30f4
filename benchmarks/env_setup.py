"""How long does setting up the environment take with uv, against pip, from the same lock?

Copies what ``scripts/ensure_env.sh`` needs (its scripts, ``pyproject.toml``, ``README.md``, the
locks and the package) into fresh folders and times ``source scripts/ensure_env.sh`` there from
nothing (no ``.venv``), as the first ``bash run_all.sh`` of a fresh clone does it, once with
``HBPSYCH_INSTALLER=uv`` and once with ``HBPSYCH_INSTALLER=pip``, alternating which goes first,
``--repeat`` pairs, with the machine's 1-minute load average before and after each. Every pair
must hold the same packages at the same versions (``pip freeze`` of both, the checkout's path
aside); otherwise it exits 1. Prints the ratio of the medians, then a JSON summary.

    python benchmarks/env_setup.py [--extras inspect|all] [--repeat N] [--cold]

By default each installer's download cache is warmed first by one untimed set-up of each (a
machine that has set up once before); ``--cold`` gives every timed set-up an empty cache of its
own, so the downloads count too. uv itself is installed once per machine (scripts/uv.sh, into
~/.cache/hbpsych); that first installation is timed on its own, into an empty folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEEDED = ("scripts", "hbpsych_utils", "pyproject.toml", "README.md", "requirements.lock",
          "requirements-inspect.lock", "requirements-all.lock")
"""What ensure_env.sh reads from a checkout: its scripts, the locks, and the package it installs
(editable, so setuptools builds it from pyproject.toml, whose readme is README.md)."""
INSTALLERS = ("uv", "pip")
CLEARED = {"HBPSYCH_PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX", "HBPSYCH_INSTALLER", "PYTHONPATH"}


def checkout_copy(where: Path) -> Path:
    where.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in NEEDED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, where / name, ignore=ignore)
        else:
            shutil.copy2(src, where / name)
    return where


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def set_up(checkout: Path, installer: str, extras: str, cache: Path | None) -> dict:
    """``source scripts/ensure_env.sh`` in ``checkout`` from nothing: seconds, CPU seconds of
    every process it started, and the load average before and after."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(HBPSYCH_INSTALLER=installer, HBPSYCH_EXTRAS=extras)
    if cache is not None:  # --cold: an empty cache for this set-up alone
        env.update(UV_CACHE_DIR=str(cache / "uv"), PIP_CACHE_DIR=str(cache / "pip"))
    before, cpu = os.getloadavg()[0], children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(["bash", "-c", "source scripts/ensure_env.sh"], cwd=checkout, env=env,
                          capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"set-up with {installer} in {checkout} failed:\n{proc.stderr}")
    fallback = [line for line in proc.stderr.splitlines() if "pip instead" in line]
    if installer == "uv" and fallback:
        sys.exit(f"uv was not used: {fallback[0]}")
    return {"seconds": took, "cpu_seconds": children_cpu() - cpu, "load_before": before,
            "load_after": os.getloadavg()[0]}


def freeze(checkout: Path) -> list[str]:
    """``pip freeze`` of the checkout's .venv, its own path written as <checkout>."""
    out = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "pip", "freeze"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.replace(str(checkout), "<checkout>").splitlines())


def seed_tools(checkout: Path) -> str:
    """pip, setuptools and wheel of the .venv (outside pip freeze, not in the lock)."""
    out = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "pip", "list",
                          "--format=freeze"], capture_output=True, text=True, check=True).stdout
    names = ("pip==", "setuptools==", "wheel==")
    return ", ".join(line for line in out.splitlines() if line.startswith(names)) or "none"


def uv_first_install(base: Path) -> float:
    """scripts/uv.sh installing uv into an empty cache folder (once per machine)."""
    env = {k: v for k, v in os.environ.items() if k != "UV"}
    env["XDG_CACHE_HOME"] = str(base)
    start = time.perf_counter()
    subprocess.run(["bash", "-c", f"source {ROOT}/scripts/uv.sh && "
                    "hbpsych_uv \"${HBPSYCH_BASE_PYTHON:-python3}\" || "
                    "{ echo \"$HBPSYCH_UV_WHY\" >&2; exit 1; }"],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extras", choices=["", "inspect", "all"], default="",
                    help="HBPSYCH_EXTRAS: which lock (default: requirements.lock)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="an empty download cache each time")
    args = ap.parse_args()
    lock = {"": "requirements.lock", "inspect": "requirements-inspect.lock",
            "all": "requirements-all.lock"}[args.extras]
    times: dict[str, list[dict]] = {i: [] for i in INSTALLERS}
    problems: list[str] = []
    seeds: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hbpsych-env-") as tmp_dir:
        tmp = Path(tmp_dir)
        uv_once = uv_first_install(tmp / "uv-home")
        if not args.cold:  # both caches hold the lock's wheels: what a second set-up finds
            for installer in INSTALLERS:
                set_up(checkout_copy(tmp / f"warm-{installer}"), installer, args.extras, None)
        for r in range(args.repeat):
            order = INSTALLERS if r % 2 == 0 else INSTALLERS[::-1]
            made = {}
            for installer in order:
                made[installer] = checkout_copy(tmp / f"r{r}-{installer}")
                cache = tmp / f"cache-r{r}-{installer}" if args.cold else None
                times[installer].append(set_up(made[installer], installer, args.extras, cache))
            frozen = {i: freeze(made[i]) for i in INSTALLERS}
            if frozen["uv"] != frozen["pip"]:
                only = {i: sorted(set(frozen[i]) - set(frozen[o]))
                        for i, o in (("uv", "pip"), ("pip", "uv"))}
                problems.append(f"repeat {r + 1}: pip freeze differs: {only}")
            seeds = {i: seed_tools(made[i]) for i in INSTALLERS}
            for i in INSTALLERS:
                shutil.rmtree(made[i])
    median = {i: statistics.median(t["seconds"] for t in times[i]) for i in INSTALLERS}
    cpu = {i: statistics.median(t["cpu_seconds"] for t in times[i]) for i in INSTALLERS}
    ratio = median["uv"] / median["pip"]
    print(f"set-up of .venv from {lock} from nothing, {'cold' if args.cold else 'warm'} "
          f"download caches, median of {args.repeat} each, {os.cpu_count()} cores")
    for r in range(args.repeat):
        for i in INSTALLERS:
            t = times[i][r]
            print(f"  repeat {r + 1} {i:3}: {t['seconds']:6.1f} s ({t['cpu_seconds']:6.1f} s CPU), "
                  f"load {t['load_before']:.2f} -> {t['load_after']:.2f}")
    for i in INSTALLERS:
        print(f"  {i:3} {median[i]:7.1f} s  ({cpu[i]:.1f} s CPU)")
    print(f"  ratio uv / pip {ratio:.2f}")
    first = (uv_once + median["uv"]) / median["pip"]
    print(f"  uv's own first installation (scripts/uv.sh, once per machine): {uv_once:.1f} s; "
          f"with it, the first uv set-up against pip: {first:.2f}")
    print(f"  seed tools (outside pip freeze and the lock): uv {seeds['uv']}; pip {seeds['pip']}")
    if problems:
        print("installed packages differ:")
        for p in problems:
            print(f"  {p}")
    else:
        print(f"  pip freeze of every pair: identical ({args.repeat} pairs)")
    print(json.dumps({"lock": lock, "cold": args.cold, "repeat": args.repeat,
                      "uv_seconds": round(median["uv"], 2), "pip_seconds": round(median["pip"], 2),
                      "ratio": round(ratio, 3), "uv_first_install_seconds": round(uv_once, 2),
                      "same_versions": not problems}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
