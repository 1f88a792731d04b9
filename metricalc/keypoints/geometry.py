"""Ground truth by homography: projection, border filtering, nearest keypoint within tau.

docs/keypoints.md: a query keypoint p of image A is projected with H_A_to_B; a projection
with |w| < 1e-12 has no ground truth; a projection outside image B (less the border margin) has
no ground truth (R = 0); otherwise the relevant keypoint is the nearest keypoint of B (Euclidean,
lowest index on ties) if it lies within ``tau`` pixels, else R = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from metricalc.errors import InvalidInputError

W_EPSILON = 1e-12
"""Projections whose homogeneous coordinate satisfies |w| < W_EPSILON have no ground truth."""


def project(H: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Map points with a homography.

    .. math::

        (x', y') = \left(\frac{h_1 \cdot p}{h_3 \cdot p}, \frac{h_2 \cdot p}{h_3 \cdot p}\right),
        \quad p = (x, y, 1)

    Parameters
    ----------
    H : ndarray, shape (3, 3)
        Row-major homography mapping image A to image B.
    points : ndarray, shape (N, 2)
        x, y pixel coordinates in image A.

    Returns
    -------
    projected : ndarray, shape (N, 2)
        NaN where the projection is undefined.
    defined : ndarray of bool, shape (N,)
        False where :math:`|h_3 \cdot p| < 10^{-12}`.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[1.0, 0, 10], [0, 1, 5], [0, 0, 1]])
    >>> project(H, np.array([[100.0, 100.0]]))[0].tolist()
    [[110.0, 105.0]]
    """
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3) or not np.isfinite(H).all():
        raise InvalidInputError(f"a homography must be a finite 3x3 matrix; got shape {H.shape}")
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    homogeneous = pts @ H[:, :2].T + H[:, 2]
    w = homogeneous[:, 2]
    defined = np.abs(w) >= W_EPSILON
    safe_w = np.where(defined, w, 1.0)
    projected = homogeneous[:, :2] / safe_w[:, None]
    projected[~defined] = np.nan
    return projected, defined


