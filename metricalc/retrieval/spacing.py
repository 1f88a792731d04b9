"""TREC text re-spaced for a CSV reader: fields separated by exactly one space.

trec_eval splits each line at whitespace (C's ``isspace``: space, tab, newline, vertical tab, form
feed, carriage return), so ``1 1.5  08efpohc 0`` (TREC-COVID's qrels, two spaces before the docno)
and ``q1\\t0\\td1\\t1\\r`` are lines of four fields. pyarrow's CSV reader takes one delimiter byte
and would read an empty field between two. :func:`single_spaced` rewrites such text with NumPy,
a few vectorised passes over blocks of the file: every run of whitespace between two fields
becomes one space, whitespace at the start or end of a line is dropped (a line of whitespace
only becomes empty, and the CSV reader skips empty lines). Line ends and the fields' bytes are
kept as they are, so the lines keep their numbers.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["single_spaced"]

WHITESPACE = b" \t\v\f\r"
"""The bytes C's ``isspace`` accepts, other than the line end ``\\n``."""

_IS_SPACE = np.zeros(256, dtype=bool)
_IS_SPACE[list(WHITESPACE)] = True

BLOCK = 1 << 24
"""Bytes re-spaced at a time (whole lines), which bounds the memory the passes need."""


def single_spaced(path: str | os.PathLike[str]) -> bytes:
    r"""The bytes of the file at ``path`` with one space between fields and none around them.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     p = Path(folder) / "qrels.txt"
    ...     _ = p.write_bytes(b"1 1.5  08efpohc 0\r\n\t q2\t0 d9\v2  \n  \n")
    ...     single_spaced(p)
    b'1 1.5 08efpohc 0\nq2 0 d9 2\n\n'
    """
    data = Path(path).read_bytes()
    blocks = []
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + BLOCK, len(data)) - 1)
        end = len(data) if end < 0 else end + 1
        blocks.append(_respace(np.frombuffer(data, dtype=np.uint8, count=end - start,
                                             offset=start)))
        start = end
    return b"".join(blocks)


def _respace(text: np.ndarray) -> bytes:
    """``text`` (whole lines, or the file's unterminated last line) re-spaced.

    Of each run of whitespace, only its first byte can stay (as a space): when a field byte is
    right before the run and right after it (neither a line end nor the block's edge).
    """
    space = _IS_SPACE[text]
    keep = ~space
    before = np.empty_like(space)  # the byte before is whitespace too
    before[0] = False
    np.copyto(before[1:], space[:-1])
    first = np.flatnonzero(space & ~before)
    after = np.empty_like(space)  # the byte after is whitespace too
    after[-1] = False
    np.copyto(after[:-1], space[1:])
    last = np.flatnonzero(space & ~after)
    inner = (first > 0) & (last + 1 < text.size)
    first, last = first[inner], last[inner]
    between = (text[first - 1] != ord("\n")) & (text[last + 1] != ord("\n"))
    keep[first[between]] = True
    out = text[keep]
    out[_IS_SPACE[out]] = ord(" ")
    respaced: bytes = out.tobytes()
    return respaced
