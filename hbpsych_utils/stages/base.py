"""What a chapter starts from (:class:`StageRun`) and how it leaves its outputs (:func:`write`).

A chapter's first call is ``sNN.start(globals())``: it takes the notebook's ``parameters`` cell
as the stage graph declares it (:func:`hbpsych_utils.pipeline.graph.parameter_names`), checks
every value with the stage's profile-section model (errors name the parameter), resolves the
mode and opens the stage's output folder. The parameters are written twice only: in the section
model and in the notebook's ``parameters`` cell (a test keeps the cell equal to the default
profile's values).

Outputs are written by the chapter's last call, ``sNN.write(...)``, through :func:`write`:
tables, figures, and ``metrics.json`` from the stage's typed metrics
(:mod:`hbpsych_utils.pipeline.metrics`), last. Under the runner they go to its staging folder,
which the runner swaps into place with its ``build.json``. A notebook run by hand (JupyterLab,
papermill) stages its outputs in ``outputs/<profile>/.hand/<stage>/`` and :func:`write` swaps
them into place with a ``build.json`` that says so, which marks the stage (and what depends on
it) not current until the runner runs it again; a hand run that fails before :func:`write`
leaves the runner's outputs untouched.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from hbpsych_utils import study
from hbpsych_utils.core import paths, yaml_loader
from hbpsych_utils.core.config import LLMSettings, Profile, Section
from hbpsych_utils.core.writes import write_text
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline.stage import HAND_DIR, Stage, publish_folder, staging_dir
from hbpsych_utils.reporting import vocabulary

if TYPE_CHECKING:
    from hbpsych_utils.construction.corpus import Conversation
    from hbpsych_utils.llm.engine import Engine

P = TypeVar("P", bound=Section)


FIGURE_CACHE = ".figure-cache"
"""Figures rendered by earlier runs of the profile, by the key of their inputs
(``reporting.figures.save``): a figure whose data did not change is copied, not rendered."""


class ParameterError(ValueError):
    """A notebook parameter that its stage cannot use; the message names it."""


@dataclass(frozen=True)
class StageRun(Generic[P]):
    """One chapter's run: its checked parameters, resolved mode and output folder."""

    name: str
    profile: str
    outputs_root: Path
    mode: str | None
    seed: int
    llm: LLMSettings
    params: P
    """The stage's profile section, validated (``None`` fields are resolved by the stage)."""
    stage: Stage
    by: str
    """``runner`` or ``hand``."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """The notebook parameters as given (what a hand build records)."""
    ci_level: float = study.CI_LEVEL
    """The level of the intervals the chapter computes and shows (the profile's
    ``ci_level``)."""

    @property
    def figure_cache(self) -> Path:
        """Where figures drawn by earlier runs of the profile are kept, by the key of their
        inputs (``reporting.figures``): a figure whose data did not change is not redrawn."""
        return self.stage.root / FIGURE_CACHE

    def value(self, parameter: str) -> Any:
        """A parameter taken from another section (06: ``judges``)."""
        return self.parameters.get(parameter)

    def open_engine(self, conversations: Sequence[Conversation] = ()
                    ) -> AbstractContextManager[Engine]:
        """The run's engine for a ``with`` block, its store in the run folder (shared by every
        stage of the run); ``conversations`` let simulator faults name a ``prompt_id``. The
        LLM package is imported here, by live stages only."""
        from hbpsych_utils.llm.session import open_engine

        turns = {c.prompt_id: next(m.content for m in c.prompt if m.role == "user")
                 for c in conversations}
        return open_engine(self.llm.model_dump(mode="json"), self.stage.root,
                           first_user_turns=turns, stage=self.name)


def _section_model(name: str) -> type[Section] | None:
    section = graph.spec(name).section
    if section is None:
        return None
    model = Profile.model_fields[section].annotation
    assert isinstance(model, type) and issubclass(model, Section)
    return model


_STRUCTURED = {"list_type": "list", "tuple_type": "list", "set_type": "list",
               "frozen_set_type": "list", "dict_type": "mapping", "model_type": "mapping",
               "model_attributes_type": "mapping"}
"""pydantic's error types for a value that should be a list or a mapping, and which it is."""


