"""HealthBench-Psych compendium helpers: every computation the notebooks show lives here."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hbpsych_utils")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
