"""What would a full re-run of the study cost, as it ran and with everything the engine can do?

Plans the study's design (the 610 HealthBench-Psych v1 conversations, its 20 candidates, every
rubric criterion graded by its 3 judges, at its settings) twice: as the study ran it (judges on
the providers' batch APIs, candidates sync, no caching) and optimised (batch wherever a provider
has a batch API, candidates included; the grader's shared prefix cached at the registry's
cached-token prices). Tokens are counted from the 72 v1 conversations the offline corpus holds
and scaled to 610; the plans sit beside the study's own ledger (``spend.jsonl``). Every number
comes from ``hbpsych_utils.evaluation.cost_plan`` and ``cost_report``; this script only prints it,
assumptions first, and its JSON summary last.

    HBPSYCH_MIRROR=../shared/mirror python benchmarks/cost.py

Offline: every input is a registry artifact (fetched from ``$HBPSYCH_MIRROR`` when set) or
``params/models.yaml``. Target: ratio = optimised / as run <= 0.7.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.7


def main() -> int:
    mirror = ROOT.parent / "shared" / "mirror"
    if "HBPSYCH_MIRROR" not in os.environ and mirror.is_dir():
        os.environ["HBPSYCH_MIRROR"] = str(mirror)
    import pandas as pd

    from hbpsych_utils import study
    from hbpsych_utils.core import sources
    from hbpsych_utils.evaluation import cost_plan, cost_report, runlog
    from hbpsych_utils.llm.models import load_registry

    start = time.perf_counter()
    design = cost_plan.study_design("v1", judges=study.JUDGE_PANEL)
    report = cost_report.study_report(design, load_registry(),
                                      runlog.read_spend(sources.fetch("run_spend")))
    s = report.summary()
    d, a = s["design"], s["assumptions"]

    print("# Design (METHODS 6-7; hbpsych_utils/study.py; params/models.yaml)")
    print(f"- {d['n_conversations']} conversations (HealthBench-Psych v1), {d['candidates']} "
          f"candidates, {d['judges']} judges; one grader call per rubric criterion "
          f"({d['criteria_per_conversation']} per conversation on average).")
    print(f"- Calls: {d['generation_calls']:,} generation, {d['grading_calls']:,} grading.")
    print(f"- Measured on the {d['n_measured']} v1 conversations the offline corpus holds; "
          f"every sum scaled by {d['n_conversations']}/{d['n_measured']}.")
    print("\n# How tokens are counted")
    print(f"- The engine's estimate: ceil(characters / {a['chars_per_token']}) over every "
          "message of a request (llm.cost.estimate_input_tokens), on the real texts: the "
          "conversation for a candidate; the system message + the grader template filled with "
          "the conversation, the reply and the rubric item for a judge. No provider tokenizer.")
    print(f"- Shared grader prefix (system + template opening + conversation + reply): "
          f"mean {d['shared_prefix_tokens_mean']:,} tokens, median "
          f"{d['shared_prefix_tokens_median']:,}. After it, every call pays the rubric item "
          f"and the template's instructions in full: {d['unshared_tokens_per_call_mean']} "
          "tokens on average.")
    print("\n# Assumptions")
    print(f"- Replies: the study's responses are not released (the mirror holds only the "
          f"score matrices and the run logs). Each candidate's reply to a conversation is as "
          f"long as HealthBench's reference completions for it (by source: "
          f"{a['reply_sources']}; 'mean' = the mean of the others): "
          f"{a['reply_tokens_mean']} tokens on average, the same for every candidate. "
          "Reasoning/thinking tokens are not modelled.")
    print(f"- Judge output: {a['judge_output_tokens']} tokens per criterion (a short JSON "
          "explanation and the verdict).")
    print("- Cache hit rate (share of a prefix group's calls after the first that read the "
          "cache; the first call never does): "
          + ", ".join(f"{k} {v:.0%}" for k, v in a["cache_hit_rate"].items()) + ".")
    steps = ", ".join(f"{kind} in steps of {step}"
                      for kind, step in cost_plan.CACHE_GRANULARITY.items())
    print("- Cached length: the whole prefix at or above the model's minimum; implicit caches "
          f"of {steps} above it (cost_plan.CACHE_GRANULARITY). Anthropic's breakpoint: the "
          "first call and every miss write.")
    print("- Batch APIs and cache prices, from the registry:")
    for model, f in a["registry"].items():
        print(f"  {model:<28} provider {f['provider']:<10} batch {f['batch_api']!s:<5} "
              f"(x{f['batch_discount']}) cache {f['cache_mode']:<10} min "
              f"{f['cache_min_tokens']} read {f['cache_read']} write {f['cache_write']} "
              f"batch stacks {f['batch_cache_stacks']}")
    print("- Candidates: batch available where the provider has a batch API "
          "(" + ", ".join(sorted({r.provider for r in report.optimised
                                   if r.phase == "generation" and r.batch})) + ").")

    print("\n# Plan per phase and model (USD)")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(report.table().to_string(index=False))
    print("\n# Per judge")
    for judge, j in s["by_judge"].items():
        print(f"- {judge}: ledger ${j['study_spend_usd']:,.2f}, as run "
              f"${j['plan_as_study_ran_usd']:,.2f}, optimised ${j['plan_optimised_usd']:,.2f}; "
              f"{j['groups_reaching_cache_minimum']:.1%} of (candidate, conversation) groups "
              f"reach its cache minimum, cached reads {j['cache_read_share_of_input']:.1%} of "
              "its input")

    print("\n# The as-run plan against the study's ledger")
    for phase, p in s["by_phase"].items():
        share = p["plan_as_study_ran_usd"] / p["study_spend_usd"]
        print(f"- {phase}: plan ${p['plan_as_study_ran_usd']:,.2f} vs ledger "
              f"${p['study_spend_usd']:,.2f} ({share:.0%})")
    print(f"- all: plan ${s['plan_as_study_ran_usd']:,.2f} vs ledger "
          f"${s['study_spend_usd']:,.2f} ({s['plan_as_study_ran_vs_spend']:.0%}). The plan "
          "and the ledger part where the study's replies were longer or shorter than "
          "HealthBench's reference completions or billed hidden reasoning (compare "
          "reply_tokens with ledger_implied_output per candidate), where a provider's "
          "tokenizer counts other than 4 characters a token, and by the re-asks and sync "
          "fallbacks the plan leaves out; the registry's prices are estimates.")

    print("\n# Sensitivity (the same plan under other assumptions)")
    for name, v in s["sensitivity"].items():
        print(f"- {name.replace('_', ' ')}: as run ${v['plan_as_study_ran_usd']:,.2f}, "
              f"optimised ${v['plan_optimised_usd']:,.2f}, ratio {v['ratio']}")
    print("- The caching ceiling is the most any prompt cache could save on the reference "
          "grader prompt: every judge caches a shared prefix of any length whole, every later "
          "call of a group hits, a cache write costs no premium and the batch discount stacks "
          "(cost_plan.caching_ceiling). The rubric item and the instructions after it are "
          "never shared, so they are paid in full even there.")

    ceiling = s["sensitivity"]["caching_ceiling"]["ratio"]
    verdict = "met" if s["ratio"] <= TARGET else "NOT met"
    print(f"\nratio optimised / as run = {s['ratio']} (target <= {TARGET}: {verdict}; "
          f"caching ceiling {ceiling}); computed in {time.perf_counter() - start:.1f} s")
    print(json.dumps(s, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
