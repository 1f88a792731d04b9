"""Homography estimators by name: plain DLT and OpenCV's robust ones, pluggable.

:func:`estimate_homography` runs an estimator of :func:`available_estimators` (``DLT``,
``RANSAC``, ``USAC_MAGSAC``, ``USAC_DEFAULT``, ``LMEDS``, and any added by
:func:`register_estimator`); :func:`ransac_thresholds` reads the ``ransac_th`` setting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.keypoints.dlt import MIN_MATCHES, dlt_homography
from metricalc.keypoints.homography_errors import _normalized, _pair
from metricalc.validation import is_real

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_MAX_ITERS",
    "DEFAULT_RANSAC_THRESHOLDS",
    "ESTIMATORS",
    "ROBUST_ESTIMATORS",
    "Estimate",
    "EstimatorFn",
    "available_estimators",
    "estimate_homography",
    "ransac_thresholds",
    "register_estimator",
]

DEFAULT_RANSAC_THRESHOLDS: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
"""The thresholds swept when ``ransac_th`` is -1 (Glue Factory's default range)."""
ROBUST_ESTIMATORS: Mapping[str, int] = {
    "RANSAC": cv2.RANSAC,
    "USAC_MAGSAC": cv2.USAC_MAGSAC,
    "USAC_DEFAULT": cv2.USAC_DEFAULT,
    "LMEDS": cv2.LMEDS,
}
"""OpenCV ``cv2.findHomography`` methods by name."""
DEFAULT_MAX_ITERS = 2000
"""OpenCV's ``maxIters`` unless configured (Glue Factory's OpenCV estimator uses 3000)."""

DEFAULT_CONFIDENCE = 0.995
"""OpenCV's ``confidence`` unless configured (Glue Factory's as well)."""


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
        found = _normalized(H)
        if found is None:
            return failed
        inliers = (
            np.asarray(mask, dtype=bool).reshape(-1)
            if mask is not None
            else np.ones(len(points0), bool)
        )
        return Estimate(found, inliers)

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
    if is_real(value):
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
        if not is_real(item) or not np.isfinite(item) or item <= 0:
            raise InvalidInputError(f"ransac_th={value!r}: {item!r} is not allowed; {expected}")
        out.append(float(item))
    if len(set(out)) != len(out):
        raise InvalidInputError(f"ransac_th={value!r} lists a threshold twice")
    return tuple(out)
