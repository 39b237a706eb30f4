"""Values from a user, a profile, a file name or the data never become markup: the helpers of
``core.escape``, and the tables, chapter steps and findings that show such values.

Markdown is rendered with MyST's own parser (what the book uses; it passes inline HTML
through), HTML is read as it is; either way the page must hold no ``<img>``, no ``<script>``
and no event-handler attribute, and a value must read back as itself."""

from __future__ import annotations

from html.parser import HTMLParser
from types import SimpleNamespace

import pandas as pd
import pytest

from hbpsych_utils.core.escape import html_text, md_code, md_text
from hbpsych_utils.pipeline.metrics import (
    FiguresTablesMetrics,
    GenerationPaperMetrics,
    GradingPaperMetrics,
    HarnessMetrics,
    JudgesMetrics,
    RefusalsMetrics,
    ScoresMetrics,
    ScreeningMetrics,
    SubsetMetrics,
    SubsetScores,
)
from hbpsych_utils.reporting import figures, tables
from hbpsych_utils.reporting.vocabulary import Table, Tables, facts
from hbpsych_utils.stages import (
    s01_corpus,
    s02_screening,
    s04_recall,
    s05_subset,
    s06_generation,
    s07_grading,
    s08_scores,
    s09_judges,
    s10_refusals,
    s11_harness_validation,
    s12_figures_tables,
    s13_explorer,
)

HOSTILE = "m`<img src=x onerror=alert(1)>`|*b* _i_ [l](x) <script>alert(2)</script> & \\"
"""A name with HTML, a backtick (ends a code span), a pipe (ends a table cell) and Markdown."""


class Markup(HTMLParser):
    """The tags and attributes of an HTML text, and its text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [f"{tag} {a}" for a, _ in attrs if a.lower().startswith("on")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def rendered(markdown: str) -> str:
    """Markdown as the book renders it (MyST's parser: CommonMark, tables, inline HTML)."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    return create_md_parser(MdParserConfig(), RendererHTML).render(markdown)


def assert_inert(html: str) -> Markup:
    found = Markup(html)
    assert not {"img", "script"} & set(found.tags), html
    assert found.handlers == [], html
    return found


def shown(obj: object) -> str:
    """What Jupyter and the book show of a chapter step: its HTML, or its Markdown rendered
    (of what it says shows it, ``stages.base.shown``)."""
    from hbpsych_utils.stages.base import shown as chapter_shows

    obj = chapter_shows(obj)
    if hasattr(obj, "_repr_html_"):
        return obj._repr_html_()
    return rendered(obj._repr_markdown_())


# ---------------------------------------------------------------------------------------------
# the helpers


def test_md_text_reads_back_as_the_value_in_prose_and_in_a_table_cell() -> None:
    found = assert_inert(rendered(f"Profile **p**: {md_text(HOSTILE)}."))
    assert "".join(found.text).strip() == f"Profile p: {HOSTILE}."
    table = rendered(f"| a | b |\n|---|---|\n| {md_text(HOSTILE)} | 1 |\n")
    found = assert_inert(table)
    assert found.tags.count("td") == 2 and HOSTILE in found.text


@pytest.mark.parametrize("value", [HOSTILE, "`", "a``b", "``x", "plain"])
def test_md_code_is_one_code_span_showing_the_value(value: str) -> None:
    found = assert_inert(rendered(f"see {md_code(value)} here"))
    assert found.tags == ["p", "code"] and value in found.text
    cell = assert_inert(rendered(f"| a | b |\n|---|---|\n| {md_code(value, cell=True)} | 1 |\n"))
    assert cell.tags.count("td") == 2 and value in cell.text


def test_identifiers_read_the_same_in_markdown_source() -> None:
    assert md_text("perinatal_mh") == "perinatal_mh"  # an inner _ never starts emphasis
    assert md_text("_x_") == "\\_x\\_"
    assert md_text("a|b\\c", markers="\\|") == "a\\|b\\\\c"


def test_html_text_is_safe_in_an_attribute() -> None:
    found = assert_inert(f'<p title="{html_text(HOSTILE)}">{html_text(HOSTILE)}</p>')
    assert found.text == [HOSTILE]


RLO, PDF = "\u202e", "\u202c"
BIDI = f"Pilot {RLO}dlrow olleh{PDF} run"
"""A value with a right-to-left override: shown raw, it reverses the text after it."""


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                     "\u2066", "\u2067", "\u2068", "\u2069"])
def test_bidi_controls_are_shown_as_their_code_points(control: str) -> None:
    """An embedding, override or isolate control never reaches a page: each is shown as its
    code point, in HTML, in Markdown prose and cells, and in code spans."""
    value = f"a{control}b"
    code = f"<U+{ord(control):04X}>"
    for out in (html_text(value), md_text(value), md_code(value), md_code(value, cell=True)):
        assert control not in out
    assert Markup(f"<p>{html_text(value)}</p>").text == [f"a{code}b"]
    assert "".join(assert_inert(rendered(f"x {md_text(value)} y")).text).strip() == (
        f"x a{code}b y")
    assert "".join(Markup(rendered(md_code(value))).text).strip() == f"a{code}b"


