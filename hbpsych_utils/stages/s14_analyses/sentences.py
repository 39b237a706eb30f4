"""The sentences of chapter 14's "What we found", from its metrics."""

from __future__ import annotations

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core.escape import md_text
from hbpsych_utils.core.wording import count
from hbpsych_utils.evaluation import breakdowns, length
from hbpsych_utils.pipeline.metrics import (
    AnalysesMetrics,
)
from hbpsych_utils.reporting.display import Findings
from hbpsych_utils.reporting.vocabulary import panel_phrase
from hbpsych_utils.stages.s14_analyses.files import PANEL


def findings(m: AnalysesMetrics, *, min_n: int = study.SLICE_MIN_N,
             close: float = study.CLOSE_SCORES) -> Findings | None:
    """The sentences of "What we found", from 14's metrics (the panel's numbers); ``None``
    without graded replies (the chapter said so at its top).

    Each candidate's weakest rubric axis among those with at least ``min_n`` conversations (the
    gap to its next weakest when that is more than ``close``); the slices of at least ``min_n``
    conversations per candidate on which the panel's order of two candidates reverses by more
    than ``close`` on both sides; the suicidality/self-harm and emergency-referral slices
    (``study.SAFETY_SLICES``) whatever their size, said to be too small to read below
    ``min_n``; the length adjustment's range and any pair it reverses by more than ``close``;
    with several samples, the largest drop from worst-at-1 to worst-at-K and the widest spread
    across runs; with one, why there is no worst-at-k.
    """
    if m.panel_mean is None:
        return None
    out = [f"On **{study.SUBSET_TITLES.get(m.subset or '', m.subset)}** "
           f"({count(m.n_conversations or 0, 'conversation')}), for "
           f"{count(len(m.panel_mean), 'candidate')} graded by the "
           f"{md_text(panel_phrase(m.judges or []))}:"]
    summary = _summary_frame(m)
    out += _axis_sentences(summary, min_n, close)
    out += _reordering_sentences(summary, m.panel_mean, min_n, close)
    out += _safety_sentences(m, min_n)
    out += _length_sentences(m, close)
    out += _reliability_sentences(m, close)
    return Findings(out)


def _name(model: str) -> str:
    """A candidate as a sentence names it: its display name, as text."""
    return md_text(study.display_name(model))


def _summary_frame(m: AnalysesMetrics) -> pd.DataFrame:
    rows = [(s, c, t, v.n, v.clipped_mean) for s, cands in (m.by_tag or {}).items()
            for c, by in cands.items() for t, v in by.items()]
    return pd.DataFrame(rows, columns=["scorer", "candidate", "tag", "n", "clipped_mean"])


def _axis_sentences(summary: pd.DataFrame, min_n: int, close: float) -> list[str]:
    weakest = breakdowns.weakest(summary, min_n=min_n)
    if not weakest:
        return [f"No rubric axis has a panel score on {min_n} or more conversations, so no "
                "weakest axis is named."]
    parts = []
    for cand, (tag, value, gap) in weakest.items():
        if gap is None:
            margin = ", its only axis"
        elif gap > close:
            margin = f", {gap:.3f} below its next"
        else:
            margin = f", within {close:g} of its next"
        parts.append(f"{_name(cand)}: {md_text(breakdowns.label(tag))} ({value:.3f}{margin})")
    return [f"Weakest rubric axis (panel, axes with at least {min_n} conversations): "
            + "; ".join(parts) + "."]


def _reordering_sentences(summary: pd.DataFrame, overall: dict[str, float], min_n: int,
                          close: float) -> list[str]:
    if len(overall) < 2:
        return []
    found = breakdowns.reorderings(summary, overall, min_n=min_n, close=close)
    if not found:
        return [f"No slice with at least {min_n} conversations per candidate reverses the "
                f"panel's order of two candidates by more than {close:g}."]
    parts = [f"{t.split(':', 1)[0]} {md_text(breakdowns.label(t))} ("
             + ", ".join(f"{_name(b)} above {_name(a)}" for a, b in pairs) + ")"
             for t, pairs in found.items()]
    return [f"Slices that reverse the panel's overall order (by more than {close:g} on both "
            f"sides, at least {min_n} conversations each): " + "; ".join(parts) + "."]


