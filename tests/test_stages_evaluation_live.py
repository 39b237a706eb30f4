"""The stages that call the engine (06 generation, 07 grading, 11 harness validation): their
metrics builders, their findings (every qualitative sentence tested both ways), the study's
defaults they resolve, what each section shows where its mode cannot produce it, and each
stage run end to end — paper/replay on the released files, live against the loopback provider
simulator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from conftest import chapter_parameters, record_released_corpus, released_jsonl
from pydantic import ValidationError

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.evaluation import panel
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as typed
from hbpsych_utils.pipeline.metrics import (
    GenerationLiveMetrics,
    GenerationPaperMetrics,
    GradingLiveMetrics,
    GradingPaperMetrics,
    HarnessMetrics,
    LengthDistribution,
    ReleasedBreakdown,
    ReleasedLength,
    TagScore,
)
from hbpsych_utils.pipeline.profiles import GradingParams, HarnessValidationParams
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table
from hbpsych_utils.stages import base, s06_generation, s07_grading, s11_harness_validation
from hbpsych_utils.stages.base import StageRun, run_chapter, shown


def text(sentences: Findings) -> str:
    return str(sentences)


# ------------------------------------------------------------------------------ 06 findings

LIVE06 = GenerationLiveMetrics(
    mode="live", subset="v1", n_conversations=12, candidates=["a", "b"], n_responses=24, n_ok=22,
    n_refused=1, n_failed=1, spend_usd=0.0123, plan_est_cost_usd=0.04, decoding_sent={},
    stopped_by_budget=False)


def test_06_live_findings_state_refusals_and_failures_only_when_there_are_any() -> None:
    found = text(s06_generation.findings(LIVE06))
    assert ("24 responses from 2 candidates on 12 HealthBench-Psych v1 conversations: 22 "
            "answered") in found
    assert "1 explicit refusal was kept" in found and "No candidate refused" not in found
    assert "1 call failed in transport and is left" in found and "No call failed" not in found
    assert "Spend $0.0123 (plan: $0.0400)" in found
    assert "spend cap" not in found
    clean = text(s06_generation.findings(LIVE06.model_copy(update={"n_refused": 0,
                                                                   "n_failed": 0})))
    assert "No candidate refused." in clean and "No call failed." in clean
    assert "refusal was kept" not in clean and "failed in transport" not in clean
    capped = text(s06_generation.findings(LIVE06.model_copy(update={"stopped_by_budget": True})))
    assert "spend cap (llm.max_cost) stopped the run" in capped


def test_06_and_07_say_when_earlier_attempts_paid_for_answers_they_reused() -> None:
    """After an interrupted run is run again, a chapter's ``spend_usd`` is what this attempt
    paid; what earlier attempts in the run folder paid for the answers it reused is said beside
    it, with the total. A fresh run (nothing earlier) reads as before."""
    assert "This attempt" not in text(s06_generation.findings(
        LIVE06.model_copy(update={"spend_earlier_attempts_usd": 0.0})))
    resumed = text(s06_generation.findings(
        LIVE06.model_copy(update={"spend_earlier_attempts_usd": 0.0077})))
    assert ("This attempt spent $0.0123 (plan: $0.0400); earlier attempts in this run folder "
            "paid $0.0077 for the replies it reused from the store, so the replies cost "
            "$0.0200 in all.") in resumed
    assert "Grading paid $1.2119;" in text(s07_grading.findings(
        _live07(spend_earlier_attempts_usd=0.0)))
    graded = text(s07_grading.findings(_live07(spend_earlier_attempts_usd=0.7881)))
    assert ("This attempt of the grading paid $1.2119; earlier attempts in this run folder paid "
            "$0.7881 for the answers it reused from the store, so its answers cost $2.0000 in "
            "all;") in graded


def test_06_paper_findings_name_the_anomalies_logged() -> None:
    spend = s06_generation.ReleasedGeneration(pd.Series({"x": 3.0, "y": 1.0}, name="usd"),
                                              pd.DataFrame())
    m = GenerationPaperMetrics(mode="paper", n_candidates_charged=2, spend_generate_usd=4.0,
                               anomalies={"call_failed": 1, "empty_response": 14})
    found = text(s06_generation.findings(m, spend))
    assert "charged to 2 models for a total of **$4.00**; the most expensive was x ($3.00)." \
        in found
    assert "records 1 × call_failed, 14 × empty_response." in found
    assert "examined as refusals in notebook 10" in found
    quiet = text(s06_generation.findings(m.model_copy(update={"anomalies": {"call_failed": 1}}),
                                         spend))
    assert "notebook 10" not in quiet
    none = text(s06_generation.findings(m.model_copy(update={"anomalies": {}}), spend))
    assert "records no anomalies" in none and "notebook 10" not in none
    assert text(s06_generation.findings(m)).startswith(
        "Generation was charged to 2 models for a total of **$4.00**.")


def test_06_metrics_from_a_responses_table() -> None:
    table = pd.DataFrame({
        "model": ["a", "a", "b", "b"], "prompt_id": ["p1", "p2", "p1", "p2"],
        "status": ["ok", "refused", "ok", "failed"], "refusal": [False, True, False, False],
        "config": ['{"temperature": 0.0}', '{"temperature": 0.0}', '{"max_tokens": 5}',
                   '{"max_tokens": 5}'],
    })
    convs = [Conversation("p1", (), ()), Conversation("p2", (), ())]
    source = s06_generation.Conversations("v1", ["a", "b"], convs, 2, convs)
    generated = s06_generation.Responses(table, pd.DataFrame(), plan_est_cost=1.0000004,
                                         spend=0.1234567, stopped_by_budget=False,
                                         paid_earlier=0.5)
    m = s06_generation.metrics(s06_generation.Inputs("live", source, None, None), generated,
                               None)
    assert m.spend_earlier_attempts_usd == 0.5
    assert isinstance(m, GenerationLiveMetrics)
    assert (m.n_responses, m.n_ok, m.n_refused, m.n_failed) == (4, 2, 1, 1)
    assert m.n_conversations == 2 and m.candidates == ["a", "b"]
    assert m.spend_usd == 0.123457 and m.plan_est_cost_usd == 1.0
    assert m.decoding_sent == {"a": {"temperature": 0.0}, "b": {"max_tokens": 5}}
    # what metrics.json holds round-trips through the stage's typed model
    assert typed.parse(graph.GENERATION, base.metrics_json(m)) == m


def test_06_metrics_and_findings_with_samples() -> None:
    """With several replies per conversation the first reply's counts stay where they were and
    the further samples are counted apart (and said in the findings)."""
    table = pd.DataFrame({
        "model": ["a"] * 6, "prompt_id": ["p1", "p2"] * 3,
        "status": ["ok", "ok", "ok", "refused", "failed", "ok"],
        "refusal": [False, False, False, True, False, False], "config": ["{}"] * 6,
        "sample": [0, 0, 1, 1, 2, 2], "seed": [None, None, 8, 8, 9, 9]})
    convs = [Conversation("p1", (), ()), Conversation("p2", (), ())]
    source = s06_generation.Conversations("v1", ["a"], convs, 2, convs)
    m = s06_generation.metrics(s06_generation.Inputs("live", source, None, None),
                               s06_generation.Responses(table, pd.DataFrame(),
                                                        plan_est_cost=1.0, spend=0.5,
                                                        stopped_by_budget=False,
                                                        paid_earlier=0.0), None)
    assert (m.n_responses, m.n_ok, m.n_refused, m.n_failed) == (2, 2, 0, 0)
    assert (m.samples, m.n_sample_responses, m.n_sample_ok, m.n_sample_refused,
            m.n_sample_failed) == (3, 4, 2, 1, 1)
    found = text(s06_generation.findings(m, None))
    assert "answered each conversation 3 times: 4 further replies (2 answered, 1 refused, " \
           "1 failed)" in found
    assert typed.parse(graph.GENERATION, base.metrics_json(m)) == m


def test_06_paper_metrics_from_the_released_logs() -> None:
    spend = pd.Series({"x": 3.00004, "y": 1.0}, name="usd").rename_axis("candidate")
    anomalies = pd.DataFrame({"call_failed": [1, 0], "empty_response": [0, 2]},
                             index=pd.Index(["x", "y"], name="model"))
    data = s06_generation.Inputs("paper", None, s06_generation.ReleasedLogs(pd.DataFrame(), []),
                                 None)
    m = s06_generation.metrics(data, None, s06_generation.ReleasedGeneration(spend, anomalies))
    assert m == GenerationPaperMetrics(mode="paper", n_candidates_charged=2,
                                       spend_generate_usd=4.0,
                                       anomalies={"call_failed": 1, "empty_response": 2})
    empty = s06_generation.metrics(data, None, s06_generation.ReleasedGeneration(
        spend, pd.DataFrame()))
    assert empty.anomalies == {}


# ------------------------------------------------------------------------------ 07 findings

def _live07(**update: Any) -> GradingLiveMetrics:
    values: dict[str, Any] = {
        "mode": "live", "judges": ["j1", "j2", "j3"], "temperature": 0.0,
        "response_schema": False, "grader_template_sha256": "abc", "n_criteria_graded": 1884,
        "n_recovered": 4, "n_reasked": 5, "n_excluded": 4, "n_replies_not_graded": 0,
        "n_scores": 140, "n_unscored": 4, "calls_by_attempt": {"1": 1884}, "census": {},
        "ledger_cost_usd": 1.0, "prompt_caching": True, "spend_usd": 1.2119,
        "input_tokens": 2000, "cache_read_tokens": 500, "cache_write_tokens": 0,
        "spend_by_judge": {}}
    return GradingLiveMetrics(**{**values, **update})


def test_07_live_findings_report_reasks_and_exclusions_only_when_there_are_any() -> None:
    found = text(s07_grading.findings(_live07(), max_reasks=3))
    assert "1,884 criterion verdicts from the three-judge panel (j1, j2 and j3)." in found
    assert "4 verdicts were recovered from malformed JSON" in found
    assert "5 criterion verdicts needed a re-ask." in found
    assert "4 verdicts were still missing after 3 re-asks and excluded" in found
    assert "140 (judge, candidate, conversation) scores; 4 left unscored" in found
    assert "not graded" not in found
    clean = text(s07_grading.findings(_live07(n_recovered=0, n_reasked=0, n_excluded=0,
                                              n_unscored=0)))
    assert "none needed recovery" in clean and "No criterion needed a re-ask." in clean
    assert "No verdict was excluded." in clean and "none left unscored" in clean
    assert "re-asks and excluded" not in clean and "left unscored because" not in clean
    failed = text(s07_grading.findings(_live07(n_replies_not_graded=2)))
    assert "2 replies were not graded because their generation failed." in failed
    assert "further samples" not in found
    sampled = text(s07_grading.findings(_live07(samples=3, n_sample_scores=280,
                                                n_sample_unscored=8)))
    assert ("The further samples (3 replies per conversation in all) have 280 scores and 8 "
            "left unscored.") in sampled


def test_07_live_findings_say_what_grading_paid_and_what_the_caches_served() -> None:
    found = text(s07_grading.findings(_live07()))
    assert ("Grading paid $1.2119; 500 of its 2,000 prompt tokens (25.0%) were read from the "
            "providers' prompt caches") in found
    cold = text(s07_grading.findings(_live07(cache_read_tokens=0)))
    assert "no prompt token was read from a provider's prompt cache" in cold


def test_07_paper_findings() -> None:
    m = GradingPaperMetrics(
        mode="paper", grader_template_sha256="abc", spend_grade_usd=10.0,
        spend_by_judge={study.JUDGE_PANEL[0]: 6.0, "other-judge": 4.0},
        anomalies={"grade_fallback": 5, "grade_no_verdict": 2}, n_no_verdict=2)
    found = text(s07_grading.findings(m))
    assert f"({study.display_name(study.JUDGE_PANEL[0])}: $6.00, other-judge: $4.00)" in found
    assert "records 5 × grade_fallback, 2 × grade_no_verdict." in found
    assert "2 verdicts were never obtained" in found
    clean = text(s07_grading.findings(m.model_copy(update={"anomalies": {},
                                                           "n_no_verdict": 0})))
    assert "records no anomalies" in clean and "Every verdict was eventually obtained." in clean
    assert "never obtained" not in clean


def test_07_judges_default_to_the_study_panel() -> None:
    assert GradingParams().judges is None
    assert GradingParams().judge_panel() == list(study.JUDGE_PANEL)
    assert GradingParams(judges=["x"]).judge_panel() == ["x"]
    with pytest.raises(ValidationError, match="an empty panel"):
        GradingParams(judges=[])


def test_07_metrics_from_a_panel_run(tmp_path: Path) -> None:
    verdicts = pd.DataFrame({
        "judge": ["j", "j", "j", "k"], "candidate": "c", "prompt_id": ["p", "p", "q", "p"],
        "criterion_index": [0, 1, 0, 0], "criteria_met": [True, None, False, True],
        "recovered": [True, False, False, False], "excluded": [False, True, False, False],
        "attempts": [1, 4, 2, 1], "reason": ["recovered", "no_verdict", "parsed", "parsed"],
    })
    graded = panel.PanelRun(verdicts, pd.DataFrame({"candidate": ["c"], "prompt_id": ["r"],
                                                    "status": ["failed"]}),
                            Counter({1: 4, 2: 2, 3: 1, 4: 1}),
                            spend={"k": {"spend_usd": 0.1000004, "input_tokens": 10,
                                         "cache_read_tokens": 2, "cache_write_tokens": 0}})
    template = s07_grading.GraderTemplate("<<conversation>> <<rubric_item>>", "abc")
    found = s07_grading.PanelVerdicts(["j", "k"], graded, {}, 1.5, paid_earlier=0.25,
                                      temperature=0.0, response_schema=False,
                                      prompt_caching=True)
    scores = s07_grading.Scores(pd.DataFrame({"score": [float("nan"), 0.0, 1.0]}))
    data = s07_grading.Inputs("live", s07_grading.Replies(pd.DataFrame(), {}, ["j", "k"]), None)
    m = s07_grading.metrics(data, template, found, scores)
    assert (m.spend_usd, m.spend_earlier_attempts_usd) == (0.1, 0.25)
    assert isinstance(m, GradingLiveMetrics)
    assert m.judges == ["j", "k"] and m.grader_template_sha256 == "abc"
    assert (m.n_criteria_graded, m.n_recovered, m.n_reasked, m.n_excluded) == (4, 1, 2, 1)
    assert (m.n_replies_not_graded, m.n_scores, m.n_unscored) == (1, 2, 1)
    assert m.calls_by_attempt == {"1": 4, "2": 2, "3": 1, "4": 1}
    assert m.census["j"].model_dump() == {"criteria": 3, "verdicts": 2, "recovered": 1,
                                          "reasked": 2, "excluded": 1, "call_failed": 0}
    assert m.ledger_cost_usd == 1.5 and m.temperature == 0.0
    assert m.spend_by_judge["k"].spend_usd == 0.1 and m.cache_read_tokens == 2
    written = base.metrics_json(m)
    assert list(written)[:5] == ["mode", "judges", "temperature", "response_schema",
                                 "grader_template_sha256"]
    assert typed.parse(graph.GRADING, written) == m


def test_07_live_only_sections_are_not_executed_in_paper_mode() -> None:
    released = s07_grading.ReleasedGrading(
        pd.DataFrame({"ts": [None], "phase": ["grade"], "who": ["j"], "cost": [1.0]}), [])
    data = s07_grading.Inputs("paper", None, released)
    verdicts = s07_grading.panel_verdicts(data.replies, None, None, temperature=0.0,
                                          max_tokens=1, max_reasks=0, response_schema=False)
    assert verdicts is None  # nothing is graded: the released logs are read instead
    for section in (s07_grading.census(verdicts), s07_grading.conversation_scores(verdicts),
                    s07_grading.spend(verdicts)):
        assert section is None
    assert isinstance(shown(s07_grading.released_spend(data.released)), Table)
    assert "no anomalies" in shown(released)._repr_html_()
    assert "not released" in str(shown(data))


# ------------------------------------------------------------------------------ 11 findings

REPLAY11 = HarnessMetrics(
    mode="replay", n_scored=1000, clipped_mean=0.1574, bootstrap_std=0.0089, published=None,
    delta=None, published_source="",
    settings=s11_harness_validation.RELEASED_SETTINGS)


def test_11_difference_in_bootstrap_sds_only_with_a_published_figure() -> None:
    found = text(s11_harness_validation.findings(REPLAY11))
    assert "The released GPT-4.1 run scored 1,000" in found and "**0.1574**" in found
    assert "No published figure is set" in found and "standard deviations" not in found
    pub = REPLAY11.model_copy(update={"published": 0.16, "delta": 0.1574 - 0.16,
                                      "published_source": "paper"})
    found = text(s11_harness_validation.findings(pub))
    assert "The published figure is 0.1600 (paper): a difference of -0.0026" in found
    assert f"{abs(0.1574 - 0.16) / 0.0089:.1f} bootstrap standard deviations" in found
    assert "No published figure" not in found
    flat = text(s11_harness_validation.findings(pub.model_copy(update={"bootstrap_std": 0.0})))
    assert "a difference of -0.0026." in flat and "standard deviations" not in flat
    unsourced = text(s11_harness_validation.findings(
        pub.model_copy(update={"published_source": ""})))
    assert "(source not given)" in unsourced


def test_11_released_axes_named_only_above_the_slice_threshold() -> None:
    tag = dict(ci_low=0.0, ci_high=1.0, bootstrap_std=0.1)
    b = ReleasedBreakdown(n_lines=1000, n_with_rubric=193, by_tag={
        "axis:accuracy": TagScore(n=143, clipped_mean=0.36, **tag),
        "axis:completeness": TagScore(n=168, clipped_mean=0.0, **tag),
        "axis:instruction_following": TagScore(n=3, clipped_mean=-0.0, **tag),
        "theme:hedging": TagScore(n=26, clipped_mean=0.9, **tag)})
    lm = ReleasedLength(variant="hard", penalty=0.0392, n=1000, clipped_mean=0.1574,
                        adjusted_mean=0.1689, chars=LengthDistribution(
                            n=1000, mean=1854.3, min=4, p25=1228, median=1721, p75=2364.75,
                            max=6218))
    m = REPLAY11.model_copy(update={"released_breakdown": b, "released_length": lm})
    found = text(s11_harness_validation.findings(m, min_n=5))
    assert ("on the 193 of its 1,000 conversations whose rubrics this run's corpus holds, the "
            "released GPT-4.1 run scores lowest on Completeness (0.000, n = 168) and highest on "
            "Accuracy (0.360, n = 143)") in found
    assert "Instruction following" not in found  # 3 conversations: below the threshold
    assert "length-adjusted score is 0.1689 against a raw 0.1574" in found
    assert "median 1,721 characters" in found
    few = text(s11_harness_validation.findings(m, min_n=150))  # one axis left: no comparison
    assert "lowest on" not in few and "length-adjusted" in few


def test_11_comparison_with_the_released_run_only_on_common_conversations() -> None:
    live = REPLAY11.model_copy(update={"mode": "live", "n_common_with_released": 4,
                                       "mean_difference_vs_released": -0.0598})
    found = text(s11_harness_validation.findings(live))
    assert found.startswith("This live run scored")
    assert "On the 4 conversations the released run also scored" in found
    assert "-0.0598 on average" in found
    none = text(s11_harness_validation.findings(live.model_copy(update={
        "n_common_with_released": 0, "mean_difference_vs_released": None})))
    assert "On the" not in none and "are not compared" in none
    assert "compared" not in text(s11_harness_validation.findings(REPLAY11))


def test_11_models_default_to_the_study_harness_model() -> None:
    params = HarnessValidationParams()
    assert params.candidate is None and params.judge is None
    given = {"temperature": params.temperature, "max_tokens": params.max_tokens}
    assert s11_harness_validation.settings(candidate=None, judge=None, **given).model_dump() == {
        "candidate": study.HARNESS_MODEL, "judge": study.HARNESS_MODEL,
        "temperature": study.REFERENCE_TEMPERATURE, "max_tokens": study.GRADER_MAX_TOKENS}
    other = s11_harness_validation.settings(candidate="c", judge="j", **given)
    assert (other.candidate, other.judge) == ("c", "j")
    # the released run's settings are the study's defaults of the section
    assert s11_harness_validation.RELEASED_SETTINGS == s11_harness_validation.settings(
        candidate=None, judge=None, **given)


# ------------------------------------------------------------------ paper/replay on the release

@pytest.fixture
def paper_root(tmp_path: Path, mirror: Path) -> Path:
    """Outputs root of a run whose 01_corpus recorded the registry's partial corpus."""
    record_released_corpus(tmp_path / "t")
    return tmp_path


