"""Building the subset (notebooks 01-05), one module per responsibility.

``corpus`` (HealthBench records, coverage, ids), ``screening`` (LLM screen and its replay),
``translation`` (reviewer translations), ``review_set`` (designing and replaying a blinded
round, the reviewers' packet), ``instrument`` (the HTML review page), ``review_round`` (what
03's and 04's rounds share: their inputs, materials and agreement, round 2's state),
``ratings`` (clinicians' ratings files and the votes table), ``tally`` (inclusion, stopping
rule, modal category), ``agreement`` (AC1, Fleiss, Cohen) and ``subset`` (assembly, hashes,
release check). Their
file-format models report errors through :mod:`hbpsych_utils.core.records`.
"""
