"""Modules a test file imports when one of its tests first reads them, not when it is collected.

Every xdist worker collects every test file, so an SDK a test file imports at its top is
imported by both workers (the Anthropic, OpenAI and Google SDKs: about two seconds of each
worker's start) though only the worker that runs that file's tests needs it. Such a file names
the module by a :class:`Lazy` and puts its tests in :data:`SDK_GROUP`, on one worker.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

SDK_GROUP = pytest.mark.xdist_group("provider-sdks")
"""The tests that use the providers' SDKs, directly or through the engine (resolving a request
loads its provider's adapter, and with it the SDK): under xdist they run on one worker."""


class Lazy:
    """The module ``name``, imported when one of its public attributes is first read (pytest's
    collection asks every name of a test module for attributes of its own, such as
    ``__test__``: those are not the module's and import nothing)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"Lazy({self._name!r})"
