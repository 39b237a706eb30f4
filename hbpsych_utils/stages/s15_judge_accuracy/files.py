"""What chapter 15 writes and how it names things: its output files, its figure's label,
title and caption, and its names for the slicings, each written once."""

from __future__ import annotations

from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.pipeline import graph

STAGE = graph.JUDGE_ACCURACY

VERDICTS_FILE = "verdicts.csv"
ACCURACY_FILE = "accuracy.csv"
PAIRWISE_FILE = "pairwise_f1.csv"
CORRECTED_FILE = "corrected_rates.csv"
COVERAGE_FILE = "coverage.csv"
FIGURE_STEM = "fig_f1_placement"
FIGURE_LABEL = "Figure J1"
FIGURE_TITLE = "Judges placed among physicians (pairwise balanced F1)"
FIGURE_CAPTION = (
    "Per category of the file (all rows first): each physician's balanced F1 against the other "
    "physicians on the rows it labelled (grey), the physicians pooled (bar), each judge's "
    "balanced F1 against every physician label (diamonds) and the panel's, the majority of the "
    "judges (square); balanced F1 is the mean of the met and not-met "
    "classes' F1 (HealthBench's meta-evaluation). An undefined value (a class one side never "
    "uses) is not drawn. Pairs and values are in pairwise_f1.csv.")
SLICING_NAMES = {"category": "the file's category", ja.THEME: "HealthBench theme",
                 ja.PSYCH_CATEGORY: "Psych category"}
"""How the chapter names the three slicings (``judge_accuracy.SLICINGS``)."""

