"""What a reader sees of the book's tables, measured in headless Chromium from the rendered
layout: every page of the default book, the smoke book and a default run tweaked with
``--set judges.subset=hard``, at 1,280 and 1,024 pixels wide.

On each page: no number or identifier in a table cell wraps (the cell's text takes more than
one line box); no table is wider than its column unless it sits in a frame that scrolls
sideways and itself fits the column, and nothing else hides part of it; no column header is a
machine name (snake_case); no category, theme or axis slug of the study stands in the page's
text outside code; no API model id outside code, the provenance page and a "Model id" column;
no integer shown with decimals ("610.000"); no caption wider than its box or than the column.
Under every chapter table the chapter and the command that makes it again are named.

Then a smoke run with a two-judge panel and a 90% interval level: no page says "three-judge",
its captions and Table 1 name the two judges; every interval label says 90%, no page says 95%,
and the intervals were computed at 90%.

Debian's Chromium through Playwright (conftest's ``browser`` fixture); it reads the runs the
notebook tests make, so it is a ``notebook`` test too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, TWO_JUDGE_SETTINGS, TWO_JUDGES

from hbpsych_utils import study
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import book

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

WIDTHS = (1280, 1024)
SLUGS = sorted({s for names in (study.CATEGORY_LABELS, study.THEME_LABELS, study.AXIS_LABELS)
                for s in names if "_" in s})
"""The study's category, theme and axis terms that read as machine names (a bare word such as
``anxiety`` is also English, so it cannot be told from prose)."""
_REGISTRY = yaml.safe_load((ROOT / "params" / "models.yaml").read_text(encoding="utf-8"))
MODEL_IDS = sorted(set(_REGISTRY["models"]) | {m["api_model"] for m in
                                               _REGISTRY["models"].values()})
ID_PAGES = {"provenance.html"}
"""Pages about ids, where a model's API id belongs."""

MEASURE = r"""([slugs, modelIds, checkIds]) => {
  const out = {wraps: [], clipped: [], snake: [], captions: [], decimals: [], slugs: [], ids: [],
               tables: 0, chapterTables: 0, sources: 0};
  const article = document.querySelector('article') || document.body;
  const column = article.getBoundingClientRect();
  const NUMBER = new RegExp(['^[−+\\-]?\\$?[\\d,]+(\\.\\d+)?%?$',
    '^\\[[−\\-]?[\\d.]+, [−\\-]?[\\d.]+\\]$', '^[\\d.]+ \\[[^\\]]+\\]$', '^< 0\\.001$'].join('|'));
  const IDENT = /^[0-9a-f]{8,}…?$|^[0-9a-f]{8}-[0-9a-f]{4}-/;
  const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const idRes = modelIds.map(id => [id, new RegExp('(^|[^\\w.\\-])' + esc(id) + '($|[^\\w.\\-])')]);
  const lines = (el) => {  // line boxes of an element's text, from the rendered layout
    const range = document.createRange();
    range.selectNodeContents(el);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
    if (!rects.length) return 0;
    const h = Math.max(...rects.map(r => r.height));
    const tops = rects.map(r => r.top).sort((a, b) => a - b);
    let n = 1, last = tops[0];
    for (const t of tops) if (t - last > 0.6 * h) { n++; last = t; }
    return n;
  };
  const said = (el) => (el.innerText || '').trim().replace(/\s+/g, ' ').slice(0, 70);
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  for (const table of article.querySelectorAll('table')) {
    out.tables++;
    const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
    for (const h of heads) if (/^[a-z][a-z0-9]*(_[a-z0-9]+)+$/.test(h)) out.snake.push(h);
    const box = table.getBoundingClientRect();
    if (box.width > table.parentElement.clientWidth + 1) {
      let a = table.parentElement, framed = false;
      while (a && a !== article.parentElement) {
        if (scrolls(a) && a.scrollWidth > a.clientWidth
            && a.getBoundingClientRect().right <= column.right + 1) { framed = true; break; }
        a = a.parentElement;
      }
      if (!framed) out.clipped.push('wider than its column, in no frame that scrolls: '
                                    + said(table));
    }
    for (let a = table.parentElement; a && a !== article; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if ((o === 'hidden' || o === 'clip') && box.right > a.getBoundingClientRect().right + 1)
        out.clipped.push('cut by a box that hides what overflows: ' + said(table));
    }
    if (table.classList.contains('hb-table')) {
      out.chapterTables++;
      const block = table.closest('.hb-block');
      if (block && block.querySelector(':scope > .hb-source')) out.sources++;
    }
    for (const row of table.querySelectorAll('tr')) {
      [...row.children].forEach((cell, i) => {
        const text = cell.innerText.trim();
        if (!text) return;
        const hides = getComputedStyle(cell).overflowX !== 'visible';
        if (hides && cell.scrollWidth > cell.clientWidth + 1)
          out.clipped.push('a cell hides its content: ' + text.slice(0, 50));
        const number = cell.classList.contains('hb-num') || NUMBER.test(text);
        const ident = cell.classList.contains('hb-code') || !!cell.querySelector('.hb-id')
                      || IDENT.test(text);
        if ((number || ident) && cell.closest('tbody') && lines(cell) > 1)
          out.wraps.push(text.slice(0, 60));
        if (/^[\d,]+\.0{2,}$/.test(text) && parseFloat(text.replace(/,/g, '')) >= 2)
          out.decimals.push(text);
        if (checkIds && !/model id/i.test(heads[i] || '') && !cell.querySelector('code'))
          for (const [id, re] of idRes)
            if (re.test(text)) out.ids.push(`${id} in a cell: ${text.slice(0, 60)}`);
      });
    }
  }
  for (const c of article.querySelectorAll('.hb-caption, caption, figcaption')) {
    const r = c.getBoundingClientRect();
    if (c.scrollWidth > c.clientWidth + 1 || r.right > column.right + 1) out.captions.push(said(c));
  }
  // the page's text outside code, preformatted text, styles and scripts (attributes aside),
  // and outside a conversation's or a reply's own text (the explorer shows the data verbatim)
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {acceptNode: (n) =>
    n.parentElement.closest('code, pre, style, script, kbd, samp, .hbx-text')
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  const parts = [];
  while (walker.nextNode()) parts.push(walker.currentNode.nodeValue);
  const prose = parts.join(' ');
  for (const slug of slugs)
    if (new RegExp('(^|[^\\w])' + slug + '($|[^\\w])').test(prose)) out.slugs.push(slug);
  if (checkIds)
    for (const [id, re] of idRes) {
      const m = prose.match(re);
      if (m) { const at = prose.indexOf(m[0]);
               out.ids.push(`${id}: …${prose.slice(Math.max(0, at - 50), at + 50)}…`); }
    }
  return out;
}"""

