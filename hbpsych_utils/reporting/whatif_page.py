"""The book's what-if page: Table 1 under every scoring choice, switched without a kernel.

The page is static and self-contained: every Table 1, comparability card and command is
computed here, at book time, by :mod:`hbpsych_utils.evaluation.whatif` from the run folder's
files (the released matrices in paper mode, 07's ``scores.csv`` in a live run), laid out by the
display vocabulary, and written into the page as JSON (``core.escape.json_script``). A few lines
of plain JavaScript only pick the precomputed HTML of the state the controls name: no
statistic is computed in the browser, nothing is fetched, and the page works from ``file://``.
Without JavaScript it shows the run's own Table 1.

Under the switcher, how robust the ranking is over every choice: a finding with the study's
thresholds (``study.RANKING_TOP_K``, ``ROBUST_SHARE``, ``LARGE_RANK_MOVE``, ``TAU_SAME_ORDER``),
a figure of each model's place under every choice, and the table of all choices (with its CSV).

The book calls :func:`add_to_book` once while it writes its pages; it also gets the headline
comparability card (:mod:`hbpsych_utils.reporting.comparability`) for the landing and figures
pages, and this module links the page and the card from chapter 08's page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core import escape
from hbpsych_utils.core.sources import ArtifactError
from hbpsych_utils.evaluation import score_sources, scoring, whatif
from hbpsych_utils.evaluation.whatif import Choice, LiveData, PaperData, Space, WhatIf
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.reporting import comparability, vocabulary, whatif_commands
from hbpsych_utils.reporting.tables import LATER_MARK, LATER_NOTE
from hbpsych_utils.reporting.whatif_switcher import Dim, State, switcher_html

PAGE = "whatif"
"""The page's name in the book (``whatif.html``)."""
FILES = "whatif"
"""The folder of the page's figure and download, in the book's sources."""
ROBUSTNESS_CSV = "robustness.csv"
FIGURE = "robustness.png"


@dataclass(frozen=True)
class BookAdditions:
    """What the what-if adds to the book: its page, a line for "Find your way", and the
    headline score's comparability card (Markdown, for the landing and figures pages)."""

    pages: list[str] = field(default_factory=list)
    find: str = ""
    card: str = ""


# --------------------------------------------------------------------------------------------
# The run's files, read as the stages read them


@dataclass(frozen=True)
class RunFiles:
    """A run folder read like a stage reads its upstream (``score_sources.RunFiles``)."""

    root: Path

    def upstream(self, stage: str, filename: str) -> Path:
        path = self.root / stage / filename
        if not path.is_file():
            raise whatif.WhatIfError(f"{path} is missing: stage {stage} did not write it")
        return path

    def upstream_metrics(self, stage: metrics_models.StageMetrics[metrics_models.M]
                         ) -> metrics_models.M:
        return metrics_models.read(self.root, stage)

    def fetch(self, artifact: str) -> Path:
        from hbpsych_utils.core import sources

        return sources.fetch(artifact)


@dataclass(frozen=True)
class Computed:
    """The what-if of one run: its choices, their Table 1s and how they move the ranking."""

    whatif: WhatIf
    data: PaperData | LiveData
    later: list[str]
    """The later models the data holds."""


def scorer(run: score_sources.RunFiles, scores: metrics_models.ScoresMetrics,
           judges: Sequence[str] | None, *, penalty_variant: str, n_resamples: int, seed: int,
           level: float) -> tuple[whatif.Scorer, list[str]]:
    """The choices 08's Table 1 allows, read from ``run`` (a stage's folder or a finished
    run) in 08's mode, ready to score against 08's ranking; and the later models the data
    holds. ``judges``: the run's panel (07's; the released matrices' judges when None)."""
    data: whatif.PaperData | whatif.LiveData
    if scores.mode == graph.LIVE:
        data = whatif.live_data(run, penalty_variant=penalty_variant, n_resamples=n_resamples,
                                seed=seed, level=level)
        found = {c for t in data.scores.values() for c in t["candidate"]}
        have = list(data.scores)
    else:
        data = whatif.paper_data(run)
        found = {c for t in data.per_judge.values() for c in t.index}
        have = list(data.per_judge)
    subsets = [scores.subset] + [k for k in study.SUBSET_KEYS if k in have and k != scores.subset]
    later = [c for c in study.LATER_CANDIDATES if c in found]
    space = Space(scores.mode, tuple(judges or scores.per_judge),
                  tuple(s for s in subsets if s in have), bool(later))
    reference = whatif.reference_choice(space, scores.subset, scores.include_later)
    return whatif.Scorer(space, data, reference, scores.ranking), later


