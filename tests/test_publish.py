"""mindbench-results v1 artifacts of a run (``python -m hbpsych_utils publish``).

The schema and the released matrices are read here with ``json``, ``csv`` and ``jsonschema``
directly, independently of the package's own validation and readers, so a payload the package
wrongly calls valid, or a value it copies wrongly, fails here.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from hbpsych_utils import study
from hbpsych_utils.core import sources
from hbpsych_utils.pipeline import graph, profiles
from hbpsych_utils.reporting import publish, publish_contract, publish_paper, publish_run
from hbpsych_utils.runner import cli

SCHEMA_FILE = "mindbench-ai/healthbench-psych/platform/schemas/mindbench-results.v1.schema.json"
STUDY_AND_LATER = {*study.CANDIDATES, *study.LATER_CANDIDATES}


def schema(mirror: Path) -> dict[str, Any]:
    """The schema as the mirror holds it (not through the registry)."""
    return json.loads((mirror / SCHEMA_FILE).read_text(encoding="utf-8"))


def independent_problems(payload: Any, mirror: Path) -> list[str]:
    """Every schema error, by jsonschema's draft 2020-12 validator with format checking."""
    import jsonschema  # imported here, not at collection: its format checkers take ~1 s

    v = jsonschema.Draft202012Validator(schema(mirror),
                                        format_checker=jsonschema.Draft202012Validator
                                        .FORMAT_CHECKER)
    return [e.message for e in v.iter_errors(payload)]


def test_every_format_of_the_schema_is_checked_in_the_test_processes(mirror: Path) -> None:
    """The tests run without jsonschema's IRI grammar (conftest, as `run` and `book` processes
    do): the formats the publication schema uses are all checked all the same, and a bad
    date-time is caught."""
    import jsonschema

    from hbpsych_utils.__main__ import IRI_GRAMMAR

    assert sys.modules.get(IRI_GRAMMAR, "absent") is None

    def formats(node: Any) -> set[str]:
        if isinstance(node, dict):
            return ({node["format"]} if isinstance(node.get("format"), str) else set()) | {
                f for v in node.values() for f in formats(v)}
        return {f for v in node for f in formats(v)} if isinstance(node, list) else set()

    used = formats(schema(mirror)) | formats(publish.load_schema())
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert used and used <= set(checker.checkers), used - set(checker.checkers)
    assert not checker.conforms("2026-13-45T99:00:00Z", "date-time")
    assert checker.conforms("2026-01-02T03:04:05Z", "date-time")


def matrix(mirror: Path, key: str) -> dict[tuple[str, str], str]:
    """A released matrix as printed: (candidate, judge) -> clipped_mean_score text."""
    path = mirror / "mindbench-ai/healthbench-psych/eval/runs" / (
        f"matrix_healthbench-psych-{'hard-v1' if key == 'hard' else key}.csv")
    rows = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))
    return {(r["candidate"], r["judge"]): r["clipped_mean_score"] for r in rows}


def fake_paper_run(root: Path) -> publish.RunFolder:
    """A paper-mode run folder with what paper mode reads from it: 05_subset's index and files
    (the released ones, which a default run derives byte for byte) and the manifest."""
    subset_dir = root / graph.SUBSET
    subset_dir.mkdir(parents=True)
    index = {}
    for key, artifact in study.SUBSET_ARTIFACTS.items():
        src = sources.fetch(artifact)
        name = json.loads(src.read_text(encoding="utf-8"))["name"] + ".json"
        shutil.copyfile(src, subset_dir / name)
        index[key] = name
    (subset_dir / "subsets.json").write_text(json.dumps(index))
    manifest = {"package_version": "0.1.0", "git": {"commit": "abc123", "dirty": False}}
    return publish.RunFolder(root, profiles.load_profile("default"), manifest)


