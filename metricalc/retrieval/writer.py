"""TREC files written atomically, a table of lines at a time: the qrels and runs of
:mod:`~metricalc.retrieval.trec_files` and :mod:`~metricalc.retrieval.export` (and of the patch
benchmark's export) all go through :func:`trec_writer`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv

from metricalc.errors import InvalidInputError
from metricalc.fileio import temporary_path

__all__ = ["LineWriter", "check_token", "trec_writer"]

_OPTIONS = pcsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")


@contextmanager
def trec_writer(path: str | os.PathLike[str]) -> Iterator[LineWriter]:
    """A writer of space-separated lines to ``path``, atomically (a temporary file renamed over
    ``path`` when the block ends without an error); ``write_table`` appends a table's rows.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with trec_writer(Path(tmp) / "qrels.txt") as out:
    ...         out.write_table(pa.table({"q": ["q1"], "i": [0], "d": ["d1"], "r": [1]}))
    ...     (Path(tmp) / "qrels.txt").read_text()
    'q1 0 d1 1\\n'
    """
    try:
        with temporary_path(path) as tmp:
            writer = LineWriter(tmp)
            try:
                yield writer
            finally:
                writer.close()
    except OSError as error:
        raise InvalidInputError(f"cannot write {path}: {error.strerror or error}") from None


class LineWriter:
    """Space-separated lines appended to a file, a table at a time (:func:`trec_writer`); the
    file is opened at the first table, whose schema the later ones are cast to."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._writer: pcsv.CSVWriter | None = None
        self._schema: pa.Schema | None = None

    def write_table(self, table: pa.Table) -> None:
        """Append the rows of ``table``, fields separated by one space."""
        if self._writer is None or self._schema is None:
            self._schema = table.schema
            self._writer = pcsv.CSVWriter(str(self._path), table.schema, write_options=_OPTIONS)
        self._writer.write_table(table.cast(self._schema))

    def close(self) -> None:
        """Close the file (nothing written: an empty file)."""
        if self._writer is not None:
            self._writer.close()


def check_token(what: str, value: str) -> None:
    """A field of a TREC line (a run tag): a non-empty word, since whitespace separates fields.

    >>> check_token("tag", "my run")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: tag 'my run' must be a non-empty word without whitespace
    """
    if not value or any(c.isspace() for c in value):
        raise InvalidInputError(f"{what} {value!r} must be a non-empty word without whitespace")