def compute(profile_dir: Path, profile: Profile, metrics: Mapping[str, Any]) -> Computed:
    """Every choice of the run scored (the run's mode: released matrices or ``scores.csv``) and
    compared with 08's ranking."""
    scores = metrics[graph.SCORES]
    live = scores.mode == graph.LIVE
    judges = getattr(metrics.get(graph.GRADING), "judges", None) if live else None
    score, later = scorer(RunFiles(Path(profile_dir)), scores, judges,
                          penalty_variant=profile.analyses.length_penalty,
                          n_resamples=scores.n_resamples or profile.n_resamples,
                          seed=profile.seed, level=scores.ci_level or profile.ci_level)
    for choice in score.whatif.space.distinct():
        score(choice)
    return Computed(score.whatif, score.data, later)


# --------------------------------------------------------------------------------------------
# A choice in words, and its controls


def panel_words(judges: Sequence[str], space: Space) -> str:
    """A panel as its control names it: "All three judges (the run's panel)", "GPT-4.1 only",
    "GPT-4.1 and Gemini 2.5 Flash"."""
    if tuple(judges) == space.judges and len(judges) > 1:
        n = len(judges)
        word = "Both" if n == 2 else f"All {vocabulary.NUMBER_WORDS[n] if n < 11 else n}"
        return f"{word} judges (the run's panel)"
    if len(judges) == 1:
        return f"{study.display_name(judges[0])} only"
    return vocabulary.model_names(judges)


def describe(choice: Choice, space: Space, later: Sequence[str] = ()) -> str:
    """One sentence naming a choice: panel, rule, subset, models, and in a live run refusals,
    clip and length."""
    n = len(choice.judges)
    if n == 1:
        who = f"{study.display_name(choice.judges[0])} alone"
    else:
        who = f"the {choice.combine} of {vocabulary.model_names(choice.judges)}"
    parts = [who, f"on {study.SUBSET_TITLES.get(choice.subset, choice.subset)}"]
    if space.has_later:
        parts.append(f"with the {len(later)} later models" if choice.later
                     else "the study's models only")
    if space.live:
        parts.append("refusals left out" if choice.refusals_excluded else "refusals kept")
        parts.append("the mean clipped" if choice.clipped else "the mean unclipped")
        if choice.length_adjusted:
            parts.append("length-adjusted")
    text = ", ".join(parts)
    if choice.combine == "median" and n < 3:
        text += f" (with {vocabulary.NUMBER_WORDS[n]} judge{'s' if n > 1 else ''} the median " \
                "is the mean)"
    return text[0].upper() + text[1:]


CONTROL_COLUMNS = {"judges": "whatif_judges", "combine": "whatif_combine", "subset": "subset",
                   "later": "whatif_later", "refusals": "whatif_refusals",
                   "clip": "whatif_mean", "length": "whatif_length"}
"""Each control by the column that names the same choice in the robustness table: a control
is labelled as its column is (the vocabulary's label table), in the page and the notebook."""


def dims(space: Space, later: Sequence[str]) -> list[Dim]:
    """The controls a run's data allows (only those with a choice to make), each labelled by
    the vocabulary (:data:`CONTROL_COLUMNS`)."""
    options: dict[str, list[tuple[str, str]]] = {
        "judges": [(_judges_value(p, space), panel_words(p, space)) for p in space.panels()]}
    if len(space.combines()) > 1:
        options["combine"] = [("mean", "the mean of the judges"),
                              ("median", "the median of the judges")]
    if len(space.subsets) > 1:
        options["subset"] = [(k, study.SUBSET_TITLES.get(k, k)) for k in space.subsets]
    if space.has_later:
        options["later"] = [("0", "out (the study's models)"),
                            ("1", f"in (the {len(later)} later models)")]
    if space.live:
        options["refusals"] = [("0", "kept (graded as returned)"),
                               ("1", "left out (each model's own)")]
        options["clip"] = [("1", "clipped to [0, 1]"), ("0", "unclipped")]
        options["length"] = [("0", "raw scores"), ("1", "length-adjusted")]
    return [Dim(name, vocabulary.label(CONTROL_COLUMNS[name], None), values)
            for name, values in options.items()]


