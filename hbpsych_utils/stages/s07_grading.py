"""Chapter 07, grading with the judge panel, or the released run's grading logs.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (the
resolver: live, 06's replies, every sample, and the corpus's rubrics, to be graded by the
judges; paper, the released grading logs, since the verdicts are not released),
:func:`grader_template` (the HealthBench grader template, fetched and checked by sha256, in
either mode), :func:`panel_verdicts` (every gradable reply graded by every judge through the
engine, :func:`panel.grade`: batch APIs with synchronous fallback, pattern recovery, bounded
re-asks, exclusions), :func:`census` (per judge, criteria graded, verdicts obtained,
recovered, re-asked, excluded, failed calls), :func:`conversation_scores` (each judge's score
of each (candidate, conversation), read by 08-10), :func:`spend` and :func:`released_spend`
(what grading paid per judge), :func:`metrics`, :func:`write` and :func:`findings`.

Live writes ``verdicts.csv`` (read back with :func:`panel.read_verdicts`), ``scores.csv`` and
``census.csv``, and when 06 sampled several replies per conversation the further samples'
verdicts and scores in ``verdicts_samples.csv`` and ``scores_samples.csv`` (with a ``sample``
column; the first reply's stay where a one-sample run puts them); paper writes
``spend_by_judge.csv`` and ``anomalies.csv``. ``judges`` left ``None`` is the study's panel
(``study.JUDGE_PANEL``); the judges used are reported in the metrics either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core import sources
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count, were
from hbpsych_utils.evaluation import generation, grading, panel, refusals, runlog
from hbpsych_utils.evaluation.refusals import ErrorEvent
from hbpsych_utils.evaluation.score_sources import EvaluationMode
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import (
    GradingLiveMetrics,
    GradingMetrics,
    GradingPaperMetrics,
    JudgeCensus,
    JudgeSpend,
)
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import (
    Facts,
    Table,
    Tables,
    facts,
    model_names,
    panel_name,
    panel_phrase,
)
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.GRADING
start = base.starter(STAGE)

CENSUS_FILE = "census.csv"
SPEND_FILE = "spend_by_judge.csv"
ANOMALIES_FILE = "anomalies.csv"


# --- what is graded ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Replies:
    """Live: 06's replies (every sample) to grade, the rubrics, and the judges."""

    responses: pd.DataFrame
    conversations: dict[str, Conversation]
    """This run's corpus by prompt id (the rubrics the scores are computed from)."""
    judges: list[str]

    def view(self) -> Note:
        n_cand = self.responses["model"].nunique()
        return Note(f"{count(len(self.responses), 'reply', 'replies')} of "
                    f"{count(n_cand, 'candidate')} "
                    f"({md_text(model_names(sorted(self.responses['model'].unique())))}) to "
                    f"grade, by the {md_text(panel_phrase(self.judges))}.")


@dataclass(frozen=True)
class ReleasedGrading:
    """Paper: the released run's spend ledger and anomaly log (the verdicts are not
    released)."""

    ledger: pd.DataFrame
    events: list[ErrorEvent]

    @property
    def spend_by_judge(self) -> pd.Series:
        """USD per judge charged for grading, largest first."""
        return runlog.spend_by(self.ledger, runlog.GRADE).rename_axis("judge")

    @property
    def anomalies(self) -> pd.DataFrame:
        """Anomalies logged while grading, per judge and kind."""
        return runlog.anomalies(self.events, runlog.GRADE)

    @property
    def no_verdict(self) -> pd.DataFrame:
        """The verdicts never obtained (:func:`no_verdict_events`)."""
        return no_verdict_events(self.events)

    def view(self) -> Tables:
        notes = []
        tables = []
        if len(self.anomalies):
            tables.append(Table(self.anomalies, caption="Anomalies logged while grading"))
        else:
            notes.append("The grading log records no anomalies.")
        if len(self.no_verdict):
            tables.append(Table(self.no_verdict, caption="Verdicts never obtained",
                                index=False))
        else:
            notes.append("Every verdict was eventually obtained.")
        return Tables(tables, note=" ".join(notes))


