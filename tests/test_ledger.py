"""The reproduction ledger: the paper's printed numbers against a run's metrics."""

from __future__ import annotations

import json
import re
import shutil
import typing
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.reporting import book, ledger
from hbpsych_utils.reporting.ledger import DIFFERS, EQUAL, NOT_COMPUTABLE, Missing, PaperNumber

ROOT = Path(__file__).resolve().parent.parent
PAPER = next((p for p in (ROOT.parent / "shared" / "docs" / "paper.md",
                          ROOT.parents[1] / "shared" / "docs" / "paper.md") if p.is_file()), None)
"""The study paper's reference copy, beside the repository (or beside the folder of its
worktrees); absent from a clone elsewhere, where the tests that read it are skipped."""


def _number(paper: str, **kw: object) -> PaperNumber:
    return PaperNumber(id="x", section="1", quantity="q", paper=paper,
                       **({"value": ["08_scores", "grand"]} | kw))


# --- printed values and the comparison ----------------------------------------------------------


@pytest.mark.parametrize(("paper", "value", "status", "run"), [
    ("0.157", 0.15743490005099375, EQUAL, "0.157"),
    ("0.16", 0.15743490005099375, EQUAL, "0.16"),
    ("0.158", 0.15743490005099375, DIFFERS, "0.157"),
    ("7.6%", 378 / 5000, EQUAL, "7.6%"),
    ("6.0%", 9 / 150, EQUAL, "6.0%"),
    ("5.3%", 8 / 150, EQUAL, "5.3%"),
    ("6.0%", 8 / 150, DIFFERS, "5.3%"),
    ("+0.077", 0.07693935, EQUAL, "+0.077"),
    ("-0.045", -0.0451572, EQUAL, "-0.045"),
    ("−0.003", -0.00256509994900625, EQUAL, "-0.003"),
    ("+0.004", -0.004, DIFFERS, "-0.004"),
    ("378", 378, EQUAL, "378"),
    ("378", 377, DIFFERS, "377"),
    ("kimi-k2.6", "kimi-k2.6", EQUAL, "kimi-k2.6"),
    ("kimi-k2.6", "gpt-5.5", DIFFERS, "gpt-5.5"),
    ("4,359", 4359, EQUAL, "4,359"),
    ("4,359", 4358, DIFFERS, "4,358"),
    ("1,000", 1000, EQUAL, "1,000"),
    ("claude-haiku-4.5", "claude-haiku-4-5-20251001", EQUAL, "claude-haiku-4.5"),
    ("claude-haiku-4.5", "gemini-2.5-flash", DIFFERS, "gemini-2.5-flash"),
])
def test_a_run_value_is_compared_at_the_printed_precision(paper, value, status, run):
    row = ledger.compare(_number(paper), value)
    assert (row.status, row.run) == (status, run)


def test_a_difference_is_said_in_the_papers_unit():
    assert ledger.compare(_number("6.0%"), 8 / 150).note == "by -0.67 percentage points"
    assert ledger.compare(_number("1000"), 996).note == "by -4"
    assert ledger.compare(_number("0.158"), 0.157).note == "by -0.0010"
    assert ledger.compare(_number("4,359"), 2359).note == "by -2,000"


def test_a_missing_value_is_not_computable_with_its_reason():
    row = ledger.compare(_number("0.631"), Missing("needs per-conversation grades"))
    assert (row.status, row.run, row.note) == (NOT_COMPUTABLE, "",
                                               "needs per-conversation grades")
    nan = ledger.compare(_number("0.631"), float("nan"))
    assert nan.status == NOT_COMPUTABLE


# --- the data file ------------------------------------------------------------------------------


def test_every_printed_number_names_a_real_field_or_measure():
    numbers = ledger.load_numbers()
    assert len({n.id for n in numbers}) == len(numbers) > 50
    for n in numbers:
        for path in (n.value, n.per):
            if path is None:
                continue
            model = metrics_models.MODELS[path[0]]
            fields = set().union(*(m.model_fields for m in typing.get_args(model) or (model,)))
            assert path[1] in fields, (n.id, path)
        # with nothing computed, every number is not computable, and says why
        row = ledger.compare(n, ledger.run_value(n, {}))
        assert row.status == NOT_COMPUTABLE and "did not run" in row.note, n.id


def test_a_malformed_entry_is_refused_naming_it(tmp_path: Path):
    path = tmp_path / "numbers.yaml"
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1', measure: nonesuch}\n")
    with pytest.raises(ledger.LedgerError, match=r"entry 1 \(a\).*nonesuch"):
        ledger.load_numbers(path)
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1'}\n")
    with pytest.raises(ledger.LedgerError, match="exactly one of"):
        ledger.load_numbers(path)
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1', value: [99_x, n]}\n"
                    "- {id: a, section: '1', quantity: q, paper: '1', value: [01_corpus, n]}\n")
    with pytest.raises(ledger.LedgerError, match="stage of the graph"):
        ledger.load_numbers(path)


def test_summary_counts_each_status():
    rows = [ledger.compare(_number("1"), 1), ledger.compare(_number("1"), 2),
            ledger.compare(_number("1"), Missing("why"))]
    s = ledger.summary(rows)
    assert (s.total, s.equal, s.differs, s.not_computable) == (3, 1, 1, 1)
    assert s.sentence().startswith("1 of 3 numbers")


# --- the paper as printed -------------------------------------------------------------------------


