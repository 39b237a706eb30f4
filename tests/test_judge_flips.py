"""The simulator's flip setting: a known share of grader prompts changes verdict on
re-grading, measured back through the engine, the panel and the flip-rate statistics."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from conftest import FREE

from hbpsych_utils import study
from hbpsych_utils.core.config import ProfileError
from hbpsych_utils.evaluation import consistency, grading, panel
from hbpsych_utils.llm import Engine, load_registry
from hbpsych_utils.llm.testing import Simulator
from hbpsych_utils.llm.testing.simulator import answer_text, sim_hash, unstable
from hbpsych_utils.runner import checks

REG = load_registry()
JUDGE = "gpt-4.1-2025-04-14"


def _prompt(i: int) -> list[tuple[str, str]]:
    return [("system", "You grade."), ("user", f"Item {i}. Return JSON with criteria_met.")]


def _verdict(text: str) -> bool:
    return json.loads(text.split("```json\n")[1].split("\n```")[0])["criteria_met"]


def test_first_answer_usual_later_answers_flipped_stable_items_never() -> None:
    """With the flip setting, an unstable grader prompt's first answer is the usual verdict and
    every later one the other; a stable prompt, and any prompt at rate 0, never changes."""
    sim = Simulator(flip_rate=0.5, flip_seed=3)  # not started: the state alone
    hashes = [sim_hash(JUDGE, _prompt(i), None, None) for i in range(40)]
    kinds = [unstable(h, 0.5, 3) for h in hashes]
    assert 0 < sum(kinds) < len(kinds)  # both kinds among 40 prompts at 50%
    for i, (h, flips) in enumerate(zip(hashes, kinds, strict=True)):
        usual = _verdict(answer_text(JUDGE, _prompt(i), None, h))
        answers = [_verdict(answer_text(JUDGE, _prompt(i), None, h,
                                        flipped=sim.state.flipped(h, _prompt(i))))
                   for _ in range(4)]
        assert answers[0] == usual
        assert answers[1:] == [usual != flips] * 3
    quiet = Simulator(flip_rate=0.0)
    assert not any(quiet.state.flipped(h, _prompt(0)) for h in hashes for _ in range(2))
    # a prompt that asks for no verdict is never counted nor flipped
    assert not any(sim.state.flipped(h, [("user", "hello")]) for h in hashes for _ in range(2))
    # the share of unstable prompts is the rate, whichever the seed
    many = [sim_hash(JUDGE, _prompt(i), None, None) for i in range(20_000)]
    assert sum(unstable(h, 0.05, 11) for h in many) / 20_000 == pytest.approx(0.05, abs=0.005)
    with pytest.raises(ValueError, match="flip_rate"):
        Simulator(flip_rate=1.5)


def test_a_schema_verdict_is_flipped_too() -> None:
    schema = grading.VERDICT_SCHEMA
    h = sim_hash(JUDGE, _prompt(1), schema, None)
    usual = json.loads(answer_text(JUDGE, _prompt(1), schema, h))
    other = json.loads(answer_text(JUDGE, _prompt(1), schema, h, flipped=True))
    assert other["criteria_met"] is (not usual["criteria_met"])


def test_the_flip_rate_needs_the_simulator() -> None:
    """``llm.simulator_flip_rate`` without the simulator would change nothing: refused in one
    line naming both keys."""
    with pytest.raises(ProfileError) as exc:
        checks.load_for_run("default", {"llm.simulator_flip_rate": 0.05})
    problems = [line for line in str(exc.value).splitlines() if line.startswith("  - ")]
    assert len(problems) == 1
    assert "llm.simulator_flip_rate" in problems[0] and "llm.simulator" in problems[0]
    with pytest.raises(ProfileError, match="simulator_flip_rate"):
        checks.load_for_run("smoke", {"llm.simulator_flip_rate": 1.5})


def _requests(n_conversations: int, n_criteria: int) -> list[grading.GraderRequest]:
    return [grading.GraderRequest(f"c{c:04d}", i, "You grade.",
                                  f"Conversation {c}, criterion {i}. Return JSON with "
                                  "criteria_met.", 64, 0.0)
            for c in range(n_conversations) for i in range(n_criteria)]


def _regraded(tmp_path, flip_rate: float, requests, repeats: int,
              modes: tuple[str, ...] = ("batch",)) -> pd.DataFrame:
    """The repeats table of ``repeats`` batch gradings of ``requests`` by one judge against a
    fresh simulator with the flip setting (repeat r in ``modes[r % len(modes)]``)."""
    with Simulator(flip_rate=flip_rate, flip_seed=study.SEED, keep_log=False) as sim:
        engine = Engine(tmp_path / f"flip{flip_rate}.sqlite", REG,
                        base_urls=sim.base_urls_for(REG), limits=FREE, progress=False, env={},
                        backoff_base=0.01, poll_interval=0.02)
        frames = []
        for r in range(repeats):
            run = panel.grade_requests(engine, requests, [JUDGE], candidate="cand",
                                       mode=modes[r % len(modes)], repeat=r)
            assert run.calls == {1: len(requests)}  # each repeat sends every item anew
            frames.append(run.verdicts.assign(repeat=r))
    return pd.concat(frames, ignore_index=True)[list(consistency.REPEAT_COLUMNS)]


@pytest.mark.slow
def test_five_percent_injected_is_measured_back_over_ten_thousand_items(tmp_path) -> None:
    """Acceptance: 5% injected, 10,000 items re-graded (batch, fixed seed): the measured flip
    rate is within 0.5 percentage points of 5% and its interval covers 5%; at 0% it is 0."""
    requests = _requests(1000, 10)
    started = time.monotonic()
    table = _regraded(tmp_path, 0.05, requests, repeats=2)
    (rate, _panel) = consistency.flip_rates(table, [JUDGE], n_resamples=1000, seed=study.SEED,
                                            level=0.95)
    assert rate.n_items == 10_000
    assert abs(rate.rate - 0.05) <= 0.005
    assert rate.low <= 0.05 <= rate.high
    # the items that flipped are exactly the simulator's unstable prompts
    expected = sum(unstable(sim_hash(JUDGE, [("system", r.system), ("user", r.user)], None, None),
                            0.05, study.SEED) for r in requests)
    assert rate.n_flipped == expected
    zero = consistency.flip_rates(_regraded(tmp_path, 0.0, requests, repeats=2), [JUDGE],
                                  n_resamples=1000, seed=study.SEED, level=0.95)[0]
    assert (zero.n_items, zero.n_flipped, zero.rate) == (10_000, 0, 0.0)
    print(f"10,000 items graded twice at 5% and at 0%: {time.monotonic() - started:.1f} s")


@pytest.mark.slow
def test_three_repeats_flip_the_same_share(tmp_path) -> None:
    """With k = 3 an unstable item is not unanimous and a stable one is: the share of flipped
    items does not depend on k (a few items, sync and batch mixed)."""
    requests = _requests(20, 5)
    table = _regraded(tmp_path, 0.3, requests, repeats=3, modes=("batch", "sync"))
    items = consistency.item_flips(table)
    expected = [unstable(sim_hash(JUDGE, [("system", r.system), ("user", r.user)], None, None),
                         0.3, study.SEED) for r in requests]
    assert items["flipped"].tolist() == expected
    by_repeat = table.pivot(index=["prompt_id", "criterion_index"], columns="repeat",
                            values="criteria_met")
    assert (by_repeat[1] == by_repeat[2]).all()  # the later calls agree with each other
    assert ((by_repeat[0] != by_repeat[1]).tolist()) == expected


@pytest.mark.slow
def test_the_child_process_simulator_takes_the_flip_setting(tmp_path) -> None:
    """``SimulatorProcess`` passes ``flip_rate`` and ``flip_seed`` to its simulator: at rate 1
    every grader prompt's second answer is the other verdict."""
    from hbpsych_utils.llm import ChatMessage, Request
    from hbpsych_utils.llm.testing import SimulatorProcess

    with SimulatorProcess(flip_rate=1.0, flip_seed=5) as sim:
        engine = Engine(tmp_path / "s.sqlite", REG, base_urls=sim.base_urls_for(REG),
                        limits=FREE, progress=False, env={}, backoff_base=0.01)
        asks = [Request(JUDGE, [ChatMessage(r, t) for r, t in _prompt(i)], temperature=0,
                        max_tokens=64, repeat=r) for i in range(3) for r in (0, 1)]
        verdicts = [_verdict(res.text) for res in engine.run(asks, mode="sync")]
    assert verdicts[0::2] == [not v for v in verdicts[1::2]]
