"""The book (reporting.book): headline numbers from crafted metrics, the partial-corpus banner,
runs with stages missing or not current, the provenance page, the offline rules, and the command
line.

The crafted metrics are complete, as the stages write them (the book reads them with the
stages' typed models, ``pipeline.metrics``): the construction stages' are those of a default
run, the evaluation stages' are shaped like them with made-up candidates. Books here are built
from small crafted run folders (a few seconds each); the browser test
(tests/test_book_browser.py) drives Chromium over the books of real default and smoke runs."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from hbpsych_utils import study
from hbpsych_utils.__main__ import main as cli
from hbpsych_utils.pipeline import graph, metrics, profiles, stage, state
from hbpsych_utils.reporting import book, book_chapters, book_headlines

SHA = "ab" * 32
J1, J2, J3 = study.JUDGE_PANEL
CANDIDATES = ["m-a", J1, "m-c", "m-d"]
PANEL = {"m-a": 0.6269, J1: 0.6238, "m-c": 0.61, "m-d": 0.5}
PER_JUDGE = {judge: {c: round(v + d, 4) for c, v in PANEL.items()}
             for judge, d in ((J1, -0.02), (J2, 0.01), (J3, 0.01))}

CORPUS = {
    "corpus_source": "registry", "complete": False, "n_conversations": 712, "n_expected": 5000,
    "coverage": 0.1424, "n_skipped": 0, "n_hard_ids": 1000, "n_hard_in_corpus": 193,
    "n_rubric_items": 8541, "n_non_english": 101, "non_english_share": 0.1419,
    "ids_sha256": "4a" * 32, "turns_mean": 2.97, "turns_median": 1.0, "turns_max": 15,
    "n_multi_turn": 355, "rubric_items_mean": 12.0, "n_negative_items": 2679,
    "positive_points_total": 38489, "negative_points_total": -18150, "points_all_integer": True,
}
COMPLETE_CORPUS = {**CORPUS, "n_conversations": 5000, "complete": True, "coverage": 1.0,
                   "n_hard_in_corpus": 1000}
REVIEW = {
    "mode": "replay", "n_reviewed": 791, "n_screened_in": 641, "n_controls": 150,
    "n_included": 596, "n_screened_in_included": 587, "n_controls_included": 9,
    "control_inclusion_rate": 0.06, "recall_triggered": True,
    "ac1_pairs": {"R1-R2": 0.7841, "R1-R3": 0.8213, "R2-R3": 0.7652},
    "ac1_pairwise_mean": 0.7902, "ac1_multirater": 0.78995, "fleiss_kappa": 0.6485,
    "cohen_kappa_pairs": {"R1-R2": 0.6192, "R1-R3": 0.7143, "R2-R3": 0.6103},
    "tier_counts": {"0/3": 120, "1/3": 75, "2/3": 81, "3/3": 515}, "threshold": 0.05,
}
RECALL = {
    "mode": "replay", "round2": "tallied", "n_recall_pool": 4209, "n_candidates": 81,
    "n_clear": 9, "n_possible": 72, "n_controls": 25, "n_candidates_included": 14,
    "n_clear_included": 6, "n_possible_included": 8, "n_controls_included": 1,
    "control_inclusion_rate": 0.04, "loop_terminated": True,
    "ac1_pairs": {"R1-R2": 0.2806, "R1-R3": 0.8423, "R2-R3": 0.3424},
    "ac1_pairwise_mean": 0.4884, "ac1_multirater": 0.5134, "fleiss_kappa": 0.111,
    "cohen_kappa_pairs": {"R1-R2": 0.0621, "R1-R3": 0.4492, "R2-R3": 0.1174},
    "recall_triggered": False, "tier_counts": {"0/3": 52, "1/3": 39, "2/3": 11, "3/3": 4},
    "threshold": 0.05,
}
SUBSET = {  # no release check recorded for hard
    "n_v1": 610, "n_v2": 611, "n_hard": 119, "sha256_v1": SHA, "sha256_v2": "cd" * 32,
    "sha256_hard": "ef" * 32, "matches_release_v1": True, "matches_release_v2": False,
    "category_counts": {"perinatal_mh": 112, "anxiety": 84, "no category majority": 65},
    "n_no_category_majority": 65,
}
SCORES = {
    "mode": "paper", "include_later": False, "subset": "v1", "panel_mean": PANEL,
    "ranking": CANDIDATES, "per_judge": PER_JUDGE, "point_estimates_only": True,
    "by_subset": {"v1": {"panel_mean": PANEL, "ranking": CANDIDATES, "per_judge": PER_JUDGE,
                         "point_estimates_only": True}},
}
JUDGES = {
    "mode": "paper", "subset": "v1",
    "kendall_tau": {f"{J1}|{J2}": 0.9368, f"{J1}|{J3}": 0.9474, f"{J2}|{J3}": 0.9263},
    "grand_mean": 0.59, "severity": {J1: -0.02, J2: 0.01, J3: 0.01},
    "self_preference_raw": {J1: 0.01, J2: None, J3: None},
    "self_preference_corrected": {J1: 0.02, J2: None, J3: None}, "n_candidates": 4,
}
HARNESS = {
    "mode": "replay", "n_scored": 1000, "clipped_mean": 0.15743, "bootstrap_std": 0.0089,
    "published": None, "delta": None, "published_source": "",
    "settings": {"candidate": study.HARNESS_MODEL, "judge": study.HARNESS_MODEL,
                 "temperature": 0.5, "max_tokens": 2048},
}
METRICS = {"01_corpus": CORPUS, "03_review_round1": REVIEW, "04_recall": RECALL,
           "05_subset": SUBSET, "08_scores": SCORES, "09_judges": JUDGES,
           "11_harness_validation": HARNESS}
"""``metrics.json`` of each stage as the stage writes it."""


def typed(raw: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Metrics as the book reads them: each stage's through its model (``metrics.parse``)."""
    return {name: metrics.parse(name, m) for name, m in raw.items()}


