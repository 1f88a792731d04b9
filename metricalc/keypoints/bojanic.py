"""Keypoint verification and retrieval (Bojanic et al. 2020), docs/keypoints.md.

For each scene, the reference keypoints are the keypoints of image 1 (border-filtered). Their
candidates are the keypoints of the sequence's other images 2..6 plus distractors: keypoints of
other scenes (by default 20 random keypoints from one random image in each of 10 other scenes,
seeded by ``seed`` and the scene name, so every descriptor of a locked run sees the same ones;
every reference keypoint of the scene shares them). Labels: y = +1 for the ground-truth
correspondence (section 2), y = 0 for the other keypoints of the sequence (hard negatives),
y = -1 for distractors. Scores are negated descriptor distances.

Two definitions of each task, under their own names:

- ``verification_ap`` / ``retrieval_ap`` (DescriptorWorkbench, ``KeypointVerification.cpp``
  ``evaluateVerification`` / ``evaluateRetrieval``): one **pooled list per scene** holding the
  candidates of *every* reference keypoint, with or without a correspondence; relevant are the
  y = +1 pairs; AP is the ``ir`` AP of that list. A scene with candidates but no correspondence
  has AP 0 (DescriptorWorkbench's value; the scene still enters the mean over scenes); a scene
  with no reference keypoint or no candidate has NaN (DescriptorWorkbench skips it). Retrieval
  with ``y0="negative"`` is DescriptorWorkbench's definition (y = 0 items are non-relevant; the
  list is then the verification list); ``y0="ignore"`` removes the y = 0 items first (the
  HPatches rule; no DescriptorWorkbench counterpart).
- ``verification_ap_per_keypoint`` / ``retrieval_ap_per_keypoint`` (metricalc): one list per
  reference keypoint that has at least one correspondence (its candidates of images 2..6 and the
  distractors), ``ir`` AP of each, mean over those keypoints; verification treats y = 0 and
  y = -1 alike as non-relevant, retrieval applies ``y0``. NaN for a scene without
  correspondences. This is the decomposable per-keypoint variant.

Ties: DescriptorWorkbench sorts with ``std::sort`` on the distance alone, so the order of tied
pairs (and its AP where a relevant pair ties with a non-relevant one) is unspecified; metricalc
applies the run's tie policy instead (``optimistic`` and ``pessimistic`` bound every order
DescriptorWorkbench can produce, ``expected`` is the mean over all of them; without such ties
every policy equals DescriptorWorkbench). The lists hold several relevant items, so a
``workbench`` run (a rule for one relevant item) uses ``expected`` for them.

The counts are DescriptorWorkbench's label counts of the scene's pooled retrieval list, over
every reference keypoint: ``retrieval_num_true_positives`` (y = +1),
``retrieval_num_hard_negatives`` (y = 0), ``retrieval_num_distractors`` (y = -1).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from metricalc.core import kernels
from metricalc.cube import Y0_POLICIES
from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import ground_truth, inside
from metricalc.keypoints.matching import prepare_candidates, prepare_queries, squared_distances

KEPT_DISTANCE_ELEMENTS = 1 << 25
"""A scene's distance matrix up to this many elements (128 MiB of float32) is computed once and
kept for the second pass of :func:`scene_tasks`; a larger one is computed again, chunk by chunk."""


def keeps_distances(n_references: int, n_candidates: int) -> bool:
    """Whether a scene's (reference, candidate) distance matrix is small enough to be kept
    whole (:data:`KEPT_DISTANCE_ELEMENTS`), rather than computed chunk by chunk when needed."""
    return n_references * n_candidates <= KEPT_DISTANCE_ELEMENTS

SCENE_RESULTS = (
    "verification_ap",
    "retrieval_ap",
    "verification_ap_per_keypoint",
    "retrieval_ap_per_keypoint",
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
    policy's closed form (:func:`~metricalc.core.kernels.precision_at_relevant`) does the rest.
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
    for j in range(slots.shape[1]):  # at most one slot per image of the sequence
        better[:, j], ties[:, j] = kernels.rank_stats(distance, slots[:, j])
    total = kernels.precision_sum_from_rank_stats(better, ties, own, valid, tie_policy)
    ap: np.ndarray = total / valid.sum(axis=1)
    return ap


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
    weights = kernels.precision_at_relevant(
        less[index] + h, equal[index] + r, h, r, place, tie_policy
    )
    return float(weights.sum() / positives.size)


def _below_and_equal(
    values: np.ndarray, distinct: np.ndarray, bits: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``distinct``, the number of ``values`` below it and equal to it.

    ``bits``: the values are Hamming distances of binary descriptors, whole numbers 0 .. bits
    (or inf): counted by a histogram (``np.bincount``, linear) instead of a sort.
    """
    if bits is not None:
        whole = np.rint(np.where(np.isfinite(values), values, bits + 1)).astype(np.int64)
        histogram = np.bincount(whole.ravel(), minlength=bits + 2)
        below = np.concatenate([[0], np.cumsum(histogram)])
        index = np.rint(distinct).astype(np.int64)
        return below[index], histogram[index]
    values = np.sort(values, axis=None)
    left = np.searchsorted(values, distinct, side="left")
    return left, np.searchsorted(values, distinct, side="right") - left


