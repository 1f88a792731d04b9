r"""The geometric changes of the viewpoint scenes ``v_<name>`` of the built-in benchmark.

Image 1 of a viewpoint scene is a photograph of a plane; image :math:`k` shows the same plane
from a second camera that has moved with strength :math:`t` = 0.6, 0.7, 0.8, 0.9, 1 for
k = 2..6 (:data:`STRENGTHS`).

**Homography.** Both cameras have the intrinsics
:math:`K = \begin{pmatrix} f & 0 & c_x \\ 0 & f & c_y \\ 0 & 0 & 1 \end{pmatrix}`
(:math:`c` the image centre, :math:`f = \kappa \max(W, H)`); camera 1 sits at the origin and sees
the plane :math:`Z = 1` (normal :math:`n = e_z`) face on. Camera 2 looks at the plane point
:math:`P = (o_x t, o_y t, 1)` from the distance :math:`2^{-\lambda t}` (zoom :math:`2^{\lambda t}`)
along the direction :math:`T e_z`, where :math:`T` tilts by :math:`\phi t` about the in-plane
axis :math:`(\cos\psi, \sin\psi, 0)`, and it rolls by :math:`\theta t` about its optical axis:

.. math::

    R = R_z(\theta t)\, T^\top, \qquad C = P - 2^{-\lambda t}\, T e_z, \qquad
    H_{1k} = K R \,(I - C n^\top) K^{-1}

(the homography a plane induces between two views, normalised to :math:`H_{33} = 1`). The tilt
shrinks by 10 % steps until the plane's horizon stays out of both images for every k
(:func:`in_front`: every pixel of each image is a point of the plane in front of the other
camera, so ``cv2.warpPerspective`` never samples through infinity); then all magnitudes shrink by
10 % steps until, for every k, at least 25 % of image 1 lands inside image k and at least 25 % of
image k is covered by image 1.

**Second photograph.** Image :math:`k` is

.. math::

    x_k = \operatorname{round}\Big(255 \operatorname{clip}\big(
    (1 + e t)\, G_{\sigma_c t} * W_{H_{1k}}(G_{\sigma_a} * x_1)
    + t \sqrt{q \max(\cdot, 0) + r^2}\; \varepsilon\big)\Big)

with :math:`W_H` = ``cv2.warpPerspective`` (bilinear, black outside) by exactly the written
:math:`H_{1k}`; :math:`G_{\sigma_a}` an anti-aliasing blur where the warp shrinks the image
(:math:`\sigma_a = \tfrac12 \sqrt{\max(1/s^2 - 1, 0)}`, :math:`s` the linear scale of
:math:`H_{1k}` at the image centre), :math:`G_{\sigma_c t}` the second camera's optics, :math:`e`
an exposure change and signal-dependent noise :math:`\varepsilon \sim N(0, 1)`. Blur, exposure
and noise move no pixel, so the geometry is exactly :math:`H_{1k}`.

The per-scene constants and their ranges are in :data:`RANGES`.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from metricalc.errors import InvalidInputError

__all__ = [
    "MIN_FILLED",
    "MIN_VISIBLE",
    "RANGES",
    "STRENGTHS",
    "coverage",
    "in_front",
    "plane_homography",
    "second_photographs",
    "viewpoint_homographies",
    "warp",
]

RANGES: dict[str, tuple[float, float]] = {
    "tilt": (55.0, 70.0),  # phi, degrees at t = 1
    "roll": (30.0, 60.0),  # |theta|, degrees at t = 1
    "zoom": (0.7, 1.0),  # |lambda|, log2 of the zoom at t = 1 (in or out)
    "offset": (0.0, 0.15),  # |o|, share of f at t = 1
    "focal": (0.6, 0.9),  # kappa
    "optics": (0.6, 1.2),  # sigma_c, px at t = 1
    "exposure": (0.05, 0.15),  # |e|
    "shot_noise": (0.5e-3, 1.0e-3),  # q
    "read_noise": (1.0 / 255, 2.0 / 255),  # r
}
"""Range of each per-scene constant (uniform draws)."""

STRENGTHS: tuple[float, ...] = tuple(0.6 + 0.1 * (k - 2) for k in range(2, 7))
"""The strength t of images 2..6: 0.6, 0.7, 0.8, 0.9, 1. A second photograph is never taken from
quite the same place: as in HPatches' ``v_`` sequences, image 2 already shows a large change."""

MIN_VISIBLE = 0.25
"""Least share of image 1 that lands inside every image k."""
MIN_FILLED = 0.25
"""Least share of every image k covered by image 1."""


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    rotation, _ = cv2.Rodrigues(np.asarray(axis, np.float64).reshape(3, 1) * angle)
    return np.asarray(rotation, np.float64)


