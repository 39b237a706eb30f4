"""A tweak against the full run it changes: the wall time of ``--set judges.subset=hard`` after a
full default run, both measured in this process.

    python benchmarks/tweak.py [PROFILE] [--set KEY=VALUE ...] [--repeat N]

Runs PROFILE (default: ``default``) from nothing into a temporary outputs folder — every stage
and the book — then the same profile with the tweak (default: ``judges.subset=hard``), which
re-runs only the stages that read what changed and re-renders the book. Prints both times, the
stages each ran, and their ratio (the design's target for the judges tweak is at most 0.2), and
a JSON summary last. With ``--repeat N`` the tweak is undone and made again N times (the
median is reported), each a run of its own against a folder where the rest is up to date.
Needs ``HBPSYCH_MIRROR`` offline, like the default profile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hbpsych_utils import runner
from hbpsych_utils.core import config


def timed_run(profile: str, root: Path, overrides: dict) -> tuple[float, list[str]]:
    start = time.perf_counter()
    result = runner.run_profile(profile, outputs_root=root, overrides=overrides,
                                echo=lambda _: None)
    seconds = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"the run failed at {result.failed}: see {result.outputs}")
    return seconds, [n["notebook"] for n in result.notebooks]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--set", dest="overrides", action="append", default=None,
                    metavar="KEY=VALUE")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    tweak = config.parse_overrides(args.overrides or ["judges.subset=hard"])
    with tempfile.TemporaryDirectory(prefix="hbpsych-tweak-") as tmp:
        root = Path(tmp)
        full, full_ran = timed_run(args.profile, root, {})
        times, ran = [], []
        for _ in range(args.repeat):
            seconds, ran = timed_run(args.profile, root, tweak)
            times.append(seconds)
            timed_run(args.profile, root, {})  # undo, so the next repeat changes it again
    tweak_s = statistics.median(times)
    print(f"full run of {args.profile!r}: {full:.1f} s ({len(full_ran)} notebooks and the book)")
    print(f"tweak {config.describe_overrides(tweak)}: {tweak_s:.1f} s (median of "
          f"{len(times)}: {', '.join(f'{t:.1f}' for t in times)}); ran {', '.join(ran)}")
    print(f"ratio {tweak_s / full:.3f}")
    print(json.dumps({"profile": args.profile, "tweak": tweak, "full_s": round(full, 2),
                      "tweak_s": round(tweak_s, 2), "tweak_runs_s": [round(t, 2) for t in times],
                      "stages_rerun": ran, "ratio": round(tweak_s / full, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
