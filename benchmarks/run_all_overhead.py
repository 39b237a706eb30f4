"""How much of a run_all is notebook start-up rather than work?

Times ``run_profile(PROFILE)`` (papermill's Python API, one process, as run_all.sh does) against
the floor of executing the same number of *empty* notebooks the same way, and against the same
empty notebooks executed one ``papermill`` CLI process each. Prints the ratios.

    python benchmarks/run_all_overhead.py [PROFILE] [--repeat N]

A ratio near 1 means the run is dominated by start-up; the work share is 1 - floor/run.
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
from hbpsych_utils.core import config
from hbpsych_utils.core.wording import count
from hbpsych_utils.pipeline import graph


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = len(graph.profile_stages(config.load_profile(args.profile)))
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