@dataclass(frozen=True)
class Inputs:
    """What the chapter grades (live) or reads (paper)."""

    mode: EvaluationMode
    replies: Replies | None
    released: ReleasedGrading | None

    def view(self) -> Note:
        if self.replies is not None:
            return self.replies.view()
        return Note("The verdicts are not released, so this chapter reads the released run's "
                    "grading logs: its spend ledger and anomaly log.")


@base.resolver
def inputs(run: StageRun, *, judges: list[str] | None) -> Inputs:
    """Live: 06's replies (every sample) and this run's corpus, to be graded by ``judges``
    (``None``: the study's panel); paper: the released spend ledger and anomaly log."""
    if run.mode != graph.LIVE:
        return Inputs(graph.PAPER, None, ReleasedGrading(
            runlog.read_spend(run.stage.fetch("run_spend")),
            refusals.read_error_log(run.stage.fetch("run_errors"))))
    responses = generation.read_responses(run.stage.upstream(graph.GENERATION, graph.RESPONSES))
    more = run.stage.upstream_optional(graph.GENERATION, graph.RESPONSE_SAMPLES)
    responses = generation.with_samples(
        responses, None if more is None else generation.read_sample_responses(more))
    by_id = {c.prompt_id: c for c in corpus.load_recorded(
        run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))}
    panel_judges = list(study.JUDGE_PANEL) if judges is None else list(judges)
    return Inputs(graph.LIVE, Replies(responses, by_id, panel_judges), None)


# --- the grader --------------------------------------------------------------------------------

@dataclass(frozen=True)
class GraderTemplate:
    """The reference grader template, verified against the registry's sha256."""

    text: str
    sha256: str

    def view(self) -> Table:
        checked = pd.DataFrame({"characters": [len(self.text)], "sha256": [self.sha256]},
                               index=pd.Index([grading.TEMPLATE_ARTIFACT], name="artifact"))
        return Table(checked, caption="Grader template (sha256-verified)")


def grader_template(run: StageRun) -> GraderTemplate:
    """The HealthBench grader template, fetched and checked byte for byte against the
    registry's sha256 (``grading.load_template``); its hash is reported in either mode."""
    path = run.stage.fetch(grading.TEMPLATE_ARTIFACT)
    return GraderTemplate(grading.load_template(path), sources.sha256_file(path))


# --- the panel's verdicts ----------------------------------------------------------------------

@dataclass(frozen=True)
class PanelVerdicts:
    """Live: every (judge, candidate, conversation, criterion) verdict of this run."""

    judges: list[str]
    graded: panel.PanelRun
    conversations: dict[str, Conversation]
    """This run's corpus by prompt id (the rubrics the scores are computed from)."""
    ledger_cost: float
    """USD everything the run's store has paid for (06 and 07)."""
    paid_earlier: float
    """USD earlier attempts of this grading paid for answers this one reused from the store."""
    temperature: float
    response_schema: bool
    prompt_caching: bool

    def view(self) -> Facts:
        c = self.graded.counts()
        rows = {"n_criteria_graded": c["n_criteria_graded"], "n_recovered": c["n_recovered"],
                "n_reasked": c["n_reasked"], "n_excluded_verdicts": c["n_excluded"],
                "n_replies_not_graded": c["n_replies_not_graded"]}
        attempts = {f"Engine calls, attempt {k}": n for k, n in c["calls_by_attempt"].items()}
        return facts(rows | attempts, caption=f"The verdicts of the {panel_phrase(self.judges)}",
                     kinds=dict.fromkeys(attempts, "count"), level=None)


@base.needs
def panel_verdicts(replies: Replies, run: StageRun, template: GraderTemplate, *,
                   temperature: float, max_tokens: int, max_reasks: int,
                   response_schema: bool) -> PanelVerdicts:
    """Every gradable reply graded by every judge through the run's engine at ``temperature``
    and ``max_tokens`` (``panel.grade``: the configured mode, synchronous re-asks at most
    ``max_reasks`` times, a verdict still missing excluded and never counted as false; the
    verdict JSON schema sent with ``response_schema``); a refusal is graded as returned, a reply
    whose generation failed is not graded."""
    with run.open_engine(conversations=list(replies.conversations.values())) as engine:
        graded = panel.grade(engine, replies.responses, replies.conversations, replies.judges,
                             template.text, temperature=temperature, max_tokens=max_tokens,
                             max_reasks=max_reasks, mode=run.llm.mode,
                             response_schema=grading.VERDICT_SCHEMA if response_schema
                             else None, prompt_caching=run.llm.prompt_caching)
        ledger = engine.spend()  # everything this run's store has paid for (06 and 07)
        earlier = engine.paid_earlier(graded.keys, graded.run_ids)
    return PanelVerdicts(replies.judges, graded, replies.conversations, ledger["cost"], earlier,
                         temperature, response_schema, run.llm.prompt_caching)


