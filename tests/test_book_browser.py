"""The book of the default and the smoke run, read by headless Chromium (what a reader sees).

From the landing page the test follows every internal link to every page of the book and, on
each one, checks: no console error or page error; every image decoded (natural width > 0);
every internal link points at a file of the book and, with a fragment, at an element that
exists; every request the page makes is a ``file://`` URL inside the book folder (all requests
are intercepted; anything else is aborted and fails the test). Screenshots of the landing page
and one chapter are saved under the test's tmp folder (the path is printed).

Debian's Chromium (/usr/bin/chromium) through Playwright, from conftest's ``browser`` fixture:
skipped when it is absent on a developer machine, a failure under CI=true. It reads the default
and smoke runs, so it is also a ``notebook`` test (``-m "not notebook"`` leaves it out).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest
from conftest import ROOT

from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import book

SCREENSHOT_CHAPTER = "03_review_round1.html"

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]


def file_path(url: str) -> Path:
    """The file a ``file://`` URL names (query and fragment dropped)."""
    return Path(unquote(urlsplit(url).path))


def inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def the_book(run: Path) -> Path:
    """The run's book, which the runner builds at the end of every successful run."""
    index = run / book.BOOK_DIR / "index.html"
    assert index.is_file(), f"the run {run} has no book: the runner did not build {index}"
    return index


PAGE_FACTS = """() => ({
  images: [...document.images].map(i => ({src: i.currentSrc || i.src, complete: i.complete,
                                            width: i.naturalWidth})),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id)
       .concat([...document.querySelectorAll('a[name]')].map(a => a.name)),
})"""


