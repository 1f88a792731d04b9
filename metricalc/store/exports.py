"""The database's tables for pandas / Jupyter users and as files: CSV, JSON, Parquet.

:func:`to_dataframe` reads one table (``experiments``, ``results`` or ``scenes``, see
:mod:`metricalc.store.frames` for the columns); :func:`export_table` writes it, atomically, in one
of :data:`FORMATS`:

- ``csv``: one header line, one line per row, floats in their shortest exact form
  (``repr``), missing values as empty cells;
- ``json``: an array of row objects, keys in column order, missing and non-finite values as
  ``null``, floats exact;
- ``parquet`` (pyarrow): the frame with its dtypes (nullable ``Int64`` columns stay integers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write, csv_text, json_safe, temporary_path
from metricalc.store.database import open_db
from metricalc.store.frames import FRAME_TABLES, read_frame

__all__ = ["FORMATS", "export_table", "frame_text", "to_dataframe"]

FORMATS = ("csv", "json", "parquet")
"""Export formats."""


def to_dataframe(
    db: str | os.PathLike[str],
    table: str = "results",
    *,
    benchmark: str | None = None,
    tags: Sequence[str] | None = None,
    extra: bool = True,
) -> pd.DataFrame:
    """One table of the database as a pandas DataFrame.

    Parameters
    ----------
    db : path
        The database file (it must exist).
    table : {"results", "scenes", "experiments"}
        ``results``: one row per (experiment, descriptor) with ``benchmark``, ``tag``,
        ``descriptor``, ``status``, ``error``, DescriptorWorkbench's columns (``true_map_micro``, ...,
        ``processing_time_ms``), ``metadata``, then one column per extra metric (e.g.
        ``hit_rate_at_10``, ``r0_rate``, ``rank_histogram[rank_bin=1]``). ``scenes``: one row
        per (experiment, descriptor, scene). ``experiments``: one row per experiment, its JSON
        columns as text.
    benchmark : str, optional
        Only this benchmark's experiments.
    tags : sequence of str, optional
        Only these tags.
    extra : bool
        Expand the extra metrics of ``results`` into columns (else they are left out).

    Examples
    --------
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> from metricalc import metric_set
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.store import record_experiment, to_dataframe
    >>> metrics = metric_set(example_cube())
    >>> with TemporaryDirectory() as folder:
    ...     db = Path(folder) / "results.sqlite"
    ...     for tag in ("a", "b"):
    ...         _ = record_experiment(db, tag=tag, benchmark="hpatches", config={}, metrics=metrics)
    ...     frame = to_dataframe(db, "results")
    >>> frame[["tag", "descriptor", "true_map_micro", "r0_rate"]].round(4).to_dict("list")
    {'tag': ['a', 'b'], 'descriptor': ['sift', 'sift'], 'true_map_micro': [0.75, 0.75], 'r0_rate': [0.3333, 0.3333]}
    """  # noqa: E501
    with open_db(db, create=False) as connection:
        return read_frame(connection, table, benchmark=benchmark, tags=tags, extra=extra)


def _cell(value: Any) -> Any:
    """A JSON value of one frame cell (missing and non-finite -> None)."""
    return None if value is pd.NA else json_safe(value)


def frame_text(frame: pd.DataFrame, format: str) -> str:
    """The CSV or JSON text of ``frame`` (see the module docstring)."""
    if format == "csv":
        return csv_text(frame)
    if format == "json":
        rows = [
            {str(k): _cell(v) for k, v in zip(frame.columns, row, strict=True)}
            for row in frame.itertuples(index=False, name=None)
        ]
        return json.dumps(rows, indent=1, allow_nan=False) + "\n"
    raise InvalidInputError(f"format must be 'csv' or 'json' for text output; got {format!r}")


def _format(path: Path, format: str | None) -> str:
    if format is None:
        format = path.suffix.lstrip(".").lower()
        if format not in FORMATS:
            raise InvalidInputError(
                f"cannot tell the export format from {path.name!r}; give format= one of "
                f"{list(FORMATS)} (or a .csv / .json / .parquet file name)"
            )
    if format not in FORMATS:
        raise InvalidInputError(f"format must be one of {list(FORMATS)}; got {format!r}")
    return format


def export_table(
    db: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    table: str = "results",
    benchmark: str | None = None,
    tags: Sequence[str] | None = None,
) -> Path:
    """Write one table of the database to ``path`` (atomically) and return the path.

    ``format`` is one of :data:`FORMATS`, by default taken from the file name's suffix; the
    rows are those of :func:`to_dataframe` with the same ``table``, ``benchmark`` and
    ``tags``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import pandas as pd
    >>> import metricalc as mc
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.store import export_table, record_experiment
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     db = pathlib.Path(tmp) / "results.sqlite"
    ...     _ = record_experiment(db, tag="a", benchmark="hpatches", config={},
    ...                           metrics=mc.metric_set(example_cube()))
    ...     out = export_table(db, pathlib.Path(tmp) / "results.parquet")
    ...     pd.read_parquet(out).loc[0, "true_map_micro"]
    np.float64(0.75)
    """
    target = Path(path)
    if target.is_dir():
        raise InvalidInputError(f"export path {target} is a directory; expected a file name")
    format = _format(target, format)
    if table not in FRAME_TABLES:
        raise InvalidInputError(f"table must be one of {list(FRAME_TABLES)}; got {table!r}")
    frame = to_dataframe(db, table, benchmark=benchmark, tags=tags)
    if format == "parquet":
        with temporary_path(target) as tmp:
            frame.to_parquet(tmp, engine="pyarrow", index=False)
    else:
        atomic_write(target, frame_text(frame, format))
    return target
