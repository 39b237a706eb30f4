"""How much does building the book add to a run? (issue 11: at most 30 % of run_all.sh)

Runs ``run_profile(PROFILE)`` into a temporary outputs root (the offline mirror set, figures
published to the temp folder), timing it, then times ``book.build_book`` on that run folder and
prints the ratio book / run and whether it is within 30 %. The verdict uses the first build,
which pays for importing Sphinx and MyST-NB as run_all.sh does; the median of ``--repeat``
builds is printed beside it.

    python benchmarks/book_overhead.py [PROFILE] [--repeat N]

When the runner already builds the book at the end of ``run_profile``, that build is part of
the run's time; it is subtracted (with the measured book time) so the ratio is always the
book against the run without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hbpsych_utils.core import runner
from hbpsych_utils.reporting import book

LIMIT = 0.30
ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--repeat", type=int, default=3, help="book builds to time")
    args = ap.parse_args()
    mirror = ROOT.parent / "shared" / "mirror"
    if "HBPSYCH_MIRROR" not in os.environ and mirror.is_dir():
        os.environ["HBPSYCH_MIRROR"] = str(mirror)
    with tempfile.TemporaryDirectory(prefix="book-bench-") as tmp:
        os.environ["HBPSYCH_FIGURES"] = str(Path(tmp) / "figures")  # never the checkout's
        start = time.perf_counter()
        result = runner.run_profile(args.profile, outputs_root=Path(tmp), echo=lambda _: None)
        run_seconds = time.perf_counter() - start
        if not result.ok:
            print(f"profile {args.profile} failed in {result.failed}", file=sys.stderr)
            return 1
        index = result.outputs / book.BOOK_DIR / "index.html"
        runner_built = index.is_file()
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            book.build_book(result.outputs)
            times.append(time.perf_counter() - t0)
        pages = len(list((result.outputs / book.BOOK_DIR).glob("*.html")))
    book_seconds, warm = times[0], statistics.median(times[1:] or times)
    if runner_built:
        run_seconds -= warm
    ratio = book_seconds / run_seconds
    print(f"profile {args.profile!r}: run {run_seconds:.1f}s"
          + (" (less the book the runner built)" if runner_built else "")
          + f"; book of {pages} pages {book_seconds:.2f}s cold, {warm:.2f}s warm (builds: "
          + ", ".join(f"{t:.2f}" for t in times) + ")")
    verdict = "within" if ratio <= LIMIT else "OVER"
    print(f"book / run = {ratio:.1%}: {verdict} the {LIMIT:.0%} budget")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