def no_verdict_events(events: list[ErrorEvent]) -> pd.DataFrame:
    """The log's ``grade_no_verdict`` events (a verdict still missing after the bounded
    re-asks): log line, judge, candidate, conversation and detail."""
    rows = [{"line": e.line, "judge": e.judge, "candidate": e.candidate,
             "prompt_id": e.prompt_id, "detail": e.detail}
            for e in events if e.kind == runlog.NO_VERDICT]
    return pd.DataFrame(rows, columns=["line", "judge", "candidate", "prompt_id", "detail"])


@dataclass(frozen=True)
class Census:
    """Per judge: criteria graded, verdicts obtained, recovered, re-asked, excluded and failed
    calls (``PanelRun.census``)."""

    frame: pd.DataFrame

    def view(self) -> Table | Note:
        if self.frame.empty:
            return Note("No reply could be graded, so there is no verdict to count.")
        return Table(self.frame, caption="Verdicts per judge")


@base.needs
def census(verdicts: PanelVerdicts) -> Census:
    """Per judge: criteria graded, verdicts obtained, recovered, re-asked, excluded and failed
    calls (``PanelRun.census``)."""
    return Census(verdicts.graded.census())


@dataclass(frozen=True)
class Scores:
    """One score per (judge, candidate, conversation) (``grading.scores_from_verdicts``; NaN
    where a verdict was missing), for the first reply; the further samples' apart."""

    frame: pd.DataFrame
    samples: pd.DataFrame | None = None
    """The further samples' scores (with ``sample``), when 06 sampled several replies."""

    def view(self) -> Table | Note:
        if self.frame.empty:
            return Note("No reply was graded, so no conversation has a score.")
        scored = self.frame.dropna(subset=["score"])
        counts = (scored.groupby(["candidate", "judge"]).size().unstack(fill_value=0)
                  .reindex(sorted(set(self.frame.candidate)), fill_value=0))
        unscored = int(self.frame.score.isna().sum())
        return Table(counts, value_kind="count", caption=f"Conversations scored per candidate "
                     "and judge "
                     f"({len(scored):,} scores; {unscored} left unscored because a verdict "
                     "was missing)")


@base.needs
def conversation_scores(verdicts: PanelVerdicts) -> Scores:
    """Each judge's score of each (candidate, conversation), from its verdicts and the
    conversation's rubric (the reference's formula, unclipped); read by 08-10."""
    return Scores(*generation.split_samples(grading.scores_from_verdicts(
        verdicts.graded.verdicts, verdicts.conversations)))


@dataclass(frozen=True)
class Spend:
    """What grading paid per judge (a frame indexed by judge), or why it paid nothing."""

    frame: pd.DataFrame
    caption: str

    def view(self) -> Table | Note:
        if self.frame.empty:
            return Note("This grading sent no call to a provider, so it paid nothing.")
        return Table(self.frame, caption=self.caption)


@base.needs
def spend(verdicts: PanelVerdicts) -> Spend:
    """What this grading's engine runs paid per judge (answers already in the store cost
    nothing), with the prompt tokens the providers served from and wrote to their prompt
    caches."""
    frame = pd.DataFrame.from_dict(dict(sorted(verdicts.graded.spend.items())),
                                   orient="index").rename_axis("judge")
    return Spend(frame, "What this grading paid per judge and its prompt tokens (read from / "
                 "written to the providers' prompt caches)")


@base.needs
def released_spend(released: ReleasedGrading) -> Spend:
    """The released ledger's grading charges per judge."""
    return Spend(released.spend_by_judge.to_frame(), "Grading spend per judge")


# --- metrics, outputs, findings --------------------------------------------------------------

