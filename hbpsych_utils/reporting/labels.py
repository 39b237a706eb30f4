"""The label table: each column a reader sees by its machine name, with its readers' label
and the kind of its values, and the readers' names of the terms tables show as values.

The one place a column or a term is named for readers: the display vocabulary
(:mod:`hbpsych_utils.reporting.vocabulary`) lays every table out from it, and a chapter never
renames a column itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from hbpsych_utils import study

Kind = Literal[
    "text", "name", "model", "code", "term", "subset", "identifier", "flag",
    "count", "decimal", "rounded", "score", "signed", "money", "share", "p_value", "interval",
    "share_interval", "scores", "number",
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
- ``interval``: "[low, high]" at three decimals; ``share_interval``: "[low, high]" as
  percentages (the interval of a ``share``); ``scores``: several scores in one cell;
- ``number``: text already laid out as a number (Table 1's cells), right-aligned as is."""

NUMERIC: frozenset[str] = frozenset({"count", "decimal", "rounded", "score", "signed", "money",
                                     "share", "p_value", "interval", "share_interval",
                                     "scores", "number"})
"""Kinds shown right-aligned, on one line."""
ONE_LINE: frozenset[str] = frozenset({"name", "model", "code", "term", "subset",
                                      "identifier", "flag"})
"""Other kinds that never wrap (left-aligned)."""



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
    # a judge's self-consistency (16)
    "repeat": Column("Repeat", "count"),
    "repeat_pair": Column("Repeats", "name"),
    "n_items": Column("Items", "count"),
    "n_flipped": Column("Flipped", "count"),
    "n_left_out": Column("Left out (fewer than two verdicts)", "count"),
    "graded": Column("Graded", "count"),
    "judge_refused": Column("Refused by the judge's provider", "count"),
    "no_verdict": Column("No usable verdict", "count"),
    "other": Column("Failed or not sent", "count"),
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
    "repeat_ac1": Column("AC1 between repeats", "score"),
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
    "spread": Column("Spread (highest − lowest)", "score"),
    # shares
    "share": Column("Share", "share"),
    "included_share": Column("Share included", "share"),
    "majority_met": Column("Share met (physician majority)", "share"),
    "non_english_share": Column("Share flagged non-English", "share"),
    "percent_agreement": Column("Identical labels", "share"),
    "flip_rate": Column("Flip rate", "share"),
    # intervals (a low and a high column shown as one; see ``_intervals``)
    "ci_interval": Column("{level} interval", "interval"),
    "interval": Column("{level} interval", "interval"),
    "flip_rate_interval": Column("{level} interval", "share_interval"),
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
    "panel majority": "Panel (majority of the judges)",
    "all judges": "All judges pooled",
    "uncategorised": "Uncategorised",
}
"""Readers' names of the machine's terms that a table shows as values or row labels (besides
models, categories, themes and axes, which ``study`` names); a statistic named as a value
reads as its column does."""


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

