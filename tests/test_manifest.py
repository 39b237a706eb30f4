"""The manifest records the installed versions of what the package depends on, the command
and every stage's state, and the run's facts read from the stages' typed metrics."""

from __future__ import annotations

import json
import platform
import re
from importlib import metadata
from pathlib import Path

import pytest

from hbpsych_utils.runner import manifest


def test_installed_packages_cover_requirements_and_dev_extra() -> None:
    packages = manifest.installed_packages()
    assert packages["python"] == platform.python_version()
    assert packages["hbpsych_utils"] == metadata.version("hbpsych_utils")
    for name in ("papermill", "pydantic", "pyyaml", "ipykernel", "pytest", "ruff"):
        assert packages[name] == metadata.version(name), name
    declared = {re.match(r"[A-Za-z0-9._-]+", r).group().lower()  # type: ignore[union-attr]
                for r in metadata.requires("hbpsych_utils") or []}
    assert declared <= {k.lower() for k in packages}


def test_manifest_records_packages_overrides_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stages = [{"stage": "01_corpus", "state": "current", "reason": "", "by": "runner",
               "written_at": "2026-01-01T00:00:00+00:00"}]
    path = manifest.write_manifest(tmp_path, "p", [], overrides={"seed": 1},
                                   profile_values={"seed": 1, "name": "p"}, stages=stages,
                                   command="bash run_all.sh p --set seed=1")
    data = json.loads(path.read_text())
    assert data["packages"] == manifest.installed_packages()
    assert data["overrides"] == {"seed": 1} and data["profile_values"]["seed"] == 1
    assert data["stages"] == stages and data["command"] == "bash run_all.sh p --set seed=1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secretvalue0123456789")
    path = manifest.write_manifest(tmp_path, "p", [],
                                   profile_values={"llm": {"x": "sk-secretvalue0123456789"}})
    assert json.loads(path.read_text())["profile_values"]["llm"] == {
        "x": "[OPENAI_API_KEY removed]"}


SUBSET = {"n_v1": 610, "n_v2": 611, "n_hard": 119, "sha256_v1": "ab" * 32,
          "sha256_v2": "cd" * 32, "sha256_hard": "ef" * 32, "matches_release_v1": True,
          "matches_release_v2": True, "matches_release_hard": True,
          "category_counts": {"anxiety": 84, "no category majority": 65},
          "n_no_category_majority": 65}
GRADING_PAPER = {"mode": "paper", "grader_template_sha256": "12" * 32, "spend_grade_usd": 552.29,
                 "spend_by_judge": {"gpt-4.1-2025-04-14": 307.87}, "anomalies": {},
                 "n_no_verdict": 2}


def stage_metrics(run: Path, stage: str, data: dict) -> None:
    (run / stage).mkdir(parents=True, exist_ok=True)
    (run / stage / "metrics.json").write_text(json.dumps(data))


def test_run_facts_come_from_the_stages_typed_metrics(tmp_path: Path) -> None:
    assert manifest.collect_run_facts(tmp_path) == {}  # no stage ran: nothing to claim
    stage_metrics(tmp_path, "05_subset", SUBSET)
    stage_metrics(tmp_path, "07_grading", GRADING_PAPER)
    facts = manifest.collect_run_facts(tmp_path)
    assert facts == {"subset_sha256": {"v1": "ab" * 32, "v2": "cd" * 32, "hard": "ef" * 32},
                     "grader_template_sha256": "12" * 32}
    # a stage folder holding only a failure record contributes nothing
    (tmp_path / "07_grading" / "metrics.json").unlink()
    (tmp_path / "07_grading" / "failed.json").write_text("{}")
    assert "grader_template_sha256" not in manifest.collect_run_facts(tmp_path)
    # metrics that do not fit their stage's model, or a damaged file (the runner rebuilds its
    # stage: it differs from its build record), are named, and claim nothing
    stage_metrics(tmp_path, "05_subset", {**SUBSET, "n_v1": "many"})
    facts = manifest.collect_run_facts(tmp_path)
    assert "subset_sha256" not in facts
    [problem] = facts["unreadable"]
    assert re.search(r"05_subset/metrics.json: field n_v1", problem)
    (tmp_path / "05_subset" / "metrics.json").write_bytes(b"\0" * 100)
    (tmp_path / "05_subset" / "stage.json").write_text('{"stage": "05_subset", "artif')
    unreadable: list[str] = []
    assert manifest.collect_artifacts(tmp_path, unreadable) == {}
    assert manifest.collect_run_facts(tmp_path, unreadable) == {"unreadable": unreadable}
    assert [Path(u.split(":")[0]).relative_to(tmp_path).as_posix() for u in unreadable] == [
        "05_subset/stage.json", "05_subset/metrics.json"]
    assert all("not valid JSON" in u for u in unreadable)
