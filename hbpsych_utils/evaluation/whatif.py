"""What if the leaderboard were scored another way, and how much does its order depend on it?

Most questions a reader asks of Table 1 need no new model call: *only one judge? the median of
the judges instead of their mean? Psych-Hard? the later models in?* Each answer is a function of
data the run already has. This module computes Table 1 under every scoring choice the run's
data allows (a :class:`Choice`; the grid is a :class:`Space`) and, over all of them, how robust
the study's ranking is (:func:`robustness`, :func:`summarise`).

*Paper mode* works from the released per-judge matrices (one clipped mean per model and judge):
a panel of some of the judges is the **mean of their clipped means** (``scoring.paper_panel_means``,
as 08 computes the study's panel in paper mode), and the "median" panel is the **median of the
judges' clipped means**. Point estimates: no interval, and no per-conversation choice
(refusals, the clip, length) can be made.

*Live mode* works from this run's per-conversation scores (07's ``scores.csv``), as 08 does:
the panel combines, per conversation, the judges that all scored it (mean as the study does,
or median), then the mean over conversations is clipped to [0, 1] (or, as a choice, not
clipped); refusals may be left out (each model's own, as chapter 10's sensitivity analysis
does), and each conversation's panel score may be length-adjusted before the mean (chapter 14's
formula and penalty). Every Table 1 carries its seeded bootstrap interval (the run's seed,
resamples and level; the same draws as 08, so the run's own choice reproduces 08's intervals).

With one or two judges the median of the judges is their mean, so such a choice is the same
computation as the mean and is counted once (:meth:`Choice.canonical`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.sources import ArtifactError
from hbpsych_utils.evaluation import generation, length, refusals, scoring
from hbpsych_utils.evaluation.score_sources import (
    RunFiles,
    evaluation_source,
    read_matrix,
)
from hbpsych_utils.pipeline import graph

Combine = Literal["mean", "median"]
COMBINES: tuple[Combine, ...] = ("mean", "median")


class WhatIfError(ValueError):
    """A run whose data cannot be scored another way (names the file or field)."""


# --------------------------------------------------------------------------------------------
# Scoring choices


@dataclass(frozen=True)
class Choice:
    """One way of scoring the run: which judges form the panel and how it combines them, on
    which subset, with or without the later models; in a live run also refusals left out, the
    mean unclipped, the length-adjusted score. The defaults are the study's."""

    judges: tuple[str, ...]
    combine: Combine = "mean"
    subset: str = "v1"
    later: bool = False
    refusals_excluded: bool = False
    clipped: bool = True
    length_adjusted: bool = False

    def canonical(self) -> Choice:
        """The same computation named one way: the median of one or two judges is their
        mean."""
        return replace(self, combine="mean") if len(self.judges) < 3 else self


@dataclass(frozen=True)
class Space:
    """The scoring choices a run's data allows."""

    mode: Literal["paper", "live"]
    judges: tuple[str, ...]
    """The run's panel, in its order."""
    subsets: tuple[str, ...]
    """The subsets with scores, the study's primary first."""
    has_later: bool
    """Whether the data holds a model added after the study (so "later in or out" is a
    choice)."""

    @property
    def live(self) -> bool:
        return self.mode == "live"

    def panels(self) -> list[tuple[str, ...]]:
        """Every non-empty subset of the run's judges: the whole panel first, then each judge
        alone, then the pairs, and so on (each in the panel's order)."""
        n = len(self.judges)
        sizes = [n, *range(1, n)]
        return [c for k in sizes for c in itertools.combinations(self.judges, k)]

    def combines(self) -> tuple[Combine, ...]:
        """Mean, and median where some panel has three judges or more (with fewer the median
        is the mean)."""
        return COMBINES if len(self.judges) >= 3 else ("mean",)

    def choices(self) -> list[Choice]:
        """Every combination of the choices (a median of one or two judges included: the page
        offers it, and :meth:`Choice.canonical` says it is the mean)."""
        flags = (False, True)
        return [Choice(j, c, s, later, r, clip, adj)
                for j in self.panels() for c in self.combines() for s in self.subsets
                for later in (flags if self.has_later else (self.later_default,))
                for r in (flags if self.live else (False,))
                for clip in ((True, False) if self.live else (True,))
                for adj in (flags if self.live else (False,))]

    def distinct(self) -> list[Choice]:
        """Each computation once (:meth:`Choice.canonical`), in :meth:`choices`' order."""
        return list(dict.fromkeys(c.canonical() for c in self.choices()))

    @property
    def later_default(self) -> bool:
        """Without a later model in the data the choice does not arise; a live run's Table 1
        shows every model it graded."""
        return self.live


