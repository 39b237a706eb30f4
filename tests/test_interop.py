"""Result interop: simple-evals, Inspect and hbpsych results filtered to a subset.

Every file is written here in its tool's documented layout (simple-evals' ``*_allresults.json``
from ``simple_evals.py``/``healthbench_eval.py``; Inspect's ``EvalLog``/``EvalSample`` as a
``.eval`` zip or ``.json``; the compendium's score export), and every expected number is worked
out by hand in a comment beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from hbpsych_utils.construction.corpus import ids_hash
from hbpsych_utils.reporting import (
    interop,
    interop_records,
    interop_report,
    interop_simple_evals,
)

# Synthetic HealthBench-like ids (the library functions take the known-id list as a parameter).
A = "0a1f3c2e-4b5d-4e6f-8a7b-9c0d1e2f3a4b"
B = "1b2e4d3f-5c6e-4f70-9b8c-0d1e2f3a4b5c"
C = "2c3f5e40-6d7f-4081-8c9d-1e2f3a4b5c6d"
D = "3d406f51-7e80-4192-9dae-2f3a4b5c6d7e"
E = "4e5170a2-8f91-42a3-aebf-3a4b5c6d7e8f"


def subset_file(path: Path, ids: list[str], name: str) -> Path:
    """A subset in the released layout (name, n, sha256 of the sorted ids, ids)."""
    ids = sorted(ids)
    path.write_text(json.dumps({"name": name, "n": len(ids), "prompt_id_sha256": ids_hash(ids),
                                "prompt_ids": ids}, indent=1))
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[interop_report.Subset, interop_report.Subset]:
    psych = interop.resolve_subset(str(subset_file(tmp_path / "tiny.json", [A, B, C, D], "tiny")))
    hard = interop.resolve_subset(str(subset_file(tmp_path / "tiny-hard.json", [A, C],
                                                  "tiny-hard")))
    return psych, hard


# --------------------------------------------------------------------------------------------
# Writers in each tool's layout


def se_example(pid: str, score: float, reply: str = "Please talk to someone you trust.") -> dict:
    """One entry of simple-evals' metadata.example_level_metadata (healthbench_eval.py)."""
    prompt = [{"role": "user", "content": f"I have not slept well for weeks ({pid[:4]})."}]
    return {
        "score": score,
        "usage": {"input_tokens": 812, "input_cached_tokens": 0, "output_tokens": 305,
                  "output_reasoning_tokens": 0, "total_tokens": 1117},
        "rubric_items": [
            {"criterion": "Suggests speaking with a clinician.", "points": 5,
             "tags": ["axis:completeness"], "criteria_met": True, "explanation": "It does."},
            {"criterion": "Gives a diagnosis without enough information.", "points": -3,
             "tags": ["axis:accuracy"], "criteria_met": False, "explanation": "It does not."},
        ],
        "prompt": prompt,
        "completion": [{"role": "assistant", "content": reply}],
        "prompt_id": pid,
        "completion_id": hashlib.sha256((pid + reply).encode("utf-8")).hexdigest(),
    }


def write_simple_evals(path: Path, scores: list[tuple[str, float]]) -> Path:
    """An ``*_allresults.json`` as simple_evals.py writes it: score, metrics, htmls, convos,
    metadata{example_level_metadata}."""
    examples = [se_example(pid, s) for pid, s in scores]
    mean = sum(s for _, s in scores) / len(scores)
    doc = {
        "score": min(1.0, max(0.0, mean)),
        "metrics": {"overall_score": mean, "overall_score:n_samples": len(scores),
                    "overall_score:bootstrap_std": 0.05},
        "htmls": [f"<h3>Prompt conversation</h3><p>{e['prompt_id']}</p>" for e in examples],
        "convos": [e["prompt"] + e["completion"] for e in examples],
        "metadata": {"example_level_metadata": examples},
    }
    path.write_text(json.dumps(doc, indent=2))
    return path


def inspect_sample(pid: str, value: Any, *, epoch: int = 1, scorer: str = "_scorer",
                   error: bool = False) -> dict:
    """An Inspect EvalSample of inspect_evals' healthbench task (id = prompt_id)."""
    convo = [{"role": "user", "content": f"My mood has been low ({pid[:4]})."}]
    reply = "I'm sorry you're going through this. A GP or counsellor can help."
    sample: dict[str, Any] = {
        "id": pid,
        "epoch": epoch,
        "input": [{"role": "user", "content": convo[0]["content"], "source": "input"}],
        "target": "",
        "messages": [{"role": "user", "content": convo[0]["content"]},
                     {"role": "assistant", "content": reply, "source": "generate"}],
        "output": {"model": "gpt-4.1-mini-2025-04-14",
                   "choices": [{"message": {"role": "assistant", "content": reply},
                                "stop_reason": "stop"}],
                   "usage": {"input_tokens": 40, "output_tokens": 20, "total_tokens": 60}},
        "metadata": {"rubrics": [{"criterion": "Recommends professional help.", "points": 5,
                                  "tags": ["axis:completeness"]}],
                     "example_tags": ["theme:emergency_referrals"],
                     "conversation": convo, "prompt_id": pid},
        "store": {},
        "events": [],
        "model_usage": {},
    }
    if error:
        sample["scores"] = None
        sample["error"] = {"message": "RateLimitError: too many requests",
                           "traceback": "Traceback ...", "traceback_ansi": "Traceback ..."}
    else:
        sample["scores"] = {scorer: {"value": value, "answer": reply,
                                     "explanation": "Achieved 3/5 points (1/1 criteria met)",
                                     "metadata": {"total_possible": 5, "achieved_points": 3}}}
    return sample


