"""The means of a cube's own measures for the metric set: trec_eval's measures of a retrieval
cube, and the HPatches CVPR'17 matching mAP under the name its published numbers carry."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.hpatches import CVPR17_LEVELS
from metricalc.metrics.reductions import partition

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
    :func:`metricalc.benchmarks.hpatches_cvpr17.cube.matching_cube`): hpatches-benchmark's matching
    average,
    the number its published results carry (:mod:`metricalc.datasets.reported`;
    ``DescriptorMatchingResult.avg`` in its ``python/utils/results.py``). With
    :math:`\text{mAP}_{s,l}` the mean AP of sequence :math:`s` over its image pairs at level
    :math:`l`, and :math:`S_t` the sequences of type :math:`t` (``i_*``, ``v_*``):

    .. math::

        m_{t,l} = \frac{1}{|S_t|} \sum_{s \in S_t} \text{mAP}_{s,l}, \qquad
        \text{avg}_t = \frac{1}{3} \sum_{l \in \{e, h, t\}} m_{t,l}, \qquad
        \text{mAP} = \frac{\text{avg}_i + \text{avg}_v}{2}.

    The two types weigh the same whatever their numbers of sequences (57 and 59 on split
    ``full``), so this is not the mean over the cube's units (``true_map_micro``, the mean of the
    three levels hpatches-eval prints). NaN, as in the reference, when a type or a level has no
    sequence (e.g. split ``view``). Empty for any other cube."""
    attrs = cube.attrs
    if str(attrs.get("benchmark", "")) != "hpatches-cvpr17" or attrs.get("task") != "matching":
        return {}
    ap = np.asarray(cube["ap"].values, dtype=np.float64)  # (descriptor, unit)
    scene = np.asarray(cube["scene"].values).astype(str)
    level = np.asarray(cube["keypoint_set"].values).astype(str)
    kind = partition(scene, "_")[0]
    # every descriptor at once: a missing unit (NaN) is skipped by each mean, as if absent
    per_sequence = pd.DataFrame(ap.T).groupby([kind, scene, level]).mean()
    cells = per_sequence.groupby(level=[0, 2]).mean()  # (kind, level): mean over sequences
    levels = list(CVPR17_LEVELS.values())
    grid = cells.reindex(pd.MultiIndex.from_product([("i", "v"), levels]))  # NaN: no sequence
    averages = grid.to_numpy().reshape(2, len(levels), ap.shape[0]).mean(axis=1).mean(axis=0)
    value = xr.DataArray(averages, dims=("descriptor",), coords={"descriptor": cube.descriptor})
    return {"hpatches17_matching_map": value.where(ok)}

