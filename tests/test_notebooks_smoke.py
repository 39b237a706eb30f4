"""The smoke profile end to end: 01-12 with 06-10 live against the provider simulator.

The acceptance test of the evaluation chain: at least 3 candidates and a 3-judge panel on at
least 10 conversations, an injected refusal and malformed judge JSON, and scores that equal an
independent recomputation from the stored verdicts (plain csv/json here, no package code).
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import stage_metrics as metrics

from hbpsych_utils import runner
from hbpsych_utils.core import sources
from hbpsych_utils.pipeline import profiles

pytestmark = pytest.mark.notebook


@pytest.fixture
def run(smoke_run: Path) -> Path:
    return smoke_run




def rubric_points() -> dict[str, list]:
    out = {}
    for line in sources.fetch("healthbench_oss").read_text().splitlines():
        rec = json.loads(line)
        out[rec["prompt_id"]] = [r["points"] for r in rec["rubrics"]]
    return out


def recompute_scores(run: Path) -> dict[tuple[str, str, str], float | None]:
    points = rubric_points()
    met: dict[tuple[str, str, str], dict[int, str]] = defaultdict(dict)
    with open(run / "07_grading" / "verdicts.csv") as fh:
        for row in csv.DictReader(fh):
            key = (row["judge"], row["candidate"], row["prompt_id"])
            met[key][int(row["criterion_index"])] = row["criteria_met"]
    scores = {}
    for key, verdicts in met.items():
        pts = points[key[2]]
        assert sorted(verdicts) == list(range(len(pts)))  # one verdict per criterion
        if any(v == "" for v in verdicts.values()):
            scores[key] = None  # a missing verdict leaves the conversation unscored
            continue
        achieved = sum(p for i, p in enumerate(pts) if verdicts[i] == "True")
        scores[key] = achieved / sum(p for p in pts if p > 0)
    return scores


def test_chain_shape_and_injected_faults(run: Path) -> None:
    gen, grade = metrics(run, "06_generation"), metrics(run, "07_grading")
    assert gen["mode"] == "live" and len(gen["candidates"]) >= 3
    assert gen["n_conversations"] >= 10
    assert gen["n_responses"] == len(gen["candidates"]) * gen["n_conversations"]
    assert gen["n_refused"] == 1  # the injected refusal, kept as the model's answer
    profile = profiles.load_profile("smoke")
    fault = next(f for f in profile.llm.faults if f.kind == "content_filter")
    rows = [json.loads(x) for x in (run / "06_generation" / "responses.jsonl").open()]
    (row,) = [r for r in rows if r["refusal"]]
    assert (row["model"], row["prompt_id"]) == (fault.model, fault.prompt_id)
    # a plain chat request's explicit refusal on an OpenAI-compatible API: the content filter
    # withheld the reply (finish_reason "content_filter", content null)
    assert row["text"] == "" and row["stop_reason"] == "content_filter"
    assert len(grade["judges"]) == 3
    assert grade["n_recovered"] >= 1  # malformed judge JSON, boolean recovered
    assert grade["n_reasked"] >= 1 and grade["n_excluded"] >= 1
    assert metrics(run, "10_refusals")["refusals"]["deepseek-v4-flash"] == 1
    assert profile.llm.simulator


def test_scores_equal_independent_recomputation(run: Path) -> None:
    expected = recompute_scores(run)
    with open(run / "07_grading" / "scores.csv") as fh:
        got = {(r["judge"], r["candidate"], r["prompt_id"]): r["score"] for r in csv.DictReader(fh)}
    assert set(got) == set(expected)
    for key, value in expected.items():
        if value is None:
            assert got[key] == ""
        else:
            assert float(got[key]) == pytest.approx(value, abs=1e-12)
    # panel: mean over judges per conversation (only conversations all judges scored), then the
    # mean over conversations, clipped to [0, 1]
    v1 = set(json.loads((run / "05_subset" / "healthbench-psych-v1.json").read_text())
             ["prompt_ids"])
    judges = metrics(run, "07_grading")["judges"]
    m = metrics(run, "08_scores")
    by_conv: dict[tuple[str, str], dict[str, float | None]] = defaultdict(dict)
    for (judge, cand, pid), value in expected.items():
        if pid in v1:
            by_conv[(cand, pid)][judge] = value
    for cand, panel_mean in m["panel_mean"].items():
        per_conv = [sum(d[j] for j in judges) / len(judges)
                    for (c, _), d in by_conv.items()
                    if c == cand and all(d.get(j) is not None for j in judges)]
        assert panel_mean == pytest.approx(min(1, max(0, sum(per_conv) / len(per_conv))), abs=1e-12)
        assert m["n_panel"][cand] == len(per_conv)
        assert m["ci_low"][cand] <= panel_mean <= m["ci_high"][cand]
        for judge in judges:
            own = [d[judge] for (c, _), d in by_conv.items()
                   if c == cand and d.get(judge) is not None]
            assert m["per_judge"][judge][cand] == pytest.approx(
                min(1, max(0, sum(own) / len(own))), abs=1e-12)


def test_judges_refusals_figures_manifest(run: Path) -> None:
    j = metrics(run, "09_judges")
    assert sum(j["severity"].values()) == pytest.approx(0, abs=1e-12)
    assert len(j["kendall_tau"]) == 3 and j["intervals"]
    assert (run / "12_figures_tables" / "fig_ranking_v1.png").stat().st_size > 10_000
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["grading"]["grader_template_sha256"] == sources.artifact(
        "grader_template").sha256
    assert manifest["generation"]["decoding_sent"]["gemini-2.5-flash"]["temperature"] == 0.0
    assert manifest["spend"]["calls"] > 0 and "v1" in manifest["subset_sha256"]


def test_no_file_written_contains_a_key(run: Path) -> None:
    for path in run.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"SMOKEFAKEKEY" not in data, path


@pytest.mark.slow
def test_rerun_is_free_and_identical(smoke_run: Path, tmp_path: Path) -> None:
    # a copy: the session's run keeps the spend of its first run (publishing reads it)
    run = tmp_path / smoke_run.name
    shutil.copytree(smoke_run, run, ignore=shutil.ignore_patterns("book", ".book-build",
                                                                  ".run.lock"))
    before = (run / "07_grading" / "verdicts.csv").read_bytes()
    scores_before = (run / "07_grading" / "scores.csv").read_bytes()
    repeats_before = (run / "16_self_consistency" / "repeats.csv").read_bytes()
    calls_before = json.loads((run / "manifest.json").read_text())["spend"]["calls"]
    result = runner.run_profile("smoke", outputs_root=run.parent,
                                only=["06_generation", "07_grading", "16_self_consistency"],
                                echo=print)
    assert result.ok
    assert metrics(run, "06_generation")["spend_usd"] == 0  # every call came from the store
    assert (run / "07_grading" / "verdicts.csv").read_bytes() == before
    assert (run / "07_grading" / "scores.csv").read_bytes() == scores_before
    # the re-gradings too: each repeat is its own store entry, found again
    again = metrics(run, "16_self_consistency")
    assert again["spend_usd"] == 0 and again["n_calls"] > 0
    assert (run / "16_self_consistency" / "repeats.csv").read_bytes() == repeats_before
    # the store's ledger: not one request was sent by the re-run
    assert json.loads((run / "manifest.json").read_text())["spend"]["calls"] == calls_before


def test_self_consistency_end_to_end_with_three_repeats(run: Path) -> None:
    """Chapter 16 on smoke: 40 items graded three times by the three judges (07's verdict and
    two re-gradings), against a simulator that flips 5% of grader prompts after their first
    answer. Each chapter opens its own simulator, so repeat 1 (its first answer) is 07's
    verdict again and only repeat 2 can flip (docs/self_consistency.md)."""
    m = metrics(run, "16_self_consistency")
    profile = profiles.load_profile("smoke")
    assert (m["mode"], m["repeats"], m["n_items"]) == ("live", 3, 40)
    assert m["simulator_flip_rate"] == profile.llm.simulator_flip_rate == 0.05
    with open(run / "16_self_consistency" / "repeats.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 40 * 3
    by_item: dict[tuple[str, ...], dict[int, str]] = defaultdict(dict)
    for r in rows:
        by_item[(r["judge"], r["candidate"], r["prompt_id"], r["criterion_index"])][
            int(r["repeat"])] = r["criteria_met"]
    assert all(sorted(v) == [0, 1, 2] for v in by_item.values())
    # repeat 0 is 07's verdict, read from its table
    with open(run / "07_grading" / "verdicts.csv") as fh:
        graded = {(r["judge"], r["candidate"], r["prompt_id"], r["criterion_index"]):
                  r["criteria_met"] for r in csv.DictReader(fh)}
    assert all(v[0] == graded[k] for k, v in by_item.items())
    both = {k: v for k, v in by_item.items() if "" not in v.values()}
    assert all(v[1] == v[0] for v in both.values())  # the same question, the same answer
    for judge in metrics(run, "07_grading")["judges"]:
        flipped = sum(v[2] != v[0] for k, v in both.items() if k[0] == judge)
        assert m["flip_rates"][judge]["n_flipped"] == flipped
    assert sum(x["n_flipped"] for j, x in m["flip_rates"].items() if j != "panel majority") > 0
    assert set(m["ranking_taus"]) == {"0|1", "0|2", "1|2"}


def test_explorer_notebook_renders_the_run(run: Path) -> None:
    nb = json.loads((run / "notebooks" / "13_explorer.ipynb").read_text())
    html = [
        "".join(o["data"]["text/html"]) for c in nb["cells"] for o in c.get("outputs", [])
        if "text/html" in o.get("data", {})
    ]
    assert html and "hbx-disagree" in html[-1]  # a disputed conversation, highlighted
    assert "<script>" not in html[-1]


def test_filter_results_on_the_runs_own_scores_matches_08(run: Path) -> None:
    """A lab's view of the same run: filter-results on 07's scores gives 08's panel means."""
    from hbpsych_utils.reporting import interop

    results = interop.load_results([run / "07_grading" / "scores.csv"], "hbpsych")
    reports = interop.filter_results(results, [interop.resolve_subset("v1")], seed=7, level=0.95)
    m = metrics(run, "08_scores")
    assert {r.model for r in reports} == set(m["panel_mean"])
    for r in reports:
        assert r.clipped_mean == pytest.approx(m["panel_mean"][r.model], abs=1e-12)
        assert r.n == m["n_panel"][r.model]


