"""A smoke-sized grading exported as shards, run three ways and imported: the same store keys
and verdicts as the engine's own run, nothing lost or twice, and a following run sends nothing.

One loopback simulator serves every run of the module (the profile points its providers at it
by ``llm.base_urls``, so its log sees every request a run sends). The engine's own run (A)
generates and grades through its batch path. The export's run (B), in a run folder of its own
that starts from a copy of A's 01-05 (chapters that read nothing of ``llm``), has ``llm.external:
[06_generation, 07_grading]``: 06's GPT-4.1 and DeepSeek calls are exported, run through the
simulator's Batch endpoint and imported, and 06 sends its Anthropic and Google calls itself; 07
then stops asking for its calls, and ``shards`` exports them (1,224 judge calls of one judge: a
1,000-line shard and the rest). Each grading route runs in a copy of B's folder: the
simulator's Batch endpoint (submitted with the OpenAI SDK, as a lab submits to OpenAI), a
replay that writes what ``vllm run-batch`` writes, and Ray Data in local mode (the ray extra;
skipped without it, except where it was installed: ``HBPSYCH_EXTRAS=all``), on the Ray that
conftest's ``local_ray`` starts once for it and test_ray_shards.py.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import RAY_GROUP, _environ, copy_stages

from hbpsych_utils.__main__ import main
from hbpsych_utils.llm import load_registry
from hbpsych_utils.llm.shards import read_manifest
from hbpsych_utils.llm.store import Store
from hbpsych_utils.llm.testing import Simulator
from hbpsych_utils.llm.testing.simulator import body_sha256

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(RAY_GROUP)]
"""One worker: the module's runs, and conftest's ``local_ray`` shared with test_ray_shards.py."""

JUDGE = "gpt-4.1-2025-04-14"
GRADING = "07_grading"


def _profile(folder: Path, base_urls: dict[str, str], external: list[str]) -> Path:
    """Smoke's chain up to grading, larger (24 conversations: 1,224 judge calls of one judge),
    without faults, its providers at the module's simulator."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scale.yaml"
    path.write_text(yaml.safe_dump({
        "description": "Smoke-sized grading at scale (tests).", "seed": 7,
        "notebooks": ["01_corpus", "02_screening", "03_review_round1", "04_recall", "05_subset",
                      "06_generation", GRADING],
        "llm": {"simulator": False, "base_urls": base_urls, "mode": "batch",
                "external": external},
        "evaluation_mode": "live",
        "corpus": {"allow_partial": True, "max_conversations": 300},
        "generation": {"candidates": ["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001",
                                      "gemini-2.5-flash", "deepseek-v4-flash"],
                       "n_conversations": 24},
        "grading": {"judges": [JUDGE]},
    }))
    return path


SHARED_STAGES = ["01_corpus", "02_screening", "03_review_round1", "04_recall", "05_subset"]
"""The stages the engine's run and the export's run build alike (they read nothing of llm)."""


def _run(profile: Path, outputs: Path, ran: list[str] | None = None) -> bool:
    """Whether a run of ``profile`` into ``outputs`` was ok; ``ran``, when given, receives the
    notebooks it planned to run (those it ran, and those left out as an upstream failed)."""
    from hbpsych_utils import runner

    result = runner.run_profile(str(profile), outputs_root=outputs, echo=print)
    if ran is not None:
        ran.extend(n["notebook"] for n in result.notebooks)
    return result.ok


def _grading_keys(run: Path) -> dict[str, str]:
    """Key -> answer text of every judge call in a run's store."""
    with Store(run / "llm_store.sqlite") as store:
        rows = store._db.execute("SELECT key FROM results WHERE tag LIKE 'grade:%'").fetchall()
        keys = [k for (k,) in rows]
        got = store.get_many(keys, completed_only=True)
    return {k: r.text for k, r in got.items()}


def _verdicts(run: Path) -> pd.DataFrame:
    cols = ["judge", "candidate", "prompt_id", "criterion_index", "criteria_met"]
    table = pd.read_csv(run / GRADING / "verdicts.csv")[cols]
    return table.sort_values(cols[:4]).reset_index(drop=True)


