"""``metricalc compare`` on per-image-pair records: the homography columns of ``metricalc run
hpatches`` runs (``--metric homography``) and the MMA of keypoint cubes (``--metric mma@3``),
compared per image pair clustered by scene."""

from __future__ import annotations

import argparse
from pathlib import Path

from metricalc.errors import InvalidInputError

__all__ = [
    "HOMOGRAPHY_METRIC",
    "compare_homography_runs",
    "compare_mma_cubes",
    "is_homography_request",
]

HOMOGRAPHY_METRIC = "homography"
"""``--metric homography``: every homography column of the runs."""


def is_homography_request(metric: str) -> bool:
    """Whether ``--metric`` names the homography columns (all, or one such as
    ``H_error_ransac@3px``)."""
    from metricalc.benchmarks.homography.statistic import COLUMNS

    return metric == HOMOGRAPHY_METRIC or metric in COLUMNS


def _results_file(path: Path) -> Path:
    """A run's ``results.h5``: the path itself, or the file inside a run folder."""
    found = path / "results.h5" if path.is_dir() else path
    if not found.is_file():
        raise InvalidInputError(
            f"{path}: not a run of `metricalc run hpatches` (expected its folder or its "
            "results.h5)"
        )
    return found


def compare_homography_runs(args: argparse.Namespace) -> int:
    """Every pair of runs (or each against ``--baseline``) on each homography column (or the
    one ``--metric`` names): difference, paired cluster-bootstrap CI, swap test, Holm."""
    from metricalc.benchmarks.homography.statistic import (
        COLUMNS,
        compare_homography,
        homography_records,
    )
    from metricalc.commands.records import print_columns, refuse_cube_options, statistic_options
    from metricalc.experiment.results import open_pairs

    refuse_cube_options(args, "homography runs")
    files = [_results_file(path) for path in args.cubes]
    pairs = [open_pairs(path) for path in files]
    labels = args.labels.split(",") if args.labels else [
        str(p.attrs.get("tag") or path.parent.name) for p, path in zip(pairs, files, strict=True)
    ]  # fmt: skip
    if len(labels) != len(files) or len(set(labels)) != len(labels):
        raise InvalidInputError(
            f"the runs need one distinct label each; got {labels} for {len(files)} runs "
            "(use --labels)"
        )
    records = homography_records(dict(zip(labels, pairs, strict=True)))
    columns = COLUMNS if args.metric == HOMOGRAPHY_METRIC else (args.metric,)
    pair_by = args.pair_by or "scene"
    compared = compare_homography(
        records, columns=columns, pair_by=pair_by, **statistic_options(args)
    )
    unit = "scenes (sequences)" if pair_by == "scene" else "image pairs"
    print_columns(compared, json_output=args.json, title=", ".join(labels), unit=unit,
                  systems="run")  # fmt: skip
    dropped = records.attrs["n_pairs_dropped"]
    if dropped and not args.json:
        print(f"left out: {dropped} image pairs that not every run has", flush=True)
    return 0


def compare_mma_cubes(args: argparse.Namespace, threshold: float) -> int:
    """``metricalc compare CUBE ... --metric mma@T``: D2-Net's MMA at T px of every system,
    compared over image pairs clustered by scene
    (:func:`metricalc.benchmarks.hpatches_sequences.mma_statistic.compare_mma`)."""
    from metricalc import cube as cubes
    from metricalc.benchmarks.hpatches_sequences.mma_statistic import compare_mma
    from metricalc.commands.records import print_columns, refuse_cube_options, statistic_options

    refuse_cube_options(args, "the MMA (a mean over image pairs)")
    labels = args.labels.split(",") if args.labels else [path.stem for path in args.cubes]
    if len(labels) != len(args.cubes) or len(set(labels)) != len(labels):
        raise InvalidInputError(
            f"the cubes need one distinct label each; got {labels} for {len(args.cubes)} cubes "
            "(use --labels)"
        )
    opened = {label: cubes.open_cube(path) for label, path in zip(labels, args.cubes, strict=True)}
    pair_by = args.pair_by or "scene"
    compared = compare_mma(opened, threshold, pair_by=pair_by, **statistic_options(args))
    print_columns({f"mma@{threshold:g}": compared}, json_output=args.json,
                  title=", ".join(map(str, args.cubes)),
                  unit="scenes (sequences)" if pair_by == "scene" else "image pairs")  # fmt: skip
    return 0
