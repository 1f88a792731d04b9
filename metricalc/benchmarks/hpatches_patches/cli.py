"""``metricalc patches eval | compute | make-dataset | make-benchmark | describe | fpr95 |
make-phototour | describe-phototour | hpatches-eval | make-hpatches17 | hpatches-compare``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from metricalc.benchmarks.phototour.cli import add_fpr95
from metricalc.commands.args import (
    add_preset_option,
    chosen_scenes,
    names,
    passed,
    protocol_attrs,
    with_preset,
)
from metricalc.core.ranking import AP_METHODS
from metricalc.errors import InvalidInputError


def add_patches(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc patches ...`` (the HPatches patch and image retrieval benchmark files)."""
    patches = verbs.add_parser("patches", help="the HPatches patch and image retrieval benchmark")
    patch_verbs = patches.add_subparsers(dest="patches_verb", metavar="VERB", required=True)
    pe = patch_verbs.add_parser("eval", help="patch and image retrieval mAP of .results files")
    pe.add_argument("--benchmark", type=Path, help="a .benchmark file")
    pe.add_argument("--labels", type=Path, help="its .labels file")
    pe.add_argument("--benchmarks", type=Path, help="a folder of .benchmark/.labels files")
    pe.add_argument("--results", type=Path, nargs="+", required=True,
                    help=".results file, or results folders (one per descriptor)")  # fmt: skip
    pe.add_argument("--out", type=Path, help="write the QueryCube of the folders (.nc)")
    pe.add_argument("--ap-method", choices=AP_METHODS, default="vlfeat")
    pe.add_argument("--json", action="store_true", help="print JSON")
    pe.set_defaults(run=_patches_eval)
    pc = patch_verbs.add_parser("compute", help="top-51 .results from a descriptor pool")
    pc.add_argument("--benchmark", type=Path, required=True)
    pc.add_argument("--descriptors", type=Path, required=True, help="DIR/<seq>/<img>.csv or .npy")
    pc.add_argument("--out", type=Path, required=True, help=".results file to write")
    pc.add_argument("--distance", choices=("l2", "l1"), default="l2")
    pc.add_argument("--no-progress", action="store_true", help="no progress bar")
    pc.set_defaults(run=_patches_compute)
    pd_ = patch_verbs.add_parser("make-dataset", help="write the built-in synthetic patch dataset")
    pd_.add_argument("dir", type=Path)
    pd_.add_argument("--scenes", help="comma-separated photographs or sequence names")
    pd_.add_argument("--quick", action="store_true", help="the few scenes of --quick runs")
    pd_.add_argument("--seed", type=int, default=0)
    pd_.add_argument("--size", type=int, help="longer side of the source images (default 640)")
    pd_.add_argument("--max-patches", type=int, help="patches per sequence, at most (1000)")
    pd_.add_argument("--no-progress", action="store_true", help="no progress bar")
    pd_.set_defaults(run=_patches_make_dataset)
    pb = patch_verbs.add_parser("make-benchmark", help="draw a .benchmark/.labels pair")
    pb.add_argument("--patches", type=Path, required=True, help="patch dataset folder")
    pb.add_argument("--split", choices=("train", "test"), required=True)
    pb.add_argument("--sequences", type=int, required=True, help="sequences in the pool")
    pb.add_argument("--seed", type=int, required=True)
    pb.add_argument("--difficulty", choices=("easy", "hard"), required=True)
    pb.add_argument("--out", type=Path, required=True, help="folder for the two files")
    pb.add_argument("--queries-per-sequence", type=int, default=100)
    pb.set_defaults(run=_patches_make_benchmark)
    pdsc = patch_verbs.add_parser("describe", help="SIFT or raw-pixel descriptors of patches")
    pdsc.add_argument("--patches", type=Path, required=True, help="patch dataset folder")
    pdsc.add_argument("--method", choices=("sift", "raw"), required=True)
    pdsc.add_argument("--out", type=Path, required=True, help="descriptor folder DIR/<seq>/<img>")
    pdsc.add_argument("--format", choices=("npy", "csv"), default="npy")
    pdsc.add_argument("--no-progress", action="store_true", help="no progress bar")
    pdsc.set_defaults(run=_patches_describe)
    ph = patch_verbs.add_parser(
        "hpatches-eval", help="the HPatches CVPR'17 tasks (hpatches-benchmark's Python evaluation)"
    )
    ph.add_argument("descr_dir", type=Path, metavar="DESCR_DIR", help="DESCR_DIR/<seq>/<img>.csv")
    add_preset_option(
        ph,
        "patches hpatches-eval",
        "a protocol (docs/presets.md): hpatches-cvpr17 sets --task, --split and --distance as "
        "defaults; options you give still win",
    )
    ph.add_argument("--task", choices=(*HPATCHES17_TASKS, "all"), default=argparse.SUPPRESS,
                    help="(default: all, or the preset's)")  # fmt: skip
    ph.add_argument("--split", default=argparse.SUPPRESS,
                    help="a, b, c, illum, view or full (default: a, or the preset's)")  # fmt: skip
    ph.add_argument("--tasks", type=Path, help="a folder in hpatches-benchmark's tasks/ format")
    ph.add_argument("--pairs", type=int, default=1_000_000,
                    help="verification pairs per generated file (1000000)")  # fmt: skip
    ph.add_argument("--distance", choices=("l2", "l1"), default=argparse.SUPPRESS,
                    help="the reference's --dist (default: l2, or the preset's)")  # fmt: skip
    ph.add_argument("--json", action="store_true", help="print the results as JSON (fractions)")
    ph.add_argument(
        "--out", type=Path, metavar="PREFIX",
        help="write each task's cube to PREFIX.<task>.nc (verification, matching, retrieval); "
        "a folder: FOLDER/<name>.<task>.nc",
    )  # fmt: skip
    ph.add_argument("--name", help="descriptor name in the cubes (default: DESCR_DIR's name)")
    ph.add_argument(
        "--pool", type=int, default=20000, choices=HPATCHES17_POOLS,
        help="pool size of the retrieval cube's AP",
    )
    ph.set_defaults(run=_patches_hpatches_eval)
    pm17 = patch_verbs.add_parser(
        "make-hpatches17",
        help="write an offline HPatches CVPR'17 set (descriptors and task files) for hpatches-eval",
    )
    pm17.add_argument("root", type=Path, metavar="ROOT",
                      help="writes ROOT/patches, ROOT/descriptors/METHOD, ROOT/tasks")  # fmt: skip
    pm17.add_argument("--scenes", help="comma-separated photographs or sequence names")
    pm17.add_argument("--quick", action="store_true", help="the few scenes of --quick runs")
    pm17.add_argument("--seed", type=int, default=0)
    pm17.add_argument("--size", type=int, default=320, help="longer side of the source images")
    pm17.add_argument("--max-patches", type=int, default=150, help="patches per sequence, at most")
    pm17.add_argument("--method", choices=("raw", "sift"), default="raw",
                      help="the descriptor written (default raw)")  # fmt: skip
    pm17.add_argument("--queries", type=int, default=200,
                      help="retrieval queries per split, at most")  # fmt: skip
    pm17.add_argument("--distractors", type=int, default=1000,
                      help="retrieval distractors per split, at most")  # fmt: skip
    pm17.set_defaults(run=_patches_make_hpatches17)
    _add_hpatches_compare(patch_verbs)
    _add_fpr95(patch_verbs)


