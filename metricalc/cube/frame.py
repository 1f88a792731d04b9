"""Bring your own results: :func:`from_dataframe` turns a long table of per-query results into a
QueryCube."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.ranking import ap_from_rank_stats
from metricalc.cube.build import new_cube
from metricalc.cube.identity import _encode, _groups, _identity_keys, _identity_text, _repeated
from metricalc.cube.model import (
    _PAIR,
    DEFAULT_ATTRS,
    QUERY_COORDS,
    QUERY_VARIABLES,
    SPLITS,
    _same,
    plain_attrs,
    sentinel_array,
    split_of,
)
from metricalc.errors import InvalidInputError
from metricalc.validation import TIE_POLICIES, check_choice

_FRAME_COORDS = ("pair", "split", "keypoint_set", "x", "y")
_FRAME_REQUIRED = ("descriptor", "scene", "query")


def _show(value: Any) -> str:
    """repr of a table value as a Python scalar (1.5, not np.float64(1.5))."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _row(df: pd.DataFrame, position: int) -> str:
    return f"row {df.index[position]!r}"


def _string_column(df: pd.DataFrame, column: str, *, allow_empty: bool = False) -> np.ndarray:
    values = df[column].to_numpy(dtype=object)
    if pd.api.types.infer_dtype(values, skipna=False) == "string" and (
        allow_empty or not (values == "").any()
    ):
        return values.astype(str)
    for i, value in enumerate(values):
        if not isinstance(value, str) or (not allow_empty and value == ""):
            raise InvalidInputError(
                f"column {column!r}, {_row(df, i)}: expected a "
                f"{'' if allow_empty else 'non-empty '}string; got {_show(value)}"
            )
    return values.astype(str) if len(values) else np.empty(0, dtype="<U1")


def _number_column(df: pd.DataFrame, column: str) -> np.ndarray:
    """float64 values of a numeric column (NaN for missing); non-numbers are an error."""
    series = df[column]
    if pd.api.types.is_bool_dtype(series):
        return series.to_numpy(dtype=np.float64)
    if pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    values = series.to_numpy(dtype=object)
    out = np.empty(len(values))
    for i, value in enumerate(values):
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
            out[i] = np.nan
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
            value, (bool, np.bool_)
        ):
            out[i] = float(value)
        else:
            raise InvalidInputError(
                f"column {column!r}, {_row(df, i)}: expected a number; got {_show(value)}"
            )
    return out


