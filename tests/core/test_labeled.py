"""The NumPy / xarray / dask contract of the public API.

A DataArray call keeps every dim but the sample dim (and their coordinates) and gives the values
of the NumPy call on ``.values``; a dask-backed call stays lazy (nothing is computed until
``.compute()``) and computes to the eager result. Expected values come from per-row NumPy calls,
from the defining formulas, from scikit-learn or from statsmodels, never from the labeled path
under test.
"""

from __future__ import annotations

import contextlib

import dask
import numpy as np
import pytest
import xarray as xr
from sklearn.metrics import roc_auc_score
from statsmodels.stats.proportion import proportion_confint

import metricalc as mc

DESCRIPTORS = ["sift", "orb"]
QUERIES = [f"q{i}" for i in range(5)]
N_CANDIDATES = 9
DIMS = ("descriptor", "query", "candidate")
TIE_POLICIES = ("optimistic", "pessimistic", "workbench", "expected")


# --------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------


def coords():
    return {
        "descriptor": DESCRIPTORS,
        "query": QUERIES,
        "candidate": np.arange(N_CANDIDATES),
        "scene": ("query", ["i_a", "i_a", "v_b", "v_b", "v_c"]),
    }


def cube(values, name):
    return xr.DataArray(values, dims=DIMS, coords=coords(), name=name)


@pytest.fixture
def lists():
    """(y_true, y_score) DataArrays over (descriptor, query, candidate), heavy ties.

    Row (sift, q0) has no positive (R = 0), row (orb, q1) only positives, the rest are mixed.
    """
    rng = np.random.default_rng(20240601)
    shape = (len(DESCRIPTORS), len(QUERIES), N_CANDIDATES)
    y_score = rng.integers(0, 4, size=shape) / 3.0
    y_score[1, 2] = rng.normal(size=N_CANDIDATES)  # one continuous row
    y_true = rng.random(shape) < 0.35
    y_true[..., 0] = True
    y_true[..., 1] = False
    y_true[0, 0] = False
    y_true[1, 1] = True
    return cube(y_true, "y_true"), cube(y_score, "y_score")


@pytest.fixture
def one_relevant_lists():
    """Hamming-like integer distances with one relevant index per list (-1: none)."""
    rng = np.random.default_rng(7)
    shape = (len(DESCRIPTORS), len(QUERIES), N_CANDIDATES)
    distances = cube(rng.integers(0, 4, size=shape), "distances")
    index = rng.integers(0, N_CANDIDATES, size=shape[:2])
    index[0, 3] = -1
    index[1, 0] = -1
    relevant_index = xr.DataArray(
        index, dims=DIMS[:2], coords={k: v for k, v in coords().items() if k != "candidate"}
    )
    return distances, relevant_index


