"""The QueryCube: per-query results of every descriptor as one :class:`xarray.Dataset`.

A QueryCube holds, for every descriptor and every query (a keypoint of image 1 matched against
image k of a scene), the rank statistics of its relevant item and the nearest-neighbour facts the
metric set needs (DESIGN.md "The QueryCube", PROTOCOLS.md sections 1-4). Schema:

- dims ``descriptor`` (str coordinate), ``query`` (flat index over all queries, no coordinate)
  and, for the per-scene results of the Bojanic tasks and the image retrieval, ``sequence`` (str
  coordinate: scene names);
- coords on ``query``: ``scene``, ``split``, ``pair``, ``keypoint_set`` (str), ``query_keypoint``
  (int64), ``x``, ``y`` (float64); a query's identity is
  ``(scene, pair, keypoint_set, query_keypoint)`` (:data:`QUERY_IDENTITY`);
- data variables (:data:`QUERY_VARIABLES`, :data:`DESCRIPTOR_VARIABLES`,
  :data:`SEQUENCE_VARIABLES`) with fixed dtypes and sentinels for "missing" (-1 or NaN);
- attrs: every protocol parameter (:data:`PROTOCOL_ATTRS`) and ``metricalc_version``.

Strings are held as NumPy unicode arrays (``<U``) in memory; :func:`save` writes the string
coordinates over ``query`` as compressed UTF-8 character arrays and the others as variable-length
UTF-8 strings (netCDF-4 ``string``), and :func:`open_cube` reads both back as ``<U``.
docs/cube.md has the full table.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.ranking import AP_METHODS, ap_from_rank_stats
from metricalc.errors import InvalidInputError
from metricalc.fileio import temporary_path
from metricalc.validation import TIE_POLICIES, check_choice

__all__ = [
    "DEFAULT_ATTRS",
    "DESCRIPTOR_VARIABLES",
    "PROTOCOL_ATTRS",
    "QUERY_COORDS",
    "QUERY_IDENTITY",
    "QUERY_VARIABLES",
    "SEQUENCE_VARIABLES",
    "combine",
    "error_record",
    "from_dataframe",
    "is_lazy",
    "new_cube",
    "open_cube",
    "save",
    "sentinel_array",
    "split_of",
    "validate",
]

DESCRIPTOR, QUERY, SEQUENCE = "descriptor", "query", "sequence"
SPLITS = ("illumination", "viewpoint", "other")
STATUSES = ("ok", "error")
DISTANCES = ("l2", "l1", "hamming", "mixed")
Y0_POLICIES = ("negative", "ignore")
STR = np.dtype(str)  # marker dtype of string variables (held as <U arrays)


class Field(NamedTuple):
    """dtype and "missing" sentinel of one cube variable or coordinate."""

    dtype: np.dtype
    sentinel: Any


_I8, _I64, _F64 = np.dtype(np.int8), np.dtype(np.int64), np.dtype(np.float64)
_NAN = float("nan")

QUERY_COORDS: Mapping[str, Field] = MappingProxyType(
    {
        "scene": Field(STR, ""),
        "split": Field(STR, "other"),
        "pair": Field(STR, ""),
        "keypoint_set": Field(STR, ""),
        "query_keypoint": Field(_I64, -1),
        "x": Field(_F64, _NAN),
        "y": Field(_F64, _NAN),
    }
)
"""Coordinates on the ``query`` dim, with their dtype (and the default of the optional ones)."""

QUERY_IDENTITY = ("scene", "pair", "keypoint_set", "query_keypoint")
"""The coordinates that identify a query across cubes (:func:`combine`)."""

QUERY_VARIABLES: Mapping[str, Field] = MappingProxyType(
    {
        "better": Field(_I64, -1),
        "ties": Field(_I64, -1),
        "n_relevant": Field(_I8, -1),
        "ap": Field(_F64, _NAN),
        "nn_correct": Field(_I8, -1),
        "gt_distance": Field(_F64, _NAN),
        "nn_distance": Field(_F64, _NAN),
        "nn2_distance": Field(_F64, _NAN),
        "nn_error": Field(_F64, _NAN),
        "nn_mutual": Field(_I8, -1),
        "n_candidates": Field(_I64, -1),
    }
)
"""Data variables on ``(descriptor, query)``: dtype and the sentinel of a missing value."""

DESCRIPTOR_VARIABLES: Mapping[str, Field] = MappingProxyType(
    {
        "processing_time_ms": Field(_F64, _NAN),
        "status": Field(STR, "ok"),
        "error": Field(STR, ""),
    }
)
"""Data variables on ``(descriptor,)``: dtype and default."""

SEQUENCE_VARIABLES: Mapping[str, Field] = MappingProxyType(
    {
        "verification_ap": Field(_F64, _NAN),
        "retrieval_ap": Field(_F64, _NAN),
        "verification_ap_per_keypoint": Field(_F64, _NAN),
        "retrieval_ap_per_keypoint": Field(_F64, _NAN),
        "retrieval_num_true_positives": Field(_I64, -1),
        "retrieval_num_hard_negatives": Field(_I64, -1),
        "retrieval_num_distractors": Field(_I64, -1),
        "image_retrieval_ap": Field(_F64, _NAN),
        "image_retrieval_relevant": Field(_I64, -1),
    }
)
"""Data variables on ``(descriptor, sequence)`` (Bojanic tasks, image retrieval): dtype and
sentinel."""

_LATER_SEQUENCE_VARIABLES = ("image_retrieval_ap", "image_retrieval_relevant")
"""Per-sequence variables that joined the schema after the others: :func:`open_cube` adds them
(at their sentinels) to a file written without them."""

PROTOCOL_ATTRS = (
    "tau_px",
    "border_px",
    "tie_policy",
    "ap_method",
    "distance",
    "dataset",
    "keypoints",
    "y0_policy",
    "n_distractor_scenes",
    "n_distractors",
    "seed",
)
"""The attrs that define the protocol; cubes combine only when all of them are equal."""

DEFAULT_ATTRS: Mapping[str, Any] = MappingProxyType(
    {
        "tau_px": 3.0,
        "border_px": 40.0,
        "tie_policy": "expected",
        "ap_method": "ir",
        "distance": "mixed",
        "dataset": "",
        "keypoints": "external",
        "y0_policy": "negative",
        "n_distractor_scenes": 10,
        "n_distractors": 20,
        "seed": 0,
    }
)
"""Protocol defaults (PROTOCOLS.md) used by :func:`from_dataframe` for attrs it is not given.

``distance="mixed"`` and ``keypoints="external"`` say that the distance and the keypoints of
imported results are not known to metricalc; pass the real values when you know them.
"""

_FLOAT_ATTRS = ("tau_px", "border_px")
_INT_ATTRS = ("n_distractor_scenes", "n_distractors", "seed")
_PAIR = re.compile(r"^(\d+)-(\d+)$")


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------


def _version() -> str:
    from metricalc.version import __version__  # late: metricalc/__init__ may import this module

    return str(__version__)


def _plain(value: Any) -> Any:
    """A Python scalar for NumPy scalars and one-element arrays (netCDF reads attrs as arrays)."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(())[()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _plain_attrs(attrs: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
    return {k: _plain(v) for k, v in attrs.items()}


def sentinel_array(name: str, shape: int | tuple[int, ...]) -> np.ndarray:
    """An array of ``shape`` holding the "missing" sentinel of cube variable ``name``.

    The sentinel is -1 for integer variables, NaN for float variables and the default string
    (``"ok"`` for ``status``, ``""`` otherwise) for string variables; see
    :data:`QUERY_VARIABLES`, :data:`DESCRIPTOR_VARIABLES`, :data:`SEQUENCE_VARIABLES` and
    :data:`QUERY_COORDS`.

    Examples
    --------
    >>> from metricalc.cube import sentinel_array
    >>> sentinel_array("n_relevant", (1, 3))
    array([[-1, -1, -1]], dtype=int8)
    >>> sentinel_array("ap", 2)
    array([nan, nan])
    """
    field = _field(name)
    if field is None:
        raise InvalidInputError(f"{name!r} is not a QueryCube variable or coordinate")
    return np.full(shape, field.sentinel, dtype=_storage_dtype(field.dtype, field.sentinel))


def _field(name: str) -> Field | None:
    for table in (QUERY_VARIABLES, DESCRIPTOR_VARIABLES, SEQUENCE_VARIABLES, QUERY_COORDS):
        if name in table:
            return table[name]
    return None


