"""Ranking a pool of descriptors for every query of a ``.benchmark``: each query's top 51.

A ``.benchmark`` file names a pool of patch-images (``seq.img``, line 1) and one query patch
``seq.img.idx`` per line. :func:`compute_results` ranks, for every query, the whole pool (a
:class:`~metricalc.benchmarks.hpatches_patches.pool.DescriptorPool`, read by
:func:`~metricalc.benchmarks.hpatches_patches.pool.load_descriptor_pool`) by descriptor distance and
keeps the query
followed by its 50 nearest other patches;
:func:`metricalc.benchmarks.hpatches_patches.files.write_ranked_results`
writes them as a ``.results`` file (docs/patches.md). :func:`rank_benchmark` does the three
for a descriptor folder.

Distances, for a query :math:`a` and a pool patch :math:`b` of dimension :math:`D`:

.. math::

    d_{L2}(a, b)^2 = \\|a - b\\|^2 = [-2a, \\|a\\|^2, 1] \\cdot [b, 1, \\|b\\|^2],
    \\qquad d_{L1}(a, b) = \\sum_{j=1}^{D} |a_j - b_j|

L2 ranks by the squared distance (same order), from one float32 BLAS GEMM per block of distances
with the augmented matrices above; the result is exact for integer or dyadic descriptors of
moderate size, and otherwise carries a rounding error of about
:math:`10^{-7}(\\|a\\|^2 + \\|b\\|^2)`, so two patches whose distances differ by less than that
may be ranked as exact arithmetic would not. L1 has no GEMM form; it is accumulated dimension by
dimension with NumPy broadcasting over cache-sized tiles (in threads), about ten times slower
than L2 (``benchmarks/bench_patches.py`` prints the ratio).

The distances come in blocks of up to :data:`QUERY_CHUNK` queries by a slice of the pool, so the
pool goes through the GEMM once (per query chunk) and the memory is one block, never the full
matrix. No row is ever sorted. Each query keeps a *limit*: the 50th smallest distance among the
candidates it has found so far. A patch of a later block at that distance or more ranks after
50 patches already found (ties go to the lower pool row, and earlier blocks hold lower rows), so
a block's candidates are its values strictly below the limit: one comparison pass over the block,
then a sort of the few hits (at most 50 kept per query and block). In the first block the limit
is still infinite and a bound is used instead: with the columns dealt into ``G`` interleaved
groups (column ``j`` in group ``j mod G``), the 51st smallest group minimum has at least 51
columns, so 50 besides the query, at or below it. For random-like data a query collects about
:math:`50 (1 + \\ln B)` candidates over ``B`` blocks; the last step sorts those by (distance,
pool row) and keeps 50.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

from metricalc.benchmarks.hpatches_patches.files import read_benchmark, write_ranked_results
from metricalc.benchmarks.hpatches_patches.pool import DescriptorPool, load_descriptor_pool
from metricalc.core.kernels import augmented_operand
from metricalc.errors import InvalidInputError
from metricalc.progress import progress_bar

__all__ = [
    "DISTANCES",
    "N_NEIGHBOURS",
    "DescriptorPool",
    "compute_results",
    "load_descriptor_pool",
    "rank_benchmark",
]

N_NEIGHBOURS = 50
"""Pool patches listed after the query on each ``.results`` line (51 signatures in all)."""

DISTANCES: tuple[str, ...] = ("l2", "l1")
"""Distances :func:`compute_results` accepts."""

CHUNK_ELEMENTS = 1 << 25
"""Distances computed at once (128 MiB of float32): a block of up to :data:`QUERY_CHUNK` queries
by ``CHUNK_ELEMENTS // queries`` pool patches. 4,000 queries x 300,000 patches x 128 dims then
take 38 blocks, the pool streamed through the GEMM once, far below 2 GiB."""

QUERY_CHUNK = 4096
"""Queries per block; more queries are processed in several passes over the pool."""

MIN_BLOCK_COLUMNS = 1024
"""Fewest pool patches per block (when :data:`QUERY_CHUNK` is large against the chunk)."""

GROUPS = 512
"""Interleaved column groups whose minima bound the 51st smallest distance of a query's first
block of distances."""

COMPARE_ELEMENTS = 1 << 24
"""Distances compared with their limits at once (a 16 MiB mask)."""

CANDIDATE_ELEMENTS = 1 << 22
"""Most candidates sorted at once: a batch with more (many tied distances) is split by rows."""

L1_BLOCK_COLUMNS = 4096
"""Pool columns per L1 block; with :data:`L1_BLOCK_QUERIES` queries the block fits in L2 cache."""

L1_BLOCK_QUERIES = 32
"""Queries per L1 block."""

MAX_THREADS = 4
"""Upper bound on the threads selecting neighbours (row blocks) and computing L1 distances
(column blocks); the L2 GEMM uses BLAS's own threads."""

