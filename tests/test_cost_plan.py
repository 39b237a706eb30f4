"""The planned cost of a run (evaluation.cost_plan): counting, caching, scaling, pricing; and
the study re-planned beside its ledger (evaluation.cost_report).

The tiny design below is computed by hand: its texts have lengths chosen so that every token
count is written out in the test, and the expected dollars are that arithmetic, not the
module's output."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from conftest import chapter_parameters, record_released_corpus, released_jsonl

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import cost_plan, cost_report, grading
from hbpsych_utils.evaluation.cost_plan import (
    AS_STUDY_RAN,
    OPTIMISED,
    Design,
    PlanError,
    Routing,
)
from hbpsych_utils.llm.models import registry_from_dict

SYSTEM = "sys!"                                     # 4 characters
TEMPLATE = "H<<conversation>>R<<rubric_item>>" + "t" * 2000
REPLY = "r" * 4000                                  # 1,000 tokens
PROMPT = (Message("user", "a" * 40),)               # 10 tokens


def conversation(pid: str = "p1", data: dict | None = None) -> Conversation:
    return Conversation(
        prompt_id=pid, prompt=PROMPT,
        rubrics=(RubricItem("c1", 5), RubricItem("c2", -2)),
        ideal_completions_data={"ideal_completions_ref_completions": [REPLY]}
        if data is None else data)


def registry():
    """One candidate (OpenAI-like, batch), an OpenAI-like judge with an implicit cache and an
    Anthropic-like judge with a breakpoint cache; prices in USD per million tokens."""
    return registry_from_dict({
        "providers": {
            "po": {"kind": "openai", "api_key_env": None, "batch": True},
            "pa": {"kind": "anthropic", "api_key_env": None, "batch": True},
            "px": {"kind": "openai_compatible", "api_key_env": None, "batch": False},
        },
        "models": {
            "cand": {"provider": "po", "api_model": "cand",
                     "price": {"input": 2, "output": 8, "batch_discount": 0.5}},
            "slow": {"provider": "px", "api_model": "slow",
                     "price": {"input": 1, "output": 1}},
            "jo": {"provider": "po", "api_model": "jo", "cache_min_tokens": 1000,
                   "cache_mode": "implicit",
                   "price": {"input": 1, "output": 4, "batch_discount": 0.5, "cache_read": 0.25,
                             "batch_cache_stacks": False}},
            "ja": {"provider": "pa", "api_model": "ja", "cache_min_tokens": 1000,
                   "cache_mode": "breakpoint",
                   "price": {"input": 3, "output": 15, "batch_discount": 0.5, "cache_read": 0.1,
                             "cache_write": 1.25, "batch_cache_stacks": True}},
        },
    })


HALF = {("openai", True): 0.5, ("anthropic", True): 0.5}


# ------------------------------------------------------------------ counting


def test_measure_counts_what_the_grader_sends() -> None:
    """Lengths by hand: the rendered conversation with an empty reply is 'user: ' + 40 +
    '\\n\\n' + 'assistant: ' = 59 characters; the prefix adds 'H' and 'R' and the system
    message (65); a criterion adds its item ('[5] c1', 6) and the 2,000-character tail."""
    (m,) = cost_plan.measure([conversation()], TEMPLATE, system=SYSTEM)
    assert (m.prompt_chars, m.prefix_chars) == (40, 65)
    assert m.criterion_chars == (65 + 6 + 2000, 65 + 7 + 2000)
    assert (m.reply_chars, m.reply_source) == (4000, "reference")
    # ... and the same as rendering the grader prompt with the reply, criterion by criterion
    prompts = [grading.render_grader_prompt(TEMPLATE, PROMPT, REPLY, item)
               for item in conversation().rubrics]
    assert [len(SYSTEM) + len(p) for p in prompts] == [n + 4000 for n in m.criterion_chars]
    # the prefix is everything before the rubric item (both items open with "[", one more
    # shared character that no cache can rely on across rubrics in general)
    cut = m.prefix_chars + 4000 - len(SYSTEM)
    common = next(i for i, (a, b) in enumerate(zip(*prompts, strict=False)) if a != b)
    assert common == cut + 1
    assert [p[cut:cut + 7] for p in prompts] == ["[5] c1t", "[-2] c2"]


def test_measure_on_the_real_template_splits_before_the_rubric_item(mirror: Path) -> None:
    template = grading.load_template()
    conv = conversation()
    (m,) = cost_plan.measure([conv], template)
    user = grading.render_grader_prompt(template, conv.prompt, REPLY, conv.rubrics[0])
    prefix = user[:m.prefix_chars - len(grading.SYSTEM_MESSAGE) + len(REPLY)]
    assert prefix.endswith("# Rubric item\n") and REPLY in prefix
    assert "# Instructions" not in prefix  # the template's instructions follow the item


def test_reply_length_sources() -> None:
    refs = conversation(data={"ideal_completions_ref_completions": ["x" * 10, "y" * 30],
                              "ideal_completion": "z" * 99})
    ideal = conversation("p2", data={"ideal_completions_ref_completions": [],
                                     "ideal_completion": "z" * 99})
    none = conversation("p3", data={})
    assert cost_plan.reference_reply_chars(refs) == (20, "reference")
    assert cost_plan.reference_reply_chars(ideal) == (99, "ideal")
    assert cost_plan.reference_reply_chars(none) is None
    measured = cost_plan.measure([refs, ideal, none], TEMPLATE, system=SYSTEM)
    assert [(m.reply_chars, m.reply_source) for m in measured] == [
        (20, "reference"), (99, "ideal"), (round((20 + 99) / 2), "mean")]
    with pytest.raises(PlanError, match="no conversations"):
        cost_plan.measure([], TEMPLATE)


# ------------------------------------------------------------------ caching rules


def test_cached_length_follows_minimum_mode_and_granularity() -> None:
    reg = registry()
    jo, ja, cand = reg.model("jo"), reg.model("ja"), reg.model("cand")
    assert cost_plan.cached_length(999, jo, "openai") == 0          # below the minimum
    assert cost_plan.cached_length(1000 + 127, jo, "openai") == 1000  # OpenAI steps of 128
    assert cost_plan.cached_length(1000 + 300, jo, "openai") == 1256
    assert cost_plan.cached_length(1300, ja, "anthropic") == 1300    # breakpoint: all of it
    assert cost_plan.cached_length(10_000, cand, "openai") == 0       # no cache configured


def test_group_cache_tokens() -> None:
    reg = registry()
    jo, ja = reg.model("jo"), reg.model("ja")
    assert cost_plan.group_cache_tokens(1300, 1, jo, "openai", 1.0) == (0.0, 0.0)
    # implicit: 11 later calls, 90 % of them read 1,256 tokens; nothing is written
    assert cost_plan.group_cache_tokens(1300, 12, jo, "openai", 0.9) == pytest.approx(
        (11 * 0.9 * 1256, 0.0))
    # breakpoint: the first call and every miss write 1,300 tokens
    assert cost_plan.group_cache_tokens(1300, 12, ja, "anthropic", 0.9) == pytest.approx(
        (11 * 0.9 * 1300, 1300 * (1 + 11 * 0.1)))
    assert cost_plan.group_cache_tokens(900, 12, ja, "anthropic", 1.0) == (0.0, 0.0)


# ------------------------------------------------------------------ the plan, by hand


def design(n: int = 10) -> Design:
    return Design(conversations=tuple(cost_plan.measure([conversation()], TEMPLATE,
                                                        system=SYSTEM)),
                  n_conversations=n, candidates=("cand",), judges=("jo", "ja"))


def by_key(rows: list[cost_plan.PlanRow]) -> dict[tuple[str, str], cost_plan.PlanRow]:
    return {(r.phase, r.model): r for r in rows}


def test_tiny_design_by_hand() -> None:
    """One measured conversation standing for 10. Tokens: generation 10 in, 1,000 out; each of
    the 2 criteria ceil((4 + 61 + 6 or 7 + 2,000 + 4,000) / 4) = 1,518 in, 80 out; the shared
    prefix ceil((65 + 4,000) / 4) = 1,017 tokens (OpenAI caches 1,000 of it, Anthropic all)."""
    rows = by_key(cost_plan.plan(design(), registry(), AS_STUDY_RAN, HALF))
    gen, jo, ja = rows["generation", "cand"], rows["grading", "jo"], rows["grading", "ja"]
    assert (gen.calls, gen.input_tokens, gen.output_tokens, gen.batch) == (10, 100, 10_000, False)
    assert (jo.calls, jo.input_tokens, jo.output_tokens, jo.batch) == (20, 30_360, 1600, True)
    assert gen.usd == pytest.approx((100 * 2 + 10_000 * 8) / 1e6)
    assert jo.usd == pytest.approx((30_360 * 1 + 1600 * 4) / 1e6 * 0.5)
    assert ja.usd == pytest.approx((30_360 * 3 + 1600 * 15) / 1e6 * 0.5)
    assert jo.cache_read_tokens == ja.cache_read_tokens == ja.cache_write_tokens == 0

    rows = by_key(cost_plan.plan(design(), registry(), OPTIMISED, HALF))
    gen, jo, ja = rows["generation", "cand"], rows["grading", "jo"], rows["grading", "ja"]
    assert gen.batch and gen.usd == pytest.approx((100 * 2 + 10_000 * 8) / 1e6 * 0.5)
    # OpenAI-like: per group 1 later call × 0.5 × 1,000 cached; no stacking: cached tokens at
    # 0.25 of the sync input price, the rest at the batch price
    assert jo.cache_read_tokens == pytest.approx(10 * 500)
    assert jo.usd == pytest.approx(((30_360 - 5000) * 1 * 0.5 + 5000 * 1 * 0.25
                                    + 1600 * 4 * 0.5) / 1e6)
    # Anthropic-like: reads 1 × 0.5 × 1,017, writes 1,017 × 1.5 per group; batch stacks
    reads, writes = 10 * 508.5, 10 * 1525.5
    assert (ja.cache_read_tokens, ja.cache_write_tokens) == pytest.approx((reads, writes))
    assert ja.usd == pytest.approx(((30_360 - reads - writes) * 3 + reads * 3 * 0.1
                                    + writes * 3 * 1.25 + 1600 * 15) * 0.5 / 1e6)
    assert (jo.groups, jo.groups_cached) == (1, 1)


def test_caching_ceiling_by_hand() -> None:
    """The ceiling caches the whole 1,017-token prefix for both judges (no minimum, no OpenAI
    granularity), the first call of a group writes it at the input price, the later one reads
    it, and the batch discount stacks; the rubric item and the instructions stay uncached.
    Generation and the as-run plan do not change."""
    ceiling = cost_plan.caching_ceiling(registry(), ["jo", "ja"])
    assert ceiling.model("cand") == registry().model("cand")
    every = {k: 1.0 for k in HALF}
    rows = by_key(cost_plan.plan(design(), ceiling, OPTIMISED, every))
    jo, ja = rows["grading", "jo"], rows["grading", "ja"]
    reads = writes = 10 * 1017
    for r in (jo, ja):
        assert (r.cache_read_tokens, r.cache_write_tokens) == (reads, writes)
    uncached = 30_360 - reads - writes
    assert jo.usd == pytest.approx((uncached * 1 + 1600 * 4 + reads * 0.25 + writes * 1)
                                   * 0.5 / 1e6)
    assert ja.usd == pytest.approx((uncached * 3 + 1600 * 15 + (reads * 0.1 + writes) * 3)
                                   * 0.5 / 1e6)
    assert rows["generation", "cand"].usd == by_key(cost_plan.plan(
        design(), registry(), OPTIMISED, every))["generation", "cand"].usd
    as_run = cost_plan.plan(design(), ceiling, AS_STUDY_RAN, every)
    assert cost_plan.total_usd(as_run) == pytest.approx(
        cost_plan.total_usd(cost_plan.plan(design(), registry(), AS_STUDY_RAN, every)))
    # a prefix far below any real minimum is still cached whole at the ceiling
    short = Design(conversations=design().conversations, n_conversations=1,
                   candidates=("cand",), judges=("jo",), reply_scale={"cand": 0.01})
    (_, jo_short) = cost_plan.plan(short, ceiling, OPTIMISED, every)
    assert jo_short.cache_read_tokens == pytest.approx(-(-(65 + 40) // 4))


def test_sums_scale_with_the_design_size_and_sync_providers_never_batch() -> None:
    small = cost_plan.plan(design(10), registry(), OPTIMISED, HALF)
    large = cost_plan.plan(design(25), registry(), OPTIMISED, HALF)
    for a, b in zip(small, large, strict=True):
        assert b.usd == pytest.approx(a.usd * 2.5) and b.calls == pytest.approx(a.calls * 2.5)
    d = Design(conversations=design().conversations, n_conversations=1, candidates=("slow",),
               judges=())
    (row,) = cost_plan.plan(d, registry(), OPTIMISED)
    assert not row.batch and row.usd == pytest.approx((10 + 1000) / 1e6)


def test_samples_multiply_generation_and_grading() -> None:
    """generation.samples = k: k replies per conversation, each generated and graded."""
    one = cost_plan.plan(design(10), registry(), OPTIMISED, HALF)
    three = cost_plan.plan(replace(design(10), samples=3), registry(), OPTIMISED, HALF)
    for a, b in zip(one, three, strict=True):
        assert b.calls == pytest.approx(3 * a.calls) and b.usd == pytest.approx(3 * a.usd)
    assert cost_plan.plan(replace(design(10), samples=1), registry(), OPTIMISED, HALF) == one
    with pytest.raises(PlanError, match="samples"):
        replace(design(10), samples=0)


def test_reply_scale_lengthens_replies_and_prefixes() -> None:
    d = Design(conversations=design().conversations, n_conversations=1, candidates=("cand",),
               judges=("jo",), reply_scale={"cand": 0.5})
    rows = by_key(cost_plan.plan(d, registry(), OPTIMISED, HALF))
    assert rows["generation", "cand"].output_tokens == 500
    # prefix ceil((65 + 2,000) / 4) = 517 tokens: below the 1,000-token minimum
    assert rows["grading", "jo"].cache_read_tokens == 0
    assert rows["grading", "jo"].groups_cached == 0


def test_compare_puts_routings_side_by_side_with_totals() -> None:
    sync = Routing("all sync", False, False, False)
    table = cost_plan.compare(design(), registry(), [AS_STUDY_RAN, sync, OPTIMISED], HALF)
    runs = {r.name: by_key(cost_plan.plan(design(), registry(), r, HALF))
            for r in (AS_STUDY_RAN, sync, OPTIMISED)}
    body = table[table["model"] != "total"].set_index(["phase", "model"])
    for name, rows in runs.items():
        for key, row in rows.items():
            assert body.loc[key, f"{name} usd"] == pytest.approx(row.usd, abs=1e-4)
    total = table[(table["phase"] == "all")].iloc[0]
    assert total[f"{OPTIMISED.name} usd"] == pytest.approx(
        sum(r.usd for r in runs[OPTIMISED.name].values()), abs=1e-3)
    grading_total = table[(table["phase"] == "grading") & (table["model"] == "total")].iloc[0]
    assert grading_total["calls"] == 40


def test_configured_routing_and_design_errors() -> None:
    assert cost_plan.configured("sync", True) == Routing("as configured", False, False, True)
    assert cost_plan.configured("batch", False).grading_batch
    with pytest.raises(PlanError, match=r"llm\.mode"):
        cost_plan.configured("fast", True)
    with pytest.raises(PlanError, match="empty"):
        Design(conversations=(), n_conversations=1, candidates=(), judges=())
    with pytest.raises(PlanError, match="reply_scale"):
        Design(conversations=design().conversations, n_conversations=1, candidates=(),
               judges=(), reply_scale={"cand": -1})
    d = Design(conversations=design().conversations, n_conversations=1,
               candidates=("nobody",), judges=())
    with pytest.raises(PlanError, match="candidate 'nobody'"):
        cost_plan.plan(d, registry(), OPTIMISED)


def test_ledger_output_tokens_inverts_the_price() -> None:
    """A ledger built from 300 output tokens per reply at the sync price gives 300 back."""
    d = design(n=50)
    spend = {"cand": 50 * (10 * 2 + 300 * 8) / 1e6}
    assert cost_report.ledger_output_tokens(spend, d, registry()) == pytest.approx({"cand": 300})
    assert cost_report.ledger_reply_scale(spend, d, registry()) == pytest.approx({"cand": 0.3})


# ------------------------------------------------------------------ the study


def test_study_report_on_the_release(mirror: Path) -> None:
    from hbpsych_utils.core import sources
    from hbpsych_utils.evaluation import runlog
    from hbpsych_utils.llm.models import load_registry

    d = cost_plan.study_design(judges=study.JUDGE_PANEL)
    assert (d.n_conversations, len(d.conversations)) == (610, 72)
    assert d.candidates == study.CANDIDATES and d.judges == study.JUDGE_PANEL
    report = cost_report.study_report(d, load_registry(),
                                      runlog.read_spend(sources.fetch("run_spend")))
    s = report.summary()
    lines = released_jsonl("run_spend")
    assert s["study_spend_usd"] == pytest.approx(sum(x["cost"] for x in lines), abs=0.01)
    assert s["by_judge"]["gpt-4.1-2025-04-14"]["study_spend_usd"] == pytest.approx(
        sum(x["cost"] for x in lines if x["phase"] == "grade"
            and x["who"] == "gpt-4.1-2025-04-14"), abs=0.01)
    assert s["ratio"] == pytest.approx(s["plan_optimised_usd"] / s["plan_as_study_ran_usd"],
                                       abs=1e-3)
    assert s["design"]["generation_calls"] == 610 * 20
    criteria = sum(c.n_criteria for c in d.conversations) / 72
    assert s["design"]["grading_calls"] == round(610 * 20 * 3 * criteria)
    # the optimisation never costs more, and batch halves the batch providers' generation
    table = report.table().set_index(["phase", "model"])
    assert (table["optimised_usd"] <= table["as_run_usd"] + 1e-9).all()
    assert table.loc[("generation", "gpt-4.1-2025-04-14"), "optimised_vs_as_run"] == 0.5
    assert table.loc[("generation", "grok-4.5"), "optimised_vs_as_run"] == 1.0
    # the ceiling bounds every caching assumption with the same replies
    sens = s["sensitivity"]
    for ceiling, others in (("caching_ceiling", ["no_cache_hit", "every_later_call_hits"]),
                            ("caching_ceiling_with_those_replies",
                             ["replies_as_long_as_the_generation_ledger_implies",
                              "those_replies_and_every_later_call_hits"])):
        for other in others:
            assert sens[ceiling]["plan_optimised_usd"] <= sens[other]["plan_optimised_usd"]
            assert sens[ceiling]["plan_as_study_ran_usd"] == sens[other]["plan_as_study_ran_usd"]
    assert sens["caching_ceiling"]["ratio"] <= s["ratio"]
    assert set(s) >= {"study_spend_usd", "plan_as_study_ran_usd", "plan_optimised_usd",
                      "ratio"}
    assert list(s)[:4] == ["study_spend_usd", "plan_as_study_ran_usd", "plan_optimised_usd",
                           "ratio"]


def test_stage_06_paper_shows_the_study_plan(tmp_path: Path, mirror: Path) -> None:
    from hbpsych_utils.pipeline import graph
    from hbpsych_utils.stages import s06_generation
    from hbpsych_utils.stages.base import run_chapter

    record_released_corpus(tmp_path / "t")
    run_chapter(graph.GENERATION, chapter_parameters(graph.GENERATION, tmp_path, profile="t"))
    table = pd.read_csv(tmp_path / "t" / graph.GENERATION / s06_generation.PLAN_FILE)
    body = table[table["model"] != "total"]
    assert set(body[body.phase == "generation"].model) == set(study.CANDIDATES)
    assert set(body[body.phase == "grading"].model) == set(study.JUDGE_PANEL)
    assert (body[body.phase == "generation"].calls == 610).all()
    every = table[table.phase == "all"].iloc[0]
    for column in ("as the study ran it usd", "as configured usd", "optimised usd"):
        assert every[column] == pytest.approx(body[column].sum(), abs=0.01)