# --------------------------------------------------------------------------------------------
# The data behind the choices


@dataclass(frozen=True)
class PaperData:
    """The released matrices, by subset: each model's clipped mean per judge (``in_study``
    says whether it is one of the study's 20) and the conversations behind each."""

    per_judge: dict[str, pd.DataFrame]
    n: dict[str, pd.DataFrame]
    """candidate x judge ``n_prompts``."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Subsets left out, with the reason (a matrix that could not be fetched)."""


@dataclass(frozen=True)
class LiveData:
    """This run's per-conversation scores by subset, each model's refused conversations, each
    reply's length, and the bootstrap's settings."""

    scores: dict[str, pd.DataFrame]
    refused: dict[str, list[str]]
    lengths: dict[tuple[str, str], int]
    penalty_variant: str
    n_resamples: int
    seed: int
    level: float

    @property
    def per_500(self) -> float:
        return length.penalty(self.penalty_variant)


def paper_data(run: RunFiles, subsets: Sequence[str] = study.SUBSET_KEYS) -> PaperData:
    """The released matrix of each subset (``score_sources.read_matrix``, fetched through the
    registry with its sha256 checked), every candidate kept; a matrix that cannot be fetched
    leaves its subset out with the reason."""
    per_judge: dict[str, pd.DataFrame] = {}
    ns: dict[str, pd.DataFrame] = {}
    skipped: dict[str, str] = {}
    for key in subsets:
        name = study.MATRIX_ARTIFACTS[key]
        try:
            matrix = read_matrix(run.fetch(name))
        except ArtifactError as exc:
            skipped[key] = str(exc).splitlines()[0]
            continue
        per_judge[key] = scoring.paper_per_judge(matrix, judges=study.JUDGE_PANEL,
                                                include_later=True, source=name)
        ns[key] = matrix.pivot(index="candidate", columns="judge", values="n_prompts")
    if not per_judge:
        raise WhatIfError("no released matrix could be read: " + "; ".join(skipped.values()))
    return PaperData(per_judge, ns, skipped)


def live_data(run: RunFiles, *, penalty_variant: str, n_resamples: int, seed: int,
              level: float, subsets: Sequence[str] = study.SUBSET_KEYS) -> LiveData:
    """This run's scores on each subset it graded (``score_sources.evaluation_source``: 07's
    ``scores.csv`` on 05's ids), every model's own refusals (06's replies, ``refusals.refused``)
    and each reply's length in characters."""
    scores = {}
    for key in subsets:
        try:
            source = evaluation_source(run, key, mode=graph.LIVE)
        except KeyError:  # 05 wrote no such subset
            continue
        if source is not None and source.scores is not None:
            scores[key] = source.scores[list(scoring.SCORE_COLUMNS)]
    if not scores:
        raise WhatIfError("this run graded no conversation of any subset")
    replies = generation.read_responses(run.upstream(graph.GENERATION, graph.RESPONSES))
    refused = refusals.refused_by_model(refusals.refused(replies))
    lengths = {(str(m), str(p)): int(c) for m, p, c in
               zip(replies["model"], replies["prompt_id"], replies["chars"], strict=True)
               if pd.notna(c)}
    return LiveData(scores, refused, lengths, penalty_variant, n_resamples, seed, level)


# --------------------------------------------------------------------------------------------
# Table 1 under one choice


@dataclass(frozen=True)
class Outcome:
    """Table 1 under one choice: each model's score, best first, with its interval where the
    data allows (NaN ends, and the reason, where it is undefined) and its n."""

    choice: Choice
    table: pd.DataFrame
    """Index: candidate, best first (ties by name); columns ``rank``, ``score``, ``ci_low``,
    ``ci_high``, ``n``, ``in_study``; ``undefined`` (why an interval is missing, or "")."""

    @property
    def ranking(self) -> list[str]:
        return self.table.index.tolist()

    @property
    def intervals(self) -> bool:
        return bool(self.table["ci_low"].notna().any() or self.table["undefined"].ne("").any())


