"""HPatches patch retrieval files (ECCV 2016 workshop): read, write and validate (PROTOCOLS.md 6).

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
so that :func:`validate` can name the file and the 1-based line of every failure; every error is an
:class:`~metricalc.errors.InvalidInputError`. Whitespace around names, a ``\\r`` before each
newline and a UTF-8 byte order mark are ignored, one final newline is optional. The ``test_*``
benchmarks of the release have no ``.labels``: ``validate(benchmark)`` or
``validate(benchmark, None, results)`` checks them without labels.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

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
    "validate",
    "write_atomic",
    "write_results",
]

IMAGES: tuple[str, ...] = (
    "ref",
    *(f"e{k}" for k in range(1, 6)),
    *(f"h{k}" for k in range(1, 6)),
    *(f"t{k}" for k in range(1, 6)),
)
"""The image names of a sequence: the reference and the easy, hard and tough jitters 1..5."""

N_RESULTS = 51
"""Signatures per line of a ``.results`` file: the query, then the 50 best other patches."""

_SEQUENCE = re.compile(r"[^.,\s/\\]+")  # no dot, comma, whitespace or path separator
_INDEX = re.compile(r"[0-9]+")
_IMAGE_SET = frozenset(IMAGES)
_SIGNATURE_RE = r"[^.,\s/\\]+\.(?:ref|[eht][1-5])\.[0-9]+"
_SIGNATURE_LINE = re.compile(rf"{_SIGNATURE_RE}(?:,{_SIGNATURE_RE})*")  # fast path, one per line
_EXPECTED_SIGNATURE = (
    "a signature 'seq.img.idx' (img one of ref, e1..e5, h1..h5, t1..t5; idx an integer >= 0)"
)
_EXPECTED_PATCH_IMAGE = "a patch-image 'seq.img' (img one of ref, e1..e5, h1..h5, t1..t5)"


class Signature(NamedTuple):
    """The parts of a patch signature ``seq.img.idx``."""

    sequence: str
    image: str
    index: int

    @property
    def patch_image(self) -> str:
        """``seq.img``, the patch-image the patch comes from."""
        return f"{self.sequence}.{self.image}"

    def __str__(self) -> str:
        return f"{self.sequence}.{self.image}.{self.index}"


def _signature_problem(text: str) -> str | None:
    parts = text.split(".")
    if len(parts) != 3:
        return f"{len(parts)} dot-separated parts instead of 3"
    sequence, image, index = parts
    if not _SEQUENCE.fullmatch(sequence):
        return "an empty or invalid sequence name"
    if image not in _IMAGE_SET:
        return f"unknown image {image!r}"
    if not _INDEX.fullmatch(index):
        return f"patch index {index!r} is not a non-negative integer"
    return None


def _patch_image_problem(text: str) -> str | None:
    parts = text.split(".")
    if len(parts) != 2:
        return f"{len(parts)} dot-separated parts instead of 2"
    if not _SEQUENCE.fullmatch(parts[0]):
        return "an empty or invalid sequence name"
    if parts[1] not in _IMAGE_SET:
        return f"unknown image {parts[1]!r}"
    return None


def parse_signature(text: str) -> Signature:
    """Split a patch signature ``seq.img.idx`` into its parts, checking each.

    Parameters
    ----------
    text : str
        ``seq.img.idx``: a sequence name without dots, commas, whitespace or path separators, an
        image of :data:`IMAGES` and a non-negative decimal integer.

    Returns
    -------
    Signature
        ``(sequence, image, index)``.

    Raises
    ------
    InvalidInputError
        If ``text`` is not a well-formed signature.

    Examples
    --------
    >>> parse_signature("i_chestnuts.ref.631")
    Signature(sequence='i_chestnuts', image='ref', index=631)
    >>> parse_signature("v_bricks.e1.85").patch_image
    'v_bricks.e1'
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"signature: expected a str, got {type(text).__name__}")
    problem = _signature_problem(text)
    if problem:
        raise InvalidInputError(f"expected {_EXPECTED_SIGNATURE}, got {text!r} ({problem})")
    sequence, image, index = text.split(".")
    return Signature(sequence, image, int(index))


