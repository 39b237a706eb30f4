"""The stage graph's nodes, one module per chapter (``sNN_name``), each with its profile
section's model (``Params``, none for a chapter without parameters) and its declaration
(``SPEC``). A chapter is added by adding its module here: the graph, the profile's sections,
the runner, the book's chapters and the docs' chapter lists take it from :data:`NODES`."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

NODES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{found.name}")
    for found in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    if found.name[:1] == "s" and found.name[1:3].isdigit())
"""Every node module, in run order (by name)."""
