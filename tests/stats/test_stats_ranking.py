"""Corrections, Friedman / Nemenyi ranking and power against statsmodels, scipy and Demsar 2006."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.special
import scipy.stats
from statsmodels.stats.power import TTestPower

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.stats import (
    CORRECTIONS,
    correct,
    critical_difference,
    nemenyi_q,
    power,
    rank_systems,
)
from tests.shared_checks import reference_multipletests

# Demsar (2006), Table 5: critical values of the two-tailed Nemenyi test, k = 2..10
DEMSAR_Q05 = (1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164)
DEMSAR_Q10 = (1.645, 2.052, 2.291, 2.459, 2.589, 2.693, 2.780, 2.855, 2.920)


# ---------------------------------------------------------------------------------------------
# Multiple-comparison correction
# ---------------------------------------------------------------------------------------------


def test_corrections_equal_multipletests_with_the_method_passed_explicitly():
    rng = np.random.default_rng(0)
    for _ in range(12):
        m = int(rng.integers(1, 30))
        p = np.where(rng.random(m) < 0.3, rng.random(m) * 0.01, rng.random(m))
        p[rng.random(m) < 0.2] = p[0]  # tied p-values
        for method in ("holm", "bonferroni", "fdr_bh"):
            expected = reference_multipletests(p, method)
            assert correct(p, method=method).tolist() == expected.tolist()
        assert correct(p, method="none").tolist() == p.tolist()
        assert correct(p).tolist() == reference_multipletests(p, "holm").tolist()


def test_holm_by_hand_and_unknown_method():
    # sorted 0.01, 0.03, 0.04: 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
    assert correct([0.04, 0.01, 0.03]).tolist() == pytest.approx([0.06, 0.03, 0.06])
    assert "holm" in CORRECTIONS
    with pytest.raises(InvalidInputError, match="method must be one of"):
        correct([0.1], method="hs")


# ---------------------------------------------------------------------------------------------
# Nemenyi critical difference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(2, 11))
def test_q_alpha_equals_demsars_table(k):
    assert nemenyi_q(k, 0.05) == pytest.approx(DEMSAR_Q05[k - 2], abs=1e-3)
    assert nemenyi_q(k, 0.10) == pytest.approx(DEMSAR_Q10[k - 2], abs=1e-3)


@pytest.mark.parametrize("k", range(2, 11))
@pytest.mark.parametrize("n", [5, 24, 116, 10_000])
def test_critical_difference_equals_the_formula_with_demsars_q(k, n):
    for alpha, table in ((0.05, DEMSAR_Q05), (0.10, DEMSAR_Q10)):
        expected = table[k - 2] * np.sqrt(k * (k + 1) / (6 * n))
        assert critical_difference(k, n, alpha) == pytest.approx(expected, rel=5e-4)


# ---------------------------------------------------------------------------------------------
# rank_systems on hand-built cubes
# ---------------------------------------------------------------------------------------------


def table_cube(values: np.ndarray, names: list[str]) -> object:
    """A cube whose AP table is ``values`` (systems x queries) in one scene and pair."""
    n = values.shape[1]
    coords = {"scene": ["v_a"] * n, "pair": ["1-2"] * n, "keypoint_set": ["sift"] * n,
              "query_keypoint": np.arange(n)}
    return qc.new_cube(names, coords, {"ap": values}, attrs=qc.DEFAULT_ATTRS)


def test_average_ranks_by_hand_with_ties():
    values = np.array([
        [0.9, 0.5, 0.7, 0.2, 0.6, 0.5],
        [0.9, 0.6, 0.1, 0.2, 0.3, 0.5],
        [0.1, 0.4, 0.7, 0.2, 0.9, 0.5],
    ])
    # unit ranks (1 = highest): (1.5,1.5,3) (2,1,3) (1.5,3,1.5) (2,2,2) (2,3,1) (2,2,2)
    r = rank_systems(table_cube(values, ["a", "b", "c"]), pair_by="query")
    expected = np.array([1.5 + 2 + 1.5 + 2 + 2 + 2, 1.5 + 1 + 3 + 2 + 3 + 2,
                         3 + 3 + 1.5 + 2 + 1 + 2]) / 6
    assert r.average_rank.values.tolist() == pytest.approx(expected.tolist())
    assert r["mean"].values.tolist() == pytest.approx(values.mean(axis=1).tolist())


def test_friedman_wilcoxon_holm_and_nemenyi_against_direct_computation():
    rng = np.random.default_rng(1)
    k, n = 5, 80
    base = rng.uniform(0, 0.6, n)
    values = np.vstack([base + shift + rng.normal(0, 0.08, n) for shift in (0.3, 0.1, 0.1, 0, 0)])
    values = np.clip(values, 0, 1)
    values[2, :4] = np.nan  # four units missing in one system: dropped from every system
    names = ["sift", "rootsift", "orb", "brief", "mine"]
    r = rank_systems(table_cube(values, names), correction="holm", pair_by="query")
    complete = values[:, 4:]
    friedman = scipy.stats.friedmanchisquare(*complete)
    assert float(r.friedman_statistic) == friedman.statistic
    assert float(r.friedman_pvalue) == friedman.pvalue
    assert int(r.n_units) == n - 4 and int(r.n_dropped) == 4
    ranks = scipy.stats.rankdata(-complete, axis=0).mean(axis=1)
    assert r.average_rank.values.tolist() == ranks.tolist()
    assert float(r.critical_difference) == pytest.approx(
        DEMSAR_Q05[k - 2] * np.sqrt(k * (k + 1) / (6 * (n - 4))), rel=5e-4
    )
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    raw = [scipy.stats.wilcoxon(complete[i], complete[j]).pvalue for i, j in pairs]
    corrected = reference_multipletests(raw, "holm")
    for (i, j), p in zip(pairs, corrected, strict=True):
        for a, b in ((i, j), (j, i)):
            cell = r.sel(descriptor=names[a], other=names[b])
            assert float(cell.pvalue_corrected) == p
            assert bool(cell.reject) == (p < 0.05)
            assert bool(cell.nemenyi_different) == (
                abs(ranks[a] - ranks[b]) > float(r.critical_difference)
            )
    diagonal = np.diag(r.pvalue_corrected.values)
    assert np.isnan(diagonal).all() and not np.diag(r.reject.values).any()
    assert r.attrs["k"] == k and r.attrs["correction"] == "holm" and r.attrs["metric"] == "ap"


def test_two_systems_have_no_friedman_test_and_too_few_units_are_refused():
    rng = np.random.default_rng(2)
    values = rng.uniform(size=(2, 20))
    r = rank_systems(table_cube(values, ["a", "b"]), pair_by="query")
    assert np.isnan(float(r.friedman_pvalue)) and float(r.q_alpha) == pytest.approx(1.96, abs=1e-3)
    values[1, 4:] = np.nan
    with pytest.raises(InvalidInputError, match="4 units have a value in all 2 systems"):
        rank_systems(table_cube(values, ["a", "b"]), pair_by="query")
    with pytest.raises(InvalidInputError, match="nothing to rank"):
        rank_systems(table_cube(np.full((3, 10), 0.5), ["a", "b", "c"]), pair_by="query")
    with pytest.raises(InvalidInputError, match=r"1 units .*pair_by='scene'.*pair_by='pair'"):
        rank_systems(table_cube(values, ["a", "b"]))  # one scene: the default blocks say so


def test_the_blocks_are_scenes_by_default():
    # 8 scenes x 3 pairs x 10 queries: the default ranks the 8 scene means (Demsar 2006),
    # not the 240 queries, whose N would shrink the CD to nothing
    rng = np.random.default_rng(5)
    scenes = np.repeat([f"v_{i}" for i in range(8)], 30)
    pairs = np.tile(np.repeat(["1-2", "1-3", "1-4"], 10), 8)
    n = scenes.size
    coords = {"scene": scenes, "pair": pairs, "keypoint_set": ["sift"] * n,
              "query_keypoint": np.arange(n)}  # fmt: skip
    values = np.clip(rng.uniform(0, 1, (3, n)) + np.array([[0.1], [0.05], [0.0]]), 0, 1)
    cube = qc.new_cube(["a", "b", "c"], coords, {"ap": values}, attrs=qc.DEFAULT_ATTRS)
    r = rank_systems(cube)
    means = np.stack([values[:, scenes == s].mean(axis=1) for s in np.unique(scenes)], axis=1)
    assert r.attrs["pair_by"] == "scene" and int(r.n_units) == 8
    assert r.average_rank.values.tolist() == scipy.stats.rankdata(-means, axis=0).mean(
        axis=1
    ).tolist()
    assert float(r.critical_difference) == pytest.approx(critical_difference(3, 8))
    assert int(rank_systems(cube, pair_by="pair").n_units) == 24
    assert float(rank_systems(cube, pair_by="query").critical_difference) < 0.25


# ---------------------------------------------------------------------------------------------
# Power of the paired t-test
# ---------------------------------------------------------------------------------------------


def test_power_equals_statsmodels_in_every_direction():
    reference = TTestPower()
    for d, n, level in ((0.2, 100, 0.05), (0.05, 5_000, 0.01), (0.5, 12, 0.1)):
        expected_power = reference.solve_power(effect_size=d, nobs=n, alpha=level)
        assert power(effect_size=d, n=n, alpha=level).power == expected_power
        expected_n = reference.solve_power(effect_size=d, power=0.8, alpha=level)
        solved = power(effect_size=d, power=0.8, alpha=level)
        assert solved.n == pytest.approx(expected_n, rel=1e-9)
        assert solved.n_required == int(np.ceil(expected_n))
        expected_d = reference.solve_power(nobs=n, power=0.9, alpha=level)
        solved_d = power(n=n, power=0.9, alpha=level).effect_size  # statsmodels' tolerance
        assert solved_d == pytest.approx(expected_d, rel=1e-4)
        assert power(effect_size=solved_d, n=n, alpha=level).power == pytest.approx(0.9, abs=1e-12)
    one_sided = reference.solve_power(effect_size=0.1, power=0.8, alpha=0.05,
                                      alternative="larger")
    assert power(effect_size=0.1, power=0.8, alternative="larger").n == pytest.approx(
        one_sided, rel=1e-9
    )
    smaller = reference.solve_power(nobs=30, power=0.8, alpha=0.05, alternative="smaller")
    assert power(n=30, power=0.8, alternative="smaller").effect_size == pytest.approx(
        smaller, rel=1e-5
    )


def slow_tail(c: float, df: float, nc: float) -> float:
    """P(T > c), c > 0, of the noncentral t by quadrature over S = chi_df / sqrt(df), the
    denominator (another variable than the library's): int g_S(s) P(Z > c s - nc) ds, summed
    over intervals cut where the integrand changes (c s - nc = -8, 0, 8; the bulk of S)."""
    import scipy.integrate

    scaled = scipy.stats.chi(df, scale=1 / np.sqrt(df))
    cuts = [(nc + k) / c for k in (-8, 0, 8)] + list(scaled.ppf([1e-12, 0.01, 0.5, 0.99]))
    high = scaled.isf(1e-17)
    edges = sorted({0.0, high, *(e for e in cuts if 0 < e < high)})
    return sum(
        scipy.integrate.quad(
            lambda s: scaled.pdf(s) * scipy.stats.norm.sf(c * s - nc), a, b, limit=200,
            epsabs=1e-15,
        )[0]
        for a, b in itertools.pairwise(edges)
    )  # fmt: skip


def slow_power(d: float, n: float, alpha: float, alternative: str) -> float:
    df = n - 1
    half = alpha / 2 if alternative == "two-sided" else alpha
    crit = scipy.stats.t.isf(half, df)
    total = 0.0
    if alternative in ("two-sided", "larger"):
        total += slow_tail(crit, df, d * np.sqrt(n))
    if alternative in ("two-sided", "smaller"):
        total += slow_tail(crit, df, -d * np.sqrt(n))  # P(T <= -c | nc) = P(T >= c | -nc)
    return total


def test_power_is_a_number_in_0_1_on_a_dense_grid_and_statsmodels_where_finite():
    import warnings

    from statsmodels.stats.power import ttest_power as statsmodels_power

    effects = np.concatenate([-np.logspace(-3, 1.5, 12), np.logspace(-3, 1.5, 12)])
    sizes = np.unique(np.round(np.logspace(np.log10(2), 6, 12), 1))
    levels = (1e-6, 1e-3, 0.01, 0.05, 0.2, 0.5)
    nan_in_statsmodels, near_one, near_alpha = [], 0, 0
    for alternative in ("two-sided", "larger", "smaller"):
        for d in effects:
            for n in sizes:
                for level in levels:
                    got = power(effect_size=d, n=n, alpha=level, alternative=alternative).power
                    assert 0.0 <= got <= 1.0, (d, n, level, alternative, got)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        expected = statsmodels_power(d, n, level, alternative=alternative)
                    if np.isfinite(expected):
                        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
                    else:
                        nan_in_statsmodels.append((d, n, level, alternative, got))
                    near_one += got > 1 - 1e-9
                    near_alpha += abs(got - level) < 1e-3 * level
    assert near_one > 500 and near_alpha > 50  # the grid reaches both ends
    assert len(nan_in_statsmodels) > 50  # statsmodels' NaNs: near-1 power and far tails
    for d, n, level, alternative, got in nan_in_statsmodels[::4]:  # a slow reference
        assert got == pytest.approx(slow_power(d, n, level, alternative), abs=1e-8)


def test_the_quadrature_equals_scipys_noncentral_t_where_that_is_finite():
    from metricalc.stats.power import noncentral_t_sf

    rng = np.random.default_rng(7)
    for _ in range(150):
        df = float(10 ** rng.uniform(0, 6))
        nc = float(rng.normal(0, 10))
        x = float(rng.normal(nc, 3))
        expected = 1 - scipy.special.nctdtr(df, nc, x)
        if np.isfinite(expected):
            assert noncentral_t_sf(x, df, nc) == pytest.approx(expected, abs=1e-9), (x, df, nc)
    # a far tail nctdtr cannot give (NaN), against the slow reference
    for x, df, nc in ((636619.77, 1.0, 17.44), (16.0, 9.0, -9.49), (40.0, 29.0, 1.0)):
        assert noncentral_t_sf(x, df, nc) == pytest.approx(slow_tail(x, df, nc), rel=1e-6)


def test_n_and_effect_are_solved_where_statsmodels_gives_nan():
    import warnings

    reference = TTestPower()
    cases = [
        (d, level, target)
        for d in (0.002, 0.05, 0.5, 3.0, 20.0)
        for level in (1e-6, 0.05, 0.3)
        for target in (level + 1e-3, 0.8, 0.999999)
    ]
    unsolved_by_statsmodels = 0
    for d, level, target in cases:
        if target <= level:
            continue
        solved = power(effect_size=d, power=target, alpha=level)
        assert np.isfinite(solved.n) and solved.n >= 2
        if solved.n > 2:  # at n = 2 the power may already exceed the target
            assert power(effect_size=d, n=solved.n, alpha=level).power == pytest.approx(target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = reference.solve_power(effect_size=d, power=target, alpha=level)
            except Exception:  # statsmodels' root finder may raise as well as return NaN
                expected = np.nan
        from statsmodels.stats.power import ttest_power as statsmodels_power

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solves = np.isfinite(expected) and abs(
                statsmodels_power(d, expected, level) - target
            ) < 1e-7  # statsmodels' root finder can stop on a value that is no root
        if solves and expected > 2:
            assert solved.n == pytest.approx(expected, rel=1e-6)
        else:
            unsolved_by_statsmodels += 1
        for n in (2.5, 40.0, 1e5):
            effect = power(n=n, power=target, alpha=level).effect_size
            assert np.isfinite(effect) and effect > 0
            assert power(effect_size=effect, n=n, alpha=level).power == pytest.approx(target)
    assert unsolved_by_statsmodels > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"effect_size": 0.1}, "exactly one"),
        ({"effect_size": 0.1, "n": 10, "power": 0.8}, "exactly one"),
        ({"diff": 0.1, "n": 10}, "diff needs sd"),
        ({"diff": 0.1, "sd": 0.2, "effect_size": 0.5, "n": 10}, "not both"),
        ({"effect_size": 0.1, "n": 1}, "n must be None or a finite number >= 2"),
        ({"effect_size": 0.1, "power": 1.2}, "power must be"),
        ({"effect_size": 0.1, "power": 0.01}, "must exceed alpha"),
        ({"effect_size": 0.0, "n": 10}, "must not be zero"),
        ({"effect_size": 0.1, "n": 10, "alternative": "less"}, "alternative"),
    ],
)
def test_power_refuses_bad_requests(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        power(**kwargs)


def test_power_takes_numpy_numbers():
    # values read from arrays (np.int64 / np.float64) are numbers like any other
    plain = power(diff=0.01, sd=0.25, n=500)
    numpy_valued = power(diff=np.float64(0.01), sd=np.float32(0.25), n=np.int64(500))
    assert numpy_valued.power == pytest.approx(plain.power, rel=1e-6)
    with pytest.raises(InvalidInputError, match="n must be None or a finite number"):
        power(diff=0.01, sd=0.25, n=np.bool_(True))