def _yaml_hint(parameter: str, given: object, error_type: str) -> str:
    """How to pass ``parameter`` when papermill's ``-p`` gave it as text where a list or a
    mapping is expected ("" otherwise): ``-y`` takes YAML. The example is the text given, as a
    list or mapping when it does not read as one."""
    kind = _STRUCTURED.get(error_type)
    if kind is None or not isinstance(given, str):
        return ""
    try:
        parsed = yaml_loader.load_text(given)
    except yaml_loader.YAMLFileError:
        parsed = None
    if isinstance(parsed, list | dict):
        example = given
    elif kind == "list":
        example = f"[{given}]"
    else:
        example = "{name: value}"
    option = shlex.quote(f"{parameter}: {example}")
    return (f" (papermill's -p passes text; pass a {kind} with -y, e.g. "
            f"papermill ... -y {option})")


def starter(name: str, params: type[P] | None) -> Callable[[Mapping[str, Any]], StageRun[P]]:
    """Stage ``name``'s ``start``: its run from the notebook's parameters cell (``globals()``),
    checked (:func:`start`); ``params`` is its section's model, for the type only."""

    def start_chapter(namespace: Mapping[str, Any]) -> StageRun[P]:
        return start(name, namespace)

    start_chapter.__doc__ = (f"Chapter {name}'s run from its parameters cell (``globals()``), "
                             "checked.")
    return start_chapter


def _problem(error: Any, within: str = "") -> str:
    """One line of a parameter error: the parameter, the value given, what is wrong, and how
    to pass a list or a mapping with papermill (``_yaml_hint``)."""
    loc = [within] if within else []
    loc += [str(x) for x in error["loc"]]
    if not loc:  # a check of the section as a whole
        return f"  - {error['msg']}"
    return (f"  - {'.'.join(loc)} = {error.get('input')!r}: {error['msg']}"
            + _yaml_hint(loc[0], error.get("input"), error["type"]))


def start(name: str, namespace: Mapping[str, Any]) -> StageRun[Any]:
    """The chapter's run from its notebook's parameters (``globals()``), checked.

    Parameters the namespace lacks take the section model's defaults (the run's, for
    ``profile``, ``seed`` and ``llm``); ``mode`` defaults to the stage's first mode. A relative
    ``outputs_root`` is taken from ``notebooks/`` (where a hand-run notebook's ``../outputs``
    points), whatever the working directory."""
    spec = graph.spec(name)
    given = {p: namespace[p] for p in graph.parameter_names(name) if p in namespace}
    mode = given.get("mode", spec.modes[0] if spec.modes else None)
    if spec.modes and mode not in spec.modes:
        raise ParameterError(f"notebook {name}: parameter mode = {mode!r} (expected one of: "
                             f"{', '.join(spec.modes)})")
    model = _section_model(name)
    params: Any = None
    if model is not None:
        fields = {f: given[f] for f in graph.section_fields(name) if f in given}
        if "mode" in model.model_fields:
            fields["mode"] = mode
        try:
            params = model.model_validate(fields)
        except ValidationError as exc:
            raise ParameterError("\n".join(
                [f"notebook {name}: invalid parameter(s):"]
                + [_problem(e) for e in exc.errors()])) from None
    try:
        llm = LLMSettings.model_validate(given.get("llm") or {})
    except ValidationError as exc:
        raise ParameterError("\n".join(
            [f"notebook {name}: invalid parameter llm:"]
            + [_problem(e, "llm") for e in exc.errors()])) from None
    outputs_root = Path(given.get("outputs_root", paths.outputs_root()))
    if not outputs_root.is_absolute():
        outputs_root = (paths.notebooks_dir() / outputs_root).resolve()
    profile = str(given.get("profile", "default"))
    # a plain name and a folder outside the sources, before anything below is removed
    paths.run_folder(outputs_root, profile)
    root = outputs_root / profile
    by = state.RUNNER if staging_dir(root, name) is not None else state.HAND
    write_dir = None
    if by == state.HAND:
        write_dir = root / HAND_DIR / name
        if write_dir.exists():
            shutil.rmtree(write_dir)  # an earlier hand run's unfinished attempt
    seed = given.get("seed", Profile.model_fields["seed"].default)
    level = given.get("ci_level", Profile.model_fields["ci_level"].default)
    if not isinstance(level, int | float) or isinstance(level, bool) or not 0 < level < 1:
        raise ParameterError(f"notebook {name}: parameter ci_level = {level!r} (expected a "
                             "number between 0 and 1, e.g. 0.95)")
    vocabulary.begin_chapter(vocabulary.Origin(name, vocabulary.stage_command(
        profile, name, options=_outputs_option(outputs_root))))
    return StageRun(name=name, profile=profile, outputs_root=outputs_root, mode=mode,
                    seed=int(seed), llm=llm, params=params,
                    stage=Stage(profile, name, outputs_root, write_dir=write_dir), by=by,
                    parameters=dict(given), ci_level=float(level))


