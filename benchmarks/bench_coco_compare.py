"""COCO stats of bootstrap resamples of images: all resamples at once against one evaluation per
resample.

Run: ``python benchmarks/bench_coco_compare.py [--images 500] [--resamples 200] [--loop 3]``

One generated COCO dataset of ``bench_detection.py``'s shape (80 categories, about 40
detections per image, scores rounded to 3 decimals so that they tie) and ``--resamples``
multinomial image weights. Timed, per resample:

- **vectorised**: :func:`metricalc.benchmarks.coco.resampled.weighted_summary` of every resample in
  one
  call, from the per-image records (what ``metricalc compare --coco-gt`` runs);
- **evaluate**: the obvious way with metricalc's own evaluator, the resampled data set written
  out (image :math:`i` copied :math:`w_i` times under new ids) and evaluated (``--loop``
  resamples);
- **pycocotools**: the same data sets through ``COCOeval`` (``--loop`` resamples), whose stats
  the vectorised ones must equal (largest difference printed).

Then the swap test's cost per pattern (two detectors' detections exchanged on random images).
"""

from __future__ import annotations

import contextlib
import copy
import io
import time

import numpy as np
from timing import best_time, integer_options

from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
from metricalc.benchmarks.coco.generator import make_coco_dataset, repeat_images
from metricalc.benchmarks.coco.resampled import image_records, swapped_summaries, weighted_summary

STATS = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]
"""Positions of ``COCO_SUMMARY`` in ``COCOeval.stats``."""


def pycocotools_stats(gt: dict, dt: list) -> np.ndarray:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(copy.deepcopy(dt)), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = np.asarray(ev.stats)[STATS]
    return np.where(stats == -1, np.nan, stats)


def evaluate_stats(gt: dict, dt: list) -> np.ndarray:
    truth = load_ground_truth(gt)
    return np.asarray(evaluate(truth, load_detections(dt, truth)).stats.values)[STATS]


def main(argv: list[str] | None = None) -> int:
    options = integer_options(__doc__ or "", argv, images=500, resamples=200, loop=3)
    shape = {
        "n_images": options.images,
        "n_categories": 80,
        "objects_per_image": 7.0,
        "detections_per_object": 3.0,
        "false_positives_per_image": 20.0,
        "score_decimals": 3,
        "seed": 0,
    }
    gt, dt = make_coco_dataset(**shape)
    _, other = make_coco_dataset(**shape, wrong_class_rate=0.4)
    truth = load_ground_truth(gt)
    records = image_records(truth, load_detections(dt, truth))
    second = image_records(truth, load_detections(other, truth))
    n = options.images
    rng = np.random.default_rng(0)
    weights = rng.multinomial(n, np.full(n, 1 / n), size=options.resamples).astype(np.float64)
    vectorised = best_time(lambda: weighted_summary(records, weights), repeat=2)
    ours = weighted_summary(records, weights[: options.loop])
    start = time.perf_counter()
    for w in weights[: options.loop]:
        evaluate_stats(*repeat_images(gt, dt, w))
    loop = (time.perf_counter() - start) / options.loop
    start = time.perf_counter()
    reference = np.stack(
        [pycocotools_stats(*repeat_images(gt, dt, w)) for w in weights[: options.loop]]
    )
    coco = (time.perf_counter() - start) / options.loop
    per_resample = vectorised / options.resamples
    print(f"{n} images, 80 categories, {len(gt['annotations']):,} objects, {len(dt):,} detections")
    print(f"{'per resample':<44} {'time':>10}   {'ratio to vectorised':>20}")
    print("-" * 80)
    for name, seconds in (
        (f"vectorised ({options.resamples} resamples at once)", per_resample),
        ("evaluate the resampled data set (metricalc)", loop),
        ("COCOeval of the resampled data set", coco),
    ):
        print(f"{name:<44} {seconds * 1000:>7.1f} ms   {seconds / per_resample:>19.1f}x")
    print(f"largest difference to COCOeval.stats: {np.nanmax(np.abs(ours - reference)):.1e}")
    swap = rng.random((options.resamples, n)) < 0.5
    swaps = best_time(lambda: swapped_summaries(records, second, swap, np.ones(n, bool)), repeat=1)
    print(f"swap test: {swaps / options.resamples * 1000:.1f} ms per pattern (both detectors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
