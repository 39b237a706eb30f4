"""The ``metrics.json`` of 05_subset: its model and the stage's constant (what ``metrics.read`` and
``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Counts,
    Metrics,
    StageMetrics,
)


class SubsetMetrics(Metrics):
    n_v1: int
    n_v2: int
    n_hard: int
    sha256_v1: str
    sha256_v2: str
    sha256_hard: str
    matches_release_v1: bool | None = None
    matches_release_v2: bool | None = None
    matches_release_hard: bool | None = None
    category_counts: Counts
    n_no_category_majority: int

    def sizes(self) -> dict[str, int]:
        return {"v1": self.n_v1, "v2": self.n_v2, "hard": self.n_hard}

    def hashes(self) -> dict[str, str]:
        return {"v1": self.sha256_v1, "v2": self.sha256_v2, "hard": self.sha256_hard}

    def matches(self) -> dict[str, bool]:
        """Subset key -> whether it equals the released file (only those compared)."""
        out = {"v1": self.matches_release_v1, "v2": self.matches_release_v2,
               "hard": self.matches_release_hard}
        return {k: v for k, v in out.items() if v is not None}


SUBSET = StageMetrics(graph.SUBSET, SubsetMetrics)
