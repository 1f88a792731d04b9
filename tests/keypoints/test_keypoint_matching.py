"""Ground truth by homography and per-query matching of one image pair, against hand values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

import metricalc as mc
from metricalc.keypoints.geometry import ground_truth, inside, nearest, project
from metricalc.keypoints.matching import (
    match_pair,
    prepare_candidates,
    prepare_queries,
    squared_distances,
)
from metricalc.keypoints.pairs import evaluate_pair

SHIFT = np.array([[1.0, 0.0, 10.0], [0.0, 1.0, 5.0], [0.0, 0.0, 1.0]])  # translation (10, 5)
SHAPE = (300, 300)


class Feat:
    """Minimal Features stand-in: keypoints (N, 2) and descriptors (N, D)."""

    def __init__(self, keypoints, descriptors):
        self.keypoints = np.asarray(keypoints, dtype=np.float64).reshape(-1, 2)
        self.descriptors = np.asarray(descriptors)


# ---------------------------------------------------------------------------------------------
# Ground truth (the DescriptorWorkbench gtest situations)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tau", "relevant"), [(3.0, -1), (5.0, 0)])
def test_translation_ground_truth_depends_on_tau(tau, relevant):
    # query (100, 100) projects to (110, 105); the only candidate is 4 px away
    gt = ground_truth([[100.0, 100.0]], [[114.0, 105.0]], SHIFT, SHAPE, tau=tau)
    assert gt.relevant.tolist() == [relevant]
    assert gt.projected.tolist() == [[110.0, 105.0]]
    assert gt.distance.tolist() == [4.0]


def test_tau_is_inclusive_and_nearest_wins():
    gt = ground_truth([[100.0, 100.0]], [[113.0, 105.0], [110.0, 107.0]], SHIFT, SHAPE, tau=3.0)
    assert gt.relevant.tolist() == [1]  # 2 px beats 3 px
    gt = ground_truth([[100.0, 100.0]], [[113.0, 105.0]], SHIFT, SHAPE, tau=3.0)
    assert gt.relevant.tolist() == [0]  # exactly tau counts


def test_equal_keypoint_distances_pick_the_lowest_index():
    gt = ground_truth([[100.0, 100.0]], [[111.0, 105.0], [109.0, 105.0]], SHIFT, SHAPE, tau=3.0)
    assert gt.relevant.tolist() == [0]


def test_empty_keypoint_lists():
    gt = ground_truth(np.empty((0, 2)), [[110.0, 105.0]], SHIFT, SHAPE)
    assert gt.relevant.shape == (0,)
    gt = ground_truth([[100.0, 100.0]], np.empty((0, 2)), SHIFT, SHAPE)
    assert gt.relevant.tolist() == [-1]


def test_projection_outside_image_b_or_its_border_has_no_ground_truth():
    # (270, 100) projects to (280, 105): inside the image, but 19 px from the right edge
    gt = ground_truth([[270.0, 100.0]], [[280.0, 105.0]], SHIFT, SHAPE, border=40)
    assert gt.relevant.tolist() == [-1]
    gt = ground_truth([[270.0, 100.0]], [[280.0, 105.0]], SHIFT, SHAPE, border=0)
    assert gt.relevant.tolist() == [0]


def test_projection_at_infinity_is_undefined():
    H = np.array([[1.0, 0, 0], [0, 1.0, 0], [0.01, 0, -1.0]])  # w = 0.01 x - 1 = 0 at x = 100
    projected, defined = project(H, [[100.0, 50.0], [50.0, 50.0]])
    assert defined.tolist() == [False, True]
    assert np.isnan(projected[0]).all()
    assert projected[1].tolist() == pytest.approx([-100.0, -100.0])


def test_inside_and_nearest_helpers():
    assert inside([[40, 40], [259, 259], [260, 100], [np.nan, 50]], SHAPE, 40).tolist() == [
        True,
        True,
        False,
        False,
    ]
    index, distance = nearest([[0.0, 0.0], [np.nan, 1.0]], [[3.0, 4.0], [0.0, 6.0]])
    assert index.tolist() == [0, -1]
    assert distance[0] == 5.0 and np.isnan(distance[1])


def _nearest_by_brute_force(points, candidates):
    """The rule of docs/protocols.md, protocol 2 the slow, obvious way: the exact (``np.hypot``)
    distance to every candidate, the first minimum (the lowest index) of each row."""
    exact = np.hypot(*(candidates[None, :, :] - points[:, None, :]).transpose(2, 0, 1))
    return np.argmin(exact, axis=1), exact.min(axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_nearest_breaks_ties_as_the_brute_force_rule(seed):
    """Keypoints on a coarse grid with repeated positions (as SIFT reports one location with
    several orientations): many queries have two or more candidates equally far, and the ball
    search of the tie-break gives the brute force's lowest index every time."""
    rng = np.random.default_rng(seed)
    candidates = rng.integers(0, 12, size=(300, 2)).astype(np.float64)
    candidates = np.concatenate([candidates, candidates[rng.integers(0, 300, 60)]])  # duplicates
    points = np.concatenate(
        [
            rng.integers(0, 12, size=(200, 2)) + rng.choice([0.0, 0.5], size=(200, 2)),
            rng.uniform(-3, 15, size=(200, 2)),
        ]
    )
    index, distance = nearest(points, candidates)
    expected_index, expected_distance = _nearest_by_brute_force(points, candidates)
    _, where = cKDTree(candidates).query(points, k=2)
    assert (index != where[:, 0]).sum() > 0  # the k-d tree alone picks another index somewhere
    assert index.tolist() == expected_index.tolist()
    assert distance.tolist() == expected_distance.tolist()