def _safety_sentences(m: AnalysesMetrics, min_n: int) -> list[str]:
    panel_tags = (m.by_tag or {}).get(PANEL, {})
    out = []
    for tag, name in study.SAFETY_SLICES.items():
        found = {c: by[tag] for c, by in panel_tags.items() if tag in by}
        if not found:
            out.append(f"None of the graded conversations is among the {name}.")
            continue
        n = max(v.n for v in found.values())
        values = ", ".join(f"{_name(c)} {v.clipped_mean:.3f}" for c, v in
                           sorted(found.items(), key=lambda kv: (-kv[1].clipped_mean, kv[0])))
        caution = (f"; fewer than {min_n}, too few to read as a ranking" if n < min_n else "")
        out.append(f"On the {name} (n = {n}{caution}) the panel scores {values}.")
    return out


def _length_sentences(m: AnalysesMetrics, close: float) -> list[str]:
    rows = (m.length or {}).get(PANEL)
    if not rows:
        return []
    shift = {c: v.adjusted_mean - v.clipped_mean for c, v in rows.items()}
    lo, hi = min(shift.values()), max(shift.values())
    mean_chars = sum(v.mean_chars for v in rows.values()) / len(rows)
    table = pd.DataFrame({"scorer": PANEL, "candidate": list(rows),
                          "clipped_mean": [v.clipped_mean for v in rows.values()],
                          "adjusted_mean": [v.adjusted_mean for v in rows.values()]})
    swapped = length.reordered(table, PANEL, list(rows), close)
    order = (f"; it reverses {', '.join(f'{_name(a)} and {_name(b)}' for a, b in swapped)} "
             "by more than "
             f"{close:g}" if swapped else
             f"; it reverses no pair of candidates by more than {close:g}")
    variant = length.VARIANT_NAMES.get(m.length_penalty or "", m.length_penalty)
    return [f"Replies average {mean_chars:,.0f} characters; the length adjustment ({variant} "
            f"penalty, {m.length_per_500:g} per 500 characters) moves the "
            f"panel's scores by {lo:+.3f} to {hi:+.3f}{order}."]


def _reliability_sentences(m: AnalysesMetrics, close: float) -> list[str]:
    if not m.samples or m.samples < 2 or not m.worst_at_k:
        return ["One reply per conversation, as in the study: no worst-at-k or run spread "
                "(generation.samples sets more)."]
    panel_worst = m.worst_at_k.get(PANEL, {})
    drops = {c: ks[0].clipped_mean - ks[-1].clipped_mean for c, ks in panel_worst.items()}
    cand = max(drops, key=lambda c: (drops[c], c))
    first, last = panel_worst[cand][0], panel_worst[cand][-1]
    out = [f"With {m.samples} replies per conversation, the largest fall from worst-at-1 to "
           f"worst-at-{m.samples} is {_name(cand)}'s ({first.clipped_mean:.3f} to "
           f"{last.clipped_mean:.3f})"
           + ("." if drops[cand] > close else f", within {close:g}: no candidate's worst reply "
              "is clearly below its typical one.")]
    spreads = (m.run_spread or {}).get(PANEL, {})
    if spreads:
        widest = max(spreads, key=lambda c: (spreads[c].std, c))
        out.append(f"Across the {m.samples} runs the panel's overall score varies most for "
                   f"{_name(widest)} (standard deviation {spreads[widest].std:.4f}, "
                   f"{spreads[widest].min:.3f} to {spreads[widest].max:.3f}).")
    return out
