"""Chapter 02, LLM screening: who reaches clinician review, and the reviewers' translations.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`rubric` (the
screening rubric and its category vocabulary), :func:`screen` (``replay``: the study's released
screen, validated against the vocabulary; ``live``: this run's corpus screened through the LLM
engine in batches, with bounded re-asks, refusals and failures routed to human review),
:func:`compare_with_release` (live labels against the released ones, when asked),
:func:`translate` (with a ``translation_model``: machine translations of the conversations 01
flagged non-English, for the reviewers), :func:`label_tables`, :func:`refused`,
:func:`metrics`, :func:`write` (``screen.csv``, ``vocabulary.json`` and ``translations.json``,
which 03 and 04 read; without translations a stale ``translations.json`` of an earlier run is
removed, so the packets never show translations this run did not make) and :func:`findings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus, screening, translation
from hbpsych_utils.core.config import ScreeningParams, unset_live_model
from hbpsych_utils.core.escape import md_code, md_text
from hbpsych_utils.core.wording import count, were
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import ScreeningMetrics
from hbpsych_utils.reporting.display import Findings, Note, Shown, unavailable
from hbpsych_utils.reporting.vocabulary import Table, Tables, term_label
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.SCREENING
TOP_CATEGORIES = 3
"""How many of the commonest RELEVANT categories the findings name."""
SCREEN_PROBLEMS = "screen_problems.csv"
AGREEMENT = "agreement_with_release.csv"
TRANSLATION_TABLE = "translations.csv"
TRANSLATION_PROBLEMS = "translation_problems.csv"
BY_CATEGORY = "label_by_category.csv"
BY_CONFIDENCE = "label_by_confidence.csv"
HEAD_ROWS = 5
"""How many records of the screen the chapter shows."""


start = base.starter(STAGE, ScreeningParams)


@dataclass(frozen=True, repr=False)
class Rubric(Shown):
    """The screening rubric as a spec (labels, schema) and the category vocabulary it names."""

    spec: screening.ScreenSpec
    mode: str

    @property
    def vocabulary(self) -> tuple[str, ...]:
        return self.spec.choices["category"]

    def _repr_markdown_(self) -> str:
        return (f"Mode **{self.mode}**. Category vocabulary ({len(self.vocabulary)} terms): "
                + ", ".join(f"{md_text(term_label(c))} ({md_code(c)})" for c in self.vocabulary))


def rubric(run: StageRun[ScreeningParams]) -> Rubric:
    """The profile's rubric (a registry artifact or a local file) and its vocabulary (the
    profile's, or the rubric's 'controlled vocabulary' line); a live screen without a model to
    call is refused here, before any conversation is read."""
    params = run.params
    text = screening.rubric_text(params.rubric_artifact, params.rubric_file, run.stage.fetch)
    spec = screening.screening_spec(text, params.vocabulary)
    if problem := unset_live_model("screening", params):  # a notebook run by hand
        raise ValueError(problem)
    return Rubric(spec, str(run.mode))


@dataclass(frozen=True, repr=False)
class Screen(Shown):
    """The screen: one record per conversation (label, category, confidence, rationale,
    provenance), and, live, the problems met and the corpus it screened."""

    table: pd.DataFrame
    note: str
    log: list[dict[str, Any]] | None = None
    """Live: every problem met (``screening.LOG_COLUMNS``); ``None`` in replay."""
    conversations: list[corpus.Conversation] | None = None
    """Live: 01's corpus as screened (the translations reuse it)."""

    def _repr_html_(self) -> str:
        return Tables([Table(self.table.head(HEAD_ROWS), caption="The first records")],
                      note=self.note)._repr_html_()


def _conversations(run: StageRun[ScreeningParams]) -> list[corpus.Conversation]:
    return corpus.load_recorded(run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))


def screen(run: StageRun[ScreeningParams], rubric: Rubric) -> Screen:
    """Replay the released screen, or screen this run's corpus live through the engine: batches
    of ``batch_size``, an invalid or missing record re-asked up to ``max_reasks`` times, then
    routed to review as ``BORDERLINE`` with ``screen_failed`` provenance."""
    params = run.params
    if run.mode == graph.REPLAY:
        table = screening.load_released_screen(run.stage.fetch("screening_labels"),
                                               rubric.vocabulary)
        return Screen(table, f"Replayed the study's released screen: {len(table):,} records, "
                             "each validated against the rubric's vocabulary.")
    conversations = _conversations(run)
    with run.open_engine(conversations=conversations) as engine:
        ask = screening.engine_ask(engine, params.model, mode=run.llm.mode)
        live = screening.run_screen(rubric.spec, conversations, ask,
                                    batch_size=params.batch_size, max_reasks=params.max_reasks)
    note = (f"Screened {len(live.table):,} conversations with "
            f"{study.display_name(str(params.model))} in batches of "
            f"{params.batch_size}; {count(len(live.log), 'problem')} logged ({SCREEN_PROBLEMS}).")
    return Screen(live.table, note, live.log, conversations)


