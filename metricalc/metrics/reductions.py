"""The QueryCube checks and the masked, grouped reductions every metric module shares.

A metric reads a QueryCube (an :class:`xarray.Dataset` over ``descriptor`` x ``query`` with the
query coordinates ``scene``, ``split`` and ``pair``) through :func:`prepare_cube`, which checks
the variables it uses and adds the integer codes of the scenes and image pairs
(:data:`GROUP_CODES`) and the image-pair key :data:`PAIR_UNIT`. The grouped sums are one
``np.bincount`` per row (and chunk, for a dask-backed cube, which stays lazy); an empty mean is
NaN, never a division warning.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np
import xarray as xr

from metricalc.cube.io import VOCABULARY, query_codes
from metricalc.errors import InvalidInputError
from metricalc.validation import CUBE_TIE_POLICIES, check_choice

__all__ = [
    "PAIR_UNIT",
    "QUERY_VARS",
    "cube_tie_policy",
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
    "unit_scene",
]

QUERY_VARS = ("better", "ties", "n_relevant", "ap")
"""The rank-statistics variables of a QueryCube that every metric of the set reads."""

PAIR_UNIT = "_pair_unit"
"""The image-pair key coordinate :func:`prepare_cube` adds: scene + "/" + pair (scene folder
names cannot hold "/")."""

_GROUP_COORDS = ("scene", "split", "pair")

GROUP_CODES = {"scene": "_scene_code", PAIR_UNIT: "_pair_unit_code"}
"""The integer code coordinates :func:`prepare_cube` adds for the groups :func:`group_sum`
sums over: codes into the sorted labels of the groups present (attr ``vocabulary``)."""


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
    """Check the parts of the QueryCube schema ``what`` uses; return the cube with the integer
    codes of its scenes and image pairs (:data:`GROUP_CODES`, in memory), the image-pair key
    :data:`PAIR_UNIT` (``scene/pair``) added, and its :func:`ok_mask`.

    The labels are encoded once (:func:`metricalc.cube.io.query_codes`): a cube opened lazily
    from a file uses the file's codes, so its string coordinates are never read as strings.
    """
    cube = _check_schema(cube, needed, what)
    for name in _GROUP_COORDS:
        if name not in cube.coords or cube[name].dims != ("query",):
            raise InvalidInputError(
                f"{what}: the cube lacks the coordinate {name!r} on dim 'query'; expected "
                "scene, split and pair coordinates (metricalc.cube)"
            )
    scene_codes, scenes = _present(*_in_memory(query_codes(cube["scene"])))
    pair_codes, pairs = _in_memory(query_codes(cube["pair"]))
    unit_codes, units = _pair_units(scene_codes, scenes, pair_codes, pairs)
    coords: dict[str, Any] = {
        GROUP_CODES["scene"]: ("query", scene_codes, {VOCABULARY: scenes}),
        GROUP_CODES[PAIR_UNIT]: ("query", unit_codes, {VOCABULARY: units}),
    }
    if cube["scene"].chunks is None:
        coords.update({n: ("query", np.asarray(cube[n].values).astype(str)) for n in _GROUP_COORDS})
        coords[PAIR_UNIT] = ("query", units[unit_codes])
    else:  # decoded chunk by chunk if ever read
        lazy = _chunked_like(unit_codes, cube["scene"].chunks)
        coords[PAIR_UNIT] = ("query", lazy.map_blocks(_labels_of, labels=units, dtype=units.dtype))
    cube = cube.assign_coords(coords)
    return cube, ok_mask(cube)


def _in_memory(coded: tuple[Any, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Codes (computed if lazy: one pass over the file's small integer codes) and vocabulary."""
    codes, vocabulary = coded
    return np.asarray(codes), vocabulary


