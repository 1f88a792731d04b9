r"""hpatches-benchmark's matching average as a statistic of sequences (for its tests).

The metric-set column ``hpatches17_matching_map`` (:func:`metricalc.metrics.retrieval.
hpatches17_means`, ``DescriptorMatchingResult.avg`` of hpatches-benchmark's
``python/utils/results.py``) is, with :math:`\text{mAP}_{s,l}` the mean AP of sequence
:math:`s` over its image pairs at level :math:`l` and :math:`S_t` the sequences of type
:math:`t` (``i_*``, ``v_*``),

.. math::

    \text{mAP} = \frac{1}{2} \sum_{t \in \{i, v\}} \frac{1}{3} \sum_{l}
    \frac{\sum_{s \in S_t} \text{mAP}_{s,l}}{|S_t|},

a weighted sum of six ratios of sequence sums: a
:class:`~metricalc.stats.statistics.RatioStatistic` with one group per (type, level), numerator
:math:`a_{s,g} = \text{mAP}_{s,l}` for the sequences of the group's type (0 for the others),
denominator :math:`b_{s,g} = 1` where the sequence has a value, and group weights
:math:`1/6`. Its clusters are the sequences, so the paired cluster bootstrap and the swap test
of :mod:`metricalc.stats.clustered` resample and swap whole sequences (docs/stats.md); a
resample that draws no sequence of one type has no value (NaN) and is left out of the interval,
as the reference has none for a split with one type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.hpatches import CVPR17_LEVELS
from metricalc.stats.statistics import RatioStatistic
from metricalc.stats.units import cube_parts, merged_protocol, split_values, system_label

__all__ = ["GROUPS", "matching_statistic"]

GROUPS: tuple[tuple[str, str], ...] = tuple(
    (kind, level) for kind in ("i", "v") for level in CVPR17_LEVELS.values()
)
"""(sequence type, level) of the six groups, in the order of the statistic's last axis."""


def _sequence_means(values: xr.DataArray) -> pd.DataFrame:
    """(system; sequence x group) the mean AP of each sequence at each level, NaN where none."""
    scene = np.asarray(values["scene"].values).astype(str)
    level = np.asarray(values["keypoint_set"].values).astype(str)
    kind = np.array([s.partition("_")[0] for s in scene])
    frame = pd.DataFrame(np.asarray(values.values, dtype=np.float64).T)
    means = frame.groupby([scene, kind, level]).mean()  # NaN values skipped, as the reference
    means.index.names = ["sequence", "kind", "level"]
    return means


def matching_statistic(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
) -> tuple[RatioStatistic, dict[str, Any]]:
    """The matching average of every system of HPatches CVPR'17 matching cube(s) as a
    statistic of their sequences (module docstring), and the comparison's attrs (the protocol).

    Examples
    --------
    >>> from metricalc.benchmarks.hpatches_cvpr17.cube import matching_cube
    >>> aps = {(s, lv, 1): a for s, a in (("i_a", 0.2), ("v_b", 0.6), ("v_c", 0.4))
    ...        for lv in "eht"}
    >>> stat, _ = matching_statistic(matching_cube(aps, descriptor="d", split="x"))
    >>> round(float(stat.weighted(0, np.ones((1, 3)))[0]), 4)   # (0.2 + (0.6 + 0.4) / 2) / 2
    0.35
    """
    parts = cube_parts(cube)
    frames, systems = [], []
    for label, one in parts.items():
        if one.attrs.get("benchmark") != "hpatches-cvpr17" or one.attrs.get("task") != "matching":
            where = "the cube" if label is None else f"cube {label!r}"
            raise InvalidInputError(
                f"{where} is not an HPatches CVPR'17 matching cube (patches hpatches-eval --out "
                "PREFIX writes PREFIX.matching.nc): the matching average needs one"
            )
        values, _ = split_values(one, "ap", None, label)
        frames.append(_sequence_means(values))
        systems += [system_label(str(d), label) for d in values["descriptor"].values.tolist()]
    means = pd.concat(frames, axis=1, join="outer")
    sequences = sorted(set(means.index.get_level_values("sequence")))
    numerator = np.zeros((len(systems), len(sequences), len(GROUPS)))
    denominator = np.zeros_like(numerator)
    rows = means.index.to_frame(index=False)
    c = np.searchsorted(sequences, rows["sequence"].to_numpy())
    g = np.array([GROUPS.index((k, lv)) if (k, lv) in GROUPS else -1
                  for k, lv in zip(rows["kind"], rows["level"], strict=True)])  # fmt: skip
    on = g >= 0
    sums = means.to_numpy().T[:, on]  # (systems, rows)
    present = np.isfinite(sums)
    numerator[:, c[on], g[on]] = np.where(present, sums, 0.0)
    denominator[:, c[on], g[on]] = present
    empty = [f"{k}_ {lv}" for (k, lv), n in zip(GROUPS, denominator.sum(axis=(0, 1)), strict=True)
             if n == 0]  # fmt: skip
    if empty:
        raise InvalidInputError(
            "the matching average weighs the i_ and v_ sequences at every level; the cubes have "
            f"no sequence of {', '.join(empty)} (a split of one type has no average)"
        )
    statistic = RatioStatistic(
        name="hpatches17_matching_map",
        phrase="mean over the sequence types of the mean over levels of the mean over "
        "sequences of their mean AP (hpatches-benchmark's matching average)",
        systems=systems,
        clusters=np.asarray(sequences),
        numerator=numerator,
        denominator=denominator,
        group_weights=np.full(len(GROUPS), 1 / len(GROUPS)),
    )
    return statistic, merged_protocol({str(k): v for k, v in parts.items()})


def compare_matching(cube: xr.Dataset | Mapping[str, xr.Dataset], **options: Any) -> xr.Dataset:
    """The systems of matching cube(s) compared on the matching average over sequences:
    :func:`metricalc.stats.compare.compare_statistic` of :func:`matching_statistic`
    (``options``: its keyword arguments but ``pair_by`` and ``attrs``)."""
    from metricalc.stats.compare import compare_statistic

    statistic, attrs = matching_statistic(cube)
    return compare_statistic(statistic, pair_by="sequence", attrs=attrs, **options)
