"""The ``metrics.json`` of 01_corpus: its model and the stage's constant (what ``metrics.read`` and
``Stage.upstream_metrics`` take)."""

from __future__ import annotations

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.model import (
    Metrics,
    StageMetrics,
)


class CorpusMetrics(Metrics):
    corpus_source: str
    """``registry`` or the path of a profile's own ``corpus_file``."""
    complete: bool
    n_conversations: int
    n_expected: int
    coverage: float
    n_skipped: int
    n_hard_ids: int
    n_hard_in_corpus: int
    n_rubric_items: int
    n_non_english: int | None
    non_english_share: float | None
    ids_sha256: str
    turns_mean: float | None
    turns_median: float | None
    turns_max: int | None
    n_multi_turn: int
    rubric_items_mean: float | None
    n_negative_items: int
    positive_points_total: int | float
    negative_points_total: int | float
    points_all_integer: bool


CORPUS = StageMetrics(graph.CORPUS, CorpusMetrics)
