"""The reproduction ledger: the paper's printed numbers against a run's metrics."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from hbpsych_utils.pipeline import graph, profiles
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting import (
    book,
    ledger,
    ledger_conditions,
    ledger_numbers,
    ledger_values,
)
from hbpsych_utils.reporting.ledger import DIFFERS, EQUAL, NOT_COMPUTABLE
from hbpsych_utils.reporting.ledger_conditions import (
    NOT_CURRENT,
    OWN_REPLIES,
    TWEAKED,
    RunConditions,
)
from hbpsych_utils.reporting.ledger_numbers import PaperNumber
from hbpsych_utils.reporting.ledger_values import Missing

ROOT = Path(__file__).resolve().parent.parent
PAPER = next((p for p in (ROOT.parent / "shared" / "docs" / "paper.md",
                          ROOT.parents[1] / "shared" / "docs" / "paper.md") if p.is_file()), None)
"""The study paper's reference copy, beside the repository (or beside the folder of its
worktrees); absent from a clone elsewhere, where the tests that read it are skipped."""
EVALUATION = (graph.SCORES, graph.JUDGES, graph.REFUSALS, graph.HARNESS)
"""The stages whose numbers are the evaluation's (a live run grades its own replies)."""


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


def test_a_pair_whose_interval_is_undefined_separates_nothing_and_has_no_interval() -> None:
    """A paired difference over one conversation has no interval (``None`` ends): it is not
    counted as separated, and its interval's ends are not computable, with the reason."""
    pair = {"a": "m1", "b": "m2", "difference": 0.1, "p_value": 1.0, "n": 1, "p_holm": 1.0}
    scores = metrics_models.SCORES.validate({
        "mode": "live", "include_later": False, "subset": "v1",
        "panel_mean": {"m1": 0.5, "m2": 0.4}, "ranking": ["m1", "m2"],
        "per_judge": {"j": {"m1": 0.5, "m2": 0.4}}, "point_estimates_only": False,
        "by_subset": {}, "paired_differences": [
            pair | {"ci_low": None, "ci_high": None},
            pair | {"a": "m2", "b": "m3", "ci_low": 0.01, "ci_high": 0.2}]})
    metrics = {graph.SCORES: scores}
    assert ledger_values.MEASURES["separated_pairs"](metrics, "uncorrected") == 1
    low = ledger_values.MEASURES["difference_interval"](metrics, "m1", "m2", "low")
    assert low == Missing("the interval is undefined in this run")
    high = ledger_values.MEASURES["difference_interval"](metrics, "m3", "m2", "high")
    assert high == pytest.approx(-0.01)  # m3 − m2: the pair's interval, negated


# --- the data file ------------------------------------------------------------------------------


def test_every_printed_number_names_a_real_field_or_measure():
    numbers = ledger.load_numbers()
    assert len({n.id for n in numbers}) == len(numbers) > 50
    for n in numbers:
        for path in (n.value, n.per):
            if path is None:
                continue
            models = metrics_models.MODELS[path[0]].models
            fields = set().union(*(m.model_fields for m in models))
            assert path[1] in fields, (n.id, path)
        # with nothing computed, every number is not computable, and says why
        row = ledger.compare(n, ledger.run_value(n, {}))
        assert row.status == NOT_COMPUTABLE and "did not run" in row.note, n.id


def test_a_malformed_entry_is_refused_naming_it(tmp_path: Path):
    path = tmp_path / "numbers.yaml"
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1', measure: nonesuch}\n")
    with pytest.raises(ledger_numbers.LedgerError, match=r"entry 1 \(a\).*nonesuch"):
        ledger.load_numbers(path)
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1'}\n")
    with pytest.raises(ledger_numbers.LedgerError, match="exactly one of"):
        ledger.load_numbers(path)
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1', value: [99_x, n]}\n"
                    "- {id: a, section: '1', quantity: q, paper: '1', value: [01_corpus, n]}\n")
    with pytest.raises(ledger_numbers.LedgerError, match="stage of the graph"):
        ledger.load_numbers(path)
    path.write_text("- {id: a, section: '1', quantity: q, paper: '1', value: [09_judges, n],\n"
                    "   unaffected_by: [judges.subsets]}\n")
    with pytest.raises(ledger_numbers.LedgerError, match=r"\(a\).*no stage reads 'judges.subsets'"):
        ledger.load_numbers(path)


