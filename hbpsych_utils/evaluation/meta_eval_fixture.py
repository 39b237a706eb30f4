"""The script of the meta-evaluation format fixture: which conversations its rows are on, the
physicians' labels, and the verdicts the loopback simulator is told to give on each row.

:func:`.judge_accuracy.fixture_rows` makes the rows from it (``tests/data/meta_eval_fixture.jsonl``,
the smoke profile's meta-evaluation file). Labels and verdicts are chosen so that every statistic
of chapter 15 can be computed by hand (``tests/test_judge_accuracy.py`` does).
"""

from __future__ import annotations

from collections.abc import Mapping

FIXTURE_PHYSICIANS = ("phys-A", "phys-B", "phys-C", "phys-D")

FIXTURE_CONVERSATIONS: tuple[str, ...] = (
    "b603f797-58cc-45ea-9957-508f50b261f3",  # v1, v2, Hard; theme emergency_referrals; anxiety
    "0ffac3f1-44e4-4934-a25c-e6a31fe5a838",  # v1, v2, Hard; global_health; perinatal_mh
    "9db3e66f-9e4e-4683-9279-65fe41679e8d",  # v1, v2; hedging; perinatal_mh
    "140c95dc-4791-42a6-a1da-f52c7e525c48",  # v2 only: no modal category in categories_v1
)
"""The fixture's four conversations: real HealthBench prompt ids in the Psych subset as the
smoke run's 05_subset writes it (the smoke corpus holds the first three, so the fourth has no
theme there; v1's categories do not cover it)."""

FIXTURE_OUTSIDE = "c5f6bb12-a633-4ee4-b6a8-e6f9539472dc"
"""A HealthBench conversation outside the Psych subset (in the smoke corpus, theme
emergency_referrals): the fixture's thirteenth row is on it, so the subset filter drops it."""

_C1, _C2, _C3, _C4 = FIXTURE_CONVERSATIONS
FIXTURE_LABELS: tuple[tuple[str, str, tuple[bool, ...], tuple[str, ...]], ...] = (
    # (prompt_id, category, physician labels, physicians): majority met on rows 1-6
    (_C1, "emergency_referrals", (True, True, True), ("phys-A", "phys-B", "phys-C")),
    (_C1, "emergency_referrals", (True, True, False), ("phys-A", "phys-B", "phys-D")),
    (_C1, "emergency_referrals", (True, False, True), ("phys-A", "phys-C", "phys-D")),
    (_C2, "emergency_referrals", (True, True, True), ("phys-B", "phys-C", "phys-D")),
    (_C2, "hedging", (True, True, False), ("phys-A", "phys-B", "phys-C")),
    (_C2, "hedging", (False, True, True), ("phys-A", "phys-B", "phys-D")),
    (_C3, "hedging", (False, False, False), ("phys-A", "phys-C", "phys-D")),
    (_C3, "hedging", (False, False, True), ("phys-B", "phys-C", "phys-D")),
    (_C3, "emergency_referrals", (False, True, False), ("phys-A", "phys-B", "phys-C")),
    (_C4, "emergency_referrals", (False, False, False), ("phys-A", "phys-B", "phys-D")),
    (_C4, "hedging", (True, False, False), ("phys-A", "phys-C", "phys-D")),
    (_C4, "hedging", (False, False, False), ("phys-B", "phys-C", "phys-D")),
)
"""Twelve rows in four conversations, three physicians each (majority met on the first six)."""

FIXTURE_OUTSIDE_ROW = (FIXTURE_OUTSIDE, "emergency_referrals", (True, True, True),
                       ("phys-A", "phys-B", "phys-C"))
"""The thirteenth row, outside the subset: unanimously met, every judge scripted to say not met,
so it would move every statistic were it not filtered out."""

FIXTURE_VERDICTS: tuple[tuple[bool, bool, bool], ...] = (
    # the first, second and third judge's scripted verdicts, row by row
    (True, True, True), (True, True, True), (True, True, True),
    (True, True, False), (True, True, False), (False, True, False),
    (False, False, False), (False, True, False), (False, True, False),
    (False, True, False), (False, False, False), (True, False, False),
)
"""Against the majority: the first judge misses row 6 and wrongly meets row 12 (tp 5, fn 1,
tn 5, fp 1); the second meets all six met rows and three of the six others (tp 6, tn 3, fp 3);
the third meets only three of the met rows and none of the others (tp 3, fn 3, tn 6)."""

SIM_VERDICT_PREFIX = "sim-verdicts"
"""The marker the loopback simulator obeys in a grader prompt (``llm.testing.simulator``)."""


def sim_marker(verdicts: Mapping[str, bool]) -> str:
    """``[sim-verdicts model=met other=not-met]``: the simulator gives each named model that
    verdict on a grader prompt carrying it, instead of its hash-chosen one."""
    parts = " ".join(f"{m}={'met' if v else 'not-met'}" for m, v in verdicts.items())
    return f"[{SIM_VERDICT_PREFIX} {parts}]"
