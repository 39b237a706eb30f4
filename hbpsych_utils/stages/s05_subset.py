"""Chapter 05, the HealthBench-Psych subset: derived from the votes, checked against the release.

``run`` reads round 1's votes and round 2's state (04's ``round2``): a tallied round 2 adds its
votes, a round 2 that was ``not_needed`` leaves the subset to round 1 alone, and any other
state is an error (the subset needs round 2's ratings first). It assembles the subset under
each versioned control policy (``subset.POLICIES``) and its HealthBench-Hard intersection,
writes them in the released layout with their index, draws the modal-category figure and,
when asked, compares each derived subset with the released file of the same key
(``study.SUBSET_ARTIFACTS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus, ratings, subset, tally
from hbpsych_utils.core.config import SubsetParams
from hbpsych_utils.reporting import figures
from hbpsych_utils.stages import base, s04_recall
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "05_subset"
TOP_CATEGORIES = 3
"""How many of the largest categories the findings name."""


def start(namespace: Mapping[str, Any]) -> StageRun[SubsetParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[SubsetParams]) -> StageResult:
    """Assemble, write and check the subsets; count and draw their categories."""
    params = run.params
    stage = run.stage
    round1 = ratings.read_votes(stage.upstream("03_review_round1", ratings.VOTES_FILE))
    state = s04_recall.read_round2_state(stage)
    if state == s04_recall.TALLIED:
        round2 = ratings.read_votes(stage.upstream(s04_recall.STAGE, ratings.VOTES_FILE))
    elif state == s04_recall.NOT_NEEDED:
        round2 = None  # round 1 met the stopping rule: no recall round
    else:
        raise RuntimeError(f"04_recall reports round 2 as {state!r}: the subset needs its "
                           "ratings (profile key recall.ratings_files) before it can be assembled")
    hard_ids = corpus.hard_ids(stage.fetch("harness_scores"))

    ids = {version: subset.assemble(round1, round2, policy)
           for version, policy in subset.POLICIES.items()}
    ids["hard"] = subset.hard_subset(ids["v1"], hard_ids)
    name = params.name
    records = {
        "v1": subset.subset_record(f"{name}-v1", ids["v1"], policy=vars(subset.POLICIES["v1"])),
        "v2": subset.subset_record(f"{name}-v2", ids["v2"], policy=vars(subset.POLICIES["v2"])),
        "hard": subset.subset_record(f"{name}-hard-v1", ids["hard"],
                                     parents=[f"{name}-v1", "HealthBench-Hard"]),
    }
    subset.write_all(stage, records)

    categories = subset.subset_categories(ids["v1"], round1, round2)
    counts = subset.category_counts(categories)
    fig = figures.category_distribution(counts, title=f"{name}-v1: modal reviewer category")

    comparisons = {}
    if params.compare_with_release:
        comparisons = {key: subset.compare_with_release(
            key, ids[key], subset.load_subset(stage.fetch(artifact)))
            for key, artifact in study.SUBSET_ARTIFACTS.items()}
    metrics = {
        "n_v1": len(ids["v1"]), "n_v2": len(ids["v2"]), "n_hard": len(ids["hard"]),
        "sha256_v1": records["v1"]["prompt_id_sha256"],
        "sha256_v2": records["v2"]["prompt_id_sha256"],
        "sha256_hard": records["hard"]["prompt_id_sha256"],
        **{f"matches_release_{k}": c.matches for k, c in comparisons.items()},
        "category_counts": counts,
        "n_no_category_majority": counts.get(tally.NO_CATEGORY_MAJORITY, 0),
    }
    views = {
        "subsets": pd.DataFrame({k: {"n": r["n"], "prompt_id_sha256": r["prompt_id_sha256"]}
                                 for k, r in records.items()}).T,
        "comparison": pd.DataFrame({k: {"n derived": c.n_derived, "n released": c.n_released,
                                        "ids match": c.ids_match, "hash match": c.hash_match}
                                    for k, c in comparisons.items()}).T,
    }
    result = StageResult(run, metrics, tables={"categories_v1.csv": categories.to_frame()},
                         figures={"category_distribution": fig}, views=views,
                         findings=findings(metrics))
    return result.write()


def findings(metrics: dict[str, Any]) -> list[str]:
    """What the subset holds and whether it is the released one, from 05's metrics.

    A subset "matches" the release when its derived ids and their hash both equal the released
    file's (``matches_release_<key>``); the sentence appears only when the comparison ran.
    """
    m = metrics
    out = [f"HealthBench-Psych v1 holds **{m['n_v1']}** conversations (v2: {m['n_v2']}); "
           f"**{m['n_hard']}** of them are HealthBench-Hard."]
    verdicts = [f"{k.removeprefix('matches_release_')}: "
                f"{'matches' if v else 'DIFFERS from'} the release"
                for k, v in m.items() if k.startswith("matches_release_")]
    if verdicts:
        out.append(f"Derived ids and hashes — {', '.join(verdicts)}.")
    top = list(m["category_counts"].items())[:TOP_CATEGORIES]
    out.append("Largest categories: " + ", ".join(f"{c} ({n})" for c, n in top)
               + f"; {m['n_no_category_majority']} conversations have no category majority.")
    return out
