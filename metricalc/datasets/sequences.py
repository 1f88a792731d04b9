r"""The built-in synthetic benchmark: HPatches-style sequences from scikit-image's photographs.

For every photograph of :data:`PHOTOGRAPHS` two scenes are written in the layout of
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
is byte-identical for a seed whatever else is generated. A manifest (:data:`MANIFEST_NAME`) in the
root records the generator version, seed, size and, per scene, the size and SHA-256 of every file;
see :func:`make_synthetic_dataset` for the caching rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write, read_manifest
from metricalc.keypoints.sequences import Sequence, load_sequences
from metricalc.progress import progress_bar
from metricalc.validation import is_integer

__all__ = [
    "DEFAULT_SIZE",
    "GENERATOR_VERSION",
    "MANIFEST_NAME",
    "PHOTOGRAPHS",
    "QUICK_SCENES",
    "load_photograph",
    "make_synthetic_dataset",
    "photometric_change",
    "viewpoint_homographies",
]

GENERATOR_VERSION = 1
"""Bumped whenever the generated pixels or homographies change; a different version regenerates."""
GENERATOR = "metricalc.keypoints.synthetic"
"""The manifest's ``generator``: the module's name when the format was fixed."""

MANIFEST_NAME = "synthetic_manifest.json"
"""File name of the manifest written in the dataset root."""

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

QUICK_SCENES: tuple[str, ...] = tuple(p for p in ("astronaut", "camera") if p in PHOTOGRAPHS)
"""A small default subset for ``--quick``: one RGB and one gray photograph, four scenes."""

_MIN_SIZE = 32
_PNG_PARAMS = [cv2.IMWRITE_PNG_COMPRESSION, 3]
_MIN_VISIBLE = 0.7  # share of image 1 that must land inside image k (v_ scenes)
_MIN_FILLED = 0.6  # share of image k that must be covered by image 1 (v_ scenes)
_IMAGE_NAMES = tuple(f"{k}.png" for k in range(1, 7))
_H_NAMES = tuple(f"H_1_{k}" for k in range(2, 7))
_SCENE_NAME = re.compile(r"[iv]_[A-Za-z0-9_]+")  # what this generator names its scene folders


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


def _generate(
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


# -- files -------------------------------------------------------------------------------------


def _png(image: np.ndarray) -> bytes:
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    ok, buffer = cv2.imencode(".png", image, _PNG_PARAMS)
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 images
        raise InvalidInputError(f"OpenCV could not encode an image of shape {image.shape}")
    return buffer.tobytes()


def _homography_text(H: np.ndarray) -> bytes:
    # repr() of a float64 is the shortest text that reads back to the same number, so the file
    # holds exactly the matrix that warped the image.
    return "".join(" ".join(repr(float(v)) for v in row) + "\n" for row in H).encode("ascii")


def _write_scene(
    folder: Path, images: list[np.ndarray], homographies: list[np.ndarray]
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    blobs = [(name, _png(image)) for name, image in zip(_IMAGE_NAMES, images, strict=True)]
    blobs += [(name, _homography_text(H)) for name, H in zip(_H_NAMES, homographies, strict=True)]
    for name, data in blobs:
        atomic_write(folder / name, data)
        files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return files


def _new_manifest(seed: int, size: int) -> dict[str, Any]:
    import skimage

    return {
        "generator": GENERATOR,
        "version": GENERATOR_VERSION,
        "seed": seed,
        "size": size,
        "opencv": cv2.__version__,
        "scikit_image": skimage.__version__,  # type: ignore[attr-defined]
        "scenes": {},
    }


def _read_manifest(root: Path) -> dict[str, Any] | None:
    return read_manifest(
        root,
        name=MANIFEST_NAME,
        generator=GENERATOR,
        keys=("version", "seed", "size"),
        what="synthetic benchmark",
    )


def _write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    atomic_write(root / MANIFEST_NAME, text.encode("utf-8"))


def _scene_complete(root: Path, scene: str, record: Any) -> bool:
    """Whether the manifest lists ``scene`` and all its files exist at their recorded sizes."""
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return False
    files = record["files"]
    if set(files) != {*_IMAGE_NAMES, *_H_NAMES}:
        return False
    for name, info in files.items():
        path = root / scene / name
        try:
            if path.stat().st_size != info.get("bytes"):
                return False
        except (OSError, AttributeError):
            return False
    return True


def _remove_scene(root: Path, scene: str) -> None:
    """Delete the files this generator wrote for ``scene`` (and the folder if it is then empty)."""
    folder = root / scene
    for name in (*_IMAGE_NAMES, *_H_NAMES):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty (someone else's files) or gone: leave it
        folder.rmdir()


# -- public entry point ------------------------------------------------------------------------


def _check_size(size: Any) -> int:
    if not is_integer(size) or size < _MIN_SIZE:
        raise InvalidInputError(f"size must be an integer >= {_MIN_SIZE} (pixels); got {size!r}")
    return int(size)


def _check_seed(seed: Any) -> int:
    if not is_integer(seed) or seed < 0:
        raise InvalidInputError(f"seed must be a non-negative integer; got {seed!r}")
    return int(seed)


def resolve_scenes(scenes: Iterable[str] | str | None) -> list[str]:
    """Scene names (sorted) for photograph names and/or scene names."""
    if scenes is None:
        scenes = PHOTOGRAPHS
    elif isinstance(scenes, str):
        scenes = [scenes]
    resolved: set[str] = set()
    unknown = []
    for name in scenes:
        name = str(name)
        if name in PHOTOGRAPHS:
            resolved.update((f"i_{name}", f"v_{name}"))
        elif name[:2] in ("i_", "v_") and name[2:] in PHOTOGRAPHS:
            resolved.add(name)
        else:
            unknown.append(name)
    if unknown:
        raise InvalidInputError(
            f"unknown synthetic scene(s) {unknown}: expected photograph names "
            f"({', '.join(PHOTOGRAPHS)}) or scene names i_<photograph> / v_<photograph>"
        )
    if not resolved:
        raise InvalidInputError("scenes selects no scene; pass None for all of them")
    return sorted(resolved)


def make_synthetic_dataset(
    root: str | Path,
    *,
    scenes: Iterable[str] | str | None = None,
    seed: int = 0,
    size: int = DEFAULT_SIZE,
    progress: bool = False,
) -> list[Sequence]:
    """Write (or reuse) the synthetic HPatches-style benchmark in ``root`` and load it.

    Per photograph of :data:`PHOTOGRAPHS`: an illumination scene ``i_<name>`` and a viewpoint
    scene ``v_<name>`` with six PNG images and ``H_1_2 .. H_1_6`` (module docstring for the
    transformations).

    Parameters
    ----------
    root : path
        Dataset folder: new, empty, or written by this function before.
    scenes : iterable of str, optional
        Photograph names (both scenes, e.g. ``"coffee"``) and/or scene names (``"v_coffee"``);
        default all. :data:`QUICK_SCENES` is a small subset.
    seed : int
        Seed of every random draw (non-negative). Same seed, size and generator version ->
        byte-identical files.
    size : int
        Bound on the longer image side in pixels (>= 32); larger photographs are shrunk.
    progress : bool
        Show a progress bar over the scenes to write.

    Returns
    -------
    list of Sequence
        The requested scenes, sorted by name, read back by
        :func:`~metricalc.keypoints.sequences.load_sequences`.

    Notes
    -----
    Caching, through the manifest ``root/synthetic_manifest.json``:

    - A requested scene that the manifest lists, with every file present at its recorded size,
      is reused; nothing is written (re-running with the same arguments does no work).
    - Missing scenes are generated and added; scenes generated earlier and not requested now
      stay (so the root may hold more scenes than one call returns).
    - A different ``seed`` or ``size`` (or a new :data:`GENERATOR_VERSION`) regenerates the
      requested scenes and deletes the files of every other scene the manifest lists, so one
      root never mixes seeds or sizes.

    Every file (and the manifest after each scene) is written to a temporary name and renamed;
    an interrupted run leaves complete files and a manifest that lists only finished scenes.

    Raises
    ------
    InvalidInputError
        Unknown scene or photograph name, bad ``seed`` or ``size``, ``root`` not empty and not
        written by this function, or an unreadable manifest.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sequences = make_synthetic_dataset(tmp, scenes=["camera"], size=64)
    ...     [(s.name, s.split, s.shape(6)) for s in sequences]
    [('i_camera', 'illumination', (64, 64)), ('v_camera', 'viewpoint', (64, 64))]
    """
    seed = _check_seed(seed)
    size = _check_size(size)
    wanted = resolve_scenes(scenes)
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InvalidInputError(f"dataset root {root} exists and is not a directory")
    manifest = _read_manifest(root)
    identity = (GENERATOR_VERSION, seed, size)
    if manifest is None:
        root.mkdir(parents=True, exist_ok=True)
        manifest = _new_manifest(seed, size)
        _write_manifest(root, manifest)
    elif (manifest["version"], manifest["seed"], manifest["size"]) != identity:
        for scene in manifest["scenes"]:
            if scene not in wanted and _SCENE_NAME.fullmatch(str(scene)):
                _remove_scene(root, scene)
        manifest = _new_manifest(seed, size)
        _write_manifest(root, manifest)
    todo = sorted(  # by photograph, so i_<name> and v_<name> share one load
        (
            scene
            for scene in wanted
            if not _scene_complete(root, scene, manifest["scenes"].get(scene))
        ),
        key=lambda scene: (scene[2:], scene),
    )
    photographs: dict[str, np.ndarray] = {}
    with progress_bar("benchmark scenes", total=len(todo), enabled=progress) as advance:
        for scene in todo:
            name = scene[2:]
            if name not in photographs:
                photographs = {name: load_photograph(name, size=size)}
            images, homographies = _generate(scene, photographs[name], seed)
            files = _write_scene(root / scene, images, homographies)
            manifest["scenes"][scene] = {"scene": scene, "photograph": name, "files": files}
            _write_manifest(root, manifest)
            advance()
    return load_sequences(root, scenes=wanted)
