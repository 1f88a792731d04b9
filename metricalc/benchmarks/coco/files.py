"""COCO JSON in: ground truth (images, categories, annotations) and detection results.

The files are read into flat NumPy arrays (one row per annotation, in file order), validated
with errors that name the file, the list and the entry. The rules that decide a number are the
ones of the COCO API (``pycocotools``), which the evaluation reproduces exactly:

- ground truth: a crowd annotation (``iscrowd`` 1) is an ignore region; the ``area`` field (not a
  recomputed area) decides the area range; a stray ``ignore`` field has no effect;
- results: ids are the positions in the list (1-based); when the first result carries a non-empty
  ``bbox`` every result's ``area`` is its box area ``w * h``, otherwise the area of its mask, and a
  missing ``bbox`` is the box of the mask;
- images are evaluated in increasing id order and categories in increasing id order.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from metricalc.errors import InvalidInputError

__all__ = [
    "MAX_BOX_VALUE",
    "CocoDetections",
    "CocoGroundTruth",
    "load_detections",
    "load_ground_truth",
]

IOU_TYPES = ("bbox", "segm")

LISTS = {"image_id": "images", "category_id": "categories"}
"""The ground-truth list an id field refers to."""


@dataclass(frozen=True, eq=False)
class CocoGroundTruth:
    """A COCO ground-truth file as arrays; annotations in file order."""

    source: str
    image_ids: np.ndarray
    """(I,) int64, increasing: the evaluation order of images."""
    heights: np.ndarray
    widths: np.ndarray
    category_ids: np.ndarray
    """(K,) int64, increasing."""
    category_names: np.ndarray
    ann_ids: np.ndarray
    image: np.ndarray
    """(n,) index into ``image_ids``."""
    category: np.ndarray
    """(n,) index into ``category_ids``."""
    bbox: np.ndarray
    """(n, 4) float64 ``[x, y, w, h]``."""
    area: np.ndarray
    iscrowd: np.ndarray
    segmentation: list[Any] = field(repr=False)
    """Raw ``segmentation`` objects (polygons or RLE); None where an annotation has none."""

    @property
    def n(self) -> int:
        return int(self.ann_ids.size)


@dataclass(frozen=True, eq=False)
class CocoDetections:
    """Detection results as arrays, in file order, restricted to nothing (all are validated)."""

    source: str
    image: np.ndarray
    """(n,) index into the ground truth's ``image_ids``."""
    category: np.ndarray
    """(n,) index into the ground truth's ``category_ids``."""
    score: np.ndarray
    bbox: np.ndarray
    """(n, 4) float64; NaN rows where a result has no box (taken from its mask when needed)."""
    area: np.ndarray
    """(n,) float64; NaN where it comes from a mask not decoded yet (segmentation results)."""
    area_from_box: bool
    """True when the first result carries a non-empty ``bbox`` (COCO's loadRes rule)."""
    segmentation: list[Any] = field(repr=False)
    """Raw ``segmentation`` objects; box results without one get their box as a polygon."""

    @property
    def n(self) -> int:
        return int(self.score.size)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _read_json(data: Any, what: str) -> tuple[Any, str]:
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise InvalidInputError(f"{what}: cannot read {path}: {error.strerror}") from None
        try:
            text = raw.decode("utf-8-sig")  # JSON is UTF-8 (RFC 8259); a BOM is tolerated
        except UnicodeDecodeError as error:
            bad = raw[error.start : error.start + 1]
            raise InvalidInputError(
                f"{path}: not UTF-8 text (byte {error.start}: {bad!r}); expected a COCO JSON "
                "file in UTF-8"
            ) from None
        try:
            return json.loads(text), str(path)
        except json.JSONDecodeError as error:
            raise InvalidInputError(
                f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
            ) from None
    return data, what


_INT64 = (-(2**63), 2**63 - 1)


def _fail(source: str, where: str, message: str) -> InvalidInputError:
    return InvalidInputError(f"{source}: {where}: {message}")


