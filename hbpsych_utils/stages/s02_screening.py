"""Chapter 02, LLM screening: who reaches clinician review, and the reviewers' translations.

``run`` resolves the mode: ``replay`` loads the study's released screen and validates it
against the rubric's vocabulary; ``live`` screens this run's corpus through the LLM engine
(batches, bounded re-asks, refusals and failures routed to human review) and, when asked,
compares the live labels with the released ones. With a ``translation_model`` it translates
the conversations 01 flagged non-English for the reviewers (``translations.json``, which 03 and
04 read); without one it removes a stale ``translations.json`` of an earlier run, so the
packets never show translations this run did not make.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hbpsych_utils.construction import corpus, screening, translation
from hbpsych_utils.core.config import ScreeningParams, unset_live_model
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "02_screening"
TOP_CATEGORIES = 3
"""How many of the commonest RELEVANT categories the findings name."""


def start(namespace: Mapping[str, Any]) -> StageRun[ScreeningParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[ScreeningParams]) -> StageResult:
    """Replay or run the screen, compare, translate, tabulate; write 02's files."""
    params = run.params
    stage = run.stage
    rubric = screening.rubric_text(params.rubric_artifact, params.rubric_file, stage.fetch)
    spec = screening.screening_spec(rubric, params.vocabulary)
    vocabulary = spec.choices["category"]
    if problem := unset_live_model("screening", params):  # a notebook run by hand
        raise ValueError(problem)
    conversations = None
    if run.mode == "live" or params.translation_model is not None:
        conversations = corpus.load_recorded(stage.upstream("01_corpus", corpus.SOURCE_RECORD))
    tables: dict[str, pd.DataFrame] = {}
    views: dict[str, Any] = {"mode": f"Mode **{run.mode}**. Category vocabulary "
                                     f"({len(vocabulary)} terms): "
                                     + ", ".join(f"`{c}`" for c in vocabulary)}
    metrics: dict[str, Any] = {"mode": run.mode}

    if run.mode == "replay":
        screen = screening.load_released_screen(stage.fetch("screening_labels"), vocabulary)
        extra: dict[str, Any] = {}
        views["screen_note"] = (f"Replayed the study's released screen: {len(screen):,} "
                                "records, each validated against the rubric's vocabulary.")
    else:
        with run.open_engine(conversations=conversations) as engine:
            ask = screening.engine_ask(engine, params.model, mode=run.llm.mode)
            live = screening.run_screen(spec, conversations, ask, batch_size=params.batch_size,
                                        max_reasks=params.max_reasks)
        screen = live.table
        tables["screen_problems.csv"] = pd.DataFrame(live.log, columns=list(screening.LOG_COLUMNS))
        extra = {"model": params.model, "batch_size": params.batch_size,
                 "n_screen_problems": len(live.log)}
        views["screen_note"] = (f"Screened {len(screen):,} conversations with `{params.model}` in "
                                f"batches of {params.batch_size}; {len(live.log)} problem(s) "
                                "logged (`screen_problems.csv`).")
    tables[screening.SCREEN_FILE] = screen
    views["screen_head"] = screen.head()
    metrics.update(screening.screen_metrics(screen), **extra)

    views["agreement"] = pd.DataFrame()
    views["agreement_note"] = "No comparison: only a live screen is compared with the release."
    if run.mode == "live" and params.compare_with_release:
        released = screening.load_released_screen(stage.fetch("screening_labels"), vocabulary)
        agreement = screening.agreement_with_release(screen, released)
        confusion = agreement["confusion"].rename_axis(index="released", columns="live")
        tables["agreement_with_release.csv"] = confusion
        metrics["agreement_with_release"] = {
            k: agreement[k] for k in ("n_common", "cohen_kappa", "percent_agreement")}
        views["agreement"] = confusion
        views["agreement_note"] = (f"{agreement['n_common']:,} conversations in common; Cohen's "
                                   f"kappa {agreement['cohen_kappa']:.3f}, "
                                   f"{agreement['percent_agreement']:.1%} identical labels.")

    views["translation_status"] = pd.DataFrame()
    views["translation_note"] = "No translation model set: reviewers see the originals only."
    if params.translation_model is not None:
        translated = _translate(run, params, stage, conversations)
        stage.write_json(translation.TRANSLATIONS_FILE, translated.translations)
        tables["translations.csv"] = translated.table
        tables["translation_problems.csv"] = pd.DataFrame(
            translated.log, columns=list(translation.LOG_COLUMNS))
        views["translation_status"] = translated.table.status.value_counts().to_frame()
        views["translation_note"] = (f"{len(translated.table)} conversation(s) flagged "
                                     f"non-English sent to `{params.translation_model}`.")
        metrics.update(translation_model=params.translation_model, **translated.metrics())
    else:
        stage.path(translation.TRANSLATIONS_FILE).unlink(missing_ok=True)  # none from before

    by_category, by_confidence = screening.screen_tables(screen)
    tables["label_by_category.csv"] = by_category
    tables["label_by_confidence.csv"] = by_confidence
    views["refused"] = screen[screen.provenance == "model_refused"]
    stage.write_json(screening.VOCABULARY_FILE, list(vocabulary))
    result = StageResult(run, metrics, tables=tables, views=views, findings=findings(metrics))
    return result.write()


