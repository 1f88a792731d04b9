"""The standard COCO evaluation of detections (``bbox``) and instance masks (``segm``).

Reproduces ``pycocotools.cocoeval.COCOeval`` (evaluate, accumulate, summarize) with vectorized
NumPy: IoU of every overlapping pair of an image, greedy one-to-one matching stepped by rank over
all (image, category) groups at once (:mod:`metricalc.benchmarks.coco.matching`), and the precision
cube accumulated per category. The cube is a labeled Dataset over
``[iou, recall, category, area, maxdets]``; undefined entries (a category without ground truth
in the area range) are NaN where COCO writes -1.

Per category c, area range a, IoU threshold t and detection budget m, the detections of c (the
m best of each image) are sorted by score (ties: image id, then file order), matched ones count
as TP, unmatched ones as FP, and those matched to an ignored ground truth (crowd, or area
outside a) or unmatched with area outside a are left out. With :math:`N` the ground truth of c
not ignored,

.. math::

    R_i = \\frac{TP_i}{N}, \\qquad P_i = \\frac{TP_i}{TP_i + FP_i + \\epsilon}, \\qquad
    \\hat P_i = \\max_{j \\ge i} P_j, \\qquad
    p(r) = \\hat P_{\\min\\{i : R_i \\ge r\\}} \\; (0 \\text{ if none})

at the 101 recall levels r = 0, 0.01, ..., 1, with :math:`\\epsilon` = ``np.spacing(1)`` as in
COCOeval (so the cube agrees to the last bit). AP is the mean of p(r) over recall levels, IoU
thresholds and categories; AR the mean of the final recall over IoU thresholds and categories.

:mod:`metricalc.benchmarks.coco` re-exports the public names of this module (its ``__all__`` lists
them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import xarray as xr

from metricalc.benchmarks.coco.files import IOU_TYPES, CocoDetections, CocoGroundTruth
from metricalc.benchmarks.coco.iou import Pairs, overlapping_pairs
from metricalc.benchmarks.coco.masks import Masks, masks_from_segmentations
from metricalc.benchmarks.coco.matching import greedy_match, group_rank
from metricalc.errors import InvalidInputError
from metricalc.progress import progress_bar
from metricalc.validation import Boolean, Choice, Integer, ListOf, validate_params

COCO_IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1)
"""0.50:0.05:0.95, bit-identical to COCOeval's ``iouThrs``."""
COCO_RECALL_LEVELS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1)
"""0:0.01:1, bit-identical to COCOeval's ``recThrs``."""
COCO_MAX_DETS = (1, 10, 100)
COCO_AREA_RANGES: Mapping[str, tuple[float, float]] = {
    "all": (0.0, 1e5**2),
    "small": (0.0, 32.0**2),
    "medium": (32.0**2, 96.0**2),
    "large": (96.0**2, 1e5**2),
}
"""Area ranges (pixels, inclusive bounds) by label, in COCO's order."""
COCO_STATS = (
    "AP",
    "AP50",
    "AP75",
    "APs",
    "APm",
    "APl",
    "AR1",
    "AR10",
    "AR100",
    "ARs",
    "ARm",
    "ARl",
)
"""Names of ``COCOeval.stats`` in order."""


@dataclass(frozen=True, eq=False)
class Prepared:
    """Ground truth and detections ready for evaluation: the detections' areas and boxes as
    COCO's ``loadRes`` sets them, every detection's rank in its (image, category) group, and
    the masks when they are needed."""

    gt: CocoGroundTruth
    dt: CocoDetections
    rank: np.ndarray
    gt_masks: Masks | None
    dt_masks: Masks | None


def _gt_masks(gt: CocoGroundTruth) -> Masks:
    missing = [i for i, s in enumerate(gt.segmentation) if s is None]
    if missing:
        raise InvalidInputError(
            f"{gt.source}: annotations[{missing[0]}] (id {gt.ann_ids[missing[0]]}) has no "
            "segmentation; segm evaluation needs one for every annotation"
        )
    where = [f"{gt.source}: annotations[{i}] (id {a})" for i, a in enumerate(gt.ann_ids)]
    return masks_from_segmentations(
        gt.segmentation, gt.heights[gt.image], gt.widths[gt.image], where=where
    )