def _ranked(rows: Mapping[str, Mapping[str, object]], choice: Choice) -> Outcome:
    """Rows by candidate as an :class:`Outcome` (``scoring.ranking``'s order)."""
    frame = pd.DataFrame.from_dict(dict(rows), orient="index",
                                   columns=["score", "ci_low", "ci_high", "n", "in_study",
                                            "undefined"])
    order = scoring.ranking(frame["score"].astype(float)) if len(frame) else []
    frame = frame.loc[order]
    frame.insert(0, "rank", np.arange(1, len(frame) + 1))
    frame.index.name = "candidate"
    return Outcome(choice, frame)


def paper_outcome(data: PaperData, choice: Choice) -> Outcome:
    """Table 1 under ``choice`` from the released matrices: the mean of the chosen judges'
    clipped means (``scoring.paper_panel_means``) or their median; n is the fewest
    conversations behind any chosen judge's mean. Models without a mean from every chosen
    judge are left out."""
    if choice.refusals_excluded or not choice.clipped or choice.length_adjusted:
        raise WhatIfError("the released matrices hold clipped means only: refusals, the clip "
                          "and the length adjustment need per-conversation scores")
    table = data.per_judge[choice.subset]
    judges = list(choice.judges)
    keep = table[judges].notna().all(axis=1) & (table["in_study"] | choice.later)
    table = table[keep]
    if choice.combine == "mean":
        values = scoring.paper_panel_means(table, judges)
    else:
        values = table[judges].median(axis=1)
    n = data.n[choice.subset].loc[table.index, judges].min(axis=1)
    rows = {str(c): {"score": float(values[c]), "ci_low": math.nan, "ci_high": math.nan,
                     "n": int(n[c]), "in_study": bool(table.at[c, "in_study"]),
                     "undefined": ""} for c in table.index}
    return _ranked(rows, choice)


class _LiveCache:
    """What every choice of a live run reuses: each candidate's conversation x judge scores
    (with and without its refusals), its per-conversation panel scores for each panel (the
    choices that differ only in the clip, the length adjustment or the later models share
    them), and the bootstrap's draws for each n (the draws depend on n and the seed only, as in
    ``scoring.bootstrap_means``)."""

    def __init__(self, data: LiveData) -> None:
        self.data = data
        self._wide: dict[tuple[str, str, bool], pd.DataFrame] = {}
        self._panels: dict[tuple[str, str, bool, tuple[str, ...], str], pd.Series | None] = {}
        self._counts: dict[int, np.ndarray] = {}

    def wide(self, subset: str, candidate: str, excluded: bool) -> pd.DataFrame:
        key = (subset, candidate, excluded)
        if key not in self._wide:
            scores = self.data.scores[subset]
            mine = scores[scores["candidate"] == candidate]
            if excluded:
                mine = refusals.exclude_refused(mine, self.data.refused, scope="own")
            # as scoring.score_matrix lays it out: conversations sorted, one column per judge
            self._wide[key] = mine.pivot(index="prompt_id", columns="judge",
                                         values="score").sort_index()
        return self._wide[key]

    def panel(self, choice: Choice, candidate: str) -> pd.Series | None:
        """:func:`_panel` of ``candidate``'s scores under ``choice``, once per panel (read
        only: the rows build new arrays from it)."""
        key = (choice.subset, candidate, choice.refusals_excluded, tuple(choice.judges),
               choice.combine)
        if key not in self._panels:
            self._panels[key] = _panel(self.wide(choice.subset, candidate,
                                                 choice.refusals_excluded),
                                       choice.judges, choice.combine)
        return self._panels[key]

    def counts(self, n: int) -> np.ndarray:
        if n not in self._counts:
            rng = np.random.default_rng(self.data.seed)
            self._counts[n] = scoring.resample_counts(n, self.data.n_resamples, rng)
        return self._counts[n]


