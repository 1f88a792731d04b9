"""TREC qrels and run files: read, validate, write.

- qrels: one judgment per line, ``qid iter docno rel`` (exactly four fields, ``rel`` an integer;
  ``iter`` is ignored), as trec_eval's ``get_qrels.c`` reads them;
- run: one retrieved document per line, ``qid Q0 docno rank score tag`` (six fields or more, the
  ones after ``tag`` ignored; ``Q0`` and ``rank`` are ignored, ``score`` a number), as
  ``get_trec_results.c`` reads them. The run's tag is the one of its last line (trec_eval's
  ``runid``).

Fields are separated by whitespace; blank lines are skipped. Identifiers are kept as bytes, so
they compare byte by byte as trec_eval's ``strcmp`` does, whatever their encoding.

Reading is fast: pyarrow's multi-threaded CSV reader parses the file, as it is when its fields
are separated by one space or one tab, else re-spaced first
(:func:`~metricalc.retrieval.spacing.single_spaced`: runs of spaces and tabs, carriage returns).
Anything that reader refuses (a malformed line) is read again line by line, which raises an
:class:`~metricalc.errors.InvalidInputError` naming the file and the line: a line with too few
fields, a score or relevance that is not a number, the same document twice for one query, an empty
file.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from metricalc.errors import InvalidInputError
from metricalc.retrieval.arrow import call, from_bytes, take, to_numpy
from metricalc.retrieval.order import trec_order
from metricalc.retrieval.small_files import SMALL, judgments
from metricalc.retrieval.spacing import single_spaced

__all__ = ["Qrels", "Run", "read_qrels", "read_run", "write_qrels", "write_run"]

QRELS_FORMAT = "'qid iter docno rel'"
RUN_FORMAT = "'qid Q0 docno rank score tag'"


@dataclass(frozen=True, eq=False)
class Qrels:
    """Relevance judgments: judgment ``i`` says document ``docnos[doc[i]]`` has relevance
    ``rel[i]`` for query ``qids[qid[i]]``.

    ``qids`` and ``docnos`` are the distinct identifiers (bytes); ``qids`` is in byte order, so
    comparing codes compares identifiers as ``strcmp`` does. ``source`` names the data in messages.
    """

    qids: pa.Array
    qid: np.ndarray
    docnos: pa.Array
    doc: np.ndarray
    rel: np.ndarray
    source: str = "qrels"

    @classmethod
    def from_dict(cls, judgments: Mapping[str, Mapping[str, int]]) -> Qrels:
        """Qrels from ``{qid: {docno: rel}}`` (the shape pytrec_eval takes).

        Examples
        --------
        >>> Qrels.from_dict({"q1": {"d1": 1, "d2": 0}}).rel.tolist()
        [1, 0]
        """
        return _qrels_from_lists(*_flatten(judgments, int), "qrels")

    def __len__(self) -> int:
        return int(self.rel.size)


@dataclass(frozen=True, eq=False)
class Run:
    """A ranking: line ``i`` retrieves document ``docnos[doc[i]]`` with ``score[i]`` for query
    ``qids[qid[i]]``; ``tag`` is the run id (the tag of the last line of a run file).

    ``qids`` is in byte order, ``docnos`` in first-seen order.
    """

    qids: pa.Array
    qid: np.ndarray
    docnos: pa.Array
    doc: np.ndarray
    score: np.ndarray
    tag: str = "run"
    source: str = "run"

    @classmethod
    def from_dict(cls, scores: Mapping[str, Mapping[str, float]], *, tag: str = "run") -> Run:
        """A run from ``{qid: {docno: score}}`` (the shape pytrec_eval takes).

        Examples
        --------
        >>> Run.from_dict({"q1": {"d1": 0.5, "d2": 0.25}}).score.tolist()
        [0.5, 0.25]
        """
        return _run_from_lists(*_flatten(scores, float), tag, "run")

    def __len__(self) -> int:
        return int(self.score.size)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read a TREC qrels file (``qid iter docno rel`` per line).

    Examples
    --------
    A round trip through :func:`write_qrels`:

    >>> from tempfile import TemporaryDirectory
    >>> judged = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}})
    >>> with TemporaryDirectory() as folder:
    ...     written = write_qrels(Path(folder) / "qrels.txt", judged)
    ...     print(written.read_text(), end="")
    ...     read_qrels(written).rel.tolist()
    q1 0 d1 1
    q1 0 d2 0
    [1, 0]
    """
    path = _existing(path, QRELS_FORMAT)
    judged = judgments(path) if path.stat().st_size <= SMALL else None
    if judged is not None:  # a plain file of a few megabytes: NumPy reads it faster
        qids, qid, docnos, doc, rel = judged
        return Qrels(from_bytes(qids), qid, from_bytes(docnos), doc, rel, str(path))
    table = _fast_table(path, ["qid", "iter", "docno", "rel"], {"rel": pa.int64()},
                        ["qid", "docno", "rel"])
    if table is None:
        return _scan_qrels(path)
    return _make_qrels(table["qid"], table["docno"], to_numpy(table["rel"]), str(path), path)


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read a TREC run file (``qid Q0 docno rank score tag`` per line).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = Path(tmp) / "run.txt"
    ...     _ = p.write_text("q1 Q0 d1 1 2.5 bm25\\nq1 Q0 d2 2 1.5 bm25\\n")
    ...     run = read_run(p)
    ...     run.score.tolist(), run.tag
    ([2.5, 1.5], 'bm25')
    """
    path = _existing(path, RUN_FORMAT)
    names = ["qid", "q0", "docno", "rank", "score", "tag"]
    table = _fast_table(path, names, {"score": pa.float64()}, ["qid", "docno", "score"])
    if table is None:
        return _scan_run(path)
    score = to_numpy(table["score"])
    if np.isnan(score).any():
        return _scan_run(path)  # raises, naming the line
    tag = _last_field(path).decode("utf-8", "replace")  # every line has six fields
    return _make_run(table["qid"], table["docno"], score, tag, str(path), path)


def _existing(path: str | os.PathLike[str], fmt: str) -> Path:
    path = Path(path)
    if not path.is_file():
        what = "not a file" if path.exists() else "no such file"
        raise InvalidInputError(f"{path}: {what}; expected a TREC file of {fmt} lines")
    try:
        with path.open("rb") as f:
            start = f.read(1 << 16)
    except OSError as error:
        raise InvalidInputError(f"{path}: cannot read the file ({error.strerror})") from None
    if not start.strip():
        raise InvalidInputError(f"{path}: the file is empty; expected {fmt} lines")
    return path


def _fast_table(path: Path, names: list[str], types: dict[str, pa.DataType],
                kept: list[str]) -> pa.Table | None:
    """The columns ``kept`` of the file through pyarrow's CSV reader, or None when that reader
    cannot take it (the line-by-line reader then decides, naming the bad line).

    A file whose fields are separated by one space (or one tab) is read as it is; any other
    spacing (runs of spaces, tabs and spaces mixed, carriage returns, whitespace at the start or
    end of a line) is first re-spaced by :func:`~metricalc.retrieval.spacing.single_spaced`.
    """
    with path.open("rb") as f:
        first = f.readline()
    delimiter = "\t" if b"\t" in first and b" " not in first.strip() else " "
    if not _needs_respacing(path, delimiter):
        table = _csv_table(path, delimiter, names, types, kept)
        if table is not None:
            return table
    return _csv_table(pa.py_buffer(single_spaced(path)), " ", names, types, kept)


def _csv_table(source: Path | pa.Buffer, delimiter: str, names: list[str],
               types: dict[str, pa.DataType], kept: list[str]) -> pa.Table | None:
    """The columns ``kept`` of ``source`` read with one ``delimiter`` between fields, or None
    if a line has another number of fields, an empty field (two delimiters in a row) or a value
    not of ``types``. (The parser reads every field; only the kept ones become arrays.)"""
    column_types = {name: pa.binary() for name in kept} | types
    try:
        table = pcsv.read_csv(
            pa.BufferReader(source) if isinstance(source, pa.Buffer) else source,
            read_options=pcsv.ReadOptions(column_names=names),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char=False),
            convert_options=pcsv.ConvertOptions(column_types=column_types, include_columns=kept),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if any(table[name].null_count for name in types) or any(
        call("min", call("binary_length", table[name])).as_py() == 0
        for name in kept if name not in types
    ):
        return None
    return table


def _needs_respacing(path: Path, delimiter: str) -> bool:
    """Whether the file holds whitespace other than ``delimiter`` and line ends, or an empty
    field (two delimiters in a row, one at the start or end of a line): the columns not kept
    are not checked after reading."""
    sep = delimiter.encode()
    others = [c for c in (b"\t", b"\x0b", b"\x0c", b"\r", b" ") if c != sep]
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if any(data.find(c) >= 0 for c in others) or data[:1] == sep or data[-1:] == sep:
            return True
    return _empty_field(path, sep[0])


SCAN_BLOCK = 1 << 22
"""Bytes of a file compared at a time by :func:`_empty_field`."""


def _empty_field(path: Path, sep: int) -> bool:
    """Whether two bytes in a row of the file are two separators ``sep``, a separator and a
    line end, or a line end and a separator: every aligned pair of bytes compared at once as a
    16-bit integer, block by block (``bytes.find`` of a two-byte pattern whose bytes are
    frequent is several times slower)."""
    nl = ord("\n")
    pairs = np.array([sep * 257, sep + nl * 256, nl + sep * 256], dtype="<u2")  # little-endian
    last = b""
    with path.open("rb") as f:
        while block := f.read(SCAN_BLOCK):
            chars = np.frombuffer(last + block, dtype=np.uint8)
            last = block[-1:]  # the pair across two blocks
            for first in (0, 1):
                pair = chars[first:first + (chars.size - first) // 2 * 2].view("<u2")
                if ((pair == pairs[0]) | (pair == pairs[1]) | (pair == pairs[2])).any():
                    return True
    return False


def _last_field(path: Path) -> bytes:
    """The last field of the last line of the file (blank lines aside)."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        tail = 1 << 12
        while True:
            f.seek(max(0, size - tail))
            fields = f.read().split()
            if len(fields) > 1 or tail >= size:  # the last one whole
                return fields[-1] if fields else b""
            tail *= 16


