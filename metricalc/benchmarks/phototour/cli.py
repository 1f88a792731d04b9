"""``metricalc patches fpr95`` (FPR95 of one or more descriptors on patch pairs) and
``metricalc compare RECORDS.nc`` of its ``--out`` records."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from metricalc.commands.args import names, passed
from metricalc.core.operating import FPR_AT_RECALL_VARIANTS
from metricalc.errors import InvalidInputError


def add_fpr95(patch_verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``patches fpr95``: PhotoTour pairs with descriptor files, or distance,label[,cluster]
    rows."""
    pf = patch_verbs.add_parser(
        "fpr95", help="false positive rate at 95%% recall of patch pairs (PhotoTour, Brown et al.)"
    )
    pf.add_argument("--pairs", type=Path, help="an m50_<n>_<n>_0.txt pair file")
    pf.add_argument("--descriptors", type=Path, nargs="+", metavar="FILE",
                    help=".npy or .csv, one row per patch id; several: one row each")  # fmt: skip
    pf.add_argument(
        "--names",
        type=names,
        metavar="A,B",
        help="names of the descriptor or score files (default: their stems)",
    )
    pf.add_argument("--info", type=Path, help="info.txt: check the pairs' 3D point ids against it")
    pf.add_argument(
        "--scores",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="instead of pairs: distance,label[,cluster] rows, a file per descriptor",
    )
    pf.add_argument("--distance", choices=("l2", "l1"), default="l2")
    pf.add_argument(
        "--variant", choices=FPR_AT_RECALL_VARIANTS, default="hardnet",
        help="whose definition (hardnet: negatives before the k-th positive / N)",
    )  # fmt: skip
    pf.add_argument("--recall", type=float, default=0.95, help="the recall")
    pf.add_argument(
        "--out",
        type=Path,
        metavar="FILE.nc",
        help="write every pair's distances, label and cluster for `metricalc compare FILE.nc`",
    )
    pf.add_argument("--json", action="store_true", help="print JSON (a list for several files)")
    pf.set_defaults(run=_patches_fpr95)


def _descriptor_names(paths: list[Path], given: list[str] | None) -> list[str]:
    """``--names``, else the files' stems (their paths where two stems are equal).

    Examples
    --------
    >>> _descriptor_names([Path("a/sift.npy"), Path("b/sift.npy")], None)
    ['a/sift.npy', 'b/sift.npy']
    """
    if given is not None:
        if len(given) != len(paths):
            raise InvalidInputError(
                f"--names gives {len(given)} names for {len(paths)} descriptor files; give one each"
            )
        chosen = given
    else:
        chosen = [path.stem for path in paths]
        if len(set(chosen)) < len(chosen):
            chosen = [str(path) for path in paths]
    if len(set(chosen)) < len(chosen):
        twice = next(n for n in chosen if chosen.count(n) > 1)
        raise InvalidInputError(f"descriptor {twice!r} is given twice; give each file once")
    return chosen


def _print(results: list[tuple[str, Any, str]], as_json: bool) -> None:
    """One line (or JSON object) per descriptor: (name, VerificationResult, source); the lines
    start with the name when there are several."""
    if as_json:
        rows = [{**result.to_dict(), "descriptor": name, "source": source}
                for name, result, source in results]  # fmt: skip
        print(json.dumps(rows[0] if len(rows) == 1 else rows))
        return
    for name, result, source in results:
        rate = "FDR" if result.variant == "matchnet" else "FPR"
        print(
            (f"{name}: " if len(results) > 1 else "")
            + f"{rate}{round(100 * result.recall):d} {100 * result.fpr:.2f}%  ({result.variant}; "
            f"{result.n_positive} matching, {result.n_negative} non-matching pairs; {source})"
        )


def _read_score_files(paths: list[Path]) -> tuple[list[Any], Any, Any]:
    """Each file's distances, and the labels and clusters they share (same pairs, same order)."""
    import numpy as np

    from metricalc.benchmarks.phototour.verification import read_clustered_scores

    read = [read_clustered_scores(path) for path in paths]
    _, labels, clusters = read[0]
    for path, (distances, other_labels, other_clusters) in zip(paths[1:], read[1:], strict=True):
        if len(distances) != len(labels):
            raise InvalidInputError(
                f"{path}: {len(distances)} rows, {paths[0]} has {len(labels)}; the score files "
                "must list the same pairs in the same order"
            )
        differ = other_labels != labels
        if (clusters is None) != (other_clusters is None):
            differ = np.ones(len(labels), dtype=bool)
        elif clusters is not None:
            differ |= other_clusters != clusters
        if differ.any():
            row = int(np.flatnonzero(differ)[0]) + 1
            raise InvalidInputError(
                f"{path}, row {row}: its label (or cluster) differs from {paths[0]}'s; the score "
                "files must list the same pairs in the same order"
            )
    return [distances for distances, _, _ in read], labels, clusters


