"""Chapter 02, LLM screening: who reaches clinician review, and the reviewers' translations.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (the
resolver: the screening rubric and its category vocabulary; ``replay``, the study's released
screen, validated against the vocabulary; ``live``, this run's corpus to screen, and the
released screen to compare with when asked; with a ``translation_model``, the conversations 01
flagged non-English and the translation prompt), :func:`screen` (the released screen, or the
corpus screened live through the LLM engine in batches, with bounded re-asks, refusals and
failures routed to human review), :func:`compare_with_release` (live labels against the
released ones), :func:`translate` (machine translations for the reviewers),
:func:`label_tables`, :func:`refused`, :func:`metrics`, :func:`write` (``screen.csv``,
``vocabulary.json`` and ``translations.json``, which 03 and 04 read; without translations a
stale ``translations.json`` of an earlier run is removed, so the packets never show
translations this run did not make) and :func:`findings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus, screening, translation
from hbpsych_utils.core.config import unset_live_model
from hbpsych_utils.core.escape import md_code, md_text
from hbpsych_utils.core.wording import count, were
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import ScreeningMetrics
from hbpsych_utils.pipeline.profiles import ScreeningParams
from hbpsych_utils.reporting.display import Findings, Note
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
start = base.starter(STAGE)


@dataclass(frozen=True)
class Rubric:
    """The screening rubric as a spec (labels, schema) and the category vocabulary it names."""

    spec: screening.ScreenSpec
    mode: str

    @property
    def vocabulary(self) -> tuple[str, ...]:
        return self.spec.choices["category"]

    def view(self) -> Note:
        return Note(f"Mode **{self.mode}**. Category vocabulary ({len(self.vocabulary)} terms): "
                    + ", ".join(f"{md_text(term_label(c))} ({md_code(c)})"
                                for c in self.vocabulary))


@dataclass(frozen=True)
class Screen:
    """The screen: one record per conversation (label, category, confidence, rationale,
    provenance), and, live, the problems met and the model that screened."""

    table: pd.DataFrame
    note: str
    log: list[screening.ScreenProblem] | None = None
    """Live: every problem met (``screening.LOG_COLUMNS``); ``None`` in replay."""
    model: str | None = None
    batch_size: int | None = None

    def view(self) -> Tables:
        return Tables([Table(self.table.head(HEAD_ROWS), caption="The first records")],
                      note=self.note)


@dataclass(frozen=True)
class ToScreen:
    """Live: this run's corpus and the model that screens it."""

    conversations: list[corpus.Conversation]
    model: str


@dataclass(frozen=True)
class ToTranslate:
    """With a translation model: the conversations 01 flagged non-English, and the prompt."""

    model: str
    conversations: list[corpus.Conversation]
    """01's corpus (the ones flagged are translated; the rest name simulator faults)."""
    wanted: set[str]
    instructions: str


@dataclass(frozen=True)
class Inputs:
    """What the chapter screens or replays, compares and translates under its mode."""

    rubric: Rubric
    released: Screen | None
    """Replay: the study's released screen, replayed."""
    to_screen: ToScreen | None
    """Live: the corpus to screen."""
    release: pd.DataFrame | None
    """Live with ``compare_with_release``: the released screen to compare with."""
    to_translate: ToTranslate | None
    comparison_off: bool = False

    def view(self) -> Note:
        notes = []
        if self.to_screen is not None and self.comparison_off:
            notes.append("The live screen is not compared with the release: the profile turns "
                         "it off (`compare_with_release` is false).")
        if self.to_translate is None:
            notes.append("No translation model is set: reviewers see the originals only.")
        return Note(" ".join([self.rubric.view().text, *notes]))


