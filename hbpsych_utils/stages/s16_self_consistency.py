"""Chapter 16, do the judges agree with themselves? A sample of the grading, re-graded.

The chapter's calls, in order: :func:`start`, :func:`sample` (the resolver: live with
``grading.repeats`` >= 2, a seeded sample of 07's (reply, criterion) items and what re-grading
and reading them needs; paper, or grading once, has nothing to repeat, said once),
:func:`cost_plan` (shown before anything is sent), :func:`regrade` (each repeat through the
engine with 07's settings, mode and prompt caching, ``Request.repeat`` r: a new store entry),
:func:`flips` (flip rates with conversation-clustered intervals, AC1 between repeats),
:func:`flipping_criteria` (by theme, rubric axis, Psych category), :func:`scores` (panel scores
per repeat, their spread, Kendall's tau between rankings), :func:`refusals` (the judges' own),
:func:`metrics`, :func:`write` and :func:`findings`. The statistics are
:mod:`hbpsych_utils.evaluation.consistency`'s; docs/self_consistency.md defines the outputs.
"""
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
from hbpsych_utils.evaluation import cost_plan as plans
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.evaluation.score_sources import EvaluationMode
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics.s16_self_consistency import (
    FlipRate,
    JudgeRefusals,
    ScoreSpread,
    SelfConsistencyMetrics,
)
from hbpsych_utils.pipeline.nodes.s16_self_consistency import SELF_CONSISTENCY as STAGE
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table, Tables, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

start = base.starter(STAGE)

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

@dataclass(frozen=True)
class Plan:
    """What the re-gradings cost, per judge, before anything is sent."""

    table: pd.DataFrame
    batch: bool
    mean_input_tokens: float
    repeats: int

    @property
    def total_usd(self) -> float:
        return float(self.table["usd"].sum())

    def view(self) -> Tables:
        route = "through the batch APIs" if self.batch else "synchronously"
        note = (f"Planned before anything is sent: one call per item, judge and repeat after "
                f"07's ({self.repeats - 1} in all), {route}, about "
                f"{self.mean_input_tokens:,.0f} prompt tokens per call (4 characters a token) "
                f"and {plans.JUDGE_OUTPUT_TOKENS} written, at the model registry's prices: "
                f"${self.total_usd:,.4f} in all (no prompt-cache discount, re-asks and answers "
                "already in the store not counted; llm.max_cost caps what a stage may spend).")
        return Tables([Table(self.table.set_index("judge"), caption="Cost plan")], note=note)


@base.needs
def cost_plan(data: Sample, *, llm: LLMSettings, temperature: float,
              max_tokens: int) -> Plan:
    """Calls, tokens and USD per judge for the ``repeats - 1`` re-gradings of the sample: the
    engine's token estimate of each item's filled grader prompt (at ``temperature`` and
    ``max_tokens``, as they will be sent), the cost plan's assumed verdict length and the
    prices of the registry ``llm`` names, through the batch APIs when ``llm.mode`` is batch."""
    from hbpsych_utils.llm.models import profile_registry

    wanted = set(data.items)
    chars = [len(r.system) + len(r.user)
             for row in data.responses.itertuples(index=False)
             for r in grading.build_requests(
                 data.conversations[row.prompt_id], "" if pd.isna(row.text) else row.text,
                 data.template, temperature=temperature, max_tokens=max_tokens)
             if (row.model, row.prompt_id, r.criterion_index) in wanted]
    mean_tokens = sum(plans.tokens(c) for c in chars) / max(len(chars), 1)
    batch = llm.mode == "batch"
    table = ja.cost_rows(len(chars) * (data.repeats - 1), mean_tokens, data.judges,
                         profile_registry(llm.registry_file), batch=batch,
                         output_tokens=plans.JUDGE_OUTPUT_TOKENS)
    return Plan(table, batch, mean_tokens, data.repeats)


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
            note += (f" The judges are the provider simulator's, which flips a share "
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

def _undefined_note(reasons: Mapping[str, str], what: str) -> list[str]:
    """Under a table: each undefined value's reason (shown as — in the table)."""
    if not reasons:
        return []
    return [f"{vocabulary.MISSING} ({what} undefined): " + "; ".join(
        f"{vocabulary.term_label(k)}: {v}" for k, v in reasons.items()) + "."]


@dataclass(frozen=True)
class Flips:
    """Each judge's flip rate and the panel majority's, with their intervals and AC1 between
    repeats."""

    rates: list[consistency.FlipRate]
    ac1: dict[str, float | None]
    ac1_undefined: dict[str, str]
    level: float

    @property
    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{
            "judge": r.judge, "n_items": r.n_items, "n_flipped": r.n_flipped,
            "n_left_out": r.n_left_out, "flip_rate": r.rate, "low": r.low, "high": r.high,
            "repeat_ac1": self.ac1.get(r.judge)} for r in self.rates]).set_index("judge")

    def view(self) -> Table:
        why = {r.judge: r.undefined for r in self.rates if r.undefined}
        return Table(self.frame, level=self.level,
                     caption="Flip rate per judge and for the panel majority (the share of "
                     "items whose verdicts are not unanimous across the repeats)",
                     notes=[*_undefined_note(why, "flip rate or interval"),
                            *_undefined_note(self.ac1_undefined, "AC1")])