# -- distances and selection -----------------------------------------------------------------------


def _l1_distances(
    queries: np.ndarray, pool_t: np.ndarray, out: np.ndarray, executor: ThreadPoolExecutor
) -> None:
    """``out[i, j] = sum_d |queries[i, d] - pool_t[d, j]|``, by cache-sized tiles in threads."""
    n, m = out.shape

    def tile(corner: tuple[int, int]) -> None:
        first, start = corner
        q = queries[first : first + L1_BLOCK_QUERIES]
        columns = pool_t[:, start : start + L1_BLOCK_COLUMNS]
        acc = np.zeros((len(q), columns.shape[1]), dtype=np.float32)
        tmp = np.empty_like(acc)
        for d in range(q.shape[1]):
            np.subtract(q[:, d, None], columns[d], out=tmp)
            np.abs(tmp, out=tmp)
            acc += tmp
        out[first : first + len(q), start : start + columns.shape[1]] = acc

    corners = [
        (first, start)
        for start in range(0, m, L1_BLOCK_COLUMNS)
        for first in range(0, n, L1_BLOCK_QUERIES)
    ]
    list(executor.map(tile, corners))


def _group_bound(dist: np.ndarray, k: int) -> np.ndarray | float:
    """Per row of ``dist``, a value with at least ``k + 1`` columns at or below it.

    Column ``j`` is in group ``j mod G``; the (k+1)-th smallest of the ``G`` group minima is such
    a value (each of k + 1 groups has a column at or below it), found from one pass of minima over
    ``dist`` and a partition of ``G`` values per row. Infinite when there are no more than ``k``
    groups (the block has ``k`` columns or fewer).
    """
    n, m = dist.shape
    groups = min(m, GROUPS)
    if groups <= k:
        return np.inf
    length, tail = divmod(m, groups)
    body = groups * length
    minima = dist[:, :body].reshape(n, length, groups).min(axis=1)
    if tail:
        np.minimum(minima[:, :tail], dist[:, body:], out=minima[:, :tail])
    return np.partition(minima, k, axis=1)[:, k]


