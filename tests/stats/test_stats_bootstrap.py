"""The BCa bootstrap CI of the mean: scipy itself for small samples, the fast engine against it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import metricalc as mc
from metricalc.core.kernels import CHUNK_ELEMENTS
from metricalc.errors import InvalidInputError
from metricalc.stats import bca_interval
from metricalc.stats.bootstrap import (
    SCIPY_MAX_UNITS,
    _multinomial_means,
    _resampled_means,
    acceleration,
)


def scipy_bca(D: np.ndarray, seed: int, *, n_resamples: int = 10_000, level: float = 0.95):
    result = scipy.stats.bootstrap(
        (D,),
        np.mean,
        n_resamples=n_resamples,
        batch=max(1, CHUNK_ELEMENTS // D.size),
        vectorized=True,
        axis=-1,
        confidence_level=level,
        method="BCa",
        rng=np.random.default_rng(seed),
    )
    return result.confidence_interval.low, result.confidence_interval.high


def ap_like(rng: np.random.Generator, n: int) -> np.ndarray:
    """Differences of two AP values from rank statistics: ties, zeros, long tail."""
    better = rng.geometric(0.3, size=(2, n)) - 1
    ties = rng.binomial(2, 0.2, size=(2, n))
    ap = mc.ap_from_rank_stats(better, ties)
    return ap[0] - ap[1]


def test_small_samples_equal_scipy_exactly():
    rng = np.random.default_rng(1)
    for n in (5, 8, 30, 200, SCIPY_MAX_UNITS):
        for kind in range(3):
            d = (rng.normal(0.05, 0.3, n), ap_like(rng, n), rng.integers(-1, 2, n) * 1.0)[kind]
            if (d == d[0]).all():
                continue
            seed = int(rng.integers(1e6))
            low, high = bca_interval(d, rng=np.random.default_rng(seed))
            assert (low, high) == scipy_bca(d, seed)
    D = rng.normal(0.1, 0.2, size=(3, 60))  # rows share the resamples, as in scipy
    low, high = bca_interval(D, confidence_level=0.9, rng=np.random.default_rng(5))
    reference = scipy_bca(D, 5, level=0.9)
    assert low.tolist() == reference[0].tolist() and high.tolist() == reference[1].tolist()


def test_fast_engine_agrees_with_scipy_within_monte_carlo_error():
    """The BCa bound's Monte Carlo sd with 10,000 resamples is about 0.03 standard errors of
    the mean; two independent runs differ by less than 0.2 standard errors (5 sd)."""
    rng = np.random.default_rng(2)
    samples = {
        "normal": rng.normal(0.05, 0.3, 1_500),
        "skewed": rng.exponential(0.2, 2_000) - 0.1,
        "ap differences": ap_like(rng, 2_500),
        "binary wins and losses": rng.choice([-1.0, 0.0, 0.0, 1.0], size=3_000),
    }
    for name, d in samples.items():
        se = d.std(ddof=1) / np.sqrt(d.size)
        fast = bca_interval(d, rng=np.random.default_rng(11), engine="fast")
        reference = scipy_bca(d, 12)
        assert abs(fast[0] - reference[0]) < 0.2 * se, name
        assert abs(fast[1] - reference[1]) < 0.2 * se, name
        assert fast[0] < d.mean() < fast[1]
        auto = bca_interval(d, rng=np.random.default_rng(11))  # above SCIPY_MAX_UNITS: fast
        assert auto == fast


def test_fast_engine_resamples_shared_between_rows():
    rng = np.random.default_rng(3)
    D = rng.normal(0.1, 0.3, size=(2, 1_200))
    low, high = bca_interval(np.vstack([D, D[:1]]), rng=np.random.default_rng(4), engine="fast")
    assert low[0] == low[2] and high[0] == high[2]  # identical rows, identical resamples
    for r in range(2):
        reference = scipy_bca(D[r], 20 + r)
        se = D[r].std(ddof=1) / np.sqrt(D.shape[1])
        assert abs(low[r] - reference[0]) < 0.2 * se and abs(high[r] - reference[1]) < 0.2 * se


def test_acceleration_equals_the_jackknife_formula():
    """scipy's (and Efron & Tibshirani's 14.15) acceleration from explicit leave-one-out means."""
    rng = np.random.default_rng(4)
    for n in (3, 10, 57):
        d = rng.exponential(size=n)
        jack = np.array([np.delete(d, i).mean() for i in range(n)])
        u = (n - 1) * (jack.mean() - jack)
        slow = np.sum(u**3) / n**3 / (6 * (np.sum(u**2) / n**2) ** 1.5)
        assert acceleration(d[None, :])[0] == pytest.approx(slow, rel=1e-9)


def binomial_fit(counts: np.ndarray, n: int) -> float:
    """Chi-square goodness-of-fit p-value of counts against Binomial(n, 1/n) (tail pooled)."""
    draws = len(counts)
    expected = scipy.stats.binom.pmf(np.arange(5), n, 1 / n) * draws
    observed = np.bincount(np.minimum(counts, 4), minlength=5)
    expected[-1] = draws - expected[:-1].sum()
    keep = expected > 5
    observed = np.r_[observed[keep], observed[~keep].sum()]
    expected = np.r_[expected[keep], expected[~keep].sum()]
    observed, expected = observed[expected > 0], expected[expected > 0]
    return float(scipy.stats.chisquare(observed, expected).pvalue)


@pytest.mark.parametrize("n", [3, 7, 26, 40, 1_000, 20_000])
def test_resampled_counts_are_multinomial(n):
    """Unit vectors read one unit's count W_i ~ Binomial(n, 1/n); a row of ones reads the total
    (exactly n); two units' counts have covariance -1/n."""
    resamples = 20_000 if n <= 1_000 else 2_000
    rows = np.vstack([np.eye(2, n), np.ones(n)])
    means = _resampled_means(rows, resamples, np.random.default_rng(n)) * n
    assert np.array_equal(means[2], np.full(resamples, float(n)))
    counts = np.round(means[:2]).astype(np.int64)
    assert binomial_fit(counts[0], n) > 1e-4 and binomial_fit(counts[1], n) > 1e-4
    covariance = np.cov(counts[0], counts[1])[0, 1]
    assert abs(covariance + 1 / n) < 5 * np.sqrt((1 + 1 / n) / resamples)


def test_multinomial_over_distinct_values_matches_the_binomial():
    """Values {0, 1} with c ones: the resampled mean is Binomial(n, c/n) / n."""
    n, ones = 500, 120
    means = _multinomial_means(np.array([0.0, 1.0]), np.array([n - ones, ones]), 20_000,
                               np.random.default_rng(0))
    counts = np.round(means * n).astype(np.int64)
    grid = np.arange(60, 181)
    expected = scipy.stats.binom.pmf(grid, n, ones / n) * len(counts)
    observed = np.array([(counts == k).sum() for k in grid])
    keep = expected > 5
    statistic = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert scipy.stats.chi2.sf(statistic, keep.sum() - 1) > 1e-4


def test_constant_rows_and_bad_input():
    low, high = bca_interval(np.full((2, 10), 0.25), rng=np.random.default_rng(0))
    assert low.tolist() == [0.25, 0.25] and high.tolist() == [0.25, 0.25]
    with pytest.raises(InvalidInputError, match="finite"):
        bca_interval(np.array([0.1, np.nan, 0.2]), rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="n >= 2"):
        bca_interval(np.array([0.1]), rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="confidence_level"):
        bca_interval(np.arange(5.0), confidence_level=95, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="engine"):
        bca_interval(np.arange(5.0), engine="numba", rng=np.random.default_rng(0))
