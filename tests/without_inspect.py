"""A child Python that cannot import Inspect, as where the ``inspect`` extra is not installed.

``run`` starts ``python ARGS`` with a ``sitecustomize`` on ``PYTHONPATH`` (so notebook kernels
started by a run get it too) that makes ``import inspect_ai`` fail. tests/test_without_inspect.py
uses it for its commands, and conftest's shared smoke run is made by it: the run every notebook
test reads is then also the proof that the smoke profile runs without Inspect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BLOCKER = '''
import importlib.abc, sys

class _WithoutInspect(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("inspect_ai", "inspect_evals", "zipfile_zstd"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _WithoutInspect())
'''

BUILT = "built-without-inspect.json"
"""Beside a run folder made by :func:`run` (in its outputs root): the command and its exit code."""


def run(tmp_path: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``python *args`` in ``tmp_path`` with Inspect blocked (its ``site/`` holds the blocker)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=tmp_path)
