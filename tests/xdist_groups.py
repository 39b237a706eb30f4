"""Under pytest-xdist (``run_tests.sh``: ``-n auto --dist loadgroup``), the tests that share a
module- or class-scoped fixture (a run, a server, a browser) go to one worker, so it is made once.

Each such test is grouped by its file, unless it names an ``xdist_group`` itself. xdist's own
loadgroup reads the group from a suffix it appends to the test's id, which pytest 9.2 no longer
lets a plugin change (with pytest-xdist 3.8 the tests are then spread as if ungrouped, with
no error). So each worker also writes the groups it collected, by test id, into the session's
temp folder, and the controller's scheduler reads them there (loadgroup's own suffix still
counts where pytest keeps it).

A group that takes minutes (``pytest.mark.xdist_long``: the real local model's run) is handed out
first, and its worker gets nothing else until only one of the group's tests is left: xdist
otherwise orders groups by their number of tests, so a two-test group of several minutes
started late and kept a queue of other work behind it, and the session ended on it alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SHARED_SCOPES = {"package", "module", "class"}
GROUPS_FOLDER = "xdist-groups"
LONG = "xdist_long"
"""The mark of a test whose group takes minutes: scheduled first, on a worker of its own."""


def group_of(item: pytest.Item) -> str | None:
    """The worker ``item`` must share: its own ``xdist_group``, else its file when it uses a
    fixture wider than a test and narrower than the session (a session fixture is made once per
    worker, or shared through a file lock: conftest's runs)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    if any(defs[-1].scope in SHARED_SCOPES for defs in info.name2fixturedefs.values() if defs):
        return item.nodeid.split("::", 1)[0]
    return None


def session_folder(config: pytest.Config) -> Path:
    """The temp folder of the whole test session: xdist gives each worker a folder inside it."""
    if hasattr(config, "workerinput"):  # an xdist worker (not an environment variable, which a
        return Path(config.option.basetemp).parent  # pytest started by a worker inherits)
    return config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    """The mark is xdist's; declared here too, so a run without xdist (-p no:xdist) knows it."""
    config.addinivalue_line("markers", "xdist_group(name): run on the worker of this group")
    config.addinivalue_line("markers", f"{LONG}: its group takes minutes; scheduled first, alone")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups, long = {}, []
    for item in items:
        group = group_of(item)
        if item.get_closest_marker(LONG) is not None:
            long.append(group if group is not None else item.nodeid)
        if group is None:
            continue
        groups[item.nodeid] = group
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker and getattr(config.option, "basetemp", None):
        folder = session_folder(config) / GROUPS_FOLDER
        folder.mkdir(exist_ok=True)
        part = folder / f"{worker}.json.part"
        part.write_text(json.dumps({"groups": groups, "long": long}), encoding="utf-8")
        part.replace(folder / f"{worker}.json")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadgroup, with the groups the workers wrote (see the module's docstring)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    folder = session_folder(config) / GROUPS_FOLDER

    class SharedFixtureScheduling(LoadGroupScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None
        long: frozenset[str] = frozenset()

        def _read(self) -> dict[str, str]:
            if self.groups is None:  # read once every worker has collected (and written)
                self.groups, long = {}, set()
                for path in sorted(folder.glob("*.json")):
                    written = json.loads(path.read_text(encoding="utf-8"))
                    self.groups.update(written["groups"])
                    long.update(written["long"])
                self.long = frozenset(long)
            return self.groups

        def _split_scope(self, nodeid: str) -> str:
            group = self._read().get(nodeid)
            return group if group is not None else super()._split_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            """A long group before any other."""
            self._read()
            first = next((scope for scope in self.workqueue if scope in self.long), None)
            if first is not None:
                self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

        def _reschedule(self, node: Any) -> None:
            """Nothing more for a worker on a long group while two of its tests are pending
            (a worker runs a test once it holds the next, so one pending is not enough)."""
            if self.workqueue and not node.shutting_down:
                work = self.assigned_work.get(node, {})
                if (any(scope in self.long and not all(done.values())
                        for scope, done in work.items()) and self._pending_of(work) >= 2):
                    return
            super()._reschedule(node)

    return SharedFixtureScheduling(config, log)