def _lines(path: Path) -> Iterator[tuple[int, list[bytes]]]:
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if fields:
                yield number, fields


def _scan_qrels(path: Path) -> Qrels:
    qid, docno, rel, _ = _scan(path, QRELS_FORMAT, 4, exact=True, value_at=3,
                                 parse=_relevance, verb="judged")
    return _qrels_from_lists(qid, docno, rel, str(path))


def _scan_run(path: Path) -> Run:
    qid, docno, score, last = _scan(path, RUN_FORMAT, 6, exact=False, value_at=4,
                                     parse=_score, verb="retrieved")
    return _run_from_lists(qid, docno, score, _text(last[5] if last else b""), str(path))


def _scan(
    path: Path, fmt: str, n_fields: int, *, exact: bool, value_at: int,
    parse: Callable[[str, bytes], float], verb: str,
) -> tuple[list[bytes], list[bytes], list[float], list[bytes]]:
    """The qids (field 0), docnos (field 2) and values (field ``value_at``, through ``parse``) of
    a TREC file read line by line, and the fields of its last line; an
    :class:`~metricalc.errors.InvalidInputError` naming the line for a line with other than
    ``n_fields`` fields (fewer only, unless ``exact``), a value ``parse`` refuses, or a (qid,
    docno) pair ``verb`` twice."""
    qid: list[bytes] = []
    docno: list[bytes] = []
    values: list[float] = []
    fields: list[bytes] = []
    seen: set[tuple[bytes, bytes]] = set()
    for number, fields in _lines(path):
        where = f"{path} line {number}"
        if len(fields) < n_fields or (exact and len(fields) != n_fields):
            raise InvalidInputError(
                f"{where}: expected {n_fields} fields {fmt}; found {len(fields)}"
            )
        value = parse(where, fields[value_at])
        key = (fields[0], fields[2])
        if key in seen:
            raise InvalidInputError(
                f"{where}: document {_text(fields[2])!r} is {verb} twice for query "
                f"{_text(fields[0])!r}"
            )
        seen.add(key)
        qid.append(fields[0])
        docno.append(fields[2])
        values.append(value)
    return qid, docno, values, fields


