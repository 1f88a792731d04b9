"""Unlabeled NumPy kernels: every function works on the last axis and knows nothing of xarray.

Inputs are arrays of shape ``(..., N)`` (N samples or candidates per list); the leading axes are
independent lists. Work is vectorized over lists and processed in row chunks of about
``CHUNK_ELEMENTS`` values, so memory stays bounded whatever the number of lists. No function here
validates its input: the labeled wrappers do, before calling.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.special import digamma

CHUNK_ELEMENTS = 1 << 20
"""Approximate number of matrix elements processed at once (bounds temporary memory)."""

VOC11_RECALLS = np.arange(11) / 10.0
"""PASCAL VOC 2007 recall thresholds 0, 0.1, ..., 1 (computed as k / 10, exact decimals)."""

COCO101_RECALLS = np.linspace(0.0, 1.0, 101)
"""pycocotools recall thresholds (``np.linspace(0, 1, 101)``, bit-identical to COCOeval)."""


def row_chunks(n_rows: int, n_cols: int, chunk_elements: int = CHUNK_ELEMENTS) -> Iterator[slice]:
    """Yield row slices covering ``n_rows`` rows of ``n_cols`` values, about ``chunk_elements`` each."""
    step = max(1, chunk_elements // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


def as_rows(a: np.ndarray) -> np.ndarray:
    """View ``(..., N)`` as ``(rows, N)``."""
    return a.reshape(-1, a.shape[-1])


def descending_order(score: np.ndarray, *, stable: bool) -> np.ndarray:
    """Indices sorting each row of ``score`` by decreasing value.

    With ``stable=True`` equal scores keep their input order (MATLAB ``sort(..., 'descend')``,
    NumPy mergesort of the negated scores); otherwise the order inside a group of equal scores is
    unspecified, which is fine for every computation that treats a tie group as a whole.
    """
    if stable:
        key = -score.astype(np.float64) if score.dtype.kind in "iub" else -score
        return np.argsort(key, axis=-1, kind="stable")
    return np.argsort(score, axis=-1)[:, ::-1]


def sort_rows(
    relevant: np.ndarray, score: np.ndarray, *, stable: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(relevant, score)`` of each row reordered by decreasing score."""
    order = descending_order(score, stable=stable)
    return np.take_along_axis(relevant, order, axis=-1), np.take_along_axis(score, order, axis=-1)


