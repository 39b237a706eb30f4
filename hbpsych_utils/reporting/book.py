"""The book: one run folder rendered as a static, fully offline website.

A reader opens ``outputs/<profile>/book/index.html`` and reads the whole study without Jupyter:
a landing page that leads with how much of the paper the run reproduces (the reproduction
ledger's summary), says where everything is and gives this run's headline numbers (each linking
to the chapter that computed it); one chapter per executed notebook (code folded, figures
inline); the paper's tables and figures under its labels with downloads; the ledger; the
methods page (``docs/methods.md``); the review instruments, copied in; and the run's provenance
from ``manifest.json``, with the mindbench-results artifacts published from the run
(``publish``) as downloads.

Why Sphinx with MyST-NB: MyST-NB reads the executed notebooks as they are (execution off), hidden
code is a plain ``<details>`` element (one click, no JavaScript), and the default run's book
builds in seconds on two cores (``benchmarks/book_overhead.py``). nbconvert's HTML exporter
renders one page per notebook only, inlines ~280 kB of CSS into each and, by default, links
require.js and MathJax from a CDN. Why sphinx-book-theme: it is made for books of executed
notebooks (a chapter list, a contents column per page, wide outputs that scroll), its pages fit
a laptop's window, and it ships every script, stylesheet and icon font in the package, so
nothing is fetched at build or view time (pydata-sphinx-theme, under it, the same).

Offline by construction: no MathJax (LaTeX outputs fall back to text), no widget manager (an
ipywidgets view is replaced by its own static version where it carries one, else by a note; the
static HTML the stage displays after it stays), and
search without result summaries (those fetch pages, which ``file://`` forbids; the search index
is a script the page loads). Upstream addresses are links a reader may follow; the book itself
requests nothing outside its folder. The headline numbers and the ledger come from tested
functions of the stages' metrics (``headline_numbers``, ``reporting.ledger``); the pages only
lay them out.
"""

from __future__ import annotations

import io
import json
import math
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from hbpsych_utils import study
from hbpsych_utils.construction.instrument import BOOK_COPY, INSTRUMENT_FILE
from hbpsych_utils.core import escape, paths, records, wording
from hbpsych_utils.core.config import Profile
from hbpsych_utils.pipeline import graph, state
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.pipeline.metrics import RecallMetrics, ReviewRound1Metrics
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting import catalogue, ledger, vocabulary, whatif_page

BOOK_DIR = "book"
"""The book's folder inside a run folder ``outputs/<profile>/``."""

SITE_FILES = Path(__file__).with_name("book_site")
"""The book's stylesheet (package data)."""

STUDY_SUMMARY = (
    "HealthBench (OpenAI, 2025) is 5,000 rubric-graded health conversations with no specialty "
    "labels. The HealthBench-Psych study screens it with an LLM rubric, has three clinicians "
    "review the candidates blind (with concealed controls), runs a recall round, releases a "
    "610-conversation mental-health subset, and grades 20 models on it with a panel of LLM "
    "judges, one from each of three vendors. This book is one run of the compendium that "
    "re-implements the study: each chapter is an executed notebook of that run."
)

FIGURES_PAGE = "figures"
PROVENANCE_PAGE = "provenance"
PUBLISHED_FILES = "published"
"""The book's copies of the files published from the run (downloads, not pages)."""
FIGURES_STAGE = "12_figures_tables"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "*An interactive widget stood here (ipywidgets). It needs a running kernel: open this "
    "notebook in JupyterLab to use it. The book shows the static output that follows.*"
)


PARAMETER_PROMPTS = {
    "parameters": "Show the notebook's default parameters",
    "injected-parameters": "Show this run's parameters",
}


class BookError(RuntimeError):
    """A run folder the book cannot be built from (names the folder or file)."""


# ---------------------------------------------------------------------------------------------
# the run's state: each stage's typed metrics and whether it is current


class Headline(BaseModel):
    """One number of the landing page and the chapter (notebook stem) that computed it."""

    model_config = ConfigDict(frozen=True)

    key: str
    label: str
    value: str
    detail: str = ""
    chapter: str


def read_metrics(profile_dir: Path) -> dict[str, Any]:
    """Every stage's ``metrics.json`` in a run folder, typed (``pipeline.metrics``), by stage."""
    out: dict[str, Any] = {}
    for stage in metrics_models.MODELS:
        if (Path(profile_dir) / stage / graph.METRICS).is_file():
            try:
                out[stage] = metrics_models.read(profile_dir, stage)
            except (metrics_models.MetricsError, OSError) as exc:
                raise BookError(str(exc)) from exc
    return out


def run_profile(profile_dir: Path, manifest: Mapping[str, Any] | None) -> Profile | None:
    """The profile a run folder was made with: the manifest's values (overrides applied), or
    the profile file of the folder's name; ``None`` when neither can be read."""
    from hbpsych_utils.core import config

    values = (manifest or {}).get("profile_values")
    if isinstance(values, dict) and values:
        try:
            return Profile.model_validate(values)
        except ValidationError:
            return None
    try:
        return config.load_profile(str((manifest or {}).get("profile") or profile_dir.name))
    except (config.ProfileError, OSError, ValueError):
        return None


def stage_states(profile_dir: Path, profile: Profile | None,
                 manifest: Mapping[str, Any] | None = None) -> dict[str, StageState]:
    """Each stage's state in the run folder (empty when the profile is unknown), judged with
    the artifact source the run recorded (mirror or download), not this reader's."""
    if profile is None:
        return {}
    mirror = (manifest or {}).get("mirror")
    return {s.stage: s for s in state.stage_states(
        profile_dir, profile, mirror=mirror if isinstance(mirror, bool) else None)}


def update_command(profile: str, manifest: Mapping[str, Any] | None,
                   outputs_root: Path | None = None) -> str:
    """The command that brings every stage of the run up to date: the run's profile, its
    outputs folder (``outputs_root``, named unless it is the default) and ``--set`` overrides,
    all stages (no ``--only``)."""
    overrides = (manifest or {}).get("overrides") or {}
    sets = "".join(f" --set {shlex.quote(f'{k}={json.dumps(v)}')}"
                   for k, v in overrides.items()) if isinstance(overrides, dict) else ""
    return f"bash run_all.sh {shlex.quote(profile)}{_outputs_option(outputs_root)}{sets}"


def stage_command(profile: str, stage: str, manifest: Mapping[str, Any] | None,
                  outputs_root: Path | None = None) -> str:
    """The one command that re-makes stage ``stage``'s outputs in this run: its profile,
    ``--only`` the stage, the run's outputs folder and ``--set`` overrides (what every table and
    figure of its chapter says under it)."""
    overrides = (manifest or {}).get("overrides") or {}
    sets = "".join(f" --set {shlex.quote(f'{k}={json.dumps(v)}')}"
                   for k, v in overrides.items()) if isinstance(overrides, dict) else ""
    return vocabulary.stage_command(profile, stage,
                                    options=_outputs_option(outputs_root) + sets)


