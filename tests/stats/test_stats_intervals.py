"""compare(interval=...): the Student t interval against scipy, and everything else unchanged."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import scipy.stats
import xarray as xr
from threadpoolctl import threadpool_limits

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.stats import (
    INTERVALS,
    bca_interval,
    bootstrap,
    intervals,
    t_interval,
    unit_values,
)
from metricalc.stats import compare as stats_compare
from tests.cli_helpers import run_cli


def compare(*args: Any, **kwargs: Any) -> xr.Dataset:
    """:func:`metricalc.stats.compare` with per-query units unless the test names others: the
    intervals of unit differences are what this module tests."""
    return stats_compare(*args, **{"pair_by": "query", **kwargs})

N = 3_000  # above bootstrap.SCIPY_MAX_UNITS: the BCa interval takes the fast engine


def scipy_t(d: np.ndarray, level: float) -> tuple[float, float]:
    interval = scipy.stats.ttest_rel(d, np.zeros_like(d)).confidence_interval(level)
    return float(interval.low), float(interval.high)


def test_interval_names():
    assert INTERVALS == ("auto", "bca", "t")


def test_auto_is_bca_up_to_the_unit_limit_and_t_above(monkeypatch):
    cube = random_cube(4)  # N = 3000 queries, comparisons of 2800 to 3000 paired units
    bca = compare(cube, n_resamples=300, interval="bca")
    t = compare(cube, n_resamples=300, interval="t")
    xr.testing.assert_identical(compare(cube, n_resamples=300), bca)
    monkeypatch.setattr(intervals, "BCA_MAX_UNITS", 2_999)  # the largest comparison has 3000
    xr.testing.assert_identical(compare(cube, n_resamples=300), t)
    monkeypatch.setattr(intervals, "BCA_MAX_UNITS", 3_000)
    xr.testing.assert_identical(compare(cube, n_resamples=300), bca)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
def test_t_interval_is_scipys_ttest_rel_interval(level):
    rng = np.random.default_rng(int(level * 1000))
    for n in (2, 3, 7, 100, 5_000):
        for d in (
            rng.normal(0.05, 0.2, n),
            rng.choice([-0.5, 0.0, 0.0, 0.25, 1.0], n),  # ties and zeros
            np.r_[np.zeros(n - 1), 1.0],  # one non-zero difference
        ):
            if (d == d[0]).all():  # constant: below
                continue
            low, high = t_interval(d, confidence_level=level)
            ref_low, ref_high = scipy_t(d, level)
            assert low == pytest.approx(ref_low, rel=1e-12, abs=1e-15)
            assert high == pytest.approx(ref_high, rel=1e-12, abs=1e-15)
            assert low < d.mean() < high


def test_t_interval_by_hand_and_constant_differences():
    # mean 0.2, s_d^2 = 0.02 / 3, n = 4, t_{3, 0.975} = 3.18245
    low, high = t_interval(np.array([0.1, 0.2, 0.3, 0.2]))
    half = 3.182446305284263 * np.sqrt(0.02 / 3 / 4)
    assert (low, high) == pytest.approx((0.2 - half, 0.2 + half), rel=1e-12)
    assert t_interval(np.full(6, 0.125)) == (0.125, 0.125)
    assert t_interval(np.zeros(6)) == (0.0, 0.0)


@pytest.mark.parametrize(
    "bad", [np.array([0.1]), np.array([0.1, np.nan]), np.ones((2, 3)), np.array([0.1, np.inf])]
)
def test_t_interval_refuses_bad_differences(bad):
    with pytest.raises(InvalidInputError, match="differences must be a finite 1-D array"):
        t_interval(bad)


def random_cube(seed: int) -> xr.Dataset:
    """4 descriptors x N queries: AP with ties, exact zeros between systems, holes, a copy."""
    rng = np.random.default_rng(seed)
    base = rng.choice(np.r_[0.0, 1.0, rng.uniform(0, 1, 40)], N)
    other = np.where(rng.random(N) < 0.4, base, rng.choice([0.0, 0.5, 1.0, 1 / 3], N))
    noisy = np.clip(base + rng.normal(0.02, 0.1, N), 0, 1)
    values = np.vstack([base, other, noisy, base])
    values[1, rng.random(N) < 0.05] = np.nan
    values[2, :200] = np.nan
    coords = {"scene": np.repeat([f"i_s{s}" for s in range(30)], N // 30),
              "pair": np.tile(["1-2", "1-3"], N // 2), "keypoint_set": np.full(N, "sift"),
              "query_keypoint": np.arange(N)}  # fmt: skip
    return qc.new_cube(
        ["a", "b", "c", "copy"], coords,
        {"ap": values, "n_relevant": np.where(np.isnan(values), 0, 1)},
        attrs={**qc.DEFAULT_ATTRS, "keypoints": "locked:sift"},
    )  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("test", ["auto", "wilcoxon"])
def test_the_t_interval_changes_only_the_interval(seed, test):
    cube = random_cube(seed)
    bca = compare(cube, test=test, n_resamples=500, seed=seed, interval="bca")
    t = compare(cube, test=test, n_resamples=500, seed=seed, interval="t")
    assert bca.attrs["interval"] == "bca" and t.attrs["interval"] == "t"
    others = [n for n in bca.data_vars if n not in ("ci_low", "ci_high", "interval_method")]
    xr.testing.assert_identical(
        bca[others].drop_attrs(deep=False), t[others].drop_attrs(deep=False)
    )
    assert {k: v for k, v in bca.attrs.items() if k != "interval"} == {
        k: v for k, v in t.attrs.items() if k != "interval"
    }
    units = unit_values(cube).values
    names = ["a", "b", "c", "copy"]
    for row in t.comparison.values:
        one = t.sel(comparison=row)
        x, y = units[names.index(row[0])], units[names.index(row[1])]
        both = np.isfinite(x) & np.isfinite(y)
        d = (x - y)[both]
        if (d == d[0]).all():  # copy vs a: [0, 0], as the BCa interval
            assert float(one.ci_low) == float(one.ci_high) == 0.0
            assert float(bca.sel(comparison=row).ci_low) == 0.0
            continue
        ref_low, ref_high = scipy_t(d, 0.95)
        assert float(one.ci_low) == pytest.approx(ref_low, rel=1e-12)
        assert float(one.ci_high) == pytest.approx(ref_high, rel=1e-12)


def test_the_t_interval_skips_the_bootstrap_memory_check(monkeypatch):
    monkeypatch.setenv("METRICALC_MEMORY_LIMIT", "1K")
    cube = random_cube(0)
    with pytest.raises(InvalidInputError, match="n_resamples=1000"):
        compare(cube, n_resamples=1_000)
    assert compare(cube, n_resamples=1_000, interval="t").sizes["comparison"] == 6


def test_interval_option_is_checked():
    with pytest.raises(InvalidInputError, match="interval"):
        compare(random_cube(0), interval="percentile")


def test_cli_interval(tmp_path):
    path = tmp_path / "cube.nc"
    qc.save(random_cube(3), path)
    result = run_cli("compare", str(path), "--baseline", "a", "--n-resamples", "200",
                     "--interval", "t", "--json", "--pair-by", "query")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    direct = compare(random_cube(3), baseline="a", n_resamples=200, interval="t")
    assert [row["ci_low"] for row in rows] == direct.ci_low.values.tolist()
    table = run_cli("compare", str(path), "--baseline", "a", "--n-resamples", "200",
                    "--interval", "t", "--pair-by", "query")  # fmt: skip
    assert table.returncode == 0 and "95% t CI" in table.stdout
    default = run_cli("compare", str(path), "--baseline", "a", "--n-resamples", "200",
                      "--pair-by", "query")  # fmt: skip
    assert "95% BCa CI" in default.stdout


def previous_resampled_means(D: np.ndarray, n_resamples: int, rng: np.random.Generator):
    """bootstrap._resampled_means as it was before the completion step gathered whole rows
    (``Dt[drawn, :n_rows]``), line by line, single-threaded."""
    n_rows, n = D.shape
    Dt = np.ones((n, n_rows + 1))
    Dt[:, :n_rows] = D.T
    mean = max(0.0, 1.0 - 5.0 / float(np.sqrt(n)))
    blocks = []
    sizes = [min(64, n_resamples - s) for s in range(0, n_resamples, 64)]
    for size, generator in zip(sizes, rng.spawn(len(sizes)), strict=True):
        total = np.zeros((size, n_rows + 1))
        todo = np.arange(size) if mean > 0 else np.empty(0, dtype=np.int64)
        while todo.size:
            total[todo] = bootstrap._poisson_sums(Dt, todo.size, mean, generator)
            todo = todo[total[todo, -1] > n]
        missing = n - total[:, -1].astype(np.int64)
        rows = np.repeat(np.arange(size), missing)
        extra = Dt[generator.integers(0, n, size=rows.size), :n_rows]
        for r in range(n_rows):
            total[:, r] += np.bincount(rows, weights=extra[:, r], minlength=size)
        blocks.append(total[:, :n_rows].T / n)
    return np.concatenate(blocks, axis=1)


@pytest.mark.parametrize("n", [30, 999, 5_000])
def test_resampled_means_equal_the_previous_implementation(n):
    rng = np.random.default_rng(n)
    D = np.vstack([
        rng.choice([-1.0, 0.0, 0.0, 0.5, 1 / 3], n),  # ties and zeros
        rng.normal(0, 0.3, n),
        np.where(rng.random(n) < 0.7, 0.0, rng.uniform(-1, 1, n)),  # mostly zero
    ])  # fmt: skip
    with threadpool_limits(limits=1, user_api="blas"):  # as in_threads runs the blocks
        expected = previous_resampled_means(D, 300, np.random.default_rng(7))
    got = bootstrap._resampled_means(D, 300, np.random.default_rng(7))
    assert np.array_equal(got, expected)
    # and so the interval compare reports: the same on the same seed
    low, high = bca_interval(D, n_resamples=300, rng=np.random.default_rng(7), engine="fast")
    assert np.isfinite(low).all() and (low < high).all()


@pytest.mark.parametrize(("interval", "words"), [("t", "Student t"), ("bca", "BCa bootstrap")])
def test_a_study_names_the_interval_it_computed(tmp_path, make_query_cube, interval, words):
    from metricalc.report.builder import build
    from metricalc.report.study import study_from_dict

    qc.save(make_query_cube({"good": 0.9, "poor": 0.1}, seed=3), tmp_path / "cube.nc")
    raw = {"data": {"cube": "cube.nc"}, "metrics": ["true_map_micro"], "baseline": "poor",
           "tests": {"n_resamples": 199, "rank": False, "interval": interval, "pair_by": "query"},
           "figures": ["forest"], "outputs": ["html"]}  # fmt: skip
    report = build(study_from_dict(raw, source=tmp_path / "s.yaml"), out=tmp_path / "out")
    assert report.tests["true_map_micro"].comparison.attrs["interval"] == interval
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"with its {words} confidence interval (per comparison, not corrected)" in html
    assert f"95% {words} CIs" in html
