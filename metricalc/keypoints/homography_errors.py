r"""Errors of a homography: symmetric reprojection error, corner error, and their AUC.

docs/experiments.md and :mod:`metricalc.keypoints.homography` (the formulas); the point and matrix
checks every homography module shares. Coordinates: OpenCV's convention, pixel centres at
integers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import project
from metricalc.keypoints.sequences import _check_homography
from metricalc.validation import as_points

__all__ = [
    "AUC_THRESHOLDS",
    "PRECISION_THRESHOLDS",
    "corner_error",
    "error_auc",
    "image_corners",
    "symmetric_error",
]

AUC_THRESHOLDS: tuple[float, ...] = (1.0, 3.0, 5.0)
"""Pixel thresholds of the corner-error AUCs (Glue Factory's HPatches benchmark)."""
PRECISION_THRESHOLDS: tuple[float, ...] = (1.0, 3.0)
"""Pixel thresholds of ``prec@<t>px`` (strict: error < t)."""
_MIN_DET = 1e-12  # |det| of a normalized estimate below this counts as a failed estimate


def _pair(points0: Any, points1: Any) -> tuple[np.ndarray, np.ndarray]:
    p0, p1 = as_points("points0", points0), as_points("points1", points1)
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
    errors: np.ndarray = (forward + backward) / 2.0
    return errors


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
