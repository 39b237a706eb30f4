"""The book (reporting.book): headline numbers from crafted metrics, the partial-corpus banner,
runs with stages missing, the provenance page, the offline rules, and the command line.

Books here are built from small crafted run folders (a few seconds each); the browser test
(tests/test_book_browser.py) drives Chromium over the books of real default and smoke runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from hbpsych_utils.__main__ import main as cli
from hbpsych_utils.reporting import book

SHA = "ab" * 32

METRICS = {
    "01_corpus": {"complete": False, "n_conversations": 712, "n_expected": 5000},
    "03_review_round1": {"mode": "replay", "control_inclusion_rate": 0.06, "n_controls": 150,
                         "n_controls_included": 9, "ac1_multirater": 0.78995},
    "04_recall": {"mode": "replay", "round2": "tallied", "control_inclusion_rate": 0.04,
                  "n_controls": 25, "n_controls_included": 1, "ac1_multirater": 0.5134},
    "05_subset": {"n_v1": 610, "n_v2": 611, "n_hard": 119, "sha256_v1": SHA,
                  "sha256_v2": "cd" * 32, "sha256_hard": "ef" * 32, "matches_release_v1": True,
                  "matches_release_v2": False},
    "08_scores": {"mode": "paper", "subset": "v1", "ranking": ["m-a", "gpt-4.1-2025-04-14", "m-c",
                                                               "m-d"],
                  "panel_mean": {"m-a": 0.6269, "gpt-4.1-2025-04-14": 0.6238, "m-c": 0.61,
                                 "m-d": 0.5},
                  "point_estimates_only": True},
    "09_judges": {"kendall_tau": {"a|b": 0.9368, "a|c": 0.9474, "b|c": 0.9263}},
    "11_harness_validation": {"n_scored": 1000, "clipped_mean": 0.15743, "bootstrap_std": 0.0089,
                              "published": None, "delta": None, "published_source": ""},
}


def by_key(heads: list[book.Headline]) -> dict[str, book.Headline]:
    return {h.key: h for h in heads}


def test_headline_numbers_from_crafted_metrics() -> None:
    heads = book.headline_numbers(METRICS)
    got = by_key(heads)
    assert [h.key for h in heads] == [
        "corpus", "subset_v1", "subset_v2", "subset_hard", "control_inclusion_03", "ac1_03",
        "control_inclusion_04", "ac1_04", "ranking", "judge_tau", "harness"]
    assert got["corpus"].value == "712 of 5,000 conversations"
    assert got["corpus"].detail == "partial"
    assert got["subset_v1"].value == "610 conversations"
    assert got["subset_v1"].detail == f"sha256 {SHA}; identical to the released file"
    assert got["subset_v2"].detail.endswith("differs from the released file")
    assert got["subset_hard"].detail == "sha256 " + "ef" * 32  # no release check recorded
    assert got["subset_hard"].chapter == "05_subset"
    assert got["control_inclusion_03"].value == "6.0 %"
    assert got["control_inclusion_03"].detail == "9 of 150 concealed controls included"
    assert got["control_inclusion_03"].chapter == "03_review_round1"
    assert got["control_inclusion_04"].value == "4.0 %"
    assert got["control_inclusion_04"].chapter == "04_recall"
    assert got["ac1_03"].value == "0.790" and got["ac1_04"].value == "0.513"
    # the top three by panel mean, judges' display names used where the study has one
    assert got["ranking"].value == "1. m-a (0.627), 2. GPT-4.1 (0.624), 3. m-c (0.610)"
    assert "of 4 candidates" in got["ranking"].detail and "point estimates" in got["ranking"].detail
    assert got["judge_tau"].value == "0.926 to 0.947"
    assert got["judge_tau"].chapter == "09_judges"
    # no published figure: the clipped mean is the headline, and the detail says why
    assert got["harness"].value == "clipped mean 0.157"
    assert "no published figure" in got["harness"].detail and "n = 1,000" in got["harness"].detail


def test_harness_headline_is_the_difference_when_a_published_figure_exists() -> None:
    metrics = {"11_harness_validation": {"n_scored": 1000, "clipped_mean": 0.157,
                                         "bootstrap_std": 0.009, "published": 0.145,
                                         "delta": 0.012, "published_source": "the paper"}}
    (h,) = book.headline_numbers(metrics)
    assert h.value == "Δ = +0.012"
    assert "vs published 0.145 (the paper)" in h.detail


def test_live_harness_rerun_is_compared_with_the_released_run() -> None:
    metrics = {"11_harness_validation": {"n_scored": 4, "clipped_mean": 0.2892,
                                         "bootstrap_std": 0.1118, "published": None,
                                         "delta": None, "n_common_with_released": 4,
                                         "mean_difference_vs_released": -0.0598}}
    (h,) = book.headline_numbers(metrics)
    assert h.value == "clipped mean 0.289"
    assert h.detail.endswith("-0.060 against the released run on the 4 conversations in common")


def test_missing_stages_and_keys_give_fewer_headlines_not_errors() -> None:
    assert book.headline_numbers({}) == []
    only_subset = {"05_subset": {"n_v1": 3, "sha256_v1": SHA}}
    assert [h.key for h in book.headline_numbers(only_subset)] == ["subset_v1"]
    # round 2 awaiting ratings writes no rate or AC1; a tau that could not be computed is null
    sparse = {"04_recall": {"mode": "live", "round2": "awaiting_ratings"},
              "09_judges": {"kendall_tau": {"a|b": None, "a|c": float("nan"), "b|c": 0.5}},
              "08_scores": {"ranking": []}}
    got = by_key(book.headline_numbers(sparse))
    assert list(got) == ["judge_tau"] and got["judge_tau"].value == "0.500"


def test_metrics_of_the_wrong_shape_are_an_error_naming_the_stage() -> None:
    with pytest.raises(book.BookError, match="05_subset"):
        book.headline_numbers({"05_subset": {"n_v1": "many"}})


def test_partial_banner_follows_the_corpus_metrics() -> None:
    assert "712 of 5,000" in book.partial_banner(METRICS)
    assert book.partial_banner({"01_corpus": {"complete": True}}) == ""
    assert book.partial_banner({}) == ""  # 01 did not run: nothing to claim


# ---------------------------------------------------------------------------------------------
# whole books from crafted run folders


def _notebook(path: Path, title: str, *, widget: bool = False) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata.update(kernelspec={"name": "python3", "display_name": "Python 3",
                                   "language": "python"},
                       language_info={"name": "python", "pygments_lexer": "ipython3"})
    code = nbformat.v4.new_code_cell("display(result)")
    code.outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": "<table><tr><td>42</td></tr></table>",
                              "text/plain": "42"})]
    if widget:
        code.outputs.insert(0, nbformat.v4.new_output("display_data", data={
            book.WIDGET_VIEW: {"model_id": "abc", "version_major": 2, "version_minor": 0},
            "text/plain": "VBox(children=(...))"}))
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
            "state": {"abc": {"model_name": "VBoxModel"}}, "version_major": 2}}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nSome prose."), code]
    nbformat.write(nb, str(path))


def make_run(root: Path, metrics: dict[str, dict], notebooks: list[str],
             manifest: dict | None = None) -> Path:
    run = root / "default"
    (run / "notebooks").mkdir(parents=True)
    for stage, m in metrics.items():
        (run / stage).mkdir()
        (run / stage / "metrics.json").write_text(json.dumps(m))
    for stem in notebooks:
        _notebook(run / "notebooks" / f"{stem}.ipynb", f"{stem} chapter",
                  widget=stem.startswith("13"))
    if manifest is not None:
        (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def pages(index: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in index.parent.glob("*.html")}


def test_book_of_a_partial_run_with_stages_missing(tmp_path: Path) -> None:
    # 02, 06, 07, 10, 12 never ran (as with --only); 08 has metrics but no notebook
    notebooks = ["01_corpus", "03_review_round1", "05_subset", "09_judges", "13_explorer"]
    run = make_run(tmp_path, METRICS, notebooks)
    report = book.render(run)
    assert report.index == run / "book" / "index.html"
    assert report.warnings == []
    html = pages(report.index)
    assert {f"{stem}.html" for stem in notebooks} <= set(html)
    assert "02_screening.html" not in html and "12_figures_tables.html" not in html
    # the banner is on every page, the landing page's included
    for name, text in html.items():
        assert "partial-banner" in text and "712 of 5,000" in text, name
    index = html["index.html"]
    # headline numbers link to their chapter, or stay plain text when it is absent (08)
    assert re.search(r'href="05_subset.html"[^>]*>\s*(<span[^>]*>)?610 conversations', index)
    assert re.search(r'href="03_review_round1.html"[^>]*>\s*(<span[^>]*>)?6\.0 %', index)
    assert "kimi" not in index and "1. m-a (0.627)" in index
    assert 'href="08_scores.html"' not in index
    assert "No figures" in html["figures.html"]
    assert "This run folder has no" in html["provenance.html"]
    # code folded behind one click; the widget view replaced by a note, its state not shipped
    chapter = html["03_review_round1.html"]
    assert "<details" in chapter and "Show code" in chapter
    explorer = html["13_explorer.html"]
    assert "interactive widget" in explorer and "widget-state" not in explorer
    assert "VBox(children" not in explorer and "<td>42</td>" in explorer
    # nothing left behind but the book
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["book", "notebooks", *METRICS])


def test_book_of_a_complete_run_has_no_banner_and_nothing_external(tmp_path: Path) -> None:
    metrics = {**METRICS, "01_corpus": {"complete": True, "n_conversations": 5000,
                                        "n_expected": 5000}}
    run = make_run(tmp_path, metrics, ["01_corpus", "13_explorer"])
    html = pages(book.build_book(run))
    for name, text in html.items():
        assert "partial-banner" not in text, name
        # nothing loaded or linked from outside the folder: no CDN, fonts, MathJax, require.js
        assert not re.search(r'(src|href)="(https?:)?//', text), name
        for bad in ("mathjax", "require.js", "googleapis", "unpkg", "jsdelivr", "cdnjs"):
            assert bad not in text.lower(), (name, bad)


def test_rebuild_replaces_the_book_and_starts_clean(tmp_path: Path) -> None:
    run = make_run(tmp_path, {"05_subset": {"n_v1": 3}}, ["05_subset"])
    assert book.render(run).warnings == []
    (run / "book" / "stale.html").write_text("old")
    # a second build in the same process: docutils' registries were restored by the first
    assert book.render(run).warnings == []
    assert not (run / "book" / "stale.html").exists()


def test_provenance_shows_manifest_overrides_packages_and_spend(tmp_path: Path) -> None:
    manifest = {
        "profile": "default", "package_version": "0.1.0",
        "git": {"commit": "c0ffee" * 6 + "beef", "dirty": False}, "python": "3.11.7",
        "written_at": "2026-01-01T00:00:00+00:00", "mirror": True,
        "notebooks": [{"notebook": "01_corpus", "status": "ok", "seconds": 2.5}],
        "artifacts": {"healthbench_oss": {"sha256": "12" * 32, "source": "mirror",
                                          "url": "https://example.org/x.jsonl",
                                          "licence": "MIT", "used_by": ["01_corpus"]}},
        "subset_sha256": {"v1": SHA},
        "grader_template_sha256": "34" * 32,
        "overrides": {"seed": 123, "corpus.allow_partial": True},
        "packages": {"pandas": "2.2.3", "numpy": "2.1.0", "playwright": None},
        "spend": {"calls": 12, "input_tokens": 1000, "output_tokens": 500, "cost": 0.0123,
                  "by_model": [{"provider": "openai", "model": "gpt-4.1", "mode": "sync",
                                "calls": 12, "cost": 0.0123}]},
    }
    run = make_run(tmp_path, {"01_corpus": {"complete": True}}, ["01_corpus"], manifest)
    html = pages(book.build_book(run))
    prov = html["provenance.html"]
    for text in ("c0ffee", "(clean)", "12" * 32, SHA, "34" * 32, "seed", "123",
                 "corpus.allow_partial", "pandas", "2.2.3", "US$ 0.0123",
                 "https://example.org/x.jsonl", "allow_partial"):
        assert text in prov, text
    assert "seed=123" in html["index.html"]  # the landing page says the run was tweaked
    assert "not installed" in prov
    assert 'href="https://example.org' not in prov  # shown, never linked
    assert 'href="01_corpus.html"' in prov


def test_cli_builds_a_book_and_names_a_missing_run(tmp_path: Path, capsys) -> None:
    make_run(tmp_path, {"05_subset": {"n_v1": 3}}, ["05_subset"])
    assert cli(["book", "default", "--outputs", str(tmp_path)]) == 0
    assert (tmp_path / "default" / "book" / "index.html").is_file()
    assert "index.html" in capsys.readouterr().out
    assert cli(["book", "nosuch", "--outputs", str(tmp_path)]) == 1
    assert "nosuch" in capsys.readouterr().err


def test_after_a_failed_notebook_the_earlier_runs_chapters_are_left_out(tmp_path: Path) -> None:
    notebooks = ["01_corpus", "03_review_round1", "05_subset", "09_judges"]
    manifest = {"profile": "default", "notebooks": [
        {"notebook": "01_corpus", "status": "ok"},
        {"notebook": "03_review_round1", "status": "failed"}]}
    run = make_run(tmp_path, METRICS, notebooks, manifest)
    assert [p.stem for p in book.chapters_of(run, manifest)] == ["01_corpus",
                                                                "03_review_round1"]
    html = pages(book.render(run).index)
    assert "03_review_round1.html" in html
    assert "05_subset.html" not in html and "09_judges.html" not in html
    # a run of some notebooks that stopped nowhere keeps the other chapters
    manifest["notebooks"][1]["status"] = "ok"
    assert len(book.chapters_of(run, manifest)) == len(notebooks)