@contextlib.contextmanager
def no_dask_compute():
    """Fail if anything is computed by dask inside the block (the result must stay lazy)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("dask computed a graph while a lazy result was expected")

    with dask.config.set(scheduler=forbidden):
        yield


def chunked(*arrays):
    return tuple(a.chunk({"query": 2}) for a in arrays)


def assert_keeps_labels(result, template, dims):
    """``result`` is a DataArray with ``dims`` and the coordinates of ``template`` along them."""
    assert isinstance(result, xr.DataArray)
    assert result.dims == dims
    for dim in dims:
        if dim in template.coords:
            np.testing.assert_array_equal(result[dim].values, template[dim].values)
    if "query" in dims and "scene" in template.coords:
        np.testing.assert_array_equal(result["scene"].values, template["scene"].values)


def assert_lazy(result):
    assert isinstance(result, xr.DataArray)
    assert result.chunks is not None
    assert dask.is_dask_collection(result)


def assert_same(actual, expected):
    np.testing.assert_allclose(np.asarray(actual, dtype=float), expected, rtol=1e-12, atol=0)


def assert_lazy_equal(lazy, template, dims, expected):
    """``lazy`` is dask-backed; computed, it keeps the labels of ``template`` along ``dims`` and
    equals ``expected``. Returns the computed result."""
    assert_lazy(lazy)
    computed = lazy.compute()
    assert_keeps_labels(computed, template, dims)
    assert_same(computed.values, expected)
    return computed


# --------------------------------------------------------------------------------------------
# Average precision and ROC AUC
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", mc.AP_METHODS)
def test_average_precision_dataarray_equals_numpy(lists, method):
    y_true, y_score = lists
    result = mc.average_precision(y_true, y_score, method=method, dim="candidate")
    assert_keeps_labels(result, y_true, ("descriptor", "query"))
    expected = mc.average_precision(y_true.values, y_score.values, method=method)
    assert isinstance(expected, np.ndarray) and expected.shape == (2, 5)
    assert_same(result.values, expected)
    assert np.isnan(result.sel(descriptor="sift", query="q0"))  # R = 0
    # per-row 1-D NumPy calls
    for d in range(2):
        for q in range(5):
            row = mc.average_precision(y_true.values[d, q], y_score.values[d, q], method=method)
            assert_same(result.values[d, q], row)


@pytest.mark.parametrize("tie_policy", ["optimistic", "pessimistic", "expected"])
def test_average_precision_ir_tie_policies_dataarray(lists, tie_policy):
    y_true, y_score = lists
    result = mc.average_precision(
        y_true, y_score, method="ir", tie_policy=tie_policy, dim="candidate"
    )
    assert_keeps_labels(result, y_true, ("descriptor", "query"))
    expected = mc.average_precision(
        y_true.values, y_score.values, method="ir", tie_policy=tie_policy
    )
    assert_same(result.values, expected)


def test_average_precision_sample_dim_not_last(lists):
    y_true, y_score = lists
    order = ("candidate", "query", "descriptor")
    result = mc.average_precision(
        y_true.transpose(*order), y_score.transpose(*order), method="step", dim="candidate"
    )
    assert set(result.dims) == {"descriptor", "query"}
    expected = mc.average_precision(y_true.values, y_score.values, method="step")
    assert_same(result.transpose("descriptor", "query").values, expected)


@pytest.mark.parametrize("method", mc.AP_METHODS)
def test_average_precision_dask_is_lazy_and_equal(lists, method):
    y_true, y_score = lists
    eager = mc.average_precision(y_true, y_score, method=method, dim="candidate")
    with no_dask_compute():
        lazy = mc.average_precision(*chunked(y_true, y_score), method=method, dim="candidate")
    computed = assert_lazy_equal(lazy, y_true, ("descriptor", "query"), eager.values)
    assert_same(computed.values, mc.average_precision(y_true.values, y_score.values, method=method))


@pytest.mark.parametrize("kind", ["numpy", "dataarray"])
@pytest.mark.parametrize("method", mc.AP_METHODS)
def test_average_precision_dask_with_n_relevant(lists, method, kind):
    y_true, y_score = lists
    R = y_true.values.sum(axis=-1) + np.array([[0, 1, 0, 2, 0], [1, 0, 0, 0, 3]])
    expected = mc.average_precision(y_true.values, y_score.values, method=method, n_relevant=R)
    R_labeled = xr.DataArray(R, dims=("descriptor", "query")).chunk({"query": 2})
    for n_relevant in (R if kind == "numpy" else R_labeled,):
        with no_dask_compute():
            lazy = mc.average_precision(
                *chunked(y_true, y_score), method=method, n_relevant=n_relevant, dim="candidate"
            )
        assert_lazy_equal(lazy, y_true, ("descriptor", "query"), expected)


def test_roc_auc_dataarray_equals_numpy_and_sklearn(lists):
    y_true, y_score = lists
    result = mc.roc_auc(y_true, y_score, dim="candidate")
    assert_keeps_labels(result, y_true, ("descriptor", "query"))
    assert_same(result.values, mc.roc_auc(y_true.values, y_score.values))
    for d in range(2):
        for q in range(5):
            t, s = y_true.values[d, q], y_score.values[d, q]
            if t.all() or not t.any():
                assert np.isnan(result.values[d, q])
            else:
                assert result.values[d, q] == pytest.approx(roc_auc_score(t, s), rel=1e-12)


def test_roc_auc_dask_is_lazy_and_equal(lists):
    y_true, y_score = lists
    eager = mc.roc_auc(y_true.values, y_score.values)
    with no_dask_compute():
        lazy = mc.roc_auc(*chunked(y_true, y_score), dim="candidate")
    assert_lazy_equal(lazy, y_true, ("descriptor", "query"), eager)


# --------------------------------------------------------------------------------------------
# Rank statistics, AP from them, hit rate and precision at k
# --------------------------------------------------------------------------------------------


def test_rank_stats_dataarray_equals_numpy(one_relevant_lists):
    distances, relevant_index = one_relevant_lists
    better, ties = mc.rank_stats(distances, relevant_index, dim="candidate")
    exp_better, exp_ties = mc.rank_stats(distances.values, relevant_index.values)
    for result, expected in ((better, exp_better), (ties, exp_ties)):
        assert_keeps_labels(result, distances, ("descriptor", "query"))
        np.testing.assert_array_equal(result.values, expected)
    assert better.sel(descriptor="sift", query="q3") == -1
    assert ties.sel(descriptor="orb", query="q0") == -1
    # and the definition, one list at a time
    d, g = distances.values, relevant_index.values
    for i in range(2):
        for q in range(5):
            if g[i, q] == -1:
                continue
            others = np.delete(d[i, q], g[i, q])
            assert better.values[i, q] == np.sum(others < d[i, q, g[i, q]])
            assert ties.values[i, q] == np.sum(others == d[i, q, g[i, q]])


def test_rank_stats_dask_is_lazy_and_equal(one_relevant_lists):
    distances, relevant_index = one_relevant_lists
    exp_better, exp_ties = mc.rank_stats(distances.values, relevant_index.values)
    with no_dask_compute():
        better, ties = mc.rank_stats(*chunked(distances, relevant_index), dim="candidate")
    for result, expected in ((better, exp_better), (ties, exp_ties)):
        assert_lazy(result)
        computed = result.compute()
        assert_keeps_labels(computed, distances, ("descriptor", "query"))
        np.testing.assert_array_equal(computed.values, expected)


def test_rank_stats_numpy_relevant_index_next_to_dataarray(one_relevant_lists):
    distances, relevant_index = one_relevant_lists
    exp_better, exp_ties = mc.rank_stats(distances.values, relevant_index.values)
    better, ties = mc.rank_stats(distances, relevant_index.values, dim="candidate")
    for result, expected in ((better, exp_better), (ties, exp_ties)):
        assert_keeps_labels(result, distances, ("descriptor", "query"))
        np.testing.assert_array_equal(result.values, expected)
    with no_dask_compute():
        better, ties = mc.rank_stats(
            distances.chunk({"query": 2}), relevant_index.values, dim="candidate"
        )
    for result, expected in ((better, exp_better), (ties, exp_ties)):
        assert_lazy(result)
        np.testing.assert_array_equal(result.compute().values, expected)


@pytest.fixture
def stats(one_relevant_lists):
    """Rank statistics as DataArrays over (descriptor, query), from the NumPy path."""
    distances, relevant_index = one_relevant_lists
    b, t = mc.rank_stats(distances.values, relevant_index.values)
    template = relevant_index
    return (
        xr.DataArray(b, dims=template.dims, coords=template.coords),
        xr.DataArray(t, dims=template.dims, coords=template.coords),
    )


@pytest.mark.parametrize("policy", TIE_POLICIES)
def test_ap_from_rank_stats_dataarray_and_dask(stats, policy):
    better, ties = stats
    expected = mc.ap_from_rank_stats(better.values, ties.values, tie_policy=policy)
    result = mc.ap_from_rank_stats(better, ties, tie_policy=policy)
    assert_keeps_labels(result, better, ("descriptor", "query"))
    assert_same(result.values, expected)
    with no_dask_compute():
        lazy = mc.ap_from_rank_stats(*chunked(better, ties), tie_policy=policy)
    assert_lazy(lazy)
    assert_same(lazy.compute().values, expected)
    rank = mc.rank_from_rank_stats(better, ties, tie_policy=policy)
    assert_keeps_labels(rank, better, ("descriptor", "query"))
    assert_same(rank.values, mc.rank_from_rank_stats(better.values, ties.values, tie_policy=policy))


@pytest.mark.parametrize("function", [mc.hit_rate_at_k, mc.precision_at_k])
@pytest.mark.parametrize("policy", TIE_POLICIES)
def test_at_k_scalar_and_list(stats, function, policy):
    better, ties = stats
    # scalar k: the query dim is reduced away
    result = function(better, ties, 2, tie_policy=policy, dim="query")
    assert_keeps_labels(result, better, ("descriptor",))
    assert "k" not in result.dims
    assert_same(result.values, function(better.values, ties.values, 2, tie_policy=policy))
    # a list of k: a new "k" dim with the cut-offs as coordinate
    ks = [1, 2, 5]
    result = function(better, ties, ks, tie_policy=policy, dim="query")
    assert_keeps_labels(result, better, ("descriptor", "k"))
    np.testing.assert_array_equal(result["k"].values, ks)
    expected = function(better.values, ties.values, ks, tie_policy=policy)
    assert expected.shape == (2, 3)
    assert_same(result.values, expected)
    # per descriptor, 1-D NumPy calls with one k at a time
    for d in range(2):
        for j, k in enumerate(ks):
            row = function(better.values[d], ties.values[d], k, tie_policy=policy)
            assert_same(result.values[d, j], row)


@pytest.mark.parametrize("function", [mc.hit_rate_at_k, mc.precision_at_k])
@pytest.mark.parametrize("k", [3, [1, 3, 9]])
def test_at_k_dask_is_lazy_and_equal(stats, function, k):
    better, ties = stats
    expected = function(better.values, ties.values, k)
    with no_dask_compute():
        lazy = function(*chunked(better, ties), k, dim="query")
    dims = ("descriptor",) if np.ndim(k) == 0 else ("descriptor", "k")
    assert_lazy_equal(lazy, better, dims, expected)


def test_at_k_queries_not_last_dim(stats):
    better, ties = stats
    result = mc.hit_rate_at_k(better.T, ties.T, [1, 2], dim="query")
    expected = mc.hit_rate_at_k(better.values, ties.values, [1, 2])
    assert_same(result.transpose("descriptor", "k").values, expected)


# --------------------------------------------------------------------------------------------
# Confusion counts along thresholds
# --------------------------------------------------------------------------------------------


@pytest.fixture
def rows():
    """Five lists (query dim) with 1, 2, 3, 5 and 6 distinct scores."""
    lists = [  # (scores, labels)
        ([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0, 0, 0]),
        ([1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [1, 0, 0, 1, 1, 0]),
        ([0.1, 0.2, 0.3, 0.3, 0.2, 0.1], [0, 0, 0, 0, 0, 0]),
        ([5.0, 4.0, 3.0, 2.0, 1.0, 1.0], [1, 1, 1, 1, 1, 1]),
        ([0.6, 0.1, 0.4, 0.3, 0.2, 0.5], [0, 1, 1, 0, 1, 0]),
    ]
    y_score = np.array([scores for scores, _ in lists])
    y_true = np.array([labels for _, labels in lists], dtype=bool)
    c = {"query": QUERIES, "candidate": np.arange(6)}
    return (
        xr.DataArray(y_true, dims=("query", "candidate"), coords=c),
        xr.DataArray(y_score, dims=("query", "candidate"), coords=c),
    )


def check_padded_counts(result, y_true, y_score):
    """Each row: the 1-D NumPy call on the row, then its final point repeated, cutoff NaN."""
    width = result.sizes["threshold"]
    for q in range(y_true.shape[0]):
        t, s = y_true[q], y_score[q]
        row = mc.counts_at_thresholds(t, s)
        k = row.sizes["threshold"]
        # independent: the distinct scores, decreasing, and the brute-force counts
        cutoffs = np.unique(s)[::-1]
        assert k == cutoffs.size
        np.testing.assert_array_equal(row.cutoff.values, cutoffs)
        np.testing.assert_array_equal(row.tp.values, [np.sum(t & (s >= c)) for c in cutoffs])
        np.testing.assert_array_equal(row.fp.values, [np.sum(~t & (s >= c)) for c in cutoffs])
        for name in ("tp", "fp", "fn", "tn"):
            got = result[name].values[q]
            np.testing.assert_array_equal(got[:k], row[name].values)
            np.testing.assert_array_equal(got[k:], np.full(width - k, row[name].values[-1]))
        np.testing.assert_array_equal(result.cutoff.values[q, :k], cutoffs)
        assert np.isnan(result.cutoff.values[q, k:]).all()
        # final point: tp = P, fp = N, fn = tn = 0
        assert result.tp.values[q, -1] == t.sum() and result.fp.values[q, -1] == (~t).sum()
        assert result.fn.values[q, -1] == 0 and result.tn.values[q, -1] == 0


def test_counts_at_thresholds_2d_dataarray(rows):
    y_true, y_score = rows
    result = mc.counts_at_thresholds(y_true, y_score, dim="candidate")
    assert isinstance(result, xr.Dataset)
    for name in ("tp", "fp", "fn", "tn"):
        assert result[name].dims == ("query", "threshold")
        assert result[name].dtype == np.int64
    np.testing.assert_array_equal(result["query"].values, QUERIES)
    assert result.cutoff.dims == ("query", "threshold")
    assert result.sizes["threshold"] == 6  # the most distinct scores of any row
    check_padded_counts(result, y_true.values, y_score.values)


def test_counts_at_thresholds_3d_numpy_equals_per_row(lists):
    y_true, y_score = lists
    result = mc.counts_at_thresholds(y_true, y_score, dim="candidate")
    assert result.tp.dims == ("descriptor", "query", "threshold")
    np.testing.assert_array_equal(result["descriptor"].values, DESCRIPTORS)
    for d in range(2):
        check_padded_counts(result.isel(descriptor=d), y_true.values[d], y_score.values[d])


def test_counts_at_thresholds_dask_is_lazy_and_padded_to_samples(rows):
    y_true, y_score = rows
    with no_dask_compute():
        lazy = mc.counts_at_thresholds(*chunked(y_true, y_score), dim="candidate")
    for name in ("tp", "fp", "fn", "tn"):
        assert lazy[name].chunks is not None
    computed = lazy.compute()
    assert computed.sizes["threshold"] == y_true.sizes["candidate"]
    check_padded_counts(computed, y_true.values, y_score.values)


# --------------------------------------------------------------------------------------------
# Rates from counts
# --------------------------------------------------------------------------------------------

# (descriptor x scene) tables; column meanings: regular, all zero, no positives, no negatives,
# nothing predicted positive, nothing predicted negative
TP = np.array([[8, 0, 0, 3, 0, 2], [5, 0, 0, 1, 0, 4]])
FP = np.array([[1, 0, 4, 0, 0, 3], [2, 0, 1, 0, 0, 2]])
FN = np.array([[2, 0, 0, 2, 6, 0], [5, 0, 0, 0, 2, 0]])
TN = np.array([[3, 0, 5, 0, 7, 0], [9, 0, 3, 0, 1, 0]])
SCENES = ["regular", "empty", "no_pos", "no_neg", "none_sel", "all_sel"]


def reference_rate(name, tp, fp, fn, tn):
    """One rate from its definition on Python numbers; None where it is undefined."""

    def ratio(num, den):
        return None if den == 0 else num / den

    if name in ("tpr", "recall"):
        return ratio(tp, tp + fn)
    if name == "fpr":
        return ratio(fp, fp + tn)
    if name == "tnr":
        return ratio(tn, fp + tn)
    if name == "precision":
        return ratio(tp, tp + fp)
    if name == "accuracy":
        return ratio(tp + tn, tp + fp + fn + tn)
    if name == "f1":
        return ratio(2 * tp, 2 * tp + fp + fn)
    if name == "youden_j":
        if tp + fn == 0 or fp + tn == 0:
            return None
        return tp / (tp + fn) + tn / (tn + fp) - 1
    raise AssertionError(name)


RATES = ["tpr", "fpr", "tnr", "precision", "recall", "accuracy", "youden_j", "f1"]
FILL = {"nan": np.nan, 0: 0.0, 1: 1.0, "warn": 0.0}


def expected_table(name, zero_division):
    out = np.empty(TP.shape)
    n_undefined = 0
    for idx in np.ndindex(TP.shape):
        value = reference_rate(name, *(int(a[idx]) for a in (TP, FP, FN, TN)))
        if value is None:
            n_undefined += 1
            value = FILL[zero_division]
        out[idx] = value
    return out, n_undefined


def counts_dataset():
    dims = ("descriptor", "scene")
    c = {"descriptor": DESCRIPTORS, "scene": SCENES}
    return xr.Dataset(
        {k: (dims, v) for k, v in {"tp": TP, "fp": FP, "fn": FN, "tn": TN}.items()}, coords=c
    )


def call_rate(name, counts, zero_division, n_undefined):
    function = getattr(mc, name)
    if zero_division == "warn" and n_undefined:
        with pytest.warns(mc.UndefinedMetricWarning, match="undefined"):
            return function(counts, zero_division=zero_division)
    return function(counts, zero_division=zero_division)


def assert_table(actual, expected):
    np.testing.assert_allclose(np.asarray(actual, float), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("zero_division", ["nan", 0, 1, "warn"])
@pytest.mark.parametrize("name", RATES)
def test_rate_on_dataset(name, zero_division):
    expected, n_undefined = expected_table(name, zero_division)
    assert n_undefined > 0  # the table exercises the policy for every rate
    ds = counts_dataset()
    result = call_rate(name, ds, zero_division, n_undefined)
    assert isinstance(result, xr.DataArray)
    assert result.dims == ("descriptor", "scene")
    np.testing.assert_array_equal(result["scene"].values, SCENES)
    np.testing.assert_array_equal(result["descriptor"].values, DESCRIPTORS)
    assert_table(result.values, expected)


@pytest.mark.parametrize("zero_division", ["nan", 0, 1, "warn"])
@pytest.mark.parametrize("name", RATES)
def test_rate_on_dict_of_arrays(name, zero_division):
    expected, n_undefined = expected_table(name, zero_division)
    counts = {"tp": TP, "fp": FP, "fn": FN, "tn": TN}
    result = call_rate(name, counts, zero_division, n_undefined)
    assert isinstance(result, np.ndarray) and result.shape == TP.shape
    assert_table(result, expected)


@pytest.mark.parametrize("zero_division", ["nan", 0, 1, "warn"])
@pytest.mark.parametrize("name", RATES)
def test_rate_on_dict_of_scalars(name, zero_division):
    expected, _ = expected_table(name, zero_division)
    for idx in np.ndindex(TP.shape):
        counts = {
            k: int(a[idx]) for k, a in zip(("tp", "fp", "fn", "tn"), (TP, FP, FN, TN), strict=True)
        }
        undefined = reference_rate(name, *counts.values()) is None
        result = call_rate(name, counts, zero_division, int(undefined))
        assert np.ndim(result) == 0
        assert_table(float(result), expected[idx])


@pytest.mark.parametrize("zero_division", ["nan", 0, 1])
@pytest.mark.parametrize("name", RATES)
def test_rate_on_lazy_dataset(name, zero_division):
    expected, _ = expected_table(name, zero_division)
    ds = counts_dataset().chunk({"scene": 2})
    with no_dask_compute():
        result = getattr(mc, name)(ds, zero_division=zero_division)
    assert_lazy(result)
    computed = result.compute()
    assert computed.dims == ("descriptor", "scene")
    np.testing.assert_array_equal(computed["scene"].values, SCENES)
    assert_table(computed.values, expected)


@pytest.mark.parametrize("name", RATES)
def test_rate_warn_policy_on_lazy_dataset(name):
    expected, _ = expected_table(name, "warn")
    ds = counts_dataset().chunk({"scene": 2})
    with pytest.warns(mc.UndefinedMetricWarning):
        result = getattr(mc, name)(ds, zero_division="warn")
    assert_table(np.asarray(result), expected)


@pytest.mark.parametrize("name", RATES)
def test_rate_warn_policy_silent_when_defined(name):
    counts = {
        "tp": np.array([3, 1]),
        "fp": np.array([1, 2]),
        "fn": np.array([2, 2]),
        "tn": np.array([4, 1]),
    }
    result = getattr(mc, name)(counts, zero_division="warn")  # filterwarnings=error: no warning
    expected = [
        reference_rate(name, *(int(counts[k][i]) for k in ("tp", "fp", "fn", "tn")))
        for i in range(2)
    ]
    assert_table(result, expected)


# --------------------------------------------------------------------------------------------
# Confidence intervals of rates
# --------------------------------------------------------------------------------------------

PROPORTION_COUNTS = {  # rate -> (successes, trials) of one 2x2 table (tp, fp, fn, tn)
    "tpr": lambda tp, fp, fn, tn: (tp, tp + fn),
    "recall": lambda tp, fp, fn, tn: (tp, tp + fn),
    "fpr": lambda tp, fp, fn, tn: (fp, fp + tn),
    "tnr": lambda tp, fp, fn, tn: (tn, fp + tn),
    "precision": lambda tp, fp, fn, tn: (tp, tp + fp),
    "accuracy": lambda tp, fp, fn, tn: (tp + tn, tp + fp + fn + tn),
}


@pytest.mark.parametrize("alpha", [0.05, 0.1])
@pytest.mark.parametrize("rate", list(PROPORTION_COUNTS))
def test_rate_confint_dataset_equals_statsmodels_wilson(rate, alpha):
    ds = counts_dataset()
    result = mc.rate_confint(ds, rate, alpha=alpha)
    assert isinstance(result, xr.Dataset)
    proportion = PROPORTION_COUNTS[rate]
    saw_empty = False
    for name in ("estimate", "low", "high"):
        assert isinstance(result[name], xr.DataArray)
        assert result[name].dims == ("descriptor", "scene")
        np.testing.assert_array_equal(result[name]["scene"].values, SCENES)
    for idx in np.ndindex(TP.shape):
        k, n = proportion(*(int(table[idx]) for table in (TP, FP, FN, TN)))
        got = [float(result[name].values[idx]) for name in ("estimate", "low", "high")]
        if n == 0:
            saw_empty = True
            assert all(np.isnan(g) for g in got)
            continue
        low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
        assert got[0] == pytest.approx(k / n, rel=1e-12)
        assert got[1] == pytest.approx(low, rel=1e-12, abs=1e-15)
        assert got[2] == pytest.approx(high, rel=1e-12, abs=1e-15)
    assert saw_empty


def test_rate_confint_all_trials_empty_is_nan():
    ds = counts_dataset().isel(scene=[1])  # the all-zero column only
    result = mc.rate_confint(ds, "tpr")
    for name in ("estimate", "low", "high"):
        assert np.isnan(result[name].values).all()


# --------------------------------------------------------------------------------------------
# Errors: dim
# --------------------------------------------------------------------------------------------


def _sample_calls():
    """(name, function(a, b, dim)) for functions taking two sample-dim arrays."""
    return [
        ("average_precision", lambda a, b, dim: mc.average_precision(a, b, dim=dim)),
        (
            "average_precision_ir",
            lambda a, b, dim: mc.average_precision(a, b, method="ir", dim=dim),
        ),
        ("roc_auc", lambda a, b, dim: mc.roc_auc(a, b, dim=dim)),
        ("roc_curve", lambda a, b, dim: mc.roc_curve(a, b, dim=dim)),
        ("pr_curve", lambda a, b, dim: mc.pr_curve(a, b, dim=dim)),
        ("counts_at_thresholds", lambda a, b, dim: mc.counts_at_thresholds(a, b, dim=dim)),
    ]


SAMPLE_CALLS = _sample_calls()


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "dask"])
@pytest.mark.parametrize("call", [c for _, c in SAMPLE_CALLS], ids=[n for n, _ in SAMPLE_CALLS])
def test_dim_missing_for_nd_dataarray(lists, call, lazy):
    y_true, y_score = chunked(*lists) if lazy else lists
    with pytest.raises(mc.InvalidInputError, match="dim"):
        call(y_true, y_score, None)


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "dask"])
@pytest.mark.parametrize("call", [c for _, c in SAMPLE_CALLS], ids=[n for n, _ in SAMPLE_CALLS])
def test_dim_not_present(lists, call, lazy):
    y_true, y_score = chunked(*lists) if lazy else lists
    with pytest.raises(mc.InvalidInputError, match="not_a_dim"):
        call(y_true, y_score, "not_a_dim")


@pytest.mark.parametrize("call", [c for _, c in SAMPLE_CALLS], ids=[n for n, _ in SAMPLE_CALLS])
def test_dim_given_for_numpy(lists, call):
    y_true, y_score = lists
    with pytest.raises(mc.InvalidInputError, match="dim"):
        call(y_true.values, y_score.values, "candidate")


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "dask"])
def test_dim_errors_rank_stats(one_relevant_lists, lazy):
    distances, relevant_index = chunked(*one_relevant_lists) if lazy else one_relevant_lists
    with pytest.raises(mc.InvalidInputError, match="dim"):
        mc.rank_stats(distances, relevant_index)
    with pytest.raises(mc.InvalidInputError, match="not_a_dim"):
        mc.rank_stats(distances, relevant_index, dim="not_a_dim")
    with pytest.raises(mc.InvalidInputError, match="dim"):
        mc.rank_stats(distances.values, relevant_index.values, dim="candidate")


@pytest.mark.parametrize("function", [mc.hit_rate_at_k, mc.precision_at_k])
@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "dask"])
def test_dim_errors_at_k(stats, function, lazy):
    better, ties = chunked(*stats) if lazy else stats
    with pytest.raises(mc.InvalidInputError, match="dim"):
        function(better, ties, 1)
    with pytest.raises(mc.InvalidInputError, match="not_a_dim"):
        function(better, ties, 1, dim="not_a_dim")
    with pytest.raises(mc.InvalidInputError, match="dim"):
        function(better.values, ties.values, 1, dim="query")


def test_lazy_inputs_with_no_samples_give_the_empty_result():
    empty = xr.DataArray(np.zeros((2, 0), int), dims=("descriptor", "query")).chunk()
    result = mc.hit_rate_at_k(empty, empty, [1, 5], dim="query")
    assert result.dims == ("descriptor", "k")
    assert np.isnan(result.values).all()  # no query with a relevant item: undefined