def test_live_harness_check_at_reference_settings(run: Path) -> None:
    m = metrics(run, "11_harness_validation")
    assert m["mode"] == "live" and m["settings"]["temperature"] == 0.5
    with open(run / "11_harness_validation" / "scores.csv") as fh:
        scores = [float(r["score"]) for r in csv.DictReader(fh) if r["score"] != ""]
    n = profiles.load_profile("smoke").harness_validation.n_conversations
    assert m["n_scored"] == len(scores) == n
    assert m["clipped_mean"] == pytest.approx(min(1, max(0, sum(scores) / len(scores))), abs=1e-12)
    assert m["n_common_with_released"] == m["n_scored"]  # every Hard id has a released score


@pytest.mark.slow
def test_a_two_judge_panel_runs_through_the_figures(tmp_path: Path,
                                                    two_judge_smoke: Path) -> None:
    """`--set 'grading.judges=[...]'` with two judges (the panel's first and third: conftest's
    shared two-judge run): every chapter runs, 09 measures one pair, and 12's Table 1 and
    heatmap have a column per judge used, no more."""
    from conftest import TWO_JUDGES

    from hbpsych_utils import study
    from hbpsych_utils.stages import s12_figures_tables

    two = TWO_JUDGES
    assert two == [study.JUDGE_PANEL[0], study.JUDGE_PANEL[2]]  # not the panel's first two
    # a copy: the heatmap is drawn again below, in a figure cache of this test's own
    run = tmp_path / "smoke"
    shutil.copytree(two_judge_smoke, run, ignore=shutil.ignore_patterns(".book-build", "book"))
    ran = json.loads((run / "manifest.json").read_text(encoding="utf-8"))["notebooks"]
    # every chapter ran (the fixture asserted the run's result.ok too)
    assert len(ran) >= 15 and {n["status"] for n in ran} == {"ok"}
    assert metrics(run, "07_grading")["judges"] == two
    judged = metrics(run, "09_judges")
    assert list(judged["kendall_tau"]) == ["|".join(two)]
    assert set(judged["severity"]) == set(judged["self_preference_raw"]) == set(two)
    figures = metrics(run, "12_figures_tables")
    assert "fig_heatmap_v1.png" in figures["files"] and "fig_judges_v1.svg" in figures["files"]
    assert all((run / "12_figures_tables" / f).stat().st_size > 0 for f in figures["files"])
    assert (run / "12_figures_tables" / "fig_heatmap_v1.png").stat().st_size > 10_000
    with open(run / "12_figures_tables" / "table1_v1.csv") as fh:
        header = next(csv.reader(fh))
    assert [c for c in header if c in study.JUDGE_PANEL] == two
    # the heatmap, drawn again from the same files: one column per judge used
    stage = s12_figures_tables.start(profile="smoke", outputs_root=tmp_path, mode="live",
                                     subsets=["v1", "hard"], publish=False)
    shutil.rmtree(stage.figure_cache)  # drawn, not copied from the run's figure cache
    data = s12_figures_tables.inputs(stage, subsets=["v1", "hard"])
    panels = s12_figures_tables.ranking_and_heatmaps(s12_figures_tables.table1(data),
                                                     cache=stage.figure_cache)
    heatmap = panels.figures["fig_heatmap_v1"].figure.axes[0]
    assert [t.get_text() for t in heatmap.get_xticklabels()] == [study.display_name(j)
                                                                  for j in two]
    assert heatmap.collections[0].get_array().shape[1] == 2  # seaborn's cells, judge by column


