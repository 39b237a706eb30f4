"""The project's top-level ``figures/`` folder: exactly the figures and tables of the last run
that published there (12_figures_tables with ``publish``).

Copying alone would keep what an earlier run wrote and this one did not (a tweak's
``fig_judges_hard.*`` after the tweak is undone), so the folder would mix runs. The folder keeps
a record of the files the project wrote into it (``RECORD``); each publication removes the
recorded files it does not write again. Nothing else there is touched: the folder's
``README.md``, or a file a user put there, is not the project's to remove.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from hbpsych_utils.core.writes import write_json

RECORD = ".written.json"
"""The files the project wrote into the folder (``{"files": [...]}``)."""
README = "README.md"
"""The folder's own note (tracked in git): never removed, whatever a record says."""


def written(folder: Path) -> set[str]:
    """The files the record says the project wrote into ``folder`` (none without a record; an
    unreadable record counts as none: only files known to be the project's are removed)."""
    try:
        names = json.loads((folder / RECORD).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in names if isinstance(n, str) and n == Path(n).name and n != README}


def publish(source: Path, names: Iterable[str], folder: Path) -> list[str]:
    """Copy ``names`` from ``source`` into ``folder`` and remove the files an earlier
    publication wrote there that these do not include; returns the names removed. The record
    lists the old and new files while copying, so an interrupted publication still knows
    every file of the project's that the folder holds."""
    names = sorted(set(names))
    folder.mkdir(parents=True, exist_ok=True)
    before = written(folder)
    write_json(folder / RECORD, {"files": sorted(before | set(names))})
    for name in names:
        shutil.copyfile(source / name, folder / name)
    stale = sorted(before - set(names))
    for name in stale:
        (folder / name).unlink(missing_ok=True)
    write_json(folder / RECORD, {"files": names})
    return stale