@pytest.mark.parametrize("run_fixture", ["default_run", "smoke_run"])
def test_every_page_of_the_book_loads_offline_and_whole(
    browser, run_fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run: Path = request.getfixturevalue(run_fixture)
    index = the_book(run)
    folder = index.parent
    chapters = {p.stem for p in (run / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert chapters and all((folder / f"{c}.html").is_file() for c in chapters)

    outside: list[str] = []

    def guard(route) -> None:
        url = route.request.url
        if url.startswith("file://") and inside(file_path(url), folder):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    ctx = browser.new_context(viewport={"width": 1300, "height": 900})
    ctx.route("**/*", guard)
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    ids: dict[Path, set[str]] = {}
    anchors: list[tuple[Path, Path, str]] = []  # (page, target, fragment)
    todo, seen = [index.resolve()], set()
    shots = tmp_path / f"book-screenshots-{run.name}"
    shots.mkdir()
    try:
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            page.goto(current.as_uri(), wait_until="load")
            facts = page.evaluate(PAGE_FACTS)
            ids[current] = set(facts["ids"])
            for img in facts["images"]:
                assert img["complete"] and img["width"] > 0, (current.name, img["src"])
            for href in facts["links"]:
                url, fragment = urldefrag(href)
                if not url.startswith("file://"):
                    continue  # not a link inside the book (none exist today; not required)
                target = file_path(url)
                assert inside(target, folder), f"{current.name} links outside the book: {href}"
                assert target.is_file(), f"{current.name} links to a missing file: {href}"
                if fragment:
                    anchors.append((current, target.resolve(), unquote(fragment)))
                if target.suffix == ".html":
                    todo.append(target.resolve())
            if current.name in ("index.html", SCREENSHOT_CHAPTER):
                page.screenshot(path=str(shots / current.name.replace(".html", ".png")),
                                full_page=True)
    finally:
        ctx.close()

    print(f"\nbook screenshots of {run_fixture}: {shots}")
    visited = {p.name for p in seen}
    assert {"index.html", "figures.html", "provenance.html"} <= visited
    assert {f"{c}.html" for c in chapters} <= visited, "a chapter is not reachable from index"
    for source, target, fragment in anchors:
        assert fragment in ids.get(target, set()), (
            f"{source.name} links to #{fragment}, missing in {target.name}")
    assert outside == [], f"requests that left the book's folder: {outside}"
    assert problems == [], problems
    assert (shots / "index.png").stat().st_size > 0
    assert (shots / SCREENSHOT_CHAPTER.replace(".html", ".png")).stat().st_size > 0
    # the whole profile ran: every chapter is current, so none carries the not-current warning
    for name in (*(f"{c}.html" for c in chapters), "index.html", "figures.html"):
        assert "Bring it up to date" not in (folder / name).read_text(encoding="utf-8"), name


HOSTILE_DESCRIPTION = "Pilot <img src=x onerror=alert(1)> <script>alert(2)</script>"
HOSTILE_CORPUS = "c<img src=x onerror=alert(3)>.jsonl"
HOSTILE_PROFILE = "h<img src=x onerror=alert(4)>"
"""A profile name carrying markup: refused when the profile loads (a profile's name is a plain
name), so no book of it is ever made; the hostile run's profile has a plain name."""
PLAIN_PROFILE = "hostile"
HOSTILE_VALUES = ("alert(", "onerror", "<img", "<script>alert")
BIDI_TAIL = "\u202eleft to right"
"""Ends the description: a right-to-left override, which shown raw reverses the text after it
(to the end of the landing page's paragraph)."""

PAGE_MARKUP = """() => ({
  handlers: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
      .filter(a => a.name.toLowerCase().startsWith('on')).map(a => e.tagName + ' ' + a.name)),
  scripts: [...document.scripts].map(s => s.src || 'inline: ' + s.textContent),
  text: document.body.innerText,
})"""

CHARACTER_LEFTS = """(needle) => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.indexOf(needle);
    if (at < 0) continue;
    const lefts = [];
    for (let i = at; i < at + needle.length; i++) {
      if (node.data[i] === ' ') continue;
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      lefts.push(range.getBoundingClientRect().left);
    }
    return lefts;
  }
  return null;
}"""
"""The left edge of each (non-space) character of the first text holding ``needle``, in
reading order: increasing where it is laid out left to right."""


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory, mirror: Path) -> Path:
    """A run of a copy of the default profile whose description and corpus file name carry
    HTML (01_corpus shows the corpus file, the landing page the description); a copy named
    with HTML is refused before it runs."""
    import yaml

    from hbpsych_utils import runner
    from hbpsych_utils.core import config, sources

    folder = tmp_path_factory.mktemp("hostile")
    corpus = folder / HOSTILE_CORPUS
    corpus.write_bytes(sources.fetch("healthbench_oss").read_bytes())
    values = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    values["description"] = HOSTILE_DESCRIPTION + BIDI_TAIL
    values["corpus"]["corpus_file"] = str(corpus)
    named = folder / f"{HOSTILE_PROFILE}.yaml"
    named.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    with pytest.raises(config.ProfileError, match="not a plain name"):
        runner.run_profile(str(named), outputs_root=folder / "outputs", only=[graph.CORPUS],
                           echo=print)
    assert not (folder / "outputs").exists()
    profile = folder / f"{PLAIN_PROFILE}.yaml"
    profile.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    result = runner.run_profile(str(profile), outputs_root=folder / "outputs",
                                only=[graph.CORPUS], echo=print)
    assert result.ok, result.notebooks
    return folder / "outputs" / PLAIN_PROFILE


def test_markup_a_profile_or_a_file_name_carries_runs_nowhere_in_the_book(
    browser, hostile_run: Path
) -> None:
    """Values a profile or a file name supplies are shown as text on every page: no dialog,
    no event-handler attribute, no script but the theme's own files (a profile named with
    markup never runs: ``hostile_run``)."""
    folder = the_book(hostile_run).parent
    pages = sorted(folder.glob("*.html"))
    assert {"index.html", f"{graph.CORPUS}.html", "provenance.html"} <= {p.name for p in pages}
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(f"{page.url}: {d.message}"), d.dismiss()))
    texts = {}
    try:
        for html_page in pages:
            page.goto(html_page.as_uri(), wait_until="load")
            facts = page.evaluate(PAGE_MARKUP)
            assert facts["handlers"] == [], (html_page.name, facts["handlers"])
            for src in facts["scripts"]:
                if src.startswith("inline: "):  # the theme's own settings, never a value
                    assert not any(h in src for h in HOSTILE_VALUES), (html_page.name, src)
                    continue
                assert src.startswith("file://"), (html_page.name, src)
                path = file_path(src)
                assert inside(path, folder / "_static") or path == folder / "searchindex.js", (
                    html_page.name, src)
            texts[html_page.name] = facts["text"]
    finally:
        page.close()
    assert dialogs == []
    # shown, as text; a bidirectional control as its code point, the text after it in order
    assert HOSTILE_DESCRIPTION + "<U+202E>left to right" in texts["index.html"]
    page = browser.new_page()
    try:
        page.goto((folder / "index.html").as_uri(), wait_until="load")
        lefts = page.evaluate(CHARACTER_LEFTS, "left to right")
    finally:
        page.close()
    assert lefts and lefts == sorted(lefts) and len(set(lefts)) == len(lefts), lefts
    assert PLAIN_PROFILE in texts["index.html"]
    assert HOSTILE_CORPUS in texts[f"{graph.CORPUS}.html"]


