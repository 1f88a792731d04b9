r"""COCO AP and AR of any multiset of images: per-image records and the stats under image weights.

The independent unit of a COCO evaluation is the image (docs/stats.md). COCOeval matches every
image on its own, so each detection's outcome (true positive, false positive or ignored, per
area range and IoU threshold) and each image's number of ground-truth objects that count (per
category and area range) do not depend on the other images: they are the image's records
(:func:`image_records`). A bootstrap resample counts image :math:`i` :math:`w_i` times; the
stats of the resampled data set follow from the records alone (:func:`weighted_summary`).

Per category :math:`c`, area range :math:`a` and IoU threshold :math:`t`, with the 100 best
detections of each image sorted as COCOeval sorts them (score descending; ties by image, then
file order), detection :math:`d` of image :math:`i(d)` counted :math:`w_{i(d)}` times and
:math:`n_{i,c,a}` the ground truth of image :math:`i` that counts,

.. math::

    TP_j = \sum_{d \le j} w_{i(d)}\,[d \text{ TP}], \quad
    N_j = \sum_{d \le j} w_{i(d)}\,[d \text{ not ignored}], \quad
    R_j = \frac{TP_j}{\sum_i w_i\, n_{i,c,a}}, \quad
    P_j = \frac{TP_j}{N_j + \epsilon},

    p(r) = \max_{j \ge \min\{j : R_j \ge r\}} P_j \ (0 \text{ if no } R_j \ge r), \qquad
    AP_{c,a,t} = \frac{1}{101} \sum_{r \in \{0, 0.01, \dots, 1\}} p(r),

and the stats average over IoU thresholds and the categories whose weighted ground truth is not
0, as ``COCOeval.summarize`` does. This is COCOeval of the data set in which image :math:`i`
appears :math:`w_i` times, its copies under consecutive new ids in the order of the original
ids: the copies of a detection are then consecutive in COCO's order, and of a run of copies
only the last point :math:`(R_j, P_j)` can raise :math:`p(r)` (along true positives precision
rises; a false positive or an ignored detection leaves recall as it was). Detections of one
image and category with equal scores are the exception: COCO takes the whole tied block once
per copy, so such blocks are expanded copy by copy. The sums are of integer weights, exact in
floating point, so every :math:`P_j`, :math:`R_j` and :math:`p(r)` is the value COCOeval
computes; the stats of many resamples are summed per category (they may differ from
``COCOeval.stats`` in the last bit), those of unit weights in COCOeval's order
(:func:`unit_summary`: ``COCOeval.stats`` bit for bit).

Everything runs on NumPy arrays over resamples x detections, one category at a time (no Python
loop over images or resamples).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metricalc.benchmarks.coco.evaluate import (
    COCO_AREA_RANGES,
    COCO_IOU_THRESHOLDS,
    COCO_MAX_DETS,
    COCO_RECALL_LEVELS,
    Prepared,
    match,
    prepare,
)
from metricalc.benchmarks.coco.files import IOU_TYPES, CocoDetections, CocoGroundTruth
from metricalc.validation import Choice, validate_params

__all__ = [
    "COCO_SUMMARY",
    "ImageRecords",
    "image_records",
    "image_summary",
    "swapped_summaries",
    "unit_summary",
    "weighted_summary",
]

COCO_SUMMARY = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR100", "ARs", "ARm", "ARl")
"""The stats computed under image weights (``COCOeval.stats`` without AR1 and AR10), all with
100 detections per image."""

CHUNK = 1 << 21
"""Resamples x IoU thresholds x detections of one category handled at once (bounded memory)."""

_EPS = np.spacing(1)
_T50, _T75 = 0, 5
"""Positions of IoU 0.5 and 0.75 in :data:`COCO_IOU_THRESHOLDS`."""


@dataclass(frozen=True, eq=False)
class ImageRecords:
    """The outcomes of one COCO evaluation that its stats need, per image.

    Detections are those COCOeval keeps (the 100 best of each image and category), in file
    order; ``A`` area ranges (all, small, medium, large), ``T`` IoU thresholds 0.50:0.95.
    """

    source: str
    iou_type: str
    image_ids: np.ndarray
    """(I,) increasing: the images (the units)."""
    category_ids: np.ndarray
    gt_counts: np.ndarray
    """(A, I, K) int64: ground truth that counts (not crowd, area in the range)."""
    image: np.ndarray
    """(n,) index into ``image_ids``."""
    category: np.ndarray
    score: np.ndarray
    tp: np.ndarray
    """(A, T, n) bool: matched to ground truth that counts."""
    counted: np.ndarray
    """(A, T, n) bool: not ignored (a true or a false positive)."""


@validate_params(iou_type=Choice(IOU_TYPES))
def image_records(
    gt: CocoGroundTruth,
    dt: CocoDetections,
    *,
    iou_type: str = "bbox",
    prepared: Prepared | None = None,
) -> ImageRecords:
    """Match ``dt`` to ``gt`` as COCOeval does and keep the per-image outcomes.

    Examples
    --------
    >>> from metricalc.benchmarks.coco import load_detections, load_ground_truth
    >>> from metricalc.benchmarks.coco.resampled import image_records
    >>> gt = load_ground_truth({
    ...     "images": [{"id": 1, "height": 100, "width": 100}],
    ...     "categories": [{"id": 1}],
    ...     "annotations": [{"id": 1, "image_id": 1, "category_id": 1,
    ...                      "bbox": [10, 10, 40, 40], "area": 1600}]})
    >>> dt = load_detections([
    ...     {"image_id": 1, "category_id": 1, "bbox": [12, 10, 40, 40], "score": 0.9},
    ...     {"image_id": 1, "category_id": 1, "bbox": [60, 60, 20, 20], "score": 0.8}], gt)
    >>> records = image_records(gt, dt)
    >>> records.tp[0, :, 0].sum().item(), records.tp[0, :, 1].sum().item()  # TP up to IoU 0.9
    (9, 0)
    """
    prep = prepared or prepare(gt, dt, masks=iou_type == "segm")
    gt, dt = prep.gt, prep.dt
    ranges = [tuple(map(float, r)) for r in COCO_AREA_RANGES.values()]
    matched, dt_ignored, gt_ignored = match(
        prep,
        iou_type=iou_type,
        thresholds=COCO_IOU_THRESHOLDS,
        max_det=COCO_MAX_DETS[-1],
        ranges=ranges,
    )
    n_images, n_cat = gt.image_ids.size, gt.category_ids.size
    cell = gt.image * n_cat + gt.category
    counts = np.stack(
        [np.bincount(cell[~ignored], minlength=n_images * n_cat) for ignored in gt_ignored]
    ).reshape(len(ranges), n_images, n_cat)
    kept = np.flatnonzero(prep.rank < COCO_MAX_DETS[-1])
    return ImageRecords(
        source=dt.source,
        iou_type=iou_type,
        image_ids=gt.image_ids,
        category_ids=gt.category_ids,
        gt_counts=counts.astype(np.int64),
        image=dt.image[kept],
        category=dt.category[kept],
        score=dt.score[kept],
        tp=((matched >= 0) & ~dt_ignored)[:, :, kept],
        counted=~dt_ignored[:, :, kept],
    )


@dataclass(frozen=True, eq=False)
class _Pool:
    """Detections of one or two systems in COCO's order: by category, score descending, image,
    system, file order; ``block`` is the position of the first detection of each one's tie
    block (same category, score, image and system), ``bounds`` the category slices."""

    image: np.ndarray
    system: np.ndarray
    tp: np.ndarray
    counted: np.ndarray
    block: np.ndarray
    bounds: np.ndarray


def _pool(records: Sequence[ImageRecords]) -> _Pool:
    image = np.concatenate([r.image for r in records])
    category = np.concatenate([r.category for r in records])
    score = np.concatenate([r.score for r in records])
    system = np.concatenate([np.full(r.image.size, s) for s, r in enumerate(records)])
    file_order = np.concatenate([np.arange(r.image.size) for r in records])
    order = np.lexsort((file_order, system, image, -score, category))
    image, category, score, system = image[order], category[order], score[order], system[order]
    start = np.ones(order.size, bool)
    start[1:] = (
        (category[1:] != category[:-1])
        | (score[1:] != score[:-1])
        | (image[1:] != image[:-1])
        | (system[1:] != system[:-1])
    )
    block = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    n_cat = records[0].category_ids.size
    return _Pool(
        image=image,
        system=system,
        tp=np.concatenate([r.tp for r in records], axis=2)[:, :, order],
        counted=np.concatenate([r.counted for r in records], axis=2)[:, :, order],
        block=block,
        bounds=np.searchsorted(category, np.arange(n_cat + 1)),
    )


def _counted_sums(weights: np.ndarray, counted: np.ndarray, at: np.ndarray) -> np.ndarray:
    """:math:`N_j` (G, T, len(at)) at the slots ``at``: one cumulative sum over the slots counted
    at every IoU threshold, and one over (T, few) for those counted at some thresholds only
    (detections matched to a crowd region or to ground truth outside the area range)."""
    always = np.all(counted, axis=1)  # (1|G, S)
    base = np.cumsum(weights * always, axis=-1)[:, None, at]
    varying = np.flatnonzero((counted.any(axis=1) & ~always).any(axis=0))
    if varying.size == 0:
        return base
    sometimes = counted[:, :, varying] & ~always[:, None, varying]
    extra = np.cumsum(weights[:, None, varying] * sometimes, axis=-1)
    before = np.searchsorted(varying, at, side="right") - 1
    return base + np.where(before >= 0, extra[:, :, np.maximum(before, 0)], 0.0)


def _curve(
    weights: np.ndarray,
    tp: np.ndarray,
    counted: np.ndarray,
    total: np.ndarray,
    *,
    per_level: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """COCOeval.accumulate of independent rows: weights (G, S), outcomes (G or 1, T, S), the
    weighted ground truth (G,) (> 0). Returns the sum over the 101 recall levels of the
    interpolated precision (G, T) (``per_level``: the precision at each level, (G, T, 101))
    and the final recall (G, T).

    Only the points of true positives can be the first to reach a recall level or raise the
    envelope (a false positive or an ignored detection repeats the recall before it with no
    more precision), so the curve is computed at the slots that are a true positive at some
    threshold. Level :math:`r` takes the envelope at the first point with
    :math:`R_j \\ge r`; with :math:`n_j = \\#\\{r \\le R_j\\}` (a search among the 101
    levels), point :math:`j` is the first for :math:`n_j - n_{j-1}` levels, so the sum is
    :math:`\\sum_j \\hat P_j (n_j - n_{j-1})`; levels above the last recall add 0."""
    rows, n_t = weights.shape[0], tp.shape[1]
    at = np.flatnonzero(tp.any(axis=(0, 1)))
    if at.size == 0:  # no true positive: every precision is 0
        shape = (rows, n_t, COCO_RECALL_LEVELS.size) if per_level else (rows, n_t)
        return np.zeros(shape), np.zeros((rows, n_t))
    true = np.cumsum(weights[:, None, at] * tp[:, :, at], axis=-1)  # integers: exact
    precision = true / (_counted_sums(weights, counted, at) + _EPS)
    envelope = np.maximum.accumulate(precision[..., ::-1], axis=-1)[..., ::-1]
    recall = true / total[:, None, None]
    reached = np.searchsorted(COCO_RECALL_LEVELS, recall, side="right")
    if per_level:  # level r: the first point with n_j > r (row offsets keep rows apart)
        n_levels, points = COCO_RECALL_LEVELS.size, at.size
        offset = (np.arange(rows * n_t) * (n_levels + 1)).reshape(rows, n_t, 1)
        levels = np.arange(n_levels) + offset
        found = np.searchsorted((reached + offset).ravel(), levels.ravel(), side="right")
        index = found.reshape(levels.shape) - (np.arange(rows * n_t) * points).reshape(offset.shape)
        values = np.take_along_axis(envelope, np.minimum(index, points - 1), axis=-1)
        return np.where(index < points, values, 0.0), recall[..., -1]
    first = np.diff(reached, axis=-1, prepend=0)
    return (envelope * first).sum(axis=-1), recall[..., -1]


def _slots(block: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The detections of one category in COCO's order of the resampled data set: a tied block
    of one image repeated copy by copy (copy :math:`j` counted where :math:`w > j`), any other
    detection once with its weight. Returns the detection of every slot and the slot weights."""
    n = block.size
    tied = np.bincount(block, minlength=n)[block] > 1
    copies = int(weights[:, tied].max(initial=1))
    if copies <= 1:
        return np.arange(n), weights
    repeats = np.where(tied, copies, 1)
    source = np.repeat(np.arange(n), repeats)
    copy = np.arange(source.size) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    order = np.lexsort((source, copy, block[source]))
    source, copy = source[order], copy[order]
    slot_weights = weights[:, source]
    return source, np.where(tied[source], (slot_weights > copy).astype(np.float64), slot_weights)