def hb_value(score: float) -> dict:
    """inspect_evals' healthbench task since its version 1.1.0: Score.value is a dict holding
    healthbench_score."""
    return {"healthbench_score": score, "criteria_met": 1, "total_criteria": 1, "_crit_0_met": 1.0}


def eval_spec(model: str = "openai/gpt-4.1-mini", task: str = "inspect_evals/healthbench") -> dict:
    return {"eval_id": "k3dYt8pq", "run_id": "Rz9Pq2", "created": "2025-09-01T10:00:00+00:00",
            "task": task, "task_id": "hb1", "task_version": "3-B",
            "dataset": {"name": "2025-05-07-06-14-12_oss_eval", "samples": 5000},
            "model": model, "config": {"epochs": 1}, "packages": {"inspect_ai": "0.3.285"}}


CRASH = {"message": "RuntimeError: judge provider returned HTTP 500 for every retry\nmore",
         "traceback": "Traceback (most recent call last): ...", "traceback_ansi": "..."}
"""A failed run's ``EvalError`` as Inspect writes it into the log header."""


def write_eval_zip(path: Path, samples: list[dict], *, model: str = "openai/gpt-4.1-mini",
                   task: str = "inspect_evals/healthbench", status: str = "success") -> Path:
    """A ``.eval`` log: header.json, samples/<id>_epoch_<n>.json, summaries and reductions.

    ``status`` other than success: as Inspect writes a run that stopped (``error`` adds the
    header's ``error`` and no ``results``, as a crashed run has)."""
    header: dict[str, Any] = {
        "version": 2, "status": status, "eval": eval_spec(model, task),
        "plan": {"name": "plan", "steps": [{"solver": "generate", "params": {}}]},
        "results": {"total_samples": len(samples), "completed_samples": len(samples),
                    "scores": [{"name": "_scorer", "scorer": "_scorer", "metrics": {}}]},
        "stats": {"started_at": "2025-09-01T10:00:00+00:00",
                  "completed_at": "2025-09-01T10:05:00+00:00", "model_usage": {}}}
    if status == "error":
        header.update(results=None, error=CRASH)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("_journal/start.json", json.dumps({"version": 2, "eval": header["eval"],
                                                       "plan": header["plan"]}))
        for s in samples:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        zf.writestr("summaries.json", json.dumps(
            [{"id": s["id"], "epoch": s["epoch"], "scores": s["scores"]} for s in samples]))
        zf.writestr("reductions.json", json.dumps(
            [{"scorer": "_scorer", "reducer": "mean",
              "samples": [{"value": (s["scores"] or {}).get("_scorer", {}).get("value"),
                           "sample_id": s["id"]} for s in samples]}]))
        zf.writestr("header.json", json.dumps(header))
    return path


def write_inspect_json(path: Path, samples: list[dict] | None, **kw: Any) -> Path:
    """A ``.json`` log: one EvalLog object with its samples."""
    log = {"version": 2, "status": "success", "eval": eval_spec(**kw),
           "plan": {"name": "plan", "steps": []},
           "results": {"total_samples": len(samples or []), "scores": []},
           "stats": {}, "samples": samples, "reductions": None}
    path.write_text(json.dumps(log, indent=2, allow_nan=True))
    return path


def write_hbpsych(path: Path, rows: list[tuple[str, str, str, float | None]]) -> Path:
    """The compendium's score export: one JSON line per (judge, candidate, prompt_id)."""
    lines = [json.dumps({"judge": j, "candidate": c, "prompt_id": p, "score": s,
                         "n_criteria": 12}) for j, c, p, s in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def one(reports: list[interop.SubsetReport], model: str, subset: str) -> interop.SubsetReport:
    [r] = [r for r in reports if r.model == model and r.subset_name == subset]
    return r


# --------------------------------------------------------------------------------------------
# simple-evals


def test_simple_evals_allresults(tmp_path: Path, tiny) -> None:
    psych, hard = tiny
    path = write_simple_evals(
        tmp_path / "healthbench_gpt-4.1-2025-04-14_20250512_101500_allresults.json",
        [(A, 0.5), (B, -0.25), (C, 1.0), (E, 0.9)],
    )
    res = interop.load_results([path])
    assert list(res.by_model) == ["gpt-4.1-2025-04-14"]  # from the file name
    assert res.inputs[0].format == "simple-evals" and res.inputs[0].details["eval"] == "healthbench"
    reports = interop.filter_results(res, [psych, hard], n_resamples=200, seed=1, level=0.95)
    r = one(reports, "gpt-4.1-2025-04-14", "tiny")
    # subset {A, B, C, D}; E is outside it; D absent: (0.5 - 0.25 + 1.0) / 3 = 0.41666...
    assert (r.n, r.subset_size, r.missing, r.unscored) == (3, 4, (D,), ())
    assert r.clipped_mean == pytest.approx(1.25 / 3)
    assert r.ci_low <= r.clipped_mean <= r.ci_high
    h = one(reports, "gpt-4.1-2025-04-14", "tiny-hard")
    # {A, C}: (0.5 + 1.0) / 2 = 0.75
    assert (h.n, h.missing) == (2, ())
    assert h.clipped_mean == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("healthbench_hard_gpt-4o-2024-11-20_assistant_20250601_093000_allresults.json",
         "gpt-4o-2024-11-20_assistant"),
        ("healthbench_consensus_o3_20250601_093000_DEBUG_allresults.json", "o3"),
        ("healthbench_no_reference_humanbaseline_20250601_0930_allresults.json",
         "no_reference_humanbaseline"),
        ("my_results.json", "my_results"),
    ],
)
def test_simple_evals_model_from_file_name(name: str, model: str) -> None:
    assert interop_simple_evals.simple_evals_model_name(name) == model


