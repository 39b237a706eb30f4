"""Inter-rater agreement for the blinded clinician review: Gwet's AC1, Fleiss' and Cohen's kappa.

Own implementation (numpy only), so the numbers the study reports do not hinge on a third-party
package. The study reports Gwet's AC1 because relevance is highly prevalent among reviewed items,
and kappa collapses at high prevalence (the "kappa paradox"); kappa is reported beside it.

Conventions shared by every function here:

- A rating is any hashable label (``"Y"``/``"N"``, category names, integers). A *missing*
  rating is ``None``, a float NaN, ``pandas.NA`` or a blank string (irrCAC also treats blank
  strings as missing).
- ``categories`` is the rating scale. AC1's chance term depends on the number of categories q,
  so pass the scale when it is known (``("Y", "N")`` for relevance). When it is ``None`` the
  scale is inferred as the distinct ratings observed (across all raters given in the call); a
  rating outside an explicit scale is an error that names the rater, the item and the value.
- Undefined versus invalid: kappa is NaN when its chance agreement is 1 (every rating in one
  category: the coefficient is 0/0 by construction). AC1 stays defined there (= 1 with a
  two-category scale) but needs q >= 2, so with fewer than two known categories it raises
  ``ValueError`` asking for ``categories``. Input with nothing to compute on (no item rated by
  two raters) also raises.

Formulas (q categories; r_ik = raters who put item i in category k; r_i = raters of item i):

- observed agreement p_a = mean over items with r_i >= 2 of
  sum_k r_ik (r_ik - 1) / (r_i (r_i - 1));
- category prevalence pi_k = mean over items with r_i >= 1 of r_ik / r_i;
- AC1 chance agreement p_e = sum_k pi_k (1 - pi_k) / (q - 1)   (Gwet 2008);
- Fleiss chance agreement p_e = sum_k pi_k ** 2                (Fleiss 1971);
- coefficient = (p_a - p_e) / (1 - p_e).

This is Gwet's formulation for missing ratings (Handbook of Inter-Rater Reliability, 4th ed.,
2014), the one his irrCAC package implements: items with a single rating still inform the
prevalences but not the observed agreement. With the same number of ratings on every item it
reduces to Fleiss (1971) and to Gwet (2008) exactly.

Two-rater functions (``gwet_ac1``, ``cohen_kappa``) instead drop every item that either rater
skipped (complete cases), so that each pair is judged on the items both raters saw. On data with
missing ratings this differs slightly from irrCAC's ``gwet.ac1.raw`` on two columns, which keeps
single-rated items in the prevalences; ``gwet_ac1_multirater`` on the two columns gives that one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypedDict

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd

# Chance agreement this close to 1 makes kappa 0/0.
_PE_ONE_TOL = 1e-12

Ratings = Sequence[Hashable]
"""One rater's ratings, item by item (missing ones included: :func:`is_missing`)."""
RatingsTable: TypeAlias = (
    "Mapping[str, Ratings] | Sequence[Sequence[Hashable]] | np.ndarray | pd.DataFrame")
"""Raters' aligned ratings: a mapping rater -> ratings, or an items x raters table (a
DataFrame's columns name the raters)."""


@dataclass(frozen=True)
class Coefficient:
    """A chance-corrected coefficient with the parts it is made of."""

    value: float  # (pa - pe) / (1 - pe); NaN when undefined (kappa with pe == 1)
    pa: float  # observed agreement
    pe: float  # chance agreement
    n_items: int  # items with >= 2 ratings (the observed-agreement part)
    n_rated: int  # items with >= 1 rating (the prevalence part)


@dataclass(frozen=True)
class RatingCounts:
    """Items x categories table: how many raters put each item in each category."""

    counts: np.ndarray  # shape (n_items, q), integer counts
    categories: tuple[Hashable, ...]