def test_analyses_by_axis_theme_and_category_with_intervals(run: Path) -> None:
    """14 on the smoke run: per candidate, the panel's (and each judge's) score on every axis,
    theme and modal category with n and an interval; one sample, so no worst-at-k; the panel's
    overall score is 08's. A tag scored on one conversation has no interval."""
    from hbpsych_utils.evaluation import scoring

    m = metrics(run, "14_analyses")
    scores = metrics(run, "08_scores")["by_subset"]["v1"]["panel_mean"]
    assert m["mode"] == "live" and m["samples"] == 1 and "worst_at_k" not in m
    assert set(m["by_tag"]) == {*metrics(run, "07_grading")["judges"], "panel"}
    assert m["panel_mean"] == pytest.approx(scores, abs=1e-12)
    for cand, by in m["by_tag"]["panel"].items():
        prefixes = {t.split(":", 1)[0] for t in by}
        assert prefixes == {"axis", "theme", "category"}, cand
        for tag, s in by.items():
            if s["n"] == 1:  # one conversation: no interval, null with the reason
                assert (s["ci_low"], s["ci_high"]) == (None, None), tag
                assert s["undefined"] == {"ci_low": scoring.ONE_CONVERSATION,
                                          "ci_high": scoring.ONE_CONVERSATION}, tag
            else:
                assert s["n"] > 1 and s["ci_low"] <= s["clipped_mean"] <= s["ci_high"], tag
                assert "undefined" not in s, tag
    assert set(m["length"]["panel"]) == set(scores)
    for name in ("by_tag.csv", "lengths.csv", "fig_axes_v1.png", "fig_categories_v1.png",
                 "fig_length_v1.png"):
        assert (run / "14_analyses" / name).stat().st_size > 0