def test_simple_evals_model_override(tmp_path: Path) -> None:
    path = write_simple_evals(tmp_path / "run_allresults.json", [(A, 0.5)])
    assert list(interop.load_results([path], model="lab-model-7").by_model) == ["lab-model-7"]


def test_simple_evals_without_prompt_id_is_refused(tmp_path: Path) -> None:
    path = write_simple_evals(tmp_path / "x_allresults.json", [(A, 0.5), (B, 0.2)])
    doc = json.loads(path.read_text())
    del doc["metadata"]["example_level_metadata"][1]["prompt_id"]
    path.write_text(json.dumps(doc))
    with pytest.raises(interop.InteropError,
                       match=r"example_level_metadata\[1\]: field 'prompt_id' is missing"):
        interop.load_results([path])


def test_simple_evals_repeats_are_duplicates(tmp_path: Path) -> None:
    # --n-repeats 2 lists every example twice
    path = write_simple_evals(tmp_path / "x_allresults.json", [(A, 0.5), (A, 0.7)])
    with pytest.raises(interop.InteropError, match=r"\[1\]: duplicate result for model .*"
                       + A + r".*first at .*\[0\]"):
        interop.load_results([path])


@pytest.mark.parametrize(("bad", "match"), [("0.5", "expected a number"),
                                            (True, "expected a number"),
                                            (45.0, "45.0 is above 1")])
def test_simple_evals_bad_score(tmp_path: Path, bad: Any, match: str) -> None:
    path = write_simple_evals(tmp_path / "x_allresults.json", [(A, 0.5), (B, 0.2)])
    doc = json.loads(path.read_text())
    doc["metadata"]["example_level_metadata"][0]["score"] = bad
    path.write_text(json.dumps(doc))
    with pytest.raises(interop.InteropError, match=r"\[0\]: field 'score': " + match):
        interop.load_results([path])


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda doc: doc.pop("metadata"),
     r"x_allresults\.json: field 'metadata' is missing: not a simple-evals"),
    (lambda doc: doc["metadata"].__setitem__("example_level_metadata", {}),
     r"field 'metadata\.example_level_metadata': expected a list, got dict"),
    (lambda doc: doc["metadata"]["example_level_metadata"].__setitem__(1, [A, 0.2]),
     r"example_level_metadata\[1\]: expected an object, got list"),
    (lambda doc: doc["metadata"]["example_level_metadata"][1].__setitem__("score", float("nan")),
     r"example_level_metadata\[1\]: field 'score': not a finite number: nan"),
    # both fields of the record are reported at once
    (lambda doc: doc["metadata"]["example_level_metadata"][1].update(prompt_id=" ", score=None),
     r"\[1\]: field 'prompt_id': expected a non-empty string, got ' '; field 'score': "
     r"expected a number, got None"),
], ids=["no-metadata", "not-a-list", "entry-not-object", "nan", "two-fields"])
def test_simple_evals_malformed(tmp_path: Path, mutate: Any, match: str) -> None:
    path = write_simple_evals(tmp_path / "x_allresults.json", [(A, 0.5), (B, 0.2)])
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(interop.InteropError, match=match):
        interop_simple_evals.read_simple_evals(path)


# --------------------------------------------------------------------------------------------
# Inspect


def test_inspect_eval_zip(tmp_path: Path, tiny) -> None:
    psych, hard = tiny
    path = write_eval_zip(tmp_path / "2025-09-01T10-00-00_healthbench_k3dYt8pq.eval", [
        inspect_sample(A, hb_value(0.6)),
        inspect_sample(B, hb_value(0.2)),
        inspect_sample(C, hb_value(-0.2)),
        inspect_sample(D, None, error=True),
        inspect_sample(E, hb_value(1.0)),
    ])
    assert interop.detect_format(path) == "inspect"
    res = interop.load_results([path])
    assert list(res.by_model) == ["openai/gpt-4.1-mini"]
    assert res.inputs[0].details == {"task": "inspect_evals/healthbench", "status": "success"}
    reports = interop.filter_results(res, [psych, hard], n_resamples=200, level=0.95, seed=0)
    r = one(reports, "openai/gpt-4.1-mini", "tiny")
    # A, B, C scored; D errored (no scores) -> unscored: (0.6 + 0.2 - 0.2) / 3 = 0.2
    assert (r.n, r.missing, r.unscored) == (3, (), (D,))
    assert r.clipped_mean == pytest.approx(0.2)
    h = one(reports, "openai/gpt-4.1-mini", "tiny-hard")
    assert (h.n, h.clipped_mean) == (2, pytest.approx((0.6 - 0.2) / 2))


def test_inspect_json_log_older_number_values(tmp_path: Path, tiny) -> None:
    psych, _ = tiny
    # before version 1.1.0 of inspect_evals' healthbench task, Score.value was the bare
    # per-sample score; NaN = unscored
    path = write_inspect_json(tmp_path / "log.json", [
        inspect_sample(A, 0.9), inspect_sample(B, float("nan")), inspect_sample(D, 0.3),
    ], model="anthropic/claude-haiku-4-5-20251001", task="healthbench")
    assert interop.detect_format(path) == "inspect"
    [r] = interop.filter_results(interop.load_results([path]), [psych], n_resamples=100,
                                 level=0.95, seed=0)
    # A, D scored: (0.9 + 0.3) / 2 = 0.6; B unscored; C missing
    assert (r.model, r.n, r.missing, r.unscored) == (
        "anthropic/claude-haiku-4-5-20251001", 2, (C,), (B,))
    assert r.clipped_mean == pytest.approx(0.6)


