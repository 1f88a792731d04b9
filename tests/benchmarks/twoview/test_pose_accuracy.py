"""Pose AUC (SuperGlue / Glue Factory) and mAA (Image Matching Challenge) against line-by-line
ports of the reference code written here, on random cases with ties, zeros and failures."""

from __future__ import annotations

import numpy as np
import pytest
from auc_ports import recall_auc_port

from metricalc.benchmarks.twoview.accuracy import imc_accuracies, imc_maa, pose_auc
from metricalc.errors import InvalidInputError


def obvious_pose_auc(errors: np.ndarray, t: float, steps: int = 200_001) -> float:
    """The recall curve (piecewise linear between (0, 0) and the sorted errors, flat after
    the last error below t) integrated numerically: an independent slow reading."""
    finite = np.sort(errors[errors < t])
    n = len(errors)
    xs = np.r_[0.0, finite]
    ys = np.arange(len(xs)) / n
    grid = np.linspace(0, t, steps)
    curve = np.interp(grid, xs, ys)  # np.interp holds the last value after xs[-1]
    return float(np.trapezoid(curve, grid) / t)


def imb_qt_auc(errors: np.ndarray) -> tuple[float, float, np.ndarray]:
    """image-matching-benchmark utils/pack_helper.py compute_qt_auc, from err_qt in degrees."""
    err_qt = np.array(errors, dtype=float)
    err_qt[err_qt == np.inf] = 1e6
    qt_hist, _ = np.histogram(err_qt, np.arange(11))
    qt_hist = qt_hist.astype(float) / float(len(err_qt))
    qt_acc = np.cumsum(qt_hist)
    return float(np.mean(qt_acc[:5])), float(np.mean(qt_acc)), qt_acc


def _random_errors(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(1, 60))
    kind = rng.integers(4)
    if kind == 0:  # integers: many ties, some exactly at a threshold
        errors = rng.integers(0, 25, size=n).astype(float)
    elif kind == 1:  # zeros and failures
        errors = rng.choice([0.0, np.inf, 5.0, 10.0, 2.5], size=n)
    else:
        errors = rng.exponential(8.0, size=n)
    errors[rng.random(n) < 0.15] = np.inf
    return errors


def test_hand_computed() -> None:
    # sorted 1, 3, inf; recall 1/3, 2/3, 1; tau 5: 1/6 + 1 + 2 * 2/3 = 2.5 -> 0.5
    assert pose_auc([3.0, np.inf, 1.0], [5.0]).tolist() == pytest.approx([0.5])
    assert pose_auc([0.0, 0.0], [5.0]).tolist() == [1.0]
    assert pose_auc([np.inf], [5.0, 10.0]).tolist() == [0.0, 0.0]
    # an error equal to the threshold adds nothing (searchsorted "left")
    assert pose_auc([5.0], [5.0]).tolist() == [0.0]


@pytest.mark.parametrize("seed", range(300))
def test_pose_auc_equals_superglue_port(seed: int) -> None:
    rng = np.random.default_rng(seed)
    errors = _random_errors(rng)
    thresholds = [5.0, 10.0, 20.0, float(rng.uniform(0.5, 30))]
    expected = recall_auc_port(errors, thresholds)  # SuperGlue's pose_auc
    assert pose_auc(errors, thresholds) == pytest.approx(expected, abs=1e-12)
    assert pose_auc(errors, thresholds, decimals=4) == pytest.approx(
        np.round(expected, 4), abs=1e-4 + 1e-12
    )


@pytest.mark.parametrize("seed", range(20))
def test_pose_auc_equals_numeric_integral(seed: int) -> None:
    errors = _random_errors(np.random.default_rng(1000 + seed))
    for t in (5.0, 10.0, 20.0):
        assert pose_auc(errors, [t])[0] == pytest.approx(obvious_pose_auc(errors, t), abs=1e-5)


@pytest.mark.parametrize("seed", range(300))
def test_imc_maa_equals_benchmark_port(seed: int) -> None:
    rng = np.random.default_rng(seed)
    errors = _random_errors(rng)
    if seed % 3 == 0:
        errors = np.r_[errors, 10.0, 9.0, 1.0]  # the bin edges, the closed last bin
    auc05, auc10, acc = imb_qt_auc(errors)
    assert imc_accuracies(errors) == pytest.approx(acc, abs=1e-15)
    assert imc_maa(errors) == pytest.approx(auc10, abs=1e-15)
    assert imc_maa(errors, max_threshold=5) == pytest.approx(auc05, abs=1e-15)


def test_bin_edges() -> None:
    # 10 counts at 10 degrees (numpy's last bin is closed), 5 does not count at 5
    assert imc_accuracies([10.0]).tolist() == [0.0] * 9 + [1.0]
    assert imc_accuracies([5.0]).tolist() == [0.0] * 5 + [1.0] * 5


@pytest.mark.parametrize("bad", [[], [np.nan], [-1.0], [[1.0]]])
def test_bad_errors(bad: list[float]) -> None:
    with pytest.raises(InvalidInputError, match="errors"):
        pose_auc(bad)
    with pytest.raises(InvalidInputError, match="errors"):
        imc_maa(bad)


@pytest.mark.parametrize("bad", [[], [0.0], [-5.0], [np.inf]])
def test_bad_thresholds(bad: list[float]) -> None:
    with pytest.raises(InvalidInputError, match="thresholds"):
        pose_auc([1.0], bad)


@pytest.mark.parametrize("bad", [0, 11, 2.5, True])
def test_bad_max_threshold(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="max_threshold"):
        imc_maa([1.0], max_threshold=bad)  # type: ignore[arg-type]