def _storage_dtype(dtype: np.dtype, example: Any = "") -> np.dtype:
    if dtype == STR:
        return np.asarray([example]).dtype if isinstance(example, str) else np.dtype("<U1")
    return dtype


def split_of(scenes: Any) -> np.ndarray:
    """The split of each scene name: ``"illumination"`` (``i_*``), ``"viewpoint"`` (``v_*``) or
    ``"other"``.

    Examples
    --------
    >>> from metricalc.cube import split_of
    >>> split_of(["i_ajuntament", "v_boat", "coffee"]).tolist()
    ['illumination', 'viewpoint', 'other']
    """
    names = np.asarray(scenes, dtype=str)
    out = np.full(names.shape, "other", dtype="<U12")
    out[np.char.startswith(names, "i_")] = "illumination"
    out[np.char.startswith(names, "v_")] = "viewpoint"
    return out


def is_lazy(cube: xr.Dataset) -> bool:
    """True when any variable of ``cube`` is a dask array (opened with ``chunks=``)."""
    return any(v.chunks is not None for v in cube.variables.values())


def _is_str_dtype(dtype: np.dtype) -> bool:
    return dtype.kind in "UOT"


def _all_str(values: np.ndarray) -> bool:
    if values.dtype.kind in "UT":
        return True
    return pd.api.types.infer_dtype(values.ravel(), skipna=False) in ("string", "empty")


