r"""The FPR at a recall of weighted pairs, for many weight vectors at once (resampling).

:func:`~metricalc.core.operating.fpr_at_recall` ranks one list of pairs. A bootstrap resample
counts pair :math:`i` :math:`w_i` times (:math:`w_i \in \mathbb{N}`); its FPR95 is
:func:`~metricalc.core.operating.fpr_at_recall` of the *materialised* list, pair :math:`i`
repeated :math:`w_i` times in its own place. Materialising every resample would sort every
resample; here the pairs are sorted once, and each weight vector only needs weighted cumulative
sums along that order: with :math:`p_j, n_j` the weighted positives and negatives of the records
up to sorted position :math:`j`, :math:`P = p_m`, :math:`N = n_m`,

- ``"hardnet"``, ``"matchnet"``: :math:`k = \lceil r P \rceil`, :math:`t` the first position with
  :math:`p_t \ge k` (the record holding the :math:`k`-th positive copy), :math:`FP_k = n_t`;
  :math:`FP_k / N` resp. :math:`FP_k / (FP_k + k)`. Copies of a pair are adjacent and tied
  records keep their input order, so this is the stable sort of the materialised list.
- ``"threshold"``: the first tie-group end :math:`h` with :math:`p_h / P \ge r`; :math:`n_h / N`.
- ``"sklearn"``: as ``"threshold"``, at the first ROC point at or after :math:`h` that
  scikit-learn's ``drop_intermediate`` keeps: the first and last non-empty tie group, and every
  group whose counts :math:`(\Delta n, \Delta p)` differ from those of the next non-empty group
  (a group of weight 0 does not exist in the materialised list, and is skipped).

Every step is a cumulative sum, a comparison or an ``argmax`` along the last axis, so a block of
resamples costs a few passes over (resamples, pairs) integer arrays: the caller bounds the block.
"""

from __future__ import annotations

import numpy as np

from metricalc.core.operating import FPR_AT_RECALL_VARIANTS
from metricalc.errors import InvalidInputError

__all__ = ["fpr_at_recall_leave_one_out", "fpr_at_recall_sorted", "tie_groups"]


def tie_groups(sorted_scores: np.ndarray) -> np.ndarray:
    """True where a record starts a tie group (its score differs from the previous record's)
    along the last axis; the first record always starts one.

    Examples
    --------
    >>> tie_groups(np.array([0.1, 0.1, 0.3, 0.5, 0.5])).tolist()
    [True, False, True, True, False]
    """
    scores = np.asarray(sorted_scores)
    out = np.ones(scores.shape, dtype=bool)
    out[..., 1:] = scores[..., 1:] != scores[..., :-1]
    return out


