"""Under pytest-xdist the expensive things are made once: tests that share a module's fixture run
on one worker (tests/xdist_groups.py, with pytest 9.2, where xdist's own loadgroup no longer
groups), and a session's runs are built by one worker for all (tests/shared_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("xdist")

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import json, os, sys, time
from pathlib import Path
import pytest
sys.path.insert(0, {str(TESTS)!r})
from shared_runs import run_once
pytest_plugins = ["xdist_groups"]
LOG = Path(os.environ["SHARING_LOG"])

def note(**what):
    with LOG.open("a") as f:
        f.write(json.dumps({{"worker": os.environ.get("PYTEST_XDIST_WORKER"), **what}}) + "\\n")

@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    def build(folder):
        note(built="shared")
        time.sleep(1)
        (folder / "made").write_text("once")
        return folder
    return run_once(tmp_path_factory, "shared", build)

@pytest.fixture(scope="session")
def broken(tmp_path_factory):
    def build(folder):
        note(built="broken")
        raise RuntimeError("the build broke")
    return run_once(tmp_path_factory, "broken", build)
"""

MODULE_FIXTURE = """
import pytest
from conftest import note

@pytest.fixture(scope="module")
def server():
    note(built="server")
    return object()

@pytest.mark.parametrize("i", range(6))
def test_uses_server(server, i):
    note(test="server", i=i)
"""

PLAIN = """
import time
import pytest
from conftest import note

@pytest.mark.parametrize("i", range(6))
def test_plain(i):
    time.sleep(0.2)
    note(test="plain", i=i)

@pytest.mark.xdist_group("tool")
def test_tool_a():
    note(test="tool")

@pytest.mark.parametrize("i", range(6))
def test_reads_shared(shared, i):
    assert (shared / "made").read_text() == "once"
    note(test="shared", path=str(shared))
"""

OTHER = """
import pytest
from conftest import note

@pytest.mark.xdist_group("tool")
def test_tool_b():
    note(test="tool")

@pytest.mark.parametrize("i", range(6))
def test_reads_shared_too(shared, i):
    note(test="shared", path=str(shared))

@pytest.mark.parametrize("i", range(3))
def test_broken(broken, i):
    pass
"""

LONG = """
import time
import pytest
from conftest import note

pytestmark = pytest.mark.xdist_long

@pytest.fixture(scope="module")
def model():
    time.sleep(2)
    return object()

def test_long_first(model):
    note(test="long", i=0)

def test_long_second(model):
    note(test="long", i=1)
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
        ) -> tuple[pytest.RunResult, list[dict]]:
    log = pytester.path / "log.jsonl"
    monkeypatch.setenv("SHARING_LOG", str(log))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # when this test runs in a worker
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_module_fixture=MODULE_FIXTURE, test_plain=PLAIN, test_other=OTHER,
                        test_zz_long=LONG)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", *args)
    return result, [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.slow
def test_a_module_fixture_and_a_named_group_stay_on_one_worker(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, log = run(pytester, monkeypatch, "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=28, errors=3)
    assert "SharedFixtureScheduling" in result.stdout.str()
    assert [e for e in log if e.get("built") == "server"] != []
    assert len([e for e in log if e.get("built") == "server"]) == 1  # not once per worker
    assert len({e["worker"] for e in log if e.get("test") == "server"}) == 1
    assert len({e["worker"] for e in log if e.get("test") == "tool"}) == 1  # two files, one worker
    assert {e["worker"] for e in log if e.get("test") == "plain"} <= {"gw0", "gw1"}
    # the long group (two tests, collected last, which xdist alone would order after the larger
    # groups) is the first its worker runs
    long_worker = {e["worker"] for e in log if e.get("test") == "long"}
    assert len(long_worker) == 1
    on_it = [e.get("test") for e in log if "test" in e and e["worker"] in long_worker]
    assert on_it[:2] == ["long", "long"]


@pytest.mark.slow
def test_a_session_run_is_built_once_for_every_worker_and_its_failure_told_to_all(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, log = run(pytester, monkeypatch, "--dist", "load")
    result.assert_outcomes(passed=28, errors=3)
    built = [e["built"] for e in log if "built" in e]
    assert built.count("shared") == 1 and built.count("broken") == 1
    readers = [e for e in log if e.get("test") == "shared"]
    assert len(readers) == 12 and len({e["path"] for e in readers}) == 1
    # both workers read it (load spreads the 12 tests), the one that did not build it too
    assert {e["worker"] for e in readers} == {"gw0", "gw1"}
    out = result.stdout.str()
    assert "RuntimeError: the build broke" in out
