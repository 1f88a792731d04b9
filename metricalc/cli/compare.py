"""``metricalc compare CUBE ...`` (paired significance tests of the systems of cubes).

Building the parser must not import :mod:`metricalc.stats` (statsmodels and scipy.stats: half a
second of start-up for every ``metricalc`` command), so the choices are spelled here;
``tests/cli/test_cli.py`` checks that they agree with the names :mod:`metricalc.stats` exports.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from metricalc.commands.args import names
from metricalc.commands.dask_options import add_dask_options, cube_chunks, dask_session
from metricalc.errors import InvalidInputError

TESTS = ("auto", "randomization", "ttest", "wilcoxon", "sign", "mcnemar")
"""``metricalc.stats.TESTS``."""
PAIR_BY = ("query", "pair", "scene")
"""``metricalc.stats.PAIR_BY``."""
SPLITS = ("viewpoint", "illumination")
"""``metricalc.stats.SPLITS``."""
CORRECTIONS = ("holm", "bonferroni", "fdr_bh", "none")
"""``metricalc.stats.CORRECTIONS``."""
INTERVALS = ("auto", "bca", "t")
"""``metricalc.stats.INTERVALS``."""
TREC_DECIMALS = 4
"""Decimals of trec_eval's measures in ``compare`` (``0.5800``, as trec_eval and IR papers)."""


_COMPARE_OPTIONS = (
    "test",
    "correction",
    "alpha",
    "baseline",
    "split",
    "seed",
    "n_resamples",
    "confidence_level",
    "interval",
    "mean_over",
)
"""The options of :func:`metricalc.stats.compare` taken as given on the command line."""


