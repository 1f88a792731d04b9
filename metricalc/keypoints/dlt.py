"""Plain DLT homographies over all matches: metricalc's (SVD) and kornia's (LU), as Glue Factory.

:func:`dlt_homography` (Hartley-normalized, smallest right singular vector) and
:func:`kornia_dlt_homography` (kornia's ``find_homography_dlt``, optionally weighted by the
matching scores); :data:`DLT_METHODS` names the estimate of ``H_error_dlt``.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from scipy.linalg import lapack

from metricalc.errors import InvalidInputError
from metricalc.keypoints.homography_errors import _normalized, _pair

__all__ = ["DLT_METHODS", "MIN_MATCHES", "dlt_homography", "kornia_dlt_homography"]

DLT_METHODS: tuple[str, ...] = ("svd", "kornia", "gluefactory")
"""How ``H_error_dlt`` is estimated: ``"svd"`` (:func:`dlt_homography`, metricalc's),
``"kornia"`` (:func:`kornia_dlt_homography`, unweighted) and ``"gluefactory"`` (the same weighted
by the matching scores, as Glue Factory's ``eval_homography_dlt`` calls it)."""
MIN_MATCHES = 4
"""A homography has 8 degrees of freedom: at least 4 correspondences are needed."""

# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


def _hartley(points: np.ndarray) -> np.ndarray:
    """Similarity moving the centroid to 0 and the root-mean-square distance to it to sqrt(2)."""
    centroid = points.mean(axis=0)
    spread = np.sqrt(np.mean(np.sum((points - centroid) ** 2, axis=1)))
    s = np.sqrt(2.0) / spread if spread > 0 else 1.0
    return np.array([[s, 0.0, -s * centroid[0]], [0.0, s, -s * centroid[1]], [0.0, 0.0, 1.0]])


def dlt_homography(points0: Any, points1: Any) -> np.ndarray | None:
    r"""Plain (normalized) DLT over all correspondences: no robust step, no refinement.

    Both point sets are normalized (centroid 0, root-mean-square distance :math:`\sqrt2`, as
    Hartley proposes); each match gives two rows of :math:`A h = 0`,

    .. math::

        \begin{pmatrix} -x & -y & -1 & 0 & 0 & 0 & u x & u y & u \\
                         0 & 0 & 0 & -x & -y & -1 & v x & v y & v \end{pmatrix} h = 0

    for :math:`(x, y) \mapsto (u, v)`; :math:`h` is the right singular vector of the smallest
    singular value (from the triangular factor of a QR decomposition of :math:`A`), and the
    result is denormalized and scaled to :math:`H_{33} = 1`. Written here because OpenCV's
    ``findHomography(method=0)`` adds a Levenberg-Marquardt refinement, which is not the plain
    DLT of the benchmark.

    Returns
    -------
    ndarray (3, 3) or None
        None with fewer than 4 matches or a degenerate (rank-deficient or singular) solution.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[0.9, 0.1, 20.0], [-0.05, 1.1, 5.0], [1e-4, -2e-4, 1.0]])
    >>> p = np.array([[0.0, 0], [100, 0], [100, 80], [0, 80], [50, 40]])
    >>> q = (p @ H[:, :2].T + H[:, 2])[:, :2] / (p @ H[2, :2] + H[2, 2])[:, None]
    >>> bool(np.allclose(dlt_homography(p, q), H))
    True
    """
    p0, p1 = _pair(points0, points1)
    if len(p0) < MIN_MATCHES:
        return None
    T0, T1 = _hartley(p0), _hartley(p1)
    a = p0 @ T0[:2, :2].T + T0[:2, 2]
    b = p1 @ T1[:2, :2].T + T1[:2, 2]
    x, y, u, v = a[:, 0], a[:, 1], b[:, 0], b[:, 1]
    zeros, ones = np.zeros_like(x), np.ones_like(x)
    rows_u = np.stack([-x, -y, -ones, zeros, zeros, zeros, u * x, u * y, u], axis=1)
    rows_v = np.stack([zeros, zeros, zeros, -x, -y, -ones, v * x, v * y, v], axis=1)
    A = np.concatenate([rows_u, rows_v])
    # A = QR first: R (at most 9 x 9) has the singular values and right singular vectors of A,
    # and its SVD is far cheaper than that of the tall A; with fewer than 9 rows the full SVD
    # supplies the missing (null-space) vector
    R = cast("np.ndarray", np.linalg.qr(A, mode="r"))  # numpy's stub: a QRResult for any mode
    _, singular, vt = np.linalg.svd(R, full_matrices=R.shape[0] < 9)
    if np.count_nonzero(singular > singular[0] * 1e-12) < 8:  # not a unique solution
        return None
    H = np.linalg.inv(T1) @ vt[-1].reshape(3, 3) @ T0
    return _normalized(H)


_KORNIA_EPS = 1e-8  # kornia's eps: added to the mean radius, and the |H33| below which H is kept


def _weights(weights: Any, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any():
        raise InvalidInputError(
            f"weights has shape {w.shape}; expected {n} finite non-negative numbers, one per match"
        )
    return w


def _kornia_normalization(points: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """kornia's ``normalize_points``: weighted centroid to 0, weighted mean distance to sqrt(2)
    (the mean distance, not the root-mean-square one of :func:`_hartley`)."""
    total = w.sum()
    effective = w if total > 0 else np.ones_like(w)  # all-zero weights: unweighted statistics
    total = effective.sum()
    centroid = (points * effective[:, None]).sum(axis=0) / total
    centered = points - centroid
    radius = float((np.linalg.norm(centered, axis=1) * effective).sum() / total)
    s = np.sqrt(2.0) / (radius + _KORNIA_EPS)
    T = np.array([[s, 0.0, -s * centroid[0]], [0.0, s, -s * centroid[1]], [0.0, 0.0, 1.0]])
    return centered * s, T


def _kornia_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The 2N x 9 DLT rows of kornia (per match ``[0, -p, v p]`` then ``[p, 0, -u p]``)."""
    p = np.c_[a, np.ones(len(a))]
    zeros = np.zeros_like(p)
    ax = np.concatenate([zeros, -p, b[:, 1:2] * p], axis=1)
    ay = np.concatenate([p, zeros, -b[:, 0:1] * p], axis=1)
    return np.stack([ax, ay], axis=1).reshape(-1, 9)


def _lu_solve_ones(M: np.ndarray) -> np.ndarray:
    r"""kornia's ``lu`` solver for five or more matches: :math:`M h = \mathbf 1` by a pivoted LU
    (LAPACK ``getrf`` / ``getrs``, as ``torch.linalg.lu_factor_ex`` / ``lu_solve``). An exactly
    zero pivot, or a non-finite solution, falls back to kornia's rank-8 null vector: with only
    the last pivot zero and the others above :math:`\sqrt{\epsilon}` times the largest,
    :math:`h_9 = 1` and :math:`M_{1..8,1..8}\, h_{1..8} = -M_{1..8,9}`; otherwise NaN."""
    lu, piv, info = lapack.dgetrf(M)
    if info == 0:
        h, _ = lapack.dgetrs(lu, piv, np.ones(9))
        if np.isfinite(h).all():
            return np.asarray(h)
    diagonal = np.abs(np.diag(lu))
    floor = max(float(diagonal.max()), np.finfo(np.float64).tiny) * np.sqrt(np.finfo(float).eps)
    if info == 9 and diagonal[:8].min() > floor:
        try:
            head = np.linalg.solve(M[:8, :8], -M[:8, 8])
        except np.linalg.LinAlgError:
            return np.full(9, np.nan)
        return np.append(head, 1.0)
    return np.full(9, np.nan)


def _four_point_null(design: np.ndarray) -> np.ndarray:
    """kornia's ``lu`` solver for exactly four matches: the null vector of the 8 x 9 weighted
    design matrix, scaled to 1 at its largest component (the gauge) and re-solved for the other
    eight from the 8 x 8 system of their columns (kornia finds the null vector for the gauge by
    an LU, here by an SVD: the two differ by rounding only)."""
    null = np.linalg.svd(design)[2][-1]
    gauge = int(np.argmax(np.abs(null)))
    retained = np.delete(np.arange(9), gauge)
    try:
        rest = np.linalg.solve(design[:, retained], -design[:, gauge])
    except np.linalg.LinAlgError:
        rest = (null / null[gauge])[retained]
    return np.insert(rest, gauge, 1.0)


def kornia_dlt_homography(points0: Any, points1: Any, weights: Any = None) -> np.ndarray | None:
    r"""kornia's ``find_homography_dlt`` (kornia 0.9, default ``solver="lu"``), in float64.

    Glue Factory's ``H_error_dlt`` is this estimate with the matching scores as ``weights``
    (``eval_homography_dlt``). With weights :math:`w_i` (1 when None):

    1. each point set is normalized by a similarity taking the weighted centroid to 0 and the
       weighted *mean* distance :math:`\bar d` to it to :math:`\sqrt 2`, scale
       :math:`s = \sqrt2 / (\bar d + 10^{-8})` (:func:`dlt_homography` uses the root-mean-square
       distance);
    2. with five or more matches, the normal matrix of the weighted rows,
       :math:`M = \sum_i w_i (a_i a_i^\top + b_i b_i^\top)` (the rows :math:`a_i, b_i` of
       :func:`dlt_homography`), is solved against a vector of ones, :math:`M h = \mathbf 1`,
       by a pivoted LU; :math:`h = M^{-1} \mathbf 1 = \sum_k v_k (v_k^\top \mathbf 1) / \lambda_k`
       is the smallest eigenvector :math:`v_9` of :math:`M` (the SVD solution) only on exact data:
       on noisy data the other eigenvectors leak in with weights
       :math:`\lambda_9 / \lambda_k`;
    3. with exactly four matches, the null vector of the weighted 8 x 9 design matrix (the exact
       homography through the four points);
    4. the result is denormalized, :math:`T_1^{-1} H T_0`, and divided by :math:`H_{33}` unless
       :math:`|H_{33}| \le 10^{-8}`.

    Glue Factory runs it on float32 tensors; this is the same arithmetic in float64
    (``benchmarks/dlt_vs_gluefactory.py`` measures what float32 changes).

    Parameters
    ----------
    points0, points1 : array-like (N, 2)
        Matched keypoints of image 1 and image k.
    weights : array-like (N,), optional
        Finite non-negative weight of each match (a weight of 0 removes it); None for 1.

    Returns
    -------
    ndarray (3, 3) or None
        None with fewer than 4 matches (kornia raises) or a NaN, non-finite or singular result.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.keypoints.geometry import project
    >>> H = np.array([[1.2, 0.0, -4.0], [0.1, 0.9, 7.0], [2e-4, 0.0, 1.0]])
    >>> p = np.array([[10.0, 10], [90, 15], [85, 70], [12, 65], [40, 30], [60, 50]])
    >>> q, _ = project(H, p)
    >>> bool(np.allclose(kornia_dlt_homography(p, q), H)), kornia_dlt_homography(p[:3], q[:3])
    (True, None)
    """
    p0, p1 = _pair(points0, points1)
    w = _weights(weights, len(p0))
    if len(p0) < MIN_MATCHES:
        return None
    a, T0 = _kornia_normalization(p0, w)
    b, T1 = _kornia_normalization(p1, w)
    rows = _kornia_rows(a, b)
    w_rows = np.repeat(w, 2)
    if len(p0) == MIN_MATCHES:
        h = _four_point_null(rows * w_rows[:, None])
    else:
        h = _lu_solve_ones((rows.T * w_rows) @ rows)
    H = np.linalg.inv(T1) @ h.reshape(3, 3) @ T0
    if abs(H[2, 2]) > _KORNIA_EPS:
        H = H / H[2, 2]
    return _normalized(H)


def _dlt_estimate(method: str, points0: Any, points1: Any, scores: Any) -> np.ndarray | None:
    """The ``H_error_dlt`` estimate of :data:`DLT_METHODS` ``method``."""
    if method == "svd":
        return dlt_homography(points0, points1)
    if method == "kornia":
        return kornia_dlt_homography(points0, points1)
    if scores is None:
        raise InvalidInputError(
            "dlt='gluefactory' weights the DLT by the matching scores: pass scores0"
        )
    return kornia_dlt_homography(points0, points1, scores)
