"""The what-if panel of chapter 08 in JupyterLab, wired as Python: built on the released
matrices and on a small live table, its controls changed programmatically, the table it shows
compared with what ``evaluation.whatif`` computes for that choice (every choice scored at once
by ``whatif.compute``, and the choice alone by ``paper_outcome`` / ``live_outcome``). Where no
widget frontend renders it, it shows the run's own Table 1, and the book keeps that static
version in place of the widget's view.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_whatif import JUDGES, live_whatif, paper_parts, paper_whatif

from hbpsych_utils import study
from hbpsych_utils.core import escape
from hbpsych_utils.evaluation import scoring, whatif
from hbpsych_utils.evaluation.whatif import Choice, Space
from hbpsych_utils.pipeline import graph
from hbpsych_utils.reporting import book_chapters, vocabulary, whatif_widget
from hbpsych_utils.reporting import whatif_page as page

GPT41 = study.JUDGE_PANEL[0]
pytestmark = pytest.mark.xdist_group("whatif")
"""On the worker of tests/test_whatif.py: the what-ifs both read are computed once there."""


@pytest.fixture(name="paper_parts", scope="module")
def paper_parts_fixture(mirror: Path) -> tuple[whatif.PaperData, Space, Choice, list[str]]:
    data, space, reference, order = paper_parts()
    v1 = data.per_judge["v1"]
    assert order == scoring.ranking(scoring.paper_panel_means(v1[v1["in_study"]],
                                                              study.JUDGE_PANEL))
    return data, space, reference, order


def panel_on(data: whatif.PaperData | whatif.LiveData, space: Space, reference: Choice,
             order: list[str], later: list[str]) -> whatif_widget.Panel:
    return whatif_widget.Panel(whatif.Scorer(space, data, reference, order), later)


def shown_equals_whatif(panel: whatif_widget.Panel, every: page.Computed,
                        alone: whatif.Outcome) -> None:
    """The panel's view is the vocabulary's layout of Table 1 under its controls' choice as
    ``whatif.compute`` scored it, and its rows are that choice's outcome scored alone."""
    choice = panel.choice()
    assert panel.view.value == page.outcome_table(every, choice).html()
    frame = panel.table().frame
    assert frame["score"].tolist() == alone.table["score"].tolist()
    assert frame["whatif_rank"].tolist() == alone.table["rank"].tolist()
    assert frame["model"].str.replace(f" {page.LATER_MARK}", "", regex=False).tolist() == [
        study.display_name(c) for c in alone.ranking]
    changes = every.whatif.move(choice).changes
    assert frame["whatif_change"].tolist() == [page.change_text(changes.get(c))
                                               for c in alone.ranking]


def test_the_paper_panel_shows_whatifs_table_for_each_choice(paper_parts) -> None:
    data, space, reference, order = paper_parts
    later = list(study.LATER_CANDIDATES)
    every = page.Computed(paper_whatif(), data, later)  # whatif.compute(space, data, ...)
    panel = panel_on(data, space, reference, order, later)
    assert [d.name for d in panel.dims] == ["judges", "combine", "subset", "later"]
    assert [c.description for c in panel.controls.values()] == [
        vocabulary.label(page.CONTROL_COLUMNS[d.name], None) for d in panel.dims]
    assert panel.choice() == reference
    shown_equals_whatif(panel, every, whatif.paper_outcome(data, reference))

    panel.controls["judges"].value = "0"  # GPT-4.1 alone
    assert panel.choice() == Choice((GPT41,), "mean", "v1", False)
    shown_equals_whatif(panel, every, whatif.paper_outcome(data, panel.choice()))
    assert "GPT-4.1 alone" in panel.about.value

    panel.controls["judges"].value = "0.1.2"
    panel.controls["combine"].value = "median"
    median = whatif.paper_outcome(data, panel.choice())
    assert median.ranking != order  # the median reorders the study's panel
    shown_equals_whatif(panel, every, median)

    panel.controls["subset"].value = "hard"
    panel.controls["later"].value = "1"
    assert panel.choice() == Choice(study.JUDGE_PANEL, "median", "hard", True)
    hard = whatif.paper_outcome(data, panel.choice())
    assert set(study.LATER_CANDIDATES) <= set(hard.ranking)
    shown_equals_whatif(panel, every, hard)
    # only the states the controls passed through were scored (the median on Hard without
    # the later models on the way)
    assert len(panel.scorer.whatif.outcomes) == 5 < len(space.distinct())


def test_the_live_panel_switches_refusals_clip_and_length() -> None:
    data, computed = live_whatif()  # whatif.compute of every choice of this space
    space = Space("live", JUDGES, ("v1",), True)
    reference = whatif.reference_choice(space, "v1", False)
    assert computed.space == space and computed.reference == reference
    later = [study.LATER_CANDIDATES[0]]
    every = page.Computed(computed, data, later)
    panel = panel_on(data, space, reference, ["m1", "m2"], later)
    assert [d.name for d in panel.dims] == ["judges", "combine", "later", "refusals", "clip",
                                            "length"]
    for name, value in (("refusals", "1"), ("clip", "0"), ("length", "1"), ("judges", "0.2"),
                        ("later", "0")):
        panel.controls[name].value = value
        alone = whatif.live_outcome(whatif._LiveCache(data), panel.choice().canonical())
        shown_equals_whatif(panel, every, alone)
        frame = panel.table().frame
        assert np.allclose(frame["ci_low"], alone.table["ci_low"], equal_nan=True)
    assert panel.choice() == Choice(("j1", "j3"), "mean", "v1", False, True, False, True)


def test_without_a_widget_frontend_it_shows_the_runs_own_table(paper_parts,
                                                                tmp_path: Path) -> None:
    data, space, reference, order = paper_parts
    later = list(study.LATER_CANDIDATES)
    panel = panel_on(data, space, reference, order, later)
    panel.controls["judges"].value = "1"  # the controls do not change the static version
    bundle = panel._repr_mimebundle_()
    assert book_chapters.WIDGET_VIEW in bundle
    every = page.Computed(paper_whatif(), data, later)  # whatif.compute(space, data, ...)
    static = bundle["text/html"]
    assert page.outcome_table(every, reference).html() in static
    assert escape.html_text(whatif_widget.STATIC_NOTE) in static

    import nbformat  # here, not at collection: it brings jsonschema (~1 s of imports)

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show(scores.whatif(sources.whatif, metrics))")
    cell.outputs = [nbformat.v4.new_output("display_data", data=bundle)]
    nb.cells = [cell]
    nbformat.write(nb, str(tmp_path / "in.ipynb"))
    book_chapters.prepare_notebook(tmp_path / "in.ipynb", tmp_path / "out.ipynb")
    out = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4).cells[0].outputs[0]
    assert out["data"] == {"text/html": static}


def test_chapter_08_reads_what_the_live_whatif_needs_as_declared_inputs() -> None:
    spec = graph.spec(graph.SCORES)
    assert spec.declares(graph.GENERATION, graph.RESPONSES)
    assert "length_penalty" in graph.parameter_names(graph.SCORES)
    import nbformat  # here, not at collection: it brings jsonschema (~1 s of imports)

    nb = nbformat.read(str(Path(__file__).parents[1] / "notebooks" / "08_scores.ipynb"),
                       as_version=4)
    assert any(c.cell_type == "code" and "scores.whatif(sources.whatif, metrics," in c.source
               for c in nb.cells)