@validate_params(masks=Boolean(), progress=Boolean())
def prepare(
    gt: CocoGroundTruth, dt: CocoDetections, *, masks: bool = False, progress: bool = False
) -> Prepared:
    """Complete the detections as COCO's ``loadRes`` does and rank them per (image, category).

    Detections read from mask results get their mask area, and their mask's box where they
    have none. Masks are decoded when ``masks`` is True (segm) or when the areas need them.

    Examples
    --------
    >>> from metricalc.benchmarks.coco import load_detections, load_ground_truth, prepare
    >>> gt = load_ground_truth({"images": [{"id": 1, "height": 8, "width": 8}],
    ...                         "categories": [{"id": 1}], "annotations": []})
    >>> rle = {"size": [8, 8], "counts": [9, 2, 6, 2, 45]}        # a 2 x 2 square at (1, 1)
    >>> dt = load_detections([{"image_id": 1, "category_id": 1, "segmentation": rle,
    ...                        "score": 0.5}], gt)
    >>> ready = prepare(gt, dt)
    >>> ready.dt.area.tolist(), ready.dt.bbox.tolist()
    ([4.0], [[1.0, 1.0, 2.0, 2.0]])
    """
    need_dt_masks = masks or not dt.area_from_box
    with progress_bar("masks", total=2, enabled=progress and need_dt_masks) as advance:
        dt_masks = None
        if need_dt_masks:
            where = [f"{dt.source}: [{i}]" for i in range(dt.n)]
            dt_masks = masks_from_segmentations(
                dt.segmentation, gt.heights[dt.image], gt.widths[dt.image], where=where
            )
            if not dt.area_from_box:
                area = dt_masks.area().astype(np.float64)
                bbox = np.where(np.isnan(dt.bbox), dt_masks.bbox(), dt.bbox)
                dt = replace(dt, area=area, bbox=bbox)
        advance()
        gt_masks = _gt_masks(gt) if masks else None
        advance()
    rank, _ = group_rank(dt.image, dt.category, dt.score)
    return Prepared(gt=gt, dt=dt, rank=rank, gt_masks=gt_masks, dt_masks=dt_masks)


def check_iou_thresholds(values: Any, *, strict: bool = False) -> np.ndarray:
    """IoU thresholds as a float64 array: numbers in (0, 1] under COCO's matching (IoU >= t),
    in [0, 1] under a strict one (IoU > t).

    COCOeval accepts t = 0 and then matches boxes that do not overlap at all (their IoU 0 is not
    below it); that is refused rather than reproduced.

    Examples
    --------
    >>> from metricalc.benchmarks.coco.evaluate import check_iou_thresholds
    >>> check_iou_thresholds([0.5, 0.75]).tolist(), check_iou_thresholds([0], strict=True).tolist()
    ([0.5, 0.75], [0.0])
    """
    try:
        thresholds = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        thresholds = np.zeros(0)
    low_ok = thresholds >= 0 if strict else thresholds > 0
    if thresholds.ndim != 1 or thresholds.size == 0 or not (low_ok & (thresholds <= 1)).all():
        bounds = "[0, 1]" if strict else "(0, 1] (at 0 COCO's matching pairs disjoint boxes)"
        raise InvalidInputError(f"iou_thresholds must be in {bounds}; got {values!r}")
    return thresholds


def _area_flags(area: np.ndarray, ranges: Sequence[tuple[float, ...]]) -> np.ndarray:
    """(A, n): area outside each range (COCO: area < low or area > high)."""
    low = np.array([r[0] for r in ranges])[:, None]
    high = np.array([r[1] for r in ranges])[:, None]
    return (area[None, :] < low) | (area[None, :] > high)