def test_summary_counts_each_status():
    rows = [ledger.compare(_number("1"), 1), ledger.compare(_number("1"), 2),
            ledger.compare(_number("1"), Missing("why"))]
    s = ledger.summary(rows)
    assert (s.total, s.equal, s.differs, s.not_computable) == (3, 1, 1, 1)
    assert (s.tweaked, s.not_current, s.own_replies) == (0, 0, 0)
    assert s.sentence().startswith("1 of 3 numbers")
    tweaked = rows[1].model_copy(update={"status": TWEAKED, "note": "judges.subset = hard",
                                         "settings": ("judges.subset = hard",)})
    stale = rows[0].model_copy(update={"status": NOT_CURRENT, "note": "run by hand"})
    own = rows[2].model_copy(update={"status": OWN_REPLIES, "note": "live"})
    s = ledger.summary([tweaked, tweaked, stale, own])
    assert (s.total, s.equal, s.differs, s.not_computable) == (4, 0, 0, 0)
    assert (s.tweaked, s.not_current, s.own_replies) == (2, 1, 1)
    assert s.settings == ["judges.subset = hard"]
    words = s.sentence()
    for said in ("0 of 4 numbers", "2 come from settings tweaked", "(judges.subset = hard)",
                 "1 are not current", "1 come from replies this run generated"):
        assert said in words, said


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


def test_the_section_and_paper_cells_never_wrap():
    """The ledger page keeps "App. I" and a printed value on one line (no break mid-token)."""
    number = PaperNumber(id="x", section="3.4 / App. I", quantity="q", paper="4,359",
                         value=["02_screening", "n_not_relevant"])
    page = book.ledger_markdown([ledger.compare(number, 4359)], {}, [])
    row = next(line for line in page.splitlines() if "App. I" in line)
    nowrap = '<span style="white-space: nowrap">'
    assert f"{nowrap}3.4 / App. I</span>" in row and f"{nowrap}4,359</span>" in row


def test_the_page_names_the_runs_models_as_the_book_does_and_compares_the_papers_names():
    """The paper's column prints a model as the paper does, verbatim as code; this run's value,
    the quantity and a reason name models by display name, as the rest of the book does. What
    is compared is unchanged: the run's model under the paper's name for it."""
    numbers = {n.id: n for n in ledger.load_numbers()}
    rows = [ledger.compare(numbers["rank18"], "claude-haiku-4-5-20251001"),
            ledger.compare(numbers["top1"], "gpt-5.5"),
            ledger.compare(numbers["panel_kimi_k2_6"], 0.627),
            ledger.compare(numbers["top_under_gpt41"],
                           Missing("this run has no judge gpt-4.1-2025-04-14"))]
    assert [(r.status, r.run) for r in rows] == [
        (EQUAL, "claude-haiku-4.5"), (DIFFERS, "gpt-5.5"), (EQUAL, "0.627"), (NOT_COMPUTABLE, "")]
    page = book.ledger_markdown(rows, {}, ["08_scores"])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
             if line.startswith("| ") and "3.3" in line][:4]
    nowrap = '<span style="white-space: nowrap">'
    assert cells[0][2:4] == [f"{nowrap}`claude-haiku-4.5`</span>",
                             f"{nowrap}[Claude Haiku 4.5](08_scores.ipynb)</span>"]
    assert cells[1][2:5] == [f"{nowrap}`kimi-k2.6`</span>",
                             f"{nowrap}[GPT-5.5](08_scores.ipynb)</span>", "**differs**"]
    assert cells[2][1:4] == ["panel mean: Kimi K2.6", f"{nowrap}0.627</span>",
                             f"{nowrap}[0.627](08_scores.ipynb)</span>"]
    assert cells[3][1] == "highest mean under the GPT-4.1 judge"
    assert cells[3][4] == "not computable: this run has no judge GPT-4.1"
    outside_code = re.sub(r"`[^`]*`", "", page)
    for model in ("kimi-k2.6", "gpt-5.5", "claude-haiku-4-5-20251001", "gpt-4.1-2025-04-14"):
        assert not re.search(rf"(?<![\w.-]){re.escape(model)}(?![\w-])", outside_code), model


