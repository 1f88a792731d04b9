"""``metricalc compare --coco-gt GT.json A.json B.json ...``: detectors compared on a COCO stat,
image by image (the paired image bootstrap and the within-image swap test of the stat itself).

Building the parser must not import :mod:`metricalc.stats` or :mod:`metricalc.benchmarks.coco`, so
the
columns are spelled here; ``tests/benchmarks/coco/test_stats_coco.py`` checks that they agree with
:data:`metricalc.benchmarks.coco.statistic.COLUMNS`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from metricalc.commands.args import names
from metricalc.errors import InvalidInputError

COCO_COLUMNS = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR100", "ARs", "ARm", "ARl")
"""``metricalc.benchmarks.coco.statistic.COLUMNS``."""
COCO_DECIMALS = 4
"""Decimals of the COCO stats in the table (fractions, as ``COCOeval.summarize`` prints them)."""


def coco_column(metric: str) -> str:
    """The COCO stat ``--metric`` names: ``ap`` (the default) is ``AP``; case does not matter.

    Examples
    --------
    >>> coco_column("ap"), coco_column("ap50"), coco_column("ARs")
    ('AP', 'AP50', 'ARs')
    """
    found = [c for c in COCO_COLUMNS if c.lower() == metric.strip().lower()]
    if not found:
        raise InvalidInputError(
            f"--metric {metric}: COCO results compare on one of {', '.join(COCO_COLUMNS)}"
        )
    return found[0]


def compare_coco_files(args: argparse.Namespace) -> int:
    """Evaluate every results file on ``--coco-gt`` and compare the detectors on one stat
    (JSON files without ``--coco-gt``: an error that names the option)."""
    from metricalc.benchmarks.coco import load_detections, load_ground_truth
    from metricalc.benchmarks.coco.resampled import image_records
    from metricalc.benchmarks.coco.statistic import compare_coco
    from metricalc.commands.records import print_json_rows, refuse_cube_options, statistic_options
    from metricalc.plotting.terminal import print_comparisons

    if args.coco_gt is None:
        raise InvalidInputError(
            f"{args.cubes[0]}: JSON files are compared as COCO results files; name their ground "
            "truth with --coco-gt GT.json"
        )
    if args.pair_by is not None:
        raise InvalidInputError(
            f"--pair-by {args.pair_by}: COCO results pair by image, the unit of a COCO evaluation"
        )
    refuse_cube_options(args, "COCO results")
    column = coco_column(args.metric)
    paths: list[Path] = args.cubes
    labels = names(args.labels) if args.labels else [path.stem for path in paths]
    if len(labels) != len(paths):
        raise InvalidInputError(
            f"--labels gives {len(labels)} labels for {len(paths)} results files; give one each"
        )
    if len(set(labels)) != len(labels):
        raise InvalidInputError(f"the detector labels must differ; got {labels} (use --labels)")
    if len(paths) < 2:
        raise InvalidInputError(
            f"one results file ({paths[0]}); --coco-gt compares two or more detectors"
        )
    gt = load_ground_truth(args.coco_gt)
    records = {
        label: image_records(gt, load_detections(path, gt), iou_type=args.iou_type)
        for label, path in zip(labels, paths, strict=True)
    }
    result = compare_coco(records, column=column, **statistic_options(args))
    if args.json:
        print_json_rows(result)
        return 0
    print_comparisons(
        result,
        title=f"{args.coco_gt} ({args.iou_type}): {column}",
        unit="images",
        systems="detector",
        decimals=COCO_DECIMALS,
    )
    return 0
