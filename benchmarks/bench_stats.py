"""Speed of :func:`metricalc.stats.compare` with the randomization test, as ratios to loops timed
in the same run.

Run: ``python benchmarks/bench_stats.py``

A locked-keypoint cube of 10 descriptors x 200,000 queries holds realistic AP values: from rank
statistics (:func:`metricalc.ap_from_rank_stats`, expected tie policy) whose ``better`` counts
follow a log-normal law shared by the descriptors through a per-query difficulty, with ties for
the "binary" descriptors; so the differences have ties and many exact zeros. ``compare`` then
tests 9 descriptors against the baseline over the 200,000 paired queries with the paired
randomization test at 10,000 sign flips, plus the 10,000-resample BCa bootstrap CI of every mean
difference, the effect sizes and the Holm correction.

References, timed in the same run:

- the randomization test as a per-permutation Python loop (draw one sign vector, one
  matrix-vector product for the 9 comparisons), timed on a subset of the permutations and
  extrapolated to 10,000;
- the bootstrap as a per-resample loop (draw n indices, average the 9 difference vectors over
  them), likewise extrapolated.

Then the peak memory of ``compare`` (tracemalloc), next to that of the cube validation it
starts with.
"""

from __future__ import annotations

import time

import numpy as np
from bench_compare import realistic_cube
from timing import best_time, peak_bytes

import metricalc as mc
from metricalc import cube as qc
from metricalc.stats import compare
from metricalc.stats.bootstrap import bca_interval
from metricalc.stats.compare import generators
from metricalc.stats.randomization import sign_flip_pvalues

N_QUERIES = 200_000
N_DESCRIPTORS = 10
N_RESAMPLES = 10_000
LOOP_PERMUTATIONS = 200
LOOP_RESAMPLES = 20


def permutation_loop(D: np.ndarray, permutations: int, rng: np.random.Generator) -> np.ndarray:
    observed = np.abs(D.sum(axis=1))
    extreme = np.zeros(D.shape[0], dtype=np.int64)
    for _ in range(permutations):
        signs = rng.integers(0, 2, size=D.shape[1]) * 2.0 - 1.0
        extreme += np.abs(D @ signs) >= observed
    return extreme


def resample_loop(D: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    means = np.empty((D.shape[0], resamples))
    for b in range(resamples):
        means[:, b] = D[:, rng.integers(0, D.shape[1], size=D.shape[1])].mean(axis=1)
    return means


def main() -> None:
    rng = np.random.default_rng(0)
    cube = realistic_cube(N_QUERIES, N_DESCRIPTORS, rng)
    ap = cube.ap.values
    D = ap[1:] - ap[0]
    distinct = np.mean([len(np.unique(row)) for row in D])
    print(
        f"cube: {N_DESCRIPTORS} descriptors x {N_QUERIES:,} queries; differences to d0: "
        f"{np.mean(D == 0):.0%} zero, {distinct:,.0f} distinct values per comparison on average"
    )

    def run() -> object:
        return compare(cube, baseline="d0", test="randomization", n_resamples=N_RESAMPLES)

    started = time.perf_counter()
    result = run()
    total = time.perf_counter() - started
    print(
        f"compare, 9 descriptors vs d0, {N_QUERIES:,} paired queries, randomization test with "
        f"{N_RESAMPLES:,} sign flips + BCa CI with {N_RESAMPLES:,} resamples: {total:.1f} s"
    )
    print(f"  mean differences {np.round(result.mean_diff.values, 4).tolist()}")

    flips, resamples = generators(0)
    flip_time = best_time(
        lambda: sign_flip_pvalues(D, n_resamples=N_RESAMPLES, rng=flips), repeat=1
    )
    boot_time = best_time(
        lambda: bca_interval(D, n_resamples=N_RESAMPLES, rng=resamples), repeat=1
    )
    print(f"  of which: sign flips {flip_time:.1f} s, bootstrap {boot_time:.1f} s")

    loop = best_time(lambda: permutation_loop(D, LOOP_PERMUTATIONS, rng), repeat=1)
    loop_total = loop * N_RESAMPLES / LOOP_PERMUTATIONS
    print(
        f"per-permutation Python loop: {loop:.2f} s for {LOOP_PERMUTATIONS} permutations, "
        f"extrapolated to {N_RESAMPLES:,}: {loop_total:.0f} s -> sign flips "
        f"{loop_total / flip_time:.0f}x faster"
    )
    loop = best_time(lambda: resample_loop(D, LOOP_RESAMPLES, rng), repeat=1)
    loop_total = loop * N_RESAMPLES / LOOP_RESAMPLES
    print(
        f"per-resample Python loop: {loop:.2f} s for {LOOP_RESAMPLES} resamples, extrapolated "
        f"to {N_RESAMPLES:,}: {loop_total:.0f} s -> bootstrap {loop_total / boot_time:.0f}x faster"
    )
    peak = peak_bytes(run)
    checking = peak_bytes(lambda: qc.validate(cube))
    print(
        f"peak memory of compare (tracemalloc): {peak / 2**20:.0f} MiB, of which "
        f"{checking / 2**20:.0f} MiB in the cube's validation (metricalc.cube.validate; the cube "
        f"holds {cube.nbytes / 2**20:.0f} MiB)"
    )
    print(f"metricalc {mc.__version__}")


if __name__ == "__main__":
    main()
