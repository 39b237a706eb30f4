"""Names that cannot escape: a profile's name is a plain name, an outputs root or a run folder is
never the project's source tree, and a stage writes only inside its run folder. Each is refused
before anything is written, with one line and exit code 2."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, chapter_parameters, notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.__main__ import main as cli
from hbpsych_utils.core import config, paths
from hbpsych_utils.pipeline import profiles
from hbpsych_utils.pipeline.stage import Stage

MUST_NOT_RUN = "raise SystemExit('must not run')"


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` (links as where they lead), with its content hash:
    what a refused command must leave exactly as it was."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = Path(dirpath, name)
            found[str(path.relative_to(root))] = (f"-> {os.readlink(path)}" if path.is_symlink()
                                                  else "dir")
        for name in filenames:
            path = Path(dirpath, name)
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("name", ["default", "toy_specialty", "v1-2", "A_1", "a.b", "a..b", "7"])
def test_plain_names_are_accepted(name: str) -> None:
    assert paths.plain_name(name, "profile name") == name
    assert paths.profile_name(f"some/folder/{name}.yaml") == name


@pytest.mark.parametrize("name", ["", ".", "..", "...", ".hidden", "trailing.", "a/b", "a\\b",
                                  "../x", "é", " a", "a b", "a\x00b", "a\nb"])
def test_names_that_could_leave_their_folder_are_refused(name: str) -> None:
    with pytest.raises(paths.UnsafePath, match="is not a plain name"):
        paths.plain_name(name, "profile name")


@pytest.mark.parametrize(("given", "name"), [
    ("...yaml", ".."), ("..yaml", "."), (".yaml", ".yaml"), ("", ""), ("..", ".."),
    (".", "."), ("params/...yaml", "..")])
def test_a_profile_named_by_an_unsafe_name_or_file_is_refused(given: str, name: str) -> None:
    with pytest.raises(config.ProfileError, match=f"profile name {name!r} is not a plain name"):
        config.existing_profile_path(given)
    with pytest.raises(config.ProfileError, match="is not a plain name"):
        profiles.load_profile(given)


@pytest.mark.parametrize(("file", "argument"), [
    ("...yaml", "...yaml"), ("..yaml", "..yaml"), (".yaml", ""), (None, ".."), (None, ".")])
def test_run_refuses_a_profile_name_that_is_not_plain_and_writes_nothing(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys, file: str | None,
        argument: str) -> None:
    """The profile file ``...yaml`` (name ``..``) run from ``params/`` ran into the project
    itself and replaced ``notebooks/01_corpus.ipynb`` with its executed copy; ``..yaml``
    (name ``.``) ran among the other profiles' folders. Now: exit 2, one line, not a byte
    written anywhere in the project (its outputs folder included)."""
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", MUST_NOT_RUN)
    if file is not None:
        (project / "params" / file).write_text("description: an unsafe name\n"
                                               "notebooks: [01_corpus]\n")
    (project / "outputs").mkdir()
    monkeypatch.setenv(paths.CALLER_DIR_ENV, str(project / "params"))  # run from params/
    before = snapshot(project)
    assert cli(["run", argument]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "is not a plain name" in line
    assert cli(["run", argument, "--outputs", str(project / "outputs")]) == 2
    one_error_line(capsys.readouterr().err)
    assert snapshot(project) == before
    # the library call (run_profile) refuses it as well, before anything is written
    with pytest.raises(config.ProfileError, match="is not a plain name"):
        runner.run_profile(argument, outputs_root=project / "outputs", echo=lambda _: None)
    assert snapshot(project) == before


@pytest.mark.parametrize("outputs", ["", ".", "notebooks", "params/..", "outputs/.."])
def test_an_outputs_root_in_the_source_tree_is_refused(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys, outputs: str) -> None:
    """``--outputs ''`` was taken as the current directory: from the project folder it wrote
    ``default/`` into the repository."""
    write_profile(project, "01_corpus", name="default")
    notebook(project / "notebooks" / "01_corpus.ipynb", MUST_NOT_RUN)
    monkeypatch.setenv(paths.CALLER_DIR_ENV, str(project))  # run from the project folder
    before = snapshot(project)
    for command in ("run", "book", "publish"):
        assert cli([command, "default", "--outputs", outputs]) == 2, command
        line = one_error_line(capsys.readouterr().err)
        assert "outputs root" in line and (
            "empty path" in line or str(project) in line), line
    assert snapshot(project) == before
    with pytest.raises(paths.UnsafePath):
        runner.run_profile("default", outputs_root=outputs, echo=lambda _: None)
    assert snapshot(project) == before


def test_an_outputs_root_holding_the_project_cannot_name_the_project_as_a_run_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A root above the project is a root like any other, but a profile named like the
    project's folder would make the project itself the run folder."""
    project = tmp_path / "proj"
    (project / "params").mkdir(parents=True)
    (project / "notebooks").mkdir()
    monkeypatch.setenv("HBPSYCH_ROOT", str(project))
    assert paths.run_folder(tmp_path, "other") == tmp_path / "other"
    with pytest.raises(paths.UnsafePath, match="is the project folder"):
        paths.run_folder(tmp_path, "proj")
    assert cli(["book", "proj", "--outputs", str(tmp_path)]) == 2
    one_error_line(capsys.readouterr().err)