# --- conditions -----------------------------------------------------------------------------------

NUMBERS = ledger.load_numbers()


def _of(stage: str) -> list[PaperNumber]:
    return [n for n in NUMBERS if ledger_numbers.stage_of(n) == stage]


def _rows(profile: profiles.Profile | None, states: dict[str, StageState] | None = None
          ) -> dict[str, ledger.Row]:
    """The ledger of a run with no metrics (every value missing) under ``profile``."""
    run = RunConditions(profile, states or {})
    return {r.number.id: r for r in ledger.ledger({}, NUMBERS, run)}


def test_conditions_are_derived_from_the_graph_per_number():
    """A key is a condition of a number only if a stage its value comes from (or one those
    read from) reads it: judges.subset is one of 09's numbers, not of 03's; which candidates are
    scored is one of the ranking, not of one candidate's mean."""
    for n in NUMBERS:
        c = ledger_conditions.conditions(n)
        assert ledger_numbers.stage_of(n) in c.stages
        read = {k for s in (*c.stages, *c.upstream)
                for k in graph.keys_read(ledger_conditions.PAPER_RUN, s)}
        assert set(c.keys) <= read, n.id
        assert not set(c.keys) & ledger_conditions.NOT_CONDITIONS
    assert all(graph.readers(key) for key in ledger_conditions.NOT_CONDITIONS)  # no misspelt key
    for n in _of(graph.JUDGES):
        assert ledger_conditions.conditions(n).keys == {"judges.subset": "v1"}, n.id
        assert ledger_conditions.conditions(n).modes == {graph.JUDGES: graph.PAPER}
    for n in _of(graph.REVIEW_ROUND1) + _of(graph.SUBSET) + _of(graph.SCORES):
        assert "judges.subset" not in ledger_conditions.conditions(n).keys, n.id
    subset = ledger_conditions.conditions(next(n for n in NUMBERS if n.id == "subset_v1"))
    assert {graph.REVIEW_ROUND1, graph.RECALL} <= set(subset.upstream)
    assert subset.keys["review_round1.threshold"] == 0.05  # the stopping rule decides round 2
    by_id = {n.id: ledger_conditions.conditions(n) for n in NUMBERS}
    assert "scores.include_later" in by_id["top1"].keys
    assert "scores.include_later" not in by_id["panel_kimi_k2_6"].keys


def test_the_default_profile_sets_every_condition_as_the_paper_did():
    """The paper's conditions are the profile model's defaults; the default profile, which
    reproduces the paper, must not change any of them."""
    default = profiles.load_profile("default")
    rows = _rows(default)
    assert all(r.status == NOT_COMPUTABLE for r in rows.values())  # no metrics, no departure
    for n in NUMBERS:
        for key, value in ledger_conditions.conditions(n).keys.items():
            assert graph.value_at(default, key) == value, (n.id, key)


