"""Grading models on the subset: candidate replies, the HealthBench grader, the judge panel,
scores and intervals, judge statistics, refusals, the harness check and the released run logs
(notebooks 06-11)."""
