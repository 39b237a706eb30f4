"""Chapter 14's resolver: this run's graded replies on the subset, or nothing in a paper run
(said once, at the chapter's top)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, generation, panel, scoring
from hbpsych_utils.evaluation.score_sources import EvaluationMode, graded_judges, read_scores
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting.display import Note
from hbpsych_utils.reporting.vocabulary import panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun
from hbpsych_utils.stages.s14_analyses.files import STAGE


@dataclass(frozen=True)
class Graded:
    """Live: this run's graded replies on the subset."""

    subset: str
    judges: list[str]
    conversations: dict[str, Conversation]
    verdicts: pd.DataFrame
    """The first reply's verdicts (``panel.read_verdicts``), on the subset."""
    scores: pd.DataFrame
    """Every reply's score: judge, candidate, prompt_id, sample, score (NaN: unscored)."""
    categories: pd.Series
    """Modal clinician category by prompt id (05_subset)."""
    lengths: dict[tuple[str, str], int]
    """(candidate, prompt_id) -> the first reply's length in characters."""

    @property
    def samples(self) -> int:
        return int(self.scores["sample"].max()) + 1 if len(self.scores) else 1

    @property
    def first_scores(self) -> pd.DataFrame:
        first = self.scores[self.scores["sample"] == 0]
        return first[["judge", "candidate", "prompt_id", "score"]]

    @property
    def panel_mean(self) -> dict[str, float]:
        """The panel's clipped mean per candidate on the first reply (08's panel score)."""
        long = scoring.panel_scores_long(self.first_scores, self.judges)
        return {str(c): scoring.clipped_mean(g["score"]) for c, g in
                long.groupby("candidate", sort=True)}

    def view(self) -> Note:
        n_conv = self.verdicts["prompt_id"].nunique()
        n_cand = self.verdicts["candidate"].nunique()
        with_cat = len(breakdowns.category_tags(self.categories.loc[
            self.categories.index.isin(self.verdicts["prompt_id"])]))
        replies = ("one reply each (generation.samples = 1, as in the study; worst-at-k and "
                   "the spread across runs need at least 2)" if self.samples == 1
                   else f"{self.samples} replies each")
        title = study.SUBSET_TITLES.get(self.subset, self.subset)
        return Note(f"{count(n_conv, 'conversation')} of **{title}** graded in this run: "
                    f"{count(n_cand, 'candidate')}, {replies}, the "
                    f"{md_text(panel_phrase(self.judges))}; "
                    f"{with_cat:,} of the conversations have a modal clinician category.")


@dataclass(frozen=True)
class Inputs:
    """What the chapter analyses: this run's graded replies on the subset (``None`` when the
    run has none), and what it lacks."""

    mode: EvaluationMode
    graded: Graded | None
    lacking: base.Lacking | None = None
    """Paper: what the chapter needs (a live run) and what that adds."""
    empty: str = ""
    """Live: why there is nothing to analyse (no graded conversation of the subset)."""

    @property
    def sampled(self) -> Graded | None:
        """The graded replies when there are several per conversation (what worst-at-k and
        the spread across runs need), else ``None``."""
        return self.graded if self.graded is not None and self.graded.samples > 1 else None

    def view(self) -> Note | base.Lacking | Graded:
        if self.lacking is not None:
            return self.lacking
        return self.graded if self.graded is not None else Note(self.empty)


LACKING_WHY = ("the released matrices carry one clipped mean per candidate and judge, and no "
               "per-criterion grade, reply or second sample.")
LACKING_ADDS = ("A live run (the smoke or local profile, or a real one) adds scores by rubric "
                "axis, theme and modal clinician category, reply lengths and the "
                "length-adjusted score, and, with several replies per conversation, worst-at-k "
                "and the spread across runs.")


@base.resolver
def inputs(run: StageRun, *, subset: str) -> Inputs:
    """Live: 07's verdicts (first reply) and scores (every sample) on the subset's
    conversations, 01's rubrics, 05's modal categories and 06's reply lengths; paper: none of
    them (:data:`LACKING_WHY`)."""
    lacking = base.lacking(STAGE, run.mode, why=LACKING_WHY, adds=LACKING_ADDS)
    if run.mode != graph.LIVE:
        return Inputs(graph.PAPER, None, lacking)
    graded = _graded(run, subset)
    empty = (f"This run graded no conversation of subset {subset!r}, so there is nothing to "
             "analyse.")
    return Inputs(graph.LIVE, graded, empty=empty)


def _graded(run: StageRun, subset: str) -> Graded | None:
    """This run's graded replies on ``subset`` (``None``: it graded none of them)."""
    stage = run.stage
    ids = set(subset_files.stage_ids(stage, subset))
    verdicts = panel.read_verdicts(stage.upstream(graph.GRADING, graph.VERDICTS))
    verdicts = verdicts[verdicts["prompt_id"].isin(ids)].reset_index(drop=True)
    if verdicts.empty:
        return None
    by_id = {c.prompt_id: c for c in corpus.load_recorded(
        stage.upstream(graph.CORPUS, graph.CORPUS_RECORD)) if c.prompt_id in ids}
    more = stage.upstream_optional(graph.GRADING, graph.SCORE_SAMPLES)
    scores = generation.with_samples(read_scores(stage.upstream(graph.GRADING,
                                                                graph.SCORES_TABLE)),
                                     None if more is None else read_scores(more))
    if "sample" not in scores.columns:
        scores = scores.assign(sample=0)
    scores = scores[scores["prompt_id"].isin(ids)][
        ["judge", "candidate", "prompt_id", "sample", "score"]].reset_index(drop=True)
    replies = generation.read_responses(stage.upstream(graph.GENERATION, graph.RESPONSES))
    lengths = {(str(m), str(p)): int(c) for m, p, c in
               zip(replies["model"], replies["prompt_id"], replies["chars"], strict=True)
               if pd.notna(c)}
    categories = subset_files.read_categories(stage.upstream(graph.SUBSET, graph.CATEGORIES_V1))
    return Graded(subset, graded_judges(stage), by_id, verdicts, scores, categories, lengths)


