"""What every stage entry point takes (the run it belongs to) and returns (a ``StageResult``).

``ProfileRun`` is the part of a notebook's parameters that every stage shares: the profile's
name, the outputs root, the seed and the ``llm`` settings. A stage's own parameters are its
profile section (:mod:`hbpsych_utils.core.config`), validated by the same pydantic model, so a
notebook run by hand or with ``papermill -p`` is checked exactly like a profile.

``StageResult`` is what a chapter shows and what it leaves on disk: ``metrics`` (written as
``metrics.json``), ``tables`` (written as CSV under their file names), ``figures`` (written as
PNG and SVG under their stems), ``views`` (shown, not written: small summaries and HTML) and
``findings`` (the sentences of "What we found", each computed from the metrics by a tested
function of the stage). ``write`` puts metrics, tables and figures in the stage folder (under
the runner its staging folder, swapped into place when the notebook succeeds); the stage's
``stage.json`` (artifacts used, with sha256) is kept by :class:`Stage` as it fetches.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from hbpsych_utils import study
from hbpsych_utils.core.config import LLMSettings
from hbpsych_utils.core.stage import Stage

if TYPE_CHECKING:
    from hbpsych_utils.construction.corpus import Conversation
    from hbpsych_utils.llm.engine import Engine


class ProfileRun(BaseModel):
    """The run a stage belongs to: profile name, outputs root, seed and LLM settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str
    outputs_root: Path
    seed: int = study.SEED
    llm: LLMSettings = LLMSettings()

    def stage(self, name: str) -> Stage:
        """The output folder of stage ``name`` (``01_corpus`` ...) in this run."""
        return Stage(self.profile, name, self.outputs_root)

    def open_engine(self, stage: Stage, conversations: Sequence[Conversation] = ()
                    ) -> AbstractContextManager[Engine]:
        """The run's engine for a ``with`` block, its store in the run folder that ``stage``
        belongs to (shared by every stage of the run); ``conversations`` resolve the
        ``prompt_id`` of simulator faults. The LLM package is imported here, by live stages
        only, so a replay or paper run never loads it."""
        from hbpsych_utils.llm.session import open_engine

        return open_engine(self.llm.model_dump(mode="json"), stage.root,
                           conversations=conversations)


@dataclass
class StageResult:
    """A stage's metrics, tables, figures, views and findings, and where they are written."""

    stage: Stage
    metrics: dict[str, Any]
    tables: dict[str, Any] = field(default_factory=dict)
    """File name (``themes.csv``) -> DataFrame, written with ``Stage.write_table``."""
    figures: dict[str, Any] = field(default_factory=dict)
    """Stem (``category_distribution``) -> matplotlib Figure, written as PNG and SVG."""
    views: dict[str, Any] = field(default_factory=dict)
    """Name -> anything a chapter displays but no later stage reads (summaries, HTML)."""
    findings: list[str] = field(default_factory=list)
    """The sentences of "What we found", computed from ``metrics``."""

    def write(self) -> StageResult:
        """Write tables, figures and ``metrics.json`` (last, so it marks a finished stage)."""
        from hbpsych_utils.reporting import figures

        for name, table in self.tables.items():
            self.stage.write_table(table, name)
        for stem, fig in self.figures.items():
            figures.save(fig, self.stage.path(stem))
        self.stage.write_metrics(self.metrics)
        return self

    def findings_markdown(self) -> str:
        """The findings as one Markdown paragraph (what a chapter displays at its end)."""
        return " ".join(self.findings)
