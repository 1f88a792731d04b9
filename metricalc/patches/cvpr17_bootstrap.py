r"""Paired bootstrap of two descriptors' HPatches CVPR'17 verification numbers (pair cubes).

A verification number is a pooled statistic over a list of pairs (ROC AUC, AP), so two
descriptors are compared by resampling the **pairs** and recomputing both descriptors' pooled
statistics on the same resample (:func:`verification_bootstrap`), not by a paired test of
per-pair values.

**The resample.** Each of the reference's lists (per negative file ``inter`` / ``intra``: the
balanced list, all negatives then all positives; the imbalanced list, the negatives then the
positives of its prefix of :math:`n_{pos} + \lfloor 0.2\,n_{pos} \rfloor` items) is resampled
within its labels: its :math:`a` negatives are :math:`a` rows drawn with replacement from the
first :math:`a` rows of the negative file, its :math:`c` positives :math:`c` rows drawn from
the first :math:`c` rows of the positive file, so the class counts, and hence the prefix rule,
stay those of the reference. A *stratum* is (file, first rows); resample :math:`b` draws, with
``numpy.random.default_rng(SeedSequence(seed).spawn(B)[b])``, ``integers(0, size, size)`` for
each distinct stratum in the order (balanced negatives, balanced positives, imbalanced
negatives, imbalanced positives) of ``inter`` then ``intra`` (a stratum met again reuses its
draw), and the three levels use the same draws. Results therefore do not depend on the batch
size.

**The statistics on a resample** keep the reference's semantics: within a list a tied negative
ranks before a positive (its stable sort over (negatives, positives)) and a pair drawn
:math:`w` times occupies :math:`w` consecutive ranks. Each list is sorted once per descriptor
and level; a resample is a vector of multiplicities :math:`w_i` over the sorted items, and with
:math:`R_i` the total multiplicity and :math:`T_i` the positive multiplicity before item
:math:`i`,

.. math::

    \mathrm{AUC} = \frac{\sum_{i\ \mathrm{negative}} w_i T_i}{\max(p, \epsilon)\max(n, \epsilon)},
    \qquad
    \mathrm{AP} = \frac{1}{\max(p, \epsilon)} \sum_{i\ \mathrm{positive}} \sum_{j=1}^{w_i}
    \frac{1}{2}\left(\frac{\max(T_i + j - 1, \epsilon)}{\max(R_i + j - 1, \epsilon)}
    + \frac{T_i + j}{R_i + j}\right)

(:math:`p`, :math:`n` the list's positives and negatives, :math:`\epsilon = 10^{-10}`): no
sort per resample, memory bounded by batches of resamples.

**The result** per statistic (3 levels x balanced / imbalanced x inter / intra, and the means
of the six imbalanced APs and of the six balanced AUCs): both descriptors' values, their
difference :math:`\Delta = A - B`, its bootstrap standard error, the percentile interval of
the bootstrap differences :math:`\Delta^*_b` at ``confidence``, and the two-sided percentile
bootstrap p-value
:math:`\min\bigl(1, 2 \min(1 + \#\{\Delta^*_b \le 0\}, 1 + \#\{\Delta^*_b \ge 0\}) / (B + 1)\bigr)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.patches.cvpr17_eval import (
    LEVEL_NAMES,
    imbalanced_prefix,
    sorted_labels_ap,
    sorted_labels_auc,
)
from metricalc.patches.cvpr17_pairs import pair_lists, validate_pair_cube
from metricalc.validation import check_fraction, check_integer

__all__ = [
    "STATISTICS",
    "SortedList",
    "resample_weights",
    "verification_bootstrap",
    "weighted_scores",
]

SIDES = ("inter", "intra")
MEASURES = ("balanced", "imbalanced")
STATISTICS: tuple[tuple[str, str, str], ...] = (
    *((level, measure, side) for level in LEVEL_NAMES.values() for measure in MEASURES
      for side in SIDES),
    ("mean", "imbalanced", "both"),
    ("mean", "balanced", "both"),
)  # fmt: skip
"""(level, measure, negatives) of every statistic of :func:`verification_bootstrap`."""

_EPS = 1e-10
_BATCH_ELEMENTS = 1 << 21


@dataclass(frozen=True)
class _List:
    """One of the reference's lists: its negative and positive strata (file, first rows)."""

    measure: str
    side: str
    neg: tuple[str, int]
    pos: tuple[str, int]