def _panel(wide: pd.DataFrame, judges: Sequence[str], combine: Combine) -> pd.Series | None:
    """Per-conversation panel scores over the conversations every chosen judge scored
    (``scoring.panel_conversation_scores``' rule), or None when a judge scored none."""
    if any(j not in wide.columns for j in judges):
        return None
    rows = wide[list(judges)].dropna(how="any")
    return rows.mean(axis=1) if combine == "mean" else rows.median(axis=1)


def _live_row(cache: _LiveCache, choice: Choice, candidate: str) -> dict[str, object] | None:
    data = cache.data
    panel = cache.panel(choice, candidate)
    if panel is None or panel.empty:
        return None
    x = panel.to_numpy(dtype=float)
    if choice.length_adjusted:
        chars = np.array([data.lengths[(candidate, p)] for p in panel.index], dtype=float)
        x = np.asarray(length.adjusted(x, chars, data.per_500), dtype=float)
    means = cache.counts(x.size) @ x / x.size
    if choice.clipped:
        estimate = scoring.clipped_mean(x)
        means = np.clip(means, 0.0, 1.0)
    else:
        estimate = float(np.mean(x))
    low, high, why = scoring.percentile_interval(means, data.level, n=x.size)
    return {"score": estimate, "ci_low": low, "ci_high": high, "n": int(x.size),
            "in_study": candidate not in study.LATER_CANDIDATES, "undefined": why or ""}


def live_outcome(cache: _LiveCache, choice: Choice) -> Outcome:
    """Table 1 under ``choice`` from this run's per-conversation scores (module doc)."""
    scores = cache.data.scores[choice.subset]
    cands = sorted(scores["candidate"].unique())
    if not choice.later:
        cands = [c for c in cands if c not in study.LATER_CANDIDATES]
    rows = {c: row for c in cands if (row := _live_row(cache, choice, c)) is not None}
    return _ranked(rows, choice)


# --------------------------------------------------------------------------------------------
# Every choice, and how robust the ranking is


@dataclass(frozen=True)
class Move:
    """How one choice moves the study's order: Kendall's τ against it, whether the top k are
    the same k, the largest move (places, signed: up is positive) and who makes it, and in a
    live run the reversals its intervals support."""

    tau: float | None
    same_top: bool
    largest_move: int
    moved: tuple[str, ...]
    """The models that move by ``largest_move`` places (none when nobody moves)."""
    reversals: int | None
    """Pairs the study orders a above b that this choice orders b above a with b's interval
    entirely above a's (None: no intervals)."""
    changes: dict[str, int]
    """Each model's change in place among the models both rankings have (up is positive)."""


def _positions(order: Sequence[str]) -> dict[str, int]:
    return {c: i for i, c in enumerate(order)}


def compare(outcome: Outcome, reference: Sequence[str], *,
            top_k: int = study.RANKING_TOP_K) -> Move:
    """``outcome`` against the study's ranking ``reference`` (best first). τ, the moves and
    the reversals are over the models both rankings have (a model the study did not rank has
    no change, and a model added above others does not move them); whether the top ``top_k``
    are the same compares the whole rankings, so a later model entering the top counts."""
    ranking = outcome.ranking
    common = [c for c in reference if c in set(ranking)]
    ref_pos = _positions(common)
    pos = _positions([c for c in ranking if c in set(common)])
    changes = {c: ref_pos[c] - pos[c] for c in common}
    biggest = max((abs(v) for v in changes.values()), default=0)
    moved = tuple(c for c in common if biggest and abs(changes[c]) == biggest)
    return Move(_tau(common, ref_pos, pos), set(ranking[:top_k]) == set(reference[:top_k]),
                max((changes[c] for c in moved), key=abs, default=0), moved,
                _reversals(outcome, common, ref_pos) if outcome.intervals else None, changes)


def _tau(common: Sequence[str], ref_pos: Mapping[str, int], pos: Mapping[str, int]
         ) -> float | None:
    """Kendall's τ-b of two orders of ``common`` (None under two models)."""
    if len(common) < 2:
        return None
    value = float(kendall_tau_b([ref_pos[c] for c in common], [pos[c] for c in common]))
    return None if math.isnan(value) else value


