"""Every stage's ``metrics.json``, typed: one pydantic model per stage (two where its modes write
different things), used by the stage that writes it, its findings, the stages downstream, the
manifest, the book and the tests. There is no second schema of these files anywhere.

Each stage's models live in a module of this package named like its node
(:mod:`hbpsych_utils.pipeline.nodes`), with its :class:`~.model.StageMetrics` constant named like
the stage's constant of the graph (``s08_scores.SCORES``); this package re-exports the study's
and finds every module's constant, so a chapter added as a module here is known to
:func:`read`, the manifest and the book by its name without another file to edit.

The models describe the files as they are: the keys and values a stage wrote before it was
typed stay exactly the same. A key a mode does not write is left out of the file, not written
as ``null`` (:func:`dump` writes the fields that were set); a number that could not be
computed is ``null`` (``float | None``). Nested records (a Table 1 per subset, a bootstrap
interval, a sensitivity row) have their own models.

Read a stage's metrics with :func:`read` (the run folder and the stage's constant,
``read(run_dir, SCORES)``: typed as that stage's model) or, from a stage, with
``Stage.upstream_metrics(SCORES)``; either names the file and the field when one does not fit.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import overload

from pydantic import ValidationError

from hbpsych_utils.core import records
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.breakdowns import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.model import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.model import M, Metrics, MetricsError, StageMetrics
from hbpsych_utils.pipeline.metrics.s01_corpus import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s02_screening import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s03_review_round1 import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s04_recall import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s05_subset import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s06_generation import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s07_grading import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s08_scores import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s09_judges import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s10_refusals import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s11_harness_validation import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s12_figures_tables import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s14_analyses import *  # noqa: F403
from hbpsych_utils.pipeline.metrics.s15_judge_accuracy import *  # noqa: F403


def _stage_metrics() -> dict[str, StageMetrics[Metrics]]:
    """Every stage module's constant, by stage name, in run order."""
    found: dict[str, StageMetrics[Metrics]] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not (info.name[:1] == "s" and info.name[1:3].isdigit()):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, StageMetrics):
                found[value.stage] = value
    return {name: found[name] for name in graph.STAGES if name in found}


MODELS: dict[str, StageMetrics[Metrics]] = _stage_metrics()
"""Stage name -> the type of its ``metrics.json`` (13_explorer writes none), in run order: for
code that holds a stage's name, not its constant (the book, the manifest)."""


@overload
def parse(stage: StageMetrics[M], data: object, where: str = "metrics") -> M: ...
@overload
def parse(stage: str, data: object, where: str = "metrics") -> Metrics: ...
def parse(stage: StageMetrics[M] | str, data: object, where: str = "metrics") -> M | Metrics:
    """Validate a stage's metrics (a mapping, e.g. what its code computed) into its model."""
    typed = stage if isinstance(stage, StageMetrics) else MODELS[stage]
    try:
        return typed.validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise MetricsError(f"{where}: field {field}: {err['msg']} (got {err.get('input')!r:.80})"
                           ) from None


@overload
def read(run_dir: Path | str, stage: StageMetrics[M]) -> M: ...
@overload
def read(run_dir: Path | str, stage: str) -> Metrics: ...
def read(run_dir: Path | str, stage: StageMetrics[M] | str) -> M | Metrics:
    """A stage's ``metrics.json`` in a run folder, as its model: the stage's type with its
    constant (``read(run, SCORES)``), :class:`Metrics` with a name held in a variable."""
    typed = stage if isinstance(stage, StageMetrics) else MODELS[stage]
    path = Path(run_dir) / typed.stage / graph.METRICS
    return parse(typed, records.read_json(path, error=MetricsError), str(path))