def _int_column(
    df: pd.DataFrame,
    column: str,
    *,
    allowed: Sequence[int] | None = None,
    minimum: int = -1,
    nan_as: int | None = -1,
) -> np.ndarray:
    values = _number_column(df, column)
    nan = np.isnan(values)
    if nan.any() and nan_as is None:
        i = int(np.flatnonzero(nan)[0])
        raise InvalidInputError(f"column {column!r}, {_row(df, i)}: expected an integer; got NaN")
    values = np.where(nan, -1 if nan_as is None else nan_as, values)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < minimum)
    if allowed is not None:
        bad |= ~np.isin(values, allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        wanted = f"one of {list(allowed)}" if allowed is not None else f"an integer >= {minimum}"
        raise InvalidInputError(
            f"column {column!r}, {_row(df, i)}: expected {wanted}; got {_show(df[column].iloc[i])}"
        )
    return values.astype(np.int64)


def from_dataframe(
    df: pd.DataFrame,
    *,
    attrs: Mapping[str, Any] | None = None,
    tie_policy: str | None = None,
) -> xr.Dataset:
    """A QueryCube from a long table of per-query results (bring your own evaluation).

    One row per (descriptor, query). Columns:

    - required: ``descriptor`` (str), ``scene`` (str), ``query`` (int >= 0: the query keypoint's
      index, within its scene/pair or global; stored as ``query_keypoint``), and either
      ``better`` and ``ties`` or ``ap``;
    - optional coordinates: ``pair`` (str "1-k"; default ``""``: one unit per scene), ``split``
      (default from the scene prefix ``i_``/``v_``), ``keypoint_set`` (default: the detector
      of ``attrs["keypoints"] = "locked:<name>"``, the descriptor's name for ``"native"``, else
      ``"external"``, so rows of different descriptors with the same scene, pair and query are
      the same query), ``x``, ``y`` (float);
    - optional variables: any of :data:`QUERY_VARIABLES` and ``processing_time_ms`` (constant per
      descriptor). Integer columns may use NaN for "missing" (-1).

    With ``better``/``ties`` (-1 or NaN where R = 0), ``ap`` is computed by
    :func:`metricalc.ap_from_rank_stats` under the tie policy (a given ``ap`` column must agree)
    and ``n_relevant`` defaults to 1 where ``better >= 0``. With ``ap`` only, ``better``/``ties``
    stay -1 and ``n_relevant`` defaults to 1 where ``ap`` is finite, else 0. A
    ``(descriptor, query)`` without a row gets ``n_relevant = -1`` (missing). Queries are sorted
    by scene, pair, keypoint_set, query.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    attrs : mapping, optional
        Protocol attrs; missing ones come from :data:`DEFAULT_ATTRS`.
    tie_policy : str, optional
        Tie policy of the AP (default ``attrs["tie_policy"]``, else ``"expected"``); it must not
        contradict ``attrs["tie_policy"]``.

    Raises
    ------
    InvalidInputError
        Naming the column (and row) of a missing required column, an unknown column, a value of
        the wrong type or range, a duplicated (descriptor, query) row, or rows that disagree.

    Examples
    --------
    >>> import pandas as pd
    >>> from metricalc import cube as qc
    >>> df = pd.DataFrame({"descriptor": ["mine", "mine"], "scene": ["v_boat", "v_boat"],
    ...                    "pair": ["1-2", "1-3"], "query": [7, 7], "better": [2, 0],
    ...                    "ties": [3, 0]})
    >>> c = qc.from_dataframe(df)
    >>> c.ap.values.round(4).tolist(), c.keypoint_set.values.tolist()
    ([[0.2375, 1.0]], ['external', 'external'])
    """
    columns = _check_columns(df)
    merged = _frame_attrs(attrs, tie_policy)
    policy = merged["tie_policy"]
    df = df.copy(deep=False)
    df.columns = columns
    descriptor = _string_column(df, "descriptor")
    table = _query_table(df, descriptor, merged["keypoints"])
    values = {
        name: _variable_column(df, name).astype(field.dtype)
        for name, field in QUERY_VARIABLES.items()
        if name in columns
    }
    _derive_relevance(df, values, policy)
    rows = _Rows.of(descriptor)
    row_q, first = _query_rows(df, table, descriptor, rows)
    shape = (len(rows.names), len(first))
    data: dict[str, np.ndarray] = {}
    for name, column_values in values.items():
        grid = sentinel_array(name, shape)
        grid[rows.of_row, row_q] = column_values
        data[name] = grid
    per_descriptor: dict[str, Any] = {}
    if "processing_time_ms" in columns:
        per_descriptor["processing_time_ms"] = _processing_time(df, descriptor, rows)
    coords = {k: table[k][first] for k in QUERY_COORDS}
    return new_cube(rows.names, coords, data, attrs=merged, per_descriptor=per_descriptor)


def _check_columns(df: pd.DataFrame) -> list[str]:
    """The column names of ``df`` as str, checked: no repeats, all known, the required ones."""
    if not isinstance(df, pd.DataFrame):
        raise InvalidInputError(f"from_dataframe needs a pandas DataFrame; got {type(df).__name__}")
    columns = [str(c) for c in df.columns]
    if len(set(columns)) != len(columns):
        raise InvalidInputError(f"the table has repeated column names: {columns}")
    known = (*_FRAME_REQUIRED, *_FRAME_COORDS, *QUERY_VARIABLES, "processing_time_ms")
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise InvalidInputError(
            f"column {unknown[0]!r} is not a QueryCube column; expected {list(known)} "
            "(drop other columns first)"
        )
    for column in _FRAME_REQUIRED:
        if column not in columns:
            raise InvalidInputError(f"the table lacks the required column {column!r}")
    if ("better" in columns) != ("ties" in columns):
        missing = "ties" if "better" in columns else "better"
        raise InvalidInputError(
            f"the table lacks the column {missing!r} (better and ties go together)"
        )
    if "better" not in columns and "ap" not in columns:
        raise InvalidInputError(
            "the table lacks the column 'ap' (or the columns 'better' and 'ties')"
        )
    return columns


def _frame_attrs(attrs: Mapping[str, Any] | None, tie_policy: str | None) -> dict[str, Any]:
    """``attrs`` over :data:`DEFAULT_ATTRS`, with ``tie_policy`` when it is given."""
    merged: dict[str, Any] = {**DEFAULT_ATTRS, **plain_attrs(attrs or {})}
    if tie_policy is not None:
        if attrs is not None and "tie_policy" in attrs and attrs["tie_policy"] != tie_policy:
            raise InvalidInputError(
                f"tie_policy={tie_policy!r} contradicts attrs['tie_policy']={attrs['tie_policy']!r}"
            )
        merged["tie_policy"] = tie_policy
    check_choice("tie_policy", merged["tie_policy"], TIE_POLICIES)
    return merged


def _query_table(df: pd.DataFrame, descriptor: np.ndarray, keypoints: Any) -> dict[str, np.ndarray]:
    """The query coordinates of every row; the optional ones filled from their defaults."""
    table: dict[str, np.ndarray] = {
        "scene": _string_column(df, "scene"),
        "query_keypoint": _int_column(df, "query", minimum=0, nan_as=None),
    }
    table["pair"] = _pair_column(df)
    table["split"] = _split_column(df) if "split" in df.columns else split_of(table["scene"])
    table["keypoint_set"] = _keypoint_set_column(df, descriptor, keypoints)
    for column in ("x", "y"):
        table[column] = (
            _number_column(df, column) if column in df.columns else np.full(len(df), np.nan)
        )
        if np.isinf(table[column]).any():
            i = int(np.flatnonzero(np.isinf(table[column]))[0])
            raise InvalidInputError(f"column {column!r}, {_row(df, i)}: expected a finite number")
    return table


def _pair_column(df: pd.DataFrame) -> np.ndarray:
    if "pair" not in df.columns:
        return np.full(len(df), "", dtype="<U1")
    pairs = _string_column(df, "pair", allow_empty=True)
    distinct, first = np.unique(pairs, return_index=True)  # a few pairs, millions of rows
    bad = [i for pair, i in zip(distinct, first, strict=True) if pair and not _PAIR.match(pair)]
    if bad:
        i = min(bad)
        raise InvalidInputError(
            f"column 'pair', {_row(df, i)}: expected '1-k' (image 1 against image k); "
            f"got {_show(pairs[i])}"
        )
    return pairs


def _split_column(df: pd.DataFrame) -> np.ndarray:
    splits = _string_column(df, "split")
    bad_split = ~np.isin(splits, SPLITS)
    if bad_split.any():
        i = int(np.flatnonzero(bad_split)[0])
        raise InvalidInputError(
            f"column 'split', {_row(df, i)}: expected one of {SPLITS}; got {splits[i]!r}"
        )
    return splits


def _keypoint_set_column(df: pd.DataFrame, descriptor: np.ndarray, keypoints: Any) -> np.ndarray:
    """The column, else the detector of ``locked:<name>``, the descriptor for ``native``, else
    ``external``."""
    if "keypoint_set" in df.columns:
        return _string_column(df, "keypoint_set")
    if str(keypoints).startswith("locked:"):
        return np.full(len(df), str(keypoints)[len("locked:") :])
    if keypoints == "native":
        return descriptor.copy()
    return np.full(len(df), "external")


def _variable_column(df: pd.DataFrame, name: str) -> np.ndarray:
    """The values of the column of the cube variable ``name``, checked for its range."""
    if name in ("better", "ties", "n_candidates"):
        return _int_column(df, name, minimum=-1)
    if name == "n_relevant":
        return _int_column(df, name, allowed=(0, 1), nan_as=None)
    if name in ("nn_correct", "nn_mutual"):
        return _int_column(df, name, allowed=(-1, 0, 1))
    values = _number_column(df, name)
    bad = ~(np.isnan(values) | (values >= 0)) | np.isinf(values)
    if name == "ap":
        bad |= values > 1
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        wanted = "in [0, 1] or NaN" if name == "ap" else "a finite number >= 0 or NaN"
        raise InvalidInputError(
            f"column {name!r}, {_row(df, i)}: expected {wanted}; got {_show(df[name].iloc[i])}"
        )
    return values


def _fail(df: pd.DataFrame, mask: np.ndarray, column: str, expected: str) -> None:
    """Raise naming the first row where ``mask`` is true, with its value of ``column``."""
    if mask.any():
        i = int(np.flatnonzero(mask)[0])
        raise InvalidInputError(
            f"column {column!r}, {_row(df, i)}: {expected}; got {_show(df[column].iloc[i])}"
        )


def _derive_relevance(df: pd.DataFrame, values: dict[str, np.ndarray], policy: str) -> None:
    """Set ``n_relevant`` and ``ap`` in ``values`` from better/ties or from ap; the given ones
    must agree."""
    if "better" in values:
        _derive_from_rank_stats(df, values, policy)
    else:
        finite = np.isfinite(values["ap"]).astype(np.int8)
        if "n_relevant" in values:
            _fail(
                df,
                values["n_relevant"] != finite,
                "n_relevant",
                "must be 1 where ap is a number and 0 where ap is NaN",
            )
        values["n_relevant"] = finite
    if "nn_correct" in values:
        _fail(
            df,
            (values["nn_correct"] == 1) & (values["n_relevant"] != 1),
            "nn_correct",
            "can be 1 only for a query with a relevant item (n_relevant == 1)",
        )


def _derive_from_rank_stats(df: pd.DataFrame, values: dict[str, np.ndarray], policy: str) -> None:
    better, ties = values["better"], values["ties"]
    _fail(df, (better == -1) != (ties == -1), "ties", "must be -1 (or NaN) exactly where better is")
    derived = (better >= 0).astype(np.int8)
    if "n_relevant" in values:
        _fail(
            df,
            values["n_relevant"] != derived,
            "n_relevant",
            "must be 1 where better/ties are counts and 0 where they are -1 (R = 0)",
        )
    values["n_relevant"] = derived
    ap = np.full(len(df), np.nan)
    if derived.any():
        ranked = derived == 1
        ap[ranked] = ap_from_rank_stats(better[ranked], ties[ranked], policy=policy)
    if "ap" in values:
        given = values["ap"]
        _fail(
            df,
            ~(_same(given, ap) | np.isclose(given, ap, rtol=1e-9, atol=1e-12)),
            "ap",
            f"disagrees with ap_from_rank_stats(better, ties, policy={policy!r})",
        )
    values["ap"] = ap


class _Rows:
    """The descriptors of the rows: names in order of first appearance, the descriptor of every
    row (its position in ``names``) and the first row of every descriptor."""

    def __init__(self, names: list[str], of_row: np.ndarray, first_rows: np.ndarray) -> None:
        self.names = names
        self.of_row = of_row
        self.first_rows = first_rows

    @classmethod
    def of(cls, descriptor: np.ndarray) -> _Rows:
        n = len(descriptor)
        uniques, codes = _encode(descriptor)
        first_row = np.full(len(uniques), n, dtype=np.int64)
        np.minimum.at(first_row, codes, np.arange(n))
        appearance = np.argsort(first_row, kind="stable")  # in order of first appearance
        position = np.empty(len(uniques), dtype=np.int64)
        position[appearance] = np.arange(len(uniques))
        return cls(uniques[appearance].tolist(), position[codes], first_row[appearance])


def _query_rows(
    df: pd.DataFrame, table: Mapping[str, np.ndarray], descriptor: np.ndarray, rows: _Rows
) -> tuple[np.ndarray, np.ndarray]:
    """The query of every row and the first row of every query (queries in canonical order);
    one row per (descriptor, query), and rows of one query must agree on split, x and y."""
    keys = _identity_keys([table])[0]
    repeated = _repeated(np.column_stack([rows.of_row, keys]))
    if repeated is not None:
        earlier, later = repeated
        raise InvalidInputError(
            f"rows {df.index[earlier]!r} and {df.index[later]!r} are the same (descriptor, query): "
            f"descriptor={descriptor[later]!r}, "
            + _identity_text(table, later)
            + "; keep one row per descriptor and query"
        )
    row_q, first = _groups(keys)
    for column in ("split", "x", "y"):
        clash = ~_same(table[column], table[column][first][row_q])
        if clash.any():
            later = int(np.flatnonzero(clash)[0])
            earlier = int(first[row_q[later]])
            source = column if column in df.columns else "scene"
            raise InvalidInputError(
                f"column {source!r}: rows {df.index[earlier]!r} and {df.index[later]!r} describe "
                "the same query ("
                + _identity_text(table, later)
                + f") with different {column} ({table[column][earlier].item()!r} vs "
                f"{table[column][later].item()!r})"
            )
    return row_q, first


def _processing_time(df: pd.DataFrame, descriptor: np.ndarray, rows: _Rows) -> np.ndarray:
    """The one processing_time_ms of every descriptor."""
    time_ms = _number_column(df, "processing_time_ms")
    reference = time_ms[rows.first_rows][rows.of_row]  # the descriptor's first row
    clash = ~_same(time_ms, reference)
    if clash.any():
        later = int(np.flatnonzero(clash)[0])
        earlier = int(rows.first_rows[rows.of_row[later]])
        raise InvalidInputError(
            f"column 'processing_time_ms', rows {df.index[earlier]!r} and "
            f"{df.index[later]!r}: one value per descriptor expected "
            f"({descriptor[later]!r}); got {_show(time_ms[earlier])} and "
            f"{_show(time_ms[later])}"
        )
    _fail(
        df,
        ~(np.isnan(time_ms) | (time_ms >= 0)) | np.isinf(time_ms),
        "processing_time_ms",
        "expected a finite number >= 0 or NaN",
    )
    time: np.ndarray = time_ms[rows.first_rows]
    return time
