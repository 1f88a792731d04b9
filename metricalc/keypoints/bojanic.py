"""Keypoint verification and retrieval (Bojanic et al. 2020), PROTOCOLS.md section 4.

For each scene, the reference keypoints are the keypoints of image 1 (border-filtered). Their
candidates are the keypoints of the sequence's other images 2..6 plus distractors: keypoints of
other scenes (by default 20 random keypoints from one random image in each of 10 other scenes,
seeded by ``seed`` and the scene name, so every descriptor of a locked run sees the same ones).
Labels: y = +1 for the ground-truth correspondence (section 2), y = 0 for the other keypoints of the
sequence (hard negatives), y = -1 for distractors. Scores are negated descriptor distances.

- Verification: one pooled list per scene over the reference keypoints that have at least one
  correspondence: every (reference, candidate) pair, positive for the correspondences and
  negative otherwise (hard negatives and distractors alike); AP of that list. Its few positives
  are ranked without sorting the list: the negatives of each chunk of references are sorted and
  counted below / at each distinct positive distance.
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
from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import ground_truth, inside
from metricalc.keypoints.matching import prepare_candidates, prepare_queries, squared_distances

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


def _retrieval_ap(
    distance: np.ndarray, slots: np.ndarray, hard: slice, tie_policy: str, y0: str
) -> np.ndarray:
    """IR AP of each row (a reference keypoint's list) from the rank statistics of its positives.

    ``slots`` holds each row's positive columns (-1 padding); columns in ``hard`` that are not
    positives are the hard negatives. Each list holds a handful of correspondences among
    thousands of candidates, so instead of sorting, every positive's ``better`` / ``ties`` come
    from :func:`metricalc.rank_stats` (two comparison passes per positive slot) and the tie
    policy's closed form (:func:`~metricalc.core._kernels.precision_at_relevant`) does the rest.
    """
    valid = slots >= 0
    own = np.where(valid, np.take_along_axis(distance, np.maximum(slots, 0), axis=1), np.nan)
    if y0 == "ignore":  # hard negatives removed: never ahead of (nor tied with) a positive
        r, t = np.nonzero(valid)
        distance = distance.copy()
        distance[:, hard] = np.inf
        distance[r, slots[r, t]] = own[r, t]
    better = np.empty(slots.shape, dtype=np.int64)
    ties = np.empty(slots.shape, dtype=np.int64)
    for t in range(slots.shape[1]):  # at most one slot per image of the sequence
        better[:, t], ties[:, t] = _kernels.rank_stats(distance, slots[:, t])
    total = _kernels.precision_sum_from_rank_stats(better, ties, own, valid, tie_policy)
    return total / valid.sum(axis=1)


def _pooled_ap(
    positives: np.ndarray, less: np.ndarray, equal: np.ndarray, tie_policy: str
) -> float:
    """IR AP of one pooled list from its positives' values (smaller ranks first) and, for each
    distinct positive value, the number of negatives below it (``less``) and equal to it."""
    _, index, count = np.unique(positives, return_inverse=True, return_counts=True)
    below = np.cumsum(count) - count  # positives strictly below each distinct value
    order = np.argsort(index, kind="stable")
    place = np.empty(positives.size, dtype=np.int64)  # 1-based place among equal positives
    place[order] = np.arange(positives.size) - (np.cumsum(count) - count)[index[order]] + 1
    h, r = below[index], count[index]
    weights = _kernels.precision_at_relevant(
        less[index] + h, equal[index] + r, h, r, place, tie_policy
    )
    return float(weights.sum() / positives.size)


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
    Labels stay sparse (one column index per reference and image) and distances are computed per
    chunk of references, so memory is bounded by the chunk, not the scene.
    """
    if y0 not in Y0_POLICIES:
        raise InvalidInputError(f"y0 must be one of {Y0_POLICIES}; got {y0!r}")
    if tie_policy == "workbench":
        tie_policy = "expected"
    ref_points, ref_desc = _kept(features[1], sequence.shape(1), border)
    slots, candidate_desc, offset = [], [], 0
    for k in range(2, 7):
        points, desc = _kept(features[k], sequence.shape(k), border)
        if relevant is not None:
            index = relevant[k]
        else:
            H, shape = sequence.homography(k), sequence.shape(k)
            index = ground_truth(ref_points, points, H, shape, tau=tau, border=border).relevant
        slots.append(np.where(index >= 0, index + offset, -1))
        candidate_desc.append(desc)
        offset += len(points)
    hard = slice(0, offset)  # columns of images 2..6; the distractors follow
    candidates = np.concatenate([*candidate_desc, distractor_descriptors])
    slot = np.stack(slots, axis=1) if slots else np.empty((len(ref_points), 0), dtype=np.int64)
    verified = np.flatnonzero((slot >= 0).any(axis=1))
    result = dict.fromkeys(SCENE_RESULTS, 0.0)
    result["verification_ap"] = result["retrieval_ap"] = float("nan")
    if verified.size == 0:
        return result
    slot = slot[verified]
    slot = np.sort(np.where(slot >= 0, slot, np.iinfo(np.int64).max), axis=1)  # valid first
    slot = np.where(slot == np.iinfo(np.int64).max, -1, slot)
    queries, prepared = prepare_queries(ref_desc[verified]), prepare_candidates(candidates)
    step = max(1, _kernels.CHUNK_ELEMENTS // max(len(candidates), 1))
    chunks = [slice(start, start + step) for start in range(0, len(verified), step)]
    # pass 1: retrieval, and the positives' distances exactly as the product gives them
    retrieval_ap, positive_values = [], []
    for rows in chunks:
        distance = squared_distances(queries[rows], prepared)
        retrieval_ap.append(_retrieval_ap(distance, slot[rows], hard, tie_policy, y0))
        r, t = np.nonzero(slot[rows] >= 0)
        positive_values.append(distance[r, slot[rows][r, t]])
    positives = np.concatenate(positive_values)
    distinct = np.unique(positives)
    # pass 2 (the same products again): negatives below / equal to each distinct positive value
    less = np.zeros(distinct.size, dtype=np.int64)
    equal = np.zeros(distinct.size, dtype=np.int64)
    for rows in chunks:
        negatives = squared_distances(queries[rows], prepared)
        r, t = np.nonzero(slot[rows] >= 0)
        negatives[r, slot[rows][r, t]] = np.inf  # every entry but the positives remains
        negatives = np.sort(negatives, axis=None)
        left = np.searchsorted(negatives, distinct, side="left")
        less += left
        equal += np.searchsorted(negatives, distinct, side="right") - left
    result["verification_ap"] = _pooled_ap(positives, less, equal, tie_policy)
    result["retrieval_ap"] = float(np.mean(np.concatenate(retrieval_ap)))
    n_positive = int((slot >= 0).sum())
    result["retrieval_num_true_positives"] = n_positive
    result["retrieval_num_hard_negatives"] = len(verified) * offset - n_positive
    result["retrieval_num_distractors"] = len(verified) * len(distractor_descriptors)
    return result
