"""Corrections, Friedman / Nemenyi ranking and power against statsmodels, scipy and Demsar 2006."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests
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

# Demsar (2006), Table 5: critical values of the two-tailed Nemenyi test, k = 2..10
DEMSAR_Q05 = (1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164)
DEMSAR_Q10 = (1.645, 2.052, 2.291, 2.459, 2.589, 2.693, 2.780, 2.855, 2.920)


# ---------------------------------------------------------------------------------------------
# Multiple-comparison correction
# ---------------------------------------------------------------------------------------------


def test_corrections_equal_multipletests_with_the_method_passed_explicitly():
    rng = np.random.default_rng(0)
    for _ in range(12):  # statsmodels' holm runs gc.collect(): up to half a second per call
        m = int(rng.integers(1, 30))
        p = np.where(rng.random(m) < 0.3, rng.random(m) * 0.01, rng.random(m))
        p[rng.random(m) < 0.2] = p[0]  # tied p-values
        for method in ("holm", "bonferroni", "fdr_bh"):
            expected = multipletests(p, method=method)[1]
            assert correct(p, method=method).tolist() == expected.tolist()
        assert correct(p, method="none").tolist() == p.tolist()
        assert correct(p).tolist() == multipletests(p, method="holm")[1].tolist()


def test_holm_by_hand_and_unknown_method():
    # sorted 0.01, 0.03, 0.04: 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
    assert correct([0.04, 0.01, 0.03]).tolist() == pytest.approx([0.06, 0.03, 0.06])
    assert "holm" in CORRECTIONS
    with pytest.raises(InvalidInputError, match="correction must be one of"):
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
    corrected = multipletests(raw, method="holm")[1]
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
        assert solved.n == expected_n and solved.n_required == int(np.ceil(expected_n))
        expected_d = reference.solve_power(nobs=n, power=0.9, alpha=level)
        assert power(n=n, power=0.9, alpha=level).effect_size == expected_d
    one_sided = reference.solve_power(effect_size=0.1, power=0.8, alpha=0.05,
                                      alternative="larger")
    assert power(effect_size=0.1, power=0.8, alternative="larger").n == one_sided


def test_power_with_a_difference_and_its_standard_deviation():
    solved = power(diff=0.01, sd=0.25, power=0.8)
    assert solved.effect_size == pytest.approx(0.04)
    assert solved.n == TTestPower().solve_power(effect_size=0.04, power=0.8, alpha=0.05)
    detectable = power(sd=0.25, n=solved.n, power=0.8)
    assert detectable.diff == pytest.approx(0.01, rel=1e-3)  # round trip (root finding)
    assert power(diff=0.01, sd=0.25, n=solved.n).power == pytest.approx(0.8, rel=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"effect_size": 0.1}, "exactly one"),
        ({"effect_size": 0.1, "n": 10, "power": 0.8}, "exactly one"),
        ({"diff": 0.1, "n": 10}, "diff needs sd"),
        ({"diff": 0.1, "sd": 0.2, "effect_size": 0.5, "n": 10}, "not both"),
        ({"effect_size": 0.1, "n": 1}, "at least 2"),
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
    with pytest.raises(InvalidInputError, match="n must be a finite number"):
        power(diff=0.01, sd=0.25, n=np.bool_(True))
