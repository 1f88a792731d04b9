"""Table statistics of per-unit records, computable under cluster resampling and cluster swaps.

A table cell is a *statistic of units* (queries, image pairs, images, topics ...) of one
system, and the units fall into *clusters* (scenes, sequences, topics, images) that are the
independent samples: see docs/stats.md. Inference about a cell needs the statistic under two
operations on the clusters, and every statistic here provides both for all resamples at once
(NumPy, no Python loop per resample):

- **weights**: a bootstrap resample is a vector :math:`w \\in \\mathbb{N}^C` of cluster
  multiplicities; the statistic of the resampled data set is the statistic with every unit of
  cluster :math:`c` counted :math:`w_c` times (:meth:`ClusteredStatistic.weighted`);
- **swaps**: the randomization test exchanges the two systems' records inside a set of clusters
  (:meth:`ClusteredStatistic.swapped_difference`).

:class:`RatioStatistic` covers every statistic that is a (weighted sum of) ratio(s) of
cluster sums, which is what a mean is: the mean over queries (pooled, "micro"), the mean over
scenes of scene means ("macro"), the mean over image pairs of pair means, a pooled rate, the
hpatches-benchmark average of level means. :class:`UnitStatistic` takes any function of
weighted unit values (the AUC of an error distribution, mAA). A domain with richer records
(COCO detections) implements the same methods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from metricalc.errors import InvalidInputError

__all__ = [
    "CHUNK_ELEMENTS",
    "ClusteredStatistic",
    "RatioStatistic",
    "UnitStatistic",
    "weighted_mean",
]

CHUNK_ELEMENTS = 1 << 22
"""Resamples x units handled at once by :class:`UnitStatistic` (bounded memory)."""


class ClusteredStatistic(Protocol):
    """What :mod:`metricalc.stats.clustered` needs of a statistic of several systems.

    ``systems`` names the systems (rows), ``clusters`` the cluster labels (columns of the
    weights); ``name`` is the column's short name and ``phrase`` says in words what the
    statistic is (``"mean over scenes of the scene mean AP"``).
    """

    name: str
    phrase: str
    systems: list[str]
    clusters: np.ndarray

    def present(self) -> np.ndarray:
        """(systems, clusters) bool: the system has a value in the cluster."""
        ...

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        """The statistic of ``system`` for cluster weights (R, C): (R,), NaN where undefined."""
        ...

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        """Statistic of ``first`` minus that of ``second`` over the kept clusters (C,) when the
        two systems' records are exchanged in the clusters where ``swap`` (M, C) is True: (M,)."""
        ...

    def cluster_values(self) -> np.ndarray:
        """(systems, clusters): the statistic within each cluster alone (NaN where absent)."""
        ...


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(denominator > 0, numerator / denominator, np.nan)
    return out