def test_bidi_text_reads_in_its_order_and_other_text_is_untouched() -> None:
    found = Markup(rendered(f"Profile **p**: {md_text(BIDI)}. After."))
    assert "".join(found.text).strip() == "Profile p: Pilot <U+202E>dlrow olleh<U+202C> run. After."
    # right-to-left script and the directional marks are text, kept as they are
    for value in ("\u05e9\u05dc\u05d5\u05dd", "a\u200fb\u200ec\u061c", "plain"):
        assert html_text(value) == value and md_text(value) == value
        assert md_code(value) == f"`{value}`"


# ---------------------------------------------------------------------------------------------
# tables and figures


def test_a_table_escapes_its_cells_row_and_column_labels_and_caption() -> None:
    frame = pd.DataFrame({HOSTILE: [HOSTILE], "n": [1.5]},
                         index=pd.Index([HOSTILE], name=HOSTILE))
    table = Table(frame, caption=HOSTILE, notes=[HOSTILE])
    found = assert_inert(Tables([table], note=HOSTILE)._repr_html_())
    assert found.text.count(HOSTILE) >= 6


def test_a_table_of_facts_and_identifiers_escapes_them_and_their_hover() -> None:
    """A value shown by kind, an identifier's shortened text and its full value on hover are
    escaped alike (the hover is an attribute)."""
    html = facts({HOSTILE: HOSTILE, "prompt_id": HOSTILE}, caption=HOSTILE, level=0.95).html()
    found = assert_inert(html)
    assert found.text.count(HOSTILE) >= 3


def test_table1_markdown_carries_no_html() -> None:
    text = tables.to_markdown(pd.DataFrame({"Candidate": [HOSTILE], "n": [3]}), notes=[HOSTILE])
    assert_inert(rendered(text))
    assert "<img" not in text


def test_a_gallery_escapes_its_notes_and_names() -> None:
    gallery = figures.Gallery({}, notes=(HOSTILE,))
    assert assert_inert(gallery._repr_html_()).text == [HOSTILE]


# ---------------------------------------------------------------------------------------------
# what the chapters show


STEPS = {
    "01 corpus source": lambda: s01_corpus.Loaded(SimpleNamespace(
        coverage=SimpleNamespace(describe=lambda: "all 1"), source=HOSTILE,
        report=SimpleNamespace(skipped=[])), {}),
    "02 vocabulary": lambda: s02_screening.Rubric(
        SimpleNamespace(choices={"category": (HOSTILE, "none")}), "replay"),
    "04 recall model": lambda: s04_recall.RecallScreen(HOSTILE, 5, SimpleNamespace(
        table=pd.DataFrame({"provenance": ["ok"]}), log=[])),
    "06 candidates": lambda: s06_generation.Conversations("v1", [HOSTILE], [], 0, []),
    "09 judges": lambda: s09_judges.Source("paper", "v1", SimpleNamespace(
        per_judge=pd.DataFrame(), judges=[HOSTILE], intervals=False), {}),
    "09 no self-preference": lambda: s09_judges.SelfPreference({}, {}, HOSTILE),
    "10 census": lambda: s10_refusals.Census("paper", "v1", pd.DataFrame(), {}, {}, 0,
                                             HOSTILE),
    "13 judges": lambda: s13_explorer.Grades(SimpleNamespace(ids=["p"], candidates=["c"],
                                                             judges=[HOSTILE])),
}


