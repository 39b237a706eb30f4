"""Chapter 11, harness validation: the GPT-4.1 HealthBench-Hard run, summarised as simple-evals
does.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`released_run`
(the resolver: the released per-conversation scores, ``harness_scores``, what replay
summarises and what a live re-run is compared with; its per-criterion grades on the
conversations whose rubric the corpus holds; its replies, ``harness_results``; and in live
mode the Hard conversations to re-run), :func:`live_rerun` (live: the candidate answers each
selected conversation and the judge grades every criterion with the reference grader, both at
the reference settings, through the engine), :func:`summary` (n scored, clipped mean,
reference bootstrap standard deviation, of the re-run when there is one, else of the released
run), :func:`published_difference` (against the published figure, when the profile gives one),
:func:`released_comparison` (the re-run conversation by conversation against the released
run), :func:`released_breakdown` (in either mode, the released run by rubric axis and theme,
from its per-criterion grades), :func:`released_length` (in either mode, the released run's
length-adjusted score and reply lengths, over all its replies), :func:`metrics`, :func:`write`
and :func:`findings`.

Live writes ``scores.csv`` and ``live_vs_released.csv``. ``candidate`` and ``judge`` left
``None`` are the study's (``study.HARNESS_MODEL``); the models used are reported under
``settings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, generation, grading, harness, length, panel
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    HarnessMetrics,
    HarnessSettings,
    ReleasedBreakdown,
    ReleasedLength,
)
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Facts, Table, Tables, facts, level_text
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.HARNESS
HARNESS_SCORES = "harness_scores"
"""The registry artifact of the released run's per-conversation scores."""
HARNESS_RESULTS = "harness_results"
"""The registry artifact of the released run's replies (``results.jsonl``)."""
COMPARISON_FILE = "live_vs_released.csv"
BREAKDOWN_FILE = "released_by_tag.csv"
LENGTH_VARIANT = "hard"
"""The length penalty's HealthBench variant: the harness run is HealthBench Hard."""
start = base.starter(STAGE)

RELEASED_SETTINGS = HarnessSettings(candidate=study.HARNESS_MODEL, judge=study.HARNESS_MODEL,
                                    temperature=study.REFERENCE_TEMPERATURE,
                                    max_tokens=study.GRADER_MAX_TOKENS)
"""The released run's models and decoding: GPT-4.1 answering and grading at the reference
settings."""


def settings(*, candidate: str | None, judge: str | None, temperature: float,
             max_tokens: int) -> HarnessSettings:
    """The models and decoding of a live re-run, as ``metrics.json`` reports them under
    ``settings``: a model left ``None`` is the study's (``study.HARNESS_MODEL``)."""
    return HarnessSettings(candidate=candidate or study.HARNESS_MODEL,
                           judge=judge or study.HARNESS_MODEL, temperature=temperature,
                           max_tokens=max_tokens)


def _settings_text(s: HarnessSettings) -> str:
    return (f"{md_text(study.display_name(s.candidate))} answering, "
            f"{md_text(study.display_name(s.judge))} grading, temperature "
            f"{s.temperature:g}, {s.max_tokens:,} tokens")


# --- the run -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rerun:
    """Live: the Hard conversations of this run's corpus to answer and grade again."""

    selected: list[Conversation]
    conversations: dict[str, Conversation]
    """This run's corpus by prompt id (the rubrics the scores are computed from)."""
    template: str


@dataclass(frozen=True)
class ReleasedRun:
    """The study's released GPT-4.1 HealthBench-Hard run: one score per conversation, its
    per-criterion grades where this run's corpus holds the rubric, its replies; in live mode the
    conversations to run again."""

    mode: Literal["replay", "live"]
    lines: list[harness.HarnessLine]
    verdicts: pd.DataFrame
    """The released per-criterion grades on conversations whose rubric the corpus holds."""
    conversations: dict[str, Conversation]
    replies: list[harness.HarnessReply]
    rerun: Rerun | None = None

    @property
    def graded(self) -> ReleasedRun | None:
        """This run when the corpus holds the rubric of any of its conversations (what the
        breakdown by tag needs)."""
        return None if self.verdicts.empty else self

    def view(self) -> Note:
        scored = sum(ln.score is not None for ln in self.lines)
        rubric = ("" if not self.verdicts.empty else " This run's corpus holds the rubric of "
                  "none of its conversations, so its grades cannot be broken down by tag.")
        live = ("" if self.rerun is None else " In this live run it is made again through the "
                f"engine on {count(len(self.rerun.selected), 'Hard conversation')} of the "
                "corpus and compared with the release conversation by conversation.")
        return Note(f"The released GPT-4.1 run (`{HARNESS_SCORES}`): {len(self.lines):,} "
                    f"HealthBench-Hard conversations, {scored:,} scored, made at the reference "
                    f"settings ({_settings_text(RELEASED_SETTINGS)}).{rubric}{live}")


