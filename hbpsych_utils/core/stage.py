"""One notebook's output folder: metrics, tables and the artifacts it used.

Every stage writes under ``outputs/<profile>/<stage>/``: ``metrics.json`` (the stage's key
numbers, flat, as its issue names them), its tables, and ``stage.json`` (which external
artifacts it used, with their sha256), from which the run manifest is assembled. Files are
written atomically, so an interrupted stage never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from hbpsych_utils.core import sources


def _jsonable(value: Any) -> Any:
    """numpy/pandas scalars and containers -> plain JSON values (NaN -> null)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, data: Any) -> Path:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_jsonable(data), indent=2, ensure_ascii=False) + "\n"
    write_text(path, text)
    return path


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; outputs are for reading
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class Stage:
    """The output folder of one notebook stage in one profile run."""

    def __init__(self, profile: str, name: str, outputs_root: str | Path) -> None:
        self.profile = profile
        self.name = name
        self.root = Path(outputs_root) / profile
        self.dir = self.root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self._record_path = self.dir / "stage.json"
        self._artifacts: dict[str, dict[str, Any]] = {}

    def fetch(self, artifact: str) -> Path:
        """``sources.fetch`` that also records the artifact and its hash for the manifest."""
        path = sources.fetch(artifact)
        self._artifacts[artifact] = sources.describe(artifact, path)
        self._save_record()
        return path

    def record_input(self, name: str, path: Path, **info: Any) -> None:
        """Record a non-registry input (a local corpus file, an earlier stage's output)."""
        self._artifacts[name] = {
            "name": name, "path": str(path), "sha256": sources.sha256_file(path), **info,
        }
        self._save_record()

    def path(self, filename: str) -> Path:
        return self.dir / filename

    def upstream(self, stage: str, filename: str) -> Path:
        """A file an earlier stage of the same run wrote; a clear error when it is missing."""
        p = self.root / stage / filename
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} is missing: stage {stage!r} must run before {self.name!r} in profile "
                f"{self.profile!r} (bash run_all.sh {self.profile})"
            )
        return p

    def upstream_metrics(self, stage: str) -> dict[str, Any]:
        """The ``metrics.json`` an earlier stage of the same run wrote (``upstream``'s error
        when it has not run)."""
        return json.loads(self.upstream(stage, "metrics.json").read_text(encoding="utf-8"))

    def write_metrics(self, metrics: dict[str, Any]) -> Path:
        return write_json(self.path("metrics.json"), metrics)

    def write_json(self, filename: str, data: Any) -> Path:
        return write_json(self.path(filename), data)

    def write_table(self, df: Any, filename: str) -> Path:
        """A pandas table as CSV (index kept only when it is named)."""
        p = self.path(filename)
        keep_index = any(n is not None for n in df.index.names)
        write_text(p, df.to_csv(index=keep_index, lineterminator="\n"))
        return p

    def _save_record(self) -> None:
        write_json(self._record_path, {"stage": self.name, "artifacts": self._artifacts})