@dataclass(frozen=True)
class AgreementSummary:
    """Every agreement statistic the review stage reports, for one round."""

    raters: tuple[str, ...]
    categories: tuple[Hashable, ...]
    n_items: int  # items rated by at least two raters
    ac1_pairs: dict[str, float]
    ac1_pairwise_mean: float
    ac1_multirater: float
    fleiss_kappa: float
    cohen_kappa_pairs: dict[str, float]

    def metrics(self) -> AgreementFields:
        """The flat keys ``metrics.json`` uses (NaN is left as is; ``stage.write_json`` -> null)."""
        return AgreementFields(
            ac1_pairs=dict(self.ac1_pairs),
            ac1_pairwise_mean=self.ac1_pairwise_mean,
            ac1_multirater=self.ac1_multirater,
            fleiss_kappa=self.fleiss_kappa,
            cohen_kappa_pairs=dict(self.cohen_kappa_pairs),
        )


class AgreementFields(TypedDict):
    """A round's agreement as ``metrics.RoundMetrics`` fields."""

    ac1_pairs: dict[str, float | None]
    ac1_pairwise_mean: float
    ac1_multirater: float
    fleiss_kappa: float
    cohen_kappa_pairs: dict[str, float | None]


# ---------------------------------------------------------------------------------------------
# Input handling


def is_missing(value: object) -> bool:
    """True for the values treated as "not rated": None, NaN, pandas.NA, blank strings."""
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    if isinstance(value, str):
        return not value.strip()
    return type(value).__name__ == "NAType"  # pandas.NA, without importing pandas


def _ordered(values: list[Hashable]) -> tuple[Hashable, ...]:
    """Distinct values, sorted when they are comparable, else in order of first appearance."""
    try:
        distinct = list(dict.fromkeys(values))
    except TypeError as exc:
        raise ValueError(f"ratings must be hashable labels: {exc}") from None
    try:
        return tuple(sorted(distinct))  # type: ignore[type-var]  # labels may not compare
    except TypeError:
        return tuple(distinct)


def _scale(
    columns: Sequence[Ratings], categories: Sequence[Hashable] | None
) -> tuple[Hashable, ...]:
    """The rating scale: the given categories (validated) or the distinct observed ratings."""
    if categories is None:
        return _ordered([v for col in columns for v in col if not is_missing(v)])
    cats = tuple(categories)
    if any(is_missing(c) for c in cats):
        raise ValueError(f"categories {cats!r}: a category cannot be a missing value")
    if len(set(cats)) != len(cats):
        raise ValueError(f"categories {cats!r}: duplicate category")
    return cats


def _index(
    value: Hashable, lookup: dict[Hashable, int], rater: str, item: int,
    cats: tuple[Hashable, ...]
) -> int:
    try:
        return lookup[value]
    except (KeyError, TypeError):
        raise ValueError(
            f"rater {rater!r}, item {item}: rating {value!r} is not one of the categories "
            f"{list(cats)!r}"
        ) from None


def _table_columns(table: RatingsTable) -> tuple[list[str], list[list[Hashable]]]:
    """Rater names and their rating columns from a mapping or an items x raters table."""
    if isinstance(table, Mapping):
        names = [str(k) for k in table]
        columns = [list(v) for v in table.values()]
    else:
        arr = np.asarray(table, dtype=object)
        if arr.ndim != 2:
            raise ValueError(
                f"ratings table: expected items x raters (2-D), got an array of shape {arr.shape}"
            )
        labels = getattr(table, "columns", None)  # pandas DataFrame
        names = (
            [str(c) for c in labels]
            if labels is not None
            else [f"rater{j + 1}" for j in range(arr.shape[1])]
        )
        columns = [list(arr[:, j]) for j in range(arr.shape[1])]
    if len(columns) < 2:
        raise ValueError(f"ratings table: agreement needs at least 2 raters, got {len(columns)}")
    lengths = {name: len(col) for name, col in zip(names, columns, strict=True)}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"ratings table: raters rated different numbers of items: {lengths}")
    return names, columns


def category_counts(table: RatingsTable, categories: Sequence[Hashable] | None = None
                    ) -> RatingCounts:
    """Raw ratings (items x raters, or a mapping rater -> ratings) -> items x categories counts."""
    names, columns = _table_columns(table)
    cats = _scale(columns, categories)
    lookup = {c: k for k, c in enumerate(cats)}
    counts = np.zeros((len(columns[0]), len(cats)), dtype=np.int64)
    for name, col in zip(names, columns, strict=True):
        for i, value in enumerate(col):
            if not is_missing(value):
                counts[i, _index(value, lookup, name, i, cats)] += 1
    return RatingCounts(counts=counts, categories=cats)


