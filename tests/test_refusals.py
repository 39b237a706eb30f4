"""Refusals: detection in a responses table, sensitivity analysis, census from the error log."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hbpsych_utils.evaluation import refusals

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror


@pytest.mark.parametrize(
    ("text", "stop", "flag", "expected"),
    [
        ("", "refusal", None, True),
        ("   \n", "REFUSAL", None, True),
        (None, "content_filter", None, True),
        ("", "SAFETY", None, True),
        ("", "stop", True, True),  # the provider's own refusal flag
        ("", "end_turn", None, False),  # empty but not a refusal stop (transport-type empty)
        ("", "max_tokens", False, False),
        ("I can't help with that.", "refusal", True, False),  # not empty: graded as text
    ],
)
def test_is_refusal(text, stop, flag, expected):
    assert refusals.is_refusal(text, stop, flag) is expected


def _responses():
    return pd.DataFrame(
        [
            ("A", "p1", "ok", "stop", False),
            ("A", "p2", "", "refusal", True),
            ("A", "p3", "fine", "stop", False),
            ("B", "p1", "", "content_filter", None),
            ("B", "p2", "sure", "stop", False),
            ("C", "p1", "", "length", False),
        ],
        columns=["model", "prompt_id", "text", "stop_reason", "refusal"],
    )


def test_refused_table_counts_and_categories():
    r = refusals.refused(_responses(), categories={"p1": "anxiety", "p2": "substance use"})
    assert list(zip(r["model"], r["prompt_id"], r["category"], strict=True)) == [
        ("A", "p2", "substance use"),
        ("B", "p1", "anxiety"),
    ]
    assert refusals.refused_by_model(r, models=["A", "B", "C"]) == {
        "A": ["p2"], "B": ["p1"], "C": [],
    }
    assert refusals.refusal_counts(r, models=["A", "B", "C"]) == {"A": 1, "B": 1, "C": 0}
    assert refusals.refusal_counts({"A": ["p2", "p2"]}) == {"A": 1}


def test_refused_needs_columns():
    with pytest.raises(refusals.RefusalError, match="stop_reason"):
        refusals.refused(pd.DataFrame({"model": [], "prompt_id": [], "text": []}))


def _scores():
    return pd.DataFrame(
        [
            ("A", "p1", 0.6), ("A", "p2", -0.2), ("A", "p3", 0.9),
            ("B", "p1", 0.5), ("B", "p2", 0.5), ("B", "p3", 0.2),
        ],
        columns=["candidate", "prompt_id", "score"],
    )


def test_sensitivity_own_scope_by_hand():
    out = refusals.sensitivity(_scores(), {"A": ["p2"]})
    # A: primary (0.6 - 0.2 + 0.9) / 3 = 0.4333; without p2 (0.6 + 0.9) / 2 = 0.75
    assert out.loc["A", "mean_primary"] == pytest.approx(1.3 / 3)
    assert out.loc["A", "mean_excluded"] == pytest.approx(0.75)
    assert out.loc["A", "delta"] == pytest.approx(0.75 - 1.3 / 3)
    assert (out.loc["A", "n_primary"], out.loc["A", "n_excluded"]) == (3, 2)
    assert out.loc["A", "n_refused"] == 1
    # B refused nothing: unchanged
    assert out.loc["B", "mean_excluded"] == pytest.approx(0.4)
    assert out.loc["B", "delta"] == pytest.approx(0.0)


def test_sensitivity_all_scope_drops_for_everyone():
    out = refusals.sensitivity(_scores(), {"A": ["p2"]}, scope="all")
    # B without p2: (0.5 + 0.2) / 2 = 0.35
    assert out.loc["B", "mean_excluded"] == pytest.approx(0.35)
    assert out.loc["B", "n_excluded"] == 2
    with pytest.raises(refusals.RefusalError, match="scope"):
        refusals.exclude_refused(_scores(), {"A": ["p2"]}, scope="some")


def _log(tmp_path, events):
    p = tmp_path / "errors.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return p


def test_census_rules_on_a_synthetic_log(tmp_path, caplog):
    p = _log(tmp_path, [
        {"phase": "generate", "candidate": "A", "prompt_id": "p1", "kind": "empty_response",
         "detail": ""},
        {"phase": "generate", "candidate": "A", "prompt_id": "p1", "kind": "empty_response",
         "detail": "stop_reason=refusal"},
        {"phase": "generate", "candidate": "B", "prompt_id": "p2", "kind": "empty_response",
         "detail": ""},
        {"phase": "correction", "candidate": "B", "prompt_id": "p2",
         "kind": "transient_empty_replaced", "detail": "re-queried"},
        {"phase": "generate", "candidate": "C", "prompt_id": "p3", "kind": "call_failed",
         "detail": "HTTP 429"},
        {"phase": "grade", "judge": "J", "candidate": "C", "prompt_id": "p3",
         "kind": "grade_no_verdict", "detail": "rubric 1"},
        {"phase": "grade", "candidate": "C", "prompt_id": "p4", "kind": "mystery"},
    ])
    census = refusals.refusal_census(refusals.read_error_log(p))
    # A's two lines are one refused conversation; B's empty was replaced; C's events are not
    # candidate refusals
    assert census.counts(models=["A", "B", "C"]) == {"A": 1, "B": 0, "C": 0}
    assert census.refusals.loc[0, "evidence"] == "stop_reason=refusal"
    assert census.replaced == [("B", "p2")]
    assert [e.kind for e in census.unclassified] == ["mystery"]
    only_p9 = refusals.refusal_census(refusals.read_error_log(p), prompt_ids=["p9"])
    assert only_p9.counts() == {}


def test_error_log_errors_name_the_line(tmp_path):
    p = tmp_path / "errors.jsonl"
    p.write_text('{"phase": "generate", "kind": "empty_response"}\nnot json\n', encoding="utf-8")
    with pytest.raises(refusals.RefusalError, match=r"errors\.jsonl:2"):
        refusals.read_error_log(p)
    p.write_text('{"phase": "generate"}\n', encoding="utf-8")
    with pytest.raises(refusals.RefusalError, match="'kind'"):
        refusals.read_error_log(p)


@needs_mirror
def test_paper_census_from_released_log():
    from hbpsych_utils.core import sources

    events = refusals.read_error_log(sources.fetch("run_errors"))
    assert {e.kind for e in events} <= set(refusals.KIND_CLASSES)
    census = refusals.refusal_census(events)
    # claude-opus-5: nine empty replies on 2026-07-30 plus one with stop_reason=refusal;
    # claude-fable-5: two plus one; deepseek-v4-pro's empty was replaced as a transient failure
    assert census.counts() == {"claude-fable-5": 3, "claude-opus-5": 10}
    assert census.replaced == [("deepseek-v4-pro", "e9daa6b3-5244-4362-8dd1-fd08ebf4d096")]
    by = census.by_model()
    assert "fa16a31d-44f4-4ef4-b343-ddf0db3ce7a3" in by["claude-opus-5"]
    assert "bcdb3798-e0b6-4cc2-8171-3566a5460b74" in by["claude-fable-5"]
    hard = json.loads(sources.fetch("subset_hard_v1").read_text(encoding="utf-8"))["prompt_ids"]
    hard_census = refusals.refusal_census(events, prompt_ids=hard)
    assert hard_census.counts() == {"claude-fable-5": 1, "claude-opus-5": 1}