@dataclass(frozen=True, repr=False)
class Comparison(Shown):
    """Live labels against the released ones on the conversations both screens cover."""

    confusion: pd.DataFrame
    """Released label (rows) x this run's (columns)."""
    n_common: int
    cohen_kappa: float
    percent_agreement: float

    def _repr_html_(self) -> str:
        return Table(self.confusion, value_kind="count", caption=(
            f"{self.n_common:,} conversations in common; Cohen's kappa {self.cohen_kappa:.3f}, "
            f"{self.percent_agreement:.1%} identical labels")).html()


def compare_with_release(run: StageRun[ScreeningParams], rubric: Rubric,
                         screen: Screen) -> Comparison | Note:
    """A live screen's labels against the released screen's, where both cover a conversation:
    the confusion matrix, Cohen's kappa and the share of identical labels."""
    if run.mode != graph.LIVE:
        return unavailable("No comparison: only a live screen is compared with the release.")
    if not run.params.compare_with_release:
        return unavailable("No comparison: the profile turns it off (`compare_with_release` "
                           "is false).")
    released = screening.load_released_screen(run.stage.fetch("screening_labels"),
                                              rubric.vocabulary)
    found = screening.agreement_with_release(screen.table, released)
    return Comparison(found["confusion"].rename_axis(index="released_label", columns="live"),
                      found["n_common"], found["cohen_kappa"], found["percent_agreement"])


@dataclass(frozen=True, repr=False)
class Translations(Shown):
    """The reviewers' machine translations: per conversation asked, its status; the problems."""

    model: str
    result: translation.TranslationRun

    def _repr_html_(self) -> str:
        status = self.result.table.status.value_counts().rename("conversations").to_frame()
        return Table(status, caption=f"{count(len(self.result.table), 'conversation')} flagged "
                     f"non-English sent to {study.display_name(self.model)}").html()


def translate(run: StageRun[ScreeningParams], screen: Screen) -> Translations | Note:
    """Machine translations of the conversations 01 flagged non-English (01's
    ``languages.csv``, or detected now when 01 did not detect languages), one call each with
    the registry's translation prompt; an invalid reply (another turn count or roles) is
    re-asked up to ``max_reasks`` times, then logged, and reviewers see the original alone."""
    params = run.params
    model = params.translation_model
    if model is None:
        return unavailable("No translation model set: reviewers see the originals only.")
    conversations = screen.conversations or _conversations(run)
    flags = corpus.non_english_flags(run.stage.upstream_optional(graph.CORPUS, graph.LANGUAGES),
                                     conversations)
    wanted = set(translation.non_english_ids(flags))
    instructions = translation.prompt_instructions(
        run.stage.fetch(params.translation_artifact).read_text(encoding="utf-8"))
    with run.open_engine(conversations=conversations) as engine:
        result = translation.translate(
            engine, model, [c for c in conversations if c.prompt_id in wanted],
            instructions, mode=run.llm.mode, max_reasks=params.max_reasks)
    return Translations(model, result)


@dataclass(frozen=True, repr=False)
class LabelTables(Shown):
    """Label x category and label x confidence counts, with totals."""

    by_category: pd.DataFrame
    by_confidence: pd.DataFrame

    def _repr_html_(self) -> str:
        return Tables([Table(self.by_category, caption="Label × category", value_kind="count"),
                       Table(self.by_confidence, caption="Label × confidence",
                             value_kind="count")])._repr_html_()


def label_tables(screen: Screen) -> LabelTables:
    """How the screen's labels spread over the vocabulary and over its confidence."""
    return LabelTables(*screening.screen_tables(screen.table))


def refused(screen: Screen) -> Table | Note:
    """The conversations the screening model refused (routed to human review as
    ``BORDERLINE``)."""
    table = screen.table[screen.table.provenance == "model_refused"]
    if table.empty:
        return unavailable("The screening model refused no conversation.")
    return Table(table, caption="Refused by the screening model, routed to review",
                 index=False)


