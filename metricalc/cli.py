"""The ``metricalc`` command. Thin: every verb parses arguments and calls the library."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import metricalc
from metricalc.core._validate import TIE_POLICIES
from metricalc.errors import InvalidInputError


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _cutoffs(text: str) -> tuple[int, ...]:
    """``--k 1,5,10`` -> (1, 5, 10); anything else is a usage error (exit 2, no traceback)."""
    try:
        values = tuple(int(part) for part in _names(text))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,5,10; got {text!r}")
    return values


def _same_keypoints(features: dict, locked: str) -> None:
    """Bring-your-own features marked --locked must share their keypoints across descriptors."""
    names = list(features)
    for name in names[1:]:
        for scene, images in features[names[0]].items():
            for k, reference in images.items():
                other = features[name].get(scene, {}).get(k)
                if other is None or not np.array_equal(other.keypoints, reference.keypoints):
                    raise InvalidInputError(
                        f"--locked {locked}: descriptor {name!r} does not have the keypoints of "
                        f"{names[0]!r} for scene {scene!r} image {k}"
                    )


def _demo(args: argparse.Namespace) -> int:
    from metricalc.demo import run_demo

    result = run_demo(args.out, quick=args.quick, seed=args.seed, progress=not args.no_progress)
    print(f"wrote {len(result.files)} files to {args.out} in {result.seconds:.1f} s")
    return 0


def _make_dataset(args: argparse.Namespace) -> int:
    from metricalc.keypoints.synthetic import QUICK_SCENES, make_synthetic_dataset

    scenes = _names(args.scenes) if args.scenes else (QUICK_SCENES if args.quick else None)
    sequences = make_synthetic_dataset(args.dir, scenes=scenes, seed=args.seed)
    print(f"{len(sequences)} scenes in {args.dir}")
    return 0


def _keypoints_eval(args: argparse.Namespace) -> int:
    from metricalc import cube as cubes
    from metricalc.keypoints.evaluate import check_protocol, evaluate
    from metricalc.keypoints.features import extract, load_features
    from metricalc.keypoints.sequences import load_sequences

    check_protocol(tau=args.tau, border=args.border)
    if args.out.is_dir():
        raise InvalidInputError(f"--out {args.out} is a directory; expected a cube file path")
    sequences = load_sequences(args.data)
    descriptors = _names(args.descriptors) if args.descriptors else None
    if args.features:
        features = load_features(args.features, descriptors=descriptors)
        keypoints = "external"
        if args.locked:
            _same_keypoints(features, args.locked)
            keypoints = f"locked:{args.locked}"
    else:
        features = extract(
            sequences,
            descriptors or ("sift", "rootsift", "orb", "brief"),
            locked=args.locked,
            border=args.border,
            progress=not args.no_progress,
        )
        keypoints = f"locked:{args.locked}" if args.locked else "native"
    cube = evaluate(
        sequences,
        features,
        keypoints=keypoints,
        tau=args.tau,
        border=args.border,
        tie_policy=args.tie_policy,
        bojanic=not args.no_bojanic,
        y0=args.y0,
        seed=args.seed,
        dataset=str(args.data),
        progress=not args.no_progress,
    )
    if cube.sizes["query"] == 0:
        raise InvalidInputError(
            f"no queries: every keypoint lies within --border {args.border:g} px of its image edge"
            " (or no descriptor could be evaluated)"
        )
    cubes.save(cube, args.out)
    failed = [
        str(d) for d, s in zip(cube.descriptor.values, cube.status.values, strict=True) if s != "ok"
    ]
    print(
        f"wrote {args.out}: {cube.sizes['descriptor']} descriptors, {cube.sizes['query']} queries"
    )
    for name in failed:
        message = str(cube.error.sel(descriptor=name).values)
        print(f"metricalc: descriptor {name} failed: {message}", file=sys.stderr)
    return 1 if failed else 0


def _metrics(args: argparse.Namespace) -> int:
    from metricalc import cube as cubes
    from metricalc.export import metric_set_to_dict
    from metricalc.metrics import metric_set
    from metricalc.report.terminal import print_metric_table

    cube = cubes.open_cube(args.cube)
    metrics = metric_set(cube, k=args.k)
    if args.json:
        print(json.dumps(metric_set_to_dict(metrics), indent=2))
    else:
        print_metric_table(metrics, title=str(args.cube))
    return 0


def _patches_eval(args: argparse.Namespace) -> int:
    from metricalc.patches import evaluate_files
    from metricalc.patches.folder import evaluate_folder
    from metricalc.report.terminal import print_frame

    if args.benchmarks:
        done = evaluate_folder(args.benchmarks, args.results, ap_method=args.ap_method)
        for path, message in done.errors:
            print(f"metricalc: {path.name}: {message}", file=sys.stderr)
        if args.json:
            payload = {
                "files": done.files.to_dict(orient="records"),
                "groups": done.groups().to_dict(orient="records"),
                "errors": [{"file": str(p), "error": m} for p, m in done.errors],
            }
            print(json.dumps(payload, indent=2))
        else:
            print_frame(done.files, title=f"{args.results} ({args.ap_method} AP)")
            print_frame(done.groups(), title="groups")
        return 1 if done.errors else 0
    if not (args.benchmark and args.labels):
        raise InvalidInputError(
            "give --benchmark and --labels with a .results file, or --benchmarks DIR"
        )
    ds = evaluate_files(args.benchmark, args.labels, args.results, ap_method=args.ap_method)
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
    from metricalc.patches import read_benchmark, write_results
    from metricalc.patches.compute import compute_results, load_descriptor_pool

    benchmark = read_benchmark(args.benchmark)
    pool = load_descriptor_pool(args.descriptors, benchmark.pool)
    results = compute_results(
        args.benchmark, pool, distance=args.distance, progress=not args.no_progress
    )
    write_results(args.out, benchmark.pool, results)
    print(f"wrote {args.out}: {len(results)} queries, top 51 by {args.distance}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from metricalc import cube as cubes
    from metricalc.export import _json_value
    from metricalc.report.terminal import print_comparisons
    from metricalc.stats import compare

    labels = _names(args.labels) if args.labels else None
    if labels is not None and len(labels) != len(args.cubes):
        raise InvalidInputError(
            f"--labels gives {len(labels)} labels for {len(args.cubes)} cube files; give one each"
        )
    if labels is None and len(args.cubes) > 1:
        labels = [path.stem for path in args.cubes]
    if labels is not None and len(set(labels)) != len(labels):
        raise InvalidInputError(f"the cube labels must differ; got {labels} (use --labels)")
    opened = [cubes.open_cube(path) for path in args.cubes]
    data = opened[0] if labels is None else dict(zip(labels, opened, strict=True))
    result = compare(
        data,
        metric=args.metric,
        pair_by=args.pair_by,
        test=args.test,
        correction=args.correction,
        alpha=args.alpha,
        baseline=args.baseline,
        split=args.split,
        seed=args.seed,
        n_resamples=args.n_resamples,
        confidence_level=args.confidence_level,
    )
    if args.json:
        rows = result.to_dataframe().reset_index().to_dict(orient="records")
        print(json.dumps([{k: _json_value(v) for k, v in row.items()} for row in rows], indent=2))
    else:
        print_comparisons(result, title=", ".join(str(p) for p in args.cubes))
        if result.attrs["excluded_descriptors"]:
            failed = ", ".join(result.attrs["excluded_descriptors"])
            print(f"left out (status error): {failed}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``metricalc`` command, one sub-command per verb."""
    parser = argparse.ArgumentParser(
        prog="metricalc",
        description=(
            "Decomposable metrics for evaluating local image descriptors: confusion counts, "
            "curves, AP and mAP over descriptor x scene x query cubes."
        ),
    )
    parser.add_argument("--version", action="version", version=f"metricalc {metricalc.__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    demo = verbs.add_parser(
        "demo", help="evaluate the built-in descriptors on the built-in benchmark"
    )
    demo.add_argument("--out", type=Path, default=Path("reports/demo"), help="output folder")
    demo.add_argument("--quick", action="store_true", help="a few scenes only (a first look)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(run=_demo)

    keypoints = verbs.add_parser("keypoints", help="HPatches-style sequences: data and evaluation")
    keypoint_verbs = keypoints.add_subparsers(dest="keypoints_verb", metavar="VERB", required=True)
    make = keypoint_verbs.add_parser("make-dataset", help="write the built-in synthetic benchmark")
    make.add_argument("dir", type=Path)
    make.add_argument("--scenes", help="comma-separated photographs or scene names")
    make.add_argument("--quick", action="store_true", help="the few scenes of --quick runs")
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(run=_make_dataset)

    ev = keypoint_verbs.add_parser("eval", help="evaluate descriptors into a QueryCube")
    ev.add_argument("--data", type=Path, required=True, help="sequences folder (HPatches layout)")
    ev.add_argument("--descriptors", help="comma-separated names (default: all built-in)")
    ev.add_argument("--locked", help="detector whose keypoints every descriptor describes")
    ev.add_argument("--features", type=Path, help="bring-your-own features folder")
    ev.add_argument("--out", type=Path, required=True, help="cube file to write (.nc)")
    ev.add_argument("--tau", type=float, default=3.0, help="ground-truth tolerance in px")
    ev.add_argument("--border", type=float, default=40.0, help="border exclusion in px")
    ev.add_argument("--tie-policy", choices=TIE_POLICIES, default="expected")
    ev.add_argument("--y0", choices=("negative", "ignore"), default="negative")
    ev.add_argument("--no-bojanic", action="store_true", help="skip verification / retrieval")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.set_defaults(run=_keypoints_eval)

    patches = verbs.add_parser("patches", help="the HPatches patch and image retrieval benchmark")
    patch_verbs = patches.add_subparsers(dest="patches_verb", metavar="VERB", required=True)
    pe = patch_verbs.add_parser("eval", help="patch and image retrieval mAP of .results files")
    pe.add_argument("--benchmark", type=Path, help="a .benchmark file")
    pe.add_argument("--labels", type=Path, help="its .labels file")
    pe.add_argument("--benchmarks", type=Path, help="a folder of .benchmark/.labels files")
    pe.add_argument("--results", type=Path, required=True, help=".results file (or folder)")
    pe.add_argument("--ap-method", choices=metricalc.AP_METHODS, default="vlfeat")
    pe.add_argument("--json", action="store_true", help="print JSON")
    pe.set_defaults(run=_patches_eval)
    pc = patch_verbs.add_parser("compute", help="top-51 .results from a descriptor pool")
    pc.add_argument("--benchmark", type=Path, required=True)
    pc.add_argument("--descriptors", type=Path, required=True, help="DIR/<seq>/<img>.csv or .npy")
    pc.add_argument("--out", type=Path, required=True, help=".results file to write")
    pc.add_argument("--distance", choices=("l2", "l1"), default="l2")
    pc.add_argument("--no-progress", action="store_true", help="no progress bar")
    pc.set_defaults(run=_patches_compute)

    metrics = verbs.add_parser("metrics", help="the DescriptorWorkbench metric set of a cube")
    metrics.add_argument("cube", type=Path)
    metrics.add_argument("--json", action="store_true", help="descriptor -> {metric -> value}")
    metrics.add_argument("--k", type=_cutoffs, default=(1, 5, 10), help="cut-offs, e.g. 1,5,10")
    metrics.set_defaults(run=_metrics)

    from metricalc.stats import CORRECTIONS, PAIR_BY, SPLITS, TESTS

    cmp = verbs.add_parser("compare", help="paired significance tests of the systems of cubes")
    cmp.add_argument("cubes", type=Path, nargs="+", metavar="CUBE", help="cube file(s) (.nc)")
    cmp.add_argument("--labels", help="one label per cube, e.g. locked,native (default: stems)")
    cmp.add_argument("--baseline", help="system compared with every other (default: all pairs)")
    cmp.add_argument("--metric", default="ap", help="cube variable or hit@K (default: ap)")
    cmp.add_argument("--test", choices=TESTS, default="wilcoxon")
    cmp.add_argument("--pair-by", choices=PAIR_BY, default="query")
    cmp.add_argument("--split", choices=SPLITS, help="only the queries of one split")
    cmp.add_argument("--correction", choices=CORRECTIONS, default="holm")
    cmp.add_argument("--alpha", type=float, default=0.05)
    cmp.add_argument("--seed", type=int, default=0, help="seed of the sign flips and bootstrap")
    cmp.add_argument("--n-resamples", type=int, default=10_000, help="flips / bootstrap resamples")
    cmp.add_argument("--confidence-level", type=float, default=0.95, help="of the bootstrap CI")
    cmp.add_argument("--json", action="store_true", help="a list of row objects (null: NaN)")
    cmp.set_defaults(run=_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args))
    except metricalc.MetricalcError as error:
        print(f"metricalc: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("metricalc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
