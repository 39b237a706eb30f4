"""The Inspect task (hbpsych_utils/inspect_task.py), run by Inspect's own CLI against the loopback
simulator through Inspect's OpenAI-compatible provider, graded by a three-judge panel.

The scores are recomputed here from what the judges actually answered (the simulator's log),
with the compendium's own grading and scoring, and compared with the log Inspect wrote and with
what ``filter-results`` reads from it. Needs the inspect extra: skipped without it, except when
the environment was installed with it (``HBPSYCH_EXTRAS=inspect``, or ``all`` as ``.ci/run``
sets it), where a missing Inspect is a failure.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import math
import os
import struct
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING

import pandas as pd
import pytest
from lazy_modules import SDK_GROUP

if importlib.util.find_spec("inspect_ai") is None:
    if os.environ.get("HBPSYCH_EXTRAS") in ("inspect", "all"):  # the extra must be importable
        raise ImportError("inspect_ai is not installed, though HBPSYCH_EXTRAS installs it")
    pytest.skip("could not import 'inspect_ai'", allow_module_level=True)

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import grading, scoring
from hbpsych_utils.llm.models import registry_from_dict
from hbpsych_utils.llm.testing import Fault, Simulator
from hbpsych_utils.reporting import export, interop, interop_inspect
from hbpsych_utils.reporting.interop import resolve_subset

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

pytestmark = SDK_GROUP
"""Inspect (and the OpenAI SDK it brings) is imported by the tests that use it, not when the
fast tier is collected (about two seconds of every worker's start): the file's tests run on
the worker of the providers' SDKs, which imports them once."""


@pytest.fixture
def inspect_task() -> ModuleType:
    """The task's module (it imports Inspect)."""
    from hbpsych_utils import inspect_task as task

    return task

INSPECT = Path(sys.executable).parent / "inspect"
TASK = Path(str(importlib.util.find_spec("hbpsych_utils.inspect_task").origin))
CANDIDATE = study.CANDIDATES[0]
JUDGES = [f"openai-api/sim/{j}" for j in study.JUDGE_PANEL]


@dataclass
class Run:
    log: EvalLog
    path: Path
    calls: list[dict]
    conversations: dict[str, Conversation]


def inspect_eval(sim: Simulator, log_dir: Path, *args: str) -> Path:
    """``inspect eval`` of the task, every model on the simulator; the log written."""
    env = {**os.environ, "SIM_BASE_URL": f"{sim.url}/v1", "SIM_API_KEY": "sim-not-a-key"}
    proc = subprocess.run(
        [str(INSPECT), "eval", f"{TASK}@healthbench_psych", "--model",
         f"openai-api/sim/{CANDIDATE}", "--model-role", "judges=" + ",".join(JUDGES),
         "--log-dir", str(log_dir), "--log-format", "eval", "--display", "none", *args],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    logs = sorted(log_dir.glob("*.eval"))
    assert len(logs) == 1, logs
    return logs[0]


def available(subset: str) -> dict[str, Conversation]:
    by_id = export.verified_corpus().by_id()
    return {i: by_id[i] for i in resolve_subset(subset).ids if i in by_id}


@pytest.fixture(scope="module")
def v1_run(mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from inspect_ai.log import read_eval_log

    with Simulator() as sim:
        path = inspect_eval(sim, tmp_path_factory.mktemp("inspect"), "-T", "subset=v1")
        calls = list(sim.log)
    yield Run(read_eval_log(str(path)), path, calls, available("v1"))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def judge_calls(run: Run) -> dict[tuple[str, str], str]:
    """(judge model, sha256 of the grader prompt) -> the reply the simulator sent."""
    judges = set(study.JUDGE_PANEL)
    out = {}
    for c in run.calls:
        if c["model"] in judges:
            key = c["model"], c["user_sha256"]
            assert c["status"] == 200 and key not in out
            assert c["system"] == grading.SYSTEM_MESSAGE
            out[key] = c["reply"]
    return out


def test_one_scored_sample_per_available_conversation(v1_run: Run,
                                                       inspect_task: ModuleType) -> None:
    log = v1_run.log
    assert log.status == "success"
    ids = sorted(str(s.id) for s in log.samples)
    assert ids == sorted(v1_run.conversations) and len(ids) == 72
    for s in log.samples:
        value = s.scores["psych_panel_scorer"].value
        assert set(value) == {inspect_task.PANEL_KEY, *study.JUDGE_PANEL}
        assert math.isfinite(value[inspect_task.PANEL_KEY])
    assert log.eval.task_args["subset"] == "v1"
    assert log.eval.metadata["n_subset"] == 610 and log.eval.metadata["n_available"] == 72


def test_judges_got_the_reference_grader_prompt_byte_for_byte(v1_run: Run) -> None:
    template = grading.load_template()
    calls = judge_calls(v1_run)
    expected = set()
    for s in v1_run.log.samples:
        conv = v1_run.conversations[str(s.id)]
        for item in conv.rubrics:
            prompt = grading.render_grader_prompt(template, conv.prompt, s.output.completion,
                                                  item)
            expected |= {(j, sha256(prompt)) for j in study.JUDGE_PANEL}
    assert set(calls) == expected


def test_panel_score_is_the_compendiums_scoring_of_the_same_verdicts(
        v1_run: Run, inspect_task: ModuleType) -> None:
    template = grading.load_template()
    calls = judge_calls(v1_run)
    rows = []
    for s in v1_run.log.samples:
        conv = v1_run.conversations[str(s.id)]
        for i, item in enumerate(conv.rubrics):
            prompt = grading.render_grader_prompt(template, conv.prompt, s.output.completion,
                                                  item)
            for judge in study.JUDGE_PANEL:
                verdict = grading.parse_verdict(calls[judge, sha256(prompt)])
                rows.append({"judge": judge, "candidate": CANDIDATE, "prompt_id": conv.prompt_id,
                             "criterion_index": i, "criteria_met": verdict.criteria_met})
    scores = grading.scores_from_verdicts(pd.DataFrame(rows), v1_run.conversations)
    panel = scoring.panel_conversation_scores(scores, CANDIDATE, study.JUDGE_PANEL)
    logged = {str(s.id): s.scores["psych_panel_scorer"].value for s in v1_run.log.samples}
    assert {p: v[inspect_task.PANEL_KEY] for p, v in logged.items()} == panel.to_dict()
    for row in scores.itertuples():
        assert logged[row.prompt_id][row.judge] == row.score

    metrics = v1_run.log.results.scores[0].metrics
    ci = scoring.bootstrap_ci(panel.to_numpy(), seed=study.SEED, level=0.95)
    assert metrics["panel_clipped_mean"].value == ci.estimate == scoring.clipped_mean(panel)
    assert (metrics["panel_ci_low"].value, metrics["panel_ci_high"].value) == (ci.low, ci.high)
    assert metrics["n_panel_scored"].value == 72
    per_judge = scoring.per_judge_means(scores).loc[CANDIDATE]
    for judge in study.JUDGE_PANEL:
        assert metrics[f"{judge}_clipped_mean"].value == per_judge[judge]


@pytest.mark.slow
def test_filter_results_reads_the_log_and_reports_what_inspect_reported(v1_run: Run) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hbpsych_utils", "filter-results", str(v1_run.path),
         "--subset", "v1", "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout)["reports"]
    metrics = v1_run.log.results.scores[0].metrics
    assert report["model"] == f"openai-api/sim/{CANDIDATE}"
    assert report["n"] == 72 and report["subset_size"] == 610
    assert report["clipped_mean"] == metrics["panel_clipped_mean"].value
    assert (report["ci_low"], report["ci_high"]) == (
        metrics["panel_ci_low"].value, metrics["panel_ci_high"].value)


@pytest.mark.slow
def test_a_criterion_without_verdict_is_reasked_then_leaves_the_conversation_unscored(
    mirror: Path, tmp_path: Path, inspect_task: ModuleType
) -> None:
    from inspect_ai.log import read_eval_log

    convs = available("hard")
    pid = sorted(convs)[0]
    criterion = convs[pid].rubrics[0].criterion
    judge = study.JUDGE_PANEL[1]
    fault = Fault("no_verdict", match=criterion, model=judge)
    with Simulator(faults=[fault]) as sim:
        path = inspect_eval(sim, tmp_path, "-T", "subset=hard", "-T", "max_reasks=2",
                            "--sample-id", pid)
    log = read_eval_log(str(path))
    (sample,) = log.samples
    score = sample.scores["psych_panel_scorer"]
    assert fault.hits == 3  # the first ask and two re-asks
    assert math.isnan(score.value[inspect_task.PANEL_KEY]) and math.isnan(score.value[judge])
    assert all(math.isfinite(score.value[j]) for j in study.JUDGE_PANEL if j != judge)
    missing = [v for v in score.metadata["verdicts"] if v["criteria_met"] is None]
    assert missing == [{"judge": judge, "criterion_index": 0, "criteria_met": None,
                        "recovered": False, "attempts": 3}]
    proc = subprocess.run(
        [sys.executable, "-m", "hbpsych_utils", "filter-results", str(path), "--subset", "hard",
         "--json"], capture_output=True, text=True, timeout=300, check=False)
    (report,) = json.loads(proc.stdout)["reports"]
    assert report["n"] == 0 and report["unscored"] == [pid]


# --- the pieces, without a run ---------------------------------------------------------------


def test_judge_names_and_the_study_panel(inspect_task: ModuleType) -> None:
    assert inspect_task.judge_names(None) is None
    assert inspect_task.judge_names("openai/a, google/b") == ["openai/a", "google/b"]
    assert inspect_task.judge_names(["anthropic/c"]) == ["anthropic/c"]
    with pytest.raises(ValueError, match="empty"):
        inspect_task.judge_names(" , ")
    panel = inspect_task.study_panel()
    assert [p.split("/")[0] for p in panel] == ["openai", "anthropic", "google"]
    assert [p.split("/", 1)[1] for p in panel] == list(study.JUDGE_PANEL)


def test_judge_config_carries_the_registry_thinking_budget(inspect_task: ModuleType) -> None:
    flash = inspect_task.judge_config(f"google/{study.JUDGE_PANEL[2]}", 0.0, 2048)
    assert flash.reasoning_tokens == 0 and flash.temperature == 0.0 and flash.max_tokens == 2048
    gpt = inspect_task.judge_config(f"openai/{study.JUDGE_PANEL[0]}", 0.5, 100)
    assert gpt.reasoning_tokens is None and gpt.temperature == 0.5


def test_judge_config_follows_the_registry_decoding_rules(monkeypatch: pytest.MonkeyPatch,
                                                          inspect_task: ModuleType) -> None:
    """A registry judge gets what the engine would send it (``resolve_decoding``): no
    temperature where the model rejects one, its fixed one, its cap; others the study's."""
    price = {"input": 1, "output": 1}
    registry = registry_from_dict({
        "providers": {"po": {"kind": "openai", "api_key_env": None},
                      "pa": {"kind": "anthropic", "api_key_env": None},
                      "pg": {"kind": "google", "api_key_env": None}},
        "models": {
            "rejects": {"provider": "po", "api_model": "snap-r", "temperature": "rejected",
                        "price": price},
            "fixed": {"provider": "pa", "api_model": "snap-f", "temperature": 1.0,
                      "price": price},
            "capped": {"provider": "po", "api_model": "snap-c", "max_tokens_cap": 100,
                       "price": price},
            "thinks": {"provider": "pg", "api_model": "snap-g", "price": price,
                       "params": {"thinking_config": {"thinking_budget": 0}}},
        },
    })
    monkeypatch.setattr(inspect_task, "_registry", lambda: registry)

    def config(name: str) -> tuple[float | None, int | None, int | None]:
        c = inspect_task.judge_config(name, 0.0, 2048)
        return c.temperature, c.max_tokens, c.reasoning_tokens

    assert config("openai/snap-r") == (None, 2048, None)
    assert config("anthropic/snap-f") == (1.0, 2048, None)
    assert config("openai-api/sim/snap-c") == (0.0, 100, None)
    assert config("google/snap-g") == (0.0, 2048, 0)
    assert config("openai/not-in-the-registry") == (0.0, 2048, None)


def test_panel_value_and_statistics(inspect_task: ModuleType) -> None:
    conv = Conversation("p1", (), (RubricItem("a", 5), RubricItem("b", 3), RubricItem("c", -2)))
    v = grading.Verdict
    value = inspect_task.panel_value(conv, {
        "j1": [v(True), v(False), v(True)], "j2": [v(True), v(True), v(False)]})
    assert value == {"healthbench_score": ((5 - 2) / 8 + 8 / 8) / 2, "j1": 3 / 8, "j2": 1.0}
    missing = inspect_task.panel_value(conv, {"j1": [v(True), v(None), v(True)],
                                              "j2": [v(True), v(True), v(True)]})
    assert math.isnan(missing["healthbench_score"]) and math.isnan(missing["j1"])

    values = [{"healthbench_score": 0.5, "j1": 0.4}, {"healthbench_score": math.nan, "j1": 1.2},
              {"healthbench_score": 0.9, "j1": 0.8}]
    stats = inspect_task.panel_statistics(values, n_resamples=200, seed=3, level=0.95)
    panel_ci = scoring.bootstrap_ci([0.5, 0.9], n_resamples=200, seed=3, level=0.95)
    assert stats["panel_clipped_mean"] == panel_ci.estimate == 0.7
    assert (stats["panel_ci_low"], stats["panel_ci_high"]) == (panel_ci.low, panel_ci.high)
    assert stats["n_panel_scored"] == 2
    assert stats["j1_clipped_mean"] == scoring.clipped_mean([0.4, 1.2, 0.8]) == pytest.approx(0.8)


class RecordingJudge:
    """A judge that answers "not met" and keeps the grader prompts it was sent."""

    name = "fake/judge"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __str__(self) -> str:
        return self.name

    async def generate(self, messages: list, config: object = None) -> SimpleNamespace:
        self.prompts.append(messages[-1].text)
        return SimpleNamespace(completion='{"explanation": "no", "criteria_met": false}')


REFUSAL_FIXTURE = Path(__file__).parent / "data" / "provider_errors" / "openai_200_refusal.json"


def test_a_refusal_is_graded_as_the_engine_grades_it(monkeypatch: pytest.MonkeyPatch,
                                                     inspect_task: ModuleType) -> None:
    from inspect_ai.model import ChatMessageUser, ModelName, ModelOutput
    from inspect_ai.model._openai import chat_choices_from_openai
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState
    from openai.types.chat import ChatCompletion

    from hbpsych_utils.llm.providers.openai_chat import parse_chat

    # Inspect's OpenAI provider puts a refusal's explanation (`message.refusal`) into the
    # completion; the engine stores the reply's content, empty, and grades that. So does the
    # task: the judges see an empty reply, as simple-evals' grader would be given.
    body = json.loads(REFUSAL_FIXTURE.read_text(encoding="utf-8"))["body"]
    explanation = body["choices"][0]["message"]["refusal"]
    output = ModelOutput(model=body["model"], choices=chat_choices_from_openai(
        ChatCompletion.model_validate(body), tools=[]))
    assert output.completion == explanation  # what state.output.completion holds
    assert inspect_task.graded_reply(output) == parse_chat(body).text == ""

    conv = Conversation("p1", (Message("user", "Can you help?"),), (RubricItem("helps", 5),))
    judge = RecordingJudge()
    monkeypatch.setattr(inspect_task, "_bound_judges", lambda: [judge])
    state = TaskState(model=ModelName("openai/gpt-4o-2024-08-06"), sample_id="p1", epoch=1,
                      input=[ChatMessageUser(content="Can you help?")], messages=[],
                      output=output)
    score_fn = inspect_task.psych_panel_scorer({"p1": conv}, grading.load_template())
    score = asyncio.run(score_fn(state, Target("")))
    (prompt,) = judge.prompts
    assert explanation not in prompt
    assert prompt == grading.render_grader_prompt(grading.load_template(), conv.prompt, "",
                                                  conv.rubrics[0])
    assert score.answer == "" and score.value[inspect_task.PANEL_KEY] == 0.0


def test_a_reply_without_refusal_is_graded_as_inspect_completes_it(
        inspect_task: ModuleType) -> None:
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ContentText,
        ModelOutput,
    )

    parts = [ContentText(text="First part."), ContentText(text="Second part.")]
    output = ModelOutput(model="m", choices=[ChatCompletionChoice(
        message=ChatMessageAssistant(content=parts), stop_reason="stop")])
    assert inspect_task.graded_reply(output) == output.completion == "First part.\nSecond part."
    both = ModelOutput(model="m", choices=[ChatCompletionChoice(message=ChatMessageAssistant(
        content=[ContentText(text="Some text."), ContentText(text="No.", refusal=True)]),
        stop_reason="stop")])
    assert inspect_task.graded_reply(both) == "Some text."
    assert inspect_task.graded_reply(ModelOutput(model="m")) == ""


def test_to_sample_keeps_the_conversation_and_names_a_bad_role(mirror: Path,
                                                               inspect_task: ModuleType) -> None:
    conv = available("hard")
    first = conv[sorted(conv)[0]]
    sample = inspect_task.to_sample(first)
    assert sample.id == first.prompt_id == sample.metadata["prompt_id"]
    assert [(m.role, m.text) for m in sample.input] == [(m.role, m.content) for m in first.prompt]
    assert len(sample.metadata["rubrics"]) == len(first.rubrics)
    from hbpsych_utils.construction.corpus import Message

    bad = Conversation("p9", (Message("tool", "x"),), first.rubrics)
    with pytest.raises(ValueError, match=r"p9.*'tool'"):
        inspect_task.to_sample(bad)


def test_filter_results_reads_zstandard_members_and_names_a_damaged_one(
    v1_run: Run, tmp_path: Path
) -> None:
    """Inspect writes ``.eval`` members with Zstandard, which ``zipfile`` reads only from
    Python 3.14: the reader decodes them itself and says which member is damaged."""
    with zipfile.ZipFile(v1_run.path) as zf:
        members = [i for i in zf.infolist() if i.filename.startswith("samples/")]
    assert {i.compress_type for i in members} == {interop_inspect.ZIP_ZSTANDARD}
    data = bytearray(v1_run.path.read_bytes())
    member = members[0]
    name_len, extra_len = struct.unpack("<HH", data[member.header_offset + 26:
                                                     member.header_offset + 30])
    start = member.header_offset + 30 + name_len + extra_len
    data[start + 8:start + 40] = bytes(32)
    damaged = tmp_path / "damaged.eval"
    damaged.write_bytes(bytes(data))
    with pytest.raises(interop.InteropError, match=rf"damaged\.eval: {member.filename}: damaged"):
        interop.read_inspect(damaged)


@pytest.mark.slow
def test_filter_results_says_a_crashed_inspect_run_failed(
        mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log Inspect itself wrote for a run that crashed after scoring one conversation: the
    report refuses it (exit 3) and says the run failed, with what was scored and errored."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_run
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import Score, scorer
    from inspect_ai.solver import TaskState, solver

    first, second = resolve_subset("hard").ids[:2]

    @solver
    def crash_on_second():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: object) -> TaskState:
            if state.sample_id == second:
                raise RuntimeError("judge provider returned HTTP 500")
            return state
        return solve

    @scorer(metrics=[])
    def zero():  # type: ignore[no-untyped-def]
        async def score(state: TaskState, target: object) -> Score:
            return Score(value={"healthbench_score": 0.0, "criteria_met": 0,
                                "total_criteria": 3})
        return score

    task = Task(dataset=MemoryDataset([Sample(id=first, input="a"), Sample(id=second,
                                                                          input="b")]),
                solver=crash_on_second(), scorer=zero())
    [log] = inspect_run(task, model="mockllm/model", log_dir=str(tmp_path), display="none",
                        max_samples=1)
    assert log.status == "error"
    [path] = tmp_path.glob("*.eval")
    assert interop.main([str(path)]) == interop.EXIT_INCOMPLETE
    out, err = capsys.readouterr()
    assert out == "" and "the run FAILED (status 'error'" in err
    assert "judge provider returned HTTP 500" in err and "1 sample scored" in err
