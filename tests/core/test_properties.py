"""Property tests (hypothesis) of AP, ROC curves, confusion counts and rank statistics.

Every expected value is computed independently of metricalc: by a slow per-row Python loop, by
brute force over all orders of tied items, by scikit-learn, or from the defining formula.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

import metricalc as mc

SETTINGS = settings(max_examples=200, deadline=None, database=None)
TOL = 1e-12

# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------

TIED_VALUES = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])
"""A small set of score values: ties are heavy."""

CONTINUOUS_VALUES = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64)
"""Continuous scores (ties are rare but possible, e.g. 0.0 and -0.0)."""


@st.composite
def scored_lists(draw, *, min_size=1, max_size=12, tied=None, min_positives=1, max_positives=None):
    """(y_true, y_score) of one ranked list, with at least ``min_positives`` positives."""
    n = draw(st.integers(min_value=max(min_size, min_positives), max_value=max_size))
    if tied is None:
        tied = draw(st.booleans())
    values = TIED_VALUES if tied else CONTINUOUS_VALUES
    y_score = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    upper = n if max_positives is None else min(n, max_positives)
    n_pos = draw(st.integers(min_value=min_positives, max_value=upper))
    positions = draw(st.permutations(range(n)))[:n_pos]
    y_true = np.zeros(n, dtype=bool)
    y_true[list(positions)] = True
    return y_true, y_score


@st.composite
def two_class_lists(draw, max_size=12):
    """A list with at least one positive and at least one negative."""
    y_true, y_score = draw(scored_lists(min_size=2, max_size=max_size))
    assume(not y_true.all())
    return y_true, y_score


# --------------------------------------------------------------------------------------------
# Independent reference implementations
# --------------------------------------------------------------------------------------------


def ir_ap_of_order(relevant_in_order, n_relevant):
    """Plain IR AP of one fixed order: sum of precision at each relevant rank, divided by R."""
    hits = 0
    total = 0.0
    for rank, rel in enumerate(relevant_in_order, start=1):
        if rel:
            hits += 1
            total += hits / rank
    return total / n_relevant


def brute_force_expected_ir_ap(y_true, y_score, n_relevant):
    """Mean IR AP over every permutation of the internal order of every tie group."""
    groups = []
    for value in sorted(set(y_score.tolist()), reverse=True):
        groups.append([bool(t) for t, s in zip(y_true, y_score, strict=True) if s == value])
    per_group_orders = [list(itertools.permutations(g)) for g in groups]
    total = 0.0
    count = 0
    for combination in itertools.product(*per_group_orders):
        order = [rel for group in combination for rel in group]
        total += ir_ap_of_order(order, n_relevant)
        count += 1
    return total / count


def slow_rank_stats(distances, relevant_index):
    """better = #{i != g : d_i < d_g}, ties = #{i != g : d_i == d_g}; (-1, -1) where g = -1."""
    rows = distances.reshape(-1, distances.shape[-1]).tolist()
    indices = relevant_index.reshape(-1).tolist()
    better, ties = [], []
    for row, g in zip(rows, indices, strict=True):
        if g == -1:
            better.append(-1)
            ties.append(-1)
            continue
        better.append(sum(1 for i, d in enumerate(row) if i != g and d < row[g]))
        ties.append(sum(1 for i, d in enumerate(row) if i != g and d == row[g]))
    shape = relevant_index.shape
    return np.array(better).reshape(shape), np.array(ties).reshape(shape)


def brute_counts(y_true, y_score):
    """(cutoffs decreasing, tp, fp) with 'predicted positive' meaning score >= cutoff."""
    cutoffs = sorted(set(y_score.tolist()), reverse=True)
    tp = [int(np.sum(y_true & (y_score >= c))) for c in cutoffs]
    fp = [int(np.sum(~y_true & (y_score >= c))) for c in cutoffs]
    return np.array(cutoffs), np.array(tp), np.array(fp)


def non_decreasing(a):
    return bool(np.all(np.diff(a) >= 0))


# --------------------------------------------------------------------------------------------
# AP range and tie-policy ordering
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(case=scored_lists(), missing=st.integers(min_value=0, max_value=3))
def test_ap_in_unit_interval_for_every_method(case, missing):
    y_true, y_score = case
    n_relevant = int(y_true.sum()) + missing
    for method in mc.AP_METHODS:
        for R in (None, n_relevant):
            ap = float(mc.average_precision(y_true, y_score, method=method, n_relevant=R))
            assert -TOL <= ap <= 1 + TOL, (method, R, ap)