def _add_hpatches_compare(patch_verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``patches hpatches-compare``: ``metricalc compare`` of verification pair cubes."""
    pv = patch_verbs.add_parser(
        "hpatches-compare",
        help="two descriptors' CVPR'17 verification numbers compared over sequences (as "
        "metricalc compare of the pair cubes)",
    )
    pv.add_argument("cubes", type=Path, nargs="+", metavar="CUBE",
                    help="pair cubes (PREFIX.verification.nc of hpatches-eval --out)")  # fmt: skip
    pv.add_argument("--descriptors", type=names, metavar="A,B",
                    help="the two compared, A - B (default: the only two in the cubes)")
    pv.add_argument("--n-resamples", type=int, default=10_000,
                    help="bootstrap resamples, and swap patterns above 16 sequences (10,000)")
    pv.add_argument("--seed", type=int, default=0, help="seed of the resamples and swaps")
    pv.add_argument("--confidence-level", type=float, default=0.95, help="of the interval")
    pv.add_argument("--json", action="store_true", help="a list of row objects")
    pv.set_defaults(run=_patches_hpatches_compare)


def _add_fpr95(patch_verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``patches fpr95`` (PhotoTour pairs or distance,label rows) and ``patches make-phototour``."""
    add_fpr95(patch_verbs)
    pm = patch_verbs.add_parser("make-phototour", help="write a synthetic PhotoTour-layout set")
    pm.add_argument("dir", type=Path)
    pm.add_argument("--pairs", type=int, default=500, help="matching (and non-matching) pairs")
    pm.add_argument("--seed", type=int, default=0)
    pm.set_defaults(run=_patches_make_phototour)
    pdp = patch_verbs.add_parser(
        "describe-phototour", help="SIFT or raw-pixel descriptors of a PhotoTour-layout folder"
    )
    pdp.add_argument("dir", type=Path, help="folder with info.txt and patches<NNNN>.bmp")
    pdp.add_argument("--method", choices=("sift", "raw"), required=True)
    pdp.add_argument("--out", type=Path, required=True, help=".npy file, one row per patch id")
    pdp.set_defaults(run=_patches_describe_phototour)


HPATCHES17_POOLS = (100, 500, 1000, 5000, 10000, 15000, 20000)
"""The retrieval pool sizes (``metricalc.benchmarks.hpatches_cvpr17.evaluate.POOL_SIZES``, spelled
here for the
parser, as the tasks below)."""

HPATCHES17_TASKS = ("verification", "matching", "retrieval")
"""The tasks of ``hpatches-eval`` (``metricalc.benchmarks.hpatches_cvpr17.evaluate.TASKS17``,
spelled here so that
the parser does not import NumPy code)."""


HPATCHES17_PROTOCOL: dict[str, Any] = {"task": "all", "split": "a", "distance": "l2"}
"""The protocol options of ``hpatches-eval`` and their defaults without ``--preset``."""

SIDES = ("inter", "intra")


def _percent(value: float) -> str:
    return f"{100 * value:.2f}"


def _print_hpatches17(result: dict[str, Any], split: str) -> None:
    import pandas as pd

    from metricalc.plotting.terminal import print_frame

    if "verification" in result:
        rows = [
            {"noise": level, **{f"{b} {k}": _percent(v[b][k]) for b in v for k in SIDES}}
            for level, v in result["verification"][split].items()
        ]  # fmt: skip
        print_frame(pd.DataFrame(rows), title=f"verification, split {split} (AUC / AP, %)")
        imbalanced = [v["imbalanced"][k] for v in result["verification"][split].values()
                      for k in ("inter", "intra")]  # fmt: skip
        print(f"verification: mean imbalanced AP {_percent(sum(imbalanced) / len(imbalanced))} "
              f"({result['pairs_source']})")  # fmt: skip
    if "matching" in result:
        row = {k: _percent(v) for k, v in result["matching"][split].items()}
        print_frame(pd.DataFrame([row]), title=f"matching, split {split} (mAP, %)")
    if "retrieval" in result:
        rows = [{"noise": level, **{p: _percent(v) for p, v in pools.items()}}
                for level, pools in result["retrieval"][split].items()]  # fmt: skip
        print_frame(pd.DataFrame(rows), title=f"retrieval, split {split} (mAP by pool size, %)")
        mean = result["retrieval"][split]["mean"]
        print(f"retrieval: mean mAP {_percent(sum(mean.values()) / len(mean))}")
        note = whole_list_note(result["retrieval_longest_list"])
        if note:
            print(note)


def whole_list_note(longest: int) -> str:
    """A line saying which pools hold every retrieval list whole ("" if none does): their
    columns are equal because the set is smaller than the pools, not by chance."""
    whole = [p for p in HPATCHES17_POOLS if p >= longest]
    if not whole:
        return ""
    return (
        f"retrieval: the longest list has {longest:,} items (5 positives and the distractors of "
        f"other sequences), so pools of {', '.join(f'{p:,}' for p in whole)} hold every list "
        "whole and their columns are equal: the set is smaller than those pools"
    )


def _patches_hpatches_eval(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_cvpr17.evaluate import evaluate_hpatches17

    options, preset = with_preset(args, HPATCHES17_PROTOCOL, "patches hpatches-eval")
    split, distance = options["split"], options["distance"]
    tasks = HPATCHES17_TASKS if options["task"] == "all" else (options["task"],)
    name = args.name or args.descr_dir.resolve().name
    result = evaluate_hpatches17(
        args.descr_dir,
        tasks=tasks,
        split=split,
        task_dir=args.tasks,
        n_pairs=args.pairs,
        distance=distance,
    )
    if args.out is not None:
        from metricalc.benchmarks.hpatches_cvpr17.cube import save_task_cubes, task_cubes

        cubes = task_cubes(result, descriptor=name, split=split, distance=distance,
                           pool_size=args.pool, attrs=protocol_attrs(options, preset))  # fmt: skip
        prefix = args.out / name if args.out.is_dir() else args.out
        for task, path in save_task_cubes(cubes, prefix).items():
            print(f"metricalc: {task} cube {path}", file=sys.stderr)
    if preset is not None:
        print(f"metricalc: protocol: preset {preset.name} ({preset.source})", file=sys.stderr)
    if args.json:
        if "pairs_source" in result:
            print(f"metricalc: verification pairs {result['pairs_source']}", file=sys.stderr)
        note = whole_list_note(result.get("retrieval_longest_list", sys.maxsize))
        if note:
            print(f"metricalc: {note}", file=sys.stderr)
        output = {task: result[task] for task in tasks}
        if result.get("dataset"):  # generated data names itself (make_hpatches17_set's mark)
            output["dataset"] = result["dataset"]
        if preset is not None:  # which protocol produced the numbers
            output["preset"] = {"name": preset.name, "source": preset.source, **options}
        print(json.dumps(output, indent=2))
    else:
        _print_hpatches17(result, split)
    return 0


def _patches_hpatches_compare(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_cvpr17.cli import compare_pair_files

    return compare_pair_files(args, args.cubes, descriptors=args.descriptors)


def _patches_eval(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_patches import evaluate_files
    from metricalc.plotting.terminal import print_frame

    if args.benchmarks:
        from metricalc import cube as cubes
        from metricalc.benchmarks.hpatches_patches.querycube import evaluate_folders

        if args.out is not None and args.out.is_dir():
            raise InvalidInputError(f"--out {args.out} is a directory; expected a cube file path")
        done = evaluate_folders(args.benchmarks, args.results, ap_method=args.ap_method)
        for descriptor, path, message in done.errors:
            print(f"metricalc: {descriptor}/{path.name}: {message}", file=sys.stderr)
        if args.out is not None:
            cubes.save(done.cube, args.out)
        if args.json:
            print(json.dumps({**done.to_dict(), "cube": args.out and str(args.out)}, indent=2))
        else:
            print_frame(done.files, title=f"{args.benchmarks} ({args.ap_method} AP)")
            print_frame(done.groups(), title="groups")
            if args.out is not None:
                print(f"wrote {args.out}: {done.cube.sizes['descriptor']} descriptors")
        return 1 if done.errors else 0
    if not (args.benchmark and args.labels) or len(args.results) != 1 or args.out is not None:
        raise InvalidInputError(
            "give --benchmark and --labels with one .results file, or --benchmarks DIR with one "
            "or more results folders (--out needs --benchmarks)"
        )
    ds = evaluate_files(args.benchmark, args.labels, args.results[0], ap_method=args.ap_method)
    values = {
        "patch_retrieval_map": float(ds.patch_retrieval_map),
        "image_retrieval_map": float(ds.image_retrieval_map),
        "n_queries": int(ds.n_queries),
    }
    if args.json:
        print(json.dumps(values))
    else:
        print(
            f"patch retrieval mAP {100 * values['patch_retrieval_map']:.2f}   "
            f"image retrieval mAP {100 * values['image_retrieval_map']:.2f}   "
            f"queries {values['n_queries']}"
        )
    return 0


def _patches_compute(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_patches.compute import rank_benchmark

    results = rank_benchmark(
        args.benchmark, args.descriptors, args.out, distance=args.distance,
        progress=not args.no_progress,
    )  # fmt: skip
    print(f"wrote {args.out}: {len(results)} queries, top 51 by {args.distance}")
    return 0


def _patches_make_dataset(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_patches.generator import make_patch_dataset

    given = {"size": args.size, "max_patches": args.max_patches}
    sizes = {k: v for k, v in given.items() if v is not None}  # else the library's defaults
    dataset = make_patch_dataset(
        args.dir, scenes=chosen_scenes(args), seed=args.seed, progress=not args.no_progress, **sizes
    )
    total = sum(dataset.counts.values())
    print(f"{len(dataset.sequences)} sequences in {args.dir}: {total} patches in each of the 16 "
          "images (ref, e1..e5, h1..h5, t1..t5)")  # fmt: skip
    return 0


def _patches_make_benchmark(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_patches.benchmark import make_benchmark

    paths = make_benchmark(
        args.patches,
        args.out,
        n_sequences=args.sequences,
        **passed(args, "split", "seed", "difficulty", "queries_per_sequence"),
    )
    print(f"wrote {paths[0]} and {paths[1].name}")
    return 0


def _patches_describe(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_patches.describe import describe_dataset

    written = describe_dataset(
        args.patches, args.out, method=args.method, format=args.format,
        progress=not args.no_progress,
    )  # fmt: skip
    print(f"wrote {len(written)} {args.method} descriptor files to {args.out}")
    return 0


def _patches_make_hpatches17(args: argparse.Namespace) -> int:
    from metricalc.datasets import make_hpatches17_set

    descriptors = make_hpatches17_set(
        args.root, scenes=chosen_scenes(args), seed=args.seed, size=args.size,
        max_patches=args.max_patches, method=args.method, n_queries=args.queries,
        n_distractors=args.distractors,
    )  # fmt: skip
    tasks = args.root / "tasks"
    print(f"wrote {descriptors} and {tasks}; evaluate with: metricalc patches hpatches-eval "
          f"{descriptors} --tasks {tasks} --split full")  # fmt: skip
    return 0


def _patches_make_phototour(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.phototour.generator import make_phototour_set

    made = make_phototour_set(args.dir, n_pairs=args.pairs, seed=args.seed)
    print(f"wrote {made.n_patches} patches of {made.n_points} points and {made.pairs}")
    return 0


def _patches_describe_phototour(args: argparse.Namespace) -> int:
    import io

    import numpy as np

    from metricalc.benchmarks.phototour.dataset import describe_phototour
    from metricalc.fileio import atomic_write

    if args.out.suffix != ".npy":
        raise InvalidInputError(f"--out {args.out}: expected a .npy file name")
    descriptors = describe_phototour(args.dir, method=args.method)
    binary = io.BytesIO()
    np.save(binary, descriptors)
    atomic_write(args.out, binary.getvalue())
    print(f"wrote {args.out}: {len(descriptors)} {args.method} descriptors")
    return 0
