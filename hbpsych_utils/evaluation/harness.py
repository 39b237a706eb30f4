"""Harness validation: does our grading harness reproduce OpenAI's published GPT-4.1 score?

The study re-ran GPT-4.1 on the 1,000 HealthBench-Hard conversations at the reference settings
(``REFERENCE_SETTINGS``) and released one line per conversation: ``prompt_id, score, grades``
(the ``criteria_met`` booleans in rubric order; artifact ``harness_scores``).

*Replay* recomputes from that file, with no model call: n scored, the clipped mean and the
reference ``bootstrap_std``, and the difference from the published HealthBench-Hard figure.
Where a conversation's rubric is available (the partial corpus offline), its score is also
recomputed from the grades with the grader's own formula and checked against the released one.

*Live* runs GPT-4.1 on the Hard conversations at those settings through the engine (notebook
11) and summarises its per-conversation scores the same way (``summarize``).

The published figure is a profile parameter, a fraction in [0, 1] like the scores, with its
citation. By default it is 0.16, OpenAI's GPT-4.1 HealthBench-Hard score as the study's paper
cites it from the HealthBench paper (``study.PUBLISHED_HARNESS_SCORE``); a profile may give
another or none, and then no difference is reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, TypeVar

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core import jsonl
from hbpsych_utils.core.records import TextRecord
from hbpsych_utils.evaluation import grading, length, scoring
from hbpsych_utils.pipeline.metrics import ReleasedLength

GENERATE_TAG = "harness-generate"
GRADE_TAG = "harness-grade"
"""The live re-run's tags in the store's ledger, apart from the evaluation's own calls."""

REFERENCE_SETTINGS: dict[str, str | float] = {
    "candidate": study.HARNESS_MODEL,
    "judge": study.HARNESS_MODEL,
    "candidate_temperature": study.REFERENCE_TEMPERATURE,
    "judge_temperature": study.REFERENCE_TEMPERATURE,
    "candidate_max_tokens": 2048,
    "judge_max_tokens": grading.MAX_TOKENS,
    "judge_system_message": grading.SYSTEM_MESSAGE,
}
"""Settings of the live harness check (METHODS.md section 7)."""


class HarnessError(ValueError):
    """A malformed harness-scores line; the message names file, line and field."""


class HarnessRecord(TextRecord):
    """One line of the released harness scores (strict types; other keys are ignored)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    error = HarnessError

    prompt_id: str = Field(min_length=1)
    score: float | None = Field(allow_inf_nan=False)
    """The conversation's score (unclipped); ``null`` when the run could not score it."""
    grades: list[bool]
    """The ``criteria_met`` booleans in rubric order."""


R = TypeVar("R", "HarnessRecord", "HarnessReplyRecord")
"""A line of one of the released harness files."""


@dataclass(frozen=True)
class HarnessLine:
    line: int
    prompt_id: str
    score: float | None
    grades: tuple[bool, ...]


def _released_lines(path: Path, record: type[R]) -> Iterator[tuple[int, R]]:
    """Each line of a released harness file validated by ``record`` (errors name file, line and
    field), with its line number; a prompt_id may appear once."""
    seen: dict[str, int] = {}
    for lineno, rec in jsonl.records(path, error=HarnessError):
        r = record.parse(rec, f"{path}:{lineno}")
        pid = r.prompt_id
        if pid in seen:
            raise HarnessError(
                f"{path}:{lineno}: field 'prompt_id': {pid} repeats line {seen[pid]}")
        seen[pid] = lineno
        yield lineno, r


def read_harness_scores(path: Path | str) -> list[HarnessLine]:
    """The released per-conversation harness scores, validated line by line (``HarnessRecord``:
    errors name file, line and field); a prompt_id may appear once."""
    return [HarnessLine(lineno, r.prompt_id, r.score, tuple(r.grades))
            for lineno, r in _released_lines(Path(path), HarnessRecord)]


def compare_with_released(scores: pd.DataFrame, released: Iterable[HarnessLine]) -> pd.DataFrame:
    """A live run's per-conversation scores beside the released run's, on the conversations
    both scored (``released`` column added; rows either run left unscored dropped)."""
    released_by_id = {ln.prompt_id: ln.score for ln in released}
    return scores.assign(released=scores.prompt_id.map(released_by_id)).dropna(
        subset=["score", "released"])


class ReleasedComparison(TypedDict):
    """A live run against the released one (``HarnessMetrics`` fields)."""

    n_common_with_released: int
    mean_difference_vs_released: float | None


def comparison_metrics(comparison: pd.DataFrame) -> ReleasedComparison:
    """``n_common_with_released`` and the mean live-minus-released difference (``None`` when
    no conversation is common)."""
    diff = comparison.score - comparison.released
    return {"n_common_with_released": len(comparison),
            "mean_difference_vs_released": float(diff.mean()) if len(comparison) else None}


@dataclass(frozen=True)
class Mismatch:
    prompt_id: str
    line: int
    released: float | None
    recomputed: float | None
    problem: str


@dataclass
class RubricCheck:
    n_checked: int
    n_exact: int
    n_within_tolerance: int
    mismatches: list[Mismatch] = field(default_factory=list)


