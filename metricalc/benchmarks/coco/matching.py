"""COCO's one-to-one greedy matching, for every area range and IoU threshold at once.

Within one image and category, detections are taken in order of decreasing score; each takes
the available ground truth (not taken yet, or a crowd region, which any number may match) of
highest IoU at least the threshold, preferring ground truth that is not ignored, the last one
in file order on equal IoU. Greedy matching is sequential within a group, but groups are
independent: step r matches the r-th detection of *every* (image, category) group at once, so
the Python loop runs over ranks (at most ``maxDets``, 100), never over detections, and each
step works on arrays over area ranges x IoU thresholds x candidate pairs.
"""

from __future__ import annotations

import numpy as np

from metricalc.benchmarks.coco.iou import Pairs
from metricalc.progress import progress_bar

__all__ = ["COCO_IOU_CAP", "greedy_match", "group_rank"]

COCO_IOU_CAP = 1 - 1e-10
"""COCO matches at IoU >= min(t, 1 - 1e-10), so t = 1 accepts IoU 1 despite rounding."""


def group_rank(
    image: np.ndarray, category: np.ndarray, score: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rank of every detection within its (image, category) by decreasing score, ties in file
    order (COCO's mergesort); also the order that sorts detections by (image, category, rank).

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.matching import group_rank
    >>> image, category = np.array([0, 0, 0, 1]), np.array([2, 2, 2, 2])
    >>> group_rank(image, category, np.array([0.5, 0.9, 0.5, 0.1]))[0]
    array([1, 0, 2, 0])
    """
    order = np.lexsort((np.arange(score.size), -score, category, image))
    key = image[order] * (int(category.max(initial=0)) + 1) + category[order]
    start = np.ones(order.size, bool)
    start[1:] = key[1:] != key[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size) - first
    return rank, order


def greedy_match(
    pairs: Pairs,
    *,
    n_dt: int,
    n_gt: int,
    dt_rank: np.ndarray,
    gt_ignore: np.ndarray,
    gt_crowd: np.ndarray,
    thresholds: np.ndarray,
    progress: bool = False,
) -> np.ndarray:
    """The ground truth each detection matches, per area range and IoU threshold.

    Parameters
    ----------
    pairs : Pairs
        Candidate pairs of the same image and category (and of detections the evaluation
        keeps), with their IoU.
    n_dt, n_gt : int
        Numbers of detections and ground-truth annotations (pair indices refer to them).
    dt_rank : ndarray, shape (n_dt,)
        Rank of each detection in its (image, category) group (:func:`group_rank`).
    gt_ignore : ndarray of bool, shape (A, n_gt)
        Ignored ground truth per area range (crowd, or area outside the range).
    gt_crowd : ndarray of bool, shape (n_gt,)
        Crowd regions (never used up).
    thresholds : ndarray, shape (T,)
        IoU thresholds.

    Returns
    -------
    ndarray of int64, shape (A, T, n_dt)
        Index of the matched ground truth, -1 where unmatched.

    Examples
    --------
    Two detections (ranks 0 and 1) on one object: the first takes it, the second finds it taken.

    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.iou import Pairs
    >>> from metricalc.benchmarks.coco.matching import greedy_match
    >>> pairs = Pairs(dt=np.array([0, 1]), gt=np.array([0, 0]), iou=np.array([0.6, 0.9]))
    >>> greedy_match(pairs, n_dt=2, n_gt=1, dt_rank=np.array([0, 1]),
    ...              gt_ignore=np.array([[False]]), gt_crowd=np.array([False]),
    ...              thresholds=np.array([0.5, 0.7])).tolist()
    [[[0, -1], [-1, 0]]]
    """
    n_areas, n_thresholds = gt_ignore.shape[0], thresholds.size
    matched = np.full((n_areas, n_thresholds, n_dt), -1, dtype=np.int64)
    limit = np.minimum(np.asarray(thresholds, np.float64), COCO_IOU_CAP)
    keep = pairs.iou >= limit.min(initial=np.inf)
    dt, gt, iou = pairs.dt[keep], pairs.gt[keep], pairs.iou[keep]
    if dt.size == 0:
        return matched
    order = np.lexsort((gt, dt, dt_rank[dt]))
    dt, gt, iou = dt[order], gt[order], iou[order]
    rank = dt_rank[dt]
    unique_iou, iou_rank = np.unique(iou, return_inverse=True)
    # preference key: not ignored > higher IoU > later ground truth (file order)
    bonus = np.int64(unique_iou.size) * n_gt
    key = iou_rank.astype(np.int64) * n_gt + gt + np.where(gt_ignore[:, gt], 0, bonus)  # (A, P)
    qualifies = iou[None, :] >= limit[:, None]  # (T, P)
    crowd = gt_crowd[gt]
    taken = np.zeros((n_areas, n_thresholds, n_gt), dtype=bool)
    bounds = np.searchsorted(rank, np.arange(int(rank[-1]) + 2))
    with progress_bar("matching", total=bounds.size - 1, enabled=progress) as advance:
        for r in range(bounds.size - 1):
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            advance()
            if lo == hi:
                continue
            g = gt[lo:hi]
            available = ~taken[:, :, g] | crowd[lo:hi]
            candidate = np.where(available & qualifies[None, :, lo:hi], key[:, None, lo:hi], -1)
            d = dt[lo:hi]
            starts = np.flatnonzero(np.concatenate([[True], d[1:] != d[:-1]]))
            best = np.maximum.reduceat(candidate, starts, axis=2)  # (A, T, detections)
            found = best >= 0
            chosen = best % n_gt
            a, t, s = np.nonzero(found)
            taken[a, t, chosen[a, t, s]] = True
            matched[:, :, d[starts]] = np.where(found, chosen, -1)
    return matched
