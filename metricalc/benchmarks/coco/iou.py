"""IoU of detection / ground-truth pairs of the same image: boxes and masks, COCO's definition.

Pairs are enumerated per image (every detection against every ground truth of its image), in
chunks of bounded size, and only the pairs that overlap are kept, so the result is sparse.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from metricalc.benchmarks.coco.masks import Masks, mask_iou

__all__ = ["Pairs", "box_iou", "image_pairs", "overlapping_pairs"]

PAIR_CHUNK = 1 << 22
"""Detection x ground-truth pairs enumerated at once (bounds temporary memory)."""


@dataclass(frozen=True)
class Pairs:
    """Overlapping (detection, ground truth) pairs of one image each, with their IoU (> 0)."""

    dt: np.ndarray
    gt: np.ndarray
    iou: np.ndarray

    def select(self, keep: np.ndarray) -> Pairs:
        return Pairs(self.dt[keep], self.gt[keep], self.iou[keep])


def box_iou(dt_box: np.ndarray, gt_box: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    r"""IoU of box pairs ``[x, y, w, h]`` (row by row), COCO's definition and arithmetic.

    .. math::

        IoU = \frac{I}{A_d + A_g - I}, \qquad IoU_{crowd} = \frac{I}{A_d}, \qquad
        I = \max(0, \min(x_d + w_d, x_g + w_g) - \max(x_d, x_g)) \cdot \max(0, \dots y \dots)

    computed in the order of the COCO API's C code, so values agree to the last bit.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.iou import box_iou
    >>> box_iou(np.array([[0., 0, 2, 2], [0, 0, 2, 2]]), np.array([[1., 0, 2, 2], [1, 0, 2, 2]]),
    ...         np.array([False, True])).tolist()
    [0.3333333333333333, 0.5]
    """
    w = np.minimum(dt_box[:, 2] + dt_box[:, 0], gt_box[:, 2] + gt_box[:, 0]) - np.maximum(
        dt_box[:, 0], gt_box[:, 0]
    )
    h = np.minimum(dt_box[:, 3] + dt_box[:, 1], gt_box[:, 3] + gt_box[:, 1]) - np.maximum(
        dt_box[:, 1], gt_box[:, 1]
    )
    overlap = (w > 0) & (h > 0)
    inter = np.where(overlap, w * h, 0.0)
    area_d = dt_box[:, 2] * dt_box[:, 3]
    area_g = gt_box[:, 2] * gt_box[:, 3]
    union = np.where(crowd, area_d, area_d + area_g - inter)
    return np.where(overlap, inter / np.where(overlap, union, 1.0), 0.0)


def image_pairs(
    dt_image: np.ndarray, gt_image: np.ndarray, *, chunk: int = PAIR_CHUNK
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (detection, ground truth) index arrays of every pair sharing an image, in chunks of
    at most about ``chunk`` pairs (a detection's pairs are never split)."""
    n_images = int(max(dt_image.max(initial=-1), gt_image.max(initial=-1))) + 1
    gt_order = np.argsort(gt_image, kind="stable")
    gt_count = np.bincount(gt_image, minlength=n_images)
    gt_first = np.cumsum(gt_count) - gt_count
    per_dt = gt_count[dt_image] if dt_image.size else np.zeros(0, np.int64)
    reach = np.cumsum(per_dt)
    lo = 0
    while lo < dt_image.size:
        done = int(reach[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(reach, done + chunk, side="right")))
        count = per_dt[lo:hi]
        dt = np.repeat(np.arange(lo, hi), count)
        local = np.arange(dt.size) - np.repeat(np.cumsum(count) - count, count)
        yield dt, gt_order[gt_first[dt_image[dt]] + local]
        lo = hi


def overlapping_pairs(
    dt_image: np.ndarray,
    gt_image: np.ndarray,
    gt_crowd: np.ndarray,
    *,
    dt_box: np.ndarray,
    gt_box: np.ndarray,
    dt_masks: Masks | None = None,
    gt_masks: Masks | None = None,
    keep_dt: np.ndarray | None = None,
) -> Pairs:
    """Every overlapping pair of a detection and a ground truth of the same image, with its IoU.

    Box IoU by default; with ``dt_masks`` and ``gt_masks``, mask IoU of the pairs whose boxes
    (``dt_box``, ``gt_box``: the masks' boxes) overlap. ``keep_dt`` restricts the detections.
    """
    dt_index = np.arange(dt_image.size) if keep_dt is None else np.flatnonzero(keep_dt)
    parts = []
    for d_local, g in image_pairs(dt_image[dt_index], gt_image):
        d = dt_index[d_local]
        iou = box_iou(dt_box[d], gt_box[g], gt_crowd[g])
        keep = iou > 0
        d, g, iou = d[keep], g[keep], iou[keep]
        if dt_masks is not None and gt_masks is not None:
            iou = mask_iou(dt_masks, gt_masks, d, g, gt_crowd[g])
            keep = iou > 0
            d, g, iou = d[keep], g[keep], iou[keep]
        parts.append((d, g, iou))
    if not parts:
        empty = np.zeros(0, np.int64)
        return Pairs(empty, empty, np.zeros(0))
    return Pairs(*(np.concatenate([p[i] for p in parts]) for i in range(3)))