def _relevance(where: str, field: bytes) -> int:
    try:
        return int(field)
    except ValueError:
        raise InvalidInputError(f"{where}: relevance {_text(field)!r} is not an integer") from None


def _score(where: str, field: bytes) -> float:
    try:
        value = float(field)
    except ValueError:
        value = float("nan")
    if value != value:
        raise InvalidInputError(f"{where}: score {_text(field)!r} is not a number")
    return value


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# Encoding identifiers as integer codes
# --------------------------------------------------------------------------------------------


def encode(values: pa.Array | pa.ChunkedArray, *, sort: bool,
           grouped: bool = False) -> tuple[np.ndarray, pa.Array]:
    """Integer codes and the distinct values (in byte order if ``sort``) of a binary column.

    ``grouped``: the values come in blocks of equal values (the query ids of a run or qrels
    file), so only the first value of each block is hashed; the others take its code.
    """
    if isinstance(values, pa.ChunkedArray) and len(values) == 0:
        values = values.combine_chunks()
    if grouped and len(values) > 1:
        n = len(values)
        changes = call("indices_nonzero",
                       call("not_equal", values.slice(1), values.slice(0, n - 1)))
        if isinstance(changes, pa.ChunkedArray):
            changes = changes.combine_chunks()
        heads = np.r_[0, to_numpy(changes).astype(np.int64) + 1]
        if heads.size < n // 2:
            codes, uniques = encode(take(values, heads), sort=sort)
            return np.repeat(codes, np.diff(np.r_[heads, n])), uniques
    encoded = call("dictionary_encode", values)  # chunks share one dictionary
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    codes = np.concatenate([to_numpy(chunk.indices) for chunk in chunks]).astype(np.int64)
    uniques = chunks[0].dictionary
    if sort:
        order = to_numpy(call("sort_indices", uniques))
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        codes = rank[codes]
        uniques = take(uniques, order)
    return codes, uniques