@base.resolver
def inputs(run: StageRun, *, rubric_artifact: str, rubric_file: str | None,
           vocabulary: list[str] | None, model: str | None, compare_with_release: bool,
           translation_model: str | None, translation_artifact: str) -> Inputs:
    """The profile's rubric (a registry artifact or a local file) and its vocabulary (the
    profile's, or the rubric's 'controlled vocabulary' line); replay: the released screen; live:
    this run's corpus and the screening ``model`` (a live screen without one is refused here,
    before any conversation is read), and the released screen when ``compare_with_release``;
    with a ``translation_model``, what 01 flagged non-English (or what is detected now when 01
    did not detect languages) and the registry's translation prompt."""
    text = screening.rubric_text(rubric_artifact, rubric_file, run.stage.fetch)
    spec = screening.screening_spec(text, vocabulary)
    checked = ScreeningParams(mode=graph.LIVE if run.mode == graph.LIVE else graph.REPLAY,
                              model=model)
    if problem := unset_live_model("screening", checked):  # a notebook run by hand
        raise ValueError(problem)
    rubric = Rubric(spec, str(run.mode))
    held = (None if run.mode == graph.REPLAY and translation_model is None
            else corpus.load_recorded(run.stage.upstream(graph.CORPUS, graph.CORPUS_RECORD)))
    to_translate = None if translation_model is None or held is None else _to_translate(
        run, held, translation_model, translation_artifact)
    if run.mode == graph.REPLAY:
        table = screening.load_released_screen(run.stage.fetch("screening_labels"),
                                               rubric.vocabulary)
        replayed = Screen(table, f"Replayed the study's released screen: {len(table):,} "
                                 "records, each validated against the rubric's vocabulary.")
        return Inputs(rubric, replayed, None, None, to_translate)
    assert held is not None and model is not None
    release = (screening.load_released_screen(run.stage.fetch("screening_labels"),
                                              rubric.vocabulary)
               if compare_with_release else None)
    return Inputs(rubric, None, ToScreen(held, model), release, to_translate,
                  comparison_off=not compare_with_release)


def _to_translate(run: StageRun, held: list[corpus.Conversation], model: str,
                  artifact: str) -> ToTranslate:
    flags = corpus.non_english_flags(run.stage.upstream_optional(graph.CORPUS, graph.LANGUAGES),
                                     held)
    instructions = translation.prompt_instructions(
        run.stage.fetch(artifact).read_text(encoding="utf-8"))
    return ToTranslate(model, held, set(translation.non_english_ids(flags)), instructions)


def screen(data: Inputs, run: StageRun, *, batch_size: int, max_reasks: int) -> Screen:
    """The released screen the resolver replayed, or this run's corpus screened live through
    the engine: batches of ``batch_size``, an invalid or missing record re-asked up to
    ``max_reasks`` times, then routed to review as ``BORDERLINE`` with ``screen_failed``
    provenance."""
    if data.released is not None:
        return data.released
    assert data.to_screen is not None
    todo = data.to_screen
    with run.open_engine(conversations=todo.conversations) as engine:
        ask = screening.engine_ask(engine, todo.model, mode=run.llm.mode)
        live = screening.run_screen(data.rubric.spec, todo.conversations, ask,
                                    batch_size=batch_size, max_reasks=max_reasks)
    note = (f"Screened {len(live.table):,} conversations with "
            f"{study.display_name(todo.model)} in batches of "
            f"{batch_size}; {count(len(live.log), 'problem')} logged ({SCREEN_PROBLEMS}).")
    return Screen(live.table, note, live.log, todo.model, batch_size)


@dataclass(frozen=True)
class Comparison:
    """Live labels against the released ones on the conversations both screens cover."""

    confusion: pd.DataFrame
    """Released label (rows) x this run's (columns)."""
    n_common: int
    cohen_kappa: float
    percent_agreement: float

    def view(self) -> Table:
        return Table(self.confusion, value_kind="count", caption=(
            f"{self.n_common:,} conversations in common; Cohen's kappa {self.cohen_kappa:.3f}, "
            f"{self.percent_agreement:.1%} identical labels"))


@base.needs
def compare_with_release(release: pd.DataFrame, screened: Screen) -> Comparison:
    """A live screen's labels against the released screen's (``Inputs.release``), where both
    cover a conversation: the confusion matrix, Cohen's kappa and the share of identical
    labels."""
    found = screening.agreement_with_release(screened.table, release)
    return Comparison(found["confusion"].rename_axis(index="released_label", columns="live"),
                      found["n_common"], found["cohen_kappa"], found["percent_agreement"])


@dataclass(frozen=True)
class Translations:
    """The reviewers' machine translations: per conversation asked, its status; the problems."""

    model: str
    result: translation.TranslationRun

    def view(self) -> Table:
        status = self.result.table.status.value_counts().rename("conversations").to_frame()
        return Table(status, caption=f"{count(len(self.result.table), 'conversation')} flagged "
                     f"non-English sent to {study.display_name(self.model)}")


