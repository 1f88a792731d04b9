"""Confusion counts and rates: scikit-learn cross-checks, hand cases, policies and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix_at_thresholds, f1_score
from statsmodels.stats.proportion import proportion_confint

import metricalc as mc
from tests.conftest import random_cases


@pytest.mark.parametrize("case", list(range(4)))
def test_counts_equal_sklearn_on_random_cases(case):
    for y_true, y_score in random_cases(
        seed=case, count=100, large=(10_000,) if case else (100_000,)
    ):
        c = mc.counts_at_thresholds(y_true, y_score)
        tns, fps, fns, tps, thresholds = confusion_matrix_at_thresholds(y_true, y_score)
        np.testing.assert_array_equal(c.tp.values, tps)
        np.testing.assert_array_equal(c.fp.values, fps)
        np.testing.assert_array_equal(c.fn.values, fns)
        np.testing.assert_array_equal(c.tn.values, tns)
        np.testing.assert_array_equal(c.cutoff.values, thresholds)


def test_counts_hand_case_with_ties():
    # scores 0.9 (neg), 0.5 (pos), 0.5 (neg), 0.2 (pos): thresholds 0.9, 0.5, 0.2
    c = mc.counts_at_thresholds([0, 1, 0, 1], [0.9, 0.5, 0.5, 0.2])
    assert c.cutoff.values.tolist() == [0.9, 0.5, 0.2]
    assert c.tp.values.tolist() == [0, 1, 2]
    assert c.fp.values.tolist() == [1, 2, 2]
    assert c.fn.values.tolist() == [2, 1, 0]
    assert c.tn.values.tolist() == [1, 0, 0]


def test_counts_accept_bool_and_integer_scores():
    c = mc.counts_at_thresholds(np.array([True, False, True]), np.array([3, 1, 3], dtype=np.uint8))
    assert c.tp.values.tolist() == [2, 2]
    assert c.fp.values.tolist() == [0, 1]
    assert c.cutoff.values.tolist() == [3.0, 1.0]


def test_counts_of_several_lists_pad_with_final_point():
    y_true = np.array([[1, 0, 1, 0], [1, 1, 0, 0]])
    y_score = np.array([[0.4, 0.3, 0.2, 0.1], [0.5, 0.5, 0.5, 0.5]])
    c = mc.counts_at_thresholds(y_true, y_score)
    assert c.tp.dims == ("dim_0", "threshold")
    assert c.tp.values.tolist() == [[1, 1, 2, 2], [2, 2, 2, 2]]
    assert c.fp.values.tolist() == [[0, 1, 1, 2], [2, 2, 2, 2]]
    assert np.isnan(c.cutoff.values[1, 1:]).all()
    assert c.cutoff.values[1, 0] == 0.5


TABLE = {"tp": 8, "fp": 2, "fn": 4, "tn": 6}


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (mc.tpr, 8 / 12),
        (mc.recall, 8 / 12),
        (mc.fpr, 2 / 8),
        (mc.tnr, 6 / 8),
        (mc.precision, 8 / 10),
        (mc.accuracy, 14 / 20),
        (mc.youden_j, 8 / 12 + 6 / 8 - 1),
        (mc.f1, 16 / 22),
    ],
)
def test_rates_on_one_table_by_hand(rate, expected):
    assert float(rate(TABLE)) == pytest.approx(expected, abs=1e-15)


def test_rates_on_threshold_sweep_equal_per_threshold_formulas():
    rng = np.random.default_rng(3)
    y_true = rng.random(300) < 0.3
    y_score = rng.integers(0, 20, 300)
    c = mc.counts_at_thresholds(y_true, y_score)
    for i, cut in enumerate(c.cutoff.values):
        pred = y_score >= cut
        tp = np.sum(pred & y_true)
        fp = np.sum(pred & ~y_true)
        fn = np.sum(~pred & y_true)
        tn = np.sum(~pred & ~y_true)
        assert mc.tpr(c).values[i] == pytest.approx(tp / (tp + fn))
        assert mc.fpr(c).values[i] == pytest.approx(fp / (fp + tn))
        assert mc.precision(c).values[i] == pytest.approx(tp / (tp + fp))
        assert mc.accuracy(c).values[i] == pytest.approx((tp + tn) / 300)
        assert mc.f1(c).values[i] == pytest.approx(f1_score(y_true, pred))
        assert mc.youden_j(c).values[i] == pytest.approx(tp / (tp + fn) - fp / (fp + tn))


def test_f1_equals_sklearn_including_zero_division():
    rng = np.random.default_rng(4)
    for _ in range(100):
        y_true = rng.random(20) < rng.random()
        y_pred = rng.random(20) < rng.random()
        table = {
            "tp": np.sum(y_true & y_pred),
            "fp": np.sum(~y_true & y_pred),
            "fn": np.sum(y_true & ~y_pred),
        }
        for zero in (0, 1):
            expected = f1_score(y_true, y_pred, zero_division=zero)
            assert float(mc.f1(table, zero_division=zero)) == pytest.approx(expected)


EMPTY = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}


@pytest.mark.parametrize(
    "rate", [mc.tpr, mc.fpr, mc.tnr, mc.precision, mc.accuracy, mc.youden_j, mc.f1]
)
def test_zero_division_policies(rate):
    assert np.isnan(rate(EMPTY))
    assert float(rate(EMPTY, zero_division=0)) == 0.0
    assert float(rate(EMPTY, zero_division=1)) == 1.0
    with pytest.warns(mc.UndefinedMetricWarning, match="undefined"):
        assert float(rate(EMPTY, zero_division="warn")) == 0.0


def test_warn_policy_is_silent_when_defined():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(mc.tpr(TABLE, zero_division="warn")) == pytest.approx(8 / 12)


def test_youden_j_undefined_when_one_class_missing():
    table = {"tp": 3, "fn": 1, "fp": 0, "tn": 0}
    assert np.isnan(mc.youden_j(table))
    assert float(mc.youden_j(table, zero_division=0)) == 0.0


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, bool])
def test_rates_on_small_integer_and_boolean_counts_do_not_wrap(dtype):
    tp, fn = (np.array([1]), np.array([1])) if dtype is bool else (np.array([100]), np.array([27]))
    counts = {"tp": tp.astype(dtype), "fn": fn.astype(dtype), "fp": fn.astype(dtype)}
    expected = tp[0] / (tp[0] + fn[0])
    assert mc.tpr(counts)[0] == pytest.approx(expected)
    assert mc.f1(counts)[0] == pytest.approx(2 * tp[0] / (2 * tp[0] + 2 * fn[0]))
    assert float(mc.rate_confint(counts, "tpr").estimate[0]) == pytest.approx(expected)


def test_rates_keep_shape_of_count_arrays():
    counts = {"tp": np.array([[1, 0], [2, 3]]), "fn": np.array([[1, 0], [0, 1]])}
    out = mc.tpr(counts)
    assert out.shape == (2, 2)
    np.testing.assert_array_equal(out, [[0.5, np.nan], [1.0, 0.75]])


@pytest.mark.parametrize(
    ("rate", "k", "n"),
    [
        ("tpr", ("tp",), ("tp", "fn")),
        ("fpr", ("fp",), ("fp", "tn")),
        ("tnr", ("tn",), ("fp", "tn")),
        ("precision", ("tp",), ("tp", "fp")),
        ("accuracy", ("tp", "tn"), ("tp", "fp", "fn", "tn")),
    ],
)
def test_rate_confint_equals_statsmodels_wilson(rate, k, n):
    rng = np.random.default_rng(5)
    counts = {name: rng.integers(0, 30, size=50) for name in ("tp", "fp", "fn", "tn")}
    ci = mc.rate_confint(counts, rate)
    successes = sum(counts[name] for name in k)
    trials = sum(counts[name] for name in n)
    ok = trials > 0
    low, high = proportion_confint(successes[ok], trials[ok], alpha=0.05, method="wilson")
    np.testing.assert_allclose(ci.low.values[ok], low, rtol=1e-12)
    np.testing.assert_allclose(ci.high.values[ok], high, rtol=1e-12)
    np.testing.assert_allclose(ci.estimate.values[ok], successes[ok] / trials[ok])
    assert np.isnan(ci.low.values[~ok]).all()


def test_rate_confint_small_sample_is_wide():
    small = mc.rate_confint({"tp": 2, "fn": 0}, "tpr")
    large = mc.rate_confint({"tp": 2000, "fn": 0}, "tpr")
    assert float(small.low) < 0.35 < 0.99 < float(large.low)


def test_rate_confint_other_method_and_alpha():
    ci = mc.rate_confint({"tp": 7, "fp": 3}, "precision", alpha=0.1, method="beta")
    low, high = proportion_confint(7, 10, alpha=0.1, method="beta")
    assert float(ci.low) == pytest.approx(low)
    assert float(ci.high) == pytest.approx(high)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mc.counts_at_thresholds([0, 1, 1], [0.1, 0.2]), "y_true has shape"),
        (lambda: mc.counts_at_thresholds([0, 1], [0.1, np.nan]), "y_score must not contain NaN"),
        (lambda: mc.counts_at_thresholds([0, 2], [0.1, 0.2]), r"found 2 at index \(1,\)"),
        (lambda: mc.counts_at_thresholds(["a", "b"], [0.1, 0.2]), "y_true must hold binary"),
        (lambda: mc.counts_at_thresholds([], []), "empty input"),
        (lambda: mc.counts_at_thresholds([0, 1], ["x", "y"]), "y_score must be numeric"),
        (lambda: mc.tpr({"tp": 1}), "counts has no 'fn'"),
        (lambda: mc.tpr({"tp": -1, "fn": 2}), "non-negative counts"),
        (lambda: mc.tpr(TABLE, zero_division=2), "zero_division must be"),
        (lambda: mc.tpr(TABLE, zero_division="zero"), "zero_division must be"),
        (lambda: mc.rate_confint(TABLE, "youden_j"), "rate must be one of"),
        (lambda: mc.rate_confint(TABLE, "tpr", alpha=1.5), "alpha must be a number"),
        (lambda: mc.rate_confint(TABLE, "tpr", method="exact"), "method must be one of"),
        (lambda: mc.rate_confint(TABLE, "tpr", alpha="0.05"), "alpha must be a number"),
        (lambda: mc.tpr({"tp": [1, 2, 3], "fn": [1, 0]}), "broadcastable shapes"),
        (lambda: mc.tpr({"tp": ["a"], "fn": [1]}), "numeric counts"),
    ],
)
def test_bad_input_raises_clear_error(call, message):
    with pytest.raises(mc.InvalidInputError, match=message):
        call()


def test_invalid_input_error_is_a_value_error():
    assert issubclass(mc.InvalidInputError, ValueError)
    assert issubclass(mc.InvalidInputError, mc.MetricalcError)


def test_counts_of_many_lists_across_chunks_equal_sklearn_per_list(monkeypatch):
    from metricalc.core import kernels

    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", 20)  # one or two lists per chunk
    rng = np.random.default_rng(6)
    y_true = rng.random((9, 12)) < 0.5
    y_score = rng.integers(0, rng.integers(1, 12, (9, 1)) + 1, (9, 12))  # 1..12 distinct scores
    c = mc.counts_at_thresholds(y_true, y_score)
    for i in range(9):
        tns, fps, fns, tps, thresholds = confusion_matrix_at_thresholds(y_true[i], y_score[i])
        k = thresholds.size
        np.testing.assert_array_equal(c.tp.values[i, :k], tps)
        np.testing.assert_array_equal(c.fp.values[i, :k], fps)
        np.testing.assert_array_equal(c.fn.values[i, :k], fns)
        np.testing.assert_array_equal(c.tn.values[i, :k], tns)
        np.testing.assert_array_equal(c.cutoff.values[i, :k], thresholds)
        assert (c.tp.values[i, k:] == tps[-1]).all() and (c.fp.values[i, k:] == fps[-1]).all()
        assert np.isnan(c.cutoff.values[i, k:]).all()


def test_lazy_counts_are_validated_when_computed():
    import xarray as xr

    counts = xr.Dataset({"tp": ("x", [1, -2, 3]), "fn": ("x", [1, 1, 1])}).chunk({"x": 1})
    rate = mc.tpr(counts)
    assert rate.chunks is not None  # still lazy
    with pytest.raises(mc.InvalidInputError, match="non-negative counts"):
        rate.compute()
