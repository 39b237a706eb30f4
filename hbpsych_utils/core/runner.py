"""Execute a profile's notebooks in order with papermill, in one Python process.

Each notebook gets the profile's values injected into its ``parameters`` cell and is written,
executed, to ``outputs/<profile>/notebooks/``. The run stops at the first failing notebook and
names it and the failing cell. One process for the whole run keeps start-up cost to one kernel
launch per notebook (benchmarks/run_all_overhead.py measures it).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hbpsych_utils.core import config, manifest, paths


@dataclass
class RunResult:
    profile: str
    outputs: Path
    notebooks: list[dict[str, Any]] = field(default_factory=list)
    failed: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed is None


def profile_notebooks(profile: config.Profile) -> list[Path]:
    nb_dir = paths.notebooks_dir()
    if profile.notebooks is not None:
        return [nb_dir / f"{stem}.ipynb" for stem in profile.notebooks]
    return sorted(nb_dir.glob("[0-9][0-9]_*.ipynb"))


def declared_parameters(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def source_cell_number(executed: Path, cell_index: int) -> int:
    """1-based number of a cell in the source notebook (papermill's injected cell not counted)."""
    import nbformat

    try:
        cells = nbformat.read(str(executed), as_version=4).cells
    except (OSError, ValueError):
        return cell_index + 1
    injected = sum(
        "injected-parameters" in c.metadata.get("tags", []) for c in cells[:cell_index]
    )
    return cell_index + 1 - injected


def run_profile(
    profile_name: str,
    *,
    outputs_root: Path | None = None,
    only: list[str] | None = None,
    echo: Callable[[str], None] = print,
) -> RunResult:
    """Run the notebooks of ``profile_name``; ``only`` restricts to some notebook stems."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    logging.getLogger("papermill").setLevel(logging.WARNING)
    profile = config.load_profile(profile_name)
    root = Path(outputs_root) if outputs_root else paths.outputs_root()
    out = root / profile.name
    executed_dir = out / "notebooks"
    executed_dir.mkdir(parents=True, exist_ok=True)
    notebooks = profile_notebooks(profile)
    if only:
        notebooks = [nb for nb in notebooks if nb.stem in set(only)]
    result = RunResult(profile=profile.name, outputs=out)
    echo(f"profile {profile.name!r}: {len(notebooks)} notebook(s) -> {out}")
    for i, nb in enumerate(notebooks, start=1):
        declared = declared_parameters(nb)
        values = config.notebook_parameters(profile, nb.stem, root)
        params = {k: v for k, v in values.items() if k in declared}
        target = executed_dir / nb.name
        echo(f"[{i}/{len(notebooks)}] {nb.stem} ...")
        start = time.perf_counter()
        entry: dict[str, Any] = {"notebook": nb.stem, "executed": str(target)}
        try:
            papermill.execute_notebook(
                str(nb),
                str(target),
                parameters=params,
                kernel_name="python3",
                cwd=str(paths.project_root()),
                progress_bar=False,
                log_output=False,
            )
        except PapermillExecutionError as exc:
            entry.update(status="failed", seconds=round(time.perf_counter() - start, 2))
            cell = source_cell_number(target, exc.cell_index)
            first_line = (exc.source or "").strip().splitlines()[:1]
            entry["error"] = {"cell": cell, "ename": exc.ename, "evalue": exc.evalue}
            result.notebooks.append(entry)
            result.failed = nb.stem
            echo(
                f"FAILED: {nb.stem} at cell {cell} ({first_line[0] if first_line else ''!s}): "
                f"{exc.ename}: {exc.evalue}\n  executed copy with the traceback: {target}"
            )
            manifest.write_manifest(out, profile.name, result.notebooks)
            return result
        entry.update(status="ok", seconds=round(time.perf_counter() - start, 2))
        result.notebooks.append(entry)
        echo(f"[{i}/{len(notebooks)}] {nb.stem} done in {entry['seconds']:.1f}s")
        manifest.write_manifest(out, profile.name, result.notebooks)
    if not notebooks:
        manifest.write_manifest(out, profile.name, result.notebooks)
    echo(f"profile {profile.name!r}: all {len(notebooks)} notebook(s) ran; outputs in {out}")
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="hbpsych run", description=__doc__)
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--only", nargs="*", help="notebook stems to run (default: the profile's)")
    ap.add_argument("--outputs", type=Path, default=None, help="outputs root (default: outputs/)")
    args = ap.parse_args(argv)
    try:
        result = run_profile(args.profile, outputs_root=args.outputs, only=args.only)
    except config.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if result.ok else 1