@base.resolver
def released_run(run: StageRun, *, n_conversations: int | None) -> ReleasedRun:
    """The released per-conversation scores and replies, validated line by line, and its
    per-criterion grades on the conversations whose rubric this run's corpus holds
    (``harness.released_verdicts``; 193 of the 1,000 with the offline corpus); live, the Hard
    conversations this run's corpus holds (those of the released run, by sorted id, the first
    ``n_conversations``) and the grader template."""
    lines = harness.read_harness_scores(run.stage.fetch(HARNESS_SCORES))
    by_id = {c.prompt_id: c for c in corpus.load_recorded(
        run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))}
    verdicts = harness.released_verdicts(lines, by_id)
    replies = harness.read_harness_replies(run.stage.fetch(HARNESS_RESULTS))
    if run.mode != graph.LIVE:
        return ReleasedRun(graph.REPLAY, lines, verdicts, by_id, replies)
    hard = {line.prompt_id for line in lines}
    selected = [by_id[p] for p in sorted(hard & set(by_id))][:n_conversations]
    template = grading.load_template(run.stage.fetch(grading.TEMPLATE_ARTIFACT))
    return ReleasedRun(graph.LIVE, lines, verdicts, by_id, replies,
                       Rerun(selected, by_id, template))


@dataclass(frozen=True)
class LiveRerun:
    """Live: the harness run made again through the engine."""

    settings: HarnessSettings
    scores: pd.DataFrame
    """One row per conversation (``grading.scores_from_verdicts`` of the one judge)."""
    plan: pd.DataFrame
    """The engine's plan of the generation (``generation.plan_table``), made before any call."""

    def view(self) -> Tables:
        n = len(self.scores)
        unscored = int(self.scores.score.isna().sum())
        note = (f"{count(n, 'Hard conversation')} of this run's corpus, "
                f"{_settings_text(self.settings)}; {unscored} left unscored.")
        return Tables([Table(self.plan, caption="Cost plan of the generation (estimated "
                             "before any call was sent)")], note=note)


@base.needs
def live_rerun(rerun: Rerun, run: StageRun, *, candidate: str | None, judge: str | None,
               temperature: float, max_tokens: int, seed: int) -> LiveRerun:
    """The candidate (``None``: the study's) answers the selected Hard conversations and the
    judge (``None``: the study's) grades every criterion with the reference grader, both at
    ``temperature`` and ``max_tokens`` (the reference's by default), through the run's engine
    (one reply each: ``seed`` is where further samples' seeds would start)."""
    used = settings(candidate=candidate, judge=judge, temperature=temperature,
                    max_tokens=max_tokens)
    requests = generation.generation_requests(rerun.selected, [used.candidate],
                                              temperature=temperature, max_tokens=max_tokens,
                                              tag=harness.GENERATE_TAG, seed=seed)
    with run.open_engine(conversations=list(rerun.conversations.values())) as engine:
        plan = engine.plan(requests, mode=run.llm.mode)
        responses = generation.responses_table(engine.run(requests, mode=run.llm.mode),
                                               seed=seed)
        graded = panel.grade(engine, responses, rerun.conversations, [used.judge],
                             rerun.template, temperature=temperature, max_tokens=max_tokens,
                             mode=run.llm.mode, prompt_caching=run.llm.prompt_caching,
                             tag=harness.GRADE_TAG)
    return LiveRerun(used, grading.scores_from_verdicts(graded.verdicts, rerun.conversations),
                     generation.plan_table(plan))


