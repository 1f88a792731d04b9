"""How the built-in benchmark ranks the built-in descriptors, next to real HPatches anchors.

Run: ``python benchmarks/synthetic_calibration.py DIR [--scenes a,b] [--seed 0] [--size 640]``

Writes (or reuses) the built-in synthetic benchmark in ``DIR``
(:func:`metricalc.datasets.make_synthetic_dataset`), evaluates every method of
:data:`metricalc.keypoints.BUILTIN_METHODS` on SIFT's keypoints (locked, 2000 keypoints, 40 px
border, tau 3 px, no verification / retrieval: the protocol of ``metricalc demo``) and prints
``true_map_micro``, ``viewpoint_map`` and ``illumination_map`` per method, then the same three
numbers measured by DescriptorWorkbench on 12 real HPatches sequences (6 ``i_``, 6 ``v_``) with
the same protocol. The same figures come from the command line::

    metricalc keypoints make-dataset DIR --seed 0
    metricalc keypoints eval --data DIR --locked sift --out cube.nc --no-bojanic
    metricalc metrics cube.nc
"""

from __future__ import annotations

import argparse
import sys
import time

from metricalc.datasets.anchors import REAL_HPATCHES_ANCHORS
from metricalc.datasets.sequences import make_synthetic_dataset
from metricalc.keypoints import BUILTIN_METHODS
from metricalc.keypoints.pipeline import EvaluationSettings, evaluate_sequences
from metricalc.metrics import metric_set

COLUMNS = ("true_map_micro", "viewpoint_map", "illumination_map")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="dataset folder (new, or written by make_synthetic_dataset)")
    parser.add_argument("--scenes", help="comma-separated photographs / scenes (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=640)
    args = parser.parse_args(argv)

    start = time.perf_counter()
    scenes = args.scenes.split(",") if args.scenes else None
    sequences = make_synthetic_dataset(args.root, scenes=scenes, seed=args.seed, size=args.size)
    generated = time.perf_counter() - start
    settings = EvaluationSettings(tuple(BUILTIN_METHODS), "locked:sift", bojanic=False)
    cube = evaluate_sequences(sequences, settings)
    metrics = metric_set(cube)
    evaluated = time.perf_counter() - start - generated

    print(f"{len(sequences)} scenes, seed {args.seed}, size {args.size}; locked SIFT keypoints")
    print(f"{'descriptor':<26}" + "".join(f"{name:>18}" for name in COLUMNS))
    for descriptor in metrics["descriptor"].values:
        row = metrics.sel(descriptor=descriptor)
        print(f"{descriptor:<26}" + "".join(f"{float(row[name]):>18.3f}" for name in COLUMNS))
    for anchor in REAL_HPATCHES_ANCHORS:  # DescriptorWorkbench, 12 real HPatches sequences
        name = f"{anchor.name} (real HPatches)"
        print(f"{name:<26}" + "".join(f"{getattr(anchor, c):>18.3f}" for c in COLUMNS))
    print(f"generation {generated:.1f} s (0 when reused), evaluation {evaluated:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
