"""Chapter 13, the explorer: inside this run's grades, conversation by conversation.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`grades` (this
run's conversations, replies and verdicts; a paper-mode run has none), :func:`explorer` (the
interactive widget), :func:`example` (one conversation the judges dispute, as static HTML for an
executed copy), :func:`write` (the build record only: the stage computes no metrics) and
:func:`findings`.

Only a run that generated and graded (live mode) has responses and verdicts to browse; a run
that replays the released matrices (paper mode) does not, and then the chapter says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hbpsych_utils.construction import corpus
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import explorer as grade_explorer
from hbpsych_utils.reporting.display import Findings, Shown, unavailable
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.EXPLORER
NO_VERDICTS = ("This run has no per-conversation verdicts (paper mode): nothing to explore. "
               "Run the `smoke` profile, or a live profile, to browse grades.")


start = base.starter(STAGE, None)


@dataclass(frozen=True, repr=False)
class Grades(Shown):
    """This run's grades (``None`` in paper mode) and the conversations with at least one
    criterion on which the judges disagree."""

    data: grade_explorer.ExplorerData | None
    disputed: list[str] = field(default_factory=list)

    def _repr_markdown_(self) -> str:
        if self.data is None:
            return NO_VERDICTS
        d = self.data
        return (f"{len(d.ids)} conversation(s), {len(d.candidates)} candidate(s) and "
                f"{len(d.judges)} judge(s) ({', '.join(md_text(j) for j in d.judges)}); "
                f"{len(self.disputed)} "
                "conversation(s) with at least one criterion the judges disagree on.")


def grades(run: StageRun[Any]) -> Grades:
    """This run's conversations, replies and verdicts (``explorer.load_files``; the Psych-Hard
    filter from HealthBench-Hard's ids), read through the stage's declared inputs."""
    if run.mode != graph.LIVE:
        return Grades(None)
    stage = run.stage
    data = grade_explorer.load_files(
        stage.upstream(graph.CORPUS, graph.CORPUS_RECORD),
        stage.upstream(graph.GENERATION, graph.RESPONSES),
        stage.upstream(graph.GRADING, graph.VERDICTS),
        scores=stage.upstream_optional(graph.GRADING, graph.SCORES_TABLE),
        categories=stage.upstream_optional(graph.SUBSET, graph.CATEGORIES_V1),
        hard_ids=corpus.hard_ids(stage.fetch("harness_scores")), source=str(stage.root))
    return Grades(data, grade_explorer.filter_ids(data, disagreement=True))


def explorer(found: Grades) -> Any:
    """The ipywidgets explorer on the run's grades (interactive in JupyterLab)."""
    if found.data is None:
        return unavailable("The explorer needs this run's verdicts (live mode).")
    return grade_explorer.Explorer(found.data).widget


def example(found: Grades) -> Any:
    """The first disputed conversation as static HTML (what an executed copy shows)."""
    if found.data is None:
        return unavailable("No conversation to show: this run has no verdicts.")
    if not found.disputed:
        return unavailable("The judges agree on every criterion of this run, so there is no "
                           "disputed conversation to show.")
    from IPython.display import HTML

    return HTML(grade_explorer.conversation_html(found.data, found.disputed[0]))


def write(run: StageRun[Any]) -> Written:
    """The stage's build record (it computes no metrics and writes no table)."""
    return base.write(run, None)


def findings(found: Grades) -> Findings:
    """The chapter's sentences: how many conversations the judges dispute, or why there is
    nothing to explore."""
    if found.data is None:
        return Findings([NO_VERDICTS])
    return Findings([f"{len(found.disputed)} of {len(found.data.ids)} conversation(s) have at "
                     "least one criterion on which the judges disagree."])
