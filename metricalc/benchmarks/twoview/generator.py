r"""A synthetic two-view benchmark with exact relative poses, for offline pose evaluation.

Two cameras look at a scene; camera 0 is the world frame and camera 1 has the rotation
:math:`R` and translation :math:`t` (:math:`X_1 = R X_0 + t`), so the true relative pose is
:math:`T_{0\to1} = [R \mid t]`. The intrinsics are :math:`K = [[f, 0, c_x], [0, f, c_y],
[0, 0, 1]]` with :math:`(c_x, c_y) = ((W - 1)/2, (H - 1)/2)` (OpenCV's convention, pixel centres
at integers).

- :func:`synthetic_correspondences`: 3-D points projected into both views, Gaussian pixel noise
  and a share of random outliers (for the estimator's tests);
- :func:`make_twoview_dataset`: images rendered from textured planes (a back wall and a tilted
  panel in front of it, each a scikit-image photograph mapped by its exact homography
  :math:`H = K [R u s_u \mid R v s_v \mid R o + t]`, nearer plane painted last) and a pair list in
  Glue Factory's format, for the end-to-end run with the built-in detectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from metricalc.benchmarks.twoview.pairs import PosePair, write_pairs
from metricalc.datasets.scenes import PHOTOGRAPHS, load_photograph
from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write
from metricalc.validation import Integer, check_integer, check_number, validate_params

__all__ = ["TwoViewCase", "make_twoview_dataset", "random_pose", "synthetic_correspondences"]

IMAGE_SIZE: tuple[int, int] = (640, 480)
"""(width, height) of the synthetic views."""
FOCAL = 500.0
"""Focal length in pixels of both synthetic cameras."""
_SCENE_DEPTH = 6.0  # distance of the scene centre from camera 0


@dataclass(frozen=True)
class TwoViewCase:
    """Matched points of one synthetic pair and its exact geometry."""

    points0: np.ndarray
    points1: np.ndarray
    is_outlier: np.ndarray
    K0: np.ndarray
    K1: np.ndarray
    T_0to1: np.ndarray


def intrinsics(size: tuple[int, int] = IMAGE_SIZE, focal: float = FOCAL) -> np.ndarray:
    """The synthetic cameras' ``K`` for an image of ``size = (width, height)``."""
    width, height = size
    return np.array([[focal, 0, (width - 1) / 2], [0, focal, (height - 1) / 2], [0, 0, 1.0]])


def _rotation(axis: np.ndarray, degrees: float) -> np.ndarray:
    vector = np.deg2rad(degrees) * axis / np.linalg.norm(axis)
    matrix, _ = cv2.Rodrigues(vector)
    return np.asarray(matrix, dtype=np.float64)


def random_pose(rng: np.random.Generator, *, max_angle: float = 20.0) -> np.ndarray:
    r"""A 4 x 4 :math:`T_{0\to1}`: camera 1 moved sideways by about a sixth of the scene
    depth, turned to look back at the scene centre, plus a random rotation of up to
    ``max_angle / 4`` degrees about a random axis."""
    centre = np.array([0.0, 0.0, _SCENE_DEPTH])
    direction = rng.normal(size=3) * np.array([1.0, 0.5, 0.3])
    position = direction / np.linalg.norm(direction) * rng.uniform(0.6, 1.2)
    forward = (centre - position) / np.linalg.norm(centre - position)
    right = np.cross([0.0, 1.0, 0.0], forward)
    right /= np.linalg.norm(right)
    look = np.stack([right, np.cross(forward, right), forward])  # rows: camera axes in world
    wobble = _rotation(rng.normal(size=3), rng.uniform(0, max_angle / 4))
    R = wobble @ look
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, -R @ position
    return T


def _project(K: np.ndarray, X: np.ndarray) -> np.ndarray:
    x = X @ K.T
    return np.asarray(x[:, :2] / x[:, 2:])


def synthetic_correspondences(
    *,
    n_points: int = 200,
    noise_px: float = 0.5,
    outlier_ratio: float = 0.2,
    seed: int = 0,
) -> TwoViewCase:
    """Random 3-D points seen by both cameras of a :func:`random_pose`, with noise and outliers.

    Points are drawn in a box around the scene centre, kept when in front of both cameras and
    inside both images; ``noise_px`` is the standard deviation of the Gaussian noise added to
    every point of view 1; the first ``round(outlier_ratio * n_points)`` matches (flagged in
    ``is_outlier``) get a uniformly random point of image 1 instead.

    Examples
    --------
    >>> case = synthetic_correspondences(n_points=50, seed=3)
    >>> case.points0.shape, int(case.is_outlier.sum())
    ((50, 2), 10)
    """
    n = check_integer("n_points", n_points, minimum=1)
    noise = check_number("noise_px", noise_px, minimum=0.0)
    share = check_number("outlier_ratio", outlier_ratio, minimum=0.0, maximum=1.0)
    rng = np.random.default_rng(check_integer("seed", seed, minimum=0))
    K = intrinsics()
    T = random_pose(rng)
    width, height = IMAGE_SIZE
    kept: list[np.ndarray] = []
    while sum(len(k) for k in kept) < n:  # a few rounds at most: most points are visible
        X = rng.uniform([-3.0, -2.0, -1.5], [3.0, 2.0, 1.5], size=(4 * n, 3))
        X[:, 2] += _SCENE_DEPTH
        X1 = X @ T[:3, :3].T + T[:3, 3]
        inside = (X1[:, 2] > 0.1)
        for x in (_project(K, X), _project(K, X1)):
            inside &= (x[:, 0] >= 0) & (x[:, 0] <= width - 1) & (x[:, 1] >= 0)
            inside &= x[:, 1] <= height - 1
        kept.append(X[inside])
    X = np.concatenate(kept)[:n]
    points0 = _project(K, X)
    points1 = _project(K, X @ T[:3, :3].T + T[:3, 3]) + rng.normal(0, noise, size=(n, 2))
    outliers = np.arange(n) < round(share * n)
    points1[outliers] = rng.uniform([0, 0], [width - 1, height - 1], size=(int(outliers.sum()), 2))
    return TwoViewCase(points0, points1, outliers, K, K.copy(), T)


