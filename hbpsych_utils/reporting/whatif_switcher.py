"""The what-if page's switcher: controls over precomputed states, and the few lines of
JavaScript that show the state they name.

Every state (a Table 1, its comparability card, its command) is computed and laid out by the
display vocabulary in Python. The page carries them as JSON in a ``<script
type="application/json">`` element (``core.escape.json_script``), each distinct piece once and
each table as its vocabulary layout: the HTML before and after its rows, each cell's HTML and
each column's class. The script joins those back into exactly the HTML the vocabulary writes
(:func:`table_pieces` checks that at build time, and ships a table whole where it would not)
and puts it in place; it computes nothing, fetches nothing and works from ``file://``. Without
JavaScript the page shows the selected state as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hbpsych_utils.core import escape
from hbpsych_utils.reporting import vocabulary


@dataclass(frozen=True)
class Dim:
    """One control: its name, label and options (value, words); a state's key joins the
    controls' values in their order with ``|``."""

    name: str
    label: str
    options: list[tuple[str, str]]


@dataclass(frozen=True)
class State:
    """What the page shows for one setting of the controls."""

    about: str
    """The choice in words (text)."""
    table: vocabulary.Table
    card: vocabulary.Table | None
    command: str
    """HTML (escaped where it was made)."""


@dataclass
class Interned:
    """Distinct values, each stored once, by index."""

    items: list[Any] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def add(self, value: Any) -> int:
        key = escape.json_script(value)
        if key not in self.index:
            self.index[key] = len(self.items)
            self.items.append(value)
        return self.index[key]


def row_html(cells: Sequence[str], classes: Sequence[str]) -> str:
    """One body row as ``vocabulary.table_html`` writes it (what the script writes too)."""
    return ("<tr>" + f'<th class="{classes[0]}" scope="row">{cells[0]}</th>'
            + "".join(f'<td class="{c}">{v}</td>' for v, c in zip(cells[1:], classes[1:],
                                                                  strict=True)) + "</tr>")


def table_pieces(table: vocabulary.Table, text: Interned, rows: Interned,
                 classes: Interned) -> dict[str, Any]:
    """A table as the page carries it: the HTML before its rows (``pre``) and after
    (``post``), its rows (indices of distinct rows of cell HTML) and their cells' classes
    (``cls``); the script's joining of them is checked here to be the vocabulary's HTML
    exactly, and a table for which it is not is carried whole (``rows`` None)."""
    html = table.html(style=False)
    shown = table.shown()
    head, sep, _ = html.partition("<tbody>")
    tail = html[html.rfind("</tbody>"):]
    pre = head + sep
    joined = "\n".join([pre, *(row_html(r, c) for r, c in zip(shown.cells, shown.classes,
                                                                strict=True)), tail])
    if not sep or joined != html:
        return {"pre": text.add(html), "post": None, "cls": None, "rows": None}
    return {"pre": text.add(pre), "post": text.add(tail),
            "cls": classes.add([list(c) for c in shown.classes]),
            "rows": [rows.add(list(r)) for r in shown.cells]}


SWITCHER_JS = """(function () {
  "use strict";
  var root = document.getElementById("whatif");
  var data = JSON.parse(document.getElementById("whatif-data").textContent);
  var controls = data.dims.map(function (d) { return document.getElementById("whatif-" + d); });
  function part(name) { return root.querySelector('[data-part="' + name + '"]'); }
  function table(t) {
    if (t.rows === null) { return data.text[t.pre]; }
    var cls = data.classes[t.cls];
    return [data.text[t.pre]].concat(t.rows.map(function (row, r) {
      return "<tr>" + data.rows[row].map(function (v, i) {
        return i === 0 ? '<th class="' + cls[r][0] + '" scope="row">' + v + "</th>"
                       : '<td class="' + cls[r][i] + '">' + v + "</td>";
      }).join("") + "</tr>";
    }), [data.text[t.post]]).join("\\n");
  }
  function show() {
    var key = controls.map(function (c) { return c.value; }).join("|");
    var state = data.states[key];
    if (!state) { return; }
    part("about").textContent = state.about;
    part("table").innerHTML = table(data.tables[state.table]);
    part("card").innerHTML = state.card === null ? "" : table(data.cards[state.card]);
    part("command").innerHTML = data.commands[state.command];
    root.setAttribute("data-state", key);
  }
  controls.forEach(function (c) { c.addEventListener("change", show); });
  show();
})();"""
"""Joins the selected state's precomputed pieces and puts them in place; computes nothing."""

