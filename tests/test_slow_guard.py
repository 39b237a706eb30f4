"""The guard that keeps ``pytest -m "not slow"`` fast (tests/slow_guard.py) fails a fast test that
starts a subprocess or a server, and lets a slow one, or ``git``, through."""

from __future__ import annotations

from pathlib import Path

import pytest

INNER = '''
import socket
import subprocess
import sys

import pytest


def test_fast_subprocess():
    subprocess.run([sys.executable, "-c", "0"], check=True)


def test_fast_server():
    socket.socket().listen()


def test_fast_git():
    subprocess.run(["git", "--version"], check=True, capture_output=True)


@pytest.mark.slow
def test_slow_subprocess():
    subprocess.run([sys.executable, "-c", "0"], check=True)


@pytest.fixture
def sim():
    socket.socket().listen()


def test_uses_a_slow_fixture(sim):
    pass
'''


@pytest.mark.slow  # the inner tests it runs start subprocesses
def test_fast_tests_may_not_start_processes_or_servers(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))  # slow_guard
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "slow_guard", "-q", "--tb=line")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert "test_fast_subprocess starts a subprocess" in out
    assert "test_fast_server starts a server" in out
    assert "mark the test @pytest.mark.slow" in out
    deselected = pytester.runpytest_subprocess("-p", "slow_guard", "-q", "-m", "not slow")
    deselected.assert_outcomes(passed=1, failed=2, deselected=2)
