"""How a run ended: :class:`RunResult` when it ran to the end (its book included), or
:class:`RunInterrupted` when Ctrl-C stopped it. Standard library only: the command line names
them before it loads anything else."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunResult:
    profile: str
    outputs: Path
    notebooks: list[dict[str, Any]] = field(default_factory=list)
    """This invocation's notebooks, in the plan's order: status ``ok``, ``failed``,
    ``interrupted`` or ``not_run`` (an upstream of it failed), seconds."""
    up_to_date: list[str] = field(default_factory=list)
    """Stages found current and not run."""
    failures: list[str] = field(default_factory=list)
    """The notebooks that failed, in the plan's order."""
    not_run: list[str] = field(default_factory=list)
    """The notebooks of the plan not run because an upstream of theirs failed."""
    book_error: str | None = None
    """Why the book could not be built (the notebooks' outputs are kept)."""

    @property
    def failed(self) -> str | None:
        """The first notebook that failed (``None``: none did)."""
        return self.failures[0] if self.failures else None

    @property
    def ok(self) -> bool:
        return not self.failures and self.book_error is None


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run after it recorded where (a ``KeyboardInterrupt``, so a caller
    looping over runs stops too). ``notebooks`` are those it stopped (the first is
    ``notebook``; none when it stopped the book), ``where`` says it in words."""

    def __init__(self, profile: str, outputs: Path, notebooks: list[str], where: str) -> None:
        super().__init__(f"{where} of profile {profile!r} stopped by Ctrl-C")
        self.profile, self.outputs, self.where = profile, outputs, where
        self.notebooks = list(notebooks)
        self.notebook = self.notebooks[0] if self.notebooks else None


def stopped_at(stage: str, cell: int | None) -> str:
    """How the interruption line names a notebook stopped by Ctrl-C: ``08_scores (at cell 3)``,
    ``08_scores`` when no cell had run."""
    return f"{stage} (at cell {cell})" if cell is not None else stage


def and_list(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