# --- the summary and the comparisons -----------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """The run summarised as simple-evals reports a run (``harness.summarize``)."""

    mode: Literal["replay", "live"]
    result: harness.HarnessReplay
    settings: HarnessSettings
    published_source: str
    which: str
    """The run summarised, as a sentence names it."""

    def view(self) -> Facts:
        r, which = self.result, self.which
        return facts({"n_lines": r.n_lines, "n_scored": r.n_scored,
                      "clipped_mean": r.clipped_mean, "bootstrap_std": r.bootstrap_std},
                     caption=f"{which}, summarised as simple-evals reports a run "
                     f"({_settings_text(self.settings).replace('`', '')})", level=None)


def summary(released: ReleasedRun, rerun: LiveRerun | None, *, published: float | None,
            published_source: str, n_resamples: int, seed: int) -> Summary:
    """n scored, the clipped mean and the reference bootstrap standard deviation
    (``n_resamples`` resamples from ``seed``) of the live re-run when there is one, else of the
    released run; with the difference from the ``published`` figure when the profile gives
    one. Unscored conversations are not counted."""
    if rerun is not None:
        return Summary(graph.LIVE, harness.summarize(
            rerun.scores["score"].tolist(), published=published, seed=seed,
            n_resamples=n_resamples), rerun.settings, published_source, "This live run")
    return Summary(released.mode, harness.replay(released.lines, published=published,
                                                 seed=seed, n_resamples=n_resamples),
                   RELEASED_SETTINGS, published_source, "The released GPT-4.1 run")


@dataclass(frozen=True)
class Difference:
    """The clipped mean against the published figure (none when the profile sets none)."""

    summary: Summary

    def view(self) -> Facts | Note:
        r = self.summary.result
        if r.published is None or r.delta is None:
            return Note("No published figure is set in this profile (`harness_validation."
                        "published`), so no difference is reported.")
        return facts({"published": r.published,
                      "source": self.summary.published_source or "source not given",
                      "clipped_mean": r.clipped_mean, "difference": r.delta,
                      "bootstrap_std": r.bootstrap_std,
                      "difference_in_std": abs(r.delta) / r.bootstrap_std
                      if r.bootstrap_std else None}, caption="Against the published figure",
                     level=None)


def published_difference(s: Summary) -> Difference:
    """The clipped mean against the published figure: the difference, and how many bootstrap
    standard deviations it is (when the standard deviation is not zero)."""
    return Difference(s)


@dataclass(frozen=True)
class Comparison:
    """Live: the live scores beside the released run's, on the conversations both scored
    (``harness.compare_with_released``)."""

    frame: pd.DataFrame

    def view(self) -> Facts | Note:
        f = self.frame
        if f.empty:
            return Note("None of the conversations scored live was scored by the released "
                        "run, so the two are not compared.")
        return facts({"conversations": len(f), "mean_live": f.score.mean(),
                      "mean_released": f.released.mean(),
                      "mean_difference": (f.score - f.released).mean()},
                     caption=f"Live scores beside the released run's (per conversation in "
                     f"{COMPARISON_FILE})", level=None)


@base.needs
def released_comparison(rerun: LiveRerun, released: ReleasedRun) -> Comparison:
    """The re-run's per-conversation scores beside the released run's, where both scored the
    conversation."""
    return Comparison(harness.compare_with_released(rerun.scores, released.lines))


# --- where the released run fails, and its length --------------------------------------------

