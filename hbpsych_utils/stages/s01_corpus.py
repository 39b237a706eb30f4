"""Chapter 01, the HealthBench corpus: load it, verify it by content, describe it.

``run`` loads the profile's corpus (the registry's HealthBench file, verified against the ids of
the released screen, or a local ``corpus_file``), counts what a reader wants first (size, turns,
rubric criteria and points, themes, languages, how much of HealthBench-Hard is present) and
writes ``corpus_source.json``, the record every later stage reloads the same corpus from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils.construction import corpus
from hbpsych_utils.core.config import CorpusParams
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageResult, StageRun

STAGE = "01_corpus"
_SPREAD = ("n_conversations", "n_rubric_items", "n_non_english", "non_english_share")
"""Keys of ``describe_corpus`` that the metrics place themselves (the rest follow as they are)."""


def start(namespace: Mapping[str, Any]) -> StageRun[CorpusParams]:
    """The chapter's run from its parameters cell (``globals()``), checked."""
    return base.start(STAGE, namespace)


def run(run: StageRun[CorpusParams]) -> StageResult:
    """Load and verify the corpus, describe it, record its source for later stages."""
    params = run.params
    stage = run.stage
    loaded = corpus.load_for_profile(
        allow_partial=params.allow_partial,
        invalid_records=params.invalid_records,
        max_conversations=params.max_conversations,
        corpus_file=params.corpus_file,
        fetch=stage.fetch,
    )
    if params.corpus_file is not None:
        stage.record_input("corpus_file", loaded.report.path)
    conversations = loaded.conversations
    hard = set(corpus.hard_ids(stage.fetch("harness_scores")))
    languages = corpus.language_flags(conversations) if params.detect_language else None
    stats = corpus.describe_corpus(conversations, languages)

    themes = pd.Series(corpus.theme_counts(conversations), name="conversations")
    turns = pd.Series(corpus.turn_distribution(conversations), name="conversations")
    tables = {"themes.csv": themes.rename_axis("theme").to_frame(),
              "turns.csv": turns.rename_axis("messages").to_frame()}
    views: dict[str, Any] = {
        "loaded": (f"**{loaded.coverage.describe()}** (source: {loaded.source}); "
                   f"{len(loaded.report.skipped)} invalid line(s) skipped."),
        "stats": pd.Series(stats, name="value").to_frame(),
        "turns_plot": _turns_figure(tables["turns.csv"]["conversations"]),
        "non_english": pd.DataFrame(),
    }
    if languages is not None:
        table = language_table(languages)
        tables["languages.csv"] = table
        views["non_english"] = (table[table.non_english].language.value_counts()
                                .rename("non-English").to_frame())

    metrics = {
        "corpus_source": loaded.source,
        "complete": loaded.coverage.complete,
        "n_conversations": stats["n_conversations"],
        "n_expected": loaded.coverage.n_expected,
        "coverage": loaded.coverage.fraction,
        "n_skipped": len(loaded.report.skipped),
        "n_hard_ids": len(hard),
        "n_hard_in_corpus": sum(c.prompt_id in hard for c in conversations),
        "n_rubric_items": stats["n_rubric_items"],
        "n_non_english": stats.get("n_non_english"),
        "non_english_share": stats.get("non_english_share"),
        "ids_sha256": corpus.ids_hash(c.prompt_id for c in conversations),
        **{k: v for k, v in stats.items() if k not in _SPREAD},
    }
    stage.write_json(corpus.SOURCE_RECORD, corpus.source_record(loaded, {
        "invalid_records": params.invalid_records,
        "max_conversations": params.max_conversations}))
    result = StageResult(run, metrics, tables=tables, views=views, findings=findings(metrics))
    return result.write()


def language_table(languages: dict[str, corpus.Language]) -> pd.DataFrame:
    """One row per conversation: detected language, its probability, the non-English flag."""
    return pd.DataFrame([{"prompt_id": pid, "language": lang.code,
                          "probability": lang.probability, "non_english": lang.non_english}
                         for pid, lang in languages.items()])


def _turns_figure(turns: pd.Series) -> Figure:
    fig = Figure(figsize=(6, 3))
    turns.plot.bar(ax=fig.subplots(), title="Messages per conversation", ylabel="conversations")
    fig.tight_layout()
    return fig


def findings(metrics: dict[str, Any]) -> list[str]:
    """What the corpus holds, from 01's metrics.

    "complete" or "partial" is the coverage check's verdict (every expected id present); the
    language sentence appears only when languages were detected.
    """
    m = metrics
    if not m["n_conversations"]:
        return [f"The corpus holds no conversations (0 of the {m['n_expected']:,} expected)."]
    out = [
        f"The corpus holds **{m['n_conversations']:,}** conversations "
        f"({m['coverage']:.1%} of the {m['n_expected']:,} expected; "
        f"{'complete' if m['complete'] else 'partial'}), with {m['n_rubric_items']:,} rubric "
        f"criteria ({m['rubric_items_mean']:.1f} per conversation, "
        f"{m['n_negative_items']:,} of them negative).",
        f"{m['n_multi_turn']:,} conversations have more than one message.",
        f"{m['n_hard_in_corpus']:,} of the {m['n_hard_ids']:,} HealthBench-Hard conversations "
        "are present.",
    ]
    if m["n_non_english"] is not None:
        out.append(f"{m['n_non_english']:,} conversations ({m['non_english_share']:.1%}) are "
                   "confidently non-English.")
    return out