def valid_artifact() -> publish.Artifact:
    """A small live-mode artifact that satisfies the contract."""
    c = publish_contract
    return c.Artifact(
        benchmark=c.Benchmark(slug="healthbench-psych", dataset_manifest=c.DatasetManifest(
            source="https://example.org/hb.jsonl", revision=None, split="v1", n_items=610,
            subsample=c.Subsample(n=12), checksum="sha256:00")),
        model=c.ModelInfo(label="m", api_model_id="m-1", provider="openai",
                          sampling={"temperature": 0.0, "max_tokens": 8192}),
        run=c.RunInfo(harness="hbpsych_utils", harness_commit=None, adapter_version="0",
                      started_at="2026-01-01T00:00:00+00:00",
                      finished_at="2026-01-01T00:10:00+00:00", cost_usd=0.5,
                      n_completed=11, n_errors=1, harness_config={"llm_mode": "batch"}),
        scoring=publish_run.judge_info(study.JUDGE_PANEL, "ab" * 32, 0.0),
        metrics=[c.subset_metric("healthbench_score", 0.4, 11, 0.3, 0.5),
                 c.Metric(key="per_judge_scores", value_json={"v1": {"j": 0.4}})],
        items_artifact=None)


# --------------------------------------------------------------------------------------------
# Paper mode: the released record


