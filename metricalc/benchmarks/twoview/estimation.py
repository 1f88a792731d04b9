r"""Relative pose from matches and intrinsics: OpenCV's essential matrix, as SuperGlue and
Glue Factory estimate it.

SuperGlue ``models/utils.py``: ``estimate_pose`` and Glue Factory
``gluefactory/robust_estimators/relative_pose/opencv.py``: ``OpenCVRelativePoseEstimator``:

1. fewer than 5 matches: no estimate;
2. the points normalised by the intrinsics, :math:`\tilde x = ((x - c_x) / f_x, (y - c_y) / f_y)`;
3. the pixel threshold divided by a mean focal length, :math:`\tau / \bar f`: Glue Factory's
   :math:`\bar f` is the mean of :math:`f_x, f_y` of both cameras (``focal="gluefactory"``),
   SuperGlue's the mean of :math:`(f_{x,0}, f_{y,1}, f_{x,0}, f_{y,1})` (``focal="superglue"``);
4. ``cv2.findEssentialMat(x0, x1, I, method, prob=confidence, threshold=tau / f, maxIters)``
   with ``RANSAC`` or ``USAC_MAGSAC``; no matrix: no estimate;
5. every 3 x 3 candidate in turn through ``cv2.recoverPose(E, x0, x1, I, 1e9, mask=mask)`` (the
   cheirality test; the one mask array is passed to each call, which updates it in place, as
   theirs is); the candidate with the most points in front of both cameras (strictly more than
   the previous best, starting at 0) gives :math:`R, t` and the inlier mask at that point.

``cv2.setRNGSeed(seed)`` runs before ``findEssentialMat``, as in SuperGlue, but changes nothing:
OpenCV's RANSAC and USAC seed their own generators with constants (``RNG rng((uint64)-1)`` in
``modules/calib3d/src/ptsetreg.cpp``), so the same matches always give the same estimate. A
``seed`` other than 0 therefore presents the matches to ``findEssentialMat`` in the order of
``numpy.random.default_rng(seed).permutation(n)``: the same points, other random minimal
samples, another run of the randomised estimator (the inlier mask is returned in the caller's
order). Seed 0 keeps the matches' order: the references' run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import cv2
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import as_points, check_choice, check_integer, check_number

__all__ = [
    "ESTIMATORS",
    "FOCAL_CONVENTIONS",
    "MIN_MATCHES",
    "PoseSettings",
    "RelativePose",
    "estimate_relative_pose",
    "mean_focal",
    "normalize_points",
]

ESTIMATORS: Mapping[str, int] = {"ransac": cv2.RANSAC, "magsac": cv2.USAC_MAGSAC}
"""Estimator names and their ``cv2.findEssentialMat`` methods (Glue Factory's ``ransac`` and
``usac_magsac``)."""
FOCAL_CONVENTIONS: tuple[str, ...] = ("gluefactory", "superglue")
"""How the pixel threshold is normalised: the mean focal length of Glue Factory or SuperGlue."""
MIN_MATCHES = 5
"""Fewer matches give no estimate (the five-point solver's minimum)."""
_CHEIRALITY_DISTANCE = 1e9  # recoverPose's distanceThresh in both references


@dataclass(frozen=True)
class PoseSettings:
    """Every setting of :func:`estimate_relative_pose`, recorded in a result's attrs.

    Defaults: Glue Factory's OpenCV estimator (``ransac``, confidence 0.99999, its threshold
    normalisation) with the 1 px threshold of SuperGlue's ``match_pairs.py`` (Glue Factory's
    estimator defaults to 0.5 px, and its MegaDepth-1500 evaluation sweeps 0.5 to 3 px and keeps
    the best); OpenCV's ``maxIters`` default of 1000 (neither reference sets it); seed 0 (the
    matches in their order; another seed is another run of the estimator, module docstring).
    """

    estimator: str = "ransac"
    threshold: float = 1.0
    confidence: float = 0.99999
    max_iters: int = 1000
    seed: int = 0
    focal: str = "gluefactory"

    def __post_init__(self) -> None:
        check_choice("estimator", self.estimator, tuple(ESTIMATORS))
        check_choice("focal", self.focal, FOCAL_CONVENTIONS)
        if check_number("threshold", self.threshold) <= 0:
            raise InvalidInputError(f"threshold={self.threshold!r}; expected pixels > 0")
        if not 0 < check_number("confidence", self.confidence) < 1:
            raise InvalidInputError(f"confidence={self.confidence!r}; expected a number in (0, 1)")
        check_integer("max_iters", self.max_iters, minimum=1)
        check_integer("seed", self.seed, minimum=0)

    def attrs(self) -> dict[str, Any]:
        """The settings as attrs named ``pose_<setting>`` (``pose_threshold`` in pixels)."""
        return {f"pose_{key}": value for key, value in asdict(self).items()}


@dataclass(frozen=True)
class RelativePose:
    """An estimate: ``R`` (3 x 3) and unit ``t`` (3,) of camera 1 relative to camera 0
    (:math:`x_1 = R x_0 + t`), None when estimation failed; the boolean inlier mask over the
    matches (all False on failure)."""

    R: np.ndarray | None
    t: np.ndarray | None
    inliers: np.ndarray

    @property
    def success(self) -> bool:
        """Whether an estimate was found."""
        return self.R is not None


def _intrinsics(K: Any, name: str) -> np.ndarray:
    matrix = np.asarray(K, dtype=np.float64)
    if matrix.shape != (3, 3) or not np.isfinite(matrix).all():
        raise InvalidInputError(f"{name} is not a finite 3 x 3 matrix (shape {matrix.shape})")
    if not (matrix[0, 0] > 0 and matrix[1, 1] > 0):
        raise InvalidInputError(
            f"{name} has focal lengths fx={matrix[0, 0]!r}, fy={matrix[1, 1]!r}; expected > 0"
        )
    return matrix


def normalize_points(points: Any, K: Any) -> np.ndarray:
    r"""Pixel points in normalised camera coordinates, :math:`((x - c_x)/f_x, (y - c_y)/f_y)`
    (the skew of ``K`` ignored, as both references do).

    Examples
    --------
    >>> K = [[100.0, 0, 50], [0, 200, 20], [0, 0, 1]]
    >>> normalize_points([[150.0, 220.0]], K).tolist()
    [[1.0, 1.0]]
    """
    matrix = _intrinsics(K, "K")
    array = as_points("points", points)
    return np.asarray((array - matrix[[0, 1], [2, 2]]) / matrix[[0, 1], [0, 1]])


def mean_focal(K0: Any, K1: Any, focal: str = "gluefactory") -> float:
    r"""The focal length that divides the pixel threshold.

    ``"gluefactory"``: :math:`(f_{x,0} + f_{y,0} + f_{x,1} + f_{y,1}) / 4`;
    ``"superglue"``: :math:`(f_{x,0} + f_{y,1}) / 2` (its mean of
    ``[K0[0, 0], K1[1, 1], K0[0, 0], K1[1, 1]]``).

    Examples
    --------
    >>> K0 = [[100.0, 0, 0], [0, 200, 0], [0, 0, 1]]
    >>> K1 = [[300.0, 0, 0], [0, 400, 0], [0, 0, 1]]
    >>> mean_focal(K0, K1), mean_focal(K0, K1, "superglue")
    (250.0, 250.0)
    """
    check_choice("focal", focal, FOCAL_CONVENTIONS)
    k0, k1 = _intrinsics(K0, "K0"), _intrinsics(K1, "K1")
    if focal == "superglue":
        return float(np.mean([k0[0, 0], k1[1, 1], k0[0, 0], k1[1, 1]]))
    return float(np.mean([k0[0, 0], k0[1, 1], k1[0, 0], k1[1, 1]]))


def estimate_relative_pose(
    points0: Any,
    points1: Any,
    K0: Any,
    K1: Any,
    settings: PoseSettings | None = None,
) -> RelativePose:
    r"""The relative pose of matched pixel points with known intrinsics (module docstring).

    Parameters
    ----------
    points0, points1 : array_like (N, 2)
        Matched points in pixels (OpenCV's convention, pixel centres at integers), row i of
        one matched to row i of the other.
    K0, K1 : array_like (3, 3)
        Intrinsics of the two cameras.
    settings : PoseSettings, optional
        Estimator, pixel threshold, confidence, iterations, seed and focal convention.

    Returns
    -------
    RelativePose

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.twoview.generator import synthetic_correspondences
    >>> case = synthetic_correspondences(n_points=100, outlier_ratio=0.2, seed=1)
    >>> pose = estimate_relative_pose(case.points0, case.points1, case.K0, case.K1)
    >>> from metricalc.benchmarks.twoview.angular import relative_pose_error
    >>> bool(max(relative_pose_error(case.T_0to1, pose.R, pose.t)) < 5.0)
    True
    """
    settings = settings or PoseSettings()
    p0, p1 = as_points("points0", points0), as_points("points1", points1)
    if len(p0) != len(p1):
        raise InvalidInputError(
            f"points0 has {len(p0)} rows and points1 {len(p1)}; expected one row per match"
        )
    failed = RelativePose(None, None, np.zeros(len(p0), dtype=bool))
    threshold = settings.threshold / mean_focal(K0, K1, settings.focal)
    if len(p0) < MIN_MATCHES:
        return failed
    order = _sample_order(len(p0), settings.seed)
    x0, x1 = normalize_points(p0[order], K0), normalize_points(p1[order], K1)
    cv2.setRNGSeed(settings.seed)
    try:
        E, mask = cv2.findEssentialMat(
            x0, x1, np.eye(3), method=ESTIMATORS[settings.estimator],
            prob=settings.confidence, threshold=threshold, maxIters=settings.max_iters,
        )
    except cv2.error:  # degenerate input (e.g. every point the same)
        return failed
    if E is None or mask is None or E.shape[0] < 3:
        return failed
    found = _best_candidate(np.asarray(E, dtype=np.float64), x0, x1, mask)
    if found is None:
        return failed
    inliers = np.empty_like(found.inliers)
    inliers[order] = found.inliers
    return RelativePose(found.R, found.t, inliers)


def _sample_order(n: int, seed: int) -> np.ndarray:
    """The order in which the ``n`` matches reach the estimator: as given for seed 0, else a
    permutation drawn from ``seed`` (module docstring)."""
    if seed == 0:
        return np.arange(n)
    return np.random.default_rng(seed).permutation(n)


def _best_candidate(
    E: np.ndarray, x0: np.ndarray, x1: np.ndarray, mask: np.ndarray
) -> RelativePose | None:
    best, found = 0, None
    for candidate in np.split(E, len(E) // 3):  # a few 3 x 3 solutions, not one per match
        n, R, t, *_ = cv2.recoverPose(candidate, x0, x1, np.eye(3), _CHEIRALITY_DISTANCE,
                                      mask=mask)
        if n > best:
            best = n
            found = RelativePose(np.asarray(R, float), np.asarray(t, float)[:, 0],
                                 mask.ravel() > 0)
    return found
