"""The analysis stages 08, 09, 10, 12 and 13: evaluation sources, computed findings (each claim
both ways), and the stages run end to end on a small synthetic graded run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hbpsych_utils import study
from hbpsych_utils.construction import subset
from hbpsych_utils.core.config import (
    FiguresTablesParams,
    JudgesParams,
    RefusalsParams,
    ScoresParams,
)
from hbpsych_utils.evaluation import generation, refusals, scoring
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.stages import (
    s08_scores,
    s09_judges,
    s10_refusals,
    s12_figures_tables,
    s13_explorer,
)
from hbpsych_utils.stages.base import ProfileRun

JUDGES = list(study.JUDGE_PANEL)
CANDIDATES = [*study.JUDGE_PANEL, "cand-x"]
IDS = [f"p{i:02d}" for i in range(12)]
V1, HARD = IDS[:10], IDS[:4]
REFUSED = ("cand-x", "p02")


# ---------------------------------------------------------------------------- 08 findings


def _scores_metrics(panel: dict[str, float], **extra) -> dict:
    ranking = sorted(panel, key=lambda c: (-panel[c], c))
    sub = {"panel_mean": panel, "ranking": ranking}
    return {"mode": "paper", "subset": "v1", **sub, "point_estimates_only": True,
            "by_subset": {"v1": sub, "hard": {"ranking": ["c", "b", "a"]}}, **extra}


def test_08_close_top_is_said_only_when_within_close_scores():
    close = _scores_metrics({"a": 0.600, "b": 0.595, "c": 0.40})
    text = " ".join(s08_scores.findings(close))
    assert "rank **a** first (0.600), then b (0.595), then c (0.400); c is last" in text
    assert "On **hard** the order starts c, b, a." in text
    assert "The top of the table is close: 1 candidate(s) lie within 0.01 of a (b)" in text
    far = _scores_metrics({"a": 0.62, "b": 0.60, "c": 0.40})
    text = " ".join(s08_scores.findings(far))
    assert "close" not in text
    assert "a leads b by 0.020, more than 0.01" in text
    # the threshold is a parameter: a wider one makes the same numbers "close"
    assert "close" in " ".join(s08_scores.findings(far, close=0.05))


def test_08_holm_count_uses_alpha():
    pairs = [{"a": "a", "b": "b", "p_holm": 0.01}, {"a": "a", "b": "c", "p_holm": 0.04},
             {"a": "b", "b": "c", "p_holm": 0.5}]
    m = _scores_metrics({"a": 0.6, "b": 0.5, "c": 0.4}, point_estimates_only=False,
                        paired_differences=pairs, ci_low={"a": 0.55}, ci_high={"a": 0.65},
                        n_panel={"a": 30})
    text = " ".join(s08_scores.findings(m))
    assert "panel scores rank" in text and "close" not in text
    assert "[0.550, 0.650] over 30 conversations; 2 of 3 top-3 pairs differ" in text
    assert "1 of 3 top-3 pairs differ" in " ".join(s08_scores.findings(m, alpha=0.02))


# ---------------------------------------------------------------------------- 09 findings


def _judge_metrics(taus, severity, raw=None, cor=None, subset_key="v1") -> dict:
    return {"subset": subset_key, "kendall_tau": taus, "severity": severity,
            "grand_mean": 0.5, "n_candidates": 20,
            "self_preference_raw": raw or {}, "self_preference_corrected": cor or {}}


def test_09_findings_range_extremes_and_self_preference():
    m = _judge_metrics({"A|B": 0.8, "A|C": 0.95, "B|C": 0.9},
                       {"A": -0.02, "B": 0.05, "C": -0.03}, {"A": 0.01}, {"A": -0.02})
    text = " ".join(s09_judges.findings(m))
    assert "Kendall's tau between 0.80 and 0.95" in text
    assert "B is the most lenient (+0.050 against the grand mean 0.500)" in text
    assert "C the harshest (-0.030)" in text
    assert "Self-preference, raw: A +0.010; after removing each judge's severity: A -0.020." in text
    none = _judge_metrics({"A|B": 0.8}, {"A": 0.0, "B": 0.0})
    assert "self-preference is undefined" in " ".join(s09_judges.findings(none))
    single = " ".join(s09_judges.findings(_judge_metrics({}, {"A": 0.0})))
    assert "single judge" in single and "lenient" not in single


# ---------------------------------------------------------------------------- 10 findings


def test_10_findings_refusals_and_sensitivity():
    m = {"subset": "v1", "refusals": {"a": 2, "b": 0}, "n_replaced_transient": 1}
    text = " ".join(s10_refusals.findings(m))
    assert text.startswith("On v1, **a** refused 2 conversation(s).")
    assert "1 empty reply(ies) were transport failures" in text
    m["sensitivity"] = [{"candidate": "a", "delta": -0.01}, {"candidate": "b", "delta": 0.0}]
    text = " ".join(s10_refusals.findings(m))
    assert "moves the panel score by a: -0.0100." in text and "transport" not in text
    nobody = {"subset": "hard", "refusals": {"a": 0}, "n_replaced_transient": 0,
              "sensitivity": [{"candidate": "a", "delta": 0.0}]}
    assert s10_refusals.findings(nobody) == ["No model refused a hard conversation."]


# ---------------------------------------------------------------------------- 12 findings


@pytest.mark.parametrize(
    ("taus", "severity", "order", "level", "joint"),
    [
        ([0.95, 0.9, 0.92], [-0.04, 0.0, 0.07], True, True, "but"),  # tau == 0.9 counts
        ([0.95, 0.89, 0.92], [-0.04, 0.0, 0.07], False, True, "and"),
        ([0.95, 0.9, 0.92], [0.0, 0.02, 0.05], True, False, "and"),  # span == 0.05: no claim
        ([0.2, 0.9, 0.92], [0.0, 0.01, 0.02], False, False, "but"),
    ],
)
def test_12_order_and_level_claims_follow_thresholds(taus, severity, order, level, joint):
    m = _judge_metrics(dict(zip(["A|B", "A|C", "B|C"], taus, strict=True)),
                       dict(zip("ABC", severity, strict=True)))
    text = s12_figures_tables.judge_agreement(m)
    assert ("the judges agree on the order" in text) is order
    assert ("do not agree on the order" in text) is not order
    assert ("they differ in level" in text) is level
    assert ("their levels are within" in text) is not level
    assert f", {joint} " in text
    if not order:
        assert f"lowest pairwise Kendall tau is {min(taus):.2f}" in text


def test_12_findings_name_top_files_and_publication():
    judged = _judge_metrics({"A|B": 0.95}, {"A": -0.1, "B": 0.1})
    metrics = {"files": ["a.png", "a.svg", "t.csv"], "n_files": 3, "published_to_figures": True}
    out = s12_figures_tables.findings(metrics, judges=judged, top=["x", "y", "z"],
                                      subset_title=study.SUBSET_TITLES["v1"], intervals=False)
    text = " ".join(out)
    assert text.startswith("3 files written (.csv, .png, .svg).")
    assert "puts x, y, z on top (point estimates); the judges agree on the order" in text
    assert "but they differ in level" in text and out[-1] == "Copies are in `figures/`."
    metrics["published_to_figures"] = False
    out = s12_figures_tables.findings(metrics, judges=judged, top=["x"], intervals=True,
                                      subset_title=study.SUBSET_TITLES["hard"])
    assert "figures/" not in " ".join(out)
    assert f"(with 95% intervals in the ranking figure); on {study.SUBSET_TITLES['v1']} " in out[1]
    single = _judge_metrics({}, {"A": 0.0})
    assert "single judge" in s12_figures_tables.judge_agreement(single)


def test_13_findings():
    assert "nothing to explore" in s13_explorer.findings(None)[0]
    assert s13_explorer.findings({"n_conversations": 5, "n_disputed": 2}) == [
        "2 of 5 conversation(s) have at least one criterion on which the judges disagree."]


# ---------------------------------------------------------------------------- readers


def test_read_scores_keeps_ids_as_text_and_empty_scores_as_nan(tmp_path):
    p = tmp_path / "scores.csv"
    p.write_text("judge,candidate,prompt_id,score,status\nj,NA,007,0.5,scored\n"
                 "j,NA,008,,excluded_verdict\n", encoding="utf-8")
    s = scoring.read_scores(p)
    assert s["prompt_id"].tolist() == ["007", "008"] and s["candidate"].tolist() == ["NA", "NA"]
    assert s["score"].iloc[0] == 0.5 and np.isnan(s["score"].iloc[1])
    p.write_text("judge,candidate,score\nj,a,0.5\n", encoding="utf-8")
    with pytest.raises(scoring.ScoringError, match="prompt_id"):
        scoring.read_scores(p)


def test_error_log_fields_are_validated(tmp_path):
    p = tmp_path / "errors.jsonl"
    p.write_text('{"phase": "generate", "kind": "empty_response"}\n'
                 '{"phase": "generate", "kind": 3}\n', encoding="utf-8")
    with pytest.raises(refusals.RefusalError, match=r"errors\.jsonl:2: field 'kind'"):
        refusals.read_error_log(p)


def test_matrix_lines_are_validated(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("candidate,judge,clipped_mean_score,n_prompts\n ,j,0.5,3\n", encoding="utf-8")
    with pytest.raises(scoring.ScoringError, match=r"m\.csv:2: field 'candidate'"):
        scoring.read_matrix(p)
    p.write_text("candidate,judge,clipped_mean_score,n_prompts\nA,j,0.5,three\n",
                 encoding="utf-8")
    with pytest.raises(scoring.ScoringError, match=r"m\.csv:2: field 'n_prompts'"):
        scoring.read_matrix(p)


# ---------------------------------------------------------------------------- sources


def test_paper_source_is_the_released_matrix(tmp_path, mirror):
    stage = Stage("p", "08_scores", tmp_path)
    source = scoring.evaluation_source(stage, "v1", mode="paper")
    assert source is not None and not source.intervals and source.scores is None
    from hbpsych_utils.core import sources

    with open(sources.fetch("matrix_v1"), encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    cell = {(r["candidate"], r["judge"]): float(r["clipped_mean_score"]) for r in rows}
    assert list(source.per_judge.index) == list(study.CANDIDATES)
    table = source.table1(n_resamples=None, seed=0)
    for cand in study.CANDIDATES:
        expected = sum(cell[cand, j] for j in JUDGES) / len(JUDGES)
        assert table.at[cand, "panel_mean"] == pytest.approx(expected)
        assert source.n[cand] == min(int(r["n_prompts"]) for r in rows if r["candidate"] == cand)
    assert "ci_low" not in table.columns
    assert "matrix_v1" in json.loads(stage.path("stage.json").read_text())["artifacts"]


def _synthetic_run(root: Path) -> ProfileRun:
    """A graded run in miniature: 05's subsets and categories, 06's responses, 07's scores."""
    run = ProfileRun(profile="synthetic", outputs_root=root, seed=3)
    s05 = run.stage("05_subset")
    subset.write_all(s05, {k: subset.subset_record(f"s-{k}", ids)
                           for k, ids in (("v1", V1), ("v2", V1), ("hard", HARD))})
    pd.DataFrame({"prompt_id": IDS, "category": ["crisis", "anxiety"] * 6}).to_csv(
        s05.path("categories_v1.csv"), index=False)
    rows = [{"model": c, "prompt_id": p, "status": "ok",
             "text": "" if (c, p) == REFUSED else "a reply", "stop_reason":
             "refusal" if (c, p) == REFUSED else "stop", "refusal": (c, p) == REFUSED,
             "input_tokens": 1, "output_tokens": 1, "cost": 0.0, "cached": False,
             "config": "{}"} for c in CANDIDATES for p in IDS]
    generation.write_responses(pd.DataFrame(rows), run.stage("06_generation").path(
        "responses.jsonl"))
    rng = np.random.default_rng(1)
    scores = pd.DataFrame([{"judge": j, "candidate": c, "prompt_id": p,
                            "score": round(float(rng.uniform(-0.2, 1.0)), 4), "status": "scored"}
                           for j in JUDGES for c in CANDIDATES for p in IDS[:11]])
    s07 = run.stage("07_grading")
    s07.write_table(scores, "scores.csv")
    s07.write_json("metrics.json", {"mode": "live", "judges": JUDGES})
    return run


