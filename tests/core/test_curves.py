"""ROC and PR curves and their areas against scikit-learn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from sklearn.metrics import auc, precision_recall_curve, roc_auc_score, roc_curve

import metricalc as mc
from tests.conftest import random_cases


def _sklearn(fn, *args, **kwargs):
    """Call scikit-learn, silencing its warnings about single-class inputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("drop_intermediate", [False, True])
def test_roc_curve_equals_sklearn(drop_intermediate):
    for y_true, y_score in random_cases(seed=10 + drop_intermediate, count=200):
        ours = mc.roc_curve(y_true, y_score, drop_intermediate=drop_intermediate)
        fpr, tpr, thresholds = _sklearn(
            roc_curve, y_true, y_score, drop_intermediate=drop_intermediate
        )
        np.testing.assert_array_equal(ours.fpr.values, fpr)
        np.testing.assert_array_equal(ours.tpr.values, tpr)
        np.testing.assert_array_equal(ours.cutoff.values, thresholds)


def test_roc_auc_equals_sklearn():
    checked = 0
    for y_true, y_score in random_cases(seed=12, count=300):
        ours = mc.roc_auc(y_true, y_score)
        if y_true.all() or not y_true.any():
            assert np.isnan(ours)  # scikit-learn raises for one class; we follow zero_division
            assert mc.roc_auc(y_true, y_score, zero_division=0) == 0.0
            continue
        assert ours == pytest.approx(roc_auc_score(y_true, y_score), abs=1e-12)
        checked += 1
    assert checked > 100


def test_roc_auc_equals_mann_whitney_probability_by_hand():
    # positives 0.8, 0.35; negatives 0.4, 0.1: pairs won 3 of 4
    assert mc.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    # a tie between a positive and a negative counts one half
    assert mc.roc_auc([0, 1], [0.5, 0.5]) == pytest.approx(0.5)


def test_pr_curve_equals_sklearn():
    for y_true, y_score in random_cases(seed=13, count=300):
        no_positive = not y_true.any()
        # scikit-learn sets recall to 1 when there is no positive: our zero_division=1
        ours = mc.pr_curve(y_true, y_score, zero_division=1 if no_positive else "nan")
        precision, recall, thresholds = _sklearn(precision_recall_curve, y_true, y_score)
        # scikit-learn: increasing thresholds, plus a final (recall 0, precision 1) point
        np.testing.assert_allclose(ours.precision.values, precision[:-1][::-1], rtol=1e-15)
        np.testing.assert_array_equal(ours.recall.values, recall[:-1][::-1])
        np.testing.assert_array_equal(ours.cutoff.values, thresholds[::-1])


def test_pr_curve_recall_undefined_without_positives():
    pr = mc.pr_curve([0, 0, 0], [0.3, 0.2, 0.1])
    assert np.isnan(pr.recall.values).all()
    np.testing.assert_array_equal(pr.precision.values, [0.0, 0.0, 0.0])


def test_auc_equals_sklearn_for_both_directions():
    rng = np.random.default_rng(14)
    for _ in range(50):
        x = np.sort(rng.random(rng.integers(2, 30)))
        y = rng.random(x.size)
        assert mc.auc(x, y) == pytest.approx(auc(x, y))
        assert mc.auc(x[::-1], y[::-1]) == pytest.approx(auc(x[::-1], y[::-1]))


def test_auc_rejects_non_monotonic_x_and_too_few_points():
    with pytest.raises(mc.InvalidInputError, match="monotonic"):
        mc.auc([0, 1, 0.5], [0, 1, 1])
    with pytest.raises(mc.InvalidInputError, match="at least 2 points"):
        mc.auc([0.5], [1.0])


def test_drop_intermediate_needs_a_single_curve():
    with pytest.raises(mc.InvalidInputError, match="single curve"):
        mc.roc_curve(
            np.eye(3, dtype=bool), np.random.default_rng(0).random((3, 3)), drop_intermediate=True
        )


def test_roc_curve_of_several_lists_keeps_list_dims_first():
    rng = np.random.default_rng(16)
    y_true = rng.random((3, 8)) < 0.5
    y_true[:, 0], y_true[:, 1] = True, False
    y_score = rng.random((3, 8))
    curve = mc.roc_curve(y_true, y_score)
    for name in ("tp", "fp", "fpr", "tpr", "cutoff"):
        assert curve[name].dims == ("dim_0", "threshold")
    for i in range(3):  # distinct scores: no padding, every list has 8 + 1 points
        fpr, tpr, _ = roc_curve(y_true[i], y_score[i], drop_intermediate=False)
        np.testing.assert_array_equal(curve.tpr.values[i], tpr)
        np.testing.assert_array_equal(curve.fpr.values[i], fpr)


def test_auc_checks_each_curve_for_monotonic_x():
    x = np.array([[0.0, 0.5, 1.0], [1.0, 0.5, 0.0]])  # one increasing, one decreasing: fine
    y = np.array([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    np.testing.assert_allclose(mc.auc(x, y), [0.75, 0.75])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mc.auc(["a", "b"], [1, 2]), "x must be numeric"),
        (lambda: mc.auc([0, 1], [1, 2, 3]), "same shape"),
        (
            lambda: mc.auc(xr.DataArray([0, 1], dims="t"), xr.DataArray([0, 1], dims="t"), dim="s"),
            "dim='s' is not a dimension",
        ),
        (
            lambda: mc.roc_auc(
                xr.DataArray([0, 1, 1], dims="s", coords={"s": [0, 1, 2]}),
                xr.DataArray([0.1, 0.2, 0.3], dims="s", coords={"s": [0, 1, 5]}),
            ),
            "same sizes and coordinates",
        ),
    ],
)
def test_curve_bad_input_raises_clear_error(call, message):
    with pytest.raises(mc.InvalidInputError, match=message):
        call()


def test_roc_auc_of_dataarrays_has_no_stray_coordinate():
    y_true = xr.DataArray([[0, 1, 1], [1, 0, 1]], dims=("q", "s"))
    y_score = xr.DataArray([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]], dims=("q", "s"))
    result = mc.roc_auc(y_true, y_score, dim="s")
    assert result.dims == ("q",)
    assert "cutoff" not in result.coords
    np.testing.assert_allclose(result.values, [1.0, 0.5])


def test_roc_auc_of_several_lists_equals_per_list_values():
    rng = np.random.default_rng(15)
    y_true = rng.random((6, 40)) < 0.4
    y_true[:, 0], y_true[:, 1] = True, False
    y_score = rng.integers(0, 5, (6, 40))
    ours = mc.roc_auc(y_true, y_score)
    assert ours.shape == (6,)
    for i in range(6):
        assert ours[i] == pytest.approx(roc_auc_score(y_true[i], y_score[i]))