def _judges_value(judges: Sequence[str], space: Space) -> str:
    return ".".join(str(space.judges.index(j)) for j in judges)


def state_key(choice: Choice, space: Space, controls: Sequence[Dim]) -> str:
    """The key the page's controls form for ``choice`` (their values joined by ``|``)."""
    value = {"judges": _judges_value(choice.judges, space), "combine": choice.combine,
             "subset": choice.subset, "later": str(int(choice.later)),
             "refusals": str(int(choice.refusals_excluded)),
             "clip": str(int(choice.clipped)), "length": str(int(choice.length_adjusted))}
    return "|".join(value[d.name] for d in controls)


# --------------------------------------------------------------------------------------------
# Table 1 of a choice


def change_text(change: int | None) -> str:
    """A change of place: "+2" (up), "−1" (down), "0"; "—" for a model the study did not
    rank."""
    if change is None:
        return vocabulary.MISSING
    return f"+{change}" if change > 0 else f"−{-change}" if change < 0 else "0"


def outcome_table(computed: Computed, choice: Choice) -> vocabulary.Table:
    """Table 1 under ``choice`` as the vocabulary lays it out: rank, model, score (with its
    interval in a live run), n, and the change against the study's order."""
    w = computed.whatif
    outcome, move = w.outcome(choice), w.move(choice)
    t = outcome.table
    later = ~t["in_study"].astype(bool)
    frame = pd.DataFrame({
        "whatif_rank": t["rank"].astype(int).to_numpy(),
        "model": [study.display_name(str(c)) + (f" {LATER_MARK}" if late else "")
                  for c, late in zip(t.index, later, strict=True)],
        "score": t["score"].to_numpy(float)})
    if w.space.live:
        frame["ci_low"] = t["ci_low"].to_numpy(float)
        frame["ci_high"] = t["ci_high"].to_numpy(float)
    ns = sorted(set(t["n"].astype(int)))
    if len(ns) > 1:
        frame["n"] = t["n"].astype(int).to_numpy()
    frame["whatif_change"] = [change_text(move.changes.get(str(c))) for c in t.index]
    notes = [LATER_NOTE] if bool(later.any()) else []
    if outcome.table["undefined"].ne("").any():
        notes.append(f"— no interval: {scoring.ONE_CONVERSATION}.")
    same_n = f", n = {ns[0]:,} each" if len(ns) == 1 else ""
    return vocabulary.Table(frame, caption=f"Table 1 under this choice{same_n}", index=False,
                            kinds={"model": "name"}, level=w.level or study.CI_LEVEL,
                            notes=notes)


def choice_card(computed: Computed, choice: Choice, base: comparability.Card,
                sizes: Mapping[str, int | None], hashes: Mapping[str, str | None]
                ) -> comparability.Card:
    """The comparability card of a state: the run's card with this choice's judges, rules,
    subset and n."""
    data = computed.data
    variant = data.penalty_variant if isinstance(data, whatif.LiveData) else None
    return base.varied(judges=choice.judges, combine=choice.canonical().combine,
                       subset=choice.subset, subset_size=sizes.get(choice.subset),
                       subset_sha256=hashes.get(choice.subset), clipped=choice.clipped,
                       length_variant=variant if choice.length_adjusted else None,
                       refusals_excluded=choice.refusals_excluded,
                       n=[int(v) for v in computed.whatif.outcome(choice).table["n"]])


# --------------------------------------------------------------------------------------------
# The switcher's states


def states(computed: Computed, cards: Mapping[Choice, comparability.Card | None],
           commands: Mapping[Choice, str]) -> dict[str, State]:
    """Every setting of the controls (one per choice of the grid): its words, Table 1, card
    and command; choices that are one computation share their table and card objects."""
    w = computed.whatif
    controls = dims(w.space, computed.later)
    tables: dict[Choice, vocabulary.Table] = {}
    card_tables: dict[Choice, vocabulary.Table | None] = {}
    out = {}
    for choice in w.space.choices():
        canon = choice.canonical()
        if canon not in tables:
            tables[canon] = outcome_table(computed, canon)
            card = cards.get(canon)
            card_tables[canon] = card.table() if card is not None else None
        out[state_key(choice, w.space, controls)] = State(
            describe(choice, w.space, computed.later), tables[canon], card_tables[canon],
            commands[choice])
    return out