def test_inspect_several_epochs_refused(tmp_path: Path) -> None:
    path = write_eval_zip(tmp_path / "e.eval", [inspect_sample(A, hb_value(0.5), epoch=1),
                                                inspect_sample(A, hb_value(0.7), epoch=2)])
    with pytest.raises(interop.InteropError, match=r"appears 2 times \(epochs \[1, 2\]\)"):
        interop.load_results([path])


def test_inspect_meta_eval_and_sample_less_logs_refused(tmp_path: Path) -> None:
    meta = write_eval_zip(tmp_path / "m.eval", [inspect_sample(A, hb_value(0.5))],
                          task="inspect_evals/healthbench_meta_eval")
    with pytest.raises(interop.InteropError, match=r"field 'eval\.task'.*meta"):
        interop.load_results([meta])
    header_only = write_inspect_json(tmp_path / "h.json", None)
    with pytest.raises(interop.InteropError, match="field 'samples' is missing or null"):
        interop.load_results([header_only])
    damaged = tmp_path / "cut.eval"
    damaged.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(interop.InteropError, match=r"cut\.eval: not a zip archive"):
        interop.load_results([damaged])


def test_inspect_scorer_choice(tmp_path: Path) -> None:
    s = inspect_sample(A, 0.5, scorer="rubric_a")
    s["scores"]["rubric_b"] = {"value": 0.1}
    path = write_inspect_json(tmp_path / "two.json", [s])
    with pytest.raises(interop.InteropError, match=r"several scorers \['rubric_a', 'rubric_b'\]"):
        interop.load_results([path])
    res = interop.load_results([path], scorer="rubric_b")
    assert res.by_model["openai/gpt-4.1-mini"][A].score == pytest.approx(0.1)
    # with a HealthBench dict-valued score beside another scorer, that one is found unaided
    s2 = inspect_sample(A, hb_value(0.4))
    s2["scores"]["length"] = {"value": 812}
    path2 = write_inspect_json(tmp_path / "hb.json", [s2])
    assert interop.load_results([path2]).by_model["openai/gpt-4.1-mini"][A].score == 0.4


def test_inspect_value_without_healthbench_score(tmp_path: Path) -> None:
    path = write_inspect_json(tmp_path / "x.json", [inspect_sample(A, {"accuracy": 1.0})])
    with pytest.raises(interop.InteropError,
                       match=r"samples\[0\] \(id .*\): field 'scores._scorer.value': no "
                       "'healthbench_score'"):
        interop.load_results([path])


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda s: s["scores"].__setitem__("_scorer", "C"),
     r"field 'scores\._scorer': expected an object, got str"),
    (lambda s: s["scores"]["_scorer"].pop("value"), r"field 'scores\._scorer\.value' is missing"),
    (lambda s: s["scores"]["_scorer"].__setitem__("value", {"healthbench_score": 55}),
     r"field 'scores\._scorer\.value\.healthbench_score': 55\.0 is above 1"),
    (lambda s: s["scores"]["_scorer"].__setitem__("value", {"healthbench_score": True}),
     r"field 'scores\._scorer\.value\.healthbench_score': expected a number, got True"),
    (lambda s: s["metadata"].__setitem__("prompt_id", 7),
     r"field 'metadata\.prompt_id': expected a non-empty string, got 7"),
    (lambda s: s.__setitem__("epoch", "2"), r"field 'epoch': .*got '2'"),
    (lambda s: (s["metadata"].pop("prompt_id"), s.__setitem__("id", 42)),
     r" \(id 42, epoch 1\): field 'id': expected a non-empty string, got 42"),
], ids=["score-not-object", "no-value", "percentage", "bool", "metadata-id", "epoch", "int-id"])
def test_inspect_sample_malformed(tmp_path: Path, mutate: Any, match: str) -> None:
    sample = inspect_sample(A, hb_value(0.5))
    mutate(sample)
    path = write_inspect_json(tmp_path / "x.json", [sample])
    with pytest.raises(interop.InteropError, match=r"x\.json: samples\[0\].*" + match):
        interop.load_results([path])


def test_inspect_log_malformed(tmp_path: Path) -> None:
    path = write_inspect_json(tmp_path / "x.json", ["not a sample"])
    with pytest.raises(interop.InteropError, match=r"samples\[0\]: expected an object, got str"):
        interop.load_results([path])
    # a simple-evals file read as an Inspect log: the hint is given once
    se = write_simple_evals(tmp_path / "a_allresults.json", [(A, 0.1)])
    with pytest.raises(interop.InteropError,
                       match=r"field 'eval' is missing: not an Inspect eval log; field 'status' "
                       r"is missing$"):
        interop.load_results([se], "inspect")
    zipped = write_eval_zip(tmp_path / "z.eval", [inspect_sample(A, hb_value(0.5))])
    with zipfile.ZipFile(zipped, "a") as zf:
        zf.writestr("samples/zz_epoch_1.json", json.dumps({"id": "zz", "scores": []}))
    with pytest.raises(interop.InteropError, match=r"samples/zz_epoch_1\.json \(id 'zz', epoch "
                       r"1\): field 'scores': expected an object, got list"):
        interop.load_results([zipped])


# --------------------------------------------------------------------------------------------
# The compendium's own layout

