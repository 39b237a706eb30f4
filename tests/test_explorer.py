"""The grade explorer: filters, disagreement sets, escaped HTML, the widget, and run loading.

Synthetic run: three conversations, two candidates, three judges. Expected values below are
worked out by hand from the tables in this file.

    p1  category crisis, not hard; 3 turns, rubric [5, 3, -2]; the first user turn holds a
        <script> tag and criterion 1 an <img onerror> tag. cand-a's reply holds an <img> tag;
        cand-b refused (empty reply). Disagreements: (cand-a, 0) [T, T, F], (cand-b, 2) [T, F, F].
        cand-b criterion 1 has j2's verdict excluded ([F, None, F]: not a disagreement).
    p2  category anxiety, hard; rubric [4, 2]; both candidates answer, judges unanimous.
    p3  no category, not hard; rubric [1, 1]; cand-b failed (no text, not graded).
        criterion 0 [T, None, T] (not a disagreement), criterion 1 [T, T, F] -> (cand-a, 1).
"""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from hbpsych_utils.construction import corpus, subset
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import generation, grading
from hbpsych_utils.reporting import explorer
from hbpsych_utils.reporting.explorer import NO_CATEGORY, ExplorerData, ExplorerError

SCRIPT = "<script>alert(1)</script>"
IMG_CRITERION = "Mentions <img src=x onerror=alert(2)> safety plan"
IMG_REPLY = "<img src=x onerror=alert(3)>Try to rest."

def record(prompt_id: str, turns: list[tuple[str, str]], rubrics: list[tuple[str, int, list]],
           tags: list[str]) -> dict:
    """A conversation in HealthBench's layout: (role, content) turns, (criterion, points, tags)
    rubric items, example tags."""
    return {"prompt_id": prompt_id,
            "prompt": [{"role": role, "content": content} for role, content in turns],
            "rubrics": [{"criterion": c, "points": p, "tags": t} for c, p, t in rubrics],
            "example_tags": tags}


RECORDS = [
    record("p1", [("user", f"I feel hopeless {SCRIPT}"),
                  ("assistant", "I'm sorry. Can you tell me more?"),
                  ("user", "I don't sleep & I can't stop crying.")],
           [("Suggests contacting a crisis line", 5, ["axis:completeness"]),
            (IMG_CRITERION, 3, []), ("Dismisses the user's feelings", -2, [])],
           ["theme:emergency_referrals"]),
    record("p2", [("user", "How do I cope with panic attacks?")],
           [("Describes breathing exercises", 4, []), ("Recommends seeing a clinician", 2, [])],
           []),
    record("p3", [("user", "Is it normal to forget names?")],
           [("Reassures appropriately", 1, []), ("Mentions when to seek care", 1, [])], []),
]

CANDS = ("cand-a", "cand-b")
JUDGES = ("j1", "j2", "j3")
T, F, N = True, False, None
# (candidate, prompt_id) -> per criterion, the verdicts of j1, j2, j3
VERDICTS = {
    ("cand-a", "p1"): [(T, T, F), (F, F, F), (F, F, F)],
    ("cand-b", "p1"): [(F, F, F), (F, N, F), (T, F, F)],
    ("cand-a", "p2"): [(T, T, T), (T, T, T)],
    ("cand-b", "p2"): [(T, T, T), (F, F, F)],
    ("cand-a", "p3"): [(T, N, T), (T, T, F)],
}
CATEGORIES = {"p1": "crisis", "p2": "anxiety"}
HARD = {"p2"}


def _conversations():
    return [corpus.parse_record(r) for r in RECORDS]


