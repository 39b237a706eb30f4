"""Profiles: the shipped ones load; bad keys, types and files give errors naming them; the
values each notebook is given come from the stage graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from hbpsych_utils.core import config
from hbpsych_utils.pipeline import graph, profiles
from hbpsych_utils.runner import checks


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", config.available_profiles())
def test_shipped_profiles_load(name: str) -> None:
    profile = profiles.load_profile(name)
    assert profile.name == name
    assert profile.description
    assert checks.load_for_run(name)[0] == profile  # and pass the runner's checks


def test_default_and_smoke_exist() -> None:
    assert {"default", "smoke"} <= set(config.available_profiles())
    assert "models" not in config.available_profiles()


def test_unknown_key_names_profile_key_and_expected(tmp_path: Path) -> None:
    p = write(tmp_path, "typo", "corpus:\n  allow_partal: true\n")
    with pytest.raises(config.ProfileError) as exc:
        profiles.load_profile(p)
    msg = str(exc.value)
    assert "'typo'" in msg and str(p) in msg
    assert "corpus.allow_partal: unknown key" in msg
    assert "allow_partial" in msg  # what was expected instead


@pytest.mark.parametrize(("text", "pattern"), [
    ("sede: 3\n", r"sede: unknown key \(expected one of: .*seed"),
    ("corpus:\n  allow_partial: maybe\n", r"corpus.allow_partial: .*'maybe'.*bool"),
    ("corpus:\n  invalid_records: ignore\n", r"corpus.invalid_records.*'error'.*'skip'"),
    ("corpus:\n  corpus_file: data/nowhere.jsonl\n", r"corpus.corpus_file: file .*nowhere.jsonl"),
    ("notebooks: [01_corpus, 99_nothing]\n", r"99_nothing"),
    ("- a\n- b\n", r"expected a mapping"),
], ids=["unknown-top-level-key", "wrong-type", "wrong-choice", "missing-file", "unknown-notebook",
        "not-a-mapping"])
def test_bad_profile_names_key_value_and_expectation(tmp_path: Path, text: str,
                                                     pattern: str) -> None:
    with pytest.raises(config.ProfileError, match=pattern):
        profiles.load_profile(write(tmp_path, "bad", text))


def test_missing_profile_lists_available() -> None:
    with pytest.raises(config.ProfileError) as exc:
        profiles.load_profile("no_such_profile")
    assert "no_such_profile" in str(exc.value) and "does not exist" in str(exc.value)
    assert "default" in str(exc.value)


def test_notebook_parameters_are_the_section_plus_run_keys(tmp_path: Path) -> None:
    profile = profiles.load_profile("smoke")
    values = graph.notebook_parameters(profile, "01_corpus", str(tmp_path))
    assert values["profile"] == "smoke"
    assert values["outputs_root"] == str(tmp_path)
    assert values["max_conversations"] == profile.corpus.max_conversations
    assert graph.spec("11_harness_validation").section == "harness_validation"
    assert "judges" not in values  # another section's values go only where they are asked
    # a notebook is given only what its stage reads: 01 reads no seed and calls no model
    assert "seed" not in values and "llm" not in values and "mode" not in values
    harness = graph.notebook_parameters(profile, "11_harness_validation", str(tmp_path))
    assert harness["seed"] == profile.seed and harness["llm"] == profile.llm.model_dump()
    assert harness["n_conversations"] == profile.harness_validation.n_conversations


def test_a_notebook_is_given_its_stages_resolved_mode(tmp_path: Path) -> None:
    """06-13 take the profile's one evaluation_mode; 11 follows it unless harness_validation.mode
    says otherwise (paper is replay there); 02-04 have their own."""
    smoke = profiles.load_profile("smoke")
    paper = profiles.load_profile("default")
    assert "mode" not in profiles.ScoresParams.model_fields  # no per-section evaluation mode
    for stage in ("06_generation", "07_grading", "08_scores", "09_judges", "10_refusals",
                  "12_figures_tables", "13_explorer"):
        assert graph.notebook_parameters(smoke, stage, str(tmp_path))["mode"] == "live", stage
        assert graph.notebook_parameters(paper, stage, str(tmp_path))["mode"] == "paper", stage
    harness = "11_harness_validation"
    assert graph.notebook_parameters(smoke, harness, str(tmp_path))["mode"] == "live"
    assert graph.notebook_parameters(paper, harness, str(tmp_path))["mode"] == "replay"
    kept = profiles.load_profile("smoke", {"harness_validation.mode": "replay"})
    assert graph.notebook_parameters(kept, harness, str(tmp_path))["mode"] == "replay"
    assert graph.notebook_parameters(kept, "08_scores", str(tmp_path))["mode"] == "live"
    live02 = profiles.load_profile("default", {"screening.mode": "live",
                                             "screening.model": "gpt-4.1-2025-04-14"})
    assert graph.notebook_parameters(live02, "02_screening", str(tmp_path))["mode"] == "live"
    assert graph.notebook_parameters(live02, "03_review_round1", str(tmp_path))["mode"] == (
        "replay")
    with pytest.raises(config.ProfileError, match=r"evaluation_mode: .*'paper' or 'live'"):
        profiles.load_profile("default", {"evaluation_mode": "replay"})
    with pytest.raises(config.ProfileError, match=r"scores\.mode: the evaluation stages share "
                                                  r"one mode: set evaluation_mode"):
        profiles.load_profile("default", {"scores.mode": "live"})


def test_notebook_06_gets_the_grading_panel_it_prices(tmp_path: Path) -> None:
    from hbpsych_utils import study
    from hbpsych_utils.pipeline import graph
    from hbpsych_utils.stages import s06_generation

    judge = study.JUDGE_PANEL[1]
    values = graph.notebook_parameters(profiles.load_profile("smoke"), graph.GENERATION,
                                       str(tmp_path))
    assert values["judges"] is None  # smoke's null judges: the study's panel, which 06 prices
    run = s06_generation.start(**{**values, "outputs_root": tmp_path})
    assert run.parameters["judges"] is None
    assert profiles.GradingParams(judges=values["judges"]).judge_panel() == list(
        study.JUDGE_PANEL)
    tweaked = profiles.load_profile("smoke", {"grading.judges": [judge]})
    assert graph.notebook_parameters(tweaked, graph.GENERATION, str(tmp_path))["judges"] == [
        judge]
    assert values["candidates"] == profiles.load_profile("smoke").generation.candidates


@pytest.mark.parametrize("section", ["screening", "recall"])
def test_a_live_screen_without_a_model_fails_when_the_runner_loads_it(
        tmp_path: Path, section: str) -> None:
    p = write(tmp_path, "nomodel", f"{section}:\n  mode: live\n")
    # the profile itself is valid (load_profile validates values); what it refers to is
    # checked by the runner when it loads it for a run (checks.load_for_run)
    assert getattr(profiles.load_profile(p), section).model is None
    with pytest.raises(config.ProfileError) as exc:
        checks.load_for_run(p)
    msg = str(exc.value)
    assert msg.startswith(f"profile 'nomodel' ({p}) is invalid:")
    assert f"{section}.model: mode is 'live' but no model is set" in msg
    with pytest.raises(config.ProfileError, match=rf"--set {section}.mode=\"live\"\) is inv"):
        checks.load_for_run("default", {f"{section}.mode": "live"})
    assert checks.load_for_run("default", {f"{section}.mode": "live",
                                           f"{section}.model": "gpt-4.1-2025-04-14"})
    # the same rule guards the stage of a notebook run by hand, without a profile
    params = profiles.Profile.model_fields[section].annotation(mode="live")
    assert config.unset_live_model(section, params).startswith(f"{section}.model: mode is")


@pytest.mark.parametrize("name", config.available_profiles())
def test_profile_models_are_in_the_registry(name: str) -> None:
    from hbpsych_utils.llm.models import profile_registry

    profile = profiles.load_profile(name)
    registry = profile_registry(profile.llm.registry_file)
    for model in profile.generation.candidates:
        assert {"candidate", "local"} & set(registry.model(model).roles), model
    for model in profile.grading.judge_panel():
        assert {"judge", "local"} & set(registry.model(model).roles), model


# --set overrides: parsed as YAML, applied to the file's mapping, validated by the same models.


def test_parse_overrides_reads_values_as_yaml() -> None:
    assert config.parse_overrides([
        "seed=123", "corpus.allow_partial=false", "scores.subsets=[v1, hard]",
        "llm.max_cost=", "description=a=b", "judges.subset=hard",
    ]) == {
        "seed": 123, "corpus.allow_partial": False, "scores.subsets": ["v1", "hard"],
        "llm.max_cost": None, "description": "a=b", "judges.subset": "hard",
    }


@pytest.mark.parametrize("item", ["seed", "=3", "corpus.=1", ".seed=1", "corpus..x=1",
                                  "seed=[1"])
def test_malformed_override_is_an_error_naming_it(item: str) -> None:
    with pytest.raises(config.ProfileError, match=r"--set '" + item.replace("[", r"\[")):
        config.parse_overrides([item])


def test_overrides_change_only_their_keys() -> None:
    base = profiles.load_profile("default")
    tweaked = profiles.load_profile("default", {
        "seed": 123, "judges.subset": "hard", "llm.limits.openai.rpm": 10,
        "corpus.max_conversations": 5})
    assert (tweaked.seed, tweaked.judges.subset, tweaked.corpus.max_conversations) == (
        123, "hard", 5)
    assert tweaked.llm.limits == {"openai": {"rpm": 10}}
    assert tweaked.corpus.allow_partial is base.corpus.allow_partial is True  # kept from file
    assert tweaked.model_copy(update={
        "seed": base.seed, "judges": base.judges, "llm": base.llm, "corpus": base.corpus,
    }) == base
    assert profiles.load_profile("default") == base  # the file itself is untouched


@pytest.mark.parametrize(("overrides", "pattern"), [
    ({"nosuch.key": 1}, r"--set nosuch.key=1\) is invalid:\n  - nosuch: unknown key "
                        r"\(expected one of: .*seed.*corpus"),
    ({"corpus.allow_partal": True}, r"corpus.allow_partal: unknown key .*allow_partial"),
    ({"corpus.max_conversations": -1}, r"corpus.max_conversations: .*greater than .*got -1"),
    ({"judges.subset": "v3"}, r"judges.subset: .*'v1', 'v2' or 'hard' \(got 'v3'"),
    ({"seed": "soon"}, r"seed: .*integer.*'soon'"),
    ({"seed.x": 1}, r"--set seed.x: seed is 20250507, not a section"),
    ({"name": "other"}, r"key 'name' is 'other' but must equal the file name 'default'"),
    ({"corpus.corpus_file": "data/nowhere.jsonl"}, r"corpus.corpus_file: file .*nowhere"),
    ({"notebooks": ["01_corpus", "99_x"]}, r"99_x"),
], ids=["unknown-section", "unknown-key", "out-of-range", "bad-choice", "bad-type",
        "not-a-section", "name", "missing-file", "unknown-notebook"])
def test_bad_override_is_an_error_naming_the_key(overrides: dict, pattern: str) -> None:
    with pytest.raises(config.ProfileError, match=pattern):
        profiles.load_profile("default", overrides)


def test_applied_overrides_are_the_validated_values() -> None:
    overrides = config.parse_overrides(["seed=123", "corpus.max_conversations=7",
                                        "llm.max_cost=2"])
    profile = profiles.load_profile("default", overrides)
    assert config.applied_overrides(profile, overrides) == {
        "seed": 123, "corpus.max_conversations": 7, "llm.max_cost": 2.0}
    assert config.describe_overrides({"seed": 1, "judges.subset": "hard"}) == (
        'seed=1, judges.subset="hard"')


def test_the_profile_is_assembled_from_the_sections_the_graph_declares() -> None:
    """Each stage's node declares its section's model; the profile is the top-level keys and
    exactly those sections, in run order; what the type checker is told of them
    (``pipeline/profiles.py``, under ``TYPE_CHECKING``) is the same models."""
    import ast

    fields = profiles.Profile.model_fields
    sections = {s.section: s.params for s in graph.SPECS.values() if s.section}
    assert [f for f in fields if f not in config.ProfileBase.model_fields] == list(sections)
    assert all(fields[key].annotation is model for key, model in sections.items())
    tree = ast.parse(Path(profiles.__file__).read_text(encoding="utf-8"))
    static = {node.target.id: node.annotation.id for cls in ast.walk(tree)
              if isinstance(cls, ast.ClassDef) and cls.name == "Profile" for node in cls.body
              if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and isinstance(node.annotation, ast.Name)}
    assert len(static) == 14
    assert all(getattr(profiles, alias) is sections[key] for key, alias in static.items())


def test_a_section_declared_by_a_new_node_is_in_every_profile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A node added to the graph brings its section: every profile has it, with its model's
    defaults, checked like the others, with no profile file edited."""
    import dataclasses

    class ToyParams(config.Section):
        min_conversations: int = 50

    toy = dataclasses.replace(graph.spec(graph.EXPLORER), name="16_toy", section="toy",
                              params=ToyParams)
    monkeypatch.setitem(graph.SPECS, "16_toy", toy)
    assembled = profiles._assemble()
    default = config.load_profile_as(assembled, "default")
    assert default.toy == ToyParams() and list(type(default).model_fields)[-1] == "toy"
    assert config.load_profile_as(assembled, "smoke", {"toy.min_conversations": 7}
                                  ).toy.min_conversations == 7
    with pytest.raises(config.ProfileError, match=r"toy\.min_conversation: unknown key"):
        config.load_profile_as(assembled, "default", {"toy.min_conversation": 7})
