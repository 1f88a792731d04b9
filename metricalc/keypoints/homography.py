r"""Homography estimation from matches and the Glue Factory HPatches metrics (PROTOCOLS.md s. 7).

Per image pair (image 1 -> image k, ground truth :math:`H`), from the matched keypoints
:math:`(p_i, q_i)`:

- **symmetric reprojection error** of a match,
  :math:`e_i = \tfrac12 (\lVert \pi(H p_i) - q_i \rVert + \lVert \pi(H^{-1} q_i) - p_i \rVert)`
  (:math:`\pi` divides by the homogeneous coordinate); ``prec@1px`` and ``prec@3px`` are the
  fractions of matches with :math:`e_i < 1` and :math:`e_i < 3` (strict; 0 for a pair without
  matches);
- **corner error** of an estimate :math:`\hat H`: the mean distance between the four image
  corners :math:`c_j` of image 1 mapped by :math:`\hat H` and by :math:`H`,
  :math:`\tfrac14 \sum_j \lVert \pi(\hat H c_j) - \pi(H c_j) \rVert`, and :math:`+\infty` when the
  estimation fails;
- estimates by plain DLT over all matches (:func:`dlt_homography`; Glue Factory's variant,
  kornia's solver, is :func:`kornia_dlt_homography`, see :data:`DLT_METHODS`) and by OpenCV's
  robust estimators (:data:`ROBUST_ESTIMATORS`: ``RANSAC``, ``USAC_MAGSAC``, ``USAC_DEFAULT``,
  ``LMEDS``), at one or several inlier thresholds (``ransac_th``).

Over all pairs, :func:`error_auc` is the area under the recall-versus-error curve up to a
threshold divided by the threshold (AUC at 1, 3 and 5 px), and :func:`summarize` picks the
threshold with the best mean AUC (by the rule of :data:`RANSAC_SELECTIONS`) and reports the
medians of the per-pair values as ``m*`` keys.

Coordinates follow the rest of :mod:`metricalc.keypoints`: OpenCV's convention, pixel centres
at integers, so the outer corners of a ``W x H`` image are :math:`(-\tfrac12, -\tfrac12)`,
:math:`(W - \tfrac12, -\tfrac12)`, :math:`(W - \tfrac12, H - \tfrac12)` and
:math:`(-\tfrac12, H - \tfrac12)` (the physical corners Glue Factory writes as
:math:`(0, 0) .. (W, H)` in its top-left-corner convention). ``docs/experiments.md`` has the
formulas with a worked example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from scipy.linalg import lapack

from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import project
from metricalc.keypoints.sequences import _check_homography

__all__ = [
    "AUC_THRESHOLDS",
    "DEFAULT_RANSAC_THRESHOLDS",
    "DLT_METHODS",
    "ESTIMATORS",
    "RANSAC_SELECTIONS",
    "ROBUST_ESTIMATORS",
    "Estimate",
    "available_estimators",
    "best_threshold",
    "corner_error",
    "dlt_homography",
    "error_auc",
    "estimate_homography",
    "image_corners",
    "kornia_dlt_homography",
    "pair_homography_metrics",
    "ransac_thresholds",
    "register_estimator",
    "summarize",
    "symmetric_error",
]

AUC_THRESHOLDS: tuple[float, ...] = (1.0, 3.0, 5.0)
"""Pixel thresholds of the corner-error AUCs (Glue Factory's HPatches benchmark)."""

DEFAULT_RANSAC_THRESHOLDS: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
"""The thresholds swept when ``ransac_th`` is -1 (Glue Factory's default range)."""

PRECISION_THRESHOLDS: tuple[float, ...] = (1.0, 3.0)
"""Pixel thresholds of ``prec@<t>px`` (strict: error < t)."""

ROBUST_ESTIMATORS: Mapping[str, int] = {
    "RANSAC": cv2.RANSAC,
    "USAC_MAGSAC": cv2.USAC_MAGSAC,
    "USAC_DEFAULT": cv2.USAC_DEFAULT,
    "LMEDS": cv2.LMEDS,
}
"""OpenCV ``cv2.findHomography`` methods by name."""

DLT_METHODS: tuple[str, ...] = ("svd", "kornia", "gluefactory")
"""How ``H_error_dlt`` is estimated: ``"svd"`` (:func:`dlt_homography`, metricalc's),
``"kornia"`` (:func:`kornia_dlt_homography`, unweighted) and ``"gluefactory"`` (the same weighted
by the matching scores, as Glue Factory's ``eval_homography_dlt`` calls it)."""

RANSAC_SELECTIONS: tuple[str, ...] = ("unrounded", "gluefactory")
"""How :func:`best_threshold` compares the thresholds of a ``ransac_th`` sweep: by the mean of
the unrounded AUCs (``"unrounded"``), or by the mean of the AUCs rounded to 4 decimals as Glue
Factory's ``eval_poses`` does (``"gluefactory"``); the first threshold wins a tie in both."""

DEFAULT_MAX_ITERS = 2000
"""OpenCV's ``maxIters`` unless configured (Glue Factory's OpenCV estimator uses 3000)."""

DEFAULT_CONFIDENCE = 0.995
"""OpenCV's ``confidence`` unless configured (Glue Factory's as well)."""

MIN_MATCHES = 4
"""A homography has 8 degrees of freedom: at least 4 correspondences are needed."""

_MIN_DET = 1e-12  # |det| of a normalized estimate below this counts as a failed estimate


@dataclass(frozen=True)
class Estimate:
    """A homography estimate: ``H`` (3 x 3, float64) or None when estimation failed, and the
    boolean inlier mask over the matches (all False on failure; all True for DLT)."""

    H: np.ndarray | None
    inliers: np.ndarray

    @property
    def success(self) -> bool:
        """Whether an estimate was found."""
        return self.H is not None


EstimatorFn = Callable[[np.ndarray, np.ndarray, float, Mapping[str, Any]], Estimate]
"""``fn(points0, points1, threshold, options) -> Estimate`` of a pluggable estimator."""

_REGISTRY: dict[str, EstimatorFn] = {}


def _points(points: Any, name: str) -> np.ndarray:
    array = np.asarray(points, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise InvalidInputError(f"{name} has shape {array.shape}; expected N x 2 (x, y)")
    if not np.isfinite(array).all():
        raise InvalidInputError(f"{name} contains non-finite values")
    return array


def _pair(points0: Any, points1: Any) -> tuple[np.ndarray, np.ndarray]:
    p0, p1 = _points(points0, "points0"), _points(points1, "points1")
    if len(p0) != len(p1):
        raise InvalidInputError(
            f"points0 has {len(p0)} rows and points1 {len(p1)}; expected one row per match"
        )
    return p0, p1


def _homography(H: Any, name: str = "H") -> np.ndarray:
    """H as float64, refused unless a finite invertible 3 x 3 matrix (as a homography file)."""
    matrix = np.asarray(H, dtype=np.float64)
    _check_homography(matrix, name)
    return matrix


def _apply(H: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Map points with H (:func:`~metricalc.keypoints.geometry.project`); points without a
    projection map to inf."""
    mapped, defined = project(H, points)
    return np.where(defined[:, None], mapped, np.inf)


def _normalized(H: np.ndarray | None) -> np.ndarray | None:
    """H scaled to H[2, 2] = 1 (or unit Frobenius norm), None if not a finite invertible map."""
    if H is None:
        return None
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3) or not np.isfinite(H).all():
        return None
    scale = H[2, 2] if abs(H[2, 2]) > 1e-12 else np.linalg.norm(H)
    if scale == 0:
        return None
    H = H / scale
    if abs(np.linalg.det(H / np.linalg.norm(H))) < _MIN_DET:
        return None
    return H


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def image_corners(shape: tuple[int, int]) -> np.ndarray:
    """The four outer corners of an image of ``shape`` (height, width), pixel centres at integers.

    Examples
    --------
    >>> image_corners((480, 640)).tolist()
    [[-0.5, -0.5], [639.5, -0.5], [639.5, 479.5], [-0.5, 479.5]]
    """
    height, width = (float(v) for v in shape)
    return np.array(
        [[-0.5, -0.5], [width - 0.5, -0.5], [width - 0.5, height - 0.5], [-0.5, height - 0.5]]
    )


def corner_error(H_estimate: Any, H_true: Any, shape: tuple[int, int]) -> float:
    r"""Mean distance of the image corners mapped by the estimate and by the true homography.

    .. math::

        \varepsilon = \frac14 \sum_{j=1}^{4}
            \lVert \pi(\hat H c_j) - \pi(H c_j) \rVert_2

    with :math:`c_j` the outer corners of image 1 (:func:`image_corners`).

    Parameters
    ----------
    H_estimate : ndarray (3, 3) or None
        The estimate; None (a failed estimate), a non-finite or singular matrix gives ``inf``.
    H_true : ndarray (3, 3)
        The ground truth, image 1 -> image k.
    shape : (height, width)
        Size of image 1.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[1.1, 0.02, 5.0], [0.01, 0.95, -3.0], [1e-5, 2e-5, 1.0]])
    >>> shift = np.array([[1.0, 0, 3.0], [0, 1.0, 4.0], [0, 0, 1.0]])   # 5 px everywhere
    >>> round(corner_error(shift @ H, H, (480, 640)), 9), corner_error(None, H, (480, 640))
    (5.0, inf)
    """
    truth = _homography(H_true, "H_true")
    estimate = _normalized(H_estimate)
    if estimate is None:
        return float("inf")
    corners = image_corners(shape)
    with np.errstate(invalid="ignore"):
        distance = np.linalg.norm(_apply(estimate, corners) - _apply(truth, corners), axis=1)
    value = float(np.mean(distance))
    return value if np.isfinite(value) else float("inf")


def symmetric_error(points0: Any, points1: Any, H: Any) -> np.ndarray:
    r"""Symmetric reprojection error of matches under a homography (pixels).

    .. math::

        e_i = \tfrac12 \left( \lVert \pi(H p_i) - q_i \rVert_2
                             + \lVert \pi(H^{-1} q_i) - p_i \rVert_2 \right)

    ``inf`` where a point maps to infinity.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[1.0, 0, 10], [0, 1, 0], [0, 0, 1]])
    >>> symmetric_error([[0.0, 0.0], [5.0, 5.0]], [[10.0, 0.0], [15.0, 7.0]], H).tolist()
    [0.0, 2.0]
    """
    p0, p1 = _pair(points0, points1)
    matrix = _homography(H)
    forward = np.linalg.norm(_apply(matrix, p0) - p1, axis=1)
    backward = np.linalg.norm(_apply(np.linalg.inv(matrix), p1) - p0, axis=1)
    return (forward + backward) / 2.0


def error_auc(errors: Any, thresholds: Iterable[float] = AUC_THRESHOLDS) -> np.ndarray:
    r"""Area under the recall-versus-error curve up to each threshold, divided by the threshold.

    With the errors sorted, :math:`e_{(1)} \le \dots \le e_{(N)}`, the curve joins
    :math:`(0, 0)` and the points :math:`(e_{(i)}, i / N)` by straight lines (the trapezoidal
    rule); at a threshold :math:`t` it keeps the points with :math:`e_{(i)} < t` and stays flat
    from the last of them to :math:`t`:

    .. math::

        \mathrm{AUC}@t = \frac{1}{t} \int_0^t r(e)\, de

    This is the definition of Glue Factory's ``AUCMetric`` (without its rounding to four
    decimals). Failed estimates (``inf``) count in :math:`N` and never below a threshold.

    Parameters
    ----------
    errors : array-like of float
        One error per image pair (``inf`` allowed; NaN is refused).
    thresholds : iterable of float
        Positive thresholds (default 1, 3, 5 px).

    Returns
    -------
    ndarray
        One AUC in [0, 1] per threshold; NaN for an empty error list.

    Examples
    --------
    >>> error_auc([0.5, 2.0, float("inf")], [1.0, 3.0]).tolist()   # by hand: 3/12, 18/12 / 3
    [0.25, 0.5]
    """
    values = np.sort(np.asarray(errors, dtype=np.float64).reshape(-1))
    ts = np.asarray(list(thresholds), dtype=np.float64).reshape(-1)
    if ts.size == 0 or not np.isfinite(ts).all() or (ts <= 0).any():
        raise InvalidInputError(f"AUC thresholds must be positive numbers; got {ts.tolist()}")
    if np.isnan(values).any():
        raise InvalidInputError("errors contain NaN; a failed estimate is +inf, not NaN")
    if (values < 0).any():
        raise InvalidInputError("errors must be non-negative")
    n = values.size
    if n == 0:
        return np.full(ts.size, np.nan)
    points = np.concatenate([[0.0], values])
    recall = np.arange(n + 1, dtype=np.float64) / n
    out = np.empty(ts.size)
    for i, t in enumerate(ts):  # a handful of thresholds; each step is vectorized
        last = int(np.searchsorted(points, t, side="left"))  # points[:last] < t, last >= 1
        x = np.append(points[:last], t)
        y = np.append(recall[:last], recall[last - 1])
        out[i] = np.trapezoid(y, x) / t
    return out


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
    R = np.linalg.qr(A, mode="r")
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
    >>> H = np.array([[0.9, 0.1, 20.0], [-0.05, 1.1, 5.0], [1e-4, -2e-4, 1.0]])
    >>> p = np.array([[0.0, 0], [100, 0], [100, 80], [0, 80], [50, 40]])
    >>> q = (p @ H[:, :2].T + H[:, 2])[:, :2] / (p @ H[2, :2] + H[2, 2])[:, None]
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


def _opencv(method: int) -> EstimatorFn:
    def estimate(
        points0: np.ndarray, points1: np.ndarray, threshold: float, options: Mapping[str, Any]
    ) -> Estimate:
        failed = Estimate(None, np.zeros(len(points0), dtype=bool))
        if len(points0) < MIN_MATCHES:
            return failed
        try:
            H, mask = cv2.findHomography(
                points0,
                points1,
                method,
                ransacReprojThreshold=float(threshold),
                maxIters=int(options.get("max_iters", DEFAULT_MAX_ITERS)),
                confidence=float(options.get("confidence", DEFAULT_CONFIDENCE)),
            )
        except cv2.error:  # degenerate input (e.g. all points collinear)
            return failed
        H = _normalized(H)
        if H is None:
            return failed
        inliers = (
            np.asarray(mask, dtype=bool).reshape(-1)
            if mask is not None
            else np.ones(len(points0), bool)
        )
        return Estimate(H, inliers)

    return estimate


def _dlt(
    points0: np.ndarray, points1: np.ndarray, threshold: float, options: Mapping[str, Any]
) -> Estimate:
    H = dlt_homography(points0, points1)
    return Estimate(H, np.full(len(points0), H is not None))


def register_estimator(name: str, fn: EstimatorFn) -> None:
    """Make ``fn`` available as ``estimator=name`` (e.g. a PoseLib or pycolmap wrapper).

    ``fn(points0, points1, threshold, options) -> Estimate`` receives float64 N x 2 arrays. With
    the ``processes`` scheduler or a dask cluster, register it in a module the workers import.
    """
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"estimator name {name!r}; expected a non-empty string")
    if not callable(fn):
        raise InvalidInputError(f"estimator {name!r} is not callable")
    _REGISTRY[name] = fn


for _name, _method in ROBUST_ESTIMATORS.items():
    register_estimator(_name, _opencv(_method))
register_estimator("DLT", _dlt)

ESTIMATORS: tuple[str, ...] = ("DLT", *ROBUST_ESTIMATORS)
"""The built-in estimator names (more through :func:`register_estimator`)."""


def available_estimators() -> list[str]:
    """Names accepted by ``estimator=``: the built-in ones and those registered.

    Examples
    --------
    >>> available_estimators()
    ['DLT', 'LMEDS', 'RANSAC', 'USAC_DEFAULT', 'USAC_MAGSAC']
    """
    return sorted(_REGISTRY)


def estimate_homography(
    points0: Any,
    points1: Any,
    *,
    estimator: str = "RANSAC",
    threshold: float = 3.0,
    max_iters: int = DEFAULT_MAX_ITERS,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Estimate the homography image 1 -> image k from matched points.

    Parameters
    ----------
    points0, points1 : array-like (N, 2)
        Matched keypoints of image 1 and image k.
    estimator : str
        ``"DLT"`` (plain, all matches), ``"RANSAC"``, ``"USAC_MAGSAC"``, ``"USAC_DEFAULT"``,
        ``"LMEDS"`` (OpenCV ``findHomography``), or a name given to :func:`register_estimator`.
    threshold : float
        Inlier threshold in pixels (``ransacReprojThreshold``; LMEDS and DLT ignore it).
    max_iters, confidence
        OpenCV's ``maxIters`` and ``confidence`` (Glue Factory's OpenCV estimator: 3000 and
        0.995).

    Returns
    -------
    Estimate
        ``H`` None when it fails (fewer than 4 matches, degenerate input).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0, 500, (200, 2))
    >>> q = p + [12.0, -7.0]
    >>> q[:40] = rng.uniform(0, 500, (40, 2))          # 20 % outliers
    >>> e = estimate_homography(p, q, estimator="RANSAC", threshold=2.0)
    >>> bool(np.allclose(e.H, [[1, 0, 12], [0, 1, -7], [0, 0, 1]], atol=1e-6)), int(e.inliers.sum())
    (True, 160)
    """
    if estimator not in _REGISTRY:
        raise InvalidInputError(
            f"unknown estimator {estimator!r}; available: {', '.join(available_estimators())}"
        )
    p0, p1 = _pair(points0, points1)
    if not np.isfinite(threshold) or threshold <= 0:
        raise InvalidInputError(f"threshold={threshold!r}; expected a positive number of pixels")
    options = {"max_iters": max_iters, "confidence": confidence}
    return _REGISTRY[estimator](p0, p1, float(threshold), options)


