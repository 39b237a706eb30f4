"""The ``metrics.json`` of 11_harness_validation: its model and the stage's constant (what
``metrics.read`` and ``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from typing import Literal

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.breakdowns import LengthDistribution, TagScore
from hbpsych_utils.pipeline.metrics.model import (
    Metrics,
    StageMetrics,
)


class ReleasedBreakdown(Metrics):
    """The released harness run by rubric axis and theme: its per-criterion grades on the
    conversations whose rubric the run's corpus holds."""

    n_lines: int
    """Conversations of the released run (1,000)."""
    n_with_rubric: int
    """Of those, the ones whose rubric this run's corpus holds (193 with the offline corpus)."""
    by_tag: dict[str, TagScore]


class ReleasedLength(Metrics):
    """The released harness run's length-adjusted score beside its raw one, over its scored
    replies (``harness.length_summary``)."""

    variant: str
    penalty: float
    n: int
    clipped_mean: float
    adjusted_mean: float
    chars: LengthDistribution


class HarnessSettings(Metrics):
    candidate: str
    judge: str
    temperature: float
    max_tokens: int


class HarnessMetrics(Metrics):
    mode: Literal["replay", "live"]
    n_scored: int
    clipped_mean: float | None
    bootstrap_std: float | None
    published: float | None
    delta: float | None
    published_source: str
    settings: HarnessSettings
    n_common_with_released: int | None = None
    mean_difference_vs_released: float | None = None
    released_breakdown: ReleasedBreakdown | None = None
    released_length: ReleasedLength | None = None
    ci_level: float | None = None
    """The level of the released breakdown's intervals."""


HARNESS = StageMetrics(graph.HARNESS, HarnessMetrics)
