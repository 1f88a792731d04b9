"""The ``metricalc`` command. Thin: every verb parses arguments and calls the library."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    print(f"report: {result.report}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from metricalc.report.builder import build

    report = build(args.study, out=args.out, progress=not args.no_progress)
    print(f"wrote {len(report.files)} files to {report.out}")
    print(f"report: {report.html}")
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
    from metricalc.report.terminal import print_frame

    if args.benchmarks:
        from metricalc import cube as cubes
        from metricalc.patches.querycube import evaluate_folders

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


def _db_list(args: argparse.Namespace) -> int:
    from metricalc.store import list_experiments
    from metricalc.store.display import print_experiments
    from metricalc.store.exports import frame_text

    frame = list_experiments(args.db, benchmark=args.benchmark)
    if args.json:
        print(frame_text(frame, "json"), end="")
    else:
        print_experiments(frame)
    return 0


def _db_show(args: argparse.Namespace) -> int:
    from metricalc.store import get_experiment
    from metricalc.store.display import print_experiment
    from metricalc.store.exports import frame_text

    experiment = get_experiment(args.db, args.tag, benchmark=args.benchmark)
    if args.json:
        header = {
            k: v for k, v in vars(experiment).items() if k not in ("results", "scenes")
        }
        results = json.loads(frame_text(experiment.results, "json"))
        scenes = json.loads(frame_text(experiment.scenes, "json"))
        print(json.dumps({**header, "results": results, "scenes": scenes}, indent=1))
    else:
        print_experiment(experiment, scenes=args.scenes)
    return 0


def _db_export(args: argparse.Namespace) -> int:
    from metricalc.store import export_table, to_dataframe
    from metricalc.store.exports import frame_text

    if args.out is None:
        if args.format == "parquet":
            raise InvalidInputError("--format parquet writes a binary file: give --out FILE")
        frame = to_dataframe(args.db, args.table, benchmark=args.benchmark, tags=args.tag)
        sys.stdout.write(frame_text(frame, args.format))
        return 0
    export_table(
        args.db,
        args.out,
        format=args.format,
        table=args.table,
        benchmark=args.benchmark,
        tags=args.tag,
    )
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _db_import_workbench(args: argparse.Namespace) -> int:
    from metricalc.store.display import print_import
    from metricalc.store.workbench import import_workbench, read_workbench, write_cube

    export = read_workbench(args.file, tolerance=args.tolerance)
    if args.out is not None and export.cube is None:
        raise InvalidInputError(
            f"--out {args.out}: {args.file} has no per-scene metadata, so there is no cube to write"
        )
    export = import_workbench(
        export, db=args.db, tag_prefix=args.tag_prefix, overwrite=args.overwrite
    )
    if args.out is not None:
        write_cube(export.cube, args.out)
    if args.json:
        payload = {
            "file": str(export.path),
            "db": str(args.db),
            "rows": len(export.rows),
            "checked_rows": export.checked_rows,
            "tolerance": export.tolerance,
            "tags": list(export.tags),
            "mismatches": export.mismatches.to_dict(orient="records"),
        }
        print(json.dumps(payload, indent=1))
    else:
        print_import(export, str(args.db))
        if args.out is not None:
            print(f"wrote {args.out}")
    return 1 if len(export.mismatches) else 0
def _thresholds(text: str) -> tuple[float, ...]:
    """``--iou 0.5,0.75`` -> (0.5, 0.75); anything else is a usage error."""
    try:
        values = tuple(float(part) for part in _names(text))
    except ValueError:
        values = ()
    if not values or any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected IoU thresholds in [0, 1] like 0.5,0.75; got {text!r}"
        )
    return values


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
    from metricalc.decompose.detection import decompose_detection
    from metricalc.decompose.terminal import print_detection, write_detection
    from metricalc.detection import load_detections, load_ground_truth

    gt = load_ground_truth(args.gt)
    dt = load_detections(args.dt, gt)
    result = decompose_detection(
        gt,
        dt,
        iou_type=args.iou_type,
        convention=args.convention,
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
def _eval(args: argparse.Namespace) -> int:
    from metricalc.experiment import run
    from metricalc.experiment.terminal import print_summaries

    result = run(
        args.benchmark,
        args.conf,
        tag=args.tag,
        overrides=args.overrides,
        overwrite=args.overwrite,
        overwrite_eval=args.overwrite_eval,
        scheduler=args.scheduler,
        workers=args.workers,
        outputs=args.outputs,
        db=args.db if args.db is not None else True,
        progress=not args.no_progress,
    )
    if result.status != "ok":
        print(f"metricalc: error: run {result.tag!r} failed: {result.error}", file=sys.stderr)
        if result.db is not None:
            print(f"recorded as failed in {result.db}", file=sys.stderr)
        return 2 if isinstance(result.exception, metricalc.MetricalcError) else 1
    if args.json:
        print(json.dumps(result.summaries, indent=2))
        return 0
    done = [w for w, ran in (("exported", result.exported), ("evaluated", result.evaluated)) if ran]
    title = f"{args.benchmark} / {result.tag} ({', '.join(done) or 'cached'})"
    print_summaries({result.tag: result.summaries}, title=title)
    if result.pairs is not None and "file" in result.pairs.dims:  # patches: per benchmark file
        from metricalc.report.terminal import print_frame

        print_frame(result.pairs.to_dataframe().reset_index(), title="benchmark files")
    print(f"outputs in {result.directory}")
    if result.db is not None:
        print(f"recorded in {result.db}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from metricalc.experiment.inspect import default_page_path, load_runs, write_page
    from metricalc.experiment.terminal import print_summaries

    inspection = load_runs(args.benchmark, args.tags, outputs=args.outputs)
    title = f"{args.benchmark}: {', '.join(inspection.tags)}"
    print_summaries(inspection.summaries, title=title)
    out = args.out or default_page_path(args.benchmark, inspection.tags, outputs=args.outputs)
    print(f"wrote {write_page(inspection, out)}")
    return 0


def _eval_arguments(parser: argparse.ArgumentParser) -> None:
    from metricalc.experiment.run import DEFAULT_OUTPUTS

    parser.add_argument("--conf", help="config file, or a shipped config name (sift, orb, ...)")
    parser.add_argument("--tag", help="experiment name (default: the config name)")
    parser.add_argument("--overwrite", action="store_true", help="redo export and evaluation")
    parser.add_argument(
        "--overwrite_eval",
        "--overwrite-eval",
        dest="overwrite_eval",
        action="store_true",
        help="redo the evaluation on the cached predictions",
    )
    parser.add_argument(
        "--scheduler",
        default="threads",
        help="threads (default), processes, synchronous, or a dask scheduler address",
    )
    parser.add_argument("--workers", type=int, help="local workers (default: CPU count)")
    parser.add_argument(
        "--outputs", type=Path, default=DEFAULT_OUTPUTS, help="outputs root (default: outputs)"
    )
    parser.add_argument(
        "--db",
        type=Path,
        help="results database the run is recorded in (default: <outputs>/metricalc.sqlite)",
    )
    parser.add_argument("--json", action="store_true", help="print summaries.json")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides (after the options)"
    )


def _patches_make_dataset(args: argparse.Namespace) -> int:
    from metricalc.keypoints.synthetic import QUICK_SCENES
    from metricalc.patches.synthetic import make_patch_dataset

    scenes = _names(args.scenes) if args.scenes else (QUICK_SCENES if args.quick else None)
    given = {"size": args.size, "max_patches": args.max_patches}
    sizes = {k: v for k, v in given.items() if v is not None}  # else the library's defaults
    dataset = make_patch_dataset(
        args.dir, scenes=scenes, seed=args.seed, progress=not args.no_progress, **sizes
    )
    total = sum(dataset.counts.values())
    print(f"{len(dataset.sequences)} sequences in {args.dir}: {total} patches in each of the 16 "
          "images (ref, e1..e5, h1..h5, t1..t5)")  # fmt: skip
    return 0


def _patches_make_benchmark(args: argparse.Namespace) -> int:
    from metricalc.patches.benchmark import make_benchmark

    paths = make_benchmark(
        args.patches,
        args.out,
        split=args.split,
        n_sequences=args.sequences,
        seed=args.seed,
        difficulty=args.difficulty,
        queries_per_sequence=args.queries_per_sequence,
    )
    print(f"wrote {paths[0]} and {paths[1].name}")
    return 0


def _patches_describe(args: argparse.Namespace) -> int:
    from metricalc.patches.describe import describe_dataset

    written = describe_dataset(
        args.patches, args.out, method=args.method, format=args.format,
        progress=not args.no_progress,
    )  # fmt: skip
    print(f"wrote {len(written)} {args.method} descriptor files to {args.out}")
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
    pe.add_argument("--results", type=Path, nargs="+", required=True,
                    help=".results file, or results folders (one per descriptor)")  # fmt: skip
    pe.add_argument("--out", type=Path, help="write the QueryCube of the folders (.nc)")
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

    ev_run = verbs.add_parser(
        "eval", help="experiment runs: export predictions once, evaluate the cache"
    )
    benchmarks = ev_run.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    hpatches = benchmarks.add_parser(
        "hpatches", help="image sequences: keypoints, matches, homography estimation"
    )
    _eval_arguments(hpatches)
    hpatches.set_defaults(run=_eval)
    patch_run = benchmarks.add_parser(
        "patches", help="patch and image retrieval (HPatches ECCV 2016): descriptors, top-51 lists"
    )
    _eval_arguments(patch_run)
    patch_run.set_defaults(run=_eval)

    _add_inspect_verb(verbs)

    metrics = verbs.add_parser("metrics", help="the DescriptorWorkbench metric set of a cube")
    metrics.add_argument("cube", type=Path)
    metrics.add_argument("--json", action="store_true", help="descriptor -> {metric -> value}")
    metrics.add_argument("--k", type=_cutoffs, default=(1, 5, 10), help="cut-offs, e.g. 1,5,10")
    metrics.set_defaults(run=_metrics)
    _add_db_verbs(verbs)

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
    dd.add_argument("--iou", type=_thresholds, help="IoU thresholds, e.g. 0.5,0.75 (default "
                    "0.50:0.95 for coco, 0.5 for decompovision)")
    dd.add_argument("--mask-iou", type=float, help="mask IoU threshold of S|C,L (segm)")
    dd.add_argument("--ap-method", choices=metricalc.AP_METHODS, default="coco101")
    dd.add_argument("--json", action="store_true", help="print JSON (stats + decomposition)")
    dd.add_argument("--out", type=Path, help="folder for decomposition.json and the figures")
    dd.add_argument("--no-progress", action="store_true", help="no progress bars")
    dd.set_defaults(run=_decompose_detection)
    dk = decompose_verbs.add_parser("keypoints", help="keypoint matching: detector or descriptor?")
    dk.add_argument("cube", type=Path, help="a QueryCube (.nc)")
    dk.add_argument("--confidence", choices=("distance", "ratio"), default="distance",
                    help="confidence of a match: -NN distance or -ratio test value")
    dk.add_argument("--ap-method", choices=metricalc.AP_METHODS, default="coco101")
    dk.add_argument("--json", action="store_true", help="print JSON")
    dk.add_argument("--out", type=Path, help="folder for decomposition.json and the figures")
    dk.set_defaults(run=_decompose_keypoints)

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

    report = verbs.add_parser(
        "report", help="render a study (reports/<study>.yaml): tables, tests, figures, HTML"
    )
    report.add_argument("study", type=Path, help="study specification (YAML)")
    report.add_argument("--out", type=Path, help="output folder (default: reports/<study>/)")
    report.add_argument("--no-progress", action="store_true", help="no progress bars")
    report.set_defaults(run=_report)
    return parser


def _add_inspect_verb(verbs: argparse._SubParsersAction) -> None:
    """``metricalc inspect <benchmark> TAG ...`` (summaries side by side, the per-pair page)."""
    from metricalc.experiment.run import BENCHMARKS, DEFAULT_OUTPUTS

    inspect = verbs.add_parser(
        "inspect", help="compare runs: summaries side by side, an interactive per-pair page"
    )
    inspect.add_argument("benchmark", choices=sorted(BENCHMARKS), help="the benchmark of the runs")
    inspect.add_argument(
        "tags", nargs="+", metavar="TAG", help="experiment tags (the first is the reference)"
    )
    inspect.add_argument(
        "--outputs", type=Path, default=DEFAULT_OUTPUTS, help="outputs root (default: outputs)"
    )
    inspect.add_argument(
        "--out",
        type=Path,
        help="HTML page to write (default: <outputs>/inspect/<benchmark>/<tag1>_vs_<tag2>.html)",
    )
    inspect.set_defaults(run=_inspect)


def _add_db_verbs(verbs: argparse._SubParsersAction) -> None:
    """``metricalc db list | show | export | import-workbench`` (the results database)."""
    from metricalc.store.database import DEFAULT_DB
    from metricalc.store.exports import FORMATS
    from metricalc.store.frames import FRAME_TABLES
    from metricalc.store.workbench import MAP_TOLERANCE

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"database file (default {DEFAULT_DB})"
    )
    db = verbs.add_parser("db", help="the results database: list, show, export, import")
    db_verbs = db.add_subparsers(dest="db_verb", metavar="VERB", required=True)
    listing = db_verbs.add_parser("list", parents=[common], help="the recorded experiments")
    listing.add_argument("--benchmark", help="only this benchmark")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_db_list)
    show = db_verbs.add_parser("show", parents=[common], help="one experiment and its results")
    show.add_argument("tag")
    show.add_argument("--benchmark", help="needed when several benchmarks have the tag")
    show.add_argument("--scenes", action="store_true", help="also the per-scene rows")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=_db_show)
    export = db_verbs.add_parser("export", parents=[common], help="a table as CSV, JSON, Parquet")
    export.add_argument("--format", choices=FORMATS, required=True)
    export.add_argument("--out", type=Path, help="file to write (default: stdout, csv/json)")
    export.add_argument("--table", choices=FRAME_TABLES, default="results")
    export.add_argument("--benchmark", help="only this benchmark")
    export.add_argument("--tag", action="append", help="only this tag (repeatable)")
    export.set_defaults(run=_db_export)
    wb = db_verbs.add_parser(
        "import-workbench", parents=[common], help="import a DescriptorWorkbench export CSV"
    )
    wb.add_argument("file", type=Path)
    wb.add_argument("--out", type=Path, help="write the descriptor x scene cube (.nc)")
    wb.add_argument("--tag-prefix", default="dw-", help="tags are <prefix><experiment_id>")
    wb.add_argument("--overwrite", action="store_true", help="replace clashing earlier imports")
    wb.add_argument(
        "--tolerance", type=float, default=MAP_TOLERANCE, help="largest |file - recomputed| mAP"
    )
    wb.add_argument("--json", action="store_true", help="print JSON")
    wb.set_defaults(run=_db_import_workbench)


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
