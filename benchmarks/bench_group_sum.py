"""Per-group sums of a cube variable: metricalc's ``group_sum`` against xarray's groupby.

Run: ``python benchmarks/bench_group_sum.py [--queries 1000000] [--descriptors 4]``

The metric set sums every per-query variable by scene and by image pair many times over; the
reference is ``values.groupby(key).sum()``, timed in the same run on the same values, and the
two results are checked equal first. Prints the time of each and their ratio.
"""

from __future__ import annotations

import sys

import numpy as np
import xarray as xr
from timing import best_time, integer_options

from metricalc.metrics.reductions import group_sum


def main(argv: list[str] | None = None) -> int:
    args = integer_options(__doc__ or "", argv, queries=1_000_000, descriptors=4)
    rng = np.random.default_rng(0)
    scenes = np.array([f"v_scene{i:03d}" for i in range(100)])
    scene = scenes[np.sort(rng.integers(0, len(scenes), args.queries))]
    pair = np.char.add(np.char.add(scene, "/1-"), rng.integers(2, 7, args.queries).astype(str))
    values = xr.DataArray(
        rng.random((args.descriptors, args.queries)),
        dims=("descriptor", "query"),
        coords={"scene": ("query", scene), "pair": ("query", pair)},
    )
    print(f"{args.queries:,} queries x {args.descriptors} descriptors")
    for key in ("scene", "pair"):
        xr.testing.assert_allclose(group_sum(values, key), values.groupby(key).sum())
        ours = best_time(lambda key=key: group_sum(values, key), repeat=3)
        reference = best_time(lambda key=key: values.groupby(key).sum(), repeat=3)
        print(
            f"by {key:<6} group_sum {ours:.3f} s   xarray groupby {reference:.3f} s   "
            f"ratio {ours / reference:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