def by_key(heads: list[book_headlines.Headline]) -> dict[str, book_headlines.Headline]:
    return {h.key: h for h in heads}


def test_headline_numbers_from_crafted_metrics() -> None:
    heads = book_headlines.headline_numbers(typed(METRICS))
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
    # AC1 as the paper reports it: the mean over reviewer pairs, the remaining pair beside it
    assert got["ac1_03"].value == "0.79" and got["ac1_04"].value == "0.49"
    assert "remaining pair R1–R3" in got["ac1_04"].detail and ": 0.84" in got["ac1_04"].detail
    assert "multi-rater AC1: 0.513" in got["ac1_04"].detail
    # the top three by panel mean, judges' display names used where the study has one
    assert got["ranking"].value == "1. m-a (0.627), 2. GPT-4.1 (0.624), 3. m-c (0.610)"
    assert "of 4 candidates" in got["ranking"].detail and "point estimates" in got["ranking"].detail
    assert got["judge_tau"].value == "0.926 to 0.947"
    assert got["judge_tau"].chapter == "09_judges"
    assert got["judge_tau"].detail == "on HealthBench-Psych v1; 3 judge pairs"  # its subset
    # no published figure: the clipped mean is the headline, and the detail says why
    assert got["harness"].value == "0.157"
    assert "no published figure" in got["harness"].detail and "n = 1,000" in got["harness"].detail


def test_harness_headline_is_the_difference_when_a_published_figure_exists() -> None:
    harness = {**HARNESS, "clipped_mean": 0.157, "bootstrap_std": 0.009, "published": 0.145,
               "delta": 0.012, "published_source": "the paper"}
    (h,) = book_headlines.headline_numbers(typed({"11_harness_validation": harness}))
    assert h.value == "0.157 against the published 0.14"  # at the paper's precision
    assert "difference +0.012" in h.detail and "(the paper)" in h.detail


def test_live_harness_rerun_is_compared_with_the_released_run() -> None:
    harness = {**HARNESS, "mode": "live", "n_scored": 4, "clipped_mean": 0.2892,
               "bootstrap_std": 0.1118, "n_common_with_released": 4,
               "mean_difference_vs_released": -0.0598}
    (h,) = book_headlines.headline_numbers(typed({"11_harness_validation": harness}))
    assert h.value == "0.289"
    assert h.detail.endswith("-0.060 against the released run on the 4 conversations in common")


