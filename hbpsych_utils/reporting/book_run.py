"""The run folder as the book reads it: every stage's typed metrics, the profile the run was
made with, each stage's state, the commands that bring it up to date, the judges its scores rest
on and whether its corpus was partial; the words a page says about a stage that is not current.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hbpsych_utils import study
from hbpsych_utils.core import paths, records
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.pipeline.metrics import Metrics
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.book_markdown import cell, code
from hbpsych_utils.reporting.run_metrics import RunMetrics, of


class BookError(RuntimeError):
    """A run folder the book cannot be built from (names the folder or file)."""


def read_metrics(profile_dir: Path) -> dict[str, Metrics]:
    """Every stage's ``metrics.json`` in a run folder, typed (``pipeline.metrics``), by stage."""
    out: dict[str, Metrics] = {}
    for stage in metrics_models.MODELS:
        if (Path(profile_dir) / stage / graph.METRICS).is_file():
            try:
                out[stage] = metrics_models.read(profile_dir, stage)
            except (metrics_models.MetricsError, OSError) as exc:
                raise BookError(str(exc)) from exc
    return out


def run_profile(profile_dir: Path, manifest: Mapping[str, Any] | None) -> Profile | None:
    """The profile a run folder was made with: the manifest's values (overrides applied), or
    the profile file of the folder's name; ``None`` when neither can be read."""
    from hbpsych_utils.core import config
    from hbpsych_utils.pipeline import profiles

    values = (manifest or {}).get("profile_values")
    if isinstance(values, dict) and values:
        try:
            return Profile.model_validate(values)
        except ValidationError:
            return None
    try:
        return profiles.load_profile(str((manifest or {}).get("profile") or profile_dir.name))
    except (config.ProfileError, OSError, ValueError):
        return None


def stage_states(profile_dir: Path, profile: Profile | None,
                 manifest: Mapping[str, Any] | None = None) -> dict[str, StageState]:
    """Each stage's state in the run folder (empty when the profile is unknown), judged with
    the artifact source the run recorded (mirror or download), not this reader's."""
    if profile is None:
        return {}
    mirror = (manifest or {}).get("mirror")
    return {s.stage: s for s in state.stage_states(
        profile_dir, profile, mirror=mirror if isinstance(mirror, bool) else None)}


def update_command(profile: str, manifest: Mapping[str, Any] | None,
                   outputs_root: Path | None = None) -> str:
    """The command that brings every stage of the run up to date: the run's profile, its
    outputs folder (``outputs_root``, named unless it is the default) and ``--set`` overrides,
    all stages (no ``--only``)."""
    overrides = (manifest or {}).get("overrides") or {}
    sets = "".join(f" --set {shlex.quote(f'{k}={json.dumps(v)}')}"
                   for k, v in overrides.items()) if isinstance(overrides, dict) else ""
    return f"bash run_all.sh {shlex.quote(profile)}{outputs_option(outputs_root)}{sets}"


def stage_command(profile: str, stage: str, manifest: Mapping[str, Any] | None,
                  outputs_root: Path | None = None) -> str:
    """The one command that re-makes stage ``stage``'s outputs in this run: its profile,
    ``--only`` the stage, the run's outputs folder and ``--set`` overrides (what every table and
    figure of its chapter says under it)."""
    overrides = (manifest or {}).get("overrides") or {}
    sets = "".join(f" --set {shlex.quote(f'{k}={json.dumps(v)}')}"
                   for k, v in overrides.items()) if isinstance(overrides, dict) else ""
    return vocabulary.stage_command(profile, stage,
                                    options=outputs_option(outputs_root) + sets)


def run_judges(metrics: RunMetrics, profile: Profile | None) -> tuple[list[str], str]:
    """The judges whose verdicts this run's scores rest on, and where they come from: the
    judges 07 graded with (live), or the study's panel behind the released matrices (paper)."""
    grading = of(metrics, metrics_models.GRADING)
    if isinstance(grading, metrics_models.GradingLiveMetrics):
        return list(grading.judges), "graded this run's replies"
    if profile is not None and profile.evaluation_mode == graph.LIVE:
        return profile.grading.judge_panel(), "are the profile's"
    return list(study.JUDGE_PANEL), "graded the study's released run"


