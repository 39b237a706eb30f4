"""Shared fixtures: the offline mirror, isolated artifact caches, and the default and smoke runs
the notebook tests read (run once per session), with the helpers that read what they wrote;
a throw-away project for runner tests; the engine settings the LLM tests share.

Plain helpers and constants are imported by name (``from conftest import released_jsonl``)."""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import without_inspect
from shared_runs import run_once

from hbpsych_utils import study
from hbpsych_utils.__main__ import without_exit_collections, without_iri_grammar
from hbpsych_utils.core import paths
from hbpsych_utils.llm import load_registry

# No test process imports jsonschema's IRI grammar, as no `run` or `book` process does
# (rfc3987-syntax builds its Lark grammar at import, 1.2 s of every worker that imports nbformat
# or validates a payload). No schema validated here has an ``iri`` format: test_publish.py
# checks that every format of the publication schema has its checker without it.
without_iri_grammar()
# Nor does a test process walk all its objects once more as it exits (a second or more of CPU
# per worker at the end of every session), as no `run` process or chapter kernel does.
without_exit_collections()
# Garbage collections far apart: a test process keeps some 600,000 objects alive (the package,
# pandas, matplotlib, Sphinx), which Python's default thresholds walk over and over in full
# collections: the fast tier took 7% more CPU with them (50.4-51.2 s against 46.6-47.5 s).
gc.set_threshold(50_000, 20, 20)

pytest_plugins = ["slow_guard", "xdist_groups", "pytester"]
"""A test that starts a kernel, a subprocess or a server fails unless marked slow; under xdist,
the tests that share a module's fixture run on one worker."""

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MIRROR = ROOT.parent / "shared" / "mirror"


def mirror_path() -> Path | None:
    env = os.environ.get("HBPSYCH_MIRROR")
    if env:
        return Path(env)
    return DEFAULT_MIRROR if DEFAULT_MIRROR.is_dir() else None


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The offline mirror of the external artifacts (tests that need real data use it)."""
    path = mirror_path()
    if path is None or not path.is_dir():
        pytest.skip("no offline mirror: set HBPSYCH_MIRROR to run tests on the released data")
    return path


@pytest.fixture(autouse=True)
def _use_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees the mirror through HBPSYCH_MIRROR, as CI does, unless it unsets it."""
    path = mirror_path()
    if path is not None:
        monkeypatch.setenv("HBPSYCH_MIRROR", str(path))


@pytest.fixture(autouse=True)
def _no_chapter_after_a_test() -> Iterator[None]:
    """A chapter's ``start`` says, for the whole process, which chapter its tables come from (a
    kernel runs one chapter); a test that runs a chapter in this process must not leave that
    said for the tests that follow it on the same worker."""
    yield
    vocabulary = sys.modules.get("hbpsych_utils.reporting.vocabulary")
    if vocabulary is not None:
        vocabulary.begin_chapter(None)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty artifact cache, so a test sees fetch() do its work from scratch."""
    cache = tmp_path / "external"
    monkeypatch.setenv("HBPSYCH_DATA_DIR", str(cache))
    return cache


@contextmanager
def _environ(**values: str):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# Fake keys shaped like real ones, assembled at run time so no key-shaped string is committed.
FAKE_KEYS = {
    "OPENAI_API_KEY": "-".join(["sk", "proj", "SMOKEFAKEKEY0123456789abcdefghijkl"]),
    "ANTHROPIC_API_KEY": "-".join(["sk", "ant", "SMOKEFAKEKEY0123456789abcdefghijkl"]),
}


@pytest.fixture(scope="session")
def default_run(tmp_path_factory: pytest.TempPathFactory, mirror: Path) -> Path:
    """The default profile, every notebook, run once for all the notebook tests that read it
    (once for all xdist workers too).

    Figures it publishes go to a temp folder, not the checkout's figures/."""
    from hbpsych_utils import runner

    def build(out: Path) -> Path:
        with _environ(HBPSYCH_MIRROR=str(mirror), HBPSYCH_FIGURES=str(out / "published")):
            result = runner.run_profile("default", outputs_root=out, echo=print)
        assert result.ok, result.notebooks
        return out / "default"

    return run_once(tmp_path_factory, "default", build)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, mirror: Path) -> Path:
    """The smoke profile, every notebook, run once (for all xdist workers) with fake API keys in
    the environment, by the command line in a child Python that cannot import Inspect
    (``without_inspect``: what test_without_inspect.py asserts of it, from the record of the
    command written beside the run folder)."""

    def build(out: Path) -> Path:
        args = ["-m", "hbpsych_utils", "run", "smoke", "--outputs", str(out)]
        with _environ(HBPSYCH_MIRROR=str(mirror), **FAKE_KEYS):
            proc = without_inspect.run(out, *args, timeout=900)
        output = proc.stdout[-3000:] + proc.stderr[-3000:]
        print(output)
        (out / without_inspect.BUILT).write_text(json.dumps({
            "args": args, "returncode": proc.returncode, "blocker": without_inspect.BLOCKER,
            "output": output}), encoding="utf-8")
        assert proc.returncode == 0, output
        return out / "smoke"

    return run_once(tmp_path_factory, "smoke", build)


