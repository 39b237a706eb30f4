"""The grade explorer's data: one run's conversations, responses, verdicts and scores, indexed
for browsing, read from the run's folder, and the questions the explorer asks of them.

A run's files are read through the readers of the stages that wrote them
(``generation.read_responses``, ``panel.read_verdicts``, ``score_sources.read_scores``,
``subset.read_categories``), which validate them; the explorer only checks what those readers
cannot: that the tables belong to the run's corpus (ids, criterion numbers) and hold one row
per response and per verdict.

A *disagreement* is a (candidate, criterion) where, among the judges that returned a verdict,
at least one said met and another said not met (a missing verdict is shown, but is neither
agreement nor disagreement); a *refusal* is a response whose ``refusal`` flag is set (the
provider's own refusal stop reason, as ``generation`` records it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hbpsych_utils.construction import corpus, subset
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core import paths
from hbpsych_utils.evaluation import generation, grading, panel, score_sources
from hbpsych_utils.reporting.vocabulary import term_label

NO_CATEGORY = "(no category)"
"""Category filter value matching conversations that the run's category table does not list."""


# (stage folder, file name, notebook that writes it)
CORPUS_FILE = ("01_corpus", corpus.SOURCE_RECORD, "01_corpus.ipynb")
RESPONSES_FILE = ("06_generation", "responses.jsonl", "06_generation.ipynb")
VERDICTS_FILE = ("07_grading", "verdicts.csv", "07_grading.ipynb")
SCORES_FILE = ("07_grading", "scores.csv", "07_grading.ipynb")
CATEGORIES_FILE = ("05_subset", "categories_v1.csv", "05_subset.ipynb")
HARD_SUBSET_GLOB = ("05_subset", "*hard*.json", "05_subset.ipynb")



class ExplorerError(ValueError):
    """A run folder or table the explorer cannot show; the message names file, record, field."""


# --------------------------------------------------------------------------------------------
# Data layer


@dataclass(frozen=True)
class _Table:
    """Where a table came from, so that errors can point at the offending line."""

    label: str
    first_line: int | None = None
    """Line number of the first record in the file (2 for CSV with header, 1 for JSONL);
    ``None`` for an in-memory table (errors then cite the row position)."""

    def where(self, position: int) -> str:
        if self.first_line is None:
            return f"{self.label}: row {position}"
        return f"{self.label}:{self.first_line + position}"