@dataclass
class RatioStatistic:
    """A weighted sum of ratios of cluster sums.

    With :math:`a_{s,c,g}`, :math:`b_{s,c,g}` the numerator and denominator sums of system
    :math:`s` in cluster :math:`c` for group :math:`g` (one group for a plain mean) and the
    group weights :math:`\\gamma_g`,

    .. math::

        T_s(w) = \\sum_g \\gamma_g \\,
        \\frac{\\sum_c w_c \\, a_{s,c,g}}{\\sum_c w_c \\, b_{s,c,g}} .

    With :math:`a` the sum of the unit values and :math:`b` their count this is the mean over
    units (pooled); with :math:`a` the cluster's mean and :math:`b = 1` the mean of cluster
    means. Undefined (NaN) where a group's denominator is 0.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.statistics import RatioStatistic
    >>> # two scenes: system 0 has APs [1, 0.5] in scene 0 and [0.2] in scene 1
    >>> stat = RatioStatistic("mAP", "mean AP over queries", ["a"], np.array(["s0", "s1"]),
    ...                       np.array([[[1.5], [0.2]]]), np.array([[[2.0], [1.0]]]))
    >>> stat.weighted(0, np.array([[1.0, 1.0], [2.0, 0.0]])).round(4).tolist()
    [0.5667, 0.75]
    """

    name: str
    phrase: str
    systems: list[str]
    clusters: np.ndarray
    numerator: np.ndarray
    denominator: np.ndarray
    group_weights: np.ndarray = field(default_factory=lambda: np.ones(1))

    def __post_init__(self) -> None:
        self.numerator = np.asarray(self.numerator, dtype=np.float64)
        self.denominator = np.asarray(self.denominator, dtype=np.float64)
        self.group_weights = np.asarray(self.group_weights, dtype=np.float64)
        shape = (len(self.systems), len(self.clusters), len(self.group_weights))
        if self.numerator.shape != shape or self.denominator.shape != shape:
            raise InvalidInputError(
                f"{self.name}: cluster sums must have the shape (systems, clusters, groups) = "
                f"{shape}; got {self.numerator.shape} and {self.denominator.shape}"
            )

    def present(self) -> np.ndarray:
        return np.asarray((self.denominator > 0).any(axis=2))

    def _combine(self, numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
        """sum_g gamma_g num_g / den_g over the last axis; NaN if a weighted group is empty."""
        ratios = _ratio(numerator, denominator)
        used = self.group_weights != 0
        out: np.ndarray = (np.where(used, ratios, 0.0) * self.group_weights).sum(axis=-1)
        return np.where(np.isnan(ratios[..., used]).any(axis=-1), np.nan, out)

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        return self._combine(weights @ self.numerator[system], weights @ self.denominator[system])

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        k = keep.astype(np.float64)[:, None]
        a_num, b_num = self.numerator[first] * k, self.numerator[second] * k
        a_den, b_den = self.denominator[first] * k, self.denominator[second] * k
        s = swap.astype(np.float64)
        moved_num, moved_den = s @ (b_num - a_num), s @ (b_den - a_den)
        first_value = self._combine(a_num.sum(0) + moved_num, a_den.sum(0) + moved_den)
        second_value = self._combine(b_num.sum(0) - moved_num, b_den.sum(0) - moved_den)
        out: np.ndarray = first_value - second_value
        return out

    def cluster_values(self) -> np.ndarray:
        return _ratio(self.numerator.sum(axis=2), self.denominator.sum(axis=2))


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:math:`\\sum_i w_i v_i / \\sum_i w_i` over the last axis (NaN where the weights sum to 0).

    Examples
    --------
    >>> import numpy as np
    >>> weighted_mean(np.array([1.0, 3.0]), np.array([[1.0, 1.0], [3.0, 1.0]])).tolist()
    [2.0, 1.5]
    """
    return _ratio((values * weights).sum(axis=-1), weights.sum(axis=-1))


@dataclass
class UnitStatistic:
    """Any statistic of weighted unit values: ``function(values, weights)`` over the last axis.

    ``values`` is (systems, units), NaN where a system has no value on a unit; ``unit_clusters``
    (units,) gives each unit's cluster index into ``clusters``. ``function`` takes values and
    weights broadcast to (..., units) (weight 0: the unit is left out; weight k: counted k
    times) and returns (...). A resample with cluster weights :math:`w` gives unit :math:`i`
    the weight :math:`w_{c(i)}`; a swap exchanges the two systems' values (and presence) on
    the units of the swapped clusters.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.statistics import UnitStatistic, weighted_mean
    >>> stat = UnitStatistic("acc", "mean accuracy", ["a", "b"], np.array(["s0", "s1"]),
    ...                      np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), np.array([0, 0, 1]),
    ...                      weighted_mean)
    >>> stat.weighted(0, np.array([[1.0, 1.0], [0.0, 2.0]])).tolist()
    [0.6666666666666666, 1.0]
    >>> stat.swapped_difference(0, 1, np.array([[True, False]]), np.array([True, True])).tolist()
    [-0.3333333333333333]
    """

    name: str
    phrase: str
    systems: list[str]
    clusters: np.ndarray
    values: np.ndarray
    unit_clusters: np.ndarray
    function: Callable[[np.ndarray, np.ndarray], np.ndarray]

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64)
        self.unit_clusters = np.asarray(self.unit_clusters, dtype=np.int64)
        if self.values.shape != (len(self.systems), len(self.unit_clusters)):
            raise InvalidInputError(
                f"{self.name}: values must have the shape (systems, units) = "
                f"{(len(self.systems), len(self.unit_clusters))}; got {self.values.shape}"
            )
        self._finite = np.isfinite(self.values)
        self._filled = np.where(self._finite, self.values, 0.0)

    def present(self) -> np.ndarray:
        out = np.zeros((len(self.systems), len(self.clusters)), dtype=bool)
        rows, units = np.nonzero(self._finite)
        out[rows, self.unit_clusters[units]] = True
        return out

    def _rows(self) -> int:
        """Resamples per chunk: :data:`CHUNK_ELEMENTS` unit weights at a time."""
        return max(1, CHUNK_ELEMENTS // max(1, int(self.values.shape[1])))

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        out = np.empty(len(weights))
        step = self._rows()
        for first in range(0, len(weights), step):
            unit_weights = weights[first : first + step][:, self.unit_clusters]
            unit_weights = unit_weights * self._finite[system]
            out[first : first + step] = self.function(self._filled[system], unit_weights)
        return out

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        kept = keep[self.unit_clusters].astype(np.float64)
        out = np.empty(len(swap))
        step = self._rows()
        for start in range(0, len(swap), step):
            exchanged = swap[start : start + step][:, self.unit_clusters]
            a_values = np.where(exchanged, self._filled[second], self._filled[first])
            b_values = np.where(exchanged, self._filled[first], self._filled[second])
            a_weights = np.where(exchanged, self._finite[second], self._finite[first]) * kept
            b_weights = np.where(exchanged, self._finite[first], self._finite[second]) * kept
            out[start : start + step] = self.function(a_values, a_weights) - self.function(
                b_values, b_weights
            )
        return out

    def cluster_values(self) -> np.ndarray:
        one_hot = np.eye(len(self.clusters))
        return np.stack([self.weighted(s, one_hot) for s in range(len(self.systems))])