READER_FACTS = """() => ({
  width: document.documentElement.scrollWidth,
  text: document.body.innerText,
  tables: [...document.querySelectorAll('table')].map(t => ({
      head: t.tHead ? t.tHead.innerText : '', rows: t.tBodies.length ? t.tBodies[0].rows.length : 0,
      caption: t.caption ? t.caption.innerText : (t.closest('.hb-block')
          ?.querySelector(':scope > .hb-caption')?.innerText || '')})),
})"""
ENGINEERING = ("<IPython.", "Empty DataFrame")
"""Reprs a reader must never see (in the page's source)."""
PROSE_SLIPS = re.compile(r"\(s\)|\bstudy\.[A-Za-z_]")
"""Plural crutches and package identifiers a reader must never see (in the page's text)."""


@pytest.mark.parametrize("run_fixture", ["default_run", "smoke_run"])
def test_every_page_reads_as_a_paper_and_fits_a_laptop(
    browser, run_fixture: str, request: pytest.FixtureRequest
) -> None:
    """At a 1,280-pixel window no page is wider than the window; no page shows a repr, a
    plural crutch, a package identifier or a path of the machine that ran it."""
    from hbpsych_utils.core import paths

    run: Path = request.getfixturevalue(run_fixture)
    folder = the_book(run).parent
    machine = {str(paths.project_root()), str(Path.home())}
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    facts = {}
    try:
        for html_page in sorted(folder.glob("*.html")):
            source = html_page.read_text(encoding="utf-8")
            for bad in ENGINEERING:
                assert bad not in source, (html_page.name, bad)
            for path in machine:
                assert path not in source, (html_page.name, path)
            page.goto(html_page.as_uri(), wait_until="load")
            facts[html_page.name] = page.evaluate(READER_FACTS)
    finally:
        page.close()
    for name, f in facts.items():
        assert f["width"] <= 1280, (name, f["width"])
        slip = PROSE_SLIPS.search(f["text"])
        assert slip is None, (name, f["text"][max(0, slip.start() - 80):slip.end() + 80])


def _table1(tables: list[dict]) -> list[dict]:
    return [t for t in tables if t["caption"].startswith("Table 1.")
            or "Three-judge panel means" in t["caption"]]


def test_the_default_book_shows_the_papers_objects_and_its_ledger(browser, default_run: Path
                                                                   ) -> None:
    """Table 1 (every candidate, v1 and Hard side by side) in chapters 08 and 12 and on the
    figures page; the figures page names the paper's objects; the landing page leads to the
    ledger and says what the paper says of round 2 and of the harness check."""
    folder = the_book(default_run).parent
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    facts = {}
    try:
        for name in ("index.html", "08_scores.html", "12_figures_tables.html", "figures.html",
                     "ledger.html"):
            page.goto((folder / name).as_uri(), wait_until="load")
            facts[name] = page.evaluate(READER_FACTS)
    finally:
        page.close()
    for name in ("08_scores.html", "12_figures_tables.html"):
        [t1] = _table1(facts[name]["tables"])
        assert t1["rows"] == 20, name
        assert "HealthBench-Psych v1" in t1["head"] and "HealthBench-Psych-Hard v1" in t1["head"]
    # the figures page's Table 1, laid out by the display vocabulary as in the chapters
    figures_text = facts["figures.html"]["text"]
    [t1] = _table1(facts["figures.html"]["tables"])
    assert t1["rows"] == 20 and "HealthBench-Psych-Hard v1" in t1["head"]
    for label in ("Table 1.", "Figure G1.", "Figure G2.", "Table I1.", "Figure I1.",
                  "Figure I2."):
        assert label in figures_text, label
    assert figures_text.index("Table 1.") < figures_text.index("Figure G1.") < \
        figures_text.index("Figure G2.")
    # the ledger: every entry of its data file, each with a status
    from hbpsych_utils.reporting import ledger

    numbers = ledger.load_numbers()
    [rows] = [t for t in facts["ledger.html"]["tables"] if "status" in t["head"]]
    assert rows["rows"] == len(numbers)
    index = facts["index.html"]["text"]
    assert "Reproduction ledger" in index and f"of {len(numbers)} numbers" in index
    round2 = index[index.index("AC1, round 2"):][:300]
    assert "0.49" in round2 and "0.84" in round2, round2
    harness = index[index.index("Harness check"):][:200]
    assert "0.157 against the published 0.16" in harness, harness
