"""The display vocabulary (reporting.vocabulary): one label table, each value by its kind,
names left and numbers right, identifiers shortened with their whole value on hover, the panel
and the interval level named from the run; the interval level as a profile parameter, read by
the stages that compute intervals; figures whose labels stay inside them."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from hbpsych_utils import study
from hbpsych_utils.core import config
from hbpsych_utils.pipeline import graph, profiles
from hbpsych_utils.reporting import book, book_chapters, figures, labels, tables, vocabulary
from hbpsych_utils.reporting.vocabulary import Table, facts

SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")
UUID = "357a22f6-ce58-4a30-9f1a-77712c2e4ef1"


class Cells(HTMLParser):
    """Each cell of a table as (tag, class, text, title of an inner span)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self._cell: dict[str, str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("td", "th"):
            self._cell = {"tag": tag, "class": a.get("class") or "", "text": "", "title": ""}
        elif tag == "span" and self._cell is not None:
            self._cell["title"] = a.get("title") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append(self._cell)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


def cells(table: Table) -> list[dict[str, str]]:
    return Cells(table.html(style=False)).cells


def by_text(found: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c["text"]: c for c in found}


# --- the label table --------------------------------------------------------------------------

def test_every_label_of_the_label_table_is_for_readers() -> None:
    """No label is a machine name (snake_case), and no two columns of one meaning drift: every
    label starts with a capital letter or is a statistic's own symbol."""
    for name, col in labels.COLUMNS.items():
        shown = vocabulary.label(name, level=0.95)
        assert not SNAKE.match(shown), (name, shown)
        assert shown[0].isupper() or shown[0].isdigit() or shown.split()[0] in (
            "n", "p", "k", "sha256"), (name, shown)
        assert col.kind in labels.Kind.__args__, (name, col.kind)  # type: ignore[attr-defined]


def test_every_study_term_has_a_readers_name() -> None:
    """Each category, theme and axis term of the study, bare or as a tag, reads as prose."""
    for prefix, names in (("category", study.CATEGORY_LABELS), ("theme", study.THEME_LABELS),
                          ("axis", study.AXIS_LABELS)):
        for term, name in names.items():
            assert vocabulary.term_label(term) == name
            assert vocabulary.term_label(f"{prefix}:{term}") == name
            assert "_" not in name
    for model, name in study.DISPLAY_NAMES.items():
        assert vocabulary.term_label(model) == name


def test_columns_by_label_and_wide_columns_by_their_terms() -> None:
    frame = pd.DataFrame({"clipped_mean": [0.5], "input_tokens": [12], "gpt-4.1-2025-04-14":
                          [0.25], "perinatal_mh": [3], "axis:context_awareness": [0.1],
                          "n_refused": [1]})
    labels = vocabulary.lay_out(frame, level=0.95).labels
    assert labels == ["Clipped mean", "Input tokens", "GPT-4.1", "Perinatal mental health",
                      "Context awareness", "Refused"]
    # a name the table does not know keeps its words, never its underscores
    assert vocabulary.label("some_new_column", level=0.95) == "Some new column"


# --- values by kind ---------------------------------------------------------------------------

def test_each_kind_reads_as_the_paper_prints_it() -> None:
    v = vocabulary.value_text
    assert v(4359, "count") == "4,359" and v(610.0, "count") == "610" and v(2.5, "count") == "2.5"
    assert v(np.int64(12), "count") == "12"
    assert v(0.62749, "score") == "0.627" and v(-0.0001, "score") == "0.000"
    assert v(0.0123, "signed") == "+0.012" and v(-0.0123, "signed") == "-0.012"
    assert v(1443.6712, "money") == "$1,443.67" and v(0.0004, "money", decimals=5) == "$0.00040"
    assert v(0.1839, "share") == "18.4%"
    assert v(0.0004, "p_value") == "< 0.001" and v(0.0412, "p_value") == "0.041"
    assert v((0.1, 0.25), "interval") == "[0.100, 0.250]"
    assert v((np.nan, 0.2), "interval") == vocabulary.MISSING
    assert v((0.0, 0.19231), "share_interval") == "[0.0%, 19.2%]"  # a share's, as percentages
    assert v((0.05, None), "share_interval") == vocabulary.MISSING
    assert v(np.nan, "score") == vocabulary.MISSING and v(None, "count") == vocabulary.MISSING
    assert v(True, "flag") == "yes" and v(False, "flag") == "no"
    assert v("claude-haiku-4-5-20251001", "model") == "Claude Haiku 4.5"
    assert v("claude-haiku-4-5-20251001", "code") == "claude-haiku-4-5-20251001"
    assert v("hard", "subset") == study.SUBSET_TITLES["hard"]
    assert v("emergency_referrals", "term") == "Emergency referrals"
    assert v([0.1, 0.23], "scores") == "0.100, 0.230"


def test_money_shows_the_smallest_amount_of_its_column() -> None:
    assert vocabulary.money_decimals([1443.67, 2.1]) == 2
    assert vocabulary.money_decimals([0.0123, 1.0]) == 3
    assert vocabulary.money_decimals([0.000123, 0.0]) == 5


def test_integers_never_show_decimals_even_when_the_frame_holds_floats() -> None:
    """A count column stored as floats (a column with a missing value) shows integers."""
    frame = pd.DataFrame({"subset": ["v1", "outside"], "subset_conversations": [610.0, np.nan],
                          "unknown_count": [3.0, 4.0]})
    found = by_text(cells(Table(frame, index=False)))
    assert "610" in found and "610.000" not in found and "—" in found
    assert "3" in found and "4" in found


def test_names_left_numbers_right_identifiers_short_with_the_whole_value_on_hover() -> None:
    frame = pd.DataFrame({"candidate": ["gemini-3.6-flash"], "prompt_id": [UUID],
                          "n": [11], "clipped_mean": [0.25], "rationale": ["long text"]})
    found = by_text(cells(Table(frame, index=False)))
    assert found["Gemini 3.6 Flash"]["class"] == "hb-name"  # the first column: a row header
    assert found["Gemini 3.6 Flash"]["tag"] == "th"
    short = UUID[:vocabulary.ID_SHOWN] + "…"
    assert found[short]["class"] == "hb-code" and found[short]["title"] == UUID
    assert found["11"]["class"] == "hb-num" and found["0.250"]["class"] == "hb-num"
    assert found["long text"]["class"] == "hb-text"
    assert "gemini-3.6-flash" not in found and UUID not in found


def test_an_interval_is_one_cell_labelled_with_the_runs_level() -> None:
    frame = pd.DataFrame({"candidate": ["a"], "clipped_mean": [0.5], "ci_low": [0.4],
                          "ci_high": [0.6]}).set_index("candidate")
    laid = vocabulary.lay_out(frame, level=0.9)
    assert laid.labels == ["Model", "Clipped mean", "90% interval"]
    assert laid.texts == [["a", "0.500", "[0.400, 0.600]"]]
    assert vocabulary.lay_out(frame, level=0.95).labels[-1] == "95% interval"  # the study's level


def test_a_repeated_row_label_is_shown_once() -> None:
    frame = pd.DataFrame({"x": [1, 2, 3]}, index=pd.MultiIndex.from_tuples(
        [("gpt-4.1-2025-04-14", "a"), ("gpt-4.1-2025-04-14", "b"), ("gemini-2.5-flash", "a")],
        names=["judge", "candidate"]))
    texts = vocabulary.lay_out(frame, value_kind="count", level=0.95).texts
    assert [r[0] for r in texts] == ["GPT-4.1", "", "Gemini 2.5 Flash"]


def test_facts_label_and_format_each_row_by_its_kind() -> None:
    table = facts({"n_conversations": 712, "turns_mean": 2.9714, "non_english_share": 0.0421,
                   "points_all_integer": True, "sha256": "ab" * 32}, caption="The corpus",
                  level=None)
    found = cells(table)
    assert [c["text"] for c in found] == [
        "Conversations", "712", "Turns per conversation, mean", "3.0",
        "Share flagged non-English", "4.2%", "Every criterion worth whole points", "yes",
        "sha256", "abababab…"]
    assert found[1]["class"] == "hb-num" and found[9]["title"] == "ab" * 32
    assert table.frame.loc[0, "n_conversations"] == 712  # the values keep their machine names


def test_a_table_carries_its_style_caption_above_and_its_origin_below() -> None:
    vocabulary.begin_chapter(vocabulary.Origin("08_scores", "bash run_all.sh x --only 08_scores"))
    try:
        html = Table(pd.DataFrame({"n": [1]}), caption="What it shows").html()
    finally:
        vocabulary.begin_chapter(None)
    assert html.startswith("<style>") and vocabulary.TABLE_CSS_FILE.read_text() in html
    body = html.split("</style>", 1)[1]
    assert body.index('class="hb-caption"') < body.index("<table") < body.index("hb-source")
    assert "Chapter 08 · " in html and "--only 08_scores</code>" in html
    assert "hb-source" not in Table(pd.DataFrame({"n": [1]})).html(style=False)  # no chapter
    css = vocabulary.TABLE_CSS_FILE.read_text()
    for rule in ("position: sticky", "overflow-x: auto", "white-space: nowrap"):
        assert rule in css


def test_the_book_puts_the_runs_own_command_under_each_table() -> None:
    origin = vocabulary.Origin("09_judges", "bash run_all.sh smoke --only 09_judges --outputs "
                                            "/tmp/x")
    html = "<p>a</p>" + origin.html() + origin.html()
    command = book.stage_command("smoke", "09_judges", {"overrides": {"judges.subset": "hard"}})
    assert command == "bash run_all.sh smoke --only 09_judges --set 'judges.subset=\"hard\"'"
    out = book_chapters.with_command(html, command)
    assert out.count("judges.subset") == 2 and "/tmp/x" not in out


# --- the panel and the level ----------------------------------------------------------------

@pytest.mark.parametrize(("judges", "name"), [
    (list(study.JUDGE_PANEL), "three-judge panel"), (list(study.JUDGE_PANEL[:2]),
                                                      "two-judge panel"),
    (list(study.JUDGE_PANEL[:1]), "single judge")])
def test_the_panel_is_named_by_the_runs_judges(judges: list[str], name: str) -> None:
    assert vocabulary.panel_name(judges) == name
    assert vocabulary.panel_phrase(judges).startswith(name)
    assert all(study.display_name(j) in vocabulary.panel_phrase(judges) for j in judges)
    t1 = pd.DataFrame({"rank": [1], "candidate": ["x"], "panel_mean": [0.5], "ci_low": [0.4],
                       "ci_high": [0.6], "n": pd.array([9], dtype="Int64"),
                       **{j: [0.5] for j in judges}})
    caption = tables.paper_table1({"v1": t1}, level=0.9, judges=None).caption
    assert caption.startswith(name.capitalize()) and "90% intervals" in caption
    assert "95%" not in caption
    from hbpsych_utils.reporting import catalogue

    assert catalogue.label(["table1"], judges)["table1"][1] == f"{name.capitalize()} means"


@pytest.mark.parametrize(("level", "text"), [(0.95, "95%"), (0.9, "90%"), (0.975, "97.5%")])
def test_the_level_is_said_as_a_percentage(level: float, text: str) -> None:
    assert vocabulary.level_text(level) == text


@pytest.mark.parametrize(("text", "shown"), [
    ("kimi-k2.6", "Kimi K2.6"),
    ("claude-haiku-4.5", "Claude Haiku 4.5"),  # the paper's name for claude-haiku-4-5-20251001
    ("panel mean: mistral-small", "panel mean: Mistral Small"),
    ("paired difference kimi-k3 − kimi-k2.6", "paired difference Kimi K3 − Kimi K2.6"),
    ("this run has no judge gpt-4.1-2025-04-14.", "this run has no judge GPT-4.1."),
    ("claude-fable-5-1 beside claude-fable-5", "Claude Fable 5.1 beside Claude Fable 5"),
    ("0.627", "0.627"),
    ("kimi-k2.60 or xgpt-5.5", "kimi-k2.60 or xgpt-5.5"),  # not a model's whole name
])
def test_a_sentence_names_models_as_readers_do(text: str, shown: str) -> None:
    assert vocabulary.models_named(text) == shown


@pytest.mark.parametrize("bad", ["0", "1", "1.5", "-0.2", "ninety"])
def test_the_interval_level_must_lie_between_0_and_1(tmp_path, bad: str) -> None:
    with pytest.raises(config.ProfileError, match="ci_level"):
        profiles.load_profile("default", config.parse_overrides([f"ci_level={bad}"]))
    assert profiles.load_profile("default", {"ci_level": 0.9}).ci_level == 0.9
    assert profiles.load_profile("default").ci_level == study.CI_LEVEL


def test_the_stages_that_compute_intervals_read_the_level() -> None:
    """The level reaches every stage that computes an interval (in the modes it computes
    them), as a notebook parameter; a paper run reads it where its released run is broken
    down with intervals (11), so ``--set ci_level=0.9`` is never refused."""
    default, smoke = profiles.load_profile("default"), profiles.load_profile("smoke")
    readers = {s for s in graph.STAGES if "ci_level" in graph.keys_read(smoke, s)}
    assert readers == {graph.SCORES, graph.JUDGES, graph.HARNESS, graph.ANALYSES,
                       graph.JUDGE_ACCURACY, "16_self_consistency"}
    assert {s for s in graph.STAGES if "ci_level" in graph.keys_read(default, s)} == {
        graph.HARNESS}
    assert graph.unread_reason(default, "ci_level") is None
    params = graph.notebook_parameters(profiles.load_profile("smoke", {"ci_level": 0.9}),
                                       graph.SCORES, "../outputs")
    assert params["ci_level"] == 0.9


# --- figures ----------------------------------------------------------------------------------

def _outside(fig: Figure) -> list[float]:
    """How far (inches: left, bottom, right, top) what a figure draws reaches beyond its own
    canvas: what a shown or saved figure would clip without a tight bounding box."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    drawn, canvas = fig.get_tightbbox(renderer), fig.bbox_inches
    over = [canvas.x0 - drawn.x0, canvas.y0 - drawn.y0, drawn.x1 - canvas.x1,
            drawn.y1 - canvas.y1]
    return [round(x, 2) for x in over if x > 0.01]


def test_heatmap_labels_stay_inside_the_figure_and_read_as_prose() -> None:
    """Figure A2's rotated category labels (the longest of the study's) are drawn inside the
    figure and by their readers' names."""
    cats = [study.CATEGORY_LABELS[c] for c in ("psychotherapy_access", "suicidality_self_harm",
                                               "cognitive_neuro", "perinatal_mh")]
    table = pd.DataFrame(np.linspace(0.1, 0.9, 8).reshape(2, 4), columns=cats,
                         index=["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001"])
    fig = figures.score_heatmap.__wrapped__(table, title="Panel score by modal clinician "
                                            "category: HealthBench-Psych v1", note="x")
    assert _outside(fig) == []
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == cats
    assert [t.get_text() for t in ax.get_yticklabels()] == ["GPT-4.1", "Claude Haiku 4.5"]


