"""Profiles: the shipped ones load; bad keys, types and files give errors naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hbpsych_utils.core import config


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", config.available_profiles())
def test_shipped_profiles_load(name: str) -> None:
    profile = config.load_profile(name)
    assert profile.name == name
    assert profile.description


def test_default_and_smoke_exist() -> None:
    assert {"default", "smoke"} <= set(config.available_profiles())
    assert "models" not in config.available_profiles()


def test_unknown_key_names_profile_key_and_expected(tmp_path: Path) -> None:
    p = write(tmp_path, "typo", "corpus:\n  allow_partal: true\n")
    with pytest.raises(config.ProfileError) as exc:
        config.load_profile(p)
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
        config.load_profile(write(tmp_path, "bad", text))


def test_missing_profile_lists_available() -> None:
    with pytest.raises(config.ProfileError) as exc:
        config.load_profile("no_such_profile")
    assert "no_such_profile" in str(exc.value) and "does not exist" in str(exc.value)
    assert "default" in str(exc.value)


def test_notebook_parameters_are_the_section_plus_run_keys(tmp_path: Path) -> None:
    profile = config.load_profile("smoke")
    values = config.notebook_parameters(profile, "01_corpus", tmp_path)
    assert values["profile"] == "smoke"
    assert values["outputs_root"] == str(tmp_path)
    assert values["seed"] == profile.seed
    assert values["max_conversations"] == profile.corpus.max_conversations
    assert config.section_name("11_harness_validation") == "harness_validation"
    assert "judges" not in values  # another section's values go only where they are asked


def test_notebook_06_gets_the_grading_panel_it_prices(tmp_path: Path) -> None:
    from hbpsych_utils import study
    from hbpsych_utils.pipeline import graph
    from hbpsych_utils.stages import s06_generation

    judge = study.JUDGE_PANEL[1]
    values = graph.notebook_parameters(config.load_profile("smoke"), graph.GENERATION,
                                       str(tmp_path))
    assert values["judges"] is None  # smoke's null judges: the study's panel, which 06 prices
    run = s06_generation.start({**values, "outputs_root": tmp_path})
    assert config.GradingParams(judges=run.value("judges")).judge_panel() == list(
        study.JUDGE_PANEL)
    tweaked = config.load_profile("smoke", {"grading.judges": [judge]})
    assert graph.notebook_parameters(tweaked, graph.GENERATION, str(tmp_path))["judges"] == [
        judge]
    assert values["candidates"] == config.load_profile("smoke").generation.candidates


@pytest.mark.parametrize("section", ["screening", "recall"])
def test_a_live_screen_without_a_model_fails_at_load(tmp_path: Path, section: str) -> None:
    p = write(tmp_path, "nomodel", f"{section}:\n  mode: live\n")
    with pytest.raises(config.ProfileError) as exc:
        config.load_profile(p)
    msg = str(exc.value)
    assert msg.startswith(f"profile 'nomodel' ({p}) is invalid:")
    assert f"{section}.model: mode is 'live' but no model is set" in msg
    with pytest.raises(config.ProfileError, match=rf"--set {section}.mode=\"live\"\) is inv"):
        config.load_profile("default", {f"{section}.mode": "live"})
    assert config.load_profile("default", {f"{section}.mode": "live",
                                           f"{section}.model": "gpt-4.1-2025-04-14"})
    # the same rule guards the stage of a notebook run by hand, without a profile
    params = config.Profile.model_fields[section].annotation(mode="live")
    assert config.unset_live_model(section, params).startswith(f"{section}.model: mode is")


@pytest.mark.parametrize("name", config.available_profiles())
def test_profile_models_are_in_the_registry(name: str) -> None:
    from hbpsych_utils.llm.models import profile_registry

    profile = config.load_profile(name)
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
    base = config.load_profile("default")
    tweaked = config.load_profile("default", {
        "seed": 123, "judges.subset": "hard", "llm.limits.openai.rpm": 10,
        "corpus.max_conversations": 5})
    assert (tweaked.seed, tweaked.judges.subset, tweaked.corpus.max_conversations) == (
        123, "hard", 5)
    assert tweaked.llm.limits == {"openai": {"rpm": 10}}
    assert tweaked.corpus.allow_partial is base.corpus.allow_partial is True  # kept from file
    assert tweaked.model_copy(update={
        "seed": base.seed, "judges": base.judges, "llm": base.llm, "corpus": base.corpus,
    }) == base
    assert config.load_profile("default") == base  # the file itself is untouched


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
        config.load_profile("default", overrides)


def test_applied_overrides_are_the_validated_values() -> None:
    overrides = config.parse_overrides(["seed=123", "corpus.max_conversations=7",
                                        "llm.max_cost=2"])
    profile = config.load_profile("default", overrides)
    assert config.applied_overrides(profile, overrides) == {
        "seed": 123, "corpus.max_conversations": 7, "llm.max_cost": 2.0}
    assert config.describe_overrides({"seed": 1, "judges.subset": "hard"}) == (
        'seed=1, judges.subset="hard"')
