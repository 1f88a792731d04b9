"""The QueryCube checks and the masked, grouped reductions every metric module shares.

A metric reads a QueryCube (an :class:`xarray.Dataset` over ``descriptor`` x ``query`` with the
query coordinates ``scene``, ``split`` and ``pair``) through :func:`prepare_cube`, which checks
the variables it uses and adds the image-pair key :data:`PAIR_UNIT`. The reductions are xarray
operations (masked sums, ``groupby``), so a dask-backed cube stays lazy; an empty mean is NaN,
never a division warning.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.validation import CUBE_TIE_POLICIES, check_choice

__all__ = [
    "PAIR_UNIT",
    "QUERY_VARS",
    "descriptor_constant",
    "group_max",
    "group_nanmean",
    "group_sum",
    "nanmean",
    "ok_mask",
    "pair_keypoints",
    "partition",
    "prepare_cube",
    "ratio",
    "tie_policy",
    "unit_scene",
]

QUERY_VARS = ("better", "ties", "n_relevant", "ap")
"""The rank-statistics variables of a QueryCube that every metric of the set reads."""

PAIR_UNIT = "_pair_unit"
"""The image-pair key coordinate :func:`prepare_cube` adds: scene + "/" + pair (scene folder
names cannot hold "/")."""

_GROUP_COORDS = ("scene", "split", "pair")


def _check_schema(cube: object, needed: Iterable[str], what: str) -> xr.Dataset:
    """``cube`` if it is a QueryCube with the ``needed`` variables over
    ``(descriptor, query)``; raise otherwise."""
    if not isinstance(cube, xr.Dataset):
        raise InvalidInputError(
            f"{what}: cube must be an xarray.Dataset (a QueryCube); got {type(cube).__name__}"
        )
    missing_dims = [d for d in ("descriptor", "query") if d not in cube.dims]
    if missing_dims:
        raise InvalidInputError(
            f"{what}: the cube has no dim(s) {missing_dims}; a QueryCube has dims descriptor and "
            f"query (got {tuple(cube.dims)})"
        )
    missing = [v for v in needed if v not in cube.data_vars]
    if missing:
        raise InvalidInputError(
            f"{what}: the cube lacks the variable(s) {missing}; expected the QueryCube schema "
            "(metricalc.cube)"
        )
    for name in needed:
        if cube[name].dims != ("descriptor", "query"):
            raise InvalidInputError(
                f"{what}: cube variable {name!r} has dims {cube[name].dims}; expected "
                "('descriptor', 'query')"
            )
    return cube


def prepare_cube(cube: object, needed: Iterable[str], what: str) -> tuple[xr.Dataset, xr.DataArray]:
    """Check the parts of the QueryCube schema ``what`` uses; return the cube with its grouping
    coordinates loaded (NumPy strings) and the image-pair key :data:`PAIR_UNIT` added, and its
    :func:`ok_mask`."""
    cube = _check_schema(cube, needed, what)
    coords = {}
    for name in _GROUP_COORDS:
        if name not in cube.coords or cube[name].dims != ("query",):
            raise InvalidInputError(
                f"{what}: the cube lacks the coordinate {name!r} on dim 'query'; expected "
                "scene, split and pair coordinates (metricalc.cube)"
            )
        # grouping needs the labels in memory (dask cannot group by a lazy array); these are
        # small string arrays, the data variables stay lazy
        coords[name] = ("query", np.asarray(cube[name].values).astype(str))
    unit = np.char.add(np.char.add(coords["scene"][1], "/"), coords["pair"][1])
    coords[PAIR_UNIT] = ("query", unit)
    cube = cube.assign_coords(coords)
    return cube, ok_mask(cube)


def tie_policy(cube: xr.Dataset) -> str:
    """The cube's tie policy (attrs ``tie_policy``, default ``"expected"``)."""
    return check_choice(
        "cube.attrs['tie_policy']", cube.attrs.get("tie_policy", "expected"), CUBE_TIE_POLICIES
    )


def ok_mask(cube: xr.Dataset) -> xr.DataArray:
    """True for descriptors whose evaluation succeeded (``status`` is not ``"error"``)."""
    if "status" not in cube.data_vars:
        return xr.DataArray(
            np.ones(cube.sizes["descriptor"], bool),
            dims="descriptor",
            coords={"descriptor": cube["descriptor"]},
        )
    return cube["status"] != "error"


def ratio(numerator: xr.DataArray, denominator: xr.DataArray) -> xr.DataArray:
    """numerator / denominator, NaN where the denominator is 0 (no division warning)."""
    return numerator / denominator.where(denominator > 0)


def nanmean(values: xr.DataArray, dim: str) -> xr.DataArray:
    """Mean over ``dim`` of the defined (non-NaN) values; NaN if there is none."""
    return ratio(values.sum(dim, skipna=True), values.notnull().sum(dim))


