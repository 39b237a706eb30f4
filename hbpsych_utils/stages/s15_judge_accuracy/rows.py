"""Chapter 15's resolver and its rows: what the run has to grade (the physician-labelled rows on
the Psych subset, or nothing in a paper run, said once) and what grading them will cost."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction import subset as subset_files
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.config import LLMSettings
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, grading, panel
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.evaluation.score_sources import EvaluationMode
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting.vocabulary import Table, Tables, panel_phrase
from hbpsych_utils.stages import base
from hbpsych_utils.stages.base import StageRun
from hbpsych_utils.stages.judge_plans import JudgePlan, judge_plan
from hbpsych_utils.stages.s15_judge_accuracy.files import STAGE

LACKING_WHY = ("HealthBench's meta-evaluation file is online only, and a paper-mode run "
               "neither downloads it nor calls a judge.")
LACKING_ADDS = ("A live run adds the judges' accuracy against the physicians: macro-F1, "
                "sensitivity and specificity, the judges' placement among the physicians, "
                "their agreement and this run's corrected criterion-met rates (the smoke "
                "profile grades the compendium's format fixture; a real run grades the "
                "file's rows on the Psych subset).")


# --- the rows ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetaEval:
    """Live: the rows to grade, their physician labels, the judges that will grade them, and
    this run's own verdicts (07) whose criterion-met rates the chapter corrects."""

    rows: list[ja.MetaEvalRow]
    source: str
    judges: list[str]
    template: str
    n_in_file: int
    coverage: pd.DataFrame
    """``judge_accuracy.coverage`` of the file's rows over the run's subsets."""
    themes: dict[str, str]
    """HealthBench theme by prompt id (01's corpus)."""
    psych_categories: dict[str, str]
    """Modal clinician category by prompt id (05's ``categories_v1.csv``, with a majority)."""
    conversations: list[Conversation]
    """01's corpus (simulator faults that name a ``prompt_id`` resolve against it)."""
    run_verdicts: pd.DataFrame
    """07's verdicts of the first reply of each conversation."""

    @property
    def empty(self) -> bool:
        """No row of the file is on a conversation of the subset: nothing to grade."""
        return not self.rows

    @property
    def labels(self) -> pd.DataFrame:
        return ja.labels_table(self.rows, self.themes, self.psych_categories)

    @property
    def physicians(self) -> pd.DataFrame:
        return ja.physician_labels(self.rows, self.themes, self.psych_categories)

    @property
    def n_in_subset(self) -> int:
        return int(self.coverage.loc[self.coverage["subset"] == ja.UNION, "rows"].iloc[0])

    def view(self) -> Tables:
        coverage = Table(self.coverage.set_index("subset"), caption=(
            "Coverage of the Psych subsets by physician-labelled rows: the rows, the "
            "conversations they are on, and their share of the subset's conversations"))
        if self.empty:
            return Tables([coverage], note="No row of the file is on a conversation of the "
                          "Psych subset, so nothing is graded.")
        labels = self.labels
        by_cat = labels.groupby("category").agg(rows=("row", "size"),
                                                conversations=("prompt_id", "nunique"),
                                                majority_met=("majority", "mean"))
        what = ("HealthBench's meta-evaluation file (verified by content)"
                if self.source == "registry" else
                "the compendium's format fixture (its completions script the simulator's "
                "verdicts)")
        kept = ("" if self.n_in_subset == len(self.rows) else
                f" (the first {len(self.rows):,} of them, max_rows)")
        note = (f"Of the {count(self.n_in_file, 'row')} of {what}, "
                f"{count(self.n_in_subset, 'row')} are on conversations of the Psych subset: "
                f"the statistics use {ja.UNION} (a row counts when its conversation is in any "
                f"of the three){kept}. Graded: {count(len(self.rows), 'row')}, "
                f"{count(labels['prompt_id'].nunique(), 'conversation')}, "
                f"{count(self.physicians['physician'].nunique(), 'physician')}, "
                f"{count(int(labels['n_physicians'].sum()), 'label')}; to be graded by the "
                f"{panel_phrase(self.judges)}. "
                f"{count(int(labels[ja.THEME].isna().sum()), 'row')} without a HealthBench theme "
                f"and {count(int(labels[ja.PSYCH_CATEGORY].isna().sum()), 'row')} without a Psych "
                "category are left out of those tables.")
        return Tables([coverage, Table(by_cat, caption="Rows per category of the file")],
                      note=note)


