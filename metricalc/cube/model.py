"""The QueryCube schema: dims, coordinates, variables (dtypes, sentinels) and protocol attrs.

Everything here is data about the cube and small conversions into its dtypes; the modules that
build (:mod:`metricalc.cube.build`, :mod:`metricalc.cube.frame`), check
(:mod:`metricalc.cube.validate`), merge (:mod:`metricalc.cube.combine`) and store
(:mod:`metricalc.cube.io`) cubes all read it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError

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


_Key = TypeVar("_Key", bound=Hashable)

_I8, _I64, _F64 = np.dtype(np.int8), np.dtype(np.int64), np.dtype(np.float64)
_NAN = float("nan")
_FLOAT = Field(_F64, _NAN)  # a float, NaN where missing
_INT = Field(_I64, -1)  # an integer (count, index), -1 where missing
_FLAG = Field(_I8, -1)  # 0 or 1, -1 where missing

QUERY_COORDS: Mapping[str, Field] = MappingProxyType(
    {
        "scene": Field(STR, ""),
        "split": Field(STR, "other"),
        "pair": Field(STR, ""),
        "keypoint_set": Field(STR, ""),
        "query_keypoint": _INT,
        "x": _FLOAT,
        "y": _FLOAT,
    }
)
"""Coordinates on the ``query`` dim, with their dtype (and the default of the optional ones)."""

QUERY_IDENTITY = ("scene", "pair", "keypoint_set", "query_keypoint")
"""The coordinates that identify a query across cubes (:func:`combine`)."""

QUERY_VARIABLES: Mapping[str, Field] = MappingProxyType(
    {
        "better": _INT,
        "ties": _INT,
        "n_relevant": _FLAG,
        "ap": _FLOAT,
        "nn_correct": _FLAG,
        "gt_distance": _FLOAT,
        "nn_distance": _FLOAT,
        "nn2_distance": _FLOAT,
        "nn_error": _FLOAT,
        "nn_mutual": _FLAG,
        "n_candidates": _INT,
    }
)
"""Data variables on ``(descriptor, query)``: dtype and the sentinel of a missing value."""

DESCRIPTOR_VARIABLES: Mapping[str, Field] = MappingProxyType(
    {
        "processing_time_ms": _FLOAT,
        "status": Field(STR, "ok"),
        "error": Field(STR, ""),
    }
)
"""Data variables on ``(descriptor,)``: dtype and default."""

SEQUENCE_VARIABLES: Mapping[str, Field] = MappingProxyType(
    {
        "verification_ap": _FLOAT,
        "retrieval_ap": _FLOAT,
        "verification_ap_per_keypoint": _FLOAT,
        "retrieval_ap_per_keypoint": _FLOAT,
        "retrieval_num_true_positives": _INT,
        "retrieval_num_hard_negatives": _INT,
        "retrieval_num_distractors": _INT,
        "image_retrieval_ap": _FLOAT,
        "image_retrieval_relevant": _INT,
    }
)
"""Data variables on ``(descriptor, sequence)`` (Bojanic tasks, image retrieval): dtype and
sentinel."""

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
"""Protocol defaults (docs/cube.md) used by :func:`from_dataframe` for attrs it is not given.

``distance="mixed"`` and ``keypoints="external"`` say that the distance and the keypoints of
imported results are not known to metricalc; pass the real values when you know them.
"""

MERGED_ATTRS = ("distance",)
"""Protocol attrs that describe the descriptors rather than the comparison: cubes that differ in
them combine, and the result says ``"mixed"`` (an L2 and a Hamming descriptor evaluated in
separate runs are as comparable as in one run)."""

_FLOAT_ATTRS = ("tau_px", "border_px")
_INT_ATTRS = ("n_distractor_scenes", "n_distractors", "seed")
_PAIR = re.compile(r"^(\d+)-(\d+)$")


def plain_value(value: Any) -> Any:
    """A Python scalar for NumPy scalars and one-element arrays (netCDF reads attrs as arrays).

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.cube import plain_value
    >>> plain_value(np.array([3.0])), plain_value(np.int64(2)), plain_value("ir")
    (3.0, 2, 'ir')
    """
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(())[()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def plain_attrs(attrs: Mapping[_Key, Any]) -> dict[_Key, Any]:
    """``attrs`` with every value made a Python scalar by :func:`plain_value`."""
    return {k: plain_value(v) for k, v in attrs.items()}


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


def _as_dtype(
    name: str, values: Any, dtype: np.dtype, shape: tuple[int, ...], *, copy: bool = True
) -> np.ndarray:
    """Convert ``values`` to ``dtype`` without loss; integers must be integral and fit. With
    ``copy=False`` an array that already has ``dtype`` is returned as it is."""
    if dtype == STR:
        return _as_str(name, values, shape)
    arr = np.asarray(values)
    if not copy and arr.dtype == dtype:
        _check_shape(name, arr, shape)
        return arr
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


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality with NaN equal to NaN."""
    equal: np.ndarray = a == b
    if a.dtype.kind == "f":
        equal |= np.isnan(a) & np.isnan(b)
    return equal


def _is_sentinel(name: str, values: np.ndarray) -> np.ndarray:
    field = _field(name)
    sentinel = field.sentinel if field is not None else _generic_sentinel(values.dtype)
    at_sentinel: np.ndarray
    if values.dtype.kind == "f" and isinstance(sentinel, float) and math.isnan(sentinel):
        at_sentinel = np.isnan(values)
    else:
        at_sentinel = values == sentinel
    return at_sentinel


def _generic_sentinel(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return _NAN
    if dtype.kind in "iu":
        return -1 if dtype.kind == "i" else 0
    if dtype.kind == "b":
        return False
    return ""