@SETTINGS
@given(case=scored_lists(), missing=st.integers(min_value=0, max_value=2))
def test_ir_tie_policies_are_ordered(case, missing):
    y_true, y_score = case
    R = int(y_true.sum()) + missing
    ap = {
        p: float(mc.average_precision(y_true, y_score, method="ir", tie_policy=p, n_relevant=R))
        for p in ("optimistic", "expected", "pessimistic")
    }
    assert ap["optimistic"] >= ap["expected"] - TOL
    assert ap["expected"] >= ap["pessimistic"] - TOL
    # the two extreme orders are plain IR APs of explicit orders (independent reference)
    order = sorted(range(len(y_true)), key=lambda i: (-y_score[i], not y_true[i]))
    assert ap["optimistic"] == pytest.approx(
        ir_ap_of_order([y_true[i] for i in order], R), rel=TOL, abs=TOL
    )
    order = sorted(range(len(y_true)), key=lambda i: (-y_score[i], bool(y_true[i])))
    assert ap["pessimistic"] == pytest.approx(
        ir_ap_of_order([y_true[i] for i in order], R), rel=TOL, abs=TOL
    )


@SETTINGS
@given(case=scored_lists(max_size=7), missing=st.integers(min_value=0, max_value=2))
def test_expected_ir_ap_equals_brute_force_over_tie_orders(case, missing):
    y_true, y_score = case
    R = int(y_true.sum()) + missing
    expected = brute_force_expected_ir_ap(y_true, y_score, R)
    got = float(
        mc.average_precision(y_true, y_score, method="ir", tie_policy="expected", n_relevant=R)
    )
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # the default tie policy of "ir" is "expected"
    default = float(mc.average_precision(y_true, y_score, method="ir", n_relevant=R))
    assert default == pytest.approx(expected, rel=1e-12, abs=1e-12)


@SETTINGS
@given(case=scored_lists())
def test_step_ap_equals_sklearn(case):
    y_true, y_score = case
    expected = average_precision_score(y_true, y_score)
    got = float(mc.average_precision(y_true, y_score, method="step"))
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


@SETTINGS
@given(case=scored_lists(max_positives=1), data=st.data())
def test_ir_ap_one_relevant_equals_ap_from_rank_stats(case, data):
    y_true, y_score = case
    (g,) = np.flatnonzero(y_true)
    better, ties = mc.rank_stats(-y_score, np.array(g))
    # brute-force rank statistics of the relevant item as a cross-check of the path used
    assert int(better) == sum(1 for i, s in enumerate(y_score) if i != g and s > y_score[g])
    assert int(ties) == sum(1 for i, s in enumerate(y_score) if i != g and s == y_score[g])
    for policy in mc.TIE_POLICIES:
        ap = float(mc.average_precision(y_true, y_score, method="ir", tie_policy=policy))
        from_stats = float(mc.ap_from_rank_stats(better, ties, tie_policy=policy))
        assert ap == pytest.approx(from_stats, rel=1e-12, abs=1e-12), policy


# --------------------------------------------------------------------------------------------
# Rank statistics
# --------------------------------------------------------------------------------------------

COUNTS = st.integers(min_value=0, max_value=500)


@SETTINGS
@given(better=COUNTS, ties=COUNTS)
def test_ap_from_rank_stats_policies_ordered_and_match_definitions(better, ties):
    ap = {p: float(mc.ap_from_rank_stats(better, ties, tie_policy=p)) for p in mc.TIE_POLICIES}
    rank = {p: float(mc.rank_from_rank_stats(better, ties, tie_policy=p)) for p in mc.TIE_POLICIES}
    assert ap["optimistic"] >= ap["expected"] - TOL
    assert ap["expected"] >= ap["pessimistic"] - TOL
    assert ap["optimistic"] >= ap["workbench"] >= ap["pessimistic"]
    assert rank["optimistic"] <= rank["workbench"] <= rank["pessimistic"]
    assert rank["optimistic"] <= rank["expected"] <= rank["pessimistic"]
    # docs/protocols.md, protocol 1, computed here from the definitions
    assert rank["optimistic"] == 1 + better
    assert rank["pessimistic"] == 1 + better + ties
    assert rank["workbench"] == 1 + better + (ties + 1) // 2
    assert rank["expected"] == 1 + better + ties / 2
    for p in ("optimistic", "pessimistic", "workbench"):
        assert ap[p] == pytest.approx(1 / rank[p], rel=1e-15), p
    mean_reciprocal = math.fsum(1 / r for r in range(1 + better, 2 + better + ties)) / (ties + 1)
    assert ap["expected"] == pytest.approx(mean_reciprocal, rel=1e-12)


@SETTINGS
@given(
    stats=st.lists(st.one_of(st.tuples(COUNTS, COUNTS), st.just((-1, -1))), min_size=1, max_size=10)
)
def test_rank_stats_functions_vectorized_with_missing(stats):
    better = np.array([b for b, _ in stats], dtype=np.int64)
    ties = np.array([t for _, t in stats], dtype=np.int64)
    for policy in mc.TIE_POLICIES:
        ap = mc.ap_from_rank_stats(better, ties, tie_policy=policy)
        rank = mc.rank_from_rank_stats(better, ties, tie_policy=policy)
        for i, (b, t) in enumerate(stats):
            if b == -1:
                assert np.isnan(ap[i]) and np.isnan(rank[i])
            else:
                assert ap[i] == float(mc.ap_from_rank_stats(b, t, tie_policy=policy))
                assert rank[i] == float(mc.rank_from_rank_stats(b, t, tie_policy=policy))


