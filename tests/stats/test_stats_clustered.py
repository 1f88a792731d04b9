"""The cluster inference of a table statistic (metricalc.stats.statistics, .clustered):
against scipy on unclustered data, against a materialised resample / swap, and its error rates
on simulated clustered cubes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from metricalc.datasets.clustered import clustered_cube
from metricalc.stats import compare
from metricalc.stats.clustered import intraclass_correlation, paired_inference
from metricalc.stats.statistics import RatioStatistic, UnitStatistic, weighted_mean


def mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def unclustered(x: np.ndarray, y: np.ndarray) -> UnitStatistic:
    n = len(x)
    return UnitStatistic("m", "mean", ["x", "y"], np.arange(n).astype(str), np.stack([x, y]),
                         np.arange(n), weighted_mean)  # fmt: skip


def infer(statistic, n_resamples: int = 10_000, seed: int = 0, expand: bool = True):
    return paired_inference(statistic, 0, 1, n_resamples=n_resamples, expand=expand,
                            resample_rng=np.random.default_rng(seed),
                            swap_rng=np.random.default_rng(seed + 1))  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_exact_randomization_equals_scipy_permutation_test(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 13))
    x = rng.integers(0, 5, n) / 4.0  # ties and zero differences
    y = rng.integers(0, 5, n) / 4.0
    got = infer(unclustered(x, y))
    expected = scipy.stats.permutation_test(
        (x, y), mean_difference, permutation_type="samples", n_resamples=np.inf,
        vectorized=True,
    ).pvalue  # fmt: skip
    assert got.exact and got.pvalue == pytest.approx(min(1.0, expected), abs=1e-12)
    assert got.estimate == pytest.approx(float(np.mean(x - y)), abs=1e-12)


def test_random_swaps_agree_with_scipy_permutation_test():
    rng = np.random.default_rng(3)
    x = rng.normal(0.5, 0.2, 40)
    y = x - rng.normal(0.05, 0.2, 40)
    got = infer(unclustered(x, y), n_resamples=20_000)
    expected = scipy.stats.permutation_test(
        (x, y), mean_difference, permutation_type="samples", n_resamples=20_000,
        vectorized=True, rng=np.random.default_rng(0),
    ).pvalue  # fmt: skip
    assert not got.exact and got.pvalue == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize("seed", range(3))
def test_cluster_bootstrap_of_unclustered_data_is_scipys_paired_bca(seed):
    rng = np.random.default_rng(10 + seed)
    x = rng.normal(0.5, 0.2, 30)
    y = x - rng.normal(0.05, 0.15, 30) * rng.random(30)
    got = infer(unclustered(x, y), n_resamples=40_000, seed=seed, expand=False)
    expected = scipy.stats.bootstrap(
        (x, y), mean_difference, paired=True, vectorized=True, n_resamples=40_000,
        method="BCa", rng=np.random.default_rng(seed),
    ).confidence_interval  # fmt: skip
    width = expected.high - expected.low
    assert got.interval == "bca"
    assert got.low == pytest.approx(expected.low, abs=0.03 * width)
    assert got.high == pytest.approx(expected.high, abs=0.03 * width)


def ratio_statistic(rng: np.random.Generator, clusters: int = 6) -> tuple[RatioStatistic, list]:
    """A pooled mean of 2 systems over clusters of unequal sizes, and its raw unit values."""
    units = [rng.random((2, int(rng.integers(1, 6)))) for _ in range(clusters)]
    numerator = np.stack([[u[s].sum() for u in units] for s in range(2)])[:, :, None]
    denominator = np.stack([[u.shape[1] for u in units]] * 2).astype(float)[:, :, None]
    labels = np.array([f"s{c}" for c in range(clusters)])
    return RatioStatistic("m", "pooled mean", ["a", "b"], labels, numerator, denominator), units


def test_weights_and_swaps_equal_the_materialised_data_set():
    rng = np.random.default_rng(4)
    statistic, units = ratio_statistic(rng)
    weights = rng.integers(0, 4, (20, len(units))).astype(float)
    weights[0] = 0
    weights[0, 2] = 1
    for system in (0, 1):
        got = statistic.weighted(system, weights)
        for row, w in zip(got, weights, strict=True):
            parts = [np.repeat(u[system], int(k)) for u, k in zip(units, w, strict=True)]
            pooled = np.concatenate(parts)
            assert row == pytest.approx(pooled.mean(), abs=1e-12)
    swap = rng.random((10, len(units))) < 0.5
    keep = np.ones(len(units), dtype=bool)
    keep[1] = False
    got = statistic.swapped_difference(0, 1, swap, keep)
    for row, pattern in zip(got, swap, strict=True):
        kept = [(u, s) for u, s, k in zip(units, pattern, keep, strict=True) if k]
        a = np.concatenate([u[1 if s else 0] for u, s in kept])
        b = np.concatenate([u[0 if s else 1] for u, s in kept])
        assert row == pytest.approx(a.mean() - b.mean(), abs=1e-12)


def test_dropped_clusters_are_counted_and_few_clusters_give_no_inference():
    statistic, _ = ratio_statistic(np.random.default_rng(5), clusters=4)
    statistic.denominator[1, 0] = 0.0
    statistic.numerator[1, 0] = 0.0
    got = infer(statistic)
    assert got.clusters == 3 and got.dropped == 1
    assert np.isfinite(got.pvalue)
    few = paired_inference(statistic, 0, 1, resample_rng=np.random.default_rng(0),
                           swap_rng=np.random.default_rng(0), min_clusters=5)  # fmt: skip
    assert np.isnan(few.pvalue) and np.isnan(few.low) and np.isfinite(few.estimate)


def test_intraclass_correlation_by_hand():
    # two clusters of two: means 1 and 3, within deviations +-0.5
    icc, deff = intraclass_correlation(np.array([0.5, 1.5, 2.5, 3.5]), np.array([0, 0, 1, 1]))
    msb, msw = 2 * ((1 - 2) ** 2 + (3 - 2) ** 2) / 1, (4 * 0.25) / 2
    expected = (msb - msw) / (msb + (2 - 1) * msw)
    assert icc == pytest.approx(expected) and deff == pytest.approx(1 + (2 - 1) * expected)


def test_the_default_tests_of_clustered_cubes_hold_their_level_and_find_a_scene_level_gain():
    """The simulation of docs/stats.md, small and seeded: 16 scenes, no difference over scenes.
    The default compare (scenes) keeps its level and covers the truth; treating queries as
    independent rejects most of the time; a +0.06 gain on every query is found."""
    trials, rng = 40, np.random.default_rng(2026)
    rejected = {"scene": 0, "pooled": 0, "query": 0}
    covered = 0
    for trial in range(trials):
        cube = clustered_cube(rng, pairs=3, queries=20)
        by_scene = compare(cube, baseline="b", n_resamples=400, seed=trial)
        pooled = compare(cube, baseline="b", mean_over="query", n_resamples=400, seed=trial)
        by_query = compare(cube, baseline="b", pair_by="query", n_resamples=400, seed=trial)
        rejected["scene"] += bool(by_scene.reject.item())
        rejected["pooled"] += bool(pooled.reject.item())
        rejected["query"] += bool(by_query.reject.item())
        covered += float(by_scene.ci_low.item()) <= 0.0 <= float(by_scene.ci_high.item())
    assert rejected["scene"] <= 0.1 * trials and rejected["pooled"] <= 0.1 * trials
    assert covered >= 0.9 * trials
    assert rejected["query"] >= 0.4 * trials  # the per-query test: far above its level
    found = 0
    for trial in range(20):
        cube = clustered_cube(rng, pairs=3, queries=20, gain=0.06)
        found += bool(compare(cube, baseline="b", n_resamples=400, seed=trial).reject.item())
    assert found >= 10
