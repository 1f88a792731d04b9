"""Timing helpers shared by the benchmark scripts (run as ``python benchmarks/<script>.py``)."""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable, Sequence


def best_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """Smallest wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak memory allocated while ``fn`` runs (tracemalloc sees NumPy's allocations)."""
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def integer_options(
    doc: str, argv: Sequence[str] | None = None, **defaults: int
) -> argparse.Namespace:
    """The ``--name N`` options of a benchmark script (``defaults``: name -> default), its
    description the first line of ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    return parser.parse_args(argv)
