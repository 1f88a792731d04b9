"""Scaling curves: time and peak memory of the main steps from 1k to 1M (or 10M) queries.

Run: ``python benchmarks/scaling_curves.py OUTDIR [--sizes 1000,10000,100000,1000000]
[--descriptors 4] [--ten-million] [--eager-max 1000000] [--chunk 1000000]``

For every size, one child process (``multiprocessing`` with ``spawn``, warmed up on a small
cube first) runs the steps in order on the table of ``bench_build.long_table`` (100 scenes x
5 pairs, ``--descriptors`` descriptors, 4 by default):

- ``build``: ``cube.from_dataframe(df)``;
- ``save``: ``cube.save(cube, path)`` (netCDF-4, compressed);
- ``open``: ``cube.open_cube(path)`` (eager: everything read and validated);
- ``metric_set``: ``metric_set(cube)`` on the eager cube;
- ``metric_set_lazy``: ``metric_set(open_cube(path, chunks={"query": CHUNK})).compute()``,
  opening included;
- ``compare``: ``stats.compare(cube)`` with its defaults (the randomization test of the mean AP,
  10,000 sign flips, BCa bootstrap CIs; every pair of descriptors).

Sizes above ``--eager-max`` run ``build``, ``save`` and ``metric_set_lazy`` only.
``--ten-million`` adds 10M queries to the sizes. Every step's peak RSS is measured above the
process's RSS just before the step (``/proc/self/clear_refs`` resets the peak first), so it
counts what the step allocates and what it returns. Writes ``OUTDIR/scaling.csv`` (one row per
size and step: queries, descriptors, step, seconds, peak_mb, payload_mb) and
``OUTDIR/scaling.png`` (log-log, time and memory against queries), and prints the table as
Markdown.
"""

from __future__ import annotations

import argparse
import csv
import gc
import multiprocessing
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_build import long_table, numeric_payload, reset_peak, rss_bytes

STEPS = ("build", "save", "open", "metric_set", "metric_set_lazy", "compare")
LAZY_STEPS = ("build", "save", "metric_set_lazy")
FIELDS = ("queries", "descriptors", "step", "seconds", "peak_mb", "payload_mb")


def _measured(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(seconds, peak MB above the RSS before the call, result) of ``fn()``."""
    gc.collect()
    reset_peak()
    before = rss_bytes()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    return seconds, (rss_bytes("VmHWM") - before) / 1e6, result


def _steps(
    n_queries: int, n_descriptors: int, eager: bool, chunk: int, folder: str
) -> list[tuple[str, float, float]]:
    """(step, seconds, peak MB) of every step at one size."""
    import metricalc as mc
    from metricalc import cube as qc
    from metricalc.stats import compare

    rows: list[tuple[str, float, float]] = []

    def record(step: str, fn: Callable[..., Any], *args: Any) -> Any:
        seconds, peak_mb, result = _measured(lambda: fn(*args))
        rows.append((step, seconds, peak_mb))
        return result

    path = Path(folder) / f"cube_{n_queries}.nc"
    df = long_table(n_queries, n_descriptors)
    cube = record("build", qc.from_dataframe, df)
    del df
    record("save", qc.save, cube, path)
    del cube
    if eager:
        cube = record("open", qc.open_cube, path)
        record("metric_set", mc.metric_set, cube)
        record("compare", compare, cube)
        del cube
    lazy = {"query": min(chunk, n_queries)}
    record("metric_set_lazy", lambda: mc.metric_set(qc.open_cube(path, chunks=lazy)).compute())
    path.unlink()
    return rows


def _child(
    n_queries: int, n_descriptors: int, eager: bool, chunk: int, payload: int
) -> list[dict[str, Any]]:
    warnings.filterwarnings("ignore", message="The specified chunks separate")
    with tempfile.TemporaryDirectory() as folder:
        _steps(1000, n_descriptors, True, 500, folder)  # warm up: imports and caches
        rows = []
        for step, seconds, peak_mb in _steps(n_queries, n_descriptors, eager, chunk, folder):
            rows.append(
                {
                    "queries": n_queries,
                    "descriptors": n_descriptors,
                    "step": step,
                    "seconds": round(seconds, 3),
                    "peak_mb": round(peak_mb, 1),
                    "payload_mb": round(payload / 1e6, 1),
                }
            )
    return rows


def _payload(n_queries: int, n_descriptors: int) -> int:
    """Bytes of the numeric variables and coordinates of the cube (from a small cube)."""
    from metricalc import cube as qc

    small = qc.from_dataframe(long_table(1000, n_descriptors))
    return numeric_payload(small) * n_queries // small.sizes["query"]


def run(sizes: list[int], n_descriptors: int, eager_max: int, chunk: int) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
            args = (n, n_descriptors, n <= eager_max, chunk, _payload(n, n_descriptors))
            found = pool.apply(_child, args)
        for row in found:
            print(f"{row['queries']:>10,} {row['step']:<16} {row['seconds']:9.3f} s", end=" ")
            print(f"{row['peak_mb']:9.1f} MB", flush=True)
        rows.extend(found)
    return rows


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    for step in STEPS:
        points = [r for r in rows if r["step"] == step]
        if not points:
            continue
        queries = [r["queries"] for r in points]
        time_axes.plot(queries, [r["seconds"] for r in points], marker="o", label=step)
        memory_axes.plot(queries, [max(r["peak_mb"], 0.1) for r in points], marker="o", label=step)
    payload = sorted({(r["queries"], r["payload_mb"]) for r in rows})
    memory_axes.plot(
        [q for q, _ in payload], [p for _, p in payload], "k--", label="numeric payload"
    )
    for axes, label in ((time_axes, "wall time (s)"), (memory_axes, "peak RSS above start (MB)")):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("queries (x descriptors)")
        axes.set_ylabel(label)
        axes.grid(True, which="major", alpha=0.4)
    n_descriptors = rows[0]["descriptors"]
    time_axes.set_title(f"time, {n_descriptors} descriptors")
    memory_axes.set_title(f"peak memory, {n_descriptors} descriptors")
    memory_axes.legend(loc="upper left", fontsize="small")
    figure.savefig(path, dpi=110)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table: one line per size, time and peak of every step."""
    sizes = sorted({r["queries"] for r in rows})
    cells = {(r["queries"], r["step"]): r for r in rows}
    head = "| queries | payload MB | " + " | ".join(f"{s} s / MB" for s in STEPS) + " |"
    lines = [head, "|" + "---|" * (len(STEPS) + 2)]
    for n in sizes:
        payload = next(r["payload_mb"] for r in rows if r["queries"] == n)
        values = [
            f"{cells[n, s]['seconds']:.2f} / {cells[n, s]['peak_mb']:.0f}"
            if (n, s) in cells
            else "-"
            for s in STEPS
        ]
        lines.append(f"| {n:,} | {payload:.0f} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--descriptors", type=int, default=4)
    parser.add_argument("--ten-million", action="store_true", help="add 10M queries")
    parser.add_argument("--eager-max", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=1_000_000, help="queries per dask chunk")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] + ([10_000_000] if args.ten_million else [])
    args.outdir.mkdir(parents=True, exist_ok=True)
    rows = run(sizes, args.descriptors, args.eager_max, args.chunk)
    write_csv(rows, args.outdir / "scaling.csv")
    plot(rows, args.outdir / "scaling.png")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
