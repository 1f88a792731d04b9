"""Validation of a patch retrieval task: a ``.benchmark`` with its ``.labels`` and ``.results``.

:func:`validate` checks the three files (:mod:`metricalc.benchmarks.hpatches_patches.files`) against
each other and
against every rule of docs/patches.md; each failure names the file and the 1-based line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from metricalc.benchmarks.hpatches_patches.files import (
    Benchmark,
    Labels,
    Results,
    read_benchmark,
    read_labels,
)
from metricalc.benchmarks.hpatches_patches.names import (
    N_RESULTS,
    _check_pool,
    _check_signatures,
    _fail,
    _where,
)
from metricalc.errors import InvalidInputError

__all__ = ["read_task", "validate"]


def _first_difference(pool: Sequence[str], reference: Sequence[str]) -> str:
    for position, (a, b) in enumerate(zip(pool, reference, strict=False), start=1):
        if a != b:
            return f"entry {position} is {a!r} where the benchmark has {b!r}"
    return f"{len(pool)} entries where the benchmark has {len(reference)}"


def _check_header(pool: Sequence[str], benchmark: Benchmark, where: str) -> None:
    if tuple(pool) != tuple(benchmark.pool):
        bench = _where(benchmark.path, "benchmark")
        raise _fail(
            where,
            1,
            f"expected the pool of {bench} line 1 (the headers must be equal); "
            + _first_difference(pool, benchmark.pool),
        )


def _check_line_count(n_lines: int, benchmark: Benchmark, where: str) -> None:
    expected = len(benchmark.queries) + 1
    if n_lines != expected:
        bench = _where(benchmark.path, "benchmark")
        line = expected + 1 if n_lines > expected else n_lines + 1
        raise _fail(
            where,
            line,
            f"expected {expected} lines (the pool and {expected - 1} queries, as "
            f"{bench}), got {n_lines} lines",
        )


def validate(
    benchmark: Benchmark, labels: Labels | None = None, results: Results | None = None
) -> None:
    """Check a benchmark with its labels and results against every rule of docs/patches.md.

    The first failure raises an :class:`~metricalc.errors.InvalidInputError` whose message starts
    with ``<file>, line <n>:`` (the 1-based line of the offending file; ``<labels>`` etc. for
    objects built in memory) and says what was expected. The rules, in the order checked:

    1. every pool entry is a patch-image ``seq.img`` and every name a signature ``seq.img.idx``
       (:func:`parse_signature`), in every file;
    2. every query's patch-image is in the pool (the release's remark "each reference patch is
       always contained in one of the specified patch-images");
    3. labels: header equal to the benchmark's; same number of lines; each query in its cluster;
       every cluster member's patch-image in the pool;
    4. results: header equal to the benchmark's; same number of lines; the first result of each
       line is the query; exactly :data:`N_RESULTS` results; every result's patch-image in the
       pool.

    Repeated signatures inside a line are allowed (the reference ``retrieval_eval.m`` accepts
    them); see :func:`metricalc.benchmarks.hpatches_patches.evaluate_results` for how they count.

    Parameters
    ----------
    benchmark : Benchmark
    labels : Labels, optional
        None checks a benchmark without labels (the ``test_*`` files of the release).
    results : Results, optional

    Raises
    ------
    InvalidInputError

    Examples
    --------
    >>> bench = Benchmark(("a.ref", "a.e1"), ("a.ref.0",))
    >>> validate(bench, Labels(("a.ref", "a.e1"), (("a.ref.0", "a.e1.0"),)))
    >>> validate(bench, Labels(("a.ref", "a.e1"), (("a.e1.0",),)))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: <labels>, line 2: expected the cluster of query ...
    """
    if not isinstance(benchmark, Benchmark):
        raise InvalidInputError(f"benchmark: expected a Benchmark, got {type(benchmark).__name__}")
    bench = _where(benchmark.path, "benchmark")
    _check_pool(benchmark.pool, bench)
    if not benchmark.queries:
        raise _fail(bench, 2, "expected at least one query signature after the pool")
    pool = frozenset(benchmark.pool)
    for i, query in enumerate(benchmark.queries):
        _check_signatures([query], bench, i + 2)
        image = query.rpartition(".")[0]
        if image not in pool:
            raise _fail(
                bench,
                i + 2,
                f"expected a query from the pool, got {query!r} ({image!r} is not in the pool)",
            )
    if labels is not None:
        _validate_labels(benchmark, labels, pool)
    if results is not None:
        _validate_results(benchmark, results, pool)


def _check_lines(
    benchmark: Benchmark,
    pool: Sequence[str],
    lines: Sequence[Sequence[str]],
    where: str,
    *,
    need: int | None = None,
) -> None:
    """The checks a ``.labels`` and a ``.results`` file share: the names of the pool and of every
    line (an empty line refused when ``need`` says how many signatures a line holds), the pool
    equal to the benchmark's, one line per query."""
    _check_pool(pool, where)
    for i, row in enumerate(lines):
        if need is not None and not row:
            raise _fail(where, i + 2, f"expected {need} signatures, got none")
        _check_signatures(row, where, i + 2)
    _check_header(pool, benchmark, where)
    _check_line_count(len(lines) + 1, benchmark, where)


