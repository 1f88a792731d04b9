r"""COCO detection stats as statistics of images: paired comparisons of detectors.

A COCO table cell (AP@[.50:.95], AP50, ..., AR100) is a statistic of the **images**: the
independent unit of a COCO evaluation (docs/stats.md). Every detector is evaluated on the same
ground truth, so the comparison is paired image by image. The interval and the test are of the
cell's own number, recomputed from per-image records
(:mod:`metricalc.benchmarks.coco.resampled`):

- a bootstrap resample counts image :math:`i` :math:`w_i` times, the same images for both
  detectors, and the stat is COCOeval's on that data set (each category's detections pooled
  over the images and sorted by score, 101-point interpolated precision, categories without
  ground truth left out);
- the randomization test exchanges the two detectors' detections on a random set of images
  and recomputes both stats.

:class:`CocoStatistic` implements :class:`metricalc.stats.statistics.ClusteredStatistic` with
one image per cluster; :func:`compare_coco` runs every comparison through
:func:`metricalc.stats.compare.compare_statistic`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from metricalc.benchmarks.coco.resampled import (
    COCO_SUMMARY,
    ImageRecords,
    image_summary,
    swapped_summaries,
    weighted_summary,
)
from metricalc.errors import InvalidInputError
from metricalc.stats.compare import compare_statistic
from metricalc.validation import check_choice

__all__ = ["COLUMNS", "CocoStatistic", "coco_statistic", "compare_coco"]

COLUMNS: tuple[str, ...] = COCO_SUMMARY
"""The COCO stats a comparison can be about (``COCOeval.stats`` without AR1 and AR10)."""

_PHRASES = {
    "AP": "COCO AP@[.50:.95] of the images",
    "AP50": "COCO AP at IoU 0.50 of the images",
    "AP75": "COCO AP at IoU 0.75 of the images",
    "APs": "COCO AP@[.50:.95] of small objects of the images",
    "APm": "COCO AP@[.50:.95] of medium objects of the images",
    "APl": "COCO AP@[.50:.95] of large objects of the images",
    "AR100": "COCO AR@100 of the images",
    "ARs": "COCO AR@100 of small objects of the images",
    "ARm": "COCO AR@100 of medium objects of the images",
    "ARl": "COCO AR@100 of large objects of the images",
}


@dataclass
class CocoStatistic:
    """One COCO stat of several detectors on one ground truth; the clusters are the images.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.generator import make_coco_dataset
    >>> from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
    >>> from metricalc.benchmarks.coco.resampled import image_records
    >>> gt_json, results = make_coco_dataset(n_images=6, seed=0)
    >>> gt = load_ground_truth(gt_json)
    >>> dt = load_detections(results, gt)
    >>> stat = coco_statistic({"a": image_records(gt, dt)}, "AP")
    >>> ap = stat.weighted(0, np.ones((1, 6)))[0]
    >>> bool(abs(ap - evaluate(gt, dt).stats.sel(metric="AP").item()) < 1e-15)
    True
    """

    name: str
    phrase: str
    systems: list[str]
    clusters: np.ndarray
    records: list[ImageRecords]
    column: int

    def present(self) -> np.ndarray:
        """Every detector has every image (no detections on an image is a result too)."""
        return np.ones((len(self.systems), len(self.clusters)), dtype=bool)

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        out: np.ndarray = weighted_summary(self.records[system], weights)[:, self.column]
        return out

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        a, b = swapped_summaries(self.records[first], self.records[second], swap, keep)
        out: np.ndarray = a[:, self.column] - b[:, self.column]
        return out

    def cluster_values(self) -> np.ndarray:
        return np.stack([image_summary(r)[:, self.column] for r in self.records])


def coco_statistic(records: Mapping[str, ImageRecords], column: str = "AP") -> CocoStatistic:
    """The statistic of one column over detectors evaluated on the same ground truth.

    Raises
    ------
    InvalidInputError
        Unknown column; records of different images, categories or ground truth; ground truth
        without an annotation that counts.
    """
    check_choice("column", column, COLUMNS)
    names = list(records)
    if not names:
        raise InvalidInputError("no detectors to compare; give at least two result files")
    first = records[names[0]]
    for name in names[1:]:
        other = records[name]
        same = (
            np.array_equal(other.image_ids, first.image_ids)
            and np.array_equal(other.category_ids, first.category_ids)
            and np.array_equal(other.gt_counts, first.gt_counts)
            and other.iou_type == first.iou_type
        )
        if not same:
            raise InvalidInputError(
                f"{other.source}: evaluated on other images, categories or ground truth than "
                f"{first.source} ({other.image_ids.size} vs {first.image_ids.size} images, "
                f"iou_type {other.iou_type} vs {first.iou_type}); a paired comparison needs one "
                "ground truth for all detectors"
            )
    if not first.gt_counts[0].any():
        raise InvalidInputError(
            "the ground truth has no annotation that counts (every one is a crowd region, or "
            "there are none): COCO's AP and AR are undefined"
        )
    return CocoStatistic(
        column,
        _PHRASES[column] + (" (masks)" if first.iou_type == "segm" else ""),
        names,
        first.image_ids.astype(str),
        [records[name] for name in names],
        COLUMNS.index(column),
    )


def compare_coco(
    records: Mapping[str, ImageRecords],
    *,
    column: str = "AP",
    **options: Any,
) -> xr.Dataset:
    """Every pair of detectors (or every one against ``baseline``) on one COCO stat: the
    difference of the stat, its paired image-bootstrap interval and the randomization p-value
    of swapping the detectors' detections within images, Holm-corrected (``correction``) over
    the comparisons of the call.

    Parameters
    ----------
    records : mapping of str -> ImageRecords
        Detector name -> :func:`metricalc.benchmarks.coco.resampled.image_records` of its results on
        one ground truth.
    column : str
        One of :data:`COLUMNS` (default ``"AP"``, AP@[.50:.95]).
    **options
        The keywords of :func:`metricalc.stats.compare.compare_statistic`: ``baseline``,
        ``correction``, ``alpha``, ``seed``, ``n_resamples``, ``confidence_level``.

    Returns
    -------
    xarray.Dataset
        The variables of :func:`metricalc.stats.compare.compare_statistic` over
        ``comparison`` (``pair_by`` is ``"image"``).

    Examples
    --------
    >>> from metricalc.benchmarks.coco.generator import make_coco_dataset
    >>> from metricalc.benchmarks.coco import load_detections, load_ground_truth
    >>> from metricalc.benchmarks.coco.resampled import image_records
    >>> gt_json, good = make_coco_dataset(n_images=12, seed=3)
    >>> _, poor = make_coco_dataset(n_images=12, seed=3, wrong_class_rate=0.6)
    >>> gt = load_ground_truth(gt_json)
    >>> runs = {name: image_records(gt, load_detections(r, gt))
    ...         for name, r in (("good", good), ("poor", poor))}
    >>> result = compare_coco(runs, n_resamples=200)
    >>> int(result.n[0]), bool(result.mean_diff[0] > 0)
    (12, True)
    """
    statistic = coco_statistic(records, column)
    if len(statistic.systems) < 2:
        raise InvalidInputError(
            f"one detector ({statistic.systems[0]}); a comparison needs two or more result files"
        )
    first = statistic.records[0]
    return compare_statistic(
        statistic,
        pair_by="image",
        attrs={"iou_type": first.iou_type, "n_images": int(first.image_ids.size)},
        **options,
    )
