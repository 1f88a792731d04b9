r"""The descriptor x scene cube of a DescriptorWorkbench export, as ``metricalc metrics`` and
``metricalc compare`` read it.

``metricalc db import-workbench --out cube.nc`` writes the per-scene values of an export
(:func:`metricalc.store.workbench.read_workbench`): a DescriptorWorkbench export has no
per-query records, so the file is not a QueryCube. :func:`open_workbench_cube` recognises it
(attr ``format``), :func:`workbench_metric_set` computes from its scenes the metric-set values
the scenes determine, and :func:`scene_query_cube` gives :func:`metricalc.stats.compare` one
value per system and scene, so the comparison pairs by scene.

With :math:`m_s`, :math:`z_s`, :math:`q_s`, :math:`e_s` a row's ``true_map``,
``true_map_with_zeros``, ``query_count`` and ``excluded_count`` of scene *s* and :math:`S` the
scenes with :math:`q_s > 0` (those with an R = 1 query):

.. math::

    \text{true\_map\_micro} = \frac{\sum_{s \in S} m_s q_s}{\sum_s q_s}, \qquad
    \text{true\_map\_macro\_by\_scene} = \operatorname{mean}_{s \in S} m_s

    \text{true\_map\_micro\_including\_zeros} = \frac{\sum_{s \in S} m_s q_s}{\sum_s (q_s + e_s)},
    \qquad
    \text{true\_map\_macro\_by\_scene\_including\_zeros} = \operatorname{mean}_{s \in S} z_s

and the split mAPs over the viewpoint (``v*``) or illumination (``i*``) scenes of :math:`S`:
the definitions :func:`metricalc.store.workbench.read_workbench` checks against the file's own
columns (``docs/store.md``, "The check").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.metrics import SPLIT_LETTERS

__all__ = [
    "HIT_RATES",
    "WORKBENCH_FORMAT",
    "is_workbench_cube",
    "open_workbench_cube",
    "scene_query_cube",
    "workbench_metric_set",
]

WORKBENCH_FORMAT = "DescriptorWorkbench export"
"""The ``format`` attr of the cube :func:`metricalc.store.workbench.read_workbench` builds."""

HIT_RATES = {1: "precision_at_1", 5: "precision_at_5", 10: "precision_at_10"}
"""Cut-off -> DescriptorWorkbench's name of the hit rate an export holds per row
(``precision_at_1`` and ``precision_at_5`` columns, ``precision_at_10`` in the metadata),
kept in the cube over ``descriptor`` as ``hit_rate_at_<k>`` where present."""

_SCENE_VARIABLES = ("true_map", "true_map_with_zeros", "query_count", "excluded_count")


def is_workbench_cube(data: xr.Dataset) -> bool:
    """Whether ``data`` is the descriptor x scene cube of a DescriptorWorkbench export."""
    return data.attrs.get("format") == WORKBENCH_FORMAT


def open_workbench_cube(path: str | os.PathLike[str]) -> xr.Dataset | None:
    """The DescriptorWorkbench cube in ``path`` (read into memory), or None when the file is
    something else (a QueryCube, or not a netCDF file: :func:`metricalc.cube.open_cube` then
    says what is wrong with it).

    Raises
    ------
    InvalidInputError
        A file marked as a DescriptorWorkbench cube that lacks one of its scene variables.
    """
    if qc.io.hdf5_error(path) is not None:  # not HDF5: open_cube says what is wrong with it
        return None
    try:
        with xr.open_dataset(Path(path), engine="h5netcdf") as data:
            if not is_workbench_cube(data):
                return None
            cube = data.load()
    except qc.READ_ERRORS:  # not a netCDF file: open_cube says what is wrong with it
        return None
    missing = [
        name
        for name in _SCENE_VARIABLES
        if name not in cube.data_vars or cube[name].dims != ("descriptor", "scene")
    ]
    if missing:
        raise InvalidInputError(
            f"cube file {path} is a DescriptorWorkbench cube without {missing} over "
            "(descriptor, scene); write it again with `metricalc db import-workbench --out`"
        )
    return cube


def _scene_arrays(cube: xr.Dataset) -> tuple[xr.DataArray, ...]:
    m = cube["true_map"].astype(np.float64)
    z = cube["true_map_with_zeros"].astype(np.float64)
    q = cube["query_count"].astype(np.float64)
    e = cube["excluded_count"].astype(np.float64)
    return m, z, q, e


def _mean(values: xr.DataArray, keep: xr.DataArray) -> xr.DataArray:
    return values.where(keep).mean("scene", skipna=True)


def _ratio(numerator: xr.DataArray, denominator: xr.DataArray) -> xr.DataArray:
    return numerator / denominator.where(denominator > 0)


def workbench_metric_set(cube: xr.Dataset, k: Sequence[int] = (1, 5, 10)) -> xr.Dataset:
    """The metric-set values a DescriptorWorkbench cube determines, over ``descriptor``.

    Parameters
    ----------
    cube : xarray.Dataset
        From :func:`open_workbench_cube` (or ``WorkbenchExport.cube``).
    k : sequence of int
        Cut-offs of the hit rates ``hit_rate_at_K``, each kept where the export has it
        (:data:`HIT_RATES`; others are not in an export and are left out).

    Returns
    -------
    xarray.Dataset
        ``true_map_micro``, ``true_map_macro_by_scene``, their ``_including_zeros`` variants,
        ``viewpoint_map``, ``illumination_map`` (means over scenes), ``viewpoint_map_micro``,
        ``illumination_map_micro``, ``hit_rate_at_K``, ``total_queries_processed``,
        ``total_queries_excluded`` (int64) and ``status``; NaN where a row has no scene with a
        query. The formulas are in the module docstring.

    Examples
    --------
    >>> import xarray as xr
    >>> two = ("descriptor", "scene")
    >>> cube = xr.Dataset(
    ...     {"true_map": (two, [[0.5, 0.6]]), "true_map_with_zeros": (two, [[0.5, 0.3]]),
    ...      "query_count": (two, [[10, 5]]), "excluded_count": (two, [[0, 5]]),
    ...      "status": ("descriptor", ["ok"])},
    ...     coords={"descriptor": ["sift"], "scene": ["i_a", "v_b"]})
    >>> m = workbench_metric_set(cube)
    >>> [round(float(m[n][0]), 4) for n in ("true_map_micro", "true_map_macro_by_scene",
    ...                                     "true_map_micro_including_zeros", "viewpoint_map")]
    [0.5333, 0.55, 0.4, 0.6]
    """
    m, z, q, e = _scene_arrays(cube)
    keep = (q > 0) & np.isfinite(m)
    ap_sum = (m * q).where(keep, 0.0)
    out = {
        "true_map_micro": _ratio(ap_sum.sum("scene"), q.sum("scene")),
        "true_map_macro_by_scene": _mean(m, keep),
        "true_map_micro_including_zeros": _ratio(ap_sum.sum("scene"), (q + e).sum("scene")),
        "true_map_macro_by_scene_including_zeros": _mean(z, keep),
    }
    scenes = np.asarray(cube["scene"].values, dtype=str)
    for split, letter in SPLIT_LETTERS:
        part = xr.DataArray(np.char.startswith(scenes, letter), dims="scene")
        out[f"{split}_map"] = _mean(m, keep & part)
        out[f"{split}_map_micro"] = _ratio(
            ap_sum.where(part, 0.0).sum("scene"), q.where(part, 0.0).sum("scene")
        )
    for cutoff in k:
        name = f"hit_rate_at_{int(cutoff)}"
        if int(cutoff) in HIT_RATES and name in cube.data_vars:
            out[name] = cube[name].astype(np.float64)
    out["total_queries_processed"] = cube["query_count"].sum("scene").astype(np.int64)
    out["total_queries_excluded"] = cube["excluded_count"].sum("scene").astype(np.int64)
    metrics = xr.Dataset(out).drop_vars(
        [c for c in out["true_map_micro"].coords if c != "descriptor"]
    )
    status = cube["status"] if "status" in cube.data_vars else None
    if status is not None:
        metrics["status"] = status.drop_vars([c for c in status.coords if c != "descriptor"])
    metrics.attrs = {"dataset": str(cube.attrs.get("source", "")), "format": WORKBENCH_FORMAT}
    return metrics


def scene_query_cube(cube: xr.Dataset, *, metric: str = "true_map") -> xr.Dataset:
    """A QueryCube with one query per scene whose ``ap`` is the row's ``metric`` of the scene
    (``true_map`` or ``true_map_with_zeros``; NaN where the row has no R = 1 query there), for
    :func:`metricalc.stats.compare` with ``pair_by="scene"``: the unit value of a scene is then
    exactly the export's per-scene mAP. A row of status ``error`` (``success=false``) has status
    ``error`` (compare leaves it out); a ``mismatch`` row keeps its scenes, the export's own.
    The cube's ``tie_policy`` is ``"workbench"`` and its ``dataset`` the export's file.

    Raises
    ------
    InvalidInputError
        ``metric`` is not one of the two per-scene mAPs.
    """
    if metric not in ("true_map", "true_map_with_zeros"):
        raise InvalidInputError(
            f"a DescriptorWorkbench cube has one mAP per scene: metric must be 'ap' (its "
            f"true_map) or true_map_with_zeros; got {metric!r}"
        )
    values = cube[metric].astype(np.float64).where(cube["query_count"] > 0)
    scenes = [str(s) for s in cube["scene"].values.tolist()]
    status = (
        np.asarray(cube["status"].values, dtype=str)
        if "status" in cube.data_vars
        else np.full(cube.sizes["descriptor"], "ok")
    )
    failed = status == "error"
    attrs: dict[str, Any] = {
        **qc.DEFAULT_ATTRS,
        "tie_policy": "workbench",
        "dataset": str(cube.attrs.get("source", "")),
    }
    return qc.new_cube(
        [str(d) for d in cube["descriptor"].values.tolist()],
        {
            "scene": scenes,
            "pair": [""] * len(scenes),
            "keypoint_set": ["scene"] * len(scenes),
            "query_keypoint": np.zeros(len(scenes), np.int64),
        },
        {"ap": values.values},
        attrs=attrs,
        per_descriptor={
            "status": np.where(failed, "error", "ok"),
            "error": np.where(failed, "DescriptorWorkbench reported success=false", ""),
        },
    )