def _validate_labels(benchmark: Benchmark, labels: Labels, pool: frozenset[str]) -> None:
    if not isinstance(labels, Labels):
        raise InvalidInputError(f"labels: expected a Labels, got {type(labels).__name__}")
    where, bench = _where(labels.path, "labels"), _where(benchmark.path, "benchmark")
    _check_lines(benchmark, labels.pool, labels.clusters, where)
    for i, (query, cluster) in enumerate(zip(benchmark.queries, labels.clusters, strict=True)):
        line = i + 2
        if query not in cluster:
            raise _fail(
                where,
                line,
                f"expected the cluster of query {query!r} ({bench} line {line}) to contain the "
                f"query, got {list(cluster)!r}",
            )
        for name in cluster:
            if name.rpartition(".")[0] not in pool:
                raise _fail(
                    where,
                    line,
                    f"expected cluster members from the pool, got {name!r} "
                    f"({name.rpartition('.')[0]!r} is not in the pool)",
                )


def _validate_results(benchmark: Benchmark, results: Results, pool: frozenset[str]) -> None:
    if not isinstance(results, Results):
        raise InvalidInputError(f"results: expected a Results, got {type(results).__name__}")
    where, bench = _where(results.path, "results"), _where(benchmark.path, "benchmark")
    _check_lines(benchmark, results.pool, results.results, where, need=N_RESULTS)
    for i, (query, row) in enumerate(zip(benchmark.queries, results.results, strict=True)):
        line = i + 2
        if row[0] != query:
            raise _fail(
                where,
                line,
                f"expected the query {query!r} ({bench} line {line}) as the first result, "
                f"got {row[0]!r}",
            )
        if len(row) != N_RESULTS:
            raise _fail(
                where,
                line,
                f"expected exactly {N_RESULTS} results (the query and the 50 best matches), "
                f"got {len(row)}",
            )
        for position, name in enumerate(row, start=1):
            image = name.rpartition(".")[0]
            if image not in pool:
                raise _fail(
                    where,
                    line,
                    f"expected results from the pool, got {name!r} at rank {position} "
                    f"({image!r} is not in the pool)",
                )


def read_task(
    benchmark_path: str | os.PathLike[str], labels_path: str | os.PathLike[str]
) -> tuple[Benchmark, Labels]:
    """Read a ``.benchmark`` and its ``.labels`` and :func:`validate` them together.

    Raises
    ------
    InvalidInputError
        A parse or validation failure, naming the file and the 1-based line.
    """
    benchmark, labels = read_benchmark(benchmark_path), read_labels(labels_path)
    validate(benchmark, labels)
    return benchmark, labels