@base.needs
def flips(regraded: Regraded, *, n_resamples: int, seed: int, level: float) -> Flips:
    """Each judge's and the panel majority's flip rate with its percentile interval at
    ``level`` (``n_resamples`` resamples of the conversations, seeded ``seed``), and Gwet's AC1
    between the repeats (``consistency.flip_rates``, ``consistency.repeat_agreement``)."""
    judges = regraded.data.judges
    rates = consistency.flip_rates(regraded.repeats, judges, n_resamples=n_resamples,
                                   seed=seed, level=level)
    both = regraded.repeats
    if len(judges) > 1:
        both = pd.concat([both, consistency.panel_repeats(both, judges)], ignore_index=True)
    return Flips(rates, consistency.repeat_agreement(both),
                 consistency.repeat_agreement_undefined(both), level)


@dataclass(frozen=True)
class FlippingCriteria:
    """The flip rate by a label of the item: theme, rubric axis, Psych category."""

    by: dict[str, pd.DataFrame]

    @property
    def frame(self) -> pd.DataFrame:
        return pd.concat([f.rename(columns={label: "label"}).assign(by=label)
                          for label, f in self.by.items()], ignore_index=True)[
            ["by", "label", "judge", "n_items", "n_flipped", "rate"]]

    def view(self) -> Tables:
        tables = [Table(f[f["judge"] == consistency.POOLED].drop(columns="judge")
                        .rename(columns={"rate": "flip_rate"}), index=False,
                        caption=f"Flip rate by {vocabulary.label(label, None).lower()}, all "
                        "judges pooled (highest first)")
                  for label, f in self.by.items()]
        return Tables(tables, note="Which criteria flip: the items of all judges pooled, by "
                      "their label (`flips_by_label.csv` has each judge's too).")


@base.needs
def flipping_criteria(regraded: Regraded) -> FlippingCriteria:
    """The flip rate by the items' theme, rubric axis and Psych category
    (``consistency.flips_by``), the judges pooled and each judge."""
    return FlippingCriteria({label: consistency.flips_by(regraded.repeats, regraded.data.labels,
                                                         label)
                             for label in consistency.FLIP_LABELS})


# --- scores and ranking ------------------------------------------------------------------------

@dataclass(frozen=True)
class Scores:
    """Each candidate's panel score per repeat, its spread, and tau between the rankings."""

    spread: pd.DataFrame
    taus: dict[str, float | None]
    taus_undefined: dict[str, str]

    def view(self) -> Tables:
        frame = self.spread.drop(columns="undefined")
        why = {str(c): "; ".join(f"{k}: {v}" for k, v in r.items())
               for c, r in self.spread["undefined"].items() if r}
        taus = pd.DataFrame({"kendall_tau": self.taus}).rename_axis("repeat_pair")
        return Tables([
            Table(frame, value_kind="score", caption="Each candidate's panel score (Table 1's "
                  "clipped mean) with each repeat's verdicts, and its spread",
                  notes=_undefined_note(why, "score")),
            Table(taus, caption="Kendall's τ between the candidates' rankings of each pair of "
                  "repeats", notes=_undefined_note(self.taus_undefined, "τ"))])


@base.needs
def scores(regraded: Regraded) -> Scores:
    """Each repeat's scores (07's verdicts with the sample's replaced by that repeat's:
    ``consistency.repeat_scores``), each candidate's panel score per repeat and its spread
    (``consistency.score_spread``), and Kendall's tau between the repeats' rankings."""
    s = consistency.repeat_scores(regraded.data.verdicts, regraded.repeats,
                                  regraded.data.conversations)
    return Scores(consistency.score_spread(s), consistency.ranking_taus(s),
                  consistency.ranking_tau_undefined(s))


# --- the judges' refusals ----------------------------------------------------------------------