def _complete_pairs(
    a: Ratings, b: Ratings, names: tuple[str, str]
) -> tuple[list[Hashable], list[Hashable]]:
    """The two raters' ratings on the items both rated (complete cases)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(
            f"raters {names[0]!r} and {names[1]!r} rated different numbers of items "
            f"({len(a)} vs {len(b)}); ratings must be aligned item by item"
        )
    kept = [(x, y) for x, y in zip(a, b, strict=True) if not (is_missing(x) or is_missing(y))]
    if not kept:
        raise ValueError(f"raters {names[0]!r} and {names[1]!r} have no item rated by both")
    return [x for x, _ in kept], [y for _, y in kept]


# ---------------------------------------------------------------------------------------------
# Coefficients from an items x categories count table


def _agreement_parts(counts: npt.ArrayLike) -> tuple[float, np.ndarray, int, int]:
    """Observed agreement, category prevalences, items with >= 2 and >= 1 ratings."""
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"count table: expected items x categories (2-D), got shape {c.shape}")
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("count table: counts must be non-negative integers")
    r = c.sum(axis=1)
    rated = r >= 1
    multi = r >= 2
    if not multi.any():
        raise ValueError("count table: no item has two or more ratings; agreement is undefined")
    cm, rm = c[multi], r[multi]
    pa = float(np.mean((cm * (cm - 1)).sum(axis=1) / (rm * (rm - 1))))
    pi = (c[rated] / r[rated][:, None]).mean(axis=0)
    return pa, pi, int(multi.sum()), int(rated.sum())


def _corrected(pa: float, pe: float) -> float:
    if abs(1.0 - pe) <= _PE_ONE_TOL:
        return math.nan
    return (pa - pe) / (1.0 - pe)


def ac1_from_counts(counts: npt.ArrayLike) -> Coefficient:
    """Gwet's AC1 from an items x categories count table (columns = the whole scale)."""
    pa, pi, n_items, n_rated = _agreement_parts(counts)
    q = pi.shape[0]
    if q < 2:
        raise ValueError(
            f"AC1 needs a scale of at least 2 categories, got {q}; pass categories= "
            "(for relevance: ('Y', 'N'))"
        )
    pe = float(np.sum(pi * (1.0 - pi)) / (q - 1))
    return Coefficient(_corrected(pa, pe), pa, pe, n_items, n_rated)


def fleiss_from_counts(counts: npt.ArrayLike) -> Coefficient:
    """Fleiss' kappa from an items x categories count table; NaN when chance agreement is 1."""
    pa, pi, n_items, n_rated = _agreement_parts(counts)
    pe = float(np.sum(pi**2))
    return Coefficient(_corrected(pa, pe), pa, pe, n_items, n_rated)


# ---------------------------------------------------------------------------------------------
# Coefficients from raw ratings


def gwet_ac1(
    a: Ratings,
    b: Ratings,
    categories: Sequence[Hashable] | None = None,
    *,
    names: tuple[str, str] = ("a", "b"),
) -> float:
    """Gwet's AC1 for two raters on the items both rated (items either rater skipped are dropped).

    The scale, when not given, is every rating either rater gave (skipped items included).
    """
    a, b = list(a), list(b)
    cats = _scale([a, b], categories)
    xa, xb = _complete_pairs(a, b, names)
    counts = category_counts({names[0]: xa, names[1]: xb}, cats).counts
    return ac1_from_counts(counts).value


def cohen_kappa(a: Ratings, b: Ratings, categories: Sequence[Hashable] | None = None,
                *, names: tuple[str, str] = ("a", "b")) -> float:
    """Cohen's (1960) kappa for two raters on the items both rated; NaN when p_e == 1.

    Chance agreement uses each rater's own marginals (unlike Fleiss' pooled ones). Categories
    only validate the ratings here: unused categories do not change kappa.
    """
    a, b = list(a), list(b)
    cats = _scale([a, b], categories)
    xa, xb = _complete_pairs(a, b, names)
    lookup = {c: k for k, c in enumerate(cats)}
    table = np.zeros((len(cats), len(cats)))
    for i, (x, y) in enumerate(zip(xa, xb, strict=True)):
        table[_index(x, lookup, names[0], i, cats), _index(y, lookup, names[1], i, cats)] += 1
    p = table / table.sum()
    pa = float(np.trace(p))
    pe = float(p.sum(axis=1) @ p.sum(axis=0))
    return _corrected(pa, pe)