def run_judges(metrics: Mapping[str, Any], profile: Profile | None) -> tuple[list[str], str]:
    """The judges whose verdicts this run's scores rest on, and where they come from: the
    judges 07 graded with (live), or the study's panel behind the released matrices (paper)."""
    grading = metrics.get(graph.GRADING)
    if getattr(grading, "mode", None) == graph.LIVE:
        return list(grading.judges), "graded this run's replies"
    if profile is not None and profile.evaluation_mode == graph.LIVE:
        return profile.grading.judge_panel(), "are the profile's"
    return list(study.JUDGE_PANEL), "graded the study's released run"


def _outputs_option(outputs_root: Path | None) -> str:
    """`` --outputs DIR`` for a run outside the default outputs folder ("" otherwise)."""
    if outputs_root is None or Path(outputs_root).resolve() == paths.outputs_root().resolve():
        return ""
    return f" --outputs {shlex.quote(str(Path(outputs_root).resolve()))}"


def corpus_partial(metrics: Mapping[str, Any]) -> bool:
    """Whether the run used a partial corpus (01_corpus says ``complete: false``)."""
    corpus = metrics.get(graph.CORPUS)
    return corpus is not None and corpus.complete is False


def corpus_chapters(profile: Profile | None) -> list[str]:
    """The chapters whose results come from the corpus's conversations themselves: 01 and
    every stage that reads 01's corpus under the profile's modes (the graph says which)."""
    if profile is None:
        return [graph.CORPUS]
    return [s for s in graph.STAGES
            if s == graph.CORPUS or graph.CORPUS in graph.spec(s).upstream(profile)]


def partial_banner(metrics: Mapping[str, Any], profile: Profile | None = None) -> str:
    """The sentence every page of a partial-corpus book carries ("" for a complete corpus):
    how much of the corpus the run had, and which chapters that limits."""
    if not corpus_partial(metrics):
        return ""
    c = metrics[graph.CORPUS]
    numbers = [s[:2] for s in corpus_chapters(profile)]
    which = (f"chapter {numbers[0]} computes" if len(numbers) == 1 else
             f"chapters {', '.join(numbers[:-1])} and {numbers[-1]} compute")
    return (f"Partial corpus: this run read {c.n_conversations:,} of HealthBench's "
            f"{c.n_expected:,} conversations. What {which} from the conversations themselves "
            "covers only those; every number taken from the study's released files is "
            "complete.")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _review_headlines(m: ReviewRound1Metrics | RecallMetrics | None, stage: str,
                      round_name: str) -> list[Headline]:
    if m is None:
        return []
    out = []
    if _finite(m.control_inclusion_rate):
        assert m.control_inclusion_rate is not None
        detail = ""
        if m.n_controls is not None and m.n_controls_included is not None:
            detail = f"{m.n_controls_included} of {m.n_controls} concealed controls included"
        out.append(Headline(
            key=f"control_inclusion_{stage[:2]}", chapter=stage, detail=detail,
            label=f"Control-inclusion rate, {round_name}", value=_pct(m.control_inclusion_rate)))
    if _finite(m.ac1_pairwise_mean):
        assert m.ac1_pairwise_mean is not None
        parts = [f"mean over reviewer pairs ({m.ac1_pairwise_mean:.3f}), as the paper reports"]
        pairs = {k: v for k, v in (m.ac1_pairs or {}).items() if _finite(v)}
        if len(pairs) > 2:
            best = max(pairs, key=lambda k: pairs[k])
            parts.append(f"the remaining pair {best.replace('-', '–')}, without the reviewer "
                         f"the others agree with least: {pairs[best]:.2f}")
        if _finite(m.ac1_multirater):
            parts.append(f"multi-rater AC1: {m.ac1_multirater:.3f}")
        out.append(Headline(
            key=f"ac1_{stage[:2]}", chapter=stage, label=f"Gwet's AC1, {round_name}",
            value=f"{m.ac1_pairwise_mean:.2f}", detail="; ".join(parts)))
    return out


def headline_numbers(metrics: Mapping[str, Any]) -> list[Headline]:
    """The landing page's numbers, in reading order, from the stages' typed metrics.

    A stage that did not run (or a number it could not compute) contributes nothing."""
    out: list[Headline] = []
    corpus = metrics.get(graph.CORPUS)
    if corpus is not None:
        complete = "complete" if corpus.complete else "partial"
        out.append(Headline(key="corpus", chapter=graph.CORPUS, label="Corpus",
                            value=f"{corpus.n_conversations:,} of {corpus.n_expected:,} "
                                  "conversations", detail=complete))
    subset = metrics.get(graph.SUBSET)
    if subset is not None:
        hashes, matches = subset.hashes(), subset.matches()
        for key, n in subset.sizes().items():
            detail = f"sha256 {hashes[key]}"
            if key in matches:
                detail += ("; identical to the released file" if matches[key]
                           else "; differs from the released file")
            out.append(Headline(key=f"subset_{key}", chapter=graph.SUBSET,
                                label=study.SUBSET_TITLES.get(key, key),
                                value=f"{n:,} conversations", detail=detail))
    out += _review_headlines(metrics.get(graph.REVIEW_ROUND1), graph.REVIEW_ROUND1, "round 1")
    out += _review_headlines(metrics.get(graph.RECALL), graph.RECALL, "round 2 (recall)")
    scores = metrics.get(graph.SCORES)
    if scores is not None and scores.ranking:
        top = [f"{i}. {study.display_name(model)}"
               + (f" ({scores.panel_mean[model]:.3f})"
                  if _finite(scores.panel_mean.get(model)) else "")
               for i, model in enumerate(scores.ranking[:3], start=1)]
        where = study.SUBSET_TITLES.get(scores.subset, scores.subset)
        detail = f"panel mean on {where}, of {len(scores.ranking)} candidates"
        if scores.point_estimates_only:
            detail += "; point estimates"
        out.append(Headline(key="ranking", chapter=graph.SCORES, label="Top of the ranking",
                            value=", ".join(top), detail=detail))
    judges = metrics.get(graph.JUDGES)
    if judges is not None:
        taus = [t for t in judges.kendall_tau.values() if _finite(t)]
        if taus:
            lo, hi = min(taus), max(taus)
            where = study.SUBSET_TITLES.get(judges.subset, judges.subset)
            pairs = f"{len(taus)} judge pair{'s' if len(taus) != 1 else ''}"
            out.append(Headline(key="judge_tau", chapter=graph.JUDGES,
                                label="Judges' rank agreement (Kendall's τ)",
                                value=f"{lo:.3f}" if lo == hi else f"{lo:.3f} to {hi:.3f}",
                                detail=f"on {where}; {pairs}"))
    harness = metrics.get(graph.HARNESS)
    if harness is not None and _finite(harness.clipped_mean):
        n = f"n = {harness.n_scored:,}"
        std = (f"bootstrap std {harness.bootstrap_std:.3f}"
               if _finite(harness.bootstrap_std) else "")
        if _finite(harness.delta) and _finite(harness.published):
            src = f" ({harness.published_source})" if harness.published_source else ""
            value = f"{harness.clipped_mean:.3f} against the published {harness.published:.2f}"
            detail = (f"difference {harness.delta:+.3f}; published figure{src}; "
                      f"{', '.join(x for x in (std, n) if x)}")
        else:
            value = f"{harness.clipped_mean:.3f}"
            detail = ", ".join(x for x in (std, n, "no published figure to compare") if x)
        if (_finite(harness.mean_difference_vs_released)
                and harness.n_common_with_released):
            detail += (f"; {harness.mean_difference_vs_released:+.3f} against the released "
                       f"run on the {harness.n_common_with_released:,} conversations in "
                       "common")
        out.append(Headline(key="harness", chapter=graph.HARNESS,
                            label="Harness check (GPT-4.1, HealthBench-Hard)",
                            value=value, detail=detail))
    return out