def _as_str(name: str, values: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A ``<U`` array of strings; every element must be a str."""
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if arr.size == 0:
        arr = arr.astype("<U1")
    if not _is_str_dtype(arr.dtype) or not _all_str(arr):
        bad = [i for i, v in enumerate(arr.ravel().tolist()) if not isinstance(v, str)]
        where = np.unravel_index(bad[0], arr.shape) if bad and arr.ndim else ()
        value = arr[where] if bad else arr.dtype
        raise InvalidInputError(
            f"{name} must hold strings; found {value!r} (dtype {arr.dtype}) at index "
            f"{tuple(int(i) for i in where)}"
        )
    arr = arr.astype(str) if arr.dtype.kind != "U" else arr
    _check_shape(name, arr, shape)
    return arr


def _check_shape(name: str, arr: np.ndarray, shape: tuple[int, ...] | None) -> None:
    if shape is not None and arr.shape != shape:
        raise InvalidInputError(f"{name} must have shape {shape}; got {arr.shape}")


def _as_dtype(name: str, values: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Convert ``values`` to ``dtype`` without loss; integers must be integral and fit."""
    if dtype == STR:
        return _as_str(name, values, shape)
    arr = np.asarray(values)
    if arr.size == 0 and arr.dtype.kind not in "biuf":
        arr = arr.astype(dtype)
    _check_shape(name, arr, shape)
    if arr.dtype == bool:
        arr = arr.astype(np.int8)
    if arr.dtype.kind not in "iuf":
        raise InvalidInputError(f"{name} must be numeric ({dtype}); got dtype {arr.dtype}")
    if dtype.kind == "f":
        return arr.astype(dtype)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            where = _first(bad)
            raise InvalidInputError(
                f"{name} must hold integers ({dtype}); found {arr[where].item()!r} at index {where}"
            )
    info = np.iinfo(dtype)
    bad = (arr < info.min) | (arr > info.max)
    if bad.any():
        where = _first(bad)
        raise InvalidInputError(
            f"{name} does not fit {dtype}; found {arr[where].item()!r} at index {where}"
        )
    return arr.astype(dtype)


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()


def _encode(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values of a 1-D array and the code of every element.

    Cube coordinates come in long runs of equal values (one scene, one pair), so only the heads
    of the runs are sorted; NumPy (not pandas) keeps fixed-width strings fast.
    """
    values = np.asarray(values)
    if values.size == 0:
        return values[:0], np.empty(0, dtype=np.int64)
    heads = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    uniques, inverse = np.unique(values[heads], return_inverse=True)
    lengths = np.diff(np.r_[heads, values.size])
    return uniques, np.repeat(inverse.astype(np.int64), lengths)


def _pair_sort_key(pair: str) -> tuple[int, int, str]:
    """Pairs sort numerically ("1-10" after "1-9"); labels that are not "a-b" come first."""
    match = _PAIR.match(pair)
    return (int(match.group(1)), int(match.group(2)), pair) if match else (-1, -1, pair)


def _identity_keys(tables: Sequence[Mapping[str, np.ndarray]]) -> list[np.ndarray]:
    """Integer keys (n, 4) of the query identities of several tables.

    Columns: codes of scene, pair and keypoint_set in one vocabulary shared by all tables and
    sorted canonically (pairs numerically), then query_keypoint; sorting the keys sorts the
    queries by scene, pair, keypoint_set, query_keypoint.
    """
    columns: list[list[np.ndarray]] = []
    for name in ("scene", "pair", "keypoint_set"):
        encoded = [_encode(table[name]) for table in tables]
        words = {w for uniques, _ in encoded for w in uniques.tolist()}
        ordered = sorted(words, key=_pair_sort_key) if name == "pair" else sorted(words)
        code_of = {w: i for i, w in enumerate(ordered)}
        columns.append(
            [
                np.array([code_of[w] for w in uniques.tolist()], dtype=np.int64)[codes]
                for uniques, codes in encoded
            ]
        )
    return [
        np.column_stack(
            [columns[0][i], columns[1][i], columns[2][i], np.asarray(t["query_keypoint"], np.int64)]
        ).reshape(-1, 4)
        for i, t in enumerate(tables)
    ]


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group the equal rows of an integer key array.

    Returns the group of every row and the first (earliest) row of every group; groups are
    numbered in sorted key order.
    """
    if len(keys) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.lexsort(keys.T[::-1])  # stable: the earliest row of a group comes first
    ordered = keys[order]
    new = np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)]
    group = np.empty(len(keys), dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    return group, order[new]


def _repeated(keys: np.ndarray) -> tuple[int, int] | None:
    """(earlier row, later row) of the first repeated key, or None."""
    group, first = _groups(keys)
    repeat = first[group] != np.arange(len(group))
    if not repeat.any():
        return None
    later = int(np.flatnonzero(repeat)[0])
    return int(first[group[later]]), later


def _describe_query(coords: Mapping[str, np.ndarray], j: int) -> str:
    parts = ", ".join(f"{k}={coords[k][j].item()!r}" for k in QUERY_IDENTITY if k in coords)
    return f"query {j} ({parts})"


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _check_attrs(attrs: Mapping[Hashable, Any]) -> None:
    plain = _plain_attrs(attrs)
    for name in (*PROTOCOL_ATTRS, "metricalc_version"):
        if name not in plain:
            raise InvalidInputError(
                f"cube attrs lack {name!r}; a QueryCube records every protocol parameter "
                f"({', '.join(PROTOCOL_ATTRS)}) and metricalc_version"
            )
    for name in _FLOAT_ATTRS:
        value = plain[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise InvalidInputError(
                f"cube attr {name} must be a finite number >= 0 (pixels); got {value!r}"
            )
    for name in _INT_ATTRS:
        value = plain[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"cube attr {name} must be an integer >= 0; got {value!r}")
    check_choice("cube attr tie_policy", plain["tie_policy"], TIE_POLICIES)
    check_choice("cube attr ap_method", plain["ap_method"], AP_METHODS)
    check_choice("cube attr distance", plain["distance"], DISTANCES)
    check_choice("cube attr y0_policy", plain["y0_policy"], Y0_POLICIES)
    for name in ("dataset", "metricalc_version"):
        if not isinstance(plain[name], str):
            raise InvalidInputError(f"cube attr {name} must be a string; got {plain[name]!r}")
    keypoints = plain["keypoints"]
    if not isinstance(keypoints, str) or not (
        keypoints in ("native", "external")
        or (keypoints.startswith("locked:") and len(keypoints) > len("locked:"))
    ):
        raise InvalidInputError(
            "cube attr keypoints must be 'native', 'external' or 'locked:<detector>'; "
            f"got {keypoints!r}"
        )


def _check_variable(cube: xr.Dataset, name: str, dims: tuple[str, ...], dtype: np.dtype) -> None:
    if name not in cube.variables:
        raise InvalidInputError(f"cube lacks the variable {name!r} over {dims}")
    variable = cube.variables[name]
    if variable.dims != dims:
        raise InvalidInputError(
            f"cube variable {name!r} must have dims {dims}; got {variable.dims}"
        )
    if dtype == STR:
        if not _is_str_dtype(variable.dtype):
            raise InvalidInputError(
                f"cube variable {name!r} must hold strings; got dtype {variable.dtype}"
            )
    elif variable.dtype != dtype:
        raise InvalidInputError(
            f"cube variable {name!r} must have dtype {dtype}; got {variable.dtype}"
        )


def _check_structure(cube: xr.Dataset) -> None:
    if not isinstance(cube, xr.Dataset):
        raise InvalidInputError(f"a QueryCube is an xarray.Dataset; got {type(cube).__name__}")
    for dim in (DESCRIPTOR, QUERY):
        if dim not in cube.dims:
            raise InvalidInputError(f"cube lacks the dimension {dim!r}; it has {tuple(cube.dims)}")
    extra = [d for d in cube.dims if d not in (DESCRIPTOR, QUERY, SEQUENCE)]
    if extra:
        raise InvalidInputError(
            f"cube has unknown dimensions {extra}; expected descriptor, query (and sequence)"
        )
    _check_variable(cube, DESCRIPTOR, (DESCRIPTOR,), STR)
    for name, field in QUERY_COORDS.items():
        _check_variable(cube, name, (QUERY,), field.dtype)
        if name not in cube.coords:
            raise InvalidInputError(f"cube {name!r} must be a coordinate, not a data variable")
    for name, field in QUERY_VARIABLES.items():
        _check_variable(cube, name, (DESCRIPTOR, QUERY), field.dtype)
    for name, field in DESCRIPTOR_VARIABLES.items():
        _check_variable(cube, name, (DESCRIPTOR,), field.dtype)
    if SEQUENCE in cube.dims:
        _check_variable(cube, SEQUENCE, (SEQUENCE,), STR)
        for name, field in SEQUENCE_VARIABLES.items():
            _check_variable(cube, name, (DESCRIPTOR, SEQUENCE), field.dtype)
    else:
        present = [n for n in SEQUENCE_VARIABLES if n in cube.variables]
        if present:
            raise InvalidInputError(
                f"cube has {present[0]!r} but no 'sequence' dimension; per-scene variables "
                "need dims (descriptor, sequence)"
            )


def _eager(cube: xr.Dataset, names: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The NumPy values of ``names``, or None when any of them is lazy (dask)."""
    if any(cube.variables[n].chunks is not None for n in names):
        return None
    return {n: cube.variables[n].values for n in names}


class _Reporter:
    """Raise an error naming the first offending element of a cube variable."""

    def __init__(self, cube: xr.Dataset) -> None:
        self.cube = cube
        self._coords: dict[str, np.ndarray] | None = None

    def coords(self) -> dict[str, np.ndarray]:
        if self._coords is None:
            self._coords = _eager(self.cube, QUERY_IDENTITY) or {}
        return self._coords

    def check(self, name: str, bad: np.ndarray, expected: str) -> None:
        if not bad.any():
            return
        where = _first(bad)
        values = self.cube.variables[name].values
        labels = []
        for dim, i in zip(self.cube.variables[name].dims, where, strict=True):
            if dim == QUERY:
                labels.append(_describe_query(self.coords(), i))
            else:
                labels.append(f"{dim} {self.cube[dim].values[i].item()!r}")
        raise InvalidInputError(
            f"cube variable {name!r} {expected}; found {values[where].item()!r} at "
            f"{', '.join(labels)} (index {where})"
        )


def _in(values: np.ndarray, allowed: Sequence[Any]) -> np.ndarray:
    return np.isin(values, np.asarray(allowed))


def _check_values(cube: xr.Dataset) -> None:
    report = _Reporter(cube)
    coords = _eager(cube, [DESCRIPTOR, *QUERY_COORDS])
    if coords is not None:
        for name in ("scene", "keypoint_set", "split", "pair", DESCRIPTOR):
            if not _all_str(coords[name]):
                report.check(name, np.ones(coords[name].shape, bool), "must hold strings")
        report.check("scene", coords["scene"] == "", "must hold non-empty scene names")
        report.check("keypoint_set", coords["keypoint_set"] == "", "must be non-empty")
        report.check("split", ~_in(coords["split"], SPLITS), f"must be one of {SPLITS}")
        pairs = coords["pair"].astype(str)
        wrong = [p for p in _encode(pairs)[0].tolist() if p != "" and not _PAIR.match(p)]
        if wrong:
            report.check("pair", _in(pairs, wrong), "must be '1-k' (images 1 and k) or ''")
        report.check("query_keypoint", coords["query_keypoint"] < 0, "must be >= 0")
        for name in ("x", "y"):
            report.check(name, np.isinf(coords[name]), "must be finite (or NaN if unknown)")
        report.check(DESCRIPTOR, coords[DESCRIPTOR] == "", "must hold non-empty names")
        report.check(DESCRIPTOR, pd.Index(coords[DESCRIPTOR]).duplicated(), "must be unique")
        repeated = _repeated(_identity_keys([coords])[0])
        if repeated is not None:
            earlier, later = repeated
            raise InvalidInputError(
                f"cube has the same query twice: {_describe_query(coords, later)} repeats "
                f"query {earlier}; (scene, pair, keypoint_set, query_keypoint) must be unique"
            )
    if SEQUENCE in cube.dims:
        names = _eager(cube, [SEQUENCE])
        if names is not None:
            report.check(SEQUENCE, pd.Index(names[SEQUENCE]).duplicated(), "must be unique")

    data = _eager(cube, list(QUERY_VARIABLES))
    if data is not None:
        n_rel = data["n_relevant"]
        report.check("n_relevant", ~_in(n_rel, (-1, 0, 1)), "must be 1, 0 or -1 (missing)")
        better, ties = data["better"], data["ties"]
        for name in ("better", "ties"):
            report.check(name, data[name] < -1, "must be a count >= 0, or -1")
        report.check(
            "better", (better == -1) != (ties == -1), "and ties must be -1 together (ties differs)"
        )
        report.check("better", (n_rel != 1) & (better != -1), "must be -1 where n_relevant != 1")
        ap = data["ap"]
        report.check("ap", (n_rel != 1) & ~np.isnan(ap), "must be NaN where n_relevant != 1")
        report.check(
            "ap", (n_rel == 1) & ~((ap >= 0) & (ap <= 1)), "must be in [0, 1] where n_relevant == 1"
        )
        ranked = better >= 0
        if ranked.any():
            policy = _plain(cube.attrs["tie_policy"])
            expected = ap_from_rank_stats(better[ranked], ties[ranked], policy=policy)
            wrong = np.zeros(ap.shape, bool)
            wrong[ranked] = ~np.isclose(ap[ranked], expected, rtol=1e-9, atol=1e-12)
            report.check(
                "ap", wrong, f"must equal ap_from_rank_stats(better, ties, policy={policy!r})"
            )
        for name in ("nn_correct", "nn_mutual"):
            report.check(name, ~_in(data[name], (-1, 0, 1)), "must be 1, 0 or -1 (missing)")
        report.check(
            "nn_correct", (data["nn_correct"] == 1) & (n_rel != 1), "can be 1 only where R = 1"
        )
        for name in ("gt_distance", "nn_distance", "nn2_distance", "nn_error"):
            report.check(name, ~(np.isnan(data[name]) | (data[name] >= 0)), "must be >= 0 or NaN")
            report.check(name, np.isinf(data[name]), "must be finite or NaN")
        report.check("n_candidates", data["n_candidates"] < -1, "must be a count >= 0, or -1")
        missing = n_rel == -1
        for name, field in QUERY_VARIABLES.items():
            if name == "n_relevant":
                continue
            values = data[name]
            off = ~np.isnan(values) if field.dtype.kind == "f" else values != field.sentinel
            report.check(
                name, missing & off, "must hold the sentinel where n_relevant == -1 (missing)"
            )

    per_descriptor = _eager(cube, list(DESCRIPTOR_VARIABLES))
    if per_descriptor is not None:
        time_ms = per_descriptor["processing_time_ms"]
        report.check("processing_time_ms", ~(np.isnan(time_ms) | (time_ms >= 0)), "must be >= 0")
        report.check("processing_time_ms", np.isinf(time_ms), "must be finite or NaN")
        status, error = per_descriptor["status"], per_descriptor["error"]
        for name in ("status", "error"):
            if not _all_str(per_descriptor[name]):
                report.check(name, np.ones(status.shape, bool), "must hold strings")
        report.check("status", ~_in(status, STATUSES), "must be 'ok' or 'error'")
        report.check("error", (status == "ok") & (error != ""), "must be '' where status is 'ok'")
        report.check(
            "error",
            (status == "error") & (error == ""),
            "must hold a message where status is error",
        )

    if SEQUENCE in cube.dims:
        per_sequence = _eager(cube, list(SEQUENCE_VARIABLES))
        if per_sequence is not None:
            for name, field in SEQUENCE_VARIABLES.items():
                values = per_sequence[name]
                if field.dtype.kind == "f":
                    report.check(
                        name,
                        ~(np.isnan(values) | ((values >= 0) & (values <= 1))),
                        "must be in [0, 1] or NaN",
                    )
                else:
                    report.check(name, values < -1, "must be a count >= 0, or -1")


def validate(cube: xr.Dataset) -> xr.Dataset:
    """Check that ``cube`` is a well-formed QueryCube and return it unchanged.

    Checks, each failure an :class:`~metricalc.errors.InvalidInputError` naming the variable,
    the first offending element (descriptor and query identity) and its value:

    - dims ``descriptor``, ``query`` (and optionally ``sequence``), nothing else;
    - every coordinate and variable of the schema with its dims and dtype;
    - the protocol attrs (:data:`PROTOCOL_ATTRS`) and ``metricalc_version``, with valid values;
    - values: ``n_relevant`` in {1, 0, -1}; ``better``/``ties`` counts >= 0 or -1, -1 together
      and -1 wherever ``n_relevant != 1`` (they may also be -1 where ``n_relevant == 1`` when
      only ``ap`` is known); ``ap`` NaN exactly where ``n_relevant != 1``, in [0, 1] elsewhere
      and, where ``better >= 0``, equal to ``ap_from_rank_stats(better, ties)`` under the attr
      ``tie_policy``; ``nn_correct``/``nn_mutual`` in {1, 0, -1} (``nn_correct`` is 1 only where
      R = 1); distances >= 0 or NaN; every variable at its sentinel where ``n_relevant == -1``;
      ``status`` in {"ok", "error"} with ``error == ""`` exactly where ok; unique descriptor
      names and query identities (``scene, pair, keypoint_set, query_keypoint``).

    A lazily opened cube (dask arrays, :func:`open_cube` with ``chunks=``) is checked for
    structure, dtypes and attrs only: the value checks of its dask-backed variables are skipped
    so that validation never computes the data.

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> c = qc.error_record("sift", "RuntimeError: out of memory", attrs=qc.DEFAULT_ATTRS)
    >>> qc.validate(c) is c
    True
    >>> qc.validate(c.drop_vars("ap"))
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: cube lacks the variable 'ap' over ('descriptor', 'query')
    """
    _check_structure(cube)
    _check_attrs(cube.attrs)
    _check_values(cube)
    return cube


# ---------------------------------------------------------------------------------------------
# construction
# ---------------------------------------------------------------------------------------------


def _complete_query_data(
    data: dict[str, np.ndarray], shape: tuple[int, int], policy: str
) -> dict[str, np.ndarray]:
    """Derive n_relevant and ap where they are not given, fill the rest with sentinels."""
    if ("better" in data) != ("ties" in data):
        given, other = ("better", "ties") if "better" in data else ("ties", "better")
        raise InvalidInputError(f"data has {given!r} but not {other!r}; give both or neither")
    if "n_relevant" not in data:
        if "better" in data:
            data["n_relevant"] = (data["better"] >= 0).astype(np.int8)
        elif "ap" in data:
            data["n_relevant"] = np.isfinite(data["ap"]).astype(np.int8)
    if "ap" not in data and "better" in data:
        ranked = data["better"] >= 0
        ap = np.full(shape, np.nan)
        if ranked.any():
            ap[ranked] = ap_from_rank_stats(
                data["better"][ranked], data["ties"][ranked], policy=policy
            )
        data["ap"] = ap
    for name in QUERY_VARIABLES:
        if name not in data:
            data[name] = sentinel_array(name, shape)
    return {name: data[name] for name in QUERY_VARIABLES}


def _protocol(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(attrs, Mapping):
        raise InvalidInputError(f"attrs must be a mapping of protocol parameters; got {attrs!r}")
    out = _plain_attrs(attrs)
    for name in _FLOAT_ATTRS:
        value = out.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = float(value)
    out["metricalc_version"] = _version()
    _check_attrs(out)
    return out


def new_cube(
    descriptors: Sequence[str],
    query_coords: Mapping[str, Any],
    data: Mapping[str, Any],
    *,
    attrs: Mapping[str, Any],
    per_descriptor: Mapping[str, Any] | None = None,
    per_sequence: Mapping[str, Any] | None = None,
    sequences: Sequence[str] | None = None,
) -> xr.Dataset:
    """Build a validated QueryCube from plain arrays, filling what is not given.

    Parameters
    ----------
    descriptors : sequence of str
        Descriptor names (unique), the ``descriptor`` coordinate.
    query_coords : mapping
        Arrays over the queries: ``scene``, ``pair``, ``keypoint_set``, ``query_keypoint``
        (required) and ``split`` (default: from the scene prefix, :func:`split_of`), ``x``,
        ``y`` (default NaN). Queries keep the order given.
    data : mapping
        Arrays of shape (descriptor, query) for any of :data:`QUERY_VARIABLES`; converted to the
        schema dtype (integers must be integral and fit). Missing variables are filled:
        ``n_relevant`` = 1 where ``better >= 0`` (else 0) when ``better``/``ties`` are given,
        else 1 where ``ap`` is finite (else 0), else -1 (missing); ``ap`` from
        ``ap_from_rank_stats(better, ties)`` under ``attrs["tie_policy"]``; every other variable
        its sentinel (-1 or NaN). With several descriptors of a native run, pass ``n_relevant``
        (-1 where a descriptor lacks the query).
    attrs : mapping
        Every protocol parameter of :data:`PROTOCOL_ATTRS` (e.g. ``dict(DEFAULT_ATTRS)``);
        extra attrs are kept; ``metricalc_version`` is set to the running version.
    per_descriptor : mapping, optional
        Arrays over the descriptors: ``processing_time_ms`` (default NaN), ``status`` (default
        ``"ok"``) and ``error`` (default ``""``).
    per_sequence : mapping, optional
        Arrays of shape (descriptor, sequence) for any of :data:`SEQUENCE_VARIABLES` (others are
        filled with sentinels); needs ``sequences``.
    sequences : sequence of str, optional
        Scene names of the ``sequence`` dim (only then does the cube have that dim).

    Returns
    -------
    xarray.Dataset
        The QueryCube, checked by :func:`validate`.

    Examples
    --------
    Two queries of one image pair: the first has its relevant keypoint behind 2 better and 3
    tied candidates, the second has no ground truth (R = 0).

    >>> from metricalc import cube as qc
    >>> c = qc.new_cube(
    ...     ["sift"],
    ...     {"scene": ["i_a", "i_a"], "pair": ["1-2", "1-2"], "keypoint_set": ["sift", "sift"],
    ...      "query_keypoint": [0, 1]},
    ...     {"better": [[2, -1]], "ties": [[3, -1]]},
    ...     attrs=qc.DEFAULT_ATTRS,
    ... )
    >>> c.n_relevant.values.tolist(), c.ap.values.round(4).tolist()
    ([[1, 0]], [[0.2375, nan]])
    >>> c.split.values.tolist(), str(c.status.values[0])
    (['illumination', 'illumination'], 'ok')
    """
    attrs = _protocol(attrs)
    names = _as_str(
        "descriptors", list(descriptors) if not isinstance(descriptors, np.ndarray) else descriptors
    )
    if names.ndim != 1:
        raise InvalidInputError(f"descriptors must be a 1-D sequence of names; got {names.shape}")
    if not isinstance(query_coords, Mapping):
        raise InvalidInputError("query_coords must be a mapping of coordinate name -> array")
    unknown = [k for k in query_coords if k not in QUERY_COORDS]
    if unknown:
        raise InvalidInputError(
            f"query_coords has unknown coordinate {unknown[0]!r}; expected {list(QUERY_COORDS)}"
        )
    for name in QUERY_IDENTITY:
        if name not in query_coords:
            raise InvalidInputError(f"query_coords lacks {name!r} (required: {QUERY_IDENTITY})")
    n_query = len(np.asarray(query_coords["scene"]))
    coords: dict[str, Any] = {}
    for name, field in QUERY_COORDS.items():
        if name in query_coords:
            values = _as_dtype(
                f"query_coords[{name!r}]", query_coords[name], field.dtype, (n_query,)
            )
        elif name == "split":
            values = split_of(coords["scene"][1])
        else:
            values = sentinel_array(name, n_query)
        coords[name] = (QUERY, values)
    coords[DESCRIPTOR] = (DESCRIPTOR, names)
    shape = (len(names), n_query)

    if not isinstance(data, Mapping):
        raise InvalidInputError("data must be a mapping of variable name -> (descriptor, query)")
    unknown = [k for k in data if k not in QUERY_VARIABLES]
    if unknown:
        raise InvalidInputError(
            f"data has unknown variable {unknown[0]!r}; expected some of {list(QUERY_VARIABLES)}"
        )
    arrays = {
        name: _as_dtype(f"data[{name!r}]", data[name], QUERY_VARIABLES[name].dtype, shape)
        for name in data
    }
    arrays = _complete_query_data(arrays, shape, attrs["tie_policy"])
    variables: dict[str, Any] = {k: ((DESCRIPTOR, QUERY), v) for k, v in arrays.items()}

    per_descriptor = dict(per_descriptor or {})
    unknown = [k for k in per_descriptor if k not in DESCRIPTOR_VARIABLES]
    if unknown:
        raise InvalidInputError(
            f"per_descriptor has unknown variable {unknown[0]!r}; expected some of "
            f"{list(DESCRIPTOR_VARIABLES)}"
        )
    for name, field in DESCRIPTOR_VARIABLES.items():
        if name in per_descriptor:
            values = _as_dtype(
                f"per_descriptor[{name!r}]", per_descriptor[name], field.dtype, (len(names),)
            )
        else:
            values = sentinel_array(name, len(names))
        variables[name] = (DESCRIPTOR, values)

    if per_sequence is not None and sequences is None:
        raise InvalidInputError("per_sequence needs sequences= (the scene names of its columns)")
    if sequences is not None:
        scene_names = _as_str(
            "sequences", list(sequences) if not isinstance(sequences, np.ndarray) else sequences
        )
        coords[SEQUENCE] = (SEQUENCE, scene_names)
        per_sequence = dict(per_sequence or {})
        unknown = [k for k in per_sequence if k not in SEQUENCE_VARIABLES]
        if unknown:
            raise InvalidInputError(
                f"per_sequence has unknown variable {unknown[0]!r}; expected some of "
                f"{list(SEQUENCE_VARIABLES)}"
            )
        seq_shape = (len(names), len(scene_names))
        for name, field in SEQUENCE_VARIABLES.items():
            if name in per_sequence:
                values = _as_dtype(
                    f"per_sequence[{name!r}]", per_sequence[name], field.dtype, seq_shape
                )
            else:
                values = sentinel_array(name, seq_shape)
            variables[name] = ((DESCRIPTOR, SEQUENCE), values)
    return validate(xr.Dataset(variables, coords=coords, attrs=attrs))


def error_record(descriptor: str, message: str, *, attrs: Mapping[str, Any]) -> xr.Dataset:
    """A cube holding one failed descriptor: no queries, ``status="error"`` and its message.

    :func:`combine` merges it with the other descriptors' cubes; the failed descriptor then has
    ``n_relevant = -1`` (missing) for every query, and the metric set gives it NaN.

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> c = qc.error_record("orb", "ValueError: no keypoints", attrs=qc.DEFAULT_ATTRS)
    >>> dict(c.sizes), str(c.status.values[0]), str(c.error.values[0])
    ({'descriptor': 1, 'query': 0}, 'error', 'ValueError: no keypoints')
    """
    if not isinstance(message, str) or not message:
        raise InvalidInputError(f"error_record needs a non-empty message string; got {message!r}")
    empty = {
        name: np.empty(0, dtype=_storage_dtype(QUERY_COORDS[name].dtype)) for name in QUERY_IDENTITY
    }
    return new_cube(
        [descriptor],
        empty,
        {},
        attrs=attrs,
        per_descriptor={"status": [STATUSES[1]], "error": [message]},
    )


# ---------------------------------------------------------------------------------------------
# combine
# ---------------------------------------------------------------------------------------------


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality with NaN equal to NaN."""
    equal = a == b
    if a.dtype.kind == "f":
        equal |= np.isnan(a) & np.isnan(b)
    return equal


def _is_sentinel(name: str, values: np.ndarray) -> np.ndarray:
    field = _field(name)
    sentinel = field.sentinel if field is not None else _generic_sentinel(values.dtype)
    if values.dtype.kind == "f" and isinstance(sentinel, float) and math.isnan(sentinel):
        return np.isnan(values)
    return values == sentinel


def _generic_sentinel(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return _NAN
    if dtype.kind in "iu":
        return -1 if dtype.kind == "i" else 0
    if dtype.kind == "b":
        return False
    return ""


MERGED_ATTRS = ("distance",)
"""Protocol attrs that describe the descriptors rather than the comparison: cubes that differ in
them combine, and the result says ``"mixed"`` (an L2 and a Hamming descriptor evaluated in
separate runs are as comparable as in one run)."""


def _dataset_label(attrs: Mapping[Hashable, Any]) -> str:
    """``'sha256:...'`` and, when the cube records it, ``(read from <dataset_path>)``."""
    path = attrs.get("dataset_path")
    return f"{attrs['dataset']!r}" + (f" (read from {path})" if path else "")


def _check_protocols(cubes: Sequence[xr.Dataset]) -> None:
    first = _plain_attrs(cubes[0].attrs)
    for i, cube in enumerate(cubes[1:], start=1):
        other = _plain_attrs(cube.attrs)
        if first["dataset"] != other["dataset"]:
            raise InvalidInputError(
                "cannot combine cubes of different data: cube 0 was evaluated on dataset "
                f"{_dataset_label(first)} but cube {i} on {_dataset_label(other)}; cubes combine "
                "only when evaluated on the same data (for metricalc's keypoint evaluation, "
                "dataset is a fingerprint of the images and homographies)"
            )
        for name in PROTOCOL_ATTRS:
            if name not in MERGED_ATTRS and first[name] != other[name]:
                raise InvalidInputError(
                    f"cannot combine cubes with different protocols: attr {name!r} is "
                    f"{first[name]!r} in cube 0 but {other[name]!r} in cube {i}"
                )


def _union_queries(
    cubes: Sequence[xr.Dataset],
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """All queries of ``cubes`` once, in canonical order, and each cube's positions in them.

    The coordinates that are not part of the identity (split, x, y) must agree.
    """
    tables = [{name: cube[name].values for name in QUERY_COORDS} for cube in cubes]
    keys = _identity_keys(tables)
    group, first = _groups(np.concatenate(keys))
    every = {name: np.concatenate([t[name] for t in tables]) for name in QUERY_COORDS}
    origin = np.repeat(np.arange(len(cubes)), [len(k) for k in keys])
    for name in QUERY_COORDS:
        if name in QUERY_IDENTITY:
            continue
        clash = ~_same(every[name], every[name][first][group])
        if clash.any():
            later = int(np.flatnonzero(clash)[0])
            earlier = int(first[group[later]])
            raise InvalidInputError(
                "cannot combine: query "
                + ", ".join(f"{k}={every[k][later].item()!r}" for k in QUERY_IDENTITY)
                + f" has {name}={every[name][earlier].item()!r} in cube {origin[earlier]} but "
                f"{name}={every[name][later].item()!r} in cube {origin[later]}"
            )
    offsets = np.cumsum([0, *(len(k) for k in keys)])
    positions = [group[offsets[c] : offsets[c + 1]] for c in range(len(cubes))]
    return {name: values[first] for name, values in every.items()}, positions


def _variable_layout(cubes: Sequence[xr.Dataset]) -> dict[str, tuple[tuple[str, ...], np.dtype]]:
    """Dims and dtype of every data variable of the union."""
    layout: dict[str, tuple[tuple[str, ...], np.dtype]] = {}
    for i, cube in enumerate(cubes):
        extra = [c for c in cube.coords if c not in (*QUERY_COORDS, DESCRIPTOR, SEQUENCE)]
        if extra:
            raise InvalidInputError(
                f"cannot combine: cube {i} has the coordinate {extra[0]!r}, which is not part of "
                "the QueryCube schema; drop it first (cube.drop_vars(...))"
            )
        for name, variable in cube.data_vars.items():
            dims = tuple(str(d) for d in variable.dims)
            if dims not in ((DESCRIPTOR, QUERY), (DESCRIPTOR,), (DESCRIPTOR, SEQUENCE)):
                raise InvalidInputError(
                    f"cannot combine: variable {name!r} of cube {i} has dims {dims}; expected "
                    "(descriptor, query), (descriptor,) or (descriptor, sequence)"
                )
            name = str(name)
            field = _field(name)
            dtype = field.dtype if field is not None else variable.dtype
            if name in layout:
                if layout[name][0] != dims:
                    raise InvalidInputError(
                        f"cannot combine: variable {name!r} has dims {layout[name][0]} in an "
                        f"earlier cube but {dims} in cube {i}"
                    )
                if field is None:
                    dtype = np.result_type(layout[name][1], dtype)
            layout[name] = (dims, dtype)
    return layout


def combine(cubes: Sequence[xr.Dataset]) -> xr.Dataset:
    """Union of QueryCubes over descriptors, queries and sequences.

    - The protocol attrs (:data:`PROTOCOL_ATTRS`) must be equal; otherwise the error names the
      attr and both values. ``metricalc_version`` lists the distinct versions (joined by
      ``", "``); other attrs are taken from the first cube that has them.
    - A query is identified by ``(scene, pair, keypoint_set, query_keypoint)``; its ``split``,
      ``x`` and ``y`` must agree between cubes.
    - A (descriptor, query) cell is *present* in a cube where ``n_relevant != -1``; present in
      two cubes, every variable must be equal (NaN equals NaN), else the error names the
      descriptor, the query and both values. Cells present nowhere hold the sentinels (a
      native-keypoint union: -1 / NaN where a descriptor lacks the query). Per-sequence cells
      (present where any variable is not its sentinel) combine the same way.
    - Per-descriptor variables are carried: ``status`` is ``"error"`` if any part failed (its
      messages joined by ``"; "``), ``processing_time_ms`` is the sum over the parts that added
      cells (an identical duplicate adds no time). Other data variables over the schema's
      dims are combined like the schema's own (sentinel -1, NaN or ``""`` by dtype).
    - Order: descriptors by first appearance; queries by scene, pair (numerically), keypoint_set,
      query_keypoint; sequences by name.

    The work is done in memory (lazy cubes are computed).

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> def one(name, scene, better):
    ...     coords = {"scene": [scene], "pair": ["1-2"], "keypoint_set": ["sift"],
    ...               "query_keypoint": [0]}
    ...     return qc.new_cube([name], coords, {"better": [[better]], "ties": [[0]]},
    ...                        attrs=qc.DEFAULT_ATTRS)
    >>> c = qc.combine([one("sift", "v_b", 1), one("sift", "i_a", 0), one("orb", "i_a", 3),
    ...                 qc.error_record("brief", "failed", attrs=qc.DEFAULT_ATTRS)])
    >>> c.descriptor.values.tolist(), c.scene.values.tolist()
    (['sift', 'orb', 'brief'], ['i_a', 'v_b'])
    >>> c.ap.values.tolist()
    [[1.0, 0.5], [0.25, nan], [nan, nan]]
    >>> c.n_relevant.values.tolist(), c.status.values.tolist()
    ([[1, 1], [1, -1], [-1, -1]], ['ok', 'ok', 'error'])
    """
    if isinstance(cubes, xr.Dataset):
        cubes = [cubes]
    cubes = list(cubes)
    if not cubes:
        raise InvalidInputError("combine needs at least one cube; got none")
    for i, cube in enumerate(cubes):
        try:
            validate(cube)
        except InvalidInputError as error:
            raise InvalidInputError(f"cannot combine: cube {i} is invalid: {error}") from None
    _check_protocols(cubes)
    cubes = [cube.compute() if is_lazy(cube) else cube for cube in cubes]
    cubes = [c.drop_vars(QUERY) if QUERY in c.variables else c for c in cubes]  # renumbered

    descriptors = list(dict.fromkeys(d for c in cubes for d in c[DESCRIPTOR].values.tolist()))
    d_index = {d: i for i, d in enumerate(descriptors)}
    queries, query_positions = _union_queries(cubes)
    sequences = sorted(
        {s for c in cubes if SEQUENCE in c.dims for s in c[SEQUENCE].values.tolist()}
    )
    s_index = {s: i for i, s in enumerate(sequences)}
    sizes = {DESCRIPTOR: len(descriptors), QUERY: len(queries["scene"]), SEQUENCE: len(sequences)}

    layout = _variable_layout(cubes)
    if sequences:
        for name, field in SEQUENCE_VARIABLES.items():
            layout.setdefault(name, ((DESCRIPTOR, SEQUENCE), field.dtype))
    out: dict[str, np.ndarray] = {}
    for name, (dims, dtype) in layout.items():
        shape = tuple(sizes[d] for d in dims)
        field = _field(name)
        sentinel = field.sentinel if field is not None else _generic_sentinel(dtype)
        # strings accumulate as objects: fixed-width arrays would truncate longer values
        storage = object if _is_str_dtype(np.dtype(dtype)) else _storage_dtype(dtype, sentinel)
        out[name] = np.full(shape, sentinel, dtype=storage)
    owner = {
        QUERY: np.full((sizes[DESCRIPTOR], sizes[QUERY]), -1, dtype=np.int32),
        SEQUENCE: np.full((sizes[DESCRIPTOR], sizes[SEQUENCE]), -1, dtype=np.int32),
    }
    time_ms = np.full(len(descriptors), np.nan)
    failed: list[list[str]] = [[] for _ in descriptors]
    extra_descriptor = [
        n
        for n, (dims, _) in layout.items()
        if dims == (DESCRIPTOR,) and n not in DESCRIPTOR_VARIABLES
    ]
    seen = np.zeros(len(descriptors), bool)

    for c, cube in enumerate(cubes):
        di = np.array([d_index[d] for d in cube[DESCRIPTOR].values.tolist()], dtype=np.int64)
        axes = {DESCRIPTOR: di, QUERY: query_positions[c]}
        if SEQUENCE in cube.dims:
            axes[SEQUENCE] = np.array(
                [s_index[s] for s in cube[SEQUENCE].values.tolist()], dtype=np.int64
            )
        added = np.zeros(len(di), bool)
        for other, present_of in ((QUERY, _query_present), (SEQUENCE, _sequence_present)):
            if other not in axes:
                continue
            names = [
                n
                for n, (dims, _) in layout.items()
                if dims == (DESCRIPTOR, other) and n in cube.data_vars
            ]
            present = present_of(cube)
            index = np.ix_(di, axes[other])
            previous = owner[other][index]
            overlap = present & (previous >= 0)
            for name in names:
                new = cube[name].values
                old = out[name][index]
                clash = overlap & ~_same(old, new)
                if clash.any():
                    i, j = _first(clash)
                    where = (
                        _describe_query(queries, int(axes[QUERY][j]))
                        if other == QUERY
                        else f"sequence {sequences[axes[SEQUENCE][j]]!r}"
                    )
                    raise InvalidInputError(
                        f"cannot combine: {name} of descriptor {descriptors[di[i]]!r} at {where} "
                        f"is {old[i, j].item()!r} in cube {previous[i, j]} but "
                        f"{new[i, j].item()!r} in cube {c}"
                    )
                out[name][index] = np.where(present, new, old)
            added |= (present & (previous < 0)).any(axis=1)
            owner[other][index] = np.where(present & (previous < 0), c, previous)
        # per-descriptor variables
        status, error = cube["status"].values, cube["error"].values
        part_time = cube["processing_time_ms"].values
        for k, target in enumerate(di):
            if status[k] == "error" and str(error[k]) not in failed[target]:
                failed[target].append(str(error[k]))
            if (added[k] or not seen[target]) and not np.isnan(part_time[k]):
                time_ms[target] = np.nansum([time_ms[target], part_time[k]])
            seen[target] = True
        for name in extra_descriptor:
            if name not in cube.data_vars:
                continue
            new = cube[name].values
            old = out[name][di]
            clash = ~_is_sentinel(name, old) & ~_is_sentinel(name, new) & ~_same(old, new)
            if clash.any():
                k = int(np.flatnonzero(clash)[0])
                raise InvalidInputError(
                    f"cannot combine: {name} of descriptor {descriptors[di[k]]!r} is "
                    f"{old[k].item()!r} in an earlier cube but {new[k].item()!r} in cube {c}"
                )
            out[name][di] = np.where(_is_sentinel(name, new), old, new)

    out["processing_time_ms"] = time_ms
    out["status"] = np.array(["error" if f else "ok" for f in failed], dtype=object)
    out["error"] = np.array(["; ".join(f) for f in failed], dtype=object)
    out = {name: v.astype(str) if v.dtype == object else v for name, v in out.items()}

    attrs: dict[Hashable, Any] = {}
    versions: list[str] = []
    for cube in cubes:
        for key, value in _plain_attrs(cube.attrs).items():
            attrs.setdefault(key, value)
        for version in str(_plain(cube.attrs["metricalc_version"])).split(", "):
            if version not in versions:
                versions.append(version)
    attrs["metricalc_version"] = ", ".join(versions)
    for name in MERGED_ATTRS:
        values = {str(_plain(cube.attrs[name])) for cube in cubes}
        attrs[name] = values.pop() if len(values) == 1 else "mixed"

    coords: dict[str, Any] = {DESCRIPTOR: (DESCRIPTOR, np.array(descriptors, dtype=str))}
    for name, field in QUERY_COORDS.items():
        values = queries[name]
        coords[name] = (
            QUERY,
            values.astype(str) if field.dtype == STR else values.astype(field.dtype),
        )
    if sequences:
        coords[SEQUENCE] = (SEQUENCE, np.array(sequences, dtype=str))
    variables = {name: (layout[name][0], out[name]) for name in layout}
    return validate(xr.Dataset(variables, coords=coords, attrs=attrs))


def _query_present(cube: xr.Dataset) -> np.ndarray:
    return cube["n_relevant"].values != -1


def _sequence_present(cube: xr.Dataset) -> np.ndarray:
    present = np.zeros((cube.sizes[DESCRIPTOR], cube.sizes[SEQUENCE]), bool)
    for name in SEQUENCE_VARIABLES:
        present |= ~_is_sentinel(name, cube[name].values)
    return present


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


def save(cube: xr.Dataset, path: str | os.PathLike[str]) -> None:
    """Write ``cube`` to a netCDF-4 (HDF5) file with the h5netcdf engine, atomically.

    The cube is validated first, written to a temporary file next to ``path`` and renamed over
    it (:func:`os.replace`), so ``path`` never holds a half-written cube. The string
    coordinates over ``query`` (``scene``, ``pair``, ``keypoint_set``, ``split``) are stored as
    gzip-compressed UTF-8 character arrays (netCDF ``char`` with a ``string<N>`` dimension and
    ``_Encoding = "utf-8"``, the CF convention), the other strings as variable-length UTF-8
    (netCDF-4 ``string``); both are readable by netCDF-C, h5py and xarray. Numeric variables
    are gzip-compressed (level 1, shuffle). Lazy (dask) cubes are written chunk by chunk.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from metricalc import cube as qc
    >>> c = qc.error_record("sift", "failed", attrs=qc.DEFAULT_ATTRS)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     qc.save(c, pathlib.Path(tmp) / "cube.nc")
    ...     qc.open_cube(pathlib.Path(tmp) / "cube.nc").identical(c)
    True
    """
    validate(cube)
    path = Path(path)
    out = cube.copy(deep=False)
    encoding: dict[Hashable, dict[str, Any]] = {}
    for name, variable in out.variables.items():
        variable.encoding = {}
        if _is_str_dtype(variable.dtype) and QUERY in variable.dims and variable.size:
            # one value per query, few distinct ones: fixed-width UTF-8 characters, compressed
            # (as variable-length strings each value costs ~40 bytes, most of a native cube)
            encoding[name] = {"dtype": "S1", "zlib": True, "complevel": 1}
        elif _is_str_dtype(variable.dtype):
            encoding[name] = {"dtype": str}
        elif variable.size and name not in cube.dims:
            chunks = tuple(
                min(size, _STORAGE_CHUNKS.get(str(dim), size))
                for dim, size in zip(variable.dims, variable.shape, strict=True)
            )
            encoding[name] = {"zlib": True, "complevel": 1, "shuffle": True, "chunksizes": chunks}
    out.attrs = _plain_attrs(out.attrs)
    with temporary_path(path) as tmp:
        out.to_netcdf(tmp, engine="h5netcdf", encoding=encoding)


_STORAGE_CHUNKS = {DESCRIPTOR: 1, QUERY: 10_000}
"""HDF5 chunk shape of the numeric variables: one descriptor by 10,000 queries. Lazy opening is
fastest (and quiet) when ``chunks=`` along ``query`` is a multiple of 10,000."""

_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, RuntimeError, IndexError)


def _unicode(variables: Mapping[Hashable, xr.DataArray]) -> dict[Hashable, xr.DataArray]:
    """The in-memory string variables read as objects (character arrays), as NumPy unicode."""
    return {
        name: variable.astype(str)
        for name, variable in variables.items()
        if variable.dtype == object and variable.chunks is None
    }


def _text_apart(path: Path, chunks: Any) -> list[str]:
    """For a lazy open, the string variables over ``query`` stored as character arrays: they
    are left out of the dask open (dask cannot size their object dtype for ``chunks="auto"``)
    and read into memory by :func:`_text_back`, as every coordinate is."""
    if chunks is None:
        return []
    with xr.open_dataset(path, engine="h5netcdf") as plain:  # lazily indexed: nothing read yet
        return [str(n) for n, v in plain.variables.items() if v.dtype == object and QUERY in v.dims]


def _text_back(cube: xr.Dataset, path: Path, names: list[str]) -> xr.Dataset:
    """``cube`` with the variables ``names`` of ``path`` read into memory and put back."""
    if not names:
        return cube
    with xr.open_dataset(path, engine="h5netcdf") as plain:
        text = {name: plain[name].load() for name in names}
        coords = {name for name in names if name in plain.coords}
    cube = cube.assign_coords({n: v for n, v in text.items() if n in coords})
    return cube.assign({n: v for n, v in text.items() if n not in coords})


def open_cube(path: str | os.PathLike[str], *, chunks: Any = None) -> xr.Dataset:
    """Open a cube written by :func:`save` and validate it.

    Parameters
    ----------
    path : path
        The ``.nc`` file.
    chunks : optional
        ``None`` (default) reads everything into memory and closes the file. Anything else
        (``{}``, ``"auto"``, ``{"query": 100_000}``) is passed to :func:`xarray.open_dataset`:
        the variables are lazy dask arrays, reductions run chunk by chunk, and the file stays
        open for dask. A lazy cube is validated for structure, dtypes and attrs only (see
        :func:`validate`).

    Raises
    ------
    InvalidInputError
        Naming the file, when it is missing, not a netCDF/HDF5 file, or not a valid QueryCube.

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> qc.open_cube("no/such/cube.nc")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: cube file no/such/cube.nc does not exist
    """
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"cube file {path} does not exist")
    if not path.is_file():
        raise InvalidInputError(f"cube file {path} is not a file")
    try:
        apart = _text_apart(path, chunks)
        cube = xr.open_dataset(path, engine="h5netcdf", chunks=chunks, drop_variables=apart)
    except _READ_ERRORS as error:
        raise InvalidInputError(
            f"cube file {path} is not a readable netCDF-4/HDF5 file: {type(error).__name__}: "
            f"{error}"
        ) from error
    if chunks is None:
        try:
            cube.load()
        except _READ_ERRORS as error:
            raise InvalidInputError(
                f"cube file {path} could not be read: {type(error).__name__}: {error}"
            ) from error
        finally:
            cube.close()
    else:
        # coordinates (groupby needs them in memory) and the small per-descriptor and
        # per-sequence variables are read now; only the (descriptor, query) data stay lazy
        small = [
            name
            for name, variable in cube.variables.items()
            if variable.chunks is not None
            and (name in cube.coords or not {QUERY} & set(map(str, variable.dims)))
        ]
        try:
            loaded = {name: cube[name].compute() for name in small}
        except _READ_ERRORS as error:
            cube.close()
            raise InvalidInputError(
                f"cube file {path} could not be read: {type(error).__name__}: {error}"
            ) from error
        cube = cube.assign_coords({n: v for n, v in loaded.items() if n in cube.coords})
        cube = cube.assign({n: v for n, v in loaded.items() if n not in cube.coords})
        try:
            cube = _text_back(cube, path, apart)
        except _READ_ERRORS as error:
            cube.close()
            raise InvalidInputError(
                f"cube file {path} could not be read: {type(error).__name__}: {error}"
            ) from error
    cube = cube.assign_coords(_unicode(cube.coords)).assign(_unicode(cube.data_vars))
    cube.attrs = _plain_attrs(cube.attrs)
    cube = _add_later_variables(cube)
    try:
        return validate(cube)
    except InvalidInputError as error:
        cube.close()
        raise InvalidInputError(f"cube file {path} is not a valid QueryCube: {error}") from None


def _add_later_variables(cube: xr.Dataset) -> xr.Dataset:
    """The :data:`_LATER_SEQUENCE_VARIABLES` a cube with a ``sequence`` dim lacks, at their
    sentinels (a file written before they joined the schema)."""
    if SEQUENCE not in cube.dims:
        return cube
    shape = (cube.sizes[DESCRIPTOR], cube.sizes[SEQUENCE])
    missing = [name for name in _LATER_SEQUENCE_VARIABLES if name not in cube.variables]
    added = {name: ((DESCRIPTOR, SEQUENCE), sentinel_array(name, shape)) for name in missing}
    return cube.assign(added)


# ---------------------------------------------------------------------------------------------
# bring your own results
# ---------------------------------------------------------------------------------------------

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
    merged: dict[str, Any] = {**DEFAULT_ATTRS, **_plain_attrs(attrs or {})}
    if tie_policy is not None:
        if attrs is not None and "tie_policy" in attrs and attrs["tie_policy"] != tie_policy:
            raise InvalidInputError(
                f"tie_policy={tie_policy!r} contradicts attrs['tie_policy']={attrs['tie_policy']!r}"
            )
        merged["tie_policy"] = tie_policy
    check_choice("tie_policy", merged["tie_policy"], TIE_POLICIES)
    policy = merged["tie_policy"]
    df = df.copy(deep=False)
    df.columns = columns
    n = len(df)

    descriptor = _string_column(df, "descriptor")
    table: dict[str, np.ndarray] = {
        "scene": _string_column(df, "scene"),
        "query_keypoint": _int_column(df, "query", minimum=0, nan_as=None),
    }
    table["pair"] = (
        _string_column(df, "pair", allow_empty=True)
        if "pair" in columns
        else np.full(n, "", dtype="<U1")
    )
    if "pair" in columns:
        bad = [i for i, p in enumerate(table["pair"]) if p and not _PAIR.match(p)]
        if bad:
            raise InvalidInputError(
                f"column 'pair', {_row(df, bad[0])}: expected '1-k' (image 1 against image k); "
                f"got {_show(table['pair'][bad[0]])}"
            )
    if "split" in columns:
        table["split"] = _string_column(df, "split")
        bad_split = ~np.isin(table["split"], SPLITS)
        if bad_split.any():
            i = int(np.flatnonzero(bad_split)[0])
            raise InvalidInputError(
                f"column 'split', {_row(df, i)}: expected one of {SPLITS}; got "
                f"{table['split'][i]!r}"
            )
    else:
        table["split"] = split_of(table["scene"])
    if "keypoint_set" in columns:
        table["keypoint_set"] = _string_column(df, "keypoint_set")
    elif str(merged["keypoints"]).startswith("locked:"):
        table["keypoint_set"] = np.full(n, str(merged["keypoints"])[len("locked:") :])
    elif merged["keypoints"] == "native":
        table["keypoint_set"] = descriptor.copy()
    else:
        table["keypoint_set"] = np.full(n, "external")
    for column in ("x", "y"):
        table[column] = _number_column(df, column) if column in columns else np.full(n, np.nan)
        if np.isinf(table[column]).any():
            i = int(np.flatnonzero(np.isinf(table[column]))[0])
            raise InvalidInputError(f"column {column!r}, {_row(df, i)}: expected a finite number")

    values: dict[str, np.ndarray] = {}
    for name, field in QUERY_VARIABLES.items():
        if name not in columns:
            continue
        if name in ("better", "ties"):
            values[name] = _int_column(df, name, minimum=-1)
        elif name == "n_relevant":
            values[name] = _int_column(df, name, allowed=(0, 1), nan_as=None)
        elif name in ("nn_correct", "nn_mutual"):
            values[name] = _int_column(df, name, allowed=(-1, 0, 1))
        elif name == "n_candidates":
            values[name] = _int_column(df, name, minimum=-1)
        else:
            values[name] = _number_column(df, name)
            bad = ~(np.isnan(values[name]) | (values[name] >= 0)) | np.isinf(values[name])
            if name == "ap":
                bad |= values[name] > 1
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                wanted = "in [0, 1] or NaN" if name == "ap" else "a finite number >= 0 or NaN"
                raise InvalidInputError(
                    f"column {name!r}, {_row(df, i)}: expected {wanted}; "
                    f"got {_show(df[name].iloc[i])}"
                )
        values[name] = values[name].astype(field.dtype)

    def fail(mask: np.ndarray, column: str, expected: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise InvalidInputError(
                f"column {column!r}, {_row(df, i)}: {expected}; got {_show(df[column].iloc[i])}"
            )

    if "better" in values:
        better, ties = values["better"], values["ties"]
        fail((better == -1) != (ties == -1), "ties", "must be -1 (or NaN) exactly where better is")
        derived = (better >= 0).astype(np.int8)
        if "n_relevant" in values:
            fail(
                values["n_relevant"] != derived,
                "n_relevant",
                "must be 1 where better/ties are counts and 0 where they are -1 (R = 0)",
            )
        values["n_relevant"] = derived
        ap = np.full(n, np.nan)
        if derived.any():
            ranked = derived == 1
            ap[ranked] = ap_from_rank_stats(better[ranked], ties[ranked], policy=policy)
        if "ap" in values:
            given = values["ap"]
            fail(
                ~(_same(given, ap) | np.isclose(given, ap, rtol=1e-9, atol=1e-12)),
                "ap",
                f"disagrees with ap_from_rank_stats(better, ties, policy={policy!r})",
            )
        values["ap"] = ap
    else:
        finite = np.isfinite(values["ap"]).astype(np.int8)
        if "n_relevant" in values:
            fail(
                values["n_relevant"] != finite,
                "n_relevant",
                "must be 1 where ap is a number and 0 where ap is NaN",
            )
        values["n_relevant"] = finite
    if "nn_correct" in values:
        fail(
            (values["nn_correct"] == 1) & (values["n_relevant"] != 1),
            "nn_correct",
            "can be 1 only for a query with a relevant item (n_relevant == 1)",
        )

    uniques, codes = _encode(descriptor)
    first_row = np.full(len(uniques), n, dtype=np.int64)
    np.minimum.at(first_row, codes, np.arange(n))
    appearance = np.argsort(first_row, kind="stable")  # descriptors in order of first appearance
    names = uniques[appearance].tolist()
    row_d = np.empty(len(uniques), dtype=np.int64)
    row_d[appearance] = np.arange(len(uniques))
    row_d = row_d[codes]
    keys = _identity_keys([table])[0]
    repeated = _repeated(np.column_stack([row_d, keys]))
    if repeated is not None:
        earlier, later = repeated
        raise InvalidInputError(
            f"rows {df.index[earlier]!r} and {df.index[later]!r} are the same (descriptor, query): "
            f"descriptor={descriptor[later]!r}, "
            + ", ".join(f"{k}={table[k][later].item()!r}" for k in QUERY_IDENTITY)
            + "; keep one row per descriptor and query"
        )
    row_q, first = _groups(keys)
    for column in ("split", "x", "y"):
        clash = ~_same(table[column], table[column][first][row_q])
        if clash.any():
            later = int(np.flatnonzero(clash)[0])
            earlier = int(first[row_q[later]])
            source = column if column in columns else "scene"
            raise InvalidInputError(
                f"column {source!r}: rows {df.index[earlier]!r} and {df.index[later]!r} describe "
                "the same query ("
                + ", ".join(f"{k}={table[k][later].item()!r}" for k in QUERY_IDENTITY)
                + f") with different {column} ({table[column][earlier].item()!r} vs "
                f"{table[column][later].item()!r})"
            )
    shape = (len(names), len(first))
    data: dict[str, np.ndarray] = {}
    for name, column_values in values.items():
        grid = sentinel_array(name, shape)
        grid[row_d, row_q] = column_values
        data[name] = grid

    per_descriptor: dict[str, Any] = {}
    if "processing_time_ms" in columns:
        time_ms = _number_column(df, "processing_time_ms")
        reference = time_ms[first_row[appearance]][row_d]  # the descriptor's first row
        clash = ~_same(time_ms, reference)
        if clash.any():
            later = int(np.flatnonzero(clash)[0])
            earlier = int(first_row[appearance][row_d[later]])
            raise InvalidInputError(
                f"column 'processing_time_ms', rows {df.index[earlier]!r} and "
                f"{df.index[later]!r}: one value per descriptor expected "
                f"({descriptor[later]!r}); got {_show(time_ms[earlier])} and "
                f"{_show(time_ms[later])}"
            )
        fail(
            ~(np.isnan(time_ms) | (time_ms >= 0)) | np.isinf(time_ms),
            "processing_time_ms",
            "expected a finite number >= 0 or NaN",
        )
        per_descriptor["processing_time_ms"] = time_ms[first_row[appearance]]
    coords = {k: table[k][first] for k in QUERY_COORDS}
    return new_cube(names, coords, data, attrs=merged, per_descriptor=per_descriptor)
