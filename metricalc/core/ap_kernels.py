"""Unlabeled NumPy kernels of average precision over ranked lists: every method of
:func:`metricalc.core.ranking.average_precision` on the last axis (see docs/metrics.md).

Rows are processed in the row chunks of :mod:`metricalc.core.kernels` (bounded memory); the
precision sums at the relevant items come from there too.
"""

from __future__ import annotations

import numpy as np

from metricalc.core.kernels import (
    SortedRows,
    as_rows,
    precision_sum,
    precision_sum_in_order,
    relevant_positions,
    row_chunks,
)

VOC11_RECALLS = np.arange(0.0, 1.1, 0.1)
"""PASCAL VOC 2007 recall levels as py-faster-rcnn computes them (``np.arange(0, 1.1, 0.1)``:
0.30000000000000004, 0.6000000000000001 and 0.7000000000000001 included, bit for bit)."""

COCO101_RECALLS = np.linspace(0.0, 1.0, 101)
"""pycocotools recall thresholds (``np.linspace(0, 1, 101)``, bit-identical to COCOeval)."""


TRAPEZOID_EPS = 1e-10
r"""hpatches-benchmark's guard :math:`\epsilon` of the ``"trapezoid"`` AP (``utils/metrics.py``)."""


def trapezoid_credit(rank: np.ndarray, order: np.ndarray) -> np.ndarray:
    r"""Area credited by the ``"trapezoid"`` AP to the ``order``-th relevant item (1-based, s) at
    1-based ``rank`` (r), before the division by :math:`\max(R, \epsilon)`.

    With points :math:`(r_i, p_i)`, :math:`p_i = \max(tp_i, \epsilon) / \max(i, \epsilon)`,
    recall grows by :math:`1/R` only at a relevant item, so its trapezoid is
    :math:`(p_{r-1} + p_r) / (2R)` with :math:`tp_{r-1} = s - 1`, :math:`tp_r = s`:

    .. math:: c(r, s) = rac{1}{2}\left(rac{\max(s - 1, \epsilon)}{\max(r - 1, \epsilon)}
        + rac{s}{r}
ight)

    (:math:`p_0 = 1`). Examples: ``trapezoid_credit(1, 1)`` is 1, ``trapezoid_credit(3, 2)``
    is (1/2 + 2/3) / 2.
    """
    before = np.maximum(order - 1, TRAPEZOID_EPS) / np.maximum(rank - 1, TRAPEZOID_EPS)
    credit: np.ndarray = (before + order / rank) / 2
    return credit


