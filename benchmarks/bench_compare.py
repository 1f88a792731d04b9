"""``compare`` with its defaults against a bare NumPy sign-flip randomization of the same size.

Run: ``python benchmarks/bench_compare.py [--queries 1000000] [--descriptors 4]
[--resamples 10000] [--profile 0]``

A locked-keypoint cube of 4 descriptors x 1,000,000 queries holds realistic AP values (from rank
statistics whose ``better`` counts follow a log-normal law shared through a per-query difficulty,
with ties for every other descriptor: the differences have ties and many exact zeros).
``metricalc.stats.compare(cube)`` runs with the defaults of ``compare`` and of
``metricalc compare CUBE``: every pair of descriptors (6 comparisons), ``test="auto"`` (here the
paired randomization test), 10,000 sign flips, Holm, ``interval="auto"`` (here, above 100,000
paired units, the Student t interval).

The floor, timed in the same run: the sign-flip randomization test of the same 6 x 1,000,000
unit differences with the same number of permutations, written plainly with NumPy: random signs
in blocks of permutations, the mean of the signed differences of every comparison as one matrix
product, and the count of means at least as far from zero as the observed one,
:math:`p = (b + 1) / (m + 1)`.

The floor runs in one thread with single-threaded BLAS: its matrix products are small (a block
of 256 x 4096 signs times 6 columns), and multi-threaded BLAS spends more time synchronising its
threads than multiplying (5-10x slower on a busy 2-core machine). ``compare`` runs its blocks
in threads of its own (up to one per core).

Prints the wall and CPU time (every thread of the process) of each and the ratios to the floor
(the done-when of issue 20: at most 1.5): ``compare`` with its defaults, and with the BCa
bootstrap interval asked for (``interval="bca"``, ``n_resamples`` resamples on top of the sign
flips), and the time of building the units. ``--profile 1`` prints the top of a cProfile of
``compare(cube)``.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits
from timing import integer_options

from metricalc import cube as qc
from metricalc.stats import compare, unit_values

BARE_PERMUTATIONS = 256
BARE_UNITS = 4096
"""A block of random signs in the floor: 256 permutations x 4096 units (8 MB of float64)."""


def realistic_cube(n_queries: int, n_descriptors: int, rng: np.random.Generator) -> Any:
    """A locked-keypoint cube of realistic AP values (ties, many equal values across systems)."""
    difficulty = rng.normal(size=n_queries)
    better, ties = [], []
    for j in range(n_descriptors):
        log_rank = rng.normal(0.5 + 0.15 * j + 1.2 * difficulty, 1.0)
        better.append(np.maximum(np.floor(np.exp(log_rank)).astype(np.int64) - 1, 0))
        ties.append(rng.poisson(0.3 if j % 2 else 0.0, n_queries))
    per_scene = -(-n_queries // 100)
    scene = np.repeat(np.array([f"{'iv'[s % 2]}_scene{s:03d}" for s in range(100)]), per_scene)
    query = np.arange(n_queries)
    coords = {
        "scene": scene[:n_queries],
        "pair": np.array(["1-2", "1-3", "1-4", "1-5", "1-6"])[query % 5],
        "keypoint_set": np.full(n_queries, "sift"),
        "query_keypoint": query,
    }
    return qc.new_cube(
        [f"d{j}" for j in range(n_descriptors)],
        coords,
        {"better": np.vstack(better), "ties": np.vstack(ties)},
        attrs={**qc.DEFAULT_ATTRS, "keypoints": "locked:sift"},
    )


def bare_sign_flip(D: np.ndarray, permutations: int, rng: np.random.Generator) -> np.ndarray:
    """Two-sided sign-flip p-values of every row of ``D`` (comparisons x units), plainly: one
    thread, blocks of random bits (8 per random byte) turned into signs +-1, the signed sums
    of a block of permutations as one matrix product per block of units."""
    n = D.shape[1]
    Dt = np.ascontiguousarray(D.T)
    observed = np.abs(D.mean(axis=1))
    extreme = np.zeros(D.shape[0], dtype=np.int64)
    for start in range(0, permutations, BARE_PERMUTATIONS):
        size = min(BARE_PERMUTATIONS, permutations - start)
        sums = np.zeros((size, D.shape[0]))
        for first in range(0, n, BARE_UNITS):
            cols = min(BARE_UNITS, n - first)
            packed = np.frombuffer(rng.bytes(size * -(-cols // 8)), dtype=np.uint8)
            bits = np.unpackbits(packed.reshape(size, -1), axis=1, count=cols)
            sums += (bits * 2.0 - 1.0) @ Dt[first : first + cols]
        extreme += (np.abs(sums / n) >= observed).sum(axis=0)
    p: np.ndarray = (extreme + 1) / (permutations + 1)
    return p


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall time, CPU time (every thread of the process) and result of ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def line(label: str, wall: float, cpu: float, floor: tuple[float, float] | None = None) -> str:
    text = f"{label:<40} wall {wall:7.2f} s   cpu {cpu:7.2f} s"
    if floor is not None:
        text += f"   ratio wall {wall / floor[0]:.2f}, cpu {cpu / floor[1]:.2f}"
    return text


def main(argv: list[str] | None = None) -> int:
    args = integer_options(
        __doc__ or "", argv, queries=1_000_000, descriptors=4, resamples=10_000, profile=0
    )
    cube = realistic_cube(args.queries, args.descriptors, np.random.default_rng(0))
    wall, cpu, units = timed(lambda: unit_values(cube))
    values = units.values
    k = values.shape[0]
    D = np.vstack([values[i] - values[j] for i in range(k) for j in range(i + 1, k)])
    print(
        f"{args.queries:,} queries x {args.descriptors} descriptors: {len(D)} comparisons "
        f"(every pair), {np.mean(D == 0):.0%} of the differences zero; "
        f"{args.resamples:,} permutations / resamples; {os.cpu_count()} cores"
    )
    with threadpool_limits(limits=1, user_api="blas"):
        floor_wall, floor_cpu, p_bare = timed(
            lambda: bare_sign_flip(D, args.resamples, np.random.default_rng(1))
        )
    floor = (floor_wall, floor_cpu)
    print(line("bare NumPy sign flips (one thread)", *floor))
    print(line("  unit_values (part of every compare)", wall, cpu))
    for interval in ("auto", "bca"):
        wall, cpu, result = timed(
            lambda interval=interval: compare(
                cube, n_resamples=args.resamples, interval=interval
            )
        )
        name = f"compare (defaults: interval {result.attrs['interval']!r})"
        print(line(name if interval == "auto" else "compare, interval='bca'", wall, cpu, floor))
    print(
        f"  test {result.attrs['test']!r}; p-values compare "
        f"{np.round(result.pvalue.values, 4).tolist()}, bare {np.round(p_bare, 4).tolist()}"
    )
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: compare(cube, n_resamples=args.resamples))
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(20)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
