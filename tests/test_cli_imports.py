"""What a command-line process imports: `run` and `book` go without jsonschema's IRI grammar,
and notebooks are validated all the same."""

from __future__ import annotations

import sys

import pytest

import hbpsych_utils.__main__ as cli_main
from hbpsych_utils.runner import cli


@pytest.mark.parametrize(("command", "ending", "kept_out"), [
    ("run", True, True), ("book", True, True),
    ("publish", True, False),  # validates a downloaded schema: every format checker stays
    ("run", False, False),     # called in a process that goes on (tests, notebooks)
])
def test_run_and_book_processes_go_without_the_iri_grammar(
        monkeypatch: pytest.MonkeyPatch, command: str, ending: bool, kept_out: bool) -> None:
    monkeypatch.delitem(sys.modules, cli_main.IRI_GRAMMAR, raising=False)
    for name in ("main", "book_main", "publish_main"):
        monkeypatch.setattr(cli, name, lambda *a, **k: 0)
    assert cli_main._dispatch([command], ending) == 0
    assert (cli_main.IRI_GRAMMAR in sys.modules
            and sys.modules[cli_main.IRI_GRAMMAR] is None) is kept_out


def test_a_grammar_already_imported_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    module = type(sys)(cli_main.IRI_GRAMMAR)
    monkeypatch.setitem(sys.modules, cli_main.IRI_GRAMMAR, module)
    cli_main.without_iri_grammar()
    assert sys.modules[cli_main.IRI_GRAMMAR] is module


def test_notebooks_are_validated_without_it() -> None:
    """This process, as a `run` or `book` one, has no IRI grammar (conftest keeps it out): an
    executed copy with a malformed cell is still refused by nbformat's schema."""
    import nbformat

    assert sys.modules.get(cli_main.IRI_GRAMMAR, None) is None
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nbformat.validate(nb)
    nb.cells[0]["outputs"] = [{"output_type": "stream", "name": "stdout"}]  # no text
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(nb)