def inside(points: np.ndarray, shape: tuple[int, int], border: float) -> np.ndarray:
    """Whether points lie at least ``border`` px inside an image of ``shape`` (height, width).

    A point (x, y) is kept when ``border <= x <= width - 1 - border`` and likewise for y. A
    ``border`` of 0 is no border filter: every point of the image is kept, the whole pixels
    included (pixel centres at integers, so :math:`x \\in [-0.5, W - 0.5]`,
    :math:`y \\in [-0.5, H - 0.5]`), as D2-Net's evaluation matches every keypoint. NaN points
    are outside.

    Examples
    --------
    >>> import numpy as np
    >>> inside(np.array([[40.0, 50.0], [39.9, 50.0], [59.0, 59.0]]), (100, 100), 40).tolist()
    [True, False, True]
    >>> inside(np.array([[99.3, 0.0], [-0.5, 99.5], [99.6, 0.0]]), (100, 100), 0).tolist()
    [True, True, False]
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    height, width = shape
    low, margin = (-0.5, 0.5) if border == 0 else (border, 1 + border)
    with np.errstate(invalid="ignore"):
        return (
            (pts[:, 0] >= low)
            & (pts[:, 0] <= width - margin)
            & (pts[:, 1] >= low)
            & (pts[:, 1] <= height - margin)
        )


@dataclass(frozen=True)
class GroundTruth:
    """Ground truth of the queries of one image pair.

    Attributes
    ----------
    relevant : ndarray of int64, shape (N,)
        Index of the relevant candidate, -1 where R = 0.
    projected : ndarray, shape (N, 2)
        Projection of each query into image B, also where it falls outside B (NaN only where
        |w| < 1e-12): matching accuracy measures a match's error against it.
    distance : ndarray, shape (N,)
        Pixel distance from the projection to the nearest candidate (NaN where there is none).
    """

    relevant: np.ndarray
    projected: np.ndarray
    distance: np.ndarray


def nearest(points: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index (lowest on ties) and Euclidean distance of the nearest candidate of every point.

    A k-d tree (scipy) finds the two nearest candidates; where they are equally far, the exact
    distances to every candidate decide, so the lowest index wins as docs/keypoints.md says. NaN
    points and an empty candidate set give index -1 and distance NaN.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    cand = np.asarray(candidates, dtype=np.float64).reshape(-1, 2)
    index = np.full(len(pts), -1, dtype=np.int64)
    distance = np.full(len(pts), np.nan)
    ok = np.isfinite(pts).all(axis=1)
    if len(cand) == 0 or not ok.any():
        return index, distance
    tree = cKDTree(cand)
    found, where = tree.query(pts[ok], k=2)
    found, where = found.reshape(-1, 2), where.reshape(-1, 2)
    best = where[:, 0].copy()
    tied = np.flatnonzero(found[:, 0] == found[:, 1])  # exact ties: decided by brute force
    if tied.size:
        best[tied] = _lowest_nearest(tree, cand, pts[ok][tied], found[tied, 0])
    index[ok] = best
    distance[ok] = np.hypot(*(cand[best] - pts[ok]).T)
    return index, distance


TIE_RADIUS = 1e-9
"""Relative slack of the ball that collects the candidates of a tied nearest distance."""


def _lowest_nearest(
    tree: cKDTree, candidates: np.ndarray, points: np.ndarray, radius: np.ndarray
) -> np.ndarray:
    """For points whose two nearest candidates are equally far (``radius``, the k-d tree's
    distance): the index of the candidate at the least exact distance (``np.hypot``), lowest
    on ties, among every candidate.

    Only the candidates in a ball slightly larger than ``radius`` around each point can be at
    the least distance, so the exact distances of those alone decide: the same index as an
    ``argmin`` over all candidates, without computing them all.
    """
    balls = tree.query_ball_point(points, radius * (1 + TIE_RADIUS) + TIE_RADIUS)
    sizes = np.fromiter((len(ball) for ball in balls), dtype=np.int64, count=len(balls))
    members = np.fromiter(
        (j for ball in balls for j in sorted(ball)), dtype=np.int64, count=int(sizes.sum())
    )
    owner = np.repeat(np.arange(len(points)), sizes)
    exact = np.hypot(*(candidates[members] - points[owner]).T)
    # per point: the least exact distance first, then the lowest index (members are sorted)
    order = np.lexsort((members, exact, owner))
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    lowest: np.ndarray = members[order[first]]
    return lowest


def ground_truth(
    queries: np.ndarray,
    candidates: np.ndarray,
    H: np.ndarray,
    shape_b: tuple[int, int],
    *,
    tau: float = 3.0,
    border: float = 40.0,
) -> GroundTruth:
    """Relevant candidate of each query of image A among the keypoints of image B.

    Parameters
    ----------
    queries : ndarray, shape (N, 2)
        Query keypoints (x, y) of image A.
    candidates : ndarray, shape (M, 2)
        Keypoints of image B.
    H : ndarray, shape (3, 3)
        Homography from A to B.
    shape_b : (height, width)
        Size of image B.
    tau : float
        Largest pixel distance between the projection and the relevant keypoint (inclusive).
    border : float
        Projections closer than this to the edge of B have no ground truth.

    Examples
    --------
    >>> import numpy as np
    >>> H = np.array([[1.0, 0, 10], [0, 1, 5], [0, 0, 1]])
    >>> gt = ground_truth(np.array([[100.0, 100.0]]), np.array([[114.0, 105.0], [112.0, 105.0]]),
    ...                   H, (300, 300), tau=3.0)
    >>> gt.relevant.tolist(), gt.distance.tolist()
    ([1], [2.0])
    """
    if not np.isfinite(tau) or tau < 0:
        raise InvalidInputError(f"tau must be a non-negative number of pixels; got {tau!r}")
    projected, _ = project(H, queries)
    target = np.where(inside(projected, shape_b, border)[:, None], projected, np.nan)
    index, distance = nearest(target, candidates)
    relevant = np.where(distance <= tau, index, -1)
    return GroundTruth(relevant=relevant, projected=projected, distance=distance)
