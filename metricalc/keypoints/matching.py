"""Descriptor distances and per-query rank statistics of one image pair, chunked over queries.

Distances come from one BLAS GEMM per query chunk with augmented matrices, so that the product
is the squared distance itself with no extra pass:

.. math::

    [-2a, \\|a\\|^2, 1] \\cdot [b, 1, \\|b\\|^2]^T
    = \\|a\\|^2 + \\|b\\|^2 - 2 a \\cdot b = \\|a - b\\|^2

For binary descriptors (uint8 packed bits) the bits are unpacked to 0/1 floats, and the same
product is the Hamming distance. Both are exact in float32 for integer-valued descriptors (SIFT,
bits) of up to 2**24 / 255**2 = 258 dimensions; for real-valued descriptors the rounding error is
about 1e-7 of the squared norms. Ranking uses squared distances (monotone in the distance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metricalc.core import kernels
from metricalc.validation import Boolean, Nullable, Real, validate_params

GEMM_CHUNK_ELEMENTS = 1 << 22
"""Distance-matrix elements computed per query chunk (16 MiB of float32)."""


@dataclass(frozen=True)
class PairMatches:
    """Per-query results of matching the queries of image A against the candidates of image B.

    Distances are Euclidean (L2) or Hamming, not squared; NaN where undefined.
    """

    better: np.ndarray  # int64, -1 where R = 0
    ties: np.ndarray  # int64, -1 where R = 0
    nn_index: np.ndarray  # int64 index of the nearest candidate (lowest on ties), -1 if none
    nn_distance: np.ndarray
    nn2_distance: np.ndarray
    gt_distance: np.ndarray
    nn_mutual: np.ndarray  # bool: this query is its nearest neighbour's nearest query
    squared: np.ndarray | None = None  # (N, M) float32 squared distances, if kept


def _augmented(descriptors: np.ndarray, *, query: bool) -> np.ndarray:
    """:func:`~metricalc.core.kernels.augmented_operand` of descriptors, bits unpacked first."""
    values = np.unpackbits(descriptors, axis=1) if descriptors.dtype == np.uint8 else descriptors
    return kernels.augmented_operand(values.astype(np.float32, copy=False), query=query)


def prepare_queries(descriptors: np.ndarray) -> np.ndarray:
    """Query side of the augmented product: ``[-2a, |a|^2, 1]`` (float32, one row per query)."""
    return _augmented(descriptors, query=True)


def prepare_candidates(descriptors: np.ndarray) -> np.ndarray:
    """Candidate side, transposed once: ``[b, 1, |b|^2]^T`` (float32, one column per candidate)."""
    return np.ascontiguousarray(_augmented(descriptors, query=False).T)


def squared_distances(queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Squared L2 (or Hamming) distances of prepared queries to prepared candidates, float32.

    One BLAS product; tiny negative values from rounding are left in place (they rank as 0 would).
    """
    distances: np.ndarray = queries @ candidates
    return distances


EXACT_FLOAT32 = 1 << 24
"""Whole numbers up to 2**24 are exact in float32."""


def exact_products(descriptors: np.ndarray) -> bool:
    r"""Whether :func:`squared_distances` of these descriptors is exact, whatever the order in
    which BLAS sums the products (which depends on its number of threads and the shapes).

    True for packed bits (uint8) and for whole-number rows (OpenCV's SIFT) whose largest squared
    norm :math:`m` satisfies :math:`4m < 2^{24}`: every term of the augmented product is then a
    whole number, and every partial sum is at most
    :math:`|a|^2 + |b|^2 + \sum_i |2 a_i b_i| \le 2(|a|^2 + |b|^2) \le 4m` in magnitude, so no
    sum is ever rounded.

    Examples
    --------
    >>> import numpy as np
    >>> exact_products(np.array([[3.0, 4.0]], np.float32)), exact_products(np.array([[0.5]]))
    (True, False)
    """
    if descriptors.dtype == np.uint8:
        return bool(4 * 8 * descriptors.shape[-1] < EXACT_FLOAT32)
    values = np.asarray(descriptors, dtype=np.float64)
    if not np.isfinite(values).all() or not (values == np.rint(values)).all():
        return False
    largest = float(np.einsum("ij,ij->i", values, values).max(initial=0.0))
    return 4 * largest < EXACT_FLOAT32


def _distance(squared: np.ndarray, binary: bool) -> np.ndarray:
    squared = np.maximum(squared, 0.0).astype(np.float64)
    return squared if binary else np.sqrt(squared)


