"""HPatches patch retrieval files (ECCV 2016 workshop): read and write (docs/patches.md).

A patch is named by its *signature* ``seq.img.idx`` (``i_chestnuts.ref.631``): the image sequence,
the image of the sequence (``ref``, ``e1``..``e5``, ``h1``..``h5``, ``t1``..``t5``) and the patch
index, a non-negative integer. ``seq.img`` names a *patch-image*, the set of patches cut from one
image. The three text files of a task share their first line, the *pool*: the comma-separated
patch-images whose patches the queries are compared with.

``.benchmark``
    Line 1 the pool, then one query signature per line.
``.labels``
    Line 1 the pool, then, for the query of the same line of the ``.benchmark``, its *cluster*:
    the signatures of its corresponding patches, the query included (6 in the real files).
``.results``
    Line 1 the pool, then, for the query of the same line, the 51 best signatures by decreasing
    similarity, the query itself first.

Readers check the syntax only (no empty file or line, well-formed names) and remember the path,
so that :func:`~metricalc.benchmarks.hpatches_patches.validate`
(:mod:`metricalc.benchmarks.hpatches_patches.checks`) can name the file
and the 1-based line of every failure; every error is an
:class:`~metricalc.errors.InvalidInputError`. Whitespace around names, a ``\\r`` before each
newline and a UTF-8 byte order mark are ignored, one final newline is optional. The ``test_*``
benchmarks of the release have no ``.labels``: ``validate(benchmark)`` or
``validate(benchmark, None, results)`` checks them without labels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metricalc.benchmarks.hpatches_patches.names import (
    IMAGES,
    N_RESULTS,
    Signature,
    _check_pool,
    _check_signatures,
    _fail,
    parse_patch_image,
    parse_signature,
    patch_image,
)
from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write

__all__ = [
    "IMAGES",
    "N_RESULTS",
    "Benchmark",
    "Labels",
    "Results",
    "Signature",
    "parse_patch_image",
    "parse_signature",
    "patch_image",
    "read_benchmark",
    "read_labels",
    "read_results",
    "write_atomic",
    "write_ranked_results",
    "write_results",
]


@dataclass(frozen=True)
class Benchmark:
    """A ``.benchmark`` file: the pool (line 1) and one query per following line.

    ``pool`` holds the patch-image names ``seq.img``; ``queries`` the query signatures, query
    ``i`` (0-based) on line ``i + 2`` of the file; ``path`` the file it was read from, which
    error messages name (``<benchmark>`` when None).
    """

    pool: tuple[str, ...]
    queries: tuple[str, ...]
    path: Path | None = None

    @property
    def name(self) -> str:
        """The file name without its suffix (``train_easy_5s_00``), or ``""``."""
        return self.path.stem if self.path is not None else ""


@dataclass(frozen=True)
class Labels:
    """A ``.labels`` file: the pool and, per query, its cluster (the query included).

    ``clusters[i]`` is on line ``i + 2`` and belongs to query ``i`` of the benchmark; ``pool``
    and ``path`` are as in :class:`Benchmark`.
    """

    pool: tuple[str, ...]
    clusters: tuple[tuple[str, ...], ...]
    path: Path | None = None


@dataclass(frozen=True)
class Results:
    """A ``.results`` file: the pool and, per query, its ranked result signatures.

    ``results[i]`` is on line ``i + 2``: the best matches of query ``i`` by decreasing
    similarity, the query first, :data:`N_RESULTS` of them in a valid file; ``pool`` and
    ``path`` are as in :class:`Benchmark`.
    """

    pool: tuple[str, ...]
    results: tuple[tuple[str, ...], ...]
    path: Path | None = None

    @property
    def queries(self) -> tuple[str, ...]:
        """The first signature of every line (the query, in a valid file)."""
        return tuple(line[0] if line else "" for line in self.results)


def _read_lines(path: Path) -> list[list[str]]:
    """The comma-separated fields of every line, stripped; refuses empty files, lines and fields."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark is not a name
    except UnicodeDecodeError as error:
        raise InvalidInputError(f"{where}: expected UTF-8 text ({error})") from None
    except OSError as error:  # missing, a directory, unreadable
        raise InvalidInputError(f"{where}: cannot read the file ({error.strerror})") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline
    if not lines:
        raise _fail(where, 1, "empty file; expected the pool of patch-images on line 1")
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise _fail(where, number, "empty line; expected comma-separated names")
        fields = [field.strip() for field in line.split(",")]
        if "" in fields:
            position = fields.index("") + 1
            raise _fail(where, number, f"empty name at position {position} (stray comma?)")
        rows.append(fields)
    return rows


def read_benchmark(path: str | os.PathLike[str]) -> Benchmark:
    """Read a ``.benchmark`` file: the pool on line 1, then one query signature per line.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    Benchmark

    Raises
    ------
    InvalidInputError
        Naming the file and line: an empty file or line, a malformed name, a query line that
        holds other than one signature, a file without queries.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "tiny.benchmark"
    ...     _ = path.write_text("a.ref,a.e1,b.ref\\na.ref.0\\nb.ref.3\\n")
    ...     benchmark = read_benchmark(path)
    >>> benchmark.pool, benchmark.queries
    (('a.ref', 'a.e1', 'b.ref'), ('a.ref.0', 'b.ref.3'))
    """
    path = Path(path)
    rows = _read_lines(path)
    _check_pool(rows[0], str(path))
    if len(rows) < 2:
        raise _fail(str(path), 2, "expected at least one query signature after the pool")
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 1:
            raise _fail(str(path), number, f"expected one query signature, got {len(row)} names")
        _check_signatures(row, str(path), number)
    return Benchmark(tuple(rows[0]), tuple(row[0] for row in rows[1:]), path)


