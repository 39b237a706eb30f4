"""How big is the study's grading as batch shards? Calls, shards, tokens and the cost plan.

Plans the study's design as ``benchmarks/cost.py`` does (the 610 HealthBench-Psych v1
conversations, its 20 candidates, every rubric criterion graded by its 3 judges; tokens counted
on the v1 conversations the offline corpus holds and scaled to 610) and says what exporting its
grading would write: per judge, the calls, the estimated bytes of its lines (the prompt's
characters, ~4 per estimated token, and ``LINE_OVERHEAD`` bytes of JSON around them), the
shards (at most 50,000 lines, OpenAI's Batch limit, ``shards --size``, and at most 190 MiB),
the estimated tokens and the plan's USD at the batch price. Every
number comes from ``hbpsych_utils.evaluation.cost_plan``; docs/scale.md quotes this output.

    HBPSYCH_MIRROR=../shared/mirror python benchmarks/shards.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE_OVERHEAD = 300
"""Bytes of a grading line besides the prompt's text: custom_id, method, url, model, the
decoding parameters, JSON quoting (an estimate)."""


def main() -> int:
    mirror = ROOT.parent / "shared" / "mirror"
    if "HBPSYCH_MIRROR" not in os.environ and mirror.is_dir():
        os.environ["HBPSYCH_MIRROR"] = str(mirror)
    from hbpsych_utils import study
    from hbpsych_utils.evaluation import cost_plan
    from hbpsych_utils.evaluation.cost_plan import CHARS_PER_TOKEN
    from hbpsych_utils.llm.models import load_registry
    from hbpsych_utils.llm.shards import DEFAULT_SIZE, MAX_SHARD_BYTES

    design = cost_plan.study_design("v1", judges=study.JUDGE_PANEL)
    registry = load_registry()
    rows = [r for r in cost_plan.plan(design, registry, cost_plan.AS_STUDY_RAN)
            if r.phase == "grading"]
    per_judge = {}
    for r in rows:
        provider = registry.providers[registry.model(r.model).provider]
        size = round(r.input_tokens * CHARS_PER_TOKEN + r.calls * LINE_OVERHEAD)
        per_judge[r.model] = {
            "provider": provider.name, "kind": provider.kind, "calls": round(r.calls),
            "bytes": size, "shards": max(math.ceil(round(r.calls) / DEFAULT_SIZE),
                                         math.ceil(size / MAX_SHARD_BYTES)),
            "input_tokens": round(r.input_tokens), "output_tokens": round(r.output_tokens),
            "plan_usd": round(r.usd, 2)}
    total = {k: sum(j[k] for j in per_judge.values())
             for k in ("calls", "bytes", "shards", "input_tokens", "output_tokens")}
    total["plan_usd"] = round(sum(j["plan_usd"] for j in per_judge.values()), 2)
    print(f"The study's grading: {design.n_conversations} conversations x "
          f"{len(design.candidates)} candidates x every criterion x {len(design.judges)} judges "
          f"(tokens measured on {len(design.conversations)} conversations, scaled)")
    for model, j in per_judge.items():
        print(f"  {model:<28} {j['calls']:>9,} calls  {j['bytes'] / 2**20:>7,.0f} MiB  "
              f"{j['shards']:>2} shards  {j['input_tokens']:>13,} in  "
              f"{j['output_tokens']:>11,} out  ${j['plan_usd']:>8,.2f}  ({j['kind']})")
    print(f"  {'total':<28} {total['calls']:>9,} calls  {total['bytes'] / 2**20:>7,.0f} MiB  "
          f"{total['shards']:>2} shards  {total['input_tokens']:>13,} in  "
          f"{total['output_tokens']:>11,} out  ${total['plan_usd']:>8,.2f}")
    print(json.dumps({"by_judge": per_judge, "total": total}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
