"""``metricalc pose eval | make-dataset``: two-view relative pose AUC and mAA.

Building the parser must not import :mod:`metricalc.benchmarks.twoview.estimation` (OpenCV), so the
estimator
names, the focal conventions and the defaults are spelled here;
``tests/benchmarks/twoview/test_pose_cli.py``
checks that they agree with the library.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ESTIMATORS = ("ransac", "magsac")
"""``metricalc.benchmarks.twoview.estimation.ESTIMATORS``."""
FOCAL_CONVENTIONS = ("gluefactory", "superglue")
"""``metricalc.benchmarks.twoview.estimation.FOCAL_CONVENTIONS``."""
MAX_KEYPOINTS = 2000
"""``metricalc.keypoints.extraction.MAX_KEYPOINTS``."""
DEFAULTS = {"threshold": 1.0, "confidence": 0.99999, "max_iters": 1000, "seed": 0}
"""The defaults of ``metricalc.benchmarks.twoview.estimation.PoseSettings``."""


def add_pose(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc pose eval ...`` and ``metricalc pose make-dataset ...``."""
    pose = verbs.add_parser("pose", help="two-view relative pose: AUC at 5/10/20 degrees, mAA")
    kinds = pose.add_subparsers(dest="pose_verb", metavar="VERB", required=True)
    evaluate = kinds.add_parser(
        "eval",
        help="pose errors of image pairs with known intrinsics and poses, and their summary",
        description=(
            "Match every pair of a pair list (MegaDepth-1500 / Glue Factory / SuperGlue format) "
            "by mutual nearest neighbours, estimate the relative pose with OpenCV's essential "
            "matrix (RANSAC or MAGSAC, then the cheirality test) and report SuperGlue's pose AUC "
            "at 5 / 10 / 20 degrees and the Image Matching Challenge's mAA at 10 degrees."
        ),
    )
    evaluate.add_argument("--pairs", type=Path, required=True, metavar="FILE", help="pair list")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--images", type=Path, metavar="DIR",
                        help="the images, named as in the pair list (built-in methods)")
    source.add_argument("--features", type=Path, metavar="DIR",
                        help="your own features: DIR/<method>/<image name>.npz (keypoints, "
                        "descriptors)")
    evaluate.add_argument("--method", action="append", required=True, metavar="NAME",
                          help="a built-in method (sift, orb, ...) or a feature subfolder; "
                          "repeat for several")
    evaluate.add_argument("--estimator", choices=ESTIMATORS, default="ransac",
                          help="cv2.findEssentialMat's RANSAC or USAC_MAGSAC")
    evaluate.add_argument("--threshold", type=float, default=DEFAULTS["threshold"], metavar="PX",
                          help="inlier threshold in pixels (divided by the mean focal length)")
    evaluate.add_argument("--sweep", action="store_true",
                          help="Glue Factory's ransac_th -1: estimate at 0.5, 1.0, ..., 3.0 px and "
                          "report each method at the threshold with the best mean AUC (rounded "
                          "to 4 decimals, as Glue Factory); replaces --threshold")
    evaluate.add_argument("--confidence", type=float, default=DEFAULTS["confidence"])
    evaluate.add_argument("--max-iters", type=int, default=DEFAULTS["max_iters"])
    evaluate.add_argument("--seed", type=int, default=DEFAULTS["seed"],
                          help="run of the estimator: 0 keeps the matches' order (the "
                          "references' run), another seed permutes them (OpenCV's RANSAC and "
                          "MAGSAC ignore cv2.setRNGSeed)")
    evaluate.add_argument("--seeds", type=int, metavar="N",
                          help="run the estimator with the N seeds SEED, SEED+1, ...: the table "
                          "shows the mean over seeds, and a second table how much of each method "
                          "difference is estimator noise (SD over seeds) and how much sampling "
                          "noise (bootstrap SE over scenes or pairs); not with --sweep")
    evaluate.add_argument("--focal", choices=FOCAL_CONVENTIONS, default="gluefactory",
                          help="whose mean focal length normalises the threshold")
    evaluate.add_argument("--max-keypoints", type=int, default=MAX_KEYPOINTS,
                          help="keypoints per image of a built-in method")
    evaluate.add_argument("--ratio", type=float, help="Lowe's ratio test on top of mutual NN")
    evaluate.add_argument("--out", type=Path, metavar="FILE",
                          help="write the per-pair results (netCDF, descriptor x pair, with each "
                          "pair's scene; x seed with --seeds): `metricalc compare FILE` "
                          "compares the methods")
    evaluate.add_argument("--json", action="store_true",
                          help="print descriptor -> {auc@5, auc@10, auc@20, mAA@10, ...}")
    evaluate.set_defaults(run=_eval)
    make = kinds.add_parser(
        "make-dataset",
        help="write the synthetic two-view benchmark (rendered planes, exact poses)",
    )
    make.add_argument("root", type=Path, metavar="DIR", help="folder to write")
    make.add_argument("--n-pairs", type=int, default=8, help="number of image pairs")
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(run=_make_dataset)