def plane_homography(
    shape: tuple[int, int],
    *,
    focal: float,
    tilt: float,
    azimuth: float,
    roll: float,
    zoom: float,
    offset: tuple[float, float] = (0.0, 0.0),
) -> np.ndarray:
    r"""The homography from camera 1 to camera 2 of the plane :math:`Z = 1` (module docstring).

    ``shape`` is (height, width); ``focal`` is :math:`\kappa`; ``tilt``, ``azimuth`` and
    ``roll`` are in radians; ``zoom`` is the linear magnification at the point looked at;
    ``offset`` is that point's shift on the plane in units of the distance.

    Examples
    --------
    >>> H = plane_homography((100, 200), focal=1.0, tilt=0.0, azimuth=0.0, roll=0.0, zoom=2.0)
    >>> np.round(H @ [99.5, 49.5, 1], 6).tolist()  # the centre stays; scale 2 around it
    [99.5, 49.5, 1.0]
    >>> float(H[0, 0])
    2.0
    """
    height, width = shape
    f = focal * max(height, width)
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2], [0, 0, 1]])
    tilt_rotation = _rotation(np.array([math.cos(azimuth), math.sin(azimuth), 0.0]), tilt)
    R = _rotation(np.array([0.0, 0.0, 1.0]), roll) @ tilt_rotation.T
    target = np.array([offset[0], offset[1], 1.0])
    centre = target - tilt_rotation[:, 2] / zoom
    H = K @ R @ (np.eye(3) - np.outer(centre, [0.0, 0.0, 1.0])) @ np.linalg.inv(K)
    scaled: np.ndarray = H / H[2, 2]
    return scaled


