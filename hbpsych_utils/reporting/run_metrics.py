"""A run's metrics as the pages read them: every stage's typed ``metrics.json``, by stage name,
and one stage's as its own model (``of(metrics, SCORES)`` is a ``ScoresMetrics`` or ``None``,
to the type checker too), so a page never reaches into an untyped value."""

from __future__ import annotations

from collections.abc import Mapping

from hbpsych_utils.pipeline.metrics import M, Metrics, StageMetrics

RunMetrics = Mapping[str, Metrics]
"""Every stage's metrics that a run folder holds, by stage name (a stage that did not run is
absent)."""


def of(metrics: RunMetrics, stage: StageMetrics[M]) -> M | None:
    """Stage ``stage``'s metrics as its model; ``None`` when the run has none for it."""
    found = metrics.get(stage.stage)
    return found if isinstance(found, stage.models) else None