@pytest.fixture(scope="module")
def paper_v1(mirror: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[list[publish.Artifact], list[publish_paper.Released]]:
    return publish.paper_artifacts(fake_paper_run(tmp_path_factory.mktemp("p") / "default"),
                                   "v1")


def test_paper_mode_writes_the_23_candidates_of_the_v1_record(mirror: Path, paper_v1: Any
                                                              ) -> None:
    artifacts, released = paper_v1
    files = publish.render(artifacts, {}, publish.load_schema())
    payloads = {n: json.loads(b) for n, b in files.items()}
    assert len(payloads) == 23
    assert {p["model"]["label"] for p in payloads.values()} == STUDY_AND_LATER
    v1, hard = matrix(mirror, "v1"), matrix(mirror, "hard")
    for name, p in payloads.items():
        assert independent_problems(p, mirror) == [], name
        cand = p["model"]["label"]
        metrics = {m["key"]: m for m in p["metrics"]}
        per_judge = metrics["per_judge_scores"]["value_json"]
        for key, printed in (("v1", v1), ("hard", hard)):
            assert set(per_judge[key]) == set(study.JUDGE_PANEL)
            for judge, value in per_judge[key].items():
                assert value == float(printed[(cand, judge)]), (name, key, judge)
        for key, metric in (("v1", "healthbench_score"), ("hard", "healthbench_hard_score")):
            expected = sum(float(v) for v in per_judge[key].values()) / 3
            assert metrics[metric]["value"] == pytest.approx(expected, abs=1e-15)
            assert metrics[metric]["ci_low"] is None and metrics[metric]["ci_high"] is None
        assert (metrics["healthbench_score"]["n"], metrics["healthbench_hard_score"]["n"]) == (
            610, 119)
        assert (p["run"]["n_completed"], p["run"]["n_errors"]) == (610, 0)
        assert p["run"]["harness"] == study.STUDY_HARNESS and p["run"]["cost_usd"] is None
        assert p["benchmark"]["dataset_manifest"]["checksum"] == (
            "sha256:3788760429bb6be1709cf20f70a40e08240625a2c11f8e281341f036df4e2428")
        assert p["benchmark"]["dataset_manifest"]["revision"] == "healthbench-psych-v1 1.0"
        assert p["items_artifact"] is None
    publish.check_release(payloads, released)


def test_paper_sampling_is_what_the_registry_sends(paper_v1: Any) -> None:
    artifacts, _ = paper_v1
    by = {a.model.label: a.model for a in artifacts}
    assert by["gpt-4.1-2025-04-14"].sampling == {"temperature": 0.0, "max_tokens": 8192}
    assert by["gpt-5.5"].sampling == {"max_completion_tokens": 8192}  # temperature rejected
    assert by["kimi-k2.6"].sampling["temperature"] == 1.0  # fixed by the provider
    assert by["qwen3-8b"].sampling["enable_thinking"] is False  # the body's extra field
    assert by["gpt-3.5-turbo"].sampling["max_tokens"] == 4096  # its cap
    assert by["qwen3-8b"].provider == "alibaba"


def test_a_candidate_missing_from_a_judges_matrix_is_refused(mirror: Path, tmp_path: Path
                                                            ) -> None:
    src = sources.fetch("matrix_hard_v1").read_text(encoding="utf-8")
    lines = [x for x in src.splitlines(keepends=True)
             if not x.startswith("gpt-6-astra,claude-haiku-4-5-20251001,")]
    assert len(lines) == len(src.splitlines()) - 1
    cut = tmp_path / "matrix_hard.csv"
    cut.write_text("".join(lines), encoding="utf-8")
    main = publish_paper.read_released("v1", sources.fetch("matrix_v1"))
    with pytest.raises(publish.PublishError, match=(
            r"matrix_hard\.csv: candidate gpt-6-astra has no score from judge "
            r"claude-haiku-4-5-20251001")):
        publish_paper.paper_scores(main, publish_paper.read_released("hard", cut),
                                   judges=study.JUDGE_PANEL)


def test_check_release_refuses_a_value_that_is_not_the_printed_one(paper_v1: Any) -> None:
    artifacts, released = paper_v1
    payload = artifacts[0].payload()
    cand = payload["model"]["label"]
    judge = study.JUDGE_PANEL[0]
    payload["metrics"][2]["value_json"]["v1"][judge] += 2e-6  # off in the 6th place
    with pytest.raises(publish.PublishError, match=rf"per_judge_scores\.v1\.{judge} .* prints"):
        publish.check_release({f"{cand}.json": payload}, released)
    payload["metrics"][2]["value_json"]["v1"][judge] -= 2e-6
    payload["metrics"][0]["value"] += 1e-9  # no longer the mean of the three
    with pytest.raises(publish.PublishError, match=r"healthbench_score .* not the mean"):
        publish.check_release({f"{cand}.json": payload}, released)


# --------------------------------------------------------------------------------------------
# The contract: validation before anything is written


def test_a_valid_artifact_passes_both_validators(mirror: Path) -> None:
    payload = valid_artifact().payload()
    assert publish.schema_problems(payload, publish.load_schema()) == []
    assert independent_problems(payload, mirror) == []


def test_flip_rates_go_into_the_contracts_metrics(mirror: Path) -> None:
    """The judges' flip rates (16) where mindbench-results v1 has a place: ``metrics``, one
    ``judge_flip_rates`` (every judge and the panel majority, with intervals), the panel's as a
    value with its n and interval, and the candidate's score spread; an undefined value stays
    null. Nothing when 16 did not re-grade."""
    from hbpsych_utils.pipeline.metrics.s16_self_consistency import (
        FlipRate,
        ScoreSpread,
        SelfConsistencyMetrics,
    )
    from hbpsych_utils.reporting import publish_live

    rate = FlipRate(n_items=40, n_flipped=2, n_conversations=11, n_left_out=0, rate=0.05,
                    low=0.0, high=0.11, repeat_ac1=0.93, self_consistent=False)
    panel = rate.model_copy(update={"n_flipped": 0, "rate": 0.0, "high": 0.0})
    m = SelfConsistencyMetrics(
        mode="live", repeats=3, repeat_sample=40, n_items=40, ci_level=0.95,
        simulator_flip_rate=0.05, flip_rates={"gpt-4.1-2025-04-14": rate,
                                              "panel majority": panel},
        score_spread={"m": ScoreSpread(by_repeat={"0": 0.4, "1": 0.4, "2": None}, min=None,
                                       max=None, spread=None,
                                       undefined={"spread": "a repeat has no panel score"})})
    found = publish_live.flip_metrics(m, "m")
    art = valid_artifact()
    art.metrics += found
    payload = art.payload()
    assert independent_problems(payload, mirror) == []
    by_key = {x["key"]: x for x in payload["metrics"]}
    flips = by_key["judge_flip_rates"]["value_json"]
    assert flips["by_judge"]["gpt-4.1-2025-04-14"] == {
        "rate": 0.05, "ci_low": 0.0, "ci_high": 0.11, "n_items": 40, "n_flipped": 2,
        "repeat_ac1": 0.93}
    assert (flips["repeats"], flips["n_items"], flips["level"]) == (3, 40, 0.95)
    assert {k: by_key["panel_flip_rate"][k] for k in ("value", "n", "ci_low", "ci_high")} == {
        "value": 0.0, "n": 40, "ci_low": 0.0, "ci_high": 0.0}
    assert by_key["score_spread_across_repeats"]["value"] is None
    assert publish_live.flip_metrics(m, "other")[-1].key == "panel_flip_rate"
    assert publish_live.flip_metrics(SelfConsistencyMetrics(mode="live", repeats=1), "m") == []


@pytest.mark.parametrize(("break_it", "field"), [
    (lambda a: a.run.__setattr__("n_errors", 2**31), "run.n_errors"),
    (lambda a: a.model.sampling.__setitem__("max_retries", 3), "model.sampling"),
    (lambda a: a.metrics[0].__setattr__("key", "Healthbench Score"), "metrics[0].key"),
    (lambda a: a.run.__setattr__("started_at", "yesterday"), "run.started_at"),
])
def test_a_payload_that_breaks_the_schema_names_its_field(break_it: Any, field: str,
                                                           mirror: Path) -> None:
    art = valid_artifact()
    break_it(art)
    assert independent_problems(art.payload(), mirror) != []  # the contract agrees it is broken
    pattern = re.escape(f"healthbench-psych--m.json: field {field}:") + ".*nothing was written"
    with pytest.raises(publish.PublishError, match=pattern):
        publish.render([art], {}, publish.load_schema())


def test_write_folder_replaces_an_earlier_publication_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    publish.write_folder(out, {"a.json": b"{}", publish.EXPORT_MANIFEST: b"{}"})
    publish.write_folder(out, {"b.json": b"{}", publish.EXPORT_MANIFEST: b"{}"})
    assert sorted(p.name for p in out.iterdir()) == ["b.json", publish.EXPORT_MANIFEST]
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    with pytest.raises(publish.PublishError, match="is not an earlier publication"):
        publish.write_folder(other, {"a.json": b"{}"})
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


# --------------------------------------------------------------------------------------------
# Refusals of the command line


def test_publish_refuses_a_missing_run_and_a_folder_without_manifest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.publish_main(["default", "--outputs", str(tmp_path)]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{tmp_path / 'default'}: no run folder" in err and "bash run_all.sh default" in err
    assert not (tmp_path / "default").exists()  # the lock did not make the folder
    (tmp_path / "default").mkdir()
    assert cli.publish_main(["default", "--outputs", str(tmp_path)]) == cli.EXIT_FAILED
    assert "no manifest.json" in capsys.readouterr().err


def test_publish_refuses_a_subset_it_does_not_publish(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert cli.publish_main(["default", "--subset", "hard"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'hard'" in err and len(err.splitlines()) == 1
    with pytest.raises(publish.PublishError, match="one of v1, v2"):
        publish.publish(Path("nowhere"), subset="hard")


# --------------------------------------------------------------------------------------------
# Whole runs (slow: they read the session's default and smoke runs, copied)


def copy_run(run: Path, dest: Path) -> Path:
    """A run folder copied (without its book), so publishing into it leaves the session's run
    as the other tests read it. Its executed notebooks come too: their hashes are in the build
    records, and publish refuses a folder whose files differ from them."""
    target = dest / run.name
    shutil.copytree(run, target, ignore=shutil.ignore_patterns(
        "book", ".book-build", ".figure-cache", ".run.lock"))
    return target


def test_publish_default_v1_from_a_run(default_run: Path, mirror: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = copy_run(default_run, tmp_path / "runs")
    out = tmp_path / "OUT"
    assert cli.publish_main(["default", "--subset", "v1", "--outputs", str(run.parent),
                             "--output", str(out)]) == 0
    assert f"published 23 mindbench-results v1 artifacts of default (v1) -> {out}" in (
        capsys.readouterr().out)
    files = sorted(out.iterdir())
    artifacts = [f for f in files if f.name != publish.EXPORT_MANIFEST]
    assert len(artifacts) == 23
    v1, hard = matrix(mirror, "v1"), matrix(mirror, "hard")
    manifest = json.loads((out / publish.EXPORT_MANIFEST).read_text())
    for f in artifacts:
        payload = json.loads(f.read_text(encoding="utf-8"))
        assert independent_problems(payload, mirror) == [], f.name
        cand = payload["model"]["label"]
        per_judge = next(m for m in payload["metrics"] if m["key"] == "per_judge_scores")
        assert per_judge["value_json"] == {
            "v1": {j: float(v1[(cand, j)]) for j in sorted(study.JUDGE_PANEL)},
            "hard": {j: float(hard[(cand, j)]) for j in sorted(study.JUDGE_PANEL)}}
        assert manifest["files"][f.name] == "sha256:" + sources.sha256_file(f)
    record = json.loads((run / publish.RECORD).read_text())
    assert record["v1"]["output"] == str(out.resolve()) and record["v1"]["mode"] == "paper"
    # the run's book names the folder outside the run by its name, no path
    from hbpsych_utils.core import paths
    from hbpsych_utils.reporting import book

    index = book.build_book(run)
    book_pages = {p.name: p.read_text(encoding="utf-8") for p in index.parent.glob("*.html")}
    assert "`OUT` (a folder outside the run folder)" in (
        run / ".book-build" / "src" / "provenance.md").read_text(encoding="utf-8")
    for name, text in book_pages.items():
        for path in (str(out), str(out.resolve()), str(paths.project_root()), str(Path.home())):
            assert path not in text, (name, path)
    # inside the run folder, the record names the folder relative to it: a copy still finds it
    assert cli.publish_main(["default", "--outputs", str(run.parent), "--no-book"]) == 0
    moved = shutil.copytree(run, tmp_path / "moved" / "default")
    assert json.loads((moved / publish.RECORD).read_text())["v1"]["output"] == "published/v1"
    [shown] = publish.for_book(moved)
    assert shown.folder == moved / "published" / "v1" and shown.files_ok and not shown.stale


def test_publish_smoke_intervals_errors_items_cost_and_the_book(
        smoke_run: Path, mirror: Path, tmp_path: Path) -> None:
    run = copy_run(smoke_run, tmp_path / "runs")
    assert cli.publish_main(["smoke", "--outputs", str(run.parent), "--no-book"]) == 0
    out = run / publish.PUBLISHED_DIR / "v1"
    scores = list(csv.DictReader((run / "07_grading" / "scores.csv").open(encoding="utf-8")))
    smoke = profiles.load_profile("smoke")
    payloads = {f.name: json.loads(f.read_text()) for f in out.glob("*.json")
                if f.name != publish.EXPORT_MANIFEST}
    assert {p["model"]["label"] for p in payloads.values()} == set(smoke.generation.candidates)
    ledger_total = 0.0
    for name, p in payloads.items():
        assert independent_problems(p, mirror) == [], name
        cand = p["model"]["label"]
        score = next(m for m in p["metrics"] if m["key"] == "healthbench_score")
        assert score["ci_low"] <= score["value"] <= score["ci_high"]
        # n_errors counts the conversation a judge left unscored (the profile's verdict that
        # never comes, excluded): measured from 07's scores, not a constant
        unscored = {r["prompt_id"] for r in scores
                    if r["candidate"] == cand and r["status"] != "scored"}
        assert len(unscored) == 1
        assert (p["run"]["n_errors"], p["run"]["n_completed"]) == (1, 11)
        assert p["benchmark"]["dataset_manifest"]["subsample"] == {"n": 12}
        items = [json.loads(x) for x in (out / p["items_artifact"]).read_text().splitlines()]
        assert len(items) == 12
        assert {i["prompt_id"] for i in items if i["panel"] is None} == unscored
        panel = [i["panel"] for i in items if i["panel"] is not None]
        assert min(1.0, max(0.0, sum(panel) / len(panel))) == pytest.approx(score["value"],
                                                                           abs=1e-12)
        assert p["model"]["sampling"]["temperature"] == 0.0
        assert p["run"]["harness_config"]["simulator"] is True
        assert p["run"]["cost_usd"] > 0
        ledger_total += p["run"]["cost_usd"]
    # the judges' flip rates (16 re-graded a sample): in every artifact, as 16 measured them
    flips = json.loads((run / "16_self_consistency" / "metrics.json").read_text())
    for p in payloads.values():
        by_key = {m["key"]: m for m in p["metrics"]}
        shown = by_key["judge_flip_rates"]["value_json"]["by_judge"]
        assert {j: x["rate"] for j, x in shown.items()} == {
            j: x["rate"] for j, x in flips["flip_rates"].items()}
        assert by_key["panel_flip_rate"]["value"] == flips["flip_rates"]["panel majority"]["rate"]
        assert by_key["score_spread_across_repeats"]["value"] == flips["score_spread"][
            p["model"]["label"]]["spread"]
    recorded = json.loads((run / publish.RECORD).read_text())["v1"]["stages"]
    assert "16_self_consistency" in recorded
    # the candidates' costs are the ledger's generation and grading lines, nothing else (the
    # harness check's and the re-gradings' calls are tagged apart)
    grading = json.loads((run / "07_grading" / "metrics.json").read_text())
    generation = json.loads((run / "06_generation" / "metrics.json").read_text())
    assert ledger_total == pytest.approx(grading["spend_usd"] + generation["spend_usd"],
                                         abs=1e-4)
    # the book's provenance page links every file published
    from hbpsych_utils.reporting import book

    (run / "book").mkdir(exist_ok=True)
    page = book.provenance_markdown(
        {"profile": "smoke"}, [], {}, None,
        book.published_markdown(run, tmp_path / "src", "smoke"))
    for f in out.iterdir():
        assert f"<published/v1/{f.name}>" in page
        assert (tmp_path / "src" / "published" / "v1" / f.name).read_bytes() == f.read_bytes()
    # a stage that is no longer current: the book says so, and publish refuses, naming it
    (run / "07_grading" / "build.json").unlink()
    assert "**Not current**: 07_grading" in book.published_markdown(run, tmp_path / "s2",
                                                                     "smoke")
    with pytest.raises(publish.PublishError, match=r"07_grading is not current.*bash run_all"):
        publish.publish(run)


def test_a_broken_payload_writes_nothing(smoke_run: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run = copy_run(smoke_run, tmp_path / "runs")
    real = publish.live_artifacts

    def broken(*args: Any, **kwargs: Any) -> Any:
        artifacts, lines = real(*args, **kwargs)
        artifacts[-1].run.n_errors = 2**31  # more than the store's int4 column holds
        return artifacts, lines

    monkeypatch.setattr(publish, "live_artifacts", broken)
    with pytest.raises(publish.PublishError, match=r"field run\.n_errors: 2147483648 is greater "
                       r"than the maximum.*nothing was written"):
        publish.publish(run)
    assert not (run / publish.PUBLISHED_DIR).exists() and not (run / publish.RECORD).exists()
