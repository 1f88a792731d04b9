"""Seeded synthetic COCO datasets: ground truth and detections with every case COCO handles.

Images of random sizes (some without ground truth, some without detections), objects of every
area range as boxes and star-shaped polygons, crowd regions (uncompressed RLE), categories of
uneven frequency (some empty), detections that localize well or badly, with the right or a wrong
class, duplicates and false positives, and scores optionally rounded so that they tie. Used by
the tests (against pycocotools), the benchmark and the docs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from metricalc.benchmarks.coco.masks import Masks, encode_rle, masks_from_segmentations
from metricalc.validation import Boolean, Integer, Nullable, Real, validate_params

__all__ = ["make_coco_dataset", "repeat_images"]


def _star_polygons(rng: np.random.Generator, boxes: np.ndarray) -> list[list[list[float]]]:
    """One star-shaped polygon inside each box (8 to 16 vertices)."""
    polygons = []
    for x, y, w, h in boxes:
        k = int(rng.integers(8, 17))
        angle = np.sort(rng.uniform(0, 2 * np.pi, k))
        radius = rng.uniform(0.55, 1.0, k)
        px = x + w / 2 + radius * np.cos(angle) * w / 2
        py = y + h / 2 + radius * np.sin(angle) * h / 2
        polygons.append([np.round(np.stack([px, py], 1).ravel(), 2).tolist()])
    return polygons


def _clip_boxes(boxes: np.ndarray, width: np.ndarray, height: np.ndarray) -> np.ndarray:
    x0 = np.clip(boxes[:, 0], 0, width - 1)
    y0 = np.clip(boxes[:, 1], 0, height - 1)
    x1 = np.clip(boxes[:, 0] + boxes[:, 2], x0 + 1, width)
    y1 = np.clip(boxes[:, 1] + boxes[:, 3], y0 + 1, height)
    return np.round(np.stack([x0, y0, x1 - x0, y1 - y0], 1), 2)


@validate_params(
    n_images=Integer(1),
    n_categories=Integer(1),
    objects_per_image=Real(0, None),
    detections_per_object=Real(0, None),
    false_positives_per_image=Real(0, None),
    crowd_rate=Real(0, 1),
    wrong_class_rate=Real(0, 1),
    segm=Boolean(),
    detection_boxes=Boolean(),
    score_decimals=Nullable(Integer(0)),
    seed=Integer(0),
)
def make_coco_dataset(
    *,
    n_images: int = 20,
    n_categories: int = 5,
    objects_per_image: float = 4.0,
    detections_per_object: float = 1.5,
    false_positives_per_image: float = 2.0,
    crowd_rate: float = 0.03,
    wrong_class_rate: float = 0.15,
    segm: bool = False,
    detection_boxes: bool = True,
    score_decimals: int | None = None,
    seed: int = 0,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A random COCO ground truth and detection results.

    Parameters
    ----------
    n_images, n_categories : int
        Sizes; image and category ids are random distinct integers listed in random order.
    objects_per_image : float
        Poisson mean of ground-truth objects per image (so some images have none).
    detections_per_object : float
        Poisson mean of detections around each object (0 = missed, 2+ = duplicates).
    false_positives_per_image : float
        Poisson mean of detections away from any object.
    crowd_rate : float
        Share of objects that are crowd regions (``iscrowd`` 1).
    wrong_class_rate : float
        Share of detections around an object given another category.
    segm : bool
        Polygons for objects (crowd regions as uncompressed RLE) and compressed RLE masks for
        detections; areas are mask areas.
    detection_boxes : bool
        Give detections a ``bbox`` (with ``segm``: False gives mask-only results, whose areas
        COCO takes from the masks).
    score_decimals : int, optional
        Round scores (ties).
    seed : int
        Seed; the same arguments give the same dataset.

    Returns
    -------
    (dict, list)
        The ground-truth dict (images, categories, annotations) and the detection results.

    Examples
    --------
    >>> from metricalc.benchmarks.coco.generator import make_coco_dataset
    >>> gt, dt = make_coco_dataset(n_images=3, seed=1)
    >>> sorted(gt), len(gt["images"]), all("score" in d for d in dt)
    (['annotations', 'categories', 'images'], 3, True)
    """
    rng = np.random.default_rng(seed)
    image_ids = rng.choice(np.arange(1, 20 * n_images + 2), n_images, replace=False)
    heights = rng.integers(120, 480, n_images)
    widths = rng.integers(120, 640, n_images)
    category_ids = rng.choice(np.arange(1, 10 * n_categories + 2), n_categories, replace=False)
    frequency = rng.dirichlet(np.full(n_categories, 0.7))
    # objects
    per_image = rng.poisson(objects_per_image, n_images)
    image_of = np.repeat(np.arange(n_images), per_image)
    n_obj = image_of.size
    category_of = rng.choice(n_categories, n_obj, p=frequency)
    side = np.exp(rng.uniform(np.log(6), np.log(300), n_obj))
    aspect = np.exp(rng.uniform(-0.7, 0.7, n_obj))
    w = side * aspect
    h = side / aspect
    x = rng.uniform(-0.1, 1.0, n_obj) * widths[image_of]
    y = rng.uniform(-0.1, 1.0, n_obj) * heights[image_of]
    gt_boxes = _clip_boxes(np.stack([x, y, w, h], 1), widths[image_of], heights[image_of])
    crowd = rng.random(n_obj) < crowd_rate
    gt_segm: list[Any] = []
    area = gt_boxes[:, 2] * gt_boxes[:, 3] * rng.uniform(0.6, 1.0, n_obj)
    if segm:
        polygons = _star_polygons(rng, gt_boxes)
        masks = masks_from_segmentations(
            polygons, heights[image_of], widths[image_of], where=["synthetic"] * n_obj
        )
        area = masks.area().astype(np.float64)
        gt_segm = list(polygons)
        for k in np.flatnonzero(crowd):  # crowd regions as uncompressed RLE
            one = Masks(
                start=masks.start[masks.offsets[k] : masks.offsets[k + 1]],
                end=masks.end[masks.offsets[k] : masks.offsets[k + 1]],
                offsets=np.array([0, masks.offsets[k + 1] - masks.offsets[k]]),
                height=masks.height[k : k + 1],
                width=masks.width[k : k + 1],
            )
            gt_segm[k] = {"size": [int(one.height[0]), int(one.width[0])], "counts": _counts(one)}
    annotations = []
    ann_ids = rng.choice(np.arange(1, 10 * n_obj + 2), n_obj, replace=False)
    for i in range(n_obj):
        ann: dict[str, Any] = {
            "id": int(ann_ids[i]),
            "image_id": int(image_ids[image_of[i]]),
            "category_id": int(category_ids[category_of[i]]),
            "bbox": gt_boxes[i].tolist(),
            "area": float(area[i]),
            "iscrowd": int(crowd[i]),
        }
        if segm:
            ann["segmentation"] = gt_segm[i]
        annotations.append(ann)
    # detections: around objects, then false positives
    around = rng.poisson(detections_per_object, n_obj)
    source = np.repeat(np.arange(n_obj), around)
    quality = rng.uniform(0, 1, source.size)
    noise = (0.02 + 0.35 * (1 - quality))[:, None] * rng.normal(size=(source.size, 4))
    base = gt_boxes[source]
    jitter = base + noise * np.stack([base[:, 2], base[:, 3], base[:, 2], base[:, 3]], 1)
    det_category = category_of[source].copy()
    wrong = rng.random(source.size) < wrong_class_rate
    det_category[wrong] = rng.integers(0, n_categories, int(wrong.sum()))
    det_image = image_of[source]
    score = 1 / (1 + np.exp(-(4 * quality - 1.5 + rng.normal(0, 0.7, source.size))))
    n_fp = rng.poisson(false_positives_per_image, n_images)
    fp_image = np.repeat(np.arange(n_images), n_fp)
    fp_side = np.exp(rng.uniform(np.log(6), np.log(200), fp_image.size))
    fp_boxes = np.stack(
        [
            rng.uniform(0, 1, fp_image.size) * widths[fp_image],
            rng.uniform(0, 1, fp_image.size) * heights[fp_image],
            fp_side,
            fp_side * np.exp(rng.uniform(-0.5, 0.5, fp_image.size)),
        ],
        1,
    )
    det_boxes = np.concatenate([jitter, fp_boxes])
    det_image = np.concatenate([det_image, fp_image])
    det_category = np.concatenate([det_category, rng.integers(0, n_categories, fp_image.size)])
    score = np.concatenate([score, rng.uniform(0.01, 0.7, fp_image.size)])
    det_boxes = _clip_boxes(det_boxes, widths[det_image], heights[det_image])
    if score_decimals is not None:
        score = np.round(score, score_decimals)
    order = rng.permutation(score.size)
    det_boxes, det_image, det_category, score = (
        det_boxes[order],
        det_image[order],
        det_category[order],
        score[order],
    )
    det_rle: list[dict[str, Any]] = []
    if segm:
        polygons = _star_polygons(rng, det_boxes)
        det_masks = masks_from_segmentations(
            polygons, heights[det_image], widths[det_image], where=["synthetic"] * score.size
        )
        det_rle = encode_rle(det_masks)
    results = []
    for i in range(score.size):
        result: dict[str, Any] = {
            "image_id": int(image_ids[det_image[i]]),
            "category_id": int(category_ids[det_category[i]]),
            "score": float(score[i]),
        }
        if detection_boxes or not segm:
            result["bbox"] = det_boxes[i].tolist()
        if segm:
            result["segmentation"] = det_rle[i]
        results.append(result)
    listing = rng.permutation(n_images)
    images = [
        {"id": int(image_ids[i]), "height": int(heights[i]), "width": int(widths[i])}
        for i in listing
    ]
    categories = [{"id": int(c), "name": f"class{j}"} for j, c in enumerate(category_ids)]
    rng.shuffle(categories)
    return {"images": images, "categories": categories, "annotations": annotations}, results