def test_missing_stages_and_numbers_give_fewer_headlines_not_errors() -> None:
    assert book_headlines.headline_numbers({}) == []
    only_subset = typed({"05_subset": SUBSET})
    assert [h.key for h in book_headlines.headline_numbers(only_subset)] == [
        "subset_v1", "subset_v2", "subset_hard"]
    # round 2 awaiting ratings writes no rate or AC1; a tau that could not be computed is null
    # (or NaN); a scoring with no candidate ranked has no top of the ranking
    awaiting = {"mode": "live", "round2": "awaiting_ratings", "n_recall_pool": 4209,
                "recall_model": "gpt-4.1-2025-04-14", "n_recall_screened": 4209,
                "n_recall_refused": 0, "n_recall_failed": 0, "n_recall_problems": 0,
                "n_candidates": 81, "n_clear": 9, "n_possible": 72, "n_controls": 25,
                "threshold": 0.05}
    sparse = typed({
        "04_recall": awaiting,
        "09_judges": {**JUDGES, "kendall_tau": {"a|b": None, "a|c": float("nan"), "b|c": 0.5}},
        "08_scores": {**SCORES, "panel_mean": {}, "ranking": [], "per_judge": {},
                      "by_subset": {}}})
    got = by_key(book_headlines.headline_numbers(sparse))
    assert list(got) == ["judge_tau"] and got["judge_tau"].value == "0.500"
    assert got["judge_tau"].detail.endswith("; 1 judge pair")


def test_partial_banner_follows_the_corpus_metrics() -> None:
    banner = book.partial_banner(typed(METRICS))
    assert "712 of HealthBench's 5,000" in banner and "chapter 01 computes" in banner
    assert book.partial_banner(typed({"01_corpus": COMPLETE_CORPUS})) == ""
    assert book.partial_banner({}) == ""  # 01 did not run: nothing to claim


# ---------------------------------------------------------------------------------------------
# whole books from crafted run folders


def _notebook(path: Path, title: str, *, widget: bool = False) -> None:
    import nbformat  # here, not at collection: it brings jsonschema (~1 s of imports)

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
            book_chapters.WIDGET_VIEW: {"model_id": "abc", "version_major": 2, "version_minor": 0},
            "text/plain": "VBox(children=(...))"}))
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
            "state": {"abc": {"model_name": "VBoxModel"}}, "version_major": 2}}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nSome prose."), code]
    nbformat.write(nb, str(path))


