"""Chapter 16's sample and its re-grading: the resolver, the cost plan and the repeats."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.config import LLMSettings
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, consistency, generation, grading, panel
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.evaluation.score_sources import EvaluationMode
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.nodes.s16_self_consistency import SELF_CONSISTENCY as STAGE
from hbpsych_utils.reporting.display import Note
from hbpsych_utils.reporting.vocabulary import Table, Tables, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun
from hbpsych_utils.stages.judge_plans import JudgePlan, judge_plan

REGRADE_TAG = "self_consistency"
"""The ledger tag of the re-gradings' judge calls (the store tells them from 07's)."""
REPEATS_FILE = "repeats.csv"
FLIP_RATES_FILE = "flip_rates.csv"
FLIPS_BY_FILE = "flips_by_label.csv"
SPREAD_FILE = "score_spread.csv"
REFUSALS_FILE = "judge_refusals.csv"

LACKING_WHY = ("the released files hold one verdict per (judge, reply, criterion), so there is "
               "nothing to repeat;")
LACKING_ADDS = ("a live run with `grading.repeats` of 2 or more adds how often each judge "
                "changes its verdict when a seeded sample of items is graded again.")
ONCE_WHY = ("this run grades each item once (`grading.repeats` is 1), so there is nothing to "
            "compare;")
ONCE_ADDS = ("`grading.repeats` of 2 or more adds how often each judge changes its verdict "
             "when a seeded sample of `grading.repeat_sample` items is graded again.")


# --- what is re-graded -------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """Live: the sampled (candidate, conversation, criterion) items, and what re-grading and
    reading them needs."""

    items: list[tuple[str, str, int]]
    n_population: int
    """Items of 07's first replies the sample was drawn from."""
    repeats: int
    judges: list[str]
    responses: pd.DataFrame
    """06's first replies of the sampled (candidate, conversation) pairs."""
    conversations: dict[str, Conversation]
    template: str
    verdicts: pd.DataFrame
    """07's verdicts of the first replies (every item: the scores are re-computed from them)."""
    labels: pd.DataFrame
    """prompt_id, criterion_index, theme, axis, category of each sampled item."""
    categories: dict[str, str]
    """Psych category by prompt id (05's modal clinician category, where there is one)."""

    @property
    def n_conversations(self) -> int:
        return len({pid for _, pid, _ in self.items})

    @property
    def empty(self) -> bool:
        """07 graded nothing: there is no item to re-grade."""
        return not self.items

    def view(self) -> Note:
        if self.empty:
            return Note("This run's grading holds no verdict, so there is no item to re-grade.")
        return Note(f"{count(len(self.items), 'item')} ((reply, criterion) pairs of "
                    f"{count(self.n_conversations, 'conversation')}) drawn from the "
                    f"{self.n_population:,} of this run's grading, to be graded "
                    f"{self.repeats} times in all by the {md_text(panel_phrase(self.judges))}: "
                    f"07's verdict and {count(self.repeats - 1, 'repeat')}.")


@dataclass(frozen=True)
class Inputs:
    """What the chapter re-grades (``None`` when the run has nothing to repeat) and why not."""

    mode: EvaluationMode
    sample: Sample | None
    lacking: base.Lacking | None = None

    def view(self) -> Sample | base.Lacking | None:
        return self.lacking if self.lacking is not None else self.sample