def match_pair(
    query_descriptors: np.ndarray,
    candidate_descriptors: np.ndarray,
    relevant: np.ndarray,
    *,
    keep_squared: bool = False,
) -> PairMatches:
    """Rank statistics and nearest neighbours of every query among the candidates.

    Parameters
    ----------
    query_descriptors : ndarray, shape (N, D)
        float (L2) or uint8 packed bits (Hamming).
    candidate_descriptors : ndarray, shape (M, D)
        Same kind as the queries.
    relevant : ndarray of int, shape (N,)
        Relevant candidate of each query, -1 where R = 0.
    keep_squared : bool
        Also return the (N, M) float32 matrix of squared distances exactly as ranked
        (``PairMatches.squared``), for a caller that needs the same products again (the
        scene's verification and retrieval lists, :func:`metricalc.keypoints.bojanic.scene_tasks`).

    Returns
    -------
    PairMatches
        better / ties as :func:`metricalc.rank_stats` on the distances (squared distances for L2,
        which rank identically), nearest and second nearest distances, the distance to the
        relevant candidate, and whether each query is the nearest query of its nearest
        neighbour (mutual nearest neighbours). Ties go to the lowest index on both sides, as
        ``argmax`` / ``torch.max`` give them in D2-Net's ``mnn_matcher``: query :math:`i` with
        nearest candidate :math:`j` is mutual when the lowest-index query nearest to :math:`j`
        is :math:`i`, so every candidate has at most one mutual query.
    """
    n, m = len(query_descriptors), len(candidate_descriptors)
    binary = query_descriptors.dtype == np.uint8
    better = np.full(n, -1, dtype=np.int64)
    ties = np.full(n, -1, dtype=np.int64)
    nn_index = np.full(n, -1, dtype=np.int64)
    nn_sq = np.full(n, np.nan)
    nn2_sq = np.full(n, np.nan)
    gt_sq = np.full(n, np.nan)
    if n == 0 or m == 0:
        empty = np.empty((n, m), dtype=np.float32) if keep_squared else None
        mutual = np.zeros(n, dtype=bool)
        return PairMatches(better, ties, nn_index, nn_sq, nn2_sq, gt_sq, mutual, empty)
    queries = prepare_queries(query_descriptors)
    candidates_t = prepare_candidates(candidate_descriptors)
    column_best = np.full(m, np.inf, dtype=np.float32)  # distance to each candidate's nearest query
    column_query = np.full(m, -1, dtype=np.int64)  # that query (the lowest index on ties)
    columns = np.arange(m)
    step = max(1, GEMM_CHUNK_ELEMENTS // m)
    kept = []
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        squared = squared_distances(queries[rows], candidates_t)
        local = np.arange(squared.shape[0])
        g = relevant[rows]
        better[rows], ties[rows] = kernels.rank_stats(squared, g)
        gt_sq[rows] = np.where(g >= 0, squared[local, np.maximum(g, 0)], np.nan)
        best = np.argmin(squared, axis=1)
        nn_index[rows] = best
        nn_sq[rows] = squared[local, best]
        nearest_row = np.argmin(squared, axis=0)  # first minimum: the lowest query index
        nearest = squared[nearest_row, columns]
        closer = nearest < column_best  # strict: on ties the earlier chunk keeps its query
        column_best[closer] = nearest[closer]
        column_query[closer] = nearest_row[closer] + start
        if m > 1:
            squared[local, best] = np.inf
            nn2_sq[rows] = squared.min(axis=1)
            squared[local, best] = nn_sq[rows]  # float32 -> float64 -> float32 is exact
        if keep_squared:
            kept.append(squared)
    nn_mutual = column_query[nn_index] == np.arange(n)
    return PairMatches(
        better=better,
        ties=ties,
        nn_index=nn_index,
        nn_distance=_distance(nn_sq, binary),
        nn2_distance=_distance(nn2_sq, binary),
        gt_distance=_distance(gt_sq, binary),
        nn_mutual=nn_mutual,
        squared=(kept[0] if len(kept) == 1 else np.concatenate(kept)) if keep_squared else None,
    )


@validate_params(mutual=Boolean(), ratio=Nullable(Real(0, 1, closed="right")))
def nn_matches(
    descriptors0: np.ndarray,
    descriptors1: np.ndarray,
    *,
    mutual: bool = True,
    ratio: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Nearest-neighbour matches of image 0's descriptors in image 1 (no ground truth needed).

    Keypoint :math:`i` of image 0 is matched to its nearest neighbour :math:`j` (L2 or Hamming,
    lowest index on ties) when

    - ``mutual``: :math:`i` is the nearest neighbour of :math:`j` among image 0 (lowest index
      on ties, so each keypoint of image 1 is matched at most once);
    - ``ratio``: Lowe's test :math:`d_1 < \rho\, d_2` with :math:`d_1, d_2` the distances of the
      nearest and second-nearest neighbours (fails when there is no second neighbour).

    Parameters
    ----------
    descriptors0, descriptors1 : ndarray (N0, D), (N1, D)
        float32 or uint8 packed bits (both the same kind).
    mutual : bool
        Keep mutual nearest neighbours only.
    ratio : float, optional
        The ratio-test threshold :math:`\rho` in (0, 1]; None for no ratio test.

    Returns
    -------
    matches0 : ndarray of int64 (N0,)
        Index of the match in image 1, -1 where unmatched.
    scores0 : ndarray of float64 (N0,)
        :math:`1 - d_1 / d_2` of the matches (0 where the ratio is undefined: no second
        neighbour, or :math:`d_2 = 0`), 0 where unmatched.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[0.0, 0], [10, 0], [0, 10]], dtype=np.float32)
    >>> b = np.array([[0.5, 0], [9, 0], [50, 50]], dtype=np.float32)
    >>> nn_matches(a, b)[0].tolist(), nn_matches(a, b, mutual=False)[0].tolist()
    ([0, 1, -1], [0, 1, 0])
    """
    n0 = len(descriptors0)
    result = match_pair(descriptors0, descriptors1, np.full(n0, -1, dtype=np.int64))
    keep = result.nn_index >= 0
    if mutual:
        keep &= result.nn_mutual
    d1, d2 = result.nn_distance, result.nn2_distance
    defined = np.isfinite(d2) & (d2 > 0)
    share = np.divide(d1, d2, out=np.ones(n0), where=defined)
    if ratio is not None:
        keep &= np.isfinite(d2) & (d1 < ratio * d2)
    matches0 = np.where(keep, result.nn_index, -1).astype(np.int64)
    scores0 = np.where(keep, 1.0 - share, 0.0)
    return matches0, scores0
