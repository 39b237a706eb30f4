"""The reproduction ledger's page: its summary, every printed number by section beside this
run's value and status, then what each number depends on (its conditions in the paper's run).
"""

from __future__ import annotations

from collections.abc import Sequence

from hbpsych_utils.reporting import ledger, ledger_conditions, ledger_numbers, vocabulary
from hbpsych_utils.reporting.book_markdown import cell, chapter_link, code, nowrap, table
from hbpsych_utils.reporting.run_metrics import RunMetrics


def _compared_words(r: ledger.Row) -> str:
    """What the value of a row whose conditions are not the paper's says beside the paper's."""
    if r.compared == ledger.EQUAL:
        return "its value equals the paper's all the same"
    if r.compared == ledger.DIFFERS:
        return f"its value differs from the paper's {r.compared_note}".rstrip()
    return f"not computable either: {r.compared_note}"


def _printed(paper: str) -> str:
    """A value as the paper prints it: a number as text, a model's name verbatim as code (the
    paper names models by machine name, "kimi-k2.6"; the rest of the page by display name)."""
    return cell(paper) if ledger_numbers.printed(paper).number is not None else code(paper)


def ledger_markdown(rows: Sequence[ledger.Row], metrics: RunMetrics,
                    chapters: Sequence[str]) -> str:
    """The reproduction ledger's page: the summary, every printed number by section, then what
    each number depends on (its conditions in the paper's run)."""
    summary = ledger.summary(rows)
    parts = ["# Reproduction ledger\n",
             "Every number the study's paper prints that its released artifacts determine, "
             "as the paper prints it, beside the value this run computed. Each number holds "
             "under the paper's conditions (listed below the table: the chapters it comes from, "
             "their modes and settings), and a run that departs from them says so first: "
             "*tweaked* names the setting this run changed, *not current* says its chapter was "
             "run by hand, failed or is behind an upstream change, *own replies* says the "
             "chapter generated and graded replies of its own. Under the paper's conditions, a "
             "number is *equal* when this run's value, rounded as the paper prints it, is the "
             "printed value; *differs* says by how much; *not computable* says what this run "
             "lacks. The paper's values are kept as printed in `data/paper_numbers.yaml`; this "
             "run's come from its chapters' results. A model the paper names is shown as the "
             "paper prints it, as code; this run's model by its name in the rest of the book, "
             "compared under the paper's name for it.\n",
             f"**{summary.sentence()}**\n"]
    numbers = []
    for r in rows:
        stage = ledger_numbers.stage_of(r.number)
        run = (nowrap(chapter_link(vocabulary.models_named(r.run), stage, chapters)) if r.run
               else "–")
        word = ledger.STATUS_WORDS[r.status]
        note = r.note if r.status == ledger_conditions.TWEAKED else vocabulary.models_named(r.note)
        status = (f"**{word}**" if r.status != ledger.EQUAL and r.status != ledger.NOT_COMPUTABLE
                  else word) + (f": {cell(note)}" if note else "")
        if r.status != r.compared:
            status += f" ({cell(vocabulary.models_named(_compared_words(r)))})"
        numbers.append((nowrap(cell(r.number.section)),
                      cell(vocabulary.models_named(r.number.quantity)),
                      nowrap(_printed(r.number.paper)), run, status))
    parts.append(table(["§", "quantity", "paper", "this run", "status"], numbers))
    parts.append("## What each number depends on\n")
    parts.append("Derived from the stage graph: the chapters a number comes from and those they "
                 "read from, with their modes and the settings they read, at the values of the "
                 "paper's run. A setting that cannot change a number (such as which other "
                 "candidates are scored, for one candidate's mean) is left out of its "
                 "conditions.\n")
    groups: dict[str, list[ledger.Row]] = {}
    for r in rows:
        groups.setdefault(ledger_conditions.conditions(r.number).sentence(), []).append(r)
    parts.append(table(["§", nowrap("numbers"), "the paper's conditions"], [
        (", ".join(nowrap(cell(sec)) for sec in dict.fromkeys(r.number.section for r in g)),
         str(len(g)), cell(conditions)) for conditions, g in groups.items()]))
    return "\n".join(parts)
