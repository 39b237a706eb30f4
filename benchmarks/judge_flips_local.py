"""Does a real judge on llama.cpp agree with itself? Flip rates at two temperatures.

Takes the items chapter 16 re-graded in a ``local`` run (its ``repeats.csv``: the judge's
(reply, criterion) items) and grades each of them ``--repeats`` times afresh at every
``--temperature``, through the same engine and grader as chapter 07 (``panel.grade`` with
``Request.repeat``: each repeat its own request and store entry), against llama.cpp's
OpenAI-compatible server with SmolLM2-135M (started here, or ``--base-url``). Each temperature
has its own store in ``--out``, so repeat 0 is asked again too and a second invocation sends
nothing. Prints one line per temperature (the flip rate with its conversation-clustered
interval, Gwet's AC1 between the repeats) and writes them as JSON to ``--out``/flips.json.

    python benchmarks/judge_flips_local.py RUN_DIR [--temperature 0 0.7] [--repeats 3]
        [--items N] [--out DIR] [--base-url URL]

``RUN_DIR`` is a local run's folder (e.g. ``outputs/local``) whose profile listed
``16_self_consistency`` with ``grading.repeats`` >= 2. The grading settings (max tokens, re-asks,
the verdict schema) are the ``local`` profile's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import consistency, generation, grading, panel
from hbpsych_utils.llm import local_server, session
from hbpsych_utils.pipeline import graph, profiles

JUDGE = "smollm2-135m-instruct"


def _items(run: Path, n: int | None) -> list[tuple[str, str, int]]:
    table = pd.read_csv(run / "16_self_consistency" / "repeats.csv")
    table = table[table["judge"] == JUDGE]
    items = sorted({(c, p, int(i)) for c, p, i in zip(
        table["candidate"], table["prompt_id"], table["criterion_index"], strict=True)})
    return items[:n] if n else items


def measure(run: Path, items: list[tuple[str, str, int]], temperature: float, repeats: int,
            base_url: str, out: Path, *, n_resamples: int, seed: int, level: float) -> dict:
    """Every item graded ``repeats`` times at ``temperature``; its flip rate and AC1."""
    grading_params = profiles.load_profile("local").grading
    conversations = {c.prompt_id: c for c in corpus.load_recorded(
        run / graph.CORPUS / graph.CORPUS_RECORD)}
    replies = generation.read_responses(run / graph.GENERATION / graph.RESPONSES)
    template = grading.load_template(sources.fetch(grading.TEMPLATE_ARTIFACT))
    settings = {"base_urls": {"local": base_url}, "mode": "sync"}
    store = out / f"t{temperature:g}"
    store.mkdir(parents=True, exist_ok=True)
    frames = []
    started = time.perf_counter()
    with session.open_engine(settings, store, progress=False) as engine:
        before = engine.store.count()
        for r in range(repeats):
            graded = panel.grade(
                engine, replies, conversations, [JUDGE], template, temperature=temperature,
                max_tokens=grading_params.max_tokens, max_reasks=grading_params.max_reasks,
                mode="sync", response_schema=grading.VERDICT_SCHEMA
                if grading_params.response_schema else None, repeat=r, only=items)
            frames.append(graded.verdicts.assign(repeat=r))
        sent = engine.store.count() - before
    table = pd.concat(frames, ignore_index=True)[list(consistency.REPEAT_COLUMNS)]
    rate = consistency.flip_rates(table, [JUDGE], n_resamples=n_resamples, seed=seed,
                                  level=level)[0]
    return {"temperature": temperature, "repeats": repeats, "items": len(items),
            "n_items": rate.n_items, "n_flipped": rate.n_flipped, "flip_rate": rate.rate,
            "interval": [rate.low, rate.high], "level": level,
            "ac1_between_repeats": consistency.repeat_agreement(table).get(JUDGE),
            "excluded": int(table["excluded"].sum()), "calls_sent": sent,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--temperature", type=float, nargs="+", default=[0.0, 0.7])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--items", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/judge_flips_local"))
    ap.add_argument("--base-url", default=None)
    args = ap.parse_args(argv)
    items = _items(args.run, args.items)
    results = []
    with ExitStack() as stack:
        url = args.base_url or stack.enter_context(local_server.local_server()).base_url
        for t in args.temperature:
            row = measure(args.run, items, t, args.repeats, url, args.out,
                          n_resamples=study.N_RESAMPLES, seed=study.SEED, level=study.CI_LEVEL)
            results.append(row)
            print(f"temperature {t:g}: {row['n_flipped']} of {row['n_items']} items flipped "
                  f"across {args.repeats} gradings (rate {row['flip_rate']}, interval "
                  f"{row['interval']}), AC1 {row['ac1_between_repeats']}, {row['seconds']} s",
                  flush=True)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(),
               "load_1min_after": os.getloadavg()[0], "python": sys.version.split()[0]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "flips.json").write_text(json.dumps({"machine": machine, "results": results},
                                                    indent=2) + "\n")
    print(json.dumps(machine))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