def _plane_homography(K: np.ndarray, T: np.ndarray, plane: dict[str, np.ndarray],
                      texture: tuple[int, int]) -> np.ndarray:
    """Texture pixel (a, b) -> image pixel of the plane point o + a s_u u + b s_v v."""
    R, t = T[:3, :3], T[:3, 3]
    s_u = plane["size"][0] / max(texture[0] - 1, 1)
    s_v = plane["size"][1] / max(texture[1] - 1, 1)
    columns = np.stack([R @ plane["u"] * s_u, R @ plane["v"] * s_v, R @ plane["origin"] + t], 1)
    return np.asarray(K @ columns)


def _planes(rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """A back wall filling the view and a tilted panel in front of it (painted last)."""
    wall = {"origin": np.array([-7.0, -5.0, _SCENE_DEPTH + 2.0]), "u": np.array([1.0, 0, 0]),
            "v": np.array([0, 1.0, 0]), "size": np.array([14.0, 10.0])}
    tilt = np.deg2rad(rng.uniform(20, 40))
    u = np.array([np.cos(tilt), 0.0, np.sin(tilt)])
    panel = {"origin": np.array([-1.8, -1.4, _SCENE_DEPTH - 1.2]), "u": u,
             "v": np.array([0, 1.0, 0]), "size": np.array([3.2, 2.6])}
    return [wall, panel]


def _render(K: np.ndarray, T: np.ndarray, planes: list[dict[str, np.ndarray]],
            textures: list[np.ndarray]) -> np.ndarray:
    width, height = IMAGE_SIZE
    image = np.zeros((height, width), dtype=np.uint8)
    for plane, texture in zip(planes, textures, strict=True):
        H = _plane_homography(K, T, plane, (texture.shape[1], texture.shape[0]))
        warped = cv2.warpPerspective(texture, H, (width, height), flags=cv2.INTER_LINEAR)
        cover = cv2.warpPerspective(np.full(texture.shape, 255, np.uint8), H, (width, height),
                                    flags=cv2.INTER_NEAREST)
        image[cover > 0] = warped[cover > 0]
    return image


def _gray(name: str) -> np.ndarray:
    image = load_photograph(name, size=640)
    return image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)


@validate_params(n_pairs=Integer(1), seed=Integer(0))
def make_twoview_dataset(root: str | Path, *, n_pairs: int = 8, seed: int = 0) -> Path:
    """Write ``n_pairs`` rendered image pairs and their pair list; returns the list's path.

    ``root/images/<k>_0.png``, ``<k>_1.png`` and ``root/pairs.txt`` (Glue Factory's format,
    names relative to ``root/images``: ``name0 name1 K0 (9) K1 (9) T_0to1 (16)``). Each pair
    takes its two photographs in turn from :data:`~metricalc.datasets.PHOTOGRAPHS` and its own
    :func:`random_pose`; the same arguments write the same files.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.benchmarks.twoview.pairs import read_pairs
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     pairs = read_pairs(make_twoview_dataset(folder, n_pairs=1))
    >>> pairs[0].name0, pairs[0].name1
    ('0_0.png', '0_1.png')
    """
    rng = np.random.default_rng(seed)
    if len(PHOTOGRAPHS) < 2:
        raise InvalidInputError("make_twoview_dataset needs two scikit-image photographs")
    folder = Path(root)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    K = intrinsics()
    pairs = []
    for k in range(n_pairs):
        names = [PHOTOGRAPHS[(2 * k + i) % len(PHOTOGRAPHS)] for i in range(2)]
        planes, T = _planes(rng), random_pose(rng)
        textures = [_gray(name) for name in names]
        for view, pose in enumerate((np.eye(4), T)):
            image = _render(K, pose, planes, textures)
            ok, encoded = cv2.imencode(".png", image)
            if not ok:
                raise InvalidInputError(f"cannot encode image {k}_{view}.png")
            atomic_write(folder / "images" / f"{k}_{view}.png", encoded.tobytes())
        pairs.append(PosePair(f"{k}_0.png", f"{k}_1.png", K, K.copy(), T))
    return write_pairs(folder / "pairs.txt", pairs)
