"""The one display vocabulary: how every table a reader sees names and shows what it holds.

A stage computes typed results whose tables keep the machine's column names and ids (the CSV
files keep them too); this module turns such a table into what a reader sees, the same way in
every chapter, on the landing page and on the figures page:

- **columns by readers' labels**, from one label table (:data:`COLUMNS`: machine name -> label
  and kind), never renamed chapter by chapter; a column named by a model id or a category,
  theme or axis term takes that term's readers' name;
- **each value by its kind** (:data:`KINDS`): models by display name (``study.DISPLAY_NAMES``;
  the API id only in a ``model_id`` column), categories, themes and axes by their prose labels
  (``study``), integers as integers with thousands separators, scores at the paper's precision
  (three decimals), differences signed, money as dollars, shares as percentages, an interval
  (``ci_low`` beside ``ci_high``) as one "[low, high]" cell labelled with the run's interval
  level, identifiers (prompt ids, hashes) shortened with the full value on hover;
- **names left, numbers right**; numbers, names and identifiers never wrap; a table wider than
  the text column scrolls inside its own frame with its first column kept in view; its caption
  sits above the frame and wraps within the column (:data:`TABLE_CSS`, the book's
  ``tables.css``, which each table also carries inline so JupyterLab shows it the same);
- **where it came from**: under each table the chapter that made it and the one command that
  re-makes it (:class:`Origin`, set when a chapter starts; the book puts the run's own command
  there).

The panel and the interval level are named here too (:func:`panel_name`, :func:`level_text`),
so a caption never says "three-judge" or "95%" unless the run's panel and level are those.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core import escape

Kind = Literal[
    "text", "name", "model", "code", "term", "subset", "identifier", "flag",
    "count", "decimal", "rounded", "score", "signed", "money", "share", "p_value", "interval",
    "scores", "number",
]
"""How a column's values read:

- ``text``: prose, left, may wrap; ``name``: a short label, left, one line;
- ``model``: a model id shown by its display name; ``code``: a machine name shown whole and
  verbatim (a model id where the table is about ids, a file, a registry artifact); ``term``: a
  category, theme, axis or tag (``axis:...``) or another term of :data:`TERMS`, by its
  readers' name; ``subset``: a subset key (``v1``) by its title;
- ``identifier``: a prompt id or a hash, shortened, the full value on hover;
- ``flag``: yes / no;
- ``count``: an integer with thousands separators (a non-integral one, e.g. a median, to one
  decimal); ``decimal``: one decimal; ``rounded``: no decimal (characters, estimated tokens);
- ``score``: three decimals; ``signed``: three decimals with its sign; ``money``: dollars;
  ``share``: a percentage; ``p_value``: three decimals, "< 0.001" below;
