"""The stages of a detection chain per IoU threshold and detection, in the two conventions of
:mod:`metricalc.benchmarks.coco.decompose`: L (localization), C|L (classification given
localization) and, for ``segm``, S|C,L (segmentation), with the recall side of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metricalc.benchmarks.coco.evaluate import COCO_AREA_RANGES, Prepared
from metricalc.benchmarks.coco.iou import Pairs
from metricalc.benchmarks.coco.masks import Masks, mask_iou
from metricalc.benchmarks.coco.matching import COCO_IOU_CAP, greedy_match
from metricalc.errors import InvalidInputError

__all__ = ["Stages", "coco_stages", "decompovision_stages"]


def _segment_max(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """max of ``values`` per ``index`` (-inf where none)."""
    out = np.full(size, -np.inf)
    np.maximum.at(out, index, values)
    return out


@dataclass(frozen=True)
class _ObjectRecall:
    """The ``coco`` recall side: ground-truth objects of class c, reached at the best
    confidence that reaches them."""

    found: np.ndarray  # (T, n_gt, S) found_at

    def items(self, stages: Stages, prep: Prepared, c: int, thresholds: np.ndarray) -> np.ndarray:
        """found_at (T, m, S) of the counted objects of category c."""
        members = np.flatnonzero((prep.gt.category == c) & stages.gt_counted)
        return self.found[:, members, :]


@dataclass(frozen=True)
class _DetectionRecall:
    """The ``decompovision`` recall side: detections overlapping an object of class c, by
    (detection, class) pair with their best IoU."""

    det_of: np.ndarray
    class_of: np.ndarray
    best: np.ndarray

    def items(self, stages: Stages, prep: Prepared, c: int, thresholds: np.ndarray) -> np.ndarray:
        """found_at (T, m, S) of the detections overlapping an object of category c."""
        dt = prep.dt
        rows = np.flatnonzero(self.class_of == c)
        d = self.det_of[rows]
        reach = self.best[rows][None, :] > thresholds[:, None]  # (T, m): overlaps a class-c object
        own = dt.category[d] == c
        passed = [reach]
        for s in range(1, stages.outcomes.shape[-1]):
            passed.append(reach & own[None, :] & stages.outcomes[:, d, : s + 1].all(axis=-1))
        return np.where(np.stack(passed, axis=-1), dt.score[d][None, :, None], -np.inf)


@dataclass(frozen=True)
class Stages:
    """Per IoU threshold and detection: stage outcomes and whether it counts; recall side."""

    outcomes: np.ndarray  # (T, n_dt, S) bool
    counted: np.ndarray  # (T, n_dt) bool
    predicted: np.ndarray  # (n_dt,) bool: detections that are predictions at all
    gt_counted: np.ndarray  # (n_gt,) ground truth counted in G
    recall: _ObjectRecall | _DetectionRecall


def _masks(prep: Prepared) -> tuple[Masks, Masks]:
    """The detection and ground-truth masks of ``prep`` (prepared with ``masks=True``)."""
    if prep.dt_masks is None or prep.gt_masks is None:
        raise InvalidInputError("segm decomposition needs masks: prepare(..., masks=True)")
    return prep.dt_masks, prep.gt_masks


def coco_stages(
    prep: Prepared,
    pairs: Pairs,
    thresholds: np.ndarray,
    mask_thresholds: np.ndarray | None,
    max_det: int,
) -> Stages:
    gt, dt = prep.gt, prep.dt
    limit = np.minimum(thresholds, COCO_IOU_CAP)
    low, high = COCO_AREA_RANGES["all"]
    gt_ignored = gt.iscrowd | (gt.area < low) | (gt.area > high)
    same = dt.category[pairs.dt] == gt.category[pairs.gt]
    matched = greedy_match(
        pairs.select(same),
        n_dt=dt.n,
        n_gt=gt.n,
        dt_rank=prep.rank,
        gt_ignore=gt_ignored[None, :],
        gt_crowd=gt.iscrowd,
        thresholds=thresholds,
    )[0]
    hit = matched >= 0
    safe = np.maximum(matched, 0)
    dt_out = (dt.area < low) | (dt.area > high)
    ignored = np.where(hit, gt_ignored[safe] if gt.n else False, dt_out[None, :])
    kept = prep.rank < max_det
    best_iou = np.zeros(dt.n)
    np.maximum.at(best_iou, pairs.dt, pairs.iou)
    localized = best_iou[None, :] >= limit[:, None]
    correct = hit & ~ignored
    stages = [localized, correct]
    if mask_thresholds is not None:
        t_index, d_index = np.nonzero(correct)
        iou = mask_iou(
            *_masks(prep),
            d_index,
            matched[t_index, d_index],
            np.zeros(d_index.size, bool),
        )
        good = np.zeros(correct.shape, bool)
        good[t_index, d_index] = iou >= np.minimum(mask_thresholds, COCO_IOU_CAP)[t_index]
        stages.append(good)
    outcomes = np.stack(stages, axis=-1)
    # recall side: objects of class c, reached at the best confidence that reaches them
    n_t = thresholds.size
    found = np.full((n_t, gt.n, len(stages)), -np.inf)
    score = dt.score
    for t in range(n_t):
        close = pairs.iou >= limit[t]
        found[t, :, 0] = _segment_max(pairs.gt[close], score[pairs.dt[close]], gt.n)
        for s in range(1, len(stages)):
            d = np.flatnonzero(outcomes[t, :, : s + 1].all(axis=-1) & kept)
            found[t, matched[t, d], s] = score[d]
    return Stages(
        outcomes=outcomes,
        counted=kept[None, :] & ~ignored,
        predicted=kept,
        gt_counted=~gt_ignored,
        recall=_ObjectRecall(found),
    )


def decompovision_stages(
    prep: Prepared, pairs: Pairs, thresholds: np.ndarray, mask_thresholds: np.ndarray | None
) -> Stages:
    gt, dt = prep.gt, prep.dt
    n_cat = gt.category_ids.size
    pair_class = gt.category[pairs.gt]
    same = dt.category[pairs.dt] == pair_class
    best_iou = np.zeros(dt.n)
    np.maximum.at(best_iou, pairs.dt, pairs.iou)
    best_same = np.zeros(dt.n)
    np.maximum.at(best_same, pairs.dt[same], pairs.iou[same])
    localized = best_iou[None, :] > thresholds[:, None]
    correct = best_same[None, :] > thresholds[:, None]
    stages = [localized, correct]
    if mask_thresholds is not None:
        good = np.zeros(correct.shape, bool)
        for t in range(thresholds.size):
            over = same & (pairs.iou > thresholds[t])
            d, g = pairs.dt[over], pairs.gt[over]
            first = np.full(dt.n, gt.n)
            np.minimum.at(first, d, g)  # the first class-c ground truth in file order
            chosen = np.flatnonzero(first < gt.n)
            iou = mask_iou(*_masks(prep), chosen, first[chosen], np.zeros(chosen.size, bool))
            good[t, chosen] = iou > mask_thresholds[t]
        stages.append(good)
    outcomes = np.stack(stages, axis=-1)
    # recall side: detections overlapping an object of class c, by (detection, class)
    key = pairs.dt * n_cat + pair_class
    unique, inverse = np.unique(key, return_inverse=True)
    best = np.zeros(unique.size)
    np.maximum.at(best, inverse, pairs.iou)
    det_of, class_of = np.divmod(unique, n_cat)
    return Stages(
        outcomes=outcomes,
        counted=np.ones(correct.shape, bool),
        predicted=np.ones(dt.n, bool),
        gt_counted=~gt.iscrowd,
        recall=_DetectionRecall(det_of, class_of, best),
    )
