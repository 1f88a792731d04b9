"""The database's tables as pandas DataFrames (what ``to_dataframe``, ``get_experiment`` and the
exports read).

Three frames, one per table, each selectable by benchmark and tags:

- ``experiments``: one row per experiment, its JSON columns (``config``, ``versions``,
  ``timings``, ``protocol``) as JSON text;
- ``results``: one row per (experiment, descriptor): ``benchmark``, ``tag``, ``descriptor``,
  ``status``, ``error``, DW's columns, ``metadata``, then the ``extra`` metrics expanded into
  one column each (in the order they were recorded; ints as pandas ``Int64``, floats as
  ``float64``, missing as NA / NaN);
- ``scenes``: one row per (experiment, descriptor, scene).

NULL reads as NaN in float columns and NA in the nullable integer columns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from metricalc.errors import InvalidInputError
from metricalc.store import codec
from metricalc.store.schema import EXPERIMENT_COLUMNS, SCENE_COLUMNS, SEED_COLUMNS
from metricalc.validation import is_integer, is_real

__all__ = ["FRAME_TABLES", "read_frame"]

FRAME_TABLES = ("experiments", "results", "scenes")
"""The tables :func:`read_frame` reads."""

_EXPERIMENT_COLUMNS = ("id", *EXPERIMENT_COLUMNS)
_KEYS = ("benchmark", "tag", "descriptor")


def database_file(connection: sqlite3.Connection) -> str:
    """The file of ``connection``'s main database, to name it in messages."""
    row = connection.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else "the database"


def _where(benchmark: str | None, tags: Sequence[str] | None) -> tuple[str, list[Any]]:
    """A WHERE clause on the experiments alias ``e``, with its parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if benchmark is not None:
        clauses.append("e.benchmark = ?")
        params.append(benchmark)
    if tags is not None:
        clauses.append(f"e.tag IN ({', '.join('?' * len(tags))})")
        params.extend(tags)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _floats(values: list[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _check_numbers(
    values: list[Any], where: str, tags: Sequence[Any], *, integer: bool = False
) -> list[Any]:
    """``values`` of a numeric column; a value of another type (text written into the column
    outside metricalc) raises an error naming ``where`` (database, table, column), the row's
    tag and the value."""
    check = is_integer if integer else is_real
    for value, tag in zip(values, tags, strict=True):
        if value is not None and not check(value):
            kind = "an integer" if integer else "a number"
            raise InvalidInputError(
                f"{where}, row of {tag}: {value!r} is not {kind}; the database was changed "
                "outside metricalc or is damaged"
            )
    return values


def _column(values: list[Any]) -> Any:
    """A column of JSON values: Int64 when every value is an int, float64 when numbers, else
    the values as they are."""
    present = [v for v in values if v is not None]
    if present and all(is_integer(v) for v in present):
        return pd.array(values, dtype="Int64")
    if all(is_real(v) for v in present):
        return _floats(values)
    return pd.array(values, dtype=object)


def _experiments(connection: sqlite3.Connection, where: str, params: list[Any]) -> pd.DataFrame:
    query = f"SELECT {', '.join('e.' + c for c in _EXPERIMENT_COLUMNS)} FROM experiments e"
    rows = connection.execute(query + where + " ORDER BY e.benchmark, e.tag", params).fetchall()
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(_EXPERIMENT_COLUMNS)
    data: dict[str, Any] = {}
    for name, values in zip(_EXPERIMENT_COLUMNS, columns, strict=True):
        data[name] = np.array(values, dtype=np.int64) if name == "id" else list(values)
    return pd.DataFrame(data, columns=list(_EXPERIMENT_COLUMNS))


def _results(
    connection: sqlite3.Connection, where: str, params: list[Any], *, extra: bool
) -> pd.DataFrame:
    names = ("descriptor", "status", "error", *SEED_COLUMNS, "metadata", "extra")
    query = (
        f"SELECT e.benchmark, e.tag, {', '.join('r.' + c for c in names)} "
        "FROM results r JOIN experiments e ON e.id = r.experiment_id"
    )
    rows = connection.execute(
        query + where + " ORDER BY e.benchmark, e.tag, r.id", params
    ).fetchall()
    header = ("benchmark", "tag", *names)
    columns = dict(zip(header, zip(*rows, strict=True), strict=True)) if rows else {}
    data: dict[str, Any] = {}
    tags = list(columns.get("tag", ()))
    for name in header[:-1]:
        values = list(columns.get(name, ()))
        if name in SEED_COLUMNS:
            where_column = f"{database_file(connection)}: table results, column {name}"
            data[name] = _floats(_check_numbers(values, where_column, tags))
        else:
            data[name] = values
    if extra:
        database = database_file(connection)
        parsed = [
            codec.loads(text, f"{database}: results row of {b}/{t} ({d!r}), column extra")
            for text, b, t, d in zip(
                columns.get("extra", ()),
                columns.get("benchmark", ()),
                columns.get("tag", ()),
                columns.get("descriptor", ()),
                strict=True,
            )
        ]
        for key in dict.fromkeys(k for one in parsed for k in one):  # first-seen order
            data[key] = _column([one.get(key) for one in parsed])
    return pd.DataFrame(data)


def _scenes(connection: sqlite3.Connection, where: str, params: list[Any]) -> pd.DataFrame:
    names = SCENE_COLUMNS
    query = (
        f"SELECT e.benchmark, e.tag, r.descriptor, {', '.join('s.' + c for c in names)} "
        "FROM scenes s JOIN results r ON r.id = s.result_id "
        "JOIN experiments e ON e.id = r.experiment_id"
    )
    rows = connection.execute(
        query + where + " ORDER BY e.benchmark, e.tag, r.id, s.id", params
    ).fetchall()
    header = (*_KEYS, *names)
    columns = dict(zip(header, zip(*rows, strict=True), strict=True)) if rows else {}
    data: dict[str, Any] = {}
    tags = list(columns.get("tag", ()))
    for name in header:
        values = list(columns.get(name, ()))
        where_column = f"{database_file(connection)}: table scenes, column {name}"
        if name in ("true_map", "true_map_with_zeros", "mean_precision"):
            data[name] = _floats(_check_numbers(values, where_column, tags))
        elif name in ("query_count", "excluded_count"):
            if None in values:
                raise InvalidInputError(f"{where_column}: NULL where a count is required")
            checked = _check_numbers(values, where_column, tags, integer=True)
            data[name] = np.array(checked, dtype=np.int64)
        elif name == "image_count":
            data[name] = pd.array(_check_numbers(values, where_column, tags, integer=True), "Int64")
        else:
            data[name] = values
    return pd.DataFrame(data)


def read_frame(
    connection: sqlite3.Connection,
    table: str = "results",
    *,
    benchmark: str | None = None,
    tags: Sequence[str] | None = None,
    extra: bool = True,
) -> pd.DataFrame:
    """One table of an open database as a DataFrame (see the module docstring for its columns).

    Reads in one transaction (or in the caller's open one), so the frame is one consistent
    snapshot even while another process writes.
    """
    if table not in FRAME_TABLES:
        raise InvalidInputError(f"table must be one of {list(FRAME_TABLES)}; got {table!r}")
    where, params = _where(benchmark, list(tags) if tags is not None else None)
    own = not connection.in_transaction  # inside a caller's snapshot, read within it
    if own:
        connection.execute("BEGIN")
    try:
        if table == "experiments":
            return _experiments(connection, where, params)
        if table == "results":
            return _results(connection, where, params, extra=extra)
        return _scenes(connection, where, params)
    finally:
        if own:
            connection.execute("COMMIT")
