"""The stages that call the engine (06 generation, 07 grading, 11 harness validation): their
metrics builders, their findings (every qualitative sentence tested both ways), the study's
defaults they resolve, and each stage run end to end — paper/replay on the released files,
live against the loopback provider simulator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import released_jsonl

from hbpsych_utils import study
from hbpsych_utils.core.config import GenerationParams, GradingParams, HarnessValidationParams
from hbpsych_utils.evaluation import panel
from hbpsych_utils.stages import s06_generation, s07_grading, s11_harness_validation
from hbpsych_utils.stages.base import ProfileRun

# ------------------------------------------------------------------------------ 06 findings

LIVE06 = {"mode": "live", "subset": "v1", "n_conversations": 12, "candidates": ["a", "b"],
          "n_responses": 24, "n_ok": 22, "n_refused": 1, "n_failed": 1, "spend_usd": 0.0123,
          "plan_est_cost_usd": 0.04, "decoding_sent": {}, "stopped_by_budget": False}


def text(sentences: list[str]) -> str:
    return " ".join(sentences)


def test_06_live_findings_state_refusals_and_failures_only_when_there_are_any() -> None:
    found = text(s06_generation.findings(LIVE06))
    assert "24 responses from 2 candidate(s) on 12 v1 conversations: 22 answered" in found
    assert "1 explicit refusal(s) were kept" in found and "No candidate refused" not in found
    assert "1 call(s) failed in transport" in found and "No call failed" not in found
    assert "Spend $0.0123 (plan: $0.0400)" in found
    assert "spend cap" not in found
    clean = text(s06_generation.findings({**LIVE06, "n_refused": 0, "n_failed": 0}))
    assert "No candidate refused." in clean and "No call failed." in clean
    assert "refusal(s) were kept" not in clean and "failed in transport" not in clean
    capped = text(s06_generation.findings({**LIVE06, "stopped_by_budget": True}))
    assert "spend cap (llm.max_cost) stopped the run" in capped


def test_06_paper_findings_name_the_anomalies_logged() -> None:
    spend = pd.Series({"x": 3.0, "y": 1.0}, name="usd")
    m = {"mode": "paper", "n_candidates_charged": 2, "spend_generate_usd": 4.0,
         "anomalies": {"call_failed": 1, "empty_response": 14}}
    found = text(s06_generation.findings(m, spend))
    assert "charged to 2 models for a total of **$4.00**; the most expensive was x ($3.00)." \
        in found
    assert "records 1 × call_failed, 14 × empty_response." in found
    assert "examined as refusals in notebook 10" in found
    quiet = text(s06_generation.findings({**m, "anomalies": {"call_failed": 1}}, spend))
    assert "notebook 10" not in quiet
    none = text(s06_generation.findings({**m, "anomalies": {}}, spend))
    assert "records no anomalies" in none and "notebook 10" not in none


def test_06_metrics_from_a_responses_table() -> None:
    responses = pd.DataFrame({
        "model": ["a", "a", "b", "b"], "prompt_id": ["p1", "p2", "p1", "p2"],
        "status": ["ok", "refused", "ok", "failed"], "refusal": [False, True, False, False],
        "config": ['{"temperature": 0.0}', '{"temperature": 0.0}', '{"max_tokens": 5}',
                   '{"max_tokens": 5}'],
    })
    params = GenerationParams(mode="live", candidates=["a", "b"])
    m = s06_generation.live_metrics(params, ["p1", "p2"], responses, spend=0.1234567,
                                    plan_est_cost=1.0000004, stopped_by_budget=False)
    assert (m["n_responses"], m["n_ok"], m["n_refused"], m["n_failed"]) == (4, 2, 1, 1)
    assert m["n_conversations"] == 2 and m["candidates"] == ["a", "b"]
    assert m["spend_usd"] == 0.123457 and m["plan_est_cost_usd"] == 1.0
    assert m["decoding_sent"] == {"a": {"temperature": 0.0}, "b": {"max_tokens": 5}}


# ------------------------------------------------------------------------------ 07 findings

LIVE07 = {"mode": "live", "judges": ["j1", "j2", "j3"], "n_criteria_graded": 1884,
          "n_recovered": 4, "n_reasked": 5, "n_excluded": 4, "n_replies_not_graded": 0,
          "n_scores": 140, "n_unscored": 4}


def test_07_live_findings_report_reasks_and_exclusions_only_when_there_are_any() -> None:
    found = text(s07_grading.findings(LIVE07, max_reasks=3))
    assert "1,884 criterion verdicts from 3 judge(s)." in found
    assert "4 verdict(s) were recovered from malformed JSON" in found
    assert "5 criterion verdict(s) needed a re-ask." in found
    assert "4 verdict(s) were still missing after 3 re-ask(s) and were excluded" in found
    assert "140 (judge, candidate, conversation) scores; 4 left unscored" in found
    assert "not graded" not in found
    clean = text(s07_grading.findings({**LIVE07, "n_recovered": 0, "n_reasked": 0,
                                       "n_excluded": 0, "n_unscored": 0}))
    assert "none needed recovery" in clean and "No criterion needed a re-ask." in clean
    assert "No verdict was excluded." in clean and "none left unscored" in clean
    assert "re-ask(s)" not in clean and "left unscored because" not in clean
    failed = text(s07_grading.findings({**LIVE07, "n_replies_not_graded": 2}))
    assert "2 reply(ies) were not graded because their generation failed." in failed


def test_07_paper_findings() -> None:
    m = {"mode": "paper", "spend_grade_usd": 10.0,
         "spend_by_judge": {study.JUDGE_PANEL[0]: 6.0, "other-judge": 4.0},
         "anomalies": {"grade_fallback": 5, "grade_no_verdict": 2}, "n_no_verdict": 2}
    found = text(s07_grading.findings(m))
    assert f"({study.display_name(study.JUDGE_PANEL[0])}: $6.00, other-judge: $4.00)" in found
    assert "records 5 × grade_fallback, 2 × grade_no_verdict." in found
    assert "2 verdict(s) were never obtained" in found
    clean = text(s07_grading.findings({**m, "anomalies": {}, "n_no_verdict": 0}))
    assert "records no anomalies" in clean and "Every verdict was eventually obtained." in clean
    assert "never obtained" not in clean


def test_07_judges_default_to_the_study_panel() -> None:
    assert GradingParams().judges is None
    assert GradingParams().judge_panel() == list(study.JUDGE_PANEL)
    assert GradingParams(judges=["x"]).judge_panel() == ["x"]
    assert GradingParams(judges=[]).judge_panel() == []


def test_07_metrics_from_a_panel_run() -> None:
    verdicts = pd.DataFrame({
        "judge": ["j", "j", "j", "k"], "candidate": "c", "prompt_id": ["p", "p", "q", "p"],
        "criterion_index": [0, 1, 0, 0], "criteria_met": [True, None, False, True],
        "recovered": [True, False, False, False], "excluded": [False, True, False, False],
        "attempts": [1, 4, 2, 1], "reason": ["recovered", "no_verdict", "parsed", "parsed"],
    })
    run = panel.PanelRun(verdicts, pd.DataFrame({"candidate": ["c"], "prompt_id": ["r"],
                                                 "status": ["failed"]}),
                         Counter({1: 4, 2: 2, 3: 1, 4: 1}))
    scores = pd.DataFrame({"score": [float("nan"), 0.0, 1.0]})
    census = run.census()
    m = s07_grading.live_metrics(GradingParams(mode="live"), ["j", "k"], "abc", run, scores,
                                 census, 1.5)
    assert m["judges"] == ["j", "k"] and m["grader_template_sha256"] == "abc"
    assert (m["n_criteria_graded"], m["n_recovered"], m["n_reasked"], m["n_excluded"]) == (
        4, 1, 2, 1)
    assert (m["n_replies_not_graded"], m["n_scores"], m["n_unscored"]) == (1, 2, 1)
    assert m["calls_by_attempt"] == {"1": 4, "2": 2, "3": 1, "4": 1}
    assert m["census"]["j"] == {"criteria": 3, "verdicts": 2, "recovered": 1, "reasked": 2,
                                "excluded": 1, "call_failed": 0}
    assert m["ledger_cost_usd"] == 1.5 and m["temperature"] == 0.0
    assert list(m)[:5] == ["mode", "judges", "temperature", "response_schema",
                           "grader_template_sha256"]


# ------------------------------------------------------------------------------ 11 findings

REPLAY11 = {"mode": "replay", "n_scored": 1000, "clipped_mean": 0.1574, "bootstrap_std": 0.0089,
            "published": None, "delta": None, "published_source": "", "settings": {}}


def test_11_difference_in_bootstrap_sds_only_with_a_published_figure() -> None:
    found = text(s11_harness_validation.findings(REPLAY11))
    assert "The released GPT-4.1 run scored 1,000" in found and "**0.1574**" in found
    assert "No published figure is set" in found and "standard deviations" not in found
    pub = {**REPLAY11, "published": 0.16, "delta": 0.1574 - 0.16, "published_source": "paper"}
    found = text(s11_harness_validation.findings(pub))
    assert "The published figure is 0.1600 (paper): a difference of -0.0026" in found
    assert f"{abs(0.1574 - 0.16) / 0.0089:.1f} bootstrap standard deviations" in found
    assert "No published figure" not in found
    flat = text(s11_harness_validation.findings({**pub, "bootstrap_std": 0.0}))
    assert "a difference of -0.0026." in flat and "standard deviations" not in flat
    unsourced = text(s11_harness_validation.findings({**pub, "published_source": ""}))
    assert "(source not given)" in unsourced


def test_11_comparison_with_the_released_run_only_on_common_conversations() -> None:
    live = {**REPLAY11, "mode": "live", "n_common_with_released": 4,
            "mean_difference_vs_released": -0.0598}
    found = text(s11_harness_validation.findings(live))
    assert found.startswith("This live run scored")
    assert "On the 4 conversations the released run also scored" in found
    assert "-0.0598 on average" in found
    none = text(s11_harness_validation.findings({**live, "n_common_with_released": 0,
                                                 "mean_difference_vs_released": None}))
    assert "On the" not in none and "are not compared" in none
    assert "compared" not in text(s11_harness_validation.findings(REPLAY11))


def test_11_models_default_to_the_study_harness_model() -> None:
    params = HarnessValidationParams()
    assert params.candidate is None and params.judge is None
    assert s11_harness_validation.settings_of(params) == {
        "candidate": study.HARNESS_MODEL, "judge": study.HARNESS_MODEL,
        "temperature": study.REFERENCE_TEMPERATURE, "max_tokens": study.GRADER_MAX_TOKENS}
    other = HarnessValidationParams(candidate="c", judge="j")
    assert s11_harness_validation.settings_of(other)["candidate"] == "c"
    assert s11_harness_validation.settings_of(other)["judge"] == "j"


# ------------------------------------------------------------------ paper/replay on the release

@pytest.fixture
def paper_run(tmp_path: Path, mirror: Path) -> ProfileRun:
    return ProfileRun(profile="t", outputs_root=tmp_path)


def test_06_and_07_paper_from_the_released_logs(paper_run: ProfileRun) -> None:
    spend = released_jsonl("run_spend")
    errors = released_jsonl("run_errors")
    gen = s06_generation.run(paper_run, GenerationParams())
    by_model: dict[str, float] = {}
    for s in spend:
        if s["phase"] == "generate":
            by_model[s["who"]] = by_model.get(s["who"], 0.0) + s["cost"]
    assert gen.metrics["n_candidates_charged"] == len(by_model)
    assert gen.metrics["spend_generate_usd"] == pytest.approx(sum(by_model.values()), abs=1e-4)
    kinds = Counter(e["kind"] for e in errors if e["phase"] == "generate")
    assert gen.metrics["anomalies"] == dict(sorted(kinds.items()))
    written = json.loads(gen.stage.path("metrics.json").read_text())
    assert written == gen.metrics
    table = pd.read_csv(gen.stage.path("spend_by_candidate.csv"))
    assert table.columns.tolist() == ["candidate", "usd"]
    assert table["candidate"].iloc[0] == max(by_model, key=by_model.get)
    assert "most expensive was " + max(by_model, key=by_model.get) in gen.findings_markdown()

    grade = s07_grading.run(paper_run, GradingParams())
    no_verdict = [e for e in errors if e["kind"] == "grade_no_verdict"]
    assert grade.metrics["n_no_verdict"] == len(no_verdict)
    assert grade.views["Verdicts never obtained"]["prompt_id"].tolist() == [
        e["prompt_id"] for e in no_verdict]
    assert grade.metrics["spend_grade_usd"] == pytest.approx(
        sum(s["cost"] for s in spend if s["phase"] == "grade"), abs=1e-4)
    assert set(grade.metrics["spend_by_judge"]) == {
        s["who"] for s in spend if s["phase"] == "grade"}
    assert sorted(p.name for p in grade.stage.dir.iterdir()) == [
        "anomalies.csv", "metrics.json", "spend_by_judge.csv", "stage.json"]


def test_11_replay_from_the_released_scores(paper_run: ProfileRun) -> None:
    scores = [x["score"] for x in released_jsonl("harness_scores")]
    result = s11_harness_validation.run(
        paper_run, HarnessValidationParams(published=0.2, published_source="test"))
    m = result.metrics
    assert m["n_scored"] == len(scores)
    assert m["clipped_mean"] == pytest.approx(min(1, max(0, sum(scores) / len(scores))))
    assert m["delta"] == pytest.approx(m["clipped_mean"] - 0.2)
    assert m["settings"]["candidate"] == study.HARNESS_MODEL
    assert "n_common_with_released" not in m and result.tables == {}
    assert "bootstrap standard deviations" in result.findings_markdown()


# ------------------------------------------------------------------ live against the simulator

@pytest.fixture
def live_run(tmp_path: Path, mirror: Path) -> ProfileRun:
    """A run folder holding what 01 and 05 would have written: the released partial corpus and
    a three-conversation v1 subset, every model call going to the simulator."""
    from hbpsych_utils.construction import corpus, subset
    from hbpsych_utils.core import sources

    path = sources.fetch("healthbench_oss")
    report = corpus.load_corpus(path)
    root = tmp_path / "out" / "t"
    (root / "01_corpus").mkdir(parents=True)
    (root / "01_corpus" / corpus.SOURCE_RECORD).write_text(json.dumps({
        "path": str(path), "sha256": sources.sha256_file(path), "source": "healthbench_oss",
        "options": {"invalid_records": "error", "max_conversations": None},
        "n_conversations": len(report.conversations), "ids_sha256": corpus.ids_hash(report.ids),
    }))
    ids = sorted(report.ids)[:3]
    (root / "05_subset").mkdir()
    (root / "05_subset" / "s.json").write_text(json.dumps({"prompt_ids": ids}))
    (root / "05_subset" / subset.INDEX).write_text(json.dumps({"v1": "s.json"}))
    return ProfileRun(profile="t", outputs_root=tmp_path / "out",
                      llm={"simulator": True, "mode": "sync"})


def test_generation_grading_and_harness_live(live_run: ProfileRun) -> None:
    from hbpsych_utils.evaluation import generation

    cands = list(study.JUDGE_PANEL[:2])
    gen = s06_generation.run(live_run, GenerationParams(mode="live", candidates=cands))
    m = gen.metrics
    assert (m["n_conversations"], m["n_responses"], m["n_ok"]) == (3, 6, 6)
    assert set(m["decoding_sent"]) == set(cands)
    assert m["plan_est_cost_usd"] > 0 and not m["stopped_by_budget"]
    back = generation.read_responses(gen.stage.path("responses.jsonl"))
    assert len(back) == 6 and set(back["model"]) == set(cands)
    assert gen.views["Cost plan (estimated before any call was sent)"].loc["total", "calls"] == 6

    grade = s07_grading.run(live_run, GradingParams(mode="live"))
    g = grade.metrics
    assert g["judges"] == list(study.JUDGE_PANEL)  # None resolved to the study's panel
    verdicts = panel.read_verdicts(grade.stage.path("verdicts.csv"))
    assert len(verdicts) == g["n_criteria_graded"] == g["calls_by_attempt"]["1"]
    assert set(verdicts["judge"]) == set(study.JUDGE_PANEL)
    assert g["n_scores"] + g["n_unscored"] == 6 * len(study.JUDGE_PANEL)
    assert set(grade.tables) == {"verdicts.csv", "scores.csv", "census.csv"}

    again = s06_generation.run(live_run, GenerationParams(mode="live", candidates=cands))
    assert again.metrics["spend_usd"] == 0  # a re-run is answered from the run's store
    assert generation.read_responses(again.stage.path("responses.jsonl"))["cached"].all()

    harness = s11_harness_validation.run(
        live_run, HarnessValidationParams(mode="live", n_conversations=2))
    h = harness.metrics
    assert (h["mode"], h["n_scored"]) == ("live", 2)
    assert h["settings"]["judge"] == study.HARNESS_MODEL
    released = {x["prompt_id"]: x["score"] for x in released_jsonl("harness_scores")}
    both = harness.tables["live_vs_released.csv"]
    assert h["n_common_with_released"] == len(both) == 2
    diff = [s - released[p] for p, s in zip(both.prompt_id, both.score, strict=True)]
    assert h["mean_difference_vs_released"] == pytest.approx(sum(diff) / len(diff))
    assert "On the 2 conversations the released run also scored" in harness.findings_markdown()