def _read_lists(
    path: str | os.PathLike[str],
) -> tuple[Path, tuple[str, ...], tuple[tuple[str, ...], ...]]:
    path = Path(path)
    rows = _read_lines(path)
    _check_pool(rows[0], str(path))
    for number, row in enumerate(rows[1:], start=2):
        _check_signatures(row, str(path), number)
    return path, tuple(rows[0]), tuple(tuple(row) for row in rows[1:])


def read_labels(path: str | os.PathLike[str]) -> Labels:
    """Read a ``.labels`` file: the pool on line 1, then the cluster of each query.

    The checks against the benchmark (same pool and number of lines, query in its cluster) are
    :func:`~metricalc.benchmarks.hpatches_patches.validate`'s; reading checks the syntax only.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_atomic(Path(tmp) / "tiny.labels", b"a.ref,a.e1\\na.ref.0,a.e1.0\\n")
    ...     read_labels(path).clusters
    (('a.ref.0', 'a.e1.0'),)
    """
    path, pool, clusters = _read_lists(path)
    return Labels(pool, clusters, path)


def read_results(path: str | os.PathLike[str]) -> Results:
    """Read a ``.results`` file: the pool on line 1, then the ranked signatures of each query.

    The checks against the benchmark (same pool and number of lines, query first, exactly
    :data:`N_RESULTS` names, every name from the pool) are
    :func:`~metricalc.benchmarks.hpatches_patches.validate`'s.
    """
    path, pool, results = _read_lists(path)
    return Results(pool, results, path)


def write_results(
    path: str | os.PathLike[str], pool: Sequence[str], results: Sequence[Sequence[str]]
) -> Path:
    """Write a ``.results`` file atomically (temporary file in the same folder, then rename).

    Parameters
    ----------
    path : str or path-like
    pool : sequence of str
        The patch-images of the benchmark's first line, copied as they are.
    results : sequence of sequence of str
        Per query (in benchmark order) its ranked signatures, the query first; the count is not
        checked here (:func:`~metricalc.benchmarks.hpatches_patches.validate` requires
        :data:`N_RESULTS`; see
        :func:`write_ranked_results`), the names are.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InvalidInputError
        On a malformed patch-image or signature; nothing is written then.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_results(Path(tmp) / "x.results", ["a.ref"], [["a.ref.0", "a.ref.1"]])
    ...     path.read_text()
    'a.ref\\na.ref.0,a.ref.1\\n'
    """
    path = Path(path)
    if isinstance(pool, str):
        raise InvalidInputError("pool: expected a sequence of patch-image names, got a str")
    _check_pool(list(pool), "pool argument")
    lines = [",".join(pool)]
    for i, row in enumerate(results):
        row = _results_row(i, row)
        _check_signatures(row, "results argument", i + 2)
        lines.append(",".join(row))
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def write_ranked_results(
    path: str | os.PathLike[str],
    pool_header: Sequence[str],
    results: Sequence[Sequence[str]],
) -> Path:
    """Check that every line holds the query and its 50 neighbours, then write the ``.results``
    file with :func:`write_results` (atomic: temporary file, then rename) and return ``path``.

    Line 1 is ``pool_header`` joined by commas (the ``.benchmark`` header), then one line of 51
    comma-separated signatures per query (the query first), as
    :func:`~metricalc.benchmarks.hpatches_patches.compute.compute_results` returns.

    Raises
    ------
    InvalidInputError
        On a results line of other than 51 signatures (naming the results index and the file
        line it would have been), or as :func:`write_results` does; nothing is written then.

    Examples
    --------
    >>> import tempfile
    >>> row = [f"s.ref.{i}" for i in range(51)]
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     text = write_ranked_results(Path(tmp) / "x.results", ["s.ref"], [row]).read_text()
    >>> text.splitlines()[0], text.splitlines()[1].split(",")[:2]
    ('s.ref', ['s.ref.0', 's.ref.1'])
    """
    rows = [_results_row(i, row, N_RESULTS) for i, row in enumerate(results)]
    return write_results(path, pool_header, rows)


def _results_row(i: int, row: Sequence[str], count: int | None = None) -> list[str]:
    """Row ``i`` of the results to write as a list: a sequence of signatures (not a str), not
    empty, and of ``count`` signatures when given (the query and ``count - 1`` others)."""
    if count is not None and (isinstance(row, str) or len(row) != count):
        got = "a str" if isinstance(row, str) else f"{len(row)}"
        raise InvalidInputError(
            f"results[{i}] (line {i + 2}): expected {count} signatures (the query, "
            f"then {count - 1} others), got {got}"
        )
    if isinstance(row, str):
        raise InvalidInputError(f"results[{i}]: expected a sequence of signatures, got a str")
    checked = list(row)
    if not checked:
        raise InvalidInputError(f"results[{i}]: expected at least one signature, got none")
    return checked


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to a temporary file next to ``path``, then rename it over ``path``
    (:func:`metricalc.fileio.atomic_write`).

    Readers never see a half-written file: an interrupted write leaves the old file (or none).
    Missing parent folders are created; a failure (a parent that is a file, no permission, a
    full disk) raises :class:`~metricalc.errors.InvalidInputError` naming ``path``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_atomic(Path(tmp) / "a.txt", b"hello").read_bytes()
    b'hello'
    """
    path = Path(path)
    try:
        return atomic_write(path, data)
    except OSError as error:
        raise InvalidInputError(f"{path}: cannot write the file ({error.strerror})") from None
