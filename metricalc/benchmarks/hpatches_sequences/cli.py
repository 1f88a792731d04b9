"""``metricalc demo``, ``keypoints make-dataset | export-keypoints | eval``, ``metrics``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metricalc.commands.args import (
    add_preset_option,
    chosen_scenes,
    cutoffs,
    max_keypoints,
    names,
    protocol_attrs,
    with_preset,
)
from metricalc.commands.dask_options import add_dask_options, cube_chunks, dask_session
from metricalc.errors import InvalidInputError
from metricalc.hpatches import SEQUENCE_SPLITS
from metricalc.presets import Preset
from metricalc.validation import TIE_POLICIES

Y0_POLICIES = ("negative", "ignore")
"""``metricalc.cube.Y0_POLICIES``, spelled here: the parser loads no xarray."""

KEYPOINT_PROTOCOL: dict[str, Any] = {
    "split": None,
    "max_keypoints": 2000,
    "tau": 3.0,
    "border": 40.0,
    "tie_policy": "expected",
    "y0": "negative",
    "bojanic": True,
    "image_retrieval": False,
}
"""The protocol options of ``keypoints eval`` and their defaults without ``--preset``."""

if TYPE_CHECKING:
    import xarray as xr

    from metricalc.keypoints.features import FeatureSet
    from metricalc.keypoints.pipeline import EvaluationSettings


def add_demo(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc demo``: the built-in descriptors on the built-in benchmark, with a report."""
    demo = verbs.add_parser(
        "demo", help="evaluate the built-in descriptors on the built-in benchmark"
    )
    demo.add_argument("--out", type=Path, default=Path("reports/demo"), help="output folder")
    demo.add_argument("--quick", action="store_true", help="a few scenes only (a first look)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument(
        "--image-retrieval",
        action="store_true",
        help="also image_retrieval_map on the locked cube (doubles the full demo's time)",
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(run=_demo)


def add_keypoints(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc keypoints make-dataset | export-keypoints | eval`` (HPatches sequences)."""
    keypoints = verbs.add_parser("keypoints", help="HPatches-style sequences: data and evaluation")
    keypoint_verbs = keypoints.add_subparsers(dest="keypoints_verb", metavar="VERB", required=True)
    make = keypoint_verbs.add_parser("make-dataset", help="write the built-in synthetic benchmark")
    make.add_argument("dir", type=Path)
    make.add_argument("--scenes", help="comma-separated photographs or scene names")
    make.add_argument("--quick", action="store_true", help="the few scenes of --quick runs")
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(run=_make_dataset)

    export = keypoint_verbs.add_parser(
        "export-keypoints",
        help="write a detector's kept keypoints per image, for your own descriptor to describe",
    )
    export.add_argument(
        "--data", type=Path, required=True, help="sequences folder (HPatches layout)"
    )
    export.add_argument(
        "--detector", default="sift", help="built-in method whose detector finds them"
    )
    export.add_argument("--out", type=Path, required=True, help="folder: <scene>/1.npz .. 6.npz")
    export.add_argument("--border", type=float, default=40.0, help="border exclusion in px")
    export.add_argument(
        "--max-keypoints", type=max_keypoints, default=2000, help="the strongest kept (0: all)"
    )
    export.add_argument("--no-progress", action="store_true", help="no progress bars")
    export.set_defaults(run=_export_keypoints)

    ev = keypoint_verbs.add_parser("eval", help="evaluate descriptors into a QueryCube")
    ev.add_argument("--data", type=Path, required=True, help="sequences folder (HPatches layout)")
    add_preset_option(
        ev,
        "keypoints eval",
        "a paper's or tool's protocol (docs/presets.md): it sets the options below as defaults; "
        "options you give still win",
    )
    ev.add_argument(
        "--split",
        choices=sorted(SEQUENCE_SPLITS),
        default=argparse.SUPPRESS,
        help="evaluate these HPatches sequences only, all of which must be in --data: d2net = "
        "D2-Net's 108 (the 8 with images over 1600x1200 left out), full = all 116 (default: "
        "every sequence of --data, or the preset's)",
    )
    ev.add_argument(
        "--descriptors",
        help="comma-separated built-in methods (default: sift, rootsift, orb, brief; also "
        "dspsift, brisk, akaze, kaze, raw_patch)",
    )
    ev.add_argument("--locked", help="detector whose keypoints every descriptor describes")
    ev.add_argument(
        "--features",
        action="append",
        metavar="NAME=DIR | ROOT",
        help="your own descriptor: NAME=DIR (DIR/<scene>/1.npz .. 6.npz; repeatable; "
        "--descriptors then lists the built-in ones, default none), or one "
        "ROOT/<descriptor>/<scene>/... folder (--descriptors: which of its folders)",
    )
    ev.add_argument(
        "--max-keypoints",
        type=max_keypoints,
        default=argparse.SUPPRESS,
        help="the strongest kept (0: all) (default: 2000, or the preset's)",
    )
    ev.add_argument("--out", type=Path, required=True, help="cube file to write (.nc)")
    ev.add_argument(
        "--cache",
        type=Path,
        help="cache folder: the cube of the same data, descriptors and protocol is read from "
        "any .nc file there that records its key (e.g. the folder of `metricalc demo`), else "
        "evaluated and kept there as <key>.nc",
    )
    ev.add_argument("--tau", type=float, default=argparse.SUPPRESS,
                    help="ground-truth tolerance, px (default: 3.0, or the preset's)")  # fmt: skip
    ev.add_argument("--border", type=float, default=argparse.SUPPRESS,
                    help="border exclusion in px (default: 40.0, or the preset's)")  # fmt: skip
    ev.add_argument("--tie-policy", choices=TIE_POLICIES, default=argparse.SUPPRESS,
                    help="(default: expected, or the preset's)")  # fmt: skip
    ev.add_argument("--y0", choices=Y0_POLICIES, default=argparse.SUPPRESS,
                    help="(default: negative, or the preset's)")  # fmt: skip
    ev.add_argument(
        "--no-bojanic",
        dest="bojanic",
        action="store_false",
        default=argparse.SUPPRESS,
        help="skip verification / retrieval",
    )
    ev.add_argument(
        "--image-retrieval",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS,
        help="also DescriptorWorkbench's image retrieval (image_retrieval_map): every reference "
        "image against every image, on HPatches 116 x 695 image matchings per descriptor "
        "(default: no, or the preset's)",
    )
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.set_defaults(run=_keypoints_eval)


def add_metrics(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc metrics CUBE`` (the DescriptorWorkbench metric set)."""
    metrics = verbs.add_parser("metrics", help="the DescriptorWorkbench metric set of a cube")
    metrics.add_argument("cube", type=Path)
    metrics.add_argument("--json", action="store_true", help="descriptor -> {metric -> value}")
    metrics.add_argument("--k", type=cutoffs, default=(1, 5, 10), help="cut-offs, e.g. 1,5,10")
    add_dask_options(metrics)
    metrics.set_defaults(run=_metrics)


def _demo(args: argparse.Namespace) -> int:
    from metricalc.allocator import keep_freed_memory
    from metricalc.benchmarks.hpatches_sequences.demo import run_demo

    keep_freed_memory()  # the buffers of one image or scene serve the next (a tenth of the CPU)
    result = run_demo(
        args.out,
        quick=args.quick,
        seed=args.seed,
        image_retrieval=args.image_retrieval,
        progress=not args.no_progress,
    )
    for mode in (m for m, reused in result.reused.items() if reused):
        print(f"reused {args.out / f'cube_{mode}.nc'}: same data, descriptors and protocol")
    print(f"wrote {len(result.files)} files to {args.out} in {result.seconds:.1f} s")
    print(f"report: {result.report}")
    return 0


def _make_dataset(args: argparse.Namespace) -> int:
    from metricalc.datasets.sequences import make_synthetic_dataset

    sequences = make_synthetic_dataset(args.dir, scenes=chosen_scenes(args), seed=args.seed)
    print(f"{len(sequences)} scenes in {args.dir}")
    return 0


def _export_keypoints(args: argparse.Namespace) -> int:
    from metricalc.keypoints.features import export_keypoints

    if args.out.exists() and not args.out.is_dir():
        raise InvalidInputError(f"--out {args.out} is a file; expected a folder")
    kept = export_keypoints(
        args.data,
        args.out,
        detector=args.detector,
        max_keypoints=args.max_keypoints,
        border=args.border,
        progress=not args.no_progress,
    )
    count = sum(len(image["keypoints"]) for images in kept.values() for image in images.values())
    print(
        f"wrote {args.out}: {count} {args.detector} keypoints in {len(kept)} scenes "
        "(<scene>/1.npz .. 6.npz; add a 'descriptors' array to each)"
    )
    return 0


def _feature_folders(values: list[str]) -> tuple[dict[str, Path], Path | None]:
    """``--features`` values: NAME=DIR descriptor folders, or one ROOT of descriptor folders."""
    named: dict[str, Path] = {}
    roots: list[Path] = []
    for value in values:
        name, equals, folder = value.partition("=")
        if equals and name and not any(c in name for c in "/\\"):
            if name in named:
                raise InvalidInputError(f"--features names {name!r} twice; give each name once")
            named[name] = Path(folder)
        else:
            roots.append(Path(value))
    if roots and (named or len(roots) > 1):
        raise InvalidInputError(
            f"--features {' '.join(values)}: give NAME=DIR (one descriptor folder each, "
            "repeatable) or one ROOT folder of descriptor folders, not both or several roots"
        )
    return named, roots[0] if roots else None


def _own_features(
    args: argparse.Namespace, descriptors: list[str] | None
) -> tuple[FeatureSet, list[str]]:
    """Your own features (``--features``) and the built-in descriptors to extract next to them."""
    from metricalc.keypoints.features import BUILTIN_METHODS, load_features

    named, root = _feature_folders(args.features)
    if root is None:  # NAME=DIR: --descriptors lists the built-in ones
        return load_features(named), descriptors or []
    # --descriptors selects the descriptor folders of ROOT
    builtin = [n for n in descriptors or [] if n in BUILTIN_METHODS and not (root / n).is_dir()]
    if builtin:
        raise InvalidInputError(
            f"--descriptors {builtin[0]} names a descriptor folder of --features {root}, and "
            f"{root / builtin[0]} does not exist; to evaluate the built-in {builtin[0]} next "
            "to your features, give them as --features NAME=DIR (one per descriptor folder)"
        )
    return load_features(root, descriptors=descriptors), []


def _eval_settings(
    args: argparse.Namespace, options: dict[str, Any]
) -> tuple[EvaluationSettings, FeatureSet | None]:
    """The settings of ``keypoints eval`` (protocol ``options``: :func:`keypoint_protocol`) and
    your own features: ``external`` keypoints when your features come alone (no built-in
    descriptor and no ``--locked``)."""
    from metricalc.keypoints.features import BUILTIN_METHODS, DEFAULT_METHODS
    from metricalc.keypoints.pipeline import EvaluationSettings, keypoint_mode

    descriptors = names(args.descriptors) if args.descriptors else None
    own = None
    if args.features:
        own, descriptors = _own_features(args, descriptors)
    builtins = tuple(DEFAULT_METHODS if descriptors is None else descriptors)
    unknown = [name for name in builtins if name not in BUILTIN_METHODS]
    if unknown:
        raise InvalidInputError(
            f"--descriptors {unknown[0]}: not a built-in method (available: "
            f"{', '.join(BUILTIN_METHODS)}); evaluate your own descriptor with --features "
            f"{unknown[0]}=DIR (DIR/<scene>/1.npz .. 6.npz, see docs/features.md)"
        )
    external = own is not None and not args.locked and not builtins
    settings = EvaluationSettings(
        descriptors=builtins,
        keypoints="external" if external else keypoint_mode(args.locked),
        max_keypoints=options["max_keypoints"],
        tau=options["tau"],
        border=options["border"],
        tie_policy=options["tie_policy"],
        bojanic=options["bojanic"],
        y0=options["y0"],
        image_retrieval=options["image_retrieval"],
        seed=args.seed,
    )
    return settings, own


def keypoint_protocol(args: argparse.Namespace) -> tuple[dict[str, Any], Preset | None]:
    """The protocol options of ``keypoints eval`` (:data:`KEYPOINT_PROTOCOL`): given, else the
    ``--preset``'s, else the defaults."""
    return with_preset(args, KEYPOINT_PROTOCOL, "keypoints eval")


def _keypoints_eval(args: argparse.Namespace) -> int:
    from metricalc import cube as cubes
    from metricalc.allocator import keep_freed_memory
    from metricalc.keypoints.evaluate import check_protocol
    from metricalc.keypoints.pipeline import evaluate_sequences
    from metricalc.keypoints.sequences import load_sequences

    options, preset = keypoint_protocol(args)
    check_protocol(tau=options["tau"], border=options["border"])
    keep_freed_memory()
    if args.out.is_dir():
        raise InvalidInputError(f"--out {args.out} is a directory; expected a cube file path")
    if args.cache is not None and args.cache.exists() and not args.cache.is_dir():
        raise InvalidInputError(f"--cache {args.cache} is a file; expected a folder")
    settings, own = _eval_settings(args, options)  # a wrong name before reading the data
    sequences = load_sequences(args.data, split=options["split"])
    cube = evaluate_sequences(
        sequences,
        settings,
        own=own,
        dataset_path=str(args.data),
        progress=not args.no_progress,
        cache=args.cache,
    )
    if cube.sizes["query"] == 0:
        raise InvalidInputError(
            f"no queries: every keypoint lies within --border {options['border']:g} px of its "
            "image edge (or no descriptor could be evaluated)"
        )
    cube.attrs.update(protocol_attrs(options, preset))
    cubes.save(cube, args.out)
    shown = f" (preset {preset.name})" if preset is not None else ""
    print(
        f"wrote {args.out}: {cube.sizes['descriptor']} descriptors, {cube.sizes['query']} "
        f"queries{shown}"
    )
    return _report_failures(cube)


def _report_failures(cube: xr.Dataset) -> int:
    """Print each descriptor whose evaluation failed to stderr; 1 if any did, else 0."""
    failed = [
        str(d) for d, s in zip(cube.descriptor.values, cube.status.values, strict=True) if s != "ok"
    ]
    for name in failed:
        message = str(cube.error.sel(descriptor=name).values)
        print(f"metricalc: descriptor {name} failed: {message}", file=sys.stderr)
    return 1 if failed else 0


def _metrics(args: argparse.Namespace) -> int:
    from metricalc import cube as cubes
    from metricalc.export import metric_set_to_dict
    from metricalc.metrics import metric_set
    from metricalc.plotting.terminal import print_metric_table
    from metricalc.store.workbench_cube import open_workbench_cube, workbench_metric_set

    scenes = open_workbench_cube(args.cube)
    if scenes is not None:  # `db import-workbench --out`: per-scene values, no queries
        metrics = workbench_metric_set(scenes, k=args.k)
    else:
        with dask_session(args):
            cube = cubes.open_cube(args.cube, chunks=cube_chunks(args))
            metrics = metric_set(cube, k=args.k).compute()
            cube.close()
    if args.json:
        print(json.dumps(metric_set_to_dict(metrics), indent=2))
    else:
        print_metric_table(metrics, title=str(args.cube))
    return 0
