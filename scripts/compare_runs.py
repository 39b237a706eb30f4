"""Compare two runs of a profile: every stage's metrics.json, key by key, and its tables.

    python scripts/compare_runs.py BEFORE/outputs/default outputs/default [--tables]

A redesign must keep every number: this prints each metrics key whose value differs (or that
only one run has), and with ``--tables`` each CSV table whose bytes differ. Exit status 0 when
the runs agree, 1 when they do not. Values that vary by nature between runs (wall-clock
timestamps and the LLM store's run ids) are not in metrics.json, so nothing is ignored.
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


def metric_differences(before: Path, after: Path) -> list[str]:
    """One line per metrics key that differs between two run folders (or exists in one only)."""
    lines = []
    stages = sorted({p.parent.name for p in [*before.glob("*/metrics.json"),
                                              *after.glob("*/metrics.json")]})
    for stage in stages:
        a, b = before / stage / "metrics.json", after / stage / "metrics.json"
        if not a.is_file() or not b.is_file():
            lines.append(f"{stage}: metrics.json only in {'after' if b.is_file() else 'before'}")
            continue
        fa = _flatten(json.loads(a.read_text(encoding="utf-8")))
        fb = _flatten(json.loads(b.read_text(encoding="utf-8")))
        for key in sorted(fa.keys() | fb.keys()):
            if key not in fb:
                lines.append(f"{stage}: {key}: only before ({fa[key]!r})")
            elif key not in fa:
                lines.append(f"{stage}: {key}: only after ({fb[key]!r})")
            elif fa[key] != fb[key]:
                lines.append(f"{stage}: {key}: {fa[key]!r} -> {fb[key]!r}")
    return lines


def table_differences(before: Path, after: Path) -> list[str]:
    """One line per stage CSV table that differs in bytes or exists in one run only."""
    lines = []
    names = sorted({str(p.relative_to(before)) for p in before.glob("*/*.csv")}
                   | {str(p.relative_to(after)) for p in after.glob("*/*.csv")})
    for name in names:
        a, b = before / name, after / name
        if not a.is_file() or not b.is_file():
            lines.append(f"{name}: only in {'after' if b.is_file() else 'before'}")
        elif a.read_bytes() != b.read_bytes():
            lines.append(f"{name}: bytes differ")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--tables", action="store_true", help="also compare the CSV tables")
    args = ap.parse_args(argv)
    diffs = metric_differences(args.before, args.after)
    n_stages = len(list(args.after.glob("*/metrics.json")))
    if args.tables:
        diffs += table_differences(args.before, args.after)
    for line in diffs:
        print(line)
    print(f"{n_stages} stage(s) compared: "
          + ("identical" if not diffs else f"{len(diffs)} difference(s)"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