CHECKS = ("wraps", "clipped", "snake", "captions", "decimals", "slugs", "ids")


def measure_book(browser, run: Path, width: int) -> dict[str, dict]:
    """Every page of a run's book at ``width`` pixels: what :data:`MEASURE` finds on each."""
    folder = run / book.BOOK_DIR
    assert (folder / "index.html").is_file(), f"{run} has no book"
    page = browser.new_page(viewport={"width": width, "height": 900})
    found = {}
    try:
        for html in sorted(folder.glob("*.html")):
            page.goto(html.as_uri(), wait_until="load")
            found[html.name] = page.evaluate(MEASURE, [SLUGS, MODEL_IDS,
                                                      html.name not in ID_PAGES])
    finally:
        page.close()
    return found


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("run_fixture", ["default_run", "smoke_run", "hard_run"])
def test_every_table_of_the_book_fits_and_reads_as_a_readers_table(
    browser, run_fixture: str, width: int, request: pytest.FixtureRequest
) -> None:
    run: Path = request.getfixturevalue(run_fixture)
    pages = measure_book(browser, run, width)
    chapters = [f"{s}.html" for s in graph.STAGES if f"{s}.html" in pages]
    assert len(chapters) == len(graph.STAGES)
    assert sum(p["tables"] for p in pages.values()) > 30  # the measure saw the tables
    problems = {(name, check): p[check] for name, p in pages.items() for check in CHECKS
                if p[check]}
    assert problems == {}, json.dumps({f"{n} {c}": v[:5] for (n, c), v in problems.items()},
                                      ensure_ascii=False, indent=1)
    for name in chapters:  # every chapter table says where it came from
        assert pages[name]["sources"] == pages[name]["chapterTables"], name


# --- a two-judge panel at a 90% interval level ------------------------------------------------

LEVEL = TWO_JUDGE_SETTINGS["ci_level"]


@pytest.fixture(scope="module")
def tweaked_smoke(two_judge_smoke: Path) -> Path:
    """The smoke profile graded by two judges, every interval at 90% (conftest's, shared with
    the what-if's tests)."""
    return two_judge_smoke


PAGE_TEXT = """() => ({
  text: document.body.innerText,
  headers: [...document.querySelectorAll('article thead th')].map(th => th.innerText.trim()),
  captions: [...document.querySelectorAll('article .hb-caption, article figcaption')]
      .map(c => c.innerText.trim()),
})"""


def page_texts(browser, run: Path) -> dict[str, dict]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    found = {}
    try:
        for html in sorted((run / book.BOOK_DIR).glob("*.html")):
            page.goto(html.as_uri(), wait_until="load")
            found[html.name] = page.evaluate(PAGE_TEXT)
    finally:
        page.close()
    return found


