"""The means of a cube's own measures for the metric set: trec_eval's measures of a retrieval
cube, and the HPatches CVPR'17 matching mAP under the name its published numbers carry."""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["hpatches17_means", "retrieval_means"]


def retrieval_means(cube: xr.Dataset, ok: xr.DataArray) -> dict[str, xr.DataArray]:
    r"""The trec_eval measures of a retrieval cube (attr ``benchmark = "trec_eval"``,
    :func:`metricalc.retrieval.querycube.retrieval_cube`): per measure of the attr ``measures``
    the mean of its variable over the queries where the run has a value (``map``: ``ap``),

    .. math:: \bar m = \frac{1}{|Q_r|} \sum_{q \in Q_r} m_q,

    trec_eval's ``all`` (up to the order of the sum; counts such as ``num_ret``, whose ``all`` is a
    sum, are means here too). Empty for any other cube."""
    if str(cube.attrs.get("benchmark", "")) != "trec_eval":
        return {}
    out = {}
    for measure in str(cube.attrs.get("measures", "")).split():
        variable = "ap" if measure == "map" else measure  # retrieval.querycube.cube_variable
        if variable in cube.data_vars:
            out[measure] = cube[variable].mean("query", skipna=True).where(ok).astype(np.float64)
    return out


def hpatches17_means(cube: xr.Dataset, ok: xr.DataArray) -> dict[str, xr.DataArray]:
    r"""``hpatches17_matching_map`` of an HPatches CVPR'17 matching cube (attrs ``benchmark =
    "hpatches-cvpr17"``, ``task = "matching"``:
    :func:`metricalc.patches.cvpr17_cube.matching_cube`): the mean AP over its units (one per
    sequence, image pair and level),

    .. math:: \text{mAP} = \frac{1}{|U|} \sum_{u \in U} \text{AP}_u,

    hpatches-benchmark's matching mAP of the cube's split (its mean over the three levels, which
    have the same image pairs), the metric its published numbers carry
    (:mod:`metricalc.datasets.reported`). Empty for any other cube."""
    attrs = cube.attrs
    if str(attrs.get("benchmark", "")) != "hpatches-cvpr17" or attrs.get("task") != "matching":
        return {}
    mean = cube["ap"].mean("query", skipna=True).where(ok).astype(np.float64)
    return {"hpatches17_matching_map": mean}