@st.composite
def distance_matrices(draw):
    rows = draw(st.integers(min_value=1, max_value=6))
    n = draw(st.integers(min_value=1, max_value=10))
    kind = draw(st.sampled_from(["int", "uint8", "float_tied", "float"]))
    if kind in ("int", "uint8"):
        elements = st.integers(min_value=0, max_value=3)
    elif kind == "float_tied":
        elements = st.sampled_from([0.0, -0.0, 0.25, 1.0, np.inf])
    else:
        elements = st.floats(allow_nan=False, width=64)
    dtype = {"int": np.int64, "uint8": np.uint8}.get(kind, np.float64)
    d = np.array(
        draw(st.lists(elements, min_size=rows * n, max_size=rows * n)), dtype=dtype
    ).reshape(rows, n)
    g = np.array(
        draw(st.lists(st.integers(min_value=-1, max_value=n - 1), min_size=rows, max_size=rows)),
        dtype=np.int64,
    )
    return d, g


@SETTINGS
@given(case=distance_matrices())
def test_rank_stats_equals_slow_per_row_count(case):
    d, g = case
    better, ties = mc.rank_stats(d, g)
    exp_better, exp_ties = slow_rank_stats(d, g)
    np.testing.assert_array_equal(better, exp_better)
    np.testing.assert_array_equal(ties, exp_ties)
    # a 3-D batch (the rows split over two leading axes) gives the same counts
    if d.shape[0] % 2 == 0:
        d3 = d.reshape(2, -1, d.shape[-1])
        g3 = g.reshape(2, -1)
        b3, t3 = mc.rank_stats(d3, g3)
        np.testing.assert_array_equal(b3, exp_better.reshape(2, -1))
        np.testing.assert_array_equal(t3, exp_ties.reshape(2, -1))


# --------------------------------------------------------------------------------------------
# Confusion counts and ROC curves
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(case=scored_lists(min_positives=0))
def test_counts_partition_and_monotone(case):
    y_true, y_score = case
    P, N = int(y_true.sum()), int((~y_true).sum())
    c = mc.counts_at_thresholds(y_true, y_score)
    tp, fp, fn, tn = (c[k].values for k in ("tp", "fp", "fn", "tn"))
    np.testing.assert_array_equal(tp + fn, np.full(tp.shape, P))
    np.testing.assert_array_equal(fp + tn, np.full(fp.shape, N))
    assert non_decreasing(tp) and non_decreasing(fp)
    assert (tp >= 0).all() and (fp >= 0).all() and (fn >= 0).all() and (tn >= 0).all()
    cutoffs, exp_tp, exp_fp = brute_counts(y_true, y_score)
    np.testing.assert_array_equal(c.cutoff.values, cutoffs)
    np.testing.assert_array_equal(tp, exp_tp)
    np.testing.assert_array_equal(fp, exp_fp)
    assert tp[-1] == P and fp[-1] == N


@SETTINGS
@given(case=two_class_lists())
def test_roc_curve_monotone_from_origin_to_corner(case):
    y_true, y_score = case
    roc = mc.roc_curve(y_true, y_score)
    fpr, tpr = roc.fpr.values, roc.tpr.values
    assert non_decreasing(fpr) and non_decreasing(tpr)
    assert (fpr[0], tpr[0]) == (0.0, 0.0)
    assert (fpr[-1], tpr[-1]) == (1.0, 1.0)
    assert np.isposinf(roc.cutoff.values[0])
    sk_fpr, sk_tpr, _ = roc_curve(y_true, y_score, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tpr, sk_tpr, rtol=0, atol=1e-15)
    assert float(mc.roc_auc(y_true, y_score)) == pytest.approx(
        roc_auc_score(y_true, y_score), rel=1e-12, abs=1e-12
    )


@SETTINGS
@given(case=scored_lists(min_positives=0))
def test_roc_curve_one_class_starts_at_origin(case):
    y_true, y_score = case
    roc = mc.roc_curve(y_true, y_score, zero_division=0)
    fpr, tpr = roc.fpr.values, roc.tpr.values
    assert (fpr[0], tpr[0]) == (0.0, 0.0)
    assert non_decreasing(fpr) and non_decreasing(tpr)
    P, N = int(y_true.sum()), int((~y_true).sum())
    assert tpr[-1] == (1.0 if P else 0.0)
    assert fpr[-1] == (1.0 if N else 0.0)