def add_compare(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc compare CUBE ... [--baseline NAME] [--metric ap] [--test auto] ...``."""
    cmp = verbs.add_parser("compare", help="paired significance tests of the systems of cubes")
    cmp.add_argument("cubes", type=Path, nargs="+", metavar="CUBE",
                     help="cube file(s) (.nc), one pose results file (pose eval --out), "
                     "`run hpatches` runs (with --metric homography), COCO results files "
                     "(JSON) with --coco-gt, FPR95 pair records (patches fpr95 --out), or "
                     "HPatches verification pair cubes (patches hpatches-eval --out)")
    cmp.add_argument("--labels", help="one label per cube, e.g. locked,native (default: stems)")
    cmp.add_argument("--baseline", help="system compared with every other (default: all pairs)")
    cmp.add_argument(
        "--metric",
        default="ap",
        help="cube variable, hit@K (hit rate) or precision@K (hits / K), or a table's name of "
        "one: mAP, HR@K, P@K (default: ap); "
        "mma@T: D2-Net's MMA at T px; 'homography' (or one column, e.g. H_error_ransac@3px) "
        "compares `run hpatches` runs",
    )
    cmp.add_argument(
        "--test",
        choices=TESTS,
        default="auto",
        help="auto (default): randomization test of the mean difference; McNemar for 0/1 outcomes",
    )
    cmp.add_argument(
        "--pair-by",
        choices=PAIR_BY,
        help="the independent unit, resampled and permuted whole (default: scene; query or "
        "pair ignore that the keypoints of a scene are correlated, and print the design effect)",
    )
    cmp.add_argument(
        "--mean-over",
        choices=PAIR_BY,
        help="the statistic: the mean over queries (pooled), over image pairs of pair means, "
        "or over scenes of scene means (default: the --pair-by unit)",
    )
    cmp.add_argument("--split", choices=SPLITS, help="only the queries of one split")
    cmp.add_argument("--correction", choices=CORRECTIONS, default="holm")
    cmp.add_argument("--alpha", type=float, default=0.05)
    cmp.add_argument("--seed", type=int, default=0, help="seed of the sign flips and bootstrap")
    cmp.add_argument("--n-resamples", type=int, default=10_000, help="flips / bootstrap resamples")
    cmp.add_argument("--confidence-level", type=float, default=0.95, help="of the CI")
    cmp.add_argument(
        "--interval",
        choices=INTERVALS,
        default="auto",
        help="CI of the mean difference: bca (bootstrap), t (Student t: no resampling) or auto, "
        "bca up to 100,000 paired units and t above (default: auto)",
    )
    cmp.add_argument("--json", action="store_true", help="a list of row objects (null: NaN)")
    cmp.add_argument("--coco-gt", type=Path, metavar="FILE",
                     help="COCO ground truth (JSON): compare the detectors of the results files "
                     "on --metric AP (default), AP50, AP75, APs/m/l, AR100, ARs/m/l, by images")
    cmp.add_argument("--iou-type", choices=("bbox", "segm"), default="bbox",
                     help="with --coco-gt: box or mask IoU (default: bbox)")
    add_dask_options(cmp)
    cmp.set_defaults(run=_compare)


def _open(
    paths: list[Path], metric: str, pair_by: str | None, chunks: dict[str, int] | None = None
) -> tuple[list[Any], str, str]:
    """The cubes of ``paths`` with the metric and unit to compare them on. The per-scene cube
    of ``db import-workbench --out`` is compared per scene on its ``true_map`` (``--metric ap``)
    or ``true_map_with_zeros`` (:func:`metricalc.store.workbench_cube.scene_query_cube`)."""
    from metricalc import cube as cubes
    from metricalc.store.workbench_cube import open_workbench_cube, scene_query_cube

    scene_cubes = [open_workbench_cube(path) for path in paths]
    if all(c is None for c in scene_cubes):
        opened = [cubes.open_cube(path, chunks=chunks) for path in paths]
        available = [str(name) for name in opened[0].data_vars]
        return opened, compare_metric(metric, available), pair_by or "scene"
    if any(c is None for c in scene_cubes):
        raise InvalidInputError(
            "cannot compare a DescriptorWorkbench cube (db import-workbench --out: one mAP per "
            "scene) with a QueryCube; compare the workbench cubes alone"
        )
    if pair_by not in (None, "scene"):
        raise InvalidInputError(
            f"--pair-by {pair_by}: a DescriptorWorkbench cube has one mAP per scene and no "
            "queries or image pairs; use --pair-by scene (the default for it)"
        )
    metric = compare_metric(metric, ())
    scene_metric = "true_map" if metric == "ap" else metric
    opened = [scene_query_cube(c, metric=scene_metric) for c in scene_cubes if c is not None]
    return opened, "ap", "scene"


def compare_metric(name: str, available: Collection[str]) -> str:
    """The cube variable (or ``hit@K`` / ``precision@K``) that ``--metric NAME`` means.

    ``NAME`` as given when the cube has that variable or it is ``hit@K`` or ``precision@K``;
    else a name the tables print for a per-query metric, or its metric-set name, as an alias of
    the variable whose mean it is (over all queries, not one split): ``mAP`` /
    ``true_map_micro`` -> ``ap``, ``HR@K`` / ``hit_rate_at_K`` -> ``hit@K`` (the hit rate),
    ``P@K`` / ``precision_at_K`` -> ``precision@K`` (hits / K; earlier metricalc
    versions named the hit rate ``precision_at_K`` and this ``ir_precision_at_K``, still
    accepted), ``image mAP`` /
    ``image_retrieval_map`` -> ``image_ap``, ``precision`` -> ``nn_correct``; case does not
    matter where only one name matches (``AP`` -> ``ap``). Any other name is returned as given,
    for :func:`metricalc.stats.compare` to refuse with the cube's variables.

    Examples
    --------
    >>> [compare_metric(n, ["ap", "nn_correct"]) for n in ("mAP", "AP", "HR@5", "nn_correct")]
    ['ap', 'ap', 'hit@5', 'nn_correct']
    >>> [compare_metric(n, ["ap"]) for n in ("hit_rate_at_10", "precision_at_10", "P@1")]
    ['hit@10', 'precision@10', 'precision@1']
    >>> compare_metric("ir_precision_at_5", ["ap"])
    'precision@5'
    """
    from metricalc.plotting.labels import METRICS

    if name in available or re.fullmatch(r"(?:hit|precision)@[0-9]+", name):
        return name
    key = name.strip().lower()
    hit = re.fullmatch(r"(?:hr@|hit@|hit_rate_at_)([0-9]+)", key)
    if hit:
        return f"hit@{int(hit.group(1))}"
    precision = re.fullmatch(r"(?:p@|precision@|precision_at_|ir_precision_at_)([0-9]+)", key)
    if precision:
        return f"precision@{int(precision.group(1))}"
    aliases: dict[str, set[str]] = {}
    for metric, info in METRICS.items():
        if info.test is not None and info.test[1] is None and "@" not in info.test[0]:
            for alias in (metric, info.label):
                aliases.setdefault(alias.lower(), set()).add(info.test[0])
    for variable in available:
        aliases.setdefault(variable.lower(), set()).add(variable)
    found = aliases.get(key, set())
    return found.pop() if len(found) == 1 else name


def _compare(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_cvpr17.cli import compare_cvpr17
    from metricalc.benchmarks.hpatches_sequences.mma_statistic import mma_threshold
    from metricalc.benchmarks.phototour.cli import compare_fpr95_file, fpr95_records_file
    from metricalc.benchmarks.twoview.cli import compare_pose_file, pose_results_file
    from metricalc.cli.compare_runs import (
        compare_homography_runs,
        compare_mma_cubes,
        is_homography_request,
    )
    from metricalc.commands.records import print_json_rows
    from metricalc.hpatches import common_cvpr17_unit
    from metricalc.plotting.terminal import print_comparisons
    from metricalc.stats import compare

    if args.coco_gt is not None or all(path.suffix.lower() == ".json" for path in args.cubes):
        from metricalc.benchmarks.coco.cli import compare_coco_files

        return compare_coco_files(args)
    pose_file = pose_results_file(args.cubes)
    if pose_file is not None:
        return compare_pose_file(args, pose_file)
    fpr95_file = fpr95_records_file(args.cubes)
    if fpr95_file is not None:
        return compare_fpr95_file(args, fpr95_file)
    if is_homography_request(args.metric):
        return compare_homography_runs(args)
    threshold = mma_threshold(args.metric)
    if threshold is not None:
        return compare_mma_cubes(args, threshold)
    done = compare_cvpr17(args)  # HPatches CVPR'17 pair cubes, the matching average
    if done is not None:
        return done
    labels = names(args.labels) if args.labels else None
    if labels is not None and len(labels) != len(args.cubes):
        raise InvalidInputError(
            f"--labels gives {len(labels)} labels for {len(args.cubes)} cube files; give one each"
        )
    if labels is None and len(args.cubes) > 1:
        labels = [path.stem for path in args.cubes]
    if labels is not None and len(set(labels)) != len(labels):
        raise InvalidInputError(f"the cube labels must differ; got {labels} (use --labels)")
    options = {name: getattr(args, name) for name in _COMPARE_OPTIONS}
    with dask_session(args):
        opened, metric, pair_by = _open(args.cubes, args.metric, args.pair_by, cube_chunks(args))
        data = opened[0] if labels is None else dict(zip(labels, opened, strict=True))
        result = compare(data, metric=metric, pair_by=pair_by, **options)
    if args.json:
        print_json_rows(result)
    else:
        unit = common_cvpr17_unit((cube.attrs for cube in opened), pair_by)
        query_unit = common_cvpr17_unit((cube.attrs for cube in opened), "query")
        if query_unit is not None:  # an HPatches CVPR'17 cube's units are no queries
            phrase = str(result.attrs.get("statistic_phrase", ""))
            result.attrs["statistic_phrase"] = phrase.replace(
                "mean over queries", f"mean over units (one per {query_unit})"
            )
        # TREC runs (trec-eval --cube): runs, and trec_eval's measures as IR papers print them
        trec = all(cube.attrs.get("benchmark") == "trec_eval" for cube in opened)
        print_comparisons(
            result,
            title=", ".join(str(p) for p in args.cubes),
            unit=unit,
            split_units="queries" if unit is None else "sequences",
            systems="run" if trec else "descriptor",
            decimals=TREC_DECIMALS if trec else None,
        )
        if result.attrs["excluded_descriptors"]:
            failed = ", ".join(result.attrs["excluded_descriptors"])
            print(f"left out (status error): {failed}", file=sys.stderr)
    return 0