# --------------------------------------------------------------------------------------------
# How robust the ranking is


def _moved_words(computed: Computed, choice: Choice) -> str:
    move = computed.whatif.move(choice)
    return ", ".join(f"{study.display_name(c)} ({change_text(move.changes[c])})"
                     for c in move.moved)


def robustness_reader(computed: Computed) -> vocabulary.Table:
    """The table of every distinct choice for readers: the choice in words, τ, whether the top
    is the same, the largest move and who makes it (and the supported reversals, live)."""
    frame = whatif.robustness(computed.whatif)
    choices = list(computed.whatif.moves)
    frame["whatif_judges"] = [panel_words(c.judges, computed.whatif.space) for c in choices]
    frame["largest_move"] = [change_text(computed.whatif.moves[c].largest_move) for c in choices]
    frame["moved"] = [_moved_words(computed, c) or "nobody" for c in choices]
    for col, words in (("whatif_refusals", {"kept": "kept", "excluded": "left out"}),):
        if col in frame.columns:
            frame[col] = frame[col].map(words)
    k = study.RANKING_TOP_K
    n = len(choices)
    return vocabulary.Table(
        frame, caption=f"Every scoring choice ({n:,}) against the study's order: Kendall's τ, "
        f"whether the top {vocabulary.NUMBER_WORDS[k] if k < 11 else k} are the same, and the "
        "largest move (places, among the models both rank)", index=False,
        level=computed.whatif.level or study.CI_LEVEL)


def findings(computed: Computed) -> list[str]:
    """The robustness finding, sentence by sentence (Markdown), from :func:`whatif.summarise`
    with the study's thresholds."""
    w = computed.whatif
    s = whatif.summarise(w)
    out = [_top_sentence(s, computed)]
    if s.tau_min is not None and s.tau_min_choice is not None:
        if s.tau_below == 0:
            out.append(f"Kendall's τ against the study's order is at least {s.tau_min:.3f} "
                       f"under every choice, at or above {study.TAU_SAME_ORDER:g}: the order "
                       "holds.")
        else:
            out.append(f"Kendall's τ against the study's order falls below "
                       f"{study.TAU_SAME_ORDER:g} under {s.tau_below:,} of {s.n_tau:,} choices; "
                       f"it is lowest, {s.tau_min:.3f}, for "
                       f"{_lower(describe(s.tau_min_choice, w.space, computed.later))}.")
    if s.largest_choice is None:
        out.append("No choice moves any model of the study's order.")
    else:
        out.append(f"The largest move is {abs(s.largest_move)} place"
                   f"{'s' if abs(s.largest_move) != 1 else ''} "
                   f"({_moved_words(computed, s.largest_choice)}), for "
                   f"{_lower(describe(s.largest_choice, w.space, computed.later))}; "
                   f"{s.far:,} of {s.n_choices:,} choices move some model "
                   f"{study.LARGE_RANK_MOVE} places or more.")
    if s.with_reversal is not None:
        out.append(f"Under {s.with_reversal:,} of {s.n_choices:,} choices the intervals support "
                   "a reversal of the study's order (a model's interval entirely above that of "
                   "a model the study ranks higher); under the others every change of order "
                   "lies within the intervals.")
    return [escape.md_text(x) for x in out]


def _top_sentence(s: whatif.Summary, computed: Computed) -> str:
    k = s.top_k
    word = vocabulary.NUMBER_WORDS[k] if k < 11 else str(k)
    if s.n_models <= k:
        return (f"With {s.n_models} models in the study's ranking, its top {word} is every "
                "model, so whether it holds is no question here.")
    text = (f"The top {word} are the same {word} under {s.same_top:,} of {s.n_choices:,} "
            "scoring choices")
    if not computed.whatif.space.has_later:
        return text + _holds(s.same_top / s.n_choices, "which models make the top")
    n_later = s.n_choices - s.n_study_only
    kept_later = s.same_top - s.same_top_study_only
    text += (f". Of the {s.n_study_only:,} that score the study's models only, "
             f"{s.same_top_study_only:,} keep them"
             + _holds(s.same_top_study_only / max(s.n_study_only, 1),
                      "which of the study's models make the top")
             + f"; of the {n_later:,} that add the later models, {kept_later:,} do")
    entering = _entering(computed)
    if entering:
        text += f" ({vocabulary.model_names(entering)} enter{'s' if len(entering) == 1 else ''}" \
                " the top)"
    return text + "."