def parse_patch_image(text: str) -> tuple[str, str]:
    """Split a patch-image name ``seq.img`` into ``(sequence, image)``, checking both.

    Examples
    --------
    >>> parse_patch_image("i_chestnuts.e3")
    ('i_chestnuts', 'e3')
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"patch-image: expected a str, got {type(text).__name__}")
    problem = _patch_image_problem(text)
    if problem:
        raise InvalidInputError(f"expected {_EXPECTED_PATCH_IMAGE}, got {text!r} ({problem})")
    sequence, image = text.split(".")
    return sequence, image


def patch_image(signature: str) -> str:
    """The patch-image ``seq.img`` of a signature ``seq.img.idx`` (validated).

    Examples
    --------
    >>> patch_image("i_chestnuts.ref.631")
    'i_chestnuts.ref'
    """
    return parse_signature(signature).patch_image


# -- the three files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    """A ``.benchmark`` file: the pool (line 1) and one query per following line.

    Attributes
    ----------
    pool : tuple of str
        Patch-image names ``seq.img``.
    queries : tuple of str
        Query signatures; query ``i`` (0-based) is on line ``i + 2`` of the file.
    path : Path or None
        The file it was read from; error messages name it (``<benchmark>`` when None).
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

    Attributes
    ----------
    pool : tuple of str
    clusters : tuple of tuple of str
        ``clusters[i]`` is on line ``i + 2`` and belongs to query ``i`` of the benchmark.
    path : Path or None
    """

    pool: tuple[str, ...]
    clusters: tuple[tuple[str, ...], ...]
    path: Path | None = None


@dataclass(frozen=True)
class Results:
    """A ``.results`` file: the pool and, per query, its ranked result signatures.

    Attributes
    ----------
    pool : tuple of str
    results : tuple of tuple of str
        ``results[i]`` is on line ``i + 2``: the best matches of query ``i`` by decreasing
        similarity, the query first, :data:`N_RESULTS` of them in a valid file.
    path : Path or None
    """

    pool: tuple[str, ...]
    results: tuple[tuple[str, ...], ...]
    path: Path | None = None

    @property
    def queries(self) -> tuple[str, ...]:
        """The first signature of every line (the query, in a valid file)."""
        return tuple(line[0] if line else "" for line in self.results)


def _where(path: Path | None, kind: str) -> str:
    return str(path) if path is not None else f"<{kind}>"


def _fail(where: str, line: int, message: str) -> InvalidInputError:
    return InvalidInputError(f"{where}, line {line}: {message}")


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


def _check_pool(pool: Sequence[str], where: str) -> None:
    if not pool:
        raise _fail(where, 1, f"expected a non-empty pool of patch-images, got {pool!r}")
    for position, name in enumerate(pool, start=1):
        problem = _patch_image_problem(name) if isinstance(name, str) else "not a str"
        if problem:
            raise _fail(
                where,
                1,
                f"pool entry {position}: expected {_EXPECTED_PATCH_IMAGE}, "
                f"got {name!r} ({problem})",
            )


def _check_signatures(signatures: Sequence[str], where: str, line: int) -> None:
    if all(isinstance(name, str) for name in signatures):
        joined = ",".join(signatures)
        if joined.count(",") == len(signatures) - 1 and _SIGNATURE_LINE.fullmatch(joined):
            return
    for position, name in enumerate(signatures, start=1):
        problem = _signature_problem(name) if isinstance(name, str) else "not a str"
        if problem:
            raise _fail(
                where,
                line,
                f"name {position}: expected {_EXPECTED_SIGNATURE}, got {name!r} ({problem})",
            )


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


def _read_lists(path: str | os.PathLike[str]) -> tuple[Path, tuple[str, ...], tuple]:
    path = Path(path)
    rows = _read_lines(path)
    _check_pool(rows[0], str(path))
    for number, row in enumerate(rows[1:], start=2):
        _check_signatures(row, str(path), number)
    return path, tuple(rows[0]), tuple(tuple(row) for row in rows[1:])


def read_labels(path: str | os.PathLike[str]) -> Labels:
    """Read a ``.labels`` file: the pool on line 1, then the cluster of each query.

    The checks against the benchmark (same pool and number of lines, query in its cluster) are
    :func:`validate`'s; reading checks the syntax only.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "tiny.labels"
    ...     _ = path.write_text("a.ref,a.e1\\na.ref.0,a.e1.0\\n")
    ...     read_labels(path).clusters
    (('a.ref.0', 'a.e1.0'),)
    """
    path, pool, clusters = _read_lists(path)
    return Labels(pool, clusters, path)


def read_results(path: str | os.PathLike[str]) -> Results:
    """Read a ``.results`` file: the pool on line 1, then the ranked signatures of each query.

    The checks against the benchmark (same pool and number of lines, query first, exactly
    :data:`N_RESULTS` names, every name from the pool) are :func:`validate`'s.
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
        checked here (:func:`validate` requires :data:`N_RESULTS`), the names are.

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
        if isinstance(row, str):
            raise InvalidInputError(f"results[{i}]: expected a sequence of signatures, got a str")
        row = list(row)
        if not row:
            raise InvalidInputError(f"results[{i}]: expected at least one signature, got none")
        _check_signatures(row, "results argument", i + 2)
        lines.append(",".join(row))
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


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


# -- validation -----------------------------------------------------------------------------------


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
    """Check a benchmark with its labels and results against every rule of PROTOCOLS.md 6.

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
    them); see :func:`metricalc.patches.evaluate_results` for how they count.

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


def _validate_labels(benchmark: Benchmark, labels: Labels, pool: frozenset[str]) -> None:
    if not isinstance(labels, Labels):
        raise InvalidInputError(f"labels: expected a Labels, got {type(labels).__name__}")
    where, bench = _where(labels.path, "labels"), _where(benchmark.path, "benchmark")
    _check_pool(labels.pool, where)
    for i, cluster in enumerate(labels.clusters):
        _check_signatures(cluster, where, i + 2)
    _check_header(labels.pool, benchmark, where)
    _check_line_count(len(labels.clusters) + 1, benchmark, where)
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
    _check_pool(results.pool, where)
    for i, row in enumerate(results.results):
        if not row:
            raise _fail(where, i + 2, f"expected {N_RESULTS} signatures, got none")
        _check_signatures(row, where, i + 2)
    _check_header(results.pool, benchmark, where)
    _check_line_count(len(results.results) + 1, benchmark, where)
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