def make_run(root: Path, metrics: dict[str, dict], notebooks: list[str],
             manifest: dict | None = None) -> Path:
    run = root / "default"
    (run / "notebooks").mkdir(parents=True)
    for name, m in metrics.items():
        (run / name).mkdir()
        (run / name / "metrics.json").write_text(json.dumps(m))
    for stem in notebooks:
        _notebook(run / "notebooks" / f"{stem}.ipynb", f"{stem} chapter",
                  widget=stem.startswith("13"))
    if manifest is not None:
        (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def pages(index: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in index.parent.glob("*.html")}


def shown(page: str) -> str:
    """A page's text as a reader sees it (tags dropped, entities decoded)."""
    return unescape(re.sub(r"<[^>]+>", "", page))


def test_book_of_a_partial_run_with_stages_missing(tmp_path: Path) -> None:
    # 02, 06, 07, 10, 12 never ran (as with --only); 08 has metrics but no notebook; no stage
    # has a build record (no manifest either): every chapter is marked not current
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
        assert "bd-header-announcement" in text and "read 712 of" in text, name
    index = html["index.html"]
    # headline numbers link to their chapter, or stay plain text when it is absent (08)
    assert re.search(r'href="05_subset.html"[^>]*>\s*(<span[^>]*>)?610 conversations', index)
    assert re.search(r'href="03_review_round1.html"[^>]*>\s*(<span[^>]*>)?6\.0 %', index)
    assert "kimi" not in index and "1. m-a (0.627)" in index
    assert 'href="08_scores.html"' not in index
    assert "No figures" in html["figures.html"]
    assert "This run folder has no" in html["provenance.html"]
    # each chapter says it is not current, why, and the command that brings it up to date
    assert "chapters are not current" in index
    for stem in notebooks:
        page = shown(html[f"{stem}.html"])
        assert ("Not run: it has not run yet" if stem == "13_explorer" else  # no stage folder
                "Not current: it has no build record") in page, stem
        assert f"Bring it up to date with bash run_all.sh default --outputs {tmp_path}." in (
            page), stem
    # code folded behind one click; the widget view replaced by a note, its state not shipped
    chapter = html["03_review_round1.html"]
    assert "<details" in chapter and "Show code" in chapter
    explorer = html["13_explorer.html"]
    assert "interactive widget" in explorer and "widget-state" not in explorer
    assert "VBox(children" not in explorer and "<td>42</td>" in explorer
    # nothing left behind but the book and Sphinx's environment for the next build
    assert sorted(p.name for p in run.iterdir()) == sorted(
        [".book-build", "book", "notebooks", *METRICS])


def test_book_of_a_complete_run_has_no_banner_and_nothing_external(tmp_path: Path) -> None:
    run = make_run(tmp_path, {**METRICS, "01_corpus": COMPLETE_CORPUS},
                   ["01_corpus", "13_explorer"])
    html = pages(book.build_book(run))
    for name, text in html.items():
        assert "bd-header-announcement" not in text, name
        # nothing loaded or linked from outside the folder: no CDN, fonts, MathJax, require.js
        assert not re.search(r'(src|href)="(https?:)?//', text), name
        for bad in ("mathjax", "require.js", "googleapis", "unpkg", "jsdelivr", "cdnjs"):
            assert bad not in text.lower(), (name, bad)


def test_rebuild_replaces_the_book_and_starts_clean(tmp_path: Path) -> None:
    run = make_run(tmp_path, {"05_subset": SUBSET}, ["05_subset"])
    assert book.render(run).warnings == []
    (run / "book" / "stale.html").write_text("old")
    # a second build in the same process: docutils' registries were restored by the first
    assert book.render(run).warnings == []
    assert not (run / "book" / "stale.html").exists()


def test_metrics_of_the_wrong_shape_are_an_error_naming_the_file_and_field(
        tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path, {"05_subset": {**SUBSET, "n_v1": "many"}}, ["05_subset"])
    with pytest.raises(book.BookError, match=r"05_subset/metrics.json: field n_v1: "):
        book.render(run)
    assert cli(["book", "default", "--outputs", str(tmp_path)]) == 1
    assert "05_subset/metrics.json: field n_v1" in capsys.readouterr().err


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
    run = make_run(tmp_path, {"01_corpus": COMPLETE_CORPUS}, ["01_corpus"], manifest)
    html = pages(book.build_book(run))
    prov = html["provenance.html"]
    for text in ("c0ffee", "(clean)", "12" * 32, SHA, "34" * 32, "seed", "123",
                 "corpus.allow_partial", "pandas", "2.2.3", "US$ 0.0123",
                 "https://example.org/x.jsonl", "allow_partial"):
        assert text in prov, text
    assert "seed=123" in html["index.html"]  # the landing page says the run was tweaked
    assert "not installed" in prov
    # an upstream address is a link that wraps (a reader's click, never a request of the page)
    assert 'class="url" href="https://example.org/x.jsonl"' in prov
    assert 'href="01_corpus.html"' in prov
    # every stage of the profile with its state (01 has no build record: not the runner's)
    assert "Stages" in prov and "it has no build record" in prov and "not run" in prov


def test_values_of_a_profile_or_a_manifest_are_text_on_the_landing_and_provenance_pages(
) -> None:
    """A profile name with a backtick and a pipe (which end a code span or a table cell) and
    manifest values with HTML are shown as text (the browser test runs a whole hostile book)."""
    from test_escaping import HOSTILE, assert_inert, rendered

    landing = book.landing_markdown(HOSTILE, {}, [], description=HOSTILE,
                                    overrides={"corpus.corpus_file": HOSTILE},
                                    command=f"bash run_all.sh {HOSTILE}", judges=None, level=0.95)
    assert HOSTILE in "".join(assert_inert(rendered(landing)).text)
    manifest = {"profile": HOSTILE, "package_version": HOSTILE, "python": HOSTILE,
                "written_at": HOSTILE, "git": {"commit": HOSTILE},
                "notebooks": [{"notebook": "01_corpus", "status": HOSTILE, "seconds": 1}],
                "overrides": {HOSTILE: HOSTILE}, "packages": {HOSTILE: HOSTILE},
                "artifacts": {HOSTILE: {"sha256": HOSTILE, "source": HOSTILE, "url": HOSTILE,
                                        "licence": HOSTILE, "used_by": [HOSTILE]}},
                "spend": {"calls": 1, "cost": 0.1, "by_model": [
                    {"provider": HOSTILE, "model": HOSTILE, "mode": HOSTILE, "calls": 1,
                     "cost": HOSTILE}]}}
    assert_inert(rendered(book.provenance_markdown(manifest, ["01_corpus"], {})))


def test_cli_builds_a_book_and_names_a_missing_run(tmp_path: Path, capsys) -> None:
    make_run(tmp_path, {"05_subset": SUBSET}, ["05_subset"])
    assert cli(["book", "default", "--outputs", str(tmp_path)]) == 0
    assert (tmp_path / "default" / "book" / "index.html").is_file()
    assert "index.html" in capsys.readouterr().out
    assert cli(["book", "nosuch", "--outputs", str(tmp_path)]) == 1
    assert "nosuch" in capsys.readouterr().err


def test_after_a_failed_notebook_the_chapters_are_kept_and_marked_not_current(
        tmp_path: Path) -> None:
    """Changed behaviour: the chapters after a failed notebook used to be left out of the book.
    They are now kept, each with a warning saying why it is not current (the failed stage,
    and those downstream of it); the current ones carry none."""
    profile = profiles.load_profile("default")
    manifest = {"profile": "default", "mirror": True,
                "profile_values": profile.model_dump(mode="json"), "notebooks": [
                    {"notebook": "01_corpus", "status": "ok"},
                    {"notebook": "03_review_round1", "status": "failed"}]}
    notebooks = ["01_corpus", "03_review_round1", "05_subset", "09_judges"]
    failed = "03_review_round1"
    run = make_run(tmp_path, {k: v for k, v in METRICS.items() if k != failed}, notebooks,
                   manifest)
    expected = state.expected_inputs(profile, mirror=True)
    for name in graph.STAGES:  # every stage built by the runner from the profile, but 03
        (run / name).mkdir(exist_ok=True)
        if name != failed:
            state.write_build(run / name, name, by=state.RUNNER, inputs=expected[name])
    stage.retire_stage(run, failed, {"notebook": failed, "status": "failed", "error": {
        "cell": 3, "ename": "ValueError", "evalue": "boom"}})

    states = book.stage_states(run, book.run_profile(run, manifest), manifest)
    assert {k: s.state for k, s in states.items() if not s.current} == {
        failed: "failed", "04_recall": "not_current", "05_subset": "not_current",
        "10_refusals": "not_current", "12_figures_tables": "not_current"}
    assert [p.stem for p in book.chapters_of(run, states)] == notebooks
    html = pages(book.render(run).index)
    assert {f"{stem}.html" for stem in notebooks} <= set(html)
    assert "Failed: its last run was failed: ValueError: boom" in shown(
        html["03_review_round1.html"])
    assert "Not current: its upstream 03_review_round1 failed" in shown(html["05_subset.html"])
    command = f"bash run_all.sh default --outputs {tmp_path}"  # this run folder's, not outputs/
    for stem in ("03_review_round1", "05_subset"):
        assert f"Bring it up to date with {command}." in shown(html[f"{stem}.html"]), stem
    for stem in ("01_corpus", "09_judges"):  # current: no warning
        assert "Bring it up to date" not in shown(html[f"{stem}.html"]), stem
    index = html["index.html"]
    assert f"5 of {len(graph.STAGES)} chapters are not current" in shown(index)
    assert f"({command})" in shown(index)
    # a headline whose chapter is not current is marked so; one whose chapter is, is not
    assert "610 conversations (not current)" in shown(index)
    assert "3. m-c (0.610)" in shown(index)  # 08 is current (paper mode reads no stage)
    assert "3. m-c (0.610) (not current)" not in shown(index)


def test_a_stage_the_profile_does_not_run_carries_no_warning(tmp_path: Path) -> None:
    """A profile whose notebooks list leaves 12 out (toy_specialty, local): the figures page
    says there are no figures, without a warning that 12 is "not in this profile" and a command
    that cannot change that."""
    profile = profiles.load_profile("default", {"notebooks": ["01_corpus"]})
    manifest = {"profile": "default", "mirror": True,
                "profile_values": profile.model_dump(mode="json"), "notebooks": []}
    run = make_run(tmp_path, {"01_corpus": CORPUS}, ["01_corpus"], manifest)
    expected = state.expected_inputs(profile, mirror=True)
    state.write_build(run / "01_corpus", "01_corpus", by=state.RUNNER,
                      inputs=expected["01_corpus"])
    states = book.stage_states(run, book.run_profile(run, manifest), manifest)
    assert states["12_figures_tables"].state == "not_in_profile"
    assert book.chapter_banner(states["12_figures_tables"], "bash run_all.sh p") == ""
    html = pages(book.render(run).index)
    assert "No figures: chapter 12 did not run." in shown(html["figures.html"])
    for name, page in html.items():
        assert "Bring it up to date" not in shown(page), name
        assert "in this profile" not in shown(page), name


def test_the_update_command_names_the_run_folder_and_its_overrides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command a not-current chapter shows must bring *this* run folder up to date: its
    outputs root unless it is the default one, and the run's --set overrides (no --only)."""
    monkeypatch.setenv("HBPSYCH_OUTPUTS", str(tmp_path / "outputs"))
    manifest = {"overrides": {"seed": 3, "judges.subset": "hard"},
                "command": "bash run_all.sh default --only 09_judges --set seed=3"}
    sets = " --set seed=3 --set 'judges.subset=\"hard\"'"
    assert book.update_command("default", manifest, tmp_path / "outputs") == (
        "bash run_all.sh default" + sets)
    assert book.update_command("default", manifest, tmp_path / "elsewhere") == (
        f"bash run_all.sh default --outputs {tmp_path / 'elsewhere'}" + sets)
    assert book.update_command("default", None) == "bash run_all.sh default"


def test_a_model_name_linking_to_its_chapter_is_escaped_once(tmp_path: Path) -> None:
    """A name with ``&`` and ``<`` in a headline number or a ledger row that links to its
    chapter reads as itself: the link's text is escaped once, like any other text (a
    ``{doc}`` role's title could not carry ``<``; replaced by ``&lt;`` it showed as such)."""
    name = "m&<b>x `y`"
    panel = {name: 0.7, **PANEL}
    scores = {**SCORES, "panel_mean": panel, "ranking": [name, *CANDIDATES],
              "by_subset": {"v1": {**SCORES["by_subset"]["v1"], "panel_mean": panel,
                                   "ranking": [name, *CANDIDATES]}}}
    run = make_run(tmp_path, {**METRICS, "08_scores": scores}, ["08_scores"])
    report = book.render(run)
    assert report.warnings == []
    html = pages(report.index)
    for page in ("index.html", "ledger.html"):
        assert "&amp;amp;" not in html[page] and "&amp;lt;" not in html[page], page
        assert re.search(r'href="08_scores.html"[^>]*>\s*(<span[^>]*>)?[^<]*'
                         + re.escape("m&amp;&lt;b&gt;x"), html[page]), page
    assert f"1. {name} (0.700)" in shown(html["index.html"])


@pytest.mark.parametrize("outside", [True, False])
def test_a_publication_is_named_without_a_path_of_the_machine(tmp_path: Path,
                                                               outside: bool) -> None:
    """The provenance page names a publication's folder relative to the run folder, or by its
    name only when it is outside the run folder: never an absolute path (a book is shared)."""
    import hashlib

    from hbpsych_utils.reporting import publish

    run = make_run(tmp_path / "runs", METRICS, ["05_subset"], manifest={"profile": "default"})
    folder = (tmp_path / "elsewhere" / "OUT") if outside else (run / "published" / "v1")
    folder.mkdir(parents=True)
    data = b'{"x": 1}\n'
    (folder / "healthbench-psych--m.json").write_bytes(data)
    record = publish.Published(
        subset="v1", mode="paper", output=str(folder if outside else "published/v1"),
        written_at="2026-01-01T00:00:00+00:00",
        files={"healthbench-psych--m.json": hashlib.sha256(data).hexdigest()}, stages={})
    (run / publish.RECORD).write_text(json.dumps({"v1": record.model_dump()}))
    page = book.published_markdown(run, tmp_path / "src", "default")
    assert str(tmp_path) not in page
    where = ("`OUT` (a folder outside the run folder)" if outside
             else "`published/v1` in the run folder")
    assert f"1 artifact written to {where} at" in page
    provenance = pages(book.build_book(run))["provenance.html"]
    for path in (str(tmp_path), str(Path.home())):
        assert path not in provenance
    assert re.search(r"1 artifact written to <code[^>]*><span[^>]*>"
                     + ("OUT</span></code> \\(a folder outside the run folder\\)" if outside
                        else "published/v1</span></code> in the run folder"), provenance)
    assert 'href="_downloads/' in provenance  # the files are still linked, copied into the book


def _landing_states(profile_mode: str) -> dict[str, str]:
    """Each chapter's State cell on the landing page of a run whose evaluation stages ran in
    ``profile_mode``: 14 and 15 write their mode in their metrics, 13 writes no metrics (its
    mode is the profile's)."""
    raw = {**METRICS, graph.ANALYSES: {"mode": profile_mode},
           graph.JUDGE_ACCURACY: {"mode": profile_mode}}
    states = {s: state.StageState(stage=s, state="current") for s in graph.STAGES}
    landing = book.landing_markdown("p", typed(raw), list(graph.STAGES), states=states,
                                    judges=None, level=0.95,
                                    modes={graph.EXPLORER: profile_mode})
    rows = [line.split("|") for line in landing.splitlines() if line.startswith("| [")]
    return {next(s for s in graph.STAGES if f"({s}.ipynb)" in row[1]): row[3].strip()
            for row in rows}


def test_the_landing_marks_a_chapter_its_mode_leaves_nothing_to_show() -> None:
    """A paper run's 13 and 14 need a live run and 15 the physician labels: the landing page
    says so instead of "current" (13 from the profile's mode, having no metrics); in a live
    run they are current like the others."""
    paper = _landing_states(graph.PAPER)
    assert {s: paper[s] for s in (graph.EXPLORER, graph.ANALYSES, graph.JUDGE_ACCURACY)} == {
        graph.EXPLORER: "needs a live run", graph.ANALYSES: "needs a live run",
        graph.JUDGE_ACCURACY: "needs the physician labels"}
    assert paper[graph.SCORES] == paper[graph.CORPUS] == "current"
    live = _landing_states(graph.LIVE)
    assert set(live.values()) == {"current"} and set(live) == set(graph.STAGES)


def test_the_book_drops_a_section_that_shows_only_what_the_run_has_not() -> None:
    """A section (a heading and the cells up to the next) whose outputs are all the marker of
    a result the run has not is dropped, heading included; elsewhere only the markers go."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

    from hbpsych_utils.reporting import display

    def out(text: str = "", marker: bool = False) -> Any:
        return new_output("display_data", data={"text/markdown": text},
                          metadata={display.NOT_IN_RUN: True} if marker else {})

    def code(*outputs: Any) -> Any:
        return new_code_cell("x", outputs=list(outputs))

    cells = [new_markdown_cell("# Title\n\nWhy."), code(),
             new_markdown_cell("## Top"), code(out("**This chapter needs a live run**")),
             new_markdown_cell("## Empty"), code(out(marker=True)), code(out(marker=True)),
             new_markdown_cell("Still the empty section."),
             new_markdown_cell("## Mixed"), code(out("Wrote 1 file"), out(marker=True)),
             new_markdown_cell("## Prose only")]
    kept = display.without_sections_not_in_run(cells)
    headings = [c.source.splitlines()[0] for c in kept if c.cell_type == "markdown"]
    assert headings == ["# Title", "## Top", "## Mixed", "## Prose only"]
    outputs = [o for c in kept if c.cell_type == "code" for o in c.outputs]
    assert [o["data"]["text/markdown"] for o in outputs] == [
        "**This chapter needs a live run**", "Wrote 1 file"]
    assert not any(display.is_not_in_run(o) for o in outputs)