def _holds(share: float, what: str) -> str:
    return (f": {what} does not depend on these choices" if share >= study.ROBUST_SHARE
            else f": {what} depends on the choice")


def _entering(computed: Computed) -> list[str]:
    """Later models that some choice places in the top ``RANKING_TOP_K``."""
    w, k = computed.whatif, study.RANKING_TOP_K
    top = {c for choice, o in w.outcomes.items() if choice.later for c in o.ranking[:k]}
    return [c for c in computed.later if c in top]


def _lower(text: str) -> str:
    return text[0].lower() + text[1:] if text and not text[:2].isupper() else text


# --------------------------------------------------------------------------------------------
# The page


def page_markdown(computed: Computed, switcher: str, *, banner: str = "",
                  figure: str = "", csv_name: str = "") -> str:
    """The page's MyST source: what it does, the switcher, then the robustness finding,
    figure and table."""
    w = computed.whatif
    paper = not w.space.live
    source = ("the released per-judge matrices (one clipped mean per model and judge): a "
              "panel here is the mean of its judges' clipped means, and the median panel "
              "the median of them; point estimates, without intervals" if paper else
              "this run's per-conversation grades: the panel combines each conversation's "
              "scores (mean or median), then the mean over conversations is clipped as the "
              "study does; every Table 1 carries its bootstrap interval "
              f"({vocabulary.level_text(w.level or study.CI_LEVEL)})")
    parts = ["# What if? Table 1 under other scoring choices\n"]
    if banner:
        parts.append(f"```{{warning}}\n{banner}\n```\n")
    parts.append(escape.md_text(
        "Which judges form the panel, how it combines them, the subset, the later models"
        + (", refusals, the clip and the length adjustment" if not paper else "")
        + ": choose, and Table 1 shows the ranking under that choice, each model's change "
        "against the study's order, its comparability card, and the command that makes it a "
        "recorded run where a profile setting exists (the change in rank is against the "
        "study's order, counted among the models both rank, so a later model placed above "
        "others does not move them). Every table was computed when the book "
        f"was built, from {source}; the page computes nothing and fetches nothing.") + "\n")
    parts.append(f"```{{raw}} html\n{switcher}\n```\n")
    parts.append("## How robust is the ranking?\n")
    parts.append(" ".join(findings(computed)) + "\n")
    if figure:
        parts.append(f"![Each model's place under every scoring choice]({figure})\n")
        parts.append(escape.md_text(
            f"Each model's place under the {len(w.moves):,} scoring choices (among the "
            "study's models, 1 = first): the line spans the places it takes, the dots how "
            "often (larger: more choices), the black mark its place in the study's order.")
            + "\n")
    table = robustness_reader(computed).html(style=False)
    parts.append(f"```{{raw}} html\n<details><summary>All {len(w.moves):,} scoring choices, "
                 f"one row each</summary>\n{table}\n</details>\n```\n")
    if csv_name:
        parts.append(f"Files: {{download}}`CSV <{csv_name}>`\n")
    return "\n".join(parts)


def _switcher_for(computed: Computed, profile_dir: Path, profile: Profile,
                  manifest: Mapping[str, Any], metrics: Mapping[str, Any]) -> str:
    base = comparability.run_card(profile, manifest, metrics)
    subsets = metrics.get(graph.SUBSET)
    sizes = subsets.sizes() if subsets is not None else {}
    hashes = subsets.hashes() if subsets is not None else dict(manifest.get("subset_sha256")
                                                                or {})
    w = computed.whatif
    cards = {c: (choice_card(computed, c, base, sizes, hashes) if base else None)
             for c in w.outcomes}
    commands = {c: whatif_commands.command_html(c, w.reference, w.space, profile, manifest,
                                                profile_dir.parent, computed.later)
                for c in w.space.choices()}
    controls = dims(w.space, computed.later)
    return switcher_html(controls, states(computed, cards, commands),
                         state_key(w.reference, w.space, controls), comparability.CARD_SUMMARY)