# ---------------------------------------------------------------------------------------------
# pages (MyST Markdown written into the Sphinx source folder)


def _cell(text: object) -> str:
    """A value shown as text in Markdown prose or a table cell (``escape.md_text``)."""
    return escape.md_text(text)


def _code(text: object, cell: bool = True) -> str:
    """A value shown verbatim as inline code (``escape.md_code``), by default in a table cell."""
    return escape.md_code(text, cell=cell)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def _hashes(text: str) -> str:
    """Markdown text with each sha256 in it shortened, the whole hash on hover
    (``vocabulary.identifier_html``)."""
    return _HASH.sub(lambda m: vocabulary.identifier_html(m.group(0), shown=12), text)


def _yaml_block(data: object) -> str:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"```yaml\n{text}```\n"


def _chapter_link(text: str, chapter: str, chapters: Sequence[str]) -> str:
    """``text`` linking to a chapter: a Markdown link to the chapter's notebook, its text
    escaped once like any other (``_cell``). A ``{doc}`` role cannot carry every text: its
    title has no escape for a ``<``, which would start the role's target."""
    if chapter not in chapters:
        return _cell(text)
    return f"[{_cell(text)}]({chapter}.ipynb)"


def _profile_values(profile: str | None) -> dict[str, Any] | None:
    """The profile's values as its YAML sets them (None when it cannot be loaded here)."""
    if not profile:
        return None
    from hbpsych_utils.core import config

    try:
        return config.load_profile(profile).model_dump(mode="json", exclude_unset=True)
    except (config.ProfileError, OSError, ValueError):
        return None


STATE_WORDS = {"current": "current", "not_current": "not current", "failed": "failed",
               "not_run": "not run", "not_in_profile": "not in this profile"}


def state_sentence(s: StageState, command: str) -> str:
    """What a chapter's banner and the landing page say about a stage that is not current."""
    word = STATE_WORDS[s.state].capitalize()
    fix = f" Bring it up to date with {_code(command, cell=False)}." if command else ""
    return f"**{word}**: {_cell(s.reason)}.{fix}"


LEDGER_PAGE = "ledger"
METHODS_PAGE = "methods"
SEARCH_PAGE = "search.html"
ROUND_INSTRUMENTS = {graph.REVIEW_ROUND1: "Round 1", graph.RECALL: "Round 2 (recall)"}


def _url(url: object) -> str:
    """A web address as a link that wraps (anything else as text)."""
    text = str(url or "?")
    if not text.startswith(("https://", "http://")):
        return _code(text, cell=False)
    return f'<a class="url" href="{escape.html_text(text)}">{escape.html_text(text)}</a>'


def _html_link(text: str, href: str) -> str:
    """A link to a file the book carries that is not a page (MyST passes inline HTML)."""
    return f'<a href="{escape.html_text(href)}">{escape.html_text(text)}</a>'


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
    items.append(f"- {_html_link('Search', SEARCH_PAGE)} the book.")
    if instruments:
        links = ", ".join(_html_link(ROUND_INSTRUMENTS[stage], href)
                          for stage, href in instruments.items())
        items.append(f"- The clinicians' review instruments, as they opened them: {links} "
                     "(one self-contained page each; ratings stay in the browser until "
                     "exported).")
    if graph.EXPLORER in chapters:
        items.append(f"- {_chapter_link('The grade explorer', graph.EXPLORER, chapters)}: "
                     f"{explorer_note}")
    items.append(f"- {{doc}}`Provenance <{PROVENANCE_PAGE}>`: the profile, commit, artifacts, "
                 "packages and spend of this run.")
    return "\n".join(items) + "\n"


def explorer_note(metrics: Mapping[str, Any]) -> str:
    """How to open the grade explorer, and on which run (it needs per-conversation verdicts)."""
    live = getattr(metrics.get(graph.GRADING), "mode", None) == graph.LIVE
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


def landing_markdown(profile: str, metrics: Mapping[str, Any], chapters: Sequence[str],
                     description: str = "", overrides: Mapping[str, Any] | None = None,
                     states: Mapping[str, StageState] | None = None,
                     command: str = "", reproduced: ledger.Summary | None = None,
                     find: str = "", extra_pages: Sequence[str] = (),
                     judges: tuple[list[str], str] | None = None,
                     level: float = study.CI_LEVEL, card: str = "") -> str:
    """The landing page: the study, how much of the paper this run reproduces (``reproduced``,
    the ledger's summary), where everything is (``find``), this run's profile, each stage's
    mode and state, the headline numbers (each marked when its chapter is not current),
    contents."""
    states = states or {}
    parts = [f"# HealthBench-Psych: the {_code(title_name(profile), cell=False)} run\n",
             STUDY_SUMMARY + "\n"]
    if reproduced is not None:
        parts.append(f"**{reproduced.sentence()}** See the "
                     f"{{doc}}`reproduction ledger <{LEDGER_PAGE}>`.\n")
    if find:
        parts.append("## Find your way\n")
        parts.append(find)
    parts.append(f"## This run\n\nProfile **{_cell(profile)}**"
                 + (f": {_cell(description.strip())}" if description.strip() else ".")
                 + "\n")
    if judges:
        panel, how = judges
        parts.append(f"Judges: the {_cell(vocabulary.panel_phrase(panel))} {_cell(how)}. "
                     f"Intervals are at the {_cell(vocabulary.level_text(level))} level "
                     "(`ci_level`).\n")
    if overrides:
        parts.append("Tweaked on the command line: " + ", ".join(
            _code(f"{k}={json.dumps(v, default=str)}", cell=False) for k, v in overrides.items())
            + f" (see {{doc}}`provenance <{PROVENANCE_PAGE}>`).\n")
    stale = [s for s in states.values() if s.state in ("not_current", "failed")]
    if stale:
        parts.append(f"**{len(stale)} of {len(states)} chapters are not current**: their "
                     "numbers are not this run's until the runner runs them again "
                     f"({_code(command, cell=False)}).\n")
    rows = []
    for stage in graph.STAGES:
        m = metrics.get(stage)
        st = states.get(stage)
        if st is not None and st.state == "not_in_profile":
            continue
        mode = getattr(m, "mode", None) if m is not None else None
        round2 = getattr(m, "round2", None) if m is not None else None
        shown = (mode or "–") + (f" (round 2 {round2.replace('_', ' ')})" if round2 else "")
        word = (STATE_WORDS[st.state] if st is not None else "unknown")
        if st is not None and not st.current:
            word = f"**{word}**: {_cell(st.reason)}"
        rows.append((_chapter_link(f"{stage[:2]} · {graph.spec(stage).title}", stage, chapters),
                     _cell(shown), word))
    parts.append("Each stage runs in a mode: *replay* or *paper* reads the released study's "
                 "files, *live* calls models through the engine.\n")
    parts.append(vocabulary.markdown_table(["Chapter", "Mode", "State"], rows,
                                           ["name", "name", "text"]))
    heads = headline_numbers(metrics)
    parts.append("## Headline numbers\n")
    if heads:
        parts.append("Each number links to the chapter that computed it; a number whose "
                     "chapter is not current is marked so.\n")
        parts.append(vocabulary.markdown_table(["", "This run", "Detail"], [
            (_cell(h.label), _chapter_link(h.value, h.chapter, chapters)
             + _not_current_mark(states.get(h.chapter)), _hashes(_cell(h.detail)))
            for h in heads], ["name", "text", "text"]))
        parts.append(card)
    else:
        parts.append("None: the stages that compute them did not run.\n")
    parts.append("## Contents\n")
    toc = [*chapters, FIGURES_PAGE, *extra_pages, PROVENANCE_PAGE]
    parts.append("```{toctree}\n:maxdepth: 1\n\n" + "\n".join(toc) + "\n```\n")
    return "\n".join(parts)


