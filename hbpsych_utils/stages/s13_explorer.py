"""Chapter 13, the explorer: inside this run's grades, conversation by conversation.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`grades` (the
resolver: this run's conversations, replies and verdicts; a paper-mode run has none, and the
chapter says so once), :func:`explorer` (the interactive widget), :func:`example` (one
conversation the judges dispute, as static HTML for an executed copy), :func:`write` (the build
record only: the stage computes no metrics) and :func:`findings`.

Only a run that generated and graded (live mode) has responses and verdicts to browse; a run
that replays the released matrices (paper mode) does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import explorer as grade_explorer
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.EXPLORER
start = base.starter(STAGE)

LACKING_WHY = "this run has no per-conversation replies or verdicts to browse (paper mode)."
LACKING_ADDS = ("A run that grades adds the explorer: run a profile that grades (`bash "
                "run_all.sh smoke`), open this notebook in JupyterLab (`jupyter lab "
                "notebooks/13_explorer.ipynb`), set `profile = \"smoke\"` in its parameters "
                "cell and run all cells.")


@dataclass(frozen=True)
class Grades:
    """This run's grades and the conversations with at least one criterion on which the judges
    disagree."""

    data: grade_explorer.ExplorerData
    disputed: list[str] = field(default_factory=list)

    def view(self) -> Note:
        d = self.data
        return Note(f"{count(len(d.ids), 'conversation')}, "
                    f"{count(len(d.candidates), 'candidate')} and {count(len(d.judges), 'judge')} "
                    f"({', '.join(md_text(study.display_name(j)) for j in d.judges)}); "
                    f"{count(len(self.disputed), 'conversation')} with at least one criterion "
                    "the judges disagree on.")


@dataclass(frozen=True)
class Inputs:
    """This run's grades (``None`` in paper mode) and what the chapter lacks without them."""

    grades: Grades | None
    lacking: base.Lacking | None = None

    def view(self) -> Grades | base.Lacking | None:
        return self.lacking if self.lacking is not None else self.grades


@base.resolver
def grades(run: StageRun) -> Inputs:
    """This run's conversations, replies and verdicts (``explorer.load_files``; the Psych-Hard
    filter from HealthBench-Hard's ids), read through the stage's declared inputs; paper mode
    has none (:data:`LACKING_WHY`)."""
    if run.mode != graph.LIVE:
        return Inputs(None, base.lacking(STAGE, run.mode, why=LACKING_WHY, adds=LACKING_ADDS))
    stage = run.stage
    data = grade_explorer.load_files(
        stage.upstream(graph.CORPUS, graph.CORPUS_RECORD),
        stage.upstream(graph.GENERATION, graph.RESPONSES),
        stage.upstream(graph.GRADING, graph.VERDICTS),
        scores=stage.upstream_optional(graph.GRADING, graph.SCORES_TABLE),
        categories=stage.upstream_optional(graph.SUBSET, graph.CATEGORIES_V1),
        hard_ids=corpus.hard_ids(stage.fetch("harness_scores")), source=str(stage.root))
    return Inputs(Grades(data, grade_explorer.filter_ids(data, disagreement=True)))


@base.needs
def explorer(found: Grades) -> Any:
    """The ipywidgets explorer on the run's grades (interactive in JupyterLab)."""
    return grade_explorer.Explorer(found.data).widget


@base.needs
def example(found: Grades) -> Any:
    """The first disputed conversation as static HTML (what an executed copy shows)."""
    if not found.disputed:
        return Note("The judges agree on every criterion of this run, so there is no disputed "
                    "conversation to show.")
    from IPython.display import HTML

    return HTML(grade_explorer.conversation_html(found.data, found.disputed[0]))


def write(run: StageRun) -> Written:
    """The stage's build record (it computes no metrics and writes no table)."""
    return base.write(run, None)


def findings(found: Grades | None) -> Findings | None:
    """The chapter's sentences: how many conversations the judges dispute; ``None`` without
    grades (the chapter said so at its top)."""
    if found is None:
        return None
    n = len(found.data.ids)
    return Findings([f"{len(found.disputed):,} of {count(n, 'conversation')} "
                     f"{'has' if len(found.disputed) == 1 else 'have'} at least one criterion "
                     "on which the judges disagree."])
