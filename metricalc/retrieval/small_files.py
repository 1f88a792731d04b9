"""Small TREC files read with NumPy alone (:mod:`~metricalc.retrieval.small_join` joins them).

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
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["LONGEST", "SMALL", "judgments"]

SMALL = 8 << 20
"""Bytes (qrels and run together) up to which TREC files are read with NumPy
(:func:`metricalc.retrieval.small_join.evaluate_files`)."""

LONGEST = 1024
"""The longest field (in bytes) read here."""

_SPACE_BYTE = bytes(byte in b" \t\n\v\f\r\0" for byte in range(256))
"""1 for whitespace (C's ``isspace``) and NUL, 0 for a byte of a field."""

Field = tuple[np.ndarray, np.ndarray]
"""Where a field of every line starts and ends in the bytes of its file."""


def judgments(qrels: str | os.PathLike[str]) -> tuple[np.ndarray, ...] | None:
    """The qrels file ``qrels`` read with NumPy: its distinct query ids and its distinct
    document numbers in byte order (NumPy bytes arrays), and the codes of both and the
    relevance of every judgment; None if the file is not plain (module docstring) or cannot be
    read.

    Examples
    --------
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> with TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "qrels").write_text("q2 0 d9 1\\nq10 0 d1 0\\nq10 0 d9 2\\n")
    ...     [a.tolist() for a in judgments(Path(folder) / "qrels")]
    [[b'q10', b'q2'], [1, 0, 0], [b'd1', b'd9'], [1, 0, 1], [1, 0, 2]]
    """
    judged = _columns(qrels, 4, (0, 2, 3))
    if judged is None:
        return None
    text, (qid, docno, value), _ = judged
    try:  # ValueError: a number Python does not read, a field longer than LONGEST
        rel = _as_bytes(_field(text, *value)).astype(np.int64)
        qids, query = _encode(_keys(text, *qid))
        docnos, doc = _encode(_keys(text, *docno))
    except (ValueError, OverflowError):
        return None
    key = np.sort(query * np.int64(docnos.size) + doc)
    if (key[1:] == key[:-1]).any():
        return None  # a document judged twice for a query: trec_files names the line
    return qids, query, docnos, doc, rel


def _columns(path: str | os.PathLike[str], n_fields: int,
             wanted: tuple[int, ...]) -> tuple[np.ndarray, list[Field], bytes] | None:
    """The bytes of a TREC file (between NUL bytes, :data:`LONGEST` of them after it), the
    fields ``wanted`` (column numbers) of its lines, and the last field of the last line; None
    if a line (blank lines aside) has another number of fields than ``n_fields``, a field
    wanted is longer than :data:`LONGEST`, or the file is empty, holds a NUL byte, starts with
    a byte order mark or cannot be read.

    A megabyte of new memory costs about as much time as a pass over it, so the passes over
    the file's bytes make few arrays of that size.
    """
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            text = bytearray(size + 1 + LONGEST)
            if file.readinto(memoryview(text)[1:size + 1]) != size or file.read(1):
                return None  # the file changed while read
    except OSError:
        return None
    if size == 0 or text.find(b"\0", 1, size + 1) >= 0 or text.startswith(b"\xef\xbb\xbf", 1):
        return None
    chars = np.frombuffer(text, dtype=np.uint8)
    # whitespace (C's isspace) between the fields; NUL (the padding) as whitespace too
    space = text.translate(_SPACE_BYTE)
    bounds = _one_space(chars, space, size, n_fields) or _any_space(chars, space, n_fields)
    del space
    if bounds is None:
        return None
    starts, ends = bounds(n_fields - 1)
    return chars, [bounds(k) for k in wanted], bytes(text[starts[-1]:ends[-1]])


Bounds = Callable[[int], tuple[np.ndarray, np.ndarray]]
"""Where field ``k`` (the argument) of every line starts and ends."""


def _one_space(chars: np.ndarray, space: bytearray, size: int, n_fields: int) -> Bounds | None:
    """The fields of a file whose lines end with a line end and have ``n_fields`` fields, one
    whitespace byte between two (the common file: a pass over the separators only); None for
    any other file. ``space``: 1 for each whitespace byte of ``chars``, else 0."""
    if space.find(b"\1\1", 1, size + 1) >= 0:
        return None  # two whitespace bytes in a row
    # the first separator: the NUL byte before the file
    separators = np.flatnonzero(np.frombuffer(space, dtype=bool, count=size + 1))
    if (separators.size - 1) % n_fields or separators.size == 1 or separators[-1] != size:
        return None
    newline = chars[separators] == ord("\n")
    if not newline[n_fields::n_fields].all() or np.count_nonzero(newline) * n_fields != (
        separators.size - 1
    ):
        return None
    # field k of a line: after separator k of the line (0: the line end before it), up to
    # separator k + 1
    return lambda k: (separators[k:-1:n_fields] + 1, separators[k + 1::n_fields])


def _any_space(chars: np.ndarray, spaces: bytearray, n_fields: int) -> Bounds | None:
    """The fields of a file whose lines (blank lines aside) have ``n_fields`` fields between
    any whitespace; None for another file. ``spaces``: as for :func:`_one_space`."""
    space = np.frombuffer(spaces, dtype=bool)
    mask = np.zeros(space.size, dtype=bool)
    np.not_equal(space[1:], space[:-1], out=mask[1:])  # fields start and end where it changes
    edges = np.flatnonzero(mask)
    starts, ends = edges[0::2], edges[1::2]
    if starts.size == 0 or starts.size % n_fields:
        return None
    # each group of n_fields fields is one line: the fields before every line end are a
    # multiple of n_fields, and every multiple between the first and the last field is
    before = np.searchsorted(starts, np.flatnonzero(np.equal(chars, ord("\n"), out=mask)))
    inner = before[(before > 0) & (before < starts.size)]
    if (before % n_fields).any() or (
        np.count_nonzero(np.diff(inner)) + (inner.size > 0) != starts.size // n_fields - 1
    ):
        return None
    return lambda k: (starts[k::n_fields], ends[k::n_fields])


def _field(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The bytes ``text[starts[i]:ends[i]]`` as the rows of a matrix, padded with NUL bytes."""
    length = ends - starts
    width = _width(length)
    rows: np.ndarray = sliding_window_view(text, width)[starts]
    rows *= np.arange(width) < length[:, None]
    return rows


def _width(length: np.ndarray) -> int:
    """The longest of the fields of lengths ``length``; :class:`ValueError` if it is longer
    than :data:`LONGEST` (the bytes after the file)."""
    width = int(length.max())
    if width > LONGEST:
        raise ValueError(f"a field of {width} bytes")
    return width


def _as_bytes(chars: np.ndarray) -> np.ndarray:
    """The rows of a matrix of bytes as a NumPy bytes array (NumPy drops the padding NULs)."""
    result: np.ndarray = np.ascontiguousarray(chars).view(f"S{chars.shape[1]}").ravel()
    return result


def _keys(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Keys of the identifiers ``text[starts[i]:ends[i]]`` in their byte order: fields of up to
    8 bytes as 64-bit integers (the bytes big-endian, NUL-padded: integer order is byte order),
    longer ones as a NumPy bytes array."""
    length = ends - starts
    if length.max() > 8:
        return _as_bytes(_field(text, starts, ends))
    # the 8 bytes from each start, the field's kept
    keys = sliding_window_view(text, 8)[starts].view(">u8").ravel().astype(np.uint64)
    cut = (8 - length).astype(np.uint64) * np.uint64(8)
    result: np.ndarray = (keys >> cut) << cut
    return result


def _joined(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Two arrays of :func:`_keys` one after the other (as bytes if either is)."""
    if first.dtype.kind == second.dtype.kind:
        return np.concatenate([first, second])
    return np.concatenate([_names(first), _names(second)])


def _names(keys: np.ndarray) -> np.ndarray:
    """The identifiers of :func:`_keys` as a NumPy bytes array."""
    return keys.astype(">u8").view("S8") if keys.dtype.kind == "u" else keys


def _encode(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct identifiers of :func:`_keys` in byte order (a NumPy bytes array) and the
    code of each; a block of equal keys (the query ids of a file) is sorted once."""
    heads = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    if heads.size < keys.size // 2:
        distinct, code = np.unique(keys[heads], return_inverse=True)
        code = np.repeat(code, np.diff(np.r_[heads, keys.size]))
    else:
        distinct, code = np.unique(keys, return_inverse=True)
    return _names(distinct), code


POWERS = 10.0 ** np.arange(16)
"""10 ** k as doubles (exact), for the decimals of :func:`_decimals`."""


def _decimals(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The numbers ``text[starts[i]:ends[i]]``, as Python's ``float`` reads them
    (:class:`ValueError` for one it refuses).

    A number ``[-]digits[.digits]`` of at most 15 digits is :math:`\\pm m / 10^f` (``m`` its
    digits as an integer, ``f`` those after the point): both are exact doubles, so the one
    division, rounded as IEEE 754 rounds it, gives the double nearest to the decimal, as
    ``float`` does. Other numbers (an exponent, more digits, ``inf``) are read by ``float``.
    """
    length = (ends - starts).astype(np.int16)  # small arrays: new memory costs time
    n_digits = np.zeros(starts.size, dtype=np.int16)
    n_points = np.zeros_like(n_digits)
    after = np.zeros_like(n_digits)  # digits after the point
    mantissa = np.zeros(starts.size)  # exact: below 10 ** 15 < 2 ** 53
    rows = sliding_window_view(text, _width(length))[starts]
    for k, column in enumerate(np.ascontiguousarray(rows.T)):  # digit by digit, all at once
        digit = column - np.uint8(ord("0"))
        is_digit = (digit < 10) & (k < length)
        with np.errstate(over="ignore"):  # over 308 digits: inf, and the row is not simple
            np.multiply(mantissa, 10, out=mantissa, where=is_digit)
        np.add(mantissa, digit, out=mantissa, where=is_digit)
        n_digits += is_digit
        after += is_digit & (n_points > 0)
        n_points += (column == ord(".")) & (k < length)
    negative = rows[:, 0] == ord("-")
    simple = ((n_digits + n_points + negative == length) & (n_points <= 1) & (n_digits > 0)
              & (n_digits <= 15))
    np.divide(mantissa, POWERS[np.minimum(after, 15)], out=mantissa)
    np.negative(mantissa, out=mantissa, where=negative)
    other = np.flatnonzero(~simple)
    if other.size:
        mantissa[other] = _as_bytes(_field(text, starts[other], ends[other])).astype(np.float64)
    return mantissa