class Setup:
    def __init__(self, sim: Simulator, root: Path, a: Path, b_profile: Path, b_root: Path,
                 export: Path, a_uploads: list[bytes], a_log: list[dict]) -> None:
        self.sim, self.root, self.a = sim, root, a
        self.b_profile, self.b_root, self.export = b_profile, b_root, export
        self.a_uploads, self.a_log = a_uploads, a_log

    def copy_of_b(self, name: str) -> tuple[Path, Path]:
        """A copy of the export's run folder (its outputs root) for one route."""
        root = self.root / name
        shutil.copytree(self.b_root, root)
        export = root / "scale" / self.export.relative_to(self.b_root / "scale")
        return root, export

    def import_and_run(self, root: Path, results: Path) -> tuple[dict, int, int]:
        """Import ``results``, import them again, run the profile: (the first import's record,
        lines the second added, requests the simulator saw during the run)."""
        def imported() -> dict:
            folder = root / "scale" / "shards"
            known = set(folder.glob("import-*.json"))
            assert main(["import-results", str(self.b_profile), str(results),
                         "--outputs", str(root)]) == 0
            (record,) = set(folder.glob("import-*.json")) - known
            return json.loads(record.read_text())

        first = imported()
        again = imported()
        before = len(self.sim.log)
        assert _run(self.b_profile, root)
        return first, sum(again["added"].values()), len(self.sim.log) - before


def _via_batch_api(sim: Simulator, export: Path, out: Path) -> None:
    """Each shard of ``export`` submitted to the simulator's Batch endpoint with the OpenAI SDK,
    as a lab submits to OpenAI; the output files written into ``out``."""
    import openai

    out.mkdir(parents=True)
    client = openai.OpenAI(api_key="not-a-key", base_url=sim.base_urls["openai"])
    for s in read_manifest(export).shards:
        f = client.files.create(file=(s.file, (export / s.file).read_bytes()), purpose="batch")
        b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
        while b.status not in ("completed", "failed", "expired", "cancelled"):
            time.sleep(0.1)
            b = client.batches.retrieve(b.id)
        assert b.status == "completed" and b.request_counts.completed == s.lines
        (out / f"{b.id}.jsonl").write_bytes(client.files.content(b.output_file_id).read())


def _stopped_at(run: Path, stage: str) -> str:
    """The failure record of a stage that stopped asking for its calls."""
    text = (run / stage / "failed.json").read_text()
    assert "NotSent" in text
    return text


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, mirror: Path) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("scale")
    registry = load_registry()
    with _environ(HBPSYCH_MIRROR=str(mirror)), Simulator() as sim:
        urls = sim.base_urls_for(registry)
        # A: the engine's own run, its generation and grading through the batch path
        assert _run(_profile(root / "profile-a", urls, []), root / "a")
        a_uploads = list(sim.state.files.values())
        a_log = sim.log
        # B: the same profile with both stages' OpenAI-compatible calls made elsewhere; its
        # 01-05, which read nothing of llm, are A's (copied, up to date in B's run folder)
        b_profile = _profile(root / "profile-b", urls, ["06_generation", GRADING])
        b_run = root / "b" / "scale"
        copy_stages(root / "a" / "scale", b_run, SHARED_STAGES)
        ran: list[str] = []
        assert not _run(b_profile, root / "b", ran)  # 06 stops before its first call
        assert ran == ["06_generation", GRADING]  # 01-05 up to date, 07 not run
        assert "48 model call(s)" in _stopped_at(b_run, "06_generation")
        generation = b_run / "shards" / "generation"
        assert main(["shards", str(b_profile), "--stage", "06_generation",
                     "--outputs", str(root / "b"), "--output", str(generation)]) == 0
        _via_batch_api(sim, generation, root / "generation-output")
        assert main(["import-results", str(b_profile), str(root / "generation-output"),
                     "--outputs", str(root / "b")]) == 0
        # 06 now sends only its Anthropic and Google calls; 07 stops asking for its judge's
        assert not _run(b_profile, root / "b")
        assert "1,224 model call(s)" in _stopped_at(b_run, GRADING)
        export = b_run / "shards" / "grading"
        assert main(["shards", str(b_profile), "--stage", GRADING, "--size", "1000",
                     "--outputs", str(root / "b"), "--output", str(export)]) == 0
        yield Setup(sim, root, root / "a" / "scale", b_profile, root / "b", export, a_uploads,
                    a_log)


def _responses(run: Path) -> pd.DataFrame:
    cols = ["model", "prompt_id", "status", "text", "stop_reason", "refusal", "config"]
    table = pd.read_json(run / "06_generation" / "responses.jsonl", lines=True)[cols]
    return table.sort_values(cols[:2]).reset_index(drop=True)