def check_against_rubrics(
    lines: Iterable[HarnessLine],
    conversations: Mapping[str, Conversation] | Iterable[Conversation],
    *,
    tolerance: float = 1e-12,
) -> RubricCheck:
    """Recompute each released score from its grades and rubric, where the rubric is known.

    A conversation counts as exact when the floats are equal, within tolerance when they differ
    by at most ``tolerance``; anything else (including a grade count that does not match the
    rubric) is a mismatch.
    """
    convs = conversations if isinstance(conversations, Mapping) else {
        c.prompt_id: c for c in conversations
    }
    check = RubricCheck(0, 0, 0)
    for ln in lines:
        conv = convs.get(ln.prompt_id)
        if conv is None:
            continue
        check.n_checked += 1
        if len(ln.grades) != len(conv.rubrics):
            check.mismatches.append(Mismatch(
                ln.prompt_id, ln.line, ln.score, None,
                f"{len(ln.grades)} grades for {len(conv.rubrics)} rubric criteria",
            ))
            continue
        got = grading.conversation_score([r.points for r in conv.rubrics], list(ln.grades))
        if got is not None and ln.score is not None and got == ln.score:
            check.n_exact += 1
        elif got is not None and ln.score is not None and abs(got - ln.score) <= tolerance:
            check.n_within_tolerance += 1
        else:
            check.mismatches.append(
                Mismatch(ln.prompt_id, ln.line, ln.score, got, "score differs")
            )
    return check


class ReplayNumbers(TypedDict):
    """A run's summary as ``HarnessMetrics`` fields."""

    n_scored: int
    clipped_mean: float
    bootstrap_std: float
    published: float | None
    delta: float | None


@dataclass(frozen=True)
class HarnessReplay:
    n_lines: int
    n_scored: int
    clipped_mean: float
    bootstrap_std: float
    published: float | None
    """The published figure compared against; ``None`` when none was given."""
    delta: float | None
    """clipped_mean - published (``None`` without a published figure)."""

    def metrics(self) -> ReplayNumbers:
        """``metrics.json`` fields of 11_harness_validation."""
        return {
            "n_scored": self.n_scored,
            "clipped_mean": self.clipped_mean,
            "bootstrap_std": self.bootstrap_std,
            "published": self.published,
            "delta": self.delta,
        }


def summarize(
    scores: Iterable[float | None],
    *,
    published: float | None,
    seed: int,
    n_resamples: int = study.N_RESAMPLES,
) -> HarnessReplay:
    """A run summarised as simple-evals reports it: n scored, clipped mean, ``bootstrap_std``,
    and the difference from the published figure (a fraction in [0, 1], or ``None`` to report
    no difference). ``None`` scores (unscored conversations) are not counted."""
    if published is not None and (
        isinstance(published, bool) or not isinstance(published, int | float)
        or not 0.0 <= published <= 1.0
    ):
        raise HarnessError(
            f"published HealthBench-Hard figure must be a fraction in [0, 1], got {published!r}"
        )
    values = list(scores)
    s = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    mean = scoring.clipped_mean(s)
    std = scoring.reference_bootstrap_std(s, n_resamples=n_resamples, seed=seed)
    pub = None if published is None else float(published)
    return HarnessReplay(len(values), int(s.size), mean, std, pub,
                         None if pub is None else mean - pub)


def replay(
    lines: Iterable[HarnessLine],
    *,
    published: float | None,
    seed: int,
    n_resamples: int = study.N_RESAMPLES,
) -> HarnessReplay:
    """Summary of the released harness run (``summarize`` of its per-conversation scores)."""
    return summarize((ln.score for ln in lines), published=published, seed=seed,
                     n_resamples=n_resamples)


# --------------------------------------------------------------------------------------------
# The released run's replies and per-criterion grades: where it fails, and its length

class HarnessReplyRecord(TextRecord):
    """One line of the released run's results (``harness_results``: ``results.jsonl``), the
    fields read for its reply lengths (strict types; other keys are ignored)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    error = HarnessError

    prompt_id: str = Field(min_length=1)
    score: float | None = Field(allow_inf_nan=False)
    response_text: str | None
    """The candidate's reply as graded; ``null`` when there was none."""


@dataclass(frozen=True)
class HarnessReply:
    line: int
    prompt_id: str
    score: float | None
    chars: int | None
    """The reply's length as the reference counts it (``length.chars``)."""


def read_harness_replies(path: Path | str) -> list[HarnessReply]:
    """The released run's replies with their scores, validated line by line
    (``HarnessReplyRecord``: errors name file, line and field); a prompt_id may appear once."""
    return [HarnessReply(lineno, r.prompt_id, r.score, length.chars(r.response_text))
            for lineno, r in _released_lines(Path(path), HarnessReplyRecord)]


def released_verdicts(lines: Iterable[HarnessLine],
                      conversations: Mapping[str, Conversation]) -> pd.DataFrame:
    """The released grades as a verdict table (``grading.VERDICT_COLUMNS``; the harness model is
    judge and candidate), for the conversations whose rubric ``conversations`` holds and whose
    grades pair with it one to one (the others are reported by :func:`check_against_rubrics`)."""
    rows = [(study.HARNESS_MODEL, study.HARNESS_MODEL, ln.prompt_id, i, met)
            for ln in lines if ln.prompt_id in conversations
            and len(ln.grades) == len(conversations[ln.prompt_id].rubrics)
            for i, met in enumerate(ln.grades)]
    return pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id", "criterion_index",
                                       "criteria_met"])


def length_summary(replies: Iterable[HarnessReply], variant: str) -> ReleasedLength:
    """The released run's length-adjusted score (``length``: the reference's formula with
    ``variant``'s penalty) beside its raw clipped mean, over the scored replies, with the
    distribution of their lengths."""
    scored = [(r.score, r.chars) for r in replies if r.score is not None and r.chars is not None]
    scores = [score for score, _ in scored]
    n_chars = [chars for _, chars in scored]
    per_500 = length.penalty(variant)
    return ReleasedLength(variant=variant, penalty=per_500, n=len(scored),
                          clipped_mean=scoring.clipped_mean(scores),
                          adjusted_mean=length.adjusted_mean(scores, n_chars, per_500),
                          chars=length.distribution(n_chars))
