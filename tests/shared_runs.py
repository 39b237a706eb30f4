"""A session's expensive runs (conftest's default, smoke and hard runs), built once for every
pytest-xdist worker: each worker has its own session fixtures, so without this each would make
its own run of the whole profile."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(folder)`` once per test session, its result shared by every xdist worker.

    Session fixtures are per worker: without xdist this is a fresh temp folder; under xdist the
    first worker to ask builds the run in a folder beside the workers' own (the session's temp
    root) while the others wait on a file lock, then read the same folder. A failed build is
    remembered, so the other workers fail with its message instead of building it again."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(factory.mktemp(name))
    shared = factory.getbasetemp().parent / "shared-runs"
    shared.mkdir(exist_ok=True)
    done, failed = shared / f"{name}.done", shared / f"{name}.failed"
    with FileLock(shared / f"{name}.lock"):
        if done.is_file():
            return Path(done.read_text(encoding="utf-8"))
        if failed.is_file():
            pytest.fail(f"the shared {name} run failed in another worker: "
                        f"{failed.read_text(encoding='utf-8')}", pytrace=False)
        folder = shared / name
        folder.mkdir()
        try:
            result = build(folder)
        except BaseException as exc:
            failed.write_text(f"{type(exc).__name__}: {exc}"[:2000], encoding="utf-8")
            raise
        done.write_text(str(result), encoding="utf-8")
        return result
