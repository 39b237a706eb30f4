"""What every stage's metrics model is made of: :class:`Metrics` (exactly the keys the file
holds), the aliases the models share, and :class:`StageMetrics` (a stage and the type of its
``metrics.json``, what :func:`hbpsych_utils.pipeline.metrics.read` takes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar, Union, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

if TYPE_CHECKING:
    from typing_extensions import TypeForm


class Metrics(BaseModel):
    """A stage's metrics (or a record inside them): exactly the keys the file holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)


M = TypeVar("M", bound=Metrics, covariant=True)


Counts = dict[str, int]
ByModel = dict[str, float]
Bound = float | None
"""An end of a bootstrap interval: ``None`` where the interval is undefined (one conversation:
``evaluation.scoring.percentile_interval``)."""
BoundsByModel = dict[str, float | None]
Undefined = dict[str, str] | None
"""Field -> why its value is undefined (``null``); written only when one is."""


class StageMetrics(Generic[M]):
    """A stage and the type of its ``metrics.json``: what :func:`read`, :func:`parse` and
    ``Stage.upstream_metrics`` take, so each returns that type (``read(run, SCORES).ranking``
    is a ``list[str]`` to the type checker too). One per stage, in its module of this package,
    named like the stage's constant in :mod:`~hbpsych_utils.pipeline.graph`."""

    def __init__(self, stage: str, *models: type[M]) -> None:
        self.stage = stage
        self.models = models
        """The stage's model, or one per mode (told apart by their ``mode``)."""
        shape: TypeForm[M] = models[0] if len(models) == 1 else cast(
            "TypeForm[M]", Annotated[Union[models], Field(discriminator="mode")])  # noqa: UP007
        self._adapter = TypeAdapter(shape)

    def validate(self, data: object) -> M:
        """``data`` as this stage's model (pydantic's error when it does not fit)."""
        return self._adapter.validate_python(data)

    def __repr__(self) -> str:
        return f"StageMetrics({self.stage!r})"


class MetricsError(ValueError):
    """A ``metrics.json`` that does not fit its stage's model; names the file and field."""


def dump(metrics: BaseModel) -> dict[str, Any]:
    """What ``metrics.json`` holds: the fields that were set, as JSON data."""
    return metrics.model_dump(mode="json", exclude_unset=True)
