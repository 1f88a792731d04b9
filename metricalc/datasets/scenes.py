r"""The scenes of the built-in benchmark: scikit-image's photographs and their two changes.

For every photograph of :data:`PHOTOGRAPHS` two scenes (:func:`generate_scene`), written by
:func:`metricalc.datasets.make_synthetic_dataset` in the layout of
:mod:`metricalc.keypoints.sequences`:

- ``i_<name>`` (illumination): identity homographies; images 2..6 are image 1 under a
  photometric change whose strength grows linearly with :math:`t = (k - 1) / 5`. In this order:
  Gaussian blur, vignetting, gain and offset, gamma, a colour shift (RGB photographs) and Gaussian
  sensor noise, with intensities :math:`x \in [0, 1]`:

  .. math::

      x \leftarrow G_{\sigma t} * x, \qquad
      x \leftarrow x \, (1 - v t \, r^2), \qquad
      x \leftarrow \operatorname{clip}\big(x (1 + d a t) + d b t\big)^{2^{-d g t}}, \\
      x_c \leftarrow x_c (1 + c_c t), \qquad
      x \leftarrow \operatorname{round}\big(255
      \operatorname{clip}(x + s t \varepsilon)\big), \quad \varepsilon \sim N(0, 1)

  with :math:`r` the distance to the vignetting centre (up to 15 % off the image centre) over
  the half diagonal, and per-scene constants drawn from the scene's generator: direction
  :math:`d = \pm 1` (brighter or darker: gain, offset and gamma push the same way, so the change
  grows monotonically with k), blur :math:`\sigma \in [0.5, 1]` px, vignetting
  :math:`v \in [0.2, 0.4]`, gain :math:`a \in [0.15, 0.3]`, offset :math:`b \in [0.02, 0.05]`,
  gamma exponent :math:`g \in [0.3, 0.5]`, a zero-mean colour vector :math:`c` with
  :math:`\max_c |c_c| \in [0.1, 0.25]`, and noise :math:`s \in [1.5, 3] / 255`.
- ``v_<name>`` (viewpoint): image 1 is the mirrored photograph (so no two scenes share an image:
  other scenes' keypoints serve as distractors, PROTOCOLS.md section 4); image
  ``k = cv2.warpPerspective(image 1, H_1_k)`` (bilinear, black outside), and exactly that
  ``H_1_k`` is written. In coordinates centred on the image and scaled by half its longer side,

  .. math::

      H(t) = \begin{pmatrix} 1 & 0 & 0 \\ 0 & 1 & 0 \\ p_x t & p_y t & 1 \end{pmatrix}
      \begin{pmatrix} R(\theta t) \, e^{\lambda t}
      \begin{pmatrix} 1 & h t \\ 0 & 1 \end{pmatrix} & 0 \\ 0 & 1 \end{pmatrix}

  with rotation :math:`|\theta| \in [15, 30]` degrees, log-scale :math:`|\lambda| \in [0.1, 0.25]`
  (zoom in or out), shear :math:`|h| \in [0.1, 0.25]` and a projective tilt
  :math:`|p| \in [0.15, 0.3]` in a random direction, all shrunk by 10 % steps until, for every
  k, at least 70 % of image 1 lands inside image k and 60 % of image k is covered by image 1.

Every random draw comes from ``numpy.random.default_rng([seed, crc32(scene name)])``, so a scene
is byte-identical for a seed whatever else is generated.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import is_integer

__all__ = [
    "DEFAULT_SIZE",
    "PHOTOGRAPHS",
    "generate_scene",
    "load_photograph",
    "photometric_change",
    "viewpoint_homographies",
]

DEFAULT_SIZE = 640
"""Default bound on the longer image side in pixels (larger photographs are shrunk)."""

# skimage.data function -> the file it reads from scikit-image's bundled (offline) data folder.
# Left out on purpose: clock (motion-blurred) and cell (faint), which give SIFT a handful of
# keypoints; horse (a binary silhouette); cat (the same picture as chelsea: two scenes would share
# their keypoints); microaneurysms (102 x 102 px); colorwheel, logo, checkerboard, binary_blobs and
# shepp_logan_phantom (drawings); and the data sets that need a download.
_CANDIDATES: dict[str, str] = {
    "astronaut": "astronaut.png",
    "brick": "brick.png",
    "camera": "camera.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "coins": "coins.png",
    "grass": "grass.png",
    "gravel": "gravel.png",
    "hubble_deep_field": "hubble_deep_field.jpg",
    "immunohistochemistry": "ihc.png",
    "moon": "moon.png",
    "page": "page.png",
    "retina": "retina.jpg",
    "rocket": "rocket.jpg",
    "stereo_motorcycle": "motorcycle_left.png",
    "text": "text.png",
}


def _available_photographs() -> tuple[str, ...]:
    """The candidates whose loader exists and whose file ships with the installed scikit-image."""
    import skimage.data

    data_dir = Path(getattr(skimage.data, "data_dir", ""))
    return tuple(
        name
        for name, filename in _CANDIDATES.items()
        if callable(getattr(skimage.data, name, None)) and (data_dir / filename).is_file()
    )


PHOTOGRAPHS: tuple[str, ...] = _available_photographs()
"""Names of the ``skimage.data`` photographs used (those bundled with the installed
scikit-image, so they load offline): one ``i_`` and one ``v_`` scene each."""
_MIN_SIZE = 32
_MIN_VISIBLE = 0.7  # share of image 1 that must land inside image k (v_ scenes)
_MIN_FILLED = 0.6  # share of image k that must be covered by image 1 (v_ scenes)

# -- photographs -------------------------------------------------------------------------------


def load_photograph(name: str, *, size: int = DEFAULT_SIZE) -> np.ndarray:
    """One photograph of :data:`PHOTOGRAPHS` as uint8, shrunk so its longer side is <= ``size``.

    Gray photographs stay ``(H, W)``; colour ones are ``(H, W, 3)`` RGB. Shrinking uses
    ``cv2.INTER_AREA`` to ``round(W s), round(H s)`` with ``s = size / max(H, W)``; smaller
    photographs keep their size.

    Examples
    --------
    >>> load_photograph("camera", size=100).shape
    (100, 100)
    >>> load_photograph("coffee", size=120).shape
    (80, 120, 3)
    """
    import skimage.data
    import skimage.util

    if name not in PHOTOGRAPHS:
        raise InvalidInputError(
            f"unknown photograph {name!r}; expected one of {', '.join(PHOTOGRAPHS)}"
        )
    size = _check_size(size)
    try:
        image = getattr(skimage.data, name)()
    except Exception as exc:  # a broken scikit-image install: say which photograph
        raise InvalidInputError(f"cannot load skimage.data.{name}(): {exc}") from exc
    if isinstance(image, tuple):  # stereo_motorcycle -> (left, right, disparity)
        image = image[0]
    image = skimage.util.img_as_ubyte(np.asarray(image))  # type: ignore[no-untyped-call]
    if image.ndim == 3:
        image = image[..., :3]
        if image.shape[2] == 1:
            image = image[..., 0]
    height, width = image.shape[:2]
    scale = size / max(height, width)
    if scale < 1:
        new = (max(1, round(width * scale)), max(1, round(height * scale)))
        image = cv2.resize(image, new, interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(image)


def _check_size(size: Any) -> int:
    if not is_integer(size) or size < _MIN_SIZE:
        raise InvalidInputError(f"size must be an integer >= {_MIN_SIZE} (pixels); got {size!r}")
    return int(size)


# -- scene generators --------------------------------------------------------------------------


def _scene_rng(seed: int, scene: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(scene.encode("utf-8"))])


def photometric_change(image: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Images 2..6 of an illumination scene: growing photometric changes of ``image``.

    Draws the scene's maxima from ``rng`` (direction, gamma, gain, offset, colour shift, blur,
    vignetting, noise; see the module docstring for the formulas) and applies them with strength
    :math:`t = (k - 1) / 5` for k = 2..6. The noise is drawn from ``rng`` too.

    Examples
    --------
    >>> import numpy as np
    >>> image = load_photograph("coffee", size=64)
    >>> changed = photometric_change(image, np.random.default_rng(0))
    >>> len(changed), changed[0].shape == image.shape, changed[0].dtype
    (5, True, dtype('uint8'))
    """
    direction = float(rng.choice([-1.0, 1.0]))
    gamma = rng.uniform(0.3, 0.5)  # exponent of 2 at t = 1
    gain = rng.uniform(0.15, 0.3)
    offset = rng.uniform(0.02, 0.05)
    colour = rng.normal(size=3)
    colour -= colour.mean()
    colour *= rng.uniform(0.1, 0.25) / max(np.abs(colour).max(), 1e-12)
    blur = rng.uniform(0.5, 1.0)  # sigma in px at t = 1
    vignette = rng.uniform(0.2, 0.4)
    centre = rng.uniform(-0.15, 0.15, size=2)
    noise = rng.uniform(1.5, 3.0) / 255.0

    height, width = image.shape[:2]
    x = image.astype(np.float32) / np.float32(255.0)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    cx = (width - 1) / 2 * (1 + centre[0])
    cy = (height - 1) / 2 * (1 + centre[1])
    r2 = ((xs - cx) ** 2 + (ys - cy) ** 2) / np.float32(((width - 1) ** 2 + (height - 1) ** 2) / 4)
    if image.ndim == 3:
        r2 = r2[..., None]
    out = []
    for k in range(2, 7):
        t = (k - 1) / 5
        y = cv2.GaussianBlur(x, (0, 0), sigmaX=blur * t, borderType=cv2.BORDER_REFLECT_101)
        y = y * (1 - vignette * t * r2)
        y = np.clip(y * (1 + direction * gain * t) + direction * offset * t, 0, 1)
        y = y ** np.float32(2.0 ** (-direction * gamma * t))
        if image.ndim == 3:
            y = y * (1 + colour * t).astype(np.float32)
        y = y + np.float32(noise * t) * rng.standard_normal(y.shape, dtype=np.float32)
        out.append(np.rint(np.clip(y, 0, 1) * 255).astype(np.uint8))
    return out