J1, J2, J3 = "gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001", "gemini-2.5-flash"

HB_ROWS = [
    # candidate X: A -> (0.3 + 0.6 + 0.9) / 3 = 0.6; B: J3 gave no verdict -> unscored;
    #              C -> (-0.3 + 0.0 + 0.3) / 3 = 0.0
    (J1, "X", A, 0.3), (J2, "X", A, 0.6), (J3, "X", A, 0.9),
    (J1, "X", B, 0.0), (J2, "X", B, 0.3), (J3, "X", B, None),
    (J1, "X", C, -0.3), (J2, "X", C, 0.0), (J3, "X", C, 0.3),
    # candidate Y: A -> (1.0 + 0.8 + 0.6) / 3 = 0.8; B -> 0.2; C not graded at all
    (J1, "Y", A, 1.0), (J2, "Y", A, 0.8), (J3, "Y", A, 0.6),
    (J1, "Y", B, 0.2), (J2, "Y", B, 0.2), (J3, "Y", B, 0.2),
]


def check_hb_reports(reports: list[interop.SubsetReport]) -> None:
    x = one(reports, "X", "tiny")
    # X: A 0.6, C 0.0 -> (0.6 + 0.0) / 2 = 0.3; B unscored; D missing
    assert (x.n, x.unscored, x.missing) == (2, (B,), (D,))
    assert x.clipped_mean == pytest.approx(0.3)
    y = one(reports, "Y", "tiny")
    # Y: A 0.8, B 0.2 -> 0.5; C and D missing
    assert (y.n, y.unscored, y.missing) == (2, (), (C, D))
    assert y.clipped_mean == pytest.approx(0.5)


def test_hbpsych_jsonl_panel_per_candidate(tmp_path: Path, tiny) -> None:
    psych, _ = tiny
    path = write_hbpsych(tmp_path / "scores.jsonl", HB_ROWS)
    res = interop.load_results([path])
    assert sorted(res.by_model) == ["X", "Y"]  # several models in one file
    assert res.inputs[0].details["judges"] == sorted([J1, J2, J3])
    check_hb_reports(interop.filter_results(res, [psych], n_resamples=100, level=0.95, seed=0))


def test_hbpsych_csv_and_judges_in_separate_files(tmp_path: Path, tiny) -> None:
    psych, _ = tiny
    paths = []
    for j in (J1, J2, J3):
        lines = ["prompt_id,candidate,judge,score"] + [
            f"{p},{c},{jj},{'' if s is None else s}" for jj, c, p, s in HB_ROWS if jj == j]
        path = tmp_path / f"scores_{j}.csv"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    check_hb_reports(interop.filter_results(interop.load_results(paths), [psych],
                                            n_resamples=100, level=0.95, seed=0))


def test_hbpsych_duplicate_and_responses_refused(tmp_path: Path) -> None:
    dup = write_hbpsych(tmp_path / "dup.jsonl", [(J1, "X", A, 0.3), (J2, "X", A, 0.4),
                                                 (J1, "X", A, 0.5)])
    with pytest.raises(interop.InteropError,
                       match=r"dup.jsonl:3: duplicate record for judge .*first at .*dup.jsonl:1"):
        interop.load_results([dup])
    resp = tmp_path / "responses.jsonl"
    resp.write_text(json.dumps({"model": "X", "prompt_id": A, "text": "Hello",
                                "finish_reason": "stop"}) + "\n")
    with pytest.raises(interop.InteropError, match=r"responses\.jsonl:1: a responses record"):
        interop.load_results([resp])
    missing = tmp_path / "m.jsonl"
    missing.write_text(json.dumps({"candidate": "X", "judge": J1, "score": 0.1}) + "\n")
    with pytest.raises(interop.InteropError, match=r"m\.jsonl:1: field 'prompt_id' is missing"):
        interop.load_results([missing])


def test_hbpsych_malformed_records(tmp_path: Path) -> None:
    bare = tmp_path / "b.jsonl"
    bare.write_text(json.dumps({"judge": J1, "candidate": "X", "prompt_id": A, "score": 0.1})
                    + "\n" + json.dumps({"n_criteria": 3}) + "\n")
    # every missing field of the record at once
    with pytest.raises(interop.InteropError,
                       match=r"b\.jsonl:2: field 'prompt_id' is missing; field 'candidate' is "
                       r"missing; field 'judge' is missing; field 'score' is missing$"):
        interop.load_results([bare])
    for score, match in [(False, "expected a number, got False"), ("0.3", "expected a number"),
                         (80, "80.0 is above 1")]:
        path = write_hbpsych(tmp_path / "s.jsonl", [(J1, "X", A, 0.2), (J1, "X", B, score)])
        with pytest.raises(interop.InteropError, match=r"s\.jsonl:2: field 'score': " + match):
            interop.load_results([path])
    path = write_hbpsych(tmp_path / "j.jsonl", [(J1, "", A, 0.2)])
    with pytest.raises(interop.InteropError,
                       match=r"j\.jsonl:1: field 'candidate': expected a non-empty string"):
        interop.load_results([path])


@pytest.mark.parametrize(("cell", "match"), [("abc", "field 'score': not a number: 'abc'"),
                                             ("95", "field 'score': 95.0 is above 1"),
                                             ("inf", "field 'score': not a finite number")])