@dataclass(frozen=True)
class Breakdown:
    """The released run by rubric axis and theme (``breakdowns``: simple-evals' per-tag
    semantics, the study's bootstrap)."""

    n_lines: int
    n_with_rubric: int
    summary: pd.DataFrame
    """``breakdowns.summarise`` of the harness model's tag scores."""
    level: float
    """The level of its intervals."""

    def frame(self, prefix: str) -> pd.DataFrame:
        rows = self.summary[self.summary["tag"].str.startswith(prefix)]
        out = rows.set_index("tag")[["n", "clipped_mean", "ci_low", "ci_high", "bootstrap_std"]]
        return out.rename_axis(prefix.rstrip(":"))

    def view(self) -> Tables:
        which = (f"all {self.n_lines:,}" if self.n_with_rubric == self.n_lines else
                 f"{self.n_with_rubric:,} of the {self.n_lines:,}")
        note = (f"The released GPT-4.1 run's per-criterion grades on {which} HealthBench-Hard "
                "conversations, those whose rubrics this run's corpus holds; each tag's clipped "
                f"mean over the conversations that have a score for it (n), with a "
                f"{level_text(self.level)} bootstrap interval and the reference's bootstrap "
                "std.")
        return Tables([Table(self.frame(breakdowns.AXIS), caption="GPT-4.1 on HealthBench Hard "
                             "by rubric axis", level=self.level),
                       Table(self.frame(breakdowns.THEME), caption="GPT-4.1 on HealthBench Hard "
                             "by theme", level=self.level)], note=note)


@base.needs
def released_breakdown(released: ReleasedRun, *, n_resamples: int, seed: int,
                       level: float) -> Breakdown:
    """The released run's score by rubric axis and by theme, from its per-criterion grades and
    the rubrics of this run's corpus (``breakdowns.tag_scores``), with ``n_resamples`` seeded
    bootstrap intervals at ``level``: on the conversations whose rubric the corpus holds (193
    of the 1,000 with the offline corpus, all of them with the full one;
    ``ReleasedRun.graded``)."""
    tags = breakdowns.tag_scores(released.verdicts, released.conversations,
                                 keep=lambda t: t.startswith((breakdowns.AXIS,
                                                              breakdowns.THEME))
                                 ).rename(columns={"judge": "scorer"})
    return Breakdown(len(released.lines), int(released.verdicts["prompt_id"].nunique()),
                     breakdowns.summarise(tags, n_resamples=n_resamples, seed=seed,
                                          level=level), level)


@dataclass(frozen=True)
class Lengths:
    """The released run's reply lengths and its length-adjusted score
    (``harness.length_summary``)."""

    summary: ReleasedLength

    def view(self) -> Facts:
        s, c = self.summary.model_dump(), self.summary.chars.model_dump()
        return facts({
            "replies_scored": s["n"], "chars_mean": c["mean"], "chars_min": c["min"],
            "chars_p25": c["p25"], "chars_median": c["median"], "chars_p75": c["p75"],
            "chars_max": c["max"], "raw_mean": s["clipped_mean"],
            "length_adjusted_mean": s["adjusted_mean"]}, caption=(
            f"The released GPT-4.1 run's replies: lengths and the length-adjusted score "
            f"({length.VARIANT_NAMES[s['variant']]} penalty, {s['penalty']:g} per "
            f"{length.PER_CHARS} "
            f"characters beyond {length.CENTER:,}, applied per reply before the clipped "
            "mean)"), level=None)


def released_length(released: ReleasedRun) -> Lengths:
    """The released run's length-adjusted HealthBench-Hard score beside its raw one, over all
    its scored replies (only scores and reply texts are needed, so no rubric), with the
    distribution of reply lengths (characters, as the reference counts them)."""
    return Lengths(harness.length_summary(released.replies, LENGTH_VARIANT))


# --- metrics, outputs, findings --------------------------------------------------------------

def metrics(s: Summary, comparison: Comparison | None, breakdown: Breakdown | None,
            lengths: Lengths) -> HarnessMetrics:
    """11's metrics: the summary, the published figure's source and the settings; with a
    re-run, also how many conversations the released run scored too and the mean difference on
    them; in either mode the released run by tag (where the corpus holds rubrics) and its
    length."""
    extra: dict[str, Any] = ({} if comparison is None
                             else dict(harness.comparison_metrics(comparison.frame)))
    if breakdown is not None:
        extra["ci_level"] = breakdown.level
        extra["released_breakdown"] = ReleasedBreakdown(
            n_lines=breakdown.n_lines, n_with_rubric=breakdown.n_with_rubric,
            by_tag={str(row["tag"]): breakdowns.tag_score(row)
                    for row in breakdown.summary.to_dict(orient="records")})
    return HarnessMetrics(mode=s.mode, **s.result.metrics(),
                          published_source=s.published_source, settings=s.settings,
                          released_length=lengths.summary, **extra)


