"""The weighted pose AUC over all bootstrap resamples at once against a loop per resample.

Run: ``python benchmarks/bench_pose_compare.py [--pairs 1500] [--resamples 2000]
[--methods 2]``

Errors of ``--pairs`` image pairs (MegaDepth-1500's size by default; exponential errors with
10 % failures) and ``--resamples`` multinomial weights over the pairs (every pair its own
cluster, as a pair list without scenes). Timed, for the AUC at 10 degrees:

- **vectorised**: :func:`metricalc.benchmarks.twoview.accuracy.weighted_pose_auc` of every resample
  in one call
  (what :class:`metricalc.stats.statistics.UnitStatistic` runs, chunk by chunk);
- **loop**: per resample, the pairs repeated by their weights (``np.repeat``) and
  :func:`metricalc.benchmarks.twoview.accuracy.pose_auc`, the obvious way.

Prints both times, their ratio, the largest difference of the two results, and the wall time of
``compare_pose`` on ``--methods`` methods (every pair of methods, the four columns, 10,000
resamples and swap patterns, the defaults of ``metricalc compare POSE.nc``).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import xarray as xr
from timing import best_time, integer_options

from metricalc.benchmarks.twoview.accuracy import pose_auc, weighted_pose_auc
from metricalc.benchmarks.twoview.statistic import compare_pose


def main(argv: list[str] | None = None) -> int:
    options = integer_options(__doc__ or "", argv, pairs=1500, resamples=2000, methods=2)
    rng = np.random.default_rng(0)
    errors = rng.exponential(8.0, size=(options.methods, options.pairs))
    errors[rng.random(errors.shape) < 0.1] = np.inf
    weights = rng.multinomial(options.pairs, np.full(options.pairs, 1 / options.pairs),
                              size=options.resamples).astype(np.float64)
    vectorised = best_time(lambda: weighted_pose_auc(errors[0], weights, 10.0), repeat=3)
    loop = best_time(lambda: [pose_auc(np.repeat(errors[0], w.astype(int)), [10.0])
                              for w in weights], repeat=1)
    fast = weighted_pose_auc(errors[0], weights, 10.0)
    slow = np.array([pose_auc(np.repeat(errors[0], w.astype(int)), [10.0])[0] for w in weights])
    print(f"{options.pairs:,} pairs x {options.resamples:,} resamples, AUC@10")
    print(f"vectorised {vectorised:.3f} s, loop {loop:.3f} s, loop / vectorised "
          f"{loop / vectorised:.1f}; largest difference {np.abs(fast - slow).max():.2e}")
    results = xr.Dataset(
        {"pose_error": (("descriptor", "pair"), errors)},
        coords={"descriptor": [f"m{k}" for k in range(options.methods)],
                "pair": [f"p{k}" for k in range(options.pairs)]},
    )
    start = time.perf_counter()
    compare_pose(results)
    print(f"compare_pose, {options.methods} methods, 4 columns, 10,000 resamples: "
          f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
