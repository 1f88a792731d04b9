"""Scaling curves: time and peak memory of the main steps from 1k to 1M (or 10M) queries.

Run: ``python benchmarks/scaling_curves.py OUTDIR [--sizes 1000,10000,100000,1000000]
[--descriptors 4] [--ten-million] [--eager-max 1000000] [--chunk 1000000]``

The data is the table of ``bench_build.long_table`` (100 scenes x 5 pairs x the keypoints of
each pair, ``--descriptors`` descriptors, 4 by default). The steps, at every size:

- ``build``: ``cube.from_dataframe(df)``;
- ``save``: ``cube.save(cube, path)`` (netCDF-4, compressed);
- ``open``: ``cube.open_cube(path)`` (eager: everything read and validated);
- ``metric_set``: ``metric_set(cube)`` on the eager cube;
- ``compare``: ``stats.compare(cube)`` with its defaults (the randomization test of the mean AP,
  10,000 sign flips, BCa bootstrap CIs; every pair of descriptors);
- ``metric_set_lazy``: ``metric_set(open_cube(path, chunks={"query": CHUNK})).compute()``,
  opening included.

Sizes above ``--eager-max`` run ``build``, ``save`` and ``metric_set_lazy`` only;
``--ten-million`` adds 10M queries to the sizes. Every step runs in its own child process
(``multiprocessing`` with ``spawn``) that first runs every step once on 1,000 queries (imports,
caches), then prepares the step's input (the table; the cube; the file written by ``save``),
resets its peak RSS (``/proc/self/clear_refs``) and runs the step once: the peak is measured
above the RSS just before the step, so it counts what the step allocates and what it returns.
Writes ``OUTDIR/scaling.csv`` (one row per size and step: queries, descriptors, step, seconds,
peak_mb, payload_mb; the payload is the cube's numeric bytes, ``bench_build.numeric_payload``)
and ``OUTDIR/scaling.png`` (log-log, time and memory against queries), and prints the table as
Markdown.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_build import long_table, numeric_payload, reset_peak, rss_bytes

STEPS = ("build", "save", "open", "metric_set", "compare", "metric_set_lazy")
LAZY_STEPS = ("build", "save", "metric_set_lazy")
FIELDS = ("queries", "descriptors", "step", "seconds", "peak_mb", "payload_mb")


def _measured(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(seconds, peak MB above the RSS before the call, result) of ``fn()``."""
    reset_peak()
    before = rss_bytes()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    return seconds, (rss_bytes("VmHWM") - before) / 1e6, result


def _prepare(step: str, n_queries: int, n_descriptors: int, path: Path) -> Any:
    """The input of ``step``: the table, the cube, or the file ``path`` (written by ``save``)."""
    from metricalc import cube as qc

    if step == "build":
        return long_table(n_queries, n_descriptors)
    if step == "save":
        return qc.from_dataframe(long_table(n_queries, n_descriptors))
    if step in ("metric_set", "compare"):
        return qc.open_cube(path)
    return path


def _run(step: str, data: Any, path: Path, chunk: int) -> Any:
    """One step on its prepared input."""
    import metricalc as mc
    from metricalc import cube as qc
    from metricalc.stats import compare

    if step == "build":
        return qc.from_dataframe(data)
    if step == "save":
        return qc.save(data, path)
    if step == "open":
        return qc.open_cube(path)
    if step == "metric_set":
        return mc.metric_set(data)
    if step == "compare":
        return compare(data)
    lazy = qc.open_cube(path, chunks={"query": chunk})
    return mc.metric_set(lazy).compute()


def _child(
    step: str, n_queries: int, n_descriptors: int, chunk: int, folder: str
) -> dict[str, Any]:
    """Warm up, prepare, measure one step: a row of the CSV."""
    warnings.filterwarnings("ignore", message="The specified chunks separate")
    with tempfile.TemporaryDirectory() as warm:
        small = Path(warm) / "cube.nc"
        for name in STEPS:
            _run(name, _prepare(name, 1000, n_descriptors, small), small, 500)
    path = Path(folder) / f"cube_{n_queries}.nc"
    data = _prepare(step, n_queries, n_descriptors, path)
    seconds, peak_mb, _ = _measured(lambda: _run(step, data, path, min(chunk, n_queries)))
    return {
        "queries": n_queries,
        "descriptors": n_descriptors,
        "step": step,
        "seconds": round(seconds, 3),
        "peak_mb": round(peak_mb, 1),
    }


def _payload(n_queries: int, n_descriptors: int) -> int:
    """Bytes of the numeric variables and coordinates of the cube (from a small cube)."""
    from metricalc import cube as qc

    small = qc.from_dataframe(long_table(1000, n_descriptors))
    return numeric_payload(small) * n_queries // small.sizes["query"]


def run(sizes: list[int], n_descriptors: int, eager_max: int, chunk: int) -> list[dict[str, Any]]:
    rows = []
    context = multiprocessing.get_context("spawn")
    for n in sizes:
        payload_mb = round(_payload(n, n_descriptors) / 1e6, 1)
        with tempfile.TemporaryDirectory() as folder:
            for step in STEPS if n <= eager_max else LAZY_STEPS:
                with context.Pool(1) as pool:
                    row = pool.apply(_child, (step, n, n_descriptors, chunk, folder))
                rows.append({**row, "payload_mb": payload_mb})
                print(f"{n:>10,} {step:<16} {row['seconds']:9.3f} s", end=" ")
                print(f"{row['peak_mb']:9.1f} MB", flush=True)
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
