"""Chapter 14 (``stages.s14_analyses``) on a small synthetic graded run: its numbers against the
files it read (recomputed here with plain pandas), with one and with three samples, in paper
mode, and its findings' claims each way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import chapter_parameters, grading_live_metrics

from hbpsych_utils.construction import corpus, subset
from hbpsych_utils.evaluation import generation, grading
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import AnalysesMetrics, KScore, LengthScore, RunSpread
from hbpsych_utils.pipeline.metrics import TagScore as T
from hbpsych_utils.pipeline.stage import Stage
from hbpsych_utils.reporting.display import NotInRun
from hbpsych_utils.stages import s14_analyses
from hbpsych_utils.stages.base import run_chapter, shown

PROFILE = "synthetic"
JUDGES = ["j-a", "j-b"]
CANDIDATES = ["m-1", "m-2"]
IDS = [f"p{i:02d}" for i in range(8)]
AXES = ("axis:accuracy", "axis:completeness", "axis:communication_quality")


def _conversation(i: int) -> dict:
    rubrics = [{"criterion": f"c{k}", "points": p, "tags": [AXES[k % 3]]}
               for k, p in enumerate((5, 3, -2, 4, -1))]
    tags = ["theme:emergency_referrals"] if i % 4 == 0 else ["theme:hedging"]
    return {"prompt_id": IDS[i], "prompt": [{"role": "user", "content": f"question {i}"}],
            "rubrics": rubrics, "example_tags": tags}


def _run(root: Path, samples: int) -> Path:
    """01's corpus record, 05's subsets and categories, 06's replies, 07's verdicts, scores and
    metrics, for two candidates and two judges; ``samples`` replies per conversation."""
    path = root / "corpus.jsonl"
    path.write_text("".join(json.dumps(_conversation(i)) + "\n" for i in range(len(IDS))))
    loaded = corpus.load_for_profile(allow_partial=True, corpus_file=path)
    s01 = Stage(PROFILE, graph.CORPUS, root)
    s01.write_json(graph.CORPUS_RECORD, corpus.source_record(
        loaded, {"invalid_records": "error", "max_conversations": None}))
    s05 = Stage(PROFILE, graph.SUBSET, root)
    subset.write_all(s05, {k: subset.subset_record(f"s-{k}", IDS) for k in ("v1", "v2", "hard")})
    pd.DataFrame({"prompt_id": IDS, "category": ["suicidality_self_harm", "anxiety"] * 4}).to_csv(
        s05.path(graph.CATEGORIES_V1), index=False)
    rng = np.random.default_rng(5)
    replies = pd.DataFrame([
        {"model": c, "prompt_id": p, "status": "ok", "text": "x" * (500 + 300 * i + 40 * s),
         "stop_reason": "stop", "refusal": False, "input_tokens": 1, "output_tokens": 1,
         "cost": 0.0, "cached": False, "config": "{}", "chars": 500 + 300 * i + 40 * s,
         "sample": s, "seed": 7 + s if s else None}
        for s in range(samples) for c in CANDIDATES for i, p in enumerate(IDS)])
    first, rest = generation.split_samples(replies)
    s06 = Stage(PROFILE, graph.GENERATION, root)
    generation.write_responses(first, s06.path(graph.RESPONSES))
    if rest is not None:
        generation.write_responses(rest, s06.path(graph.RESPONSE_SAMPLES))
    verdicts = pd.DataFrame([
        {"judge": j, "candidate": c, "prompt_id": p, "sample": s, "criterion_index": k,
         "criteria_met": bool(rng.random() < 0.6), "recovered": False, "excluded": False}
        for s in range(samples) for j in JUDGES for c in CANDIDATES for p in IDS
        for k in range(5)])
    scores = grading.scores_from_verdicts(verdicts, loaded.by_id())
    s07 = Stage(PROFILE, graph.GRADING, root)
    for frame, name, more in ((verdicts, graph.VERDICTS, graph.VERDICT_SAMPLES),
                              (scores, graph.SCORES_TABLE, graph.SCORE_SAMPLES)):
        head, tail = generation.split_samples(frame)
        s07.write_table(head, name)
        if tail is not None:
            s07.write_table(tail, more)
    s07.write_json(graph.METRICS, grading_live_metrics(JUDGES))
    return root / PROFILE


def _params(root: Path, **values) -> dict:
    return {"profile": PROFILE, "outputs_root": root, "mode": "live", "seed": 3,
            "n_resamples": 40, **values}


def _panel(scores: pd.DataFrame) -> pd.DataFrame:
    """The panel's score per (candidate, prompt_id[, sample]), by hand: the judges' mean."""
    keys = [k for k in ("candidate", "prompt_id", "sample") if k in scores.columns]
    return scores.groupby(keys)["score"].mean().reset_index()


def test_stage_numbers_against_its_inputs_with_three_samples(tmp_path):
    out = _run(tmp_path, samples=3)
    m = run_chapter(graph.ANALYSES, _params(tmp_path))
    assert isinstance(m, AnalysesMetrics) and m.samples == 3 and m.n_conversations == len(IDS)
    assert set(m.by_tag) == {*JUDGES, "panel"}
    scores = pd.read_csv(out / graph.GRADING / graph.SCORES_TABLE)
    panel = _panel(scores)
    # a theme takes the conversation's score: the panel's hedging score is the clipped mean of
    # 07's panel scores on the hedging conversations
    hedging = [p for i, p in enumerate(IDS) if i % 4]
    for cand in CANDIDATES:
        values = panel[(panel.candidate == cand) & panel.prompt_id.isin(hedging)]["score"]
        got = m.by_tag["panel"][cand]["theme:hedging"]
        assert got.n == len(hedging)
        assert got.clipped_mean == pytest.approx(min(1, max(0, values.mean())))
        cat = m.by_tag["panel"][cand]["category:suicidality_self_harm"]
        assert cat.n == 4
    # communication quality carries only a negative criterion: never scored (simple-evals)
    assert {t for t in m.by_tag["panel"]["m-1"] if t.startswith("axis:")} == set(AXES[:2])
    # panel overall = 08's panel score
    assert m.panel_mean["m-1"] == pytest.approx(
        min(1, max(0, panel[panel.candidate == "m-1"]["score"].mean())))
    # worst-at-1 = mean of every sample; worst-at-3 = mean of the per-conversation minima
    every = pd.concat([scores.assign(sample=0),
                       pd.read_csv(out / graph.GRADING / graph.SCORE_SAMPLES)])
    grid = _panel(every).pivot(index=["candidate", "prompt_id"], columns="sample",
                               values="score")
    for cand in CANDIDATES:
        ks = m.worst_at_k["panel"][cand]
        assert [k.k for k in ks] == [1, 2, 3]
        assert ks[0].clipped_mean == pytest.approx(
            min(1, max(0, grid.loc[cand].mean(axis=1).mean())))
        assert ks[2].clipped_mean == pytest.approx(
            min(1, max(0, grid.loc[cand].min(axis=1).mean())))
        runs = [min(1, max(0, grid.loc[cand][s].mean())) for s in range(3)]
        assert m.run_spread["panel"][cand].runs == pytest.approx(runs)
        assert m.run_spread["panel"][cand].std == pytest.approx(np.std(runs))
    # length-adjusted: each first reply moved by 0.0299 per 500 characters from 2,000
    chars = {p: 500 + 300 * i for i, p in enumerate(IDS)}
    first = panel[panel.candidate == "m-2"]
    adjusted = first["score"] - 0.0299 * (first["prompt_id"].map(chars) - 2000) / 500
    lm = m.length["panel"]["m-2"]
    assert lm.adjusted_mean == pytest.approx(min(1, max(0, adjusted.mean())))
    assert lm.mean_chars == pytest.approx(np.mean(list(chars.values())))
    assert m.length_penalty == "healthbench" and m.length_per_500 == 0.0299
    files = {p.name for p in (out / graph.ANALYSES).iterdir()}
    assert {"by_tag.csv", "lengths.csv", "worst_at_k.csv", "run_spread.csv",
            "fig_axes_v1.png", "fig_categories_v1.svg", "fig_length_v1.png",
            "fig_worst_at_k_v1.png"} <= files
    text = " ".join(s14_analyses.findings(m))
    assert "With 3 replies per conversation" in text and "suicidality" in text


def test_one_sample_has_no_worst_at_k_and_a_harder_variant_adjusts_more(tmp_path):
    _run(tmp_path, samples=1)
    m = run_chapter(graph.ANALYSES, _params(tmp_path, length_penalty="hard"))
    assert m.samples == 1 and m.worst_at_k is None and m.run_spread is None
    assert m.length_per_500 == 0.0392
    run = s14_analyses.start(**chapter_parameters(graph.ANALYSES, tmp_path, "smoke",
                                                  **_params(tmp_path)))
    data = s14_analyses.inputs(run, subset="v1")
    assert data.graded is not None and data.graded.samples == 1 and data.sampled is None
    assert s14_analyses.reliability(data.sampled, n_resamples=40, seed=3, level=0.95,
                                    cache=run.figure_cache) is None  # not executed
    assert "need at least 2" in str(shown(data))  # said once, at the chapter's top
    assert "One reply per conversation" in " ".join(s14_analyses.findings(m))


def test_paper_mode_says_once_what_it_needs_and_computes_nothing(tmp_path):
    run = s14_analyses.start(**chapter_parameters(graph.ANALYSES, tmp_path, profile=PROFILE))
    data = s14_analyses.inputs(run, subset="v1")
    top = str(shown(data))
    assert data.graded is None and "This chapter needs a live run" in top
    assert "released matrices" in top and "worst-at-k" in top  # why, and what a live run adds
    knobs = {"n_resamples": 40, "seed": 3, "level": 0.95}
    for step in (s14_analyses.by_tag(data.graded, **knobs),
                 s14_analyses.lengths(data.graded, penalty="hard", cache=tmp_path, **knobs),
                 s14_analyses.reliability(data.sampled, cache=tmp_path, **knobs),
                 s14_analyses.heatmaps(None, cache=tmp_path)):
        assert step is None and isinstance(shown(step), NotInRun)
    m = s14_analyses.metrics(data, None, None, None)
    assert m.model_dump(exclude_unset=True) == {"mode": "paper"}
    assert s14_analyses.findings(m) is None


def test_figures_titles_and_captions_are_written_once():
    assert set(s14_analyses.FIGURES) == {"axes", "categories", "length", "worst_at_k"}
    assert all(f.title and f.caption.endswith(".") for f in s14_analyses.FIGURES.values())


# ------------------------------------------------------------------------------ findings

def _tag(n: int, value: float) -> T:
    return T(n=n, clipped_mean=value, ci_low=0.0, ci_high=1.0, bootstrap_std=0.1)


def _metrics(**extra) -> AnalysesMetrics:
    by_tag = {"panel": {
        "a": {"axis:accuracy": _tag(9, 0.50), "axis:completeness": _tag(9, 0.30),
              "axis:context_awareness": _tag(2, 0.05), "theme:hedging": _tag(9, 0.20),
              "theme:emergency_referrals": _tag(3, 0.4)},
        "b": {"axis:accuracy": _tag(9, 0.40), "axis:completeness": _tag(9, 0.395),
              "theme:hedging": _tag(9, 0.45), "theme:emergency_referrals": _tag(3, 0.1)}}}
    values = {"mode": "live", "subset": "v1", "n_conversations": 9, "judges": ["j"],
              "panel_mean": {"a": 0.45, "b": 0.40}, "by_tag": by_tag, "samples": 1, **extra}
    return AnalysesMetrics(**values)


def test_findings_gate_slices_by_size_and_closeness():
    text = " ".join(s14_analyses.findings(_metrics(), min_n=5, close=0.01))
    # a's context awareness has 2 conversations: not its named weakest axis
    assert "a: Completeness (0.300, 0.200 below its next)" in text
    assert "b: Completeness (0.395, within 0.01 of its next)" in text
    assert "theme Responding under uncertainty (b above a)" in text
    assert "axis accuracy" not in text.split("reverse")[-1]  # same order as overall there
    assert "None of the graded conversations is among the suicidality" in text
    assert ("emergency-referral conversations (n = 3; fewer than 5, too few to read as a "
            "ranking) the panel scores a 0.400, b 0.100") in text
    strict = " ".join(s14_analyses.findings(_metrics(), min_n=10, close=0.01))
    assert "No rubric axis has a panel score on 10 or more" in strict
    assert "No slice with at least 10 conversations" in strict


def test_findings_on_length_and_reliability():
    length = {"panel": {
        "a": LengthScore(n=9, mean_chars=2500, median_chars=2400, clipped_mean=0.45,
                         adjusted_mean=0.42, adjusted_ci_low=0.3, adjusted_ci_high=0.5),
        "b": LengthScore(n=9, mean_chars=900, median_chars=800, clipped_mean=0.40,
                         adjusted_mean=0.46, adjusted_ci_low=0.3, adjusted_ci_high=0.5)}}
    worst = {"panel": {c: [KScore(k=k, n=9, clipped_mean=v, ci_low=0, ci_high=1)
                           for k, v in enumerate(vs, start=1)]
                       for c, vs in {"a": [0.45, 0.40, 0.38], "b": [0.40, 0.30, 0.20]}.items()}}
    spread = {"panel": {"a": RunSpread(n=9, runs=[0.44, 0.45, 0.46], mean=0.45, min=0.44,
                                       max=0.46, std=0.008),
                        "b": RunSpread(n=9, runs=[0.38, 0.40, 0.42], mean=0.40, min=0.38,
                                       max=0.42, std=0.016)}}
    m = _metrics(length=length, length_penalty="healthbench", length_per_500=0.0299,
                 samples=3, worst_at_k=worst, run_spread=spread, n_incomplete=0)
    text = " ".join(s14_analyses.findings(m, min_n=5, close=0.01))
    assert "Replies average 1,700 characters" in text
    assert "moves the panel's scores by -0.030 to +0.060; it reverses a and b" in text
    assert "largest fall from worst-at-1 to worst-at-3 is b's (0.400 to 0.200)." in text
    assert "varies most for b (standard deviation 0.0160, 0.380 to 0.420)" in text
