"""Table 1 and its writers: CSV for machines, Markdown for the book, LaTeX for a paper.

One normalised layout serves both scoring modes (``scoring.table1`` with bootstrap intervals,
``scoring.paper_table`` with point estimates), so a reader of the CSV never has to know which
mode produced it: ``rank, candidate, panel_mean, ci_low, ci_high, n, <judges…>[, in_study]``,
with empty interval cells in paper mode.

The Markdown and LaTeX writers are written here rather than borrowed from pandas: pandas'
``to_markdown`` needs ``tabulate`` (not a dependency) and ``Styler.to_latex`` needs jinja2;
both would also tie the byte output to those packages' versions. Floats are printed with a
fixed number of decimals (``-0.000`` normalised to ``0.000``), so the same table gives the
same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core import escape
from hbpsych_utils.core.writes import write_text
from hbpsych_utils.evaluation import scoring
from hbpsych_utils.reporting import vocabulary

LATER_MARK = "†"
LATER_NOTE = (
    f"{LATER_MARK} added to the released matrices after the study; not one of its candidates."
)


# --------------------------------------------------------------------------------------------
# Table 1 in one layout


def table1(
    table: pd.DataFrame,
    *,
    judges: Sequence[str],
    n: int | Mapping[str, int] | pd.Series | None = None,
) -> pd.DataFrame:
    """Normalise a ``scoring.table1`` or ``scoring.paper_table`` frame to Table 1's layout.

    Columns ``rank, candidate, panel_mean, ci_low, ci_high, n, <judges>`` (plus ``in_study``
    when the input has it), one row per candidate, best first. ``n`` comes from the input's
    ``n_panel`` when present, else from the argument (one count for all, or per candidate, e.g.
    ``scoring.matrix_n``), else is left empty.
    """
    judges = list(judges)
    missing = [c for c in ("panel_mean", *judges) if c not in table.columns]
    if missing:
        raise ValueError(f"Table 1: input table has no column(s) {missing}")
    if table.index.has_duplicates:
        dup = table.index[table.index.duplicated()][0]
        raise ValueError(f"Table 1: input table repeats candidate {dup}")
    order = scoring.ranking(table["panel_mean"].astype(float))
    t = table.loc[order]
    out = pd.DataFrame({"candidate": order})
    if "rank" in t.columns:
        out.insert(0, "rank", t["rank"].astype(int).to_numpy())
    else:
        out.insert(0, "rank", np.arange(1, len(order) + 1))
    out["panel_mean"] = t["panel_mean"].astype(float).to_numpy()
    for col in ("ci_low", "ci_high"):
        out[col] = t[col].astype(float).to_numpy() if col in t.columns else np.nan
    out["n"] = _counts(t, order, n)
    for j in judges:
        out[j] = t[j].astype(float).to_numpy()
    if "in_study" in t.columns:
        out["in_study"] = t["in_study"].astype(bool).to_numpy()
    return out.reset_index(drop=True)


def _counts(t: pd.DataFrame, order: Sequence[str],
            n: int | Mapping[str, int] | pd.Series | None) -> Any:
    """Table 1's ``n`` column (nullable integers): the input's ``n_panel``, else ``n`` (one
    count for all, or per candidate), else empty."""
    if "n_panel" in t.columns:
        return pd.array(t["n_panel"].to_numpy(), dtype="Int64")
    if n is None:
        return pd.array([pd.NA] * len(order), dtype="Int64")
    if isinstance(n, int | Integral):
        return pd.array([int(n)] * len(order), dtype="Int64")
    lookup = dict(n.items())
    absent = [c for c in order if c not in lookup]
    if absent:
        raise ValueError(f"Table 1: no n given for candidate(s) {absent}")
    return pd.array([int(lookup[c]) for c in order], dtype="Int64")


TABLE1_FIXED = ("rank", "candidate", "panel_mean", "ci_low", "ci_high", "n", "in_study")
"""The columns of Table 1's layout that are not a judge's."""


def judges_in(t1: pd.DataFrame) -> list[str]:
    """The judges of a Table 1 in its layout (its columns that are not :data:`TABLE1_FIXED`)."""
    return [str(c) for c in t1.columns if c not in TABLE1_FIXED]


def read_table1_file(path: Path) -> pd.DataFrame:
    """A subset's Table 1 as 12_figures_tables writes it (``table1_<subset>.csv``, in the
    layout of :func:`table1`), read back with its types."""
    t = pd.read_csv(path, dtype={"candidate": str})
    t["n"] = pd.array(t["n"], dtype="Int64")
    if "in_study" in t.columns:
        t["in_study"] = t["in_study"].astype(bool)
    return t


def has_intervals(t1: pd.DataFrame) -> bool:
    return bool(t1[["ci_low", "ci_high"]].notna().all(axis=None)) and len(t1) > 0


# --------------------------------------------------------------------------------------------
# Number formatting and the writers


def format_number(value: Any, decimals: int = 3) -> str:
    """Fixed decimals for floats, plain digits for integers, '' for missing values."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        x = float(value)
        if math.isnan(x):
            return ""
        s = f"{x:.{decimals}f}"
        if s.startswith("-") and float(s) == 0.0:
            s = s[1:]
        return s
    return str(value)