def _none_if_nan(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


@dataclass
class ExplorerData:
    """One run's conversations, responses, verdicts and scores, indexed for browsing.

    Build it with ``load_run(run_dir)`` or directly from in-memory tables: ``conversations``
    (``Conversation`` objects or a mapping by id), ``responses`` (``generation.RESPONSE_COLUMNS``),
    ``verdicts`` (``grading.VERDICT_COLUMNS``; ``recovered``/``excluded`` optional), and
    optionally ``scores`` (as ``grading.scores_from_verdicts`` returns; computed from the
    verdicts when absent), ``categories`` (prompt_id -> category) and ``hard_ids``. A missing
    optional input turns its feature off (``None``); it is not an error.
    """

    conversations: Mapping[str, Conversation] | Iterable[Conversation]
    responses: pd.DataFrame
    verdicts: pd.DataFrame
    scores: pd.DataFrame | None = None
    categories: Mapping[str, str] | None = None
    hard_ids: Iterable[str] | None = None
    source: str | None = None
    """The run folder the data came from (for display), if any."""
    tables: Mapping[str, _Table] = field(default_factory=dict, repr=False)
    """Where each table came from (``load_run`` fills it, for error messages)."""

    # derived in __post_init__
    by_id: dict[str, Conversation] = field(init=False, repr=False)
    """The conversations by prompt id."""
    ids: tuple[str, ...] = field(init=False)
    """Conversations with at least one response or verdict, in corpus order."""
    candidates: tuple[str, ...] = field(init=False)
    judges: tuple[str, ...] = field(init=False)
    scores_computed: bool = field(init=False, default=False)
    """True when no score table was given: scores are then computed here from the verdicts,
    one conversation at a time as it is viewed (only groups covering every criterion)."""

    def __post_init__(self) -> None:
        convs = self.conversations
        if isinstance(convs, Mapping):
            by_id = dict(convs)
        else:
            by_id = {}
            for c in convs:
                if c.prompt_id in by_id:
                    raise ExplorerError(f"conversations: duplicate prompt_id {c.prompt_id!r}")
                by_id[c.prompt_id] = c
        self.conversations = self.by_id = by_id
        tables = dict(self.tables)
        for name in ("responses", "verdicts", "scores"):
            tables.setdefault(name, _Table(f"<{name} table>"))
        self.tables = tables
        self.responses = self._check_responses(self.responses.reset_index(drop=True))
        self.verdicts = self._check_verdicts(self.verdicts.reset_index(drop=True))
        if self.categories is not None:
            self.categories = {str(k): str(v) for k, v in self.categories.items()
                               if v is not None and not (isinstance(v, float) and math.isnan(v))}
        if self.hard_ids is not None:
            self.hard_ids = frozenset(self.hard_ids)
        self.scores_computed = self.scores is None
        if self.scores is not None:
            self.scores = self._check_scores(self.scores.reset_index(drop=True))
        present = set(self.responses["prompt_id"]) | set(self.verdicts["prompt_id"])
        self.ids = tuple(pid for pid in by_id if pid in present)
        self.candidates = tuple(sorted(
            set(self.responses["model"]) | set(self.verdicts["candidate"])
        ))
        judges = set(self.verdicts["judge"])
        if self.scores is not None:
            judges |= set(self.scores["judge"])
        self.judges = tuple(sorted(judges))

    # ---- validation ----------------------------------------------------------------------

    def _unknown_id(self, df: pd.DataFrame, table: _Table) -> None:
        known = df["prompt_id"].isin(self.by_id.keys())
        if not known.all():
            pos = int((~known).to_numpy().nonzero()[0][0])
            raise ExplorerError(
                f"{table.where(pos)}: field 'prompt_id': {df['prompt_id'].iloc[pos]!r} is not in "
                "the run's corpus (the tables and the corpus are from different runs?)"
            )

    def _check_responses(self, df: pd.DataFrame) -> pd.DataFrame:
        """The responses must belong to this corpus, one per (model, conversation)."""
        table = self.tables["responses"]
        self._unknown_id(df, table)
        df = df.assign(refusal=df["refusal"].astype(bool))
        dup = df.duplicated(["model", "prompt_id"], keep="first")
        if dup.any():
            pos = int(dup.to_numpy().nonzero()[0][0])
            raise ExplorerError(
                f"{table.where(pos)}: model {df['model'].iloc[pos]!r} has a second response for "
                f"prompt_id {df['prompt_id'].iloc[pos]!r}"
            )
        return df

    def _check_verdicts(self, df: pd.DataFrame) -> pd.DataFrame:
        """The verdicts must belong to this corpus (ids, criterion numbers), one per criterion;
        a missing verdict is marked excluded and shown as such."""
        table = self.tables["verdicts"]
        self._unknown_id(df, table)
        idx = df["criterion_index"]
        n_rubrics = df["prompt_id"].map({k: len(c.rubrics) for k, c in self.by_id.items()})
        bad = (idx < 0) | (idx >= n_rubrics)
        if bad.any():
            pos = int(bad.to_numpy().nonzero()[0][0])
            raise ExplorerError(
                f"{table.where(pos)}: field 'criterion_index': {idx.iloc[pos]!r}"
                f" is not a criterion of prompt_id {df['prompt_id'].iloc[pos]!r} "
                f"(it has {int(n_rubrics.iloc[pos])} criteria, numbered from 0)"
            )
        df = df.copy()
        for col in ("recovered", "excluded"):
            df[col] = df[col].astype(bool) if col in df.columns else False
        met = [None if m is None or pd.isna(m) else bool(m) for m in df["criteria_met"]]
        df["excluded"] = [ex or m is None for ex, m in zip(df["excluded"], met, strict=True)]
        df["criteria_met"] = pd.array(
            [None if ex else m for ex, m in zip(df["excluded"], met, strict=True)],
            dtype="boolean",
        )
        dup = df.duplicated(["judge", "candidate", "prompt_id", "criterion_index"])
        if dup.any():
            pos = int(dup.to_numpy().nonzero()[0][0])
            r = df.iloc[pos]
            raise ExplorerError(
                f"{table.where(pos)}: judge {r['judge']!r}, candidate {r['candidate']!r}, "
                f"prompt_id {r['prompt_id']!r}, criterion_index {r['criterion_index']}: "
                "a second verdict for the same criterion"
            )
        return df

    def _check_scores(self, df: pd.DataFrame) -> pd.DataFrame:
        """Scores without a ``status`` column get one (scored, or unscored where empty)."""
        if "status" in df.columns:
            return df
        return df.assign(status=["scored" if pd.notna(s) else "unscored" for s in df["score"]])

    # ---- indexes (built once, on first use) ----------------------------------------------

    @cached_property
    def _verdict_rows(self) -> dict[str, npt.NDArray[np.intp]]:
        return self.verdicts.groupby("prompt_id", sort=False).indices

    @cached_property
    def _disagreements(self) -> dict[str, frozenset[tuple[str, int]]]:
        v = self.verdicts[self.verdicts["criteria_met"].notna()]
        if v.empty:
            return {}
        n = v.groupby(["prompt_id", "candidate", "criterion_index"], sort=False)[
            "criteria_met"
        ].nunique()
        out: dict[str, set[tuple[str, int]]] = {}
        for pid, cand, idx in n[n > 1].index:
            out.setdefault(pid, set()).add((cand, int(idx)))
        return {k: frozenset(s) for k, s in out.items()}

    @cached_property
    def _refusers(self) -> dict[str, frozenset[str]]:
        r = self.responses[self.responses["refusal"]]
        return {pid: frozenset(g["model"]) for pid, g in r.groupby("prompt_id", sort=False)}

    @cached_property
    def _score_lookup(self) -> dict[tuple[str, str, str], tuple[float, str]]:
        """Scores of the given table, or those computed so far (filled per conversation)."""
        s = self.scores
        if s is None:
            return {}
        return {
            (pid, cand, judge): (float(score), str(status))
            for pid, cand, judge, score, status in zip(
                s["prompt_id"], s["candidate"], s["judge"], s["score"], s["status"], strict=True
            )
        }

    @cached_property
    def _scored_ids(self) -> set[str]:
        return set()

    def _ensure_scores(self, prompt_id: str) -> None:
        if not self.scores_computed or prompt_id in self._scored_ids:
            return
        conv = self.by_id[prompt_id]
        table = _scores_from_complete_groups(self.verdict_table(prompt_id), {prompt_id: conv})
        self._score_lookup.update(
            ((pid, cand, judge), (float(score), str(status)))
            for pid, cand, judge, score, status in zip(
                table["prompt_id"], table["candidate"], table["judge"], table["score"],
                table["status"], strict=True,
            )
        )
        self._scored_ids.add(prompt_id)

    @cached_property
    def _response_lookup(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {
            (r["prompt_id"], r["model"]): {k: _none_if_nan(v) for k, v in r.items()}
            for r in self.responses.to_dict(orient="records")
        }

    def category(self, prompt_id: str) -> str | None:
        """The conversation's category, or None (no category table, or not listed in it)."""
        return None if self.categories is None else self.categories.get(prompt_id)

    def is_hard(self, prompt_id: str) -> bool | None:
        """Whether the conversation is hard; None when the run has no hard ids."""
        return None if self.hard_ids is None else prompt_id in self.hard_ids

    def refused_by(self, prompt_id: str) -> frozenset[str]:
        """Candidates whose response to this conversation is a refusal."""
        return self._refusers.get(prompt_id, frozenset())

    def response(self, prompt_id: str, candidate: str) -> dict[str, Any] | None:
        return self._response_lookup.get((prompt_id, candidate))

    def verdict_table(self, prompt_id: str) -> pd.DataFrame:
        """This conversation's verdict rows (all candidates and judges)."""
        rows = self._verdict_rows.get(prompt_id)
        if rows is None:
            return self.verdicts.iloc[0:0]
        return self.verdicts.iloc[rows]

    def score(self, prompt_id: str, candidate: str, judge: str) -> tuple[float, str] | None:
        """(score, status) of one judge for one candidate's reply; None when never scored."""
        if prompt_id in self.by_id:
            self._ensure_scores(prompt_id)
        return self._score_lookup.get((prompt_id, candidate, judge))


def _scores_from_complete_groups(
    verdicts: pd.DataFrame, conversations: Mapping[str, Conversation]
) -> pd.DataFrame:
    """Per-(judge, candidate, conversation) scores, for groups that cover every criterion.

    An interrupted run can leave a conversation half graded; such a group has no score (it is
    shown as incomplete) rather than making the whole explorer fail.
    """
    cols = ["judge", "candidate", "prompt_id", "score", "status"]
    if verdicts.empty:
        return pd.DataFrame(columns=cols)
    keys = ["judge", "candidate", "prompt_id"]
    g = verdicts.groupby(keys, sort=False)["criterion_index"]
    stats = pd.DataFrame({"n": g.size(), "n_unique": g.nunique()}).reset_index()
    stats["n_rubrics"] = stats["prompt_id"].map({k: len(c.rubrics)
                                                 for k, c in conversations.items()})
    complete = stats[(stats["n"] == stats["n_rubrics"]) & (stats["n_unique"] == stats["n"])]
    merged = verdicts.merge(complete[keys], on=keys)
    table = merged[["judge", "candidate", "prompt_id", "criterion_index", "criteria_met",
                    "recovered", "excluded"]].astype({"criteria_met": object})
    table["criteria_met"] = [None if pd.isna(m) else bool(m) for m in table["criteria_met"]]
    scored = (grading.scores_from_verdicts(table, conversations)[cols]
              if len(table) else pd.DataFrame(columns=cols))
    incomplete = stats.drop(complete.index)[keys].assign(score=float("nan"), status="incomplete")
    return pd.concat([scored, incomplete[cols]], ignore_index=True)


# --------------------------------------------------------------------------------------------
# Loading a run folder


def _resolve_run_dir(run_dir: Path | str) -> Path:
    """A run folder, or a profile name whose run lives under ``outputs/<profile>``."""
    p = Path(run_dir)
    if p.is_dir():
        return p
    if len(p.parts) == 1:
        candidate = paths.outputs_root() / p
        if candidate.is_dir():
            return candidate
    raise ExplorerError(f"{p}: no such run folder (expected outputs/<profile>/ of a run)")


def _required(run_dir: Path, spec: tuple[str, str, str]) -> Path:
    stage, name, notebook = spec
    p = run_dir / stage / name
    if not p.is_file():
        raise ExplorerError(
            f"{p} is missing: it is written by notebook {notebook} (stage {stage}); run that "
            f"notebook for this profile first. Runs that only replay the released per-model "
            f"matrices (paper mode) have no per-conversation responses or verdicts to explore."
        )
    return p


def load_run(run_dir: Path | str, *, hard_ids: Iterable[str] | None = None) -> ExplorerData:
    """Read a run's output folder (``outputs/<profile>/``, or just the profile name).

    Every table is read through its writer's reader (errors name file, line and field).
    Required: ``01_corpus/corpus_source.json`` (the corpus is reloaded and hash-checked),
    ``06_generation/responses.jsonl`` and ``07_grading/verdicts.csv``. Optional:
    ``07_grading/scores.csv`` (else computed from the verdicts), ``05_subset/categories_v1.csv``
    and the Psych-Hard subset file in ``05_subset`` (else the hard filter is off). Pass
    ``hard_ids`` to use another hard list, e.g. all of HealthBench-Hard via
    ``corpus.hard_ids(sources.fetch("harness_scores"))``.
    """
    run = _resolve_run_dir(run_dir)
    scores_path = run / SCORES_FILE[0] / SCORES_FILE[1]
    categories_path = run / CATEGORIES_FILE[0] / CATEGORIES_FILE[1]
    if hard_ids is None:
        files = sorted((run / HARD_SUBSET_GLOB[0]).glob(HARD_SUBSET_GLOB[1]))
        if files:
            hard_ids = set().union(*(subset.load_subset(f)["prompt_ids"] for f in files))
    return load_files(
        _required(run, CORPUS_FILE), _required(run, RESPONSES_FILE),
        _required(run, VERDICTS_FILE),
        scores=scores_path if scores_path.is_file() else None,
        categories=categories_path if categories_path.is_file() else None,
        hard_ids=hard_ids, source=str(run))


def load_files(
    corpus_record: Path, responses: Path, verdicts: Path, *, scores: Path | None = None,
    categories: Path | None = None, hard_ids: Iterable[str] | None = None, source: str = "",
) -> ExplorerData:
    """The explorer's data from the run's files themselves (what a stage passes after reading
    them through its declared inputs): the corpus record, 06's responses and 07's verdicts;
    07's scores and 05's categories when given."""
    tables = {"responses": _Table(str(responses), 1), "verdicts": _Table(str(verdicts), 2)}
    score_table = None
    if scores is not None:
        score_table = score_sources.read_scores(scores)
        tables["scores"] = _Table(str(scores), 2)
    category_map = None
    if categories is not None:
        category_map = {p: c for p, c in subset.read_categories(categories).items() if c}
    return ExplorerData(
        conversations=corpus.load_recorded(corpus_record),
        responses=generation.read_responses(responses),
        verdicts=panel.read_verdicts(verdicts),
        scores=score_table,
        categories=category_map,
        hard_ids=hard_ids,
        source=source,
        tables=tables,
    )


# --------------------------------------------------------------------------------------------
# Queries


def known_conversation(data: ExplorerData, prompt_id: str) -> Conversation:
    """The run's conversation ``prompt_id`` (an id outside its corpus is an error)."""
    conv = data.by_id.get(prompt_id)
    if conv is None:
        raise ExplorerError(f"prompt_id {prompt_id!r} is not in this run's corpus")
    return conv


def disagreements(
    data: ExplorerData, prompt_id: str, candidates: Iterable[str] | None = None
) -> set[tuple[str, int]]:
    """(candidate, criterion_index) pairs where the judges' verdicts differ."""
    known_conversation(data, prompt_id)
    found = data._disagreements.get(prompt_id, frozenset())
    if candidates is not None:
        keep = set(candidates)
        found = frozenset(p for p in found if p[0] in keep)
    return set(found)


def filter_ids(
    data: ExplorerData,
    category: str | None = None,
    hard: bool | None = None,
    refusal: bool | None = None,
    disagreement: bool | None = None,
    candidates: Iterable[str] | None = None,
) -> list[str]:
    """Conversation ids matching every given filter, in corpus order (``None`` = no filter).

    ``category`` is a category name or ``NO_CATEGORY``; ``hard``, ``refusal`` and
    ``disagreement`` keep conversations where the property holds (True) or does not (False).
    Refusal and disagreement look only at ``candidates`` when given. Filtering on a feature the
    run lacks (no category table, no hard ids) is an error, not an empty result.
    """
    if category is not None and data.categories is None:
        raise ExplorerError("this run has no category table (05_subset/categories_v1.csv)")
    if hard is not None and data.hard_ids is None:
        raise ExplorerError("this run has no hard ids (no hard subset file in 05_subset)")
    keep = None if candidates is None else set(candidates)
    tests = _filters(data, category, hard, refusal, disagreement, keep)
    return [pid for pid in data.ids if all(test(pid) for test in tests)]


def _filters(data: ExplorerData, category: str | None, hard: bool | None,
             refusal: bool | None, disagreement: bool | None, keep: set[str] | None
             ) -> list[Callable[[str], bool]]:
    """One test per filter given, each true for a conversation id it keeps."""
    tests: list[Callable[[str], bool]] = []
    if category is not None:
        tests.append(lambda pid: _in_category(data.category(pid), category))
    if hard is not None:
        tests.append(lambda pid: data.is_hard(pid) == hard)
    if refusal is not None:
        tests.append(lambda pid: _refused(data, pid, keep) == refusal)
    if disagreement is not None:
        tests.append(lambda pid: bool(disagreements(data, pid, keep)) == disagreement)
    return tests


def _in_category(found: str | None, wanted: str) -> bool:
    """Whether a conversation's category (``None``: unlisted) is the one the filter asks for
    (:data:`NO_CATEGORY` asks for the unlisted)."""
    return found == wanted if found is not None else wanted == NO_CATEGORY


def _refused(data: ExplorerData, prompt_id: str, keep: set[str] | None) -> bool:
    """Whether any candidate (of ``keep``, when given) refused the conversation."""
    who = data.refused_by(prompt_id)
    return bool(who if keep is None else who & keep)


def conversation_label(data: ExplorerData, prompt_id: str, width: int = 60) -> str:
    """A short one-line label for the picker: id prefix, category, flags, first user words.

    Plain text (the dropdown shows it as text, not markup)."""
    conv = known_conversation(data, prompt_id)
    first_user = next((m.content for m in conv.prompt if m.role == "user"), "")
    snippet = " ".join(first_user.split())
    if len(snippet) > width:
        snippet = snippet[: width - 1] + "…"
    parts = [prompt_id[:8]]
    cat = data.category(prompt_id)
    if cat:
        parts.append(term_label(cat))
    if data.is_hard(prompt_id):
        parts.append("hard")
    n_dis = len(disagreements(data, prompt_id))
    if n_dis:
        parts.append(f"≠{n_dis}")
    if data.refused_by(prompt_id):
        parts.append("refusal")
    parts.append(snippet)
    return " · ".join(parts)
