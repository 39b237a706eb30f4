"""The what-if panel in JupyterLab: the book page's controls as ipywidgets, in chapter 08.

Two layers, as the grade explorer has them: everything a state shows is computed by
:class:`hbpsych_utils.evaluation.whatif.Scorer` (Table 1 under a choice and how it moves the
study's order) and laid out by the book page's functions (:func:`whatif_page.dims`,
:func:`whatif_page.describe`, :func:`whatif_page.outcome_table`, through the display
vocabulary); :class:`Panel` only wires the controls to them, scoring each choice when a reader
first asks for it. No statistic is computed here.

Where no widget frontend renders it (an executed copy read as HTML, the book), the panel shows
its static version: the run's own scoring, the same table, with a sentence on where to switch
(:meth:`Panel.static_html`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hbpsych_utils.core import escape
from hbpsych_utils.evaluation import whatif
from hbpsych_utils.evaluation.whatif import Choice
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting import whatif_page as page

STATIC_NOTE = (
    "In JupyterLab, controls here switch this Table 1 among the scoring choices the run's data "
    "allows (which judges, mean or median, the subset, the later models; in a live run also "
    "refusals, the clip and the length adjustment). Without a kernel this is the run's own "
    "scoring; the book's what-if page switches among every choice without one.")
"""What the static version says in place of the controls."""


class Panel:
    """The controls of :func:`whatif_page.dims` as dropdowns over a :class:`whatif.Scorer`;
    changing one shows Table 1 under the choice they name (:meth:`choice`)."""

    def __init__(self, scorer: whatif.Scorer, later: Sequence[str]) -> None:
        import ipywidgets as w

        self.scorer = scorer
        self.later = list(later)
        space = scorer.whatif.space
        self.dims = page.dims(space, self.later)
        selected = page.state_key(scorer.whatif.reference, space, self.dims).split("|")
        self.controls = {d.name: w.Dropdown(options=[(words, v) for v, words in d.options],
                                            value=value, description=d.label,
                                            style={"description_width": "initial"})
                         for d, value in zip(self.dims, selected, strict=True)}
        self.about = w.HTML()
        self.view = w.HTML()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.widget = w.VBox([w.HBox(list(self.controls.values())), self.about, self.view])
        self._render()

    def choice(self) -> Choice:
        """The choice the controls name (a control the run does not offer keeps the run's
        own setting)."""
        ref = self.scorer.whatif.reference
        space = self.scorer.whatif.space
        value = {name: c.value for name, c in self.controls.items()}
        judges = (tuple(space.judges[int(i)] for i in value["judges"].split("."))
                  if "judges" in value else ref.judges)
        flag = {k: value[k] == "1" for k in ("later", "refusals", "clip", "length") if k in value}
        return Choice(judges, value.get("combine", ref.combine), value.get("subset", ref.subset),
                      flag.get("later", ref.later), flag.get("refusals", ref.refusals_excluded),
                      flag.get("clip", ref.clipped), flag.get("length", ref.length_adjusted))

    def table(self, choice: Choice | None = None) -> vocabulary.Table:
        """Table 1 under ``choice`` (the controls' when None), as the vocabulary lays it out."""
        choice = self.choice() if choice is None else choice
        self.scorer(choice)
        computed = page.Computed(self.scorer.whatif, self.scorer.data, self.later)
        return page.outcome_table(computed, choice)

    def _render(self) -> None:
        choice = self.choice()
        space = self.scorer.whatif.space
        self.about.value = (f"<i>{escape.html_text(page.describe(choice, space, self.later))}"
                            "</i>")
        self.view.value = self.table(choice).html()

    def _on_change(self, _change: Any) -> None:
        self._render()

    def static_html(self) -> str:
        """The run's own scoring as the book and an HTML copy show it: the note, the choice in
        words and its Table 1."""
        ref = self.scorer.whatif.reference
        about = page.describe(ref, self.scorer.whatif.space, self.later)
        return (f"<p>{escape.html_text(STATIC_NOTE)}</p>"
                f"<p><i>{escape.html_text(about)}</i></p>{self.table(ref).html()}")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget's view where a frontend renders widgets, the static version beside it
        for everything else."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/html"] = self.static_html()
        return bundle