@dataclass(frozen=True)
class Refusals:
    """The judges' refused or filtered verdicts per judge and Psych category, in 07's grading
    and in the re-gradings."""

    grading: pd.DataFrame
    repeats: pd.DataFrame

    @property
    def frame(self) -> pd.DataFrame:
        return pd.concat([self.grading.assign(where="grading"),
                          self.repeats.assign(where="repeats")], ignore_index=True)

    def view(self) -> Tables:
        shown = [Table(f.set_index(["judge", "category"]), caption=caption)
                 for f, caption in ((self.grading, "In this run's grading (07)"),
                                    (self.repeats, "In the re-gradings"))]
        return Tables(shown, note="Verdicts the judge's provider refused or filtered, apart "
                      "from those it answered without a usable verdict and from failed calls; "
                      "never read as not met (the candidates' refusals are chapter 10's).")


@base.needs
def refusals(regraded: Regraded) -> Refusals:
    """Per judge and Psych category (suicidality first): verdicts refused or filtered by the
    judge's provider, answered without a verdict, and graded (``consistency.judge_refusals``),
    in 07's verdicts of the first replies and in the re-gradings."""
    data = regraded.data
    v = data.verdicts[data.verdicts["judge"].isin(data.judges)]
    if "reason" not in v.columns:
        v = v.assign(reason=None)
    return Refusals(consistency.judge_refusals(v, data.categories),
                    consistency.judge_refusals(regraded.repeats[regraded.repeats["repeat"] > 0],
                                               data.categories))


# --- metrics, outputs, findings ----------------------------------------------------------------

def _num(value: float | None) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _flip_metrics(f: Flips) -> dict[str, FlipRate]:
    return {r.judge: FlipRate(
        n_items=r.n_items, n_flipped=r.n_flipped, n_conversations=r.n_conversations,
        n_left_out=r.n_left_out, rate=r.rate, low=r.low, high=r.high,
        repeat_ac1=f.ac1.get(r.judge), self_consistent=consistency.self_consistent(r),
        undefined={k: v for k, v in (("rate", r.undefined if r.rate is None else None),
                                     ("interval", r.undefined),
                                     ("repeat_ac1", f.ac1_undefined.get(r.judge))) if v}
        or None) for r in f.rates}


def _spread_metrics(s: Scores) -> dict[str, ScoreSpread]:
    out = {}
    for cand, row in s.spread.iterrows():
        columns = [c for c in s.spread.columns if c.startswith("repeat_")]
        out[str(cand)] = ScoreSpread(
            by_repeat={c.removeprefix("repeat_"): _num(row[c]) for c in columns},
            min=_num(row["min"]), max=_num(row["max"]), spread=_num(row["spread"]),
            undefined=row["undefined"] or None)
    return out


def _refusal_metrics(r: Refusals) -> dict[str, JudgeRefusals]:
    def sums(frame: pd.DataFrame, judge: str) -> pd.Series:
        return frame[frame["judge"] == judge][["judge_refused", "no_verdict", "verdicts"]].sum()

    out = {}
    for judge in dict.fromkeys([*r.grading["judge"], *r.repeats["judge"]]):
        g, k = sums(r.grading, judge), sums(r.repeats, judge)
        out[str(judge)] = JudgeRefusals(
            grading_judge_refused=int(g["judge_refused"]), grading_no_verdict=int(g["no_verdict"]),
            grading_verdicts=int(g["verdicts"]), repeats_judge_refused=int(k["judge_refused"]),
            repeats_no_verdict=int(k["no_verdict"]), repeats_verdicts=int(k["verdicts"]))
    return out


def metrics(data: Inputs, regraded: Regraded | None, f: Flips | None, s: Scores | None,
            r: Refusals | None, *, repeats: int, repeat_sample: int) -> SelfConsistencyMetrics:
    """16's metrics: without re-gradings, the mode and the repeats asked for; live, the sample,
    what re-grading it did and cost, each flip rate (and the panel's, and whether it flips
    less than every judge), each candidate's score spread, the ranking taus and the judges'
    refusals."""
    if regraded is None or f is None or s is None or r is None:
        return SelfConsistencyMetrics(mode=data.mode, repeats=repeats,
                                      repeat_sample=repeat_sample)
    sm = regraded.data
    spreads = _spread_metrics(s)
    values = [x.spread for x in spreads.values() if x.spread is not None]
    return SelfConsistencyMetrics(
        mode=data.mode, repeats=repeats, repeat_sample=repeat_sample, n_items=len(sm.items),
        n_conversations=sm.n_conversations, judges=sm.judges,
        simulator_flip_rate=regraded.flip_rate, n_calls=regraded.n_calls,
        spend_usd=regraded.spend_usd, spend_earlier_attempts_usd=regraded.paid_earlier,
        flip_rates=_flip_metrics(f), panel_flips_less=consistency.panel_flips_less(f.rates),
        score_spread=spreads, largest_spread=max(values) if values else None,
        ranking_taus=s.taus, ranking_taus_undefined=s.taus_undefined or None,
        ranking_stable=consistency.ranking_stable(s.taus),
        judge_refusals=_refusal_metrics(r), ci_level=f.level)