def trapezoid_ap_from_ranks(ranks: np.ndarray, n_relevant: np.ndarray | float) -> np.ndarray:
    r"""The ``"trapezoid"`` AP of lists given by the increasing 1-based ranks of their relevant
    items (axis -1): :math:`\sum_s c(r_s, s) / \max(R, \epsilon)` (:func:`trapezoid_credit`),
    0 where R = 0 (no NaN: hpatches-benchmark's value). Relevant items missing from ``ranks``
    (R larger than their number) count as never retrieved.
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    order = np.arange(1, ranks.shape[-1] + 1, dtype=np.float64)
    total = trapezoid_credit(ranks, order).sum(axis=-1)
    return np.asarray(total / np.maximum(n_relevant, TRAPEZOID_EPS))


def _area_trapezoid(rel: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """Trapezoid area under the PR points starting at (tp, fp) = (0, 0) (hpatches python), from
    the rank and order of every relevant item (:func:`trapezoid_credit`)."""
    flat, row, k, _ = relevant_positions(rel)
    rank = flat - row * rel.shape[1] + 1
    credit = trapezoid_credit(rank.astype(np.float64), k.astype(np.float64))
    total = np.bincount(row, weights=credit, minlength=rel.shape[0])
    area: np.ndarray = total / np.maximum(n_relevant, TRAPEZOID_EPS)
    return area


def _interpolated(rel: np.ndarray, n_relevant: np.ndarray, recalls: np.ndarray) -> np.ndarray:
    """Mean interpolated precision at ``recalls`` (VOC 11-point, COCO 101-point).

    With per-position points (stable order) recall_i = tp_i / R and precision_i = tp_i / i, the
    interpolated precision at t is max_{i : recall_i >= t} precision_i (0 when no point reaches
    t). Because recall only grows at relevant positions, the first point with recall >= t is the
    m-th relevant position, m the smallest integer with fl(m / R) >= t, computed exactly here.
    """
    rows, n = rel.shape
    tp = np.cumsum(rel, axis=1, dtype=np.int64)
    envelope = tp / np.arange(1, n + 1)
    envelope = np.maximum.accumulate(envelope[:, ::-1], axis=1)[:, ::-1]
    R = n_relevant.astype(np.float64)[:, None]
    safe_R = np.where(R > 0, R, 1.0)
    m = np.floor(recalls * R)
    m = np.where((m >= 1) & ((m - 1) / safe_R >= recalls), m - 1, m)
    m = np.where(m / safe_R >= recalls, m, m + 1).astype(np.int64)
    # the first point with recall >= t is the m-th relevant position (m = 0: the first position)
    present = tp[:, -1:]
    reachable = m <= present
    r, c = np.nonzero(rel)
    relevant_position = np.zeros((rows, max(int(present.max()), 1) + 1), dtype=np.int64)
    relevant_position[r, tp[r, c]] = c
    first = np.take_along_axis(relevant_position, np.minimum(m, present), axis=1)
    precision = np.where(reachable, np.take_along_axis(envelope, first, axis=1), 0.0)
    mean: np.ndarray = precision.mean(axis=1)
    return mean


STABLE_METHODS = frozenset({"vlfeat", "trapezoid", "voc11", "coco101"})


def average_precision_rows(
    y_true: np.ndarray,
    y_score: np.ndarray,
    n_relevant: np.ndarray,
    *,
    method: str,
    tie_policy: str,
) -> np.ndarray:
    """AP of every row; rows with ``n_relevant == 0`` give NaN (the caller applies the policy).

    Parameters
    ----------
    y_true : ndarray of bool, shape (..., N)
    y_score : ndarray, shape (..., N)
    n_relevant : ndarray of int, shape (...)
        R, the number of relevant items of each list (>= positives present).
    method : {"step", "ir", "vlfeat", "trapezoid", "voc11", "coco101"}
    tie_policy : str
        Tie policy for ``"ir"``; ignored otherwise.
    """
    batch, n = y_score.shape[:-1], y_score.shape[-1]
    rel_rows, score_rows = as_rows(y_true), as_rows(y_score)
    R_rows = np.broadcast_to(n_relevant, batch).reshape(-1).astype(np.float64)
    out = np.empty(rel_rows.shape[0])
    stable = method in STABLE_METHODS
    for rows in row_chunks(rel_rows.shape[0], n):
        ordered = SortedRows(rel_rows[rows], score_rows[rows], stable=stable)
        rel = ordered.rel
        if method in ("vlfeat", "trapezoid") and ordered.score.dtype.kind == "f":
            rel = rel & (ordered.score != -np.inf)  # their toolkits never retrieve -inf scores
        R = R_rows[rows]
        if method == "trapezoid":
            out[rows] = _area_trapezoid(rel, R)
            continue
        if method in ("voc11", "coco101"):
            recalls = VOC11_RECALLS if method == "voc11" else COCO101_RECALLS
            out[rows] = _interpolated(rel, R, recalls)
            continue
        if method == "vlfeat":
            total = precision_sum_in_order(rel)
        else:
            total = precision_sum(ordered, "step" if method == "step" else tie_policy)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows] = total / R
    out[R_rows == 0] = np.nan
    return out.reshape(batch)
