"""Under pytest-xdist (``run_tests.sh``: ``-n auto --dist loadgroup``), the tests that share a
module- or class-scoped fixture (a run, a server, a browser) go to one worker, so it is made once.

Each such test is grouped by its file, unless it names an ``xdist_group`` itself. xdist's own
loadgroup reads the group from a suffix it appends to the test's id, which pytest 9.2 no longer
lets a plugin change (with pytest-xdist 3.8 the tests are then spread as if ungrouped, with
no error). So each worker also writes the groups it collected, by test id, into the session's
temp folder, and the controller's scheduler reads them there (loadgroup's own suffix still
counts where pytest keeps it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SHARED_SCOPES = {"package", "module", "class"}
GROUPS_FOLDER = "xdist-groups"


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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        group = group_of(item)
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
        part.write_text(json.dumps(groups), encoding="utf-8")
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

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected (and written)
                self.groups = {}
                for path in sorted(folder.glob("*.json")):
                    self.groups.update(json.loads(path.read_text(encoding="utf-8")))
            group = self.groups.get(nodeid)
            return group if group is not None else super()._split_scope(nodeid)

    return SharedFixtureScheduling(config, log)