def test_06_and_07_paper_from_the_released_logs(paper_root: Path) -> None:
    spend = released_jsonl("run_spend")
    errors = released_jsonl("run_errors")
    gen = run_chapter(graph.GENERATION, chapter_parameters(graph.GENERATION, paper_root,
                                                           profile="t"))
    assert isinstance(gen, GenerationPaperMetrics)
    by_model: dict[str, float] = {}
    for s in spend:
        if s["phase"] == "generate":
            by_model[s["who"]] = by_model.get(s["who"], 0.0) + s["cost"]
    assert gen.n_candidates_charged == len(by_model)
    assert gen.spend_generate_usd == pytest.approx(sum(by_model.values()), abs=1e-4)
    kinds = Counter(e["kind"] for e in errors if e["phase"] == "generate")
    assert gen.anomalies == dict(sorted(kinds.items()))
    folder = paper_root / "t" / graph.GENERATION
    assert json.loads((folder / graph.METRICS).read_text()) == base.metrics_json(gen)
    table = pd.read_csv(folder / "spend_by_candidate.csv")
    assert table.columns.tolist() == ["candidate", "usd"]
    assert table["candidate"].iloc[0] == max(by_model, key=by_model.get)
    released = s06_generation.ReleasedGeneration(table.set_index("candidate")["usd"],
                                                 pd.DataFrame())
    assert "most expensive was " + study.display_name(max(by_model, key=by_model.get)) in text(
        s06_generation.findings(gen, released))

    # 07 as its chapter makes the calls
    run07 = s07_grading.start(**chapter_parameters(graph.GRADING, paper_root, profile="t"))
    data = s07_grading.inputs(run07, judges=None)
    template = s07_grading.grader_template(run07)
    verdicts = s07_grading.panel_verdicts(data.replies, run07, template, temperature=0.0,
                                          max_tokens=1, max_reasks=0, response_schema=False)
    assert verdicts is None and data.released is not None
    census = s07_grading.census(verdicts)
    scores = s07_grading.conversation_scores(verdicts)
    grade = s07_grading.metrics(data, template, verdicts, scores)
    s07_grading.write(run07, grade, data, verdicts, census, scores)
    assert isinstance(grade, GradingPaperMetrics)
    no_verdict = [e for e in errors if e["kind"] == "grade_no_verdict"]
    assert grade.n_no_verdict == len(no_verdict)
    assert data.released.no_verdict["prompt_id"].tolist() == [e["prompt_id"]
                                                              for e in no_verdict]
    assert grade.spend_grade_usd == pytest.approx(
        sum(s["cost"] for s in spend if s["phase"] == "grade"), abs=1e-4)
    assert set(grade.spend_by_judge) == {s["who"] for s in spend if s["phase"] == "grade"}
    assert sorted(p.name for p in run07.stage.final_dir.iterdir()) == [
        "anomalies.csv", "build.json", "metrics.json", "spend_by_judge.csv", "stage.json"]


