"""``metricalc compare A.verification.nc B.verification.nc`` (and its alias ``patches
hpatches-compare``), and ``metricalc compare --metric hpatches17_matching_map`` on matching
cubes: HPatches CVPR'17 columns compared over sequences (docs/hpatches17.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from metricalc.errors import InvalidInputError

VERIFICATION_DECIMALS = 4
"""Decimals of the verification AUCs and APs (fractions) in the comparison tables."""

MATCHING_METRIC = "hpatches17_matching_map"
"""The metric-set column of hpatches-benchmark's matching average (and its label)."""


def pair_cube_files(paths: list[Path]) -> bool:
    """Whether ``paths`` are verification pair cubes (``patches hpatches-eval --out``); a pair
    cube among other files is an error."""
    import h5py

    kinds: list[bool | None] = []
    for path in paths:
        if not path.is_file():
            kinds.append(None)  # the reader says it does not exist
            continue
        try:
            with h5py.File(path, "r") as handle:
                task = handle.attrs.get("task")
        except (OSError, ValueError, KeyError, RuntimeError):
            task = None  # not HDF5
        kinds.append(task in ("verification", b"verification"))
    if True in kinds and False in kinds:
        pair = paths[kinds.index(True)]
        raise InvalidInputError(
            f"{pair}: holds HPatches verification pairs, compared only with other pair cubes "
            "(PREFIX.verification.nc of patches hpatches-eval --out)"
        )
    return True in kinds


def _opened(paths: list[Path], labels: list[str] | None) -> Any:
    """The pair cubes of ``paths`` as one; descriptors named ``d (label)`` with labels, or by
    file where a name repeats."""
    from metricalc.benchmarks.hpatches_cvpr17.pairs import open_pair_cube
    from metricalc.benchmarks.hpatches_cvpr17.statistic import merge_pair_cubes

    cubes = [open_pair_cube(path) for path in paths]
    found = [str(n) for cube in cubes for n in cube["descriptor"].values]
    if labels is None and len(set(found)) < len(found):  # the same name in several files
        labels = [path.name for path in paths]
        if len(set(labels)) < len(labels):  # and the same file name in several folders
            labels = [str(path) for path in paths]
        if len(set(labels)) < len(labels):
            twice = next(str(p) for p in paths if labels.count(str(p)) > 1)
            raise InvalidInputError(f"{twice} is given twice; compare two different pair cubes")
    if labels is not None:
        cubes = [cube.assign_coords(descriptor=[f"{n} ({label})" for n in
                                                cube["descriptor"].values.astype(str)])
                 for cube, label in zip(cubes, labels, strict=True)]  # fmt: skip
    return merge_pair_cubes(cubes, [str(p) for p in paths])


def _columns(metric: str) -> Any:
    """The verification columns ``--metric`` names: all for the default ``ap``."""
    from metricalc.benchmarks.hpatches_cvpr17.verification import COLUMNS, column_name

    if metric == "ap":
        return COLUMNS
    if metric in ("hpatches17_verification_map", "verif. mAP"):
        return COLUMNS[:1]
    picked = [c for c in COLUMNS if column_name(*c) == metric]
    if not picked:
        names = ", ".join(column_name(*c) for c in COLUMNS)
        raise InvalidInputError(f"--metric {metric}: a pair cube has the columns {names}")
    return picked


def compare_pair_files(
    args: argparse.Namespace, paths: list[Path], *, descriptors: list[str] | None = None
) -> int:
    """Every column (or ``--metric``'s) of the verification summary of pair cubes: the values,
    and with 5 sequences or more the comparison over sequences."""
    import pandas as pd

    from metricalc.benchmarks.hpatches_cvpr17.statistic import (
        compare_verification,
        comparison_steps,
        not_tested,
        select_descriptors,
        verification_values,
    )
    from metricalc.commands.args import names
    from metricalc.commands.records import print_json_rows
    from metricalc.fileio import json_safe
    from metricalc.plotting.terminal import print_comparisons, print_frame
    from metricalc.progress import progress_bar
    from metricalc.validation import check_integer

    _refuse_options(args, "verification pair cubes")
    check_integer("n_resamples", args.n_resamples, minimum=1)
    labels = names(args.labels) if getattr(args, "labels", None) else None
    if labels is not None and len(labels) != len(paths):
        raise InvalidInputError(f"--labels gives {len(labels)} labels for {len(paths)} files")
    cube = select_descriptors(_opened(paths, labels), descriptors)
    columns = _columns(getattr(args, "metric", "ap"))
    reason = not_tested(cube)
    if reason:  # the values, and why there is no test, in one line
        values = verification_values(cube)
        frame = pd.DataFrame(values, index=[str(d) for d in cube["descriptor"].values]).T
        if args.json:
            print(json.dumps(json_safe({"values": frame.to_dict(), "note": reason}), indent=2))
        else:
            print_frame(
                frame.map(lambda v: f"{v:.{VERIFICATION_DECIMALS}f}").reset_index(names="column"),
                title=f"verification, split {cube.attrs['split']}",
            )
        print(f"metricalc: {reason}", file=sys.stderr)
        return 0
    baseline = getattr(args, "baseline", None)
    systems = cube.sizes["descriptor"]
    pairs = systems - 1 if baseline else systems * (systems - 1) // 2
    total = comparison_steps(cube, len(columns), pairs, args.n_resamples)
    with progress_bar("resamples and swaps", total=total, enabled=sys.stderr.isatty(),
                      stderr=True) as advance:  # fmt: skip
        compared = compare_verification(
            cube, columns=columns, baseline=baseline,
            correction=getattr(args, "correction", "holm"), alpha=getattr(args, "alpha", 0.05),
            seed=args.seed, n_resamples=args.n_resamples,
            confidence_level=args.confidence_level, tick=advance,
        )  # fmt: skip
    if args.json:
        print_json_rows(compared)
        return 0
    for column, result in compared.items():
        print_comparisons(result, title=f"verification, split {cube.attrs['split']}: {column}",
                          decimals=VERIFICATION_DECIMALS)  # fmt: skip
    return 0