def _outputs_option(outputs_root: Path) -> str:
    """`` --outputs DIR`` for a run outside the project's outputs folder ("" otherwise): what
    the chapter's command needs to re-make its outputs where they are."""
    if outputs_root.resolve() == paths.outputs_root().resolve():
        return ""
    return f" --outputs {shlex.quote(str(outputs_root))}"


@dataclass(frozen=True)
class Written:
    """What a chapter's ``write`` left in its stage folder (shown at the chapter's end)."""

    stage: str
    files: list[str]
    by: str

    def _repr_markdown_(self) -> str:
        where = ("swapped into place when the notebook succeeds" if self.by == state.RUNNER
                 else "written outside the runner: the book marks this chapter not current "
                      "until `run_all.sh` runs it again")
        if not self.files:
            return (f"`{self.stage}/` holds only the record of this build (the chapter writes "
                    f"no metrics or tables); {where}.")
        return (f"Wrote {len(self.files)} file{'s' if len(self.files) != 1 else ''} to "
                f"`{self.stage}/` ({', '.join(f'`{f}`' for f in self.files)}); {where}.")


def metrics_json(metrics: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """What ``metrics.json`` holds: a typed model's fields as set (none added by defaults)."""
    if isinstance(metrics, BaseModel):
        return metrics.model_dump(mode="json", exclude_unset=True)
    return dict(metrics)


def write(run: StageRun[Any], metrics: BaseModel | Mapping[str, Any] | None, *,
          tables: Mapping[str, Any] | None = None,
          figures: Mapping[str, Any] | None = None,
          texts: Mapping[str, str] | None = None) -> Written:
    """Write a stage's tables (CSV), text files (file name -> text, written as given: a
    Markdown or LaTeX table, a CSV with its own number format), figures (PNG and SVG) and
    ``metrics.json`` (last, so it marks a finished stage); a hand run's outputs are then
    swapped into place."""
    stage = run.stage
    files = []
    for filename, table in (tables or {}).items():
        stage.write_table(table, filename)
        files.append(filename)
    for filename, text in (texts or {}).items():
        write_text(stage.path(filename), text)
        files.append(filename)
    if figures:
        # matplotlib only for a stage that has figures (it is most of a stage's import time)
        from hbpsych_utils.reporting import figures as figure_files

        for stem, fig in figures.items():
            figure_files.save(fig, stage.path(stem), cache=run.figure_cache)
            files += [f"{stem}.png", f"{stem}.svg"]
    if metrics is not None:
        stage.write_metrics(metrics_json(metrics))
        files.append(graph.METRICS)
    if run.by == state.HAND:
        state.write_build(stage.dir, run.name, by=state.HAND, parameters=run.parameters)
        publish_folder(stage.dir, stage.root)
        if not any(stage.dir.parent.iterdir()):
            stage.dir.parent.rmdir()  # .hand/ holds nothing more
    return Written(run.name, files, run.by)


def run_chapter(name: str, parameters: Mapping[str, Any]) -> Any:
    """Run chapter ``name`` in this process as its notebook makes its calls: the notebook's code
    cells in order, ``parameters`` put over its parameters cell (as papermill injects them);
    returns the typed metrics it wrote (``None`` for a chapter that writes none). For scripts and
    tests: no kernel and no executed copy, and outside the runner its build record says it was
    written by hand. What a chapter shows is printed as text."""
    import nbformat

    from hbpsych_utils.pipeline import metrics as stage_metrics

    notebook = nbformat.read(str(state.notebook_path(name)), as_version=4)
    namespace: dict[str, Any] = {"__name__": f"chapter_{name}"}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        exec(compile(cell.source, f"{name}.ipynb", "exec"), namespace)
        if "parameters" in cell.metadata.get("tags", []):
            namespace.update(parameters)
    run = namespace["run"]
    if name not in stage_metrics.MODELS:
        return None
    return stage_metrics.read(run.stage.root, name)
