r"""The scenes of the built-in benchmark: scikit-image's photographs and their two changes.

For every photograph of :data:`PHOTOGRAPHS` two scenes (:func:`generate_scene`), written by
:func:`metricalc.datasets.make_synthetic_dataset` in the layout of
:mod:`metricalc.keypoints.sequences`:

- ``i_<name>`` (illumination): image 1 is the photograph, images 2..6 the same view under other
  light (:func:`~metricalc.datasets.photometric.photometric_change`: relighting of a relief
  computed from the image, soft cast shadows, smooth gain and offset fields, blur,
  signal-dependent noise, exposure, gamma and a non-monotone tone curve, a colour shift and
  JPEG, growing from image 2 to image 6); every homography is the identity.
- ``v_<name>`` (viewpoint): image 1 is the mirrored photograph (so no two scenes share an image:
  other scenes' keypoints serve as distractors, docs/keypoints.md); image k is a second
  camera's view of that plane (:func:`~metricalc.datasets.viewpoint.viewpoint_homographies`:
  tilt, roll, zoom in or out up to about 2x, growing along the sequence), made by warping image 1
  by exactly the written ``H_1_k`` and adding the second photograph's blur, exposure and noise
  (:func:`~metricalc.datasets.viewpoint.second_photographs`).

The formulas and parameter ranges are in :mod:`metricalc.datasets.photometric` and
:mod:`metricalc.datasets.viewpoint`. Every random draw comes from
``numpy.random.default_rng([seed, crc32(scene name)])``, so a scene is byte-identical for a seed
whatever else is generated.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import cv2
import numpy as np

from metricalc.datasets.photometric import photometric_change
from metricalc.datasets.viewpoint import second_photographs, viewpoint_homographies
from metricalc.errors import InvalidInputError
from metricalc.validation import Integer, validate_params

__all__ = [
    "DEFAULT_SIZE",
    "PHOTOGRAPHS",
    "generate_scene",
    "load_photograph",
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
SIZE = Integer(32)
"""The side of a generated image: an integer of at least 32 pixels."""

# -- photographs -------------------------------------------------------------------------------


@validate_params(size=SIZE)
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


# -- scene generators --------------------------------------------------------------------------


def _scene_rng(seed: int, scene: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(scene.encode("utf-8"))])


def generate_scene(
    scene: str, photograph: np.ndarray, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Images 1..6 and homographies H_1_2..H_1_6 of one scene (``i_<name>`` or ``v_<name>``).

    Examples
    --------
    >>> images, Hs = generate_scene("v_camera", load_photograph("camera", size=64), 0)
    >>> len(images), len(Hs), images[5].shape
    (6, 5, (64, 64))
    """
    rng = _scene_rng(seed, scene)
    if scene.startswith("i_"):
        images = [photograph, *photometric_change(photograph, rng)]
        return images, [np.eye(3) for _ in range(5)]
    base = np.ascontiguousarray(photograph[:, ::-1])
    homographies = viewpoint_homographies((int(base.shape[0]), int(base.shape[1])), rng)
    return [base, *second_photographs(base, homographies, rng)], homographies