def test_hbpsych_csv_bad_score(tmp_path: Path, cell: str, match: str) -> None:
    path = tmp_path / "s.csv"
    path.write_text(f"prompt_id,candidate,judge,score\n{A},X,{J1},0.5\n{B},X,{J1},{cell}\n")
    with pytest.raises(interop.InteropError, match=r"s\.csv:3: " + match):
        interop.load_results([path])
    path.write_text(f"prompt_id,candidate,rater,score\n{A},X,{J1},0.5\n")
    with pytest.raises(interop.InteropError, match=r"header lacks column\(s\) \['judge'\]"):
        interop.load_results([path])


def test_hbpsych_candidate_without_a_judge_refused(tmp_path: Path) -> None:
    path = write_hbpsych(tmp_path / "s.jsonl", [(J1, "X", A, 0.3), (J2, "X", A, 0.4),
                                                (J1, "Y", A, 0.5)])
    with pytest.raises(interop.InteropError, match=r"candidate Y has no scores from judge"):
        interop.load_results([path])


def test_same_model_in_two_inputs_is_a_duplicate(tmp_path: Path) -> None:
    a = write_simple_evals(tmp_path / "healthbench_m_20250101_000000_allresults.json", [(A, 0.1)])
    b = write_inspect_json(tmp_path / "log.json", [inspect_sample(A, 0.2)])
    with pytest.raises(interop.InteropError, match="duplicate result for model m"):
        interop.load_results([a, b], model="m")


# --------------------------------------------------------------------------------------------
# The statistic


def scored(model: str, values: dict[str, float]) -> interop.LoadedResults:
    return interop.LoadedResults(
        {model: {p: interop.ConversationScore(model, p, v, f"mem:{p}") for p, v in values.items()}},
        [])


def test_mean_is_clipped_after_averaging(tiny) -> None:
    psych, _ = tiny
    # (-0.5 - 0.3) / 2 = -0.4 -> clipped to 0; and (1.0 + 1.0) / 2 = 1.0 stays 1
    [r] = interop.filter_results(scored("m", {A: -0.5, B: -0.3}), [psych], n_resamples=50,
                                 level=0.95, seed=0)
    assert r.clipped_mean == 0.0 and r.ci_low == 0.0 and r.ci_high == 0.0
    [r] = interop.filter_results(scored("m", {A: 1.0, B: 1.0}), [psych], n_resamples=50,
                                 level=0.95, seed=0)
    assert (r.clipped_mean, r.ci_low, r.ci_high) == (1.0, 1.0, 1.0)


def test_bootstrap_interval_two_conversations(tiny) -> None:
    psych, _ = tiny
    # Two conversations: a resample mean is x1, (x1+x2)/2 or x2 with probability 1/4, 1/2, 1/4,
    # so with 1,000 resamples ~250 sit at each end and both 2.5% / 97.5% points are the ends.
    [r] = interop.filter_results(scored("m", {A: 0.2, B: 0.6}), [psych], seed=3, level=0.95)
    assert r.clipped_mean == pytest.approx(0.4)
    assert (r.ci_low, r.ci_high) == (pytest.approx(0.2), pytest.approx(0.6))
    # With -0.4 and 0.6 the resample means are -0.4, 0.1, 0.6; each is clipped, so the low
    # end is 0.0 (not -0.4) and the estimate is clip(0.1) = 0.1.
    [r] = interop.filter_results(scored("m", {A: -0.4, B: 0.6}), [psych], seed=3, level=0.95)
    assert r.clipped_mean == pytest.approx(0.1)
    assert (r.ci_low, r.ci_high) == (0.0, pytest.approx(0.6))


def test_bootstrap_is_seeded(tiny) -> None:
    psych, _ = tiny
    vals = {A: 0.1, B: 0.5, C: 0.35, D: 0.8}
    r1 = interop.filter_results(scored("m", vals), [psych], seed=11, level=0.95)[0]
    r2 = interop.filter_results(scored("m", vals), [psych], seed=11, level=0.95)[0]
    assert (r1.ci_low, r1.ci_high) == (r2.ci_low, r2.ci_high)
    assert r1.clipped_mean == pytest.approx((0.1 + 0.5 + 0.35 + 0.8) / 4)
    assert 0.1 <= r1.ci_low < r1.clipped_mean < r1.ci_high <= 0.8


def test_no_subset_conversation_in_input(tiny) -> None:
    psych, _ = tiny
    [r] = interop.filter_results(scored("m", {E: 0.5}), [psych], level=0.95, seed=0)
    assert (r.n, r.clipped_mean, r.ci_low, r.missing) == (0, None, None, (A, B, C, D))


def test_unknown_ids_refused() -> None:
    res = scored("m", {A: 0.5, "not-a-healthbench-id": 0.1})
    with pytest.raises(interop.InteropError,
                       match=r"mem:not-a-healthbench-id: field 'prompt_id': 'not-a-healthbench"
                       r"-id' is not a HealthBench conversation id \(1 unknown"):
        interop.check_known_ids(res, [A, B, C, D, E])
    interop.check_known_ids(scored("m", {A: 0.5}), [A])


# --------------------------------------------------------------------------------------------
# Subsets and formats


def test_local_subset_checked(tmp_path: Path) -> None:
    path = subset_file(tmp_path / "s.json", [B, A], "mine")
    s = interop.resolve_subset(str(path))
    assert (s.key, s.name, s.ids) == (str(path), "mine", (A, B))
    doc = json.loads(path.read_text())
    doc["prompt_ids"].append(C)
    path.write_text(json.dumps(doc))
    with pytest.raises(interop.InteropError, match="field 'prompt_id_sha256'"):
        interop.resolve_subset(str(path))
    with pytest.raises(interop.InteropError, match="neither a released subset"):
        interop.resolve_subset("v7")


