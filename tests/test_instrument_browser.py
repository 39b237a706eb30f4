"""The review instrument: static checks, then a real headless Chromium run.

The browser tests drive Debian's Chromium (/usr/bin/chromium, installed by
scripts/install_browser.sh) through Playwright; Playwright never downloads a browser here. They
skip when Chromium is absent on a developer machine, but fail under CI=true, where it must be.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from hbpsych_utils.construction import instrument as ins
from hbpsych_utils.construction import ratings, review_set
from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem

VOCAB = ("anxiety", "sleep", "substance_use", "other_mh", "none")
XSS = (
    '<script>window.__pwned = "script"</script>'
    '<img src=x onerror="window.__pwned = \'img\'">'
    "</script><script>window.__pwned = 'breakout'</script>"
)


def _conv(pid: str, *texts: str) -> Conversation:
    roles = ["user", "assistant"]
    msgs = tuple(Message(roles[i % 2], t) for i, t in enumerate(texts))
    return Conversation(pid, msgs, (RubricItem("ok", 1),))


def review_items() -> tuple[pd.DataFrame, list[dict]]:
    set_table = pd.DataFrame({
        "review_id": ["R0001", "R0002", "R0003", "R0004"],
        "prompt_id": ["pid-one", "pid-two", "pid-three", "pid-four"],
        "kind": ["screened_in", "control", "screened_in", "control"],
    })
    convs = [
        _conv("pid-one", "I have felt hopeless for weeks.", "I'm sorry.", "What can I do?"),
        _conv("pid-two", "Mi rodilla duele cuando corro."),
        _conv("pid-three", XSS),
        _conv("pid-four", "Is 5 mg of melatonin too much?"),
    ]
    translations = {"pid-two": [Message("user", "My knee hurts when I run.")]}
    return set_table, review_set.build_packet(set_table, convs, translations)


# ---------------------------------------------------------------------------------------------
# static checks (no browser)


def test_embedded_json_cannot_close_the_script_element() -> None:
    text = ins.embed_json({"t": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": "</script><!-- & \u2028"}


def test_page_is_self_contained_and_untrusted_text_is_never_html(tmp_path: Path) -> None:
    _, items = review_items()
    page = ins.write_instrument(tmp_path / "r.html", items, round_name="round1",
                                vocabulary=VOCAB).read_text(encoding="utf-8")
    script = re.search(r'<script id="instrument-js">(.*?)</script>', page, re.S).group(1)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
    # nothing is fetched: no external URLs, and the CSP allows only this exact script
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page and "default-src 'none'" in page
    # the payload is present only in escaped form inside the data block
    assert "<img src=x" not in page and "window.__pwned" in page
    assert page.count("</script>") == 2


def test_items_that_reveal_the_screen_are_refused() -> None:
    _, items = review_items()
    leaky = [dict(items[0], kind="control")]
    with pytest.raises(ValueError, match="must not reach reviewers"):
        ins.instrument_html(leaky, round_name="round1", vocabulary=VOCAB)
    with pytest.raises(ValueError, match="round_name"):
        ins.instrument_html(items, round_name="round 1", vocabulary=VOCAB)


def test_page_is_deterministic() -> None:
    _, items = review_items()
    a = ins.instrument_html(items, round_name="round1", vocabulary=VOCAB)
    b = ins.instrument_html(list(reversed(items)), round_name="round1", vocabulary=VOCAB)
    assert a == b


# ---------------------------------------------------------------------------------------------
# headless Chromium




@pytest.fixture
def page_factory(browser, tmp_path: Path):
    """Open an instrument page in a fresh context; collect page errors for the assertions."""
    contexts = []

    def open_page(html_path: Path):
        ctx = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 850})
        contexts.append(ctx)
        page = ctx.new_page()
        page.errors = []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.goto(html_path.resolve().as_uri())
        return page

    yield open_page
    for ctx in contexts:
        ctx.close()


def export(page, dest: Path) -> dict:
    with page.expect_download() as info:
        page.click("#export")
    info.value.save_as(dest)
    return json.loads(dest.read_text(encoding="utf-8"))


def open_instrument(page_factory, tmp_path: Path, round_name: str, **options):
    """The review set and a browser page on its instrument, written for ``round_name``."""
    set_table, items = review_items()
    html_path = ins.write_instrument(tmp_path / f"{round_name}.html", items,
                                     round_name=round_name, vocabulary=VOCAB, **options)
    return set_table, page_factory(html_path)


def sign_in(page, reviewer: str) -> None:
    page.fill("#reviewer-input", reviewer)
    page.click("#reviewer-start")


def rate_current(page, vote: str, category: str | None, confidence: str | None,
                 notes: str = "") -> None:
    page.click(f'#f-relevance label[data-value="{vote}"]')
    if category is not None:
        page.select_option("#category", category)
    if confidence is not None:
        page.click(f'#f-confidence label[data-value="{confidence}"]')
    if notes:
        page.fill("#notes", notes)


@pytest.mark.browser
def test_rate_reload_export_and_import(page_factory, tmp_path: Path) -> None:
    set_table, page = open_instrument(page_factory, tmp_path, "round1")
    sign_in(page, "R7")
    assert page.text_content("#reviewer-name") == "R7"
    assert page.text_content("#progress-text") == "0 of 4 rated"

    # item 1 by mouse, item 2 (with its translation) by keyboard
    rate_current(page, "Y", "anxiety", "H", notes="hopeless, weeks")
    page.click("#next")
    assert "My knee hurts when I run." in page.text_content("#conversation")
    page.locator("#next").blur()
    page.keyboard.press("n")
    page.keyboard.press("l")
    assert page.text_content("#progress-text") == "2 of 4 rated"

    # Chromium commits localStorage to its storage service asynchronously; a human never reloads
    # within milliseconds of a click, so give the commit a moment (a loaded CI machine needs it)
    page.wait_for_timeout(1000)
    page.reload()
    page.wait_for_selector("#reviewer-name:text('R7')", timeout=5000)
    # progress survives the reload: reviewer, counts, position and the saved answers
    assert page.text_content("#reviewer-name") == "R7"
    assert page.text_content("#progress-text") == "2 of 4 rated"
    assert page.text_content(".item-head h2") == "R0002"
    assert page.is_checked('input[name="is_mental_health"][value="N"]')
    assert page.input_value("#category") == "none"  # an N preselects "none"
    page.click("#prev")
    assert page.input_value("#category") == "anxiety"
    assert page.input_value("#notes") == "hopeless, weeks"
    assert page.is_checked('input[name="confidence"][value="H"]')

    # a partial export is a backup: importable only in the mode that allows unrated items
    partial_path = tmp_path / "R7.partial.json"
    partial = export(page, partial_path)
    assert (partial["n_total"], partial["n_rated"]) == (4, 2)
    with pytest.raises(ratings.RatingsError, match="not rated"):
        ratings.load_ratings(partial_path, set_table, vocabulary=VOCAB)
    r = ratings.load_ratings(partial_path, set_table, vocabulary=VOCAB, allow_unrated=True)
    assert r.unrated == ("R0003", "R0004")

    # finish: the markup item, then one without a confidence (tolerated, counted)
    page.click("#next-unrated")
    assert page.text_content(".item-head h2") == "R0003"
    rate_current(page, "N", None, "M")
    page.click("#next")
    rate_current(page, "Y", "sleep", None, notes="melatonin")
    assert page.text_content("#progress-text") == "4 of 4 rated"
    assert "still missing" in page.text_content("#status")

    done_path = tmp_path / "R7.json"
    doc = export(page, done_path)
    assert list(doc) == ["reviewer", "exported_at", "n_total", "n_rated", "ratings"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["exported_at"])
    assert done_path.read_text().startswith('{\n "reviewer": "R7",')  # released 1-space indent
    got = ratings.load_ratings(done_path, set_table, vocabulary=VOCAB)
    assert got.complete and got.reviewer == "R7" and got.n_empty_confidence == 1
    assert got.table.to_dict("records") == [
        {"review_id": "R0001", "prompt_id": "pid-one", "is_mental_health": "Y",
         "category": "anxiety", "confidence": "H", "notes": "hopeless, weeks"},
        {"review_id": "R0002", "prompt_id": "pid-two", "is_mental_health": "N",
         "category": "none", "confidence": "L", "notes": ""},
        {"review_id": "R0003", "prompt_id": "pid-three", "is_mental_health": "N",
         "category": "none", "confidence": "M", "notes": ""},
        {"review_id": "R0004", "prompt_id": "pid-four", "is_mental_health": "Y",
         "category": "sleep", "confidence": "", "notes": "melatonin"},
    ]
    assert page.errors == []


@pytest.mark.browser
def test_round2_export_carries_the_packet_and_reviewers_keep_separate_progress(
    page_factory, tmp_path: Path
) -> None:
    set_table, page = open_instrument(page_factory, tmp_path, "round2", packet="recovery")
    page.fill("#reviewer-input", "R1")
    page.press("#reviewer-input", "Enter")
    for vote in "YNYN":
        rate_current(page, vote, "other_mh" if vote == "Y" else None, "M")
        page.click("#next-unrated")
    doc = export(page, tmp_path / "R1.json")
    assert list(doc)[:2] == ["reviewer", "packet"] and doc["packet"] == "recovery"
    ratings.load_ratings(tmp_path / "R1.json", set_table, vocabulary=VOCAB,
                         expected_packet="recovery")

    page.click("#switch-reviewer")
    sign_in(page, "R2")
    assert page.text_content("#progress-text") == "0 of 4 rated"
    page.click("#switch-reviewer")
    sign_in(page, "R1")
    assert page.text_content("#progress-text") == "4 of 4 rated"
    assert page.errors == []


@pytest.mark.browser
def test_markup_in_a_conversation_shows_as_text_and_runs_nothing(
    page_factory, tmp_path: Path
) -> None:
    _, page = open_instrument(page_factory, tmp_path, "xss")
    sign_in(page, "R1")
    page.click("#list button:nth-child(3)")
    assert page.text_content(".item-head h2") == "R0003"
    turn = page.locator("#conversation .turn .text").first
    assert turn.is_visible()
    assert turn.text_content() == XSS
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#conversation img, #conversation script").count() == 0
    # the title still renders and the page's own script ran (the CSP did not block it)
    assert page.text_content("#title") == "Blinded review · xss"
    assert page.errors == []


def test_progress_key_follows_the_review_set() -> None:
    set_table, items = review_items()
    assert ins.items_fingerprint(items) == review_set.set_fingerprint(set_table)
    moved = set_table.assign(prompt_id=list(reversed(set_table["prompt_id"])))
    assert review_set.set_fingerprint(moved) != review_set.set_fingerprint(set_table)