def test_the_default_outputs_folder_and_folders_outside_the_project_are_accepted(
        project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert paths.outside_source_tree(project / "outputs", "outputs root") == project / "outputs"
    assert paths.run_folder(paths.outputs_root(), "p") == project / "outputs" / "p"
    elsewhere = tmp_path_factory.mktemp("runs")
    assert paths.run_folder(elsewhere, "p") == elsewhere / "p"


def test_a_run_folder_that_links_into_the_sources_is_refused(
        project: Path, capsys) -> None:
    """``outputs/p`` a symbolic link to ``notebooks/``: the resolved folder is checked."""
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", MUST_NOT_RUN)
    (project / "outputs").mkdir()
    (project / "outputs" / "p").symlink_to(project / "notebooks")
    before = snapshot(project)
    assert cli(["run", "p"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"is inside the project's source tree {project}" in line
    assert snapshot(project) == before


def test_a_stage_writes_only_inside_its_run_folder(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path / "outputs"
    stage = Stage("p", "01_corpus", root)
    assert stage.write_json("ok.json", {"a": 1}) == root / "p" / "01_corpus" / "ok.json"
    for name in ("../escaped.json", "../../p2/x.json", str(tmp_path / "abs.json")):
        with pytest.raises(paths.UnsafePath, match="not inside"):
            stage.write_json(name, {"a": 1})
    outside = tmp_path_factory.mktemp("outside")
    (stage.dir / "link").symlink_to(outside)
    with pytest.raises(paths.UnsafePath, match="not inside"):
        stage.write_json("link/x.json", {"a": 1})
    for profile in ("..", ".", ""):
        with pytest.raises(paths.UnsafePath, match="is not a plain name"):
            Stage(profile, "01_corpus", root)
    with pytest.raises(paths.UnsafePath, match="is not a plain name"):
        Stage("p", "..", root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]
    assert not any(outside.iterdir())


def test_a_stage_never_writes_into_the_project_sources() -> None:
    """A notebook run by hand with ``outputs_root`` pointing into the repository."""
    with pytest.raises(paths.UnsafePath, match="source tree"):
        Stage("default", "01_corpus", paths.notebooks_dir())


def test_profiles_lists_only_plain_names_and_says_which_files_are_none(
        project: Path, capsys) -> None:
    write_profile(project, "01_corpus", name="good")
    notebook(project / "notebooks" / "01_corpus.ipynb", MUST_NOT_RUN)
    (project / "params" / "...yaml").write_text("description: x\n")
    assert config.available_profiles() == ["good"]
    assert cli(["profiles"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["good: test"]
    assert captured.err.splitlines() == [
        f"warning: {project / 'params' / '...yaml'}: not a profile (its name '..' is not "
        f"{paths.NAME_RULE})"]


# --- the repository itself, in a copy: git status stays clean -------------------------------

@pytest.fixture
def repository_copy(tmp_path: Path) -> Path:
    """The project's files as they are now (tracked, and new ones not ignored), committed in a
    fresh git repository."""
    copy = tmp_path / "repo"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=copy, check=True)
    subprocess.run([*git, "add", "-A"], cwd=copy, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=copy, check=True)
    return copy


@pytest.mark.slow
def test_unsafe_names_and_outputs_leave_the_repository_unchanged(repository_copy: Path) -> None:
    """The exact inputs of the report, by the command line, against a copy of the repository:
    exit 2, one line each, and ``git status --porcelain`` lists only the two profile files the
    test added."""
    repo = repository_copy
    for name in ("...yaml", "..yaml"):
        shutil.copy(repo / "params" / "default.yaml", repo / "params" / name)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HBPSYCH_ROOT", "HBPSYCH_OUTPUTS", paths.CALLER_DIR_ENV)}
    env["PYTHONPATH"] = str(repo)
    cases = [(repo / "params", ["run", "...yaml"]), (repo / "params", ["run", "..yaml"]),
             (repo, ["run", ""]), (repo, ["run", "default", "--outputs", ""]),
             (repo, ["book", "default", "--outputs", ""]), (repo / "params", ["book", ".."])]
    for cwd, args in cases:
        proc = subprocess.run([sys.executable, "-m", "hbpsych_utils", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        one_error_line(proc.stderr)
        assert proc.stdout == ""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=repo, capture_output=True, text=True, check=True).stdout
    assert sorted(status.splitlines()) == ["?? params/...yaml", "?? params/..yaml"]
    assert not (repo / "outputs").exists()


def test_a_notebook_run_by_hand_with_an_unsafe_profile_removes_and_writes_nothing(
        tmp_path: Path) -> None:
    """A chapter started by hand (its parameters cell) with ``profile = ".."``: refused before
    an earlier hand run's folder would be removed, outside the run folder."""
    from hbpsych_utils.stages import base

    outputs = tmp_path / "runs" / "outputs"
    outputs.mkdir(parents=True)
    kept = tmp_path / "runs" / ".hand" / "09_judges"  # where outputs/../.hand/09_judges leads
    kept.mkdir(parents=True)
    before = snapshot(tmp_path)
    with pytest.raises(paths.UnsafePath, match="is not a plain name"):
        base.start("09_judges", chapter_parameters("09_judges", outputs, profile=".."))
    assert snapshot(tmp_path) == before