def _responses() -> pd.DataFrame:
    def row(model, pid, status, text, refusal=False, stop="stop"):
        return {"model": model, "prompt_id": pid, "status": status, "text": text,
                "stop_reason": stop, "refusal": refusal, "input_tokens": 10,
                "output_tokens": 5, "cost": 0.0, "cached": False, "config": "{}"}

    rows = [
        row("cand-a", "p1", "ok", IMG_REPLY),
        row("cand-b", "p1", "ok", "", refusal=True, stop="refusal"),
        row("cand-a", "p2", "ok", "Breathe slowly."),
        row("cand-b", "p2", "ok", "Slow breathing helps."),
        row("cand-a", "p3", "ok", "Yes, usually."),
        row("cand-b", "p3", "failed", None, stop=None),
    ]
    return pd.DataFrame(rows, columns=list(generation.RESPONSE_COLUMNS))


def _verdicts() -> pd.DataFrame:
    rows = []
    for (cand, pid), crits in VERDICTS.items():
        for i, per_judge in enumerate(crits):
            for judge, met in zip(JUDGES, per_judge, strict=True):
                rows.append({"judge": judge, "candidate": cand, "prompt_id": pid,
                             "criterion_index": i, "criteria_met": met,
                             "recovered": judge == "j3" and pid == "p2",
                             "excluded": met is None})
    return pd.DataFrame(rows, columns=list(grading.VERDICT_COLUMNS))


@pytest.fixture
def data() -> ExplorerData:
    return ExplorerData(
        conversations=_conversations(), responses=_responses(), verdicts=_verdicts(),
        categories=CATEGORIES, hard_ids=HARD,
    )