def _distance_rows(
    ref_desc: np.ndarray,
    hard_desc: np.ndarray,
    distractor_desc: np.ndarray,
    hard_distances: Sequence[np.ndarray] | None,
) -> Callable[[slice], np.ndarray]:
    """A function of a slice of references giving their squared distances to every candidate
    (images 2..6 in column order, then the distractors), float32, a new array on each call.

    Without ``hard_distances`` one product over all the candidates; with them, their rows and
    the product over the distractors only.
    """
    queries = prepare_queries(ref_desc)
    if hard_distances is None:
        prepared = prepare_candidates(np.concatenate([hard_desc, distractor_desc]))
        return lambda rows: squared_distances(queries[rows], prepared)
    widths = [block.shape[1] for block in hard_distances]
    if sum(widths) != len(hard_desc) or any(len(b) != len(ref_desc) for b in hard_distances):
        raise InvalidInputError(
            f"hard_distances: blocks of shape {[b.shape for b in hard_distances]} do not match "
            f"{len(ref_desc)} references x {len(hard_desc)} keypoints of images 2..6"
        )
    prepared = prepare_candidates(distractor_desc)
    return lambda rows: np.concatenate(
        [block[rows] for block in hard_distances] + [squared_distances(queries[rows], prepared)],
        axis=1,
    )


