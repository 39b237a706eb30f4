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

    python benchmarks/run_all_overhead.py [PROFILE] --jobs N [--repeat R]

``--jobs N`` times full runs from nothing with ``--jobs N`` against ``--jobs 1``, each a fresh
``python -m hbpsych_utils run`` process (what run_all.sh starts, its environment check aside),
alternating which goes first, and prints the ratio of the medians with the machine's load
beside each run. Every pair must agree: ``scripts/compare_runs.py --tables`` exits 0 and every
stage's metrics.json and tables are the same bytes; otherwise it exits 1. It also says where the
time goes: the notebooks' own seconds (the manifest's), the longest chain of them through the
stage graph, and the rest of the run (process start, imports, plan, records, book), which
running notebooks at once cannot shorten.

The other modes run the notebooks one at a time (``jobs=1``), as the floors they are compared
with do.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
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
from hbpsych_utils.runner import plan as run_plan


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
        result = runner.run_profile(profile_name, outputs_root=root, echo=lambda _: None,
                                    jobs=1)
        if not result.ok:
            sys.exit(f"profile {profile_name} failed in {result.failed}")
        out = root / profile.name
        plans, states, runs = [], [], []
        for _ in range(repeat):
            state.code_hash.cache_clear()
            state.clear_hash_cache()
            start = time.perf_counter()
            steps = run_plan.plan(profile, out, state.expected_inputs(profile))
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
            again = runner.run_profile(profile_name, outputs_root=root, echo=lambda _: None,
                                       jobs=1)
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


ROOT = Path(__file__).resolve().parent.parent


def timed_run(profile: str, outputs: Path, jobs: int) -> tuple[float, float, float]:
    """One full run from nothing in a fresh process: its seconds, and the machine's 1-minute
    load average before and after it."""
    before = os.getloadavg()[0]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hbpsych_utils", "run", profile, "--outputs",
                    str(outputs), "--jobs", str(jobs)], check=True, capture_output=True,
                   cwd=ROOT)
    return time.perf_counter() - start, before, os.getloadavg()[0]


def differences(before: Path, after: Path) -> list[str]:
    """What differs between two runs of a profile: compare_runs' verdict, then every stage's
    metrics.json and tables byte for byte."""
    found = []
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare_runs.py"),
                            str(before), str(after), "--tables"], capture_output=True, text=True)
    if check.returncode != 0:
        found.append(f"compare_runs --tables: {check.stdout.strip()}")
    for stage in graph.STAGES:
        files = sorted(p.relative_to(before) for p in (before / stage).glob("**/*")
                       if p.name == "metrics.json" or p.suffix == ".csv")
        found += [f"{name}: not the same bytes" for name in files
                  if not (after / name).is_file()
                  or not filecmp.cmp(before / name, after / name, shallow=False)]
    return found


def notebook_seconds(run_dir: Path) -> dict[str, float]:
    """Each notebook's seconds, as the run's manifest records them."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {n["notebook"]: n["seconds"] for n in manifest["notebooks"]}


def longest_chain(profile_name: str, seconds: dict[str, float]) -> tuple[float, list[str]]:
    """The longest path through the stage graph, by the notebooks' seconds: no number of
    notebooks at once runs them in less."""
    profile = profiles.load_profile(profile_name)
    best: dict[str, tuple[float, list[str]]] = {}
    for name in graph.profile_stages(profile):
        ups = [best[u] for u in graph.spec(name).upstream(profile) if u in best]
        time_, path = max(ups, default=(0.0, []))
        best[name] = (time_ + seconds.get(name, 0.0), [*path, name])
    return max(best.values())


def compare_jobs(profile: str, jobs: int, repeat: int) -> int:
    """``--jobs`` against ``--jobs 1`` (see the module doc); 1 when two runs differ."""
    times: dict[int, list[float]] = {1: [], jobs: []}
    loads: list[str] = []
    problems: list[str] = []
    sums, chains, rests = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeat):
            order = (1, jobs) if r % 2 == 0 else (jobs, 1)
            runs = {}
            for j in order:
                runs[j] = Path(tmp) / f"r{r}-j{j}"
                took, before, after = timed_run(profile, runs[j], j)
                times[j].append(took)
                loads.append(f"repeat {r + 1} --jobs {j}: {took:6.2f} s, load {before:.2f} "
                             f"-> {after:.2f}")
            problems += [f"repeat {r + 1}: {p}" for p in
                         differences(runs[1] / profile, runs[jobs] / profile)]
            seconds = notebook_seconds(runs[1] / profile)
            chain, path = longest_chain(profile, seconds)
            sums.append(sum(seconds.values()))
            chains.append((chain, path))
            rests.append(times[1][-1] - sums[-1])
    one, many = statistics.median(times[1]), statistics.median(times[jobs])
    print(f"profile {profile!r}, full runs from nothing, median of {repeat} each, "
          f"{os.cpu_count()} cores")
    for line in loads:
        print(f"  {line}")
    print(f"  --jobs 1   {one:8.2f} s")
    print(f"  --jobs {jobs}   {many:8.2f} s")
    print(f"  ratio      {many / one:8.2f}")
    chain, path = chains[len(chains) // 2]
    total, rest = statistics.median(sums), statistics.median(rests)
    print(f"  where --jobs 1 spends its time: notebooks {total:.2f} s, the rest (process, "
          f"imports, plan, records, book) {rest:.2f} s")
    print(f"  longest chain of notebooks {chain:.2f} s ({' -> '.join(path)}); with {jobs} at "
          f"once the notebooks take at least {max(chain, total / jobs):.2f} s, the run at "
          f"least {rest + max(chain, total / jobs):.2f} s (ratio "
          f"{(rest + max(chain, total / jobs)) / one:.2f})")
    if problems:
        print("outputs differ between --jobs 1 and --jobs " + str(jobs) + ":")
        for p in problems:
            print(f"  {p}")
        return 1
    print(f"  metrics and tables of every pair: identical ({repeat} pairs)")
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", action="store_true",
                    help="time the runner on a folder where every stage is up to date")
    ap.add_argument("--jobs", type=int, default=None,
                    help="time full runs with --jobs N against --jobs 1")
    args = ap.parse_args()
    if args.warm:
        warm(args.profile, args.repeat)
        return
    if args.jobs is not None:
        sys.exit(compare_jobs(args.profile, args.jobs, args.repeat))
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
            result = runner.run_profile(args.profile, outputs_root=out, echo=lambda _: None,
                                        jobs=1)
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