def metrics(data: Inputs, template: GraderTemplate, verdicts: PanelVerdicts | None,
            scores: Scores | None) -> GradingMetrics:
    """07's metrics. Live: the panel and settings used, the template's hash, what the grading
    did (recovered, re-asked, excluded), the scores it gave and what it cost: ``spend_usd`` is
    what this attempt of the grading paid (its engine runs' ledger lines, priced with the
    registry's cached-token prices; answers already in the store cost nothing) and
    ``spend_earlier_attempts_usd`` what earlier attempts in the run folder paid for the answers
    it reused (an interrupted run resumed: the two together are what its answers cost), with
    the prompt tokens the providers served from (``cache_read_tokens``) and wrote to
    (``cache_write_tokens``) their prompt caches, in total and per judge (``spend_by_judge``);
    ``ledger_cost_usd`` is everything the run's store has paid for (06 and 07). Paper: the
    template's hash, grading spend (total and per judge), anomaly counts and verdicts never
    obtained."""
    if data.released is not None:
        return _paper_metrics(data.released, template)
    assert verdicts is not None and scores is not None
    return _live_metrics(verdicts, template, scores)


def _paper_metrics(released: ReleasedGrading, template: GraderTemplate) -> GradingPaperMetrics:
    by_judge = released.spend_by_judge
    anomalies = released.anomalies
    kinds = anomalies.sum().to_dict() if len(anomalies) else {}
    return GradingPaperMetrics(
        mode=graph.PAPER, grader_template_sha256=template.sha256,
        spend_grade_usd=round(float(by_judge.sum()), 4),
        spend_by_judge={str(k): round(float(v), 4) for k, v in by_judge.items()},
        anomalies={str(k): int(v) for k, v in kinds.items()},
        n_no_verdict=len(released.no_verdict))


def _live_metrics(verdicts: PanelVerdicts, template: GraderTemplate,
                  scores: Scores) -> GradingLiveMetrics:
    graded = verdicts.graded
    counts = graded.counts()
    totals = graded.spend_totals()
    table = scores.frame
    more = scores.samples
    extra = {} if more is None else {
        "samples": int(more["sample"].max()) + 1,
        "n_sample_scores": int(more.score.notna().sum()),
        "n_sample_unscored": int(more.score.isna().sum())}
    return GradingLiveMetrics(
        mode=graph.LIVE, judges=verdicts.judges, temperature=verdicts.temperature,
        response_schema=verdicts.response_schema, grader_template_sha256=template.sha256,
        **{k: counts[k] for k in ("n_criteria_graded", "n_recovered", "n_reasked",
                                  "n_excluded", "n_replies_not_graded")},
        n_scores=int(table.score.notna().sum()), n_unscored=int(table.score.isna().sum()),
        calls_by_attempt=counts["calls_by_attempt"],
        census={j: JudgeCensus(**row)
                for j, row in graded.census().to_dict(orient="index").items()},
        ledger_cost_usd=verdicts.ledger_cost, prompt_caching=verdicts.prompt_caching,
        spend_usd=totals["spend_usd"], spend_earlier_attempts_usd=verdicts.paid_earlier,
        input_tokens=totals["input_tokens"],
        cache_read_tokens=totals["cache_read_tokens"],
        cache_write_tokens=totals["cache_write_tokens"],
        spend_by_judge={j: JudgeSpend.model_validate(
            {**row, "spend_usd": round(float(row["spend_usd"]), 6)})
            for j, row in sorted(graded.spend.items())}, **extra)


def write(run: StageRun, m: GradingMetrics, data: Inputs, verdicts: PanelVerdicts | None,
          census_table: Census | None, scores: Scores | None) -> Written:
    """Live: ``verdicts.csv``, ``scores.csv``, ``census.csv`` (and the further samples'
    ``verdicts_samples.csv`` and ``scores_samples.csv``); paper: ``spend_by_judge.csv``,
    ``anomalies.csv``; ``metrics.json`` last."""
    tables: dict[str, pd.DataFrame] = {}
    if verdicts is not None:
        first, more = generation.split_samples(verdicts.graded.verdicts)
        tables[graph.VERDICTS] = first
        if more is not None:
            tables[graph.VERDICT_SAMPLES] = more
    if scores is not None:
        tables[graph.SCORES_TABLE] = scores.frame
        if scores.samples is not None:
            tables[graph.SCORE_SAMPLES] = scores.samples
    if census_table is not None and not census_table.frame.empty:
        tables[CENSUS_FILE] = census_table.frame
    if data.released is not None:
        tables[SPEND_FILE] = data.released.spend_by_judge.to_frame()
        tables[ANOMALIES_FILE] = data.released.anomalies
    return base.write(run, m, tables=tables)


