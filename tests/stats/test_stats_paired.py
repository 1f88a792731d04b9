"""Paired tests, effect sizes and the sign-flip randomization test against scipy / statsmodels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.contingency_tables import mcnemar

from metricalc.errors import InvalidInputError
from metricalc.stats import cohens_dz, paired_test, rank_biserial, sign_flip_pvalues
from metricalc.stats.paired import MCNEMAR_EXACT_BELOW

SIZES = (5, 6, 7, 9, 20, 49, 50, 51, 80, 300)


def random_pair(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two paired samples: continuous, AP-like rationals or small integers (ties and zeros)."""
    kind = rng.integers(0, 3)
    if kind == 0:
        x = rng.normal(size=n)
        return x, x + rng.normal(rng.normal(0, 0.5), 1, size=n)
    if kind == 1:
        return 1 / rng.integers(1, 6, size=n), 1 / rng.integers(1, 6, size=n)
    return rng.integers(0, 4, size=n).astype(float), rng.integers(0, 4, size=n).astype(float)


def cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        x, y = random_pair(rng, int(rng.choice(SIZES)))
        if (x != y).any():
            yield x, y


# ---------------------------------------------------------------------------------------------
# p-values equal the reference libraries called directly on the same vectors
# ---------------------------------------------------------------------------------------------


def test_wilcoxon_equals_scipy():
    for x, y in cases(1, 150):  # scipy enumerates the exact null of small tied samples: slow
        reference = scipy.stats.wilcoxon(x, y)
        assert paired_test(x, y, test="wilcoxon") == (reference.statistic, reference.pvalue)


def test_ttest_equals_scipy():
    for x, y in cases(2, 300):
        d = x - y
        if (d == d[0]).all():
            continue
        reference = scipy.stats.ttest_rel(x, y)
        assert paired_test(x, y, test="ttest") == (reference.statistic, reference.pvalue)


def test_sign_test_equals_binomial_test_and_hand_values():
    for x, y in cases(3, 300):
        d = x - y
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        expected = scipy.stats.binomtest(wins, wins + losses, 0.5).pvalue
        assert paired_test(x, y, test="sign") == (wins, expected)
    # 5 wins, 1 loss, 2 ties: p = 2 * (C(6,0) + C(6,1)) / 2**6
    x = np.array([1, 1, 1, 1, 1, 0, 0.5, 0.5])
    y = np.array([0, 0, 0, 0, 0, 1, 0.5, 0.5])
    assert paired_test(x, y, test="sign") == (5.0, 2 * 7 / 64)


def test_mcnemar_equals_statsmodels_exact_when_small_and_chi_square_when_large():
    rng = np.random.default_rng(4)
    for n in (5, 10, 30, 60, 200, 1000):
        for _ in range(20):
            x = (rng.random(n) < rng.random()).astype(float)
            y = (rng.random(n) < rng.random()).astype(float)
            if (x == y).all():
                continue
            table = [[np.sum((x == 1) & (y == 1)), np.sum((x == 1) & (y == 0))],
                     [np.sum((x == 0) & (y == 1)), np.sum((x == 0) & (y == 0))]]
            b, c = table[0][1], table[1][0]
            exact = b + c < MCNEMAR_EXACT_BELOW
            reference = mcnemar(table, exact=exact, correction=True)
            assert paired_test(x, y, test="mcnemar") == (reference.statistic, reference.pvalue)
            if exact:  # binomial: 2 * P(Bin(b + c, 1/2) <= min(b, c)), capped at 1
                by_hand = min(1.0, 2 * scipy.stats.binom.cdf(min(b, c), b + c, 0.5))
            else:  # chi-square with continuity correction, 1 degree of freedom
                by_hand = scipy.stats.chi2.sf((abs(b - c) - 1) ** 2 / (b + c), 1)
            assert reference.pvalue == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("test", ["wilcoxon", "ttest", "sign", "mcnemar"])
def test_all_zero_differences_are_refused(test):
    x = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    with pytest.raises(InvalidInputError, match="all 6 paired differences are zero"):
        paired_test(x, x.copy(), test=test)


def test_ttest_refuses_constant_differences_and_mcnemar_non_binary_values():
    x = np.arange(6.0)
    with pytest.raises(InvalidInputError, match="t statistic is undefined"):
        paired_test(x + 0.5, x, test="ttest")
    with pytest.raises(InvalidInputError, match="binary outcomes"):
        paired_test(x / 10 + 0.1, x / 10, test="mcnemar")
    with pytest.raises(InvalidInputError, match="test must be one of"):
        paired_test(x, x + 1, test="randomization")


# ---------------------------------------------------------------------------------------------
# Effect sizes by hand
# ---------------------------------------------------------------------------------------------


def slow_rank_biserial(d: np.ndarray) -> float:
    """Average ranks of |d| among the non-zero differences, counted by brute force."""
    nonzero = [v for v in d if v != 0]
    if not nonzero:
        return float("nan")
    absolute = [abs(v) for v in nonzero]
    ranks = [
        sum(b < a for b in absolute) + 1 + (sum(a == b for b in absolute) - 1) / 2
        for a in absolute
    ]
    plus = sum(r for r, v in zip(ranks, nonzero, strict=True) if v > 0)
    minus = sum(r for r, v in zip(ranks, nonzero, strict=True) if v < 0)
    return (plus - minus) / (plus + minus)