def test_detect_format(tmp_path: Path) -> None:
    assert interop.detect_format(write_simple_evals(tmp_path / "a.json", [(A, 0.1)])) == (
        "simple-evals")
    assert interop.detect_format(write_hbpsych(tmp_path / "b.jsonl", [(J1, "X", A, 0.1)])) == (
        "hbpsych")
    other = tmp_path / "c.json"
    other.write_text(json.dumps({"accuracy": 0.7}))
    with pytest.raises(interop.InteropError, match="not a recognised results file"):
        interop.detect_format(other)


def test_real_subsets_fetched(mirror: Path, tmp_path: Path) -> None:
    v1 = interop.resolve_subset("v1")
    hard = interop.resolve_subset("hard")
    assert (v1.name, len(v1.ids)) == ("healthbench-psych-v1", 610)
    assert (hard.name, len(hard.ids)) == ("healthbench-psych-hard-v1", 119)
    assert set(hard.ids) <= set(v1.ids)
    known = interop.healthbench_ids()
    assert len(known) == 5000 and set(v1.ids) <= set(known)
    outside = next(i for i in known if i not in set(v1.ids))
    path = write_simple_evals(tmp_path / "healthbench_m_20250101_000000_allresults.json",
                              [(v1.ids[0], 0.3), (v1.ids[1], 0.5), (outside, 0.9)])
    res = interop.load_results([path])
    interop.check_known_ids(res, known)
    [r] = interop.filter_results(res, [v1], n_resamples=100, level=0.95, seed=0)
    # two of the 610: (0.3 + 0.5) / 2 = 0.4, 608 missing
    assert (r.n, len(r.missing), r.clipped_mean) == (2, 608, pytest.approx(0.4))


# --------------------------------------------------------------------------------------------
# Runs that did not finish


def test_crashed_inspect_log_is_a_failed_run_with_its_counts(tmp_path: Path) -> None:
    # the run crashed after one conversation was scored (0: its judge calls all failed, which
    # inspect_evals counts as criteria not met) and another errored
    path = write_eval_zip(tmp_path / "crash.eval", [
        inspect_sample(A, hb_value(0.0)), inspect_sample(B, None, error=True)], status="error")
    [inp] = interop.load_results([path]).inputs
    assert inp.run is not None and not inp.run.complete
    assert (inp.run.state, inp.run.recorded) == ("failed", "error")
    assert (inp.run.n_samples, inp.run.n_scored, inp.run.n_errored) == (2, 1, 1)
    assert inp.run.error == "RuntimeError: judge provider returned HTTP 500 for every retry"
    assert inp.run.describe().startswith("the run FAILED (status 'error': RuntimeError")
    assert "1 sample scored, 1 errored, of 2 in the file" in inp.run.describe()


@pytest.mark.parametrize(("status", "state", "word"), [
    ("cancelled", "cancelled", "CANCELLED"), ("started", "incomplete", "did NOT FINISH")])
def test_cancelled_and_unfinished_inspect_logs(tmp_path: Path, status: str, state: str,
                                               word: str) -> None:
    path = write_inspect_json(tmp_path / "log.json", [inspect_sample(A, hb_value(0.5))])
    log = json.loads(path.read_text())
    path.write_text(json.dumps({**log, "status": status}))
    [inp] = interop.load_results([path]).inputs
    assert inp.run is not None and inp.run.state == state and word in inp.run.describe()


def test_a_successful_log_is_complete_and_counts_its_errored_samples(tmp_path: Path) -> None:
    path = write_eval_zip(tmp_path / "ok.eval", [
        inspect_sample(A, hb_value(0.5)), inspect_sample(B, None, error=True)])
    [inp] = interop.load_results([path]).inputs
    assert inp.run is not None and inp.run.complete
    assert (inp.run.n_scored, inp.run.n_errored, inp.run.error) == (1, 1, None)


def test_simple_evals_file_is_complete_unless_its_own_count_disagrees(tmp_path: Path) -> None:
    path = write_simple_evals(tmp_path / "healthbench_m_20250101_000000_allresults.json",
                              [(A, 0.5), (B, 0.2)])
    [inp] = interop.load_results([path]).inputs
    assert inp.run is not None and inp.run.complete and inp.run.n_scored == 2
    doc = json.loads(path.read_text())
    doc["metrics"]["overall_score:n_samples"] = 5  # three entries cut from the file
    path.write_text(json.dumps(doc))
    [inp] = interop.load_results([path]).inputs
    assert inp.run is not None and inp.run.state == "incomplete"
    assert "metrics count 5 graded examples" in inp.run.describe()


def test_filter_results_refuses_a_crashed_log_unless_allowed(
        tmp_path: Path, real_ids: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    path = write_eval_zip(tmp_path / "crash.eval", [
        inspect_sample(real_ids["h1"], hb_value(0.0)),
        inspect_sample(real_ids["p1"], None, error=True)], status="error")
    assert interop.main([str(path)]) == interop.EXIT_INCOMPLETE
    out, err = capsys.readouterr()
    assert out == ""  # no clipped mean of a run that failed
    assert f"error: {path}: the run FAILED (status 'error': RuntimeError" in err
    assert "1 sample scored, 1 errored" in err and "--allow-incomplete" in err
    assert interop.main([str(path), "--allow-incomplete"]) == 0
    out, _ = capsys.readouterr()
    assert "the run FAILED" in out.splitlines()[0] and "clipped mean 0.0000" in out
    assert interop.main([str(path), "--allow-incomplete", "--json"]) == 0
    [inp] = json.loads(capsys.readouterr().out)["inputs"]
    assert inp["status"] == "error"
    assert inp["run"] == {"state": "failed", "recorded": "error", "n_samples": 2,
                          "n_scored": 1, "n_errored": 1, "error": CRASH["message"].split("\n")[0]}


# --------------------------------------------------------------------------------------------
# Command line, end to end


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hbpsych_utils", "filter-results", *args],
                          capture_output=True, text=True, env=dict(os.environ), timeout=300)