def _centred_homography(
    t: float,
    shape: tuple[int, int],
    angle: float,
    log_scale: float,
    shear: float,
    tilt: np.ndarray,
) -> np.ndarray:
    height, width = shape
    half = max(height, width) / 2
    N = np.array(
        [[1 / half, 0, -(width - 1) / 2 / half], [0, 1 / half, -(height - 1) / 2 / half], [0, 0, 1]]
    )
    c, s = math.cos(angle * t), math.sin(angle * t)
    zoom = math.exp(log_scale * t)
    A = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ np.array(
        [[zoom, zoom * shear * t, 0], [0, zoom, 0], [0, 0, 1]]
    )
    P = np.array([[1, 0, 0], [0, 1, 0], [tilt[0] * t, tilt[1] * t, 1]])
    H = np.linalg.inv(N) @ P @ A @ N
    scaled: np.ndarray = H / H[2, 2]
    return scaled


def _coverage(H: np.ndarray, shape: tuple[int, int]) -> tuple[float, float]:
    """Share of image 1 inside image k and share of image k covered by image 1 (33 x 33 grids)."""
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


def viewpoint_homographies(shape: tuple[int, int], rng: np.random.Generator) -> list[np.ndarray]:
    """``H_1_2 .. H_1_6`` of a viewpoint scene of image size ``shape`` (height, width).

    Draws per-scene maxima from ``rng``: rotation 15..30 degrees, log-scale 0.1..0.25 (zoom in or
    out), shear 0.1..0.25 and a projective tilt 0.15..0.3 (in units of half the longer side) in a
    random direction; applies them with strength :math:`t = (k - 1) / 5` (module docstring).
    While some k leaves less than 70 % of image 1 inside image k or covers less than 60 % of
    image k, all magnitudes shrink by 10 %.

    Examples
    --------
    >>> import numpy as np
    >>> Hs = viewpoint_homographies((480, 640), np.random.default_rng(0))
    >>> len(Hs), Hs[0].shape, bool(np.allclose(Hs[0], np.eye(3)))
    (5, (3, 3), False)
    """
    angle = float(rng.choice([-1.0, 1.0])) * math.radians(rng.uniform(15.0, 30.0))
    log_scale = float(rng.choice([-1.0, 1.0])) * rng.uniform(0.1, 0.25)
    shear = float(rng.choice([-1.0, 1.0])) * rng.uniform(0.1, 0.25)
    direction = rng.uniform(0.0, 2 * math.pi)
    tilt = rng.uniform(0.15, 0.3) * np.array([math.cos(direction), math.sin(direction)])
    for _ in range(60):
        Hs = [
            _centred_homography((k - 1) / 5, shape, angle, log_scale, shear, tilt)
            for k in range(2, 7)
        ]
        if all(
            visible >= _MIN_VISIBLE and filled >= _MIN_FILLED
            for visible, filled in (_coverage(H, shape) for H in Hs)
        ):
            return Hs
        angle, log_scale, shear, tilt = 0.9 * angle, 0.9 * log_scale, 0.9 * shear, 0.9 * tilt
    raise InvalidInputError(  # pragma: no cover - 0.9**60 leaves a near-identity warp
        f"cannot keep the viewpoint change inside an image of shape {shape}"
    )


def generate_scene(
    scene: str, photograph: np.ndarray, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Images 1..6 and homographies H_1_2..H_1_6 of one scene."""
    rng = _scene_rng(seed, scene)
    if scene.startswith("i_"):
        images = [photograph, *photometric_change(photograph, rng)]
        return images, [np.eye(3) for _ in range(5)]
    base = np.ascontiguousarray(photograph[:, ::-1])
    height, width = base.shape[:2]
    homographies = viewpoint_homographies((height, width), rng)
    images = [base] + [
        cv2.warpPerspective(
            base,
            H,
            (width, height),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )
        for H in homographies
    ]
    return images, homographies