def _cells(df: pd.DataFrame, decimals: int) -> list[list[str]]:
    return [[format_number(v, decimals) for v in row] for row in df.itertuples(index=False)]


def _alignment(df: pd.DataFrame, align: Sequence[str] | None) -> list[str]:
    if align is None:
        return ["r" if pd.api.types.is_numeric_dtype(df[c]) and not
                pd.api.types.is_bool_dtype(df[c]) else "l" for c in df.columns]
    align = list(align)
    if len(align) != df.shape[1] or any(a not in ("l", "r", "c") for a in align):
        raise ValueError(f"align must give one of l/r/c per column ({df.shape[1]}), got {align}")
    return align


def _md_escape(text: str) -> str:
    """A cell or note of a Markdown table file: no HTML, ``|`` and ``\\`` escaped, one line
    (other Markdown markers are left as they are, so the file's source reads as the table)."""
    return escape.md_text(text, markers="\\|")


def to_markdown(
    df: pd.DataFrame,
    *,
    decimals: int = 3,
    align: Sequence[str] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """A GitHub-flavoured Markdown table, columns padded so the source reads as a table too."""
    aligns = _alignment(df, align)
    head = [_md_escape(str(c)) for c in df.columns]
    body = [[_md_escape(c) for c in row] for row in _cells(df, decimals)]
    widths = [max([3, len(h), *(len(r[k]) for r in body)]) for k, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if a == "r" else c.ljust(w)
                  for c, w, a in zip(cells, widths, aligns, strict=True)]
        return "| " + " | ".join(padded) + " |"

    rule = {"l": lambda w: ":" + "-" * (w - 1), "r": lambda w: "-" * (w - 1) + ":",
            "c": lambda w: ":" + "-" * (w - 2) + ":"}
    lines = [line(head), "| " + " | ".join(rule[a](w) for a, w in zip(aligns, widths,
                                                                       strict=True)) + " |"]
    lines += [line(r) for r in body]
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\n" + "\n".join(_md_escape(n) for n in notes) + "\n"
    return text


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    LATER_MARK: r"\textdagger{}", "–": "--", "−": "$-$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (and spell † and dashes portably)."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(
    df: pd.DataFrame,
    *,
    decimals: int = 3,
    align: Sequence[str] | None = None,
    caption: str | None = None,
    label: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """A booktabs ``table`` (needs ``\\usepackage{booktabs}``); notes below the rules."""
    aligns = _alignment(df, align)
    head = [latex_escape(str(c)) for c in df.columns]
    body = [[latex_escape(c) for c in row] for row in _cells(df, decimals)]
    lines = [r"\begin{table}[htbp]", r"\centering"]
    if caption:
        lines.append(r"\caption{" + latex_escape(caption) + "}")
    if label:
        lines.append(r"\label{" + label + "}")
    lines += [r"\begin{tabular}{" + "".join(aligns) + "}", r"\toprule",
              " & ".join(head) + r" \\", r"\midrule"]
    lines += [" & ".join(r) + r" \\" for r in body]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if notes:
        lines.append(r"\par\smallskip{\footnotesize "
                     + r" \\ ".join(latex_escape(n) for n in notes) + "}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def csv_text(df: pd.DataFrame, *, float_decimals: int = 6) -> str:
    """CSV with a fixed float format (6 decimals, as the released matrices), '' for missing,
    LF line ends, no index."""
    return df.to_csv(index=False, float_format=f"%.{float_decimals}f", lineterminator="\n",
                     na_rep="")


def write_csv(df: pd.DataFrame, path: Path, *, float_decimals: int = 6) -> Path:
    """``csv_text`` written to ``path``."""
    return write_text(Path(path), csv_text(df, float_decimals=float_decimals))


# --------------------------------------------------------------------------------------------
# Table 1 for readers: the paper's layout


@dataclass(frozen=True, repr=False)
class ReaderTable:
    """A table as readers see it: text cells, column alignment, its label and caption (one
    sentence saying what it shows), and notes; written as Markdown, LaTeX or HTML alike."""

    label: str
    caption: str
    frame: pd.DataFrame
    align: list[str]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        return (f"**{_md_escape(self.label)}.** {_md_escape(self.caption)}\n\n"
                + to_markdown(self.frame, align=self.align, notes=self.notes))

    def latex(self, tex_label: str) -> str:
        return to_latex(self.frame, align=self.align, caption=f"{self.label}. {self.caption}",
                        label=tex_label, notes=self.notes)

    def table(self) -> vocabulary.Table:
        """The table as the display vocabulary shows it (its cells are laid out already:
        numbers right, names left, by ``align``)."""
        kinds: dict[str, vocabulary.Kind] = {
            str(c): "number" if a == "r" else "name"
            for c, a in zip(self.frame.columns, self.align, strict=True)}
        return vocabulary.Table(self.frame, caption=f"{self.label}. {self.caption}",
                                index=False, kinds=kinds, notes=self.notes)

    def _repr_html_(self) -> str:
        return self.table().html()

    def __repr__(self) -> str:
        return self.markdown()


def _model_names(t1: pd.DataFrame) -> dict[str, str]:
    """Each candidate's display name, with the dagger of a later-added one."""
    later = "in_study" in t1.columns and not bool(t1["in_study"].all())
    out = {}
    for _, r in t1.iterrows():
        name = study.display_name(str(r["candidate"]))
        out[str(r["candidate"])] = (f"{name} {LATER_MARK}" if later and not bool(r["in_study"])
                                    else name)
    return out


def _n_text(t1: pd.DataFrame) -> str:
    ns = sorted({int(v) for v in t1["n"].dropna()})
    if not ns:
        return ""
    return f"n = {ns[0]:,}" if len(ns) == 1 else f"n = {ns[0]:,}–{ns[-1]:,}"


def paper_table1(subsets: Mapping[str, pd.DataFrame], *, judges: Sequence[str] | None,
                 decimals: int = 3, n_resamples: int | None = None,
                 level: float, per_judge: str = "Table I1") -> ReaderTable:
    """Table 1 as the paper lays it out: one row per model, best first by the first subset's
    panel mean, and one column per subset (v1 and Hard side by side) with the panel mean and,
    where the source has per-conversation grades, its interval (at ``level``) in the same cell.

    ``subsets``: Table 1 frames in the normalised layout (:func:`table1`), by subset key, the
    primary first; ``judges``: the run's panel, which the caption names (``None``: the judge
    columns of the first frame, :func:`judges_in`). The caption says in
    one sentence whether the cells carry intervals and, if not, why; per-judge means are left to
    ``per_judge`` (the appendix table)."""
    if not subsets:
        raise ValueError("Table 1: no subset to show")
    keys = list(subsets)
    primary = subsets[keys[0]]
    judges = judges_in(primary) if judges is None else list(judges)
    order = _rows_in_order(subsets)
    names: dict[str, str] = {}
    for t in subsets.values():
        names.update(_model_names(t))
    ranks = dict(zip(primary["candidate"].astype(str), primary["rank"], strict=True))
    out = pd.DataFrame({"Rank": [str(int(ranks[c])) if c in ranks else "–" for c in order],
                        "Model": [names[c] for c in order]})
    ci = all(has_intervals(t) for t in subsets.values())
    for key, t in subsets.items():
        n = _n_text(t)
        out[study.SUBSET_TITLES.get(key, key) + (f" ({n})" if n else "")] = _subset_cells(
            t, order, ci, decimals)
    caption = _table1_caption(keys, judges, ci, n_resamples, level, per_judge)
    notes = [LATER_NOTE] if any(LATER_MARK in v for v in names.values()) else []
    return ReaderTable("Table 1", caption, out, ["r", "l", *(["r"] * len(keys))], notes)


def _rows_in_order(subsets: Mapping[str, pd.DataFrame]) -> list[str]:
    """The models of the first subset in its order, then those only the others have."""
    frames = list(subsets.values())
    order = [str(c) for c in frames[0]["candidate"]]
    for t in frames[1:]:
        order += [str(c) for c in t["candidate"] if str(c) not in order]
    return order


def _subset_cells(t: pd.DataFrame, order: Sequence[str], ci: bool, decimals: int) -> list[str]:
    """One subset's column of Table 1: each model's panel mean, with its interval when ``ci``,
    "–" for a model the subset does not score."""
    rows = t.set_index(t["candidate"].astype(str))
    cells = []
    for c in order:
        if c not in rows.index:
            cells.append("–")
            continue
        r = rows.loc[c]
        cell = format_number(r["panel_mean"], decimals)
        if ci:
            cell += (f" [{format_number(r['ci_low'], decimals)}, "
                     f"{format_number(r['ci_high'], decimals)}]")
        cells.append(cell)
    return cells


def _table1_caption(keys: Sequence[str], judges: Sequence[str], ci: bool,
                    n_resamples: int | None, level: float, per_judge: str) -> str:
    """Table 1's caption: the panel, the subsets, the order, and whether the cells carry
    intervals (and how they were drawn) or why not."""
    titles = " and ".join(study.SUBSET_TITLES.get(k, k) for k in keys)
    if ci:
        resamples = f", {n_resamples:,} resamples" if n_resamples else ""
        how = (f"with {vocabulary.level_text(level)} intervals from a seeded "
               f"conversation-level bootstrap{resamples} (each resample's mean clipped)")
    else:
        how = ("as point estimates: the released matrices hold one mean per model and judge, "
               "so no interval can be computed")
    return (f"{vocabulary.panel_name(judges).capitalize()} means on {titles}, best first "
            "by the "
            f"{study.SUBSET_TITLES.get(keys[0], keys[0])} mean, {how}; per-judge means are "
            f"in {per_judge}.")


def per_judge_table(t1: pd.DataFrame, *, subset: str, judges: Sequence[str],
                    decimals: int = 3, label: str = "Table I1") -> ReaderTable:
    """Each judge's clipped mean per model on one subset, and the panel's (the paper's
    Appendix I table), in Table 1's order."""
    f = lambda v: format_number(v, decimals)  # noqa: E731
    names = _model_names(t1)
    out = pd.DataFrame({"Rank": [str(int(r)) for r in t1["rank"]],
                        "Model": [names[str(c)] for c in t1["candidate"]]})
    for j in judges:
        out[study.display_name(j)] = [f(v) for v in t1[j]]
    out["Panel"] = [f(v) for v in t1["panel_mean"]]
    n = _n_text(t1)
    caption = (f"Each judge's clipped mean per model on {study.SUBSET_TITLES.get(subset, subset)}"
               + (f" ({n})" if n else "") + ", and the panel's, in Table 1's order.")
    notes = [LATER_NOTE] if any(LATER_MARK in v for v in names.values()) else []
    return ReaderTable(label, caption, out, ["r", "l", *(["r"] * (len(judges) + 1))], notes)


TABLE1_FILES = ("table1.md", "table1.tex", "table_i1.md", "table_i1.tex")
"""The reader files of Table 1 and its appendix table (12_figures_tables writes them beside each
subset's ``table1_<subset>.csv``)."""


def table1_texts(subsets: Mapping[str, pd.DataFrame], *, judges: Sequence[str],
                 n_resamples: int | None = None,
                 level: float) -> dict[str, str]:
    """Table 1's files, by name: each subset's CSV (every column, 6 decimals, the machine
    layout ``table1_<subset>.csv``), Table 1 in the paper's layout and the per-judge appendix
    table of the first subset, each as Markdown and LaTeX. ``subsets``: normalised frames."""
    first = next(iter(subsets))
    main = paper_table1(subsets, judges=judges, n_resamples=n_resamples, level=level)
    appendix = per_judge_table(subsets[first], subset=first, judges=judges)
    out = {f"table1_{key}.csv": csv_text(t) for key, t in subsets.items()}
    out |= {"table1.md": main.markdown(), "table1.tex": main.latex("tab:table1"),
            "table_i1.md": appendix.markdown(), "table_i1.tex": appendix.latex("tab:table-i1")}
    return out
