"""Keypoint verification and retrieval (Bojanic et al. 2020), PROTOCOLS.md section 4.

For each scene, the reference keypoints are the keypoints of image 1 (border-filtered). Their
candidates are the keypoints of the sequence's other images 2..6 plus distractors: keypoints of
other scenes (by default 20 random keypoints from one random image in each of 10 other scenes,
seeded by ``seed`` and the scene name, so every descriptor of a locked run sees the same ones).
Labels: y = +1 for the ground-truth correspondence (section 2), y = 0 for the other keypoints of the
sequence (hard negatives), y = -1 for distractors. Scores are negated descriptor distances.

- Verification: one pooled list per scene over the reference keypoints that have at least one
  correspondence: their correspondences (positive) and their distractors (negative); AP of that
  list. Hard negatives take no part.
- Retrieval: one list per reference keypoint with at least one correspondence: every candidate of
  images 2..6 and the distractors; y = 0 items count as non-relevant (``y0="negative"``) or are
  removed (``y0="ignore"``, the HPatches rule); the scene's AP is the mean over its references.
Both APs use the ``ir`` method under the run's tie policy; lists here hold several relevant
items, so a ``workbench`` run (a rule for one relevant item) uses ``expected`` for them.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from metricalc.core import _kernels
from metricalc.core.ranking import average_precision
from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import ground_truth, inside
from metricalc.keypoints.matching import distances

Y0_POLICIES = ("negative", "ignore")
SCENE_RESULTS = (
    "verification_ap",
    "retrieval_ap",
    "retrieval_num_true_positives",
    "retrieval_num_hard_negatives",
    "retrieval_num_distractors",
)


def _kept(features: Any, shape: tuple[int, int], border: float) -> tuple[np.ndarray, np.ndarray]:
    """Keypoints and descriptors of one image that lie ``border`` px inside it."""
    mask = inside(features.keypoints, shape, border)
    return features.keypoints[mask], features.descriptors[mask]


def distractors(
    scene: str,
    sequences: Sequence[Any],
    features: Mapping[str, Mapping[int, Any]],
    *,
    border: float,
    n_scenes: int,
    n_keypoints: int,
    seed: int,
) -> np.ndarray:
    """Descriptors of the distractor keypoints of ``scene`` (seeded by ``seed`` and the name)."""
    rng = np.random.default_rng([seed, zlib.crc32(scene.encode())])
    others = [s for s in sequences if s.name != scene and s.name in features]
    chosen = rng.choice(len(others), size=min(n_scenes, len(others)), replace=False)
    parts = []
    for i in sorted(chosen):
        other = others[i]
        image = int(rng.integers(1, 7))
        _, descriptors = _kept(features[other.name][image], other.shape(image), border)
        take = rng.choice(len(descriptors), size=min(n_keypoints, len(descriptors)), replace=False)
        parts.append(descriptors[np.sort(take)])
    if not parts:
        dims = next(iter(features[scene].values())).descriptors.shape[1]
        dtype = next(iter(features[scene].values())).descriptors.dtype
        return np.empty((0, dims), dtype=dtype)
    return np.concatenate(parts)


def _slots(positive: np.ndarray) -> np.ndarray:
    """Column indices of the True entries of each row, padded with -1: shape (rows, max count)."""
    rows, cols = np.nonzero(positive)
    counts = np.bincount(rows, minlength=positive.shape[0])
    slot = np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]
    out = np.full((positive.shape[0], max(int(counts.max(initial=0)), 1)), -1, dtype=np.int64)
    out[rows, slot] = cols
    return out


def _retrieval_ap(distance: np.ndarray, label: np.ndarray, tie_policy: str, y0: str) -> np.ndarray:
    """IR AP of each row (a reference keypoint's list) from the rank statistics of its positives.

    Each list holds a handful of correspondences among thousands of candidates, so instead of
    sorting, every positive's ``better`` / ``ties`` come from :func:`metricalc.rank_stats`
    (two comparison passes per positive slot) and the tie policy's closed form does the rest.
    """
    if y0 == "ignore":  # removed: never ahead of (nor tied with) a positive, which is finite
        distance = np.where(label == 0, np.inf, distance)
    slots = _slots(label == 1)
    valid = slots >= 0
    better = np.empty(slots.shape, dtype=np.int64)
    ties = np.empty(slots.shape, dtype=np.int64)
    for t in range(slots.shape[1]):  # at most a few slots: one per image of the sequence
        better[:, t], ties[:, t] = _kernels.rank_stats(distance, slots[:, t])
    own = np.take_along_axis(distance, np.maximum(slots, 0), axis=1)
    total = _kernels.precision_sum_from_rank_stats(better, ties, own, valid, tie_policy)
    return total / valid.sum(axis=1)


def scene_tasks(
    sequence: Any,
    features: Mapping[int, Any],
    distractor_descriptors: np.ndarray,
    *,
    tau: float,
    border: float,
    tie_policy: str,
    y0: str,
    relevant: Mapping[int, np.ndarray] | None = None,
) -> dict[str, float]:
    """Verification AP, retrieval AP and label counts of one scene (see the module docstring).

    ``relevant`` may pass the ground truth of each pair (1, k) already computed by the pair
    evaluation: the relevant index among image k's border-filtered keypoints, -1 for none.
    """
    if y0 not in Y0_POLICIES:
        raise InvalidInputError(f"y0 must be one of {Y0_POLICIES}; got {y0!r}")
    if tie_policy == "workbench":
        tie_policy = "expected"
    ref_points, ref_desc = _kept(features[1], sequence.shape(1), border)
    labels, candidate_desc = [], []
    for k in range(2, 7):
        points, desc = _kept(features[k], sequence.shape(k), border)
        if relevant is not None:
            index = relevant[k]
        else:
            H, shape = sequence.homography(k), sequence.shape(k)
            index = ground_truth(ref_points, points, H, shape, tau=tau, border=border).relevant
        label = np.zeros((len(ref_points), len(points)), dtype=np.int8)
        has = index >= 0
        label[np.flatnonzero(has), index[has]] = 1
        labels.append(label)
        candidate_desc.append(desc)
    labels.append(np.full((len(ref_points), len(distractor_descriptors)), -1, dtype=np.int8))
    label = np.concatenate(labels, axis=1)
    candidates = np.concatenate([*candidate_desc, distractor_descriptors])
    verified = np.flatnonzero((label == 1).any(axis=1))
    result = dict.fromkeys(SCENE_RESULTS, 0.0)
    result["verification_ap"] = result["retrieval_ap"] = float("nan")
    if verified.size == 0:
        return result
    positive_distances, negative_distances, retrieval_ap = [], [], []
    step = max(1, _kernels.CHUNK_ELEMENTS // len(candidates))
    for start in range(0, verified.size, step):
        refs = verified[start : start + step]
        distance = distances(ref_desc[refs], candidates)
        y = label[refs]
        positive_distances.append(distance[y == 1])
        negative_distances.append(distance[y == -1])
        retrieval_ap.append(_retrieval_ap(distance, y, tie_policy, y0))
    positives, negatives = np.concatenate(positive_distances), np.concatenate(negative_distances)
    pooled = np.concatenate([np.ones(positives.size, bool), np.zeros(negatives.size, bool)])
    result["verification_ap"] = float(
        average_precision(
            pooled, -np.concatenate([positives, negatives]), method="ir", ties=tie_policy
        )
    )
    result["retrieval_ap"] = float(np.mean(np.concatenate(retrieval_ap)))
    y = label[verified]
    result["retrieval_num_true_positives"] = int((y == 1).sum())
    result["retrieval_num_hard_negatives"] = int((y == 0).sum())
    result["retrieval_num_distractors"] = int((y == -1).sum())
    return result