def _patches_fpr95(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.phototour import verification
    from metricalc.benchmarks.phototour.records import (
        pair_records,
        save_fpr95_records,
        score_records,
    )

    if args.scores is not None and (args.pairs or args.descriptors or args.info):
        raise InvalidInputError("give --scores alone, or --pairs with --descriptors")
    if args.scores is None and (args.pairs is None or args.descriptors is None):
        raise InvalidInputError("give --pairs and --descriptors, or --scores")
    if args.out is not None and args.out.suffix != ".nc":
        raise InvalidInputError(f"--out {args.out}: expected a .nc file name")
    protocol = passed(args, "variant", "recall")
    files = args.scores if args.scores is not None else args.descriptors
    names = _descriptor_names(files, args.names)
    if args.scores is not None:
        distances, labels, clusters = _read_score_files(args.scores)
        by_name = dict(zip(names, distances, strict=True))
        sources = [str(path) for path in args.scores]
        records = score_records(by_name, labels, clusters, **protocol)
    else:
        from metricalc.benchmarks.phototour import dataset as phototour

        pairs = phototour.read_pairs(args.pairs)
        if args.info is not None:
            phototour.check_pairs(pairs, phototour.read_info(args.info), source=str(args.info))
        by_name = {
            name: verification.pair_distances(
                verification.read_descriptors(path), pairs, distance=args.distance
            )
            for name, path in zip(names, args.descriptors, strict=True)
        }
        labels, protocol = pairs.labels, {**protocol, "distance": args.distance}
        sources = [f"{args.pairs} with {path}" for path in args.descriptors]
        records = pair_records(pairs, by_name, **protocol)
    results = [
        (name, verification.evaluate_scores(distances, labels, **protocol), source)
        for (name, distances), source in zip(by_name.items(), sources, strict=True)
    ]
    if args.out is not None:
        save_fpr95_records(records, args.out)
        print(f"metricalc: pair records {args.out}", file=sys.stderr)
    _print(results, args.json)
    return 0


def fpr95_records_file(paths: list[Path]) -> Path | None:
    """The FPR95 records file of ``metricalc compare PATH`` (``patches fpr95 --out``), None for
    other files; a records file among several files is an error."""
    from metricalc.benchmarks.phototour.records import is_fpr95_records

    kinds = [is_fpr95_records(path) for path in paths]
    if not any(kinds):
        return None
    if len(paths) > 1:
        raise InvalidInputError(
            f"{paths[kinds.index(True)]}: FPR95 pair records (patches fpr95 --out) are compared "
            "alone, their descriptors against each other; give every descriptor file to one "
            "`patches fpr95 --descriptors A B ...` call"
        )
    return paths[0]


def compare_fpr95_file(args: argparse.Namespace, path: Path) -> int:
    """``metricalc compare RECORDS.nc``: every pair of descriptors on FPR95 (lower is better),
    paired cluster bootstrap over the records' clusters (3D points of PhotoTour pairs) and the
    within-cluster swap test."""
    from metricalc.benchmarks.phototour.records import open_fpr95_records
    from metricalc.benchmarks.phototour.statistic import compare_fpr95
    from metricalc.commands.records import print_json_rows, refuse_cube_options, statistic_options
    from metricalc.plotting.terminal import print_comparisons

    if args.pair_by not in (None, "pair"):
        raise InvalidInputError(
            f"--pair-by {args.pair_by}: FPR95 pair records pair by their clusters (default: 3D "
            "points of PhotoTour pairs) or by pair (--pair-by pair)"
        )
    what = f"FPR95 pair records ({path})"
    refuse_cube_options(args, what)
    if args.labels is not None or args.metric not in ("ap", "fpr95"):
        given = "--labels" if args.labels is not None else f"--metric {args.metric}"
        raise InvalidInputError(f"{given} does not apply to {what}: their one column is FPR95")
    records = open_fpr95_records(path)
    pair_by = args.pair_by or "cluster"
    compared = compare_fpr95(records, pair_by=pair_by, **statistic_options(args))
    if args.json:
        print_json_rows(compared)
        return 0
    unit = str(records.attrs.get("cluster_by", "the pair's cluster"))
    if pair_by == "pair" or records.attrs.get("cluster_name") == "pair":
        unit = "patch pair"
    title = f"{path}: {compared.attrs['metric'].upper()}, lower is better (diff < 0 favours the "
    print_comparisons(compared, title=title + "descriptor)", unit=unit)
    return 0
