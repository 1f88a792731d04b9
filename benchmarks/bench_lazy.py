"""The bounded-memory lazy path: ``metric_set(open_cube(path, chunks=...))`` over a cube on disk.

Run: ``python benchmarks/bench_lazy.py [--queries 10000000] [--descriptors 4] [--chunk 1000000]``

Writes a cube of ``--queries`` x ``--descriptors`` to a temporary folder, chunk by chunk (100
scenes, 5 image pairs each, the keypoints of a pair numbered; rank statistics drawn at random),
then measures, each step in its own process (the peak RSS of that process, ``VmHWM``; the write
too):

1. ``read``: the numeric arrays the metric set reads and the ``scene`` and ``pair`` labels as
   stored (characters), with xarray directly: a chunked sum of
   ``xr.open_dataset(path, chunks=..., concat_characters=False)[variables]`` (the floor: what
   the data costs);
2. ``lazy``: ``metric_set(open_cube(path, chunks={"query": chunk})).compute()``;
3. ``eager``: ``metric_set(open_cube(path))``, all in memory (only with ``--eager``, or up to
   2,000,000 queries: where it fits).

Prints the time and peak RSS of each, and the ratios lazy / read and lazy / eager.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

SCENES, PAIRS = 100, 5
READ = ("better", "ties", "n_relevant", "ap", "nn_correct", "nn_mutual", "n_candidates")
"""The (descriptor, query) variables the metric set reads."""
EAGER_UP_TO = 2_000_000


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000_000)
    parser.add_argument("--descriptors", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=1_000_000, help="queries per dask chunk")
    parser.add_argument("--eager", action="store_true", help="also time the eager metric set")
    parser.add_argument(
        "--step", choices=("write", "read", "lazy", "eager"), help=argparse.SUPPRESS
    )
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _labels(start: int, stop: int, n: int) -> dict[str, np.ndarray]:
    """Coordinates of queries ``start .. stop`` of ``n``: scene-major, then pair, keypoint."""
    q = np.arange(start, stop)
    per_pair = max(n // (SCENES * PAIRS), 1)
    scene = np.minimum(q // (per_pair * PAIRS), SCENES - 1)
    names = np.array([f"{'iv'[s % 2]}_scene{s:03d}" for s in range(SCENES)])
    pairs = np.array([f"1-{p + 2}" for p in range(PAIRS)])
    return {
        "scene": names[scene],
        "split": np.where(scene % 2, "viewpoint", "illumination"),
        "pair": pairs[(q // per_pair) % PAIRS],
        "keypoint_set": np.full(q.size, "sift"),
        "query_keypoint": q - (q // per_pair) * per_pair,
        "x": np.full(q.size, np.nan),
        "y": np.full(q.size, np.nan),
    }


def _block(name: str, descriptors: int, start: int, stop: int) -> np.ndarray:
    """Values of variable ``name`` for queries ``start .. stop`` (seeded by ``start``)."""
    from metricalc.core.ranking import ap_from_rank_stats

    rng = np.random.default_rng(start)
    shape = (descriptors, stop - start)
    relevant = np.where(rng.random(shape) < 0.8, 1, np.where(rng.random(shape) < 0.5, 0, -1))
    better = np.where(relevant == 1, rng.geometric(0.2, shape) - 1, -1)
    ties = np.where(relevant == 1, (rng.random(shape) < 0.05).astype(np.int64), -1)
    values: dict[str, np.ndarray] = {
        "n_relevant": relevant.astype(np.int8),
        "better": better,
        "ties": ties,
        "nn_correct": np.where(relevant >= 0, (relevant == 1) & (better == 0), -1).astype(np.int8),
        "nn_mutual": np.where(relevant >= 0, rng.random(shape) < 0.6, -1).astype(np.int8),
        "n_candidates": np.where(relevant >= 0, 2_000, -1),
    }
    if name == "ap":
        return np.asarray(ap_from_rank_stats(better, ties, tie_policy="expected"))
    return values[name]


def write_cube(path: Path, n: int, descriptors: int, chunk: int) -> None:
    """A lazy cube built chunk by chunk (dask) and saved: never all of it in memory."""
    import dask.array as da

    from metricalc import cube as qc
    from metricalc.cube.io import VOCABULARY

    template = qc.new_cube(
        [f"desc{d}" for d in range(descriptors)],
        {k: v[:1] for k, v in _labels(0, 1, n).items()},
        {"better": np.zeros((descriptors, 1), int), "ties": np.zeros((descriptors, 1), int)},
        attrs=qc.DEFAULT_ATTRS,
    )
    bounds = [(s, min(s + chunk, n)) for s in range(0, n, chunk)]
    data = {}
    for name, variable in template.data_vars.items():
        if variable.dims != ("descriptor", "query"):
            continue
        if name in READ:
            parts = [
                da.from_delayed(
                    _delayed_block(name, descriptors, s, e), (descriptors, e - s), variable.dtype
                )
                for s, e in bounds
            ]
            data[name] = (variable.dims, da.concatenate(parts, axis=1))
        else:
            fill = variable.values.flat[0]
            data[name] = (
                variable.dims,
                da.full((descriptors, n), fill, variable.dtype, chunks=(descriptors, chunk)),
            )
    coords = {}
    for name in template.coords:
        if template[name].dims != ("query",):
            continue
        text = template[name].dtype.kind == "U"
        vocabulary = _vocabulary(name, n) if text else None
        dtype = vocabulary.dtype if vocabulary is not None else template[name].dtype
        parts = [
            da.from_delayed(_delayed_labels(name, s, e, n, dtype), (e - s,), dtype)
            for s, e in bounds
        ]
        column = xr.Variable(("query",), da.concatenate(parts))
        if vocabulary is not None:  # every label: save() codes the labels chunk by chunk
            column.encoding = {VOCABULARY: vocabulary}
        coords[name] = column
    lazy = xr.Dataset(
        data_vars={
            **data,
            **{n: template[n] for n in template.data_vars if "query" not in template[n].dims},
        },
        coords={"descriptor": template["descriptor"], **coords},
        attrs=template.attrs,
    )
    qc.save(lazy, path)


def _vocabulary(name: str, n: int) -> np.ndarray:
    """The sorted labels of coordinate ``name`` (every scene, pair, ...)."""
    per_pair = max(n // (SCENES * PAIRS), 1)
    probe = np.arange(SCENES * PAIRS) * per_pair
    labels = {str(v) for s in probe for v in _labels(int(s), int(s) + 1, n)[name]}
    return np.array(sorted(labels))


def _delayed_block(name: str, descriptors: int, start: int, stop: int) -> Any:
    import dask

    return dask.delayed(_block)(name, descriptors, start, stop)


def _delayed_labels(name: str, start: int, stop: int, n: int, dtype: np.dtype) -> Any:
    import dask

    return dask.delayed(_column)(name, start, stop, n, dtype)


def _column(name: str, start: int, stop: int, n: int, dtype: np.dtype) -> np.ndarray:
    return _labels(start, stop, n)[name].astype(dtype)


def run_step(step: str, path: Path, chunk: int, sizes: tuple[int, int]) -> dict[str, float]:
    """One measured step in this process: its wall time and this process's peak RSS."""
    from metricalc import cube as qc
    from metricalc.metrics import metric_set

    start = time.perf_counter()  # after the imports
    if step == "write":
        write_cube(path, *sizes, chunk)
    elif step == "read":
        # the labels as stored (character arrays): their non-empty characters counted
        with xr.open_dataset(
            path, engine="h5netcdf", chunks={"query": chunk}, concat_characters=False
        ) as raw:
            numbers = raw[list(READ)].assign({n: raw[n] != b"" for n in ("scene", "pair")})
            sums = {name: float(value) for name, value in numbers.sum().compute().items()}
        assert sums
    else:
        cube = qc.open_cube(path, chunks={"query": chunk} if step == "lazy" else None)
        metric_set(cube).compute()
        cube.close()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM`` of ``/proc/self/status`` (Linux), else ``ru_maxrss``.

    ``ru_maxrss`` keeps the peak of the process image before ``exec``, i.e. of the parent a
    child was forked from; ``VmHWM`` is the child's own."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(step: str, path: Path, args: argparse.Namespace) -> dict[str, float]:
    """:func:`run_step` in a child process (so that the peaks of the steps do not mix)."""
    argv = [sys.executable, __file__, "--step", step, "--path", str(path)]
    argv += ["--chunk", str(args.chunk), "--queries", str(args.queries)]
    argv += ["--descriptors", str(args.descriptors)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    args = _options(argv)
    if args.step is not None:
        sizes = (args.queries, args.descriptors)
        print(json.dumps(run_step(args.step, args.path, args.chunk, sizes)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cube.nc"
        written = measure("write", path, args)
        size = path.stat().st_size / 2**20
        print(
            f"{args.queries:,} queries x {args.descriptors} descriptors: written in "
            f"{written['seconds']:.1f} s (peak RSS {written['peak_rss_mb']:.0f} MB), {size:.0f} MB "
            f"on disk; chunks of {args.chunk:,}"
        )
        steps = ["read", "lazy"]
        if args.eager or args.queries <= EAGER_UP_TO:
            steps.append("eager")
        results = {step: measure(step, path, args) for step in steps}
    for step, result in results.items():
        print(f"{step:<6} {result['seconds']:8.2f} s   peak RSS {result['peak_rss_mb']:7.0f} MB")
    lazy = results["lazy"]["seconds"]
    print(f"lazy / read  (time) {lazy / results['read']['seconds']:.2f}")
    if "eager" in results:
        print(f"lazy / eager (time) {lazy / results['eager']['seconds']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
