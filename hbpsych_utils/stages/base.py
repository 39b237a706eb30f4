"""What a chapter starts from (:func:`start`), how it shows what it computes (:func:`show`), what
a step does without its data (:func:`needs`) and how a chapter leaves its outputs
(:func:`write`).

A chapter's first call names its parameters: ``run = scores.start(profile=profile,
outputs_root=outputs_root, mode=mode, seed=seed, ...)``, every parameter of its ``parameters``
cell by name (:func:`hbpsych_utils.pipeline.graph.parameter_names`; one missing or unknown is
an error). It checks each value with the stage's profile-section model (errors name the
parameter), records them, and opens the stage's output folder. The science calls that follow
take the values that change their result from the parameters cell as named arguments
(``scores.table1(sources, n_resamples=n_resamples, seed=seed, level=ci_level)``); ``run`` holds
only where the chapter reads and writes and how it reaches models.

What the run's data can produce is decided once per chapter, by its resolver (the function
marked :func:`resolver`), into typed inputs; what the run has not is ``None``, and the
resolver's result says once, at the chapter's top, what is missing and what a live run adds. A
step that needs it is marked :func:`needs`: given ``None`` it is not executed and returns
``None``, which :func:`show` shows as nothing (a marker the book drops, with its section), and
which metrics, outputs and findings receive as ``None``.

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

import functools
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Concatenate,
    Literal,
    ParamSpec,
    Protocol,
    TypeVar,
)

from pydantic import BaseModel, ValidationError, create_model

from hbpsych_utils.core import paths, yaml_loader
from hbpsych_utils.core.config import LLMSettings, Section
from hbpsych_utils.core.writes import write_text
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.pipeline.stage import HAND_DIR, Stage, publish_folder, staging_dir
from hbpsych_utils.reporting import display, vocabulary

if TYPE_CHECKING:
    from hbpsych_utils.construction.corpus import Conversation
    from hbpsych_utils.llm.engine import Engine

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])


FIGURE_CACHE = ".figure-cache"
"""Figures rendered by earlier runs of the profile, by the key of their inputs
(``reporting.figures.save``): a figure whose data did not change is copied, not rendered."""
TOP_LEVEL = ("seed", "ci_level", "n_resamples")
"""Parameters that are top-level keys of a profile (checked by the profile's own fields)."""


class ParameterError(ValueError):
    """A notebook parameter that its stage cannot use; the message names it."""


@dataclass(frozen=True)
class StageRun:
    """One chapter's run: where it reads and writes (its stage folder), its resolved mode, how
    it reaches models (``llm``) and the parameters it was started with. Never a knob of a
    statistic: those are passed to the science calls by name."""

    name: str
    profile: str
    outputs_root: Path
    mode: str | None
    llm: LLMSettings
    stage: Stage
    by: Literal["runner", "hand"]
    """``runner`` or ``hand``."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """The notebook parameters as given (what a hand build records)."""

    @property
    def figure_cache(self) -> Path:
        """Where figures drawn by earlier runs of the profile are kept, by the key of their
        inputs (``reporting.figures``): a figure whose data did not change is not redrawn."""
        return self.stage.root / FIGURE_CACHE

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


# --- starting a chapter ------------------------------------------------------------------------

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


def _problem(error: Any, within: str = "") -> str:
    """One line of a parameter error: the parameter, the value given, what is wrong, and how
    to pass a list or a mapping with papermill (``_yaml_hint``)."""
    loc = [within] if within else []
    loc += [str(x) for x in error["loc"]]
    if not loc:  # a check of the section as a whole
        return f"  - {error['msg']}"
    return (f"  - {'.'.join(loc)} = {error.get('input')!r}: {error['msg']}"
            + _yaml_hint(loc[0], error.get("input"), error["type"]))


def _checked(name: str, what: str, model: type[BaseModel], values: object,
             within: str = "") -> None:
    """``values`` validated strictly by ``model`` (what a chapter passes on is exactly what
    was checked), or a :class:`ParameterError` naming each bad parameter."""
    try:
        model.model_validate(values, strict=True)
    except ValidationError as exc:
        raise ParameterError("\n".join(
            [f"notebook {name}: invalid {what}:"]
            + [_problem(e, within) for e in exc.errors()])) from None


def _top_level_model(keys: Sequence[str]) -> type[BaseModel]:
    """The profile's own fields ``keys`` (``seed``, ``ci_level``, ``n_resamples``), with their
    constraints, required."""
    fields: dict[str, Any] = {
        key: (Annotated[Profile.model_fields[key].annotation,
                        *Profile.model_fields[key].metadata], ...) for key in keys}
    return create_model("TopLevel", **fields)


def _check_names(name: str, given: Mapping[str, Any]) -> None:
    expected = graph.parameter_names(name)
    missing = [p for p in expected if p not in given]
    unknown = [p for p in given if p not in expected]
    if missing or unknown:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(unknown)}"] if unknown else [])
        raise ParameterError(f"notebook {name}: {'; '.join(parts)} (its start takes every "
                             f"parameter of its parameters cell by name: "
                             f"{', '.join(expected)})")


def check_parameters(name: str, given: Mapping[str, Any]) -> LLMSettings:
    """Every parameter of chapter ``name`` given once, each value checked: the mode against
    the stage's modes, ``seed``, ``ci_level`` and ``n_resamples`` by the profile's fields, the
    ``llm`` settings, the section's fields by its model. Returns the ``llm`` settings."""
    _check_names(name, given)
    spec = graph.spec(name)
    if spec.modes and given["mode"] not in spec.modes:
        raise ParameterError(f"notebook {name}: parameter mode = {given['mode']!r} (expected "
                             f"one of: {', '.join(spec.modes)})")
    top = [k for k in TOP_LEVEL if k in given]
    if top:
        _checked(name, "parameter(s)", _top_level_model(top), {k: given[k] for k in top})
    model = _section_model(name)
    if model is not None:
        fields = {f: given[f] for f in graph.section_fields(name)}
        if "mode" in model.model_fields:
            fields["mode"] = given["mode"]
        _checked(name, "parameter(s)", model, fields)
    llm = given.get("llm") or {}
    _checked(name, "parameter llm", LLMSettings, llm, within="llm")
    return LLMSettings.model_validate(llm)


def start(name: str, parameters: Mapping[str, Any]) -> StageRun:
    """Chapter ``name``'s run from its parameters, every one by name, checked
    (:func:`check_parameters`). A relative ``outputs_root`` is taken from ``notebooks/``
    (where a hand-run notebook's ``../outputs`` points), whatever the working directory."""
    given = dict(parameters)
    llm = check_parameters(name, given)
    outputs_root = Path(given["outputs_root"])
    if not outputs_root.is_absolute():
        outputs_root = (paths.notebooks_dir() / outputs_root).resolve()
    profile = str(given["profile"])
    # a plain name and a folder outside the sources, before anything below is removed
    paths.run_folder(outputs_root, profile)
    root = outputs_root / profile
    by: Literal["runner", "hand"] = (state.RUNNER if staging_dir(root, name) is not None
                                     else state.HAND)
    write_dir = None
    if by == state.HAND:
        write_dir = root / HAND_DIR / name
        if write_dir.exists():
            shutil.rmtree(write_dir)  # an earlier hand run's unfinished attempt
    vocabulary.begin_chapter(vocabulary.Origin(name, vocabulary.stage_command(
        profile, name, options=_outputs_option(outputs_root))))
    return StageRun(name=name, profile=profile, outputs_root=outputs_root,
                    mode=given.get("mode"), llm=llm,
                    stage=Stage(profile, name, outputs_root, write_dir=write_dir), by=by,
                    parameters=given)


def starter(name: str) -> Callable[..., StageRun]:
    """Stage ``name``'s ``start``: its run from every parameter of its parameters cell, given
    by name (:func:`start`)."""

    def start_chapter(**parameters: Any) -> StageRun:
        return start(name, parameters)

    start_chapter.__doc__ = (f"Chapter {name}'s run from its parameters ("
                             f"{', '.join(graph.parameter_names(name))}), each by name, "
                             "checked.")
    return start_chapter


def _outputs_option(outputs_root: Path) -> str:
    """`` --outputs DIR`` for a run outside the project's outputs folder ("" otherwise): what
    the chapter's command needs to re-make its outputs where they are."""
    if outputs_root.resolve() == paths.outputs_root().resolve():
        return ""
    return f" --outputs {shlex.quote(str(outputs_root))}"


# --- what the run has, and what a step needs ---------------------------------------------------

def resolver(fn: F) -> F:
    """Marks a chapter's resolver: the one function of a stage module that turns what the run
    has under its mode into the chapter's typed inputs (``None`` for what it has not). No
    other function of a stage module reads the mode (``tests/test_stage_shape.py``)."""
    return fn


def needs(fn: Callable[Concatenate[T, P], R]) -> Callable[Concatenate[T | None, P], R | None]:
    """A step that needs what its first argument holds: without it (``None``: the run has not
    got it, as the chapter's resolver said once at its top; or a result whose ``empty`` is
    true: it holds nothing, as its own view says) the step is not executed and returns
    ``None``, which :func:`show` shows as nothing and metrics, outputs and findings receive as
    ``None``."""

    @functools.wraps(fn)
    def step(data: T | None, /, *args: P.args, **kwargs: P.kwargs) -> R | None:
        if data is None or getattr(data, "empty", False) is True:
            return None
        return fn(data, *args, **kwargs)

    return step


@dataclass(frozen=True)
class Lacking:
    """What a chapter cannot show in this run, said once at its top: what it needs
    (``graph.needs``: "a live run"), why the run has not got it, and what it adds."""

    needs: str
    why: str
    adds: str

    def view(self) -> display.Note:
        return display.Note(f"**This chapter needs {self.needs}**: {self.why} {self.adds}")


def lacking(name: str, mode: str | None, *, why: str, adds: str) -> Lacking | None:
    """Chapter ``name``'s :class:`Lacking` under ``mode`` when the graph says the mode leaves
    it nothing to show (``graph.needs``), else ``None``."""
    need = graph.needs(name, mode)
    return None if need is None else Lacking(need, why, adds)


class Viewed(Protocol):
    """A step's typed result: it says which vocabulary item shows it."""

    def view(self) -> object: ...


def shown(result: object) -> object:
    """What a chapter displays for ``result``: its view (a table, tables, facts, a figure, a
    sentence), the result itself when it displays as it is, the marker for ``None``."""
    if result is None:
        return display.NotInRun()
    view = getattr(result, "view", None)
    return shown(view()) if callable(view) else result


def show(*results: object) -> None:
    """Display each result of a chapter's calls (:func:`shown`); outside a kernel (scripts,
    tests) print its text."""
    from IPython.display import display as ipython_display

    ipython_display(*(shown(r) for r in results))


# --- writing the outputs -----------------------------------------------------------------------

@dataclass(frozen=True)
class Written:
    """What a chapter's ``write`` left in its stage folder (shown at the chapter's end)."""

    stage: str
    files: list[str]
    by: Literal["runner", "hand"]

    def view(self) -> display.Note:
        where = ("swapped into place when the notebook succeeds" if self.by == state.RUNNER
                 else "written outside the runner: the book marks this chapter not current "
                      "until `run_all.sh` runs it again")
        if not self.files:
            return display.Note(f"`{self.stage}/` holds only the record of this build (the "
                                f"chapter writes no metrics or tables); {where}.")
        return display.Note(
            f"Wrote {len(self.files)} file{'s' if len(self.files) != 1 else ''} to "
            f"`{self.stage}/` ({', '.join(f'`{f}`' for f in self.files)}); {where}.")


def metrics_json(metrics: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """What ``metrics.json`` holds: a typed model's fields as set (none added by defaults)."""
    if isinstance(metrics, BaseModel):
        return metrics.model_dump(mode="json", exclude_unset=True)
    return dict(metrics)


def write(run: StageRun, metrics: BaseModel | Mapping[str, Any] | None, *,
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
