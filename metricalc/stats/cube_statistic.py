"""The table statistic of a QueryCube metric, as cluster sums (:class:`RatioStatistic`).

A keypoint cube holds one value per query; its table cells are means at one of three levels
(``mean_over``), and its independent clusters are scenes, image pairs or queries (``pair_by``,
at least as coarse as the level; see docs/stats.md):

=============  ======================================================  =====================
``mean_over``  statistic of system :math:`s`                           cube metric-set column
=============  ======================================================  =====================
``query``      :math:`\\sum_q v_{s,q} / |Q_s|` (pooled over queries)    ``true_map_micro``
``pair``       mean over image pairs of the pair's mean                 ``mean_precision``
``scene``      mean over scenes of the scene's mean                     ``true_map_macro_by_scene``,
                                                                        ``viewpoint_map``
=============  ======================================================  =====================

Each is a ratio of cluster sums: with cluster :math:`c` holding the level units :math:`u`
(queries, pairs or scenes) and :math:`\\bar v_{s,u}` their means, numerator
:math:`a_{s,c} = \\sum_{u \\in c} \\bar v_{s,u}` and denominator :math:`b_{s,c}` = the number of
units of :math:`c` where :math:`s` has a value. Everything is computed from per-image-pair sums
and counts (:func:`metricalc.metrics.reductions.group_sum`), so a lazy cube is read once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.metrics.reductions import PAIR_UNIT, group_sum, partition, prepare_cube
from metricalc.stats.statistics import RatioStatistic
from metricalc.stats.units import cube_parts, merged_protocol, split_values, system_label

__all__ = ["LEVELS", "LEVEL_PHRASES", "cube_statistic"]

LEVELS = ("query", "pair", "scene")
"""Levels of a mean, from finest to coarsest (also the cluster levels of ``pair_by``)."""

LEVEL_PHRASES = {
    "query": "mean over queries",
    "pair": "mean over image pairs of the pair means",
    "scene": "mean over scenes of the scene means",
}
"""What the statistic of each ``mean_over`` level is, in words."""


def _pair_sums(values: xr.DataArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sums and counts of the defined values per (system, image pair); scene and pair labels."""
    coded, _ = prepare_cube(values.to_dataset(name="_values"), ["_values"], "compare")
    v = coded["_values"]
    sums = group_sum(v.fillna(0), PAIR_UNIT).compute()
    counts = group_sum(v.notnull(), PAIR_UNIT).compute()
    labels = np.asarray(sums[PAIR_UNIT].values).astype(str)
    scene, _, pair = partition(labels, "/")
    return (
        np.asarray(sums.values, dtype=np.float64),
        np.asarray(counts.values, dtype=np.float64),
        scene,
        pair,
    )


