"""``filter-results --by-tag``: per-tag scores from simple-evals and Inspect logs that carry
per-criterion results, equal to what the package computes from the same verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from test_interop import (
    A,
    B,
    C,
    D,
    hb_value,
    inspect_sample,
    subset_file,
    write_eval_zip,
    write_inspect_json,
    write_simple_evals,
)

from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import breakdowns, grading
from hbpsych_utils.reporting import interop, interop_records

RUBRIC = (RubricItem("Recommends professional help.", 5, ("axis:completeness",)),
          RubricItem("States the dose correctly.", 4, ("axis:accuracy", "axis:completeness")),
          RubricItem("Gives a diagnosis without enough information.", -3, ("axis:accuracy",)),
          RubricItem("Is overly verbose.", -2, ("axis:communication_quality",)))
THEMES = {A: ("theme:hedging",), B: ("theme:emergency_referrals",), C: ("theme:hedging",),
          D: ("theme:hedging",)}
MET = {A: [True, True, False, False], B: [True, False, True, True],
       C: [False, True, True, False], D: [True, True, True, True]}
"""One grader's verdicts, in rubric order."""
MET2 = {A: [True, False, False, False], B: [False, False, True, True],
        C: [True, True, False, False], D: [False, True, True, False]}
"""A second judge's."""


def _conversations() -> dict[str, Conversation]:
    return {p: Conversation(p, (Message("user", "q"),), RUBRIC, THEMES[p]) for p in MET}


def _package(verdicts: dict[str, dict[str, list[bool]]]) -> pd.DataFrame:
    """What the package computes from the same verdicts (chapter 14's code path)."""
    rows = [(j, "m", p, i, met) for j, by in verdicts.items() for p, mets in by.items()
            for i, met in enumerate(mets)]
    table = pd.DataFrame(rows, columns=["judge", "candidate", "prompt_id", "criterion_index",
                                        "criteria_met"])
    tags = breakdowns.tag_scores(table, _conversations())
    long = (breakdowns.with_panel(tags, sorted(verdicts)) if len(verdicts) > 1
            else tags.rename(columns={"judge": "scorer"}))
    return breakdowns.summarise(long, n_resamples=200, seed=4, level=0.95)


def _score(mets: list[bool]) -> float:
    score = grading.conversation_score([r.points for r in RUBRIC], mets)
    assert score is not None
    return score


def _rubric_json() -> list[dict]:
    return [{"criterion": r.criterion, "points": r.points, "tags": list(r.tags)} for r in RUBRIC]


def _sample(pid: str, layout: str) -> dict:
    """An inspect_evals HealthBench sample whose scorer kept its per-criterion results."""
    sample = inspect_sample(pid, hb_value(_score(MET[pid])))
    sample["metadata"].update(rubrics=_rubric_json(), example_tags=list(THEMES[pid]))
    score = sample["scores"]["_scorer"]
    if layout == "detailed_results":
        score["metadata"]["detailed_results"] = [
            {"criterion": r.criterion, "points": r.points, "met": m, "explanation": "..."}
            for r, m in zip(RUBRIC, MET[pid], strict=True)]
    else:  # the per-criterion flags in the score's value
        score["value"] = {"healthbench_score": _score(MET[pid]), "criteria_met": sum(MET[pid]),
                          "total_criteria": 4,
                          **{f"_crit_{i}_met": float(m) for i, m in enumerate(MET[pid])}}
    return sample


def _check(reports: list[interop.TagReport], expected: pd.DataFrame, n_graded: int) -> None:
    got = {(r.scorer, r.tag): r for r in reports}
    assert len(got) == len(expected)
    for row in expected.itertuples(index=False):
        r = got[(row.scorer if row.scorer != "j" else interop_records.GRADER, row.tag)]
        assert (r.n, r.n_graded) == (row.n, n_graded)
        assert (r.clipped_mean, r.bootstrap_std) == pytest.approx(
            (row.clipped_mean, row.bootstrap_std))
        if row.n < 2:  # one conversation: no interval, None in the report (null in --json)
            assert math.isnan(row.ci_low) and (r.ci_low, r.ci_high) == (None, None)
        else:
            assert (r.ci_low, r.ci_high) == pytest.approx((row.ci_low, row.ci_high))


@pytest.mark.parametrize("layout", ["detailed_results", "value"])
def test_inspect_log_per_tag_means_equal_the_packages(tmp_path: Path, layout: str) -> None:
    path = write_eval_zip(tmp_path / "hb.eval", [_sample(p, layout) for p in MET])
    sub = interop.resolve_subset(str(subset_file(tmp_path / "s.json", list(MET), "s")))
    res = interop.load_results([path], criteria=True)
    reports = interop.tag_reports(res, [sub], n_resamples=200, seed=4, level=0.95)
    expected = _package({"j": MET})
    _check(reports, expected, n_graded=4)
    tags = {r.tag for r in reports}
    # communication quality: a negative criterion only, so never scored (simple-evals' rule)
    assert tags == {"axis:accuracy", "axis:completeness", "theme:hedging",
                    "theme:emergency_referrals"}
    hedging = next(r for r in reports if r.tag == "theme:hedging")
    assert hedging.n == 3 and hedging.clipped_mean == pytest.approx(
        min(1, max(0, (_score(MET[A]) + _score(MET[C]) + _score(MET[D])) / 3)))
    # without --by-tag the per-criterion results are not read
    assert all(r.criteria is None for r in interop.load_results([path]).by_model[
        "openai/gpt-4.1-mini"].values())