def outputs_option(outputs_root: Path | None) -> str:
    """`` --outputs DIR`` for a run outside the default outputs folder ("" otherwise)."""
    if outputs_root is None or Path(outputs_root).resolve() == paths.outputs_root().resolve():
        return ""
    return f" --outputs {shlex.quote(str(Path(outputs_root).resolve()))}"


def corpus_partial(metrics: RunMetrics) -> bool:
    """Whether the run used a partial corpus (01_corpus says ``complete: false``)."""
    corpus = of(metrics, metrics_models.CORPUS)
    return corpus is not None and corpus.complete is False


def corpus_chapters(profile: Profile | None) -> list[str]:
    """The chapters whose results come from the corpus's conversations themselves: 01 and
    every stage that reads 01's corpus under the profile's modes (the graph says which)."""
    if profile is None:
        return [graph.CORPUS]
    return [s for s in graph.STAGES
            if s == graph.CORPUS or graph.CORPUS in graph.spec(s).upstream(profile)]


def partial_banner(metrics: RunMetrics, profile: Profile | None = None) -> str:
    """The sentence every page of a partial-corpus book carries ("" for a complete corpus):
    how much of the corpus the run had, and which chapters that limits."""
    c = of(metrics, metrics_models.CORPUS)
    if c is None or c.complete is not False:
        return ""
    numbers = [s[:2] for s in corpus_chapters(profile)]
    which = (f"chapter {numbers[0]} computes" if len(numbers) == 1 else
             f"chapters {', '.join(numbers[:-1])} and {numbers[-1]} compute")
    return (f"Partial corpus: this run read {c.n_conversations:,} of HealthBench's "
            f"{c.n_expected:,} conversations. What {which} from the conversations themselves "
            "covers only those; every number taken from the study's released files is "
            "complete.")


STATE_WORDS = {"current": "current", "not_current": "not current", "failed": "failed",
               "not_run": "not run", "not_in_profile": "not in this profile"}


def state_sentence(s: StageState, command: str) -> str:
    """What a chapter's banner and the landing page say about a stage that is not current."""
    word = STATE_WORDS[s.state].capitalize()
    fix = f" Bring it up to date with {code(command, cell=False)}." if command else ""
    return f"**{word}**: {cell(s.reason)}.{fix}"


def not_current_mark(s: StageState | None) -> str:
    if s is None or s.current:
        return ""
    return f" (**{STATE_WORDS[s.state]}**)"


def chapter_banner(s: StageState | None, command: str) -> str:
    """The warning a chapter that is not current carries ("" when it is current, or when the
    profile does not run its stage: nothing can bring it up to date, and it has no chapter)."""
    if s is None or s.current or s.state == "not_in_profile":
        return ""
    return (state_sentence(s, command) + " This page shows the runner's last execution of "
            "the notebook, which may not match the stage's outputs.")


def check_records(profile_dir: Path) -> None:
    """Refuse a run folder whose files are not those its build records say the runner wrote
    (:func:`hbpsych_utils.pipeline.state.check_outputs`, of the stages its profile runs),
    naming the first, with the command that rebuilds them: the book would show them as
    current."""
    manifest = read_manifest(profile_dir)
    run = run_profile(profile_dir, manifest)
    profile = str((manifest or {}).get("profile") or profile_dir.name)
    try:
        state.check_outputs(profile_dir, update_command(profile, manifest, profile_dir.parent),
                            graph.profile_stages(run) if run is not None else None)
    except state.OutputsChanged as exc:
        raise BookError(str(exc)) from None


def read_manifest(profile_dir: Path) -> dict[str, Any] | None:
    path = profile_dir / "manifest.json"
    if not path.is_file():
        return None
    data = records.read_json(path, error=BookError)
    return data if isinstance(data, dict) else None