- ``interval``: "[low, high]" at three decimals; ``scores``: several scores in one cell;
- ``number``: text already laid out as a number (Table 1's cells), right-aligned as is."""

NUMERIC: frozenset[str] = frozenset({"count", "decimal", "rounded", "score", "signed", "money",
                                     "share", "p_value", "interval", "scores", "number"})
"""Kinds shown right-aligned, on one line."""
ONE_LINE: frozenset[str] = frozenset({"name", "model", "code", "term", "subset",
                                      "identifier", "flag"})
"""Other kinds that never wrap (left-aligned)."""

MISSING = "—"
"""What a cell without a value shows."""
SCORE_DECIMALS = 3
"""The paper's precision for scores and statistics."""
ID_SHOWN = 8
"""Characters of an identifier a cell shows before "…" (the whole value is on hover)."""


@dataclass(frozen=True)
class Column:
    """A column as readers see it: its label (``{level}`` stands for the interval level) and
    the kind of its values."""

    label: str
    kind: Kind = "text"


COLUMNS: dict[str, Column] = {
    # who and what
    "candidate": Column("Model", "model"),
    "model": Column("Model", "model"),
    "judge": Column("Judge", "model"),
    "scorer": Column("Scorer", "model"),
    "rater": Column("Rater", "model"),
    "a": Column("Model A", "model"),
    "b": Column("Model B", "model"),
    "judge_a": Column("Judge A", "model"),
    "judge_b": Column("Judge B", "model"),
    "model_id": Column("Model id", "code"),
    "provider": Column("Provider", "name"),
    "phase": Column("Phase", "term"),
    "subset": Column("Subset", "subset"),
    "prompt_id": Column("Conversation", "identifier"),
    "review_id": Column("Review id", "identifier"),
    "sha256": Column("sha256", "identifier"),
    "prompt_id_sha256": Column("sha256 of the sorted ids", "identifier"),
    "artifact": Column("Artifact", "code"),
    "file": Column("File", "code"),
    "reviewer": Column("Reviewer", "name"),
    "pair": Column("Reviewer pair", "name"),
    "line": Column("Log line", "count"),
    "detail": Column("Detail", "text"),
    "reason": Column("Reason", "text"),
    "evidence": Column("Evidence", "text"),
    "rationale": Column("Rationale", "text"),
    "stop_reason": Column("Stop reason", "name"),
    "status": Column("Status", "term"),
    "kind": Column("Kind", "term"),
    "stat": Column("Statistic", "term"),
    "tag": Column("Tag", "term"),
    "theme": Column("Theme", "term"),
    "axis": Column("Rubric axis", "term"),
    "category": Column("Category", "term"),
    "psych_category": Column("Psych category", "term"),
    "language": Column("Language", "name"),
    "messages": Column("Messages", "count"),
    "label": Column("Label", "name"),
    "released_label": Column("Released label", "name"),
    "confidence": Column("Confidence", "name"),
    "provenance": Column("Provenance", "term"),
    "recovery_tier": Column("Recall tier", "name"),
    "recovery_bucket": Column("Miss bucket", "name"),
    "tier": Column("Consensus tier", "name"),
    "source": Column("Source", "text"),
    "value": Column("Value", "text"),
    # counts
    "n": Column("n", "count"),
    "conversations": Column("Conversations", "count"),
    "rows": Column("Rows", "count"),
    "calls": Column("Calls", "count"),
    "pairs": Column("Label pairs", "count"),
    "criteria": Column("Criteria", "count"),
    "verdicts": Column("Verdicts", "count"),
    "met": Column("Met", "count"),
    "not_met": Column("Not met", "count"),
    "recovered": Column("Recovered", "count"),
    "reasked": Column("Re-asked", "count"),
    "excluded": Column("Excluded", "count"),
    "call_failed": Column("Failed calls", "count"),
    "ok": Column("Answered", "count"),
    "refused": Column("Refused", "count"),
    "failed": Column("Failed", "count"),
    "total": Column("Total", "count"),
    "included": Column("Included", "count"),
    "n_yes": Column("Yes votes", "count"),
    "n_ratings": Column("Ratings", "count"),
    "empty_category": Column("Empty categories", "count"),
    "empty_confidence": Column("Empty confidences", "count"),
    "n_derived": Column("n derived", "count"),
    "n_released": Column("n released", "count"),
    "n_refused": Column("Refused", "count"),
    "n_primary": Column("n with them", "count"),
    "n_excluded": Column("n without them", "count"),
    "n_verdicts": Column("Verdicts", "count"),
    "n_conversations": Column("Conversations", "count"),
    "n_resamples": Column("Resamples", "count"),
    "n_fewest": Column("n (fewest)", "count"),
    "n_most": Column("n (most)", "count"),
    "subset_conversations": Column("Conversations in the subset", "count"),
    "labelled_conversations": Column("Conversations with labelled rows", "count"),
    "tp": Column("True positives", "count"),
    "fp": Column("False positives", "count"),
    "fn": Column("False negatives", "count"),
    "tn": Column("True negatives", "count"),
    "empty_response": Column("Empty responses", "count"),
    "grade_fallback": Column("Verdicts recovered", "count"),
    "grade_no_verdict": Column("Verdicts never obtained", "count"),
    "characters": Column("Characters", "count"),
    # tokens
    "input_tokens": Column("Input tokens", "count"),
    "output_tokens": Column("Output tokens", "count"),
    "cache_read_tokens": Column("Cached input tokens read", "count"),
    "cache_write_tokens": Column("Cached input tokens written", "count"),
    "est_input_tokens": Column("Input tokens (estimated)", "rounded"),
    "est_output_tokens": Column("Output tokens (estimated)", "rounded"),
    "mean_input_tokens": Column("Input tokens per call", "rounded"),
    # money
    "usd": Column("Cost", "money"),
    "cost": Column("Cost", "money"),
    "est_cost": Column("Cost (estimated)", "money"),
    "spend_usd": Column("Paid", "money"),
    "as the study ran it usd": Column("As the study ran it", "money"),
    "as configured usd": Column("As configured", "money"),
    "optimised usd": Column("Optimised", "money"),
    # scores and statistics
    "score": Column("Score", "score"),
    "panel_mean": Column("Panel mean", "score"),
    "clipped_mean": Column("Clipped mean", "score"),
    "adjusted_mean": Column("Length-adjusted mean", "score"),
    "adjustment": Column("Adjustment", "signed"),
    "mean_primary": Column("Mean with them", "score"),
    "mean_excluded": Column("Mean without them", "score"),
    "delta": Column("Difference", "signed"),
    "difference": Column("Difference", "signed"),
    "estimate": Column("Estimate", "signed"),
    "bootstrap_std": Column("Bootstrap std", "score"),
    "severity": Column("Severity", "signed"),
    "self_preference_raw": Column("Self-preference, raw", "signed"),
    "self_preference_corrected": Column("Self-preference, severity-corrected", "signed"),
    "kendall_tau": Column("Kendall's τ", "score"),
    "gwet_ac1": Column("Gwet's AC1", "score"),
    "cohen_kappa": Column("Cohen's kappa", "score"),
    "p_value": Column("p", "p_value"),
    "p_holm": Column("p (Holm)", "p_value"),
    "probability": Column("Probability", "score"),
    "macro_f1": Column("Macro-F1", "score"),
    "f1_met": Column("F1, met", "score"),
    "f1_not_met": Column("F1, not met", "score"),
    "balanced_f1": Column("Balanced F1", "score"),
    "sensitivity": Column("Sensitivity", "score"),
    "specificity": Column("Specificity", "score"),
    "observed": Column("Observed met rate", "score"),
    "corrected": Column("Corrected met rate", "score"),
    "published": Column("Published", "score"),
    "released": Column("Released", "score"),
    "mean_live": Column("Mean, live", "score"),
    "mean_released": Column("Mean, released", "score"),
    "mean_difference": Column("Mean difference (live − released)", "signed"),
    "difference_in_std": Column("Difference in bootstrap stds", "decimal"),
    "mean_chars": Column("Mean length (characters)", "rounded"),
    "median_chars": Column("Median length (characters)", "rounded"),
    "runs": Column("Each run", "scores"),
    "std": Column("Spread (std)", "score"),
    "mean": Column("Mean", "score"),
    "k": Column("k", "count"),
    "slice": Column("Slice", "name"),
    "min": Column("Lowest", "score"),
    "max": Column("Highest", "score"),
    # shares
    "share": Column("Share", "share"),
    "included_share": Column("Share included", "share"),
    "majority_met": Column("Share met (physician majority)", "share"),
    "non_english_share": Column("Share flagged non-English", "share"),
    "percent_agreement": Column("Identical labels", "share"),
    # intervals (a low and a high column shown as one; see ``_intervals``)
    "ci_interval": Column("{level} interval", "interval"),
    "interval": Column("{level} interval", "interval"),
    "adjusted_ci_interval": Column("Length-adjusted, {level} interval", "interval"),
    "sensitivity_interval": Column("Sensitivity, {level} interval", "interval"),
    "specificity_interval": Column("Specificity, {level} interval", "interval"),
    # flags
    "in_study": Column("In the study", "flag"),
    "non_english": Column("Non-English", "flag"),
    "ids_match": Column("Ids match", "flag"),
    "hash_match": Column("Hash matches", "flag"),
    # facts: one number per row (01's corpus, 07's panel, 11's run)
    "n_multi_turn": Column("Multi-turn conversations", "count"),
    "turns_mean": Column("Turns per conversation, mean", "decimal"),
    "turns_median": Column("Turns per conversation, median", "count"),
    "turns_max": Column("Turns per conversation, most", "count"),
    "n_rubric_items": Column("Rubric criteria", "count"),
    "rubric_items_mean": Column("Rubric criteria per conversation, mean", "decimal"),
    "n_negative_items": Column("Criteria worth negative points", "count"),
    "positive_points_total": Column("Positive points, all criteria", "count"),
    "negative_points_total": Column("Negative points, all criteria", "count"),
    "points_all_integer": Column("Every criterion worth whole points", "flag"),
    "n_non_english": Column("Conversations flagged non-English", "count"),
    "n_criteria_graded": Column("Criterion verdicts asked for", "count"),
    "n_recovered": Column("Recovered from malformed JSON by pattern", "count"),
    "n_reasked": Column("Re-asked", "count"),
    "n_excluded_verdicts": Column("Excluded (still missing after the re-asks)", "count"),
    "n_replies_not_graded": Column("Replies not graded (generation failed)", "count"),
    "n_lines": Column("Conversations", "count"),
    "n_scored": Column("Scored", "count"),
    "replies_scored": Column("Replies scored", "count"),
    "chars_mean": Column("Reply length, mean (characters)", "rounded"),
    "chars_min": Column("Reply length, shortest (characters)", "rounded"),
    "chars_p25": Column("Reply length, first quartile (characters)", "rounded"),
    "chars_median": Column("Reply length, median (characters)", "rounded"),
    "chars_p75": Column("Reply length, third quartile (characters)", "rounded"),
    "chars_max": Column("Reply length, longest (characters)", "rounded"),
    "raw_mean": Column("Clipped mean (raw)", "score"),
    "length_adjusted_mean": Column("Length-adjusted clipped mean", "score"),
    # the what-if panel and the robustness of the ranking
    "whatif_rank": Column("Rank", "count"),
    "whatif_change": Column("Change in rank", "number"),
    "whatif_judges": Column("Judges", "name"),
    "whatif_combine": Column("Panel", "name"),
    "whatif_later": Column("Later models", "flag"),
    "whatif_refusals": Column("Refusals", "name"),
    "whatif_mean": Column("Mean", "name"),
    "whatif_length": Column("Length", "name"),
    "same_top": Column("Same top models", "flag"),
    "largest_move": Column("Largest move (places)", "number"),
    "moved": Column("Who moves most", "text"),
    "supported_reversals": Column("Reversals the intervals support", "count"),
    # the comparability card
    "card_judges": Column("Judges and their settings", "text"),
    "card_settings_source": Column("Where the settings come from", "text"),
    "card_panel": Column("Panel", "text"),
    "card_clip": Column("Clip rule", "text"),
    "card_length": Column("Length adjustment", "text"),
    "card_refusals": Column("Refusals", "text"),
    "card_subset": Column("Subset", "text"),
    "card_subset_sha256": Column("Subset ids, sha256", "identifier"),
    "card_n": Column("n", "text"),
    "card_interval": Column("Interval", "text"),
    "card_grader": Column("Grader template, sha256", "identifier"),
}
"""The label table: every column a chapter shows, by its machine name, with its readers'
label and the kind of its values. The one place a column is named for readers."""

TERMS: dict[str, str] = {
    "all": "All",
    "physicians": "Physicians pooled",
    "physician": "Physician",
    "judge": "Judge",
    "panel": "Panel (majority of the judges)",
    "generation": "Generation",
    "grading": "Grading",
    "total": "Total",
    "released": "Released",
    "model_refused": "Refused by the model",
    "screen_failed": "No valid record after re-asks",
    "control": "Control",
    "screened_in": "Screened in",
    "candidate": "Recall candidate",
    **{stat: COLUMNS[stat].label for stat in ("severity", "self_preference_raw",
                                              "self_preference_corrected")},
    "no category majority": "No category majority",
    "ok": "Answered",
    "failed": "Failed",
}
"""Readers' names of the machine's terms that a table shows as values or row labels (besides
models, categories, themes and axes, which ``study`` names); a statistic named as a value
reads as its column does."""


def level_text(level: float) -> str:
    """An interval level as captions and labels say it: 0.95 -> "95%", 0.9 -> "90%"."""
    return f"{100 * float(level):g}%"


_SLUGS: dict[str, dict[str, str]] = {"category": study.CATEGORY_LABELS,
                                     "theme": study.THEME_LABELS, "axis": study.AXIS_LABELS}


def term_label(term: object) -> str:
    """A term by its readers' name: a model by its display name; a category, theme or axis (or
    a tag, ``axis:...``) by the study's label; another term by :data:`TERMS`; else as
    written."""
    text = str(term)
    if text in study.DISPLAY_NAMES:
        return study.DISPLAY_NAMES[text]
    kind, sep, name = text.partition(":")
    if sep and kind in _SLUGS:
        return _SLUGS[kind].get(name, name.replace("_", " "))
    for names in _SLUGS.values():
        if text in names:
            return names[text]
    return TERMS.get(text, text)


_SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")


def column(name: object) -> Column:
    """A column's label and kind: the label table's entry; else, for a wide table's column
    named by a model id or a term, its readers' name (kind ``text``: the caller or the values
    say); else the name as written (a snake_case name with its underscores as spaces)."""
    text = str(name)
    if text in COLUMNS:
        return COLUMNS[text]
    shown = term_label(text)
    if shown == text and _SNAKE.match(text):
        shown = text.replace("_", " ").capitalize()
    return Column(shown, "text")


def label(name: object, level: float = study.CI_LEVEL) -> str:
    """A column's readers' label (:func:`column`), its ``{level}`` filled in."""
    return column(name).label.replace("{level}", level_text(level))


# --- values ----------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, Real) and not isinstance(value, Integral) and math.isnan(value)


def _fixed(x: float, decimals: int, sign: bool = False) -> str:
    text = f"{x:+,.{decimals}f}" if sign else f"{x:,.{decimals}f}"
    if float(text.replace(",", "")) == 0.0:  # -0.000 reads as 0.000
        text = f"{0.0:,.{decimals}f}"
    return text


def money_decimals(values: Sequence[Any]) -> int:
    """Decimals that show a column of dollar amounts: cents, or two significant digits of the
    smallest non-zero amount (at most six decimals)."""
    small = [abs(float(v)) for v in values if isinstance(v, Real) and not _missing(v)
             and float(v) != 0.0]
    if not small:
        return 2
    return max(2, min(6, math.ceil(-math.log10(min(small))) + 1))


def value_text(value: Any, kind: Kind, *, decimals: int | None = None) -> str:
    """One value as a reader sees it, by ``kind`` (:data:`Kind`); :data:`MISSING` for none."""
    if isinstance(value, str) and kind in NUMERIC and kind != "scores":
        return value  # already laid out as a number (Table 1's cells)
    if kind == "interval":
        if not isinstance(value, tuple) or any(_missing(v) for v in value):
            return MISSING
        low, high = value
        return f"[{_fixed(float(low), SCORE_DECIMALS)}, {_fixed(float(high), SCORE_DECIMALS)}]"
    if kind == "scores":
        if isinstance(value, str):
            return value
        return ", ".join(_fixed(float(v), SCORE_DECIMALS) for v in value)
    if _missing(value):
        return MISSING
    if kind == "code":
        return str(value)
    if kind == "flag" or isinstance(value, bool | np.bool_):
        return "yes" if bool(value) else "no"
    if kind in ("model", "term"):
        return term_label(value)
    if kind == "subset":
        return study.SUBSET_TITLES.get(str(value), term_label(value))
    if kind in NUMERIC:
        if not isinstance(value, Real):
            return str(value)
        return _number(float(value), kind, decimals)
    return study.DISPLAY_NAMES.get(str(value), str(value))


def _number(x: float, kind: Kind, decimals: int | None) -> str:
    if kind == "count":
        return f"{int(x):,}" if x.is_integer() else _fixed(x, 1)
    if kind == "decimal":
        return _fixed(x, 1)
    if kind == "rounded":
        return _fixed(x, 0)
    if kind == "signed":
        return _fixed(x, SCORE_DECIMALS, sign=True)
    if kind == "money":
        return ("−$" if x < 0 else "$") + _fixed(abs(x), 2 if decimals is None else decimals)
    if kind == "share":
        return f"{100 * x:.1f}%"
    if kind == "p_value":
        return "< 0.001" if x < 0.001 else _fixed(x, SCORE_DECIMALS)
    return _fixed(x, SCORE_DECIMALS)


def identifier_html(value: object, shown: int = ID_SHOWN) -> str:
    """An identifier (a prompt id, a hash) as a page shows it: its first ``shown`` characters
    and "…", the whole value on hover (``title``); a short one whole."""
    text = str(value)
    short = text if len(text) <= shown + 2 else text[:shown] + "…"
    return (f'<span class="hb-id" title="{escape.html_text(text)}">'
            f"{escape.html_text(short)}</span>")


def cell_html(value: Any, kind: Kind, *, decimals: int | None = None) -> str:
    """One value as the HTML inside its cell (escaped; an identifier shortened)."""
    if kind == "identifier" and not _missing(value):
        return identifier_html(value)
    return escape.html_text(value_text(value, kind, decimals=decimals))


def css_class(kind: Kind) -> str:
    """The class of a cell of ``kind``: numbers right on one line, names and identifiers on
    one line, text that wraps."""
    if kind in NUMERIC:
        return "hb-num"
    if kind in ("identifier", "code"):
        return "hb-code"
    return "hb-name" if kind in ONE_LINE else "hb-text"


# --- the panel -------------------------------------------------------------------------------

NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten")


def panel_name(judges: Sequence[str]) -> str:
    """The panel a run used, by its size: "three-judge panel", "two-judge panel", "single
    judge" (the study's size only when the run's)."""
    n = len(judges)
    if n == 1:
        return "single judge"
    word = NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else f"{n:,}"
    return f"{word}-judge panel"


def model_names(models: Sequence[str]) -> str:
    """Models (a panel's judges, a run's candidates) by display name: "GPT-4.1, Claude Haiku
    4.5 and Gemini 2.5 Flash"."""
    names = [study.display_name(m) for m in models]
    if len(names) < 2:
        return "".join(names) or "none"
    return ", ".join(names[:-1]) + " and " + names[-1]


_MODEL_WORDS: dict[str, str] = {
    **{study.paper_name(m): study.display_name(m) for m in study.DISPLAY_NAMES},
    **{m: study.display_name(m) for m in study.DISPLAY_NAMES},
}
"""Each way a text may write one of the study's models (its id, the paper's name) -> its
display name."""
_MODEL_WORD = re.compile(
    r"(?<![\w.\-])("
    + "|".join(re.escape(w) for w in sorted(_MODEL_WORDS, key=len, reverse=True))
    + r")(?![\w\-]|\.\w)")


def models_named(text: str) -> str:
    """``text`` with each of the study's models it writes by id or as the paper names it
    ("kimi-k2.6", "claude-haiku-4.5") by its display name ("Kimi K2.6", "Claude Haiku 4.5"):
    sentences the compendium writes with a model's machine name, as readers see them."""
    return _MODEL_WORD.sub(lambda m: _MODEL_WORDS[m.group(1)], text)


def panel_phrase(judges: Sequence[str]) -> str:
    """The panel named with its judges: "two-judge panel (GPT-4.1 and Claude Haiku 4.5)"."""
    return f"{panel_name(judges)} ({model_names(judges)})"


# --- where a table or figure came from -------------------------------------------------------

@dataclass(frozen=True)
class Origin:
    """The chapter that made a table or figure and the command that makes it again."""

    stage: str
    command: str

    @property
    def chapter(self) -> str:
        return f"Chapter {self.stage[:2]}"

    def html(self) -> str:
        return (f'<p class="hb-source" data-stage="{escape.html_text(self.stage)}">'
                f"{escape.html_text(self.chapter)} · "
                f'<code class="hb-command">{escape.html_text(self.command)}</code></p>')


def stage_command(profile: str, stage: str, *, options: str = "") -> str:
    """The one command that re-makes a stage's outputs in a run: ``bash run_all.sh PROFILE
    --only STAGE``, then ``options`` (the run's ``--outputs`` and ``--set``, quoted)."""
    return f"bash run_all.sh {shlex.quote(profile)} --only {stage}{options}"


_origin: Origin | None = None


def begin_chapter(origin: Origin | None) -> None:
    """What this process shows from now on comes from ``origin``'s chapter (a chapter's
    ``start`` says so; ``None``: no chapter). A kernel runs one chapter."""
    global _origin
    _origin = origin


def current_origin() -> Origin | None:
    """The chapter this process shows tables and figures for (``None`` outside a chapter)."""
    return _origin


# --- tables ----------------------------------------------------------------------------------

TABLE_CSS_FILE = Path(__file__).with_name("book_site") / "static" / "tables.css"
"""The stylesheet of tables: the book links it, and each table carries it inline
(:func:`table_style`) so that JupyterLab shows it as the book does."""


def table_style() -> str:
    """The tables' stylesheet as an inline ``<style>`` element."""
    return f"<style>{TABLE_CSS_FILE.read_text(encoding='utf-8')}</style>"


_LOW_HIGH = re.compile(r"^(.*?)(low|high)$")


def _intervals(columns: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """``X_low`` beside ``X_high`` (``ci_low``/``ci_high``, ``low``/``high``) as one column
    ``X_interval`` of (low, high) pairs, where the low one was."""
    names = [n for n, _ in columns]
    out = []
    for name, values in columns:
        m = _LOW_HIGH.match(name)
        if m and f"{m.group(1)}low" in names and f"{m.group(1)}high" in names:
            if m.group(2) == "low":
                highs = columns[names.index(f"{m.group(1)}high")][1]
                out.append((f"{m.group(1)}interval", list(zip(values, highs, strict=True))))
            continue
        out.append((name, values))
    return out


def _kind_of(name: str, values: pd.Series, value_kind: Kind | None,
             kinds: Mapping[str, Kind]) -> Kind:
    """A column's kind: named by the caller, by the label table, by ``value_kind`` (a column
    the table does not know), else read from its values."""
    if name in kinds:
        return kinds[name]
    if name in COLUMNS:
        return COLUMNS[name].kind
    if value_kind is not None:
        return value_kind
    if pd.api.types.is_bool_dtype(values):
        return "flag"
    if pd.api.types.is_integer_dtype(values):
        return "count"
    present = values.dropna()
    if pd.api.types.is_float_dtype(values):
        return "count" if len(present) and bool((present == present.round()).all()) else "score"
    if len(present) and all(isinstance(v, str) and v in study.DISPLAY_NAMES for v in present):
        return "model"
    return "text"


@dataclass(frozen=True)
class Layout:
    """A table laid out for readers: header labels (none: no header row), each cell's HTML,
    plain text and class, row by row."""

    labels: list[str]
    cells: list[list[str]]
    texts: list[list[str]]
    classes: list[list[str]]


def lay_out(frame: pd.DataFrame, *, index: bool = True, kinds: Mapping[str, Kind] | None = None,
            value_kind: Kind | None = None, level: float = study.CI_LEVEL,
            header: bool = True, lead: Sequence[str] = ()) -> Layout:
    """``frame`` as readers see it (the module doc): its index (unless ``index`` is false or it
    is the default 0..n-1) as the first columns, intervals as one column, every label from the
    label table and every value by its column's kind. ``kinds`` names a column's kind where
    the label table has none (or another); ``value_kind`` is the kind of every other column
    the table does not know (a wide table's scores or counts). An unnamed index holds row
    labels (terms, or models). ``lead`` names columns shown first, the first of them kept in
    view as the row header (a table's models before its phases)."""
    kinds = dict(kinds or {})
    default_index = (isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
                     and frame.index.start == 0 and frame.index.step == 1)
    columns: list[tuple[str, list[Any]]] = []
    n_labels = 0
    if index and not default_index:
        columns = [("" if n is None else str(n), list(frame.index.get_level_values(i)))
                   for i, n in enumerate(frame.index.names)]
        n_labels = len(columns)
    data = []
    for i, c in enumerate(frame.columns):
        name = " · ".join(label(x) for x in c) if isinstance(c, tuple) else str(c)
        data.append((name, list(frame.iloc[:, i])))
    first = [c for name in lead for c in data if c[0] == name]
    columns += first + [c for c in data if c not in first]
    columns = _intervals(columns)
    found: list[Kind] = []
    for i, (name, values) in enumerate(columns):
        series = pd.Series(values, dtype=object if not values else None)
        if i < n_labels and name not in kinds and name not in COLUMNS:
            found.append("model" if _kind_of("", series, None, {}) == "model" else "term")
        else:
            found.append(_kind_of(name, series, None if i < n_labels else value_kind, kinds))
    decimals = {i: money_decimals(values) for i, ((_, values), k) in
                enumerate(zip(columns, found, strict=True)) if k == "money"}
    cells, texts, classes = [], [], []
    for r in range(len(frame)):
        row = [(values[r], k, decimals.get(i)) for i, ((_, values), k) in
               enumerate(zip(columns, found, strict=True))]
        cells.append([cell_html(v, k, decimals=d) for v, k, d in row])
        texts.append([value_text(v, k, decimals=d) for v, k, d in row])
        classes.append([css_class(k) for k in found])
    for r in range(len(frame) - 1, 0, -1):  # a row label repeated from the row above: blank
        for i in range(n_labels - 1):
            if all(columns[j][1][r] == columns[j][1][r - 1] for j in range(i + 1)):
                cells[r][i] = texts[r][i] = ""
    labels = [label(name, level) if name else "" for name, _ in columns]
    return Layout(labels if header and any(labels) else [], cells, texts, classes)


def table_html(shown: Layout, *, caption: str = "", notes: Sequence[str] = (),
               origin: Origin | None = None, style: bool = True) -> str:
    """A laid-out table as HTML: its caption above a frame that scrolls sideways when the table
    is wider than the column (its first column kept in view), notes and its origin below."""
    parts = [table_style()] if style else []
    parts.append('<div class="hb-block">')
    if caption:
        parts.append(f'<p class="hb-caption">{escape.html_text(caption)}</p>')
    parts.append('<div class="hb-scroll" tabindex="0"><table class="hb-table">')
    heads = shown.classes[0] if shown.classes else ["hb-name"] * len(shown.labels)
    if shown.labels:
        parts.append("<thead><tr>" + "".join(
            f'<th class="{c}" scope="col">{escape.html_text(lab)}</th>'
            for lab, c in zip(shown.labels, heads, strict=True)) + "</tr></thead>")
    parts.append("<tbody>")
    for row, classes in zip(shown.cells, shown.classes, strict=True):
        cells = [f'<th class="{classes[0]}" scope="row">{row[0]}</th>']
        cells += [f'<td class="{c}">{v}</td>' for v, c in zip(row[1:], classes[1:],
                                                               strict=True)]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table></div>")
    parts += [f'<p class="hb-note">{escape.html_text(n)}</p>' for n in notes if n]
    if origin is not None:
        parts.append(origin.html())
    parts.append("</div>")
    return "\n".join(parts)


def table_text(shown: Layout, caption: str = "") -> str:
    """A laid-out table as plain text (what Jupyter stores beside the HTML)."""
    rows = ([shown.labels] if shown.labels else []) + shown.texts
    if not rows:
        return caption
    right = [c == "hb-num" for c in (shown.classes[0] if shown.classes else [])] or \
        [False] * len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if rt else c.ljust(w)
                       for c, w, rt in zip(r, widths, right, strict=True)).rstrip()
             for r in rows]
    return "\n".join([caption, *lines] if caption else lines)