@base.resolver
def sample(run: StageRun, *, repeats: int, repeat_sample: int, judges: list[str] | None,
           seed: int) -> Inputs:
    """Live with ``repeats`` >= 2: ``repeat_sample`` (candidate, prompt_id, criterion_index)
    items drawn without replacement, by a generator seeded with ``seed``, from 07's verdicts of
    the first replies (every judge re-grades the same items), with 06's replies, 01's rubrics,
    the grader template, each item's theme, axis and Psych category (05) and 07's verdicts.
    Paper, or ``repeats`` 1: nothing to repeat (said once)."""
    if run.mode != graph.LIVE:
        return Inputs(graph.PAPER, None, base.lacking(STAGE, run.mode, why=LACKING_WHY,
                                                      adds=LACKING_ADDS))
    if repeats < 2:
        return Inputs(graph.LIVE, None, base.Lacking("re-gradings", ONCE_WHY, ONCE_ADDS))
    stage = run.stage
    verdicts = panel.read_verdicts(stage.upstream(graph.GRADING, graph.VERDICTS))
    if "sample" in verdicts.columns:
        verdicts = verdicts[verdicts["sample"].fillna(0) == 0].drop(columns="sample")
    population = sorted(set(zip(verdicts["candidate"], verdicts["prompt_id"],
                                verdicts["criterion_index"].astype(int), strict=True)))
    rng = np.random.default_rng(seed)
    drawn = rng.choice(len(population), size=min(repeat_sample, len(population)), replace=False)
    items = sorted(population[int(i)] for i in drawn)
    held = {c.prompt_id: c for c in corpus.load_recorded(
        stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))}
    replies = generation.read_responses(stage.upstream(graph.GENERATION, graph.RESPONSES))
    pairs = {(c, p) for c, p, _ in items}
    replies = replies.loc[np.array([(m, p) in pairs for m, p in zip(
        replies["model"], replies["prompt_id"], strict=True)], dtype=bool)]
    cats = subset_files.read_categories(stage.upstream(graph.SUBSET, graph.CATEGORIES_V1))
    psych = {pid: tags[0].split(":", 1)[1]
             for pid, tags in breakdowns.category_tags(cats).items()}
    return Inputs(graph.LIVE, Sample(
        items, len(population), repeats,
        list(study.JUDGE_PANEL) if judges is None else list(judges), replies, held,
        grading.load_template(stage.fetch(grading.TEMPLATE_ARTIFACT)), verdicts,
        item_labels(items, held, psych), psych))


def item_labels(items: list[tuple[str, str, int]], conversations: Mapping[str, Conversation],
                categories: Mapping[str, str]) -> pd.DataFrame:
    """Each sampled (prompt_id, criterion_index): the conversation's HealthBench theme, the
    criterion's rubric axis (its ``axis:`` tag) and the conversation's Psych category; ``None``
    where it has none."""
    rows = []
    for pid, index in sorted({(p, i) for _, p, i in items}):
        conv = conversations[pid]
        axes = [t.split(":", 1)[1] for t in conv.rubrics[index].tags if t.startswith("axis:")]
        rows.append({"prompt_id": pid, "criterion_index": index,
                     "theme": ja.theme_of(conv.example_tags), "axis": axes[0] if axes else None,
                     "category": categories.get(pid)})
    return pd.DataFrame(rows, columns=["prompt_id", "criterion_index", *consistency.FLIP_LABELS])


# --- what it costs -----------------------------------------------------------------------------

Plan = JudgePlan
"""What the re-gradings cost, per judge, before anything is sent."""


@base.needs
def cost_plan(data: Sample, *, llm: LLMSettings, temperature: float,
              max_tokens: int) -> Plan:
    """Calls, tokens and USD per judge for the ``repeats - 1`` re-gradings of the sample: the
    engine's token estimate of each item's filled grader prompt (at ``temperature`` and
    ``max_tokens``, as they will be sent), the cost plan's assumed verdict length and the
    prices of the registry ``llm`` names, through the batch APIs when ``llm.mode`` is batch."""
    wanted = set(data.items)
    chars = [len(r.system) + len(r.user)
             for row in data.responses.itertuples(index=False)
             for r in grading.build_requests(
                 data.conversations[row.prompt_id], "" if pd.isna(row.text) else row.text,
                 data.template, temperature=temperature, max_tokens=max_tokens)
             if (row.model, row.prompt_id, r.criterion_index) in wanted]
    return judge_plan(chars, len(chars) * (data.repeats - 1), data.judges, llm=llm,
                      calls=("one call per item, judge and repeat after 07's verdict "
                             f"({count(data.repeats - 1, 'repeat')})"),
                      not_counted=("no prompt-cache discount, re-asks and answers already in "
                                   "the store"))