def _token(text: str) -> re.Pattern[str]:
    """``text`` as a whole printed token: not part of a longer number, name or word."""
    return re.compile(r"(?<![\w\-.,])" + re.escape(text) + r"(?![\w\-]|[.,]\d)")


@pytest.mark.skipif(PAPER is None, reason="the paper's reference copy is not beside the repository")
def test_the_paper_column_is_the_paper_as_printed():
    """Every printed value is a token of the paper's text; numbers of four digits carry its
    thousands separator, and models are named as the paper names them, not by API id."""
    assert PAPER is not None
    paper = PAPER.read_text(encoding="utf-8")
    numbers = {n.id: n for n in ledger.load_numbers()}
    for n in numbers.values():
        assert _token(n.paper).search(paper), (n.id, n.paper)
    printed = {"screen_not_relevant": ("4,359", "4359"), "r2_pool": ("4,209", "4209"),
               "harness_n": ("1,000", "1000"),
               "rank18": ("claude-haiku-4.5", "claude-haiku-4-5-20251001")}
    for key, (shown, machine) in printed.items():
        assert numbers[key].paper == shown and shown in paper, key
        assert not _token(machine).search(paper), machine
    # "mistral-small-latest" is an API id; the paper, and the ledger's words, say mistral-small
    assert "mistral-small-latest" not in paper
    assert all("mistral-small-latest" not in n.quantity + n.paper for n in numbers.values())
    assert _token("mistral-small").search(paper)


# --- on the default run -------------------------------------------------------------------------

INTERVALS = ("separations_", "_low", "_high", "refusals_excluded_")


def test_the_default_run_reproduces_every_number_the_release_determines(default_run: Path):
    rows = ledger.ledger(book.read_metrics(default_run))
    by_status = {s: [r.number.id for r in rows if r.status == s]
                 for s in (EQUAL, DIFFERS, NOT_COMPUTABLE)}
    assert by_status[DIFFERS] == []
    # what the released matrices cannot give: intervals, paired tests, refusal sensitivity
    assert by_status[NOT_COMPUTABLE]
    for row in rows:
        if row.status == NOT_COMPUTABLE:
            assert any(k in row.number.id for k in INTERVALS), row.number.id
            assert "per-conversation grades" in row.note
    assert len(by_status[EQUAL]) == len(rows) - len(by_status[NOT_COMPUTABLE])


def _flip_an_included_control(votes: pd.DataFrame) -> pd.DataFrame:
    """One reviewer's Y on a control the majority included (2 of 3) turned into N, and the
    count, inclusion and tier recomputed as the votes table defines them."""
    reviewers = [c for c in votes.columns if c.startswith("R") and c[1:].isdigit()]
    row = votes[(votes.kind == "control") & (votes.n_yes == 2)].index[0]
    who = next(r for r in reviewers if votes.at[row, r] == "Y")
    out = votes.copy()
    out.at[row, who] = "N"
    out["n_yes"] = (out[reviewers] == "Y").sum(axis=1)
    out["included"] = out["n_yes"] >= 2
    out["tier"] = out["n_yes"].astype(str) + f"/{len(reviewers)}"
    return out


def test_one_perturbed_vote_shows_as_differing_numbers(default_run: Path, tmp_path: Path):
    """Change one clinician's vote in a copy of the run, recompute round 1's tally (by the
    chapter's own calls) and the subset (by running chapter 05) from it: the ledger reports
    the numbers that moved as differing, and nothing the votes do not feed moves."""
    from hbpsych_utils import study
    from hbpsych_utils.reporting.rounds import Votes
    from hbpsych_utils.stages import s03_review_round1 as s03
    from hbpsych_utils.stages.base import run_chapter

    run = tmp_path / "default"
    shutil.copytree(default_run, run, ignore=shutil.ignore_patterns("book", ".book-build"))
    before = {r.number.id: r for r in ledger.ledger(book.read_metrics(run))}

    votes_path = run / graph.REVIEW_ROUND1 / graph.VOTES
    votes = pd.read_csv(votes_path, dtype=str, keep_default_na=False)
    votes["n_yes"] = votes["n_yes"].astype(int)
    changed = _flip_an_included_control(votes)
    changed.to_csv(votes_path, index=False)
    shown = Votes([], changed)
    stage_run = SimpleNamespace(mode=graph.REPLAY,
                                params=SimpleNamespace(threshold=study.CONTROL_THRESHOLD))
    review = SimpleNamespace(table=changed[["review_id", "prompt_id", "kind"]])
    m03 = s03.metrics(stage_run, review, s03.tally(stage_run, shown), s03.agreement(shown))
    (run / graph.REVIEW_ROUND1 / graph.METRICS).write_text(json.dumps(metrics_models.dump(m03)))
    run_chapter(graph.SUBSET, {"profile": "default", "outputs_root": str(run.parent)})

    after = {r.number.id: r for r in ledger.ledger(book.read_metrics(run))}
    moved = {k for k in after if (after[k].status, after[k].run)
             != (before[k].status, before[k].run)}
    for key in ("r1_controls_included", "r1_control_rate", "subset_v1"):
        assert before[key].status == EQUAL and after[key].status == DIFFERS, key
    assert (after["r1_controls_included"].run, after["subset_v1"].run) == ("8", "609")
    assert after["r1_control_rate"].run == "5.3%"
    # the scores come from the released matrices: nothing of 08-10 moves
    assert not {k for k in moved if k.startswith(("panel_", "tau_", "severity_", "top",
                                                  "selfpref_", "refusals_"))}
