"""Grade explorer: look inside one run's grades, conversation by conversation.

A reader who doubts a score wants to see what the judges actually saw and said: the
conversation, each candidate's reply, and every rubric criterion with each judge's verdict side
by side, with the criteria the judges disagree on made obvious. Two layers keep this testable
without a browser:

- a data layer (``ExplorerData``, ``load_run``, ``filter_ids``, ``disagreements``:
  :mod:`~hbpsych_utils.reporting.explorer_data`) and an HTML layer (``conversation_html``:
  :mod:`~hbpsych_utils.reporting.explorer_html`), plain functions over the run's tables;
- a thin ipywidgets layer (``Explorer``, ``explore``, here) that only wires controls to those
  functions. This module is the explorer's one entry point: :data:`__all__` names what it
  offers of the other two.

A run's files are read through the readers of the stages that wrote them
(``generation.read_responses``, ``panel.read_verdicts``, ``score_sources.read_scores``,
``subset.read_categories``), which validate them; the explorer only checks what those readers
cannot: that the tables belong to the run's corpus (ids, criterion numbers) and hold one row
per response and per verdict.

Conversation text, replies and criteria are untrusted input (HealthBench prompts are
user-written, replies are model output): every piece of text is HTML-escaped before it reaches
the page, because the ipywidgets ``HTML`` widget renders its value as markup.

Definitions used throughout:

- a *disagreement* is a (candidate, criterion) where, among the judges that returned a verdict,
  at least one said met and another said not met (a missing verdict is shown, but is neither
  agreement nor disagreement);
- a *refusal* is a response whose ``refusal`` flag is set (the provider's own refusal stop
  reason, as ``generation`` records it).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hbpsych_utils.core.escape import html_text
from hbpsych_utils.reporting.explorer_data import (
    NO_CATEGORY,
    ExplorerData,
    ExplorerError,
    conversation_label,
    disagreements,
    filter_ids,
    load_files,
    load_run,
)
from hbpsych_utils.reporting.explorer_html import DISAGREE_CLASS, REFUSAL_CLASS, conversation_html
from hbpsych_utils.reporting.vocabulary import term_label

__all__ = [
    "DISAGREE_CLASS",
    "NO_CATEGORY",
    "REFUSAL_CLASS",
    "Explorer",
    "ExplorerData",
    "ExplorerError",
    "conversation_html",
    "conversation_label",
    "disagreements",
    "explore",
    "filter_ids",
    "load_files",
    "load_run",
]


class Explorer:
    """The ipywidgets front end: filters, a conversation picker, candidates, and the view.

    All logic is in ``explorer_data`` and ``explorer_html``; this class only keeps the controls
    in step (changing a filter or the candidate selection refreshes the picker and the view).
    """

    ALL = "__all__"

    def __init__(self, data: ExplorerData) -> None:
        import ipywidgets as w

        self.data = data
        self._labels = {pid: conversation_label(data, pid) for pid in data.ids}
        cat_options: list[tuple[str, str]] = [("all categories", self.ALL)]
        if data.categories is not None:
            counts: dict[str, int] = {}
            for pid in data.ids:
                c = data.category(pid) or NO_CATEGORY
                counts[c] = counts.get(c, 0) + 1
            cat_options += [(f"{term_label(c)} ({n})", c) for c, n in sorted(counts.items())]
        self.category = w.Dropdown(options=cat_options, value=self.ALL, description="Category",
                                   disabled=data.categories is None)
        self.hard = w.Checkbox(value=False, description="hard only", indent=False,
                               disabled=data.hard_ids is None)
        self.refusal = w.Checkbox(value=False, description="refusals only", indent=False)
        self.disagreement = w.Checkbox(value=False, description="judge disagreement only",
                                       indent=False)
        self.candidates = w.SelectMultiple(
            options=[(term_label(c), c) for c in data.candidates], value=list(data.candidates),
            description="Candidates",
            rows=min(8, max(2, len(data.candidates))),
        )
        self.conversation = w.Dropdown(options=[], description="Conversation",
                                       layout=w.Layout(width="95%"))
        self.count = w.HTML()
        self.view = w.HTML()
        self._updating = False
        for ctl in (self.category, self.hard, self.refusal, self.disagreement, self.candidates):
            ctl.observe(self._on_filter, names="value")
        self.conversation.observe(self._on_pick, names="value")
        notes = []
        if data.categories is None:
            notes.append("no category table")
        if data.hard_ids is None:
            notes.append("no hard ids")
        head = f"<b>Grade explorer</b> — {html_text(data.source or 'in-memory data')}"
        if notes:
            head += f" <i>({html_text('; '.join(notes))}: those filters are off)</i>"
        self.widget = w.VBox([
            w.HTML(head),
            w.HBox([self.category, self.hard, self.refusal, self.disagreement]),
            self.candidates,
            self.count,
            self.conversation,
            self.view,
        ])
        self._refresh()

    def _selected_candidates(self) -> list[str]:
        return list(self.candidates.value)

    def filtered_ids(self) -> list[str]:
        """The ids the current filter settings select."""
        cat = self.category.value
        cands = self._selected_candidates()
        return filter_ids(
            self.data,
            category=None if cat == self.ALL else cat,
            hard=True if self.hard.value else None,
            refusal=True if self.refusal.value else None,
            disagreement=True if self.disagreement.value else None,
            candidates=cands or None,
        )

    def _refresh(self) -> None:
        ids = self.filtered_ids()
        current = self.conversation.value
        self._updating = True
        try:
            self.conversation.options = [(self._labels[pid], pid) for pid in ids]
            self.conversation.value = current if current in ids else (ids[0] if ids else None)
        finally:
            self._updating = False
        self.count.value = (
            f"{len(ids)} of {len(self.data.ids)} conversations match the filters"
        )
        self._render()

    def _render(self) -> None:
        pid = self.conversation.value
        if pid is None:
            self.view.value = "<p><i>No conversation matches these filters.</i></p>"
            return
        cands = self._selected_candidates()
        self.view.value = conversation_html(self.data, pid, cands)

    def _on_filter(self, _change: Any) -> None:
        self._refresh()

    def _on_pick(self, _change: Any) -> None:
        if not self._updating:
            self._render()


def explore(run_dir: Path | str, *, hard_ids: Iterable[str] | None = None) -> Any:
    """Load a run (folder or profile name) and return the explorer widget to display."""
    return Explorer(load_run(run_dir, hard_ids=hard_ids)).widget

