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
ipywidgets view is replaced by its own static version where it carries one, else by a note;
the static HTML the stage displays after it stays), and
search without result summaries (those fetch pages, which ``file://`` forbids; the search index
is a script the page loads). Upstream addresses are links a reader may follow; the book itself
requests nothing outside its folder. The headline numbers and the ledger come from tested
functions of the stages' metrics (``book_headlines``, ``reporting.ledger``); the pages only
lay them out.

Each page is written by a module of its own (``book_landing``, ``book_ledger``,
``book_figures``, ``book_provenance``; the chapters by ``book_chapters``), which read the run
folder through ``book_run``; this module writes the Sphinx sources and builds the site.
"""

from __future__ import annotations

import functools
import io
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hbpsych_utils import study
from hbpsych_utils.construction.instrument import BOOK_COPY, INSTRUMENT_FILE
from hbpsych_utils.core import escape, paths, records
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.reporting import ledger, ledger_conditions, ledger_numbers, whatif_page
from hbpsych_utils.reporting.book_chapters import chapters_of, prepare_notebook
from hbpsych_utils.reporting.book_figures import figures_markdown
from hbpsych_utils.reporting.book_landing import (
    ROUND_INSTRUMENTS,
    explorer_note,
    find_markdown,
    landing_markdown,
    title_name,
)
from hbpsych_utils.reporting.book_ledger import ledger_markdown
from hbpsych_utils.reporting.book_markdown import (
    FIGURES_PAGE,
    FIGURES_STAGE,
    LEDGER_PAGE,
    METHODS_PAGE,
    PROVENANCE_PAGE,
)
from hbpsych_utils.reporting.book_provenance import (
    PUBLISHED_FILES,
    provenance_markdown,
    published_markdown,
)
from hbpsych_utils.reporting.book_run import (
    BookError,
    chapter_banner,
    check_records,
    partial_banner,
    read_manifest,
    read_metrics,
    run_judges,
    run_profile,
    stage_command,
    stage_states,
    update_command,
)
from hbpsych_utils.reporting.run_metrics import of

BOOK_DIR = "book"
"""The book's folder inside a run folder ``outputs/<profile>/``."""

SITE_FILES = Path(__file__).with_name("book_site")
"""The book's stylesheet (package data)."""


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
    manifest = read_manifest(profile_dir)
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
        rows = ledger.ledger(metrics, run=ledger_conditions.RunConditions(run, states))
    except ledger_numbers.LedgerError as exc:
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
    scores = metrics_models.SCORES.stage
    whatif = whatif_page.add_to_book(
        profile_dir, src, metrics, manifest, run, chapter_banner(states.get(scores), command),
        stage_command(profile, scores, manifest, profile_dir.parent))
    extra_pages += whatif.pages
    overrides = (manifest or {}).get("overrides")
    (src / "index.md").write_text(
        landing_markdown(profile, metrics, chapters, run.description if run else "",
                         overrides if isinstance(overrides, dict) else None, states, command,
                         reproduced=ledger.summary(rows), find=find + whatif.find,
                         extra_pages=extra_pages, judges=run_judges(metrics, run),
                         level=run.ci_level if run else study.CI_LEVEL, card=whatif.card,
                         modes=({s: graph.stage_mode(run, s) for s in graph.STAGES} if run
                                else None)),
        encoding="utf-8")
    stage_dir = profile_dir / FIGURES_STAGE
    if stage_dir.is_dir():
        shutil.copytree(stage_dir, src / "files", ignore=shutil.ignore_patterns("*.json"))
    (src / f"{FIGURES_PAGE}.md").write_text(
        figures_markdown(stage_dir, "files", chapters,
                         chapter_banner(states.get(FIGURES_STAGE), command),
                         stage_command(profile, FIGURES_STAGE, manifest, profile_dir.parent),
                         of(metrics, metrics_models.SCORES), whatif.card),
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


class _TemplateCode:
    """Jinja's compiled page templates, kept for the next book this process builds: a second
    book (the runner's rebuild after a tweak, the tests') would compile the theme's ~30
    templates again (with the paper's numbers read once, see ``ledger_numbers.load_numbers``,
    about 0.15 s of CPU of each later build, measured). A template is
    reused only for the same source (Jinja's checksum) and an environment configured alike.
    It is the environment's bytecode cache, so the pages are rendered by the same code."""

    def __init__(self) -> None:
        self.code: dict[tuple[Any, ...], tuple[str, Any]] = {}

    @staticmethod
    def _key(bucket: Any) -> tuple[Any, ...]:
        env = bucket.environment
        return (bucket.key, type(env), tuple(sorted(env.extensions)), env.optimized,
                env.autoescape, env.is_async, env.finalize is not None, env.trim_blocks,
                env.lstrip_blocks, env.block_start_string, env.variable_start_string,
                env.comment_start_string, env.line_statement_prefix, env.line_comment_prefix,
                env.newline_sequence, env.keep_trailing_newline)

    def load_bytecode(self, bucket: Any) -> None:
        found = self.code.get(self._key(bucket))
        if found is not None and found[0] == bucket.checksum:
            bucket.code = found[1]

    def dump_bytecode(self, bucket: Any) -> None:
        self.code[self._key(bucket)] = (bucket.checksum, bucket.code)


@functools.cache
def _template_cache() -> Any:
    """The process's template cache, made by the first build (importing Jinja then, not when
    this module is imported)."""
    from jinja2 import BytecodeCache

    class TemplateCode(_TemplateCode, BytecodeCache):
        pass

    return TemplateCode()


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
            app.builder.templates.environment.bytecode_cache = _template_cache()
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