HARD_RUN_LINES = "hard-run-lines.json"
"""Beside :func:`hard_run`'s run folder (in its outputs root): the lines its runner echoed."""


@pytest.fixture(scope="session")
def hard_run(tmp_path_factory: pytest.TempPathFactory, default_run: Path, mirror: Path) -> Path:
    """A copy of the default run tweaked with ``--set judges.subset=hard``: the runner re-runs
    what the value feeds (09, 12) in the copy and re-renders its book (once for all workers).
    What the runner said is kept beside the run folder (:data:`HARD_RUN_LINES`)."""
    from hbpsych_utils import runner

    def build(out: Path) -> Path:
        shutil.copytree(default_run, out / "default",
                        ignore=shutil.ignore_patterns(".book-build", "book"))
        lines: list[str] = []
        with _environ(HBPSYCH_MIRROR=str(mirror), HBPSYCH_FIGURES=str(out / "published")):
            result = runner.run_profile("default", outputs_root=out,
                                        overrides={"judges.subset": "hard"}, echo=lines.append)
        print("\n".join(lines))
        (out / HARD_RUN_LINES).write_text(json.dumps(lines), encoding="utf-8")
        assert result.ok, result.notebooks
        return out / "default"

    return run_once(tmp_path_factory, "hard", build)


TWO_JUDGES = [study.JUDGE_PANEL[0], study.JUDGE_PANEL[2]]
"""The two-judge panel of :func:`two_judge_smoke` (GPT-4.1 and Gemini 2.5 Flash): the panel's
first and third judges, so that a chapter which took the first two of the study's panel instead
of the run's judges would show it."""
TWO_JUDGE_SETTINGS = {"grading.judges": TWO_JUDGES, "ci_level": 0.9, "grading.temperature": 0.3,
                      "generation.samples": 3}
"""A smoke run tweaked in its panel, its interval level, its judges' temperature and its
number of replies per conversation (three: worst-at-k)."""


@pytest.fixture(scope="session")
def two_judge_smoke(tmp_path_factory: pytest.TempPathFactory, mirror: Path) -> Path:
    """The smoke profile graded by two judges at temperature 0.3, every interval at 90%, three
    replies per conversation (:data:`TWO_JUDGE_SETTINGS`): what the book says of a panel, a
    level, judge settings and samples that are not the study's. Built once for all xdist
    workers."""
    from hbpsych_utils import runner

    def build(out: Path) -> Path:
        with _environ(HBPSYCH_MIRROR=str(mirror), **FAKE_KEYS):
            result = runner.run_profile("smoke", outputs_root=out, echo=print,
                                        overrides=TWO_JUDGE_SETTINGS)
        assert result.ok, result.notebooks
        return out / "smoke"

    return run_once(tmp_path_factory, "smoke-two-judges", build)