def _nowrap(markdown: str) -> str:
    """A cell's content kept on one line ("App. I" never splits mid-token)."""
    return f'<span style="white-space: nowrap">{markdown}</span>'


def _compared_words(r: ledger.Row) -> str:
    """What the value of a row whose conditions are not the paper's says beside the paper's."""
    if r.compared == ledger.EQUAL:
        return "its value equals the paper's all the same"
    if r.compared == ledger.DIFFERS:
        return f"its value differs from the paper's {r.compared_note}".rstrip()
    return f"not computable either: {r.compared_note}"


def _printed(paper: str) -> str:
    """A value as the paper prints it: a number as text, a model's name verbatim as code (the
    paper names models by machine name, "kimi-k2.6"; the rest of the page by display name)."""
    return _cell(paper) if ledger.printed(paper).number is not None else _code(paper)


def ledger_markdown(rows: Sequence[ledger.Row], metrics: Mapping[str, Any],
                    chapters: Sequence[str]) -> str:
    """The reproduction ledger's page: the summary, every printed number by section, then what
    each number depends on (its conditions in the paper's run)."""
    summary = ledger.summary(rows)
    parts = ["# Reproduction ledger\n",
             "Every number the study's paper prints that its released artifacts determine, "
             "as the paper prints it, beside the value this run computed. Each number holds "
             "under the paper's conditions (listed below the table: the chapters it comes from, "
             "their modes and settings), and a run that departs from them says so first: "
             "*tweaked* names the setting this run changed, *not current* says its chapter was "
             "run by hand, failed or is behind an upstream change, *own replies* says the "
             "chapter generated and graded replies of its own. Under the paper's conditions, a "
             "number is *equal* when this run's value, rounded as the paper prints it, is the "
             "printed value; *differs* says by how much; *not computable* says what this run "
             "lacks. The paper's values are kept as printed in `data/paper_numbers.yaml`; this "
             "run's come from its chapters' results. A model the paper names is shown as the "
             "paper prints it, as code; this run's model by its name in the rest of the book, "
             "compared under the paper's name for it.\n",
             f"**{summary.sentence()}**\n"]
    table = []
    for r in rows:
        stage = ledger.stage_of(r.number)
        run = (_nowrap(_chapter_link(vocabulary.models_named(r.run), stage, chapters)) if r.run
               else "–")
        word = ledger.STATUS_WORDS[r.status]
        note = r.note if r.status == ledger.TWEAKED else vocabulary.models_named(r.note)
        status = (f"**{word}**" if r.status != ledger.EQUAL and r.status != ledger.NOT_COMPUTABLE
                  else word) + (f": {_cell(note)}" if note else "")
        if r.status != r.compared:
            status += f" ({_cell(vocabulary.models_named(_compared_words(r)))})"
        table.append((_nowrap(_cell(r.number.section)),
                      _cell(vocabulary.models_named(r.number.quantity)),
                      _nowrap(_printed(r.number.paper)), run, status))
    parts.append(_table(["§", "quantity", "paper", "this run", "status"], table))
    parts.append("## What each number depends on\n")
    parts.append("Derived from the stage graph: the chapters a number comes from and those they "
                 "read from, with their modes and the settings they read, at the values of the "
                 "paper's run. A setting that cannot change a number (such as which other "
                 "candidates are scored, for one candidate's mean) is left out of its "
                 "conditions.\n")
    groups: dict[str, list[ledger.Row]] = {}
    for r in rows:
        groups.setdefault(ledger.conditions(r.number).sentence(), []).append(r)
    parts.append(_table(["§", _nowrap("numbers"), "the paper's conditions"], [
        (", ".join(_nowrap(_cell(sec)) for sec in dict.fromkeys(r.number.section for r in g)),
         str(len(g)), _cell(conditions)) for conditions, g in groups.items()]))
    return "\n".join(parts)


def _not_current_mark(s: StageState | None) -> str:
    if s is None or s.current:
        return ""
    return f" (**{STATE_WORDS[s.state]}**)"


def _file_label(name: str) -> str:
    """How a download is named: its format, and the subset of a per-subset table."""
    stem, _, ext = name.rpartition(".")
    kind = {"md": "Markdown", "tex": "LaTeX"}.get(ext, ext.upper())
    key = stem.removeprefix("table1_")
    return f"{kind}, {study.SUBSET_TITLES[key]}" if key in study.SUBSET_TITLES else kind


def figure_page_tables(stage_dir: Path, made: catalogue.Catalogue,
                       scores: Any | None) -> dict[str, str]:
    """Table 1 and Table I1 as the display vocabulary shows them (HTML, by catalogue stem),
    from the Table 1 files 12_figures_tables wrote (``table1_<subset>.csv``), with the
    resamples and interval level of 08's metrics (``scores``)."""
    from hbpsych_utils.reporting import tables  # with pandas: loaded only to build a book

    item = next((i for i in made.items if i.stem == "table1"), None)
    if item is None:
        return {}
    frames = {name.removeprefix("table1_").removesuffix(".csv"):
              tables.read_table1_file(stage_dir / name) for name in item.files
              if name.startswith("table1_") and name.endswith(".csv")
              and (stage_dir / name).is_file()}
    if not frames:
        return {}
    first = next(iter(frames))
    judges = tables.judges_in(frames[first])
    level = getattr(scores, "ci_level", None) or study.CI_LEVEL
    intervals = all(tables.has_intervals(t) for t in frames.values())
    n_resamples = getattr(scores, "n_resamples", None) if intervals else None
    return {"table1": tables.paper_table1(frames, judges=judges, n_resamples=n_resamples,
                                          level=level).table().html(),
            "table_i1": tables.per_judge_table(frames[first], subset=first,
                                               judges=judges).table().html(style=False)}