def _slots(
    sequence: Any,
    features: Mapping[int, Any],
    ref_points: np.ndarray,
    *,
    tau: float,
    border: float,
    relevant: Mapping[int, np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each reference's correspondence column per image 2..6 (-1 for none; valid ones first in
    each row) and the descriptors of images 2..6 in column order."""
    slots, descriptors, offset = [], [], 0
    for k in range(2, 7):
        points, desc = _kept(features[k], sequence.shape(k), border)
        if relevant is not None:
            index = relevant[k]
        else:
            H, shape = sequence.homography(k), sequence.shape(k)
            index = ground_truth(ref_points, points, H, shape, tau=tau, border=border).relevant
        slots.append(np.where(index >= 0, index + offset, -1))
        descriptors.append(desc)
        offset += len(points)
    slot, big = np.stack(slots, axis=1), np.iinfo(np.int64).max
    slot = np.sort(np.where(slot >= 0, slot, big), axis=1)
    return np.where(slot == big, -1, slot), np.concatenate(descriptors)


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
    hard_distances: Sequence[np.ndarray] | None = None,
) -> dict[str, float]:
    r"""Verification and retrieval APs and label counts of one scene (see the module docstring).

    With :math:`P` the pooled (reference, candidate) pairs of the scene, :math:`P^+` its
    y = +1 pairs and :math:`\mathrm{prec}(p)` the precision at pair :math:`p` when :math:`P` is
    ranked by distance (ties by ``tie_policy``):

    .. math::

        \mathrm{verification\_ap} = \frac{1}{|P^+|} \sum_{p \in P^+} \mathrm{prec}(p),
        \qquad
        \mathrm{verification\_ap\_per\_keypoint} = \frac{1}{|Q^+|} \sum_{q \in Q^+} AP_q

    where :math:`Q^+` are the reference keypoints with a correspondence and :math:`AP_q` the
    ``ir`` AP of keypoint :math:`q`'s own list; ``retrieval_ap`` and
    ``retrieval_ap_per_keypoint`` are the same with the y = 0 pairs removed when
    ``y0="ignore"``.

    ``relevant`` may pass the ground truth of each pair (1, k) already computed by the pair
    evaluation: the relevant index among image k's border-filtered keypoints, -1 for none.
    ``hard_distances`` may pass that evaluation's squared distances too: for k = 2..6 the
    (references, image k's border-filtered keypoints) float32 matrix
    (:attr:`~metricalc.keypoints.matching.PairMatches.squared`); only the distractors' columns are
    then computed here, and both passes read the same values the pair ranks came from.
    Labels stay sparse (one column index per reference and image) and distances are computed per
    chunk of references: a first pass takes the per-keypoint APs (rank statistics, no sort) and
    the pooled list's positive distances, a second pass counts the pooled negatives below / equal
    to each distinct positive distance. The second pass reuses the first pass's products when
    the scene has at most :data:`KEPT_DISTANCE_ELEMENTS` (reference, candidate) pairs (2,000
    references x 10,200 candidates are 20.4 M), else computes them again, so memory stays
    bounded by the chunk on larger scenes.
    """
    if y0 not in Y0_POLICIES:
        raise InvalidInputError(f"y0 must be one of {Y0_POLICIES}; got {y0!r}")
    if tie_policy == "workbench":
        tie_policy = "expected"
    ref_points, ref_desc = _kept(features[1], sequence.shape(1), border)
    slot, hard_desc = _slots(
        sequence, features, ref_points, tau=tau, border=border, relevant=relevant
    )
    n_ref, n_hard, n_distractor = len(ref_points), len(hard_desc), len(distractor_descriptors)
    n_positive = int((slot >= 0).sum())
    result: dict[str, float] = {
        "verification_ap": float("nan"),
        "retrieval_ap": float("nan"),
        "verification_ap_per_keypoint": float("nan"),
        "retrieval_ap_per_keypoint": float("nan"),
        "retrieval_num_true_positives": n_positive,
        "retrieval_num_hard_negatives": n_ref * n_hard - n_positive,
        "retrieval_num_distractors": n_ref * n_distractor,
    }
    if n_ref == 0 or n_hard + n_distractor == 0:  # no pooled list: the scene is skipped
        return result
    if n_positive == 0:  # a list without relevant items: AP 0, as DescriptorWorkbench
        result["verification_ap"] = result["retrieval_ap"] = 0.0
        return result
    distances = _distance_rows(ref_desc, hard_desc, distractor_descriptors, hard_distances)
    chunks = list(kernels.row_chunks(n_ref, n_hard + n_distractor))
    hard = slice(0, n_hard)  # columns of images 2..6; the distractors follow
    # pass 1: per-keypoint APs, and the positives' distances exactly as the product gives them
    keep = hard_distances is None and keeps_distances(n_ref, n_hard + n_distractor)
    verification, retrieval, positive_values, kept = [], [], [], []
    for rows in chunks:
        distance, s = distances(rows), slot[rows]
        if keep:
            kept.append(distance)
        verified = (s >= 0).any(axis=1)
        if verified.any():
            d, v = distance[verified], s[verified]
            verification.append(_retrieval_ap(d, v, hard, tie_policy, "negative"))
            retrieval.append(
                verification[-1] if y0 == "negative" else _retrieval_ap(d, v, hard, tie_policy, y0)
            )
        r, t = np.nonzero(s >= 0)
        positive_values.append(distance[r, s[r, t]])
    positives = np.concatenate(positive_values)
    distinct = np.unique(positives)
    # binary descriptors: squared distances of unpacked bits are Hamming distances, exact
    bits = 8 * ref_desc.shape[1] if ref_desc.dtype == np.uint8 else None
    # pass 2 (the products of pass 1, kept or computed again): the pooled negatives below /
    # equal to each distinct positive distance, hard negatives and distractors apart
    # (y0="ignore" drops the former)
    counts = np.zeros((4, distinct.size), dtype=np.int64)
    for i, rows in enumerate(chunks):
        distance = kept[i] if keep else distances(rows)
        s = slot[rows]
        r, t = np.nonzero(s >= 0)
        distance[r, s[r, t]] = np.inf  # every pair but the positives remains
        counts[:2] += _below_and_equal(distance[:, hard], distinct, bits)
        counts[2:] += _below_and_equal(distance[:, n_hard:], distinct, bits)
    less, equal = counts[0] + counts[2], counts[1] + counts[3]
    result["verification_ap"] = _pooled_ap(positives, less, equal, tie_policy)
    result["retrieval_ap"] = (
        result["verification_ap"]
        if y0 == "negative"
        else _pooled_ap(positives, counts[2], counts[3], tie_policy)
    )
    result["verification_ap_per_keypoint"] = float(np.mean(np.concatenate(verification)))
    result["retrieval_ap_per_keypoint"] = float(np.mean(np.concatenate(retrieval)))
    return result
