"""Chapter 01, the HealthBench corpus: load it, verify it by content, describe it.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`load` (the
profile's corpus: the registry's HealthBench file, verified against the ids of the released
screen, or a local ``corpus_file``), :func:`languages` (the non-English flags, when
``detect_language`` is on), :func:`describe` (size, turns, rubric criteria and points, themes,
languages, how much of HealthBench-Hard is present) with :func:`turns_figure`,
:func:`metrics`, :func:`write` (``corpus_source.json``, the record every later stage reloads
the same corpus from; the tables; ``metrics.json``) and :func:`findings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import pandas as pd
from matplotlib.figure import Figure

from hbpsych_utils.construction import corpus
from hbpsych_utils.construction.corpus import Conversation, CorpusDescription
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline.metrics import CorpusMetrics
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.display import Findings, Note
from hbpsych_utils.reporting.vocabulary import Table, Tables, facts
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun, Written

STAGE = graph.CORPUS
THEMES = "themes.csv"
TURNS = "turns.csv"
_SPREAD = ("n_conversations", "n_rubric_items", "n_non_english", "non_english_share")
"""Keys of ``describe_corpus`` that the metrics place themselves (the rest follow as they are)."""


start = base.starter(STAGE)


@dataclass(frozen=True)
class Loaded:
    """The corpus as loaded and verified, with the load options later stages reload it with."""

    corpus: corpus.ProfileCorpus
    options: dict[str, Any]

    @property
    def conversations(self) -> list[Conversation]:
        return self.corpus.conversations

    def view(self) -> Note:
        return Note(f"**{self.corpus.coverage.describe()}** (source: "
                    f"{md_text(self.corpus.source)}); "
                    f"{count(len(self.corpus.report.skipped), 'invalid line')} skipped.")


def load(run: StageRun, *, allow_partial: bool, invalid_records: Literal["error", "skip"],
         max_conversations: int | None, corpus_file: str | None) -> Loaded:
    """Load the profile's corpus and verify it by content (``corpus.load_for_profile``): the
    registry's, or a local ``corpus_file`` (recorded as an input of the stage), partial when
    ``allow_partial``, bad lines an error or skipped (``invalid_records``), the first
    ``max_conversations``."""
    loaded = corpus.load_for_profile(
        allow_partial=allow_partial,
        invalid_records=invalid_records,
        max_conversations=max_conversations,
        corpus_file=corpus_file,
        fetch=run.stage.fetch,
    )
    if corpus_file is not None:
        run.stage.record_input("corpus_file", loaded.report.path)
    return Loaded(loaded, {"invalid_records": invalid_records,
                           "max_conversations": max_conversations})


def language_table(languages: dict[str, corpus.Language]) -> pd.DataFrame:
    """One row per conversation: detected language, its probability, the non-English flag."""
    return pd.DataFrame([{"prompt_id": pid, "language": lang.code,
                          "probability": lang.probability, "non_english": lang.non_english}
                         for pid, lang in languages.items()])


@dataclass(frozen=True)
class Languages:
    """Each conversation's detected language (``languages.csv``, which 02 reads); ``None``
    when detection is off."""

    flags: dict[str, corpus.Language] | None

    @property
    def table(self) -> pd.DataFrame:
        return language_table(self.flags or {})

    def view(self) -> Table | Note:
        if self.flags is None:
            return Note("Language detection is off (`detect_language` is false): no "
                        "conversation is flagged non-English, and 02 detects languages itself "
                        "if it translates.")
        table = self.table
        counts = table[table.non_english].language.value_counts().rename("conversations")
        return Table(counts.to_frame(), caption="Conversations confidently non-English, by "
                     "detected language")


def languages(loaded: Loaded, *, detect: bool) -> Languages:
    """The language of every conversation's user turns (py3langid; only confident, non-trivial
    texts are flagged non-English), when ``detect`` (the profile's ``detect_language``)."""
    return Languages(corpus.language_flags(loaded.conversations) if detect else None)


@dataclass(frozen=True)
class Description:
    """What a reader wants first: the corpus's numbers, its themes and its turns."""

    stats: CorpusDescription
    """``corpus.describe_corpus``: size, turns, rubric items and points, languages."""
    themes: pd.DataFrame
    turns: pd.DataFrame
    n_hard_ids: int
    n_hard_in_corpus: int

    def view(self) -> Tables:
        stats: dict[str, Any] = dict(self.stats)
        shown = {key: stats[key] for key in STATS if stats.get(key) is not None}
        return Tables([
            facts(shown, caption="The corpus", level=None),
            Table(self.themes, caption="Conversations per HealthBench theme"),
        ])


STATS = ("n_conversations", "n_multi_turn", "turns_mean", "turns_median", "turns_max",
         "n_rubric_items", "rubric_items_mean", "n_negative_items", "positive_points_total",
         "negative_points_total", "points_all_integer", "n_non_english", "non_english_share")
"""The corpus's numbers (``corpus.describe_corpus``) the chapter shows, in order (the display
vocabulary names and formats them)."""


def describe(run: StageRun, loaded: Loaded, languages: Languages) -> Description:
    """Count the corpus: size, turns, rubric criteria and points, themes, languages, and how
    many of the HealthBench-Hard conversations it holds."""
    conversations = loaded.conversations
    hard = set(corpus.hard_ids(run.stage.fetch("harness_scores")))
    flags = languages.flags
    themes = pd.Series(corpus.theme_counts(conversations), name="conversations")
    turns = pd.Series(corpus.turn_distribution(conversations), name="conversations")
    return Description(
        stats=corpus.describe_corpus(conversations, flags),
        themes=themes.rename_axis("theme").to_frame(),
        turns=turns.rename_axis("messages").to_frame(),
        n_hard_ids=len(hard),
        n_hard_in_corpus=sum(c.prompt_id in hard for c in conversations),
    )


def turns_figure(description: Description) -> figures.Captioned:
    """Conversations by number of messages, as bars."""
    fig = Figure(figsize=(6, 3), layout="constrained")
    description.turns["conversations"].plot.bar(ax=fig.subplots(),
                                                title="Messages per conversation",
                                                xlabel="messages", ylabel="conversations",
                                                rot=0)
    return figures.Captioned(fig, "Messages per conversation", (
        f"The {int(description.turns['conversations'].sum()):,} conversations of the corpus by "
        "the number of messages in their prompt (the turns before the reply a model writes)."))


def metrics(loaded: Loaded, description: Description) -> CorpusMetrics:
    """01's metrics: where the corpus came from, its coverage, and its description."""
    stats, coverage = description.stats, loaded.corpus.coverage
    return CorpusMetrics.model_validate({
        "corpus_source": loaded.corpus.source,
        "complete": coverage.complete,
        "n_conversations": stats["n_conversations"],
        "n_expected": coverage.n_expected,
        "coverage": coverage.fraction,
        "n_skipped": len(loaded.corpus.report.skipped),
        "n_hard_ids": description.n_hard_ids,
        "n_hard_in_corpus": description.n_hard_in_corpus,
        "n_rubric_items": stats["n_rubric_items"],
        "n_non_english": stats.get("n_non_english"),
        "non_english_share": stats.get("non_english_share"),
        "ids_sha256": corpus.ids_hash(c.prompt_id for c in loaded.conversations),
        **{k: v for k, v in stats.items() if k not in _SPREAD},
    })


def write(run: StageRun, m: CorpusMetrics, loaded: Loaded, description: Description,
          languages: Languages) -> Written:
    """``corpus_source.json`` (file, hash and load options: how every later stage reloads this
    corpus), the themes, turns and languages tables, and ``metrics.json``."""
    run.stage.write_json(graph.CORPUS_RECORD, corpus.source_record(loaded.corpus,
                                                                   loaded.options))
    tables = {THEMES: description.themes, TURNS: description.turns}
    if languages.flags is not None:
        tables[graph.LANGUAGES] = languages.table
    written = base.write(run, m, tables=tables)
    return replace(written, files=[graph.CORPUS_RECORD, *written.files])


def findings(m: CorpusMetrics) -> Findings:
    """What the corpus holds, from 01's metrics.

    "complete" or "partial" is the coverage check's verdict (every expected id present); the
    language sentence appears only when languages were detected.
    """
    if not m.n_conversations:
        return Findings([f"The corpus holds no conversations (0 of the {m.n_expected:,} "
                         "expected)."])
    out = [
        f"The corpus holds **{m.n_conversations:,}** conversations "
        f"({m.coverage:.1%} of the {m.n_expected:,} expected; "
        f"{'complete' if m.complete else 'partial'}), with {m.n_rubric_items:,} rubric "
        f"criteria ({m.rubric_items_mean:.1f} per conversation, "
        f"{m.n_negative_items:,} of them negative).",
        f"{m.n_multi_turn:,} conversations have more than one message.",
        f"{m.n_hard_in_corpus:,} of the {m.n_hard_ids:,} HealthBench-Hard conversations "
        "are present.",
    ]
    if m.n_non_english is not None:
        out.append(f"{m.n_non_english:,} conversations ({m.non_english_share:.1%}) are "
                   "confidently non-English.")
    return Findings(out)
