"""The what-if page as a reader uses it, in headless Chromium from ``file://``.

On the default book: choosing "GPT-4.1 only" shows Table I1's GPT-4.1 column as Table 1, in
the order of the released matrix's GPT-4.1 means; choosing the median panel shows the order
and rank changes the hand computation (the released matrix, read with ``csv``) gives; the page
makes no request outside the book and logs no error; what it adds to the book weighs under
500 KB. The robustness finding and table are in the default and smoke books. A smoke run graded
by two judges at temperature 0.3 offers exactly the three non-empty panels of those judges, and
its comparability cards (landing page, what-if, exported artifacts) name the two judges at
temperature 0.3.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import pytest
from conftest import TWO_JUDGES

from hbpsych_utils import study
from hbpsych_utils.core import sources
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import book, book_chapters, publish, publish_contract
from hbpsych_utils.reporting import whatif_page as page_module

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

GPT41 = study.JUDGE_PANEL[0]
WEIGHT_LIMIT = 500_000
"""Bytes the what-if may add to the default book."""

TABLE = """() => {
  const table = document.querySelector('#whatif [data-part="table"] table');
  const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
  return {heads, rows: [...table.querySelectorAll('tbody tr')].map(
      tr => [...tr.children].map(td => td.innerText.trim()))};
}"""


def released(subset: str) -> dict[tuple[str, str], float]:
    with sources.fetch(study.MATRIX_ARTIFACTS[subset]).open(newline="", encoding="utf-8") as fh:
        return {(r["candidate"], r["judge"]): float(r["clipped_mean_score"])
                for r in csv.DictReader(fh)}


def order(values: dict[str, float]) -> list[str]:
    return [c for c, _ in sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))]


def names(models: list[str]) -> list[str]:
    return [study.display_name(m) for m in models]


class Reader:
    """A page opened from ``file://`` with every request outside the book refused and noted,
    and every console error or page error noted."""

    def __init__(self, browser, folder: Path) -> None:
        self.outside: list[str] = []
        self.problems: list[str] = []
        self.ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        self.ctx.route("**/*", self._guard(folder))
        self.page = self.ctx.new_page()
        self.page.on("console", lambda m: self.problems.append(f"{m.type}: {m.text}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))

    def _guard(self, folder: Path):
        def guard(route) -> None:
            url = route.request.url
            if url.startswith(folder.resolve().as_uri()):
                route.continue_()
            else:
                self.outside.append(url)
                route.abort()
        return guard

    def table(self) -> dict:
        return self.page.evaluate(TABLE)

    def close(self) -> None:
        self.ctx.close()


def table_i1(browser, folder: Path) -> dict[str, str]:
    """Table I1 of the book's figures page: model -> its GPT-4.1 cell as shown."""
    reader = Reader(browser, folder)
    try:
        reader.page.goto((folder / "figures.html").as_uri(), wait_until="load")
        found = reader.page.evaluate("""() => {
          const block = [...document.querySelectorAll('.hb-block')].find(
              b => (b.querySelector('.hb-caption') || {}).innerText?.startsWith('Table I1.'));
          const t = block.querySelector('table');
          return {heads: [...t.querySelectorAll('thead th')].map(th => th.innerText.trim()),
                  rows: [...t.querySelectorAll('tbody tr')].map(
                      tr => [...tr.children].map(td => td.innerText.trim()))};
        }""")
    finally:
        reader.close()
    col, model = found["heads"].index("GPT-4.1"), found["heads"].index("Model")
    return {r[model]: r[col] for r in found["rows"]}


def test_the_default_whatif_page_switches_to_the_hand_computed_tables(
        browser, default_run: Path) -> None:
    folder = default_run / book.BOOK_DIR
    study_order = json.loads((default_run / graph.SCORES / graph.METRICS).read_text(
        encoding="utf-8"))["ranking"]
    matrix = released("v1")
    column = table_i1(browser, folder)
    reader = Reader(browser, folder)
    try:
        reader.page.goto((folder / f"{page_module.PAGE}.html").as_uri(), wait_until="load")
        own = reader.table()
        assert [r[1] for r in own["rows"]] == names(study_order)  # the run's Table 1 first

        reader.page.select_option("#whatif-judges", label="GPT-4.1 only")
        alone = reader.table()
        heads = alone["heads"]
        model, score = heads.index("Model"), heads.index("Score")
        assert [r[model] for r in alone["rows"]] == names(order(
            {c: matrix[(c, GPT41)] for c in study.CANDIDATES}))
        assert {r[model]: r[score] for r in alone["rows"]} == column  # Table I1's column
        assert "GPT-4.1 alone" in reader.page.inner_text('[data-part="about"]')

        reader.page.select_option("#whatif-judges", label="All three judges (the run's panel)")
        reader.page.select_option("#whatif-combine", label="the median of the judges")
        median = reader.table()
        by_hand = order({c: statistics.median(matrix[(c, j)] for j in study.JUDGE_PANEL)
                         for c in study.CANDIDATES})
        assert by_hand != study_order
        change = median["heads"].index("Change in rank")
        assert [r[model] for r in median["rows"]] == names(by_hand)
        expected = {study.display_name(c): study_order.index(c) - by_hand.index(c)
                    for c in study_order}
        shown = {r[model]: int(r[change].replace("−", "-").replace("+", ""))
                 for r in median["rows"]}
        assert shown == expected and any(expected.values())
        assert "No profile setting makes this a run" in reader.page.inner_text(
            '[data-part="command"]')
    finally:
        reader.close()
    assert reader.outside == []
    assert reader.problems == []