@base.needs
def translate(todo: ToTranslate, run: StageRun, *, max_reasks: int) -> Translations:
    """Machine translations of the conversations 01 flagged non-English (01's
    ``languages.csv``, or detected now when 01 did not detect languages), one call each with
    the registry's translation prompt; an invalid reply (another turn count or roles) is
    re-asked up to ``max_reasks`` times, then logged, and reviewers see the original alone."""
    with run.open_engine(conversations=todo.conversations) as engine:
        result = translation.translate(
            engine, todo.model, [c for c in todo.conversations if c.prompt_id in todo.wanted],
            todo.instructions, mode=run.llm.mode, max_reasks=max_reasks)
    return Translations(todo.model, result)


@dataclass(frozen=True)
class LabelTables:
    """Label x category and label x confidence counts, with totals."""

    by_category: pd.DataFrame
    by_confidence: pd.DataFrame

    def view(self) -> Tables:
        return Tables([Table(self.by_category, caption="Label × category", value_kind="count"),
                       Table(self.by_confidence, caption="Label × confidence",
                             value_kind="count")])


def label_tables(screened: Screen) -> LabelTables:
    """How the screen's labels spread over the vocabulary and over its confidence."""
    return LabelTables(*screening.screen_tables(screened.table))


@dataclass(frozen=True)
class Refused:
    """The conversations the screening model refused (routed to human review)."""

    table: pd.DataFrame

    def view(self) -> Table | Note:
        if self.table.empty:
            return Note("The screening model refused no conversation.")
        return Table(self.table, caption="Refused by the screening model, routed to review",
                     index=False)


def refused(screened: Screen) -> Refused:
    """The conversations the screening model refused (routed to human review as
    ``BORDERLINE``)."""
    return Refused(screened.table[screened.table.provenance == "model_refused"])


def metrics(data: Inputs, screened: Screen, comparison: Comparison | None,
            translations: Translations | None) -> ScreeningMetrics:
    """02's metrics: the screen's counts; live, its model, batches and problems; the comparison
    and the translations where they ran (keys a run has no number for are left out)."""
    fields: dict[str, Any] = {"mode": data.rubric.mode,
                              **screening.screen_metrics(screened.table)}
    if screened.log is not None:
        fields.update(model=screened.model, batch_size=screened.batch_size,
                      n_screen_problems=len(screened.log))
    if comparison is not None:
        fields["agreement_with_release"] = {"n_common": comparison.n_common,
                                            "cohen_kappa": comparison.cohen_kappa,
                                            "percent_agreement": comparison.percent_agreement}
    if translations is not None:
        fields.update(translation_model=translations.model, **translations.result.metrics())
    return ScreeningMetrics(**fields)


def write(run: StageRun, m: ScreeningMetrics, data: Inputs, screened: Screen,
          comparison: Comparison | None, translations: Translations | None,
          labels: LabelTables) -> Written:
    """The screen and the vocabulary (03 and 04 read them), the translations (when made), the
    tables and ``metrics.json``."""
    stage = run.stage
    records = [graph.VOCABULARY]
    tables: dict[str, pd.DataFrame] = {}
    if screened.log is not None:
        tables[SCREEN_PROBLEMS] = pd.DataFrame(screened.log,
                                               columns=list(screening.LOG_COLUMNS))
    tables[graph.SCREEN] = screened.table
    if comparison is not None:
        tables[AGREEMENT] = comparison.confusion
    if translations is not None:
        stage.write_json(graph.TRANSLATIONS, translations.result.translations)
        records.append(graph.TRANSLATIONS)
        tables[TRANSLATION_TABLE] = translations.result.table
        tables[TRANSLATION_PROBLEMS] = pd.DataFrame(translations.result.log,
                                                    columns=list(translation.LOG_COLUMNS))
    else:
        stage.path(graph.TRANSLATIONS).unlink(missing_ok=True)  # none from an earlier run
    tables[BY_CATEGORY] = labels.by_category
    tables[BY_CONFIDENCE] = labels.by_confidence
    stage.write_json(graph.VOCABULARY, list(data.rubric.vocabulary))
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
