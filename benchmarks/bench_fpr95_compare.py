"""FPR95 of cluster-bootstrap resamples, sorted once, against materialising every resample.

Run: ``python benchmarks/bench_fpr95_compare.py [--pairs 100000] [--points 30000]
[--resamples 200] [--loop 20]``

Pair records of ``--pairs`` pairs (PhotoTour's test file has 100,000, half matching) whose first
patches belong to ``--points`` 3D points, distances of two descriptors rounded to 3 decimals (so
ties occur), ``--resamples`` multinomial weights over the points. Timed, for HardNet's FPR95:

- **sorted once**: :meth:`metricalc.benchmarks.phototour.statistic.Fpr95Statistic.weighted` of every
  resample (weighted cumulative sums along the order sorted once, blocks of resamples);
- **loop**: per resample (the first ``--loop`` of them), the pairs repeated by their weights
  (``np.repeat``) and :func:`metricalc.core.operating.fpr_at_recall` of the copies, the obvious
  way, which sorts every resample.

Prints both times per resample, their ratio, the largest difference of the two results, and the
wall time of ``compare_fpr95`` with 1,000 resamples (the bootstrap, the leave-one-point-out
jackknife of the BCa interval, and 1,000 random swap patterns).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import xarray as xr
from timing import best_time, integer_options

from metricalc.benchmarks.phototour.statistic import compare_fpr95, fpr95_statistic
from metricalc.core.operating import fpr_at_recall


def main(argv: list[str] | None = None) -> int:
    options = integer_options(__doc__ or "", argv, pairs=100_000, points=30_000, resamples=200,
                              loop=20)  # fmt: skip
    rng = np.random.default_rng(0)
    n = options.pairs
    labels = np.arange(n) % 2 == 0
    shift = np.array([[1.0], [1.2]])
    distances = np.round(rng.gamma(2.0, 0.2, (2, n)) + shift * ~labels, 3)
    points = rng.integers(0, options.points, n)
    records = xr.Dataset(
        {"distance": (("descriptor", "pair"), distances)},
        coords={"descriptor": ["a", "b"], "label": ("pair", labels.astype(np.int8)),
                "cluster": ("pair", points.astype(str))},
        attrs={"variant": "hardnet", "recall": 0.95},
    )  # fmt: skip
    statistic = fpr95_statistic(records)
    k = len(statistic.clusters)
    weights = rng.multinomial(k, np.full(k, 1 / k), size=options.resamples).astype(np.float64)
    sorted_once = best_time(lambda: statistic.weighted(0, weights), repeat=2)
    loop_weights = weights[: options.loop, statistic.pair_clusters].astype(np.int64)

    def loop() -> list[float]:
        return [fpr_at_recall(labels[index], -distances[0, index])
                for index in (np.repeat(np.arange(n), w) for w in loop_weights)]  # fmt: skip

    slow_time = best_time(loop, repeat=1)
    difference = np.abs(statistic.weighted(0, weights[: options.loop]) - loop()).max()
    fast, slow = sorted_once / options.resamples, slow_time / options.loop
    print(f"{n:,} pairs, {k:,} points, HardNet FPR95 per resample")
    print(f"sorted once {1000 * fast:.2f} ms, loop {1000 * slow:.2f} ms, loop / sorted once "
          f"{slow / fast:.1f}; largest difference {difference:.2e}")
    start = time.perf_counter()
    compare_fpr95(records, n_resamples=1000)
    print(f"compare_fpr95, 2 descriptors, {k:,} points, 1,000 resamples: "
          f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
