"""``metricalc decompose detection | keypoints`` (metric decomposition)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from metricalc.commands.args import passed, thresholds
from metricalc.core.ranking import AP_METHODS


def add_decompose(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc decompose detection`` (COCO files) and ``decompose keypoints`` (a cube)."""
    decompose = verbs.add_parser(
        "decompose", help="metric decomposition: factor curves, identity check, what-if"
    )
    decompose_verbs = decompose.add_subparsers(dest="decompose_verb", metavar="VERB", required=True)
    dd = decompose_verbs.add_parser("detection", help="COCO detection / instance segmentation")
    dd.add_argument("--gt", type=Path, required=True, help="COCO ground-truth JSON")
    dd.add_argument("--dt", type=Path, required=True, help="COCO results JSON (a list)")
    dd.add_argument("--iou-type", choices=("bbox", "segm"), default="bbox")
    dd.add_argument("--convention", choices=("coco", "decompovision"), default="coco",
                    help="coco: one-to-one greedy matching, IoU >= t (default); decompovision: "
                    "no one-to-one matching, IoU > t")
    dd.add_argument("--iou", type=thresholds, help="IoU thresholds, e.g. 0.5,0.75 (default "
                    "0.50:0.95 for coco, 0.5 for decompovision)")
    dd.add_argument("--mask-iou", type=float, help="mask IoU threshold of S|C,L (segm)")
    dd.add_argument("--ap-method", choices=AP_METHODS, default="coco101")
    dd.add_argument("--json", action="store_true", help="print JSON (stats + decomposition)")
    dd.add_argument("--out", type=Path, help="folder for decomposition.json and the figures")
    dd.add_argument("--no-progress", action="store_true", help="no progress bars")
    dd.set_defaults(run=_decompose_detection)
    dk = decompose_verbs.add_parser("keypoints", help="keypoint matching: detector or descriptor?")
    dk.add_argument("cube", type=Path, help="a QueryCube (.nc)")
    dk.add_argument("--confidence", choices=("ratio", "distance"), default="ratio",
                    help="confidence of a match, which orders the matching AP's curve: -ratio "
                    "test value (default, as the report) or -NN distance")
    dk.add_argument("--ap-method", choices=AP_METHODS, default="coco101")
    dk.add_argument("--json", action="store_true", help="print JSON")
    dk.add_argument("--out", type=Path, help="folder for decomposition.json and the figures")
    dk.set_defaults(run=_decompose_keypoints)


def _show(args: argparse.Namespace, result: Any, printer: Any, writer: Any) -> None:
    """Print a decomposition (``--json``: its ``to_dict()``) and write ``--out`` if given."""
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        printer(result)
    if args.out:
        written = writer(result, args.out)
        stream = sys.stderr if args.json else sys.stdout
        print(f"wrote {len(written)} files to {args.out}", file=stream)


def _decompose_detection(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.coco import load_detections, load_ground_truth
    from metricalc.benchmarks.coco.decompose import decompose_detection
    from metricalc.decompose.terminal import print_detection, write_detection

    gt = load_ground_truth(args.gt)
    dt = load_detections(args.dt, gt)
    result = decompose_detection(
        gt,
        dt,
        **passed(args, "iou_type", "convention"),
        iou_thresholds=args.iou,
        mask_iou_threshold=args.mask_iou,
        method=args.ap_method,
        progress=not (args.no_progress or args.json),
    )
    _show(args, result, print_detection, write_detection)
    return 0


def _decompose_keypoints(args: argparse.Namespace) -> int:
    from metricalc import cube as cubes
    from metricalc.decompose.keypoints import detector_or_descriptor
    from metricalc.decompose.terminal import print_keypoints, write_keypoints

    section = detector_or_descriptor(
        cubes.open_cube(args.cube), confidence=args.confidence, method=args.ap_method
    )
    _show(args, section, print_keypoints, write_keypoints)
    return 0
