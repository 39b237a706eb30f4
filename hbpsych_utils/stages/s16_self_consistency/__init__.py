"""Chapter 16, do the judges agree with themselves? A sample of the grading, re-graded.

The chapter's calls, in order: :func:`start`, :func:`sample` (the resolver: live with
``grading.repeats`` >= 2, a seeded sample of 07's (reply, criterion) items and what re-grading
and reading them needs; paper, or grading once, has nothing to repeat, said once),
:func:`cost_plan` (shown before anything is sent), :func:`regrade` (each repeat through the
engine with 07's settings, mode and prompt caching, ``Request.repeat`` r: a new store entry),
:func:`flips` (flip rates with conversation-clustered intervals, AC1 between repeats),
:func:`flipping_criteria` (by theme, rubric axis, Psych category), :func:`scores` (panel scores
per repeat, their spread, Kendall's tau between rankings), :func:`refusals` (the judges' own),
:func:`metrics`, :func:`write` and :func:`findings`. The statistics are
:mod:`hbpsych_utils.evaluation.consistency`'s; docs/self_consistency.md defines the outputs.
"""
from __future__ import annotations

from hbpsych_utils.pipeline.nodes.s16_self_consistency import SELF_CONSISTENCY as STAGE
from hbpsych_utils.stages import base
from hbpsych_utils.stages.s16_self_consistency.outputs import findings, metrics, write
from hbpsych_utils.stages.s16_self_consistency.regrading import (
    REGRADE_TAG,
    REPEATS_FILE,
    Inputs,
    Plan,
    Regraded,
    Sample,
    cost_plan,
    first_verdicts,
    item_labels,
    regrade,
    sample,
)
from hbpsych_utils.stages.s16_self_consistency.results import (
    FlippingCriteria,
    Flips,
    Refusals,
    Scores,
    flipping_criteria,
    flips,
    refusals,
    scores,
)

start = base.starter(STAGE)

__all__ = ["REGRADE_TAG", "REPEATS_FILE", "STAGE", "FlippingCriteria", "Flips", "Inputs",
           "Plan", "Refusals", "Regraded", "Sample", "Scores", "cost_plan", "findings",
           "first_verdicts", "flipping_criteria", "flips", "item_labels", "metrics", "refusals",
           "regrade", "sample", "scores", "start", "write"]