def test_figures_state_the_runs_interval_level() -> None:
    t1 = pd.DataFrame({"panel_mean": [0.5, 0.4], "ci_low": [0.4, 0.3], "ci_high": [0.6, 0.5],
                       "n_panel": [9, 9]}, index=["a", "b"])
    fig = figures.panel_ranking.__wrapped__(t1, subset="v1", level=0.9)
    assert "90% bootstrap intervals" in fig.axes[0].get_title(loc="left")
    assert _outside(fig) == []


def _ranked() -> pd.DataFrame:
    return pd.DataFrame({"panel_mean": [0.62, 0.55, 0.31], "ci_low": [0.5, 0.45, 0.2],
                         "ci_high": [0.7, 0.66, 0.42], "n_panel": [12, 12, 12]},
                        index=list(study.CANDIDATES[:3]))


FIGURES = {
    "categories": lambda: figures.category_distribution.__wrapped__(
        {**{c: 10 - i for i, c in enumerate(study.CATEGORY_LABELS) if c != "none"},
         "no category majority": 3}, title="HealthBench-Psych v1: modal reviewer category"),
    "judge bias": lambda: figures.judge_bias.__wrapped__(
        {"severity": {j: 0.01 * i for i, j in enumerate(study.JUDGE_PANEL)},
         "self_preference_raw": {j: 0.02 for j in study.JUDGE_PANEL},
         "self_preference_corrected": {j: -0.01 for j in study.JUDGE_PANEL},
         "n_candidates": 20}, subset="HealthBench-Psych-Hard v1", judges=None, level=0.95),
    "length": lambda: figures.length_scatter.__wrapped__(
        pd.DataFrame({"mean_chars": [400.0, 2600.0, 5200.0], "clipped_mean": [0.3, 0.5, 0.6],
                      "adjusted_mean": [0.31, 0.48, 0.5]}, index=list(study.CANDIDATES[:3])),
        title="Panel score against mean reply length: HealthBench-Psych v1", note="x"),
    "worst-at-k": lambda: figures.worst_at_k_curves.__wrapped__(pd.DataFrame({
        "candidate": list(study.CANDIDATES[:2]) * 3, "k": [1, 1, 2, 2, 3, 3],
        "clipped_mean": [0.6, 0.5, 0.5, 0.4, 0.45, 0.3], "ci_low": [0.5] * 6,
        "ci_high": [0.7] * 6}), title="Worst-at-k: HealthBench-Psych v1", note="x"),
    "placement": lambda: figures.f1_placement.__wrapped__(pd.DataFrame({
        "rater": ["phys-A", "physicians", study.JUDGE_PANEL[0], "panel"] * 2,
        "kind": ["physician", "physicians", "judge", "panel"] * 2,
        "category": ["all"] * 4 + ["emergency_referrals"] * 4,
        "balanced_f1": [0.6, 0.62, 0.7, 0.72, 0.5, 0.55, 0.6, 0.61]}), title="Judges placed"),
}


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_draws_its_labels_inside_itself(name: str) -> None:
    fig = FIGURES[name]()
    assert _outside(fig) == [], name
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    for slug in (*study.CATEGORY_LABELS, *study.THEME_LABELS, *study.AXIS_LABELS):
        if "_" in slug:
            assert not any(slug in t for t in texts), (name, slug)
    assert not any(m in t for t in texts for m in study.JUDGE_PANEL), name


def test_a_lead_column_comes_first_as_the_row_header() -> None:
    frame = pd.DataFrame({"phase": ["generation"], "model": ["gpt-4.1-2025-04-14"],
                          "calls": [610]})
    table = Table(frame, index=False, lead=["model"])
    assert table.shown().labels == ["Model", "Phase", "Calls"]
    assert cells(table)[3] == {"tag": "th", "class": "hb-name", "text": "GPT-4.1", "title": ""}
    assert list(table.frame.columns) == ["phase", "model", "calls"]  # the file's layout kept
