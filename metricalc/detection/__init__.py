"""COCO-style evaluation of detections and instance masks, written without pycocotools.

Reads COCO JSON (ground truth and results; boxes, polygons, compressed and uncompressed RLE),
computes box and mask IoU, COCO's one-to-one greedy matching and the precision cube
``[iou, recall, category, area, maxdets]`` with the 12 standard stats, equal to
``pycocotools.cocoeval.COCOeval`` (which the tests use as the reference).
"""

from metricalc.detection.coco import (
    CocoDetections,
    CocoGroundTruth,
    load_detections,
    load_ground_truth,
)
from metricalc.detection.evaluate import (
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

__all__ = [
    "COCO_AREA_RANGES",
    "COCO_IOU_THRESHOLDS",
    "COCO_MAX_DETS",
    "COCO_RECALL_LEVELS",
    "COCO_STATS",
    "CocoDetections",
    "CocoGroundTruth",
    "Prepared",
    "coco_stats",
    "evaluate",
    "load_detections",
    "load_ground_truth",
    "prepare",
]
