"""Bring your own results: :func:`from_dataframe` turns a long table of per-query results into a
QueryCube."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.kernels import CHUNK_ELEMENTS
from metricalc.core.ranking import ranked_ap_slices
from metricalc.cube.build import new_cube
from metricalc.cube.identity import (
    _canonical_ranks,
    _first_appearances,
    _identity_text,
    _repeated,
    _row_groups,
    _Words,
)
from metricalc.cube.model import (
    _PAIR,
    DEFAULT_ATTRS,
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


def _string_column(df: pd.DataFrame, column: str, *, allow_empty: bool = False) -> _Words:
    """The column factorized (strings are hashed once, never converted row by row); every value
    must be a (non-empty) str."""
    codes, distinct = pd.factorize(df[column], use_na_sentinel=True)
    words = list(distinct)
    bad = [
        i for i, w in enumerate(words) if not isinstance(w, str) or (not allow_empty and w == "")
    ]
    if bad or (codes < 0).any():
        i = int(np.flatnonzero(np.isin(codes, bad) | (codes < 0))[0])
        raise InvalidInputError(
            f"column {column!r}, {_row(df, i)}: expected a "
            f"{'' if allow_empty else 'non-empty '}string; got {_show(df[column].iloc[i])}"
        )
    small = codes.astype(np.min_scalar_type(-max(len(words), 1)))  # int8 for < 128 words
    return _Words(small, np.array(words, dtype=str) if words else np.empty(0, dtype="<U1"))


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
    series = df[column]
    if isinstance(series.dtype, np.dtype) and series.dtype.kind == "i":  # no NaN: no float copy
        values = series.to_numpy()
        _check_range(df, column, values, allowed, minimum)
        return values
    values = _number_column(df, column)
    nan = np.isnan(values)
    if nan.any() and nan_as is None:
        i = int(np.flatnonzero(nan)[0])
        raise InvalidInputError(f"column {column!r}, {_row(df, i)}: expected an integer; got NaN")
    values = np.where(nan, -1 if nan_as is None else nan_as, values)
    bad = ~np.isfinite(values) | (values != np.round(values))
    _check_range(df, column, values, allowed, minimum, bad)
    return values.astype(np.int64)


def _check_range(
    df: pd.DataFrame,
    column: str,
    values: np.ndarray,
    allowed: Sequence[int] | None,
    minimum: int,
    bad: np.ndarray | None = None,
) -> None:
    """Every value ``>= minimum`` and one of ``allowed``, and not ``bad``."""
    out = (values < minimum) if allowed is None else ~np.isin(values, allowed)
    wanted = f"one of {list(allowed)}" if allowed is not None else f"an integer >= {minimum}"
    _fail(df, out if bad is None else out | bad, column, f"expected {wanted}")


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

    Notes
    -----
    String columns are hashed once (:func:`pandas.factorize`); a row's query is one int64 key;
    each variable column is checked and put into its grid before the next is read. The peak
    is the cube plus a few row-sized integer arrays (``benchmarks/bench_build.py``).

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
    df = df.copy(deep=False)
    df.columns = columns
    descriptor = _string_column(df, "descriptor")
    table = _query_table(df, descriptor, merged["keypoints"])
    cells = _Cells.of(df, table, descriptor)
    data = {  # one full-size column at a time: each is dropped once it is in its grid
        name: cells.grid(name, _variable_column(df, name))
        for name in QUERY_VARIABLES
        if name in columns
    }
    _derive_relevance(df, data, cells, merged["tie_policy"])
    per_descriptor: dict[str, Any] = {}
    if "processing_time_ms" in columns:
        per_descriptor["processing_time_ms"] = _processing_time(df, descriptor)
    return new_cube(
        descriptor.words.tolist(),
        cells.coords(table),
        data,
        attrs=merged,
        per_descriptor=per_descriptor,
        copy=False,  # the grids are ours
    )


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


class _Table:
    """The query coordinates of every row: strings encoded (:class:`_Words`), ``split`` None
    when it comes from the scene names, ``x``/``y`` None when not given."""

    def __init__(
        self,
        words: Mapping[str, _Words],
        query: np.ndarray,
        split: _Words | None,
        positions: Mapping[str, np.ndarray | None],
    ) -> None:
        self.words = words
        self.query = query
        self.split = split
        self.positions = positions

    def identity_text(self, row: int) -> str:
        """``scene=..., pair=..., keypoint_set=..., query_keypoint=...`` of a row."""
        at = np.array([row])
        coords = {name: words.at(at) for name, words in self.words.items()}
        return _identity_text({**coords, "query_keypoint": self.query[at]}, 0)


def _query_table(df: pd.DataFrame, descriptor: _Words, keypoints: Any) -> _Table:
    """The query coordinates of every row, checked; the optional ones filled from their
    defaults."""
    scene = _string_column(df, "scene")
    query = _int_column(df, "query", minimum=0, nan_as=None)
    pair = _pair_column(df)
    split = _split_column(df) if "split" in df.columns else None
    keypoint_set = _keypoint_set_column(df, descriptor, keypoints)
    positions = {column: _position_column(df, column) for column in ("x", "y")}
    words = {"scene": scene, "pair": pair, "keypoint_set": keypoint_set}
    return _Table(words, query, split, positions)


def _position_column(df: pd.DataFrame, column: str) -> np.ndarray | None:
    if column not in df.columns:
        return None
    values = _number_column(df, column)
    _fail(df, np.isinf(values), column, "expected a finite number")
    return values


def _fail_words(
    df: pd.DataFrame, column: str, words: _Words, bad: list[int], expected: str
) -> None:
    """Raise naming the first row holding one of the words ``bad`` (their positions)."""
    if bad:
        i = int(np.flatnonzero(np.isin(words.codes, bad))[0])
        raise InvalidInputError(
            f"column {column!r}, {_row(df, i)}: {expected}; got {_show(df[column].iloc[i])}"
        )


def _pair_column(df: pd.DataFrame) -> _Words:
    if "pair" not in df.columns:
        return _Words.constant(len(df), "")
    pairs = _string_column(df, "pair", allow_empty=True)
    bad = [i for i, pair in enumerate(pairs.words.tolist()) if pair and not _PAIR.match(pair)]
    _fail_words(df, "pair", pairs, bad, "expected '1-k' (image 1 against image k)")
    return pairs


def _split_column(df: pd.DataFrame) -> _Words:
    splits = _string_column(df, "split")
    bad = [i for i, split in enumerate(splits.words.tolist()) if split not in SPLITS]
    _fail_words(df, "split", splits, bad, f"expected one of {SPLITS}")
    return splits


def _keypoint_set_column(df: pd.DataFrame, descriptor: _Words, keypoints: Any) -> _Words:
    """The column, else the detector of ``locked:<name>``, the descriptor for ``native``, else
    ``external``."""
    if "keypoint_set" in df.columns:
        return _string_column(df, "keypoint_set")
    if str(keypoints).startswith("locked:"):
        return _Words.constant(len(df), str(keypoints)[len("locked:") :])
    if keypoints == "native":
        return descriptor
    return _Words.constant(len(df), "external")


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


def _fail_cells(
    df: pd.DataFrame, cells: _Cells, bad: np.ndarray, column: str, expected: str
) -> None:
    """:func:`_fail` for a mask over the cells (descriptor, query): names the first row."""
    if bad.any():
        _fail(df, bad.reshape(-1)[cells.flat], column, expected)


def _derive_relevance(
    df: pd.DataFrame, data: dict[str, np.ndarray], cells: _Cells, tie_policy: str
) -> None:
    """Set ``n_relevant`` and ``ap`` in ``data`` (grids) from better/ties or from ap; the given
    ones must agree."""
    if "better" in data:
        _derive_from_rank_stats(df, data, cells, tie_policy)
    else:
        finite = cells.flags(np.isfinite(data["ap"]))
        if "n_relevant" in data:
            _fail_cells(
                df,
                cells,
                data["n_relevant"] != finite,
                "n_relevant",
                "must be 1 where ap is a number and 0 where ap is NaN",
            )
        data["n_relevant"] = finite
    if "nn_correct" in data:
        _fail_cells(
            df,
            cells,
            (data["nn_correct"] == 1) & (data["n_relevant"] != 1),
            "nn_correct",
            "can be 1 only for a query with a relevant item (n_relevant == 1)",
        )


def _derive_from_rank_stats(
    df: pd.DataFrame, data: dict[str, np.ndarray], cells: _Cells, tie_policy: str
) -> None:
    better, ties = data["better"], data["ties"]
    _fail_cells(
        df,
        cells,
        (better == -1) != (ties == -1),
        "ties",
        "must be -1 (or NaN) exactly where better is",
    )
    derived = cells.flags(better >= 0)
    if "n_relevant" in data:
        _fail_cells(
            df,
            cells,
            data["n_relevant"] != derived,
            "n_relevant",
            "must be 1 where better/ties are counts and 0 where they are -1 (R = 0)",
        )
    data["n_relevant"] = derived
    ap = _ap_grid(better, ties, tie_policy)
    if "ap" in data:
        given = data["ap"]
        _fail_cells(
            df,
            cells,
            ~(_same(given, ap) | np.isclose(given, ap, rtol=1e-9, atol=1e-12)),
            "ap",
            f"disagrees with ap_from_rank_stats(better, ties, tie_policy={tie_policy!r})",
        )
    data["ap"] = ap


def _ap_grid(better: np.ndarray, ties: np.ndarray, tie_policy: str) -> np.ndarray:
    """:func:`ap_from_rank_stats` where ``better >= 0``, else NaN; computed in slices of
    ``CHUNK_ELEMENTS`` cells so that its temporaries stay small."""
    ap = np.full(better.shape, np.nan)
    flat_ap = ap.reshape(-1)
    for part, ranked, values in ranked_ap_slices(better, ties, tie_policy, CHUNK_ELEMENTS):
        flat_ap[part][ranked] = values
    return ap


class _Cells:
    """Where the rows go: the cell ``(descriptor, query)`` of every row (flat index into the
    grid of ``shape``), the first row of every query (queries in canonical order) and which
    cells have a row."""

    def __init__(
        self, shape: tuple[int, int], flat: np.ndarray, first: np.ndarray, present: np.ndarray
    ) -> None:
        self.shape = shape
        self.flat = flat
        self.first = first
        self.present = present

    @classmethod
    def of(cls, df: pd.DataFrame, table: _Table, descriptor: _Words) -> _Cells:
        """Group the rows into queries; one row per (descriptor, query), and rows of one query
        must agree on split, x and y."""
        n_query_keypoint = int(table.query.max()) + 1 if len(table.query) else 0
        columns = [
            (
                _canonical_ranks(name, words.words.tolist()).astype(words.codes.dtype)[words.codes],
                len(words.words),
            )
            for name, words in table.words.items()
        ]
        query_of_row, first = _row_groups([*columns, (table.query, n_query_keypoint)])
        del columns
        shape = (len(descriptor.words), len(first))
        flat = descriptor.codes.astype(np.int64) * shape[1]
        flat += query_of_row
        present = np.zeros(shape[0] * shape[1], dtype=bool)
        present[flat] = True
        if np.count_nonzero(present) != len(flat):
            _fail_repeated(df, table, descriptor, query_of_row)
        _check_agreement(df, table, query_of_row, first)
        return cls(shape, flat, first, present.reshape(shape))

    def grid(self, name: str, values: np.ndarray) -> np.ndarray:
        """The cube variable ``name``: ``values`` (one per row) in their cells, the variable's
        sentinel in the cells without a row."""
        if len(self.flat) == self.present.size:  # every cell has a row: no fill
            grid = np.empty(self.shape, dtype=QUERY_VARIABLES[name].dtype)
        else:
            grid = sentinel_array(name, self.shape)
        grid.reshape(-1)[self.flat] = values
        return grid

    def flags(self, where: np.ndarray) -> np.ndarray:
        """An int8 grid: ``where`` (0 or 1) in the cells with a row, -1 (missing) elsewhere."""
        out = where.astype(np.int8)
        out[~self.present] = -1
        return out

    def coords(self, table: _Table) -> dict[str, np.ndarray]:
        """The query coordinates (one per query, from its first row)."""
        coords = {name: words.at(self.first) for name, words in table.words.items()}
        coords["query_keypoint"] = table.query[self.first]
        coords["split"] = (
            split_of(coords["scene"]) if table.split is None else table.split.at(self.first)
        )
        for name, values in table.positions.items():
            coords[name] = (
                np.full(len(self.first), np.nan) if values is None else values[self.first]
            )
        return coords


def _fail_repeated(
    df: pd.DataFrame, table: _Table, descriptor: _Words, query_of_row: np.ndarray
) -> None:
    """Raise naming the first row that repeats an earlier (descriptor, query)."""
    repeated = _repeated(np.column_stack([descriptor.codes.astype(np.int64), query_of_row]))
    if repeated is not None:
        earlier, later = repeated
        raise InvalidInputError(
            f"rows {df.index[earlier]!r} and {df.index[later]!r} are the same (descriptor, query): "
            f"descriptor={descriptor.words[descriptor.codes[later]].item()!r}, "
            + table.identity_text(later)
            + "; keep one row per descriptor and query"
        )


def _check_agreement(
    df: pd.DataFrame, table: _Table, query_of_row: np.ndarray, first: np.ndarray
) -> None:
    """The rows of one query agree on its split (when given), x and y."""
    given: dict[str, np.ndarray | None] = {
        "split": None if table.split is None else table.split.codes,
        **table.positions,
    }
    for column, values in given.items():
        if values is None:
            continue
        clash = ~_same(values, values[first][query_of_row])
        if clash.any():
            later = int(np.flatnonzero(clash)[0])
            earlier = int(first[query_of_row[later]])
            shown = table.split.words[values] if column == "split" and table.split else values
            raise InvalidInputError(
                f"column {column!r}: rows {df.index[earlier]!r} and {df.index[later]!r} describe "
                "the same query ("
                + table.identity_text(later)
                + f") with different {column} ({shown[earlier].item()!r} vs "
                f"{shown[later].item()!r})"
            )


def _processing_time(df: pd.DataFrame, descriptor: _Words) -> np.ndarray:
    """The one processing_time_ms of every descriptor."""
    time_ms = _number_column(df, "processing_time_ms")
    first_rows = _first_appearances(descriptor.codes)
    reference = time_ms[first_rows][descriptor.codes]  # the descriptor's first row
    clash = ~_same(time_ms, reference)
    if clash.any():
        later = int(np.flatnonzero(clash)[0])
        earlier = int(first_rows[descriptor.codes[later]])
        raise InvalidInputError(
            f"column 'processing_time_ms', rows {df.index[earlier]!r} and "
            f"{df.index[later]!r}: one value per descriptor expected "
            f"({descriptor.words[descriptor.codes[later]].item()!r}); got "
            f"{_show(time_ms[earlier])} and {_show(time_ms[later])}"
        )
    _fail(
        df,
        ~(np.isnan(time_ms) | (time_ms >= 0)) | np.isinf(time_ms),
        "processing_time_ms",
        "expected a finite number >= 0 or NaN",
    )
    time: np.ndarray = time_ms[first_rows]
    return time