def _block_candidates(
    dist: np.ndarray, exclude: np.ndarray, limit: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a block of distances, its ``k`` best (value, column) pairs below a limit.

    Parameters
    ----------
    dist : ndarray of float32, shape (n, m)
        Distances of n queries to m pool columns (finite); read, not changed.
    exclude : ndarray of int, shape (n,)
        Column of each query's own patch in the block, -1 if elsewhere; never returned.
    limit : ndarray of float32, shape (n,)
        Only values strictly below the row's limit count. Where it is infinite the row's own bound
        is used instead (:func:`_group_bound`: k columns besides the query at or below it).

    Returns
    -------
    rows, columns, values : ndarray
        Flat, sorted by (row, value, column), at most ``k`` per row.
    """
    n, m = dist.shape
    bound = np.nextafter(limit, np.float32(-np.inf))  # value <= bound  <=>  value < limit
    open_rows = np.isinf(limit)
    if open_rows.all():
        bound[:] = _group_bound(dist, k)
    elif open_rows.any():
        bound[open_rows] = _group_bound(dist[open_rows], k)
    step = max(1, COMPARE_ELEMENTS // m)
    mask = np.empty(min(step, n) * m, dtype=bool)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for first in range(0, n, step):
        _batch_candidates(dist, exclude, bound, k, slice(first, min(n, first + step)), mask, found)
    rows, columns, values = (np.concatenate(parts) for parts in zip(*found, strict=True))
    return rows, columns, values


def _batch_candidates(
    dist: np.ndarray,
    exclude: np.ndarray,
    bound: np.ndarray,
    k: int,
    rows: slice,
    mask: np.ndarray,
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> None:
    """Append the ``k`` best pairs at or below ``bound`` of each row of ``dist[rows]`` to ``found``.

    ``mask`` is a bool buffer of at least the batch's size. A batch with more than
    :data:`CANDIDATE_ELEMENTS` candidates (many tied distances) is split in two.
    """
    m = dist.shape[1]
    part = dist[rows]
    size = part.size
    np.less_equal(part, bound[rows, None], out=mask[:size].reshape(-1, m))
    positions = np.flatnonzero(mask[:size])  # increasing: by row, then column
    if len(positions) > CANDIDATE_ELEMENTS and rows.stop - rows.start > 1:
        middle = (rows.start + rows.stop) // 2
        del positions
        _batch_candidates(dist, exclude, bound, k, slice(rows.start, middle), mask, found)
        _batch_candidates(dist, exclude, bound, k, slice(middle, rows.stop), mask, found)
        return
    values = np.ravel(part)[positions]
    row, column = np.divmod(positions, m)
    keep = column != exclude[rows][row]
    row, column, values = row[keep], column[keep], values[keep]
    order = _row_value_order(row, values)
    row, column, values = row[order], column[order], values[order]
    best = _rank_in_row(row) < k
    found.append((row[best] + rows.start, column[best], values[best]))


def _row_value_order(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Stable order by (row, value) of rows in ``0..2**32 - 1`` and float32 values (no NaN).

    One stable argsort of a 64-bit key: the row, then the value's bits made to sort as unsigned
    integers (sign bit flipped for positives, all bits for negatives; -0.0 counted as +0.0), so
    equal values keep their input order. Several times faster than ``np.lexsort``.
    """
    bits = (values + np.float32(0.0)).view(np.uint32)  # -0.0 + 0.0 = +0.0
    bits = np.where(bits >> 31 != 0, ~bits, bits | np.uint32(0x80000000))
    key = (rows.astype(np.uint64) << np.uint64(32)) | bits.astype(np.uint64)
    return np.argsort(key, kind="stable")


def _rank_in_row(rows: np.ndarray) -> np.ndarray:
    """Position of each entry within its run of equal values of the sorted array ``rows``."""
    index = np.arange(len(rows))
    starts = np.ones(len(rows), dtype=bool)
    np.not_equal(rows[1:], rows[:-1], out=starts[1:])
    return index - np.maximum.accumulate(np.where(starts, index, 0))


class _Selection:
    """The running top ``k`` of a range of queries over successive blocks of pool columns.

    Candidates of each block are kept (at most ``k`` per query and block); ``best`` holds the
    ``k`` smallest candidate values so far, whose largest is the limit for later blocks: a later
    column at that distance or more ranks after ``k`` patches already found (ties go to the lower
    row). For random-like data a query gathers about ``k (1 + ln B)`` candidates over ``B`` blocks.
    """

    def __init__(self, first: int, own_rows: np.ndarray, k: int) -> None:
        self.first, self.own_rows, self.k, self.n = first, own_rows, k, len(own_rows)
        self.best = np.full((len(own_rows), k), np.inf, dtype=np.float32)
        self.found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, dist: np.ndarray, start: int) -> None:
        """Take the candidates of ``dist``, the distances to pool rows ``start:start + m``."""
        n, m = dist.shape
        exclude = self.own_rows - start
        exclude[(exclude < 0) | (exclude >= m)] = -1
        rows, columns, values = _block_candidates(dist, exclude, self.best.max(axis=1), self.k)
        if rows.size:
            self.found.append((rows, columns + start, values))
            fresh = np.full((n, self.k), np.inf, dtype=np.float32)
            fresh[rows, _rank_in_row(rows)] = values
            merged = np.concatenate([self.best, fresh], axis=1)
            self.best = np.partition(merged, self.k - 1, axis=1)[:, : self.k]

    def result(self) -> np.ndarray:
        """Pool rows of the ``k`` nearest patches of each query, by (distance, pool row)."""
        rows, columns, values = (np.concatenate(parts) for parts in zip(*self.found, strict=True))
        keep = values <= self.best.max(axis=1)[rows]  # the k-th best value found: drop the rest
        rows, columns, values = rows[keep], columns[keep], values[keep]
        order = _row_value_order(rows, values)  # stable: ties stay in block, then column order
        rows, columns = rows[order], columns[order]
        first = np.searchsorted(rows, np.arange(self.n))
        nearest: np.ndarray = columns[first[:, None] + np.arange(self.k)]
        return nearest


# -- results ---------------------------------------------------------------------------------------