def _lists(sizes: Mapping[str, int]) -> list[_List]:
    """The four lists (balanced / imbalanced x inter / intra) in the order of the draws."""
    out = []
    n_pos = sizes["pos"]
    for side in SIDES:
        n_neg = sizes[f"neg_{side}"]
        negatives, positives = imbalanced_prefix(n_neg, n_pos)
        out.append(_List("balanced", side, (f"neg_{side}", n_neg), ("pos", n_pos)))
        out.append(_List("imbalanced", side, (f"neg_{side}", negatives), ("pos", positives)))
    return out


def _strata(lists: Sequence[_List]) -> list[tuple[str, int]]:
    strata: list[tuple[str, int]] = []
    for item in lists:
        for stratum in (item.neg, item.pos):
            if stratum not in strata:
                strata.append(stratum)
    return strata


def resample_weights(
    sizes: Mapping[str, int], seeds: Sequence[np.random.SeedSequence]
) -> dict[tuple[str, int], np.ndarray]:
    """Multiplicities (len(seeds) x size, int64) of every stratum's rows, one resample per seed
    (module docstring: ``seeds`` are ``SeedSequence(seed).spawn(B)[b]``, strata in order)."""
    strata = _strata(_lists(sizes))
    out = {s: np.zeros((len(seeds), s[1]), dtype=np.int64) for s in strata}
    for row, child in enumerate(seeds):
        rng = np.random.default_rng(child)
        for stratum in strata:
            size = stratum[1]
            out[stratum][row] = np.bincount(rng.integers(0, size, size), minlength=size)
    return out


@dataclass(frozen=True)
class SortedList:
    """A list (negatives, positives) sorted once: the sort order and the labels in it."""

    order: np.ndarray
    is_pos: np.ndarray
    n_neg: int

    @classmethod
    def of(cls, neg: np.ndarray, pos: np.ndarray) -> SortedList:
        """Sorted by distance with a stable sort: a tied negative ranks first."""
        d = np.concatenate([neg, pos])
        order = np.argsort(d, kind="stable")
        return cls(order, order >= neg.size, neg.size)

    def prefix(self, a: int, c: int) -> SortedList:
        """The sorted list of the first ``a`` negatives and the first ``c`` positives."""
        o = self.order
        keep = (o < a) | ((o >= self.n_neg) & (o < self.n_neg + c))
        order = np.where(o < self.n_neg, o, o - self.n_neg + a)[keep]
        return SortedList(order, order >= a, a)

    def weights(self, w_neg: np.ndarray, w_pos: np.ndarray) -> np.ndarray:
        """The multiplicities of the rows (B x items) in sorted order."""
        return self.sorted(np.concatenate([w_neg, w_pos], axis=1))

    def sorted(self, joined: np.ndarray) -> np.ndarray:
        """Multiplicities given in list order (negatives, positives) put in sorted order."""
        return np.take(joined, self.order, axis=1)

    def auc(self, w: np.ndarray) -> np.ndarray:
        """ROC AUC per row of sorted multiplicities ``w``."""
        p, n = float(self.is_pos.sum()), float(self.n_neg)
        w_p = w * self.is_pos
        # at a negative, the positives' cumulative multiplicity is the one before it
        total = np.einsum("ij,ij->i", w - w_p, np.cumsum(w_p, axis=1))
        return np.asarray(total / max(p, _EPS) / max(n, _EPS), dtype=np.float64)

    def ap(self, w: np.ndarray) -> np.ndarray:
        """AP (trapezoid, :math:`P_0 = 1`) per row of sorted multiplicities ``w``: each drawn
        copy of a positive is one rank."""
        cols = np.flatnonzero(self.is_pos)
        w_p = w * self.is_pos
        r = (np.cumsum(w, axis=1) - w)[:, cols].ravel()
        t = (np.cumsum(w_p, axis=1) - w_p)[:, cols].ravel()
        count = w[:, cols].ravel()
        item = np.repeat(np.arange(count.size), count)
        j = np.arange(item.size) - (np.cumsum(count) - count)[item] + 1
        rank = (r[item] + j).astype(np.float64)
        s = (t[item] + j).astype(np.float64)
        terms = (np.maximum(s - 1, _EPS) / np.maximum(rank - 1, _EPS) + s / rank) / 2
        row = item // max(cols.size, 1)
        return np.bincount(row, weights=terms, minlength=w.shape[0]) / max(float(cols.size), _EPS)


