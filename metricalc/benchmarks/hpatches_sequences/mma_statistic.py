r"""D2-Net's mean matching accuracy (MMA) of keypoint cubes as a statistic of image pairs.

``MMA(t)`` is the mean over image pairs of each pair's share of mutual nearest-neighbour
matches within :math:`t` pixels (:func:`metricalc.metrics.matching_accuracy`; a pair without a
match counts 0). Under a cluster resample pair :math:`p` counts :math:`w_p` times,
:math:`\mathrm{MMA}_w(t) = \sum_p w_p \operatorname{acc}_p(t) / \sum_p w_p`, and the
comparison resamples and swaps whole **scenes** (sequences) by default, as every HPatches
comparison does (docs/stats.md, "The contract").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.metrics.matching import pair_matching_accuracy
from metricalc.stats.pair_records import compare_columns, pair_clusters
from metricalc.stats.statistics import UnitStatistic, weighted_mean

__all__ = ["compare_mma", "mma_records", "mma_statistic", "mma_threshold"]


def mma_threshold(metric: str) -> float | None:
    """The pixel threshold of ``--metric mma@T`` (``MMA@T`` too), None for any other name.

    Examples
    --------
    >>> mma_threshold("mma@3"), mma_threshold("MMA@1.5"), mma_threshold("ap")
    (3.0, 1.5, None)
    """
    found = re.fullmatch(r"mma@([0-9]+(?:\.[0-9]+)?)", metric.strip().lower())
    return float(found.group(1)) if found else None


def mma_records(cubes: Mapping[str, xr.Dataset], threshold: float) -> xr.DataArray:
    """Every system's per-pair accuracy at ``threshold`` over (``descriptor``, ``pair``), the
    pairs of all cubes (NaN where a system lacks the pair).

    ``cubes`` maps a label to a cube; with one cube the systems are its descriptors, with
    several ``"<descriptor> (<label>)"``, as :func:`metricalc.stats.compare` names them.
    """
    parts = []
    for label, cube in cubes.items():
        accuracy = pair_matching_accuracy(cube, threshold)
        if len(cubes) > 1:
            names = [f"{d} ({label})" for d in accuracy["descriptor"].values]
            accuracy = accuracy.assign_coords(descriptor=names)
        parts.append(accuracy)
    records = xr.concat(parts, dim="descriptor", join="outer") if len(parts) > 1 else parts[0]
    if records.sizes["pair"] == 0:
        raise InvalidInputError("the cubes have no image pair with queries: no MMA to compare")
    return records


def mma_statistic(records: xr.DataArray, threshold: float, *, pair_by: str) -> UnitStatistic:
    """The MMA at ``threshold`` of the systems of :func:`mma_records` as a statistic of their
    image pairs, clustered by scene (``pair_by="scene"``) or not (``"pair"``).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> r = xr.DataArray([[1.0, 0.0, 0.5]], dims=("descriptor", "pair"),
    ...                  coords={"descriptor": ["sift"], "pair": ["a/1-2", "a/1-3", "b/1-2"],
    ...                          "scene": ("pair", ["a", "a", "b"])})
    >>> stat = mma_statistic(r, 3.0, pair_by="scene")
    >>> stat.weighted(0, np.array([[1.0, 1.0], [0.0, 2.0]])).tolist()   # clusters: a, b
    [0.5, 0.5]
    """
    clusters, codes = pair_clusters(records["pair"].values, records["scene"].values, pair_by)
    systems = [str(name) for name in records["descriptor"].values]
    name = f"mma@{threshold:g}"
    phrase = f"D2-Net's mean matching accuracy at {threshold:g} px over the image pairs"
    values = np.asarray(records.transpose("descriptor", "pair").values, dtype=np.float64)
    return UnitStatistic(name, phrase, systems, clusters, values, codes, weighted_mean)


def compare_mma(
    cubes: Mapping[str, xr.Dataset], threshold: float, *, pair_by: str = "scene", **options: Any
) -> xr.Dataset:
    """Every pair of systems (or each against ``baseline``) on the MMA at ``threshold``: the
    difference, its paired cluster-bootstrap CI and the within-cluster swap test.

    ``options`` are the keywords of :func:`metricalc.stats.compare.compare_statistic`
    (``baseline``, ``correction``, ``alpha``, ``seed``, ``n_resamples``,
    ``confidence_level``).
    """
    records = mma_records(cubes, threshold)
    name = f"mma@{threshold:g}"
    compared = compare_columns(
        lambda _: mma_statistic(records, threshold, pair_by=pair_by), [name],
        pairs=np.asarray(records["pair"].values), scenes=np.asarray(records["scene"].values),
        pair_by=pair_by, **options,
    )  # fmt: skip
    return compared[name]