def spend_sentence(m: GradingLiveMetrics) -> str:
    """What the grading paid, and how much of its prompts the providers served from their
    prompt caches (a share of all prompt tokens it paid for)."""
    read, total = m.cache_read_tokens, m.input_tokens
    out = f"Grading paid ${m.spend_usd:,.4f}"
    if m.spend_earlier_attempts_usd:
        out = (f"This attempt of the grading paid ${m.spend_usd:,.4f}; earlier attempts in "
               f"this run folder paid ${m.spend_earlier_attempts_usd:,.4f} for the answers it "
               "reused from the store, so its answers cost "
               f"${m.spend_usd + m.spend_earlier_attempts_usd:,.4f} in all")
    if read:
        out += (f"; {read:,} of its {total:,} prompt tokens ({read / total:.1%}) were read from "
                "the providers' prompt caches at the cached-token price.")
    else:
        out += "; no prompt token was read from a provider's prompt cache."
    return out


def findings(m: GradingMetrics, max_reasks: int | None = None) -> Findings:
    """The sentences of "What we found", from 07's metrics.

    Live: the verdicts obtained, then recovery, re-asks, exclusions, ungraded replies and
    unscored conversations, each stated as a count when there are any and as "none"
    otherwise (``max_reasks``, the bound, is named when verdicts were excluded), then what the
    grading paid. Paper: the grading spend per judge, the anomalies logged and the verdicts
    never obtained.
    """
    if m.mode == graph.LIVE:
        out = [f"{m.n_criteria_graded:,} criterion verdicts from the "
               f"{md_text(panel_phrase(m.judges))}."]
        out.append(f"{count(m.n_recovered, 'verdict')} {were(m.n_recovered)} recovered from "
                   "malformed JSON by "
                   "pattern extraction." if m.n_recovered
                   else "Every verdict parsed as the reference grader reads it; none needed "
                        "recovery.")
        out.append(f"{count(m.n_reasked, 'criterion verdict')} needed a re-ask." if m.n_reasked
                   else "No criterion needed a re-ask.")
        bound = f" after {count(max_reasks, 're-ask')}" if max_reasks is not None else ""
        out.append(f"{count(m.n_excluded, 'verdict')} {were(m.n_excluded)} still missing{bound} "
                   "and excluded "
                   "(never counted as false)." if m.n_excluded
                   else "No verdict was excluded.")
        if m.n_replies_not_graded:
            out.append(f"{count(m.n_replies_not_graded, 'reply', 'replies')} "
                       f"{were(m.n_replies_not_graded)} not graded because "
                       "their generation failed.")
        out.append(f"{m.n_scores:,} (judge, candidate, conversation) scores"
                   + (f"; {m.n_unscored} left unscored because a verdict was missing."
                      if m.n_unscored else "; none left unscored."))
        if m.samples is not None:
            out.append(f"The further samples ({m.samples} replies per conversation in all) "
                       f"have {m.n_sample_scores:,} scores"
                       + (f" and {m.n_sample_unscored} left unscored." if m.n_sample_unscored
                          else ", none left unscored."))
        out.append(spend_sentence(m))
        return Findings(out)
    per_judge = ", ".join(f"{md_text(study.display_name(j))}: ${v:,.2f}"
                          for j, v in m.spend_by_judge.items())
    out = [f"Grading cost **${m.spend_grade_usd:,.2f}** across the study's "
           f"{panel_name(list(m.spend_by_judge))} ({per_judge})."]
    logged = ", ".join(f"{n} × {md_text(k)}" for k, n in m.anomalies.items())
    out.append(f"The grading log records {logged}." if logged
               else "The grading log records no anomalies.")
    out.append(f"{count(m.n_no_verdict, 'verdict')} {were(m.n_no_verdict)} never obtained "
               "after the bounded re-asks."
               if m.n_no_verdict
               else "Every verdict was eventually obtained.")
    return Findings(out)