def _duplicate_row(qid: np.ndarray, doc: np.ndarray, n_docs: int) -> int | None:
    """Index of the first row repeating an earlier (qid, doc) pair, or None."""
    keys = qid * np.int64(max(n_docs, 1)) + doc
    ordered = np.sort(keys)  # a SIMD sort: far faster than hashing to find that there is none
    if not (ordered[1:] == ordered[:-1]).any():
        return None
    order = np.argsort(keys, kind="stable")  # a repeat sorts after the row it repeats
    repeats = order[1:][keys[order[1:]] == keys[order[:-1]]]
    return int(repeats.min())


def _qrels_from_lists(qid: list[bytes], docno: list[bytes], rel: list[float],
                      source: str) -> Qrels:
    """Qrels from lists of identifiers and relevance values (not read from a file)."""
    return _make_qrels(pa.array(qid, pa.binary()), pa.array(docno, pa.binary()),
                       np.asarray(rel, dtype=np.int64), source, None)


def _run_from_lists(qid: list[bytes], docno: list[bytes], score: list[float], tag: str,
                    source: str) -> Run:
    """A run from lists of identifiers and scores (not read from a file)."""
    return _make_run(pa.array(qid, pa.binary()), pa.array(docno, pa.binary()),
                     np.asarray(score, dtype=np.float64), tag, source, None)


def _make_qrels(qid: pa.Array | pa.ChunkedArray, docno: pa.Array | pa.ChunkedArray,
                rel: np.ndarray, source: str, path: Path | None) -> Qrels:
    rescan = None if path is None else lambda: _scan_qrels(path)
    qcodes, qids, dcodes, docnos = _identifiers(qid, docno, source, "judged", rescan)
    return Qrels(qids, qcodes, docnos, dcodes, rel.astype(np.int64, copy=False), source)