def write(run: StageRun, m: SelfConsistencyMetrics, regraded: Regraded | None,
          f: Flips | None, c: FlippingCriteria | None, s: Scores | None,
          r: Refusals | None) -> Written:
    """Live: ``repeats.csv``, ``flip_rates.csv``, ``flips_by_label.csv``,
    ``score_spread.csv``, ``judge_refusals.csv``; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    if regraded is not None:
        tables[REPEATS_FILE] = regraded.repeats
    if f is not None:
        tables[FLIP_RATES_FILE] = f.frame
    if c is not None:
        tables[FLIPS_BY_FILE] = c.frame
    if s is not None:
        tables[SPREAD_FILE] = s.spread.drop(columns="undefined")
    if r is not None:
        tables[REFUSALS_FILE] = r.frame
    return base.write(run, m, tables=tables)


def _judge_sentence(name: str, x: FlipRate, level: float) -> str:
    who = ("The panel majority" if name == consistency.PANEL
           else md_text(study.display_name(name)))
    if x.rate is None:
        return f"{who}'s flip rate is undefined ({'; '.join((x.undefined or {}).values())})."
    out = f"{who} flipped on {x.n_flipped:,} of {x.n_items:,} items ({x.rate:.1%}"
    if x.low is not None and x.high is not None:
        out += f", {vocabulary.level_text(level)} interval {x.low:.1%} to {x.high:.1%}"
    verdict = {True: f": it agrees with itself (below {study.SELF_CONSISTENT_FLIP_RATE:.0%})",
               False: f": it does not agree with itself (its interval reaches "
                      f"{study.SELF_CONSISTENT_FLIP_RATE:.0%})",
               None: ""}[x.self_consistent]
    return out + ")" + verdict + "."


def _ranking_sentence(m: SelfConsistencyMetrics) -> str:
    taus = [v for v in (m.ranking_taus or {}).values() if v is not None]
    if m.ranking_stable is None:
        why = "; ".join((m.ranking_taus_undefined or {}).values()) or "no pair of repeats"
        return f"Whether re-grading keeps the ranking is undefined ({why})."
    kept = "keeps" if m.ranking_stable else "does not keep"
    return (f"Re-grading {kept} the candidates' ranking: Kendall's τ between repeats from "
            f"{min(taus):.3f} to {max(taus):.3f} (the bar is {study.RANKING_STABLE_TAU}).")


def findings(m: SelfConsistencyMetrics) -> Findings | None:
    """The sentences of "What we found", from 16's metrics; ``None`` without re-gradings (the
    chapter said why above). The sample and its repeats; each judge's and the panel majority's
    flip rate against ``study.SELF_CONSISTENT_FLIP_RATE``; whether the panel flips less than
    every judge; the largest score spread; the ranking against ``study.RANKING_STABLE_TAU``; the
    judges' own refusals."""
    if m.flip_rates is None:
        return None
    out = [f"{count(m.n_items or 0, 'item')} of {count(m.n_conversations or 0, 'conversation')}"
           f" graded {m.repeats} times by each judge (07's grading and "
           f"{count((m.repeats or 1) - 1, 'repeat')})."]
    if m.simulator_flip_rate is not None:
        out.append(f"The judges are the simulator's, set to flip {m.simulator_flip_rate:.1%} of "
                   "grader prompts: the rates measure that setting, not a model.")
    out += [_judge_sentence(name, x, m.ci_level or study.CI_LEVEL)
            for name, x in m.flip_rates.items()]
    if m.panel_flips_less is not None:
        out.append("The panel majority flips less than every judge alone." if m.panel_flips_less
                   else "The panel majority does not flip less than every judge alone.")
    if m.largest_spread is not None:
        out.append(f"Across the repeats, a candidate's panel score moves by at most "
                   f"{m.largest_spread:.3f}.")
    out += [_ranking_sentence(m), _refusal_sentence(m)]
    return Findings(out)


def _refusal_sentence(m: SelfConsistencyMetrics) -> str:
    refused = {j: x.repeats_judge_refused + x.grading_judge_refused
               for j, x in (m.judge_refusals or {}).items()}
    if not any(refused.values()):
        return "No judge's provider refused or filtered a verdict."
    return "The judges' providers refused or filtered " + ", ".join(
        f"{count(n, 'verdict')} of {md_text(study.display_name(j))}"
        for j, n in refused.items() if n) + " (never read as not met)."
