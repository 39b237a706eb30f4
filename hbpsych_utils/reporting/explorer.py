"""Grade explorer: look inside one run's grades, conversation by conversation.

A reader who doubts a score wants to see what the judges actually saw and said: the
conversation, each candidate's reply, and every rubric criterion with each judge's verdict side
by side, with the criteria the judges disagree on made obvious. Two layers keep this testable
without a browser:

- a data/HTML layer (``ExplorerData``, ``load_run``, ``filter_ids``, ``disagreements``,
  ``conversation_html``) made of plain functions over the run's tables;
- a thin ipywidgets layer (``Explorer``, ``explore``) that only wires controls to those functions.

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

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from hbpsych_utils.construction import corpus, subset
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core import paths
from hbpsych_utils.core.escape import html_text
from hbpsych_utils.evaluation import generation, grading, panel, score_sources
from hbpsych_utils.reporting.vocabulary import term_label

NO_CATEGORY = "(no category)"
"""Category filter value matching conversations that the run's category table does not list."""

DISAGREE_CLASS = "hbx-disagree"
"""CSS class on a criterion row whose judges disagree (tests and style sheets rely on it)."""

REFUSAL_CLASS = "hbx-refusal"

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
        self.conversations = by_id
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
        known = df["prompt_id"].isin(self.conversations.keys())
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
        n_rubrics = df["prompt_id"].map({k: len(c.rubrics) for k, c in self.conversations.items()})
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
    def _verdict_rows(self) -> dict[str, Any]:
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
        conv = self.conversations[prompt_id]
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
        if prompt_id in self.conversations:
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


def _known(data: ExplorerData, prompt_id: str) -> Conversation:
    conv = data.conversations.get(prompt_id)
    if conv is None:
        raise ExplorerError(f"prompt_id {prompt_id!r} is not in this run's corpus")
    return conv


def disagreements(
    data: ExplorerData, prompt_id: str, candidates: Iterable[str] | None = None
) -> set[tuple[str, int]]:
    """(candidate, criterion_index) pairs where the judges' verdicts differ."""
    _known(data, prompt_id)
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
    out = []
    for pid in data.ids:
        if category is not None:
            cat = data.category(pid)
            if (cat is None and category != NO_CATEGORY) or (cat is not None and cat != category):
                continue
        if hard is not None and data.is_hard(pid) != hard:
            continue
        if refusal is not None:
            who = data.refused_by(pid)
            has = bool(who if keep is None else who & keep)
            if has != refusal:
                continue
        if disagreement is not None:
            has = bool(disagreements(data, pid, keep))
            if has != disagreement:
                continue
        out.append(pid)
    return out


def conversation_label(data: ExplorerData, prompt_id: str, width: int = 60) -> str:
    """A short one-line label for the picker: id prefix, category, flags, first user words.

    Plain text (the dropdown shows it as text, not markup)."""
    conv = _known(data, prompt_id)
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


# --------------------------------------------------------------------------------------------
# HTML


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
    conv = _known(data, prompt_id)
    cands = list(data.candidates if candidates is None else candidates)
    unknown = [c for c in cands if c not in data.candidates]
    if unknown:
        raise ExplorerError(f"unknown candidate(s) {unknown}; this run has {list(data.candidates)}")
    disagree = disagreements(data, prompt_id, cands)
    verdicts = data.verdict_table(prompt_id)
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
    parts = [
        _STYLE,
        '<div class="hbx">',
        f"<h3>Conversation {html_text(prompt_id)}</h3>",
        f"<div>{html_text(' · '.join(facts))}</div>",
        _legend(data.judges),
        "<h4>Conversation</h4>",
    ]
    for n, m in enumerate(conv.prompt, start=1):
        role = m.role if m.role in corpus.ROLES else "other"
        parts.append(
            f'<div class="hbx-turn hbx-role-{role}"><b>{n}. {html_text(m.role)}</b>'
            f'<div class="hbx-text">{html_text(m.content)}</div></div>'
        )
    if not cands:
        parts.append("<p><i>No candidate selected.</i></p></div>")
        return "".join(parts)
    parts.append(_scores_table(data, prompt_id, cands))
    for cand in cands:
        n_dis = sum(1 for c, _ in disagree if c == cand)
        parts.append(
            f'<h4>{html_text(term_label(cand))}'
            f'{f" — {n_dis} disagreement" + ("s" if n_dis != 1 else "") if n_dis else ""}</h4>'
        )
        parts.append(_reply_html(data.response(prompt_id, cand)))
        parts.append(_criteria_table(data, conv, cand, verdicts, disagree))
    parts.append("</div>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Widget layer


class Explorer:
    """The ipywidgets front end: filters, a conversation picker, candidates, and the view.

    All logic is in the functions above; this class only keeps the controls in step (changing
    a filter or the candidate selection refreshes the picker and the view).
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


__all__ = [
    "DISAGREE_CLASS",
    "NO_CATEGORY",
    "Explorer",
    "ExplorerData",
    "ExplorerError",
    "conversation_html",
    "conversation_label",
    "disagreements",
    "explore",
    "filter_ids",
    "load_run",
]