def test_rank_biserial_by_hand_and_from_the_wilcoxon_rank_sum():
    assert rank_biserial(np.array([0.3, 0.1, -0.2, 0.0])) == pytest.approx((3 + 1 - 2) / 6)
    assert rank_biserial(np.array([0.5, 0.5, -0.5, 0.0])) == pytest.approx((2 + 2 - 2) / 6)
    assert np.isnan(rank_biserial(np.zeros(4)))
    for x, y in cases(5, 200):
        d = x - y
        assert rank_biserial(d) == pytest.approx(slow_rank_biserial(d), abs=1e-12)
        # r = 2 T+ / S - 1 with T+ scipy's one-sided Wilcoxon statistic and S = n'(n'+1)/2
        n = int((d != 0).sum())
        t_plus = scipy.stats.wilcoxon(d, alternative="greater", method="asymptotic").statistic
        assert rank_biserial(d) == pytest.approx(2 * t_plus / (n * (n + 1) / 2) - 1, abs=1e-12)


def test_cohens_dz_by_hand():
    assert cohens_dz(np.array([1.0, 2.0, 3.0])) == 2.0
    assert cohens_dz(np.array([0.1, 0.1, 0.1])) == np.inf
    assert cohens_dz(np.array([-0.3, -0.3])) == -np.inf
    assert np.isnan(cohens_dz(np.zeros(5)))
    for x, y in cases(6, 100):
        d = x - y
        if (d == d[0]).all():
            continue
        by_hand = np.mean(d) / np.sqrt(np.sum((d - np.mean(d)) ** 2) / (len(d) - 1))
        assert cohens_dz(d) == pytest.approx(by_hand, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# The randomization test: exact enumeration and scipy.stats.permutation_test
# ---------------------------------------------------------------------------------------------


def exact_sign_flip_p(d: np.ndarray) -> float:
    """P(|sum of s_i d_i| >= |sum d_i|) over all 2^n sign vectors."""
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=len(d))))
    sums = np.abs(signs @ d)
    return float(np.mean(sums >= abs(d.sum()) - 1e-9 * np.abs(d).sum()))


def monte_carlo_bound(p: float, m: int) -> float:
    """Five standard errors of (b + 1) / (m + 1) around p, plus its bias."""
    return 5 * np.sqrt(p * (1 - p) / m) + 1 / (m + 1)


def test_randomization_agrees_with_exact_enumeration_ties_zeros_and_binary_included():
    rng = np.random.default_rng(7)
    m = 10_000
    rows = [
        np.array([1.0, 1, 1, 1, 1, 1, 1, -1]),  # binary: many flipped sums equal the observed
        np.array([0.5, 0.5, 0.25, 0, 0, -0.25, 0.5, 1 / 3]),
        np.array([0.0, 0, 0, 0, 0, 0]),  # all zero: p = 1
    ]
    rows += [rng.choice([-1, -0.5, 0, 0.5, 1, 1], size=int(rng.integers(5, 13))) for _ in range(8)]
    rows += [rng.normal(0.3, 1, size=int(rng.integers(5, 13))) for _ in range(8)]
    for d in rows:
        p = sign_flip_pvalues(d, n_resamples=m, rng=np.random.default_rng(int(rng.integers(1e6))))
        exact = exact_sign_flip_p(d)
        assert abs(p - exact) <= monte_carlo_bound(exact, m), (d, p, exact)
    assert sign_flip_pvalues(np.zeros(6), n_resamples=99, rng=rng) == 1.0


def test_randomization_agrees_with_scipy_permutation_test():
    rng = np.random.default_rng(8)
    m = 10_000
    for n in (8, 12, 20, 40, 100):
        for _ in range(3):
            x, y = random_pair(rng, n)
            reference = scipy.stats.permutation_test(
                (x, y),
                lambda a, b, axis: np.mean(a - b, axis=axis),
                permutation_type="samples",
                n_resamples=m,
                vectorized=True,
                rng=int(rng.integers(1e6)),
            ).pvalue
            p = sign_flip_pvalues(x - y, n_resamples=m, rng=np.random.default_rng(n))
            # both are Monte Carlo estimates (scipy is exact for n <= 13)
            assert abs(p - reference) <= 2 * monte_carlo_bound(reference, m), (n, p, reference)


def test_randomization_rows_share_signs_and_zero_columns_change_nothing():
    rng = np.random.default_rng(9)
    d = rng.normal(0.1, 1, size=50)
    p = sign_flip_pvalues(d, n_resamples=2_000, rng=np.random.default_rng(3))
    padded = np.r_[d, np.zeros(10)]  # same 64-unit word: the other units get the same signs
    assert sign_flip_pvalues(padded, n_resamples=2_000, rng=np.random.default_rng(3)) == p
    both = sign_flip_pvalues(np.vstack([d, -d]), n_resamples=2_000, rng=np.random.default_rng(3))
    assert both.tolist() == [p, p]  # |sum| is the same for d and -d under shared flips
    again = sign_flip_pvalues(d, n_resamples=2_000, rng=np.random.default_rng(3))
    assert again == p and 1 / 2_001 <= p <= 1


def test_randomization_blocks_cover_many_units_and_permutations():
    """More units than a block (1,024) and permutations not a multiple of a block (512)."""
    rng = np.random.default_rng(10)
    d = rng.normal(0.02, 1, size=3_000)
    exact_normal = 2 * scipy.stats.norm.sf(abs(d.sum()) / np.sqrt((d**2).sum()))
    p = sign_flip_pvalues(d, n_resamples=1_500, rng=rng)
    assert abs(p - exact_normal) <= monte_carlo_bound(exact_normal, 1_500) + 0.01


def test_randomization_refuses_nan_and_bad_counts():
    with pytest.raises(InvalidInputError, match="finite"):
        sign_flip_pvalues(np.array([1.0, np.nan]), rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="n_resamples"):
        sign_flip_pvalues(np.ones(5), n_resamples=0, rng=np.random.default_rng(0))