def figures_markdown(stage_dir: Path, rel: str, chapters: Sequence[str], banner: str = "",
                     command: str = "", scores: Any | None = None, card: str = "") -> str:
    """The tables and figures of 12_figures_tables in the paper's order, under the paper's
    labels and with their captions (its ``catalogue.json``), each with its downloads (``rel``:
    the folder of the files' copies, relative to the page) and where it came from: chapter 12
    and ``command``, which makes it again; ``banner`` when 12 is not current. The tables are
    laid out by the display vocabulary (``scores``: 08's metrics, for Table 1's interval level
    and resamples)."""
    parts = ["# Figures and tables\n"]
    if banner:
        parts.append(f"```{{warning}}\n{banner}\n```\n")
    try:
        made = catalogue.read(stage_dir) if stage_dir.is_dir() else None
    except (ValueError, OSError) as exc:
        raise BookError(str(exc)) from exc
    if made is None or not made.items:
        parts.append(f"No figures: {_chapter_link('chapter 12', FIGURES_STAGE, chapters)} did "
                     "not run.\n")
        return "\n".join(parts)
    parts.append(f"Drawn by {_chapter_link('chapter 12', FIGURES_STAGE, chapters)}, in the "
                 "paper's order and under its labels; the compendium's own additions follow, "
                 "marked so. Each comes with its files.\n")
    laid_out = figure_page_tables(stage_dir, made, scores)
    for item in made.items:
        parts.append(f"## {_cell(item.heading)}\n")
        markdown = next((f for f in item.files if f.endswith(".md")), None)
        if item.stem in laid_out:
            parts.append(laid_out[item.stem] + "\n" + (card if item.stem == "table1" else ""))
        elif markdown is not None and (stage_dir / markdown).is_file():
            text = records.read_text(stage_dir / markdown, error=BookError).strip()
            parts.append(_cell(item.caption) + "\n")
            parts.append(text.split("\n\n", 1)[-1] + "\n")  # the table, below its caption line
        elif f"{item.stem}.png" in item.files:
            parts.append(f"![{_cell(item.heading)}]({rel}/{item.stem}.png)\n")
            parts.append(_cell(item.caption) + "\n")
        if not item.in_paper:
            parts.append("*Not in the paper: drawn by the compendium.*\n")
        if command:
            parts.append(f"{_chapter_link('Chapter 12', FIGURES_STAGE, chapters)} · "
                         f"{_code(command, cell=False)}\n")
        kinds = [(_file_label(f), f) for f in item.files]
        parts.append("Files: " + " · ".join(
            f"{{download}}`{label} <{rel}/{name}>`" for label, name in kinds
            if (stage_dir / name).is_file()) + "\n")
    return "\n".join(parts)


class Spend(BaseModel):
    """The LLM store's ledger summary as the manifest records it."""

    model_config = ConfigDict(extra="ignore")
    calls: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float
    by_model: list[dict[str, Any]] = []


def provenance_markdown(manifest: Mapping[str, Any] | None, chapters: Sequence[str],
                        metrics: Mapping[str, Any],
                        states: Mapping[str, StageState] | None = None,
                        published: str = "") -> str:
    """The provenance page: everything ``manifest.json`` records about the run, every stage's
    build (who made its outputs, when, whether they are current), and ``published``
    (:func:`published_markdown`)."""
    parts = ["# Provenance\n"]
    if manifest is None:
        parts.append("This run folder has no `manifest.json`.\n")
        return "\n".join(parts)
    git = manifest.get("git") or {}
    commit = git.get("commit") or "unknown (not a git checkout)"
    dirty = {True: " (with uncommitted changes)", False: " (clean)"}.get(git.get("dirty"), "")
    parts.append("## Run\n")
    parts.append(_table(["", ""], [
        ("profile", _code(manifest.get("profile", "?"))),
        ("package version", _code(manifest.get("package_version", "?"))),
        ("git commit", _code(commit) + dirty),
        ("Python", _code(manifest.get("python", "?"))),
        ("written at", _cell(manifest.get("written_at", "?"))),
        ("external artifacts from", "the offline mirror" if manifest.get("mirror")
         else "their upstream URLs (or the local cache)"),
    ]))
    if states:
        parts.append("## Stages\n")
        parts.append("Who made each stage's outputs and when (`build.json` in its folder), "
                     "and whether they are current.\n")
        parts.append(_table(["stage", "state", "made by", "at"], [
            (_chapter_link(name, name, chapters),
             _cell(STATE_WORDS[st.state] + (f": {st.reason}" if st.reason else "")),
             _cell({"runner": "the runner", "hand": "a notebook run by hand"}.get(
                 st.by or "", "–")), _cell(st.written_at or "–"))
            for name, st in states.items() if st.state != "not_in_profile"]))
    notebooks = manifest.get("notebooks") or []
    if notebooks:
        parts.append("## Notebooks of the last invocation\n")
        parts.append(_table(["notebook", "status", "seconds"], [
            (_chapter_link(str(nb.get("notebook")), str(nb.get("notebook")), chapters),
             _cell(nb.get("status", "?")), _cell(nb.get("seconds", "")))
            for nb in notebooks if isinstance(nb, dict)]))
    values = manifest.get("profile_values")
    if values:
        parts.append("## Profile values\n\nThe validated profile the run used, every value "
                     "(overrides applied).\n")
        parts.append(_yaml_block(values))
    elif values := _profile_values(manifest.get("profile")):
        parts.append("## Profile values\n\nAs the profile file sets them today (this manifest "
                     "does not record them; every other value is its default).\n")
        parts.append(_yaml_block(values))
    parts.append("## Overrides\n")
    overrides = manifest.get("overrides")
    if isinstance(overrides, dict) and overrides:
        parts.append("Set on the command line for this run (`--set section.key=value`), with "
                     "the values the run used:\n")
        parts.append(_table(["key", "value"], [
            (_code(k), _code(json.dumps(v, default=str))) for k, v in overrides.items()]))
    elif overrides:
        parts.append(_yaml_block(overrides))
    else:
        parts.append("None: the run used the profile as written.\n")
    artifacts = manifest.get("artifacts") or {}
    if artifacts:
        parts.append("## External artifacts\n")
        infos = {name: (info if isinstance(info, dict) else {})
                 for name, info in sorted(artifacts.items())}
        parts.append(_table(["artifact", "sha256", "from", "used by"], [
            (_code(name), vocabulary.identifier_html(info.get("sha256", "?"), shown=12),
             _cell(info.get("source", "")),
             _cell(", ".join(info.get("used_by", [])))) for name, info in infos.items()]))
        parts.append("Upstream, pinned to a commit or a content hash:\n")
        parts.append("".join(
            f"- {_code(name, cell=False)}: {_url(info.get('url'))}"
            + (f" ({_cell(info['licence'])})" if info.get("licence") else "") + "\n"
            for name, info in infos.items()))
    hashes = manifest.get("subset_sha256") or {}
    if hashes:
        parts.append("## Subset files\n")
        parts.append(_table(["subset", "sha256"], [
            (_cell(study.SUBSET_TITLES.get(k, k)), vocabulary.identifier_html(v, shown=12))
            for k, v in hashes.items()]))
    grading = manifest.get("grading") if isinstance(manifest.get("grading"), dict) else {}
    template = manifest.get("grader_template_sha256") or grading.get("grader_template_sha256")
    parts.append("## Grader template\n")
    parts.append(f"sha256 {_code(template, cell=False)}\n" if template
                 else "Not recorded (no grading stage ran).\n")
    for key, title in (("generation", "Generation"), ("grading", "Grading")):
        if isinstance(manifest.get(key), dict):
            parts.append(f"## {title} (live)\n")
            parts.append(_yaml_block(manifest[key]))
    if published:
        parts.append(published)
    parts.append("## Spend\n")
    parts.append(_spend_markdown(manifest.get("spend"), metrics))
    packages = manifest.get("packages")
    parts.append("## Package versions\n")
    if isinstance(packages, dict) and packages:
        parts.append(_table(["package", "version"], [
            (_code(k), _cell(v) if v is not None else "not installed")
            for k, v in sorted(packages.items(), key=lambda kv: kv[0].lower())]))
    elif packages:
        parts.append(_yaml_block(packages))
    else:
        parts.append(f"Not recorded by this manifest (package `hbpsych_utils` "
                     f"{_cell(manifest.get('package_version', '?'))}).\n")
    return "\n".join(parts)