def test_bad_homography_is_refused():
    with pytest.raises(mc.InvalidInputError, match="finite 3x3"):
        project(np.eye(2), [[1.0, 2.0]])


# ---------------------------------------------------------------------------------------------
# Matching one pair
# ---------------------------------------------------------------------------------------------

QUERIES = Feat([[100, 100], [150, 150]], np.array([[0, 0], [100, 0]], np.float32))
# c0 is q0's correspondence, c1 q1's; c2..c4 are 1, 2, 3 away from q1 in descriptor space
CANDIDATES = Feat(
    [[110, 105], [160, 155], [200, 200], [220, 220], [240, 240]],
    np.array([[1, 0], [100, 4], [100, 1], [100, 2], [100, 3]], np.float32),
)


def test_pair_with_rank_1_and_rank_4_queries():
    r = evaluate_pair(QUERIES, CANDIDATES, SHIFT, SHAPE, SHAPE, tau=3.0, border=40.0)
    assert r["query_keypoint"].tolist() == [0, 1]
    assert r["n_relevant"].tolist() == [1, 1]
    assert r["better"].tolist() == [0, 3]
    assert r["ties"].tolist() == [0, 0]
    assert r["ap"].tolist() == pytest.approx([1.0, 0.25])
    assert r["nn_correct"].tolist() == [1, 0]
    assert r["gt_distance"].tolist() == pytest.approx([1.0, 4.0])
    assert r["nn_distance"].tolist() == pytest.approx([1.0, 1.0])
    assert r["nn2_distance"].tolist() == pytest.approx([np.hypot(100, 1), 2.0])
    # q0's nearest neighbour sits on its projection; q1's is c2 at (200, 200), projection (160, 155)
    assert r["nn_error"].tolist() == pytest.approx([0.0, np.hypot(40, 45)])
    assert r["nn_mutual"].tolist() == [1, 1]
    assert r["n_candidates"].tolist() == [5, 5]


def test_pair_border_filter_drops_queries_and_candidates():
    queries = Feat([[100, 100], [20, 100]], np.array([[0, 0], [5, 5]], np.float32))
    candidates = Feat([[110, 105], [295, 105]], np.array([[1, 0], [0, 0]], np.float32))
    r = evaluate_pair(queries, candidates, SHIFT, SHAPE, SHAPE, border=40.0)
    assert r["query_keypoint"].tolist() == [0]
    assert r["n_candidates"].tolist() == [1]
    assert r["better"].tolist() == [0]  # the exact-match candidate at x = 295 was dropped