def kendall_tau_b(x: Sequence[int], y: Sequence[int]) -> np.float64:
    """``scipy.stats.kendalltau(x, y, variant="b").statistic``, bit for bit, for the short
    integer orders a what-if compares: the same pair counts and the same floating-point steps,
    by counting the pairs (a book's what-if compares some 150 orders of 20-odd models, and
    scipy's call, which also works out an exact p-value nobody reads, was most of that time).
    Ties are counted as scipy counts them; NaN where either order is all one tie."""
    size = len(x)
    dis = xtie = ytie = ntie = 0
    for i in range(size):
        for j in range(i + 1, size):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                ntie += 1
            if dx == 0:
                xtie += 1
            if dy == 0:
                ytie += 1
            if dx * dy < 0:
                dis += 1
    tot = (size * (size - 1)) // 2
    if xtie == tot or ytie == tot:
        return np.float64(np.nan)
    con_minus_dis = tot - xtie - ytie + ntie - 2 * dis
    tau = con_minus_dis / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return np.minimum(1., max(-1., tau))


def _reversals(outcome: Outcome, common: Sequence[str], ref_pos: Mapping[str, int]) -> int:
    t = outcome.table
    low, high = t["ci_low"], t["ci_high"]
    return sum(1 for a, b in itertools.combinations(common, 2)
               if ref_pos[a] < ref_pos[b] and pd.notna(low[b]) and pd.notna(high[a])
               and low[b] > high[a])


@dataclass(frozen=True)
class WhatIf:
    """Table 1 under every distinct choice the run allows, compared with the study's ranking."""

    space: Space
    reference: Choice
    """The run's own scoring (the study's, unless a profile setting changed it)."""
    study_ranking: list[str]
    """The ranking 08 reports (its metrics), against which every choice is compared."""
    outcomes: dict[Choice, Outcome]
    moves: dict[Choice, Move]
    level: float | None = None
    """The intervals' level (live), else None."""

    def outcome(self, choice: Choice) -> Outcome:
        return self.outcomes[choice.canonical()]

    def move(self, choice: Choice) -> Move:
        return self.moves[choice.canonical()]


class Scorer:
    """Table 1 under one choice at a time, each distinct computation once and compared with the
    study's ranking as it is asked for (an interactive panel asks for a few; :func:`compute`
    for all). :attr:`whatif` holds what has been computed so far."""

    def __init__(self, space: Space, data: PaperData | LiveData, reference: Choice,
                 study_ranking: Sequence[str], *, top_k: int = study.RANKING_TOP_K) -> None:
        self.data = data
        self.top_k = top_k
        self._cache = _LiveCache(data) if isinstance(data, LiveData) else None
        level = data.level if isinstance(data, LiveData) else None
        self.whatif = WhatIf(space, reference.canonical(), list(study_ranking), {}, {}, level)

    def __call__(self, choice: Choice) -> tuple[Outcome, Move]:
        """Table 1 under ``choice`` and how it moves the study's order."""
        canon = choice.canonical()
        w = self.whatif
        if canon not in w.outcomes:
            if self._cache is not None:
                outcome = live_outcome(self._cache, canon)
            else:
                assert isinstance(self.data, PaperData)
                outcome = paper_outcome(self.data, canon)
            w.outcomes[canon] = outcome
            w.moves[canon] = compare(outcome, w.study_ranking, top_k=self.top_k)
        return w.outcomes[canon], w.moves[canon]


def compute(space: Space, data: PaperData | LiveData, reference: Choice,
            study_ranking: Sequence[str], *, top_k: int = study.RANKING_TOP_K) -> WhatIf:
    """Every distinct choice of ``space`` scored from ``data`` and compared with
    ``study_ranking`` (in :meth:`Space.distinct`'s order)."""
    scorer = Scorer(space, data, reference, study_ranking, top_k=top_k)
    for choice in space.distinct():
        scorer(choice)
    return scorer.whatif


ROBUSTNESS_COLUMNS = ("whatif_judges", "whatif_combine", "subset", "whatif_later",
                      "whatif_refusals", "whatif_mean", "whatif_length", "kendall_tau",
                      "same_top", "largest_move", "moved", "supported_reversals")