def compute_results(
    benchmark_path: str | os.PathLike[str],
    pool: DescriptorPool,
    *,
    distance: str = "l2",
    progress: bool = False,
) -> list[list[str]]:
    """Every query's ``.results`` line: the query, then its 50 nearest other pool patches.

    Parameters
    ----------
    benchmark_path : str or path-like
        A ``.benchmark`` file: line 1 the pool of patch-images, then one query ``seq.img.idx``
        per line. Its header must equal ``pool.names`` (same patch-images, same order).
    pool : DescriptorPool
        Descriptors of the pool (:func:`load_descriptor_pool`); at least 51 patches.
    distance : {"l2", "l1"}, default "l2"
        Euclidean distance (ranked by its square, one float32 GEMM per block) or L1
        (:math:`\\sum_j |a_j - b_j|`, accumulated by broadcasting; about ten times slower).
    progress : bool, default False
        Show a progress bar over the blocks of distances.

    Returns
    -------
    list of list of str
        Per query, in file order, 51 signatures: the query as written in the file, then the 50
        pool patches nearest to it by increasing distance (the query's own row excluded; other
        patches at distance 0 included), ties broken by the lower pool row.

    Raises
    ------
    InvalidInputError
        On an unreadable or malformed benchmark file, a header different from the pool, a query
        whose patch-image is not in the pool or whose index is out of range (naming file, line,
        signature and the patch-image's number of patches), a pool of fewer than 51 patches,
        descriptors too large for float32 distances, or an unknown distance.

    Notes
    -----
    Distances are computed in blocks of up to :data:`QUERY_CHUNK` queries by ``W`` pool patches,
    ``W = CHUNK_ELEMENTS // queries`` (128 MiB), so the pool is streamed through the GEMM once
    per query chunk; each block's candidates are selected in threads (rows split between them).
    Memory: the augmented (L2) or transposed (L1) pool, M x (D + 2) float32, one block, and a
    few hundred candidates per query: about 0.3 GiB for 4,000 queries x 300,000 patches x 128
    dimensions (many tied distances can add up to 50 candidates per query and block). L2
    distances carry float32 rounding (see the module notes): near-ties closer than about 1e-7
    of the squared norms may be ordered differently from exact arithmetic.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> pool = DescriptorPool.from_arrays(["s.ref"], [np.arange(60.0)[:, None]])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "x.benchmark"
    ...     _ = path.write_text("s.ref\\ns.ref.10\\n")
    ...     results = compute_results(path, pool)
    >>> len(results[0]), results[0][:5]
    (51, ['s.ref.10', 's.ref.9', 's.ref.11', 's.ref.8', 's.ref.12'])
    """
    if distance not in DISTANCES:
        raise InvalidInputError(f"distance: expected one of {DISTANCES}, got {distance!r}")
    if not isinstance(pool, DescriptorPool):
        raise InvalidInputError(f"pool: expected a DescriptorPool, got {type(pool).__name__}")
    path = Path(benchmark_path)
    queries = read_benchmark(path)
    query_rows = _query_rows(path, queries.pool, queries.queries, pool)
    neighbours = _nearest(pool, query_rows, distance, f"ranking {path.name}", progress=progress)
    k = N_NEIGHBOURS
    names = pool.signatures(neighbours)
    return [[query, *names[i * k : (i + 1) * k]] for i, query in enumerate(queries.queries)]


def rank_benchmark(
    benchmark_path: str | os.PathLike[str],
    descriptors: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    distance: str = "l2",
    progress: bool = False,
) -> list[list[str]]:
    """The rank step of the patch benchmark: ``.benchmark`` and descriptor folder to ``.results``.

    Reads the benchmark, loads the descriptors of its pool from ``descriptors``
    (:func:`~metricalc.benchmarks.hpatches_patches.pool.load_descriptor_pool`), ranks every query
    (:func:`compute_results`) and writes the lines to ``out``
    (:func:`~metricalc.benchmarks.hpatches_patches.files.write_ranked_results`, atomic).

    Returns
    -------
    list of list of str
        The lines written after the header, as :func:`compute_results` returns them.
    """
    benchmark = read_benchmark(benchmark_path)
    pool = load_descriptor_pool(descriptors, benchmark.pool)
    results = compute_results(benchmark_path, pool, distance=distance, progress=progress)
    write_ranked_results(out, benchmark.pool, results)
    return results


