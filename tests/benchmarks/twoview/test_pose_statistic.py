"""The pose table's cells as statistics of weighted image pairs: the weighted AUC and mAA equal
the plain functions on the data set with every pair repeated its weight's times; the comparison
of two methods against the table and a slow enumeration of the swap patterns; the estimator
noise over seeds."""

from __future__ import annotations

import numpy as np
import pytest

from metricalc.benchmarks.twoview.accuracy import (
    imc_maa,
    pose_auc,
    weighted_imc_maa,
    weighted_pose_auc,
)
from metricalc.benchmarks.twoview.statistic import COLUMNS


def _errors_with_ties(rng: np.random.Generator, n: int) -> np.ndarray:
    errors = rng.choice([0.0, 1.0, 2.5, 5.0, 7.0, 10.0, 20.0, 30.0, np.inf], size=n)
    fresh = rng.random(n) < 0.4
    errors[fresh] = rng.exponential(6.0, size=int(fresh.sum()))
    return errors


def _plain(errors: np.ndarray, column: str) -> float:
    if column == "mAA@10":
        return imc_maa(errors)
    return float(pose_auc(errors, [float(column[4:])])[0])


def _weighted(errors: np.ndarray, weights: np.ndarray, column: str) -> np.ndarray:
    if column == "mAA@10":
        return weighted_imc_maa(errors, weights)
    return weighted_pose_auc(errors, weights, float(column[4:]))


@pytest.mark.parametrize("seed", range(40))
def test_weighted_equals_plain_on_repeated_pairs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    errors = _errors_with_ties(rng, n)
    weights = rng.integers(0, 4, size=(30, n))  # weight 0: the pair is left out
    weights[0] = 1
    weights[weights.sum(axis=1) == 0, 0] = 2
    for column in COLUMNS:
        got = _weighted(errors, weights, column)  # every resample at once
        expected = [_plain(np.repeat(errors, row), column) for row in weights]
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # values per resample too (the swap test exchanges values row by row)
    rows = np.stack([rng.permutation(errors) for _ in range(5)])
    got = weighted_pose_auc(rows, weights[:5], 10.0)
    expected = [_plain(np.repeat(r, w), "auc@10") for r, w in zip(rows, weights[:5], strict=True)]
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_no_weight_is_nan() -> None:
    assert np.isnan(weighted_pose_auc(np.array([1.0, 2.0]), np.zeros(2), 5.0))
    assert np.isnan(weighted_imc_maa(np.array([1.0, 2.0]), np.zeros(2)))
