"""The run profile as the graph defines it: the top-level keys (``core.config.ProfileBase``)
and one section per stage whose node declares one (``Params`` beside its ``SPEC``, in
:mod:`hbpsych_utils.pipeline.nodes`), each defaulting to its model's defaults.

Every profile of the compendium is loaded through :func:`load_profile`, so a chapter added to
the graph has its section in every profile, checked like the others, without another file to
edit. The rest of the profile machinery (overrides, errors, paths) is
:mod:`hbpsych_utils.core.config`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import create_model

from hbpsych_utils.core.config import ProfileBase, Section, load_profile_as
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.nodes.s01_corpus import Params as CorpusParams
from hbpsych_utils.pipeline.nodes.s02_screening import Params as ScreeningParams
from hbpsych_utils.pipeline.nodes.s03_review_round1 import Params as ReviewParams
from hbpsych_utils.pipeline.nodes.s04_recall import Params as RecallParams
from hbpsych_utils.pipeline.nodes.s05_subset import Params as SubsetParams
from hbpsych_utils.pipeline.nodes.s06_generation import Params as GenerationParams
from hbpsych_utils.pipeline.nodes.s07_grading import Params as GradingParams
from hbpsych_utils.pipeline.nodes.s08_scores import Params as ScoresParams
from hbpsych_utils.pipeline.nodes.s09_judges import Params as JudgesParams
from hbpsych_utils.pipeline.nodes.s10_refusals import Params as RefusalsParams
from hbpsych_utils.pipeline.nodes.s11_harness_validation import (
    Params as HarnessValidationParams,
)
from hbpsych_utils.pipeline.nodes.s12_figures_tables import Params as FiguresTablesParams
from hbpsych_utils.pipeline.nodes.s14_analyses import Params as AnalysesParams
from hbpsych_utils.pipeline.nodes.s15_judge_accuracy import Params as JudgeAccuracyParams
from hbpsych_utils.pipeline.spec import StageSpec

__all__ = [
    "AnalysesParams", "CorpusParams", "FiguresTablesParams", "GenerationParams", "GradingParams",
    "HarnessValidationParams", "JudgeAccuracyParams", "JudgesParams", "Profile", "RecallParams",
    "RefusalsParams", "ReviewParams", "ScoresParams", "ScreeningParams", "SubsetParams",
    "load_profile", "sections",
]
"""The study's chapters' section models by their readers' names; a chapter added to the graph
has its model on its node (``nodes.sNN_name.Params``) and its section in every profile."""


def sections(specs: dict[str, StageSpec] | None = None) -> dict[str, type[Section]]:
    """Section key -> its model, for every stage of the graph that declares one, in run
    order."""
    found = specs if specs is not None else graph.SPECS
    return {s.section: s.params for s in found.values()
            if s.section is not None and s.params is not None}


def _assemble() -> type[ProfileBase]:
    fields: dict[str, Any] = {key: (model, model()) for key, model in sections().items()}
    return create_model("Profile", __base__=ProfileBase, __module__=__name__, **fields)


if TYPE_CHECKING:
    class Profile(ProfileBase):
        """What the type checker knows of a profile: the study's chapters' sections, typed (a
        test keeps them equal to the assembled model's). A section of a chapter not listed
        here is there at run time all the same, ``Any`` to the checker
        (``ProfileBase.__getattr__``)."""

        corpus: CorpusParams = CorpusParams()
        screening: ScreeningParams = ScreeningParams()
        review_round1: ReviewParams = ReviewParams()
        recall: RecallParams = RecallParams()
        subset: SubsetParams = SubsetParams()
        generation: GenerationParams = GenerationParams()
        grading: GradingParams = GradingParams()
        scores: ScoresParams = ScoresParams()
        judges: JudgesParams = JudgesParams()
        refusals: RefusalsParams = RefusalsParams()
        harness_validation: HarnessValidationParams = HarnessValidationParams()
        figures_tables: FiguresTablesParams = FiguresTablesParams()
        analyses: AnalysesParams = AnalysesParams()
        judge_accuracy: JudgeAccuracyParams = JudgeAccuracyParams()
else:
    Profile = _assemble()
    Profile.__doc__ = ("A validated run profile: the top-level keys and one section per stage "
                       "of the graph that has parameters.")


def load_profile(name_or_path: str | Path,
                 overrides: dict[str, object] | None = None) -> Profile:
    """Load and validate a profile by name (``smoke``) or by path to a YAML file, with
    ``overrides`` (dotted key -> value, ``core.config.parse_overrides``) applied before
    validation (``core.config.load_profile_as``)."""
    return load_profile_as(Profile, name_or_path, overrides)
