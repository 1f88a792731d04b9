r"""Comparisons of table columns computed from per-image-pair records (pose, homography).

Two-view benchmarks record one value per system and image pair: a pose error, a homography
corner error. A column of their table is a statistic of those records (an AUC of the error
distribution, a mean average accuracy), and its comparison follows docs/stats.md, "The
contract": the clusters are the pairs' scenes (a pair without a scene is its own cluster) or,
on request, the pairs themselves, and every comparison is the paired cluster bootstrap and the
within-cluster swap test of the column's own statistic
(:func:`metricalc.stats.compare.compare_statistic`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.stats.clustered import intraclass_correlation
from metricalc.stats.compare import MIN_UNITS, compare_statistic
from metricalc.stats.statistics import ClusteredStatistic
from metricalc.validation import check_choice

__all__ = ["FAILED_ERROR", "RECORD_UNITS", "compare_columns", "pair_clusters"]

RECORD_UNITS: tuple[str, ...] = ("scene", "pair")
"""The independent units of a two-view comparison: scenes where the pairs give them, or pairs."""
FAILED_ERROR = 1e6
"""A failed estimate's error (:math:`\\infty`, a pose or corner error) in the records: beyond
every threshold, so every statistic is the same, and finite, so the records tell it from a
missing value (the Image Matching Benchmark's own stand-in)."""


def pair_clusters(
    pairs: np.ndarray, scenes: np.ndarray, pair_by: str
) -> tuple[np.ndarray, np.ndarray]:
    """Cluster labels and each pair's cluster index: its scene, or the pair itself where it has
    none (``""``) or where ``pair_by="pair"``.

    Examples
    --------
    >>> labels, codes = pair_clusters(np.array(["a/1", "a/2", "x"]), np.array(["a", "a", ""]),
    ...                               "scene")
    >>> labels.tolist(), codes.tolist()
    (['x', 'a'], [1, 1, 0])
    """
    check_choice("pair_by", pair_by, RECORD_UNITS)
    pairs = np.asarray(pairs).astype(str)
    scenes = np.asarray(scenes).astype(str) if pair_by == "scene" else np.full(len(pairs), "")
    own = scenes == ""
    keys = np.where(own, "pair " + pairs, "scene " + scenes)  # a scene named like a pair differs
    _, first, codes = np.unique(keys, return_index=True, return_inverse=True)
    return np.where(own, pairs, scenes)[first], codes


def compare_columns(
    statistic_of: Callable[[str], ClusteredStatistic],
    columns: Sequence[str],
    *,
    pairs: np.ndarray,
    scenes: np.ndarray,
    pair_by: str = "scene",
    **options: Any,
) -> dict[str, xr.Dataset]:
    """Every pair of systems (or every system against ``baseline``) on each column: the
    difference of the column's statistic ``statistic_of(column)``, its paired cluster-bootstrap
    CI and the within-cluster swap test; the comparisons of one column are one correction
    family. With ``pair_by="pair"`` where the pairs have scenes, ``icc`` and ``design_effect``
    show what ignoring the scenes costs (:func:`metricalc.stats.clustered.intraclass_correlation`
    of the per-pair differences).

    Parameters
    ----------
    statistic_of : callable
        Column name -> the column's :class:`~metricalc.stats.statistics.ClusteredStatistic`,
        whose clusters are those of :func:`pair_clusters` (``pairs``, ``scenes``, ``pair_by``)
        and whose :meth:`cluster_values` are per pair in that order when ``pair_by="pair"``.
    pairs, scenes : ndarray of str
        Each image pair's name and scene (``""``: none).
    **options
        The keywords of :func:`~metricalc.stats.compare.compare_statistic` (``baseline``,
        ``correction``, ``alpha``, ``seed``, ``n_resamples``, ``confidence_level``, ``attrs``).

    Returns
    -------
    dict of str -> xarray.Dataset
        Column name -> the comparisons (the variables of :func:`metricalc.stats.compare`).

    Raises
    ------
    InvalidInputError
        With ``pair_by="scene"``, fewer than ``MIN_UNITS`` clusters: no test generalises to new
        scenes from so few.
    """
    pairs = np.asarray(pairs).astype(str)
    scenes = np.asarray(scenes).astype(str)
    n_clusters = len(pair_clusters(pairs, scenes, pair_by)[0])
    if pair_by == "scene" and (scenes != "").any() and n_clusters < MIN_UNITS:
        raise InvalidInputError(
            f"{n_clusters} independent units (scenes, and pairs without one); a paired test "
            f"needs at least {MIN_UNITS}: with so few scenes no test "
            "generalises to new scenes. pair_by='pair' (--pair-by pair) tests over image pairs, "
            "ignoring that the pairs of one scene are correlated"
        )
    out = {}
    for column in columns:
        statistic = statistic_of(column)
        compared = compare_statistic(statistic, pair_by=pair_by, **options)
        if pair_by == "pair" and (scenes != "").any():
            _add_clustering(compared, statistic, pairs, scenes)
        out[column] = compared
    return out


def _add_clustering(
    compared: xr.Dataset, statistic: ClusteredStatistic, pairs: np.ndarray, scenes: np.ndarray
) -> None:
    """``icc``, ``design_effect`` of pair-level tests: the intraclass correlation within scenes
    of the per-pair differences (each pair's column alone), pairs without a scene alone."""
    order = np.argsort(pairs)  # the clusters are the pairs, sorted by name
    scene = scenes[order]
    labels = np.where(scene != "", "scene " + scene, "pair " + pairs[order])
    values = statistic.cluster_values()
    names = list(statistic.systems)
    for k, (descriptor, baseline) in enumerate(compared.get_index("comparison")):
        d = values[names.index(descriptor)] - values[names.index(baseline)]
        icc, deff = intraclass_correlation(d, labels)
        compared["icc"][k], compared["design_effect"][k] = icc, deff
