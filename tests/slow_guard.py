"""A test that starts a kernel, a subprocess or a server must say so with ``@pytest.mark.slow``.

``pytest -m "not slow"`` is the minute-long suite a newcomer runs first. This plugin (loaded by
conftest.py) keeps it honest: while a test not marked ``slow`` is set up, run or torn down —
its fixtures included, so a session or module fixture counts for the first test that asks for
it — starting a Jupyter kernel, any subprocess but ``git``, or a listening socket fails the
test at once, naming what it started.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import pytest

ALLOWED_COMMANDS = {"git"}
"""Quick, local subprocesses a fast test may run (the manifest reads the git commit)."""

SLOW_FIXTURES = {
    "default_run", "smoke_run",  # whole profiles, a kernel per notebook (conftest)
    "browser",  # Chromium through Playwright's node driver (conftest)
    "sim",  # the provider simulator, a loopback server (engine, fault and shape tests)
    "v1_run",  # an Inspect evaluation against the simulator (test_inspect_task)
    "server", "client",  # a real llama.cpp server (test_local_server)
    "graded", "smoke_on_off",  # gradings against the simulator (test_prompt_caching)
}
"""Fixtures that start kernels or servers: a test that uses one, directly or through another
fixture, is marked ``slow`` when collected."""


class StartsSomethingSlow(RuntimeError):
    """Raised in a fast test that starts a kernel, a subprocess or a server."""


@contextmanager
def refusing(test: str) -> Generator[None]:
    """Kernels, subprocesses (but ``git``) and listening sockets raise while this is open."""

    def refuse(what: str) -> None:
        raise StartsSomethingSlow(f"{test} {what}; mark the test @pytest.mark.slow")

    popen_init = subprocess.Popen.__init__
    listen = socket.socket.listen

    def guarded_popen(self: subprocess.Popen, args: Any, *a: Any, **kw: Any) -> None:
        first = args if isinstance(args, str | bytes | os.PathLike) else args[0]
        command = os.path.basename(os.fsdecode(first)).split()[0]
        if command not in ALLOWED_COMMANDS:
            refuse(f"starts a subprocess ({command})")
        popen_init(self, args, *a, **kw)

    def guarded_listen(self: socket.socket, *a: Any) -> None:
        refuse("starts a server (a listening socket)")

    subprocess.Popen.__init__ = guarded_popen  # type: ignore[method-assign]
    socket.socket.listen = guarded_listen  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        socket.socket.listen = listen  # type: ignore[method-assign]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _guarded(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is None


@pytest.hookimpl(wrapper=True)
def _guard_phase(item: pytest.Item) -> Generator[None, Any, Any]:
    """Setting up and running a fast test (teardown only stops what it started)."""
    if not _guarded(item):
        return (yield)
    with refusing(item.nodeid):
        return (yield)


pytest_runtest_setup = _guard_phase
pytest_runtest_call = _guard_phase