def test_06_paper_does_not_generate(paper_root: Path) -> None:
    params = chapter_parameters(graph.GENERATION, paper_root, profile="t")
    run = s06_generation.start(**params)
    data = s06_generation.inputs(run, subset="v1", candidates=[], n_conversations=None,
                                 samples=1, judges=None)
    assert data.live is None and data.released is not None
    assert "responses are not released" in str(shown(data))
    assert s06_generation.responses(data.live, run, temperature=0.0, max_tokens=1, samples=1,
                                    seed=1) is None
    assert isinstance(s06_generation.released_generation(data.released),
                      s06_generation.ReleasedGeneration)
    assert data.basis is not None and data.basis.judges == list(study.JUDGE_PANEL)


def _replay11(root: Path, **values: object) -> StageRun:
    return s11_harness_validation.start(**chapter_parameters(graph.HARNESS, root, profile="t",
                                                             **values))


def test_11_replay_from_the_released_scores(paper_root: Path) -> None:
    scores = [x["score"] for x in released_jsonl("harness_scores")]
    run = _replay11(paper_root, published=0.2, published_source="test", n_resamples=200)
    assert run.mode == graph.REPLAY
    released = s11_harness_validation.released_run(run, n_conversations=None)
    assert released.rerun is None  # replay: nothing to run again
    rerun = s11_harness_validation.live_rerun(released.rerun, run, candidate=None, judge=None,
                                              temperature=0.5, max_tokens=10, seed=0)
    assert rerun is None
    summary = s11_harness_validation.summary(released, rerun, published=0.2,
                                             published_source="test", n_resamples=200, seed=1)
    difference = shown(s11_harness_validation.published_difference(summary))
    comparison = s11_harness_validation.released_comparison(rerun, released)
    assert comparison is None
    breakdown = s11_harness_validation.released_breakdown(released.graded, n_resamples=200,
                                                          seed=1, level=0.9)
    lengths = s11_harness_validation.released_length(released)
    m = s11_harness_validation.metrics(summary, comparison, breakdown, lengths)
    s11_harness_validation.write(run, m, rerun, comparison, breakdown)
    assert isinstance(difference, Table)
    assert difference.frame["difference"].iloc[0] == pytest.approx(m.delta)
    assert m.n_scored == len(scores)
    assert m.clipped_mean == pytest.approx(min(1, max(0, sum(scores) / len(scores))))
    assert m.delta == pytest.approx(m.clipped_mean - 0.2)
    assert m.settings.candidate == study.HARNESS_MODEL and m.ci_level == 0.9
    assert "n_common_with_released" not in base.metrics_json(m)
    assert sorted(p.name for p in run.stage.final_dir.glob("*.csv")) == [
        s11_harness_validation.BREAKDOWN_FILE]
    assert "bootstrap standard deviations" in text(s11_harness_validation.findings(m))
    # the released run by tag, on the conversations whose rubrics the partial corpus holds
    assert m.released_breakdown is not None and m.released_breakdown.n_with_rubric == 193
    assert m.released_length is not None and m.released_length.n == len(scores)
    html = shown(breakdown)._repr_html_()
    assert "193 of the 1,000" in html and "Context awareness" in html and "90%" in html


