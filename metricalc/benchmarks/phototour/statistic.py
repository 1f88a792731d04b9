r"""FPR95 of patch pairs as a statistic of clustered pairs: comparisons of descriptors.

The records of ``patches fpr95 --out`` (:mod:`metricalc.benchmarks.phototour.records`) hold every
pair's distance under every descriptor, its label and its cluster (for PhotoTour pairs the 3D
point of its first patch). The table's number,
:func:`~metricalc.core.operating.fpr_at_recall` of the pairs ranked by increasing distance, is
recomputed exactly on resampled and swapped pairs
(:func:`~metricalc.core.weighted_operating.fpr_at_recall_sorted`: each descriptor's pairs are
sorted once, by distance and then file order, the point estimate's tie order), so the paired
cluster bootstrap and the within-cluster swap test of :mod:`metricalc.stats.clustered` are about
FPR95 itself. Lower is better: a negative difference favours the descriptor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.weighted_operating import (
    fpr_at_recall_leave_one_out,
    fpr_at_recall_sorted,
    tie_groups,
)
from metricalc.stats.clustered import intraclass_correlation
from metricalc.stats.compare import compare_statistic
from metricalc.stats.statistics import CHUNK_ELEMENTS
from metricalc.validation import check_choice

__all__ = ["PAIR_BY", "Fpr95Statistic", "compare_fpr95", "fpr95_statistic"]

PAIR_BY = ("cluster", "pair")
"""The independent units of an FPR95 comparison: the records' clusters (default; the 3D point of
a pair's first patch for PhotoTour pairs), or every pair alone."""


def _blocks(rows: int, width: int) -> Iterator[slice]:
    """Slices of ``rows`` holding at most :data:`CHUNK_ELEMENTS` elements of ``width``."""
    step = max(1, CHUNK_ELEMENTS // max(1, width))
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))


