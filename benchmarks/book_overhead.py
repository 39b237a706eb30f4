"""How much does building the book add to a run? (the budget: at most 30 % of run_all.sh)

Runs ``run_profile(PROFILE)`` as run_all.sh does (one process; the offline mirror set, figures
published into the outputs folder), noting when each progress line is printed. The runner
builds the book last, in that process, right after the last notebook: the time from the last
notebook's "done" line to the "book:" line is what the book adds to the run, cold (the run's
process imports Sphinx and MyST-NB for it; the notebooks ran in their own kernels). The verdict
is that time against the run up to the last notebook, both from the same run.

Printed beside it, against the same baseline:

- a re-render in a fresh process, ``python -m hbpsych_utils book PROFILE --outputs DIR``, as a
  reader would re-render an existing run: its wall time (interpreter start-up and imports
  included) and the build seconds it reports;
- the median of ``--repeat`` re-renders in this process, Sphinx already imported (warm).

    python benchmarks/book_overhead.py [PROFILE] [--repeat N] [--outputs DIR]

``--outputs`` keeps the run (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hbpsych_utils import runner
from hbpsych_utils.core.wording import count
from hbpsych_utils.reporting import book

LIMIT = 0.30
ROOT = Path(__file__).resolve().parent.parent
BOOK_LINE = "book: "
REPORTED = re.compile(r"^book: .* \((\d+(?:\.\d+)?)s\)$", re.M)


def timed_run(profile: str, outputs_root: Path) -> tuple[runner.RunResult, float, float, float]:
    """Run the profile, every stage (``force``: a kept ``--outputs`` folder from an earlier
    run would otherwise be up to date, and nothing but the book would run); return the result,
    the seconds up to the last notebook's end, the seconds the runner's own book build took,
    and the whole run's seconds."""
    lines: list[tuple[float, str]] = []
    start = time.perf_counter()
    result = runner.run_profile(profile, outputs_root=outputs_root, force=True,
                                echo=lambda line: lines.append((time.perf_counter(), line)))
    total = time.perf_counter() - start
    if not result.ok:
        return result, 0.0, 0.0, total
    at = next((i for i, (_, line) in enumerate(lines) if line.startswith(BOOK_LINE)), None)
    if at is None or at == 0:
        raise SystemExit(f"the runner printed no {BOOK_LINE!r} line after a notebook: "
                         f"{[line for _, line in lines]}")
    notebooks_done, book_done = lines[at - 1][0], lines[at][0]
    return result, notebooks_done - start, book_done - notebooks_done, total


def fresh_process_build(profile_dir: Path) -> tuple[float, float]:
    """Re-render the run's book with the CLI in a new process: wall seconds, reported seconds."""
    cmd = [sys.executable, "-m", "hbpsych_utils", "book", profile_dir.name,
           "--outputs", str(profile_dir.parent)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    found = REPORTED.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return wall, float(found.group(1))


def measure(profile: str, root: Path, repeat: int) -> int:
    os.environ["HBPSYCH_FIGURES"] = str(root / "figures")  # never the checkout's
    result, run_seconds, book_seconds, total = timed_run(profile, root)
    if not result.ok:
        print(f"profile {profile} failed in {result.failed}", file=sys.stderr)
        return 1
    fresh_wall, fresh_build = fresh_process_build(result.outputs)
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        book.build_book(result.outputs)
        warm.append(time.perf_counter() - t0)
    pages = len(list((result.outputs / book.BOOK_DIR).glob("*.html")))
    n = len(result.notebooks)
    print(f"profile {profile!r}: {count(n, 'notebook')} in {run_seconds:.1f}s, then the "
          f"runner's book ({pages} pages) in {book_seconds:.2f}s; whole run {total:.1f}s -> "
          f"{result.outputs}")

    def share(seconds: float) -> str:
        return f"{seconds:6.2f}s  {seconds / run_seconds:6.1%} of the notebooks' time"

    print(f"  book in the run (cold, verdict):      {share(book_seconds)}")
    print(f"  re-render, fresh process (wall):      {share(fresh_wall)}")
    print(f"  re-render, fresh process (reported):  {share(fresh_build)}")
    print(f"  re-render, this process (warm, median of {repeat}): {share(statistics.median(warm))}"
          f"  (builds: {', '.join(f'{t:.2f}' for t in warm)})")
    ratio = book_seconds / run_seconds
    verdict = "within" if ratio <= LIMIT else "OVER"
    print(f"book / run = {ratio:.1%}: {verdict} the {LIMIT:.0%} budget")
    return 0 if ratio <= LIMIT else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--repeat", type=int, default=3, help="warm re-renders to time (at least 1)")
    ap.add_argument("--outputs", type=Path, default=None,
                    help="outputs root to run into and keep (default: a temporary folder)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    mirror = ROOT.parent / "shared" / "mirror"
    if "HBPSYCH_MIRROR" not in os.environ and mirror.is_dir():
        os.environ["HBPSYCH_MIRROR"] = str(mirror)
    if args.outputs is not None:
        args.outputs.mkdir(parents=True, exist_ok=True)
        return measure(args.profile, args.outputs.resolve(), args.repeat)
    with tempfile.TemporaryDirectory(prefix="book-bench-") as tmp:
        return measure(args.profile, Path(tmp), args.repeat)


if __name__ == "__main__":
    sys.exit(main())
