"""Every sum the metric set needs from a lazy (dask-backed) cube, in one pass over its chunks.

:func:`query_sums` reads each chunk of the per-query variables once and returns, per descriptor,
the grouped counts and sums the metric set derives its rates from (per scene, per image pair,
and the hit-probability sums of the ranked queries): one ``np.bincount`` per quantity, row and
chunk, the chunks' partial sums added by dask (a tree sum). They equal what the eager path's
grouped sums give (:func:`metricalc.metrics.reductions.group_sum`): counts exactly, float sums
up to the order of the additions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from metricalc.cube.io import VOCABULARY
from metricalc.metrics.ranks import hit_sums
from metricalc.metrics.reductions import GROUP_CODES, PAIR_UNIT

__all__ = ["MATCH_VARS", "QuerySums", "query_sums"]

_READ = ("n_relevant", "ap", "better", "ties", "nn_correct")
"""The per-query variables every pass reads, in the order :func:`_block_sums` takes them."""

MATCH_VARS = ("nn_mutual", "n_candidates")
"""The per-query variables of the match counts, read when the cube has both."""

_SCENE_PARTS = ("ap_sum", "n1", "n0")
_PAIR_PARTS = ("correct", "counted", "matches", "candidates", "known")


@dataclass(frozen=True)
class QuerySums:
    r"""The grouped sums of one pass (dask-backed, over ``descriptor`` first).

    Per scene :math:`s` (dim ``scene``): ``ap_sum`` :math:`\sum_{q \in Q_1^s} AP_q` (NaN AP as
    0), ``n1`` :math:`|Q_1^s|`, ``n0`` :math:`|Q_0^s|`. Per image pair :math:`p` (dim
    :data:`~metricalc.metrics.reductions.PAIR_UNIT`): ``correct`` (``nn_correct == 1``),
    ``counted`` (``nn_correct >= 0``), ``matches`` (present, R >= 0, with ``nn_mutual == 1``),
    ``candidates`` (the sum of ``n_candidates`` over the known queries: present with
    ``n_candidates >= 0``) and ``known`` (their count); the last three are ``None`` without
    :data:`MATCH_VARS`. ``hits`` (dim ``k``): :math:`\sum_{q \in Q_1,\, b_q \ge 0} h_q(k)`, the
    hit probability at each cutoff (:func:`metricalc.metrics.ranks.hit_sums`), and ``ranked``
    :math:`|\{q \in Q_1 : b_q \ge 0\}|`. Counts are int64, sums float64.
    """

    ap_sum: xr.DataArray
    n1: xr.DataArray
    n0: xr.DataArray
    correct: xr.DataArray
    counted: xr.DataArray
    matches: xr.DataArray | None
    candidates: xr.DataArray | None
    known: xr.DataArray | None
    hits: xr.DataArray
    ranked: xr.DataArray


_CLASSES = (4, 3, 2, 2)
"""The classes of a query :func:`_row_sums` counts per image pair, fastest first: R (-1, 0, 1,
>= 2), ``nn_correct`` (other, 0, 1), ``nn_mutual == 1``, ``n_candidates >= 0``."""
_KINDS = int(np.prod(_CLASSES))


def _query_class(row: dict[str, np.ndarray]) -> np.ndarray:
    """The class of every query (:data:`_CLASSES`) as one number below :data:`_KINDS` (uint8:
    the arithmetic stays on one byte per query)."""
    relevant = (np.clip(row["n_relevant"], -1, 2) + 1).astype(np.uint8)
    correct = row["nn_correct"]
    kind = (correct >= 0).view(np.uint8) + (correct == 1).view(np.uint8)
    if "n_candidates" in row:
        mutual = (row["nn_mutual"] == 1).view(np.uint8)
        known = (row["n_candidates"] >= 0).view(np.uint8)
        kind += 3 * (mutual + 2 * known)
    relevant += 4 * kind
    classes: np.ndarray = relevant
    return classes


def _row_sums(
    row: dict[str, np.ndarray], unit: np.ndarray, units: int, cutoffs: np.ndarray, tie_policy: str
) -> np.ndarray:
    """The sums of one descriptor's queries of one chunk per image pair (codes ``unit``): the AP
    sum over R = 1, the count of each query class (:data:`_CLASSES`), the ``n_candidates`` sum
    over the known queries; then the hit sums of the ranked R = 1 queries (:func:`hit_sums`)."""
    relevant = row["n_relevant"]
    r1 = relevant == 1
    ap = row["ap"]
    parts: list[np.ndarray] = [
        np.bincount(unit, weights=np.where(r1 & ~np.isnan(ap), ap, 0.0), minlength=units),
        np.bincount(unit * _KINDS + _query_class(row), minlength=_KINDS * units),
    ]
    if "n_candidates" in row:
        candidates = row["n_candidates"]
        known = (relevant >= 0) & (candidates >= 0)
        parts.append(np.bincount(unit, weights=np.where(known, candidates, 0), minlength=units))
    else:
        parts.append(np.zeros(units))
    ranked = r1 & (row["better"] >= 0)
    parts.append(hit_sums(row["better"], row["ties"], ranked, cutoffs, tie_policy))
    return np.concatenate(parts, dtype=np.float64)


def _block_sums(
    *blocks: np.ndarray, names: tuple[str, ...], units: int, cutoffs: np.ndarray, tie_policy: str
) -> np.ndarray:
    """The sums of one chunk: ``blocks`` are the (descriptor, query) blocks of ``names``, then
    the image-pair codes of the chunk's queries; shape (descriptors, 1, sums)."""
    *data, codes = blocks
    unit = codes.astype(np.intp)
    out = [
        _row_sums(
            {name: values[r] for name, values in zip(names, data, strict=True)},
            unit,
            units,
            cutoffs,
            tie_policy,
        )
        for r in range(data[0].shape[0])  # the descriptors of the chunk (not the queries)
    ]
    return np.stack(out)[:, None, :]