def ransac_thresholds(value: Any) -> tuple[float, ...]:
    """The thresholds of ``ransac_th``: a positive number, a list of them, or -1 (the default
    sweep :data:`DEFAULT_RANSAC_THRESHOLDS`).

    Examples
    --------
    >>> ransac_thresholds(2), ransac_thresholds([1, 0.5]), len(ransac_thresholds(-1))
    ((2.0,), (1.0, 0.5), 6)
    """
    expected = "expected a positive number of pixels, a non-empty list of them, or -1"
    if isinstance(value, bool):
        raise InvalidInputError(f"ransac_th={value!r}; {expected}")
    if isinstance(value, int | float | np.integer | np.floating):
        if value == -1:
            return DEFAULT_RANSAC_THRESHOLDS
        values = [value]
    elif isinstance(value, Sequence) and not isinstance(value, str):
        values = list(value)
    else:
        raise InvalidInputError(f"ransac_th={value!r}; {expected}")
    if not values:
        raise InvalidInputError(f"ransac_th={value!r}; {expected}")
    out = []
    for item in values:
        if (
            isinstance(item, bool)
            or not isinstance(item, int | float | np.integer | np.floating)
            or not np.isfinite(item)
            or item <= 0
        ):
            raise InvalidInputError(f"ransac_th={value!r}: {item!r} is not allowed; {expected}")
        out.append(float(item))
    if len(set(out)) != len(out):
        raise InvalidInputError(f"ransac_th={value!r} lists a threshold twice")
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Per pair and summary
# --------------------------------------------------------------------------------------------