def _query_rows(
    path: Path, header: Sequence[str], queries: Sequence[str], pool: DescriptorPool
) -> npt.NDArray[np.int64]:
    """The pool row of every query of the benchmark file ``path`` (header checked against the
    pool, which must hold more than :data:`N_NEIGHBOURS` patches)."""
    if tuple(header) != pool.names:
        raise InvalidInputError(f"{path}, line 1: {_header_difference(header, pool.names)}")
    m, k = pool.n_patches, N_NEIGHBOURS
    if m <= k:
        raise InvalidInputError(
            f"pool: {m} patches; expected at least {k + 1} (the query and {k} others per "
            "results line)"
        )
    query_rows = np.empty(len(queries), dtype=np.int64)
    for number, query in enumerate(queries, start=2):
        try:
            query_rows[number - 2] = pool.row(query)
        except InvalidInputError as error:
            raise InvalidInputError(f"{path}, line {number}: {error}") from None
    return query_rows


def _nearest(
    pool: DescriptorPool,
    query_rows: npt.NDArray[np.int64],
    distance: str,
    label: str,
    *,
    progress: bool,
) -> npt.NDArray[np.int64]:
    """Pool rows of the :data:`N_NEIGHBOURS` nearest other patches of every query, by
    (distance, pool row): blocks of distances, selected in threads (:class:`_Selection`)."""
    m, n, k = pool.n_patches, len(query_rows), N_NEIGHBOURS
    chunk = min(n, QUERY_CHUNK)
    width = min(m, max(MIN_BLOCK_COLUMNS, CHUNK_ELEMENTS // chunk))
    buffer = np.empty(chunk * width, dtype=np.float32)
    neighbours = np.empty((n, k), dtype=np.int64)
    threads = min(MAX_THREADS, os.cpu_count() or 1)
    total = -(-n // chunk) * -(-m // width)
    with (
        ThreadPoolExecutor(threads) as executor,
        progress_bar(label, total=total, enabled=progress) as advance,
    ):
        fill = _distance_filler(pool, query_rows, distance, executor)
        for first in range(0, n, chunk):
            last = min(n, first + chunk)
            cuts = np.linspace(first, last, threads + 1).astype(int).tolist()
            parts = [(a, b) for a, b in itertools.pairwise(cuts) if b > a]
            selections = [_Selection(a, query_rows[a:b].copy(), k) for a, b in parts]
            for start in range(0, m, width):
                stop = min(m, start + width)
                dist = buffer[: (last - first) * (stop - start)].reshape(last - first, -1)
                fill(first, last, start, stop, dist)
                tasks = [
                    (s, dist[s.first - first : s.first - first + s.n], start) for s in selections
                ]
                list(executor.map(lambda task: task[0].add(*task[1:]), tasks))
                advance()
            for selection in selections:
                neighbours[selection.first : selection.first + selection.n] = selection.result()
    return neighbours


def _distance_filler(
    pool: DescriptorPool, query_rows: np.ndarray, distance: str, executor: ThreadPoolExecutor
) -> Callable[[int, int, int, int, np.ndarray], None]:
    """``fill(first, last, start, stop, out)``: distances of queries ``first:last`` to pool rows
    ``start:stop`` into ``out``."""
    queries = pool.descriptors[query_rows]
    if distance == "l2":
        pool_augmented = augmented_operand(pool.descriptors, query=False)
        queries_augmented = augmented_operand(queries, query=True)

        def fill(first: int, last: int, start: int, stop: int, out: np.ndarray) -> None:
            np.matmul(queries_augmented[first:last], pool_augmented[start:stop].T, out=out)

    else:
        largest = float(np.abs(pool.descriptors).max())
        if 2 * largest * pool.descriptors.shape[1] > float(np.finfo(np.float32).max):
            raise InvalidInputError(
                f"descriptors: values up to {largest:.3g} overflow float32 L1 distances; "
                "expected descriptors of moderate magnitude (rescale them)"
            )
        pool_t = np.ascontiguousarray(pool.descriptors.T)

        def fill(first: int, last: int, start: int, stop: int, out: np.ndarray) -> None:
            _l1_distances(queries[first:last], pool_t[:, start:stop], out, executor)

    return fill


def _header_difference(header: Sequence[str], names: Sequence[str]) -> str:
    for position, (got, expected) in enumerate(zip(header, names, strict=False), start=1):
        if got != expected:
            return (
                f"pool entry {position} is {got!r} but the descriptor pool has {expected!r}; "
                "expected the descriptor pool loaded from this header"
            )
    return (
        f"the header lists {len(header)} patch-images but the descriptor pool has {len(names)}; "
        "expected the descriptor pool loaded from this header"
    )