@dataclass(frozen=True, repr=False)
class Table:
    """A table a chapter shows: a frame with the machine's column names and values (the
    vocabulary lays it out), its caption (what it shows) and notes under it."""

    frame: pd.DataFrame
    caption: str = ""
    index: bool = True
    kinds: Mapping[str, Kind] = field(default_factory=dict)
    """Kinds of columns the label table does not know (or knows otherwise here)."""
    value_kind: Kind | None = None
    """The kind of every column the label table does not know (a wide table's scores)."""
    level: float = study.CI_LEVEL
    """The interval level its interval columns are labelled with."""
    notes: Sequence[str] = ()
    lead: Sequence[str] = ()
    """Columns shown first, the first kept in view as the row header."""

    def shown(self) -> Layout:
        return lay_out(self.frame, index=self.index, kinds=self.kinds,
                       value_kind=self.value_kind, level=self.level, lead=self.lead)

    def html(self, *, style: bool = True) -> str:
        return table_html(self.shown(), caption=self.caption, notes=self.notes,
                          origin=current_origin(), style=style)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return "\n".join([table_text(self.shown(), self.caption), *self.notes])


@dataclass(frozen=True, repr=False)
class Facts(Table):
    """One value per row, each labelled from the label table and shown by its own kind (a
    corpus's size, a run's summary): two columns, no header. ``frame`` holds the values as one
    row, under their machine names."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def shown(self) -> Layout:
        cells, texts, classes = [], [], []
        for key, value in self.values.items():
            kind = self.kinds.get(key, column(key).kind)
            name = label(key, self.level)
            cells.append([escape.html_text(name), cell_html(value, kind)])
            texts.append([name, value_text(value, kind)])
            classes.append(["hb-name", css_class(kind)])
        return Layout([], cells, texts, classes)


def facts(values: Mapping[str, Any], caption: str = "", *,
          kinds: Mapping[str, Kind] | None = None, level: float = study.CI_LEVEL,
          notes: Sequence[str] = ()) -> Facts:
    """A :class:`Facts` table of ``values`` (machine name -> value)."""
    return Facts(pd.DataFrame([dict(values)]), caption, kinds=dict(kinds or {}), level=level,
                 notes=notes, values=dict(values))


@dataclass(frozen=True, repr=False)
class Tables:
    """Several tables shown one after the other, after a sentence saying what they show."""

    tables: Sequence[Table]
    note: str = ""

    def _repr_html_(self) -> str:
        head = f'<p class="hb-lead">{escape.html_text(self.note)}</p>\n' if self.note else ""
        return head + "\n".join(t.html(style=i == 0) for i, t in enumerate(self.tables))

    def __repr__(self) -> str:
        return "\n\n".join([self.note, *(repr(t) for t in self.tables)]).strip()


# --- Markdown tables (the book's own pages) --------------------------------------------------

def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]],
                   kinds: Sequence[Kind] | None = None) -> str:
    """A Markdown table of cells already written as Markdown (the book's landing page and
    provenance): names left, numbers right, by each column's kind."""
    kinds = list(kinds or ["text"] * len(header))
    align = ["---:" if k in NUMERIC else ":---" for k in kinds]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