def same_category_pairs(prep: Prepared, *, iou_type: str, max_det: int) -> Pairs:
    """Overlapping pairs of a detection (within the ``max_det`` best of its group) and a ground
    truth of the same image and category, with their box or mask IoU."""
    gt, dt = prep.gt, prep.dt
    n_cat = gt.category_ids.size
    # one "image" per (image, category): pairs never cross categories
    dt_group = dt.image * n_cat + dt.category
    gt_group = gt.image * n_cat + gt.category
    segm = iou_type == "segm"
    dt_box = prep.dt_masks.bbox() if segm and prep.dt_masks is not None else dt.bbox
    gt_box = prep.gt_masks.bbox() if segm and prep.gt_masks is not None else gt.bbox
    return overlapping_pairs(
        dt_group,
        gt_group,
        gt.iscrowd,
        dt_box=dt_box,
        gt_box=gt_box,
        dt_masks=prep.dt_masks if segm else None,
        gt_masks=prep.gt_masks if segm else None,
        keep_dt=prep.rank < max_det,
    )


def _accumulate(
    prep: Prepared,
    matched: np.ndarray,
    dt_ignored: np.ndarray,
    gt_ignored: np.ndarray,
    *,
    max_dets: Sequence[int],
    progress: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COCOeval.accumulate on the matches: precision and score (T, R, K, A, M), recall
    (T, K, A, M); NaN where undefined."""
    gt, dt = prep.gt, prep.dt
    n_areas, n_thresholds = matched.shape[:2]
    n_cat, n_levels, n_max = gt.category_ids.size, COCO_RECALL_LEVELS.size, len(max_dets)
    precision = np.full((n_thresholds, n_levels, n_cat, n_areas, n_max), np.nan)
    score = np.full_like(precision, np.nan)
    recall = np.full((n_thresholds, n_cat, n_areas, n_max), np.nan)
    not_ignored = ~gt_ignored  # (A, n_gt)
    npig = np.stack(
        [np.bincount(gt.category[not_ignored[a]], minlength=n_cat) for a in range(n_areas)]
    )  # (A, K)
    order = np.lexsort((np.arange(dt.n), dt.image, -dt.score, dt.category))
    bounds = np.searchsorted(dt.category[order], np.arange(n_cat + 1))
    hit = matched >= 0
    tp_all = hit & ~dt_ignored
    fp_all = ~hit & ~dt_ignored
    with progress_bar("accumulating", total=n_cat, enabled=progress) as advance:
        for k in range(n_cat):
            advance()
            if not npig[:, k].any():  # no ground truth counts: undefined in every area range
                continue
            in_category = order[bounds[k] : bounds[k + 1]]
            for m, budget in enumerate(max_dets):
                chosen = in_category[prep.rank[in_category] < budget]
                nd = chosen.size
                tp = np.cumsum(tp_all[:, :, chosen], axis=-1).astype(float)
                fp = np.cumsum(fp_all[:, :, chosen], axis=-1).astype(float)
                sorted_scores = dt.score[chosen]
                for a in range(n_areas):
                    if npig[a, k] == 0:
                        continue
                    rc = tp[a] / npig[a, k]
                    pr = tp[a] / (fp[a] + tp[a] + np.spacing(1))
                    recall[:, k, a, m] = rc[:, -1] if nd else 0.0
                    envelope = np.maximum.accumulate(pr[:, ::-1], axis=-1)[:, ::-1]
                    for t in range(n_thresholds):
                        index = np.searchsorted(rc[t], COCO_RECALL_LEVELS, side="left")
                        inside = index < nd
                        safe = np.minimum(index, max(nd - 1, 0))
                        precision[t, :, k, a, m] = np.where(
                            inside, envelope[t, safe] if nd else 0.0, 0.0
                        )
                        score[t, :, k, a, m] = np.where(
                            inside, sorted_scores[safe] if nd else 0.0, 0.0
                        )
    return precision, score, recall


def _summary(
    precision: np.ndarray,
    recall: np.ndarray,
    iou_thresholds: np.ndarray,
    area_labels: Sequence[str],
    max_dets: Sequence[int],
) -> np.ndarray:
    """COCOeval.summarize: the 12 stats (NaN where COCO prints -1)."""

    def one(ap: bool, iou: float | None = None, area: str = "all", budget: int = 100) -> float:
        a = [i for i, label in enumerate(area_labels) if label == area]
        m = [i for i, value in enumerate(max_dets) if value == budget]
        s = precision if ap else recall
        if iou is not None:
            s = s[np.where(iou == iou_thresholds)[0]]
        s = s[:, :, :, a, m] if ap else s[:, :, a, m]
        defined = s[~np.isnan(s)]
        return float(np.mean(defined)) if defined.size else float("nan")

    last = max_dets[2] if len(max_dets) > 2 else max_dets[-1]
    return np.array(
        [
            one(True, budget=last),
            one(True, iou=0.5, budget=last),
            one(True, iou=0.75, budget=last),
            one(True, area="small", budget=last),
            one(True, area="medium", budget=last),
            one(True, area="large", budget=last),
            one(False, budget=max_dets[0]),
            one(False, budget=max_dets[1] if len(max_dets) > 1 else max_dets[-1]),
            one(False, budget=last),
            one(False, area="small", budget=last),
            one(False, area="medium", budget=last),
            one(False, area="large", budget=last),
        ]
    )


def match(
    prep: Prepared,
    *,
    iou_type: str,
    thresholds: np.ndarray,
    max_det: int,
    ranges: Sequence[tuple[float, ...]],
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COCOeval.evaluate of every image: the ground truth each detection matches (A, T, n_dt;
    -1 where none), which detections are ignored (A, T, n_dt) and which ground truth (A, n_gt),
    per area range and IoU threshold. Only the ``max_det`` best detections of each image and
    category take part; an image's outcomes do not depend on the other images."""
    gt, dt = prep.gt, prep.dt
    pairs = same_category_pairs(prep, iou_type=iou_type, max_det=max_det)
    gt_ignored = gt.iscrowd[None, :] | _area_flags(gt.area, ranges)
    matched = greedy_match(
        pairs,
        n_dt=dt.n,
        n_gt=gt.n,
        dt_rank=prep.rank,
        gt_ignore=gt_ignored,
        gt_crowd=gt.iscrowd,
        thresholds=thresholds,
        progress=progress,
    )
    dt_out = _area_flags(dt.area, ranges)  # (A, n_dt)
    safe = np.maximum(matched, 0)
    dt_ignored = np.where(
        matched >= 0,
        np.take_along_axis(gt_ignored[:, None, :], safe, axis=2)
        if gt.n
        else np.zeros(matched.shape, bool),
        dt_out[:, None, :],
    )
    return matched, dt_ignored, gt_ignored


@validate_params(iou_type=Choice(IOU_TYPES), max_dets=ListOf(Integer(1)), progress=Boolean())
def evaluate(
    gt: CocoGroundTruth,
    dt: CocoDetections,
    *,
    iou_type: str = "bbox",
    iou_thresholds: Sequence[float] | np.ndarray = COCO_IOU_THRESHOLDS,
    max_dets: Sequence[int] = COCO_MAX_DETS,
    area_ranges: Mapping[str, tuple[float, float]] = COCO_AREA_RANGES,
    progress: bool = False,
    prepared: Prepared | None = None,
) -> xr.Dataset:
    """COCO evaluation of detections or instance masks: the precision cube and the 12 stats.

    Parameters
    ----------
    gt, dt : CocoGroundTruth, CocoDetections
        From :func:`~metricalc.benchmarks.coco.load_ground_truth` and
        :func:`~metricalc.benchmarks.coco.load_detections`.
    iou_type : {"bbox", "segm"}
        Box IoU or mask IoU.
    iou_thresholds, max_dets, area_ranges
        COCO's parameters (defaults: 0.50:0.05:0.95; 1, 10, 100; all / small / medium / large).
        The 12 stats need the defaults.
    progress : bool
        Progress bars.
    prepared : Prepared, optional
        Reuse the output of :func:`prepare`.

    Returns
    -------
    xarray.Dataset
        ``precision`` and ``score`` over ``(iou, recall, category, area, maxdets)``,
        ``max_recall`` over ``(iou, category, area, maxdets)`` (COCO's ``recall``: the recall
        reached by all kept detections), ``stats`` over ``metric`` (:data:`COCO_STATS`); NaN
        where COCO writes -1. Coordinates ``category`` (ids) and ``category_name``.

    Examples
    --------
    >>> from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
    >>> gt = load_ground_truth({
    ...     "images": [{"id": 1, "height": 100, "width": 100}],
    ...     "categories": [{"id": 1, "name": "cat"}],
    ...     "annotations": [{"id": 1, "image_id": 1, "category_id": 1,
    ...                      "bbox": [10, 10, 40, 40], "area": 1600}]})
    >>> dt = load_detections([
    ...     {"image_id": 1, "category_id": 1, "bbox": [12, 10, 40, 40], "score": 0.9},
    ...     {"image_id": 1, "category_id": 1, "bbox": [60, 60, 20, 20], "score": 0.8}], gt)
    >>> ev = evaluate(gt, dt)
    >>> ev.stats.sel(metric=["AP50", "AP75", "AR100"]).values.round(4).tolist()   # IoU 0.905
    [1.0, 1.0, 0.9]
    """
    thresholds = check_iou_thresholds(iou_thresholds)
    budgets = sorted(int(m) for m in max_dets)
    labels = list(area_ranges)
    ranges = [tuple(map(float, area_ranges[k])) for k in labels]
    prep = prepared or prepare(gt, dt, masks=iou_type == "segm", progress=progress)
    gt, dt = prep.gt, prep.dt
    matched, dt_ignored, gt_ignored = match(
        prep,
        iou_type=iou_type,
        thresholds=thresholds,
        max_det=budgets[-1],
        ranges=ranges,
        progress=progress,
    )
    precision, score, recall = _accumulate(
        prep, matched, dt_ignored, gt_ignored, max_dets=budgets, progress=progress
    )
    stats = _summary(precision, recall, thresholds, labels, budgets)
    dims = ("iou", "recall", "category", "area", "maxdets")
    coords: dict[str, Any] = {
        "iou": thresholds,
        "recall": COCO_RECALL_LEVELS,
        "category": gt.category_ids,
        "category_name": ("category", gt.category_names),
        "area": labels,
        "area_low": ("area", [r[0] for r in ranges]),
        "area_high": ("area", [r[1] for r in ranges]),
        "maxdets": budgets,
        "metric": list(COCO_STATS),
    }
    return xr.Dataset(
        {
            "precision": (dims, precision),
            "score": (dims, score),
            "max_recall": (("iou", "category", "area", "maxdets"), recall),
            "stats": ("metric", stats),
        },
        coords=coords,
        attrs={
            "iou_type": iou_type,
            "n_images": int(gt.image_ids.size),
            "n_ground_truth": int(gt.n),
            "n_detections": int(dt.n),
            "ground_truth": gt.source,
            "detections": dt.source,
        },
    )


def coco_stats(evaluation: xr.Dataset) -> dict[str, float]:
    """The 12 COCO stats by name (``AP``, ``AP50``, ..., ``ARl``), NaN where COCO prints -1.

    Examples
    --------
    >>> import xarray as xr
    >>> from metricalc.benchmarks.coco import coco_stats
    >>> ev = xr.Dataset({"stats": ("metric", [0.5] * 12)}, coords={"metric": list(range(12))})
    >>> coco_stats(ev)["AP"]
    0.5
    """
    values = evaluation["stats"].values.tolist()
    return dict(zip(COCO_STATS, (float(v) for v in values), strict=True))