def published_markdown(profile_dir: Path, src: Path, profile: str) -> str:
    """The provenance page's section on the mindbench-results artifacts published from the run
    (``python -m hbpsych_utils publish``): each publication's files copied into the book's
    sources (``src``) as downloads, while they are still the files it wrote; one that reports
    stages changed since says so, with the command that publishes again ("" when nothing was
    published)."""
    from hbpsych_utils.reporting import publish  # with pandas: loaded only to build a book

    try:
        shown = publish.for_book(profile_dir)
    except publish.PublishError as exc:
        return f"## Published results\n\n{_cell(exc)}\n"
    if not shown:
        return ""
    parts = ["## Published results\n",
             "This run's scores as mindbench-results v1 artifacts (the MindBench results "
             "hub's contract), one per candidate, each validated against the registry's schema "
             "before it was written.\n"]
    for item in sorted(shown, key=lambda x: x.record.subset):
        rec = item.record
        again = (f"python -m hbpsych_utils publish {shlex.quote(profile)} --subset "
                 f"{rec.subset}{_outputs_option(profile_dir.parent)}")
        parts.append(f"### {_cell(study.SUBSET_TITLES.get(rec.subset, rec.subset))}, "
                     f"{rec.mode} mode\n")
        names = sorted(n for n in rec.files if n.endswith(".json")
                       and n != publish.EXPORT_MANIFEST)
        folder, inside = rec.place()
        parts.append(f"{wording.count(len(names), 'artifact')} written to "
                     f"{_code(folder, cell=False)} "
                     f"{'in the run folder' if inside else '(a folder outside the run folder)'}"
                     f" at {_cell(rec.written_at)}.\n")
        if item.stale:
            parts.append(f"**Not current**: {', '.join(item.stale)} changed since they were "
                         f"written. Publish again with `{again}`.\n")
        if not item.files_ok:
            parts.append(f"The files are no longer those it wrote (missing or changed), so the "
                         f"book does not link them. Publish again with `{again}`.\n")
            continue
        dest = src / PUBLISHED_FILES / rec.subset
        dest.mkdir(parents=True, exist_ok=True)
        for name in rec.files:
            shutil.copyfile(item.folder / name, dest / name)
        rel = f"{PUBLISHED_FILES}/{rec.subset}"
        parts.append(f"Export manifest (the files' sha256): {{download}}"
                     f"`{publish.EXPORT_MANIFEST} <{rel}/{publish.EXPORT_MANIFEST}>`.\n")
        rows = []
        for name in names:
            items = publish.items_name(name.removeprefix(f"{publish.BENCHMARK_SLUG}--")
                                       .removesuffix(".json"))
            rows.append((_code(name), f"{{download}}`artifact <{rel}/{name}>`",
                         f"{{download}}`per item <{rel}/{items}>`" if items in rec.files
                         else "–", _code(rec.files[name][:12])))
        parts.append(_table(["file", "artifact", "per-item scores", "sha256"], rows))
    return "\n".join(parts)


def _spend_markdown(spend: object, metrics: Mapping[str, Any]) -> str:
    parts = []
    if spend is not None:
        try:
            s = Spend.model_validate(spend)
        except ValidationError:
            parts.append(_yaml_block(spend))
        else:
            parts.append(f"This run's model calls: {s.calls:,} calls, {s.input_tokens:,} input "
                         f"and {s.output_tokens:,} output tokens, US$ {s.cost:.4f}.\n")
            if s.by_model:
                parts.append(_table(["provider", "model", "mode", "calls", "cost (US$)"], [
                    (_cell(r.get("provider", "")), _code(r.get("model", "")),
                     _cell(r.get("mode", "")), _cell(r.get("calls", "")),
                     _cell(r.get("cost", ""))) for r in s.by_model]))
    released = [(label, getattr(metrics.get(stage), key, None)) for stage, key, label in (
        (graph.GENERATION, "spend_generate_usd", "generation"),
        (graph.GRADING, "spend_grade_usd", "grading"))]
    released = [(label, v) for label, v in released if isinstance(v, int | float)]
    if released:
        parts.append("The released study's own spend (paper mode, from its run log): "
                     + ", ".join(f"{label} US$ {v:,.2f}" for label, v in released) + ".\n")
    return "\n".join(parts) if parts else "No model calls recorded.\n"


# ---------------------------------------------------------------------------------------------
# chapters and the build


_SOURCE = re.compile(r'(<p class="hb-source" data-stage="[^"]*">.*?<code class="hb-command">)'
                     r"(.*?)(</code>)", re.S)
"""Where a table or figure says the command that makes it again (``vocabulary.Origin``)."""


def with_command(html: str, command: str) -> str:
    """An output's HTML with the command under each of its tables and figures replaced by
    ``command`` (the book's: the run's own options, never the executing machine's paths)."""
    return _SOURCE.sub(lambda m: m.group(1) + escape.html_text(command) + m.group(3), html)