@pytest.mark.parametrize("step", STEPS)
def test_a_chapter_step_shows_a_name_as_text(step: str) -> None:
    assert_inert(shown(STEPS[step]()))


def _subset_scores(panel: dict[str, float]) -> SubsetScores:
    return SubsetScores(panel_mean=panel, ranking=sorted(panel, key=lambda c: -panel[c]),
                        per_judge={}, point_estimates_only=True)


def _judges() -> JudgesMetrics:
    return JudgesMetrics(mode="paper", subset="v1", kendall_tau={"a|b": 0.9}, grand_mean=0.5,
                         severity={HOSTILE: 0.1, "b": -0.1}, n_candidates=3,
                         self_preference_raw={HOSTILE: 0.01},
                         self_preference_corrected={HOSTILE: 0.02})


def _scores(close: bool) -> ScoresMetrics:
    panel = {HOSTILE: 0.6, "b": 0.595 if close else 0.5, "c": 0.4}
    sub = _subset_scores(panel)
    return ScoresMetrics(mode="paper", include_later=False, subset="v1", panel_mean=panel,
                         ranking=sub.ranking, per_judge={}, point_estimates_only=True,
                         by_subset={"v1": sub, "hard": sub})


FINDINGS = {
    "02": lambda: s02_screening.findings(ScreeningMetrics(
        mode="replay", n_screened=3, n_relevant=1, n_borderline=1, n_not_relevant=1,
        n_model_refused=0, n_screen_failed=0, confidence_counts={},
        relevant_by_category={HOSTILE: 1}, borderline_by_category={})),
    "05": lambda: s05_subset.findings(SubsetMetrics(
        n_v1=1, n_v2=1, n_hard=0, sha256_v1="a", sha256_v2="b", sha256_hard="c",
        category_counts={HOSTILE: 1}, n_no_category_majority=0)),
    "06": lambda: s06_generation.findings(
        GenerationPaperMetrics(mode="paper", n_candidates_charged=1, spend_generate_usd=1.0,
                               anomalies={HOSTILE: 1}),
        s06_generation.ReleasedGeneration(pd.Series({HOSTILE: 1.0}), pd.DataFrame())),
    "07": lambda: s07_grading.findings(GradingPaperMetrics(
        mode="paper", grader_template_sha256="a", spend_grade_usd=1.0,
        spend_by_judge={HOSTILE: 1.0}, anomalies={HOSTILE: 1}, n_no_verdict=0)),
    "08 close": lambda: s08_scores.findings(_scores(close=True)),
    "08 apart": lambda: s08_scores.findings(_scores(close=False)),
    "09": lambda: s09_judges.findings(_judges()),
    "10": lambda: s10_refusals.findings(RefusalsMetrics(
        mode="paper", subset="v1", refusals={HOSTILE: 2}, refused_conversations={},
        n_replaced_transient=0)),
    "11": lambda: s11_harness_validation.findings(HarnessMetrics(
        mode="replay", n_scored=1, clipped_mean=0.1, bootstrap_std=0.01, published=0.2,
        delta=-0.1, published_source=HOSTILE,
        settings=s11_harness_validation.RELEASED_SETTINGS)),
    "12": lambda: s12_figures_tables.findings(
        FiguresTablesMetrics(mode="paper", files=["a.png"], n_files=1,
                             published_to_figures=False),
        judges=_judges(), top=[HOSTILE], subset="v1", intervals=False, level=0.95),
}


@pytest.mark.parametrize("stage", FINDINGS)
def test_findings_show_names_as_text(stage: str) -> None:
    found = assert_inert(rendered(FINDINGS[stage]()._repr_markdown_()))
    assert HOSTILE in "".join(found.text)


def test_harness_settings_show_model_names_as_text() -> None:
    settings = s11_harness_validation.RELEASED_SETTINGS
    text = s11_harness_validation._settings_text(
        settings.model_copy(update={"candidate": HOSTILE, "judge": HOSTILE}))
    found = assert_inert(rendered(text))
    assert "".join(found.text).count(HOSTILE) == 2
