"""The type check: mypy, as pyproject.toml's ``[tool.mypy]`` configures it, passes on the
packages it names (``pipeline``, ``evaluation`` and ``stages`` among them), and a stage's
metrics read back as that stage's model, to the type checker too. The settings are kept
honest: no module's errors are switched off wholesale, and only third-party packages may be
untyped."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "hbpsych_utils"


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


def _checked(config: dict) -> set[str]:
    """The packages in ``files``, as module names."""
    return {f.removesuffix("/").replace("/", ".") for f in config["files"]}


def test_the_type_check_covers_the_lower_layers_with_strict_settings() -> None:
    config = _config()
    assert {f"{PACKAGE}.pipeline", f"{PACKAGE}.evaluation", f"{PACKAGE}.reporting",
            f"{PACKAGE}.stages"} <= _checked(
        config)
    for flag in ("check_untyped_defs", "disallow_untyped_defs", "disallow_incomplete_defs",
                 "disallow_any_generics", "strict_equality", "warn_unused_ignores"):
        assert config.get(flag) is True, flag


def test_no_errors_are_switched_off_and_only_third_party_imports_may_be_untyped() -> None:
    config = _config()
    assert "ignore_errors" not in config
    checked = _checked(config)
    for override in config.get("overrides", []):
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        assert "ignore_errors" not in override, modules
        if override.get("ignore_missing_imports"):
            assert not [m for m in modules if m.split(".")[0] == PACKAGE], modules
        if "follow_imports" in override:
            # a package not in `files` yet, read for its types; never one that is checked
            assert override["follow_imports"] == "silent"
            assert all(m.startswith(f"{PACKAGE}.") for m in modules), modules
            assert not [m for m in modules if m.removesuffix(".*") in checked], modules


def test_every_type_ignore_in_the_checked_packages_names_its_code_and_why() -> None:
    bare = []
    for folder in _config()["files"]:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if "type: ignore" in line and not re.search(
                        r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S", line):
                    bare.append(f"{path.relative_to(ROOT)}:{n}")
    assert bare == []


@pytest.mark.slow
def test_the_configured_packages_pass_the_type_check() -> None:
    result = _mypy()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


@pytest.mark.slow
def test_metrics_read_as_their_stages_models_to_the_type_checker(tmp_path: Path) -> None:
    code = "\n".join([
        "from hbpsych_utils.pipeline import metrics",
        "from hbpsych_utils.pipeline.stage import Stage",
        "reveal_type(metrics.read('run', metrics.SCORES))",
        "reveal_type(metrics.read('run', metrics.SCORES).ranking)",
        "reveal_type(metrics.read('run', metrics.GRADING))",
        "reveal_type(metrics.parse(metrics.RECALL, {}).n_recall_pool)",
        "reveal_type(Stage('p', '05_subset', 'out').upstream_metrics(metrics.RECALL))",
        "reveal_type(metrics.read('run', '08_scores'))",
        "metrics.read('run', metrics.SCORES).n_conversations",
    ])
    snippet = tmp_path / "reads.py"
    snippet.write_text(code + "\n", encoding="utf-8")
    result = _mypy(str(snippet))
    revealed = re.findall(r'Revealed type is "([^"]+)"', result.stdout)
    m = "hbpsych_utils.pipeline.metrics."
    assert revealed == [
        f"{m}s08_scores.ScoresMetrics", "list[str]",
        f"{m}s07_grading.GradingPaperMetrics | {m}s07_grading.GradingLiveMetrics",
        "int",
        f"{m}s04_recall.RecallMetrics",
        f"{m}model.Metrics",  # a stage's name in a variable: the common base
    ], result.stdout
    # a field 08 does not have is an error, where an untyped read would let it through
    assert re.search(r'"ScoresMetrics" has no attribute "n_conversations"', result.stdout)
    assert result.returncode == 1