def write_page(src: Path, profile_dir: Path, profile: Profile, manifest: Mapping[str, Any],
               metrics: Mapping[str, Any], banner: str = "") -> Computed | None:
    """Write ``whatif.md``, its figure and CSV into the book's sources ``src``; the computed
    what-if, or None where the run has no Table 1 (08 did not run)."""
    if graph.SCORES not in metrics:
        return None
    try:
        computed = compute(profile_dir, profile, metrics)
    except (whatif.WhatIfError, scoring.ScoringError, ArtifactError, OSError, KeyError,
            ValueError) as exc:
        (src / f"{PAGE}.md").write_text(
            "# What if? Table 1 under other scoring choices\n\n"
            + escape.md_text(f"This run's data could not be scored another way: {exc}") + "\n",
            encoding="utf-8")
        return None
    folder = src / FILES
    folder.mkdir(parents=True, exist_ok=True)
    whatif.robustness(computed.whatif).to_csv(folder / ROBUSTNESS_CSV, index=False)
    # here, not at import: chapter 08 reads this module for its widget and draws nothing, and
    # matplotlib's import is about a third of a second of each of its kernels
    from hbpsych_utils.reporting import whatif_figure

    whatif_figure.save_png(whatif_figure.places(computed.whatif), folder / FIGURE)
    switcher = _switcher_for(computed, profile_dir, profile, manifest, metrics)
    (src / f"{PAGE}.md").write_text(
        page_markdown(computed, switcher, banner=banner, figure=f"{FILES}/{FIGURE}",
                      csv_name=f"{FILES}/{ROBUSTNESS_CSV}"), encoding="utf-8")
    return computed


# --------------------------------------------------------------------------------------------
# The hook the book calls


FIND_ITEM = (f"- {{doc}}`What if? <{PAGE}>`: Table 1 under other scoring choices (which "
             "judges, mean or median, the subset, the later models), switched in the page, "
             "and how robust the ranking is over all of them.\n")


def headline_card(profile: Profile, manifest: Mapping[str, Any], metrics: Mapping[str, Any],
                  computed: Computed | None) -> comparability.Card | None:
    """The headline score's card: 08's n in a live run, the released matrices' in paper mode
    (through the what-if's run's own choice, which reproduces 08's Table 1)."""
    n = comparability.headline_n(metrics)
    if not n and computed is not None:
        n = [int(v) for v in computed.whatif.outcome(computed.whatif.reference).table["n"]]
    return comparability.run_card(profile, manifest, metrics, n=n)


def add_to_book(profile_dir: Path, src: Path, metrics: Mapping[str, Any],
                manifest: Mapping[str, Any] | None, profile: Profile | None,
                banner: str = "", command: str = "") -> BookAdditions:
    """What the book adds for the what-if: writes ``whatif.md`` (and its files) into ``src``,
    links it and the headline card from chapter 08's page (``command``: the one that makes 08
    again, said under the card there as under each of the chapter's tables), and returns the
    page, the line for "Find your way" and the headline card (Markdown) for the landing and
    figures pages. Nothing where the run has no Table 1 or no manifest to read it with."""
    if profile is None or manifest is None or graph.SCORES not in metrics:
        return BookAdditions()
    computed = write_page(src, profile_dir, profile, manifest, metrics, banner)
    card = headline_card(profile, manifest, metrics, computed)
    card_md = card.markdown() if card is not None else ""
    link_from_chapter(src / f"{graph.SCORES}.ipynb", in_chapter(card, command))
    return BookAdditions([PAGE], FIND_ITEM, card_md)


def in_chapter(card: comparability.Card | None, command: str) -> str:
    """The card as chapter 08's page shows it: like every table of a chapter, with the chapter
    and the command that make it again under it."""
    if card is None:
        return ""
    before = vocabulary.current_origin()
    vocabulary.begin_chapter(vocabulary.Origin(graph.SCORES, command))
    try:
        return card.markdown()
    finally:
        vocabulary.begin_chapter(before)


def link_from_chapter(notebook: Path, card: str) -> None:
    """Chapter 08's page (the book's copy of the notebook) gets the headline card after its
    Table 1 and a link to the what-if page."""
    if not notebook.is_file():
        return
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    text = (f"{card}\n" if card else "") + (
        f"**What if?** The [what-if page]({PAGE}.md) shows this Table 1 under every other "
        "scoring choice the run's data allows, and how robust the ranking is over all of "
        "them.")
    at = next((i + 1 for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and ".table1(" in c.source), len(nb.cells))
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = "whatif-link"  # a fixed id: the same run gives the same page
    nb.cells.insert(at, cell)
    nbformat.write(nb, str(notebook))