def test_a_tweak_marks_exactly_the_numbers_it_can_change():
    rows = _rows(profiles.load_profile("default", {"judges.subset": "hard"}))
    for n in NUMBERS:
        r = rows[n.id]
        if ledger_numbers.stage_of(n) == graph.JUDGES:
            assert r.label() == "tweaked: judges.subset = hard", n.id
            assert r.compared == NOT_COMPUTABLE  # what the value alone says is kept
        else:
            assert r.status == NOT_COMPUTABLE, n.id
    rows = _rows(profiles.load_profile("default", {"scores.include_later": True}))
    assert rows["top1"].label() == "tweaked: scores.include_later = true"
    assert rows["panel_kimi_k2_6"].status == NOT_COMPUTABLE
    # 08's numbers are its first subset's: adding a subset after it changes none of them
    rows = _rows(profiles.load_profile("default", {"scores.subsets": ["v1"]}))
    assert not any(r.status == TWEAKED for r in rows.values())
    rows = _rows(profiles.load_profile("default", {"scores.subsets": ["hard", "v1"]}))
    assert rows["panel_kimi_k2_6"].label() == "tweaked: scores.subsets = [hard, v1]"
    # an upstream stopping rule reaches the subset and what counts over it, not the screen
    rows = _rows(profiles.load_profile("default", {"review_round1.threshold": 0.1}))
    for key in ("r1_controls_included", "r2_pool", "subset_v1", "refusals_opus_share"):
        assert rows[key].label() == "tweaked: review_round1.threshold = 0.1", key
    assert rows["screen_relevant"].status == rows["panel_kimi_k2_6"].status == NOT_COMPUTABLE
    # a construction stage run live is a tweak of its mode, named by the key that set it
    rows = _rows(profiles.load_profile("default", {"screening.mode": "live",
                                                 "screening.model": "claude-opus-4-8"}))
    assert rows["screen_relevant"].settings == ("screening.mode = live",
                                                "screening.model = claude-opus-4-8")


def test_a_live_evaluation_reads_own_replies():
    rows = _rows(profiles.load_profile("smoke"))
    for n in NUMBERS:
        r = rows[n.id]
        if set(ledger_numbers.stages_of(n)) & set(EVALUATION):
            assert r.status == OWN_REPLIES and "ran live" in r.note, n.id
        else:
            # the smoke profile's corpus cap and seed change no number of 01-05 (replayed)
            assert r.status == NOT_COMPUTABLE, (n.id, r.label())
    harness = _rows(profiles.load_profile("default", {"harness_validation.mode": "live"}))
    assert harness["harness_score"].status == OWN_REPLIES
    assert harness["panel_kimi_k2_6"].status == NOT_COMPUTABLE


def _state(stage: str, state: str, reason: str) -> StageState:
    return StageState(stage=stage, state=state, reason=reason)


def test_a_chapter_not_current_marks_its_numbers_first():
    hand = "its outputs were written outside the runner (papermill or JupyterLab)"
    states = {graph.SCORES: _state(graph.SCORES, "not_current", hand),
              graph.SUBSET: _state(graph.SUBSET, "failed", "its last run was failed"),
              graph.JUDGES: _state(graph.JUDGES, "current", "")}
    tweaked = profiles.load_profile("default", {"judges.subset": "hard",
                                              "scores.include_later": True})
    rows = _rows(tweaked, states)
    for n in NUMBERS:
        r = rows[n.id]
        stages = set(ledger_numbers.stages_of(n))
        if stages & {graph.SCORES, graph.SUBSET}:
            assert r.status == NOT_CURRENT, n.id
            assert r.note.startswith("chapter 08") or r.note.startswith("chapter 05"), n.id
        elif graph.JUDGES in stages:
            assert r.status == TWEAKED, n.id
    assert rows["top1"].note == f"chapter 08 (Scores and the leaderboard): {hand}"
    # a run whose profile is unknown is still judged on its chapters' states
    assert _rows(None, states)["top1"].status == NOT_CURRENT
    assert _rows(None, states)["tau_haiku_gemini"].status == NOT_COMPUTABLE
    # not current comes before own replies
    smoke = _rows(profiles.load_profile("smoke"), states)
    assert (smoke["top1"].status, smoke["tau_haiku_gemini"].status) == (NOT_CURRENT,
                                                                        OWN_REPLIES)


# --- on the runs ---------------------------------------------------------------------------------

INTERVALS = ("separations_", "_low", "_high", "refusals_excluded_")


def run_rows(run: Path) -> list[ledger.Row]:
    """A run folder's ledger as its book shows it: against its manifest's profile and its
    stages' states."""
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    profile = book.run_profile(run, manifest)
    states = book.stage_states(run, profile, manifest)
    return ledger.ledger(book.read_metrics(run), run=RunConditions(profile, states))


