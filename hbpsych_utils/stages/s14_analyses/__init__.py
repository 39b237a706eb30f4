"""Chapter 14, where and how reliably models fail: HealthBench's own analyses on the subset.

The chapter's calls, in order: :func:`start` (its parameters, checked), :func:`inputs` (the
resolver: live, this run's verdicts and scores on ``subset``, every sampled reply's score, the
rubrics, the modal clinician categories and the reply lengths; paper has none of them, since
the released matrices carry no per-criterion grade, and the chapter says so once),
:func:`by_tag` (per candidate, for each judge and the panel, a score for every rubric axis,
HealthBench theme and modal clinician category, with n and bootstrap intervals:
``evaluation.breakdowns``), :func:`heatmaps` (the panel's scores, candidates x axes and
candidates x categories), :func:`lengths` (reply lengths and the length-adjusted score beside
the raw one, with the figure of score against mean reply length: ``evaluation.length``),
:func:`reliability` (with several replies per conversation, worst-at-k for k = 1..K and the
spread of the overall score across the K runs, with its figure: ``evaluation.reliability``),
:func:`metrics`, :func:`write` and :func:`findings`.

The tag breakdown and the lengths are of each conversation's first reply (the one 08 scores);
worst-at-k and the run spread use every reply. Live writes ``by_tag.csv``, ``lengths.csv``,
``worst_at_k.csv`` and ``run_spread.csv`` (with several samples), the figures (PNG and SVG) and
``metrics.json``. Each figure's title and caption are written once, in :data:`FIGURES`.

The chapter's modules, by what they do: :mod:`.graded` (the resolver), :mod:`.tags` (scores by
tag and their heatmaps), :mod:`.length_adjusted` (reply lengths), :mod:`.worst_at_k`
(reliability), :mod:`.outputs` (metrics and files), :mod:`.sentences` ("What we found") and
:mod:`.files` (the names it writes and its figures' text). A chapter calls them through this
package.
"""

from __future__ import annotations

from hbpsych_utils.stages import base
from hbpsych_utils.stages.s14_analyses.files import FIGURES, STAGE
from hbpsych_utils.stages.s14_analyses.graded import Graded, Inputs, inputs
from hbpsych_utils.stages.s14_analyses.length_adjusted import Lengths, lengths
from hbpsych_utils.stages.s14_analyses.outputs import metrics, write
from hbpsych_utils.stages.s14_analyses.sentences import findings
from hbpsych_utils.stages.s14_analyses.tags import Breakdown, Figures, by_tag, heatmaps
from hbpsych_utils.stages.s14_analyses.worst_at_k import Reliability, reliability

start = base.starter(STAGE)

__all__ = ["FIGURES", "STAGE", "Breakdown", "Figures", "Graded", "Inputs", "Lengths",
           "Reliability", "by_tag", "findings", "heatmaps", "inputs", "lengths", "metrics",
           "reliability", "start", "write"]