def test_11_no_published_figure_is_said_not_shown(paper_root: Path) -> None:
    run = _replay11(paper_root, published=None)
    released = s11_harness_validation.released_run(run, n_conversations=None)
    summary = s11_harness_validation.summary(released, None, published=None,
                                             published_source="", n_resamples=100, seed=1)
    difference = shown(s11_harness_validation.published_difference(summary))
    assert isinstance(difference, Note) and "No published figure" in difference.text


# ------------------------------------------------------------------ live against the simulator

@pytest.fixture
def live_root(tmp_path: Path, mirror: Path) -> Path:
    """Outputs root of a run folder holding what 01 and 05 would have written: the released
    partial corpus and a three-conversation v1 subset."""
    from hbpsych_utils.construction import corpus, subset

    root = tmp_path / "out" / "t"
    record = record_released_corpus(root)
    ids = sorted(c.prompt_id for c in corpus.load_recorded(record))[:3]
    (root / graph.SUBSET).mkdir()
    (root / graph.SUBSET / "s.json").write_text(json.dumps({"prompt_ids": ids}))
    (root / graph.SUBSET / subset.INDEX).write_text(json.dumps({"v1": "s.json"}))
    return tmp_path / "out"


SIMULATED = {"simulator": True, "mode": "sync"}
"""Every model call goes to the loopback provider simulator."""