def test_exported_generation_gives_the_engines_replies(setup: Setup) -> None:
    """06 exported: the GPT-4.1 and DeepSeek calls (the OpenAI-compatible ones), not Claude's
    and Gemini's, which the stage then sent itself; the replies are the engine's own run's."""
    manifest = read_manifest(setup.b_root / "scale" / "shards" / "generation")
    assert {s.model: s.lines for s in manifest.shards} == {
        "gpt-4.1-2025-04-14": 24, "deepseek-v4-flash": 24}
    assert {m: n.requests for m, n in manifest.not_exported.items()} == {
        "claude-haiku-4-5-20251001": 24, "gemini-2.5-flash": 24}
    pd.testing.assert_frame_equal(_responses(setup.b_root / "scale"), _responses(setup.a))


def _batch_lines(blobs: list[bytes]) -> list[bytes]:
    return [line for blob in blobs for line in blob.split(b"\n") if line.strip()]


def test_the_export_holds_the_engines_requests_byte_for_byte(setup: Setup) -> None:
    manifest = read_manifest(setup.export)
    assert [s.lines for s in manifest.shards] == [1000, 224]
    assert {s.model for s in manifest.shards} == {JUDGE}
    assert manifest.not_exported == {} and manifest.already_stored == 0
    shard_lines = _batch_lines([(setup.export / s.file).read_bytes() for s in manifest.shards])
    # the engine's own run uploaded these judge calls in its batch files: the same lines, byte
    # for byte (the candidates' batch lines are the other lines of its uploads)
    requests = [x for x in _batch_lines(setup.a_uploads) if "method" in json.loads(x)]
    uploaded = [x for x in requests
                if json.loads(x)["body"]["model"] == JUDGE and b"criteria_met" in x]
    assert sorted(shard_lines) == sorted(uploaded)
    # and every exported body is one the simulator received from the engine (canonical JSON:
    # an int for a float, a null for a missing key would differ)
    exported = {body_sha256(json.loads(x)["body"]) for x in shard_lines}
    received = {e["body_sha256"] for e in setup.a_log if e["model"] == JUDGE}
    assert len(exported) == 1224 and exported <= received
    assert set(json.loads(x)["custom_id"] for x in shard_lines) == set(_grading_keys(setup.a))


def _check_route(setup: Setup, root: Path, results: Path) -> None:
    first, added_again, sent = setup.import_and_run(root, results)
    assert first["refused"] == [] and first["failures"] == []
    assert first["added"] == {JUDGE: 1224} and first["lines"] == 1224  # 0 lost, 0 twice
    assert added_again == 0
    assert sent == 0  # the following run sends no request
    run = root / "scale"
    assert _grading_keys(run) == _grading_keys(setup.a)  # same keys, same answers
    pd.testing.assert_frame_equal(_verdicts(run), _verdicts(setup.a))


def test_the_simulators_batch_endpoint_route(setup: Setup) -> None:
    root, export = setup.copy_of_b("batch-api")
    _via_batch_api(setup.sim, export, root / "batch-output")
    _check_route(setup, root, root / "batch-output")


def test_the_vllm_run_batch_route(setup: Setup) -> None:
    from hbpsych_utils.llm.testing.replay import replay

    root, export = setup.copy_of_b("vllm")
    out = root / "vllm-output"
    out.mkdir()
    for s in read_manifest(export).shards:
        assert replay(export / s.file, setup.sim.base_urls["openai"],
                      out / f"{s.file}.out.jsonl") == s.lines
    line = json.loads((out / "shard-00001.jsonl.out.jsonl").read_text().split("\n")[0])
    assert line["id"].startswith("vllm-") and line["response"]["request_id"].startswith(
        "vllm-batch-") and line["error"] is None
    _check_route(setup, root, out)


def test_the_ray_data_route(local_ray: object, setup: Setup) -> None:
    """``ray-shards`` on the Ray already running in this process (conftest's ``local_ray``):
    it runs the shards there and leaves that Ray running."""
    root, export = setup.copy_of_b("ray")
    with _environ(RAY_USAGE_STATS_ENABLED="0"):
        assert main(["ray-shards", str(setup.b_profile), str(export), "--outputs", str(root),
                     "--actors", "2"]) == 0
    _check_route(setup, root, export / "ray-output")
