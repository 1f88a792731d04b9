"""The Bojanic et al. keypoint verification and retrieval aggregates of the metric set.

The cube holds one value per ``(descriptor, sequence)`` for each Bojanic task
(:mod:`metricalc.keypoints.bojanic`); the metric set takes their means over all scenes and over
the viewpoint (``v_*``) and illumination (``i_*``) scenes, and sums the retrieval label counts.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.metrics.reductions import nanmean

__all__ = ["BOJANIC_COUNTS", "BOJANIC_METRICS", "bojanic_means"]

BOJANIC_METRICS = (
    "keypoint_verification_ap",
    "verification_viewpoint_ap",
    "verification_illumination_ap",
    "keypoint_retrieval_ap",
    "retrieval_viewpoint_ap",
    "retrieval_illumination_ap",
    "keypoint_verification_ap_per_keypoint",
    "verification_viewpoint_ap_per_keypoint",
    "verification_illumination_ap_per_keypoint",
    "keypoint_retrieval_ap_per_keypoint",
    "retrieval_viewpoint_ap_per_keypoint",
    "retrieval_illumination_ap_per_keypoint",
)
"""Bojanic et al. APs: means over the ``sequence`` dim of the cube (all, ``v_*``, ``i_*``).

The first six are DescriptorWorkbench's (``KeypointVerification.cpp``): means of the per-scene
APs of each scene's pooled list (cube variables ``verification_ap``, ``retrieval_ap``). The
``*_per_keypoint`` six are metricalc's decomposable variant: means of the per-scene means of
per-keypoint APs (``verification_ap_per_keypoint``, ``retrieval_ap_per_keypoint``).
:mod:`metricalc.keypoints.bojanic` defines both."""

BOJANIC_COUNTS = (
    "retrieval_num_true_positives",
    "retrieval_num_hard_negatives",
    "retrieval_num_distractors",
)
"""Bojanic et al. retrieval counts (DescriptorWorkbench's label counts of the pooled lists):
sums over the ``sequence`` dim."""

_BOJANIC_TASKS = (
    ("verification_ap", "keypoint_verification_ap", "verification", ""),
    ("retrieval_ap", "keypoint_retrieval_ap", "retrieval", ""),
    ("verification_ap_per_keypoint", "keypoint_verification_ap", "verification", "_per_keypoint"),
    ("retrieval_ap_per_keypoint", "keypoint_retrieval_ap", "retrieval", "_per_keypoint"),
)
"""Cube variable on ``(descriptor, sequence)``, the metric name of its mean over all scenes,
the prefix of its split means and the suffix of all three."""


def _without_bojanic(cube: xr.Dataset) -> dict[str, xr.DataArray]:
    """NaN for every Bojanic AP and 0 for every count, per descriptor of the cube."""
    coords = {"descriptor": cube["descriptor"].values}
    nan = xr.DataArray(np.full(len(coords["descriptor"]), np.nan), dims="descriptor", coords=coords)
    zero = xr.zeros_like(nan, dtype=np.int64)
    return {**dict.fromkeys(BOJANIC_METRICS, nan), **dict.fromkeys(BOJANIC_COUNTS, zero)}


def bojanic_means(cube: xr.Dataset) -> dict[str, xr.DataArray]:
    r"""The Bojanic et al. aggregates: NaN APs and zero counts without a ``sequence`` dim.

    Each AP is the mean over scenes (all, names starting ``v_``, names starting ``i_``) of a
    per-scene value, NaN scenes skipped (DescriptorWorkbench skips scenes without candidates;
    its AP of a scene with candidates but no correspondence is 0 and counts):

    .. math::

        \mathrm{keypoint\_verification\_ap} = \frac{1}{|S|} \sum_{s \in S} AP^{pool}_s

    with :math:`S` the scenes whose ``verification_ap`` is not NaN. An empty mean is NaN where
    DescriptorWorkbench writes 0.0. The counts sum the scenes that have them (-1: none). Without
    a ``sequence`` dim, or with one (from the image retrieval) but none of the Bojanic
    variables, the APs are NaN and the counts 0; Bojanic variables at their sentinels (Bojanic
    tasks off) give the same.
    """
    needed = [task for task, *_ in _BOJANIC_TASKS] + list(BOJANIC_COUNTS)
    missing = [v for v in needed if v not in cube.data_vars]
    if "sequence" not in cube.dims or len(missing) == len(needed):
        return _without_bojanic(cube)
    if missing:
        raise InvalidInputError(
            f"metric_set: the cube has a 'sequence' dim but lacks {missing}; expected the "
            "Bojanic variables of the QueryCube schema"
        )
    names = np.asarray(cube["sequence"].values).astype(str)
    split = {
        part: xr.DataArray(
            np.char.startswith(names, prefix), dims="sequence", coords={"sequence": names}
        )
        for part, prefix in (("viewpoint", "v_"), ("illumination", "i_"))
    }
    out: dict[str, xr.DataArray] = {}
    for task, overall, prefix, suffix in _BOJANIC_TASKS:
        values = cube[task].assign_coords(sequence=names)
        out[overall + suffix] = nanmean(values, "sequence")
        for part, mask in split.items():
            out[f"{prefix}_{part}_ap{suffix}"] = nanmean(values.where(mask), "sequence")
    for name in BOJANIC_COUNTS:
        out[name] = cube[name].where(cube[name] >= 0, 0).sum("sequence").astype(np.int64)
    return out
