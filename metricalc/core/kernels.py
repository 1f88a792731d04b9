"""Unlabeled NumPy kernels: every function works on the last axis and knows nothing of xarray.

Inputs are arrays of shape ``(..., N)`` (N samples or candidates per list); the leading axes are
independent lists. Work is vectorized over lists and processed in row chunks of about
``CHUNK_ELEMENTS`` values, so temporary memory stays bounded whatever the number of lists. The
labeled wrappers validate the input before calling; the one check made here is the per-chunk NaN
check of ``rank_stats`` (a separate pass over the matrix would cost a third of its time).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property

import numpy as np

from metricalc.errors import InvalidInputError

CHUNK_ELEMENTS = 1 << 20
"""Approximate number of matrix elements processed at once (bounds temporary memory)."""

MAX_THREADS = 4
"""Upper bound on the threads of the rank-statistics kernel (one row block each)."""

def rows_per_chunk(n_cols: int) -> int:
    """Rows of ``n_cols`` values that fit in one chunk of about ``CHUNK_ELEMENTS`` values."""
    return max(1, CHUNK_ELEMENTS // max(n_cols, 1))


def row_chunks(n_rows: int, n_cols: int) -> Iterator[slice]:
    """Yield row slices covering ``n_rows`` rows of ``n_cols`` values, one chunk each."""
    step = rows_per_chunk(n_cols)
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


def as_rows(a: np.ndarray) -> np.ndarray:
    """View ``(..., N)`` as ``(rows, N)``."""
    return a.reshape(-1, a.shape[-1])


class SortedRows:
    """The rows of a 2-D chunk in decreasing-score order: labels gathered at once, scores on demand.

    With ``stable=True`` equal scores keep their input order (MATLAB ``sort(..., 'descend')``,
    NumPy mergesort of the negated scores); otherwise the order inside a group of equal scores is
    unspecified, which is fine for every computation that treats a tie group as a whole. Gathers
    use flat indices (``np.take``), several times faster than ``np.take_along_axis``; the sorted
    scores are gathered whole only when needed (:attr:`score`), else at a few positions
    (:meth:`score_at`).
    """

    def __init__(self, relevant: np.ndarray, score: np.ndarray, *, stable: bool) -> None:
        rows, n = score.shape
        if score.dtype == bool:
            score = score.astype(np.int8)
        # order-reversing key that never rounds: ~x = -x - 1 for integers (no overflow), -x else
        key = ~score if score.dtype.kind in "iu" else -score
        order = np.argsort(key, axis=-1, kind="stable" if stable else None)
        order += (np.arange(rows) * n)[:, None]  # flat indices: one contiguous gather per array
        self.order = order
        self.rel = np.take(np.ascontiguousarray(relevant).ravel(), order)
        self._flat_score = np.ascontiguousarray(score).ravel()

    @cached_property
    def score(self) -> np.ndarray:
        """Scores in sorted order, shape (rows, N)."""
        return np.take(self._flat_score, self.order)

    def score_at(self, flat_positions: np.ndarray) -> np.ndarray:
        """Sorted scores at flat positions of the (rows, N) sorted layout."""
        scores: np.ndarray = self._flat_score[self.order.ravel()[flat_positions]]
        return scores


def count_true(mask: np.ndarray) -> np.ndarray:
    """Number of True values along the last axis (uint8 view, int32 or int64 accumulator:
    several times faster than ``mask.sum(-1)``, which accumulates booleans as int64)."""
    counts: np.ndarray = np.add.reduce(
        mask.view(np.uint8), axis=-1, dtype=_count_dtype(mask.shape[-1])
    )
    return counts


def augmented_operand(values: np.ndarray, *, query: bool) -> np.ndarray:
    """One side of the squared-distance product, float32, one row per vector.

    ``[-2a, |a|^2, 1]`` for queries and ``[b, 1, |b|^2]`` for candidates, so that one matrix
    product gives ``|a|^2 + |b|^2 - 2 a.b = |a - b|^2`` with no extra pass.

    Raises
    ------
    InvalidInputError
        If a squared norm would overflow float32.
    """
    n, dims = values.shape
    norms = np.einsum("ij,ij->i", values, values, dtype=np.float64)
    if norms.size and norms.max() > float(np.finfo(np.float32).max) / 4:
        raise InvalidInputError(
            f"descriptors: squared norm {norms.max():.3g} overflows float32 L2 distances; "
            "expected descriptors of moderate magnitude (rescale them)"
        )
    out = np.empty((n, dims + 2), dtype=np.float32)
    if query:
        np.multiply(values, -2.0, out=out[:, :dims])
        out[:, dims], out[:, dims + 1] = norms, 1.0
    else:
        out[:, :dims] = values
        out[:, dims], out[:, dims + 1] = 1.0, norms
    return out


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
    pieces = [
        _compact_counts(rel_rows[rows], score_rows[rows], pad_to)
        for rows in row_chunks(rel_rows.shape[0], n)
    ]
    width = max(piece[0].shape[1] for piece in pieces)
    tp, fp, cutoff = (
        np.concatenate([_pad_right(piece[i], width) for piece in pieces]) for i in range(3)
    )
    positives, negatives = tp[:, -1:], fp[:, -1:]
    shape = (*batch, width)
    return (
        tp.reshape(shape),
        fp.reshape(shape),
        (positives - tp).reshape(shape),
        (negatives - fp).reshape(shape),
        cutoff.reshape(shape),
    )


def _compact_counts(
    rel: np.ndarray, score: np.ndarray, width: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tp, fp and cutoff at the distinct thresholds of each row of one chunk, ``width`` wide
    (default: the chunk's largest number of distinct scores), padded as ``confusion_counts``."""
    rows, n = rel.shape
    ordered = SortedRows(rel, score, stable=False)
    rel, score = ordered.rel, ordered.score
    tp_cum = np.cumsum(rel, axis=1, dtype=np.int64)
    fp_cum = np.arange(1, n + 1) - tp_cum
    is_end = np.ones(rel.shape, dtype=bool)
    np.not_equal(score[:, 1:], score[:, :-1], out=is_end[:, :-1])
    if width is None:
        width = int(count_true(is_end).max())
    tp = np.repeat(tp_cum[:, -1:], width, axis=1)
    fp = np.repeat(fp_cum[:, -1:], width, axis=1)
    cutoff = np.full((rows, width), np.nan)
    r, c = np.nonzero(is_end)
    dest = np.cumsum(is_end, axis=1)[r, c] - 1
    tp[r, dest] = tp_cum[r, c]
    fp[r, dest] = fp_cum[r, c]
    cutoff[r, dest] = score[r, c]
    return tp, fp, cutoff


