"""Chapter 05, the HealthBench-Psych subset: derived from the votes, checked against the release.

The chapter's calls, in order: :func:`start` (its parameters, checked); :func:`votes` (round
1's votes and round 2's state, 04's ``round2``: a tallied round 2 adds its votes, a round 2 that
was ``not_needed`` leaves the subset to round 1 alone, and any other state is an error, since
the subset needs round 2's ratings first); :func:`assemble` (the subset under each versioned
control policy, ``subset.POLICIES``, and its HealthBench-Hard intersection);
:func:`categories` (each conversation's modal reviewer category) and
:func:`category_figure`; :func:`compare_with_release` (each derived subset against the released
file of the same key, ``study.SUBSET_ARTIFACTS``, when asked); :func:`metrics`, :func:`write`
(the subsets in the released layout with their index, which later stages read; the categories;
the figure; ``metrics.json``) and :func:`findings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus, ratings, review_round, subset, tally
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import SubsetMetrics
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.SUBSET
TOP_CATEGORIES = 3
"""How many of the largest categories the findings name."""
FIGURE = "category_distribution"


start = base.starter(STAGE)


@dataclass(frozen=True)
class Votes:
    """The two rounds' votes tables (round 2's is ``None`` when no recall round was needed)."""

    round1: pd.DataFrame
    round2: pd.DataFrame | None

    def view(self) -> Note:
        first = f"Round 1's votes on {len(self.round1):,} conversations"
        if self.round2 is None:
            return Note(f"{first}; round 1 met the stopping rule and 04 ran no recall round "
                        "(`round2: not_needed`), so the subset is round 1's alone.")
        return Note(f"{first} and round 2's on {len(self.round2):,}.")


def votes(run: StageRun) -> Votes:
    """Round 1's votes, and round 2's when 04 tallied it; an error while round 2 awaits its
    ratings (or round 1's)."""
    stage = run.stage
    round1 = ratings.read_votes(stage.upstream(graph.REVIEW_ROUND1, graph.VOTES))
    state = review_round.read_round2_state(stage)
    if state == review_round.TALLIED:
        return Votes(round1, ratings.read_votes(stage.upstream(graph.RECALL, graph.VOTES)))
    if state == review_round.NOT_NEEDED:
        return Votes(round1, None)
    raise RuntimeError(f"{graph.RECALL} reports round 2 as {state!r}: the subset needs its "
                       "ratings (profile key recall.ratings_files) before it can be assembled")


@dataclass(frozen=True)
class Subsets:
    """Each subset's ids and its file content in the released layout (key: v1, v2, hard)."""

    ids: dict[str, list[str]]
    records: dict[str, dict[str, Any]]

    def view(self) -> Table:
        table = pd.DataFrame([{"subset": k, "n": r["n"],
                               "prompt_id_sha256": r["prompt_id_sha256"]}
                              for k, r in self.records.items()]).set_index("subset")
        return Table(table, caption="The subsets, with their content hashes "
                     "(sha256 of the sorted ids; the whole hash on hover)")


def assemble(run: StageRun, votes: Votes, *, name: str) -> Subsets:
    """The subset under each control policy (v1, v2) from the majority-included items, and
    Psych-Hard: v1's conversations among the HealthBench-Hard ids; named after ``name``."""
    hard_ids = corpus.hard_ids(run.stage.fetch("harness_scores"))
    ids = {version: subset.assemble(votes.round1, votes.round2, policy)
           for version, policy in subset.POLICIES.items()}
    ids["hard"] = subset.hard_subset(ids["v1"], hard_ids)
    records = {
        "v1": subset.subset_record(f"{name}-v1", ids["v1"], policy=vars(subset.POLICIES["v1"])),
        "v2": subset.subset_record(f"{name}-v2", ids["v2"], policy=vars(subset.POLICIES["v2"])),
        "hard": subset.subset_record(f"{name}-hard-v1", ids["hard"],
                                     parents=[f"{name}-v1", "HealthBench-Hard"]),
    }
    return Subsets(ids, records)


@dataclass(frozen=True)
class Categories:
    """The modal reviewer category of each v1 conversation, and the count per category."""

    by_conversation: pd.Series
    counts: dict[str, int]
    """Largest first, "no category majority" last (``subset.category_counts``)."""

    def view(self) -> Table:
        table = pd.Series(self.counts, name="conversations").rename_axis("category").to_frame()
        return Table(table, caption="v1 conversations by modal reviewer category")


def categories(votes: Votes, subsets: Subsets) -> Categories:
    """Each v1 conversation's category: the modal one among the reviewers who voted ``Y``, if
    at least two agree (round-2 items use their round-2 votes)."""
    by_conversation = subset.subset_categories(subsets.ids["v1"], votes.round1, votes.round2)
    return Categories(by_conversation, subset.category_counts(by_conversation))


def subset_title(name: str, key: str) -> str:
    """A subset as readers name it: the study's title for its own subsets
    (``study.SUBSET_TITLES``), else the profile's name and the key ("toy-derm v1")."""
    if name == study.SUBSET_NAME:
        return study.SUBSET_TITLES[key]
    return f"{name} {key}"


def category_figure(categories: Categories, *, name: str, cache: Path) -> figures.Captioned:
    """The categories of v1 as bars, largest first, "no category majority" greyed at the end
    (the subset named after ``name``; ``cache`` keeps figures drawn before)."""
    title = subset_title(name, "v1")
    fig = figures.category_distribution(
        categories.counts, title=f"{title}: modal reviewer category", cache=cache)
    total = sum(categories.counts.values())
    return figures.Captioned(fig, f"{title} by modal reviewer category", (
        f"The {total:,} conversations of {title} by the category most of the reviewers who "
        "included them chose, largest first; those without a category majority in grey."))


@dataclass(frozen=True)
class Comparison:
    """Each derived subset against the released file of the same key (none when the profile
    turns the comparison off)."""

    by_subset: dict[str, subset.ReleaseComparison]

    def view(self) -> Table | Note:
        if not self.by_subset:
            return Note("No comparison with the released subsets: the profile turns it off "
                        "(`compare_with_release` is false).")
        table = pd.DataFrame([{"subset": k, "n_derived": c.n_derived,
                               "n_released": c.n_released, "ids_match": c.ids_match,
                               "hash_match": c.hash_match}
                              for k, c in self.by_subset.items()]).set_index("subset")
        return Table(table, caption="Derived subsets against the released files")


def compare_with_release(run: StageRun, subsets: Subsets, *, compare: bool) -> Comparison:
    """Ids and hash of each derived subset against the released one (``subset_v1``, ...),
    when ``compare`` (the profile's ``compare_with_release``)."""
    if not compare:
        return Comparison({})
    return Comparison({key: subset.compare_with_release(
        key, subsets.ids[key], subset.load_subset(run.stage.fetch(artifact)))
        for key, artifact in study.SUBSET_ARTIFACTS.items()})


def metrics(subsets: Subsets, categories: Categories, comparison: Comparison) -> SubsetMetrics:
    """05's metrics: sizes and hashes, the release check where it ran, the categories."""
    matches = {f"matches_release_{k}": c.matches for k, c in comparison.by_subset.items()}
    records = subsets.records
    return SubsetMetrics(
        n_v1=len(subsets.ids["v1"]), n_v2=len(subsets.ids["v2"]),
        n_hard=len(subsets.ids["hard"]),
        sha256_v1=records["v1"]["prompt_id_sha256"],
        sha256_v2=records["v2"]["prompt_id_sha256"],
        sha256_hard=records["hard"]["prompt_id_sha256"],
        **matches,
        category_counts=categories.counts,
        n_no_category_majority=categories.counts.get(tally.NO_CATEGORY_MAJORITY, 0),
    )


def write(run: StageRun, m: SubsetMetrics, subsets: Subsets,
          categories: Categories, figure: figures.Captioned) -> Written:
    """Each subset as ``<name>.json`` with the index later stages read, the categories, the
    figure and ``metrics.json``."""
    index = subset.write_all(run.stage, subsets.records)
    written = base.write(run, m,
                         tables={graph.CATEGORIES_V1: categories.by_conversation.to_frame()},
                         figures={FIGURE: figure.figure})
    return replace(written, files=[*index.values(), graph.SUBSET_INDEX, *written.files])


def findings(m: SubsetMetrics) -> Findings:
    """What the subset holds and whether it is the released one, from 05's metrics.

    A subset "matches" the release when its derived ids and their hash both equal the released
    file's (``matches_release_<key>``); the sentence appears only when the comparison ran.
    """
    out = [f"HealthBench-Psych v1 holds **{m.n_v1}** conversations (v2: {m.n_v2}); "
           f"**{m.n_hard}** of them are HealthBench-Hard."]
    verdicts = [f"{study.SUBSET_TITLES.get(k, k)} {'matches' if v else 'DIFFERS from'} the "
                "release" for k, v in m.matches().items()]
    if verdicts:
        out.append(f"Derived ids and hashes — {', '.join(verdicts)}.")
    top = list(m.category_counts.items())[:TOP_CATEGORIES]
    out.append("Largest categories: " + ", ".join(f"{md_text(study.category_label(c))} ({n})"
                                                  for c, n in top)
               + f"; {m.n_no_category_majority} conversations have no category majority.")
    return Findings(out)