def weighted_scores(
    neg: np.ndarray, pos: np.ndarray, w_neg: np.ndarray, w_pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ROC AUC and AP (module docstring) of the list (negatives, positives) under rows of
    multiplicities ``w_neg`` (B x len(neg)) and ``w_pos`` (B x len(pos)); one value per row.

    With all multiplicities 1 these are the reference's ``roc`` and ``pr`` of the list.

    >>> auc, ap = weighted_scores(np.array([1.0]), np.array([0.5, 2.0]),
    ...                           np.array([[1]]), np.array([[1, 1]]))
    >>> float(auc[0]), round(float(ap[0]), 6)  # positives at ranks 1, 3
    (0.5, 0.791667)
    """
    ranked = SortedList.of(neg, pos)
    w = ranked.weights(w_neg, w_pos)
    return ranked.auc(w), ranked.ap(w)


def _sorted_lists(
    lists: Sequence[_List], distances: Mapping[str, Mapping[str, np.ndarray]]
) -> dict[tuple[str, str, str], SortedList]:
    """Every list of every level sorted once, keyed by (level, measure, side); an imbalanced
    list is its balanced list's order restricted to its prefix (a sorted subsequence)."""
    out: dict[tuple[str, str, str], SortedList] = {}
    for level, d in distances.items():
        full: dict[str, SortedList] = {}
        for item in lists:
            key = (level, item.measure, item.side)
            if item.measure == "balanced":
                out[key] = full[item.side] = SortedList.of(d[item.neg[0]], d["pos"])
            else:
                out[key] = full[item.side].prefix(item.neg[1], item.pos[1])
    return out


def _joined(
    lists: Sequence[_List], weights: Mapping[tuple[str, int], np.ndarray]
) -> dict[tuple[str, str], np.ndarray]:
    """Per list (measure, side) the multiplicities of its items in list order."""
    return {
        (item.measure, item.side): np.concatenate([weights[item.neg], weights[item.pos]], axis=1)
        for item in lists
    }


def _statistics(
    ranked: Mapping[tuple[str, str, str], SortedList], joined: Mapping[tuple[str, str], np.ndarray]
) -> np.ndarray:
    """Every statistic of :data:`STATISTICS` per resample row (rows x statistics)."""
    values: dict[tuple[str, str, str], np.ndarray] = {}
    for key, sorted_list in ranked.items():
        w = sorted_list.sorted(joined[key[1], key[2]])
        values[key] = sorted_list.auc(w) if key[1] == "balanced" else sorted_list.ap(w)
    for measure in MEASURES:
        values["mean", measure, "both"] = np.mean(
            [v for k, v in values.items() if k[1] == measure and k[0] != "mean"], axis=0
        )
    return np.stack([values[s] for s in STATISTICS], axis=1)


def _observed(ranked: Mapping[tuple[str, str, str], SortedList]) -> np.ndarray:
    """The statistics of the pairs themselves: the evaluation's ``sorted_labels_auc`` and
    ``sorted_labels_ap`` of the sorted labels (:func:`~.cvpr17_eval.verification_scores`)."""
    values = {
        key: sorted_labels_auc(sl.is_pos) if key[1] == "balanced" else sorted_labels_ap(sl.is_pos)
        for key, sl in ranked.items()
    }
    for measure in MEASURES:
        values["mean", measure, "both"] = float(
            np.mean([v for k, v in values.items() if k[1] == measure and k[0] != "mean"])
        )
    return np.array([values[s] for s in STATISTICS])


def _systems(
    cubes: Sequence[xr.Dataset], names: Sequence[str] | None
) -> tuple[tuple[xr.Dataset, str], tuple[xr.Dataset, str]]:
    """The two (cube, descriptor) compared: ``names`` among all cubes' descriptors, or the only
    two there are; the cubes must share their pairs."""
    found = [(c, str(n)) for c in cubes for n in np.asarray(c["descriptor"].values).astype(str)]
    labels = [n for _, n in found]
    if len(found) < 2:
        raise InvalidInputError(
            f"the pair cubes hold {len(found)} descriptor{'' if len(found) == 1 else 's'} "
            f"{labels}; a comparison needs two: give the pair cube of another descriptor"
        )
    if names is None:
        if len(found) != 2:
            raise InvalidInputError(
                f"the pair cubes hold {len(found)} descriptors {labels}; name the two to compare"
            )
        picked = found
    else:
        if len(names) != 2 or names[0] == names[1]:
            raise InvalidInputError(f"descriptors: expected two different names, got {names}")
        picked = []
        for name in names:
            hits = [f for f in found if f[1] == name]
            if len(hits) != 1:
                raise InvalidInputError(
                    f"descriptor {name!r}: expected once among the pair cubes' {labels}, "
                    f"found {len(hits)} times"
                )
            picked.append(hits[0])
    (ca, a), (cb, b) = picked
    same = [ca.attrs[k] == cb.attrs[k] for k in ("pairs_sha256", "split")]
    if not all(same):
        raise InvalidInputError(
            f"{a} and {b} were scored on different verification pairs (split or pairs_sha256 "
            "differ): evaluate both on the same split and pair files"
        )
    return (ca, a), (cb, b)


def verification_bootstrap(
    cubes: xr.Dataset | Sequence[xr.Dataset],
    descriptors: Sequence[str] | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> xr.Dataset:
    """Paired bootstrap over pairs of two descriptors' verification numbers (module docstring).

    Parameters
    ----------
    cubes : pair cube or sequence of pair cubes
        (:mod:`metricalc.patches.cvpr17_pairs`) holding the two descriptors, scored on the
        same pairs.
    descriptors : (A, B), optional
        The two compared (A - B); default: the only two descriptors of ``cubes``.
    n_resamples, seed, confidence
        Bootstrap resamples B, the seed of their draws, the level of the interval.

    Returns
    -------
    xarray.Dataset
        Over ``statistic`` (:data:`STATISTICS`, coordinates ``level``, ``measure``,
        ``negatives``): ``value_a``, ``value_b``, ``difference``, ``se``, ``ci_low``,
        ``ci_high``, ``p_value``; attrs ``a``, ``b``, ``n_resamples``, ``seed``,
        ``confidence`` and the cubes' ``split``, ``pairs_sha256``.
    """
    items = [cubes] if isinstance(cubes, xr.Dataset) else list(cubes)
    for k, cube in enumerate(items):
        validate_pair_cube(cube, f"pair cube {k + 1}")
    n_resamples = check_integer("n_resamples", n_resamples, minimum=1)
    seed = check_integer("seed", seed, minimum=0)
    confidence = check_fraction("confidence", confidence)
    (ca, a), (cb, b) = _systems(items, descriptors)
    distances_a, distances_b = pair_lists(ca, a), pair_lists(cb, b)
    sizes = {kind: values.size for kind, values in next(iter(distances_a.values())).items()}
    sizes_b = {kind: values.size for kind, values in next(iter(distances_b.values())).items()}
    if sizes != sizes_b:
        raise InvalidInputError(f"{a} has pairs {sizes} but {b} has {sizes_b}: not the same pairs")
    lists = _lists(sizes)
    ranked_a, ranked_b = _sorted_lists(lists, distances_a), _sorted_lists(lists, distances_b)
    observed_a, observed_b = _observed(ranked_a), _observed(ranked_b)
    diffs = np.empty((n_resamples, len(STATISTICS)))
    batch = max(1, _BATCH_ELEMENTS // max(1, 2 * sum(sizes.values())))
    children = np.random.SeedSequence(seed).spawn(n_resamples)
    for start in range(0, n_resamples, batch):
        stop = min(start + batch, n_resamples)
        joined = _joined(lists, resample_weights(sizes, children[start:stop]))
        diffs[start:stop] = _statistics(ranked_a, joined) - _statistics(ranked_b, joined)
    return _summary(observed_a, observed_b, diffs, confidence, {
        "a": a, "b": b, "n_resamples": n_resamples, "seed": seed, "confidence": confidence,
        "split": str(ca.attrs["split"]), "pairs_sha256": str(ca.attrs["pairs_sha256"]),
    })  # fmt: skip


def _summary(
    value_a: np.ndarray,
    value_b: np.ndarray,
    diffs: np.ndarray,
    confidence: float,
    attrs: Mapping[str, object],
) -> xr.Dataset:
    n = diffs.shape[0]
    alpha = 1 - confidence
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2], axis=0)
    below = 1 + (diffs <= 0).sum(axis=0)
    above = 1 + (diffs >= 0).sum(axis=0)
    p_value = np.minimum(1.0, 2 * np.minimum(below, above) / (n + 1))
    dim = "statistic"
    return xr.Dataset(
        {
            "value_a": (dim, value_a),
            "value_b": (dim, value_b),
            "difference": (dim, value_a - value_b),
            "se": (dim, diffs.std(axis=0, ddof=1) if n > 1 else np.full(len(STATISTICS), np.nan)),
            "ci_low": (dim, low),
            "ci_high": (dim, high),
            "p_value": (dim, p_value),
        },
        coords={
            "level": (dim, [s[0] for s in STATISTICS]),
            "measure": (dim, [s[1] for s in STATISTICS]),
            "negatives": (dim, [s[2] for s in STATISTICS]),
        },
        attrs=dict(attrs),
    )