_ONLY_DEFAULTS = {
    "test": ("auto", "randomization"),
    "mean_over": (None,),
    "split": (None,),
    "interval": ("auto",),
    "pair_by": (None, "scene"),
}
"""Options of ``metricalc compare`` that a CVPR'17 column's test does not take: the values
allowed (its statistic and its units, the sequences, are the column's own)."""


def _refuse_options(args: argparse.Namespace, what: str) -> None:
    for name, allowed in _ONLY_DEFAULTS.items():
        if getattr(args, name, allowed[0]) not in allowed:
            raise InvalidInputError(
                f"--{name.replace('_', '-')} does not apply to {what}: their columns are tested "
                "over sequences by the paired cluster bootstrap and the swap test"
            )


def compare_cvpr17(args: argparse.Namespace) -> int | None:
    """``metricalc compare`` of verification pair cubes (:func:`compare_pair_files`) or of
    matching cubes on ``--metric hpatches17_matching_map`` (or ``"match. mAP"``:
    :func:`compare_matching_files`); None for any other call. For matching and retrieval cubes
    given neither ``--mean-over`` nor ``--pair-by``, ``args.mean_over`` becomes ``"query"``:
    the mAP ``hpatches-eval`` prints is the mean over the cube's units (image pairs at a level,
    queries at a level), tested over sequences."""
    if pair_cube_files(args.cubes):
        return compare_pair_files(args, args.cubes)
    if args.metric.strip().lower() in (MATCHING_METRIC, "match. map"):
        return compare_matching_files(args, args.cubes)
    if args.mean_over is None and args.pair_by is None and _task_cubes(args.cubes):
        args.mean_over = "query"
    return None


def _task_cubes(paths: list[Path]) -> bool:
    """Whether every file is a matching or retrieval cube of ``hpatches-eval --out``."""
    import h5py

    for path in paths:
        try:
            with h5py.File(path, "r") as handle:
                benchmark = handle.attrs.get("benchmark")
        except (OSError, ValueError, KeyError, RuntimeError):
            return False  # the cube reader says why
        if benchmark not in ("hpatches-cvpr17", b"hpatches-cvpr17"):
            return False
    return True


def compare_matching_files(args: argparse.Namespace, paths: list[Path]) -> int:
    """``metricalc compare A.matching.nc ... --metric hpatches17_matching_map``: the matching
    average compared over sequences."""
    from metricalc import cube as cubes
    from metricalc.commands.args import names
    from metricalc.commands.records import print_json_rows, statistic_options
    from metricalc.plotting.terminal import print_comparisons
    from metricalc.stats.compare import compare_statistic
    from metricalc.stats.cvpr17_matching import matching_statistic

    _refuse_options(args, "the matching average")
    labels = names(args.labels) if args.labels else None
    if labels is None and len(paths) > 1:
        labels = [path.stem for path in paths]
    opened = [cubes.open_cube(path) for path in paths]
    data = opened[0] if labels is None else dict(zip(labels, opened, strict=True))
    statistic, attrs = matching_statistic(data)
    result = compare_statistic(
        statistic, pair_by="sequence", attrs=attrs, **statistic_options(args)
    )
    if args.json:
        print_json_rows(result)
    else:
        print_comparisons(result, title=", ".join(str(p) for p in paths),
                          decimals=VERIFICATION_DECIMALS)  # fmt: skip
    return 0
