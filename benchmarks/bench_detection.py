"""Speed of the COCO evaluation, as a ratio against pycocotools timed in the same run.

Run: ``python benchmarks/bench_detection.py`` (add ``--segm`` for masks, ``--quick`` for a
dataset a fifth of the size)

Generates one COCO dataset of realistic size with ``make_coco_dataset`` (500 images, 80
categories, about 3,400 objects and 20,000 detections, scores rounded to 3 decimals so that they
tie as in real result files), then times, on the same data:

- pycocotools: ``COCO`` index + ``loadRes`` + ``COCOeval.evaluate/accumulate/summarize``;
- metricalc: ``load_ground_truth`` + ``load_detections`` + ``evaluate`` (same stats, checked);
- metricalc's decomposition on top (``decompose_detection``: evaluation, L and C|L chains over
  10 IoU thresholds x 80 categories, factor APs, what-if table, identity check).

The matching loop of metricalc runs once per rank (at most 100 steps) for all (image, category)
groups together; pycocotools loops per image x category x area range x IoU threshold x
detection x ground truth in Python.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io

import numpy as np
from timing import best_time

from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
from metricalc.benchmarks.coco.decompose import decompose_detection
from metricalc.benchmarks.coco.generator import make_coco_dataset


def pycocotools_stats(gt: dict, dt: list, iou_type: str) -> np.ndarray:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(copy.deepcopy(dt)), iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev.stats


def metricalc_stats(gt: dict, dt: list, iou_type: str) -> np.ndarray:
    truth = load_ground_truth(gt)
    return evaluate(truth, load_detections(dt, truth), iou_type=iou_type).stats.values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segm", action="store_true", help="instance masks (polygons, RLE)")
    parser.add_argument("--quick", action="store_true", help="100 images instead of 500")
    args = parser.parse_args()
    iou_type = "segm" if args.segm else "bbox"
    gt, dt = make_coco_dataset(
        n_images=100 if args.quick else 500,
        n_categories=80,
        objects_per_image=7.0,
        detections_per_object=3.0,
        false_positives_per_image=20.0,
        segm=args.segm,
        score_decimals=3,
        seed=0,
    )
    truth = load_ground_truth(gt)
    detections = load_detections(dt, truth)
    metricalc_stats(gt, dt, iou_type)  # warm-up: first imports (xarray loads dask lazily)

    reference = best_time(lambda: pycocotools_stats(gt, dt, iou_type), repeat=1)
    ours = best_time(lambda: metricalc_stats(gt, dt, iou_type), repeat=3)
    decomposition = best_time(
        lambda: decompose_detection(truth, detections, iou_type=iou_type), repeat=2
    )
    expected = pycocotools_stats(gt, dt, iou_type)
    same = np.array_equal(
        np.where(expected == -1, np.nan, expected),
        metricalc_stats(gt, dt, iou_type),
        equal_nan=True,
    )
    size = (
        f"{len(gt['images'])} images, 80 categories, {len(gt['annotations']):,} objects, "
        f"{len(dt):,} detections"
    )
    print(f"COCO {iou_type} evaluation: {size}")
    print(f"{'measure':<44} {'time':>9}   {'reference':<26} {'ratio':>7}")
    print("-" * 92)
    print(
        f"{'metricalc load + evaluate':<44} {ours:>7.2f} s   "
        f"{f'pycocotools {reference:.2f} s':<26} {ours / reference:>6.3f}x"
    )
    print(
        f"{'metricalc decompose_detection (10 IoU x 80)':<44} {decomposition:>7.2f} s   "
        f"{f'pycocotools {reference:.2f} s':<26} {decomposition / reference:>6.3f}x"
    )
    print(f"  stats equal to pycocotools' COCOeval.stats: {same}")


if __name__ == "__main__":
    main()
