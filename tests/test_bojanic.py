"""Keypoint verification and retrieval: the sort-free retrieval AP against the sorting AP."""

from __future__ import annotations

import numpy as np
import pytest

import metricalc as mc
from metricalc.core import _kernels
from metricalc.keypoints.bojanic import _retrieval_ap, _slots, scene_tasks


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic"])
@pytest.mark.parametrize("y0", ["negative", "ignore"])
def test_retrieval_ap_from_rank_stats_equals_sorting_ap(policy, y0):
    rng = np.random.default_rng(1)
    rows, n = 300, 60
    distance = rng.integers(0, 12, (rows, n)).astype(float)  # heavy ties
    label = rng.choice([-1, 0], size=(rows, n)).astype(np.int8)
    for r in range(rows):  # one to five correspondences per list
        label[r, rng.choice(n, size=rng.integers(1, 6), replace=False)] = 1
    ours = _retrieval_ap(distance, label, policy, y0)
    score = -distance if y0 == "negative" else np.where(label == 0, -np.inf, -distance)
    expected = mc.average_precision(label == 1, score, method="ir", ties=policy)
    np.testing.assert_allclose(ours, expected, rtol=1e-12)


def test_precision_sum_from_rank_stats_step_policy_equals_sklearn_convention():
    rng = np.random.default_rng(2)
    distance = rng.integers(0, 5, (200, 30)).astype(float)
    relevant = rng.random((200, 30)) < 0.15
    relevant[:, 0] = True
    slots = _slots(relevant)
    better = np.stack(
        [_kernels.rank_stats(distance, slots[:, t])[0] for t in range(slots.shape[1])], 1
    )
    ties = np.stack(
        [_kernels.rank_stats(distance, slots[:, t])[1] for t in range(slots.shape[1])], 1
    )
    own = np.take_along_axis(distance, np.maximum(slots, 0), axis=1)
    total = _kernels.precision_sum_from_rank_stats(better, ties, own, slots >= 0, "step")
    expected = mc.average_precision(relevant, -distance, method="step")
    np.testing.assert_allclose(total / relevant.sum(1), expected, rtol=1e-12)


class Scene:
    """One scene whose images 2..6 repeat image 1's keypoints under the identity homography."""

    name, split = "i_hand", "illumination"

    def homography(self, k):
        return np.eye(3)

    def shape(self, k):
        return (200, 200)


class Feat:
    def __init__(self, keypoints, descriptors):
        self.keypoints, self.descriptors = keypoints, descriptors


def one_negative_among_ties(n_positive: int) -> float:
    """Expected AP of n positives tied with one negative at the top of a list (brute force over
    the negative's position, each equally likely)."""
    total = 0.0
    for negative_at in range(1, n_positive + 2):
        ranks = [r for r in range(1, n_positive + 2) if r != negative_at]
        total += np.mean([(i + 1) / rank for i, rank in enumerate(ranks)])
    return total / (n_positive + 1)


def test_scene_tasks_hand_case():
    # two reference keypoints repeated exactly in images 2..6 (their correspondences, distance 0);
    # the other reference is a hard negative (distance 10); the distractor equals reference 1
    points = np.array([[60.0, 60.0], [120.0, 120.0]])
    desc = np.array([[0.0, 0.0], [10.0, 0.0]], np.float32)
    features = {k: Feat(points, desc) for k in range(1, 7)}
    distractor = np.array([[10.0, 0.0]], np.float32)
    result = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="expected", y0="negative"
    )
    # retrieval: reference 0 ranks its 5 correspondences first (AP 1); reference 1's five tie
    # with the distractor
    assert result["retrieval_ap"] == pytest.approx((1.0 + one_negative_among_ties(5)) / 2)
    # verification pools 10 positives at distance 0 with negatives at 0 (ref 1) and 10 (ref 0)
    assert result["verification_ap"] == pytest.approx(one_negative_among_ties(10))
    assert result["retrieval_num_true_positives"] == 10
    assert result["retrieval_num_hard_negatives"] == 10  # the other reference in 5 images, x2
    assert result["retrieval_num_distractors"] == 2
    ignore = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="expected", y0="ignore"
    )
    assert ignore["retrieval_ap"] == pytest.approx(result["retrieval_ap"])  # y = 0 never ahead