def _make_run(qid: pa.Array | pa.ChunkedArray, docno: pa.Array | pa.ChunkedArray,
              score: np.ndarray, tag: str, source: str, path: Path | None) -> Run:
    score = score.astype(np.float64, copy=False)
    if np.isnan(score).any():
        raise InvalidInputError(f"{source}: score {np.nan} is not a number")
    rescan = None if path is None else lambda: _scan_run(path)
    qcodes, qids, dcodes, docnos = _identifiers(qid, docno, source, "retrieved", rescan)
    return Run(qids, qcodes, docnos, dcodes, score, tag, source)


def _identifiers(
    qid: pa.Array | pa.ChunkedArray, docno: pa.Array | pa.ChunkedArray, source: str, verb: str,
    rescan: Callable[[], object] | None,
) -> tuple[np.ndarray, pa.Array, np.ndarray, pa.Array]:
    """Query codes and qids (byte order), document codes and docnos (first-seen order); a
    (qid, docno) pair ``verb`` twice is refused, by ``rescan`` (reading the file again line by
    line names the line) or else naming the pair."""
    qcodes, qids = encode(qid, sort=True, grouped=True)
    dcodes, docnos = encode(docno, sort=False)
    row = _duplicate_row(qcodes, dcodes, len(docnos))
    if row is not None:
        if rescan is not None:
            rescan()
        raise InvalidInputError(
            f"{source}: document {_text(docnos[int(dcodes[row])].as_py())!r} is {verb} twice "
            f"for query {_text(qids[int(qcodes[row])].as_py())!r}"
        )
    return qcodes, qids, dcodes, docnos


def _flatten(
    nested: Mapping[str, Mapping[str, float]] | Mapping[str, Mapping[str, int]], kind: type
) -> tuple[list[bytes], list[bytes], list[float]]:
    qid: list[bytes] = []
    docno: list[bytes] = []
    values: list[float] = []
    what = "an integer relevance" if kind is int else "a numeric score"
    for q, docs in nested.items():
        for d, v in docs.items():
            if not isinstance(v, int | float | np.integer | np.floating) or (
                kind is int and not float(v).is_integer()
            ):
                raise InvalidInputError(f"query {q!r} document {d!r}: expected {what}; got {v!r}")
            qid.append(str(q).encode())
            docno.append(str(d).encode())
            values.append(v)
    return qid, docno, values


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_qrels(path: str | os.PathLike[str], qrels: Qrels) -> Path:
    """Write ``qrels`` as a TREC qrels file (``qid 0 docno rel``), atomically."""
    table = pa.table({
        "qid": qrels.qids.take(pa.array(qrels.qid)),
        "iter": pa.array(np.zeros(len(qrels), dtype=np.int64)),
        "docno": qrels.docnos.take(pa.array(qrels.doc)),
        "rel": pa.array(qrels.rel),
    })
    return _write(path, table)


def write_run(path: str | os.PathLike[str], run: Run) -> Path:
    """Write ``run`` as a TREC run file (``qid Q0 docno rank score tag``), atomically.

    Lines are in trec_eval's order (query in byte order, score descending, ties by docno
    descending) with ranks 1, 2, ... per query; scores are written as the shortest text that
    reads back as the same float64 (pyarrow's cast to string), so reading the file back gives
    the same numbers.
    """
    order = trec_order(run.qid, run.score, run.doc, run.docnos)
    qid = run.qid[order]
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]]) if qid.size else qid
    rank = np.arange(qid.size) - np.repeat(starts, np.diff(np.r_[starts, qid.size])) + 1
    score = pa.array(run.score[order], pa.float64()).cast(pa.string())
    table = pa.table({
        "qid": run.qids.take(pa.array(qid)),
        "q0": pa.array(["Q0"] * qid.size, pa.string()),
        "docno": run.docnos.take(pa.array(run.doc[order])),
        "rank": pa.array(rank),
        "score": score,
        "tag": pa.array([run.tag] * qid.size, pa.string()),
    })
    return _write(path, table)


def _write(path: str | os.PathLike[str], table: pa.Table) -> Path:
    from metricalc.retrieval.writer import trec_writer  # and the file utilities: when writing

    with trec_writer(path) as out:
        out.write_table(table)
    return Path(path)
