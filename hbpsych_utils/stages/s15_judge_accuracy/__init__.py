"""Chapter 15, are the judges right? Their verdicts against physicians' labels.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`meta_eval` (the
resolver: live, the rows to grade, HealthBench's meta-evaluation file from the registry,
verified by content, or the compendium's format fixture, kept only on the conversations of the
run's Psych subsets, v1 ∪ v2 ∪ Hard from 05_subset, with the coverage of each; paper has no
physician labels, since the file is online only and a paper run downloads nothing, and the
chapter says so once), :func:`cost_plan` (what grading the rows will cost at the model
registry's prices, shown before anything is sent, as 06 does), :func:`grade` (every row graded
by every judge with the reference grader template through the engine:
``panel.grade_requests``, the same re-asks and exclusions as 07), :func:`accuracy` (each judge
and the panel, the majority of the judges, against the physician majority: macro-F1, each
class's F1, sensitivity and specificity with conversation-clustered bootstrap intervals,
overall, per the file's category, per HealthBench theme and per Psych category),
:func:`placement` (HealthBench's pairwise balanced F1 of each judge and the panel against each
physician beside each physician's leave-one-out F1 against the others, by the same slicings,
and the figure), :func:`agreement` (Gwet's AC1 among the judges), :func:`corrected` (each
judge's and the panel's criterion-met rate on this run's grading, 07, with its Rogan-Gladen
correction), :func:`metrics`, :func:`write` and :func:`findings`.

The statistics and their definitions are in :mod:`hbpsych_utils.evaluation.judge_accuracy`.
Deviations from the reference: the rows are graded at the study's grading settings
(``grading.temperature``, 0 in the study; simple-evals' meta-evaluation samples its grader at
its own defaults), and a verdict still missing after the re-asks is left out, never counted as
"not met". Live writes ``verdicts.csv``, ``coverage.csv``, ``accuracy.csv``,
``pairwise_f1.csv``, ``corrected_rates.csv`` (when 07 graded anything), the figure and
``metrics.json``.

The chapter's modules, by what they do: :mod:`.rows` (the resolver and the cost plan),
:mod:`.verdicts` (grading), :mod:`.physicians` (against the physicians, among them, and the
judges' agreement), :mod:`.corrections` (the corrected rates), :mod:`.undefined` (what a table
leaves undefined, said under it), :mod:`.outputs` (metrics and files), :mod:`.sentences` ("What
we found") and :mod:`.files` (the names it writes). A chapter calls them through this package.
"""

from __future__ import annotations

from hbpsych_utils.stages import base
from hbpsych_utils.stages.s15_judge_accuracy.corrections import Corrected, corrected
from hbpsych_utils.stages.s15_judge_accuracy.files import STAGE
from hbpsych_utils.stages.s15_judge_accuracy.outputs import metrics, write
from hbpsych_utils.stages.s15_judge_accuracy.physicians import (
    Accuracy,
    Agreement,
    Placement,
    accuracy,
    agreement,
    placement,
)
from hbpsych_utils.stages.s15_judge_accuracy.rows import (
    Inputs,
    MetaEval,
    Plan,
    cost_plan,
    meta_eval,
)
from hbpsych_utils.stages.s15_judge_accuracy.sentences import (
    findings,
    physician_range,
    placed_in_range,
)
from hbpsych_utils.stages.s15_judge_accuracy.undefined import UNDEFINED
from hbpsych_utils.stages.s15_judge_accuracy.verdicts import Graded, grade

start = base.starter(STAGE)

__all__ = ["STAGE", "UNDEFINED", "Accuracy", "Agreement", "Corrected", "Graded", "Inputs",
           "MetaEval", "Placement", "Plan", "accuracy", "agreement", "corrected", "cost_plan",
           "findings", "grade", "meta_eval", "metrics", "physician_range", "placed_in_range",
           "placement", "start", "write"]