def robustness(whatif: WhatIf) -> pd.DataFrame:
    """One row per distinct choice: the choice in machine terms (judges as ids joined by
    ``+``) and how it moves the study's order (:class:`Move`); the live columns only in a live
    run, ``later`` only where the data has later models."""
    space = whatif.space
    rows = []
    for choice, move in whatif.moves.items():
        row: dict[str, object] = {
            "whatif_judges": "+".join(choice.judges), "whatif_combine": choice.combine,
            "subset": choice.subset, "whatif_later": choice.later,
            "whatif_refusals": "excluded" if choice.refusals_excluded else "kept",
            "whatif_mean": "clipped" if choice.clipped else "unclipped",
            "whatif_length": "adjusted" if choice.length_adjusted else "raw",
            "kendall_tau": move.tau, "same_top": move.same_top,
            "largest_move": move.largest_move, "moved": "+".join(move.moved),
            "supported_reversals": move.reversals}
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(ROBUSTNESS_COLUMNS))
    drop = [] if space.has_later else ["whatif_later"]
    if not space.live:
        drop += ["whatif_refusals", "whatif_mean", "whatif_length", "supported_reversals"]
    return frame.drop(columns=drop)


@dataclass(frozen=True)
class Summary:
    """What the robustness finding says, in numbers."""

    n_choices: int
    n_models: int
    """Models in the study's ranking."""
    top_k: int
    same_top: int
    """Choices under which the top ``top_k`` are the study's top ``top_k``."""
    n_study_only: int
    """Choices that score the study's models only (no later model)."""
    same_top_study_only: int
    """Of those, the choices under which the top ``top_k`` are the same."""
    n_tau: int
    """Choices with a defined τ."""
    tau_min: float | None
    tau_min_choice: Choice | None
    tau_below: int
    """Choices whose τ is below ``study.TAU_SAME_ORDER``."""
    largest_move: int
    largest_moved: tuple[str, ...]
    largest_choice: Choice | None
    far: int
    """Choices that move some model by ``study.LARGE_RANK_MOVE`` places or more."""
    with_reversal: int | None
    """Choices whose intervals support at least one reversal (None: no intervals)."""


def summarise(whatif: WhatIf, *, tau_same: float = study.TAU_SAME_ORDER,
              far: int = study.LARGE_RANK_MOVE) -> Summary:
    """The counts behind the finding, over every distinct choice (the run's own included)."""
    moves = whatif.moves
    taus = {c: m.tau for c, m in moves.items() if m.tau is not None}
    low = min(taus, key=lambda c: (taus[c], _order(whatif, c)), default=None)
    study_only = [m for c, m in moves.items() if not c.later or not whatif.space.has_later]
    reversals = [m.reversals for m in moves.values()]
    largest, moved, where = _largest(whatif)
    return Summary(
        n_choices=len(moves), n_models=len(whatif.study_ranking), top_k=study.RANKING_TOP_K,
        same_top=sum(m.same_top for m in moves.values()), n_study_only=len(study_only),
        same_top_study_only=sum(m.same_top for m in study_only),
        n_tau=len(taus), tau_min=None if low is None else taus[low], tau_min_choice=low,
        tau_below=sum(t < tau_same for t in taus.values()),
        largest_move=largest, largest_moved=moved, largest_choice=where,
        far=sum(abs(m.largest_move) >= far for m in moves.values()),
        with_reversal=(None if any(r is None for r in reversals)
                       else sum(bool(r) for r in reversals)))


def _largest(whatif: WhatIf) -> tuple[int, tuple[str, ...], Choice | None]:
    """The largest move of any choice (the first choice that makes it), who makes it, and
    under which choice (None when no choice moves anybody)."""
    moves = whatif.moves
    if not moves:
        return 0, (), None
    big = max(moves, key=lambda c: (abs(moves[c].largest_move), -_order(whatif, c)))
    move = moves[big]
    return move.largest_move, move.moved, big if move.largest_move else None


def _order(whatif: WhatIf, choice: Choice) -> int:
    return list(whatif.moves).index(choice)


def reference_choice(space: Space, subset: str, include_later: bool) -> Choice:
    """The run's own scoring: its whole panel (mean), its primary subset, the later models as
    08 showed them (paper: ``scores.include_later``; live: every model it graded)."""
    later = include_later if space.has_later and not space.live else space.later_default
    return Choice(space.judges, "mean", subset, later)
