"""How much of a run_all is notebook start-up rather than work?

Times ``run_profile(PROFILE)`` (papermill's Python API, one process, as run_all.sh does) against
the floor of executing the same number of *empty* notebooks the same way, and against the same
empty notebooks executed one ``papermill`` CLI process each. Prints the ratios.

    python benchmarks/run_all_overhead.py [PROFILE] [--repeat N]
    python benchmarks/run_all_overhead.py [PROFILE] --warm [--repeat N]

A ratio near 1 means the run is dominated by start-up; the work share is 1 - floor/run.

``--warm`` times what the runner itself costs when nothing needs to run: one run from nothing,
then ``repeat`` runs of the same folder (every stage up to date), each split into the plan
(what each stage is computed from, and whether its recorded outputs are still those it wrote),
the stage states the manifest records, and the whole run with its book.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import papermill
from nbformat.v4 import new_code_cell, new_notebook

from hbpsych_utils import runner
from hbpsych_utils.core.wording import count
from hbpsych_utils.pipeline import graph, profiles, state
from hbpsych_utils.runner import run as run_module


def empty_notebook(path: Path) -> None:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    cell = new_code_cell('profile = "x"')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    nbformat.write(nb, path)


def time_api(notebooks: list[Path], out: Path) -> float:
    start = time.perf_counter()
    for nb in notebooks:
        papermill.execute_notebook(str(nb), str(out / nb.name), parameters={"profile": "bench"},
                                   kernel_name="python3", progress_bar=False, log_output=False)
    return time.perf_counter() - start


def time_cli(notebooks: list[Path], out: Path) -> float:
    start = time.perf_counter()
    for nb in notebooks:
        subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", "-k", "python3",
                        "-p", "profile", "bench", str(nb), str(out / nb.name)],
                       check=True, capture_output=True)
    return time.perf_counter() - start


def warm(profile_name: str, repeat: int) -> None:
    """The runner's own cost on a folder where every stage is up to date (see the module doc).

    Each repeat is timed in a fresh interpreter state as far as the runner's caches go (the
    package-code hash is recomputed; nothing else is cached between runs of one process)."""
    profile = profiles.load_profile(profile_name)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = runner.run_profile(profile_name, outputs_root=root, echo=lambda _: None)
        if not result.ok:
            sys.exit(f"profile {profile_name} failed in {result.failed}")
        out = root / profile.name
        plans, states, runs = [], [], []
        for _ in range(repeat):
            state.code_hash.cache_clear()
            state.clear_hash_cache()
            start = time.perf_counter()
            steps = run_module.plan(profile, out, state.expected_inputs(profile))
            plans.append(time.perf_counter() - start)
            if any(s.run for s in steps):
                sys.exit(f"a warm run of {profile_name} would run "
                         f"{[s.stage for s in steps if s.run]}")
            start = time.perf_counter()
            state.stage_states(out, profile)
            states.append(time.perf_counter() - start)
            state.code_hash.cache_clear()
            state.clear_hash_cache()
            start = time.perf_counter()
            again = runner.run_profile(profile_name, outputs_root=root, echo=lambda _: None)
            runs.append(time.perf_counter() - start)
            if again.notebooks:
                sys.exit(f"a warm run of {profile_name} ran {len(again.notebooks)} notebooks")
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()
                   and f.relative_to(out).parts[0] in (*graph.STAGES, "notebooks"))
    print(f"profile {profile_name!r}, warm (every stage up to date), median (fastest) of "
          f"{repeat}; {size / 1e6:.1f} MB of stage outputs and executed notebooks")
    print(f"  plan (inputs, build records, outputs)     {statistics.median(plans):8.3f} s "
          f"({min(plans):.3f})")
    print(f"  stage states (again, as the manifest)     {statistics.median(states):8.3f} s "
          f"({min(states):.3f})")
    print(f"  whole warm run (plan, manifest, book)     {statistics.median(runs):8.2f} s "
          f"({min(runs):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", action="store_true",
                    help="time the runner on a folder where every stage is up to date")
    args = ap.parse_args()
    if args.warm:
        warm(args.profile, args.repeat)
        return
    n = len(graph.profile_stages(profiles.load_profile(args.profile)))
    runs, floors, clis = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        empties = []
        for i in range(n):
            empties.append(tmp_path / f"{i:02d}_empty.ipynb")
            empty_notebook(empties[-1])
        for r in range(args.repeat):
            out = tmp_path / f"run{r}"
            out.mkdir()
            start = time.perf_counter()
            # a fresh outputs folder: every stage runs (none is up to date yet)
            result = runner.run_profile(args.profile, outputs_root=out, echo=lambda _: None)
            runs.append(time.perf_counter() - start)
            if not result.ok:
                sys.exit(f"profile {args.profile} failed in {result.failed}")
            if len(result.notebooks) != n:
                sys.exit(f"profile {args.profile}: {len(result.notebooks)} of {n} notebooks ran")
            floors.append(time_api(empties, out))
            clis.append(time_cli(empties, out))
    run, floor, cli = (statistics.median(x) for x in (runs, floors, clis))
    print(f"profile {args.profile!r}: {count(n, 'notebook')}, median of {args.repeat} repeats")
    print(f"  run_all (papermill API, one process)      {run:8.2f} s")
    print(f"  floor: {n} empty notebooks, same way       {floor:8.2f} s")
    print(f"  {n} empty notebooks, one CLI process each  {cli:8.2f} s")
    print(f"  ratio run / floor                          {run / floor:8.2f}  "
          f"(start-up share of the run: {floor / run:.0%})")
    print(f"  CLI floor / API floor                      {cli / floor:8.2f}  "
          "(what one process per notebook would add)")


if __name__ == "__main__":
    main()
