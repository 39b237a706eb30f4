"""What chapter 14 writes and how it names it: its output files, and each figure's label,
title and caption, written once."""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.evaluation import breakdowns
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import figures
from hbpsych_utils.reporting.vocabulary import level_text

STAGE = graph.ANALYSES

BY_TAG_FILE = "by_tag.csv"
LENGTHS_FILE = "lengths.csv"
WORST_FILE = "worst_at_k.csv"
SPREAD_FILE = "run_spread.csv"
PANEL = breakdowns.PANEL


@dataclass(frozen=True)
class FigureText:
    """A figure's label, title (drawn on it) and caption (shown under it in the chapter;
    ``{level}`` stands for the interval level)."""

    label: str
    title: str
    caption: str


FIGURES: dict[str, FigureText] = {
    "axes": FigureText(
        "Figure A1", "Panel score by rubric axis",
        "Each candidate (rows, best overall panel score first) on each HealthBench rubric axis "
        "(columns): the panel's clipped mean over the conversations in which the criteria "
        "carrying the axis have positive points, each scored on those criteria alone "
        "(simple-evals' per-tag rule); first reply of each conversation. n, the {level} "
        "bootstrap interval and each judge's score are in by_tag.csv."),
    "categories": FigureText(
        "Figure A2", "Panel score by modal clinician category",
        "Each candidate (rows, best overall panel score first) on the conversations of each "
        "modal clinician category of the subset (columns; 05_subset): the panel's clipped mean "
        "of their overall scores. Conversations without a category majority are left out; "
        "'–': no scored conversation. n and intervals are in by_tag.csv."),
    "length": FigureText(
        "Figure A3", "Panel score against mean reply length",
        "Each candidate at its mean reply length (characters, as the reference counts them) "
        "and its panel score: raw (filled) and length-adjusted (open), each reply's score "
        "moved by the variant's penalty per 500 characters from 2,000 before the clipped mean "
        "(simple-evals, April 2026). The dashed line is where a reply is not adjusted."),
    "worst_at_k": FigureText(
        "Figure A4", "Worst-at-k",
        "For each k, the panel's score of the worst of k replies: per conversation the mean, "
        "over every k-subset of its K replies, of the subset's lowest score, then the clipped "
        "mean over conversations (HealthBench's reliability analysis); bands are {level} "
        "bootstrap intervals over conversations. k = 1 is the mean of all replies."),
}
"""Every figure of the chapter, by key: its label (the compendium's own, A for analyses: none
is in the paper), title and caption, written once."""


def figure_stem(key: str, subset: str) -> str:
    return f"fig_{key}_{subset}"


def captioned(key: str, subset: str, fig: Figure | figures.CachedFigure,
              level: float) -> figures.Captioned:
    """A figure of the chapter with its label, title (on the subset) and caption (its interval
    level, ``level``)."""
    text = FIGURES[key]
    title = study.SUBSET_TITLES.get(subset, subset)
    return figures.Captioned(fig, f"{text.label}. {text.title}: {title}",
                             text.caption.replace("{level}", level_text(level)))


