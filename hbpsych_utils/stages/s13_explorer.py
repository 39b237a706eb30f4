"""13_explorer: the grade explorer on this run, when the run has per-conversation verdicts.

Only a run that generated and graded (live mode) has responses and verdicts to browse; a run
that replays the released matrices (paper mode) does not, and then the chapter says so. This
stage computes no metrics: its folder holds only the records of what it read and how it was
built, so it returns its own small result (views and findings) instead of a ``StageResult``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hbpsych_utils.construction import corpus
from hbpsych_utils.reporting import explorer
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun

STAGE = "13_explorer"


@dataclass
class ExplorerResult:
    """What the chapter shows: the explorer (``views``) and what it found (``findings``)."""

    data: explorer.ExplorerData | None
    """The run's grades, or None when the run has no per-conversation verdicts."""
    n_disputed: int = 0
    """Conversations with at least one criterion on which the judges disagree."""
    views: dict[str, Any] = field(default_factory=dict)
    """``explorer`` (the ipywidgets explorer) and ``example`` (one disputed conversation as
    static HTML, for an executed copy); empty when there is nothing to explore."""
    findings: list[str] = field(default_factory=list)

    def findings_markdown(self) -> str:
        return " ".join(self.findings)


def start(namespace: Mapping[str, Any]) -> StageRun[Any]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[Any]) -> ExplorerResult:
    """Open the explorer on this run's grades (Psych-Hard filter from HealthBench-Hard ids)."""
    if run.mode != "live":
        base.write(run, None)
        return ExplorerResult(None, findings=findings(None))
    from IPython.display import HTML

    data = explorer.load_run(run.stage.root,
                             hard_ids=corpus.hard_ids(run.stage.fetch("harness_scores")))
    disputed = explorer.filter_ids(data, disagreement=True)
    views: dict[str, Any] = {"explorer": explorer.Explorer(data).widget}
    if disputed:
        views["example"] = HTML(explorer.conversation_html(data, disputed[0]))
    summary = {"n_conversations": len(data.ids), "n_disputed": len(disputed)}
    base.write(run, None)
    return ExplorerResult(data, len(disputed), views, findings(summary))


def findings(summary: Mapping[str, int] | None) -> list[str]:
    """The chapter's sentences: how many conversations the judges dispute, or why there is
    nothing to explore (``summary`` is None when the run has no verdicts)."""
    if summary is None:
        return ["This run has no per-conversation verdicts (paper mode): nothing to explore. "
                "Run the `smoke` profile, or a live profile, to browse grades."]
    return [f"{summary['n_disputed']} of {summary['n_conversations']} conversation(s) have at "
            "least one criterion on which the judges disagree."]