def test_the_default_run_reproduces_every_number_the_release_determines(default_run: Path):
    rows = run_rows(default_run)
    by_status = {s: [r.number.id for r in rows if r.status == s] for s in ledger.STATUSES}
    assert (len(by_status[EQUAL]), len(by_status[NOT_COMPUTABLE])) == (96, 16)
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
    review = SimpleNamespace(mode=graph.REPLAY, table=changed[["review_id", "prompt_id", "kind"]])
    threshold = study.CONTROL_THRESHOLD
    m03 = s03.metrics(review, s03.tally(shown, threshold=threshold), s03.agreement(shown),
                      threshold=threshold)
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


def test_a_tweaked_run_names_its_tweak_and_differs_nowhere(default_run: Path, hard_run: Path):
    """``default --set judges.subset=hard``, run by the runner on a copy of the default run
    (it re-runs 09 and 12; conftest's shared ``hard_run``, which asserted the run's result.ok):
    every number of 09 reads "tweaked: judges.subset = hard", no number differs, and every
    other number reads as it did."""
    manifest = json.loads((hard_run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["overrides"] == {"judges.subset": "hard"}
    assert [n["notebook"] for n in manifest["notebooks"]] == [graph.JUDGES, graph.FIGURES]
    assert {n["status"] for n in manifest["notebooks"]} == {"ok"}
    before = {r.number.id: r for r in run_rows(default_run)}
    rows = run_rows(hard_run)
    assert not [r.number.id for r in rows if r.status == DIFFERS]
    affected = [r for r in rows if ledger_numbers.stage_of(r.number) == graph.JUDGES]
    assert len(affected) == 19
    for r in rows:
        if r in affected:
            assert r.label() == "tweaked: judges.subset = hard", r.number.id
        else:
            assert (r.status, r.run) == (before[r.number.id].status, before[r.number.id].run)
    # the tweak moved values the paper's conditions would call different: they are kept
    assert any(r.compared == DIFFERS for r in affected)
    summary = ledger.summary(rows)
    assert (summary.equal, summary.tweaked, summary.differs) == (83, 19, 0)
    assert "(judges.subset = hard)" in (hard_run / "book" / "index.html").read_text()


def test_a_hand_run_of_08_makes_its_numbers_not_current(default_run: Path, tmp_path: Path):
    """Chapter 08 run outside the runner (as papermill or JupyterLab would, with its build
    record saying so): each of its numbers reads "not current", whatever its value."""
    from hbpsych_utils.stages.base import run_chapter

    run = tmp_path / "default"
    shutil.copytree(default_run, run, ignore=shutil.ignore_patterns("book", ".book-build"))
    with contextlib.redirect_stdout(io.StringIO()):
        run_chapter(graph.SCORES, {"profile": "default", "outputs_root": str(tmp_path)})
    before = {r.number.id: r for r in run_rows(default_run)}
    rows = run_rows(run)
    of_08 = [r for r in rows if graph.SCORES in ledger_numbers.stages_of(r.number)]
    assert len(of_08) == 41
    for r in rows:
        if r in of_08:
            assert r.status == NOT_CURRENT, r.number.id
            assert "written outside the runner" in r.note
            assert r.compared == before[r.number.id].status  # the same value, not this run's
        else:
            assert r.status == before[r.number.id].status, r.number.id


def test_the_smoke_ledger_says_it_graded_its_own_replies(smoke_run: Path):
    rows = run_rows(smoke_run)
    evaluation = [r for r in rows if set(ledger_numbers.stages_of(r.number)) & set(EVALUATION)]
    assert evaluation and all(r.status == OWN_REPLIES for r in evaluation)
    assert not [r for r in rows if r.status == DIFFERS]
    # the simulator's τ is still there for a reader, as what the value alone says
    tau = next(r for r in rows if r.number.id == "tau_haiku_gpt41")
    assert tau.compared == DIFFERS and tau.run
    # the construction stages replay the release: the smoke run reproduces them
    assert all(r.status == EQUAL for r in rows if r not in evaluation)
