"""The declared stage graph: complete, ordered, and what it says about tweaks and modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hbpsych_utils.core import config
from hbpsych_utils.core.config import Section
from hbpsych_utils.pipeline import graph, profiles
from hbpsych_utils.pipeline.profiles import Profile

DEFAULT = profiles.load_profile("default")
SMOKE = profiles.load_profile("smoke")


def test_every_profile_key_is_read_by_a_stage() -> None:
    """Each field of each stage's section, and each top-level input, is declared read by some
    stage (so no value of a profile can silently do nothing in every mode)."""
    declared = {k for s in graph.SPECS.values() for r in s.reads for k in r.keys}
    for field, info in Profile.model_fields.items():
        if field in graph.ALWAYS_ALLOWED:
            continue
        model = info.annotation
        if isinstance(model, type) and issubclass(model, Section):
            missing = {f"{field}.{f}" for f in model.model_fields} - declared
            assert not missing, missing
        else:
            assert field in declared, field


def test_declared_keys_exist_and_inputs_come_from_earlier_stages() -> None:
    for name, spec in graph.SPECS.items():
        for read in spec.reads:
            for key in read.keys:
                graph.value_at(DEFAULT, key)  # raises KeyError for a key the profile lacks
        for i in spec.inputs:
            assert graph.STAGES.index(i.stage) < graph.STAGES.index(name), (name, i.stage)


def test_modes_resolve_from_the_profile() -> None:
    assert {graph.stage_mode(DEFAULT, s) for s in graph.STAGES[5:]} == {"paper", "replay"}
    assert graph.stage_mode(SMOKE, graph.HARNESS) == "live"
    live = profiles.load_profile("live")  # the one mixed run: the released harness check
    assert graph.stage_mode(live, graph.GRADING) == "live"
    assert graph.stage_mode(live, graph.HARNESS) == "replay"
    assert graph.stage_mode(DEFAULT, graph.SCREENING) == "replay"
    assert graph.stage_mode(DEFAULT, graph.CORPUS) is None


def test_upstream_follows_the_mode() -> None:
    assert graph.spec(graph.SCORES).upstream(DEFAULT) == []
    assert graph.spec(graph.SCORES).upstream(SMOKE) == [graph.SUBSET, graph.GENERATION,
                                                        graph.GRADING]
    assert graph.dependents([graph.JUDGES], DEFAULT) == [graph.FIGURES]
    assert graph.dependents([graph.CORPUS], DEFAULT) == [
        graph.REVIEW_ROUND1, graph.RECALL, graph.SUBSET, graph.GENERATION, graph.REFUSALS,
        graph.HARNESS, graph.FIGURES]  # 11 reads the rubrics of the released run's conversations
    assert graph.EXPLORER in graph.dependents([graph.CORPUS], SMOKE)


def test_keys_read_depend_on_the_mode() -> None:
    assert graph.keys_read(DEFAULT, graph.SCORES) == {
        "evaluation_mode": "paper", "scores.subsets": ["v1", "hard"],
        "scores.include_later": False}
    live = graph.keys_read(SMOKE, graph.SCORES)
    assert {"n_resamples", "scores.top_k", "seed"} <= set(live)
    assert "scores.include_later" not in live
    # 06 prices the grading the profile configures, in either mode
    assert "grading.judges" in graph.keys_read(DEFAULT, graph.GENERATION)


def test_a_tweak_no_stage_reads_is_explained() -> None:
    why = graph.unread_reason(DEFAULT, "scores.top_k")
    assert why is not None and "08_scores" in why and "live mode" in why
    assert "paper mode" in why and "point estimates" in why
    assert graph.unread_reason(SMOKE, "scores.top_k") is None
    assert graph.unread_reason(DEFAULT, "n_resamples") is None  # 11's replay bootstraps
    assert graph.unread_reason(DEFAULT, "judges.subset") is None
    assert graph.unread_reason(DEFAULT, "seed") is None  # 11's replay bootstrap is seeded
    llm = graph.unread_reason(DEFAULT, "llm.limits.openai.rpm")
    assert llm is not None and "calls a model" in llm and "06_generation paper" in llm
    assert graph.unread_reason(DEFAULT, "llm.prompt_caching") is None  # 06's cost plan
    later = graph.unread_reason(SMOKE, "scores.include_later")
    assert later is not None and "released matrices" in later
    local = profiles.load_profile("local")
    assert "not among the profile's notebooks" in str(graph.unread_reason(local, "judges.subset"))
    for key in ("description", "notebooks", "name"):
        assert graph.unread_reason(DEFAULT, key) is None
    # the analyses of 14 and several samples need a live run
    for key in ("analyses.subset", "analyses.length_penalty", "generation.samples"):
        why = str(graph.unread_reason(DEFAULT, key))
        assert "live mode" in why and "paper mode" in why, key
    assert graph.unread_reason(SMOKE, "analyses.subset") is None
    assert graph.unread_reason(SMOKE, "generation.samples") is None


def test_file_keys_are_the_keys_the_yaml_sets() -> None:
    assert graph.file_keys(DEFAULT) == ["name", "description", "seed", "ci_level", "n_resamples",
                                        "corpus.allow_partial", "corpus.invalid_records"]
    assert "evaluation_mode" in graph.file_keys(SMOKE)


def test_notebook_parameters_of_a_stage() -> None:
    values = graph.notebook_parameters(SMOKE, graph.GENERATION, "/out")
    assert values["mode"] == "live" and values["outputs_root"] == "/out"
    assert values["judges"] is None  # grading.judges as the profile sets it: the study's panel
    assert values["candidates"] == SMOKE.generation.candidates
    # generation declares the seed its further samples are drawn with, and reads it only when
    # it samples more than one reply per conversation
    assert values["seed"] == SMOKE.seed
    assert "seed" not in graph.keys_read(SMOKE, graph.GENERATION)
    sampled = profiles.load_profile("smoke", {"generation.samples": 3})
    assert graph.keys_read(sampled, graph.GENERATION)["seed"] == SMOKE.seed
    tweaked = profiles.load_profile("smoke", {"grading.judges": ["gpt-4.1-2025-04-14"]})
    assert graph.notebook_parameters(tweaked, graph.GENERATION, "/o")["judges"] == [
        "gpt-4.1-2025-04-14"]
    assert graph.parameter_names(graph.EXPLORER) == ["profile", "outputs_root", "mode"]


def test_an_old_per_section_mode_says_where_the_mode_went(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("grading:\n  mode: live\n")
    with pytest.raises(config.ProfileError, match=r"grading\.mode: the evaluation stages share "
                                                  "one mode: set evaluation_mode"):
        profiles.load_profile(path)


def test_undeclared_upstream_reads_are_refused(tmp_path: Path) -> None:
    from hbpsych_utils.pipeline.stage import Stage, UndeclaredInput

    stage = Stage("p", graph.JUDGES, tmp_path)
    with pytest.raises(UndeclaredInput, match=r"09_judges read 06_generation/responses\.jsonl"):
        stage.upstream(graph.GENERATION, graph.RESPONSES)
    assert stage.upstream_optional(graph.GRADING, graph.SCORES_TABLE) is None  # declared


def test_the_docs_show_the_graph_as_the_code_declares_it() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "pipeline.md").read_text("utf-8")
    shown = text.split("<!-- graph:start -->\n")[1].split("<!-- graph:end -->")[0]
    assert shown == graph.describe_markdown()


def test_keys_of_a_profile_file_that_no_stage_reads_are_listed(tmp_path: Path) -> None:
    from hbpsych_utils.runner import checks

    path = tmp_path / "paperish.yaml"
    path.write_text("corpus:\n  allow_partial: true\nscores:\n  top_k: 3\n"
                    "judges:\n  subset: hard\n")
    profile, unread = checks.load_for_run(path)
    assert profile.scores.top_k == 3
    assert len(unread) == 1 and unread[0].startswith("scores.top_k: 08_scores reads it "
                                                     "only in live mode")
    _, none = checks.load_for_run(path, {"evaluation_mode": "live"})
    assert none == []


def test_a_node_declares_its_section_and_its_model_together() -> None:
    import dataclasses

    explorer = graph.spec(graph.EXPLORER)
    assert (explorer.section, explorer.params) == (None, None)
    with pytest.raises(ValueError, match=r"stage 13_explorer: a profile section needs its model"):
        dataclasses.replace(explorer, section="explorer")
    assert all((s.section is None) == (s.params is None) for s in graph.SPECS.values())


def test_each_node_module_is_named_after_its_stage_so_the_graph_is_in_run_order() -> None:
    from hbpsych_utils.pipeline import metrics
    from hbpsych_utils.pipeline.nodes import NODES

    assert [node.__name__.rsplit(".", 1)[1] for node in NODES] == [f"s{s}" for s in graph.STAGES]
    assert list(graph.STAGES) == sorted(graph.STAGES)
    assert list(metrics.MODELS) == [s for s in graph.STAGES if s != graph.EXPLORER]


def test_a_node_imports_only_the_study_core_and_the_spec() -> None:
    """A node is a declaration: it reads nothing of the layers above, so the profile (core's
    top level and the nodes' sections) can be assembled before anything else is imported."""
    import ast

    from hbpsych_utils.pipeline.nodes import NODES

    for node in NODES:
        tree = ast.parse(Path(node.__file__ or "").read_text(encoding="utf-8"))
        found = {n.module for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("hbpsych")}
        assert found <= {"hbpsych_utils", "hbpsych_utils.core.config",
                         "hbpsych_utils.pipeline.spec"}, (node.__name__, found)
