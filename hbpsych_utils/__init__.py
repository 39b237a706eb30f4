"""HealthBench-Psych compendium helpers: every computation the notebooks show lives here."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata when first asked for: importing the
    package does nothing else, so ``python -m hbpsych_utils`` reaches its own Ctrl-C handling
    at once (``importlib.metadata`` takes a while to import)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("hbpsych_utils")
    except PackageNotFoundError:  # running from a source tree that was never installed
        value = "0.0.0+unknown"
    globals()["__version__"] = value
    return value
