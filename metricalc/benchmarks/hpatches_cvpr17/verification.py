r"""HPatches CVPR'17 verification numbers as table statistics of sequences (pair cubes).

A verification number is a pooled statistic of a list of pairs (hpatches-benchmark's ROC AUC or
AP: :mod:`metricalc.benchmarks.hpatches_cvpr17.evaluate`), and the pairs of one sequence share its
patches, so
the independent units are the **sequences** (docs/stats.md). A pair's sequence is that of its
first patch (:func:`metricalc.benchmarks.hpatches_cvpr17.pairs.pair_sequences`: an inter negative
pair spans
two sequences and counts as its first patch's). Inference resamples and swaps whole sequences
(:func:`metricalc.stats.clustered.paired_inference`), and each resample recomputes the pooled
statistic itself.

**A resample as weights.** With :math:`K` sequences, a data set of the paired inference is given
by per-sequence multiplicities of each system's records: :math:`u = (u^X_c)` over the compared
systems :math:`X` and sequences :math:`c` (a bootstrap resample of system :math:`X`: :math:`u^X
= w`, the multinomial sequence counts; a swap pattern :math:`S`: the first system's records in
the sequences outside :math:`S`, the second's in :math:`S`). Every pair of sequence :math:`c`
scored by :math:`X` is counted :math:`u^X_c` times, and the list keeps the reference's
semantics: sorted by distance, ties in list order (negatives, then positives, each in file
order), a pair counted :math:`m` times occupies :math:`m` consecutive ranks, and the imbalanced
list keeps the pairs of the reference's prefix
(:func:`~metricalc.benchmarks.hpatches_cvpr17.evaluate.
imbalanced_prefix`), each with its sequence's multiplicity. The statistic is that of the list
with every pair repeated (``numpy.repeat``) by its multiplicity; the tests check both equal.

A swap puts the two descriptors' pairs in one list, so their scores must be on one scale, which
distances of two descriptors are not: each descriptor's distances at a level are replaced by
their mid-rank quantiles among all its pairs of that level (strictly increasing: none of its
own lists changes, ties stay ties), and a swap mixes rankings.

- **ROC AUC** (balanced lists): with :math:`M^{XY}_{cc'}` the number of (negative of :math:`c`
  scored by :math:`X`, positive of :math:`c'` scored by :math:`Y`) with the positive's distance
  below the negative's, and :math:`p(u) = \sum u^X_c p_c`, :math:`n(u) = \sum u^X_c n_c`,

  .. math::

      \mathrm{AUC}(u) = \frac{u^\top M u}{\max(p(u), \epsilon)\,\max(n(u), \epsilon)},

  a quadratic form: :math:`M` is counted once (sorted sweeps), a resample costs :math:`O(K^2)`.
- **AP** (imbalanced lists): for each positive :math:`j` (scored by :math:`X`, in sequence
  :math:`c`), :math:`T_j(u)` and :math:`R_j(u)`, the multiplicities of the positives and of all
  items ranked before it, are linear in :math:`u` (counts per sequence of the items before it,
  from one sort); with :math:`m_j = u^X_c`,

  .. math::

      \mathrm{AP}(u) = \frac{1}{\max(p(u), \epsilon)} \sum_j \sum_{k=1}^{m_j}
      \frac{1}{2}\left(\frac{\max(T_j + k - 1, \epsilon)}{\max(R_j + k - 1, \epsilon)}
      + \frac{T_j + k}{R_j + k}\right),

  one matrix product and a few element-wise passes per block of resamples: no sort per
  resample, memory bounded by :data:`BLOCK_ELEMENTS`.

:func:`verification_statistics` gives the columns of the reference's summary (12 numbers and the
means of the six imbalanced APs and of the six balanced AUCs) as
:class:`~metricalc.stats.statistics.ClusteredStatistic` objects sharing one cache, so the means
reuse their parts' resamples.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from metricalc.benchmarks.hpatches_cvpr17.evaluate import LEVEL_NAMES, imbalanced_prefix
from metricalc.benchmarks.hpatches_cvpr17.pairs import pair_sequences, validate_pair_cube
from metricalc.errors import InvalidInputError

__all__ = [
    "BLOCK_ELEMENTS",
    "COLUMNS",
    "SETUP_BYTES",
    "VerificationColumn",
    "VerificationLists",
    "column_name",
    "verification_statistics",
]

BLOCK_ELEMENTS = 1 << 22
"""Positives x resamples handled at once by the AP of a list (bounded memory)."""

SETUP_BYTES = 1 << 30
"""Memory for the sorted counts of the lists kept between calls (the oldest dropped first)."""

SIDES = ("inter", "intra")
MEASURES = {"balanced": "auc", "imbalanced": "ap"}
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("mean", "imbalanced", "both"),
    ("mean", "balanced", "both"),
    *((level, measure, side) for level in LEVEL_NAMES.values() for measure in MEASURES
      for side in SIDES),
)  # fmt: skip
"""(level, measure, negatives) of every column: the two means first (the mean of the six
imbalanced APs is the benchmark's one verification number), then the 12 numbers."""

_EPS = 1e-10
_CACHE = 256


def _positions(*keys: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """The rank of every element of several (distance, list index) arrays in their joint order
    (distance, then list index, then the order of the arrays on a full tie)."""
    d = np.concatenate([k[0] for k in keys])
    idx = np.concatenate([k[1] for k in keys]).astype(np.int64)
    source = np.concatenate([np.full(k[0].size, i, dtype=np.int64) for i, k in enumerate(keys)])
    ties = np.argsort(idx * len(keys) + source, kind="stable")  # (list index, array): integers
    order = ties[np.argsort(d[ties], kind="stable")]  # then by distance, ties kept
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    bounds = np.cumsum([0, *(k[0].size for k in keys)])
    return [rank[bounds[i] : bounds[i + 1]] for i in range(len(keys))]


def _cumulative(items: np.ndarray, size: int) -> np.ndarray:
    """Per rank ``0 .. size - 1``, the number of ``items`` (ranks) at or below it."""
    marks = np.zeros(size, dtype=np.int64)
    marks[items] = 1
    return np.cumsum(marks)


def _before(query: np.ndarray, items: np.ndarray, clusters: np.ndarray, k: int) -> np.ndarray:
    """(queries, k): per query rank, the items of each cluster with a lower rank (a query's
    rank is no item's)."""
    size = int(max(query.max(initial=-1), items.max(initial=-1))) + 1
    out = np.empty((query.size, k), dtype=np.float64)
    for c in range(k):
        out[:, c] = _cumulative(items[clusters == c], size)[query]
    return out


def _pairs_before(
    query: np.ndarray, query_clusters: np.ndarray, items: np.ndarray, clusters: np.ndarray, k: int
) -> np.ndarray:
    """(k, k): for clusters (c, c'), the (query of c, item of c') with the item ranked first."""
    size = int(max(query.max(initial=-1), items.max(initial=-1))) + 1
    out = np.empty((k, k))
    for c in range(k):
        before = _cumulative(items[clusters == c], size)[query]
        out[:, c] = np.bincount(query_clusters, weights=before, minlength=k)
    return out


def _quantiles(distance: np.ndarray) -> np.ndarray:
    """Each distance replaced by its mid-rank quantile among the pairs of its descriptor and
    level, :math:`(\\#\\{d' < d\\} + \\#\\{d' \\le d\\} + 1) / 2N` (``scipy.stats.rankdata``
    ``average`` over :math:`N`): strictly increasing in the distance, so no list of the
    descriptor changes, and on one scale for every descriptor, so a swap mixes rankings."""
    out = np.empty_like(distance, dtype=np.float64)
    for index in np.ndindex(distance.shape[:-1]):
        values = distance[index]
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # runs of ties
        last = np.r_[first[1:], values.size]  # below, at_most of each run
        run = np.cumsum(np.r_[True, ordered[1:] != ordered[:-1]]) - 1
        out[(*index, order)] = (first + last + 1)[run] / (2 * values.size)
    return out


@dataclass(frozen=True)
class _List:
    """One list of the reference, its negatives then positives (file order), for every system:
    distances (systems, items) and each item's sequence."""

    neg: np.ndarray
    pos: np.ndarray
    neg_cluster: np.ndarray
    pos_cluster: np.ndarray
    k: int

    def _keys(self, x: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        n = self.neg.shape[1]
        return (self.neg[x], np.arange(n)), (self.pos[x], n + np.arange(self.pos.shape[1]))

    def _counts(self, clusters: np.ndarray) -> np.ndarray:
        return np.bincount(clusters, minlength=self.k).astype(np.float64)

    def auc_form(self, systems: Sequence[int]) -> np.ndarray:
        """:math:`M` (module docstring) over the blocks of ``systems`` x sequences."""
        k = self.k
        form = np.zeros((len(systems) * k, len(systems) * k))
        for a, x in enumerate(systems):
            for b, y in enumerate(systems):
                ranks_neg, ranks_pos = _positions(self._keys(x)[0], self._keys(y)[1])
                form[a * k : (a + 1) * k, b * k : (b + 1) * k] = _pairs_before(
                    ranks_neg, self.neg_cluster, ranks_pos, self.pos_cluster, k
                )
        return form

    def auc(self, form: np.ndarray, systems: Sequence[int], u: np.ndarray) -> np.ndarray:
        """ROC AUC of the list under multiplicities ``u`` (R, len(systems) * k)."""
        p = u @ np.tile(self._counts(self.pos_cluster), len(systems))
        n = u @ np.tile(self._counts(self.neg_cluster), len(systems))
        total = np.einsum("ri,ij,rj->r", u, form, u)
        out: np.ndarray = total / np.maximum(p, _EPS) / np.maximum(n, _EPS)
        return out

    def ap_counts(self, systems: Sequence[int]) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per system of ``systems`` and sequence, the counts per (system, sequence) of the
        positives and of all items ranked before each of its positives (float32: exact
        below :math:`2^{24}` items)."""
        out = []
        for x in systems:
            tp, rk = [], []
            for y in systems:
                neg_y, pos_y = self._keys(y)
                rank_q, rank_neg, rank_pos = _positions(self._keys(x)[1], neg_y, pos_y)
                positives = _before(rank_q, rank_pos, self.pos_cluster, self.k)
                tp.append(positives)
                rk.append(positives + _before(rank_q, rank_neg, self.neg_cluster, self.k))
            tp_x, rk_x = np.hstack(tp), np.hstack(rk)
            out.append(
                [
                    (
                        tp_x[self.pos_cluster == c].astype(np.float32),
                        rk_x[self.pos_cluster == c].astype(np.float32),
                    )
                    for c in range(self.k)
                ]
            )
        return out  # fmt: skip

    def ap(
        self,
        counts: list[list[tuple[np.ndarray, np.ndarray]]],
        systems: Sequence[int],
        u: np.ndarray,
    ) -> np.ndarray:
        """AP of the list under multiplicities ``u`` (R, len(systems) * k)."""
        k = self.k
        total = np.zeros(len(u))
        for a, per_sequence in enumerate(counts):
            for c, (tp, rk) in enumerate(per_sequence):  # one multiplicity per sequence
                total += _ap_sums(tp, rk, u, u[:, a * k + c])
        p = u @ np.tile(self._counts(self.pos_cluster), len(systems))
        out: np.ndarray = total / np.maximum(p, _EPS)
        return out


def _ap_sums(tp: np.ndarray, rk: np.ndarray, u: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """Per row of ``u``, the sum over positives of their precision terms (module docstring):
    ``tp``, ``rk`` (positives, columns of u) the counts before each positive, all of one
    sequence, and ``copies`` (R,) that sequence's multiplicity in each row. Copy :math:`k` of a
    positive is computed only for the rows that draw it :math:`k` times or more."""
    out = np.zeros(len(u))
    step = max(1, BLOCK_ELEMENTS // max(1, tp.shape[0]))
    for start in range(0, len(u), step):
        m = copies[start : start + step]
        for j in range(1, int(m.max(initial=0)) + 1):
            rows = np.flatnonzero(m >= j)
            block = u[start + rows].T
            t = tp.astype(np.float64) @ block  # (positives, rows): before copy j, minus j - 1
            r = rk.astype(np.float64) @ block
            t += j - 1
            r += j - 1
            before = np.maximum(t, _EPS) / np.maximum(r, _EPS)
            t += 1
            r += 1
            before += t / r
            out[start + rows] += before.sum(axis=0) / 2
    return out


@dataclass
class VerificationLists:
    """The lists of a pair cube (per level, negatives file and measure) for its descriptors,
    with a cache of their statistics under multiplicities (shared by the columns)."""

    systems: list[str]
    clusters: np.ndarray
    lists: dict[tuple[str, str, str], _List]
    _cache: dict[bytes, np.ndarray] = field(default_factory=dict)
    _setups: OrderedDict[Any, tuple[Any, int]] = field(default_factory=OrderedDict)

    @classmethod
    def of(cls, cube: xr.Dataset, where: str = "pair cube") -> VerificationLists:
        """The lists of a pair cube (:mod:`metricalc.benchmarks.hpatches_cvpr17.pairs`)."""
        validate_pair_cube(cube, where)
        names, codes = pair_sequences(cube, where)
        used, codes = np.unique(codes, return_inverse=True)  # sequences that hold pairs
        names = names[used]
        kind = np.asarray(cube["kind"].values).astype(str)
        d = _quantiles(np.asarray(cube["distance"].values))  # (descriptor, level, pair)
        lists: dict[tuple[str, str, str], _List] = {}
        n_pos = int(np.count_nonzero(kind == "pos"))
        for li, level in enumerate(LEVEL_NAMES.values()):
            pos = d[:, li, kind == "pos"]
            for side in SIDES:
                neg = d[:, li, kind == f"neg_{side}"]
                a, c = imbalanced_prefix(neg.shape[1], n_pos)
                cn, cp = codes[kind == f"neg_{side}"], codes[kind == "pos"]
                k = names.size
                lists[level, "balanced", side] = _List(neg, pos, cn, cp, k)
                lists[level, "imbalanced", side] = _List(neg[:, :a], pos[:, :c], cn[:a], cp[:c], k)
        systems = np.asarray(cube["descriptor"].values).astype(str).tolist()
        return cls(systems, names, lists)

    def value(
        self, key: tuple[str, str, str], systems: tuple[int, ...], u: np.ndarray
    ) -> np.ndarray:
        """The statistic of list ``key`` (AUC for balanced, AP for imbalanced) with the records
        of ``systems`` counted ``u`` (R, len(systems) * clusters) times; cached."""
        u = np.ascontiguousarray(u, dtype=np.float64)
        digest = hashlib.sha1(repr((key, systems, u.shape)).encode() + u.tobytes()).digest()
        if digest not in self._cache:
            one = self.lists[key]
            setup = self._setup_of(key, systems)
            # few sequences: many resamples repeat one vector of multiplicities
            distinct, inverse = np.unique(u, axis=0, return_inverse=True)
            if key[1] == "balanced":
                values = one.auc(setup, systems, distinct)[inverse.ravel()]
            else:
                values = one.ap(setup, systems, distinct)[inverse.ravel()]
            if len(self._cache) >= _CACHE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[digest] = values
        return self._cache[digest]

    def _setup_of(self, key: tuple[str, str, str], systems: tuple[int, ...]) -> Any:
        """The sorted counts of a list for ``systems`` (:meth:`_List.auc_form`,
        :meth:`_List.ap_counts`), kept while they fit in :data:`SETUP_BYTES` (oldest
        dropped first)."""
        name = (key, systems)
        if name in self._setups:
            self._setups.move_to_end(name)
            return self._setups[name][0]
        one = self.lists[key]
        setup: Any = one.auc_form(systems) if key[1] == "balanced" else one.ap_counts(systems)
        size = (
            sum(a.nbytes + b.nbytes for x in setup for a, b in x)
            if key[1] != "balanced"
            else (setup.nbytes)
        )
        while self._setups and sum(v[1] for v in self._setups.values()) + size > SETUP_BYTES:
            self._setups.popitem(last=False)
        self._setups[name] = (setup, size)
        return setup


@dataclass
class VerificationColumn:
    """One column of the verification summary: the mean of the statistics of ``parts`` (one
    list, or the six of a measure), a :class:`~metricalc.stats.statistics.ClusteredStatistic`
    over the sequences."""

    name: str
    phrase: str
    lists: VerificationLists
    parts: tuple[tuple[str, str, str], ...]
    systems: list[str] = field(init=False)
    clusters: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.systems = self.lists.systems
        self.clusters = self.lists.clusters

    def present(self) -> np.ndarray:
        return np.ones((len(self.systems), len(self.clusters)), dtype=bool)

    def _mean(self, systems: tuple[int, ...], u: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.mean([self.lists.value(p, systems, u) for p in self.parts], axis=0)
        return out

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        return self._mean((system,), weights)

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        k = keep.astype(np.float64)
        s = swap.astype(np.float64)
        u_first = np.hstack([k * (1 - s), k * s])  # first's records outside the swap
        u_second = np.hstack([k * s, k * (1 - s)])
        both = self._mean((first, second), np.vstack([u_first, u_second]))
        out: np.ndarray = both[: len(swap)] - both[len(swap) :]
        return out

    def cluster_values(self) -> np.ndarray:
        one_hot = np.eye(len(self.clusters))
        return np.stack([self.weighted(s, one_hot) for s in range(len(self.systems))])


def column_name(level: str, measure: str, side: str) -> str:
    """The short name of a column: ``"easy imbalanced inter"``, ``"mean imbalanced"``."""
    return f"{level} {measure}" + ("" if side == "both" else f" {side}")


def verification_statistics(
    cube: xr.Dataset, columns: Sequence[tuple[str, str, str]] = COLUMNS, where: str = "pair cube"
) -> list[VerificationColumn]:
    """The columns (:data:`COLUMNS`) of a pair cube as statistics of its sequences, sharing one
    :class:`VerificationLists`."""
    lists = VerificationLists.of(cube, where)
    out = []
    for level, measure, side in columns:
        if (level, measure, side) not in COLUMNS:
            raise InvalidInputError(
                f"verification column {column_name(level, measure, side)!r}: expected one of "
                + ", ".join(repr(column_name(*c)) for c in COLUMNS)
            )
        statistic = "ROC AUC" if measure == "balanced" else "AP"
        if level == "mean":
            parts = tuple(key for key in lists.lists if key[1] == measure)
            phrase = f"mean of the six {measure} {statistic}s over the pairs"
        else:
            parts = ((level, measure, side),)
            phrase = f"{measure} {statistic} over the {level} pairs ({side} negatives)"
        out.append(VerificationColumn(column_name(level, measure, side), phrase, lists, parts))
    return out