def metrics(run: StageRun[ScreeningParams], screen: Screen, comparison: Comparison | Note,
            translations: Translations | Note) -> ScreeningMetrics:
    """02's metrics: the screen's counts; live, its model, batches and problems; the comparison
    and the translations where they ran (keys a run has no number for are left out)."""
    params = run.params
    fields: dict[str, Any] = {"mode": run.mode, **screening.screen_metrics(screen.table)}
    if screen.log is not None:
        fields.update(model=params.model, batch_size=params.batch_size,
                      n_screen_problems=len(screen.log))
    if isinstance(comparison, Comparison):
        fields["agreement_with_release"] = {"n_common": comparison.n_common,
                                            "cohen_kappa": comparison.cohen_kappa,
                                            "percent_agreement": comparison.percent_agreement}
    if isinstance(translations, Translations):
        fields.update(translation_model=translations.model, **translations.result.metrics())
    return ScreeningMetrics(**fields)


def write(run: StageRun[ScreeningParams], m: ScreeningMetrics, rubric: Rubric, screen: Screen,
          comparison: Comparison | Note, translations: Translations | Note,
          labels: LabelTables) -> Written:
    """The screen and the vocabulary (03 and 04 read them), the translations (when made), the
    tables and ``metrics.json``."""
    stage = run.stage
    records = [graph.VOCABULARY]
    tables: dict[str, pd.DataFrame] = {}
    if screen.log is not None:
        tables[SCREEN_PROBLEMS] = pd.DataFrame(screen.log, columns=list(screening.LOG_COLUMNS))
    tables[graph.SCREEN] = screen.table
    if isinstance(comparison, Comparison):
        tables[AGREEMENT] = comparison.confusion
    if isinstance(translations, Translations):
        stage.write_json(graph.TRANSLATIONS, translations.result.translations)
        records.append(graph.TRANSLATIONS)
        tables[TRANSLATION_TABLE] = translations.result.table
        tables[TRANSLATION_PROBLEMS] = pd.DataFrame(translations.result.log,
                                                    columns=list(translation.LOG_COLUMNS))
    else:
        stage.path(graph.TRANSLATIONS).unlink(missing_ok=True)  # none from an earlier run
    tables[BY_CATEGORY] = labels.by_category
    tables[BY_CONFIDENCE] = labels.by_confidence
    stage.write_json(graph.VOCABULARY, list(rubric.vocabulary))
    written = base.write(run, m, tables=tables)
    return replace(written, files=[*records, *written.files])


def findings(m: ScreeningMetrics) -> Findings:
    """What the screen decided, from 02's metrics.

    The commonest categories are the ``TOP_CATEGORIES`` largest RELEVANT counts; the
    failed-screen clause, the live-versus-release sentence and the translation sentence appear
    only when their numbers exist (a live run, a comparison, a translation model).
    """
    top = sorted(m.relevant_by_category.items(), key=lambda kv: -kv[1])[:TOP_CATEGORIES]
    routed = (f"{count(m.n_model_refused, 'item')} {were(m.n_model_refused)} refused by the "
              "screening model and routed "
              "to review")
    if m.n_screen_failed:
        routed += (f", {m.n_screen_failed} got no valid record after re-asks and were "
                   "routed too")
    out = [
        f"Of **{m.n_screened:,}** conversations the screen called **{m.n_relevant:,}** "
        f"RELEVANT, **{m.n_borderline:,}** BORDERLINE and {m.n_not_relevant:,} "
        f"NOT_RELEVANT; {routed}.",
        "The commonest RELEVANT categories: "
        + (", ".join(f"{md_text(study.category_label(c))} ({n})" for c, n in top) or "none")
        + ".",
        f"{m.n_relevant + m.n_borderline:,} conversations go to blinded clinician review.",
    ]
    if (a := m.agreement_with_release) is not None:
        out.append(f"On the {a.n_common:,} conversations the released screen also covers, "
                   f"the live screen agrees on {a.percent_agreement:.1%} of labels (Cohen's "
                   f"kappa {a.cohen_kappa:.3f}).")
    if m.translation_model is not None:
        out.append(f"{m.n_translation_translated} of {m.n_translation_requested} "
                   f"non-English conversations got a reviewer translation "
                   f"({m.n_translation_failed} failed, {m.n_translation_refused} refused, "
                   f"{m.n_translation_is_english} judged English by the translator).")
    return Findings(out)
