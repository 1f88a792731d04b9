"""Average precision (six methods), rank statistics, tie policies, hit rate and P@k."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import xarray as xr
from sklearn.metrics import average_precision_score

import metricalc as mc
from metricalc.core import kernels
from tests.conftest import random_cases

# ---------------------------------------------------------------------------------------------
# Slow, obvious implementations written from the definitions of docs/protocols.md, protocol 5
# ---------------------------------------------------------------------------------------------


def stable_ranking(y_true, y_score):
    """Relevance in decreasing-score order, ties keeping input order (Python's sort is stable)."""
    order = sorted(range(len(y_score)), key=lambda i: -float(y_score[i]))
    return [bool(y_true[i]) for i in order]


def retrieved_ranking(y_true, y_score):
    """VLFeat / hpatches: the stable ranking without the items scored -inf (never retrieved)."""
    kept = [i for i in range(len(y_score)) if y_score[i] != -np.inf]
    return stable_ranking([y_true[i] for i in kept], [y_score[i] for i in kept])


def mean_precision_at_relevant(ranked, n_relevant=None):
    """Sum of precision at each relevant rank of a ranked relevance list, divided by R."""
    R = n_relevant if n_relevant is not None else sum(ranked)
    hits, total = 0, 0.0
    for rank, rel in enumerate(ranked, start=1):
        if rel:
            hits += 1
            total += hits / rank
    return total / R


def slow_ir(y_true, y_score, n_relevant=None, tie_policy="optimistic"):
    """IR AP with tied items put relevant-first (optimistic) or relevant-last (pessimistic)."""
    sign = -1 if tie_policy == "optimistic" else 1
    order = sorted(range(len(y_score)), key=lambda i: (-float(y_score[i]), sign * int(y_true[i])))
    return mean_precision_at_relevant([bool(y_true[i]) for i in order], n_relevant)


def slow_vlfeat(y_true, y_score, n_relevant=None):
    R = n_relevant if n_relevant is not None else int(np.sum(y_true))
    return mean_precision_at_relevant(retrieved_ranking(y_true, y_score), R)


def slow_points(y_true, y_score, n_relevant=None):
    """Per-item (recall, precision) points in stable order."""
    ranked = stable_ranking(y_true, y_score)
    R = n_relevant if n_relevant is not None else sum(ranked)
    tp, points = 0, []
    for rank, rel in enumerate(ranked, start=1):
        tp += rel
        points.append((tp / R, tp / rank))
    return points


def slow_trapezoid(y_true, y_score, n_relevant=None):
    """hpatches python: precision max(tp, 1e-10) / max(tp + fp, 1e-10), from (tp, fp) = (0, 0)."""
    ranked = retrieved_ranking(y_true, y_score)
    R = n_relevant if n_relevant is not None else int(np.sum(y_true))
    tp, points = 0, [(0.0, 1.0)]
    for rank, rel in enumerate(ranked, start=1):
        tp += rel
        points.append((tp / R, max(tp, 1e-10) / rank))
    area = 0.0
    for (r0, p0), (r1, p1) in itertools.pairwise(points):
        area += (r1 - r0) * (p0 + p1) / 2
    return area


def slow_interpolated(y_true, y_score, thresholds, n_relevant=None):
    points = slow_points(y_true, y_score, n_relevant)
    total = 0.0
    for t in thresholds:
        reached = [p for r, p in points if r >= t]
        total += max(reached) if reached else 0.0
    return total / len(thresholds)


def slow_voc11(y_true, y_score, n_relevant=None):
    """py-faster-rcnn ``voc_ap(use_07_metric=True)``: levels from ``np.arange(0., 1.1, 0.1)``."""
    levels = [0.0]
    while len(levels) < 11:  # start + i * step, as np.arange computes its values
        levels.append(0.0 + len(levels) * 0.1)
    return slow_interpolated(y_true, y_score, levels, n_relevant)


def slow_coco101(y_true, y_score, n_relevant=None):
    return slow_interpolated(y_true, y_score, list(np.linspace(0.0, 1.0, 101)), n_relevant)


SLOW = {
    "vlfeat": slow_vlfeat,
    "trapezoid": slow_trapezoid,
    "voc11": slow_voc11,
    "coco101": slow_coco101,
}

# ---------------------------------------------------------------------------------------------
# step = scikit-learn
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_step_equals_sklearn_average_precision_score(seed):
    for y_true, y_score in random_cases(seed=20 + seed, count=150, large=(1000, 10_000, 100_000)):
        ours = mc.average_precision(y_true, y_score, method="step", zero_division=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn warns on all-negative input
            expected = average_precision_score(y_true, y_score)
        assert ours == pytest.approx(expected, abs=1e-12)


def test_step_hand_case_with_tied_threshold():
    # 0.9 negative, then 0.5 tied positive/positive, then 0.3 positive
    ap = mc.average_precision([0, 1, 1, 0, 1], [0.1, 0.5, 0.5, 0.9, 0.3], method="step")
    assert ap == pytest.approx((2 / 3 + 2 / 3 + 3 / 4) / 3)


def test_step_with_n_relevant_counts_missing_positives_as_zero():
    ap = mc.average_precision([1, 0, 1], [3, 2, 1], method="step", n_relevant=4)
    assert ap == pytest.approx((1 + 2 / 3) / 4)


# ---------------------------------------------------------------------------------------------
# ir: hand cases of DescriptorWorkbench and the slow implementation
# ---------------------------------------------------------------------------------------------

DESCENDING = [5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    ("relevance", "expected"),
    [
        ([1, 1, 0, 0, 0], 1.0),
        ([0, 0, 0, 1, 1], 0.325),
        ([0, 0, 1, 0, 0], 1 / 3),
    ],
)
def test_ir_descriptorworkbench_examples(relevance, expected):
    assert mc.average_precision(relevance, DESCENDING, method="ir") == pytest.approx(expected)


def test_ir_no_relevant_item_is_nan_by_default_zero_on_request():
    assert np.isnan(mc.average_precision([0, 0, 0], [3, 2, 1], method="ir"))
    assert mc.average_precision([0, 0, 0], [3, 2, 1], method="ir", zero_division=0) == 0.0
    with pytest.warns(mc.UndefinedMetricWarning):
        assert mc.average_precision([0, 0, 0], [3, 2, 1], method="ir", zero_division="warn") == 0


def random_tied_list(rng, max_n, max_levels):
    """A list of fewer than ``max_n`` items, at least one relevant, with integer scores of fewer
    than ``max_levels`` levels (many ties)."""
    n = int(rng.integers(1, max_n))
    y_true = rng.random(n) < rng.random()
    if not y_true.any():
        y_true[rng.integers(n)] = True
    return y_true, rng.integers(0, int(rng.integers(1, max_levels)), n)


@pytest.mark.parametrize("tie_policy", ["optimistic", "pessimistic"])
def test_ir_equals_slow_implementation(tie_policy):
    rng = np.random.default_rng(21)
    for _ in range(300):
        y_true, y_score = random_tied_list(rng, 40, 8)
        n_relevant = int(y_true.sum() + rng.integers(0, 3))
        ours = mc.average_precision(
            y_true, y_score, method="ir", tie_policy=tie_policy, n_relevant=n_relevant
        )
        assert ours == pytest.approx(slow_ir(y_true, y_score, n_relevant, tie_policy), abs=1e-12)


def test_ir_without_ties_is_the_same_for_every_policy():
    rng = np.random.default_rng(22)
    y_true = rng.random(50) < 0.3
    y_score = rng.permutation(50)
    values = {
        p: mc.average_precision(y_true, y_score, method="ir", tie_policy=p)
        for p in ("optimistic", "pessimistic", "expected")
    }
    assert len({round(v, 12) for v in values.values()}) == 1
    assert values["expected"] == pytest.approx(slow_ir(y_true, y_score))


def test_ir_expected_hand_case():
    # one relevant item tied with three others after two better ones: b = 2, t = 3
    y_true = [0, 0, 1, 0, 0, 0]
    y_score = [9, 8, 5, 5, 5, 5]
    expected = np.mean([1 / 3, 1 / 4, 1 / 5, 1 / 6])
    assert mc.average_precision(y_true, y_score, method="ir") == pytest.approx(expected)
    workbench = mc.average_precision(y_true, y_score, method="ir", tie_policy="workbench")
    assert workbench == pytest.approx(1 / 5)


# ---------------------------------------------------------------------------------------------
# vlfeat, trapezoid, voc11, coco101: hand cases and slow implementations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "expected", "expected_r4"),
    [
        ("vlfeat", (1 + 2 / 3) / 2, (1 + 2 / 3) / 4),
        # points (0,1) (.5,1) (.5,.5) (1,2/3): .5 * 1 + 0 + .5 * (.5 + 2/3) / 2
        ("trapezoid", 0.5 + 0.5 * (0.5 + 2 / 3) / 2, 0.25 + 0.25 * (0.5 + 2 / 3) / 2),
        # envelope 1 up to recall .5 (6 of 11 thresholds), then 2/3 (5 thresholds)
        ("voc11", (6 + 5 * 2 / 3) / 11, (3 + 3 * 2 / 3) / 11),
        # 51 of 101 thresholds <= .5 get 1, the other 50 get 2/3
        ("coco101", (51 + 50 * 2 / 3) / 101, (26 + 25 * 2 / 3) / 101),
    ],
)
def test_stable_methods_hand_case(method, expected, expected_r4):
    y_true, y_score = [1, 0, 1], [3, 2, 1]
    assert mc.average_precision(y_true, y_score, method=method) == pytest.approx(expected)
    assert mc.average_precision(y_true, y_score, method=method, n_relevant=4) == pytest.approx(
        expected_r4
    )


@pytest.mark.parametrize("method", sorted(SLOW))
def test_stable_methods_equal_slow_implementations(method):
    rng = np.random.default_rng(23)
    for _ in range(300):
        y_true, y_score = random_tied_list(rng, 30, 6)
        n = len(y_true)
        y_score = y_score.astype(float)
        y_score[rng.random(n) < 0.1] = -np.inf  # never retrieved by VLFeat and hpatches
        n_relevant = int(y_true.sum() + rng.integers(0, 3))
        for R in (None, n_relevant):
            ours = mc.average_precision(y_true, y_score, method=method, n_relevant=R)
            assert ours == pytest.approx(SLOW[method](y_true, y_score, R), abs=1e-12)


def test_voc11_levels_are_those_of_py_faster_rcnn():
    # R = 10: recall 3/10 = 0.3 does not reach the level 0.30000000000000004, so that level takes
    # the envelope from the 4th relevant item on (10/17 here), not 1.0
    y_true = [1, 1, 1] + [0] * 7 + [1] * 7
    y_score = -np.arange(17)
    expected = (3 * 1.0 + 8 * 10 / 17) / 11
    assert mc.average_precision(y_true, y_score, method="voc11") == pytest.approx(expected)


@pytest.mark.parametrize(
    ("method", "expected"),
    # y = [1, 0, 1], s = [1, 0, -inf]: only the first two items are retrieved, R = 2
    [("vlfeat", 0.5), ("trapezoid", 0.5), ("ir", (1 + 2 / 3) / 2), ("step", (1 + 2 / 3) / 2)],
)
def test_minus_infinity_is_never_retrieved_by_vlfeat_and_hpatches(method, expected):
    ap = mc.average_precision([1, 0, 1], [1.0, 0.0, -np.inf], method=method)
    assert ap == pytest.approx(expected)


def test_large_integer_scores_are_sorted_exactly():
    big = 2**53
    y_true = [1, 0, 1, 0, 0]
    y_score = np.array([big + 1, big, big + 1, big, big + 1], dtype=np.int64)
    c = mc.counts_at_thresholds(y_true, y_score)
    assert c.tp.values.tolist() == [2, 2]
    assert mc.average_precision(y_true, y_score) == pytest.approx(
        average_precision_score(y_true, y_score)
    )
    assert mc.average_precision(y_true, y_score, method="vlfeat") == pytest.approx(
        (1 + 2 / 2) / 2  # stable: big+1 items at input positions 0, 2, 4 rank first
    )


def test_boolean_scores_rank_true_first():
    y_true = [1, 0, 1, 0]
    y_score = np.array([True, True, False, False])
    assert mc.average_precision(y_true, y_score, method="step") == pytest.approx(
        average_precision_score(y_true, y_score.astype(int))
    )
    assert mc.counts_at_thresholds(y_true, y_score).cutoff.values.tolist() == [1.0, 0.0]


def test_stable_methods_keep_input_order_of_ties():
    # relevant item tied with a negative: first in input order ranks first
    assert mc.average_precision([1, 0], [1.0, 1.0], method="vlfeat") == 1.0
    assert mc.average_precision([0, 1], [1.0, 1.0], method="vlfeat") == 0.5


@pytest.mark.parametrize("method", mc.AP_METHODS)
def test_rows_equal_single_lists_across_chunks(method, monkeypatch):
    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", 64)  # several rows per chunk, many chunks
    rng = np.random.default_rng(24)
    y_true = rng.random((3, 25, 30)) < 0.2
    y_score = rng.integers(0, 6, (3, 25, 30))
    n_relevant = y_true.sum(-1) + rng.integers(0, 2, (3, 25))
    ours = mc.average_precision(y_true, y_score, method=method, n_relevant=n_relevant)
    assert ours.shape == (3, 25)
    for i in np.ndindex(3, 25):
        single = mc.average_precision(
            y_true[i], y_score[i], method=method, n_relevant=n_relevant[i]
        )
        np.testing.assert_allclose(ours[i], single, rtol=1e-12)


def test_integer_and_unsigned_scores_rank_like_floats():
    rng = np.random.default_rng(25)
    y_true = rng.random(200) < 0.3
    scores = rng.integers(0, 255, 200)
    for method in mc.AP_METHODS:
        as_uint8 = mc.average_precision(y_true, scores.astype(np.uint8), method=method)
        as_float = mc.average_precision(y_true, scores.astype(float), method=method)
        assert as_uint8 == pytest.approx(as_float, abs=1e-15)


# ---------------------------------------------------------------------------------------------
# Rank statistics and tie policies
# ---------------------------------------------------------------------------------------------


def test_rank_stats_hand_case():
    d = np.array([[0.5, 0.2, 0.5, 0.1, 0.5], [1.0, 2.0, 3.0, 4.0, 5.0], [7, 7, 7, 7, 7]])
    better, ties = mc.rank_stats(d, np.array([0, -1, 4]))
    assert better.tolist() == [2, -1, 0]
    assert ties.tolist() == [2, -1, 4]


def test_rank_stats_equals_slow_count_across_chunks(monkeypatch):
    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", 100)
    rng = np.random.default_rng(26)
    d = rng.integers(0, 8, (57, 40)).astype(np.uint8)  # Hamming-like: many ties
    g = rng.integers(-1, 40, 57)
    better, ties = mc.rank_stats(d, g)
    for q in range(57):
        if g[q] < 0:
            assert (better[q], ties[q]) == (-1, -1)
            continue
        others = np.delete(d[q], g[q])
        assert better[q] == np.sum(others < d[q, g[q]])
        assert ties[q] == np.sum(others == d[q, g[q]])


@pytest.mark.parametrize(
    ("policy", "rank", "ap"),
    [
        ("optimistic", 3, 1 / 3),
        ("pessimistic", 6, 1 / 6),
        ("workbench", 5, 1 / 5),
        ("expected", 4.5, (1 / 3 + 1 / 4 + 1 / 5 + 1 / 6) / 4),
    ],
)
def test_tie_policies_hand_case(policy, rank, ap):
    assert mc.rank_from_rank_stats(2, 3, tie_policy=policy) == rank
    assert mc.ap_from_rank_stats(2, 3, tie_policy=policy) == pytest.approx(ap, abs=1e-15)


def test_workbench_rank_rounds_half_ties_up():
    # floor((ties + 1) / 2): 0 -> 0, 1 -> 1, 2 -> 1, 3 -> 2
    ranks = mc.rank_from_rank_stats(np.zeros(4, int), np.arange(4), tie_policy="workbench")
    assert ranks.tolist() == [1, 2, 2, 3]


def test_expected_ap_equals_mean_of_reciprocal_ranks():
    rng = np.random.default_rng(27)
    better = rng.integers(0, 10_000, 500)
    ties = rng.integers(0, 50, 500)
    ours = mc.ap_from_rank_stats(better, ties, tie_policy="expected")
    for b, t, value in zip(better, ties, ours, strict=True):
        assert value == pytest.approx(np.mean(1 / np.arange(b + 1, b + t + 2)), rel=1e-9)


def test_ap_from_rank_stats_r0_is_nan():
    ap = mc.ap_from_rank_stats(np.array([0, -1]), np.array([0, -1]))
    assert ap[0] == 1.0
    assert np.isnan(ap[1])


# ---------------------------------------------------------------------------------------------
# Hit rate and precision at k
# ---------------------------------------------------------------------------------------------


def test_hit_rate_and_precision_at_k_hand_case():
    better, ties = [0, 3, 9, -1], [0, 0, 0, -1]
    assert mc.hit_rate_at_k(better, ties, 1) == pytest.approx(1 / 3)
    assert mc.hit_rate_at_k(better, ties, [1, 5, 10]).tolist() == pytest.approx([1 / 3, 2 / 3, 1])
    assert mc.precision_at_k(better, ties, [1, 5, 10]).tolist() == pytest.approx(
        [1 / 3, 2 / 15, 1 / 10]
    )


def test_hit_rate_tie_policies():
    # relevant item tied at ranks 1..4 (b = 0, t = 3); k = 2
    assert mc.hit_rate_at_k([0], [3], 2, tie_policy="expected") == pytest.approx(0.5)
    assert mc.hit_rate_at_k([0], [3], 2, tie_policy="optimistic") == 1.0
    assert mc.hit_rate_at_k([0], [3], 2, tie_policy="pessimistic") == 0.0
    assert mc.hit_rate_at_k([0], [3], 2, tie_policy="workbench") == 0.0  # workbench rank 3


def test_hit_rate_without_valid_query_follows_zero_division():
    assert np.isnan(mc.hit_rate_at_k([-1, -1], [-1, -1], 1))
    assert mc.hit_rate_at_k([-1, -1], [-1, -1], 1, zero_division=0) == 0.0


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mc.average_precision([1, 0], [1, 2, 3]), "y_true has shape"),
        (lambda: mc.average_precision([1, 0], [1, np.nan]), "must not contain NaN"),
        (lambda: mc.average_precision([1, 3], [1, 2]), "binary labels"),
        (lambda: mc.average_precision([], []), "empty input"),
        (lambda: mc.average_precision([1, 0], [1, 2], method="map"), "method must be one of"),
        (
            lambda: mc.average_precision([1, 0], [1, 2], tie_policy="expected"),
            "tie_policy= applies to",
        ),
        (
            lambda: mc.average_precision([1, 0], [1, 2], method="ir", tie_policy="random"),
            "tie_policy must be None or one of",
        ),
        (
            lambda: mc.average_precision([1, 1], [1, 2], method="ir", tie_policy="workbench"),
            "one relevant item",
        ),
        (lambda: mc.average_precision([1, 1], [1, 2], n_relevant=1), "n_relevant must be >="),
        (lambda: mc.average_precision([1, 1], [1, 2], n_relevant=1.5), "n_relevant must hold"),
        (lambda: mc.rank_stats(np.ones((2, 3)), np.array([0, 3])), r"in \[0, 2\]; found 3"),
        (lambda: mc.rank_stats(np.ones((2, 3)), np.array([0.0, 1.0])), "must hold integers"),
        (lambda: mc.rank_stats(np.ones((2, 3)), np.array([0])), "one index per list"),
        (lambda: mc.rank_stats(np.array([[np.nan, 1.0]]), np.array([0])), "must not contain NaN"),
        (lambda: mc.ap_from_rank_stats(2, 3, tie_policy="median"), "tie_policy must be one of"),
        (lambda: mc.ap_from_rank_stats(-1, 3), "both -1"),
        (lambda: mc.ap_from_rank_stats(1.5, 3), "integer counts"),
        (lambda: mc.hit_rate_at_k([0], [0], 0), "k must be an integer >= 1"),
        (lambda: mc.hit_rate_at_k(0, 0, 1), "one value per query"),
        (lambda: mc.ap_from_rank_stats([0, 1, 2], [0, 0]), r"broadcastable\) shapes"),
        (
            lambda: mc.average_precision(
                xr.DataArray([[1, 0]], dims=("q", "s")),
                xr.DataArray([[0.2, 0.1]], dims=("q", "s")),
                n_relevant=xr.DataArray([[1, 1]], dims=("q", "s")),
                dim="s",
            ),
            "n_relevant must not have the sample dimension",
        ),
    ],
)
def test_bad_input_raises_clear_error(call, message):
    with pytest.raises(mc.InvalidInputError, match=message):
        call()