def _pool_sums(
    pool: _Pool, gt_counts: np.ndarray, image_weights: np.ndarray, gt_weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sums over the defined categories of the precision sums and final recalls (R, A, T), and
    the number of defined categories (R, A). ``image_weights`` (systems, R, I) weight each
    system's detections, ``gt_weights`` (R, I) the ground truth."""
    n_areas, n_t = pool.tp.shape[:2]
    rows = gt_weights.shape[0]
    total = np.einsum("ri,aik->rak", gt_weights, gt_counts.astype(np.float64))
    defined = total > 0
    sums, recall = np.zeros((rows, n_areas, n_t)), np.zeros((rows, n_areas, n_t))
    for k in range(gt_counts.shape[2]):
        if not defined[:, :, k].any():
            continue
        lo, hi = int(pool.bounds[k]), int(pool.bounds[k + 1])
        step = max(1, CHUNK // (n_t * max(1, hi - lo)))
        for first in range(0, rows, step):
            part = slice(first, first + step)
            weights = image_weights[pool.system[lo:hi], part, pool.image[lo:hi]].T
            source, slot_weights = _slots(pool.block[lo:hi] - lo, weights)
            for a in range(n_areas):
                ok = defined[part, a, k]
                if not ok.any():
                    continue
                precision, final = _curve(
                    slot_weights[ok],
                    pool.tp[a, :, lo:hi][None, :, source],
                    pool.counted[a, :, lo:hi][None, :, source],
                    total[part, a, k][ok],
                )
                sums[np.flatnonzero(ok) + first, a] += precision
                recall[np.flatnonzero(ok) + first, a] += final
    return sums, recall, defined.sum(axis=2)


def _summary(sums: np.ndarray, recall: np.ndarray, n_defined: np.ndarray) -> np.ndarray:
    """(R, len(COCO_SUMMARY)) from the category sums: COCOeval.summarize's means over IoU
    thresholds, recall levels and defined categories; NaN where no category is defined."""
    n_t, n_levels = sums.shape[2], COCO_RECALL_LEVELS.size
    with np.errstate(divide="ignore", invalid="ignore"):
        count = np.where(n_defined > 0, n_defined, np.nan).astype(np.float64)
        ap = sums.sum(axis=2) / (n_t * n_levels * count)  # (R, A)
        ar = recall.sum(axis=2) / (n_t * count)
        at = sums[:, 0, [_T50, _T75]] / (n_levels * count[:, :1])
    out: np.ndarray = np.column_stack([ap[:, 0], at, ap[:, 1:], ar])
    return out


def unit_summary(records: ImageRecords) -> np.ndarray:
    """The stats of the data set itself (every image once), (10,): the precision cube averaged
    in COCOeval's order, so that they are ``COCOeval.stats`` bit for bit."""
    pool = _pool([records])
    n_areas, n_t = pool.tp.shape[:2]
    total = records.gt_counts.sum(axis=1).astype(np.float64)  # (A, K)
    n_cat = total.shape[1]
    precision = np.full((n_areas, n_t, COCO_RECALL_LEVELS.size, n_cat), np.nan)
    recall = np.full((n_areas, n_t, n_cat), np.nan)
    for k in range(n_cat):
        lo, hi = int(pool.bounds[k]), int(pool.bounds[k + 1])
        for a in np.flatnonzero(total[:, k] > 0):
            q, final = _curve(
                np.ones((1, hi - lo)),
                pool.tp[a, :, lo:hi][None],
                pool.counted[a, :, lo:hi][None],
                total[a, k : k + 1],
                per_level=True,
            )
            precision[a, :, :, k], recall[a, :, k] = q[0], final[0]

    def mean(values: np.ndarray) -> float:
        defined = values[~np.isnan(values)]
        return float(np.mean(defined)) if defined.size else np.nan

    at = [mean(precision[0, t]) for t in (_T50, _T75)]
    return np.array(
        [mean(precision[0]), *at, *(mean(p) for p in precision[1:]), *(mean(r) for r in recall)]
    )


def weighted_summary(records: ImageRecords, weights: np.ndarray) -> np.ndarray:
    """The stats (:data:`COCO_SUMMARY`) with image :math:`i` counted ``weights[:, i]`` times.

    Parameters
    ----------
    records : ImageRecords
    weights : ndarray, shape (R, I)
        Non-negative integer image weights, one row per resample.

    Returns
    -------
    ndarray, shape (R, 10)
        NaN where no category has ground truth in the resample.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
    >>> from metricalc.benchmarks.coco.resampled import image_records, weighted_summary
    >>> gt = load_ground_truth({
    ...     "images": [{"id": 1, "height": 99, "width": 99}, {"id": 2, "height": 99, "width": 99}],
    ...     "categories": [{"id": 1}],
    ...     "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 9, 9],
    ...                      "area": 81}, {"id": 2, "image_id": 2, "category_id": 1,
    ...                      "bbox": [0, 0, 9, 9], "area": 81}]})
    >>> dt = load_detections([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 9, 9],
    ...                        "score": 0.5}, {"image_id": 2, "category_id": 1,
    ...                        "bbox": [50, 50, 9, 9], "score": 0.9}], gt)
    >>> ap = weighted_summary(image_records(gt, dt), np.array([[1, 1], [2, 0], [0, 2]]))[:, 0]
    >>> ap.round(4).tolist()   # both images: the miss (0.9) ranks first; p(r) = 0.5 up to r = 0.5
    [0.2525, 1.0, 0.0]
    """
    image_weights = np.asarray(weights, dtype=np.float64)
    sums = _pool_sums(_pool([records]), records.gt_counts, image_weights[None], image_weights)
    out = _summary(*sums)
    ones = (image_weights == 1).all(axis=1)
    if ones.any():  # the same numbers, summed in COCOeval's order: its stats bit for bit
        out[ones] = unit_summary(records)
    return out


def swapped_summaries(
    first: ImageRecords, second: ImageRecords, swap: np.ndarray, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The stats of both systems (M, 10) when their detections are exchanged on the images
    where ``swap`` (M, I) is True, over the images where ``keep`` (I,) is True."""
    pool = _pool([first, second])
    kept = keep.astype(np.float64)
    exchanged = swap.astype(np.float64) * kept
    own = kept - exchanged
    ground = np.broadcast_to(kept, swap.shape)
    return (
        _summary(*_pool_sums(pool, first.gt_counts, np.stack([own, exchanged]), ground)),
        _summary(*_pool_sums(pool, first.gt_counts, np.stack([exchanged, own]), ground)),
    )


def image_summary(records: ImageRecords) -> np.ndarray:
    """The stats of every image alone (I, 10): each (image, category) is one row of the
    accumulation, its detections (at most 100) padded with weight 0."""
    n_images = records.image_ids.size
    n_cat = records.category_ids.size
    n_areas, n_t = records.tp.shape[:2]
    cell = records.image * n_cat + records.category
    order = np.lexsort((np.arange(cell.size), -records.score, cell))
    cell = cell[order]
    with_gt = np.flatnonzero(records.gt_counts.sum(axis=0).ravel() > 0)
    groups, group = np.unique(np.concatenate([with_gt, cell]), return_inverse=True)
    group = group[with_gt.size :]
    first = np.searchsorted(cell, groups)
    position = np.arange(cell.size) - first[group]
    width = int(position.max(initial=-1)) + 1
    weights = np.zeros((groups.size, width))
    weights[group, position] = 1.0
    sums = np.zeros((n_images, n_areas, n_t))
    recall = np.zeros_like(sums)
    n_defined = np.zeros((n_images, n_areas), np.int64)
    image = groups // n_cat
    for a in range(n_areas):
        total = records.gt_counts[a].ravel()[groups].astype(np.float64)
        ok = total > 0
        tp = np.zeros((groups.size, n_t, width), bool)
        counted = np.zeros_like(tp)
        tp[group, :, position] = records.tp[a][:, order].T
        counted[group, :, position] = records.counted[a][:, order].T
        precision, final = _curve(weights[ok], tp[ok], counted[ok], total[ok])
        np.add.at(sums[:, a], image[ok], precision)
        np.add.at(recall[:, a], image[ok], final)
        n_defined[:, a] = np.bincount(image[ok], minlength=n_images)
    return _summary(sums, recall, n_defined)
