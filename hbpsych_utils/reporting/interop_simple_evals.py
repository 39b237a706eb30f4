"""openai/simple-evals' HealthBench results, read for ``filter-results``.

``simple-evals``
    The ``<eval>_<model>_<YYYYmmdd_HHMMSS>[_DEBUG]_allresults.json`` that openai/simple-evals'
    ``simple_evals.py`` writes for ``--eval=healthbench`` (or ``_hard``/``_consensus``): one JSON
    object ``{score, metrics, htmls, convos, metadata}``. ``metadata.example_level_metadata``
    holds one entry per graded conversation; ``healthbench_eval.py`` puts the conversation's
    ``prompt_id`` and its unclipped ``score`` (met points / positive points) there, beside
    ``usage``, ``rubric_items``, ``prompt``, ``completion`` and ``completion_id``. The file does
    not name the model inside: it is taken from the file name (``--model`` overrides). An entry
    without ``prompt_id`` cannot be mapped to the subset and is an error. A run with
    ``--n-repeats`` > 1 lists each conversation more than once: also an error (one score each).
    simple-evals writes the file only after every example was generated and graded (a failure
    raises and writes nothing), so its run is complete unless the file's own count
    (``metrics["score:n_samples"]`` or ``overall_score:n_samples``) disagrees with its entries.

With ``--by-tag``, each entry's ``rubric_items`` (criterion, points, tags, ``criteria_met``) are
its per-criterion results (:func:`simple_evals_criteria`); the file records no example tags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from hbpsych_utils.reporting.interop_records import (
    GRADER,
    RUBRIC,
    ConversationScore,
    GradedRubric,
    InputRecord,
    RunStatus,
    Score,
    Text,
    load_json,
    rubric_items,
    validate,
)


class SimpleEvalsExample(InputRecord):
    """One entry of ``metadata.example_level_metadata``, as ``healthbench_eval.py`` writes it."""

    prompt_id: Text
    score: Score
    """Unclipped: met points / positive points."""

    missing_hints: ClassVar[Mapping[str, str]] = {
        "prompt_id": "this simple-evals output does not record which conversation each score "
        "belongs to, so it cannot be filtered to a subset; re-run with a healthbench_eval.py "
        "that stores prompt_id in example_level_metadata, or export the scores in the hbpsych "
        "layout",
    }


class SimpleEvalsMetadata(InputRecord):
    example_level_metadata: list[Any]
    """One :class:`SimpleEvalsExample` per graded conversation (validated one by one, so an
    error names its index)."""


class SimpleEvalsFile(InputRecord):
    """A simple-evals ``*_allresults.json``: ``{score, metrics, htmls, convos, metadata}``."""

    metadata: SimpleEvalsMetadata
    metrics: dict[str, Any] | None = None
    """The aggregate metrics; ``score:n_samples`` counts the graded examples."""

    missing_hints: ClassVar[Mapping[str, str]] = {
        name: "not a simple-evals HealthBench *_allresults.json"
        for name in ("metadata", "metadata.example_level_metadata")
    }


SIMPLE_EVALS_NAME = re.compile(
    r"^(?P<eval>healthbench(?:_hard|_consensus)?)_(?P<model>.+?)"
    r"_(?P<date>\d{8}_\d{4}(?:\d{2})?)(?:_DEBUG)?_allresults\.json$"
)


def simple_evals_model_name(path: Path | str) -> str:
    """Model name from simple-evals' ``<eval>_<model>_<date>[_DEBUG]_allresults.json`` name.

    Falls back to the file name without ``_allresults.json`` when it does not follow the pattern.
    """
    name = Path(path).name
    m = SIMPLE_EVALS_NAME.match(name)
    if m:
        return m.group("model")
    return re.sub(r"(_allresults)?\.json$", "", name)


def is_simple_evals(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("metadata"), dict)
        and "example_level_metadata" in data["metadata"]
    )


def read_simple_evals(
    path: Path | str, model: str | None = None, *, data: Any = None, criteria: bool = False
) -> list[ConversationScore]:
    """Per-conversation scores of a simple-evals HealthBench ``*_allresults.json`` (with
    ``criteria``, each entry's per-criterion results too: :func:`simple_evals_criteria`)."""
    return simple_evals_run(path, model, data, criteria)[0]


_SIMPLE_EVALS_COUNTS = ("score:n_samples", "overall_score:n_samples")
"""Where simple-evals records how many examples it graded (``_aggregate_get_clipped_mean``)."""


def simple_evals_run(path: Path | str, model: str | None, data: Any, criteria: bool = False
                     ) -> tuple[list[ConversationScore], RunStatus]:
    """The file's scores (:func:`read_simple_evals`) and how its run ended: complete unless
    the file's own count of graded examples disagrees with its entries."""
    path = Path(path)
    if data is None:
        data = load_json(path)
    doc = validate(SimpleEvalsFile, data, str(path))
    model = model or simple_evals_model_name(path)
    out = []
    for i, item in enumerate(doc.metadata.example_level_metadata):
        where = f"{path}: metadata.example_level_metadata[{i}]"
        ex = validate(SimpleEvalsExample, item, where)
        graded = simple_evals_criteria(item, where) if criteria else None
        out.append(ConversationScore(model, ex.prompt_id, ex.score, where, graded))
    counted = next((doc.metrics[k] for k in _SIMPLE_EVALS_COUNTS if k in (doc.metrics or {})),
                   None)
    expected = int(counted) if isinstance(counted, int | float) else None
    whole = expected is None or expected == len(out)
    error = None if whole else (f"its metrics count {expected} graded examples, its "
                                f"example_level_metadata holds {len(out)}")
    return out, RunStatus("complete" if whole else "incomplete", None, len(out), len(out), 0,
                          error)


def simple_evals_criteria(item: Any, where: str) -> GradedRubric | None:
    """The per-criterion results of one ``example_level_metadata`` entry: its ``rubric_items``
    (criterion, points, tags, ``criteria_met``, as ``healthbench_eval.py`` writes them);
    ``None`` when the entry has none. The file does not record example tags."""
    if not isinstance(item, dict) or item.get("rubric_items") is None:
        return None
    entries = validate(RUBRIC, item["rubric_items"], where, within=("rubric_items",))
    return GradedRubric(rubric_items(entries), {GRADER: tuple(e.verdict for e in entries)}, None)