def gwet_ac1_multirater(table: RatingsTable, categories: Sequence[Hashable] | None = None
                        ) -> float:
    """Gwet's (2008) multi-rater AC1 from items x raters ratings (or a mapping rater -> ratings).

    Missing ratings are allowed: items with fewer than two ratings are left out of the observed
    agreement but still count in the category prevalences (Gwet 2014; irrCAC ``gwet.ac1.raw``).
    """
    return ac1_from_counts(category_counts(table, categories).counts).value


def fleiss_kappa(table: RatingsTable, categories: Sequence[Hashable] | None = None) -> float:
    """Fleiss' (1971) kappa from items x raters ratings (or a mapping rater -> ratings).

    Fleiss assumed the same number of ratings per item. With unequal numbers (missing ratings)
    this uses Gwet's generalisation, as irrCAC's ``fleiss.kappa.raw`` does: per-item agreement
    over items with >= 2 ratings, each item weighted equally; prevalence of a category = the mean
    over rated items of the share of that item's ratings in it. Equal numbers give Fleiss' own
    formula. NaN when chance agreement is 1 (every rating in one category).
    """
    return fleiss_from_counts(category_counts(table, categories).counts).value


class _PairCoefficient(Protocol):
    def __call__(self, a: Ratings, b: Ratings, categories: Sequence[Hashable] | None = None, *,
                 names: tuple[str, str] = ("a", "b")) -> float: ...


def _pairwise(
    ratings: Mapping[str, Ratings],
    categories: Sequence[Hashable] | None,
    fn: _PairCoefficient,
) -> dict[str, float]:
    columns = {str(k): list(v) for k, v in ratings.items()}
    names = list(columns)
    if len(names) < 2:
        raise ValueError(f"pairwise agreement needs at least 2 raters, got {names}")
    # One scale for every pair, so that AC1's q does not change from pair to pair.
    cats = _scale(list(columns.values()), categories)
    return {
        f"{x}-{y}": fn(columns[x], columns[y], cats, names=(x, y))
        for x, y in itertools.combinations(names, 2)
    }


def gwet_ac1_pairs(
    ratings: Mapping[str, Ratings], categories: Sequence[Hashable] | None = None
) -> dict[str, float]:
    """AC1 for every pair of raters, keyed ``"R1-R2"`` in the order the raters are given."""
    return _pairwise(ratings, categories, gwet_ac1)


def cohen_kappa_pairs(
    ratings: Mapping[str, Ratings], categories: Sequence[Hashable] | None = None
) -> dict[str, float]:
    """Cohen's kappa for every pair of raters, keyed like ``gwet_ac1_pairs``."""
    return _pairwise(ratings, categories, cohen_kappa)


def pairwise_mean(pairs: Mapping[str, float]) -> float:
    """Unweighted mean over rater pairs (NaN if any pair is NaN: an undefined pair is not 0)."""
    if not pairs:
        raise ValueError("pairwise_mean: no pairs")
    return float(np.mean([float(v) for v in pairs.values()]))


def summarize(
    ratings: Mapping[str, Ratings], categories: Sequence[Hashable] | None = None
) -> AgreementSummary:
    """All of the review stage's agreement statistics for one round of aligned ratings."""
    names, columns = _table_columns(ratings)
    cats = _scale(columns, categories)
    counts = category_counts(ratings, cats).counts
    ac1_pairs = gwet_ac1_pairs(ratings, cats)
    return AgreementSummary(
        raters=tuple(names),
        categories=cats,
        n_items=int((counts.sum(axis=1) >= 2).sum()),
        ac1_pairs=ac1_pairs,
        ac1_pairwise_mean=pairwise_mean(ac1_pairs),
        ac1_multirater=ac1_from_counts(counts).value,
        fleiss_kappa=fleiss_from_counts(counts).value,
        cohen_kappa_pairs=cohen_kappa_pairs(ratings, cats),
    )