def pair_homography_metrics(
    keypoints0: Any,
    keypoints1: Any,
    matches0: Any,
    H_true: Any,
    shape0: tuple[int, int],
    *,
    estimator: str = "RANSAC",
    thresholds: Sequence[float] = (3.0,),
    max_iters: int = DEFAULT_MAX_ITERS,
    confidence: float = DEFAULT_CONFIDENCE,
    dlt: str = "svd",
    scores0: Any = None,
) -> dict[str, Any]:
    """The Glue Factory metrics of one image pair.

    Parameters
    ----------
    keypoints0, keypoints1 : array-like (N0, 2), (N1, 2)
        Keypoints of image 1 and image k.
    matches0 : array-like of int (N0,)
        Index into ``keypoints1`` of each keypoint of image 1, -1 where unmatched.
    H_true : ndarray (3, 3)
        Ground truth image 1 -> image k.
    shape0 : (height, width)
        Size of image 1 (for the corner error).
    estimator, thresholds, max_iters, confidence
        The robust estimator and its inlier thresholds (one estimate per threshold).
    dlt : str
        The estimate of ``H_error_dlt`` (:data:`DLT_METHODS`): ``"svd"`` (:func:`dlt_homography`),
        ``"kornia"`` or ``"gluefactory"`` (:func:`kornia_dlt_homography`, the latter weighted by
        ``scores0``).
    scores0 : array-like of float (N0,), optional
        The matching score of each keypoint of image 1 (read where matched); needed by
        ``dlt="gluefactory"``.

    Returns
    -------
    dict
        ``prec@1px``, ``prec@3px``, ``num_matches``, ``num_keypoints`` (mean of the two images'
        counts), ``H_error_dlt`` (floats), and ``H_error_ransac``, ``ransac_inl``,
        ``ransac_inl%`` as float arrays over ``thresholds``.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[1.0, 0, 10], [0, 1, 5], [0, 0, 1]])
    >>> k0 = np.array([[50.0, 50], [150, 60], [140, 170], [60, 150], [100, 100]])
    >>> k1 = k0 + [10, 5]
    >>> m = pair_homography_metrics(k0, k1, np.arange(5), H, (200, 200), estimator="DLT")
    >>> m["prec@1px"], m["num_matches"], round(m["H_error_dlt"], 9), m["H_error_ransac"].round(9)
    (1.0, 5, 0.0, array([0.]))
    """
    k0, k1 = _points(keypoints0, "keypoints0"), _points(keypoints1, "keypoints1")
    m0 = np.asarray(matches0).reshape(-1)
    if m0.shape != (len(k0),) or not np.issubdtype(m0.dtype, np.integer):
        raise InvalidInputError(
            f"matches0 has shape {m0.shape} and dtype {m0.dtype}; expected {len(k0)} integers"
        )
    if (m0 >= len(k1)).any() or (m0 < -1).any():
        raise InvalidInputError(f"matches0 holds indices outside -1 .. {len(k1) - 1}")
    if dlt not in DLT_METHODS:
        raise InvalidInputError(f"dlt={dlt!r}; expected one of {', '.join(DLT_METHODS)}")
    truth = _homography(H_true, "H_true")
    matched = m0 >= 0
    p0, p1 = k0[matched], k1[m0[matched]]
    scores = None
    if scores0 is not None:
        all_scores = np.asarray(scores0, dtype=np.float64).reshape(-1)
        if all_scores.shape != (len(k0),):
            raise InvalidInputError(
                f"scores0 has shape {all_scores.shape}; expected ({len(k0)},), one per keypoint"
            )
        scores = all_scores[matched]
    errors = symmetric_error(p0, p1, truth)
    result: dict[str, Any] = {}
    for t in PRECISION_THRESHOLDS:
        result[f"prec@{t:g}px"] = float(np.mean(errors < t)) if errors.size else 0.0
    result["num_matches"] = int(matched.sum())
    result["num_keypoints"] = (len(k0) + len(k1)) / 2.0
    result["H_error_dlt"] = corner_error(_dlt_estimate(dlt, p0, p1, scores), truth, shape0)
    H_error, inl, share = [], [], []
    for t in thresholds:
        found = estimate_homography(
            p0, p1, estimator=estimator, threshold=t, max_iters=max_iters, confidence=confidence
        )
        H_error.append(corner_error(found.H, truth, shape0))
        inl.append(float(found.inliers.sum()))
        share.append(float(found.inliers.sum()) / max(len(p0), 1))
    result["H_error_ransac"] = np.asarray(H_error)
    result["ransac_inl"] = np.asarray(inl)
    result["ransac_inl%"] = np.asarray(share)
    return result