@dataclass
class Fpr95Statistic:
    r"""FPR at ``recall`` of the pairs (``variant`` of
    :func:`~metricalc.core.operating.fpr_at_recall`) for every descriptor.

    Implements :class:`metricalc.stats.statistics.ClusteredStatistic`: cluster weights
    :math:`w` count pair :math:`i` :math:`w_{c(i)}` times; a swap gives each descriptor the
    other's distances on the pairs of the swapped clusters (the two descriptors' pairs, sorted
    together once per comparison, each weighted 0 or 1).

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    >>> y, clusters = np.array([1, 0, 1, 0, 1, 0], dtype=bool), np.array([0, 0, 1, 1, 2, 2])
    >>> stat = Fpr95Statistic("fpr95", "FPR95", ["a"], np.array(["p", "q", "r"]), d, y, clusters,
    ...                       recall=0.5)
    >>> stat.weighted(0, np.array([[1, 1, 1], [2, 0, 1]])).round(4).tolist()  # 1 of 3; 0 of 3
    [0.3333, 0.0]
    """

    name: str
    phrase: str
    systems: list[str]
    clusters: np.ndarray
    distances: np.ndarray
    labels: np.ndarray
    pair_clusters: np.ndarray
    recall: float = 0.95
    variant: str = "hardnet"
    _sorted: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(init=False, repr=False)
    _together: dict[tuple[int, int], tuple[np.ndarray, ...]] = field(init=False, repr=False)
    _left_out: dict[int, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.distances = np.asarray(self.distances, dtype=np.float64)
        self.labels = np.asarray(self.labels, dtype=bool)
        self.pair_clusters = np.asarray(self.pair_clusters, dtype=np.int64)
        n = len(self.labels)
        self._sorted = []
        for row in self.distances:
            order = np.lexsort((np.arange(n), row))  # by distance, ties in file order
            self._sorted.append((order, self.labels[order], tie_groups(row[order])))
        self._together, self._left_out = {}, {}

    def _evaluate(
        self, labels: np.ndarray, weights: np.ndarray, groups: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return fpr_at_recall_sorted(
            labels, weights, groups, recall=self.recall, variant=self.variant
        )

    def present(self) -> np.ndarray:
        return np.ones((len(self.systems), len(self.clusters)), dtype=bool)

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        """The statistic for cluster weights (R, C); rows that leave exactly one cluster out
        of all (the jackknife) from one pass over the order (every variant but ``"sklearn"``:
        :func:`~metricalc.core.weighted_operating.fpr_at_recall_leave_one_out`)."""
        order, labels, groups = self._sorted[system]
        cluster_of = self.pair_clusters[order]
        out = np.empty(len(weights))
        zero = weights == 0  # one zero and C - 1 further counts summing to C - 1: all ones
        left_out = (zero.sum(axis=1) == 1) & (weights.sum(axis=1) == weights.shape[1] - 1)
        if self.variant != "sklearn" and left_out.any():
            if system not in self._left_out:  # once: the jackknife comes in blocks of rows
                self._left_out[system] = fpr_at_recall_leave_one_out(
                    labels, cluster_of, len(self.clusters), new_group=groups,
                    recall=self.recall, variant=self.variant,
                )  # fmt: skip
            out[left_out] = self._left_out[system][np.argmax(zero[left_out], axis=1)]
        else:
            left_out[:] = False
        rest = np.flatnonzero(~left_out)
        for block in _blocks(len(rest), len(order)):
            unit = np.rint(weights[rest[block]]).astype(np.int64)[:, cluster_of]
            out[rest[block]] = self._evaluate(labels, unit, groups)[0]
        return out

    def _both(self, first: int, second: int) -> tuple[np.ndarray, ...]:
        """The pairs of both descriptors sorted together: (which descriptor, cluster, labels,
        tie groups) of every record."""
        if (first, second) not in self._together:
            n = len(self.labels)
            distances = np.concatenate([self.distances[first], self.distances[second]])
            index = np.tile(np.arange(n), 2)
            order = np.lexsort((index, distances))
            self._together[first, second] = (
                order >= n, self.pair_clusters[index[order]], self.labels[index[order]],
                tie_groups(distances[order]),
            )  # fmt: skip
        return self._together[first, second]

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        from_second, cluster_of, labels, groups = self._both(first, second)
        kept = keep[cluster_of]
        out = np.empty(len(swap))
        for block in _blocks(len(swap), len(cluster_of)):
            exchanged = swap[block][:, cluster_of]
            mine = (exchanged == from_second) & kept  # first's records, or second's if swapped
            theirs = (exchanged != from_second) & kept
            a = self._evaluate(labels, mine.astype(np.int64), groups)[0]
            b = self._evaluate(labels, theirs.astype(np.int64), groups)[0]
            out[block] = a - b
        return out

    def cluster_values(self) -> np.ndarray:
        """FPR95 of each cluster's pairs alone, NaN where a cluster lacks a matching or a
        non-matching pair (the pairs of each cluster padded to one row)."""
        sizes = np.bincount(self.pair_clusters, minlength=len(self.clusters))
        width = int(sizes.max())
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        out = np.full((len(self.systems), len(self.clusters)), np.nan)
        for s, row in enumerate(self.distances):
            order = np.lexsort((np.arange(len(row)), row, self.pair_clusters))
            cluster = self.pair_clusters[order]
            column = np.arange(len(order)) - starts[cluster]
            shape = (len(self.clusters), width)
            weights, labels = np.zeros(shape, np.int64), np.zeros(shape, bool)
            padded = np.full(shape, np.inf)
            weights[cluster, column], labels[cluster, column] = 1, self.labels[order]
            padded[cluster, column] = row[order]
            for block in _blocks(len(self.clusters), width):
                out[s, block] = self._evaluate(
                    labels[block], weights[block], tie_groups(padded[block])
                )[0]
        return out

    def false_accepts(self, system: int) -> np.ndarray:
        """Per pair (file order): 1.0 for a non-matching pair accepted before the recall is
        reached (a false positive of the point estimate), 0.0 for one rejected, NaN for a
        matching pair; FPR95 (``"hardnet"``) is their mean."""
        order, labels, groups = self._sorted[system]
        stop = self._evaluate(labels, np.ones((1, len(order)), np.int64), groups)[1][0]
        accepted = np.empty(len(order))
        accepted[order] = np.arange(len(order)) <= stop
        return np.where(self.labels, np.nan, accepted)


def fpr95_statistic(records: xr.Dataset, *, pair_by: str = "cluster") -> Fpr95Statistic:
    """The FPR95 statistic of the descriptors of ``records``
    (:func:`metricalc.benchmarks.phototour.records.open_fpr95_records`), clustered by the records'
    ``cluster`` (``pair_by="cluster"``) or by pair.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> records = xr.Dataset({"distance": (("descriptor", "pair"), [[0.1, 0.4, 0.2, 0.3]])},
    ...                      coords={"descriptor": ["a"], "label": ("pair", [1, 0, 1, 0]),
    ...                              "cluster": ("pair", ["7", "7", "8", "9"])},
    ...                      attrs={"variant": "hardnet", "recall": 0.5})
    >>> stat = fpr95_statistic(records)
    >>> stat.clusters.tolist(), float(stat.weighted(0, np.ones((1, 3)))[0])
    (['7', '8', '9'], 0.0)
    """
    check_choice("pair_by", pair_by, PAIR_BY)
    n = records.sizes["pair"]
    if pair_by == "cluster":
        clusters, codes = np.unique(np.asarray(records["cluster"].values).astype(str),
                                    return_inverse=True)  # fmt: skip
    else:
        clusters, codes = np.array([f"line {i + 1}" for i in range(n)]), np.arange(n)
    recall, variant = float(records.attrs["recall"]), str(records.attrs["variant"])
    name = f"FDR{round(100 * recall)}" if variant == "matchnet" else f"FPR{round(100 * recall)}"
    rate = "false discovery rate" if variant == "matchnet" else "false positive rate"
    phrase = (f"{rate} at {100 * recall:g}% recall of the patch pairs ({variant}); lower is "
              "better")  # fmt: skip
    return Fpr95Statistic(
        name.lower(), phrase, [str(s) for s in records["descriptor"].values], clusters,
        records["distance"].transpose("descriptor", "pair").values,
        np.asarray(records["label"].values) == 1, codes, recall=recall, variant=variant,
    )  # fmt: skip


def compare_fpr95(
    records: xr.Dataset,
    *,
    pair_by: str = "cluster",
    **options: Any,
) -> xr.Dataset:
    r"""Every pair of descriptors (or every descriptor against ``baseline``) on FPR95: the
    difference :math:`\mathrm{FPR}_a - \mathrm{FPR}_b`, its paired cluster-bootstrap interval and
    the within-cluster swap test (:func:`metricalc.stats.compare.compare_statistic`), one
    correction family.

    Lower is better, so ``favours`` is 1 where the descriptor's FPR95 is significantly *lower*
    (a negative difference), -1 where the baseline's is, and ``wins`` / ``losses`` count the
    clusters where the descriptor's FPR95 (of the cluster's pairs alone) is lower / higher; the
    differences, the interval and the effect sizes are of :math:`\mathrm{FPR}_a -
    \mathrm{FPR}_b`. With ``pair_by="pair"`` the
    intraclass correlation within the records' clusters of the per-pair difference of
    :meth:`Fpr95Statistic.false_accepts` and its design effect are added (``icc``,
    ``design_effect``): FPR95 is the mean of those indicators over the non-matching pairs.

    ``options`` are the keywords of :func:`metricalc.stats.compare.compare_statistic`
    (``baseline``, ``correction``, ``alpha``, ``seed``, ``n_resamples``, ``confidence_level``).

    Returns
    -------
    xarray.Dataset
        The variables of :func:`metricalc.stats.compare`; attrs also ``better = "lower"``
        (and the records' ``cluster_name`` for pair units, which the terminal table names).
    """
    statistic = fpr95_statistic(records, pair_by=pair_by)
    compared = compare_statistic(statistic, pair_by=pair_by, attrs=records.attrs, **options)
    favours = compared["favours"].values
    favours[:] = -favours  # compare_statistic's side is that of the higher value
    wins = compared["wins"].values.copy()  # clusters where the descriptor's FPR95 is lower
    compared["wins"].values[:], compared["losses"].values[:] = compared["losses"].values, wins
    compared.attrs["better"] = "lower"
    if pair_by == "pair":
        compared.attrs["cluster_name"] = str(records.attrs.get("cluster_name", "cluster"))
        clusters = np.asarray(records["cluster"].values).astype(str)
        names = statistic.systems
        for k, (descriptor, base) in enumerate(compared.get_index("comparison")):
            d = statistic.false_accepts(names.index(descriptor)) - statistic.false_accepts(
                names.index(base)
            )
            compared["icc"][k], compared["design_effect"][k] = intraclass_correlation(d, clusters)
    return compared