def prepare_notebook(src: Path, dst: Path, banner: str = "", command: str = "") -> None:
    """Copy an executed notebook for the book: code folded behind a click, widget views
    replaced by their own static version where they carry one (``text/html``) and else by a
    note (the static outputs after them stay), widget state dropped (nothing to load);
    ``banner`` (Markdown), when given, is put under the chapter's title as a warning;
    ``command``, when given, is what each table and figure says makes it again."""
    import nbformat

    text = records.read_text(src, error=BookError)
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises schema, key, type and attribute errors alike
        records.read_json(src, error=BookError)  # text that is not JSON: named with its line
        raise BookError(f"{src}: not a Jupyter notebook ({type(exc).__name__}: "
                        f"{(str(exc).strip().splitlines() or [''])[0][:200]})") from None
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.setdefault("tags", [])
        if "hide-input" not in tags:
            tags.append("hide-input")
        for tag, prompt in PARAMETER_PROMPTS.items():
            if tag in tags:
                cell.metadata.setdefault("mystnb", {})["code_prompt_show"] = prompt
        for out in cell.get("outputs", []):
            if WIDGET_VIEW in out.get("data", {}):
                static = out["data"].get("text/html")  # a widget's own static version
                out["data"] = {"text/html": static} if static else {"text/markdown": WIDGET_NOTE}
                out["metadata"] = {}
            html = out.get("data", {}).get("text/html")
            if command and html:
                text = "".join(html) if isinstance(html, list) else html
                out["data"]["text/html"] = with_command(text, command)
    if banner:
        warning = nbformat.v4.new_markdown_cell(
            f"```{{warning}}\n{banner}\n```")
        first = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        nb.cells.insert(first, warning)
    nbformat.write(nb, str(dst))


def chapter_banner(s: StageState | None, command: str) -> str:
    """The warning a chapter that is not current carries ("" when it is current, or when the
    profile does not run its stage: nothing can bring it up to date, and it has no chapter)."""
    if s is None or s.current or s.state == "not_in_profile":
        return ""
    return (state_sentence(s, command) + " This page shows the runner's last execution of "
            "the notebook, which may not match the stage's outputs.")


def sphinx_config(title: str, banner: str) -> dict[str, Any]:
    """The Sphinx configuration of the book: MyST-NB with execution off, sphinx-book-theme,
    offline (the theme ships its scripts, styles and icon fonts; search summaries, which fetch
    pages, are off because ``file://`` forbids fetching)."""
    return {
        "project": title,
        "author": "the HealthBench-Psych compendium",
        "html_title": title,
        "extensions": ["myst_nb"],
        "nb_execution_mode": "off",
        "nb_ipywidgets_js": {},
        # never MathJax: LaTeX outputs render as their text form
        "nb_mime_priority_overrides": [("html", "text/latex", None)],
        "nb_code_prompt_show": "Show code",
        "nb_code_prompt_hide": "Hide code",
        "nb_merge_streams": True,
        "myst_enable_extensions": [],
        "html_theme": "sphinx_book_theme",
        "html_theme_options": {
            "announcement": escape.html_text(banner) if banner else "",
            "home_page_in_toc": True,
            "show_toc_level": 2,
            "use_download_button": False,
            "use_fullscreen_button": False,
            "use_repository_button": False,
            "use_source_button": False,
            "use_issues_button": False,
            "use_edit_page_button": False,
            "navigation_with_keys": False,
            "extra_footer": "",
            "footer_content_items": [],
        },
        "html_static_path": [str(SITE_FILES / "static")],
        "html_css_files": ["book.css", "tables.css"],
        # the theme reads its colour mode from here when the browser has none stored (file://)
        "html_context": {"default_mode": "light"},
        "html_extra_path": [EXTRA_DIR],
        "html_show_search_summary": False,
        "html_copy_source": False,
        "html_show_sourcelink": False,
        "html_use_index": False,
        "html_show_copyright": False,
        "html_show_sphinx": False,
        "html_domain_indices": False,
        "html_last_updated_fmt": None,
        "html_permalinks": True,
        # copies of the stage's files, the published artifacts and extra files, not pages
        "exclude_patterns": ["files", PUBLISHED_FILES, EXTRA_DIR],
        "suppress_warnings": ["misc.highlighting_failure", "myst.header"],
    }