def copy_stages(run: Path, into: Path, stages: list[str]) -> None:
    """Copy ``stages`` of run folder ``run`` (each stage's folder and executed notebook, with
    the build records that make them current) into run folder ``into``: a run there then
    reports them up to date where its profile gives them the same inputs, and runs the rest.
    Its LLM store is not copied: the stages after these ask for their answers again."""
    from hbpsych_utils.pipeline import state

    for name in stages:
        shutil.copytree(run / name, into / name)
        executed = state.executed_path(into, name)
        executed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(state.executed_path(run, name), executed)


def stage_metrics(run: Path, stage: str) -> dict:
    """``metrics.json`` of one stage of a run folder (what notebook tests assert on)."""
    return json.loads((run / stage / "metrics.json").read_text(encoding="utf-8"))


def released_jsonl(name: str) -> list[dict]:
    """A released JSON Lines artifact read with plain json (independent of the package)."""
    from hbpsych_utils.core import sources

    return [json.loads(x) for x in sources.fetch(name).read_text().splitlines() if x.strip()]


def released_json(name: str) -> dict:
    """A released JSON artifact read with plain json (independent of the package)."""
    from hbpsych_utils.core import sources

    return json.loads(sources.fetch(name).read_text(encoding="utf-8"))


def record_released_corpus(profile_root: Path) -> Path:
    """Write what 01_corpus records for the registry's (partial) corpus into a run folder
    (``<profile_root>/01_corpus/corpus_source.json``), for a stage test that reads it."""
    from hbpsych_utils.construction import corpus
    from hbpsych_utils.pipeline import graph

    loaded = corpus.load_for_profile(allow_partial=True)
    path = profile_root / graph.CORPUS / graph.CORPUS_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(corpus.source_record(
        loaded, {"invalid_records": "error", "max_conversations": None})), encoding="utf-8")
    return path


def chapter_parameters(stage: str, root: Path | str, of: str = "default",
                       **values: object) -> dict:
    """Every parameter of ``stage``'s parameters cell as the runner injects them for profile
    ``of`` (its name kept unless ``values`` names another ``profile``), ``values`` put over
    them: what a chapter's ``start`` takes by name."""
    from hbpsych_utils.pipeline import graph, profiles

    params = graph.notebook_parameters(profiles.load_profile(of), stage, str(root))
    return {**params, **values}


def grading_live_metrics(judges: list[str]) -> dict:
    """07's live metrics as the typed model requires them (only ``judges`` matters here)."""
    census = {"criteria": 1, "verdicts": 1, "recovered": 0, "reasked": 0, "excluded": 0,
              "call_failed": 0}
    spend = {"spend_usd": 0.0, "input_tokens": 0, "cache_read_tokens": 0,
             "cache_write_tokens": 0}
    return {"mode": "live", "judges": judges, "temperature": 0.0, "response_schema": False,
            "grader_template_sha256": "0" * 64, "n_criteria_graded": 1, "n_recovered": 0,
            "n_reasked": 0, "n_excluded": 0, "n_replies_not_graded": 0, "n_scores": 1,
            "n_unscored": 0, "calls_by_attempt": {}, "census": dict.fromkeys(judges, census),
            "ledger_cost_usd": 0.0, "prompt_caching": False, **spend,
            "spend_by_judge": dict.fromkeys(judges, spend)}


# --- the LLM engine's tests: the registry's providers and the study's judges -------------------

_REGISTRY = load_registry()
FREE = {p: {"rpm": None, "tpm": None} for p in _REGISTRY.providers}
"""Engine ``limits`` with no client-side rate limit (the simulator answers as fast as asked)."""
JUDGE_BY_API = {_REGISTRY.providers[_REGISTRY.model(j).provider].kind: j
                for j in study.JUDGE_PANEL}
"""The panel judge of each provider API (openai, anthropic, google): one model per adapter."""


# --- a throw-away project for the runner's tests ------------------------------------------------

