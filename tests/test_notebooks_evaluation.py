"""Notebooks 06-11 on the default profile (paper/replay mode): metrics from the released files.

The expected values are recomputed here from the raw released files with plain json/csv.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import released_jsonl as jsonl
from conftest import stage_metrics as metrics

from hbpsych_utils.core import sources

pytestmark = pytest.mark.notebook


@pytest.fixture
def run(default_run: Path) -> Path:
    return default_run





def test_generation_and_grading_spend(run: Path) -> None:
    spend = jsonl("run_spend")
    gen, grade = metrics(run, "06_generation"), metrics(run, "07_grading")
    assert gen["spend_generate_usd"] == pytest.approx(
        sum(s["cost"] for s in spend if s["phase"] == "generate"), abs=1e-4)
    assert grade["spend_grade_usd"] == pytest.approx(
        sum(s["cost"] for s in spend if s["phase"] == "grade"), abs=1e-4)
    errors = jsonl("run_errors")
    assert gen["anomalies"]["empty_response"] == sum(
        e["kind"] == "empty_response" for e in errors)
    assert grade["grader_template_sha256"] == sources.artifact("grader_template").sha256


def test_scores_from_the_matrix(run: Path) -> None:
    rows = list(csv.DictReader(sources.fetch("matrix_v1").open()))
    by_cand: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_cand[r["candidate"]].append(float(r["clipped_mean_score"]))
    m = metrics(run, "08_scores")
    assert len(m["panel_mean"]) == 20  # the study's candidates; later ones excluded
    for cand, value in m["panel_mean"].items():
        assert value == pytest.approx(sum(by_cand[cand]) / 3, abs=1e-12)
    assert m["ranking"] == sorted(m["panel_mean"], key=lambda c: (-m["panel_mean"][c], c))
    assert "ci_low" not in m and m["point_estimates_only"] is True
    assert set(m["by_subset"]) == {"v1", "hard"}


def test_judges_self_preference_by_hand(run: Path) -> None:
    rows = {(r["candidate"], r["judge"]): float(r["clipped_mean_score"])
            for r in csv.DictReader(sources.fetch("matrix_v1").open())}
    judges = ["gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001", "gemini-2.5-flash"]
    m = metrics(run, "09_judges")
    g = "gemini-2.5-flash"
    raw = rows[(g, g)] - (rows[(g, judges[0])] + rows[(g, judges[1])]) / 2
    assert m["self_preference_raw"][g] == pytest.approx(raw, abs=1e-12)
    assert set(m["kendall_tau"]) == {f"{a}|{b}" for i, a in enumerate(judges)
                                     for b in judges[i + 1:]}
    assert sum(m["severity"].values()) == pytest.approx(0, abs=1e-12)


def test_refusals_and_harness(run: Path) -> None:
    ref = metrics(run, "10_refusals")
    assert sum(ref["refusals"].values()) == sum(
        len(v) for v in ref["refused_conversations"].values())
    harness = metrics(run, "11_harness_validation")
    scores = [x["score"] for x in jsonl("harness_scores")]
    assert harness["n_scored"] == len(scores) == 1000
    assert harness["clipped_mean"] == pytest.approx(min(1, max(0, sum(scores) / len(scores))))
    # compared with OpenAI's published figure by default, as the study did
    assert harness["published"] == 0.16
    assert harness["delta"] == pytest.approx(harness["clipped_mean"] - 0.16)


def test_harness_breakdown_and_length_recomputed_by_hand(run: Path, mirror: Path) -> None:
    """GPT-4.1's per-axis and per-theme Hard scores (on the conversations whose rubrics the
    corpus holds) and its length-adjusted Hard score over every reply, recomputed from the
    mirror's files with plain json: simple-evals' per-tag rule and the reference's length
    formula (Hard penalty 0.0392 per 500 characters beyond 2,000, before the clip)."""
    import json

    def read(rel: str) -> list[dict]:
        return [json.loads(x) for x in (mirror / rel).read_text().splitlines() if x.strip()]

    results = read("mindbench-ai/healthbench-psych/provenance/harness-validation/results.jsonl")
    corpus = {c["prompt_id"]: c for c in read("openai/simple-evals/healthbench/"
                                                "oss_eval.partial.jsonl")}
    per_tag: dict[str, list[float]] = defaultdict(list)
    with_rubric = 0
    for line in results:
        conv = corpus.get(line["prompt_id"])
        if conv is None:
            continue
        with_rubric += 1
        met = [g["criteria_met"] for g in line["grades"]]
        items = list(zip(conv["rubrics"], met, strict=True))

        def score(pairs: list) -> float | None:
            possible = sum(r["points"] for r, _ in pairs if r["points"] > 0)
            return sum(r["points"] for r, m in pairs if m) / possible if possible else None

        overall = score(items)
        for tag in conv["example_tags"]:
            if tag.startswith("theme:"):
                per_tag[tag].append(overall)
        for tag in {t for r in conv["rubrics"] for t in r["tags"] if t.startswith("axis:")}:
            value = score([(r, m) for r, m in items if tag in r["tags"]])
            if value is not None:
                per_tag[tag].append(value)
    got = metrics(run, "11_harness_validation")
    b = got["released_breakdown"]
    assert (b["n_lines"], b["n_with_rubric"]) == (1000, with_rubric) == (1000, 193)
    assert set(b["by_tag"]) == set(per_tag)
    assert {t[len("axis:"):] for t in per_tag if t.startswith("axis:")} == {
        "accuracy", "completeness", "communication_quality", "context_awareness",
        "instruction_following"}
    for tag, values in per_tag.items():
        assert b["by_tag"][tag]["n"] == len(values)
        assert b["by_tag"][tag]["clipped_mean"] == pytest.approx(
            min(1, max(0, sum(values) / len(values))), abs=1e-12)
    adjusted = [r["score"] - 0.0392 * (len(r["response_text"]) - 2000) / 500 for r in results]
    lm = got["released_length"]
    assert (lm["variant"], lm["penalty"], lm["n"]) == ("hard", 0.0392, 1000)
    assert lm["adjusted_mean"] == pytest.approx(min(1, max(0, sum(adjusted) / 1000)), abs=1e-12)
    lengths = sorted(len(r["response_text"]) for r in results)
    assert lm["chars"]["median"] == (lengths[499] + lengths[500]) / 2
    assert lm["chars"]["mean"] == pytest.approx(sum(lengths) / 1000)


def test_figures_and_tables_written_and_published(run: Path) -> None:
    m = metrics(run, "12_figures_tables")
    stage = run / "12_figures_tables"
    published = run.parent / "published"
    for stem in ("fig_categories_v1", "fig_ranking_v1", "fig_heatmap_v1", "fig_judges_v1",
                 "fig_ranking_hard", "fig_heatmap_hard"):
        for ext in ("png", "svg"):
            name = f"{stem}.{ext}"
            assert (stage / name).stat().st_size > 10_000
            assert (published / name).read_bytes() == (stage / name).read_bytes()
    table = list(csv.DictReader((stage / "table1_v1.csv").open()))
    panel = metrics(run, "08_scores")["panel_mean"]
    assert len(table) == 20
    assert [r["candidate"] for r in table] == metrics(run, "08_scores")["ranking"]
    assert float(table[0]["panel_mean"]) == pytest.approx(panel[table[0]["candidate"]], abs=1e-6)
    assert "\\toprule" in (stage / "table1.tex").read_text()
    assert m["published_to_figures"] is True and m["n_files"] == len(m["files"])


def test_judge_accuracy_in_paper_mode_says_once_what_it_needs(run: Path) -> None:
    """15 on the default profile: the physicians' labels are online only, so the chapter says
    once, at its top, that it needs them and what a live run adds, downloads nothing and calls
    no judge; every other section shows nothing (the book drops it)."""
    import json

    from hbpsych_utils.reporting.display import is_not_in_run

    assert metrics(run, "15_judge_accuracy") == {"mode": "paper"}
    # nothing fetched (no download attempt, not even the template): no artifact record at all
    assert sorted(p.name for p in (run / "15_judge_accuracy").iterdir()) == [
        "build.json", "metrics.json"]
    nb = json.loads((run / "notebooks" / "15_judge_accuracy.ipynb").read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    shown = ["".join(o.get("data", {}).get("text/markdown", "")) for o in outputs]
    assert sum("needs the physician labels" in s for s in shown) == 1
    assert sum(is_not_in_run(o) for o in outputs) >= 6


def _sections(nb: dict) -> list[tuple[str, list[dict]]]:
    """A chapter's ``##`` sections: each heading's text and the outputs of its code cells."""
    found: list[tuple[str, list[dict]]] = []
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("## "):
            found.append((source.splitlines()[0][3:].strip(), []))
        elif cell["cell_type"] == "code" and found:
            found[-1][1].extend(cell.get("outputs", []))
    return found


def _book_headings(page: Path) -> list[str]:
    """The section headings of a chapter's page in the book (the theme's own left out)."""
    import re
    from html import unescape

    html = page.read_text(encoding="utf-8")
    return [unescape(h).replace("’", "'").strip()
            for h in re.findall(r"<h2>([^<]*)<a class=\"headerlink\"", html)]


def test_a_chapter_without_its_data_says_so_once_at_its_top(run: Path) -> None:
    """In the default (paper) run, chapters 13, 14 and 16 need a live run and 15 the physician
    labels: each chapter's first output says so, with what a live run adds, and no other
    output repeats it; the book drops every section whose outputs are all "not in this run"
    (heading included) and says the sentence once; the landing page marks these chapters
    "needs ..." where the others read "current"."""
    import json
    import re
    from html import unescape

    from hbpsych_utils.pipeline import graph, profiles
    from hbpsych_utils.reporting.display import is_not_in_run

    profile = profiles.load_profile("default")
    needs = {s: need for s in graph.STAGES
             if (need := graph.needs(s, graph.stage_mode(profile, s))) is not None}
    assert needs == {graph.EXPLORER: "a live run", graph.ANALYSES: "a live run",
                     graph.JUDGE_ACCURACY: "the physician labels",
                     "16_self_consistency": "a live run"}
    dropped = {graph.EXPLORER: 1, graph.ANALYSES: 3, graph.JUDGE_ACCURACY: 6,
               "16_self_consistency": 6}  # at least
    for stage, need in needs.items():
        nb = json.loads((run / "notebooks" / f"{stage}.ipynb").read_text(encoding="utf-8"))
        shown = ["".join(o.get("data", {}).get("text/markdown", ""))
                 for c in nb["cells"] for o in c.get("outputs", []) if not is_not_in_run(o)]
        assert shown[0].startswith(f"**This chapter needs {need}**"), (stage, shown[0])
        assert " adds " in shown[0], stage  # what a run with the data adds
        assert sum("This chapter needs" in s for s in shown) == 1, stage
        sections = _sections(nb)
        empty = [h for h, outs in sections if outs and all(is_not_in_run(o) for o in outs)]
        kept = [h for h, outs in sections if h not in empty]
        assert len(empty) >= dropped[stage], (stage, empty)
        page = run / "book" / f"{stage}.html"
        assert _book_headings(page) == kept, stage
        assert page.read_text(encoding="utf-8").count("This chapter needs") == 1, stage
    landing = unescape(" ".join((run / "book" / "index.html").read_text(
        encoding="utf-8").split()))
    row = (r'href="(\d\d_\w+)\.html"><span[^>]*>\d\d · [^<]*</span></a></p></td> '
           r'<td[^>]*><p>[^<]*</p></td> <td[^>]*><p>([^<]*)</p></td>')
    states = dict(re.findall(row, landing))
    assert set(states) == set(graph.STAGES)
    assert {s: w for s, w in states.items() if s in needs} == {
        s: f"needs {need}" for s, need in needs.items()}
    assert {w for s, w in states.items() if s not in needs} == {"current"}