def _level_sums(
    sums: np.ndarray, counts: np.ndarray, scene: np.ndarray, pair: np.ndarray, mean_over: str,
    pair_by: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(systems, clusters) numerators and denominators of the statistic, and the cluster labels
    (``scene`` or ``scene/pair``), from the per-pair sums and counts."""
    pair_keys = np.char.add(np.char.add(scene, "/"), pair)
    if mean_over == "query":
        unit_num, unit_den = sums, counts
    elif mean_over == "pair":
        with np.errstate(divide="ignore", invalid="ignore"):
            unit_num = np.where(counts > 0, sums / counts, 0.0)
        unit_den = (counts > 0).astype(np.float64)
    else:  # scene means: one unit per scene, whatever the cluster (a cluster is then a scene)
        codes, scenes = pd.factorize(scene, sort=True)
        scene_sums = np.zeros((len(sums), len(scenes)))
        scene_counts = np.zeros((len(sums), len(scenes)))
        np.add.at(scene_sums.T, codes, sums.T)
        np.add.at(scene_counts.T, codes, counts.T)
        with np.errstate(divide="ignore", invalid="ignore"):
            num = np.where(scene_counts > 0, scene_sums / scene_counts, 0.0)
        return num, (scene_counts > 0).astype(np.float64), np.asarray(scenes).astype(str)
    keys = scene if pair_by == "scene" else pair_keys
    codes, clusters = pd.factorize(keys, sort=True)
    num = np.zeros((len(sums), len(clusters)))
    den = np.zeros((len(sums), len(clusters)))
    np.add.at(num.T, codes, unit_num.T)
    np.add.at(den.T, codes, unit_den.T)
    return num, den, np.asarray(clusters).astype(str)


def cube_statistic(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
    *,
    metric: str,
    mean_over: str,
    pair_by: str,
    split: str | None = None,
) -> tuple[RatioStatistic, dict[str, Any]]:
    """The table statistic of ``metric`` for every system of the cube(s), clustered by
    ``pair_by``, and the comparison's attrs (``excluded_descriptors`` and the protocol).

    Parameters
    ----------
    cube : QueryCube or mapping of label -> QueryCube
        As :func:`metricalc.stats.unit_values` (systems ``"<descriptor> (<label>)"`` for a
        mapping; failed descriptors left out).
    metric : str
        A numeric (descriptor, query) variable, ``"hit@K"`` or ``"precision@K"``
        (:func:`metricalc.stats.metric_values`).
    mean_over : {"query", "pair", "scene"}
        The level of the mean (see the module docstring).
    pair_by : {"pair", "scene"}
        The clusters; at least as coarse as ``mean_over``.
    split : {"viewpoint", "illumination"}, optional
        Only the queries of that split.

    Returns
    -------
    (RatioStatistic, dict)

    Examples
    --------
    >>> from metricalc import cube as qc
    >>> from metricalc.stats.cube_statistic import cube_statistic
    >>> c = qc.new_cube(["sift", "orb"],
    ...                 {"scene": ["i_a", "i_a", "v_b"], "pair": ["1-2", "1-3", "1-2"],
    ...                  "keypoint_set": ["sift"] * 3, "query_keypoint": [0, 0, 0]},
    ...                 {"ap": [[1.0, 0.5, 0.2], [0.5, 0.5, 0.1]]}, attrs=qc.DEFAULT_ATTRS)
    >>> stat, _ = cube_statistic(c, metric="ap", mean_over="query", pair_by="scene")
    >>> stat.clusters.tolist(), stat.numerator[..., 0].tolist(), stat.denominator[..., 0].tolist()
    (['i_a', 'v_b'], [[1.5, 0.2], [1.0, 0.1]], [[2.0, 1.0], [2.0, 1.0]])
    """
    if LEVELS.index(pair_by) < LEVELS.index(mean_over):
        raise InvalidInputError(
            f"a mean over {mean_over}s cannot be resampled by {pair_by}: pair_by must be at "
            f"least as coarse as mean_over (pair_by={mean_over!r} or coarser)"
        )
    parts = cube_parts(cube)
    nums, dens, systems, excluded = [], [], [], []
    for label, one in parts.items():
        values, failed = split_values(one, metric, split, label)
        sums, counts, scene, pair = _pair_sums(values)
        num, den, clusters = _level_sums(sums, counts, scene, pair, mean_over, pair_by)
        nums.append(pd.DataFrame(num.T, index=clusters))
        dens.append(pd.DataFrame(den.T, index=clusters))
        names = [str(d) for d in values[qc.DESCRIPTOR].values.tolist()]
        systems += [system_label(d, label) for d in names]
        excluded += [system_label(d, label) for d in failed]
    if not systems:
        raise InvalidInputError(
            f"no system to compare: every descriptor failed (status 'error': {', '.join(excluded)})"
        )
    numerator = pd.concat(nums, axis=1, join="outer").fillna(0.0).sort_index()
    denominator = pd.concat(dens, axis=1, join="outer").fillna(0.0).sort_index()
    if not (denominator.to_numpy() > 0).any():
        raise InvalidInputError(
            f"metric {metric!r} has no value in the cube"
            + (f" for the {split} queries" if split else "")
            + " (every value is NaN or the -1 sentinel)"
        )
    phrase = LEVEL_PHRASES[mean_over] + (f" ({split} scenes)" if split else "")
    statistic = RatioStatistic(
        name=metric,
        phrase=phrase,
        systems=systems,
        clusters=np.asarray(numerator.index).astype(str),
        numerator=numerator.to_numpy().T[:, :, None],
        denominator=denominator.to_numpy().T[:, :, None],
    )
    attrs = {
        "excluded_descriptors": excluded,
        **merged_protocol({str(k): v for k, v in parts.items()}),
    }
    return statistic, attrs