def group_sum(values: xr.DataArray, key: str) -> xr.DataArray:
    r"""Sum of ``values`` within the groups of coordinate ``key`` (a new dim named ``key``).

    :math:`s_{r,g} = \sum_{i:\,k_i = g} v_{r,i}` with NaN counted as 0, groups in sorted
    order: what ``values.groupby(key).sum()`` gives, computed for in-memory values by one
    ``pandas.factorize`` of the labels and one ``np.bincount`` over every row (xarray's
    groupby re-encodes the labels and costs ten times as much on a million queries);
    dask-backed values keep xarray's lazy groupby. Booleans and integers sum to int64.
    ``groupby`` refuses an empty dim (a cube without queries, e.g. every descriptor failed);
    that case gives an empty group dim here.

    Examples
    --------
    >>> v = xr.DataArray([[1.0, np.nan, 2.0], [3.0, 4.0, 5.0]], dims=("d", "query"),
    ...                  coords={"d": ["a", "b"], "scene": ("query", ["y", "x", "y"])})
    >>> group_sum(v, "scene").values.tolist()
    [[0.0, 3.0], [4.0, 8.0]]
    """
    (dim,) = values[key].dims
    if values.sizes[dim] > 0 and values.chunks is not None:
        return values.groupby(key).sum()
    if values.sizes[dim] > 0:
        return _bincount_sum(values, key, dim)
    kept = [d for d in values.dims if d != dim]
    coords = {d: values[d].values for d in kept if d in values.coords}
    dtype = np.int64 if values.dtype == bool else values.dtype
    shape = [values.sizes[d] for d in kept] + [0]
    return xr.DataArray(
        np.zeros(shape, dtype), dims=[*kept, key], coords={**coords, key: np.array([], str)}
    )


def _bincount_sum(values: xr.DataArray, key: str, dim: Hashable) -> xr.DataArray:
    """:func:`group_sum` of in-memory values with at least one item along ``dim``."""
    import pandas as pd

    codes, labels = pd.factorize(values[key].values, sort=True)
    kept = [d for d in values.dims if d != dim]
    data = values.transpose(*kept, dim).values
    integral = data.dtype == bool or np.issubdtype(data.dtype, np.integer)
    rows = data.reshape(-1, data.shape[-1])
    sums = np.empty((rows.shape[0], len(labels)))
    for r, row in enumerate(rows):  # one row per descriptor (x other dims): memory O(queries)
        weights = row.astype(np.float64) if integral else np.where(np.isnan(row), 0.0, row)
        sums[r] = np.bincount(codes, weights=weights, minlength=len(labels))
    sums = sums.reshape(*data.shape[:-1], len(labels))
    coords = {
        name: coord
        for name, coord in values.coords.items()
        if dim not in coord.dims and name != key
    }
    return xr.DataArray(
        np.rint(sums).astype(np.int64) if integral else sums.astype(np.result_type(data, 0.0)),
        dims=[*kept, key],
        coords={**coords, key: np.asarray(labels)},
    )


def group_max(values: xr.DataArray, key: str) -> xr.DataArray:
    """Largest of ``values`` within the groups of coordinate ``key`` (empty dim allowed)."""
    (dim,) = values[key].dims
    if values.sizes[dim] > 0:
        return values.groupby(key).max()
    return group_sum(values, key)


def group_nanmean(values: xr.DataArray, key: str) -> xr.DataArray:
    """Mean of the defined values within each group of coordinate ``key``."""
    return ratio(group_sum(values.fillna(0), key), group_sum(values.notnull(), key))


def pair_keypoints(cube: xr.Dataset) -> xr.DataArray:
    r"""The keypoints of each image pair's target image, over ``(descriptor, PAIR_UNIT)``: the
    pair's ``n_candidates`` (one number per pair, so the mean over its queries),

    .. math:: k_p = \frac{\sum_{q \in p,\ known} n^{cand}_q}{|\{q \in p : known\}|},

    where a query is known if present (R >= 0) with ``n_candidates >= 0`` (-1 is "unknown");
    NaN for a pair with no known query."""
    known = (cube["n_relevant"] >= 0) & (cube["n_candidates"] >= 0)
    return ratio(
        group_sum(cube["n_candidates"].where(known, 0), PAIR_UNIT), group_sum(known, PAIR_UNIT)
    )


def partition(values: np.ndarray, sep: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``str.partition`` of every string (before, sep or "", after); empty input allowed."""
    values = np.asarray(values).astype(str)
    if values.size == 0:  # np.char.partition cannot size an empty array
        empty = np.array([], str)
        return empty, empty, empty
    parts = np.char.partition(values, sep)
    return parts[:, 0], parts[:, 1], parts[:, 2]


def unit_scene(units: np.ndarray) -> np.ndarray:
    """Scene of each image-pair key ``scene/pair``."""
    return partition(units, "/")[0]


def descriptor_constant(cube: xr.Dataset, value: float | int) -> xr.DataArray:
    """``value`` for every descriptor of the cube."""
    names = cube["descriptor"].values
    return xr.DataArray(np.full(len(names), value), dims="descriptor", coords={"descriptor": names})