@dataclass(frozen=True)
class Inputs:
    """What the chapter grades (``None`` where the run has no physician labels) and what it
    lacks."""

    mode: EvaluationMode
    rows: MetaEval | None
    lacking: base.Lacking | None = None

    def view(self) -> MetaEval | base.Lacking | None:
        return self.lacking if self.lacking is not None else self.rows


@base.resolver
def meta_eval(run: StageRun, *, meta_eval: str, max_rows: int | None,
              judges: list[str] | None) -> Inputs:
    """Live: the rows (``meta_eval``: the registry's file, checked line by line and its prompt
    ids against HealthBench's 5,000, or the format fixture scripted for the judges) on the
    conversations of 05's subsets (v1 ∪ v2 ∪ Hard; ``judge_accuracy.coverage`` says how much
    of each they cover), the first ``max_rows`` of them, each conversation's theme (01's
    corpus) and modal clinician category (05), the grader template (sha256-checked) and 07's
    verdicts; ``judges`` (``None``: the study's panel) grade them. Paper: no physician labels
    (:data:`LACKING_WHY`)."""
    if run.mode != graph.LIVE:
        return Inputs(graph.PAPER, None, base.lacking(STAGE, run.mode, why=LACKING_WHY,
                                                      adds=LACKING_ADDS))
    panel_judges = list(study.JUDGE_PANEL) if judges is None else list(judges)
    stage = run.stage
    if meta_eval == "fixture":
        everything = ja.check_rows(ja.fixture_rows(panel_judges), where="format fixture")
    else:
        ids = corpus.screening_ids(stage.fetch("screening_labels"))
        everything = ja.read_meta_eval(stage.fetch(ja.ARTIFACT), ids)
    index = subset_files.read_index(stage.upstream(graph.SUBSET, graph.SUBSET_INDEX))
    subsets = {key: subset_files.stage_ids(stage, key) for key in index}
    rows = ja.in_subsets(everything, subsets)[:max_rows]
    held = corpus.load_recorded(stage.upstream(graph.CORPUS, graph.CORPUS_RECORD))
    themes = {c.prompt_id: t for c in held if (t := ja.theme_of(c.example_tags)) is not None}
    cats = subset_files.read_categories(stage.upstream(graph.SUBSET, graph.CATEGORIES_V1))
    psych = {f"{pid}": tags[0].split(":", 1)[1]
             for pid, tags in breakdowns.category_tags(cats).items()}
    template = grading.load_template(stage.fetch(grading.TEMPLATE_ARTIFACT))
    return Inputs(graph.LIVE, MetaEval(rows, meta_eval, panel_judges, template, len(everything),
                                       ja.coverage(everything, subsets), themes, psych, held,
                                       _first_replies(run)))


def _first_replies(run: StageRun) -> pd.DataFrame:
    """07's verdicts of each conversation's first reply."""
    verdicts = panel.read_verdicts(run.stage.upstream(graph.GRADING, graph.VERDICTS))
    if "sample" in verdicts.columns:
        verdicts = verdicts[verdicts["sample"].fillna(0) == 0]
    return verdicts


# --- what it costs -----------------------------------------------------------------------------

Plan = JudgePlan
"""What grading the rows costs, per judge, before anything is sent."""


@base.needs
def cost_plan(rows: MetaEval, *, llm: LLMSettings) -> Plan:
    """Calls, tokens and USD per judge for grading the rows once: the engine's token estimate
    of each filled grader prompt, the cost plan's assumed verdict length and the prices of the
    registry ``llm`` names, through the batch APIs when ``llm.mode`` is batch
    (``judge_accuracy.cost_rows``)."""
    return judge_plan([ja.request_chars(r, rows.template) for r in rows.rows], len(rows.rows),
                      rows.judges, llm=llm, calls="one call per row and judge",
                      not_counted="re-asks and answers already in the store")