SCALAR_KEYS = ("prec@1px", "prec@3px", "num_matches", "num_keypoints", "H_error_dlt")
"""Per-pair values that do not depend on the robust threshold."""

SWEEP_KEYS = ("H_error_ransac", "ransac_inl", "ransac_inl%")
"""Per-pair values of the robust estimator, one per threshold."""


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else float("nan")


def best_threshold(aucs: Any, selection: str = "unrounded") -> int:
    r"""Index of the best threshold of a ``ransac_th`` sweep, from its AUCs.

    Threshold :math:`j` scores the mean of its AUCs,
    :math:`\tfrac1T \sum_t \mathrm{AUC}_{j,t}` (``"unrounded"``, metricalc's rule) or
    :math:`\tfrac1T \sum_t \mathrm{round}(\mathrm{AUC}_{j,t}, 4)` (``"gluefactory"``: Glue
    Factory's ``cal_error_auc`` returns ``np.round(auc, 4)`` and ``eval_poses`` picks
    ``max(mAAs, key=mAAs.get)`` over their means). The first threshold with the highest score
    wins (as Python's ``max``: a later one must score strictly higher).

    Parameters
    ----------
    aucs : array-like (thresholds, auc thresholds)
        The AUCs of each threshold of the sweep, in sweep order.
    selection : str
        ``"unrounded"`` or ``"gluefactory"`` (:data:`RANSAC_SELECTIONS`).

    Examples
    --------
    >>> aucs = [[0.12349, 0.5, 0.7], [0.12344, 0.50004, 0.70004]]  # rounding flips the pick
    >>> best_threshold(aucs), best_threshold(aucs, "gluefactory")
    (1, 0)
    >>> aucs = [[0.40004, 0.6, 0.8], [0.40001, 0.60004, 0.8]]  # rounding ties them: the first
    >>> best_threshold(aucs), best_threshold(aucs, "gluefactory")
    (1, 0)
    """
    if selection not in RANSAC_SELECTIONS:
        raise InvalidInputError(
            f"selection={selection!r}; expected one of {', '.join(RANSAC_SELECTIONS)}"
        )
    values = np.asarray(aucs, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0:
        raise InvalidInputError(f"aucs has shape {values.shape}; expected (thresholds, AUCs)")
    if selection == "gluefactory":
        values = np.round(values, 4)
    scores = values.mean(axis=1)
    best = 0
    for j in range(1, len(scores)):  # a handful of thresholds; Python max's tie rule
        if scores[j] > scores[best]:
            best = j
    return best


def summarize(
    pairs: Mapping[str, Any],
    thresholds: Sequence[float],
    *,
    auc_thresholds: Sequence[float] = AUC_THRESHOLDS,
    selection: str = "unrounded",
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    r"""Aggregate per-pair metrics the way Glue Factory's HPatches benchmark does.

    For every robust threshold :math:`\theta`, the AUCs of ``H_error_ransac`` at
    ``auc_thresholds`` and their mean (``mAA``); the best :math:`\theta` is the one with the
    highest mean AUC, by :func:`best_threshold` with ``selection`` (``"unrounded"``, or
    ``"gluefactory"``: the AUCs rounded to 4 decimals before the mean; the first on ties); the
    reported values are never rounded. Reported at it: ``H_error_ransac@<t>px``,
    ``H_error_ransac_mAA``, ``ransac_th``; always: ``H_error_dlt@<t>px``; and the medians of the
    per-pair values as ``m<key>`` (``mprec@1px``, ``mnum_matches``, ``mH_error_dlt``,
    ``mH_error_ransac``, ``mransac_inl%``, ...).

    Parameters
    ----------
    pairs : mapping
        :data:`SCALAR_KEYS` -> array over pairs, :data:`SWEEP_KEYS` -> array (pair, threshold).
    thresholds : sequence of float
        The robust thresholds, in the order of the sweep columns.
    selection : str
        The rule of :func:`best_threshold` (:data:`RANSAC_SELECTIONS`).

    Returns
    -------
    summary : dict
        Key -> float (inf or NaN possible: a median of failed estimates).
    sweep : dict
        ``str(threshold)`` -> ``{"H_error_ransac@<t>px": ..., "H_error_ransac_mAA": ...}``.

    Examples
    --------
    >>> import numpy as np
    >>> pairs = {"prec@1px": np.array([1.0, 0.5]), "prec@3px": np.array([1.0, 1.0]),
    ...          "num_matches": np.array([10, 20]), "num_keypoints": np.array([50.0, 60.0]),
    ...          "H_error_dlt": np.array([0.5, np.inf]),
    ...          "H_error_ransac": np.array([[0.5, 4.0], [2.0, 0.2]]),
    ...          "ransac_inl": np.array([[8.0, 9.0], [15.0, 18.0]]),
    ...          "ransac_inl%": np.array([[0.8, 0.9], [0.75, 0.9]])}
    >>> summary, sweep = summarize(pairs, [1.0, 3.0])
    >>> summary["ransac_th"], summary["mH_error_ransac"], summary["mnum_matches"]
    (1.0, 1.25, 15.0)
    """
    ths = [float(t) for t in thresholds]
    sweep_values = {key: np.asarray(pairs[key], dtype=np.float64) for key in SWEEP_KEYS}
    for key, values in sweep_values.items():
        if values.ndim != 2 or values.shape[1] != len(ths):
            raise InvalidInputError(
                f"pairs[{key!r}] has shape {values.shape}; expected (pairs, {len(ths)})"
            )
    labels = [f"@{t:g}px" for t in auc_thresholds]
    sweep: dict[str, dict[str, float]] = {}
    all_aucs = []
    for j, th in enumerate(ths):
        aucs = error_auc(sweep_values["H_error_ransac"][:, j], auc_thresholds)
        entry = {f"H_error_ransac{label}": float(a) for label, a in zip(labels, aucs, strict=True)}
        entry["H_error_ransac_mAA"] = float(np.mean(aucs))
        sweep[f"{th:g}"] = entry
        all_aucs.append(aucs)
    best = best_threshold(all_aucs, selection)
    summary: dict[str, float] = {}
    for key in SCALAR_KEYS:
        summary[f"m{key}"] = _median(np.asarray(pairs[key], dtype=np.float64))
    for key in SWEEP_KEYS:
        summary[f"m{key}"] = _median(sweep_values[key][:, best])
    dlt = error_auc(np.asarray(pairs["H_error_dlt"], dtype=np.float64), auc_thresholds)
    for label, value in zip(labels, dlt, strict=True):
        summary[f"H_error_dlt{label}"] = float(value)
    summary.update(sweep[f"{ths[best]:g}"])
    summary["ransac_th"] = ths[best]
    return summary, sweep