def notebook(path: Path, *cells: str, **params: object) -> None:
    """Write a synthetic stage notebook ``notebooks/<stage>.ipynb``: a ``parameters`` cell
    declaring ``profile``, ``outputs_root`` and ``params`` (name = default), then one code cell
    per string. The runner injects only what a notebook declares, and only what the stage graph
    gives that stage (``graph.parameter_names``), so a parameter the stage is not given is an
    error here rather than a default silently kept."""
    import nbformat  # here, not at import: jsonschema's import costs every worker a second
    from nbformat.v4 import new_code_cell, new_notebook

    from hbpsych_utils.pipeline import graph

    given = graph.parameter_names(path.stem)  # an unknown stage name is an error too
    unknown = [p for p in params if p not in given]
    assert not unknown, f"{path.stem} is not given {unknown} (only: {', '.join(given)})"
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    declared = {"profile": "x", "outputs_root": ".", **params}
    p = new_code_cell("\n".join(f"{k} = {v!r}" for k, v in declared.items()))
    p.metadata["tags"] = ["parameters"]
    # the runner gives a root inside the project relative to notebooks/ (as the shipped
    # parameters cells say it), which the stages resolve there: so do these cells
    resolve = ("from hbpsych_utils.core import paths as _paths\n"
               "outputs_root = str((_paths.notebooks_dir() / outputs_root).resolve())\n")
    bodies = [resolve + c if i == 0 else c for i, c in enumerate(cells)]
    nb.cells = [p, *(new_code_cell(c) for c in bodies)]
    nbformat.write(nb, path)


def write_profile(project: Path, *stages: str, text: str = "", name: str = "p") -> Path:
    """``params/<name>.yaml`` of a synthetic project: running ``stages`` (its ``notebooks:``
    list), plus ``text`` (more YAML)."""
    path = project / "params" / f"{name}.yaml"
    path.write_text(f"description: test\nnotebooks: [{', '.join(stages)}]\n{text}")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project (HBPSYCH_ROOT): ``params/`` with the real model registry (a profile is
    checked against it when the runner loads it), ``data/registry.yaml`` (the artifacts a
    stage's fingerprint names), ``data/paper_numbers.yaml`` (the book's ledger) and
    ``notebooks/`` for the test to fill with stage notebooks named like the graph's stages; the
    test writes its profile (``write_profile``)."""
    (tmp_path / "params").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "data").mkdir()
    shutil.copy(paths.project_root() / "params" / "models.yaml", tmp_path / "params")
    shutil.copy(paths.registry_file(), tmp_path / "data")
    shutil.copy(paths.project_root() / "data" / "paper_numbers.yaml", tmp_path / "data")
    monkeypatch.setenv("HBPSYCH_ROOT", str(tmp_path))
    return tmp_path


RAY_GROUP = "ray"
"""The xdist group of the tests that use :func:`local_ray`: one worker starts Ray for all."""


@pytest.fixture
def local_ray(request: pytest.FixtureRequest) -> Iterator[object]:
    """Ray in local mode, started once for the tests that need it (``test_ray_shards.py``, the
    Ray route of ``test_shards_routes.py``; they share :data:`RAY_GROUP`, so one worker runs
    them): its start-up costs about 14 s of CPU on 2 cores (its agents and idle workers), paid
    once instead of per module. It is shut down after the last of those tests (in collection
    order), not at the session's end: idle, it still costs about 3% of a core.
    ``ray-shards`` uses a Ray already running in the process, as a lab's own cluster.

    Needs the ray extra: skipped without it, except where it was installed
    (``HBPSYCH_EXTRAS=all``), where Ray must import."""
    if os.environ.get("HBPSYCH_EXTRAS") != "all":  # installed with it, Ray must import
        pytest.importorskip("ray.data")
    import ray
    import ray.data

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    users = [i for i in request.session.items if "local_ray" in getattr(i, "fixturenames", ())]
    try:
        yield ray
    finally:
        if not users or request.node is users[-1]:
            ray.shutdown()


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's headless Chromium through Playwright (``bash scripts/install_browser.sh``).

    Skipped where it is not installed, except under CI, where a browser test must run."""
    if not CHROMIUM.exists():
        msg = f"{CHROMIUM} is missing: run scripts/install_browser.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{msg} (CI is set, so the browser test must run)")
        pytest.skip(msg)
    try:
        from playwright import sync_api
    except ImportError as exc:  # the dev extra is not installed
        if os.environ.get("CI"):
            pytest.fail(f"playwright is not installed ({exc}); CI must run the browser test")
        pytest.skip(f"playwright is not installed ({exc}): pip install -e .[dev]")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()