def test_judge_accuracy_on_the_format_fixture_by_hand(run: Path) -> None:
    """15 on the smoke run: the simulator obeyed the fixture's scripted verdicts through the
    batch APIs, and every F1, sensitivity and specificity is the hand count (see
    tests/test_judge_accuracy.py): the first judge tp 5 fp 1 fn 1 tn 5, the second tp 6 fp 3
    tn 3, the third tp 3 fn 3 tn 6; physicians pooled TT 20, FF 24, fp = fn = 14; AC1 2/9. Each
    judge's corrected rate is recomputed from 07's verdicts.csv with plain csv."""
    from hbpsych_utils.evaluation.meta_eval_fixture import FIXTURE_VERDICTS

    m = metrics(run, "15_judge_accuracy")
    j1, j2, j3 = m["judges"]
    assert m["mode"] == "live" and m["source"] == "fixture" and m["n_rows"] == 12
    assert m["n_excluded"] == 0 and m["n_conversations"] == 4 and m["n_physicians"] == 4
    with open(run / "15_judge_accuracy" / "verdicts.csv") as fh:
        got = {(r["judge"], r["row"]): r["criteria_met"] == "True" for r in csv.DictReader(fh)}
    assert got == {(j, f"row{i:06d}"): v[k] for k, j in enumerate((j1, j2, j3))
                   for i, v in enumerate(FIXTURE_VERDICTS)}
    hand = {j1: (5, 1, 1, 5, 10 / 12, 10 / 12, 5 / 6, 5 / 6),
            j2: (6, 3, 0, 3, 12 / 15, 6 / 9, 1.0, 0.5),
            j3: (3, 0, 3, 6, 6 / 9, 12 / 15, 0.5, 1.0)}
    for judge, (tp, fp, fn, tn, f1p, f1n, se, sp) in hand.items():
        a = m["against_majority"][judge]["all"]
        assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (tp, fp, fn, tn)
        assert a["macro_f1"] == pytest.approx((f1p + f1n) / 2)
        assert (a["f1_met"], a["f1_not_met"]) == (pytest.approx(f1p), pytest.approx(f1n))
        assert (a["sensitivity"], a["specificity"]) == (pytest.approx(se), pytest.approx(sp))
        assert a["sensitivity_low"] <= se <= a["sensitivity_high"]
    assert m["pairwise"][j1]["all"]["balanced_f1"] == pytest.approx((24 / 35 + 26 / 37) / 2)
    assert m["pairwise"]["physicians"]["all"]["balanced_f1"] == pytest.approx(
        (40 / 68 + 48 / 76) / 2)
    assert m["judges_ac1"] == pytest.approx(2 / 9)
    met: dict[str, list[bool]] = defaultdict(list)
    with open(run / "07_grading" / "verdicts.csv") as fh:
        for r in csv.DictReader(fh):
            if r["criteria_met"] != "":
                met[r["judge"]].append(r["criteria_met"] == "True")
    for judge, (*_, se, sp) in hand.items():
        p = sum(met[judge]) / len(met[judge])
        c = m["corrected"][judge]
        assert c["observed"] == pytest.approx(p) and c["n_verdicts"] == len(met[judge])
        assert c["corrected"] == pytest.approx(min(1.0, max(0.0, (p + sp - 1) / (se + sp - 1))))
    # the subset filter: rows 1-12 on four conversations of the run's subsets, row 13 outside;
    # the subsets' sizes read from 05's files
    sub = run / "05_subset"
    index = json.loads((sub / "subsets.json").read_text())
    ids = {k: set(json.loads((sub / f).read_text())["prompt_ids"]) for k, f in index.items()}
    union = set().union(*ids.values())
    cov = m["coverage"]
    assert m["n_rows_in_file"] == 13 and cov["outside the subsets"]["rows"] == 1
    assert (cov["v1 ∪ v2 ∪ Hard"]["rows"], cov["v1 ∪ v2 ∪ Hard"]["conversations"]) == (12, 4)
    assert cov["v1 ∪ v2 ∪ Hard"]["subset_conversations"] == len(union)
    for key, (rows, convs) in {"v1": (9, 3), "v2": (12, 4), "hard": (6, 2)}.items():
        assert (cov[key]["rows"], cov[key]["conversations"]) == (rows, convs)
        assert cov[key]["share"] == pytest.approx(convs / len(ids[key]))
    # conversation 4 is v2 only (no v1 category) and not in the smoke corpus (no theme)
    assert m["n_rows_no_theme"] == 3 and m["n_rows_no_psych_category"] == 3
    # the panel, the judges' majority: met on rows 1-5 (tp 5 fn 1 tn 6); against every
    # physician label tp 12 fp 3 fn 5 tn 16 (tests/test_judge_accuracy.py)
    p = m["against_majority"]["panel"]["all"]
    assert (p["tp"], p["fp"], p["fn"], p["tn"]) == (5, 0, 1, 6)
    assert m["pairwise"]["panel"]["all"]["balanced_f1"] == pytest.approx((24 / 32 + 32 / 40) / 2)
    peri = m["against_majority_by_psych_category"][j1]["Perinatal mental health"]
    assert (peri["tp"], peri["fn"], peri["tn"], peri["fp"]) == (2, 1, 3, 0)
    # the panel's corrected rate, from 07's verdicts: met where at least two of three judges say
    # so, on criteria all three graded; se 5/6, sp 1
    votes: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    with open(run / "07_grading" / "verdicts.csv") as fh:
        for r in csv.DictReader(fh):
            if r["criteria_met"] != "":
                votes[(r["candidate"], r["prompt_id"], r["criterion_index"])].append(
                    r["criteria_met"] == "True")
    panel = [sum(v) * 2 > 3 for v in votes.values() if len(v) == 3]
    pc = m["corrected"]["panel"]
    assert pc["n_verdicts"] == len(panel) and pc["observed"] == pytest.approx(
        sum(panel) / len(panel))
    assert pc["corrected"] == pytest.approx(min(1.0, (sum(panel) / len(panel)) / (5 / 6)))
    for name in ("verdicts.csv", "coverage.csv", "accuracy.csv", "pairwise_f1.csv",
                 "corrected_rates.csv", "fig_f1_placement.png", "fig_f1_placement.svg"):
        assert (run / "15_judge_accuracy" / name).stat().st_size > 0


