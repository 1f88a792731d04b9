"""A run evaluated from its file and the qrels file; small files read with NumPy alone.

Reading a TREC file with pyarrow's CSV reader (:mod:`~metricalc.retrieval.trec_files`) is fast
from a million lines on, but importing pyarrow takes longer than reading and evaluating a run of
some ten thousand lines. :func:`join_files` reads such files with a few vectorised NumPy passes
over their bytes and joins the run with the qrels (:class:`~metricalc.retrieval.ranking.Joined`),
as :func:`~metricalc.retrieval.ranking.join_run` joins the files read by pyarrow.

It takes the plain files only: every line (blank lines aside) with exactly four fields (qrels)
or six (run), separated by whitespace (``isspace``, as trec_eval splits them); integer
relevance values and numeric scores (not NaN), each read as Python's ``int`` and ``float`` read
them; no document twice for a query; no NUL byte, no byte order mark. Anything else (a longer
run line too) returns None, and :func:`evaluate_files` reads the files with
:mod:`~metricalc.retrieval.trec_files` instead, which takes the longer lines and names the line
of an error: the values and messages are those of the files read by pyarrow either way.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Unpack

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from metricalc.retrieval.ranking import Joined, join_run, relevance_code
from metricalc.retrieval.trec_eval import TrecEval, evaluate_joined

if TYPE_CHECKING:
    from collections.abc import Sequence

    from metricalc.retrieval.querycube import EvalOptions
    from metricalc.retrieval.zscores import ZScores

__all__ = ["SMALL", "evaluate_files", "join_files"]

SMALL = 8 << 20
"""Bytes (qrels and run together) up to which :func:`evaluate_files` reads with NumPy."""

LONGEST = 1024
"""The longest field (in bytes) that :func:`join_files` reads."""

_FIELD_BYTE = bytes(0 if byte in b" \t\n\v\f\r\0" else 1 for byte in range(256))
"""1 for a byte that belongs to a field, 0 for whitespace (C's ``isspace``) and NUL."""

def evaluate_files(qrels: str | os.PathLike[str], run: str | os.PathLike[str],
                   measures: Sequence[str] = ("official",), *, zscores: ZScores | None = None,
                   **options: Unpack[EvalOptions]) -> TrecEval:
    """Evaluate the run file ``run`` against the qrels file ``qrels``: what
    :func:`~metricalc.retrieval.evaluate` gives for :func:`~metricalc.retrieval.read_qrels` and
    :func:`~metricalc.retrieval.read_run` of them, with its options (``complete``, ``level``,
    ``depth``, ``ties``, ``scores``, ``judged_only``, ``num_docs``, ``zscores``); the files are
    read with NumPy alone when they are small (:data:`SMALL`) and plain (:func:`join_files`).

    Examples
    --------
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> with TemporaryDirectory() as folder:
    ...     q, r = Path(folder) / "qrels", Path(folder) / "run"
    ...     _ = q.write_text("q1 0 d1 1\\nq1 0 d2 1\\nq1 0 d3 0\\n")
    ...     _ = r.write_text("q1 Q0 d1 1 3.0 bm25\\nq1 Q0 d3 2 2.0 bm25\\nq1 Q0 d2 3 1.0 bm25\\n")
    ...     evaluate_files(q, r, ["map", "P.2"]).summary
    {'map': 0.8333333333333333, 'P_2': 0.5}
    """
    joined = join_files(qrels, run) if _size(qrels) + _size(run) <= SMALL else None
    if joined is None:
        from metricalc.retrieval.trec_files import read_qrels, read_run

        joined = join_run(read_qrels(qrels), read_run(run))
    return evaluate_joined(joined, measures, zscores=zscores, **options)


def _size(path: str | os.PathLike[str]) -> int:
    """The size of the file at ``path`` in bytes; one beyond :data:`SMALL` if there is none (the
    reader of large files then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return SMALL + 1


def join_files(qrels: str | os.PathLike[str], run: str | os.PathLike[str]) -> Joined | None:
    """The run file ``run`` joined with the qrels file ``qrels``, read with NumPy; None if
    either file is not plain (module docstring) or cannot be read.

    Examples
    --------
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> with TemporaryDirectory() as folder:
    ...     q, r = Path(folder) / "qrels", Path(folder) / "run"
    ...     _ = q.write_text("q1 0 d1 1\\nq2 0 d1 0\\n")
    ...     _ = r.write_text("q1 Q0 d2 1 2.5 bm25\\nq1 Q0 d1 2 1.5 bm25\\nq3 Q0 d1 1 1 bm25\\n")
    ...     joined = join_files(q, r)
    ...     joined.query.tolist(), joined.code.tolist(), joined.tag
    ...     _ = r.write_text("q1 Q0 d2 1 2.5\\n")  # five fields
    ...     join_files(q, r) is None
    ([0, 0], [-1, 1], 'bm25')
    True
    """
    judged = _columns(qrels, 4, (0, 2, 3))
    ranked = _columns(run, 6, (0, 2, 4))
    if judged is None or ranked is None:
        return None
    (judged_qid, judged_docno, judged_rel), _ = judged
    (run_qid, run_docno, run_score), tag = ranked
    try:
        rel = _as_bytes(judged_rel).astype(np.int64)
        score = _decimals(run_score)
    except (ValueError, OverflowError):
        return None
    if np.isnan(score).any():
        return None
    qids, query = _encode(judged_qid)
    # documents of both files in one code space, in byte order
    width = max(judged_docno.shape[1], run_docno.shape[1])
    docnos, doc = _encode(np.concatenate([_widened(judged_docno, width),
                                          _widened(run_docno, width)]))
    judged_doc, run_doc = doc[: rel.size], doc[rel.size:]
    qrels_key = query * np.int64(docnos.size) + judged_doc
    order = np.argsort(qrels_key, kind="stable")
    qrels_key = qrels_key[order]
    run_qids, run_query = _encode(run_qid)
    run_key = np.sort(run_query * np.int64(docnos.size) + run_doc)
    if (qrels_key[1:] == qrels_key[:-1]).any() or (run_key[1:] == run_key[:-1]).any():
        return None  # a document twice for a query: trec_files names the line
    # the run's queries in the qrels' codes (-1: no qrels), then each line's judgment
    at = np.minimum(np.searchsorted(qids, run_qids), qids.size - 1)
    run_q = np.where(qids[at] == run_qids, at, -1)[run_query]
    keep = np.flatnonzero(run_q >= 0)
    key = run_q[keep] * np.int64(docnos.size) + run_doc[keep]
    at = np.minimum(np.searchsorted(qrels_key, key), qrels_key.size - 1)
    found = np.where(qrels_key[at] == key, order[at], -1)
    return Joined(run_q[keep], run_doc[keep], score[keep], relevance_code(found, rel), docnos,
                  qids, query, rel, tag.decode("utf-8", "replace"), str(run), str(qrels))


def _columns(path: str | os.PathLike[str], n_fields: int,
             wanted: tuple[int, ...]) -> tuple[list[np.ndarray], bytes] | None:
    """The fields ``wanted`` (column numbers) of a TREC file, each column as a matrix of bytes
    (one row per line, shorter fields padded with NUL bytes), and the last field of the last
    line; None if a line (blank lines aside) has another number of fields than ``n_fields``, a
    field is longer than :data:`LONGEST`, or the file is empty, holds a NUL byte, starts with a
    byte order mark or cannot be read."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            text = bytearray(size + 1 + LONGEST)  # NUL bytes around the file's bytes
            if file.readinto(memoryview(text)[1:size + 1]) != size or file.read(1):
                return None  # the file changed while read
    except OSError:
        return None
    if text.find(b"\0", 1, size + 1) >= 0 or text.startswith(b"\xef\xbb\xbf", 1):
        return None
    # fields start where whitespace (or the NUL padding) ends, and end where it starts; a
    # megabyte of new memory costs about as much as reading it, so the masks share one array
    in_field = np.frombuffer(text.translate(_FIELD_BYTE), dtype=bool)
    mask = np.zeros(in_field.size, dtype=bool)
    np.not_equal(in_field[1:], in_field[:-1], out=mask[1:])
    edges = np.flatnonzero(mask)
    starts, ends = edges[0::2], edges[1::2]
    if starts.size == 0 or starts.size % n_fields:
        return None
    # each group of n_fields fields is one line: the fields before every line end are a
    # multiple of n_fields, and every multiple between the first and the last field is
    chars = np.frombuffer(text, dtype=np.uint8)
    before = np.searchsorted(starts, np.flatnonzero(np.equal(chars, ord("\n"), out=mask)))
    inner = before[(before > 0) & (before < starts.size)]
    if (before % n_fields).any() or (
        np.count_nonzero(np.diff(inner)) + (inner.size > 0) != starts.size // n_fields - 1
    ):
        return None
    columns = [_field(chars, starts[k::n_fields], ends[k::n_fields]) for k in wanted]
    if any(column.shape[1] > LONGEST for column in columns):
        return None
    return columns, bytes(text[starts[-1]:ends[-1]])


def _field(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The bytes ``text[starts[i]:ends[i]]`` as the rows of a matrix, padded with NUL bytes
    (``text`` ends with at least as many bytes as the longest field has)."""
    length = ends - starts
    width = min(int(length.max()), LONGEST + 1)  # longer: refused
    rows: np.ndarray = sliding_window_view(text, width)[starts]
    rows *= np.arange(width) < length[:, None]
    return rows


def _widened(chars: np.ndarray, width: int) -> np.ndarray:
    """``chars`` padded with NUL bytes to ``width`` columns."""
    return np.pad(chars, ((0, 0), (0, width - chars.shape[1])))


def _as_bytes(chars: np.ndarray) -> np.ndarray:
    """The rows of a matrix of bytes as a NumPy bytes array (NumPy drops the padding NULs)."""
    result: np.ndarray = np.ascontiguousarray(chars).view(f"S{chars.shape[1]}").ravel()
    return result


def _encode(chars: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a matrix of bytes in byte order (a NumPy bytes array) and the code
    of every row. Rows of up to 8 bytes are sorted as big-endian 64-bit integers (the same
    order); a block of equal rows (the query ids of a file) is sorted once."""
    keys = _widened(chars, 8).view(">u8").ravel() if chars.shape[1] <= 8 else _as_bytes(chars)
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    if heads.size < keys.size // 2:
        distinct, code = np.unique(keys[heads], return_inverse=True)
        code = np.repeat(code, np.diff(np.r_[heads, keys.size]))
    else:
        distinct, code = np.unique(keys, return_inverse=True)
    names = distinct.view("S8") if distinct.dtype.kind == "u" else distinct
    return names, code


POWERS = 10.0 ** np.arange(16)
"""10 ** k as doubles (exact), for the decimals of :func:`_decimals`."""


def _decimals(chars: np.ndarray) -> np.ndarray:
    """The numbers written in the rows of a matrix of bytes, as Python's ``float`` reads them
    (:class:`ValueError` for one it refuses).

    A row ``[-]digits[.digits]`` of at most 15 digits is :math:`\\pm m / 10^f` (``m`` its
    digits as an integer, ``f`` those after the point): both are exact doubles, so the one
    division, rounded as IEEE 754 rounds it, gives the double nearest to the decimal, as
    ``float`` does. Other rows (an exponent, more digits, ``inf``) are read by ``float``.
    """
    n_digits = np.zeros(chars.shape[0], dtype=np.int64)
    after = np.zeros_like(n_digits)  # digits after the point
    point = np.zeros(chars.shape[0], dtype=bool)  # the point was seen
    mantissa = np.zeros(chars.shape[0])  # exact: below 10 ** 15 < 2 ** 53
    for column in np.ascontiguousarray(chars.T):  # digit by digit, all rows at once
        digit = column - np.uint8(ord("0"))
        is_digit = digit < 10
        with np.errstate(over="ignore"):  # over 308 digits: inf, and the row is not simple
            np.multiply(mantissa, 10, out=mantissa, where=is_digit)
        np.add(mantissa, digit, out=mantissa, where=is_digit)
        n_digits += is_digit
        after += is_digit & point
        point |= column == ord(".")
    negative = chars[:, 0] == ord("-")
    n_points = np.count_nonzero(chars == ord("."), axis=1)
    simple = ((n_digits + n_points + negative == np.count_nonzero(chars, axis=1))
              & (n_points <= 1) & (n_digits > 0) & (n_digits <= 15))
    value = mantissa / POWERS[np.minimum(after, 15)]
    value = np.where(negative, -value, value)
    other = np.flatnonzero(~simple)
    if other.size:
        value[other] = _as_bytes(chars[other]).astype(np.float64)
    return value