def write(run: StageRun, m: HarnessMetrics, rerun: LiveRerun | None,
          comparison: Comparison | None, breakdown: Breakdown | None) -> Written:
    """Live: ``scores.csv`` and ``live_vs_released.csv``; either mode, where the corpus holds
    rubrics, ``released_by_tag.csv``; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    if rerun is not None:
        tables[graph.SCORES_TABLE] = rerun.scores
    if comparison is not None:
        tables[COMPARISON_FILE] = comparison.frame
    if breakdown is not None:
        tables[BREAKDOWN_FILE] = breakdown.summary
    return base.write(run, m, tables=tables)


def findings(m: HarnessMetrics, *, min_n: int = study.SLICE_MIN_N) -> Findings:
    """The sentences of "What we found", from 11's metrics.

    The clipped mean and its bootstrap standard deviation always; the comparison with the
    released run only when a live run has conversations in common with it; the difference
    from the published figure, and how many bootstrap standard deviations it is, only when
    the profile gives a published figure (the ratio only when the standard deviation is not
    zero); then the released run by axis and its length (:func:`released_findings`).
    """
    which = "This live run" if m.mode == graph.LIVE else "The released GPT-4.1 run"
    out = [f"{which} scored {m.n_scored:,} HealthBench-Hard conversations with a clipped "
           f"mean of **{m.clipped_mean:.4f}** (bootstrap std {m.bootstrap_std:.4f})."]
    if m.n_common_with_released:
        out.append(f"On the {m.n_common_with_released} conversations the released run also "
                   "scored, the per-conversation scores differ by "
                   f"{m.mean_difference_vs_released:+.4f} on average (live minus released).")
    elif m.n_common_with_released is not None:
        out.append("None of the conversations scored live was scored by the released run, so "
                   "the two are not compared.")
    if m.published is None:
        out.append("No published figure is set in this profile (`harness_validation."
                   "published`), so no difference is reported.")
        return Findings(out + released_findings(m, min_n=min_n))
    assert m.delta is not None  # set whenever a published figure is
    source = md_text(m.published_source or "source not given")
    sds = (f", {abs(m.delta) / m.bootstrap_std:.1f} bootstrap standard deviations"
           if m.bootstrap_std else "")
    out.append(f"The published figure is {m.published:.4f} ({source}): a difference of "
               f"{m.delta:+.4f}{sds}.")
    return Findings(out + released_findings(m, min_n=min_n))


def released_findings(m: HarnessMetrics, *, min_n: int = study.SLICE_MIN_N) -> list[str]:
    """The released run by axis (its lowest and highest among the axes with at least ``min_n``
    conversations, saying on how many of its conversations) and its length-adjusted score."""
    out = []
    b = m.released_breakdown
    axes = {t: s for t, s in (b.by_tag.items() if b else ()) if t.startswith(breakdowns.AXIS)
            and s.n >= min_n}
    if b is not None and len(axes) > 1:
        low = min(axes, key=lambda t: (axes[t].clipped_mean, t))
        high = max(axes, key=lambda t: (axes[t].clipped_mean, t))
        which = ("all" if b.n_with_rubric == b.n_lines else f"the {b.n_with_rubric:,} of")
        out.append(f"By rubric axis, on {which} its {b.n_lines:,} conversations whose rubrics "
                   f"this run's corpus holds, the released GPT-4.1 run scores lowest on "
                   f"{breakdowns.label(low)} ({axes[low].clipped_mean:.3f}, n = {axes[low].n}) "
                   f"and highest on {breakdowns.label(high)} ({axes[high].clipped_mean:.3f}, "
                   f"n = {axes[high].n}).")
    lm = m.released_length
    if lm is not None:
        out.append(f"Over its {lm.n:,} scored replies (median {lm.chars.median:,.0f} "
                   f"characters), its length-adjusted score is {lm.adjusted_mean:.4f} against "
                   f"a raw {lm.clipped_mean:.4f} ({length.VARIANT_NAMES[lm.variant]} penalty, "
                   f"{lm.penalty:g} per {length.PER_CHARS} characters beyond "
                   f"{length.CENTER:,}).")
    return out
