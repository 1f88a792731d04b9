"""Speed of evaluating one image pair, as a ratio against a reference timed in the same run.

Run: ``python benchmarks/bench_keypoints.py``

Evaluates one pair of 8,000 x 8,000 SIFT-like descriptors (128-D, integer values 0..255 as
OpenCV's SIFT produces) with :func:`metricalc.keypoints.pairs.evaluate_pair`: ground truth by
homography, every query's rank statistics, nearest and second-nearest neighbour, mutual check.
The reference is the bare float32 GEMM of the same two descriptor matrices (``a @ b.T``), the
floor of any exact evaluation; target within 2x. Peak temporary memory (tracemalloc) is printed
next to the size of the full distance matrix, which the chunked evaluation never materialises.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from timing import best_time, peak_bytes

from metricalc.keypoints.pairs import evaluate_pair


@dataclass(frozen=True)
class Features:
    keypoints: np.ndarray
    descriptors: np.ndarray


def main() -> None:
    rng = np.random.default_rng(0)
    n, size = 8_000, (1_200, 1_600)
    H = np.array([[0.95, 0.05, 12.0], [-0.04, 0.97, 8.0], [1e-5, -2e-5, 1.0]])
    points_a = rng.uniform([50, 50], [size[1] - 50, size[0] - 50], (n, 2))
    homogeneous = np.c_[points_a, np.ones(n)] @ H.T
    points_b = homogeneous[:, :2] / homogeneous[:, 2:] + rng.normal(0, 1.5, (n, 2))
    desc_a = rng.integers(0, 256, (n, 128)).astype(np.float32)
    desc_b = np.clip(desc_a + rng.normal(0, 20, (n, 128)), 0, 255).round().astype(np.float32)
    a, b = Features(points_a, desc_a), Features(points_b, desc_b)

    gemm = best_time(lambda: desc_a @ desc_b.T)
    ours = best_time(lambda: evaluate_pair(a, b, H, size, size, tau=3.0, border=40.0))
    peak = peak_bytes(lambda: evaluate_pair(a, b, H, size, size, tau=3.0, border=40.0))
    result = evaluate_pair(a, b, H, size, size, tau=3.0, border=40.0)

    queries = len(result["x"])
    print(f"{'measure':<46} {'time':>10}   {'reference':<24} {'ratio':>7}   target")
    print("-" * 105)
    print(
        f"{'evaluate_pair 8,000 x 8,000 SIFT (128-D)':<46} {ours * 1e3:>7.0f} ms   "
        f"{f'GEMM {gemm * 1e3:.0f} ms':<24} {ours / gemm:>6.2f}x   <= 2x of the GEMM"
    )
    print(
        f"{'  peak memory':<46} {peak / 2**20:>7.0f} MB   "
        f"{f'full matrix {n * n * 4 / 2**20:.0f} MB':<24}"
    )
    print(
        f"  {queries} queries, {int((result['n_relevant'] == 1).sum())} with a correspondence, "
        f"mean AP {np.nanmean(result['ap']):.3f}"
    )


if __name__ == "__main__":
    main()