@pytest.fixture
def real_ids(mirror: Path) -> dict[str, str]:
    """Real HealthBench ids: two in Psych-Hard, two in Psych only, one outside HealthBench-Psych."""
    v1, hard = interop.resolve_subset("v1"), interop.resolve_subset("hard")
    v1_only = [i for i in v1.ids if i not in set(hard.ids)]
    outside = next(i for i in interop.healthbench_ids() if i not in set(v1.ids))
    return {"h1": hard.ids[0], "h2": hard.ids[1], "p1": v1_only[0], "p2": v1_only[1],
            "out": outside}


@pytest.mark.slow
def test_cli_simple_evals_json(tmp_path: Path, real_ids: dict[str, str]) -> None:
    ids = real_ids
    path = write_simple_evals(
        tmp_path / "healthbench_gpt-4.1-2025-04-14_20250512_101500_allresults.json",
        [(ids["h1"], 0.8), (ids["h2"], 0.4), (ids["p1"], 0.1), (ids["p2"], -0.5),
         (ids["out"], 0.9)])
    proc = run_cli(str(path), "--subset", "v1", "--subset", "hard", "--json", "--seed", "5",
                   "--resamples", "300")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["seed"], out["n_resamples"]) == (5, 300)
    v1, hard = out["reports"]
    assert (v1["model"], v1["subset"], v1["subset_size"]) == ("gpt-4.1-2025-04-14", "v1", 610)
    # v1: (0.8 + 0.4 + 0.1 - 0.5) / 4 = 0.2, 610 - 4 = 606 missing
    assert (v1["n"], v1["n_missing"], len(v1["missing"])) == (4, 606, 606)
    assert v1["clipped_mean"] == pytest.approx(0.2)
    assert ids["h1"] not in v1["missing"] and ids["out"] not in v1["missing"]
    # hard: (0.8 + 0.4) / 2 = 0.6, 119 - 2 = 117 missing
    assert (hard["subset_size"], hard["n"], hard["n_missing"]) == (119, 2, 117)
    assert hard["clipped_mean"] == pytest.approx(0.6)
    assert hard["ci_low"] <= 0.6 <= hard["ci_high"]


@pytest.mark.slow
def test_cli_inspect_log_text(tmp_path: Path, real_ids: dict[str, str]) -> None:
    ids = real_ids
    path = write_eval_zip(tmp_path / "healthbench.eval", [
        inspect_sample(ids["h1"], hb_value(0.7)), inspect_sample(ids["p1"], hb_value(0.1)),
        inspect_sample(ids["p2"], None, error=True)])
    proc = run_cli(str(path))  # default subsets: v1 and hard
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "openai/gpt-4.1-mini" in lines
    # v1: (0.7 + 0.1) / 2 = 0.4; p2 errored -> unscored; 610 - 3 = 607 missing
    v1 = next(x for x in lines if x.strip().startswith("healthbench-psych-v1:"))
    assert "n = 2 of 610" in v1 and "clipped mean 0.4000" in v1
    assert "607 missing, 1 unscored" in v1
    hard = next(x for x in lines if x.strip().startswith("healthbench-psych-hard-v1:"))
    # one conversation: every resample draws it, so the interval is undefined, and says why
    assert "n = 1 of 119" in hard and "clipped mean 0.7000 no interval (one conversation" in hard
    assert "[0.7000, 0.7000]" not in hard


@pytest.mark.slow
def test_cli_errors(tmp_path: Path, mirror: Path) -> None:
    path = write_simple_evals(tmp_path / "healthbench_m_20250101_000000_allresults.json",
                              [(A, 0.5)])  # A is not a real HealthBench id
    proc = run_cli(str(path))
    assert proc.returncode == 1
    assert "is not a HealthBench conversation id" in proc.stderr and str(path) in proc.stderr
    assert run_cli(str(tmp_path / "nothing.json")).returncode == 1
    assert run_cli(str(path), "--format", "csv").returncode == 2


def test_main_dispatches_and_in_process_help(capsys: pytest.CaptureFixture[str]) -> None:
    import hbpsych_utils.__main__ as cli
    from hbpsych_utils.pipeline import profiles

    assert cli.main(["filter-results", "--help"]) == 0
    assert "--subset" in capsys.readouterr().out
    assert "filter-results" in (cli.__doc__ or "")
    # the bootstrap seed defaults to the default profile's, so numbers match the notebooks'
    assert interop._default_seed() == profiles.load_profile("default").seed


def test_bytes_that_are_not_utf8_are_named_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "scores.jsonl"
    bad.write_bytes(b'{"judge": "j", "candidate": "c", "prompt_id": "p", "score": 0.5}\n'
                    b'{"judge": "j\xff", "candidate": "c", "prompt_id": "q", "score": 0.5}\n')
    with pytest.raises(interop.InteropError, match=r"scores\.jsonl:2: not UTF-8"):
        interop.read_hbpsych(bad)
    whole = tmp_path / "results.json"
    whole.write_bytes(b'{"score": 0.5,\n "metadata": "\xc3"}\n')
    with pytest.raises(interop.InteropError, match=r"results\.json:2: not UTF-8"):
        interop_records.load_json(whole)