def chapters_of(profile_dir: Path, states: Mapping[str, StageState] | None = None
                ) -> list[Path]:
    """The executed notebooks of a run folder, in order: every stage of the graph the profile
    runs (a stage that is not current keeps its page, marked so)."""
    found = sorted((Path(profile_dir) / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    states = states or {}
    return [nb for nb in found if nb.stem in graph.SPECS
            and (nb.stem not in states or states[nb.stem].state != "not_in_profile")]


def check_records(profile_dir: Path) -> None:
    """Refuse a run folder whose files are not those its build records say the runner wrote
    (:func:`hbpsych_utils.pipeline.state.check_outputs`, of the stages its profile runs),
    naming the first, with the command that rebuilds them: the book would show them as
    current."""
    manifest = _read_manifest(profile_dir)
    run = run_profile(profile_dir, manifest)
    profile = str((manifest or {}).get("profile") or profile_dir.name)
    try:
        state.check_outputs(profile_dir, update_command(profile, manifest, profile_dir.parent),
                            graph.profile_stages(run) if run is not None else None)
    except state.OutputsChanged as exc:
        raise BookError(str(exc)) from None


def _read_manifest(profile_dir: Path) -> dict[str, Any] | None:
    path = profile_dir / "manifest.json"
    if not path.is_file():
        return None
    data = records.read_json(path, error=BookError)
    return data if isinstance(data, dict) else None


EXTRA_DIR = "_extra"
"""Files the book carries as they are, outside any page (Sphinx's ``html_extra_path``)."""


def copy_instruments(profile_dir: Path, src: Path) -> dict[str, str]:
    """Copy each review round's instrument into the book; by stage, its path in the book."""
    out = {}
    for stage in ROUND_INSTRUMENTS:
        found = profile_dir / stage / INSTRUMENT_FILE
        if found.is_file():
            rel = BOOK_COPY.format(stage=stage)
            (src / EXTRA_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, src / EXTRA_DIR / rel)
            out[stage] = rel
    return out


_RELATIVE_LINK = re.compile(r"\[([^\]]+)\]\((?![a-z]+:|#)([^)\s]+)\)")


def repository_links_as_text(markdown: str, folder: str) -> str:
    """A repository document's relative links (``[the stage graph](pipeline.md)``) as text
    naming the file (``the stage graph (docs/pipeline.md in the repository)``): the book
    carries the page, not the files it links to; web links stay links."""
    return _RELATIVE_LINK.sub(lambda m: f"{m.group(1)} (`{folder}/{m.group(2)}` in the "
                              "repository)", markdown)


def methods_source() -> Path:
    """The compendium's methods page (``docs/methods.md``), rendered into every book."""
    return paths.project_root() / "docs" / f"{METHODS_PAGE}.md"


def write_sources(profile_dir: Path, src: Path) -> str:
    """Write the book's Sphinx sources for a run folder into ``src``; return the banner."""
    profile_dir = Path(profile_dir)
    metrics = read_metrics(profile_dir)
    manifest = _read_manifest(profile_dir)
    profile = str((manifest or {}).get("profile") or profile_dir.name)
    run = run_profile(profile_dir, manifest)
    states = stage_states(profile_dir, run, manifest)
    command = update_command(profile, manifest, profile_dir.parent)
    src.mkdir(parents=True, exist_ok=True)
    (src / EXTRA_DIR).mkdir(exist_ok=True)
    chapters = []
    for nb in chapters_of(profile_dir, states):
        prepare_notebook(nb, src / nb.name, chapter_banner(states.get(nb.stem), command),
                         stage_command(profile, nb.stem, manifest, profile_dir.parent))
        chapters.append(nb.stem)
    try:
        rows = ledger.ledger(metrics, run=ledger.RunConditions(run, states))
    except ledger.LedgerError as exc:
        raise BookError(str(exc)) from exc
    (src / f"{LEDGER_PAGE}.md").write_text(ledger_markdown(rows, metrics, chapters),
                                           encoding="utf-8")
    extra_pages = [LEDGER_PAGE]
    methods = methods_source()
    if methods.is_file():
        text = records.read_text(methods, error=BookError)
        (src / f"{METHODS_PAGE}.md").write_text(repository_links_as_text(text, "docs"),
                                                encoding="utf-8")
        extra_pages.append(METHODS_PAGE)
    find = find_markdown(chapters, copy_instruments(profile_dir, src),
                         METHODS_PAGE in extra_pages, explorer_note(metrics))
    whatif = whatif_page.add_to_book(profile_dir, src, metrics, manifest, run,
                                     chapter_banner(states.get(graph.SCORES), command))
    extra_pages += whatif.pages
    overrides = (manifest or {}).get("overrides")
    (src / "index.md").write_text(
        landing_markdown(profile, metrics, chapters, run.description if run else "",
                         overrides if isinstance(overrides, dict) else None, states, command,
                         reproduced=ledger.summary(rows), find=find + whatif.find,
                         extra_pages=extra_pages, judges=run_judges(metrics, run),
                         level=run.ci_level if run else study.CI_LEVEL, card=whatif.card),
        encoding="utf-8")
    stage_dir = profile_dir / FIGURES_STAGE
    if stage_dir.is_dir():
        shutil.copytree(stage_dir, src / "files", ignore=shutil.ignore_patterns("*.json"))
    (src / f"{FIGURES_PAGE}.md").write_text(
        figures_markdown(stage_dir, "files", chapters,
                         chapter_banner(states.get(FIGURES_STAGE), command),
                         stage_command(profile, FIGURES_STAGE, manifest, profile_dir.parent),
                         metrics.get(graph.SCORES), whatif.card),
        encoding="utf-8")
    (src / f"{PROVENANCE_PAGE}.md").write_text(
        provenance_markdown(manifest, chapters, metrics, states,
                            published_markdown(profile_dir, src, profile)),
        encoding="utf-8")
    return partial_banner(metrics, run)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class BuildReport(BaseModel):
    """What one build produced: the landing page, Sphinx's warnings, the seconds it took."""

    index: Path
    warnings: list[str]
    seconds: float


BUILD_DIR = ".book-build"
"""Sphinx's sources, environment and output between builds (inside the run folder), so a
re-render after a tweak re-reads only the pages whose sources changed."""


def _sync(new: Path, old: Path) -> None:
    """Make folder ``old`` hold exactly ``new``'s files, rewriting only those whose bytes
    differ (Sphinx decides what to re-read from their modification times)."""
    old.mkdir(parents=True, exist_ok=True)
    wanted = {p.relative_to(new) for p in new.rglob("*") if p.is_file()}
    for rel in wanted:
        src, dst = new / rel, old / rel
        if not dst.is_file() or dst.read_bytes() != src.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    for p in sorted(old.rglob("*"), reverse=True):
        if p.is_file() and p.relative_to(old) not in wanted:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()


def _prune(html_dir: Path, app: Any) -> None:
    """Drop what an earlier build left that this one no longer has: pages of removed
    documents, images and downloads no page refers to."""
    docs = set(app.env.found_docs)
    for page in html_dir.glob("*.html"):
        if page.stem not in docs and page.stem not in ("genindex", "search"):
            page.unlink()
    kept_downloads = {str(dest) for _docs, dest in app.env.dlfiles.values()}
    downloads = html_dir / "_downloads"
    if downloads.is_dir():
        for f in downloads.rglob("*"):
            if f.is_file() and f.relative_to(downloads).as_posix() not in kept_downloads:
                f.unlink()
    kept_images = {str(dest) for _docs, dest in app.env.images.values()}
    images = html_dir / "_images"
    if images.is_dir():
        for f in images.iterdir():
            if f.is_file() and f.name not in kept_images:
                f.unlink()


def render(profile_dir: Path, *, parallel: int = 0, fresh: bool = False) -> BuildReport:
    """Build ``<profile_dir>/book/`` and report Sphinx's warnings (``build_book`` is the
    one-line entry point; tests use this to see the warnings).

    Sphinx keeps its environment in ``<profile_dir>/.book-build/`` between builds and re-reads
    only the pages whose sources changed; ``fresh`` (or a failed build) starts it over. The
    finished site replaces ``book/`` whole."""
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    profile_dir = Path(profile_dir).resolve()
    if not profile_dir.is_dir():
        raise BookError(f"{profile_dir}: no such run folder (run the profile first)")
    check_records(profile_dir)
    start = time.perf_counter()
    dest = profile_dir / BOOK_DIR
    work = profile_dir / BUILD_DIR
    if fresh and work.exists():
        shutil.rmtree(work)
    warnings = io.StringIO()
    try:
        with tempfile.TemporaryDirectory(prefix=".book-src-", dir=profile_dir) as tmp:
            banner = write_sources(profile_dir, Path(tmp))
            _sync(Path(tmp), work / "src")
        (work / "src" / EXTRA_DIR).mkdir(exist_ok=True)  # Sphinx wants it, even empty
        title = f"HealthBench-Psych · {title_name(profile_dir.name)}"
        # as sphinx-build does: docutils' global registries are restored after the build, so
        # a second book in the same process (tests, the runner) starts clean
        with patch_docutils(None), docutils_namespace():
            app = Sphinx(str(work / "src"), None, str(work / "html"), str(work / "doctrees"),
                         "html", confoverrides=sphinx_config(title, banner), status=None,
                         warning=warnings, freshenv=False, parallel=parallel)
            app.build(force_all=False)
            _prune(work / "html", app)
        if app.statuscode:
            raise BookError(f"the book of {profile_dir} failed to build:\n{warnings.getvalue()}")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # the next build starts over
        raise
    staged = profile_dir / f".{BOOK_DIR}-new"
    if staged.exists():
        shutil.rmtree(staged)
    shutil.copytree(work / "html", staged, ignore=shutil.ignore_patterns(
        ".buildinfo", "_sources", ".doctrees"))
    if dest.exists():
        shutil.rmtree(dest)
    staged.rename(dest)
    lines = [_ANSI.sub("", x) for x in warnings.getvalue().splitlines() if x.strip()]
    return BuildReport(index=dest / "index.html", warnings=lines,
                       seconds=round(time.perf_counter() - start, 2))


def build_book(profile_dir: Path) -> Path:
    """Render a run folder into ``<profile_dir>/book/``; return the landing page's path.

    Works on any run folder, whole or partial: a stage that did not run is absent from it."""
    return render(profile_dir).index