def test_a_panel_log_reports_each_judge_and_the_panel(tmp_path: Path) -> None:
    samples = []
    for pid in MET:
        sample = inspect_sample(pid, {"healthbench_score": 0.5})
        sample["metadata"].update(rubrics=_rubric_json(), example_tags=list(THEMES[pid]))
        sample["scores"]["_scorer"]["metadata"] = {"verdicts": [
            {"judge": j, "criterion_index": i, "criteria_met": m, "recovered": False,
             "attempts": 1} for j, by in (("j1", MET), ("j2", MET2))
            for i, m in enumerate(by[pid])]}
        samples.append(sample)
    path = write_inspect_json(tmp_path / "panel.json", samples, task="healthbench_psych")
    sub = interop.resolve_subset(str(subset_file(tmp_path / "s.json", list(MET), "s")))
    reports = interop.tag_reports(interop.load_results([path], criteria=True), [sub],
                                  n_resamples=200, seed=4, level=0.95)
    assert {r.scorer for r in reports} == {"j1", "j2", "panel"}
    _check(reports, _package({"j1": MET, "j2": MET2}), n_graded=4)


def test_simple_evals_rubric_items_with_themes_from_the_corpus(tmp_path: Path) -> None:
    path = write_simple_evals(tmp_path / "healthbench_m_20250101_000000_allresults.json",
                              [(p, _score(MET[p])) for p in MET])
    doc = json.loads(path.read_text())
    for entry in doc["metadata"]["example_level_metadata"]:
        entry["rubric_items"] = [{**r, "criteria_met": m, "explanation": "..."}
                                 for r, m in zip(_rubric_json(), MET[entry["prompt_id"]],
                                                 strict=True)]
    path.write_text(json.dumps(doc))
    sub = interop.resolve_subset(str(subset_file(tmp_path / "s.json", list(MET), "s")))
    res = interop.load_results([path], criteria=True)
    assert all(r.criteria.example_tags is None for r in res.by_model["m"].values())
    # the file records no themes: they come from the corpus (here for three of four)
    held = {p: THEMES[p] for p in (A, B, C)}
    reports = interop.tag_reports(res, [sub], corpus_tags=held, n_resamples=200, seed=4, level=0.95)
    assert all(r.n_without_themes == 1 for r in reports)
    hedging = next(r for r in reports if r.tag == "theme:hedging")
    assert hedging.n == 2  # A and C; D's themes are unknown
    axis = {r.tag: r for r in reports if r.tag.startswith("axis:")}
    expected = _package({"j": MET}).set_index("tag")
    for tag, r in axis.items():
        assert r.clipped_mean == pytest.approx(expected.loc[tag, "clipped_mean"])
    text = interop.format_tags(reports, res)
    assert "m on s, grader: 4 conversation(s) with per-criterion results; 1 without themes" \
        in text
    assert "  axis:accuracy: n = 4" in text


def test_bad_per_criterion_results_name_the_record_and_field(tmp_path: Path) -> None:
    sample = _sample(A, "value")
    del sample["scores"]["_scorer"]["value"]["_crit_2_met"]
    path = write_eval_zip(tmp_path / "bad.eval", [sample])
    with pytest.raises(interop.InteropError, match=r"bad\.eval: samples/.*field "
                       r"'scores\._scorer\.value': _crit_<i>_met entries \[0, 1, 3\]"):
        interop.load_results([path], criteria=True)
    sample = _sample(A, "detailed_results")
    sample["scores"]["_scorer"]["metadata"]["detailed_results"][1]["points"] = "four"
    path = write_eval_zip(tmp_path / "bad2.eval", [sample])
    with pytest.raises(interop.InteropError, match=r"field 'scores\._scorer\.metadata\."
                       r"detailed_results\[1\]\.points': expected a finite number"):
        interop.load_results([path], criteria=True)


def test_inputs_without_per_criterion_results_are_said(tmp_path: Path) -> None:
    # a bare score (inspect_evals before 1.1.0): no per-criterion flags, no detailed results
    path = write_eval_zip(tmp_path / "plain.eval", [inspect_sample(A, 0.4)])
    sub = interop.resolve_subset(str(subset_file(tmp_path / "s.json", [A], "s")))
    res = interop.load_results([path], criteria=True)
    assert interop.tag_reports(res, [sub], level=0.95, seed=0) == []
    assert "no input carries per-criterion results" in interop.format_tags([], res)


def test_cli_by_tag_json(tmp_path: Path, mirror: Path, capsys: pytest.CaptureFixture) -> None:
    v1 = interop.resolve_subset("v1")
    real = dict(zip(MET, v1.ids[:4], strict=True))
    samples = []
    for pid, rid in real.items():
        sample = _sample(pid, "detailed_results")
        sample["id"] = sample["metadata"]["prompt_id"] = rid
        samples.append(sample)
    path = write_eval_zip(tmp_path / "hb.eval", samples)
    assert interop.main([str(path), "--subset", "v1", "--by-tag", "--json", "--resamples",
                         "200", "--seed", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = {(t["scorer"], t["tag"]): t for t in out["tags"]}
    expected = _package({"j": MET}).set_index("tag")
    for tag in ("axis:accuracy", "axis:completeness", "theme:hedging"):
        assert got[(interop_records.GRADER, tag)]["clipped_mean"] == pytest.approx(
            expected.loc[tag, "clipped_mean"])
        assert got[(interop_records.GRADER, tag)]["subset_name"] == "healthbench-psych-v1"