def _translate(run: StageRun[Any], params: ScreeningParams, stage: Any,
               conversations: list[corpus.Conversation]) -> translation.TranslationRun:
    """Machine translations of the conversations 01 flagged non-English."""
    flags = corpus.non_english_flags(stage.upstream_optional("01_corpus", "languages.csv"),
                                     conversations)
    wanted = set(translation.non_english_ids(flags))
    instructions = translation.prompt_instructions(
        stage.fetch(params.translation_artifact).read_text(encoding="utf-8"))
    with run.open_engine(conversations=conversations) as engine:
        return translation.translate(
            engine, params.translation_model, [c for c in conversations if c.prompt_id in wanted],
            instructions, mode=run.llm.mode, max_reasks=params.max_reasks)


def findings(metrics: dict[str, Any]) -> list[str]:
    """What the screen decided, from 02's metrics.

    The commonest categories are the ``TOP_CATEGORIES`` largest RELEVANT counts; the
    failed-screen clause, the live-versus-release sentence and the translation sentence appear
    only when their numbers exist (a live run, a comparison, a translation model).
    """
    m = metrics
    top = sorted(m["relevant_by_category"].items(), key=lambda kv: -kv[1])[:TOP_CATEGORIES]
    routed = (f"{m['n_model_refused']} item(s) were refused by the screening model and routed "
              "to review")
    if m["n_screen_failed"]:
        routed += (f", {m['n_screen_failed']} got no valid record after re-asks and were "
                   "routed too")
    out = [
        f"Of **{m['n_screened']:,}** conversations the screen called **{m['n_relevant']:,}** "
        f"RELEVANT, **{m['n_borderline']:,}** BORDERLINE and {m['n_not_relevant']:,} "
        f"NOT_RELEVANT; {routed}.",
        "The commonest RELEVANT categories: "
        + (", ".join(f"{c} ({n})" for c, n in top) or "none") + ".",
        f"{m['n_relevant'] + m['n_borderline']:,} conversations go to blinded clinician review.",
    ]
    if "agreement_with_release" in m:
        a = m["agreement_with_release"]
        out.append(f"On the {a['n_common']:,} conversations the released screen also covers, "
                   f"the live screen agrees on {a['percent_agreement']:.1%} of labels (Cohen's "
                   f"kappa {a['cohen_kappa']:.3f}).")
    if "translation_model" in m:
        out.append(f"{m['n_translation_translated']} of {m['n_translation_requested']} "
                   f"non-English conversations got a reviewer translation "
                   f"({m['n_translation_failed']} failed, {m['n_translation_refused']} refused, "
                   f"{m['n_translation_is_english']} judged English by the translator).")
    return out