class _Page(HTMLParser):
    """Collects criterion rows (data-candidate/data-criterion + class) and refusal blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[tuple[str, int], set[str]] = {}
        self.refusal_blocks = 0
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        classes = set((a.get("class") or "").split())
        if tag == "tr" and "data-criterion" in a:
            self.rows[(a["data-candidate"], int(a["data-criterion"]))] = classes
        if tag == "div" and explorer.REFUSAL_CLASS in classes:
            self.refusal_blocks += 1


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


# ---------------------------------------------------------------------------- data layer


def test_ids_candidates_judges(data):
    assert data.ids == ("p1", "p2", "p3")
    assert data.candidates == CANDS
    assert data.judges == JUDGES


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, ["p1", "p2", "p3"]),
        ({"category": "crisis"}, ["p1"]),
        ({"category": "anxiety"}, ["p2"]),
        ({"category": NO_CATEGORY}, ["p3"]),
        ({"category": "psychosis"}, []),
        ({"hard": True}, ["p2"]),
        ({"hard": False}, ["p1", "p3"]),
        ({"refusal": True}, ["p1"]),
        ({"refusal": False}, ["p2", "p3"]),
        ({"disagreement": True}, ["p1", "p3"]),
        ({"disagreement": False}, ["p2"]),
        ({"disagreement": True, "candidates": ["cand-b"]}, ["p1"]),
        ({"refusal": True, "candidates": ["cand-a"]}, []),
        ({"category": "anxiety", "disagreement": True}, []),
        ({"hard": False, "disagreement": True, "refusal": False}, ["p3"]),
    ],
)
def test_filters(data, kwargs, expected):
    assert explorer.filter_ids(data, **kwargs) == expected


def test_disagreement_sets(data):
    assert explorer.disagreements(data, "p1") == {("cand-a", 0), ("cand-b", 2)}
    assert explorer.disagreements(data, "p2") == set()
    # p3 criterion 0 is [T, excluded, T]: a missing verdict is not a disagreement
    assert explorer.disagreements(data, "p3") == {("cand-a", 1)}
    assert explorer.disagreements(data, "p1", candidates=["cand-b"]) == {("cand-b", 2)}
    with pytest.raises(ExplorerError, match="nope"):
        explorer.disagreements(data, "nope")


def test_scores_computed_from_verdicts(data):
    # p1 positive points 5 + 3 = 8; p2 4 + 2 = 6; p3 1 + 1 = 2
    assert data.scores_computed
    assert data.score("p1", "cand-a", "j1") == (5 / 8, "scored")
    assert data.score("p1", "cand-a", "j3") == (0.0, "scored")
    assert data.score("p1", "cand-b", "j1") == (-2 / 8, "scored")
    value, status = data.score("p1", "cand-b", "j2")
    assert math.isnan(value) and status == "excluded_verdict"
    assert data.score("p2", "cand-b", "j2") == (4 / 6, "scored")
    assert data.score("p3", "cand-a", "j3") == (1 / 2, "scored")
    assert data.score("p3", "cand-b", "j1") is None  # failed response, never graded


def test_half_graded_group_is_incomplete_not_an_error():
    v = _verdicts()
    v = v[~((v["judge"] == "j1") & (v["prompt_id"] == "p2") & (v["candidate"] == "cand-a")
            & (v["criterion_index"] == 1))]
    d = ExplorerData(conversations=_conversations(), responses=_responses(), verdicts=v)
    value, status = d.score("p2", "cand-a", "j1")
    assert math.isnan(value) and status == "incomplete"
    assert d.score("p2", "cand-a", "j2") == (1.0, "scored")


def test_missing_optional_features_are_off_not_errors():
    d = ExplorerData(conversations=_conversations(), responses=_responses(), verdicts=_verdicts())
    assert d.categories is None and d.hard_ids is None
    assert explorer.filter_ids(d, disagreement=True) == ["p1", "p3"]
    with pytest.raises(ExplorerError, match="category"):
        explorer.filter_ids(d, category="crisis")
    with pytest.raises(ExplorerError, match="hard"):
        explorer.filter_ids(d, hard=True)
    text = explorer.conversation_html(d, "p2")
    assert "category:" not in text and "hard" not in text.split("Legend")[0]


def test_given_scores_are_used_as_stored():
    scores = pd.DataFrame([{"judge": "j1", "candidate": "cand-a", "prompt_id": "p1",
                            "score": 0.5, "status": "scored"}])
    d = ExplorerData(conversations=_conversations(), responses=_responses(),
                     verdicts=_verdicts(), scores=scores)
    assert not d.scores_computed
    assert d.score("p1", "cand-a", "j1") == (0.5, "scored")
    assert d.score("p1", "cand-a", "j2") is None


def test_label_is_short_plain_text(data):
    label = explorer.conversation_label(data, "p1")
    assert label.startswith("p1 · crisis · ≠2 · refusal · I feel hopeless")
    assert "\n" not in label
    assert explorer.conversation_label(data, "p2").startswith("p2 · Anxiety · hard · How do")


# ---------------------------------------------------------------------------- HTML


def test_html_escapes_all_untrusted_text(data):
    text = explorer.conversation_html(data, "p1")
    low = text.lower()
    assert "<script" not in low
    assert "<img" not in low
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(2)&gt;" in text  # criterion
    assert "&lt;img src=x onerror=alert(3)&gt;Try to rest." in text  # reply
    assert "I don&#x27;t sleep &amp; I can&#x27;t stop crying." in text
    # only our own markup survives parsing
    assert set(_parse(text).tags) <= {"style", "div", "h3", "h4", "b", "span", "table", "tr",
                                      "th", "td", "i", "p"}


def test_html_escapes_names_in_attributes():
    evil = 'm"><b onmouseover=x>'
    r = _responses()
    r.loc[r["model"] == "cand-a", "model"] = evil
    v = _verdicts()
    v.loc[v["candidate"] == "cand-a", "candidate"] = evil
    d = ExplorerData(conversations=_conversations(), responses=r, verdicts=v)
    text = explorer.conversation_html(d, "p1")
    assert "<b onmouseover" not in text
    page = _parse(text)
    assert (evil, 0) in page.rows  # the attribute round-trips to the original name
    assert explorer.DISAGREE_CLASS in page.rows[(evil, 0)]


def test_highlight_on_exactly_the_disagreeing_criteria(data):
    page = _parse(explorer.conversation_html(data, "p1"))
    assert set(page.rows) == {(c, i) for c in CANDS for i in range(3)}
    flagged = {k for k, cls in page.rows.items() if explorer.DISAGREE_CLASS in cls}
    assert flagged == {("cand-a", 0), ("cand-b", 2)}
    page3 = _parse(explorer.conversation_html(data, "p3"))
    assert {k for k, cls in page3.rows.items() if explorer.DISAGREE_CLASS in cls} == {
        ("cand-a", 1)
    }
    page2 = _parse(explorer.conversation_html(data, "p2"))
    assert not any(explorer.DISAGREE_CLASS in cls for cls in page2.rows.values())


def test_legend_refusal_and_failure_marks(data):
    p1 = explorer.conversation_html(data, "p1")
    assert "Legend" in p1
    assert _parse(p1).refusal_blocks == 1
    assert "refused by cand-b" in p1
    assert _parse(explorer.conversation_html(data, "p2")).refusal_blocks == 0
    p3 = explorer.conversation_html(data, "p3")
    assert "NO RESPONSE" in p3 and "status: failed" in p3


def test_candidate_selection_limits_the_view(data):
    page = _parse(explorer.conversation_html(data, "p1", candidates=["cand-b"]))
    assert set(page.rows) == {("cand-b", i) for i in range(3)}
    assert page.refusal_blocks == 1
    with pytest.raises(ExplorerError, match="unknown candidate"):
        explorer.conversation_html(data, "p1", candidates=["cand-z"])


def test_html_shows_verdicts_and_scores(data):
    text = explorer.conversation_html(data, "p1", candidates=["cand-a"])
    # cand-a criterion 0: j1 met, j2 met, j3 not met; scores 5/8, 5/8, 0
    assert text.count('<td class="hbx-met"') == 2
    assert text.count('<td class="hbx-unmet"') == 1 + 3 + 3
    assert "0.625" in text and "0.000" in text
    # excluded verdict (cand-b, criterion 1, j2) is shown as such, not as "not met"
    text_b = explorer.conversation_html(data, "p1", candidates=["cand-b"])
    assert 'title="no verdict (excluded)"' in text_b
    assert "excluded_verdict" in text_b
    # recovered verdicts (j3 on p2) are starred
    assert "✓ met*" in explorer.conversation_html(data, "p2")


# ---------------------------------------------------------------------------- widget


def test_widget_filters_update_dropdown_and_view(data):
    pytest.importorskip("ipywidgets")
    ex = explorer.Explorer(data)
    ids = lambda: [v for _, v in ex.conversation.options]  # noqa: E731
    assert ids() == ["p1", "p2", "p3"]
    assert ex.conversation.value == "p1"
    assert "Conversation p1" in ex.view.value
    assert ex.conversation.options[0][0].startswith("p1 · crisis")

    ex.conversation.value = "p3"
    assert "Conversation p3" in ex.view.value
    ex.disagreement.value = True
    assert ids() == ["p1", "p3"]
    assert ex.conversation.value == "p3"  # still matching: kept
    assert "2 of 3" in ex.count.value

    ex.category.value = "anxiety"
    assert ids() == []
    assert ex.conversation.value is None
    assert "No conversation matches" in ex.view.value

    ex.disagreement.value = False
    assert ids() == ["p2"]
    assert "Conversation p2" in ex.view.value

    ex.category.value = ex.ALL
    ex.refusal.value = True
    assert ids() == ["p1"]
    ex.candidates.value = ("cand-a",)  # cand-a never refused
    assert ids() == []
    ex.refusal.value = False
    ex.hard.value = True
    assert ids() == ["p2"]
    page = _parse(ex.view.value)
    assert {c for c, _ in page.rows} == {"cand-a"}


def test_widget_without_optional_features():
    pytest.importorskip("ipywidgets")
    d = ExplorerData(conversations=_conversations(), responses=_responses(), verdicts=_verdicts())
    ex = explorer.Explorer(d)
    assert ex.category.disabled and ex.hard.disabled
    ex.disagreement.value = True
    assert [v for _, v in ex.conversation.options] == ["p1", "p3"]


# ---------------------------------------------------------------------------- run folders


def _write_run(root: Path, *, scores: bool = True, optional: bool = True) -> Path:
    run = root / "outputs" / "smoke"
    corpus_file = root / "corpus.jsonl"
    corpus_file.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    (run / "01_corpus").mkdir(parents=True)
    record = {
        "path": str(corpus_file), "sha256": sources.sha256_file(corpus_file),
        "source": str(corpus_file),
        "options": {"invalid_records": "error", "max_conversations": None},
        "n_conversations": 3, "ids_sha256": corpus.ids_hash(["p1", "p2", "p3"]),
    }
    (run / "01_corpus" / corpus.SOURCE_RECORD).write_text(json.dumps(record), encoding="utf-8")
    generation.write_responses(_responses(), run / "06_generation" / "responses.jsonl")
    (run / "07_grading").mkdir(parents=True)
    v = _verdicts()
    v.to_csv(run / "07_grading" / "verdicts.csv", index=False)
    if scores:
        table = v.astype({"criteria_met": object})
        table["criteria_met"] = [None if pd.isna(m) else bool(m) for m in table["criteria_met"]]
        grading.scores_from_verdicts(table, _conversations()).to_csv(
            run / "07_grading" / "scores.csv", index=False)
    if optional:
        (run / "05_subset").mkdir(parents=True)
        pd.DataFrame({"prompt_id": list(CATEGORIES), "category": list(CATEGORIES.values())}
                     ).to_csv(run / "05_subset" / "categories_v1.csv", index=False)
        subset.write_subset(run / "05_subset" / "healthbench-psych-hard-v1.json",
                            subset.subset_record("healthbench-psych-hard-v1", sorted(HARD)))
    return run


def test_load_run_reads_every_layout(tmp_path):
    run = _write_run(tmp_path)
    d = explorer.load_run(run)
    assert d.ids == ("p1", "p2", "p3")
    assert d.source == str(run)
    assert not d.scores_computed
    assert d.categories == CATEGORIES
    assert d.hard_ids == frozenset(HARD)
    assert explorer.filter_ids(d, refusal=True) == ["p1"]
    assert explorer.filter_ids(d, hard=True) == ["p2"]
    assert explorer.filter_ids(d, category=NO_CATEGORY) == ["p3"]
    assert explorer.disagreements(d, "p1") == {("cand-a", 0), ("cand-b", 2)}
    assert explorer.disagreements(d, "p3") == {("cand-a", 1)}
    assert d.score("p1", "cand-b", "j1") == (-0.25, "scored")
    value, status = d.score("p1", "cand-b", "j2")
    assert math.isnan(value) and status == "excluded_verdict"
    # the refusal's empty text and the failed response's missing text survive the round trip
    assert d.response("p1", "cand-b")["text"] == ""
    assert d.response("p3", "cand-b")["text"] is None
    assert "&lt;script&gt;" in explorer.conversation_html(d, "p1")


def test_load_run_by_profile_name_and_without_optional_files(tmp_path, monkeypatch):
    run = _write_run(tmp_path, scores=False, optional=False)
    monkeypatch.setenv("HBPSYCH_OUTPUTS", str(run.parent))
    d = explorer.load_run("smoke")
    assert d.categories is None and d.hard_ids is None and d.scores_computed
    assert d.score("p1", "cand-a", "j1") == (0.625, "scored")
    widget = explorer.explore("smoke")
    assert widget.children  # a VBox with its controls


@pytest.mark.parametrize(
    ("stage", "name", "notebook"),
    [
        ("06_generation", "responses.jsonl", "06_generation.ipynb"),
        ("07_grading", "verdicts.csv", "07_grading.ipynb"),
        ("01_corpus", corpus.SOURCE_RECORD, "01_corpus.ipynb"),
    ],
)
def test_load_run_missing_required_file(tmp_path, stage, name, notebook):
    run = _write_run(tmp_path)
    (run / stage / name).unlink()
    with pytest.raises(ExplorerError) as err:
        explorer.load_run(run)
    msg = str(err.value)
    assert str(run / stage / name) in msg and notebook in msg


def test_load_run_missing_folder(tmp_path):
    with pytest.raises(ExplorerError, match="no such run folder"):
        explorer.load_run(tmp_path / "nowhere")


def test_verdicts_that_do_not_fit_the_corpus_name_file_line_and_field(tmp_path):
    run = _write_run(tmp_path)
    path = run / "07_grading" / "verdicts.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    good = lines[:]
    # line 4 of the file (third record): criterion index beyond p1's three criteria
    lines[3] = lines[3].replace(",p1,0,", ",p1,7,")
    assert lines[3] != good[3]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ExplorerError) as err:
        explorer.load_run(run)
    assert f"{path}:4" in str(err.value) and "criterion_index" in str(err.value)

    lines = good[:]
    lines[2] = lines[2].replace(",p1,", ",p9,")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ExplorerError, match=r"verdicts.csv:3: field 'prompt_id': 'p9'"):
        explorer.load_run(run)

    # a malformed cell is the writer's reader's business (panel.read_verdicts), not re-checked
    # by the explorer: its error, naming file, line and field, reaches the reader unchanged
    lines = good[:]
    lines[5] = lines[5].replace(",True,", ",maybe,").replace(",False,", ",maybe,", 1)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(grading.GradingError, match=r"verdicts.csv:6: field 'criteria_met'"):
        explorer.load_run(run)


def test_duplicate_verdict_is_an_error(data):
    v = pd.concat([_verdicts(), _verdicts().iloc[[4]]], ignore_index=True)
    with pytest.raises(ExplorerError, match="second verdict"):
        ExplorerData(conversations=_conversations(), responses=_responses(), verdicts=v)


# ---------------------------------------------------------------------------- browser

PWN = (
    '<script>window.__pwned = "script"</script>'
    '<img src=x onerror="window.__pwned = \'img\'">'
    "</td></tr></table><svg onload=\"window.__pwned = 'svg'\"></svg>"
)


@pytest.mark.browser
def test_view_inserted_as_widget_markup_runs_no_code(tmp_path, browser):
    """The HTML widget sets innerHTML: no payload in the data may run, highlights must show."""
    records = json.loads(json.dumps(RECORDS))
    records[0]["prompt"][0]["content"] = PWN
    records[0]["rubrics"][1]["criterion"] = PWN
    responses = _responses()
    responses.loc[0, "text"] = PWN
    d = ExplorerData(conversations=[corpus.parse_record(r) for r in records],
                     responses=responses, verdicts=_verdicts())
    fragment = explorer.conversation_html(d, "p1")
    # a control image inserted after the fragment: once its onerror ran, the fragment's would
    # have run too (no timing involved)
    control = '<img src=x onerror="window.__control = 1">'
    page = browser.new_page()
    try:
        page.set_content("<html><body><div id=view></div></body></html>")
        page.evaluate("html => { document.getElementById('view').innerHTML = html; }",
                      fragment)
        page.evaluate("h => { document.body.insertAdjacentHTML('beforeend', h); }", control)
        page.wait_for_function("window.__control === 1")
        assert page.evaluate("window.__pwned") is None
        flagged = page.eval_on_selector_all(
            f"tr.{explorer.DISAGREE_CLASS}",
            "rows => rows.map(r => [r.dataset.candidate, Number(r.dataset.criterion)])",
        )
        assert sorted(map(tuple, flagged)) == [("cand-a", 0), ("cand-b", 2)]
        bg = page.eval_on_selector(
            f"tr.{explorer.DISAGREE_CLASS} td", "td => getComputedStyle(td).backgroundColor")
        plain = page.eval_on_selector(
            "tr[data-criterion='1'] td", "td => getComputedStyle(td).backgroundColor")
        assert bg != plain  # the highlight is visible, not just a class name
        assert PWN in page.inner_text("#view")  # the payload is shown as text
    finally:
        page.close()