@pytest.mark.slow
def test_judge_accuracy_undefined_where_simple_evals_reports_none(run: Path) -> None:
    """The smoke run's chapter 15 against simple-evals' semantics (re-implemented in
    tests/test_judge_accuracy.py): every pairwise balanced F1 in metrics.json equals it to
    1e-12 or, where simple-evals reports none, is null with its reason (29 of 72); no finding
    names a slice, as the values behind any "furthest below" are now undefined."""
    from test_judge_accuracy import _fixture_pairs, simple_evals_balanced_f1

    m = metrics(run, "15_judge_accuracy")
    seen = undefined = 0
    for key, slicing in (("pairwise", "category"), ("pairwise_by_theme", "theme"),
                         ("pairwise_by_psych_category", "psych_category")):
        expected = _fixture_pairs(slicing)
        assert {(r, c) for r, cats in m[key].items() for c in cats} == set(expected)
        for (rater, where), pairs in expected.items():
            got, want = m[key][rater][where], simple_evals_balanced_f1(pairs)
            seen += 1
            if want is None:
                undefined += 1
                assert got["balanced_f1"] is None and got["undefined"]["balanced_f1"]
            else:
                assert abs(got["balanced_f1"] - want) <= 1e-12 and "undefined" not in got
    assert (seen, undefined) == (72, 29)
    nb = json.loads((run / "notebooks" / "15_judge_accuracy.ipynb").read_text())
    text = "".join("".join(o.get("data", {}).get("text/markdown", ""))
                   for c in nb["cells"] for o in c.get("outputs", []))
    assert "reaches macro-F1" in text and "furthest below" not in text