SWITCHER_CSS = """<style>
#whatif .whatif-controls { display: flex; flex-wrap: wrap; gap: 0.6em 1.4em; margin: 0.8em 0; }
#whatif .whatif-controls label { display: flex; flex-direction: column; font-size: 0.85rem;
  font-weight: 600; }
#whatif .whatif-controls select { font-weight: normal; max-width: 22em; }
#whatif .whatif-about { font-style: italic; }
</style>"""


def controls_html(controls: Sequence[Dim], selected: str) -> str:
    """The controls, each a labelled ``<select>``, the state ``selected`` selected."""
    chosen = selected.split("|")
    out = ['<div class="whatif-controls">']
    for d, value in zip(controls, chosen, strict=True):
        options = "".join(
            f'<option value="{escape.html_text(v)}"{" selected" if v == value else ""}>'
            f"{escape.html_text(words)}</option>" for v, words in d.options)
        out.append(f'<label for="whatif-{escape.html_text(d.name)}">'
                   f"{escape.html_text(d.label)}"
                   f'<select id="whatif-{escape.html_text(d.name)}">{options}</select></label>')
    out.append("</div>")
    return "".join(out)


def switcher_data(controls: Sequence[Dim], states: Mapping[str, State]) -> dict[str, Any]:
    """Every state's pieces, each distinct one once: ``states`` maps a state's key to its
    words and the indices of its table, card and command. A table object shared by several
    states (one computation) is laid out once."""
    text, rows, classes, commands = Interned(), Interned(), Interned(), Interned()
    tables, cards = Interned(), Interned()
    seen: dict[int, int] = {}

    def laid_out(t: vocabulary.Table, into: Interned) -> int:
        if id(t) not in seen:
            seen[id(t)] = into.add(table_pieces(t, text, rows, classes))
        return seen[id(t)]

    out = {key: {"about": s.about, "table": laid_out(s.table, tables),
                 "card": None if s.card is None else laid_out(s.card, cards),
                 "command": commands.add(s.command)} for key, s in states.items()}
    return {"dims": [d.name for d in controls], "states": out, "tables": tables.items,
            "cards": cards.items, "commands": commands.items, "text": text.items,
            "rows": rows.items, "classes": classes.items}


def switcher_html(controls: Sequence[Dim], states: Mapping[str, State], selected: str,
                  card_summary: str) -> str:
    """The panel: controls, the selected state's words, Table 1, its card (folded under
    ``card_summary``) and command, then the data and the script."""
    first = states[selected]
    data = switcher_data(controls, states)
    card = first.card.html(style=False) if first.card is not None else ""
    return "\n".join([
        SWITCHER_CSS,
        f'<div id="whatif" data-state="{escape.html_text(selected)}">',
        controls_html(controls, selected),
        f'<p class="whatif-about" data-part="about">{escape.html_text(first.about)}</p>',
        f'<div data-part="table">{first.table.html(style=False)}</div>',
        f"<details><summary>{escape.html_text(card_summary)}</summary>"
        f'<div data-part="card">{card}</div></details>',
        f'<div data-part="command">{first.command}</div>',
        "</div>",
        f'<script type="application/json" id="whatif-data">{escape.json_script(data)}</script>',
        f"<script>{SWITCHER_JS}</script>"])