def repeat_images(
    gt: dict[str, Any], dt: list[dict[str, Any]], weights: Sequence[int] | np.ndarray
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The data set with image :math:`i` (in id order) ``weights[i]`` times, as COCO files.

    The copies of an image get consecutive new ids :math:`1, 2, \\ldots`, its annotations and
    detections come along (in file order, annotations renumbered from 1: pycocotools takes id 0
    for unmatched). A bootstrap resample of images written out this way is what
    :func:`metricalc.benchmarks.coco.resampled.weighted_summary` evaluates without writing it.

    Examples
    --------
    >>> gt = {"images": [{"id": 7}, {"id": 3}], "categories": [{"id": 1}],
    ...       "annotations": [{"id": 5, "image_id": 7}, {"id": 9, "image_id": 3}]}
    >>> dt = [{"image_id": 7, "score": 0.5}]
    >>> gt2, dt2 = repeat_images(gt, dt, [2, 1])   # image 3 twice, image 7 once
    >>> [im["id"] for im in gt2["images"]], [(a["id"], a["image_id"]) for a in gt2["annotations"]]
    ([1, 2, 3], [(1, 3), (2, 1), (3, 2)])
    >>> dt2
    [{'image_id': 3, 'score': 0.5}]
    """
    copies: dict[int, list[int]] = {}
    images: list[dict[str, Any]] = []
    for image, w in zip(sorted(gt["images"], key=lambda im: im["id"]), weights, strict=True):
        copies[image["id"]] = list(range(len(images) + 1, len(images) + 1 + int(w)))
        images += [{**image, "id": new} for new in copies[image["id"]]]
    copied = [(a, new) for a in gt["annotations"] for new in copies[a["image_id"]]]
    annotations = [{**a, "id": k + 1, "image_id": new} for k, (a, new) in enumerate(copied)]
    results = [{**d, "image_id": new} for d in dt for new in copies[d["image_id"]]]
    return {**gt, "images": images, "annotations": annotations}, results


def _counts(mask: Masks) -> list[int]:
    """Uncompressed RLE counts of a single mask."""
    size = int(mask.height[0] * mask.width[0])
    counts, position = [], 0
    for start, end in zip(mask.start.tolist(), mask.end.tolist(), strict=True):
        counts += [start - position, end - start]
        position = end
    if position < size or not counts:
        counts.append(size - position)
    return counts
