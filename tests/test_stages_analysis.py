"""The analysis stages 08, 09, 10, 12 and 13: evaluation sources, computed findings (each claim
both ways), and the stages run end to end on a small synthetic graded run."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import chapter_parameters, grading_live_metrics

from hbpsych_utils import study
from hbpsych_utils.construction import subset
from hbpsych_utils.evaluation import generation, refusals, score_sources, scoring
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    FiguresTablesMetrics,
    JudgesMetrics,
    PairedDifferenceRow,
    RefusalsMetrics,
    ScoresMetrics,
    SensitivityRow,
    SubsetScores,
)
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.reporting import tables
from hbpsych_utils.reporting.display import NotInRun
from hbpsych_utils.stages import (
    s08_scores,
    s09_judges,
    s10_refusals,
    s12_figures_tables,
    s13_explorer,
)
from hbpsych_utils.stages.base import StageRun, run_chapter, shown

JUDGES = list(study.JUDGE_PANEL)
CANDIDATES = [*study.JUDGE_PANEL, "cand-x"]
IDS = [f"p{i:02d}" for i in range(12)]
V1, HARD = IDS[:10], IDS[:4]
REFUSED = ("cand-x", "p02")
PROFILE = "synthetic"


# ---------------------------------------------------------------------------- 08 findings


def _subset_scores(panel: dict[str, float]) -> SubsetScores:
    ranking = sorted(panel, key=lambda c: (-panel[c], c))
    return SubsetScores(panel_mean=panel, ranking=ranking, per_judge={},
                        point_estimates_only=True)


def _scores_metrics(panel: dict[str, float], **extra) -> ScoresMetrics:
    sub = _subset_scores(panel)
    hard = _subset_scores({"c": 0.5, "b": 0.4, "a": 0.3})
    top = {"panel_mean": sub.panel_mean, "ranking": sub.ranking, "per_judge": {},
           "point_estimates_only": True}
    return ScoresMetrics(mode="paper", include_later=False, subset="v1",
                         **{**top, **extra}, by_subset={"v1": sub, "hard": hard})


def test_08_close_top_is_said_only_when_within_close_scores():
    close = _scores_metrics({"a": 0.600, "b": 0.595, "c": 0.40})
    text = " ".join(s08_scores.findings(close))
    assert "rank **a** first (0.600), then b (0.595), then c (0.400); c is last" in text
    assert "On **HealthBench-Psych-Hard v1** the order starts c, b, a." in text
    assert "The top of the table is close: 1 candidate lies within 0.01 of a (b)" in text
    far = _scores_metrics({"a": 0.62, "b": 0.60, "c": 0.40})
    text = " ".join(s08_scores.findings(far))
    assert "close" not in text
    assert "a leads b by 0.020, more than 0.01" in text
    # the threshold is a parameter: a wider one makes the same numbers "close"
    assert "close" in " ".join(s08_scores.findings(far, close=0.05))


def _pair(a: str, b: str, p_holm: float) -> PairedDifferenceRow:
    return PairedDifferenceRow(a=a, b=b, difference=0.1, ci_low=0.0, ci_high=0.2, p_value=p_holm,
                               n=30, p_holm=p_holm)


def test_08_holm_count_uses_alpha():
    pairs = [_pair("a", "b", 0.01), _pair("a", "c", 0.04), _pair("b", "c", 0.5)]
    m = _scores_metrics({"a": 0.6, "b": 0.5, "c": 0.4}, point_estimates_only=False,
                        paired_differences=pairs, ci_low={"a": 0.55}, ci_high={"a": 0.65},
                        n_panel={"a": 30})
    text = " ".join(s08_scores.findings(m))
    assert "panel scores rank" in text and "close" not in text
    assert "[0.550, 0.650] over 30 conversations; 2 of 3 top-3 pairs differ" in text
    assert "1 of 3 top-3 pairs differ" in " ".join(s08_scores.findings(m, alpha=0.02))


# ---------------------------------------------------------------------------- 09 findings


def _judge_metrics(taus, severity, raw=None, cor=None, subset_key="v1") -> JudgesMetrics:
    return JudgesMetrics(mode="paper", subset=subset_key, kendall_tau=taus, severity=severity,
                         grand_mean=0.5, n_candidates=20, self_preference_raw=raw or {},
                         self_preference_corrected=cor or {})


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
    assert "self-preference is undefined" in single


def test_09_findings_name_the_subset_of_the_taus():
    hard = _judge_metrics({"A|B": 0.8}, {"A": 0.01, "B": -0.01}, subset_key="hard")
    assert ("On HealthBench-Psych-Hard v1, over 20 candidates the two judges' rankings agree "
            "with Kendall's tau 0.80.") in " ".join(s09_judges.findings(hard))
    undefined = _judge_metrics({"A|B": None}, {"A": 0.0, "B": 0.0})
    assert "undefined for every pair" in " ".join(s09_judges.findings(undefined))
    empty = JudgesMetrics(mode="live", subset="v2", kendall_tau={}, grand_mean=None,
                          severity={}, self_preference_raw={}, self_preference_corrected={},
                          n_candidates=0)
    assert s09_judges.findings(empty).sentences == [
        "This run graded no conversation of HealthBench-Psych v2, so there is nothing to say "
        "about the judges on it."]


# ---------------------------------------------------------------------------- 10 findings


def _refusals_metrics(mode="paper", subset_key="v1", counts=None, replaced=0,
                      sensitivity=None) -> RefusalsMetrics:
    extra = {} if sensitivity is None else {"sensitivity": [
        SensitivityRow(candidate=c, n_refused=0, n_primary=10, mean_primary=0.5, n_excluded=10,
                       mean_excluded=0.5 + d, delta=d) for c, d in sensitivity.items()]}
    return RefusalsMetrics(mode=mode, subset=subset_key, refusals=counts or {},
                           refused_conversations={}, n_replaced_transient=replaced, **extra)


def test_10_findings_refusals_and_sensitivity():
    m = _refusals_metrics(counts={"a": 2, "b": 0}, replaced=1)
    text = " ".join(s10_refusals.findings(m))
    assert text.startswith("On HealthBench-Psych v1, **a** refused 2 conversations.")
    assert "1 empty reply was a transport failure" in text
    m = _refusals_metrics(mode="live", counts={"a": 2, "b": 0},
                          sensitivity={"a": -0.01, "b": 0.0})
    text = " ".join(s10_refusals.findings(m))
    assert "moves the panel score by a: -0.0100." in text and "transport" not in text
    nobody = _refusals_metrics(mode="live", subset_key="hard", counts={"a": 0},
                               sensitivity={"a": 0.0})
    assert list(s10_refusals.findings(nobody)) == [
        "No model refused a HealthBench-Psych-Hard v1 conversation."]
    # live, but nothing of the subset graded, or nothing generated
    ungraded = _refusals_metrics(mode="live", subset_key="v2", counts={"a": 0})
    said = " ".join(s10_refusals.findings(ungraded))
    assert "graded no HealthBench-Psych v2 conversation" in said
    empty = _refusals_metrics(mode="live", subset_key="v2")
    said = " ".join(s10_refusals.findings(empty))
    assert "no reply to a HealthBench-Psych v2 conversation" in said


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


def test_12_agreement_with_two_judges_and_undefined_taus():
    two = _judge_metrics({"A|B": 0.95}, {"A": -0.1, "B": 0.1})
    text = s12_figures_tables.judge_agreement(two)
    assert text.startswith("the judges agree on the order (Kendall tau 0.95, at least 0.9)")
    assert "pairwise" not in text
    low = s12_figures_tables.judge_agreement(_judge_metrics({"A|B": 0.5}, {"A": 0.0, "B": 0.0}))
    assert "do not agree on the order (Kendall tau 0.50, below 0.9)" in low
    undefined = _judge_metrics({"A|B": None, "A|C": None, "B|C": None},
                               {"A": 0.0, "B": 0.0, "C": 0.0})
    assert "undefined" in s12_figures_tables.judge_agreement(undefined)


def _figures_metrics(published: bool) -> FiguresTablesMetrics:
    return FiguresTablesMetrics(mode="paper", files=["a.png", "a.svg", "t.csv"], n_files=3,
                                published_to_figures=published)


def test_12_findings_name_top_files_and_publication():
    judged = _judge_metrics({"A|B": 0.95, "A|C": 0.95, "B|C": 0.95},
                            {"A": -0.1, "B": 0.1, "C": 0.0})
    out = list(s12_figures_tables.findings(_figures_metrics(True), judges=judged,
                                           top=["x", "y", "z"], subset="v1", intervals=False,
                                           level=0.95))
    text = " ".join(out)
    assert text.startswith("3 files written (.csv, .png, .svg).")
    # the subset of the judge figure is named, even when it is the ranking's
    assert (f"puts x, y, z on top (point estimates); on {study.SUBSET_TITLES['v1']} the judges "
            "agree on the order") in text
    assert "but they differ in level" in text and out[-1] == "Copies are in `figures/`."
    out = list(s12_figures_tables.findings(_figures_metrics(False), judges=judged, top=["x"],
                                           subset="hard", intervals=True, level=0.95))
    assert "figures/" not in " ".join(out)
    assert out[1].startswith(f"On {study.SUBSET_TITLES['hard']} the panel puts x on top")
    assert f"(with 95% intervals in the ranking figure); on {study.SUBSET_TITLES['v1']} " in out[1]
    single = _judge_metrics({}, {"A": 0.0})
    assert "single judge" in s12_figures_tables.judge_agreement(single)
    none = list(s12_figures_tables.findings(_figures_metrics(False), judges=judged, top=[],
                                            subset=None, intervals=False, level=0.95))
    assert "no ranking" in none[1]


def test_13_findings():
    assert s13_explorer.findings(None) is None  # the chapter's top says why, once
    data = SimpleNamespace(ids=["a", "b"], candidates=["c"], judges=["j"])
    assert str(s13_explorer.findings(s13_explorer.Grades(data, ["a"]))) == (
        "1 of 2 conversations has at least one criterion on which the judges disagree.")


# ---------------------------------------------------------------------------- readers


def test_read_scores_keeps_ids_as_text_and_empty_scores_as_nan(tmp_path):
    p = tmp_path / "scores.csv"
    p.write_text("judge,candidate,prompt_id,score,status\nj,NA,007,0.5,scored\n"
                 "j,NA,008,,excluded_verdict\n", encoding="utf-8")
    s = score_sources.read_scores(p)
    assert s["prompt_id"].tolist() == ["007", "008"] and s["candidate"].tolist() == ["NA", "NA"]
    assert s["score"].iloc[0] == 0.5 and np.isnan(s["score"].iloc[1])
    p.write_text("judge,candidate,score\nj,a,0.5\n", encoding="utf-8")
    with pytest.raises(scoring.ScoringError, match="prompt_id"):
        score_sources.read_scores(p)


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
        score_sources.read_matrix(p)
    p.write_text("candidate,judge,clipped_mean_score,n_prompts\nA,j,0.5,three\n",
                 encoding="utf-8")
    with pytest.raises(scoring.ScoringError, match=r"m\.csv:2: field 'n_prompts'"):
        score_sources.read_matrix(p)


# ---------------------------------------------------------------------------- sources


def test_paper_source_is_the_released_matrix(tmp_path, mirror):
    stage = Stage("p", graph.SCORES, tmp_path)
    source = score_sources.evaluation_source(stage, "v1", mode="paper")
    assert source is not None and not source.intervals and source.scores is None
    from hbpsych_utils.core import sources

    with open(sources.fetch("matrix_v1"), encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    cell = {(r["candidate"], r["judge"]): float(r["clipped_mean_score"]) for r in rows}
    assert list(source.per_judge.index) == list(study.CANDIDATES)
    table = source.table1(n_resamples=None, seed=0, level=0.95)
    for cand in study.CANDIDATES:
        expected = sum(cell[cand, j] for j in JUDGES) / len(JUDGES)
        assert table.at[cand, "panel_mean"] == pytest.approx(expected)
        assert source.n[cand] == min(int(r["n_prompts"]) for r in rows if r["candidate"] == cand)
    assert "ci_low" not in table.columns
    assert "matrix_v1" in json.loads(stage.path("stage.json").read_text())["artifacts"]


def _synthetic_run(root: Path, judges: list[str] = JUDGES) -> Path:
    """A graded run in miniature: 05's subsets and categories, 06's responses, 07's scores and
    metrics (the judges given), written where each stage writes. Returns the run folder."""
    s05 = Stage(PROFILE, graph.SUBSET, root)
    subset.write_all(s05, {k: subset.subset_record(f"s-{k}", ids)
                           for k, ids in (("v1", V1), ("v2", V1), ("hard", HARD))})
    pd.DataFrame({"prompt_id": IDS, "category": ["crisis", "anxiety"] * 6}).to_csv(
        s05.path(graph.CATEGORIES_V1), index=False)
    rows = [{"model": c, "prompt_id": p, "status": "ok",
             "text": "" if (c, p) == REFUSED else "a reply", "stop_reason":
             "refusal" if (c, p) == REFUSED else "stop", "refusal": (c, p) == REFUSED,
             "input_tokens": 1, "output_tokens": 1, "cost": 0.0, "cached": False,
             "config": "{}"} for c in CANDIDATES for p in IDS]
    generation.write_responses(pd.DataFrame(rows),
                               Stage(PROFILE, graph.GENERATION, root).path(graph.RESPONSES))
    rng = np.random.default_rng(1)
    scores = pd.DataFrame([{"judge": j, "candidate": c, "prompt_id": p,
                            "score": round(float(rng.uniform(-0.2, 1.0)), 4), "status": "scored"}
                           for j in JUDGES for c in CANDIDATES for p in IDS[:11]])
    s07 = Stage(PROFILE, graph.GRADING, root)
    s07.write_table(scores[scores["judge"].isin(judges)], graph.SCORES_TABLE)
    s07.write_json(graph.METRICS, grading_live_metrics(judges))
    return root / PROFILE


def _params(tmp_path: Path, **values) -> dict:
    return {"profile": PROFILE, "outputs_root": tmp_path, "mode": "live", "seed": 3, **values}


def test_live_source_restricts_to_the_subset(tmp_path):
    _synthetic_run(tmp_path)
    stage = Stage(PROFILE, graph.SCORES, tmp_path)
    source = score_sources.evaluation_source(stage, "hard", mode="live")
    assert source is not None and source.intervals and source.judges == JUDGES
    assert sorted(source.scores["prompt_id"].unique()) == HARD
    assert source.n.to_dict() == dict.fromkeys(CANDIDATES, len(HARD))
    table = source.table1(n_resamples=20, seed=0, level=0.95)
    assert {"ci_low", "ci_high", "bootstrap_std"} <= set(table.columns)
    with pytest.raises(scoring.ScoringError, match="n_resamples"):
        source.table1(n_resamples=None, seed=0, level=0.95)
    # a subset none of whose conversations was graded has no source
    subset.write_all(Stage(PROFILE, graph.SUBSET, tmp_path),
                     {"v2": subset.subset_record("s-v2", IDS[11:])})
    assert score_sources.evaluation_source(stage, "v2", mode="live") is None


def _figures12(root: Path, **values: object) -> tuple[StageRun, s12_figures_tables.Inputs]:
    """12 started on the synthetic run, and its inputs resolved."""
    params = chapter_parameters(graph.FIGURES, root, **_params(root, **values))
    run = s12_figures_tables.start(**{k: v for k, v in params.items() if k != "seed"})
    return run, s12_figures_tables.inputs(run, subsets=params["subsets"])


def test_stages_run_on_a_graded_run(tmp_path):
    out = _synthetic_run(tmp_path)
    m08 = run_chapter(graph.SCORES, _params(tmp_path, n_resamples=20, top_k=3))
    assert m08.subset == "v1" and m08.n_resamples == 20
    assert m08.paired_differences is not None and len(m08.paired_differences) == 3
    m09 = run_chapter(graph.JUDGES, _params(tmp_path, n_resamples=20))
    assert set(m09.self_preference_raw) == set(JUDGES) and m09.intervals
    assert (out / graph.JUDGES / s09_judges.INTERVALS).is_file()
    m10 = run_chapter(graph.REFUSALS, _params(tmp_path))
    assert m10.refusals == {**dict.fromkeys(CANDIDATES, 0), "cand-x": 1}
    assert m10.refused_conversations == {"cand-x": ["p02"]}
    assert m10.sensitivity is not None
    assert {r.candidate: r.n_excluded for r in m10.sensitivity}["cand-x"] == 9
    m12 = run_chapter(graph.FIGURES, _params(tmp_path, publish=False))
    assert m12.n_files == len(m12.files) == 19
    assert all((out / graph.FIGURES / f).is_file() for f in m12.files)
    # one source for Table 1: 12's numbers are 08's
    t08 = pd.read_csv(out / graph.SCORES / "table1_v1.csv", index_col="candidate")
    t12 = pd.read_csv(out / graph.FIGURES / "table1_v1.csv", index_col="candidate")
    for col in ("panel_mean", "ci_low", "ci_high", *JUDGES):
        assert t12[col].to_numpy() == pytest.approx(t08.loc[t12.index, col].to_numpy(), abs=1e-6)
    assert "20 resamples" in (out / graph.FIGURES / "table1.md").read_text()
    assert all(len(f) for f in (s08_scores.findings(m08), s09_judges.findings(m09),
                                s10_refusals.findings(m10)))
    # 12 publishes the Table 1 08 wrote (read back exactly), it does not bootstrap again
    t08_exact = score_sources.read_table1(out / graph.SCORES / "table1_v1.csv")
    t08_exact.loc[t08_exact.index[0], JUDGES[0]] = 0.123456
    t08_exact.to_csv(out / graph.SCORES / "table1_v1.csv")
    run_chapter(graph.FIGURES, _params(tmp_path, publish=False))
    t12 = pd.read_csv(out / graph.FIGURES / "table1_v1.csv", index_col="candidate")
    assert t12.loc[t08_exact.index[0], JUDGES[0]] == 0.123456
    # 12 and 08 in different modes: an error naming the setting they share
    with pytest.raises(scoring.ScoringError, match=r"same evaluation_mode"):
        run_chapter(graph.FIGURES, _params(tmp_path, mode="paper",
                                                                publish=False))


@pytest.mark.parametrize("judges", [JUDGES[:2], JUDGES[2:]], ids=["two", "one"])
def test_stages_run_with_fewer_judges(tmp_path, judges):
    """A panel of two judges or one: 08 to 12 run, and the figures are drawn for those judges."""
    out = _synthetic_run(tmp_path, judges)
    run_chapter(graph.SCORES, _params(tmp_path, n_resamples=20, top_k=3))
    m09 = run_chapter(graph.JUDGES, _params(tmp_path, n_resamples=20))
    assert set(m09.severity) == set(judges)
    assert len(m09.kendall_tau) == len(judges) * (len(judges) - 1) // 2
    # self-preference needs another judge to compare with
    assert set(m09.self_preference_raw) == (set(judges) if len(judges) > 1 else set())
    assert m09.intervals and {r.judge for r in m09.intervals} == set(judges)
    run_chapter(graph.REFUSALS, _params(tmp_path))
    run12, data = _figures12(tmp_path, publish=False)
    t1 = s12_figures_tables.table1(data)
    panels = s12_figures_tables.ranking_and_heatmaps(t1, cache=tmp_path / "cache")
    heatmap = panels.figures["fig_heatmap_v1"].figure.axes[0]
    assert [t.get_text() for t in heatmap.get_xticklabels()] == [study.display_name(j)
                                                                  for j in judges]
    judged = s12_figures_tables.judge_figure(data.judged, cache=tmp_path / "cache")
    bias = judged.figures["fig_judges_v1"].figure.axes[0]
    assert [t.get_text() for t in bias.get_yticklabels()] == [study.display_name(j)
                                                              for j in judges]
    m12 = run_chapter(graph.FIGURES, run12.parameters)
    assert m12.n_files == 19
    header = (out / graph.FIGURES / "table_i1.md").read_text().splitlines()[2]
    assert all(study.display_name(j) in header for j in judges)
    assert all(study.display_name(j) not in header for j in JUDGES if j not in judges)
    text = " ".join(s12_figures_tables.findings(m12, judges=judged.judges, top=t1.top,
                                                subset=t1.primary, intervals=t1.intervals,
                                                level=t1.level))
    assert f"on {study.SUBSET_TITLES['v1']} " in text
    assert ("single judge" in text) is (len(judges) == 1)


def test_subsets_without_a_table1_are_said_and_left_out(tmp_path):
    """12 draws only the subsets 08 scored; one this run graded nothing of is named too."""
    out = _synthetic_run(tmp_path)
    subset.write_all(Stage(PROFILE, graph.SUBSET, tmp_path),
                     {"v1": subset.subset_record("s-v1", V1),
                      "v2": subset.subset_record("s-v2", IDS[11:]),
                      "hard": subset.subset_record("s-hard", HARD)})
    run_chapter(graph.SCORES, _params(tmp_path, subsets=["hard"], n_resamples=20))
    run_chapter(graph.JUDGES, _params(tmp_path, subset="v2", n_resamples=20))
    run12, data = _figures12(tmp_path, subsets=["v1", "v2", "hard"], publish=False)
    t1 = s12_figures_tables.table1(data)
    assert list(t1.subsets) == ["hard"] and t1.primary == "hard"
    assert "not among the scored subsets" in t1.skipped["v1"]
    assert "graded none of its conversations" in t1.skipped["v2"]
    judged = s12_figures_tables.judge_figure(data.judged, cache=tmp_path / "cache")
    assert not judged.figures and "no judge figure" in shown(judged)._repr_html_()
    m12 = run_chapter(graph.FIGURES, run12.parameters)
    assert sorted(m12.files) == sorted(
        ["table1_hard.csv", *tables.TABLE1_FILES, "catalogue.json", *(
            f"{stem}.{ext}" for stem in ("fig_categories_v1", "fig_ranking_hard",
                                         "fig_heatmap_hard") for ext in ("png", "svg"))])
    assert (out / graph.FIGURES / graph.METRICS).is_file()


def test_09_says_once_that_intervals_need_per_conversation_scores(tmp_path, mirror):
    """Paper mode: the chapter's top says what intervals need; the section computes nothing and
    shows the marker the book drops."""
    run = s09_judges.start(**chapter_parameters(graph.JUDGES, tmp_path, profile="p"))
    source = s09_judges.evaluation_source(run, subset="v1")
    assert source.per_conversation is None
    assert "bootstrap intervals need per-conversation grades" in str(shown(source))
    bootstrap = s09_judges.intervals(source.per_conversation, n_resamples=20, seed=1,
                                     level=0.95)
    assert bootstrap is None and isinstance(shown(bootstrap), NotInRun)
    assert s09_judges.severity(source) is not None  # the point values are computed


def test_explorer_stage_writes_only_its_build_record(tmp_path):
    _synthetic_run(tmp_path)
    run = s13_explorer.start(profile=PROFILE, outputs_root=tmp_path, mode="paper")
    data = s13_explorer.grades(run)
    assert data.grades is None
    assert "This chapter needs a live run" in str(shown(data))  # once, at the top
    assert s13_explorer.explorer(data.grades) is None
    assert s13_explorer.example(data.grades) is None
    assert s13_explorer.findings(data.grades) is None
    s13_explorer.write(run)
    assert [p.name for p in (tmp_path / PROFILE / graph.EXPLORER).iterdir()] == ["build.json"]