def test_live_source_restricts_to_the_subset(tmp_path):
    run = _synthetic_run(tmp_path)
    stage = run.stage("08_scores")
    source = scoring.evaluation_source(stage, "hard", mode="live")
    assert source is not None and source.intervals and source.judges == JUDGES
    assert sorted(source.scores["prompt_id"].unique()) == HARD
    assert source.n.to_dict() == dict.fromkeys(CANDIDATES, len(HARD))
    table = source.table1(n_resamples=20, seed=0)
    assert {"ci_low", "ci_high", "bootstrap_std"} <= set(table.columns)
    with pytest.raises(scoring.ScoringError, match="n_resamples"):
        source.table1(n_resamples=None, seed=0)
    # a subset none of whose conversations was graded has no source
    subset.write_all(run.stage("05_subset"), {"v2": subset.subset_record("s-v2", IDS[11:])})
    assert scoring.evaluation_source(stage, "v2", mode="live") is None


def test_stages_run_on_a_graded_run(tmp_path):
    run = _synthetic_run(tmp_path)
    r08 = s08_scores.run(run, ScoresParams(mode="live", n_resamples=20, top_k=3))
    assert r08.metrics["subset"] == "v1" and r08.metrics["n_resamples"] == 20
    assert len(r08.metrics["paired_differences"]) == 3
    r09 = s09_judges.run(run, JudgesParams(mode="live", n_resamples=20))
    assert set(r09.metrics["self_preference_raw"]) == set(JUDGES)
    assert (tmp_path / "synthetic" / "09_judges" / "judge_intervals.csv").is_file()
    r10 = s10_refusals.run(run, RefusalsParams(mode="live"))
    assert r10.metrics["refusals"] == {**dict.fromkeys(CANDIDATES, 0), "cand-x": 1}
    assert r10.metrics["refused_conversations"] == {"cand-x": ["p02"]}
    assert {r["candidate"]: r["n_excluded"] for r in r10.metrics["sensitivity"]}["cand-x"] == 9
    r12 = s12_figures_tables.run(run, FiguresTablesParams(mode="live", publish=False))
    out = tmp_path / "synthetic"
    assert r12.metrics["n_files"] == len(r12.metrics["files"]) == 18
    assert all((out / "12_figures_tables" / f).is_file() for f in r12.metrics["files"])
    # one source for Table 1: 12's numbers are 08's
    t08 = pd.read_csv(out / "08_scores" / "table1_v1.csv", index_col="candidate")
    t12 = pd.read_csv(out / "12_figures_tables" / "table1_v1.csv", index_col="candidate")
    for col in ("panel_mean", "ci_low", "ci_high", *JUDGES):
        assert t12[col].to_numpy() == pytest.approx(t08.loc[t12.index, col].to_numpy(), abs=1e-6)
    assert "(20 resamples)" in (out / "12_figures_tables" / "table1_v1.md").read_text()
    assert all(r.findings for r in (r08, r09, r10, r12))
    # 12 publishes the Table 1 08 wrote (read back exactly), it does not bootstrap again
    t08_exact = scoring.read_table1(out / "08_scores" / "table1_v1.csv")
    pd.testing.assert_frame_equal(t08_exact, r08.tables["table1_v1.csv"], check_exact=True)
    t08_exact.loc[t08_exact.index[0], JUDGES[0]] = 0.123456
    t08_exact.to_csv(out / "08_scores" / "table1_v1.csv")
    s12_figures_tables.run(run, FiguresTablesParams(mode="live", publish=False))
    t12 = pd.read_csv(out / "12_figures_tables" / "table1_v1.csv", index_col="candidate")
    assert t12.loc[t08_exact.index[0], JUDGES[0]] == 0.123456
    # 12 and 08 in different modes: an error naming both settings
    with pytest.raises(scoring.ScoringError, match=r"figures_tables\.mode and scores\.mode"):
        s12_figures_tables.run(run, FiguresTablesParams(mode="paper", publish=False))


def test_explorer_stage_writes_no_folder(tmp_path):
    run = _synthetic_run(tmp_path)
    result = s13_explorer.run(run)
    assert result.data is None and result.views == {}
    assert "nothing to explore" in result.findings_markdown()
    assert not (tmp_path / "synthetic" / "13_explorer").exists()
