"""Speed of experiment runs, as ratios against references timed in the same run.

Run: ``python benchmarks/bench_experiment.py [--workers N]``

1. One image pair's homography metrics (:func:`pair_homography_metrics`: DLT, robust estimate,
   symmetric errors, corner errors) on 2,000 keypoints with 1,000 matches (30 % outliers),
   against the bare ``cv2.findHomography(RANSAC)`` call on the same matches: the overhead of
   everything else. Timed with one BLAS thread, as runs execute it (the scheduler limits BLAS),
   and, for comparison, with BLAS's default threads.
2. A quick run of the built-in benchmark (4 scenes, 20 image pairs; export and evaluation, in a
   temporary outputs folder) with ``--scheduler threads`` against ``--scheduler synchronous``:
   the speed-up of running the per-pair work in parallel.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import cv2
import numpy as np
from threadpoolctl import threadpool_limits
from timing import best_time

from metricalc.experiment import run
from metricalc.keypoints.homography import pair_homography_metrics


def _homography_pair() -> tuple[float, float]:
    rng = np.random.default_rng(0)
    H = np.array([[0.95, 0.05, 12.0], [-0.04, 0.97, 8.0], [1e-5, -2e-5, 1.0]])
    k0 = rng.uniform(40, 600, (2_000, 2))
    h = np.c_[k0, np.ones(len(k0))] @ H.T
    k1 = h[:, :2] / h[:, 2:] + rng.normal(0, 0.5, k0.shape)
    matches = np.full(len(k0), -1)
    matches[:1_000] = np.arange(1_000)
    wrong = rng.random(1_000) < 0.3
    matches[:1_000][wrong] = rng.integers(1_000, 2_000, wrong.sum())
    p0, p1 = k0[:1_000], k1[matches[:1_000]]
    bare = best_time(lambda: cv2.findHomography(p0, p1, cv2.RANSAC, 3.0, maxIters=2000))
    ours = best_time(lambda: pair_homography_metrics(k0, k1, matches, H, (640, 640)))
    return ours, bare


def _quick_run(scheduler: str, workers: int) -> float:
    with tempfile.TemporaryDirectory() as outputs:
        overrides = ["data.quick=true", "data.size=480", "model.max_keypoints=1000"]
        run("hpatches", "sift", overrides=overrides, outputs=outputs, scheduler="synchronous",
            tag="warm-up")  # generates the benchmark data outside the timing
        start = time.perf_counter()
        result = run("hpatches", "sift", overrides=overrides, outputs=outputs,
                     scheduler=scheduler, workers=workers)
        result.raise_for_status()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    for label, threads in (("1 BLAS thread", 1), ("default BLAS threads", None)):
        with threadpool_limits(limits=threads):
            ours, bare = _homography_pair()
        print(f"homography metrics of one pair ({label}): {1e3 * ours:.2f} ms, bare "
              f"findHomography {1e3 * bare:.2f} ms -> {ours / bare:.2f}x")
    synchronous = _quick_run("synchronous", 1)
    threads = _quick_run("threads", args.workers)
    print(f"quick run (20 pairs, export + evaluation): synchronous {synchronous:.1f} s, threads "
          f"({args.workers} workers) {threads:.1f} s -> speed-up {synchronous / threads:.2f}x")


if __name__ == "__main__":
    main()
