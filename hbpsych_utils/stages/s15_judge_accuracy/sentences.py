"""The sentences of chapter 15's "What we found", from its metrics."""

from __future__ import annotations

from hbpsych_utils import study
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.pipeline.metrics import JudgeAccuracyMetrics, PairwiseF1
from hbpsych_utils.reporting.display import Findings
from hbpsych_utils.stages.s15_judge_accuracy.undefined import rater


def findings(m: JudgeAccuracyMetrics, *, close: float = study.F1_CLOSE,
             min_rows: int = study.SLICE_MIN_N,
             min_pairs: int = study.PHYSICIAN_RANGE_MIN_PAIRS) -> Findings | None:
    """The sentences of "What we found", from 15's metrics; ``None`` without a verdict on any
    row (the chapter said why above).

    How much of the Psych subset the labelled rows cover; each judge's and the panel's macro-F1
    against the physician majority with its sensitivity and specificity; whether its pairwise
    balanced F1 is within the physicians' range (the lowest to the highest leave-one-out F1 of
    the physicians with at least ``min_pairs`` label pairs: :func:`placed_in_range`), above or
    below it, and the category of at least ``min_rows`` rows where it falls furthest below the
    physicians pooled (by more than ``close``); AC1 among the judges; the range of the corrected
    criterion-met rates. On the fixture, a reminder that its verdicts are scripted."""
    if not m.against_majority:
        return None
    out = []
    if m.source == "fixture":
        out.append("These rows are the format fixture and the simulator's verdicts on them are "
                   "scripted: the numbers check the chapter's arithmetic, not any judge.")
    union = (m.coverage or {}).get(ja.UNION)
    if union is not None and union.subset_conversations:
        out.append(f"The physicians' labels cover {union.conversations:,} of the "
                   f"{union.subset_conversations:,} conversations of {ja.UNION} "
                   f"({union.share:.1%}); {count(union.rows, 'labelled row')} of the file's "
                   f"{m.n_rows_in_file or 0:,} are on them.")
    out.append(f"On {count(m.n_rows or 0, 'row')} ({count(m.n_conversations or 0, 'conversation')}"
               f", {count(m.n_physicians or 0, 'physician')}):")
    out += _rater_sentences(m, close, min_rows, min_pairs)
    if m.judges_ac1 is not None:
        out.append(f"The judges agree with one another at AC1 {m.judges_ac1:.3f}.")
    out += _corrected_sentences(m)
    if m.n_excluded:
        out.append(f"{count(m.n_excluded, 'verdict')} never came and are left out.")
    return Findings(out)


def _corrected_sentences(m: JudgeAccuracyMetrics) -> list[str]:
    """How far correcting each judge's errors moves this run's criterion-met rates (none
    without a corrected rate)."""
    shifts = [r.corrected - r.observed for r in (m.corrected or {}).values()
              if r.corrected is not None]
    if not shifts:
        return []
    return [f"Corrected for each judge's errors, this run's criterion-met rates move "
            f"by {min(shifts):+.3f} to {max(shifts):+.3f}."]


def _rater_sentences(m: JudgeAccuracyMetrics, close: float, min_rows: int,
                     min_pairs: int) -> list[str]:
    """Each judge's and the panel's accuracy, its place among the physicians and its worst
    slice."""
    pooled = (m.pairwise or {}).get("physicians", {})
    span = physician_range(m, min_pairs)
    out = []
    for judge, cats in (m.against_majority or {}).items():
        a = cats["all"]
        reaches = (f"reaches macro-F1 {_f(a.macro_f1)}" if a.macro_f1 is not None else
                   "has no macro-F1 (undefined: "
                   f"{md_text((a.undefined or {}).get('macro_f1', 'a class never used'))})")
        out.append(f"{md_text(rater(judge))} {reaches} "
                   f"against the physician majority (sensitivity {_f(a.sensitivity)}, "
                   f"specificity {_f(a.specificity)})"
                   f"{placed_in_range(judge, m, span, min_pairs)}"
                   f"{_worst(judge, m, pooled, close, min_rows)}.")
    return out


def _f(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def physician_range(m: JudgeAccuracyMetrics, min_pairs: int = study.PHYSICIAN_RANGE_MIN_PAIRS
                    ) -> tuple[float, float, int] | None:
    """The lowest and highest leave-one-out balanced F1 (all rows) of the physicians with at
    least ``min_pairs`` label pairs, and how many they are; ``None`` with fewer than two."""
    values = [cats["all"].balanced_f1 for cats in (m.pairwise or {}).values()
              if "all" in cats and cats["all"].kind == "physician"
              and cats["all"].pairs >= min_pairs and cats["all"].balanced_f1 is not None]
    return (min(values), max(values), len(values)) if len(values) >= 2 else None


def placed_in_range(rater: str, m: JudgeAccuracyMetrics,
                    span: tuple[float, float, int] | None,
                    min_pairs: int = study.PHYSICIAN_RANGE_MIN_PAIRS) -> str:
    """"; its pairwise balanced F1 (x) is within / above / below the physicians' range (lo–hi,
    n physicians)", or why there is no range, or why its F1 is undefined; empty without the
    rater's pairwise F1."""
    mine = (m.pairwise or {}).get(rater, {}).get("all")
    if mine is None:
        return ""
    if mine.balanced_f1 is None:
        why = (mine.undefined or {}).get("balanced_f1", "a class never used")
        return f"; its pairwise balanced F1 is undefined ({md_text(why)}), so it is not placed"
    value = mine.balanced_f1
    if span is None:
        return (f"; its pairwise balanced F1 is {value:.3f}, with no physicians' range to place "
                f"it in (fewer than two physicians with {min_pairs} label pairs)")
    lo, hi, n = span
    where = "within" if lo <= value <= hi else ("above" if value > hi else "below")
    return (f"; its pairwise balanced F1 ({value:.3f}) is {where} the physicians' range "
            f"({lo:.3f}–{hi:.3f}, leave-one-out, {count(n, 'physician')} with at least "
            f"{min_pairs} label pairs)")


def _worst(judge: str, m: JudgeAccuracyMetrics, pooled: dict[str, PairwiseF1], close: float,
           min_rows: int) -> str:
    """"; furthest below the physicians pooled on <slice> (gap)", over the slices where both
    the judge's and the pooled F1 are defined: an undefined F1 is never read as a gap."""
    mine = (m.pairwise or {}).get(judge, {})
    rows = m.against_majority.get(judge, {}) if m.against_majority else {}
    gaps = {}
    for c, v in mine.items():
        other = pooled[c].balanced_f1 if c in pooled else None
        if (c != "all" and v.balanced_f1 is not None and other is not None and c in rows
                and rows[c].n >= min_rows):
            gaps[c] = v.balanced_f1 - other
    worst = min(gaps, key=lambda c: (gaps[c], c)) if gaps else None
    if worst is None or gaps[worst] >= -close:
        return ""
    named = md_text(breakdowns.label(worst))  # a category as prose names it
    return f"; furthest below the physicians pooled on {named} ({gaps[worst]:+.3f})"

