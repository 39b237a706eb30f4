"""The grade explorer's view of one conversation as HTML: its turns, a candidate x judge score
table, then per candidate its reply and the rubric with each judge's verdict side by side.

Conversation text, replies and criteria are untrusted input (HealthBench prompts are
user-written, replies are model output): every piece of text is HTML-escaped before it reaches
the page, because the ipywidgets ``HTML`` widget renders its value as markup.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from hbpsych_utils.construction import corpus
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core.escape import html_text
from hbpsych_utils.evaluation import grading
from hbpsych_utils.reporting.explorer_data import (
    NO_CATEGORY,
    ExplorerData,
    ExplorerError,
    disagreements,
    known_conversation,
)
from hbpsych_utils.reporting.vocabulary import term_label

DISAGREE_CLASS = "hbx-disagree"
"""CSS class on a criterion row whose judges disagree (tests and style sheets rely on it)."""

REFUSAL_CLASS = "hbx-refusal"


_STYLE = f"""
<style>
.hbx {{ font-family: system-ui, sans-serif; font-size: 13px; line-height: 1.4; }}
.hbx h3, .hbx h4 {{ margin: 0.8em 0 0.3em 0; }}
.hbx table {{ border-collapse: collapse; margin: 0.3em 0 0.8em 0; }}
.hbx th, .hbx td {{ border: 1px solid #ccc; padding: 2px 6px; vertical-align: top; }}
.hbx .hbx-text {{ white-space: pre-wrap; overflow-wrap: anywhere; }}
.hbx .hbx-turn {{ border-left: 3px solid #999; margin: 4px 0; padding: 2px 8px; }}
.hbx .hbx-role-user {{ border-left-color: #0072b2; }}
.hbx .hbx-role-assistant {{ border-left-color: #009e73; }}
.hbx .hbx-role-system, .hbx .hbx-role-developer {{ border-left-color: #999; }}
.hbx .hbx-reply {{ border-left: 3px solid #009e73; padding: 2px 8px; margin: 4px 0; }}
.hbx .{REFUSAL_CLASS} {{ border-left-color: #d55e00; }}
.hbx .hbx-badge {{ display: inline-block; padding: 0 6px; border-radius: 3px;
  font-weight: bold; font-size: 11px; color: #fff; background: #d55e00; }}
.hbx .hbx-badge-failed {{ background: #555; }}
.hbx tr.{DISAGREE_CLASS} td {{ background: #fde3b0; }}
.hbx tr.{DISAGREE_CLASS} td.hbx-flag {{ font-weight: bold; }}
.hbx .hbx-met {{ color: #006b4f; }}
.hbx .hbx-unmet {{ color: #a33d00; }}
.hbx .hbx-none, .hbx .hbx-missing {{ color: #777; }}
.hbx .hbx-neg {{ color: #a33d00; }}
.hbx .hbx-tags {{ color: #777; font-size: 11px; }}
.hbx .hbx-legend {{ color: #444; font-size: 12px; margin: 0.3em 0; }}
</style>
"""


def _legend(judges: Sequence[str]) -> str:
    columns = ", ".join(html_text(term_label(j)) for j in judges) or "(no judges)"
    return (
        '<div class="hbx-legend">'
        f'<b>Legend.</b> Verdict columns: {columns}. '
        '<span class="hbx-met">✓ met</span> · <span class="hbx-unmet">✗ not met</span> · '
        '<span class="hbx-none">— no verdict</span> (excluded) · '
        '<span class="hbx-missing">· not graded</span> · * recovered by pattern extraction. '
        f'<span style="background:#fde3b0" class="{DISAGREE_CLASS}-key">≠ highlighted rows</span>:'
        ' judges disagree on that criterion for that candidate. Points below zero are penalties'
        ' (a met negative criterion lowers the score). '
        '<span class="hbx-badge">REFUSED</span> marks a reply the provider flagged as a refusal.'
        ' Scores are per conversation, unclipped.'
        "</div>"
    )


def _verdict_cell(met: Any, recovered: bool) -> str:
    star = "*" if recovered else ""
    if met is None:
        return '<td class="hbx-missing" title="not graded">·</td>'
    if pd.isna(met):
        return f'<td class="hbx-none" title="no verdict (excluded)">—{star}</td>'
    if bool(met):
        return f'<td class="hbx-met" title="met">✓ met{star}</td>'
    return f'<td class="hbx-unmet" title="not met">✗ not met{star}</td>'


def _score_text(s: tuple[float, str] | None) -> str:
    if s is None:
        return '<span class="hbx-missing">·</span>'
    value, status = s
    if math.isnan(value):
        return f'<span class="hbx-none">— ({html_text(status)})</span>'
    return f"{value:.3f}"


def _scores_table(data: ExplorerData, prompt_id: str, candidates: Sequence[str]) -> str:
    head = "".join(f"<th>{html_text(term_label(j))}</th>" for j in data.judges)
    rows = []
    for cand in candidates:
        values = [data.score(prompt_id, cand, j) for j in data.judges]
        finite = [v[0] for v in values if v is not None and not math.isnan(v[0])]
        spread = f"{max(finite) - min(finite):.3f}" if len(finite) > 1 else ""
        cells = "".join(f"<td>{_score_text(v)}</td>" for v in values)
        rows.append(f"<tr><th>{html_text(term_label(cand))}</th>{cells}<td>{spread}</td></tr>")
    note = " (computed here from the verdicts)" if data.scores_computed else ""
    return (
        f"<h4>Conversation scores by judge{note}</h4>"
        f'<table class="hbx-scores"><tr><th>Model</th>{head}<th>Spread</th></tr>'
        + "".join(rows) + "</table>"
    )


def _reply_html(resp: dict[str, Any] | None) -> str:
    if resp is None:
        return '<div class="hbx-reply hbx-missing">No response recorded for this candidate.</div>'
    text = resp.get("text")
    text = "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text)
    status = str(resp.get("status"))
    stop = resp.get("stop_reason")
    stop_txt = f" (stop reason: {html_text(stop)})" if stop not in (None, "") and not (
        isinstance(stop, float) and math.isnan(stop)) else ""
    if resp.get("refusal"):
        body = html_text(text) if text else "<i>(empty reply)</i>"
        return (
            f'<div class="hbx-reply {REFUSAL_CLASS}"><span class="hbx-badge">REFUSED</span>'
            f'{stop_txt}<div class="hbx-text">{body}</div></div>'
        )
    if status != "ok" and not text:
        return (
            f'<div class="hbx-reply hbx-missing"><span class="hbx-badge hbx-badge-failed">'
            f"NO RESPONSE</span> status: {html_text(status)}{stop_txt}</div>"
        )
    body = html_text(text) if text else "<i>(empty reply)</i>"
    return f'<div class="hbx-reply">{stop_txt}<div class="hbx-text">{body}</div></div>'


def _criteria_table(
    data: ExplorerData, conv: Conversation, candidate: str, verdicts: pd.DataFrame,
    disagree: set[tuple[str, int]],
) -> str:
    mine = verdicts[verdicts["candidate"] == candidate]
    cell: dict[tuple[str, int], tuple[Any, bool]] = {
        (j, int(i)): (m, bool(r))
        for j, i, m, r in zip(mine["judge"], mine["criterion_index"], mine["criteria_met"],
                              mine["recovered"], strict=True)
    }
    head = "".join(f"<th>{html_text(term_label(j))}</th>" for j in data.judges)
    rows = []
    for i, item in enumerate(conv.rubrics):
        is_dis = (candidate, i) in disagree
        cls = f' class="{DISAGREE_CLASS}"' if is_dis else ""
        pts_cls = ' class="hbx-neg"' if item.points < 0 else ""
        tags = (f'<div class="hbx-tags">{html_text(", ".join(map(term_label, item.tags)))}</div>'
                if item.tags else "")
        verdict_cells = "".join(
            _verdict_cell(*cell.get((j, i), (None, False))) for j in data.judges
        )
        rows.append(
            f'<tr{cls} data-candidate="{html_text(candidate)}" data-criterion="{i}">'
            f"<td>{i}</td><td{pts_cls}>{html_text(grading.format_points(item.points))}</td>"
            f'<td><div class="hbx-text">{html_text(item.criterion)}</div>{tags}</td>'
            f"{verdict_cells}"
            f'<td class="hbx-flag">{"≠" if is_dis else ""}</td></tr>'
        )
    return (
        '<table class="hbx-criteria"><tr><th>#</th><th>Points</th><th>Criterion</th>'
        f"{head}<th>≠</th></tr>" + "".join(rows) + "</table>"
    )


def conversation_html(
    data: ExplorerData, prompt_id: str, candidates: Iterable[str] | None = None
) -> str:
    """The whole view of one conversation as a self-contained HTML fragment.

    Turns, then a candidate × judge score table, then per candidate its reply and the rubric
    with each judge's verdict side by side; disagreeing criteria carry ``DISAGREE_CLASS`` and a
    ``≠`` mark (visible without colour). All text from the data is escaped.
    """
    conv = known_conversation(data, prompt_id)
    cands = list(data.candidates if candidates is None else candidates)
    unknown = [c for c in cands if c not in data.candidates]
    if unknown:
        raise ExplorerError(f"unknown candidate(s) {unknown}; this run has {list(data.candidates)}")
    disagree = disagreements(data, prompt_id, cands)
    parts = [
        _STYLE,
        '<div class="hbx">',
        f"<h3>Conversation {html_text(prompt_id)}</h3>",
        f"<div>{html_text(' · '.join(_facts(data, conv, prompt_id, cands, disagree)))}</div>",
        _legend(data.judges),
        "<h4>Conversation</h4>",
        *_turns(conv),
    ]
    if not cands:
        parts.append("<p><i>No candidate selected.</i></p></div>")
        return "".join(parts)
    parts.append(_scores_table(data, prompt_id, cands))
    verdicts = data.verdict_table(prompt_id)
    for cand in cands:
        parts.append(_candidate_html(data, conv, prompt_id, cand, verdicts, disagree))
    parts.append("</div>")
    return "".join(parts)


def _facts(data: ExplorerData, conv: Conversation, prompt_id: str, cands: Sequence[str],
           disagree: set[tuple[str, int]]) -> list[str]:
    """The line under the heading: category, turns, criteria, hard or not, disagreements, and
    who refused (a feature the run lacks is left out)."""
    facts = [f"{conv.n_turns} turn{'s' if conv.n_turns != 1 else ''}",
             f"{len(conv.rubrics)} criteria"]
    cat = data.category(prompt_id)
    if data.categories is not None:
        facts.insert(0, f"category: {term_label(cat) if cat else NO_CATEGORY}")
    if data.hard_ids is not None:
        facts.append("hard" if data.is_hard(prompt_id) else "not hard")
    facts.append(f"{len(disagree)} disagreement{'s' if len(disagree) != 1 else ''}")
    refused = sorted(data.refused_by(prompt_id) & set(cands))
    if refused:
        facts.append("refused by " + ", ".join(map(term_label, refused)))
    return facts


def _turns(conv: Conversation) -> list[str]:
    """The conversation's turns, numbered, each marked with its role."""
    out = []
    for n, m in enumerate(conv.prompt, start=1):
        role = m.role if m.role in corpus.ROLES else "other"
        out.append(
            f'<div class="hbx-turn hbx-role-{role}"><b>{n}. {html_text(m.role)}</b>'
            f'<div class="hbx-text">{html_text(m.content)}</div></div>'
        )
    return out


def _candidate_html(data: ExplorerData, conv: Conversation, prompt_id: str, cand: str,
                    verdicts: pd.DataFrame, disagree: set[tuple[str, int]]) -> str:
    """One candidate's heading (with its count of disagreements), reply and rubric."""
    n_dis = sum(1 for c, _ in disagree if c == cand)
    return (
        f'<h4>{html_text(term_label(cand))}'
        f'{f" — {n_dis} disagreement" + ("s" if n_dis != 1 else "") if n_dis else ""}</h4>'
        + _reply_html(data.response(prompt_id, cand))
        + _criteria_table(data, conv, cand, verdicts, disagree)
    )
