r"""The built-in synthetic patch dataset: HPatches-style patches cut from the synthetic sequences.

The sequences are those of the keypoint benchmark
(:func:`metricalc.datasets.sequences.make_synthetic_dataset`: six images per scene and the exact
homographies ``H_1_k``). From each, :func:`cut_patches` cuts patches the way the HPatches release
describes its own:

1. **Detection.** SIFT keypoints (OpenCV) in the reference image (image 1). A keypoint of size
   :math:`s` (OpenCV's diameter, twice the detection scale :math:`\sigma`) and orientation
   :math:`\theta` gives a *frame*: the centre :math:`c`, the measurement radius
   :math:`r = 5 \sigma` (the detection scale magnified by :data:`MAGNIFICATION` = 5) and the
   orientation. Only frames whose square of half-side :math:`r` lies inside the image are kept.
2. **One detection per location.** Frames whose measurement disks overlap by more than 50 %
   (intersection over union) are clustered and one of them, at random, is kept: frames are
   visited in random order and a frame is dropped when it overlaps a kept one by more than 0.5.
3. **Affine jitter.** For each target image :math:`k = 2..6` and each level (``e`` easy, ``h``
   hard, ``t`` tough), each frame is perturbed in its own normalised coordinates
   :math:`q \in [-1, 1]^2` by :math:`q \mapsto A q + t` with

   .. math::

       A = R(\phi) \, R(\psi) \operatorname{diag}(e^{a_1}, e^{a_2}) \, R(-\psi), \quad
       \phi \sim U(-\Phi, \Phi), \; \psi \sim U(0, \pi), \; a_j \sim U(-\Lambda, \Lambda), \;
       t_j \sim U(-T, T),

   the levels' :math:`(\Phi, \Lambda, T)` in :data:`JITTER`. The release gives the median overlap
   of the jittered measurement region with the original one: about 0.85 for easy and 0.72 for
   hard jitter; :math:`\Lambda` and :math:`T` are set so that the median overlap of the unit disk
   and its image :math:`A\,\text{disk} + t` is 0.85 and 0.72 (and 0.60 for tough, a figure the
   release does not give: our choice). The rotation :math:`\Phi` (10, 20, 30 degrees) leaves a
   disk unchanged and is our choice too.
4. **Reprojection and sampling.** Patch pixel :math:`(u, v) \in \{0..64\}^2` is the point
   :math:`q = ((u - 32) / 32, (v - 32) / 32)`; in the reference image it lies at

   .. math::

       p = c + r \, R(\theta) \, (A q + t),

   and in image :math:`k` at :math:`H_{1k} \, p` (the exact homography, per pixel). The target
   image is sampled bilinearly (``cv2.remap``) at the level of its Gaussian pyramid
   (``cv2.pyrDown``) where one patch pixel spans one to two image pixels, so large regions are
   not aliased. The reference patches (``ref``) are the frames without jitter in image 1. Frames
   whose jittered square leaves image 1 or image :math:`k` for any level are dropped, so patch
   :math:`i` exists in all 16 patch-images.

At most ``max_patches`` frames are kept per sequence (a random subset), ordered by position
(row, then column of the centre).

:func:`make_patch_dataset` writes the result in the release layout
(:mod:`metricalc.benchmarks.hpatches_patches.dataset`) with ``splits.json`` (photographs of
:data:`TEST_PHOTOGRAPHS`
are test sequences, the others train) and, per sequence, ``frames.npz``: for every patch-image the
(N, 2, 3) affine maps from patch pixels to reference-image pixels and the homographies of images
2..6. Every random draw comes from a generator seeded with ``[seed, crc32(scene), ...]``, so a
sequence is identical for a seed whatever else is generated; a manifest makes re-runs free.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from metricalc.benchmarks.hpatches_patches.dataset import (
    PATCH_SIZE,
    SPLITS_NAME,
    PatchDataset,
    read_patch_dataset,
    write_patches,
)
from metricalc.benchmarks.hpatches_patches.files import IMAGES, write_atomic
from metricalc.datasets.scenes import SIZE
from metricalc.datasets.sequences import DEFAULT_SIZE, PHOTOGRAPHS, make_synthetic_dataset
from metricalc.errors import InvalidInputError
from metricalc.fileio import read_manifest
from metricalc.keypoints.sequences import Sequence
from metricalc.progress import progress_bar
from metricalc.validation import Boolean, Integer, validate_params

__all__ = [
    "FRAMES_NAME",
    "GENERATOR_VERSION",
    "JITTER",
    "MAGNIFICATION",
    "MANIFEST_NAME",
    "MAX_PATCHES",
    "SOURCE_FOLDER",
    "TEST_PHOTOGRAPHS",
    "CutPatches",
    "Jitter",
    "cut_patches",
    "draw_jitter",
    "make_patch_dataset",
]

GENERATOR_VERSION = 1
"""Bumped whenever the generated patches change; a different version regenerates."""
GENERATOR = "metricalc.benchmarks.hpatches_patches.synthetic"
"""The manifest's ``generator``: the module's name when the format was fixed."""

MANIFEST_NAME = "patch_manifest.json"
"""The manifest in the dataset root (generator, version, seed, size, files and their hashes)."""

FRAMES_NAME = "frames.npz"
"""Per sequence: the patch frames of every patch-image (module docstring)."""

SOURCE_FOLDER = ".sequences"
"""Sub-folder of the dataset root holding the synthetic image sequences the patches come from."""

MAGNIFICATION = 5.0
"""Measurement radius over detection scale: :math:`r = 5 \\sigma`, :math:`\\sigma` = size / 2."""

MAX_PATCHES = 1000
"""Default bound on the patches of one sequence."""

TEST_PHOTOGRAPHS: tuple[str, ...] = tuple(
    p for p in ("camera", "coins", "gravel", "moon", "retina") if p in PHOTOGRAPHS
)
"""Photographs whose two sequences form the test split; the others are training sequences."""


@dataclass(frozen=True)
class Jitter:
    """One jitter level: the bounds of the uniform draws (module docstring, step 3).

    Attributes
    ----------
    rotation_deg : float
        :math:`\\Phi`, in degrees.
    log_scale : float
        :math:`\\Lambda`: the log of the scale along each of two random orthogonal axes.
    shift : float
        :math:`T`: translation per axis, in units of the measurement radius.
    overlap : float
        The median overlap (intersection over union) of the unit disk and its jittered image that
        these bounds give.
    """

    rotation_deg: float
    log_scale: float
    shift: float
    overlap: float


JITTER: dict[str, Jitter] = {
    "e": Jitter(rotation_deg=10.0, log_scale=0.17, shift=0.093, overlap=0.85),
    "h": Jitter(rotation_deg=20.0, log_scale=0.34, shift=0.19, overlap=0.72),
    "t": Jitter(rotation_deg=30.0, log_scale=0.53, shift=0.29, overlap=0.60),
}
"""The easy, hard and tough levels (images ``e1..e5``, ``h1..h5``, ``t1..t5``)."""

_HALF = (PATCH_SIZE - 1) / 2  # 32: the centre pixel and the half-width of a patch
_CHUNK = 256  # patches sampled (cv2.remap wants fewer than 32767 rows) or compared at once
_MAX_OVERLAP = 0.5  # detections overlapping more than this are one location
_SCENE_NAME = re.compile(r"[iv]_[A-Za-z0-9_]+")  # the sequence folders this generator writes


def _rng(seed: int, scene: str, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(scene.encode("utf-8")), *keys])


def _rotation(angle: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 2, 2) of ``angle`` radians."""
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def draw_jitter(level: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` affine jitters of ``level`` (``"e"``, ``"h"``, ``"t"``): ``A`` (n, 2, 2), ``t`` (n, 2).

    See the module docstring (step 3) for the distribution.

    Examples
    --------
    >>> import numpy as np
    >>> A, t = draw_jitter("h", 3, np.random.default_rng(0))
    >>> A.shape, t.shape, bool(np.all(np.abs(t) <= JITTER["h"].shift))
    ((3, 2, 2), (3, 2), True)
    """
    if level not in JITTER:
        raise InvalidInputError(f"level: expected one of {sorted(JITTER)}, got {level!r}")
    jitter = JITTER[level]
    phi = rng.uniform(-1.0, 1.0, n) * math.radians(jitter.rotation_deg)
    psi = rng.uniform(0.0, math.pi, n)
    scales = np.exp(rng.uniform(-1.0, 1.0, (n, 2)) * jitter.log_scale)
    shift = rng.uniform(-1.0, 1.0, (n, 2)) * jitter.shift
    axes = _rotation(psi)
    stretch = axes @ (scales[:, :, None] * np.eye(2)) @ np.swapaxes(axes, -1, -2)
    return _rotation(phi) @ stretch, shift


# -- detection --------------------------------------------------------------------------------


def _disk_overlaps(
    centres: np.ndarray, radii: np.ndarray, others: np.ndarray, other_radii: np.ndarray
) -> np.ndarray:
    """Intersection over union of every disk with every other disk (m x n), from the
    closed-form area of their lens."""
    d = np.sqrt(((centres[:, None, :] - others[None, :, :]) ** 2).sum(-1))
    r1, r2 = radii[:, None], other_radii[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        a1 = np.clip((d**2 + r1**2 - r2**2) / (2 * d * r1), -1, 1)
        a2 = np.clip((d**2 + r2**2 - r1**2) / (2 * d * r2), -1, 1)
        kite = (r1 + r2 - d) * (d + r1 - r2) * (d - r1 + r2) * (d + r1 + r2)
        lens = r1**2 * np.arccos(a1) + r2**2 * np.arccos(a2) - 0.5 * np.sqrt(np.clip(kite, 0, None))
    inner = np.pi * np.minimum(r1, r2) ** 2
    area = np.where(d >= r1 + r2, 0.0, np.where(d <= np.abs(r1 - r2), inner, lens))
    return area / (np.pi * r1**2 + np.pi * r2**2 - area)


def _detect(gray: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Frames (n, 4): centre x, y, measurement radius, orientation (radians), one per location."""
    keypoints = cv2.SIFT.create().detect(gray, None)
    if not keypoints:
        return np.empty((0, 4))
    frames = np.array(
        [(k.pt[0], k.pt[1], MAGNIFICATION * k.size / 2, math.radians(k.angle)) for k in keypoints]
    )
    height, width = gray.shape
    reach = frames[:, 2] * math.sqrt(2)  # the square's corners, whatever the orientation
    inside = (
        (frames[:, 0] - reach >= 0)
        & (frames[:, 0] + reach <= width - 1)
        & (frames[:, 1] - reach >= 0)
        & (frames[:, 1] + reach <= height - 1)
    )
    frames = frames[inside]
    centres, radii = frames[:, :2], frames[:, 2]
    clash = np.concatenate(  # in row blocks: a few n x 256 temporaries, an n x n bool matrix
        [
            _disk_overlaps(centres[i : i + _CHUNK], radii[i : i + _CHUNK], centres, radii)
            > _MAX_OVERLAP
            for i in range(0, len(frames), _CHUNK)
        ]
        or [np.zeros((0, 0), dtype=bool)]
    )
    dropped = np.zeros(len(frames), dtype=bool)
    kept = []
    for i in rng.permutation(len(frames)):  # greedy over a random order: one per location
        if not dropped[i]:
            kept.append(i)
            dropped |= clash[i]
    chosen: np.ndarray = frames[np.sort(kept)]
    return chosen


# -- geometry and sampling --------------------------------------------------------------------


def _patch_affines(frames: np.ndarray, A: np.ndarray, t: np.ndarray) -> np.ndarray:
    """(n, 2, 3) maps from patch pixel (u, v) to reference-image pixels (module docstring, 4)."""
    linear = frames[:, 2, None, None] * _rotation(frames[:, 3])  # r R(theta)
    scaled = linear @ A / _HALF
    offset = frames[:, :2] + (linear @ t[:, :, None])[:, :, 0] - scaled.sum(-1) * _HALF
    return np.concatenate([scaled, offset[:, :, None]], axis=2)


def _project(H: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points (..., 2) through a homography: image points (..., 2) and their w (...)."""
    w = points @ H[2, :2] + H[2, 2]
    xy = (points @ H[:2, :2].T + H[:2, 2]) / w[..., None]
    return xy, w


_CORNERS = np.array([[0, 0], [PATCH_SIZE - 1, 0], [0, PATCH_SIZE - 1], [PATCH_SIZE - 1] * 2], float)


def _within(points: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Whether all points (n, 4, 2) of each patch are inside an image of ``shape``."""
    height, width = shape[:2]
    x, y = points[..., 0], points[..., 1]
    inside: np.ndarray = np.all((x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height - 1), axis=1)
    return inside


def _inside(
    affines: np.ndarray, H: np.ndarray, shape: tuple[int, ...], k_shape: tuple[int, ...]
) -> np.ndarray:
    """Which patches lie wholly inside image 1 and, through ``H``, inside image k.

    A homography maps the (convex) square to a convex quadrilateral when every corner keeps
    w > 0, so checking the four corners suffices.
    """
    corners = _CORNERS @ np.swapaxes(affines[:, :, :2], -1, -2) + affines[:, None, :, 2]
    projected, w = _project(H, corners)
    ahead: np.ndarray = np.all(w > 0, axis=1)
    inside: np.ndarray = _within(corners, shape) & ahead & _within(projected, k_shape)
    return inside


def _sample(image: np.ndarray, affines: np.ndarray, H: np.ndarray) -> np.ndarray:
    """The patches (n, 65, 65) uint8 of ``image`` (gray) at ``H`` applied to the patch frames."""
    n = len(affines)
    # One patch pixel spans sqrt(|det|) reference pixels, times H's local scale at the centre.
    centres = affines[:, :, 2] + affines[:, :, :2].sum(-1) * _HALF
    eps = 0.5
    step = np.sqrt(np.abs(np.linalg.det(affines[:, :, :2])))
    moved = [_project(H, centres + d)[0] for d in ((0, 0), (eps, 0), (0, eps))]
    jacobian = np.stack([(moved[1] - moved[0]) / eps, (moved[2] - moved[0]) / eps], -1)
    step = step * np.sqrt(np.abs(np.linalg.det(jacobian)))
    pyramid: list[np.ndarray] = [image.astype(np.float32)]
    levels = np.clip(np.floor(np.log2(np.maximum(step, 1.0))), 0, 8).astype(int)
    while len(pyramid) <= levels.max() and min(pyramid[-1].shape) > 2 * PATCH_SIZE:
        pyramid.append(np.asarray(cv2.pyrDown(pyramid[-1])))
    levels = np.minimum(levels, len(pyramid) - 1)
    # Patch pixel (u, v) -> image k pixel: one 3 x 3 map per patch, H [L | o; 0 0 1].
    full = np.zeros((n, 3, 3))
    full[:, :2] = affines
    full[:, 2, 2] = 1.0
    maps = (H @ full).astype(np.float32)[:, :, :, None, None]
    u = np.arange(PATCH_SIZE, dtype=np.float32)[None, :]
    v = np.arange(PATCH_SIZE, dtype=np.float32)[:, None]
    out = np.empty((n, PATCH_SIZE, PATCH_SIZE), dtype=np.uint8)
    for level in np.unique(levels):
        chosen = np.flatnonzero(levels == level)
        for first in range(0, len(chosen), _CHUNK):
            part = chosen[first : first + _CHUNK]
            M = maps[part]
            w = (M[:, 2, 0] * u + M[:, 2, 1] * v + M[:, 2, 2]) * np.float32(2.0**level)
            x = (M[:, 0, 0] * u + M[:, 0, 1] * v + M[:, 0, 2]) / w
            y = (M[:, 1, 0] * u + M[:, 1, 1] * v + M[:, 1, 2]) / w
            sampled = cv2.remap(
                pyramid[level], x.reshape(-1, PATCH_SIZE), y.reshape(-1, PATCH_SIZE),
                cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE,
            )  # fmt: skip
            out[part] = np.rint(np.clip(sampled, 0, 255)).reshape(-1, PATCH_SIZE, PATCH_SIZE)
    return out


@dataclass(frozen=True)
class CutPatches:
    """The patches of one sequence and where they come from.

    Attributes
    ----------
    patches : dict of str to ndarray
        Per image of :data:`~metricalc.benchmarks.hpatches_patches.IMAGES`, the (N, 65, 65) uint8
        patches.
    affines : dict of str to ndarray
        Per image, (N, 2, 3) float64: patch pixel (u, v, 1) -> reference-image pixel.
    homographies : ndarray
        (5, 3, 3): ``H_1_2 .. H_1_6``; images ``e<k>``, ``h<k>``, ``t<k>`` are in image k + 1.
    """

    patches: dict[str, np.ndarray]
    affines: dict[str, np.ndarray]
    homographies: np.ndarray


@validate_params(seed=Integer(0), max_patches=Integer(1))
def cut_patches(
    sequence: Sequence, *, seed: int = 0, max_patches: int = MAX_PATCHES
) -> CutPatches:
    """Cut HPatches-style patches (module docstring) from one sequence of six images.

    Parameters
    ----------
    sequence : metricalc.keypoints.sequences.Sequence
        Six images and the homographies ``H_1_k`` (e.g. from
        :func:`~metricalc.keypoints.load_sequences`: the synthetic sequences, or HPatches' full
        sequences).
    seed : int
        Seed of every random draw (clustering order, jitter, subset); the sequence name is mixed
        in, so sequences draw independently.
    max_patches : int
        Keep at most this many patches (a random subset).

    Returns
    -------
    CutPatches

    Raises
    ------
    InvalidInputError
        If ``max_patches`` is not a positive integer or no patch fits in the images.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.datasets.sequences import make_synthetic_dataset
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sequence = make_synthetic_dataset(tmp, scenes=["i_camera"], size=160)[0]
    ...     cut = cut_patches(sequence, max_patches=20)
    >>> sorted(cut.patches) == sorted(IMAGES), cut.patches["h3"].shape
    (True, (20, 65, 65))
    """
    rng = _rng(seed, sequence.name)
    shape = sequence.shape(1)
    frames = _detect(sequence.gray(1), rng)
    n = len(frames)
    reference = _patch_affines(frames, np.broadcast_to(np.eye(2), (n, 2, 2)), np.zeros((n, 2)))
    plans = {"ref": (reference, 1)}
    valid = _inside(reference, np.eye(3), shape, shape)
    for code, level in enumerate("eht", start=1):
        for k in range(1, 6):
            jitter = draw_jitter(level, n, _rng(seed, sequence.name, code, k))
            jittered = _patch_affines(frames, *jitter)
            H = sequence.homography(k + 1)
            valid &= _inside(jittered, H, shape, sequence.shape(k + 1))
            plans[f"{level}{k}"] = (jittered, k + 1)
    chosen = np.flatnonzero(valid)
    if len(chosen) > max_patches:
        chosen = np.sort(rng.choice(chosen, size=max_patches, replace=False))
    if not len(chosen):
        raise InvalidInputError(
            f"scene {sequence.name!r}: no patch fits inside all six images; expected images large "
            "enough for 65 x 65 patches around SIFT keypoints"
        )
    order = chosen[np.lexsort((frames[chosen, 0], frames[chosen, 1]))]
    patches: dict[str, np.ndarray] = {}
    affines: dict[str, np.ndarray] = {}
    for name in IMAGES:
        plan, k = plans[name]
        affines[name] = plan[order]
        patches[name] = _sample(sequence.gray(k), affines[name], sequence.homography(k))
    homographies = np.stack([sequence.homography(k) for k in range(2, 7)])
    return CutPatches(patches, affines, homographies)


# -- the dataset on disk ----------------------------------------------------------------------


def _npz(cut: CutPatches) -> bytes:
    buffer = io.BytesIO()
    arrays = {"homographies": cut.homographies, **cut.affines}
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]  # stub: **kwds as allow_pickle
    return buffer.getvalue()


def _write_sequence(folder: Path, cut: CutPatches) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for name, patches in cut.patches.items():
        path = write_patches(folder / f"{name}.png", patches)
        data = path.read_bytes()
        files[path.name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    data = _npz(cut)
    write_atomic(folder / FRAMES_NAME, data)
    files[FRAMES_NAME] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return files


def _complete(root: Path, scene: str, record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return False
    expected = {f"{name}.png" for name in IMAGES} | {FRAMES_NAME}
    if set(record["files"]) != expected:
        return False
    for name, info in record["files"].items():
        try:
            if (root / scene / name).stat().st_size != info.get("bytes"):
                return False
        except (OSError, AttributeError):
            return False
    return True


def _write_json(path: Path, content: Any) -> None:
    write_atomic(path, (json.dumps(content, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _remove_sequence(folder: Path) -> None:
    for name in [*(f"{image}.png" for image in IMAGES), FRAMES_NAME]:
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty (someone else's files) or gone: leave it
        folder.rmdir()


@validate_params(seed=Integer(0), size=SIZE, max_patches=Integer(1), progress=Boolean())
def make_patch_dataset(
    root: str | os.PathLike[str],
    *,
    scenes: Iterable[str] | str | None = None,
    seed: int = 0,
    size: int = DEFAULT_SIZE,
    max_patches: int = MAX_PATCHES,
    progress: bool = False,
) -> PatchDataset:
    """Write (or reuse) the synthetic patch dataset in ``root`` and open it.

    Parameters
    ----------
    root : path
        Dataset folder: new, empty, or written by this function before.
    scenes : iterable of str, optional
        Photograph names (both sequences) and/or sequence names (``"v_coffee"``), as
        :func:`~metricalc.datasets.sequences.make_synthetic_dataset`; default all.
        :data:`~metricalc.datasets.sequences.QUICK_SCENES` is a small subset.
    seed : int
        Seed of the image sequences and of every draw of :func:`cut_patches`.
    size : int
        Bound on the longer side of the source images in pixels.
    max_patches : int
        Bound on the patches of one sequence.
    progress : bool
        Show a progress bar over the sequences to cut.

    Returns
    -------
    PatchDataset
        The whole dataset in ``root``
        (:func:`~metricalc.benchmarks.hpatches_patches.read_patch_dataset`).

    Notes
    -----
    The image sequences are written to ``root/.sequences`` (cached by their own manifest). The
    manifest ``root/patch_manifest.json`` records the generator version, seed, size,
    max_patches and the size and SHA-256 of every file; a requested sequence listed there with
    all its files at their recorded sizes is reused. Another seed, size, max_patches or version
    regenerates the requested sequences and deletes the files of the others the manifest lists.
    ``splits.json`` lists the sequences present: those of :data:`TEST_PHOTOGRAPHS` as test, the
    others as train. Every file is written to a temporary name and renamed.

    Raises
    ------
    InvalidInputError
        Unknown scene, bad seed, size or max_patches, ``root`` not empty and not written by this
        function, an unreadable manifest.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InvalidInputError(f"dataset root {root} exists and is not a directory")
    manifest = read_manifest(
        root,
        name=MANIFEST_NAME,
        generator=GENERATOR,
        keys=("version", "seed", "size", "max_patches"),
        what="synthetic patch dataset",
    )
    sequences = make_synthetic_dataset(root / SOURCE_FOLDER, scenes=scenes, seed=seed, size=size)
    identity = {"version": GENERATOR_VERSION, "seed": seed, "size": size}
    identity["max_patches"] = max_patches
    manifest = _current_manifest(root, manifest, identity, {s.name for s in sequences})
    todo = [s for s in sequences if not _complete(root, s.name, manifest["scenes"].get(s.name))]
    with progress_bar("patch sequences", total=len(todo), enabled=progress) as advance:
        for sequence in todo:
            cut = cut_patches(sequence, seed=seed, max_patches=max_patches)
            files = _write_sequence(root / sequence.name, cut)
            manifest["scenes"][sequence.name] = {"files": files}
            _write_json(root / MANIFEST_NAME, manifest)
            advance()
    _write_splits(root, sorted(manifest["scenes"]))
    return read_patch_dataset(root)


def _current_manifest(
    root: Path, manifest: dict[str, Any] | None, identity: dict[str, Any], wanted: set[str]
) -> dict[str, Any]:
    """``manifest`` when it was written with ``identity``; otherwise a new, empty one (written),
    after deleting the sequences of the old one that are not ``wanted``."""
    if manifest is not None and all(manifest[key] == value for key, value in identity.items()):
        return manifest
    for scene in (manifest or {}).get("scenes", {}):
        if scene not in wanted and _SCENE_NAME.fullmatch(str(scene)):
            _remove_sequence(root / scene)
    manifest = {"generator": GENERATOR, **identity, "scenes": {}}
    _write_json(root / MANIFEST_NAME, manifest)
    return manifest


def _write_splits(root: Path, present: list[str]) -> None:
    """``splits.json``: the sequences of :data:`TEST_PHOTOGRAPHS` as test, the others train."""
    test = [s for s in present if s[2:] in TEST_PHOTOGRAPHS]
    _write_json(root / SPLITS_NAME, {"train": [s for s in present if s not in test], "test": test})