def _grouped(totals: np.ndarray, scene_of_unit: np.ndarray, scenes: int) -> np.ndarray:
    """The sums of :func:`_block_sums` added over the chunks (descriptors x sums) turned into
    those of :class:`QuerySums`, laid out as :func:`_layout` says: the per-scene sums are sums
    over the scene's image pairs (``scene_of_unit``)."""
    units = scene_of_unit.size
    ap = totals[:, :units]
    end = units * (1 + _KINDS)
    classes = totals[:, units:end].reshape(totals.shape[0], units, *_CLASSES[::-1])
    candidates, rest = totals[:, end : end + units], totals[:, end + units :]
    present = classes[..., 1:].sum(axis=-1)  # R >= 0: (descriptor, unit, known, mutual, kind)
    pair_parts = [
        classes[:, :, :, :, 2].sum(axis=(-1, -2, -3)),  # nn_correct == 1
        classes[:, :, :, :, 1:].sum(axis=(-1, -2, -3, -4)),  # nn_correct >= 0
        present[:, :, :, 1, :].sum(axis=(-1, -2)),  # matches: present, nn_mutual == 1
        candidates,
        present[:, :, 1].sum(axis=(-1, -2)),  # known: present, n_candidates >= 0
    ]
    r1, r0 = (classes[..., r].sum(axis=(-1, -2, -3)) for r in (2, 1))  # R = 1, R = 0
    per_scene = [
        np.stack([np.bincount(scene_of_unit, weights=w, minlength=scenes) for w in values])
        for values in (ap, r1, r0)
    ]
    return np.concatenate([*per_scene, *pair_parts, rest], axis=1)


def _layout(scenes: int, units: int, cutoffs: int) -> dict[str, slice]:
    """Where each sum of :class:`QuerySums` sits in a row of :func:`_grouped`."""
    sizes = [(n, scenes) for n in _SCENE_PARTS] + [(n, units) for n in _PAIR_PARTS]
    sizes += [("hits", cutoffs), ("ranked", 1)]
    out, start = {}, 0
    for name, size in sizes:
        out[name] = slice(start, start + size)
        start += size
    return out


