"""Records the harness run (11) and the analyses (14) both report: a score by tag or slice, a
distribution of reply lengths."""

from __future__ import annotations

from hbpsych_utils.pipeline.metrics.model import (
    Bound,
    Metrics,
    Undefined,
)


class TagScore(Metrics):
    """A tag's or slice's score (``evaluation.breakdowns.summarise``): n conversations, the
    clipped mean, its 95% bootstrap interval (``None`` on one conversation, with the reason in
    ``undefined``) and the reference's ``bootstrap_std``."""

    n: int
    clipped_mean: float
    ci_low: Bound
    ci_high: Bound
    bootstrap_std: float
    undefined: Undefined = None


class LengthDistribution(Metrics):
    """Reply lengths in characters (``evaluation.length.distribution``)."""

    n: int
    mean: float
    min: float
    p25: float
    median: float
    p75: float
    max: float