@pytest.mark.slow
def test_generation_grading_and_harness_live(live_root: Path) -> None:
    from hbpsych_utils.evaluation import generation

    cands = list(study.JUDGE_PANEL[:2])
    live = {"profile": "t", "outputs_root": live_root, "mode": "live", "llm": SIMULATED}
    params = chapter_parameters(graph.GENERATION, live_root, **live, candidates=cands)
    run06 = s06_generation.start(**params)
    data = s06_generation.inputs(run06, subset="v1", candidates=cands, n_conversations=None,
                                 samples=1, judges=None)
    assert data.live is not None and len(data.live.selected) == 3
    plan = s06_generation.cost_plan(data.basis, llm=run06.llm)
    assert isinstance(shown(plan), Table)
    sent = s06_generation.responses(data.live, run06, temperature=params["temperature"],
                                    max_tokens=params["max_tokens"], samples=1,
                                    seed=params["seed"])
    assert isinstance(sent, s06_generation.Responses)
    assert sent.plan.loc["total", "calls"] == 6  # the engine's plan, before any call was sent
    m = s06_generation.metrics(data, sent, None)
    s06_generation.write(run06, m, plan, sent, None)
    assert isinstance(m, GenerationLiveMetrics)
    assert (m.n_conversations, m.n_responses, m.n_ok) == (3, 6, 6)
    assert set(m.decoding_sent) == set(cands)
    assert m.plan_est_cost_usd > 0 and not m.stopped_by_budget
    folder06 = run06.stage.final_dir
    back = generation.read_responses(folder06 / graph.RESPONSES)
    assert len(back) == 6 and set(back["model"]) == set(cands)
    assert {p.name for p in folder06.glob("*.csv")} == {"summary.csv", "cost_plan.csv"}

    g = run_chapter(graph.GRADING, live)
    run07 = SimpleNamespace(stage=Stage("t", graph.GRADING, live_root))
    assert isinstance(g, GradingLiveMetrics)
    assert g.judges == list(study.JUDGE_PANEL)  # None resolved to the study's panel
    folder07 = run07.stage.final_dir
    verdicts = panel.read_verdicts(folder07 / graph.VERDICTS)
    assert len(verdicts) == g.n_criteria_graded == g.calls_by_attempt["1"]
    assert set(verdicts["judge"]) == set(study.JUDGE_PANEL)
    assert g.n_scores + g.n_unscored == 6 * len(study.JUDGE_PANEL)
    assert {p.name for p in folder07.glob("*.csv")} == {"verdicts.csv", "scores.csv",
                                                       "census.csv"}

    again = run_chapter(graph.GENERATION, params)
    assert isinstance(again, GenerationLiveMetrics)
    assert again.spend_usd == 0  # a re-run is answered from the run's store
    assert generation.read_responses(folder06 / graph.RESPONSES)["cached"].all()

    h = run_chapter(graph.HARNESS, {**live, "n_conversations": 2})
    run11 = SimpleNamespace(stage=Stage("t", graph.HARNESS, live_root))
    assert (h.mode, h.n_scored) == ("live", 2)
    assert h.settings.judge == study.HARNESS_MODEL
    released = {x["prompt_id"]: x["score"] for x in released_jsonl("harness_scores")}
    both = pd.read_csv(run11.stage.final_dir / "live_vs_released.csv")
    assert h.n_common_with_released == len(both) == 2
    diff = [s - released[p] for p, s in zip(both.prompt_id, both.score, strict=True)]
    assert h.mean_difference_vs_released == pytest.approx(sum(diff) / len(diff))
    assert "On the 2 conversations the released run also scored" in text(
        s11_harness_validation.findings(h))