# --- the re-gradings ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Regraded:
    """Every judge's verdicts on every sampled item in every repeat (07's as repeat 0)."""

    data: Sample
    repeats: pd.DataFrame
    """``consistency.REPEAT_COLUMNS``, one row per (judge, item, repeat)."""
    n_calls: int
    spend_usd: float
    paid_earlier: float
    flip_rate: float | None
    """The simulator's injected flip rate, when the run's calls went to the simulator."""

    def view(self) -> Tables:
        new = self.repeats[self.repeats["repeat"] > 0]
        g = new.groupby(["judge", "repeat"], sort=False)
        frame = pd.DataFrame({"verdicts": g.size(),
                              "excluded": g["excluded"].sum().astype(int),
                              "judge_refused": g["reason"].apply(
                                  lambda s: int((s == consistency.JUDGE_REFUSED).sum()))})
        note = (f"{self.n_calls:,} engine requests (re-asks included); this attempt paid "
                f"${self.spend_usd:,.4f} (answers already in the store cost nothing)"
                + (f", earlier attempts in this run folder ${self.paid_earlier:,.4f} for the "
                   "answers it reused" if self.paid_earlier else "") + ".")
        if self.flip_rate is not None:
            note += (f" The judges are the provider simulator's, which flips "
                     f"{self.flip_rate:.1%} of grader prompts after their first answer "
                     "(`llm.simulator_flip_rate`): the numbers below measure that setting.")
        return Tables([Table(frame, caption="Verdicts of the re-gradings per judge and "
                             "repeat")], note=note)


@base.needs
def regrade(data: Sample, run: StageRun, *, temperature: float, max_tokens: int,
            max_reasks: int, response_schema: bool) -> Regraded:
    """The sample re-graded ``repeats - 1`` times by every judge through the run's engine,
    exactly as 07 graded it (``temperature``, ``max_tokens``, ``max_reasks``, the verdict schema
    with ``response_schema``, the run's mode and prompt caching), repeat r sent as
    ``Request.repeat`` r: a new request and store entry per repeat, so a resumed or repeated
    run asks nothing twice; repeat 0 is 07's verdict."""
    schema = grading.VERDICT_SCHEMA if response_schema else None
    runs = []
    with run.open_engine(conversations=list(data.conversations.values())) as engine:
        for r in range(1, data.repeats):
            runs.append(panel.grade(
                engine, data.responses, data.conversations, data.judges, data.template,
                temperature=temperature, max_tokens=max_tokens, max_reasks=max_reasks,
                mode=run.llm.mode, response_schema=schema,
                prompt_caching=run.llm.prompt_caching, tag=REGRADE_TAG, repeat=r,
                only=data.items))
        earlier = engine.paid_earlier([k for x in runs for k in x.keys],
                                      [i for x in runs for i in x.run_ids])
    frames = [first_verdicts(data)] + [x.verdicts.assign(repeat=r)
                                      for r, x in enumerate(runs, start=1)]
    table = pd.concat(frames, ignore_index=True)[list(consistency.REPEAT_COLUMNS)]
    table["criteria_met"] = table["criteria_met"].astype(object)
    spend = round(sum(x.spend_totals()["spend_usd"] for x in runs), 6)
    flip = run.llm.simulator_flip_rate if run.llm.simulator else None
    return Regraded(data, table, sum(sum(x.calls.values()) for x in runs), spend, earlier, flip)


def first_verdicts(data: Sample) -> pd.DataFrame:
    """Repeat 0: 07's verdicts of the sampled items by the judges (an item without a reason,
    from another tool's table, reads as parsed or excluded by its verdict)."""
    v = data.verdicts
    keep = [(c, p, int(i)) in set(data.items) and j in data.judges
            for j, c, p, i in zip(v["judge"], v["candidate"], v["prompt_id"],
                                  v["criterion_index"], strict=True)]
    out = v[keep].assign(repeat=0)
    if "reason" not in out.columns:
        out["reason"] = None
    out["reason"] = [r if pd.notna(r) else ("no_verdict" if ex else "parsed")
                     for r, ex in zip(out["reason"], out["excluded"], strict=True)]
    return out[list(consistency.REPEAT_COLUMNS)]


# --- flips -------------------------------------------------------------------------------------