def test_what_the_whatif_adds_to_the_default_book_weighs_under_500_kb(default_run: Path
                                                                      ) -> None:
    folder = default_run / book.BOOK_DIR
    html = (folder / f"{page_module.PAGE}.html").read_text(encoding="utf-8")
    assets = {folder / m for m in re.findall(r'(?:src|href)="(_(?:images|downloads)/[^"]+)"',
                                             html)}
    assert any(a.name == page_module.FIGURE for a in assets)
    added = len(html.encode("utf-8")) + sum(a.stat().st_size for a in assets)
    cards = sum(len(m.encode("utf-8")) for p in ("index.html", "figures.html", "08_scores.html")
                for m in re.findall(r'<details class="hb-card">.*?</details>',
                                    (folder / p).read_text(encoding="utf-8"), flags=re.S))
    assert added + cards <= WEIGHT_LIMIT, added + cards


@pytest.mark.parametrize("run_fixture", ["default_run", "smoke_run"])
def test_the_robustness_finding_and_table_are_in_the_book(run_fixture: str,
                                                          request: pytest.FixtureRequest
                                                          ) -> None:
    run: Path = request.getfixturevalue(run_fixture)
    html = (run / book.BOOK_DIR / f"{page_module.PAGE}.html").read_text(encoding="utf-8")
    assert "How robust is the ranking?" in html
    n = int(re.search(r"All ([\d,]+) scoring choices, one row each", html).group(1))
    assert n == {"default_run": 48, "smoke_run": 192}[run_fixture]
    rows = re.search(r"All [\d,]+ scoring choices.*?<tbody>(.*?)</tbody>", html, re.S).group(1)
    assert rows.count("<tr>") == n
    if run_fixture == "default_run":
        assert re.search(rf"The top five are the same five under \d+ of {n} scoring choices",
                         html)
    else:
        assert "With 4 models in the study" in html  # the top five is every model
        assert re.search(rf"Under \d+ of {n} choices the intervals support a reversal", html)
    landing = (run / book.BOOK_DIR / "index.html").read_text(encoding="utf-8")
    assert f'href="{page_module.PAGE}.html"' in landing
    chapter = (run / book.BOOK_DIR / f"{graph.SCORES}.html").read_text(encoding="utf-8")
    assert f'href="{page_module.PAGE}.html"' in chapter
    # chapter 08's what-if widget: executed as a widget with its static version, which the book
    # shows in its place
    nb = json.loads((run / "notebooks" / f"{graph.SCORES}.ipynb").read_text(encoding="utf-8"))
    call = "scores.whatif(sources.whatif, metrics,"
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code"
               and call in "".join(c["source"]) for o in c["outputs"]]
    assert [sorted(o["data"]) for o in outputs] == [
        sorted([book_chapters.WIDGET_VIEW, "text/html", "text/plain"])]
    static = "".join(outputs[0]["data"]["text/html"])
    assert static.startswith("<p>In JupyterLab, controls here switch this Table 1")
    assert "Table 1 under this choice" in static
    assert "In JupyterLab, controls here switch this Table 1" in chapter
    assert "An interactive widget stood here" not in chapter


def test_a_two_judge_smoke_run_offers_their_panels_and_cards_name_their_settings(
        browser, two_judge_smoke: Path) -> None:
    folder = two_judge_smoke / book.BOOK_DIR
    reader = Reader(browser, folder)
    try:
        reader.page.goto((folder / f"{page_module.PAGE}.html").as_uri(), wait_until="load")
        options = reader.page.eval_on_selector_all(
            "#whatif-judges option", "os => os.map(o => [o.value, o.innerText])")
        assert reader.page.query_selector("#whatif-combine") is None  # two judges: no median
        card = reader.page.evaluate(
            """() => document.querySelector('#whatif [data-part="card"]').textContent""")
        reader.page.goto((folder / "index.html").as_uri(), wait_until="load")
        landing = reader.page.evaluate(
            "() => document.querySelector('details.hb-card').textContent")
    finally:
        reader.close()
    a, b = (study.display_name(j) for j in TWO_JUDGES)
    [unused] = [j for j in study.JUDGE_PANEL if j not in TWO_JUDGES]  # the panel's third
    assert sorted(options) == sorted([["0.1", "Both judges (the run's panel)"],
                                      ["0", f"{a} only"], ["1", f"{b} only"]])
    for text in (card, landing):
        assert f"{a}: temperature 0.3" in text and f"{b}: temperature 0.3" in text
        assert study.display_name(unused) not in text
        assert "90% percentile bootstrap" in text
    assert reader.problems == [] and reader.outside == []
    report = publish.publish(two_judge_smoke)
    artifact = json.loads((report.output / publish_contract.artifact_name(TWO_JUDGES[0]))
                          .read_text(encoding="utf-8"))
    exported = artifact["run"]["harness_config"]["comparability"]
    assert [j["judge"] for j in exported["judges"]] == TWO_JUDGES
    assert {j["sent"]["temperature"] for j in exported["judges"]} == {0.3}
    assert exported["level"] == 0.9 and exported["n_min"] == artifact["run"]["n_completed"]
