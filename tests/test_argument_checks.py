"""Every argument validated at load: a profile's judges, candidates, seed and resample counts
are refused when the profile loads (before notebook 01), and every subcommand of
``python -m hbpsych_utils`` answers a bad argument in one line with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import notebook, write_profile

from hbpsych_utils import runner, study
from hbpsych_utils.core import config

MUST_NOT_RUN = "raise SystemExit('must not run')"


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# --- a profile's values, at load ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "key", "problem"), [
    ("grading: {judges: [gpt-4.1, gpt-4.1]}", "grading.judges", "'gpt-4.1' listed more than once"),
    ("grading: {judges: []}", "grading.judges", "an empty panel"),
    ("grading: {judges: [gpt-4.1, '  ']}", "grading.judges", "judge[1] is an empty name"),
    ("generation: {candidates: [a, b, a]}", "generation.candidates", "'a' listed more than once"),
    ("seed: -1", "seed", "greater than or equal to 0"),
    (f"seed: {study.MAX_SEED + 1}", "seed", f"less than or equal to {study.MAX_SEED}"),
    (f"scores: {{n_resamples: {study.MAX_RESAMPLES + 1}}}", "scores.n_resamples",
     f"less than or equal to {study.MAX_RESAMPLES}"),
    ("judges: {n_resamples: 1000000000}", "judges.n_resamples", "less than or equal to"),
])
def test_bad_values_are_refused_when_the_profile_loads(tmp_path: Path, text: str, key: str,
                                                       problem: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"description: x\n{text}\n")
    with pytest.raises(config.ProfileError) as caught:
        config.load_profile(path)
    assert f"  - {key}: " in str(caught.value) and problem in str(caught.value), caught.value
    assert "Value error," not in str(caught.value)  # the validator's own words


def test_the_limits_themselves_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"description: x\nseed: {study.MAX_SEED}\n"
                    f"scores: {{n_resamples: {study.MAX_RESAMPLES}}}\n"
                    "grading: {judges: [gpt-4.1]}\n")
    profile = config.load_profile(path)
    assert (profile.seed, profile.scores.n_resamples) == (study.MAX_SEED, study.MAX_RESAMPLES)
    assert config.load_profile(path, {"seed": 0}).seed == 0


@pytest.mark.parametrize(("text", "overrides", "problem"), [
    ("evaluation_mode: live\ngrading: {judges: [gpt-4.1, gpt-4.1]}\n", [],
     "listed more than once"),
    ("evaluation_mode: live\ngrading: {judges: []}\n", [], "an empty panel"),
    ("seed: -1\n", [], "seed: Input should be greater than or equal to 0"),
    ("", ["--set", "seed=-1"], "seed: Input should be greater than or equal to 0"),
    ("", ["--set", "grading.judges=[gpt-4.1, gpt-4.1]"], "listed more than once"),
])
def test_the_runner_refuses_them_before_any_notebook_runs(
        project: Path, capsys, text: str, overrides: list[str], problem: str) -> None:
    """A duplicate judge or an empty panel passed the profile load and failed in 07 or 08;
    ``--set seed=-1`` failed in 11 after 01 had run. Now exit 2 at load, nothing written."""
    write_profile(project, "01_corpus", "07_grading", "11_harness_validation", text=text)
    for stage in ("01_corpus", "07_grading", "11_harness_validation"):
        notebook(project / "notebooks" / f"{stage}.ipynb", MUST_NOT_RUN)
    out = project / "outputs"
    assert runner.main(["p", "--outputs", str(out), *overrides]) == runner.EXIT_USAGE
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err, err
    assert not out.exists()