def _numeric(value: Any) -> bool:
    """Whether ``value`` is a number (JSON's integers and reals; bools and text are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return _numeric(value) and math.isfinite(value)


def _integer(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a Python int (JSON's integers; bools are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(where: str, i: int, ids: np.ndarray | None) -> str:
    return f"{where}[{i}]" + (f" (id {ids[i]})" if ids is not None else "")


def _integers(
    source: str, values: list[Any], where: str, what: str, ids: np.ndarray | None = None
) -> np.ndarray:
    """Integers of one field of every entry (64-bit, as pycocotools' NumPy arrays hold them),
    vectorized; the first bad entry is named."""
    if all(type(v) is int and _INT64[0] <= v <= _INT64[1] for v in values):
        return np.array(values, dtype=np.int64).reshape(len(values))
    i = next(i for i, v in enumerate(values) if not _integer(v) or not _INT64[0] <= v <= _INT64[1])
    expected = "an integer" if not _integer(values[i]) else "a 64-bit integer"
    raise _fail(source, _entry(where, i, ids), f"{what} must be {expected}; got {values[i]!r}")


def _floats(
    source: str,
    values: list[Any],
    where: str,
    what: str,
    ids: np.ndarray | None = None,
    *,
    minimum: float | None = None,
) -> np.ndarray:
    """Finite numbers (>= ``minimum``) of one field of every entry; the first bad one is named."""
    array = None
    if all(_numeric(v) for v in values):  # "0.9" is text, not a score
        try:
            array = np.array(values, dtype=np.float64).reshape(len(values))
        except (TypeError, ValueError):
            array = None
    if array is not None:
        bad = ~np.isfinite(array)
        if minimum is not None:
            bad |= array < minimum
        if not bad.any():
            return array
        i = int(np.flatnonzero(bad)[0])
    else:
        i = next(i for i, v in enumerate(values) if not _number(v))
    bound = "" if minimum is None else f" >= {minimum:g}"
    raise _fail(
        source, _entry(where, i, ids), f"{what} must be a finite number{bound}; got {values[i]!r}"
    )


MAX_BOX_VALUE = 2.0**53
"""Largest accepted magnitude of a box value: beyond it float64 no longer holds whole pixels, and
areas, corners and IoUs lose their meaning (a ``1e308`` box has an infinite area)."""


def _boxes(source: str, values: list[Any], where: str, ids: np.ndarray | None = None) -> np.ndarray:
    """[x, y, w, h] of every entry, vectorized; the first bad one is named."""
    if not values:
        return np.zeros((0, 4))
    try:
        array = np.array(values, dtype=np.float64)
        ok = array.shape == (len(values), 4) and all(
            isinstance(v, (list, tuple)) and all(_numeric(x) for x in v) for v in values
        )  # ["0", 0, 1, 1] is text, not a box
    except (TypeError, ValueError):
        ok = False
    if ok:
        bad = ~np.isfinite(array).all(axis=1) | (array[:, 2] < 0) | (array[:, 3] < 0)
        bad |= (np.abs(array) > MAX_BOX_VALUE).any(axis=1)
        if not bad.any():
            return array
        i = int(np.flatnonzero(bad)[0])
    else:
        i = next(
            i
            for i, v in enumerate(values)
            if not (isinstance(v, (list, tuple)) and len(v) == 4 and all(_number(x) for x in v))
        )
    raise _fail(
        source,
        _entry(where, i, ids),
        "bbox must be [x, y, w, h] with finite numbers, w, h >= 0, each within +-2**53 (whole "
        f"pixels in float64); got {values[i]!r}",
    )


def _list_of_dicts(source: str, data: Any, key: str) -> list[dict[str, Any]]:
    items = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise _fail(source, key, "expected a list of objects")
    return items


def _unique_ids(source: str, items: list[dict[str, Any]], key: str) -> np.ndarray:
    ids = []
    for i, item in enumerate(items):
        value = item.get("id")
        if not _integer(value) or not _INT64[0] <= value <= _INT64[1]:
            expected = "a 64-bit integer" if _integer(value) else "an integer"
            raise _fail(source, f"{key}[{i}]", f"id must be {expected}; got {value!r}")
        ids.append(value)
    array = np.asarray(ids, dtype=np.int64)
    values, counts = np.unique(array, return_counts=True)
    if (counts > 1).any():
        repeated = int(values[counts > 1][0])
        first = [i for i, v in enumerate(ids) if v == repeated][:2]
        raise _fail(
            source,
            key,
            f"id {repeated} is used twice ({key}[{first[0]}] and "
            f"{key}[{first[1]}]); ids must be unique",
        )
    return array


def _index_of(
    source: str, where: str, sorted_ids: np.ndarray, values: np.ndarray, what: str
) -> np.ndarray:
    """Positions of ``values`` in ``sorted_ids``; an unknown value is an error naming its entry."""
    if sorted_ids.size == 0:
        known = np.zeros(values.shape, bool)
        position = np.zeros(values.shape, np.int64)
    else:
        position = np.minimum(np.searchsorted(sorted_ids, values), sorted_ids.size - 1)
        known = sorted_ids[position] == values
    if not known.all():
        i = int(np.flatnonzero(~known)[0])
        raise _fail(
            source,
            f"{where}[{i}]",
            f"{what} {int(values[i])} is not in the ground truth's {LISTS[what]}",
        )
    return position.astype(np.int64)


def load_ground_truth(data: str | os.PathLike[str] | Mapping[str, Any]) -> CocoGroundTruth:
    """Read and check a COCO ground-truth file (or its parsed dict).

    Every image needs ``id``, ``height`` and ``width``; every category ``id`` (and optionally
    ``name``); every annotation ``id`` (unique), ``image_id`` and ``category_id`` of a listed
    image and category, ``bbox`` ``[x, y, w, h]``, ``area``, and optionally ``iscrowd`` (0/1)
    and ``segmentation`` (polygons, or RLE with ``counts`` and ``size``).

    Raises
    ------
    InvalidInputError
        Naming the file, the list and entry, and what was expected.

    Examples
    --------
    >>> from metricalc.benchmarks.coco import load_ground_truth
    >>> gt = load_ground_truth({
    ...     "images": [{"id": 1, "height": 10, "width": 10}],
    ...     "categories": [{"id": 3, "name": "cat"}],
    ...     "annotations": [{"id": 1, "image_id": 1, "category_id": 3,
    ...                      "bbox": [1, 1, 4, 4], "area": 16, "iscrowd": 0}]})
    >>> gt.n, gt.category_names.tolist()
    (1, ['cat'])
    """
    raw, source = _read_json(data, "ground truth")
    if not isinstance(raw, Mapping):
        raise _fail(source, "top level", "expected an object with images, categories, annotations")
    images = _list_of_dicts(source, raw, "images")
    categories = _list_of_dicts(source, raw, "categories")
    annotations = _list_of_dicts(source, raw, "annotations")
    image_ids = _unique_ids(source, images, "images")
    sizes = []
    for i, image in enumerate(images):
        h, w = image.get("height"), image.get("width")
        if not (_integer(h) and _integer(w) and h > 0 and w > 0):
            raise _fail(
                source,
                f"images[{i}]",
                f"height and width must be positive integers; got {h!r} and {w!r}",
            )
        sizes.append((h, w))
    category_ids = _unique_ids(source, categories, "categories")
    names = [str(c.get("name", c["id"])) for c in categories]
    image_order = np.argsort(image_ids, kind="stable")
    category_order = np.argsort(category_ids, kind="stable")
    sorted_images = image_ids[image_order]
    sorted_categories = category_ids[category_order]
    size_array = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)[image_order]
    ann_ids = _unique_ids(source, annotations, "annotations")
    where = "annotations"
    image_of = _integers(
        source, [a.get("image_id") for a in annotations], where, "image_id", ann_ids
    )
    category_of = _integers(
        source, [a.get("category_id") for a in annotations], where, "category_id", ann_ids
    )
    boxes = _boxes(source, [a.get("bbox") for a in annotations], where, ann_ids)
    areas = _floats(source, [a.get("area") for a in annotations], where, "area", ann_ids, minimum=0)
    flags = [a.get("iscrowd", 0) for a in annotations]
    valid = np.array([f in (0, 1) and type(f) is not float for f in flags], bool)
    if not valid.all():
        i = int(np.flatnonzero(~valid)[0])
        raise _fail(source, _entry(where, i, ann_ids), f"iscrowd must be 0 or 1; got {flags[i]!r}")
    segmentations = [a.get("segmentation") for a in annotations]
    image_index = _index_of(source, "annotations", sorted_images, image_of, "image_id")
    category_index = _index_of(source, "annotations", sorted_categories, category_of, "category_id")
    return CocoGroundTruth(
        source=source,
        image_ids=sorted_images,
        heights=size_array[:, 0],
        widths=size_array[:, 1],
        category_ids=sorted_categories,
        category_names=np.asarray(names, dtype=str)[category_order] if names else np.zeros(0, str),
        ann_ids=ann_ids,
        image=image_index,
        category=category_index,
        bbox=boxes,
        area=areas,
        iscrowd=np.array(flags, dtype=bool).reshape(len(flags)),
        segmentation=segmentations,
    )


def load_detections(
    data: str | os.PathLike[str] | Sequence[Mapping[str, Any]], gt: CocoGroundTruth
) -> CocoDetections:
    """Read and check COCO detection results (a list of objects) against their ground truth.

    Every result needs ``image_id`` (an image of ``gt``), ``category_id`` (a category of
    ``gt``), a finite ``score``, and a ``bbox`` ``[x, y, w, h]`` or a ``segmentation`` (RLE or
    polygons). Areas and missing boxes follow COCO's ``loadRes`` (module docstring).

    Raises
    ------
    InvalidInputError
        Naming the file, the entry and what was expected.

    Examples
    --------
    >>> from metricalc.benchmarks.coco import load_detections, load_ground_truth
    >>> gt = load_ground_truth({"images": [{"id": 1, "height": 10, "width": 10}],
    ...                         "categories": [{"id": 3}], "annotations": []})
    >>> dt = load_detections([{"image_id": 1, "category_id": 3, "bbox": [0, 0, 2, 3],
    ...                        "score": 0.9}], gt)
    >>> dt.area.tolist()
    [6.0]
    """
    raw, source = _read_json(data, "detections")
    if not isinstance(raw, list) or not all(isinstance(r, Mapping) for r in raw):
        raise _fail(source, "top level", "expected a list of detection objects")
    n = len(raw)
    from_box = n > 0 and isinstance(raw[0].get("bbox"), list) and len(raw[0]["bbox"]) > 0
    image_of = _integers(source, [r.get("image_id") for r in raw], "", "image_id")
    category_of = _integers(source, [r.get("category_id") for r in raw], "", "category_id")
    scores = _floats(source, [r.get("score") for r in raw], "", "score")
    boxes = _detection_boxes(source, raw, from_box)
    segmentations = _detection_segmentations(source, raw, boxes, from_box)
    image_index = _index_of(source, "", gt.image_ids, image_of, "image_id")
    category_index = _index_of(source, "", gt.category_ids, category_of, "category_id")
    area = boxes[:, 2] * boxes[:, 3] if from_box else np.full(n, np.nan)
    return CocoDetections(
        source=source,
        image=image_index,
        category=category_index,
        score=scores,
        bbox=boxes,
        area=area,
        area_from_box=bool(from_box),
        segmentation=segmentations,
    )


def _detection_boxes(source: str, raw: Sequence[Mapping[str, Any]], from_box: bool) -> np.ndarray:
    """The ``bbox`` of every result, NaN rows for results without one (all need one when the
    first has one)."""
    n = len(raw)
    given = [r.get("bbox") for r in raw]
    has_box = np.array([b is not None and b != [] for b in given], bool).reshape(n)
    if from_box and not has_box.all():
        i = int(np.flatnonzero(~has_box)[0])
        raise _fail(
            source,
            f"[{i}]",
            "has no bbox, but the first result has one (COCO reads "
            "all results as box results then)",
        )
    boxes = np.full((n, 4), np.nan)
    if has_box.any():
        positions = np.flatnonzero(has_box)  # named by the result's id, its 1-based position
        kept = [given[i] for i in positions]
        boxes[has_box] = _boxes(source, kept, "results", positions + 1)
    return boxes


def _detection_segmentations(
    source: str, raw: Sequence[Mapping[str, Any]], boxes: np.ndarray, from_box: bool
) -> list[Any]:
    """The ``segmentation`` of every result; for box results without one, the box as a polygon
    (COCO's ``loadRes``)."""
    segmentations: list[Any] = []
    for i, result in enumerate(raw):
        if "segmentation" in result:
            segmentations.append(result["segmentation"])
        elif from_box:  # loadRes: the box as a polygon
            x, y, w, h = boxes[i]
            segmentations.append([[x, y, x, y + h, x + w, y + h, x + w, y]])
        else:
            raise _fail(source, f"[{i}]", "needs a bbox or a segmentation")
    return segmentations