def _codes(cube: xr.Dataset, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The in-memory group codes :func:`~metricalc.metrics.reductions.prepare_cube` added for
    ``key`` (small unsigned integers) and their labels."""
    codes = cube.coords[GROUP_CODES[key]]
    return np.asarray(codes.values), np.asarray(codes.attrs[VOCABULARY])


def _aligned(cube: xr.Dataset, names: tuple[str, ...]) -> list[Any]:
    """The dask arrays of variables ``names`` over (descriptor, query), on common chunks."""
    import dask.array as da

    arrays = [da.asarray(cube[n].transpose("descriptor", "query").data) for n in names]  # type: ignore[no-untyped-call]
    return list(da.core.unify_chunks(*(x for a in arrays for x in (a, "dq")))[1])  # type: ignore[no-untyped-call]


def _totals(
    cube: xr.Dataset, names: tuple[str, ...], cutoffs: np.ndarray, tie_policy: str
) -> tuple[Any, dict[str, slice], np.ndarray, np.ndarray]:
    """The sums of :class:`QuerySums` as one dask array (descriptor x sums): one
    :func:`_block_sums` task per chunk, a tree sum over the chunks, :func:`_grouped`; where
    each sum sits (:func:`_layout`), the scenes and the image pairs."""
    import dask.array as da

    arrays = _aligned(cube, names)
    unit, units = _codes(cube, PAIR_UNIT)
    scene, scenes = _codes(cube, "scene")
    scene_of_unit = np.zeros(units.size, np.intp)
    scene_of_unit[unit] = scene  # an image pair lies in one scene
    query_chunks = arrays[0].chunks[1]
    width = units.size * (2 + _KINDS) + cutoffs.size + 1
    partial = da.map_blocks(  # type: ignore[no-untyped-call]  # dask: no hints
        _block_sums,
        *arrays,
        da.from_array(unit, chunks=(query_chunks,)),  # type: ignore[no-untyped-call]
        names=names,
        units=units.size,
        cutoffs=cutoffs,
        tie_policy=tie_policy,
        new_axis=2,
        chunks=(arrays[0].chunks[0], (1,) * len(query_chunks), (width,)),
        dtype=np.float64,
        meta=np.array((), np.float64),
    )
    layout = _layout(scenes.size, units.size, cutoffs.size)
    totals = (
        partial.sum(axis=1)
        .rechunk({0: -1})
        .map_blocks(
            _grouped,
            scene_of_unit=scene_of_unit,
            scenes=scenes.size,
            chunks=(partial.shape[0], layout["ranked"].stop),
            dtype=np.float64,
        )
    )
    return totals, layout, scenes, units


def query_sums(cube: xr.Dataset, cutoffs: list[int], tie_policy: str) -> QuerySums:
    """:class:`QuerySums` of a dask-backed cube prepared by
    :func:`~metricalc.metrics.reductions.prepare_cube` (its group codes in memory), at the
    distinct hit ``cutoffs`` under ``tie_policy``: one task per chunk reading each
    variable's chunk once and counting per image pair, a tree sum of the chunks' partial sums,
    then the per-scene sums from the per-pair ones (lazy until computed)."""
    import dask.array as da

    names = _READ + (MATCH_VARS if all(n in cube.data_vars for n in MATCH_VARS) else ())
    ks = np.asarray(cutoffs, np.int64)
    totals, layout, scenes, units = _totals(cube, names, ks, tie_policy)
    descriptors = {"descriptor": cube["descriptor"].values}

    def part(name: str, dim: str, labels: np.ndarray, count: bool) -> xr.DataArray:
        values = totals[:, layout[name]]
        typed = da.rint(values).astype(np.int64) if count else values
        return xr.DataArray(typed, dims=("descriptor", dim), coords={**descriptors, dim: labels})

    matching = "n_candidates" in names
    pair = {n: part(n, PAIR_UNIT, units, True) if matching else None for n in _PAIR_PARTS[2:]}
    return QuerySums(
        ap_sum=part("ap_sum", "scene", scenes, False),
        n1=part("n1", "scene", scenes, True),
        n0=part("n0", "scene", scenes, True),
        correct=part("correct", PAIR_UNIT, units, True),
        counted=part("counted", PAIR_UNIT, units, True),
        matches=pair["matches"],
        candidates=pair["candidates"],
        known=pair["known"],
        hits=part("hits", "k", ks, False),
        ranked=part("ranked", "_one", np.zeros(1), True).isel(_one=0, drop=True),
    )
