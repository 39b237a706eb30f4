"""Execute a profile's notebooks in order with papermill, in one Python process.

Each notebook gets the profile's values (with any ``--set`` overrides) injected into its
``parameters`` cell and is written, executed, to ``outputs/<profile>/notebooks/``. The run stops
at the first failing notebook and names it and the failing cell. One process for the whole run
keeps start-up cost to one kernel launch per notebook (benchmarks/run_all_overhead.py measures
it). The kernels talk to this process over CurveZMQ-encrypted sockets, which is also what keeps
ipykernel's "running over TCP without encryption" warning out of the run's output.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hbpsych_utils.core import config, manifest, paths

if TYPE_CHECKING:
    from traitlets.config import Config


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


def kernel_config() -> Config:
    """nbclient configuration for the kernels a run starts.

    jupyter_client provisions CurveZMQ keys for kernels whose kernelspec declares support
    (ipykernel's does), so code and outputs are not sent in plain text and ipykernel has no
    reason to warn. Without libzmq's CURVE support the setting would be an error, so it is
    then left at jupyter_client's default."""
    import zmq
    from traitlets.config import Config

    encryption = "auto" if zmq.has("curve") else "disabled"
    return Config({"KernelManager": {"transport_encryption": encryption}})


def select_notebooks(profile: config.Profile, only: list[str] | None) -> list[Path]:
    """The profile's notebooks, restricted to the stems in ``only`` (each must be one of them)."""
    notebooks = profile_notebooks(profile)
    if not only:
        return notebooks
    stems = [nb.stem for nb in notebooks]
    unknown = [stem for stem in only if stem not in stems]
    if unknown:
        raise config.ProfileError(
            f"--only {' '.join(unknown)}: not a notebook of profile {profile.name!r} "
            f"(expected some of: {', '.join(stems) or 'none'})"
        )
    return [nb for nb in notebooks if nb.stem in set(only)]


def run_profile(
    profile_name: str,
    *,
    outputs_root: Path | None = None,
    only: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    echo: Callable[[str], None] = print,
) -> RunResult:
    """Run the notebooks of ``profile_name``; ``only`` restricts to some notebook stems and
    ``overrides`` (dotted key -> value, ``config.parse_overrides``) tweak the profile's values.

    Everything is validated before the first notebook starts (a bad profile, override or
    ``only`` raises ``config.ProfileError``)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    logging.getLogger("papermill").setLevel(logging.WARNING)
    overrides = dict(overrides or {})
    profile = config.load_profile(profile_name, overrides)
    notebooks = select_notebooks(profile, only)
    # Absolute, so an executed copy opened from outputs/<profile>/notebooks/ finds its run.
    root = (Path(outputs_root) if outputs_root else paths.outputs_root()).resolve()
    out = root / profile.name
    executed_dir = out / "notebooks"
    executed_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(profile=profile.name, outputs=out)
    applied = config.applied_overrides(profile, overrides)
    values = profile.model_dump(mode="json")

    def record() -> None:
        manifest.write_manifest(
            out, profile.name, result.notebooks, overrides=applied, profile_values=values
        )

    tweaks = f" with --set {config.describe_overrides(applied)}" if applied else ""
    echo(f"profile {profile.name!r}{tweaks}: {len(notebooks)} notebook(s) -> {out}")
    for i, nb in enumerate(notebooks, start=1):
        declared = declared_parameters(nb)
        nb_values = config.notebook_parameters(profile, nb.stem, root)
        params = {k: v for k, v in nb_values.items() if k in declared}
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
                config=kernel_config(),
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
            record()
            return result
        entry.update(status="ok", seconds=round(time.perf_counter() - start, 2))
        result.notebooks.append(entry)
        echo(f"[{i}/{len(notebooks)}] {nb.stem} done in {entry['seconds']:.1f}s")
        record()
    if not notebooks:
        record()
    from hbpsych_utils.reporting import book  # the run's offline reading copy (a top layer)

    echo(f"book: {book.build_book(out)}")
    echo(f"profile {profile.name!r}: all {len(notebooks)} notebook(s) ran; outputs in {out}")
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="hbpsych run", description=__doc__)
    ap.add_argument("profile", nargs="?", default="default")
    ap.add_argument("--only", nargs="*", help="notebook stems to run (default: the profile's)")
    ap.add_argument("--outputs", type=Path, default=None, help="outputs root (default: outputs/)")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one profile value, e.g. --set judges.subset=hard or --set seed=123 "
        "(the value is read as YAML; repeat for several)",
    )
    args = ap.parse_args(argv)
    try:
        overrides = config.parse_overrides(args.overrides)
        result = run_profile(
            args.profile, outputs_root=args.outputs, only=args.only, overrides=overrides
        )
    except config.ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if result.ok else 1