def _pad_right(a: np.ndarray, width: int) -> np.ndarray:
    """Widen ``a`` to ``width`` columns: counts repeat their last column, cutoffs get NaN."""
    missing = width - a.shape[1]
    if missing == 0:
        return a
    if a.dtype.kind == "f":
        return np.pad(a, ((0, 0), (0, missing)), constant_values=np.nan)
    return np.pad(a, ((0, 0), (0, missing)), mode="edge")


# --------------------------------------------------------------------------------------------
# Average precision: each function returns the *sum* of per-relevant contributions per row;
# the caller divides by the number of relevant items R (and applies the zero-division policy).
# --------------------------------------------------------------------------------------------


def relevant_positions(rel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat position, row, 1-based order ``k`` and row start (in the flat list) of every relevant
    item of a sorted chunk; ``k`` is the number of relevant items at or before the position."""
    rows, n = rel.shape
    flat = np.flatnonzero(rel)
    row = flat // n
    per_row = np.bincount(row, minlength=rows)
    row_first = (np.cumsum(per_row) - per_row)[row]
    k = np.arange(1, flat.size + 1) - row_first
    return flat, row, k, row_first


def precision_sum_in_order(rel: np.ndarray) -> np.ndarray:
    """sum_i rel_i * tp_i / i over positions i (1-based), in the given order (stable methods)."""
    flat, row, k, _ = relevant_positions(rel)
    position = flat - row * rel.shape[1]
    return np.bincount(row, weights=k / (position + 1), minlength=rel.shape[0])


def _harmonic_span(c: np.ndarray, n: np.ndarray) -> np.ndarray:
    """sum_{p=1..n} 1 / (c + p) = psi(c + n + 1) - psi(c + 1), exact 1 / (c + 1) when n = 1."""
    from scipy.special import digamma  # on first use: SciPy doubles a plain AP's start-up time

    span = 1 / (c + 1.0)
    tied = n > 1
    c, n = c[tied].astype(np.float64), n[tied].astype(np.float64)
    span[tied] = digamma(c + n + 1) - digamma(c + 1)
    return span


def _tied_relevant(ordered: SortedRows, flat: np.ndarray) -> np.ndarray:
    """Whether each relevant item (flat sorted position) shares its score with a neighbour."""
    rows, n = ordered.rel.shape
    position = flat % n
    score = ordered.score_at(flat)
    before = ordered.score_at(np.maximum(flat - 1, 0))
    after = ordered.score_at(np.minimum(flat + 1, rows * n - 1))
    tied: np.ndarray = ((position > 0) & (before == score)) | (
        (position < n - 1) & (after == score)
    )
    return tied


def precision_sum(ordered: SortedRows, tie_policy: str) -> np.ndarray:
    """Per-row sum of precision at the relevant items of a sorted chunk, ties under ``tie_policy``
    (each item credited by :func:`precision_at_relevant` from the counts of its tie group).

    Only groups holding a relevant item matter. When no relevant item is tied (checked at the
    relevant items only) every such group is the item alone. Otherwise group bounds come from a
    binary search of each relevant item's flat position among the sorted flat positions of group
    starts, and the relevant items of one group are consecutive in the list of relevant items.
    """
    rel = ordered.rel
    rows, n = rel.shape
    flat, row, k, row_first = relevant_positions(rel)
    if not _tied_relevant(ordered, flat).any():  # every group holding a relevant item is itself
        first = last = flat
        through_last, before = k, k - 1
    else:
        score = ordered.score
        new_group = np.ones(rel.shape, dtype=bool)
        np.not_equal(score[:, 1:], score[:, :-1], out=new_group[:, 1:])
        starts = np.append(np.flatnonzero(new_group), rows * n)  # row starts are group starts
        group = np.searchsorted(starts, flat, side="right") - 1
        first, last = starts[group], starts[group + 1] - 1  # flat bounds of the item's group
        # relevant items of one group are consecutive in ``flat``: find each run's ends
        index = np.arange(flat.size)
        run_start = np.ones(flat.size, dtype=bool)
        np.not_equal(group[1:], group[:-1], out=run_start[1:])
        run_end = np.append(run_start[1:], True)
        first_of_run = np.maximum.accumulate(np.where(run_start, index, 0))
        last_of_run = np.minimum.accumulate(np.where(run_end, index, flat.size)[::-1])[::-1]
        before = first_of_run - row_first  # relevant items before the group
        through_last = last_of_run + 1 - row_first  # tp at the group end
    c0, c1 = first - row * n, last - row * n
    in_group = through_last - before
    weights = precision_at_relevant(c0, c1 - c0 + 1, before, in_group, k - before, tie_policy)
    return np.bincount(row, weights=weights, minlength=rows)


def precision_at_relevant(
    start: np.ndarray,
    size: np.ndarray,
    before: np.ndarray,
    in_group: np.ndarray,
    place: np.ndarray,
    tie_policy: str,
) -> np.ndarray:
    """Precision credited to a relevant item from the counts of its group of equal scores.

    The group occupies 0-based positions c .. c + n - 1 (``start``, ``size``), holds r relevant
    items (``in_group``) with h relevant items ranked before it (``before``); the item is the
    j-th (``place``, 1-based, any fixed order) of the group's relevant items:

    - ``step`` (one threshold per group): (h + r) / (c + n)
    - ``optimistic`` (relevant first): (h + j) / (c + j)
    - ``pessimistic`` (relevant last): (h + j) / (c + n - r + j)
    - ``workbench`` (one relevant item): 1 / (c + 1 + floor(n / 2))
    - ``expected`` (uniformly random order in the group): the group's expected total
      G = sum_{p=1..n} (r / n) (h + 1 + (p - 1)(r - 1)/(n - 1)) / (c + p) shared equally by its r
      relevant items; with A = sum_p 1 / (c + p): G / r = [(h + 1) A + (r - 1)/(n - 1)
      (n - (c + 1) A)] / n.
    """
    c, n, h, r, j = start, size, before, in_group, place
    credit: np.ndarray
    if tie_policy == "step":
        credit = (h + r) / (c + n)
    elif tie_policy == "optimistic":
        credit = (h + j) / (c + j)
    elif tie_policy == "pessimistic":
        credit = (h + j) / (c + n - r + j)
    elif tie_policy == "workbench":
        credit = 1 / (c + 1 + n // 2)
    else:
        A = _harmonic_span(c, n)
        credit = ((h + 1) * A + (r - 1) / np.maximum(n - 1, 1) * (n - (c + 1) * A)) / n
    return credit


def precision_sum_from_rank_stats(
    better: np.ndarray, ties: np.ndarray, score: np.ndarray, valid: np.ndarray, tie_policy: str
) -> np.ndarray:
    """Sum of precision at the relevant items of each list, from their rank statistics alone.

    For lists with few relevant items among many candidates, this avoids sorting: each relevant
    item t has ``better[:, t]`` candidates strictly ahead and ``ties[:, t]`` tied with it (over the
    whole list, :func:`rank_stats`), and its ``score`` (any monotone key where smaller ranks
    first, e.g. a distance) orders it against the other relevant items of its list.

    Parameters
    ----------
    better, ties, score : ndarray, shape (rows, r)
        One column per relevant item; padding columns have ``valid`` False.
    valid : ndarray of bool, shape (rows, r)
    tie_policy : str
        ``step`` or a tie policy, as :func:`precision_at_relevant`.
    """
    key = np.where(valid, score, np.nan)
    other_valid = valid[:, None, :]
    ahead = (key[:, None, :] < key[:, :, None]) & other_valid  # [row, t, u]: u ranks before t
    tied = (key[:, None, :] == key[:, :, None]) & other_valid
    slot = np.arange(key.shape[1])
    earlier_tied = tied & (slot[None, None, :] < slot[None, :, None])
    weights = precision_at_relevant(
        np.maximum(better, 0),
        np.maximum(ties, 0) + 1,
        ahead.sum(axis=2),
        tied.sum(axis=2),
        earlier_tied.sum(axis=2) + 1,
        tie_policy,
    )
    total: np.ndarray = np.where(valid, weights, 0.0).sum(axis=1)
    return total


# --------------------------------------------------------------------------------------------
# Rank statistics of a single relevant item (R = 1)
# --------------------------------------------------------------------------------------------


def _rank_stats_block(
    d_rows: np.ndarray, g_rows: np.ndarray, better: np.ndarray, ties: np.ndarray, block: slice
) -> int:
    """Fill ``better``/``ties`` for the rows of ``block``, chunk by chunk; return the first row
    whose distances hold NaN (checked while the chunk is in cache), or -1."""
    n = d_rows.shape[1]
    step = rows_per_chunk(n)
    mask = np.empty((min(step, block.stop - block.start), n), dtype=bool)
    check_nan = d_rows.dtype.kind == "f"
    for start in range(block.start, block.stop, step):
        rows = slice(start, min(block.stop, start + step))
        d = d_rows[rows]
        if check_nan and np.isnan(d).any():
            return start + int(np.flatnonzero(np.isnan(d).any(axis=1))[0])
        g = g_rows[rows]
        has = g >= 0
        g_dist = d[np.arange(d.shape[0]), np.where(has, g, 0)][:, None]
        m = mask[: d.shape[0]]
        np.less(d, g_dist, out=m)
        b = count_true(m)
        np.equal(d, g_dist, out=m)
        t = count_true(m) - 1
        better[rows] = np.where(has, b, -1)
        ties[rows] = np.where(has, t, -1)
    return -1


def rank_stats(distances: np.ndarray, relevant_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Count candidates strictly closer than, and as close as, the relevant one.

    ``better = #{i != g : d_i < d_g}``, ``ties = #{i != g : d_i == d_g}``; both are -1 where
    ``relevant_index`` is -1 (no relevant item, R = 0). One comparison pass per count over
    cache-sized row chunks (the second pass reads the chunk from cache); counts are reduced as
    uint8 with an int32 accumulator, faster than summing booleans into int64. Row blocks run on
    a thread each, up to one per core and ``MAX_THREADS`` (NumPy releases the GIL), which keeps the
    memory bus busy.

    Raises
    ------
    InvalidInputError
        If a row of float distances holds NaN (named by its flat row index). This is the one
        check done in a kernel: a separate pass over the matrix would cost a third of the time.
    """
    batch, n = distances.shape[:-1], distances.shape[-1]
    d_rows = as_rows(distances)
    g_rows = relevant_index.reshape(-1)
    n_rows = d_rows.shape[0]
    better = np.empty(n_rows, dtype=np.int64)
    ties = np.empty(n_rows, dtype=np.int64)
    workers = max(1, min(os.cpu_count() or 1, MAX_THREADS, n_rows // rows_per_chunk(n)))
    size = -(-n_rows // workers)
    blocks = [slice(lo, min(n_rows, lo + size)) for lo in range(0, n_rows, size)]
    if len(blocks) == 1:
        nan_rows = [_rank_stats_block(d_rows, g_rows, better, ties, blocks[0])]
    else:
        with ThreadPoolExecutor(len(blocks)) as pool:
            nan_rows = list(
                pool.map(lambda blk: _rank_stats_block(d_rows, g_rows, better, ties, blk), blocks)
            )
    bad = [r for r in nan_rows if r >= 0]
    if bad:
        where = np.unravel_index(min(bad), batch) if batch else ()
        raise InvalidInputError(
            "distances must not contain NaN; found NaN in the list at index "
            f"{tuple(map(int, where))}"
        )
    return better.reshape(batch), ties.reshape(batch)


def rank_from_stats(better: np.ndarray, ties: np.ndarray, tie_policy: str) -> np.ndarray:
    """Rank of the relevant item under a tie policy (float; NaN where R = 0)."""
    b = better.astype(np.float64)
    t = ties.astype(np.float64)
    if tie_policy in ("optimistic", "input_order"):  # input_order: ties == 0 (checked by callers)
        rank = 1 + b
    elif tie_policy == "pessimistic":
        rank = 1 + b + t
    elif tie_policy == "workbench":
        rank = 1 + b + np.floor((t + 1) / 2)
    else:
        rank = 1 + b + t / 2
    return np.where(better < 0, np.nan, rank)


def ap_from_stats(better: np.ndarray, ties: np.ndarray, tie_policy: str) -> np.ndarray:
    """AP of one relevant item: 1 / rank, or under ``expected`` the mean of 1 / r over tied ranks.

    ``expected``: (1 / (t + 1)) sum_{r = b + 1}^{b + t + 1} 1 / r
    = (psi(b + t + 2) - psi(b + 1)) / (t + 1)
    with psi the digamma function (exact 1 / (b + 1) when t = 0).
    """
    if tie_policy != "expected":
        return 1 / rank_from_stats(better, ties, tie_policy)  # NaN rank (R = 0) gives NaN
    from scipy.special import digamma  # on first use, as in _harmonic_span

    missing = better < 0
    b = np.where(missing, 0, better).astype(np.float64)
    t = np.where(missing, 0, ties).astype(np.float64)
    spread = (digamma(b + t + 2) - digamma(b + 1)) / (t + 1)
    ap = np.where(t == 0, 1 / (b + 1), spread)
    return np.where(missing, np.nan, ap)


def hit_probability(
    better: np.ndarray, ties: np.ndarray, k: np.ndarray, tie_policy: str
) -> np.ndarray:
    """Probability that the relevant item ranks within the top ``k`` (NaN where R = 0).

    Deterministic policies give 0 or 1 (rank <= k); ``expected`` gives the share of the tied ranks
    b + 1 .. b + t + 1 that are <= k: clip(k - b, 0, t + 1) / (t + 1).
    """
    missing = better[..., None] < 0
    b = np.where(missing, 0, better[..., None]).astype(np.float64)
    t = np.where(missing, 0, ties[..., None]).astype(np.float64)
    if tie_policy == "expected":
        hit = np.clip(k - b, 0, t + 1) / (t + 1)
    else:
        hit = (rank_from_stats(better, ties, tie_policy)[..., None] <= k).astype(np.float64)
    return np.where(missing, np.nan, hit)