def _at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[r, index[r]]`` of every row."""
    return np.take_along_axis(values, index[:, None], axis=-1)[:, 0]


def _kept_point(
    end: np.ndarray, cp: np.ndarray, cn: np.ndarray, new_group: np.ndarray, crossing: np.ndarray
) -> np.ndarray:
    """The first ROC point scikit-learn's ``drop_intermediate`` keeps at or after the group end
    ``crossing``, per row (module docstring)."""
    rows, m = cp.shape
    position = np.arange(m)
    start = np.maximum.accumulate(np.where(new_group, position, 0), axis=-1)
    start = np.broadcast_to(start, cp.shape)
    before = start - 1  # the previous group's end, -1 for the first group
    safe = np.maximum(before, 0)
    gp = cp - np.where(before >= 0, np.take_along_axis(cp, safe, axis=-1), 0)
    gn = cn - np.where(before >= 0, np.take_along_axis(cn, safe, axis=-1), 0)
    nonempty = end & (gp + gn > 0)
    index = np.where(nonempty, position, m)
    following = np.full((rows, m), m)
    following[:, :-1] = np.minimum.accumulate(index[:, :0:-1], axis=-1)[:, ::-1]
    safe_next = np.minimum(following, m - 1)
    same = (following < m) & (np.take_along_axis(gp, safe_next, axis=-1) == gp)
    same &= np.take_along_axis(gn, safe_next, axis=-1) == gn
    first = position == np.argmax(nonempty, axis=-1)[:, None]
    kept = nonempty & (first | ~same)
    out: np.ndarray = np.argmax(kept & (position >= crossing[:, None]), axis=-1)
    return out


def _kth_positive(
    labels: np.ndarray, weights: np.ndarray, recall: float, variant: str
) -> tuple[np.ndarray, np.ndarray]:
    """``"hardnet"`` / ``"matchnet"`` for labels shared by every row: cumulative sums over the
    positives' and the negatives' columns apart (half the work of both over all records)."""
    positives, negatives = np.flatnonzero(labels), np.flatnonzero(~labels)
    rows = np.arange(len(weights))
    if not positives.size or not negatives.size:
        return np.full(len(weights), np.nan), np.zeros(len(weights), dtype=np.int64)
    cp = np.cumsum(weights[:, positives], axis=-1)
    cn = np.cumsum(weights[:, negatives], axis=-1)
    n_pos, n_neg = cp[:, -1], cn[:, -1]
    k = np.ceil(recall * n_pos).astype(np.int64)  # the float64 product, as the reference
    j = np.argmax(cp >= k[:, None], axis=-1)  # the positive holding the k-th positive copy
    before = np.cumsum(~labels)[positives][j]  # negatives ranked before it
    fp = np.where(before > 0, cn[rows, np.maximum(before - 1, 0)], 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = fp / n_neg if variant == "hardnet" else fp / (fp + k)
    defined = (n_pos > 0) & (n_neg > 0)
    return np.where(defined, value, np.nan), np.where(defined, positives[j], 0)


def fpr_at_recall_sorted(
    labels: np.ndarray,
    weights: np.ndarray,
    new_group: np.ndarray,
    *,
    recall: float = 0.95,
    variant: str = "hardnet",
) -> tuple[np.ndarray, np.ndarray]:
    r"""FPR at ``recall`` of weighted records sorted by decreasing score, one value per row of
    ``weights`` (module docstring for the formulas).

    Parameters
    ----------
    labels : ndarray of bool, shape (m,) or (R, m)
        True for a matching pair, in sorted order (decreasing score, ties in input order).
    weights : ndarray of int, shape (R, m)
        How many times each record counts in each row (0: left out).
    new_group : ndarray of bool, shape (m,) or (R, m)
        :func:`tie_groups` of the sorted scores.
    recall : float
        The target recall :math:`r` in (0, 1].
    variant : {"hardnet", "matchnet", "threshold", "sklearn"}
        :func:`~metricalc.core.operating.fpr_at_recall`'s variants.

    Returns
    -------
    values : ndarray of float64, shape (R,)
        NaN where a row has no positive or no negative.
    stop : ndarray of int64, shape (R,)
        The last sorted position accepted: the negatives at or before it are the false
        positives counted (0 where the value is NaN).

    Examples
    --------
    Scores 0.9, 0.8, 0.7, 0.7, 0.6, 0.1 as in
    :func:`~metricalc.core.operating.fpr_at_recall`; the second row counts pair 0 twice:

    >>> y = np.array([1, 0, 1, 0, 1, 0], dtype=bool)
    >>> groups = tie_groups(-np.array([0.9, 0.8, 0.7, 0.7, 0.6, 0.1]))
    >>> w = np.array([[1, 1, 1, 1, 1, 1], [2, 1, 1, 1, 1, 1]])
    >>> values, stop = fpr_at_recall_sorted(y, w, groups, recall=0.5)
    >>> values.round(4).tolist(), stop.tolist()
    ([0.3333, 0.0], [2, 0])
    >>> fpr_at_recall_sorted(y, w, groups, recall=0.5, variant="threshold")[0].round(4).tolist()
    [0.6667, 0.0]
    """
    if variant not in FPR_AT_RECALL_VARIANTS:
        raise InvalidInputError(
            f"variant must be one of {', '.join(FPR_AT_RECALL_VARIANTS)}; got {variant!r}"
        )
    weights = np.asarray(weights, dtype=np.int64)
    if variant in ("hardnet", "matchnet") and np.ndim(labels) == 1:
        return _kth_positive(np.asarray(labels, dtype=bool), weights, recall, variant)
    labels = np.broadcast_to(np.asarray(labels, dtype=bool), weights.shape)
    cp = np.cumsum(np.where(labels, weights, 0), axis=-1)
    cn = np.cumsum(np.where(labels, 0, weights), axis=-1)
    n_pos, n_neg = cp[:, -1], cn[:, -1]
    defined = (n_pos > 0) & (n_neg > 0)
    safe_pos = np.maximum(n_pos, 1)
    if variant in ("hardnet", "matchnet"):
        k = np.ceil(recall * n_pos).astype(np.int64)  # the float64 product, as the reference
        stop = np.argmax(cp >= k[:, None], axis=-1)
        fp = _at(cn, stop)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = fp / n_neg if variant == "hardnet" else fp / (fp + k)
    else:
        groups = np.asarray(new_group, dtype=bool)
        end = np.ones(np.broadcast_shapes(groups.shape, weights.shape), dtype=bool)
        end[..., :-1] = np.broadcast_to(groups[..., 1:], end[..., :-1].shape)
        stop = np.argmax(end & (cp / safe_pos[:, None] >= recall), axis=-1)
        if variant == "sklearn":
            stop = _kept_point(end, cp, cn, np.broadcast_to(groups, weights.shape), stop)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = _at(cn, stop) / n_neg
    return np.where(defined, value, np.nan), np.where(defined, stop, 0)


def _padded_ranks(groups: np.ndarray, ranks: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_groups, most) array: row g holds the ``ranks`` of group g in increasing order,
    padded with the largest int64."""
    order = np.lexsort((ranks, groups))
    sizes = np.bincount(groups, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.full((n_groups, max(1, int(sizes.max(initial=0)))), np.iinfo(np.int64).max)
    column = np.arange(len(order)) - starts[groups[order]]
    out[groups[order], column] = ranks[order]
    return out


def _least_count(recall: float, n_pos: np.ndarray) -> np.ndarray:
    r"""The smallest integer :math:`x` with :math:`x / P \ge r` in float64 (``tp / P >= r`` of
    the ROC reading), from :math:`\lceil r P \rceil` and its neighbours."""
    start = np.ceil(recall * n_pos).astype(np.int64)
    safe = np.maximum(n_pos, 1)
    out = start + 1
    for candidate in (start, start - 1):  # the smaller one wins where it reaches the recall
        out = np.where((candidate >= 0) & (candidate / safe >= recall), candidate, out)
    return out


def fpr_at_recall_leave_one_out(
    labels: np.ndarray,
    clusters: np.ndarray,
    n_clusters: int,
    *,
    new_group: np.ndarray | None = None,
    recall: float = 0.95,
    variant: str = "hardnet",
) -> np.ndarray:
    r"""FPR at ``recall`` of the records without cluster :math:`c`, for every :math:`c` (the
    leave-one-cluster-out jackknife), from the one order of all records: :math:`O(n \log n)`
    instead of :math:`O(C\,n)`; variants ``"hardnet"``, ``"matchnet"`` and ``"threshold"``.

    Without cluster :math:`c` (:math:`p_c` positives, :math:`n_c` negatives) the sweep stops at
    the first candidate position :math:`s` (a positive for ``"hardnet"`` / ``"matchnet"``, a tie
    group's end for ``"threshold"``) with :math:`p(s) - p_c(s) \ge k'`: :math:`p(s)` the
    positives up to :math:`s`, :math:`p_c(s)` those of :math:`c`, and :math:`k'` the count that
    reaches the recall (:math:`\lceil r (P - p_c) \rceil`, for ``"threshold"`` the smallest
    :math:`x` with :math:`x / (P - p_c) \ge r`). The left side does not decrease in :math:`s`, so
    a binary search finds :math:`s`; then :math:`FP' = n(s) - n_c(s)`.

    Parameters
    ----------
    labels : ndarray of bool, shape (m,)
        Sorted records' labels (as :func:`fpr_at_recall_sorted`).
    clusters : ndarray of int, shape (m,)
        Each sorted record's cluster in ``range(n_clusters)``.
    n_clusters : int
    new_group : ndarray of bool, shape (m,), optional
        :func:`tie_groups` of the sorted scores (needed for ``"threshold"``).
    recall : float
    variant : {"hardnet", "matchnet", "threshold"}

    Returns
    -------
    ndarray of float64, shape (n_clusters,)
        NaN where the records left have no positive or no negative.

    Examples
    --------
    >>> y = np.array([1, 0, 1, 0, 1, 0], dtype=bool)
    >>> fpr_at_recall_leave_one_out(y, np.array([0, 1, 1, 0, 2, 2]), 3, recall=0.5).tolist()
    [0.5, 0.0, 0.0]
    """
    labels = np.asarray(labels, dtype=bool)
    if variant in ("hardnet", "matchnet"):
        candidates = np.flatnonzero(labels)
    elif variant == "threshold" and new_group is not None:
        candidates = np.flatnonzero(np.append(np.asarray(new_group, dtype=bool)[1:], True))
    else:
        raise InvalidInputError(
            f"variant must be hardnet, matchnet or threshold (with new_group); got {variant!r}"
        )
    clusters = np.asarray(clusters, dtype=np.int64)
    p_c = np.bincount(clusters[labels], minlength=n_clusters)
    n_c = np.bincount(clusters[~labels], minlength=n_clusters)
    n_pos, n_neg = int(labels.sum()) - p_c, int(np.count_nonzero(~labels)) - n_c
    defined = (n_pos > 0) & (n_neg > 0)
    if not defined.any():
        return np.full(n_clusters, np.nan)
    k = np.ceil(recall * n_pos).astype(np.int64)  # the float64 product, as the reference
    needed = _least_count(recall, n_pos) if variant == "threshold" else k
    positives = np.cumsum(labels)[candidates]
    own_positives = _padded_ranks(clusters[labels], np.flatnonzero(labels), n_clusters)
    low = np.zeros(n_clusters, dtype=np.int64)
    high = np.full(n_clusters, len(candidates) - 1)
    while (low < high).any():  # the first candidate with enough positives left
        middle = (low + high) // 2
        own = (own_positives <= candidates[middle][:, None]).sum(axis=1)
        reached = positives[middle] - own >= needed
        active = low < high  # (an undefined cluster never reaches; it stops at the end)
        high = np.where(active & reached, middle, high)
        low = np.where(active & ~reached, middle + 1, low)
    stop = candidates[low]
    own_negatives = _padded_ranks(clusters[~labels], np.flatnonzero(~labels), n_clusters)
    fp = np.cumsum(~labels)[stop] - (own_negatives <= stop[:, None]).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = fp / (fp + k) if variant == "matchnet" else fp / n_neg
    return np.where(defined, value, np.nan)
