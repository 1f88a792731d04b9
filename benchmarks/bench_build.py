"""Building a QueryCube from a long table: ``cube.from_dataframe`` against a bare NumPy conversion.

Run: ``python benchmarks/bench_build.py [--queries 1000000] [--descriptors 4] [--repeat 3]``

The table (:func:`long_table`) is what a keypoint evaluation exports: 100 scenes (half ``i_``,
half ``v_``) x 5 image pairs x the keypoints of each pair, one row per (descriptor, query), so
``queries x descriptors`` rows (4M at the default size) with the columns ``descriptor``,
``scene``, ``pair`` (pandas strings), ``query``, ``x``, ``y``, ``better``, ``ties``,
``nn_correct``, ``gt_distance``, ``nn_distance``. 10% of the queries have no relevant keypoint
(``better = ties = -1``). ``from_dataframe`` derives ``n_relevant`` and ``ap`` and fills the
four variables the table lacks (``nn2_distance``, ``nn_error``, ``nn_mutual``,
``n_candidates``) with their sentinels.

Two steps:

- ``numpy``: the floor, ``df[column].to_numpy()`` for every column, strings converted to ``<U``;
- ``build``: ``metricalc.cube.from_dataframe(df)``.

Each step's peak memory is measured in its own child process (``multiprocessing`` with
``spawn``) that first runs the step once on a small table (imports, caches), then builds the
table, resets its peak RSS (``/proc/self/clear_refs``) and runs the step once. The times are
measured in a third child, warmed up the same way, that runs the two steps in turn on one table
``--repeat`` times and keeps each step's best time: on a machine shared with other jobs, both
steps then see the same load, and their ratio does not move with it.

Printed: the wall time of each and their ratio (target <= 3), and each step's peak RSS above the
RSS after loading the table, in multiples of the *numeric payload*: the bytes of the cube's
numeric variables and coordinates (the 11 ``(descriptor, query)`` variables, ``query_keypoint``,
``x``, ``y``, ``processing_time_ms``; 292 MB at 1M x 4). Target: build peak <= 2.5x payload.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow
from timing import integer_options

N_SCENES, N_PAIRS, NO_MATCH = 100, 5, 0.1


def long_table(n_queries: int, n_descriptors: int = 4, seed: int = 0) -> pd.DataFrame:
    """One row per (descriptor, query): 100 scenes x 5 pairs x ``n_queries / 500`` keypoints."""
    rng = np.random.default_rng(seed)
    per_pair = -(-n_queries // (N_SCENES * N_PAIRS))
    unit = np.arange(n_queries) // per_pair
    scenes = np.array([("i_" if s % 2 else "v_") + f"scene{s:03d}" for s in range(N_SCENES)])
    pairs = np.array([f"1-{k}" for k in range(2, 2 + N_PAIRS)])
    shared = {
        "scene": pd.array(scenes[unit // N_PAIRS], dtype="str"),
        "pair": pd.array(pairs[unit % N_PAIRS], dtype="str"),
        "query": np.arange(n_queries) % per_pair,
        "x": rng.random(n_queries) * 640,
        "y": rng.random(n_queries) * 480,
    }
    frames = []
    for d in range(n_descriptors):
        matched = rng.random(n_queries) >= NO_MATCH
        better = np.where(matched, rng.geometric(0.2, n_queries) - 1, -1)
        frames.append(
            pd.DataFrame(
                {
                    "descriptor": pd.array(np.full(n_queries, f"desc{d}"), dtype="str"),
                    **shared,
                    "better": better,
                    "ties": np.where(matched, rng.integers(0, 3, n_queries), -1),
                    "nn_correct": (better == 0).astype(np.int64),
                    "gt_distance": np.where(matched, rng.random(n_queries), np.nan),
                    "nn_distance": rng.random(n_queries),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def numpy_floor(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """The bare conversion: every column to NumPy, strings to ``<U``."""
    out = {}
    for column in df.columns:
        values = df[column].to_numpy()
        out[column] = values.astype(str) if values.dtype == object else values
    return out


def build(df: pd.DataFrame) -> Any:
    from metricalc.cube import from_dataframe

    return from_dataframe(df)


STEPS: dict[str, Callable[[pd.DataFrame], Any]] = {"numpy": numpy_floor, "build": build}


def numeric_payload(cube: Any) -> int:
    """Bytes of the numeric variables and coordinates of a cube."""
    return sum(v.nbytes for v in cube.variables.values() if v.dtype.kind in "biuf")


def rss_bytes(field: str = "VmRSS") -> int:
    """A ``/proc/self/status`` memory field (VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Return freed memory to the system (glibc ``malloc_trim``, Arrow's pool), then make the
    peak RSS (VmHWM, ru_maxrss) the current RSS (Linux ``clear_refs`` 5), so that a step's peak
    is not hidden by memory an earlier step freed but kept."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    pyarrow.default_memory_pool().release_unused()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


def measure(
    step: Callable[[pd.DataFrame], Any], make_table: Callable[[], pd.DataFrame]
) -> tuple[float, int, Any]:
    """(seconds, peak RSS above the RSS before the step, result) of ``step(make_table())``,
    with the peak reset after the table is loaded."""
    df = make_table()
    reset_peak()
    before = rss_bytes()
    start = time.perf_counter()
    result = step(df)
    seconds = time.perf_counter() - start
    peak = max(rss_bytes("VmHWM"), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return seconds, peak - before, result


def _peak_child(name: str, n_queries: int, n_descriptors: int) -> tuple[int, int]:
    """(peak, payload) of one run of a step."""
    STEPS[name](long_table(1000, n_descriptors, seed=1))  # warm up: imports and caches
    df = long_table(n_queries, n_descriptors)
    _, peak, result = measure(STEPS[name], lambda: df)
    return peak, numeric_payload(result) if name == "build" else 0


def _times_child(n_queries: int, n_descriptors: int, repeat: int) -> dict[str, float]:
    """The best time of every step over ``repeat`` rounds that run the steps in turn."""
    small = long_table(1000, n_descriptors, seed=1)
    for step in STEPS.values():  # warm up: imports and caches
        step(small)
    df = long_table(n_queries, n_descriptors)
    best = dict.fromkeys(STEPS, float("inf"))
    for _ in range(repeat):
        for name, step in STEPS.items():
            best[name] = min(best[name], measure(step, lambda: df)[0])
    return best


def in_child(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a fresh child process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def main(argv: list[str] | None = None) -> int:
    args = integer_options(__doc__ or "", argv, queries=1_000_000, descriptors=4, repeat=3)
    print(f"{args.queries:,} queries x {args.descriptors} descriptors")
    floor_peak, _ = in_child(_peak_child, "numpy", args.queries, args.descriptors)
    build_peak, payload = in_child(_peak_child, "build", args.queries, args.descriptors)
    times = in_child(_times_child, args.queries, args.descriptors, args.repeat)
    floor_s, build_s = times["numpy"], times["build"]
    mb = 1e6
    print(f"numeric payload {payload / mb:.0f} MB")
    print(f"numpy conversion {floor_s:.2f} s   peak {floor_peak / mb:.0f} MB above the table")
    print(
        f"from_dataframe   {build_s:.2f} s   peak {build_peak / mb:.0f} MB above the table "
        f"= {build_peak / payload:.2f}x payload (target <= 2.5)"
    )
    print(f"time ratio {build_s / floor_s:.2f} (target <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
