"""Keypoint verification and retrieval: the sort-free retrieval AP against the sorting AP."""

from __future__ import annotations

import numpy as np
import pytest

import metricalc as mc
from metricalc.core import _kernels
from metricalc.keypoints.bojanic import _retrieval_ap, scene_tasks
from metricalc.keypoints.geometry import ground_truth


def slots_of(positive: np.ndarray) -> np.ndarray:
    """Columns of each row's True entries, padded with -1."""
    width = max(int(positive.sum(axis=1).max()), 1)
    out = np.full((len(positive), width), -1)
    for r, row in enumerate(positive):
        cols = np.flatnonzero(row)
        out[r, : cols.size] = cols
    return out


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic"])
@pytest.mark.parametrize("y0", ["negative", "ignore"])
def test_retrieval_ap_from_rank_stats_equals_sorting_ap(policy, y0):
    rng = np.random.default_rng(1)
    rows, n, n_hard = 300, 60, 45  # columns 0..44: images 2..6; 45..59: distractors
    distance = rng.integers(0, 12, (rows, n)).astype(np.float32)  # heavy ties
    positive = np.zeros((rows, n), bool)
    for r in range(rows):  # one to five correspondences per list, among the image columns
        positive[r, rng.choice(n_hard, size=rng.integers(1, 6), replace=False)] = True
    ours = _retrieval_ap(distance, slots_of(positive), slice(0, n_hard), policy, y0)
    score = -distance.astype(float)
    if y0 == "ignore":
        hard = np.zeros_like(positive)
        hard[:, :n_hard] = ~positive[:, :n_hard]
        score[hard] = -np.inf
    expected = mc.average_precision(positive, score, method="ir", ties=policy)
    np.testing.assert_allclose(ours, expected, rtol=1e-12)


def test_precision_sum_from_rank_stats_step_policy_equals_sklearn_convention():
    rng = np.random.default_rng(2)
    distance = rng.integers(0, 5, (200, 30)).astype(float)
    relevant = rng.random((200, 30)) < 0.15
    relevant[:, 0] = True
    slots = slots_of(relevant)
    stats = [_kernels.rank_stats(distance, slots[:, t]) for t in range(slots.shape[1])]
    better = np.stack([b for b, _ in stats], 1)
    ties = np.stack([t for _, t in stats], 1)
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


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic"])
def test_verification_ap_equals_the_ap_of_the_explicit_pooled_list(policy, monkeypatch):
    monkeypatch.setattr(_kernels, "CHUNK_ELEMENTS", 200)  # many chunks of references
    rng = np.random.default_rng(4)
    base = rng.uniform(45, 155, (25, 2))
    images = {1: Feat(base, rng.integers(0, 4, (25, 3)).astype(np.float32))}
    for k in range(2, 7):  # a jittered subset of the reference points plus new ones
        keep = rng.random(25) < 0.7
        points = np.vstack([base[keep] + rng.normal(0, 1.0, (keep.sum(), 2)),
                            rng.uniform(45, 155, (5, 2))])  # fmt: skip
        images[k] = Feat(points, rng.integers(0, 4, (len(points), 3)).astype(np.float32))
    distractor = rng.integers(0, 4, (7, 3)).astype(np.float32)
    result = scene_tasks(
        Scene(), images, distractor, tau=3.0, border=40.0, tie_policy=policy, y0="negative"
    )
    # the explicit pooled list: every (reference, candidate) pair of the verified references
    labels, scores, verified = [], [], np.zeros(25, bool)
    rel = {k: ground_truth(base, images[k].keypoints, np.eye(3), (200, 200)).relevant
           for k in range(2, 7)}  # fmt: skip
    for k in range(2, 7):
        verified |= rel[k] >= 0
    for i in np.flatnonzero(verified):
        for k in range(2, 7):
            d = ((images[k].descriptors - images[1].descriptors[i]) ** 2).sum(1)
            labels.append(np.arange(len(d)) == rel[k][i])
            scores.append(-d)
        labels.append(np.zeros(len(distractor), bool))
        scores.append(-((distractor - images[1].descriptors[i]) ** 2).sum(1))
    expected = mc.average_precision(
        np.concatenate(labels), np.concatenate(scores), method="ir", ties=policy
    )
    assert result["verification_ap"] == pytest.approx(expected, rel=1e-12)
    assert result["retrieval_num_true_positives"] == int(np.concatenate(labels).sum())
