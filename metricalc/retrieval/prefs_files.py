"""trec_eval's other relevance formats (``-R``): preference files and qrels with judgment groups.

- ``prefs`` (``get_prefs.c``): ``qid jg jsg docno rel_level`` per line. Within a judgment
  sub-group (JSG) of a judgment group (JG), a document is preferred to every document with a
  lower ``rel_level`` (a number; 0 means non-relevant);
- ``qrels_prefs`` (``get_qrels_prefs.c``): a qrels file ``qid jg docno rel`` read as preferences,
  the second field naming the JG, every line in the one JSG ``0``;
- ``qrels_jg`` (``get_qrels_jg.c``): ``qid jg docno rel`` (``rel`` an integer), one set of
  judgments per JG; a document judged twice in one JG is an error.

Fields are separated by whitespace, blank lines are skipped; identifiers are kept as bytes and
coded in byte order, so comparing codes compares identifiers as ``strcmp`` does. A line with the
wrong number of fields or a value that is not a number is an
:class:`~metricalc.errors.InvalidInputError` naming the file and the line.
docs/retrieval.md describes the formats and the measures computed from them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from metricalc.errors import InvalidInputError
from metricalc.retrieval.trec_files import encode

__all__ = ["Judgments", "read_prefs", "read_qrels_jg", "read_qrels_prefs", "where"]

FORMATS = {
    "prefs": "'qid jg jsg docno rel_level'",
    "qrels_prefs": "'qid jg docno rel_level'",
    "qrels_jg": "'qid jg docno rel'",
}


@dataclass(frozen=True, eq=False)
class Judgments:
    """Line ``i``: document ``docnos[doc[i]]`` has ``rel[i]`` for query ``qids[qid[i]]`` in
    judgment group ``jg[i]`` and sub-group ``jsg[i]`` (codes in byte order of the identifiers;
    ``qids`` and ``docnos`` hold them). ``rel`` is float32 for preferences (trec_eval keeps
    ``rel_level`` as a C float) and int64 for ``qrels_jg``; ``fmt`` is the ``-R`` format."""

    qids: pa.Array
    qid: np.ndarray
    jg: np.ndarray
    jsg: np.ndarray
    docnos: pa.Array
    doc: np.ndarray
    rel: np.ndarray
    fmt: str
    source: str

    def __len__(self) -> int:
        return int(self.rel.size)


def read_prefs(path: str | os.PathLike[str]) -> Judgments:
    """Read a trec_eval preferences file (``-R prefs``: ``qid jg jsg docno rel_level``).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = Path(tmp) / "prefs.txt"
    ...     _ = p.write_text("q1 u1 s1 d1 2\\nq1 u1 s1 d2 0\\n")
    ...     prefs = read_prefs(p)
    >>> prefs.rel.tolist(), prefs.docnos.to_pylist()
    ([2.0, 0.0], [b'd1', b'd2'])
    """
    return _read(path, "prefs")


def read_qrels_prefs(path: str | os.PathLike[str]) -> Judgments:
    """Read a qrels file as preferences (``-R qrels_prefs``: ``qid jg docno rel_level``, the
    JSG of every line ``0``)."""
    return _read(path, "qrels_prefs")


def read_qrels_jg(path: str | os.PathLike[str]) -> Judgments:
    """Read qrels with judgment groups (``-R qrels_jg``: ``qid jg docno rel``, ``rel`` an
    integer); a document judged twice in one judgment group of a query is an error."""
    judgments = _read(path, "qrels_jg")
    key = np.lexsort((judgments.doc, judgments.jg, judgments.qid))
    same = ((judgments.qid[key][1:] == judgments.qid[key][:-1])
            & (judgments.jg[key][1:] == judgments.jg[key][:-1])
            & (judgments.doc[key][1:] == judgments.doc[key][:-1]))
    if same.any():
        line = int(key[1:][same].min())
        doc = judgments.docnos[int(judgments.doc[line])].as_py()
        qid = judgments.qids[int(judgments.qid[line])].as_py()
        raise InvalidInputError(f"{where(judgments, line)}: document {_text(doc)!r} is judged "
                                f"twice for query {_text(qid)!r} in one judgment group")
    return judgments


def _read(path: str | os.PathLike[str], fmt: str) -> Judgments:
    """The lines of a ``fmt`` file, checked and coded."""
    path = Path(path)
    expected = FORMATS[fmt]
    n_fields = 5 if fmt == "prefs" else 4
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InvalidInputError(
            f"{path}: cannot read the file ({error.strerror}); expected {expected} lines"
        ) from None
    integer = fmt == "qrels_jg"
    columns, values = (_split(data, n_fields, integer=integer)
                       or _scan(path, data, n_fields, expected, integer=integer))
    if not values.size:
        raise InvalidInputError(f"{path}: the file is empty; expected {expected} lines")
    qid, qids = _codes(columns[0])
    jg, _ = _codes(columns[1])
    jsg = _codes(columns[2])[0] if fmt == "prefs" else np.zeros(qid.size, dtype=np.int64)
    doc, docnos = _codes(columns[-1])
    return Judgments(qids, qid, jg, jsg, docnos, doc, values, fmt, str(path))


WHITESPACE = np.frombuffer(b" \t\n\r\x0b\x0c", dtype=np.uint8)
"""The bytes that separate fields (C's ``isspace``, Python's ``bytes.split``)."""


def _split(data: bytes, n_fields: int, *,
           integer: bool) -> tuple[list[list[bytes]], np.ndarray] | None:
    """The fields of a well-formed file (every non-blank line ``n_fields`` fields, the last one a
    number: int64 if ``integer``, else finite, as float32), split at once; None otherwise."""
    tokens = data.split()
    raw = np.frombuffer(data, dtype=np.uint8)
    space = np.isin(raw, WHITESPACE)
    starts = ~space & np.r_[True, space[:-1]]
    line = np.cumsum(raw == ord("\n"))[starts]
    per_line = np.bincount(line)
    if not tokens or not ((per_line == 0) | (per_line == n_fields)).all():
        return None
    columns = [tokens[i:-1:n_fields] for i in range(n_fields - 1)]
    try:
        values = np.array(tokens[n_fields - 1::n_fields]).astype(
            np.int64 if integer else np.float64)
    except ValueError:
        return None
    if not integer:
        if not np.isfinite(values).all():
            return None
        values = values.astype(np.float32)
    return columns, values


def _scan(path: Path, data: bytes, n_fields: int, expected: str, *,
          integer: bool) -> tuple[list[list[bytes]], np.ndarray]:
    """:func:`_split` line by line: an :class:`~metricalc.errors.InvalidInputError` names the
    first line with other than ``n_fields`` fields or a relevance that is not a number."""
    columns: list[list[bytes]] = [[] for _ in range(n_fields - 1)]
    values: list[float] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != n_fields:
            raise InvalidInputError(f"{path} line {number}: expected {n_fields} fields "
                                    f"{expected}; found {len(fields)}")
        values.append(_number(f"{path} line {number}", fields[-1], integer=integer))
        for column, value in zip(columns, fields, strict=False):
            column.append(value)
    return columns, np.array(values, dtype=np.int64 if integer else np.float32)


def _codes(values: list[bytes]) -> tuple[np.ndarray, pa.Array]:
    """int64 codes of identifiers in byte order, and the distinct identifiers."""
    codes, distinct = encode(pa.array(values, pa.binary()), sort=True)
    return codes.astype(np.int64), distinct


def _number(where: str, field: bytes, *, integer: bool) -> float:
    """The relevance of a line: an integer (``qrels_jg``) or a finite number."""
    try:
        value = int(field) if integer else float(field)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value):
        what = "an integer" if integer else "a finite number"
        raise InvalidInputError(f"{where}: relevance {_text(field)!r} is not {what}")
    return value


def where(judged: Judgments, index: int) -> str:
    """The file and line of ``judged``'s line ``index`` (``source`` alone when it was not read
    from a file), for messages: the file is read again, so errors cost nothing until raised."""
    path = Path(judged.source)
    if not path.is_file():
        return judged.source
    lines = [n for n, line in enumerate(path.read_bytes().split(b"\n"), start=1) if line.split()]
    return f"{path} line {lines[index]}"


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")
