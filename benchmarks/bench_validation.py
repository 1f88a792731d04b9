"""Cost of declared parameter checks: a public function called with and without its
``validate_params`` wrapper (the undecorated function is ``f.__wrapped__``).

Run: ``python benchmarks/bench_validation.py [--calls 20000]``

For a few public functions on the smallest inputs (where the check weighs most), prints the
time of one call through the wrapper and of the function alone, in microseconds, the
difference (the checks) and the ratio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import integer_options

import metricalc as mc

BETTER, TIES = np.array([0, 1, 2, 4]), np.array([0, 1, 0, 2])
CALLS: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = {
    "tpr of counts": (mc.tpr, ({"tp": 3, "fn": 1},), {"zero_division": 0}),
    "precision_at_k, 4 queries": (mc.precision_at_k, (BETTER, TIES, [1, 5]), {"zero_division": 0}),
    "average_precision, 5 items": (
        mc.average_precision, ([1, 0, 1, 1, 0], [0.9, 0.8, 0.7, 0.7, 0.2]), {"method": "ir"}
    ),
}


def per_call(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             calls: int) -> float:
    """Best of three runs of ``calls`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            function(*args, **kwargs)
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    options = integer_options(__doc__ or "", calls=20_000)
    print(f"{'call':<28}{'declared µs':>12}{'bare µs':>10}{'checks µs':>11}{'ratio':>8}")
    for name, (function, args, kwargs) in CALLS.items():
        declared = per_call(function, args, kwargs, options.calls)
        bare = per_call(function.__wrapped__, args, kwargs, options.calls)  # type: ignore[attr-defined]
        print(f"{name:<28}{declared:>12.2f}{bare:>10.2f}{declared - bare:>11.2f}"
              f"{declared / bare:>8.3f}")


if __name__ == "__main__":
    main()
