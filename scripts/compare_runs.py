"""Compare two runs of a profile: every stage's metrics.json, key by key, and its tables.

    python scripts/compare_runs.py BEFORE/outputs/default outputs/default [--tables]

A redesign must keep every number: this prints each metrics key whose value differs or that
the later run lacks, and with ``--tables`` each CSV table whose bytes differ or that the later
run lacks. What only the later run has (a key, a table or a whole stage a change added) is
listed apart, as added: it changes no number of the earlier run. Exit status 0 when every
number of the earlier run is unchanged, 1 when one is not. Values that vary by nature between
runs (wall-clock timestamps and the LLM store's run ids) are not in metrics.json, so nothing is
ignored.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out if value else {prefix: {}}
    return {prefix: value}


def _metric_lines(before: Path, after: Path) -> tuple[list[str], list[str]]:
    """(differences, additions) of the two runs' metrics, one line each."""
    changed, added = [], []
    stages = sorted({p.parent.name for p in [*before.glob("*/metrics.json"),
                                              *after.glob("*/metrics.json")]})
    for stage in stages:
        a, b = before / stage / "metrics.json", after / stage / "metrics.json"
        if not a.is_file():
            added.append(f"{stage}: metrics.json only in after")
            continue
        if not b.is_file():
            changed.append(f"{stage}: metrics.json only in before")
            continue
        fa = _flatten(json.loads(a.read_text(encoding="utf-8")))
        fb = _flatten(json.loads(b.read_text(encoding="utf-8")))
        for key in sorted(fa.keys() | fb.keys()):
            if key not in fb:
                changed.append(f"{stage}: {key}: only before ({fa[key]!r})")
            elif key not in fa:
                added.append(f"{stage}: {key}: only after ({fb[key]!r})")
            elif fa[key] != fb[key]:
                changed.append(f"{stage}: {key}: {fa[key]!r} -> {fb[key]!r}")
    return changed, added


def _table_lines(before: Path, after: Path) -> tuple[list[str], list[str]]:
    """(differences, additions) of the two runs' stage CSV tables, one line each."""
    changed, added = [], []
    names = sorted({str(p.relative_to(before)) for p in before.glob("*/*.csv")}
                   | {str(p.relative_to(after)) for p in after.glob("*/*.csv")})
    for name in names:
        a, b = before / name, after / name
        if not a.is_file():
            added.append(f"{name}: only in after")
        elif not b.is_file():
            changed.append(f"{name}: only in before")
        elif a.read_bytes() != b.read_bytes():
            changed.append(f"{name}: bytes differ")
    return changed, added


def metric_differences(before: Path, after: Path) -> list[str]:
    """One line per metrics key that differs between two run folders or that only the earlier
    run has (what only the later run has: :func:`metric_additions`)."""
    return _metric_lines(before, after)[0]


def metric_additions(before: Path, after: Path) -> list[str]:
    """One line per metrics key, or metrics file, that only the later run has."""
    return _metric_lines(before, after)[1]


def table_differences(before: Path, after: Path) -> list[str]:
    """One line per stage CSV table that differs in bytes or that only the earlier run has."""
    return _table_lines(before, after)[0]


def table_additions(before: Path, after: Path) -> list[str]:
    """One line per stage CSV table that only the later run has."""
    return _table_lines(before, after)[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--tables", action="store_true", help="also compare the CSV tables")
    args = ap.parse_args(argv)
    diffs, added = _metric_lines(args.before, args.after)
    n_stages = len(list(args.before.glob("*/metrics.json")))
    if args.tables:
        more_diffs, more_added = _table_lines(args.before, args.after)
        diffs, added = diffs + more_diffs, added + more_added
    for line in diffs:
        print(line)
    if added:
        print(f"added (only in after; no number of before changes): {len(added)}")
        for line in added:
            print(f"  {line}")
    print(f"{n_stages} stage(s) of before compared: "
          + ("identical" if not diffs else f"{len(diffs)} difference(s)")
          + (f"; {len(added)} addition(s) listed apart" if added else ""))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
