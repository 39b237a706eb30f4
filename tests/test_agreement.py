"""Agreement coefficients: hand-computed cases, edge cases and published reference values.

Reference values come from Gwet's irrCAC R package (README of github.com/kgwet/irrCAC, the
printed output of its worked examples) and the Wikipedia worked example of Fleiss' kappa. Their
datasets are transcribed below as test data.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hbpsych_utils.construction import agreement as ag

# ---------------------------------------------------------------------------------------------
# Hand-computed two-rater cases

# 10 items. Items 1-6 Y/Y, item 7 Y/N, items 8-9 N/N, item 10 N/Y.
A10 = list("YYYYYYYNNN")
B10 = list("YYYYYYNNNY")


def test_two_raters_hand_computed() -> None:
    # pa = 8/10. A: 7 Y, 3 N; B: 7 Y, 3 N.
    # AC1: pi_Y = (7+7)/20 = 0.7, pi_N = 0.3; pe = (0.7*0.3 + 0.3*0.7)/(2-1) = 0.42
    #      AC1 = (0.8 - 0.42)/(1 - 0.42) = 0.38/0.58 = 19/29
    assert ag.gwet_ac1(A10, B10) == pytest.approx(19 / 29)
    # Cohen: pe = 0.7*0.7 + 0.3*0.3 = 0.58; kappa = (0.8 - 0.58)/0.42 = 11/21
    assert ag.cohen_kappa(A10, B10) == pytest.approx(11 / 21)


def test_high_prevalence_kappa_paradox() -> None:
    # 20 items: 18 Y/Y, one Y/N, one N/Y. pa = 18/20 = 0.9; each rater: 19 Y, 1 N.
    # AC1: pi_Y = 0.95; pe = 2 * 0.95 * 0.05 = 0.095; AC1 = 0.805/0.905 = 161/181 (~0.89)
    # kappa: pe = 0.95^2 + 0.05^2 = 0.905; kappa = (0.9 - 0.905)/0.095 = -1/19 (~-0.05)
    a = ["Y"] * 18 + ["Y", "N"]
    b = ["Y"] * 18 + ["N", "Y"]
    assert ag.gwet_ac1(a, b) == pytest.approx(161 / 181)
    assert ag.cohen_kappa(a, b) == pytest.approx(-1 / 19)


def test_two_raters_missing_ratings_dropped() -> None:
    # Items 3 (b only) and 5 (a only) are dropped; kept: (Y,Y) (Y,N) (N,N) (N,N).
    # pa = 3/4. a: 2 Y, 2 N; b: 1 Y, 3 N. pi_Y = 3/8, pi_N = 5/8.
    # AC1: pe = 2 * 3/8 * 5/8 = 15/32; AC1 = (24/32 - 15/32)/(17/32) = 9/17
    # kappa: pe = (2/4)(1/4) + (2/4)(3/4) = 1/2; kappa = (3/4 - 1/2)/(1/2) = 1/2
    a = ["Y", "Y", None, "N", "Y", "N"]
    b = ["Y", "N", "Y", "N", float("nan"), "N"]
    assert ag.gwet_ac1(a, b) == pytest.approx(9 / 17)
    assert ag.cohen_kappa(a, b) == pytest.approx(1 / 2)
    # Blank strings count as missing too (irrCAC does the same).
    b_blank = ["Y", "N", "Y", "N", "  ", "N"]
    assert ag.gwet_ac1(a, b_blank) == pytest.approx(9 / 17)


def test_two_rater_coefficients_are_symmetric_and_label_free() -> None:
    assert ag.gwet_ac1(A10, B10) == pytest.approx(ag.gwet_ac1(B10, A10))
    assert ag.cohen_kappa(A10, B10) == pytest.approx(ag.cohen_kappa(B10, A10))
    relabel = {"Y": 1, "N": 0}
    assert ag.gwet_ac1([relabel[x] for x in A10], [relabel[x] for x in B10]) == pytest.approx(
        19 / 29
    )


def test_unused_category_changes_ac1_not_kappa() -> None:
    # Same data on a 3-category scale: pi_Y = 0.7, pi_N = 0.3, pi_U = 0;
    # pe = (0.21 + 0.21 + 0)/(3 - 1) = 0.21; AC1 = (0.8 - 0.21)/0.79 = 59/79
    assert ag.gwet_ac1(A10, B10, categories=("Y", "N", "U")) == pytest.approx(59 / 79)
    assert ag.cohen_kappa(A10, B10, categories=("Y", "N", "U")) == pytest.approx(11 / 21)


# ---------------------------------------------------------------------------------------------
# Edge cases


def test_perfect_agreement_two_categories() -> None:
    a = list("YYNNY")
    assert ag.gwet_ac1(a, a) == pytest.approx(1.0)
    assert ag.cohen_kappa(a, a) == pytest.approx(1.0)
    assert ag.fleiss_kappa({"R1": a, "R2": a, "R3": a}) == pytest.approx(1.0)
    assert ag.gwet_ac1_multirater({"R1": a, "R2": a, "R3": a}) == pytest.approx(1.0)


def test_all_one_category_ac1_is_one_kappa_is_nan() -> None:
    # Everyone says Y on every item. On the Y/N scale: pa = 1, pi_Y = 1, pi_N = 0.
    # AC1: pe = (1*0 + 0*1)/1 = 0 -> AC1 = 1.  Kappa: pe = 1 -> 0/0 -> NaN (documented choice).
    y = ["Y"] * 5
    ratings = {"R1": y, "R2": y, "R3": y}
    assert ag.gwet_ac1(y, y, categories=("Y", "N")) == 1.0
    assert ag.gwet_ac1_multirater(ratings, categories=("Y", "N")) == 1.0
    assert math.isnan(ag.cohen_kappa(y, y, categories=("Y", "N")))
    assert math.isnan(ag.fleiss_kappa(ratings, categories=("Y", "N")))
    summary = ag.summarize(ratings, categories=("Y", "N"))
    assert summary.ac1_pairs == {"R1-R2": 1.0, "R1-R3": 1.0, "R2-R3": 1.0}
    assert math.isnan(summary.fleiss_kappa)


def test_ac1_without_a_scale_and_one_observed_category_asks_for_categories() -> None:
    # q = 1 makes AC1's chance term 0/0 (it divides by q - 1): the caller must give the scale.
    y = ["Y"] * 4
    with pytest.raises(ValueError, match="categories"):
        ag.gwet_ac1(y, y)
    with pytest.raises(ValueError, match="categories"):
        ag.gwet_ac1_multirater({"R1": y, "R2": y})


def test_kappa_nan_propagates_to_pairwise_mean() -> None:
    assert math.isnan(ag.pairwise_mean({"R1-R2": 0.5, "R1-R3": math.nan}))
    assert ag.pairwise_mean({"R1-R2": 0.5, "R1-R3": 0.25, "R2-R3": 0.0}) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        ag.pairwise_mean({})


# ---------------------------------------------------------------------------------------------
# Multi-rater, hand-computed


def test_multirater_with_missing_hand_computed() -> None:
    # item1: Y Y Y   r=3  agreement (3*2)/(3*2)         = 1
    # item2: Y Y N   r=3  (2*1 + 1*0)/(3*2)             = 1/3
    # item3: N - N   r=2  (2*1)/(2*1)                   = 1
    # item4: Y - -   r=1  left out of the observed agreement
    # pa = (1 + 1/3 + 1)/3 = 7/9
    # pi_Y = mean(3/3, 2/3, 0/2, 1/1) = 2/3; pi_N = 1/3   (item 4 counts here)
    # AC1: pe = 2 * (2/3)(1/3) / (2-1) = 4/9; AC1 = (7/9 - 4/9)/(5/9) = 3/5
    # Fleiss: pe = 4/9 + 1/9 = 5/9; kappa = (7/9 - 5/9)/(4/9) = 1/2
    table = [["Y", "Y", "Y"], ["Y", "Y", "N"], ["N", None, "N"], ["Y", None, None]]
    assert ag.gwet_ac1_multirater(table) == pytest.approx(3 / 5)
    assert ag.fleiss_kappa(table) == pytest.approx(1 / 2)
    ac1 = ag.ac1_from_counts(ag.category_counts(table, ("Y", "N")).counts)
    assert (ac1.pa, ac1.pe, ac1.n_items, ac1.n_rated) == (
        pytest.approx(7 / 9), pytest.approx(4 / 9), 3, 4,
    )


def test_items_nobody_rated_are_ignored() -> None:
    table = [["Y", "Y", "Y"], ["Y", "Y", "N"], ["N", None, "N"], ["Y", None, None]]
    assert ag.gwet_ac1_multirater([*table, [None, None, None]]) == pytest.approx(3 / 5)


def test_mapping_and_table_inputs_agree() -> None:
    table = [["Y", "Y", "Y"], ["Y", "Y", "N"], ["N", None, "N"], ["Y", None, None]]
    as_mapping = {f"R{j + 1}": [row[j] for row in table] for j in range(3)}
    assert ag.fleiss_kappa(as_mapping) == pytest.approx(ag.fleiss_kappa(np.array(table)))


def test_pairs_keys_order_and_summary() -> None:
    # R1 = A10, R2 = B10, R3 = A10: R1-R3 agree perfectly, the other two pairs are the
    # hand-computed 19/29 (AC1) and 11/21 (kappa) case.
    ratings = {"R1": A10, "R2": B10, "R3": A10}
    pairs = ag.gwet_ac1_pairs(ratings)
    assert list(pairs) == ["R1-R2", "R1-R3", "R2-R3"]
    assert pairs == {
        "R1-R2": pytest.approx(19 / 29), "R1-R3": pytest.approx(1.0),
        "R2-R3": pytest.approx(19 / 29),
    }
    # Raters are taken in the order given, not sorted.
    assert list(ag.gwet_ac1_pairs({"R3": A10, "R1": B10})) == ["R3-R1"]

    s = ag.summarize(ratings, categories=("Y", "N"))
    assert s.raters == ("R1", "R2", "R3") and s.n_items == 10
    assert s.ac1_pairwise_mean == pytest.approx((19 / 29 + 1 + 19 / 29) / 3)
    assert s.cohen_kappa_pairs["R1-R2"] == pytest.approx(11 / 21)
    # Multi-rater by hand: items 1-6 YYY and 8-9 NNN are unanimous (agreement 1 each);
    # item 7 = Y N Y and item 10 = N Y N: each (2*1 + 1*0)/(3*2) = 1/3.
    # pa = (8 + 2/3)/10 = 13/15. pi_Y = (6 + 2/3 + 1/3)/10 = 0.7, pi_N = 0.3.
    # AC1: pe = 2 * 0.7 * 0.3 = 0.42 -> (13/15 - 0.42)/0.58 = (67/150)/(58/100) = 67/87
    # Fleiss: pe = 0.49 + 0.09 = 0.58 -> (13/15 - 0.58)/0.42 = (43/150)/(42/100) = 43/63
    assert s.ac1_multirater == pytest.approx(67 / 87)
    assert s.fleiss_kappa == pytest.approx(43 / 63)
    metrics = s.metrics()
    assert set(metrics) == {
        "ac1_pairs", "ac1_pairwise_mean", "ac1_multirater", "fleiss_kappa", "cohen_kappa_pairs",
    }
    json.dumps(metrics)  # plain JSON types


# ---------------------------------------------------------------------------------------------
# Errors name the rater, the item and the value


def test_rating_outside_the_scale_is_named() -> None:
    with pytest.raises(ValueError, match=r"rater 'R2', item 1: rating 'maybe'"):
        ag.gwet_ac1_pairs({"R1": ["Y", "N"], "R2": ["Y", "maybe"]}, categories=("Y", "N"))
    with pytest.raises(ValueError, match=r"rater 'R3', item 0: rating 'y'"):
        ag.fleiss_kappa({"R1": ["Y"], "R2": ["Y"], "R3": ["y"]}, categories=("Y", "N"))


def test_misaligned_or_too_few_raters_rejected() -> None:
    with pytest.raises(ValueError, match=r"R1.*R2.*different numbers of items"):
        ag.gwet_ac1_pairs({"R1": ["Y", "N"], "R2": ["Y"]})
    with pytest.raises(ValueError, match="different numbers of items"):
        ag.fleiss_kappa({"R1": ["Y", "N"], "R2": ["Y"]})
    with pytest.raises(ValueError, match="at least 2 raters"):
        ag.fleiss_kappa({"R1": ["Y", "N"]})
    with pytest.raises(ValueError, match="no item rated by both"):
        ag.gwet_ac1(["Y", None], [None, "N"])
    with pytest.raises(ValueError, match="no item has two or more ratings"):
        ag.fleiss_kappa([["Y", None], [None, "N"]])
    with pytest.raises(ValueError, match="non-negative integers"):
        ag.fleiss_from_counts([[1, -1], [2, 0]])


# ---------------------------------------------------------------------------------------------
# Published reference values

# cac.raw4raters (irrCAC; Gwet 2014, Handbook, 4th ed., p. 120): 12 subjects, 4 raters,
# categories 1-5, missing ratings as None.
RAW4RATERS = {
    "Rater1": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "Rater2": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, None],
    "Rater3": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, 3],
    "Rater4": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def check_published(counts, *, pa: float, ac1: tuple[float, float],
                    fleiss: tuple[float, float], value_tol: float) -> ag.Coefficient:
    """AC1 and Fleiss from ``counts`` against published (p_e, coefficient) pairs and p_a."""
    got_ac1, got_fleiss = ag.ac1_from_counts(counts), ag.fleiss_from_counts(counts)
    assert got_ac1.pa == pytest.approx(pa, abs=5e-8)
    assert (got_ac1.pe, got_fleiss.pe) == pytest.approx((ac1[0], fleiss[0]), abs=5e-8)
    assert (got_ac1.value, got_fleiss.value) == pytest.approx((ac1[1], fleiss[1]), abs=value_tol)
    return got_ac1


def test_irrcac_raw4raters() -> None:
    # irrCAC README (github.com/kgwet/irrCAC, section "Computing agreement coefficients from raw
    # ratings"): gwet.ac1.raw -> pa 0.8181818, pe 0.1903212, coeff 0.77544;
    # fleiss.kappa.raw -> pa 0.8181818, pe 0.2387153, coeff 0.76117.
    # (0.76282 in the same README is Conger's kappa, not Fleiss'.)
    counts = ag.category_counts(RAW4RATERS).counts
    ac1 = check_published(counts, pa=0.8181818, ac1=(0.1903212, 0.77544),
                          fleiss=(0.2387153, 0.76117), value_tol=5e-6)
    assert ag.gwet_ac1_multirater(RAW4RATERS) == pytest.approx(0.77544, abs=5e-6)
    assert ag.fleiss_kappa(RAW4RATERS) == pytest.approx(0.76117, abs=5e-6)
    # By hand: subject 12 has one rating, so pa uses subjects 1-11, whose agreements are
    # 1, 1/2, 1, 1, 1, 0, 1, 1/2, 1, 1, 1 (e.g. subject 2 = 2,2,3,2: 3*2/(4*3) = 1/2) -> 9/11.
    assert ac1.pa == pytest.approx(9 / 11) and ac1.n_items == 11 and ac1.n_rated == 12


def test_irrcac_distrib_6raters_counts() -> None:
    # distrib.6raters (irrCAC; after Fleiss 1971): 15 patients x 5 diagnoses, 6 psychiatrists.
    # irrCAC README: gwet.ac1.dist -> 0.4448007 (pa 0.5511111, pe 0.1914815);
    # fleiss.kappa.dist -> 0.4139265 (pe 0.2340741).
    counts = [
        [0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1], [0, 0, 0, 0, 6], [0, 3, 0, 3, 0],
        [2, 0, 4, 0, 0], [0, 0, 4, 0, 2], [2, 0, 3, 1, 0], [2, 0, 0, 4, 0], [0, 0, 0, 0, 6],
        [1, 0, 0, 5, 0], [1, 1, 0, 4, 0], [0, 3, 3, 0, 0], [1, 0, 0, 5, 0], [0, 2, 0, 3, 1],
    ]
    check_published(counts, pa=0.5511111, ac1=(0.1914815, 0.4448007),
                    fleiss=(0.2340741, 0.4139265), value_tol=5e-8)


def test_wikipedia_fleiss_example() -> None:
    # Wikipedia "Fleiss' kappa", worked example: 14 raters, 10 subjects, 5 categories;
    # P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210 (also 0.209931 from the test table of
    # github.com/nilsreiter/iaa).
    counts = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
    k = ag.fleiss_from_counts(counts)
    assert k.pa == pytest.approx(0.378, abs=5e-4)
    assert k.pe == pytest.approx(0.213, abs=5e-4)
    assert k.value == pytest.approx(0.209931, abs=5e-7)


def _expand(table: list[list[int]], labels: list[str]) -> tuple[list[str], list[str]]:
    """A two-rater contingency table (rows rater A, columns rater B) -> paired raw ratings."""
    a: list[str] = []
    b: list[str] = []
    for i, row in enumerate(table):
        for j, n in enumerate(row):
            a += [labels[i]] * n
            b += [labels[j]] * n
    return a, b


def test_irrcac_cont3x3abstractors() -> None:
    # cont3x3abstractors (irrCAC; Gwet 2014): 100 pregnancies classified by 2 abstractors.
    # irrCAC README: kappa2.table -> 0.7964094; gwet.ac1.table -> 0.8493305; pa2.table -> 0.89.
    a, b = _expand([[13, 0, 0], [0, 20, 7], [0, 4, 56]], ["Ectopic", "AIU", "NIU"])
    assert ag.cohen_kappa(a, b) == pytest.approx(0.7964094, abs=5e-8)
    assert ag.gwet_ac1(a, b) == pytest.approx(0.8493305, abs=5e-8)
    assert ag.ac1_from_counts(ag.category_counts({"A": a, "B": b}).counts).pa == pytest.approx(
        0.89
    )


def test_ben_gerry_two_raters_with_a_missing_rating() -> None:
    # cac.ben.gerry (irrCAC): 12 units, Gerry skipped unit 10.
    ben = ["a", "a", "b", "b", "d", "c", "c", "c", "e", "d", "d", "a"]
    gerry = ["b", "a", "b", "b", "b", "c", "c", "c", "e", None, "d", "d"]
    # Gwet's multi-rater form (irrCAC gwet.ac1.raw) keeps unit 10 in the prevalences:
    # pa = 8/11 (units 1, 5, 12 disagree); pi = (2, 3, 3, 3, 1)/12 for a..e;
    # pe = (1 - 32/144)/4 = 7/36; AC1 = (8/11 - 7/36)/(29/36) = 211/319 = 0.66144.
    # Published (to 3 decimals) in the test suite of the irrCAC Python port
    # (github.com/afergadis/irrCAC, test/unit/irrCAC/raw/test_gwet.py): pa 0.727, pe 0.194,
    # AC1 0.661.
    multi = ag.gwet_ac1_multirater({"Ben": ben, "Gerry": gerry})
    assert multi == pytest.approx(211 / 319)
    assert multi == pytest.approx(0.661, abs=5e-4)
    # Our two-rater gwet_ac1 drops unit 10 entirely (complete cases): over 11 units
    # Ben a3 b2 c3 d2 e1, Gerry a1 b4 c3 d2 e1 -> pi = (4, 6, 6, 4, 2)/22;
    # pe = (1 - 108/484)/4 = 47/242; AC1 = (176/242 - 47/242)/(195/242) = 129/195 = 43/65.
    assert ag.gwet_ac1(ben, gerry) == pytest.approx(43 / 65)


# ---------------------------------------------------------------------------------------------
# The released round-1 ratings


def test_released_round1_ratings(mirror: object) -> None:
    from hbpsych_utils.core import sources

    votes: dict[str, dict[str, str]] = {}
    for rater in ("R1", "R2", "R3"):
        data = json.loads(sources.fetch(f"ratings_round1_{rater}").read_text(encoding="utf-8"))
        votes[rater] = {r["review_id"]: r["is_mental_health"] for r in data["ratings"]}
    ids = sorted(votes["R1"])
    ratings = {rater: [votes[rater].get(i) for i in ids] for rater in votes}
    s = ag.summarize(ratings, categories=("Y", "N"))
    assert list(s.ac1_pairs) == ["R1-R2", "R1-R3", "R2-R3"]
    assert s.n_items == len(ids)
    # Relevance is highly prevalent in the review set, so AC1 exceeds kappa for every pair.
    for pair, ac1 in s.ac1_pairs.items():
        assert -1.0 <= s.cohen_kappa_pairs[pair] < ac1 <= 1.0
    assert s.ac1_pairwise_mean == pytest.approx(sum(s.ac1_pairs.values()) / 3)