def coverage(H: np.ndarray, shape: tuple[int, int]) -> tuple[float, float]:
    """Share of image 1 inside image k and share of image k covered by image 1 (33 x 33 grids).

    Examples
    --------
    >>> coverage(np.diag([2.0, 2.0, 1.0]), (100, 100))  # zoom in: a quarter of image 1 stays
    (0.26538108356290174, 1.0)
    """
    height, width = shape
    gx, gy = np.meshgrid(np.linspace(0, width - 1, 33), np.linspace(0, height - 1, 33))
    grid = np.stack([gx.ravel(), gy.ravel(), np.ones(gx.size)])

    def share(M: np.ndarray) -> float:
        p = M @ grid
        w = p[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            x, y = p[0] / w, p[1] / w
        ok = (w > 0) & (x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height - 1)
        return float(ok.mean())

    return share(H), share(np.linalg.inv(H))


def in_front(H: np.ndarray, shape: tuple[int, int]) -> bool:
    """Whether the whole of image 1 is in front of camera 2 and the whole of image k in front
    of camera 1: the homogeneous ``w`` of ``H`` over image 1 and of ``H^-1`` over image k keeps
    one sign and varies by less than 20x (``w`` is linear, so its corners decide).

    Examples
    --------
    >>> horizon = np.array([[1, 0, 0], [0, 1, 0], [0.2, 0, 1]])  # w = 0.2 x + 1
    >>> in_front(np.eye(3), (10, 10)), in_front(horizon, (10, 10))
    (True, False)
    """
    height, width = shape
    corners = np.array(
        [[0, 0, 1], [width - 1, 0, 1], [0, height - 1, 1], [width - 1, height - 1, 1]]
    )
    for M in (H, np.linalg.inv(H)):
        w = corners @ M[2]
        w = w * np.sign(w[0])
        if w.min() <= 0.05 * w.max():
            return False
    return True


def _uniform(rng: np.random.Generator, name: str) -> float:
    low, high = RANGES[name]
    return float(rng.uniform(low, high))


def _sign(rng: np.random.Generator) -> float:
    return float(rng.choice([-1.0, 1.0]))


def viewpoint_homographies(shape: tuple[int, int], rng: np.random.Generator) -> list[np.ndarray]:
    """``H_1_2 .. H_1_6`` of a viewpoint scene of image size ``shape`` (height, width).

    Draws the scene's camera motion from ``rng`` (:data:`RANGES`: tilt, its axis, roll, zoom in
    or out, the shift of the point looked at, the focal length) and applies it with strength
    :math:`t` = :data:`STRENGTHS` (:func:`plane_homography`). While some k leaves less than
    :data:`MIN_VISIBLE` of image 1 inside image k or covers less than :data:`MIN_FILLED` of
    image k, every magnitude shrinks by 10 %; while the plane's horizon enters an image
    (:func:`in_front`), the tilt does.

    Examples
    --------
    >>> Hs = viewpoint_homographies((480, 640), np.random.default_rng(0))
    >>> len(Hs), Hs[0].shape, bool(np.allclose(Hs[0], np.eye(3)))
    (5, (3, 3), False)
    """
    tilt = math.radians(_uniform(rng, "tilt"))
    azimuth = float(rng.uniform(0.0, 2 * math.pi))
    roll = _sign(rng) * math.radians(_uniform(rng, "roll"))
    zoom = _sign(rng) * _uniform(rng, "zoom")
    direction = float(rng.uniform(0.0, 2 * math.pi))
    offset = _uniform(rng, "offset") * np.array([math.cos(direction), math.sin(direction)])
    focal = _uniform(rng, "focal")
    for _ in range(60):
        Hs = [
            plane_homography(
                shape,
                focal=focal,
                tilt=tilt * t,
                azimuth=azimuth,
                roll=roll * t,
                zoom=2.0 ** (zoom * t),
                offset=(offset[0] * t, offset[1] * t),
            )
            for t in STRENGTHS
        ]
        if not all(in_front(H, shape) for H in Hs):
            tilt *= 0.9  # the horizon is in view: only the tilt brings it there
        elif all(
            visible >= MIN_VISIBLE and filled >= MIN_FILLED
            for visible, filled in (coverage(H, shape) for H in Hs)
        ):
            return Hs
        else:
            tilt, roll, zoom, offset = 0.9 * tilt, 0.9 * roll, 0.9 * zoom, 0.9 * offset
    raise InvalidInputError(  # pragma: no cover - 0.9**60 leaves a near-identity warp
        f"cannot keep the viewpoint change inside an image of shape {shape}"
    )


def _centre_scale(H: np.ndarray, shape: tuple[int, int]) -> float:
    """Linear scale of ``H`` at the image centre: the square root of its Jacobian determinant."""
    height, width = shape
    x, y = (width - 1) / 2, (height - 1) / 2
    w = H[2, 0] * x + H[2, 1] * y + H[2, 2]
    determinant = float(np.linalg.det(H)) / w**3
    return math.sqrt(abs(determinant))


def warp(image: np.ndarray, H: np.ndarray) -> np.ndarray:
    """``image`` anti-aliased where ``H`` shrinks it, then warped by exactly ``H`` (bilinear).

    Examples
    --------
    >>> image = np.zeros((20, 30), np.uint8)
    >>> warp(image, np.eye(3)).shape
    (20, 30)
    """
    height, width = image.shape[:2]
    scale = _centre_scale(H, (height, width))
    sigma = 0.5 * math.sqrt(max(1 / scale**2 - 1, 0.0))
    source = image
    if sigma > 0.05:
        source = cv2.GaussianBlur(image, (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REFLECT_101)
    warped: np.ndarray = cv2.warpPerspective(
        source,
        H,
        (width, height),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )
    return warped


def second_photographs(
    image: np.ndarray, homographies: list[np.ndarray], rng: np.random.Generator
) -> list[np.ndarray]:
    """Images 2..6 of a viewpoint scene: ``image`` warped by each H, then photographed again.

    Draws the second camera's constants from ``rng`` (:data:`RANGES`: optics blur, exposure,
    noise), and per image k the noise; see the module docstring for the formula.

    Examples
    --------
    >>> image = np.full((40, 50), 100, np.uint8)
    >>> Hs = viewpoint_homographies(image.shape, np.random.default_rng(0))
    >>> out = second_photographs(image, Hs, np.random.default_rng(1))
    >>> len(out), out[0].shape, out[0].dtype
    (5, (40, 50), dtype('uint8'))
    """
    optics = _uniform(rng, "optics")
    exposure = _sign(rng) * _uniform(rng, "exposure")
    shot, read = _uniform(rng, "shot_noise"), _uniform(rng, "read_noise")
    out = []
    for t, H in zip(STRENGTHS, homographies, strict=True):
        warped = warp(image, H).astype(np.float32) / np.float32(255.0)
        x = cv2.GaussianBlur(warped, (0, 0), sigmaX=optics * t, borderType=cv2.BORDER_REFLECT_101)
        x = x * np.float32(1 + exposure * t)
        spread = np.sqrt(np.float32(shot) * np.maximum(x, 0) + np.float32(read**2))
        x = x + np.float32(t) * spread * rng.standard_normal(x.shape, dtype=np.float32)
        out.append(np.rint(np.clip(x, 0, 1) * 255).astype(np.uint8))
    return out
