"""The book's landing page: the study, how much of the paper the run reproduces, where
everything is, this run's profile, each chapter's mode and state, the headline numbers and the
contents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as m
from hbpsych_utils.pipeline.metrics import Metrics
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting import ledger, vocabulary
from hbpsych_utils.reporting.book_headlines import headline_numbers
from hbpsych_utils.reporting.book_markdown import (
    FIGURES_PAGE,
    LEDGER_PAGE,
    METHODS_PAGE,
    PROVENANCE_PAGE,
    SEARCH_PAGE,
    cell,
    chapter_link,
    code,
    hashes,
    html_link,
)
from hbpsych_utils.reporting.book_run import STATE_WORDS, not_current_mark
from hbpsych_utils.reporting.run_metrics import RunMetrics, of

STUDY_SUMMARY = (
    "HealthBench (OpenAI, 2025) is 5,000 rubric-graded health conversations with no specialty "
    "labels. The HealthBench-Psych study screens it with an LLM rubric, has three clinicians "
    "review the candidates blind (with concealed controls), runs a recall round, releases a "
    "610-conversation mental-health subset, and grades 20 models on it with a panel of LLM "
    "judges, one from each of three vendors. This book is one run of the compendium that "
    "re-implements the study: each chapter is an executed notebook of that run."
)

ROUND_INSTRUMENTS = {graph.REVIEW_ROUND1: "Round 1", graph.RECALL: "Round 2 (recall)"}


def find_markdown(chapters: Sequence[str], instruments: Mapping[str, str],
                  has_methods: bool, explorer_note: str) -> str:
    """Where everything is: the ledger, figures, methods, search, the review instruments, the
    explorer and the provenance page."""
    items = [f"- {{doc}}`Reproduction ledger <{LEDGER_PAGE}>`: every number the paper prints "
             "beside this run's value.",
             f"- {{doc}}`Figures and tables <{FIGURES_PAGE}>`: Table 1 and the paper's figures, "
             "with downloads."]
    if has_methods:
        items.append(f"- {{doc}}`Methods <{METHODS_PAGE}>`: the procedure as this compendium "
                     "runs it, step by step.")
    items.append(f"- {html_link('Search', SEARCH_PAGE)} the book.")
    if instruments:
        links = ", ".join(html_link(ROUND_INSTRUMENTS[stage], href)
                          for stage, href in instruments.items())
        items.append(f"- The clinicians' review instruments, as they opened them: {links} "
                     "(one self-contained page each; ratings stay in the browser until "
                     "exported).")
    if graph.EXPLORER in chapters:
        items.append(f"- {chapter_link('The grade explorer', graph.EXPLORER, chapters)}: "
                     f"{explorer_note}")
    items.append(f"- {{doc}}`Provenance <{PROVENANCE_PAGE}>`: the profile, commit, artifacts, "
                 "packages and spend of this run.")
    return "\n".join(items) + "\n"


def explorer_note(metrics: RunMetrics) -> str:
    """How to open the grade explorer, and on which run (it needs per-conversation verdicts)."""
    live = isinstance(of(metrics, m.GRADING), m.GradingLiveMetrics)
    where = ("this run" if live else "a run that grades, such as the smoke profile "
             "(`bash run_all.sh smoke`)")
    return (f"browse every reply and each judge's verdict per criterion. It needs per-"
            f"conversation verdicts, so open it on {where}: `jupyter lab "
            "notebooks/13_explorer.ipynb`, set the parameters cell's `profile` to that run's "
            "profile, and run all cells.")


_PLAIN_NAME = re.compile(r"[\w.\- ]+")


def title_name(profile: str) -> str:
    """The profile's name as page titles carry it. The theme writes titles into its navigation
    as they are, unescaped, so a name with any other character is titled "this profile" (the
    page itself still shows the name, as text)."""
    return profile if _PLAIN_NAME.fullmatch(profile) else "this profile"


def landing_markdown(profile: str, metrics: RunMetrics, chapters: Sequence[str],
                     description: str = "", overrides: Mapping[str, Any] | None = None,
                     states: Mapping[str, StageState] | None = None,
                     command: str = "", reproduced: ledger.Summary | None = None,
                     find: str = "", extra_pages: Sequence[str] = (), *,
                     judges: tuple[list[str], str] | None, level: float,
                     modes: Mapping[str, str | None] | None = None, card: str = "") -> str:
    """The landing page: the study, how much of the paper this run reproduces (``reproduced``,
    the ledger's summary), where everything is (``find``), this run's profile, each stage's
    mode and state, the headline numbers (each marked when its chapter is not current) with
    the headline score's comparability ``card`` (Markdown) under them, contents. A stage's mode
    is its metrics' (``modes``, the profile's, for a stage that writes none); a current chapter
    whose mode leaves it nothing to show is marked "needs ..." (``graph.needs``) instead of
    "current"."""
    states = states or {}
    parts = [f"# HealthBench-Psych: the {code(title_name(profile), cell=False)} run\n",
             STUDY_SUMMARY + "\n"]
    if reproduced is not None:
        parts.append(f"**{reproduced.sentence()}** See the "
                     f"{{doc}}`reproduction ledger <{LEDGER_PAGE}>`.\n")
    if find:
        parts += ["## Find your way\n", find]
    parts += _this_run(profile, description, judges, level, overrides)
    parts += _chapters(metrics, states, chapters, command, modes or {})
    parts += _headlines(metrics, states, chapters, card)
    parts.append("## Contents\n")
    toc = [*chapters, FIGURES_PAGE, *extra_pages, PROVENANCE_PAGE]
    parts.append("```{toctree}\n:maxdepth: 1\n\n" + "\n".join(toc) + "\n```\n")
    return "\n".join(parts)


def _this_run(profile: str, description: str, judges: tuple[list[str], str] | None,
              level: float, overrides: Mapping[str, Any] | None) -> list[str]:
    """The profile and its description, the judges and interval level, the overrides."""
    parts = [f"## This run\n\nProfile **{cell(profile)}**"
             + (f": {cell(description.strip())}" if description.strip() else ".") + "\n"]
    if judges:
        panel, how = judges
        parts.append(f"Judges: the {cell(vocabulary.panel_phrase(panel))} {cell(how)}. "
                     f"Intervals are at the {cell(vocabulary.level_text(level))} level "
                     "(`ci_level`).\n")
    if overrides:
        parts.append("Tweaked on the command line: " + ", ".join(
            code(f"{k}={json.dumps(v, default=str)}", cell=False) for k, v in overrides.items())
            + f" (see {{doc}}`provenance <{PROVENANCE_PAGE}>`).\n")
    return parts


def _chapters(metrics: RunMetrics, states: Mapping[str, StageState], chapters: Sequence[str],
              command: str, modes: Mapping[str, str | None]) -> list[str]:
    """How many chapters are not current, and each chapter the profile runs with its mode and
    state."""
    parts = []
    stale = [s for s in states.values() if s.state in ("not_current", "failed")]
    if stale:
        parts.append(f"**{len(stale)} of {len(states)} chapters are not current**: their "
                     "numbers are not this run's until the runner runs them again "
                     f"({code(command, cell=False)}).\n")
    rows = []
    for stage in graph.STAGES:
        st = states.get(stage)
        if st is not None and st.state == "not_in_profile":
            continue
        found = metrics.get(stage)
        mode = getattr(found, "mode", None) or modes.get(stage)
        word = (STATE_WORDS[st.state] if st is not None else "unknown")
        if st is not None and not st.current:
            word = f"**{word}**: {cell(st.reason)}"
        elif (need := graph.needs(stage, mode)) is not None:
            word = f"needs {need}"
        rows.append((chapter_link(f"{stage[:2]} · {graph.spec(stage).title}", stage, chapters),
                     cell(_mode(mode, found)), word))
    parts.append("Each stage runs in a mode: *replay* or *paper* reads the released study's "
                 "files, *live* calls models through the engine.\n")
    parts.append(vocabulary.markdown_table(["Chapter", "Mode", "State"], rows,
                                           ["name", "name", "text"]))
    return parts


def _mode(mode: str | None, found: Metrics | None) -> str:
    """A stage's mode ("–" without), with round 2's state as its metrics record it."""
    round2 = getattr(found, "round2", None)
    return (mode or "–") + (f" (round 2 {round2.replace('_', ' ')})" if round2 else "")


def _headlines(metrics: RunMetrics, states: Mapping[str, StageState],
               chapters: Sequence[str], card: str = "") -> list[str]:
    """The headline numbers, each linking to its chapter and marked when that is not
    current, then the headline score's comparability card."""
    heads = headline_numbers(metrics)
    if not heads:
        return ["## Headline numbers\n", "None: the stages that compute them did not run.\n"]
    return ["## Headline numbers\n",
            "Each number links to the chapter that computed it; a number whose chapter is not "
            "current is marked so.\n",
            vocabulary.markdown_table(["", "This run", "Detail"], [
                (cell(h.label), chapter_link(h.value, h.chapter, chapters)
                 + not_current_mark(states.get(h.chapter)), hashes(cell(h.detail)))
                for h in heads], ["name", "text", "text"]),
            card]
