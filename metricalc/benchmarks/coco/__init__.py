"""COCO-style evaluation of detections and instance masks, written without pycocotools.

Reads COCO JSON (ground truth and results; boxes, polygons, compressed and uncompressed RLE),
computes box and mask IoU, COCO's one-to-one greedy matching and the precision cube
``[iou, recall, category, area, maxdets]`` with the 12 standard stats, equal to
``pycocotools.cocoeval.COCOeval`` (which the tests use as the reference); per-image records
and the stats of any multiset of images (:mod:`metricalc.benchmarks.coco.resampled`), for the
image bootstrap and swap test of ``metricalc compare --coco-gt``.
"""

from metricalc.benchmarks.coco.evaluate import (
    COCO_AREA_RANGES,
    COCO_IOU_THRESHOLDS,
    COCO_MAX_DETS,
    COCO_RECALL_LEVELS,
    COCO_STATS,
    Prepared,
    coco_stats,
    evaluate,
    prepare,
)
from metricalc.benchmarks.coco.files import (
    CocoDetections,
    CocoGroundTruth,
    load_detections,
    load_ground_truth,
)
from metricalc.benchmarks.coco.resampled import (
    COCO_SUMMARY,
    ImageRecords,
    image_records,
    weighted_summary,
)

__all__ = [
    "COCO_AREA_RANGES",
    "COCO_IOU_THRESHOLDS",
    "COCO_MAX_DETS",
    "COCO_RECALL_LEVELS",
    "COCO_STATS",
    "COCO_SUMMARY",
    "CocoDetections",
    "CocoGroundTruth",
    "ImageRecords",
    "Prepared",
    "coco_stats",
    "evaluate",
    "image_records",
    "load_detections",
    "load_ground_truth",
    "prepare",
    "weighted_summary",
]
