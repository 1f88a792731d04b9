"""Speed of the ranking kernels, as ratios against references timed in the same run.

Run: ``python benchmarks/bench_ranking.py`` (``--quick`` times scikit-learn on 1,000 queries and
extrapolates; the default times the full loop, about half a minute).

1. ``rank_stats`` on a 20,000 x 5,000 float32 distance matrix against
   (a) the one-pass floor ``(d < g[:, None]).sum(1)`` (target: within 1.5x), and
   (b) a Python loop calling ``sklearn.metrics.average_precision_score`` per query
   (target: >= 500x).
2. Multi-relevant ``average_precision(method="ir")`` over 100,000 x 100 scores against one
   ``np.argsort`` of the same matrix (target: within 2x), continuous and tie-heavy scores.

Peak temporary memory (tracemalloc, which sees NumPy allocations) is printed next to the input
size to show that chunking bounds it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.metrics import average_precision_score
from timing import best_time, peak_bytes

import metricalc as mc


def sklearn_loop_seconds(d: np.ndarray, g: np.ndarray, n_timed: int) -> float:
    """Time scikit-learn's AP per query over ``n_timed`` queries, scaled to all queries."""
    y_true = np.zeros(d.shape[1], dtype=bool)
    start = time.perf_counter()
    for q in range(n_timed):
        y_true[:] = False
        y_true[g[q]] = True
        average_precision_score(y_true, -d[q])
    return (time.perf_counter() - start) * d.shape[0] / n_timed


def row(name: str, seconds: float, reference: str, ratio: float, target: str) -> None:
    print(f"{name:<44} {seconds * 1e3:>10.1f} ms   {reference:<30} {ratio:>9.2f}x   {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="time scikit-learn on 1,000 queries")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    print(f"{'measure':<44} {'time':>13}   {'reference':<30} {'ratio':>10}   target")
    print("-" * 120)

    n_queries, n_candidates = 20_000, 5_000
    d = rng.random((n_queries, n_candidates), dtype=np.float32)
    g = rng.integers(0, n_candidates, n_queries)
    g_dist = d[np.arange(n_queries), g]
    floor = best_time(lambda: (d < g_dist[:, None]).sum(1))
    ours = best_time(lambda: mc.rank_stats(d, g))
    row(
        "rank_stats 20,000 x 5,000 float32",
        ours,
        f"floor {floor * 1e3:.1f} ms",
        ours / floor,
        "<= 1.5x of floor",
    )
    n_timed = 1_000 if args.quick else n_queries
    sklearn_seconds = sklearn_loop_seconds(d, g, n_timed)
    note = "" if n_timed == n_queries else f" (from {n_timed} queries)"
    row(
        "rank_stats vs sklearn AP loop",
        ours,
        f"sklearn {sklearn_seconds:.1f} s{note}",
        sklearn_seconds / ours,
        ">= 500x faster",
    )
    peak = peak_bytes(lambda: mc.rank_stats(d, g))
    print(
        f"{'  peak memory of rank_stats':<44} {peak / 2**20:>10.1f} MB   "
        f"input {d.nbytes / 2**20:.0f} MB"
    )

    n_lists, n_items = 100_000, 100
    for label, scores in (
        ("continuous", rng.random((n_lists, n_items))),
        ("tie-heavy (10 levels)", rng.integers(0, 10, (n_lists, n_items)).astype(np.float64)),
    ):
        y_true = rng.random((n_lists, n_items)) < 0.05
        sort = best_time(lambda s=scores: np.argsort(s, axis=-1))
        ap = best_time(lambda y=y_true, s=scores: mc.average_precision(y, s, method="ir"))
        row(
            f"ir AP 100,000 x 100, {label}",
            ap,
            f"argsort {sort * 1e3:.1f} ms",
            ap / sort,
            "<= 2x of argsort",
        )
        peak = peak_bytes(lambda y=y_true, s=scores: mc.average_precision(y, s, method="ir"))
        print(
            f"{'  peak memory of ir AP':<44} {peak / 2**20:>10.1f} MB   "
            f"input {(scores.nbytes + y_true.nbytes) / 2**20:.0f} MB"
        )


if __name__ == "__main__":
    main()