def tie_group_bounds(sorted_score: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """First and last position of the group of equal scores holding each position.

    Parameters
    ----------
    sorted_score : ndarray, shape (rows, N)
        Scores sorted (either direction) along the last axis.

    Returns
    -------
    (start, end) : tuple of ndarray, shape (rows, N), or None
        0-based positions; ``None`` when no row holds two equal scores (every group is a singleton).
    """
    rows, n = sorted_score.shape
    boundary = sorted_score[:, 1:] != sorted_score[:, :-1]
    if boundary.all():
        return None
    position = np.arange(n)
    edge = np.ones((rows, 1), dtype=bool)
    start = np.where(np.concatenate([edge, boundary], axis=1), position, 0)
    np.maximum.accumulate(start, axis=1, out=start)
    end = np.where(np.concatenate([boundary, edge], axis=1), position, n - 1)[:, ::-1]
    end = np.minimum.accumulate(end, axis=1)[:, ::-1]
    return start, end


def _count_dtype(n: int) -> type[np.integer]:
    return np.int32 if n < np.iinfo(np.int32).max else np.int64


# --------------------------------------------------------------------------------------------
# Confusion counts at every distinct threshold
# --------------------------------------------------------------------------------------------


def confusion_counts(
    y_true: np.ndarray, y_score: np.ndarray, *, pad_to: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Confusion counts at each distinct score threshold, thresholds decreasing.

    A sample is predicted positive at threshold ``c`` when ``score >= c``. Row ``i`` has one entry
    per distinct score; rows with fewer distinct scores than the output width are padded by
    repeating their final point (tp = P, fp = N, fn = tn = 0) with cutoff NaN.

    Parameters
    ----------
    y_true : ndarray of bool, shape (..., N)
    y_score : ndarray, shape (..., N)
    pad_to : int, optional
        Output width; default the largest number of distinct scores over rows.

    Returns
    -------
    tp, fp, fn, tn : ndarray of int64, shape (..., K)
    cutoff : ndarray of float64, shape (..., K)
    """
    batch, n = y_score.shape[:-1], y_score.shape[-1]
    rel_rows, score_rows = as_rows(y_true), as_rows(y_score)
    pieces = []
    for rows in row_chunks(rel_rows.shape[0], n):
        rel, score = sort_rows(rel_rows[rows], score_rows[rows], stable=False)
        tp_cum = np.cumsum(rel, axis=1, dtype=np.int64)
        fp_cum = np.arange(1, n + 1) - tp_cum
        is_end = np.ones(rel.shape, dtype=bool)
        is_end[:, :-1] = score[:, 1:] != score[:, :-1]
        pieces.append((tp_cum, fp_cum, score, is_end))
    width = pad_to if pad_to is not None else max(int(p[3].sum(axis=1).max()) for p in pieces)
    n_rows = rel_rows.shape[0]
    tp = np.empty((n_rows, width), dtype=np.int64)
    fp = np.empty((n_rows, width), dtype=np.int64)
    cutoff = np.full((n_rows, width), np.nan)
    offset = 0
    for tp_cum, fp_cum, score, is_end in pieces:
        k = tp_cum.shape[0]
        block = slice(offset, offset + k)
        tp[block] = tp_cum[:, -1:]
        fp[block] = fp_cum[:, -1:]
        r, c = np.nonzero(is_end)
        dest = np.cumsum(is_end, axis=1)[r, c] - 1
        tp[block][r, dest] = tp_cum[r, c]
        fp[block][r, dest] = fp_cum[r, c]
        cutoff[block][r, dest] = score[r, c]
        offset += k
    positives, negatives = tp[:, -1:], fp[:, -1:]
    shape = (*batch, width)
    return (
        tp.reshape(shape),
        fp.reshape(shape),
        (positives - tp).reshape(shape),
        (negatives - fp).reshape(shape),
        cutoff.reshape(shape),
    )


# --------------------------------------------------------------------------------------------
# Average precision: each function returns the *sum* of per-relevant contributions per row;
# the caller divides by the number of relevant items R (and applies the zero-division policy).
# --------------------------------------------------------------------------------------------


def _precision_sum_no_ties(rel: np.ndarray) -> np.ndarray:
    """Sum over relevant positions of precision at that position: sum_i rel_i * tp_i / i."""
    tp = np.cumsum(rel, axis=1, dtype=_count_dtype(rel.shape[1]))
    return np.einsum("ij,ij,j->i", rel, tp, 1.0 / np.arange(1, rel.shape[1] + 1))


def _sum_step(rel: np.ndarray, score: np.ndarray) -> np.ndarray:
    """sum_i rel_i * P(end of i's tie group): tied scores form one threshold."""
    bounds = tie_group_bounds(score)
    if bounds is None:
        return _precision_sum_no_ties(rel)
    end = bounds[1]
    tp = np.cumsum(rel, axis=1, dtype=np.int64)
    precision_at_end = np.take_along_axis(tp, end, axis=1) / (end + 1)
    return np.einsum("ij,ij->i", rel, precision_at_end)


def _sum_ir(rel: np.ndarray, score: np.ndarray, policy: str) -> np.ndarray:
    """Sum of precision at each relevant rank, ties broken by ``policy``.

    For a tie group occupying positions c+1 .. c+n (1-based) with r relevant items and h relevant
    items ranked before it, the contributions are

    - optimistic: relevant first, sum_{j=1..r} (h + j) / (c + j)
    - pessimistic: relevant last, sum_{j=1..r} (h + j) / (c + n - r + j)
    - expected (uniformly random order inside the group):
      sum_{p=1..n} (r / n) (h + 1 + (p - 1)(r - 1)/(n - 1)) / (c + p)
    - workbench (one relevant item): 1 / (c + 1 + floor(n / 2))
    """
    bounds = tie_group_bounds(score)
    if bounds is None:
        return _precision_sum_no_ties(rel)
    start, end = bounds
    tp = np.cumsum(rel, axis=1, dtype=np.int64)
    before = np.take_along_axis(tp, start, axis=1) - np.take_along_axis(rel, start, axis=1)
    in_group = np.take_along_axis(tp, end, axis=1) - before
    size = end - start + 1
    if policy == "expected":
        p = np.arange(rel.shape[1]) - start + 1
        spread = (p - 1) * (in_group - 1) / np.maximum(size - 1, 1)
        contribution = in_group / size * (before + 1 + spread) / (start + p)
        return contribution.sum(axis=1)
    j = tp - before
    if policy == "optimistic":
        rank = start + j
    elif policy == "pessimistic":
        rank = end + 1 - in_group + j
    else:  # workbench, one relevant item per row
        rank = start + 1 + size // 2
        return np.einsum("ij,ij->i", rel, 1.0 / rank)
    return np.einsum("ij,ij->i", rel, tp / rank)


def _sum_vlfeat(rel: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Sum of precision at each relevant position in stable decreasing-score order."""
    return _precision_sum_no_ties(rel)


def _area_trapezoid(rel: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """Trapezoid area under the PR points starting at (tp, fp) = (0, 0) (hpatches python)."""
    rows, n = rel.shape
    tp = np.zeros((rows, n + 1))
    np.cumsum(rel, axis=1, out=tp[:, 1:])
    retrieved = np.arange(n + 1)
    small = 1e-10
    precision = np.maximum(tp, small) / np.maximum(retrieved, small)
    recall = tp / np.maximum(n_relevant, small)[:, None]
    return np.trapezoid(precision, recall, axis=1)


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
    return precision.mean(axis=1)


STABLE_METHODS = frozenset({"vlfeat", "trapezoid", "voc11", "coco101"})


def average_precision_rows(
    y_true: np.ndarray,
    y_score: np.ndarray,
    n_relevant: np.ndarray,
    *,
    method: str,
    ties: str,
) -> np.ndarray:
    """AP of every row; rows with ``n_relevant == 0`` give NaN (the caller applies the policy).

    Parameters
    ----------
    y_true : ndarray of bool, shape (..., N)
    y_score : ndarray, shape (..., N)
    n_relevant : ndarray of int, shape (...)
        R, the number of relevant items of each list (>= positives present).
    method : {"step", "ir", "vlfeat", "trapezoid", "voc11", "coco101"}
    ties : str
        Tie policy for ``"ir"``; ignored otherwise.
    """
    batch, n = y_score.shape[:-1], y_score.shape[-1]
    rel_rows, score_rows = as_rows(y_true), as_rows(y_score)
    R_rows = np.broadcast_to(n_relevant, batch).reshape(-1).astype(np.float64)
    out = np.empty(rel_rows.shape[0])
    stable = method in STABLE_METHODS
    for rows in row_chunks(rel_rows.shape[0], n):
        rel, score = sort_rows(rel_rows[rows], score_rows[rows], stable=stable)
        rel = rel.astype(np.float64 if method in ("trapezoid",) else np.int8)
        R = R_rows[rows]
        if method == "trapezoid":
            out[rows] = _area_trapezoid(rel, R)
            continue
        if method in ("voc11", "coco101"):
            recalls = VOC11_RECALLS if method == "voc11" else COCO101_RECALLS
            out[rows] = _interpolated(rel, R, recalls)
            continue
        if method == "step":
            total = _sum_step(rel, score)
        elif method == "ir":
            total = _sum_ir(rel, score, ties)
        else:
            total = _sum_vlfeat(rel, score)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows] = total / R
    out[R_rows == 0] = np.nan
    return out.reshape(batch)


# --------------------------------------------------------------------------------------------
# Rank statistics of a single relevant item (R = 1)
# --------------------------------------------------------------------------------------------


def rank_stats(
    distances: np.ndarray, relevant_index: np.ndarray, *, chunk_elements: int = CHUNK_ELEMENTS
) -> tuple[np.ndarray, np.ndarray]:
    """Count candidates strictly closer than, and as close as, the relevant one.

    ``better = #{i != g : d_i < d_g}``, ``ties = #{i != g : d_i == d_g}``; both are -1 where
    ``relevant_index`` is -1 (no relevant item, R = 0). One comparison pass per count over
    cache-sized row chunks; counts are reduced as uint8 with an int32 accumulator, which is
    faster than summing booleans into int64.
    """
    batch, n = distances.shape[:-1], distances.shape[-1]
    d_rows = as_rows(distances)
    g_rows = relevant_index.reshape(-1)
    better = np.full(g_rows.shape, -1, dtype=np.int64)
    ties = np.full(g_rows.shape, -1, dtype=np.int64)
    acc = _count_dtype(n)
    step = max(1, chunk_elements // max(n, 1))
    mask = np.empty((min(step, d_rows.shape[0]), n), dtype=bool)
    for rows in row_chunks(d_rows.shape[0], n, chunk_elements):
        d = d_rows[rows]
        g = g_rows[rows]
        has = g >= 0
        g_dist = d[np.arange(d.shape[0]), np.where(has, g, 0)][:, None]
        m = mask[: d.shape[0]]
        np.less(d, g_dist, out=m)
        b = np.add.reduce(m.view(np.uint8), axis=1, dtype=acc)
        np.equal(d, g_dist, out=m)
        t = np.add.reduce(m.view(np.uint8), axis=1, dtype=acc) - 1
        better[rows] = np.where(has, b, -1)
        ties[rows] = np.where(has, t, -1)
    return better.reshape(batch), ties.reshape(batch)


def rank_from_stats(better: np.ndarray, ties: np.ndarray, policy: str) -> np.ndarray:
    """Rank of the relevant item under a tie policy (float; NaN where R = 0)."""
    b = better.astype(np.float64)
    t = ties.astype(np.float64)
    if policy == "optimistic":
        rank = 1 + b
    elif policy == "pessimistic":
        rank = 1 + b + t
    elif policy == "workbench":
        rank = 1 + b + np.floor((t + 1) / 2)
    else:
        rank = 1 + b + t / 2
    return np.where(better < 0, np.nan, rank)


def ap_from_stats(better: np.ndarray, ties: np.ndarray, policy: str) -> np.ndarray:
    """AP of one relevant item: 1 / rank, or under ``expected`` the mean of 1 / r over the tied ranks.

    ``expected``: (1 / (t + 1)) sum_{r = b + 1}^{b + t + 1} 1 / r = (psi(b + t + 2) - psi(b + 1)) / (t + 1)
    with psi the digamma function (exact 1 / (b + 1) when t = 0).
    """
    missing = better < 0
    b = np.where(missing, 0, better).astype(np.float64)
    t = np.where(missing, 0, ties).astype(np.float64)
    if policy == "expected":
        spread = (digamma(b + t + 2) - digamma(b + 1)) / (t + 1)
        ap = np.where(t == 0, 1 / (b + 1), spread)
    else:
        ap = 1 / rank_from_stats(np.where(missing, 0, better), t, policy)
    return np.where(missing, np.nan, ap)


def hit_probability(better: np.ndarray, ties: np.ndarray, k: np.ndarray, policy: str) -> np.ndarray:
    """Probability that the relevant item ranks within the top ``k`` (NaN where R = 0).

    Deterministic policies give 0 or 1 (rank <= k); ``expected`` gives the share of the tied ranks
    b + 1 .. b + t + 1 that are <= k: clip(k - b, 0, t + 1) / (t + 1).
    """
    b = better[..., None].astype(np.float64)
    t = ties[..., None].astype(np.float64)
    if policy == "expected":
        hit = np.clip(k - b, 0, t + 1) / (t + 1)
    else:
        hit = (rank_from_stats(better, ties, policy)[..., None] <= k).astype(np.float64)
    return np.where(better[..., None] < 0, np.nan, hit)