def test_a_two_judge_run_never_calls_its_panel_three_judges(browser, tweaked_smoke: Path
                                                             ) -> None:
    sources = {p.name: p.read_text(encoding="utf-8")
               for p in (tweaked_smoke / book.BOOK_DIR).glob("*.html")}
    said = {name: re.findall(r".{0,60}three-judge.{0,60}", text, flags=re.I | re.S)
            for name, text in sources.items()}
    assert {n: s for n, s in said.items() if s} == {}
    pages = page_texts(browser, tweaked_smoke)
    names = " and ".join(study.display_name(j) for j in TWO_JUDGES)
    assert f"two-judge panel ({names})" in pages["index.html"]["text"]
    for name in ("08_scores.html", "12_figures_tables.html", "figures.html"):
        [t1] = [c for c in pages[name]["captions"] if c.startswith("Table 1.")]
        assert t1.startswith("Table 1. Two-judge panel means on"), (name, t1)
    assert "Two-judge panel means" in pages["figures.html"]["text"]  # Table 1's heading
    assert f"the two-judge panel ({names})" in pages["07_grading.html"]["text"]


def test_a_90_percent_run_says_90_percent_wherever_it_states_the_level(
    browser, tweaked_smoke: Path
) -> None:
    pages = page_texts(browser, tweaked_smoke)
    interval_labels = [(name, h) for name, p in pages.items() for h in p["headers"]
                       if "interval" in h.lower()]
    assert len(interval_labels) >= 6, interval_labels  # 08's pairs, 09, 11, 14, 15
    assert all("90%" in h for _, h in interval_labels), interval_labels
    level_captions = [(name, c) for name, p in pages.items() for c in p["captions"]
                      if re.search(r"\binterval|bootstrap band", c, flags=re.I)
                      and re.search(r"\d+(\.\d+)?%", c)]
    assert level_captions and all("90%" in c for _, c in level_captions), level_captions
    for name, chapter in ((graph.SCORES, "08_scores.html"), (graph.JUDGES, "09_judges.html"),
                          (graph.ANALYSES, "14_analyses.html")):
        assert "90%" in pages[chapter]["text"], name
    # no page says 95%: the ledger alone quotes the paper's quantities as printed
    said = {name: re.findall(r".{0,60}95 ?%.{0,40}", p["text"], flags=re.S)
            for name, p in pages.items() if name != "ledger.html"}
    assert {n: s for n, s in said.items() if s} == {}
    # nor do the executed notebooks' prose and what their cells showed (a widget's layout
    # width of "95%" is no interval level)
    import nbformat

    shown = {}
    for path in (tweaked_smoke / "notebooks").glob("*.ipynb"):
        nb = nbformat.read(str(path), as_version=4)
        texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
        texts += [str(v) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  for k, v in o.get("data", {}).items() if k.startswith("text/")]
        shown[path.name] = "\n".join(texts)
    assert {n for n, t in shown.items() if re.search(r"95 ?%", t)} == set()


def test_a_90_percent_run_computes_its_intervals_at_90_percent(tweaked_smoke: Path) -> None:
    """The leader's Table 1 interval is the 90% percentile interval of the panel's
    per-conversation scores, with the run's seed and resamples (not a relabelled 95% one)."""
    import pandas as pd

    from hbpsych_utils.evaluation import scoring

    m = json.loads((tweaked_smoke / graph.SCORES / graph.METRICS).read_text(encoding="utf-8"))
    assert m["ci_level"] == LEVEL
    for stage in (graph.JUDGES, graph.HARNESS, graph.ANALYSES, graph.JUDGE_ACCURACY):
        saved = json.loads((tweaked_smoke / stage / graph.METRICS).read_text(encoding="utf-8"))
        assert saved["ci_level"] == LEVEL, stage
    best = m["ranking"][0]
    scores = pd.read_csv(tweaked_smoke / graph.GRADING / graph.SCORES_TABLE)
    table = pd.read_csv(tweaked_smoke / graph.SCORES / graph.TABLE1.format(subset=m["subset"]))
    row = table.set_index("candidate").loc[best]
    panel = scoring.panel_conversation_scores(scores[scores["prompt_id"].isin(
        _subset_ids(tweaked_smoke, m["subset"]))], best, TWO_JUDGES)
    at_90 = scoring.bootstrap_ci(panel.to_numpy(), n_resamples=m["n_resamples"], seed=7,
                                 level=LEVEL)
    at_95 = scoring.bootstrap_ci(panel.to_numpy(), n_resamples=m["n_resamples"], seed=7,
                                 level=0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((at_90.low, at_90.high), abs=1e-6)
    assert at_95.high - at_95.low > at_90.high - at_90.low


def _subset_ids(run: Path, key: str) -> list[str]:
    from hbpsych_utils.construction import subset

    index = subset.read_index(run / graph.SUBSET / graph.SUBSET_INDEX)
    return subset.load_subset(run / graph.SUBSET / index[key])["prompt_ids"]