@pytest.mark.slow
def test_smoke_with_three_samples_reports_worst_at_k(two_judge_smoke: Path) -> None:
    """`--set generation.samples=3` (conftest's shared two-judge run, which sets it): every
    reply graded; worst-at-k for k = 1..3 with HealthBench's definition (per conversation the
    mean over every k-subset of its 3 replies of the subset's minimum; per model the clipped
    mean), recomputed here from 07's score files with plain csv and itertools; sample 0 is the
    one-sample run's reply."""
    import itertools
    import statistics

    from conftest import TWO_JUDGE_SETTINGS

    assert TWO_JUDGE_SETTINGS["generation.samples"] == 3
    run = two_judge_smoke
    ran = json.loads((run / "manifest.json").read_text(encoding="utf-8"))["notebooks"]
    assert len(ran) >= 15 and {n["status"] for n in ran} == {"ok"}  # and the run's result.ok
    gen = metrics(run, "06_generation")
    assert gen["samples"] == 3 and gen["n_sample_responses"] == 2 * gen["n_responses"]
    seeds = {json.loads(x)["seed"] for x in
             (run / "06_generation" / "responses_samples.jsonl").read_text().splitlines()}
    assert seeds == {profiles.load_profile("smoke").seed + s for s in (1, 2)}
    panel: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for name, sample in (("scores.csv", None), ("scores_samples.csv", "sample")):
        with open(run / "07_grading" / name) as fh:
            for r in csv.DictReader(fh):
                if r["score"] != "":
                    s = int(r[sample]) if sample else 0
                    panel[(r["candidate"], r["prompt_id"])][s].append(float(r["score"]))
    judges = len(metrics(run, "07_grading")["judges"])
    grid: dict[str, list[list[float]]] = defaultdict(list)
    for (cand, _), by_sample in panel.items():
        if sorted(by_sample) == [0, 1, 2] and all(len(v) == judges for v in by_sample.values()):
            grid[cand].append([sum(by_sample[s]) / judges for s in range(3)])
    m = metrics(run, "14_analyses")
    assert m["samples"] == 3
    for cand, convs in grid.items():
        got = {k["k"]: k for k in m["worst_at_k"]["panel"][cand]}
        assert sorted(got) == [1, 2, 3]
        for k in (1, 2, 3):
            per_conv = [statistics.fmean(min(c) for c in itertools.combinations(x, k))
                        for x in convs]
            assert got[k]["n"] == len(convs)
            assert got[k]["clipped_mean"] == pytest.approx(
                min(1, max(0, statistics.fmean(per_conv))), abs=1e-12)
        runs = [min(1, max(0, statistics.fmean(x[s] for x in convs))) for s in range(3)]
        assert m["run_spread"]["panel"][cand]["runs"] == pytest.approx(runs, abs=1e-12)
    assert (run / "14_analyses" / "fig_worst_at_k_v1.png").stat().st_size > 10_000
