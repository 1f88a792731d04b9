"""The trec_eval measures of a retrieval cube, averaged over its queries for the metric set."""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["retrieval_means"]


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
