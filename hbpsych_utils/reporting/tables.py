"""Table 1 and its writers: CSV for machines, Markdown for the README, LaTeX for the paper.

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
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.core import escape
from hbpsych_utils.core.writes import write_text
from hbpsych_utils.evaluation import scoring

LATER_MARK = "†"
LATER_NOTE = (
    f"{LATER_MARK} added to the released matrices after the study; not one of its candidates."
)
POINT_ESTIMATES_NOTE = (
    "Point estimates: the panel mean is the mean of the judges' clipped means; the "
    "per-conversation grades behind them are not available, so no interval is given."
)
"""The note under Table 1 when it has no intervals (paper mode): why, in a full sentence."""
CI_NOTE = (
    "Panel mean: per conversation, the mean of the judges that all scored it, then the mean "
    "over conversations clipped to [0, 1]; 95% percentile interval from a seeded "
    "conversation-level bootstrap{resamples}; n = conversations in the panel mean."
)


# --------------------------------------------------------------------------------------------
# Table 1 in one layout


def table1(
    table: pd.DataFrame,
    *,
    judges: Sequence[str] = study.JUDGE_PANEL,
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
    if "n_panel" in t.columns:
        ns = pd.array(t["n_panel"].to_numpy(), dtype="Int64")
    elif n is None:
        ns = pd.array([pd.NA] * len(order), dtype="Int64")
    elif isinstance(n, Integral):
        ns = pd.array([int(n)] * len(order), dtype="Int64")
    else:
        lookup = dict(n.items())
        absent = [c for c in order if c not in lookup]
        if absent:
            raise ValueError(f"Table 1: no n given for candidate(s) {absent}")
        ns = pd.array([int(lookup[c]) for c in order], dtype="Int64")
    out["n"] = ns
    for j in judges:
        out[j] = t[j].astype(float).to_numpy()
    if "in_study" in t.columns:
        out["in_study"] = t["in_study"].astype(bool).to_numpy()
    return out.reset_index(drop=True)


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
# Table 1 for readers


def table1_display(
    t1: pd.DataFrame,
    *,
    judges: Sequence[str] = study.JUDGE_PANEL,
    decimals: int = 3,
    n_resamples: int | None = None,
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Table 1 as strings for Markdown/LaTeX: the frame, its column alignment, and its notes.

    The interval column appears only when every row has one; later-added candidates carry a
    dagger and a note; the point-estimate note says why there is no interval.
    """
    judges = list(judges)
    ci = has_intervals(t1)
    later = ("in_study" in t1.columns) and not bool(t1["in_study"].all())
    f = lambda v: format_number(v, decimals)  # noqa: E731
    out = pd.DataFrame({"Rank": [str(int(r)) for r in t1["rank"]]})
    names = []
    for _, r in t1.iterrows():
        late = later and not bool(r["in_study"])
        names.append(f"{r['candidate']} {LATER_MARK}" if late else str(r["candidate"]))
    out["Candidate"] = names
    out["Panel mean"] = [f(v) for v in t1["panel_mean"]]
    align = ["r", "l", "r"]
    if ci:
        out["95% CI"] = [f"[{f(lo)}, {f(hi)}]" for lo, hi in zip(t1["ci_low"], t1["ci_high"],
                                                                 strict=True)]
        align.append("c")
    for j in judges:
        out[study.display_name(j)] = [f(v) for v in t1[j]]
        align.append("r")
    if t1["n"].notna().any():
        out["n"] = [format_number(v) for v in t1["n"]]
        align.append("r")
    resamples = f" ({n_resamples:,} resamples)" if n_resamples else ""
    notes = [CI_NOTE.format(resamples=resamples) if ci else POINT_ESTIMATES_NOTE]
    shown = [j for j in judges if study.display_name(j) != j]
    if shown:
        notes.append("Judges: " + "; ".join(f"{study.display_name(j)} = {j}" for j in shown) + ".")
    if later:
        notes.append(LATER_NOTE)
    return out, align, notes


def table1_texts(
    table: pd.DataFrame,
    stem: str,
    *,
    subset: str,
    judges: Sequence[str] = study.JUDGE_PANEL,
    n: int | Mapping[str, int] | pd.Series | None = None,
    decimals: int = 3,
    n_resamples: int | None = None,
    label: str = "tab:table1",
) -> dict[str, str]:
    """Table 1 on ``subset`` as the text of ``stem.csv``, ``stem.md`` and ``stem.tex`` (file
    name -> text), so a stage can show the Markdown before it writes the files.

    ``table`` is ``scoring.table1`` or ``scoring.paper_table`` output (or already normalised by
    ``table1``). The CSV keeps 6 decimals and every column; Markdown and LaTeX round to
    ``decimals`` for reading. ``n_resamples``, when given, is stated in the interval note.
    """
    t1 = table if {"candidate", "ci_low", "n"} <= set(table.columns) else table1(
        table, judges=judges, n=n)
    disp, align, notes = table1_display(t1, judges=judges, decimals=decimals,
                                        n_resamples=n_resamples)
    caption = f"Panel ranking on {subset}"
    caption += " (95% bootstrap intervals)." if has_intervals(t1) else " (point estimates)."
    return {
        f"{stem}.csv": csv_text(t1),
        f"{stem}.md": f"**Table 1.** {caption}\n\n" + to_markdown(disp, align=align,
                                                                   notes=notes),
        f"{stem}.tex": to_latex(disp, align=align, caption=caption, label=label, notes=notes),
    }


def write_table1(table: pd.DataFrame, stem: Path, **options: Any) -> list[Path]:
    """Write ``stem.csv``, ``stem.md`` and ``stem.tex`` for Table 1 as :func:`table1_texts`
    makes them (the same keyword options: ``subset``, ``judges``, ``n``, ...)."""
    stem = Path(stem)
    texts = table1_texts(table, stem.name, **options)
    return [write_text(stem.parent / name, text) for name, text in texts.items()]