def test_pair_without_ground_truth_keeps_sentinels():
    candidates = Feat([[250, 250]], np.array([[0, 0]], np.float32))
    r = evaluate_pair(QUERIES, candidates, SHIFT, SHAPE, SHAPE)
    assert r["n_relevant"].tolist() == [0, 0]
    assert r["better"].tolist() == [-1, -1]
    assert np.isnan(r["ap"]).all() and np.isnan(r["gt_distance"]).all()
    assert r["nn_correct"].tolist() == [0, 0]
    assert np.isnan(r["nn2_distance"]).all()  # a single candidate has no second neighbour


def test_pair_with_no_candidates():
    r = evaluate_pair(
        QUERIES, Feat(np.empty((0, 2)), np.empty((0, 2), np.float32)), SHIFT, SHAPE, SHAPE
    )
    assert r["n_candidates"].tolist() == [0, 0]
    assert r["nn_mutual"].tolist() == [0, 0]
    assert np.isnan(r["nn_error"]).all()


def test_hamming_distances_and_ties():
    # one query of all-zero bits; candidates with 3, 1, 3, 0 bits set: the relevant one (index 0)
    # has distance 3, beaten by two candidates and tied with one
    query = np.zeros((1, 1), np.uint8)
    candidates = np.array([[0b00000111], [0b00000001], [0b11100000], [0]], np.uint8)
    m = match_pair(query, candidates, np.array([0]))
    assert (m.better.tolist(), m.ties.tolist()) == ([2], [1])
    assert m.gt_distance.tolist() == [3.0]
    assert (m.nn_index.tolist(), m.nn_distance.tolist(), m.nn2_distance.tolist()) == (
        [3],
        [0.0],
        [1.0],
    )
    hamming = squared_distances(prepare_queries(query), prepare_candidates(candidates))
    np.testing.assert_array_equal(hamming, [[3, 1, 3, 0]])


def test_match_pair_equals_brute_force_across_chunks(monkeypatch):
    from metricalc.keypoints import matching

    monkeypatch.setattr(matching, "GEMM_CHUNK_ELEMENTS", 64)  # many query chunks
    rng = np.random.default_rng(0)
    q = rng.integers(0, 6, (40, 8)).astype(np.float32)  # small integers: many exact ties
    c = rng.integers(0, 6, (30, 8)).astype(np.float32)
    relevant = rng.integers(-1, 30, 40)
    m = match_pair(q, c, relevant)
    d = np.sqrt(((q[:, None, :].astype(np.float64) - c[None]) ** 2).sum(-1))
    better, ties = mc.rank_stats(d, relevant)
    np.testing.assert_array_equal(m.better, better)
    np.testing.assert_array_equal(m.ties, ties)
    np.testing.assert_array_equal(m.nn_index, d.argmin(1))
    np.testing.assert_allclose(m.nn_distance, d.min(1))
    np.testing.assert_allclose(m.nn2_distance, np.sort(d, axis=1)[:, 1])
    # a query is mutual if it is its NN's nearest query, the lowest index on ties (D2-Net)
    nearest_query = d.argmin(axis=0)
    np.testing.assert_array_equal(m.nn_mutual, nearest_query[d.argmin(1)] == np.arange(len(q)))
    assert m.nn_mutual.sum() == len(np.unique(d.argmin(1)[m.nn_mutual]))  # one query per candidate


def test_nn_error_of_a_query_projected_outside_image_b_is_still_measured():
    # (250, 100) projects to (260, 105): outside the 40 px border of B, so R = 0, but its
    # nearest neighbour (at (60, 105)) is a match whose error is 200 px, not undefined
    queries = Feat([[250, 100]], np.array([[0, 0]], np.float32))
    candidates = Feat([[60, 105]], np.array([[0, 0]], np.float32))
    r = evaluate_pair(queries, candidates, SHIFT, SHAPE, SHAPE, border=40.0)
    assert r["n_relevant"].tolist() == [0]
    assert r["nn_error"].tolist() == pytest.approx([200.0])