def _eval(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.twoview.estimation import PoseSettings
    from metricalc.benchmarks.twoview.evaluate import (
        SWEEP_THRESHOLDS,
        builtin_source,
        evaluate_pairs,
        npz_source,
        summarize,
    )
    from metricalc.benchmarks.twoview.pairs import read_pairs
    from metricalc.errors import InvalidInputError
    from metricalc.fileio import json_safe, temporary_path

    settings = PoseSettings(estimator=args.estimator, threshold=args.threshold,
                            confidence=args.confidence, max_iters=args.max_iters,
                            seed=args.seed, focal=args.focal)
    pairs = read_pairs(args.pairs)
    source = (builtin_source(args.images, max_keypoints=args.max_keypoints)
              if args.images is not None else npz_source(args.features))
    sweep = SWEEP_THRESHOLDS if args.sweep else None
    if args.seeds is not None and args.seeds < 2:
        raise InvalidInputError(f"--seeds {args.seeds}; expected 2 or more seeds (a spread)")
    seeds = None if args.seeds is None else range(args.seed, args.seed + args.seeds)
    results = evaluate_pairs(pairs, source, args.method, settings=settings, ratio=args.ratio,
                             thresholds=sweep, seeds=seeds)
    if args.out is not None:
        with temporary_path(args.out) as path:
            results.to_netcdf(path, engine="h5netcdf")
    summary = summarize(results)
    table = {
        str(name): {key: json_safe(summary[key].sel(descriptor=name).item())
                    for key in summary.data_vars}
        for name in summary["descriptor"].values
    }
    noise = _seed_noise(results) if seeds is not None else None
    if args.json:
        output = {"summary": table, "settings": json_safe(dict(summary.attrs))}
        if noise is not None:
            output["seed_noise"] = json_safe(
                noise.to_dataframe().reset_index().to_dict(orient="records")
            )
        print(json.dumps(output, indent=2))
        return 0
    keys = list(summary.data_vars)
    formats = {k: column_format(summary[k]) for k in keys}
    print("descriptor  " + "  ".join(f"{k:>8}" for k in keys))
    for name, row in table.items():
        print(f"{name:<10}  " + "  ".join(_cell(row[k], formats[k]) for k in keys))
    settings_text = ", ".join(f"{k}={v}" for k, v in summary.attrs.items()
                              if k.startswith("pose_"))
    print(f"{len(pairs)} pairs; {settings_text}"
          + ("" if seeds is None else f"; mean over seeds {seeds.start}..{seeds.stop - 1}"))
    if noise is not None:
        _print_noise(noise)
    return 0


POSE_DECIMALS = 4
"""Decimals of the AUC and mAA columns (fractions), as Glue Factory rounds its AUCs."""


def column_format(values: Any) -> str:
    """One format per column of the summary: counts (``failures``, ``n_pairs``) as integers,
    the RANSAC ``threshold`` (pixels) with two decimals, AUC and mAA with
    :data:`POSE_DECIMALS`, so that "0.625" and "0.9125" do not share a column."""
    import numpy as np

    if np.issubdtype(values.dtype, np.integer):
        return "d"
    return ".2f" if values.name == "threshold" else f".{POSE_DECIMALS}f"


def _cell(value: Any, spec: str) -> str:
    return f"{'-':>8}" if value is None else f"{value:>8{spec}}"


def _seed_noise(results: Any) -> Any:
    """The estimator / sampling noise of every method difference (None for one method)."""
    from metricalc.benchmarks.twoview.statistic import seed_noise

    return seed_noise(results) if results.sizes["descriptor"] > 1 else None


def _print_noise(noise: Any) -> None:
    """One row per method pair and column: difference, SD over seeds, bootstrap SE, share."""
    scenes = noise.attrs["n_clusters"] < noise.attrs["n_pairs"]
    unit = "scenes; pairs without a scene alone" if scenes else "image pairs"
    print(f"\nestimator vs sampling noise: {noise.attrs['n_seeds']} seeds, bootstrap over "
          f"{noise.attrs['n_clusters']} {unit}")
    print(f"{'methods':<21} {'column':>7} {'diff':>8} {'SD seeds':>9} {'SE boot':>8} "
          f"{'seed share':>10}")
    frame = noise.to_dataframe()
    for (descriptor, baseline, column), row in frame.iterrows():
        print(f"{f'{descriptor} - {baseline}':<21} {column:>7} {row['difference']:>+8.4f} "
              f"{row['sd_seed']:>9.4f} {row['se_bootstrap']:>8.4f} {row['share_seed']:>10.2f}")


def _make_dataset(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.twoview.generator import make_twoview_dataset

    path = make_twoview_dataset(args.root, n_pairs=args.n_pairs, seed=args.seed)
    print(f"wrote {path} and {args.root / 'images'}")
    return 0


def pose_results_file(paths: list[Path]) -> Path | None:
    """The pose results file of ``metricalc compare PATH`` (``pose eval --out``: a variable
    ``pose_error``), None for cubes; a pose file among several files is an error."""
    import h5py

    from metricalc.errors import InvalidInputError

    kinds = []
    for path in paths:
        try:
            with h5py.File(path, "r") as handle:
                kinds.append("pose_error" in handle)
        except (OSError, ValueError, KeyError, RuntimeError):
            kinds.append(False)  # not HDF5: the cube reader says why
    if not any(kinds):
        return None
    if len(paths) > 1:
        pose = paths[kinds.index(True)]
        raise InvalidInputError(
            f"{pose}: pose results (pose eval --out) are compared alone, their methods against "
            "each other; evaluate every method in one `pose eval` call (repeat --method)"
        )
    return paths[0]


def compare_pose_file(args: argparse.Namespace, path: Path) -> int:
    """``metricalc compare POSE.nc``: every pair of methods on each column of the pose table
    (or ``--metric auc@10`` alone), paired cluster bootstrap and within-cluster swap test."""
    import xarray as xr

    from metricalc.benchmarks.twoview.statistic import COLUMNS, compare_pose
    from metricalc.commands.records import print_columns, refuse_cube_options, statistic_options
    from metricalc.errors import InvalidInputError

    if args.labels is not None:
        raise InvalidInputError(
            f"--labels does not apply to pose results ({path}): their methods keep their names"
        )
    refuse_cube_options(args, f"pose results ({path})")
    columns = COLUMNS if args.metric == "ap" else (args.metric,)
    if columns[0] not in COLUMNS:
        raise InvalidInputError(
            f"--metric {args.metric}: a pose results file has the columns {', '.join(COLUMNS)}"
        )
    with xr.open_dataset(path, engine="h5netcdf") as opened:
        results = opened.load()
    pair_by = args.pair_by or "scene"
    compared = compare_pose(
        results, columns=columns, pair_by=pair_by, **statistic_options(args)
    )
    scenes = pair_by == "scene" and "scene" in results.coords and bool(
        (results["scene"] != "").any())
    unit = "scenes (pairs without a scene alone)" if scenes else "image pairs"
    print_columns(compared, json_output=args.json, title=str(path), unit=unit)
    return 0