def _present(codes: np.ndarray, vocabulary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The codes renumbered over the labels that occur (a file's vocabulary may hold labels of
    queries a selection left out), and those labels."""
    counts = np.bincount(codes.astype(np.intp), minlength=vocabulary.size)
    if counts.all():
        return codes, vocabulary
    keep = counts > 0
    renumber = (np.cumsum(keep) - 1).astype(codes.dtype)
    return renumber[codes], vocabulary[keep]


def _pair_units(
    scene_codes: np.ndarray, scenes: np.ndarray, pair_codes: np.ndarray, pairs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Codes of the image pairs ``scene/pair`` into their sorted labels (those that occur):
    integer arithmetic on the scene and pair codes, strings built once per image pair."""
    combined = scene_codes.astype(np.int64) * max(pairs.size, 1) + pair_codes
    if scenes.size * pairs.size <= 4 * combined.size + 1024:
        occurring = np.flatnonzero(np.bincount(combined, minlength=scenes.size * pairs.size))
    else:
        occurring = np.unique(combined)
    labels = (
        np.char.add(
            np.char.add(scenes[occurring // max(pairs.size, 1)], "/"),
            pairs[occurring % max(pairs.size, 1)],
        )
        if occurring.size
        else np.array([], str)
    )
    order = np.argsort(labels, kind="stable")
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    dtype = np.min_scalar_type(max(order.size - 1, 0))
    if occurring.size and occurring[-1] < 4 * combined.size + 1024:
        lookup = np.zeros(occurring[-1] + 1, dtype)
        lookup[occurring] = rank
        codes = lookup[combined]
    else:
        codes = rank[np.searchsorted(occurring, combined)].astype(dtype)
    return codes, labels[order]


def _labels_of(codes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    found: np.ndarray = labels[codes]
    return found


def _chunked_like(codes: np.ndarray, chunks: Any) -> Any:
    """``codes`` as a dask array with the query ``chunks`` of a lazy cube."""
    import dask.array as da

    return da.from_array(codes, chunks=chunks)  # type: ignore[no-untyped-call]  # dask: no hints


def cube_tie_policy(cube: xr.Dataset) -> str:
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
    order: what ``values.groupby(key).sum()`` gives. The groups are integer codes: those
    :func:`prepare_cube` added (:data:`GROUP_CODES`), else one ``pandas.factorize`` of the
    labels; the sums are one ``np.bincount`` per row, and for dask-backed values one per row
    and chunk, summed over the chunks (counts and sums first, exact; a lazy cube stays lazy).
    Booleans and integers sum to int64. An empty dim (a cube without queries, e.g. every
    descriptor failed) gives an empty group dim.

    Examples
    --------
    >>> v = xr.DataArray([[1.0, np.nan, 2.0], [3.0, 4.0, 5.0]], dims=("d", "query"),
    ...                  coords={"d": ["a", "b"], "scene": ("query", ["y", "x", "y"])})
    >>> group_sum(v, "scene").values.tolist()
    [[0.0, 3.0], [4.0, 8.0]]
    """
    (dim,) = values[key].dims
    coded = GROUP_CODES.get(key)
    if values.sizes[dim] > 0 and coded is not None and coded in values.coords:
        codes = values.coords[coded]
        return _bincount_sum(values, key, dim, np.asarray(codes.values), codes.attrs[VOCABULARY])
    if values.sizes[dim] > 0:
        import pandas as pd

        codes_of, labels = pd.factorize(values[key].values, sort=True)
        return _bincount_sum(values, key, dim, codes_of, np.asarray(labels))
    kept = [d for d in values.dims if d != dim]
    coords = {d: values[d].values for d in kept if d in values.coords}
    dtype = np.int64 if values.dtype == bool else values.dtype
    shape = [values.sizes[d] for d in kept] + [0]
    return xr.DataArray(
        np.zeros(shape, dtype), dims=[*kept, key], coords={**coords, key: np.array([], str)}
    )


def _row_sums(data: np.ndarray, codes: np.ndarray, groups: int) -> np.ndarray:
    """Per row of ``data`` (..., N): the float64 sums of its values (NaN as 0) per code."""
    rows = data.reshape(-1, data.shape[-1])
    integral = data.dtype == bool or np.issubdtype(data.dtype, np.integer)
    sums = np.empty((rows.shape[0], groups))
    for r, row in enumerate(rows):  # one row per descriptor (x other dims): memory O(queries)
        weights = row.astype(np.float64) if integral else np.where(np.isnan(row), 0.0, row)
        sums[r] = np.bincount(codes, weights=weights, minlength=groups)
    return sums.reshape(*data.shape[:-1], groups)


def _chunk_sums(data: np.ndarray, codes: np.ndarray, groups: int) -> np.ndarray:
    """:func:`_row_sums` of one dask chunk, with a length-1 axis for its place along the dim."""
    return _row_sums(data, codes, groups)[..., None, :]


def _lazy_sums(data: Any, codes: np.ndarray, groups: int) -> Any:
    """:func:`_row_sums` of a dask array: per chunk, then summed over the chunks."""
    import dask.array as da

    chunks = data.chunks
    lazy_codes = da.from_array(  # type: ignore[no-untyped-call]  # dask: no hints
        codes.astype(np.intp), chunks=(chunks[-1],)
    )
    partial = da.map_blocks(  # type: ignore[no-untyped-call]
        _chunk_sums,
        data,
        lazy_codes,
        groups=groups,
        new_axis=data.ndim,
        chunks=(*chunks[:-1], (1,) * len(chunks[-1]), (groups,)),
        dtype=np.float64,
        meta=np.array((), np.float64),
    )
    return partial.sum(axis=-2)


def _bincount_sum(
    values: xr.DataArray, key: str, dim: Hashable, codes: np.ndarray, labels: np.ndarray
) -> xr.DataArray:
    """:func:`group_sum` over at least one item along ``dim``, given the group ``codes`` of
    the items into ``labels``."""
    kept = [d for d in values.dims if d != dim]
    ordered = values.transpose(*kept, dim)
    data = ordered.data
    integral = data.dtype == bool or np.issubdtype(data.dtype, np.integer)
    if ordered.chunks is None:
        sums = _row_sums(np.asarray(data), codes.astype(np.intp), labels.size)
    else:
        sums = _lazy_sums(data, codes, labels.size)
    coords = {
        name: coord
        for name, coord in values.coords.items()
        if dim not in coord.dims and name != key
    }
    floating = np.result_type(data.dtype, 0.0)
    typed = np.rint(sums).astype(np.int64) if integral else sums.astype(floating)
    return xr.DataArray(typed, dims=[*kept, key], coords={**coords, key: np.asarray(labels)})


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
