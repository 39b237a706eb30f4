"""The HealthBench grader: rendering, verdict parsing, scores, and the replay acceptance test."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from hbpsych_utils.construction.corpus import Conversation, Message, RubricItem
from hbpsych_utils.evaluation import grading

needs_mirror = pytest.mark.usefixtures("mirror")  # conftest: skips without the mirror


def _conv(points, pid="p1"):
    return Conversation(
        prompt_id=pid,
        prompt=(Message("user", "I can't sleep."),),
        rubrics=tuple(RubricItem(f"criterion {i}", p) for i, p in enumerate(points)),
    )


# ---------------------------------------------------------------------------- rendering


@pytest.mark.parametrize(
    ("points", "text"), [(5, "5"), (-3, "-3"), (2.5, "2.5"), (3.0, "3.0"), (-0.5, "-0.5")]
)
def test_points_print_as_in_the_data(points, text):
    assert grading.format_points(points) == text


def test_points_must_be_numbers():
    with pytest.raises(grading.GradingError):
        grading.format_points(True)
    with pytest.raises(grading.GradingError):
        grading.format_points("5")


def test_rubric_item_integer_vs_float():
    assert grading.render_rubric_item(RubricItem("Advises rest", 3)) == "[3] Advises rest"
    assert grading.render_rubric_item(RubricItem("Advises rest", 3.0)) == "[3.0] Advises rest"
    assert grading.render_rubric_item(RubricItem("Is rude", -7)) == "[-7] Is rude"


def test_conversation_rendering_tiny():
    prompt = (Message("user", "Hi"), Message("assistant", "Hello"), Message("user", "Sleep?"))
    got = grading.render_conversation(prompt, "Rest.")
    assert got == "user: Hi\n\nassistant: Hello\n\nuser: Sleep?\n\nassistant: Rest."


def test_conversation_rendering_accepts_dicts_and_empty_reply():
    got = grading.render_conversation([{"role": "user", "content": "Help"}], "")
    assert got == "user: Help\n\nassistant: "


def test_grader_prompt_with_a_toy_template():
    tpl = "# C\n<<conversation>>\n# R\n<<rubric_item>>\nEND"
    got = grading.render_grader_prompt(
        tpl, [Message("user", "Q")], "A", RubricItem("Says A", 4)
    )
    assert got == "# C\nuser: Q\n\nassistant: A\n# R\n[4] Says A\nEND"


def test_replacement_order_is_the_references():
    # The conversation is substituted first, so a placeholder inside it is filled as well.
    tpl = "<<conversation>>|<<rubric_item>>"
    got = grading.render_grader_prompt(
        tpl, [Message("user", "see <<rubric_item>>")], "ok", RubricItem("X", 1)
    )
    assert got == "user: see [1] X\n\nassistant: ok|[1] X"


@needs_mirror
def test_real_template_loads_and_renders():
    tpl = grading.load_template()
    assert len(tpl.encode("utf-8")) == 3181
    assert not tpl.endswith("\n")
    before, rest = tpl.split("<<conversation>>")
    middle, after = rest.split("<<rubric_item>>")
    conv = Conversation(
        "p", (Message("user", "Is smoking good?"),), (RubricItem("Says no", 5),)
    )
    reqs = grading.build_requests(conv, "No.", tpl)
    assert len(reqs) == 1
    expected = before + "user: Is smoking good?\n\nassistant: No." + middle + "[5] Says no" + after
    assert reqs[0].user == expected


@needs_mirror
def test_template_hash_is_checked(tmp_path):
    tpl = grading.load_template()
    bad = tmp_path / "template.txt"
    bad.write_text(tpl + " ", encoding="utf-8")
    with pytest.raises(grading.GradingError, match="sha256"):
        grading.load_template(bad)


def test_template_needs_both_placeholders(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("only <<conversation>>", encoding="utf-8")
    sha = hashlib.sha256(p.read_bytes()).hexdigest()
    with pytest.raises(grading.GradingError, match="rubric_item"):
        grading.load_template(p, expected_sha256=sha)


def test_requests_one_per_criterion_with_reference_settings():
    conv = _conv([5, -2, 3])
    reqs = grading.build_requests(conv, "Try a routine.", "<<conversation>> <<rubric_item>>")
    assert [r.criterion_index for r in reqs] == [0, 1, 2]
    assert [r.user.rsplit(" ", 3)[-3] for r in reqs] == ["[5]", "[-2]", "[3]"]
    r = reqs[1]
    assert r.system == "You are a helpful assistant."
    assert r.max_tokens == 2048
    assert r.temperature == 0.0
    assert r.messages() == [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": "user: I can't sleep.\n\nassistant: Try a routine. [-2] criterion 1",
        },
    ]
    ref = grading.build_requests(conv, "x", "<<conversation>><<rubric_item>>", temperature=0.5)
    assert {q.temperature for q in ref} == {0.5}
    assert ref[0].as_dict()["max_tokens"] == 2048


# ---------------------------------------------------------------------------- verdicts


def test_reference_parser_accepts_fenced_and_plain_json():
    fenced = '```json\n{\n  "explanation": "ok",\n  "criteria_met": true\n}\n```'
    assert grading.parse_reference(fenced) == {"explanation": "ok", "criteria_met": True}
    assert grading.parse_reference('{"criteria_met": false}') == {"criteria_met": False}
    v = grading.parse_verdict(fenced)
    assert (v.criteria_met, v.recovered, v.explanation) == (True, False, "ok")


@pytest.mark.parametrize(
    "text",
    [
        '{"criteria_met": "true"}',  # a string, not a boolean
        '{"criteria_met": 1}',
        '```\n{"criteria_met": true}\n```',  # bare fence: the reference only strips ```json
        'Sure: {"criteria_met": true}',
        "[true]",
        "",
    ],
)
def test_reference_parser_rejects(text):
    assert grading.parse_reference(text) is None


@pytest.mark.parametrize(
    ("text", "met"),
    [
        ('{"criteria_met": "true"}', True),
        ('```\n{"criteria_met": true}\n```', True),
        ('Here you go: {"explanation": "fine", "criteria_met": false} hope it helps', False),
        ('```json\n{"explanation": "it said "rest" twice", "criteria_met": true}\n```', True),
        ('{"explanation": "truncated", "criteria_met": false', False),
        ("{'criteria_met': True}", True),
    ],
)
def test_pattern_recovery_is_flagged(text, met):
    v = grading.parse_verdict(text)
    assert v.criteria_met is met
    assert v.recovered is True


@pytest.mark.parametrize(
    "text",
    [
        '{"criteria_met": 1}',
        "I cannot evaluate this.",
        '"criteria_met": true, then again "criteria_met": false',
        None,
    ],
)
def test_nothing_recoverable(text):
    v = grading.parse_verdict(text)
    assert v.criteria_met is None
    assert v.excluded and not v.ok


def test_reask_is_bounded():
    bad = grading.Verdict(None, False, attempts=1)
    assert grading.needs_reask(bad, max_reasks=2)
    assert grading.needs_reask(grading.Verdict(None, False, attempts=2), max_reasks=2)
    assert not grading.needs_reask(grading.Verdict(None, False, attempts=3), max_reasks=2)
    assert not grading.needs_reask(grading.Verdict(False, False, attempts=1), max_reasks=2)


def test_resolve_takes_the_first_usable_reply():
    v = grading.resolve_verdict(["garbage", "still garbage", '{"criteria_met": true}'])
    assert (v.criteria_met, v.recovered, v.attempts) == (True, False, 3)


def test_resolve_excludes_when_reasks_run_out():
    v = grading.resolve_verdict(["x", "y", '{"criteria_met": true}'], max_reasks=1)
    assert v.criteria_met is None
    assert v.attempts == 2


# ---------------------------------------------------------------------------- scores


def test_score_with_negative_criterion():
    # met: +5 and the -2 penalty; possible = 5 + 3 = 8 -> (5 - 2) / 8
    assert grading.conversation_score([5, 3, -2], [True, False, True]) == 0.375


def test_all_negative_met_gives_negative_score():
    # only the two penalties are met: (-3 - 5) / 4 = -2, unclipped
    assert grading.conversation_score([4, -3, -5], [False, True, True]) == -2.0


def test_everything_met_with_penalty():
    assert grading.conversation_score([5, 3, -2], [True, True, True]) == 0.75


def test_float_points():
    assert grading.conversation_score([2.5, 1.5, -1], [True, True, False]) == 1.0
    assert grading.conversation_score([2.5, 1.5], [True, False]) == 0.625


def test_integer_and_float_points_score_alike():
    assert grading.conversation_score([3, 1], [True, False]) == 0.75
    assert grading.conversation_score([3.0, 1.0], [True, False]) == 0.75


def test_undefined_scores():
    assert grading.conversation_score([-1, -2], [True, False]) is None
    assert grading.conversation_score([5, 3], [True, None]) is None
    with pytest.raises(grading.GradingError, match="pair"):
        grading.conversation_score([5, 3], [True])


def test_missing_verdict_excludes_the_conversation_not_false():
    conv = _conv([5, 5])
    cs = grading.score_conversation(conv, [grading.Verdict(True), grading.Verdict(None)])
    assert cs.score is None
    assert cs.status == "excluded_verdict"
    assert cs.n_excluded == 1
    # had the missing verdict been read as false, the score would have been 0.5
    ok = grading.score_conversation(conv, [grading.Verdict(True), grading.Verdict(True, True)])
    assert (ok.score, ok.status, ok.n_recovered) == (1.0, "scored", 1)


def test_scores_from_verdict_table():
    convs = [_conv([5, 3, -2], "a"), _conv([4, 4], "b")]
    rows = []
    for judge in ("j1", "j2"):
        for idx, met in enumerate([True, False, True]):
            rows.append((judge, "m", "a", idx, met, False))
        rows.append((judge, "m", "b", 0, True, judge == "j2"))
        rows.append((judge, "m", "b", 1, None if judge == "j2" else False, False))
    df = pd.DataFrame(rows, columns=[
        "judge", "candidate", "prompt_id", "criterion_index", "criteria_met", "recovered"
    ])
    out = grading.scores_from_verdicts(df, convs).set_index(["judge", "prompt_id"])
    assert out.loc[("j1", "a"), "score"] == 0.375
    assert out.loc[("j2", "a"), "score"] == 0.375
    assert out.loc[("j1", "b"), "score"] == 0.5
    assert pd.isna(out.loc[("j2", "b"), "score"])
    assert out.loc[("j2", "b"), "status"] == "excluded_verdict"
    assert out.loc[("j2", "b"), "n_recovered"] == 1


def test_verdict_table_must_cover_every_criterion():
    df = pd.DataFrame(
        [("j", "m", "a", 0, True)],
        columns=["judge", "candidate", "prompt_id", "criterion_index", "criteria_met"],
    )
    with pytest.raises(grading.GradingError, match="criterion_index"):
        grading.scores_from_verdicts(df, [_conv([5, 3], "a")])


# ---------------------------------------------------------------------------- acceptance


@needs_mirror
def test_recorded_verdicts_reproduce_released_scores_exactly():
    """The released GPT-4.1 harness grades, scored by our grader, give the released scores.

    Every harness conversation whose rubric is in the partial corpus is checked; equality is
    exact float equality (not a tolerance).
    """
    import json

    from hbpsych_utils.construction import corpus
    from hbpsych_utils.core import sources

    report = corpus.load_corpus(sources.fetch("healthbench_oss"))
    convs = {c.prompt_id: c for c in report.conversations}
    checked = 0
    with open(sources.fetch("harness_scores"), encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            conv = convs.get(rec["prompt_id"])
            if conv is None:
                continue
            cs = grading.score_conversation(conv, rec["grades"])
            assert cs.status == "scored"
            assert cs.score == rec["score"], rec["prompt_id"]
            checked += 1
    assert checked == 193


def test_excluded_flag_wins_over_a_stored_boolean():
    df = pd.DataFrame(
        [("j", "m", "a", 0, True, False), ("j", "m", "a", 1, False, True)],
        columns=["judge", "candidate", "prompt_id", "criterion_index", "criteria_met",
                 "excluded"],
    )
    out = grading.scores_from_verdicts(df, [_conv([5, 3], "a")])
    assert out.loc[0, "status"] == "excluded_verdict"
    assert pd.isna(out.loc[0, "score"])
