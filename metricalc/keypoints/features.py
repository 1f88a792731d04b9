"""Local features of image sequences: built-in detectors and descriptors, and bring-your-own files.

Four built-in methods (:data:`BUILTIN_METHODS`), each a detector and a descriptor:

=========  ===============================================  ==========================  ========
method     detector (native keypoints)                      descriptor                  distance
=========  ===============================================  ==========================  ========
sift       OpenCV SIFT (difference of Gaussians)            SIFT, 128 float32           L2
rootsift   OpenCV SIFT                                      RootSIFT, 128 float32       L2
orb        OpenCV ORB (oriented FAST, Harris response)      ORB, 256 bits -> 32 uint8   Hamming
brief      OpenCV FAST-9/16 (threshold 20, non-max supp.)   BRIEF (scikit-image), 32 u8 Hamming
=========  ===============================================  ==========================  ========

Keypoints are either *native* (each method describes the keypoints of its own detector) or
*locked* to one detector (every method describes the same keypoints, so every descriptor ends with
identical keypoint arrays and the queries of an evaluation can be paired one to one).

Bring-your-own features use the layout ``root/<descriptor>/<scene>/<image>.npz`` (image 1..6) with
arrays ``keypoints`` (N x 2, x y in pixels) and ``descriptors`` (N x D float, or N x B uint8 packed
bits); :func:`save_features` writes it and :func:`load_features` reads and validates it.
See ``docs/features.md``.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import cv2
import numpy as np
from skimage.feature import BRIEF
from skimage.util import img_as_float

from metricalc.errors import InvalidInputError
from metricalc.fileio import temporary_path
from metricalc.keypoints.geometry import inside
from metricalc.progress import progress_bar

__all__ = [
    "BUILTIN_METHODS",
    "IMAGES",
    "FeatureSet",
    "Features",
    "SequenceLike",
    "check_own_keypoints",
    "detect_keypoints",
    "export_keypoints",
    "extract",
    "extract_image",
    "load_features",
    "load_image_features",
    "save_features",
]

BUILTIN_METHODS: tuple[str, ...] = ("sift", "rootsift", "orb", "brief")
"""Names of the built-in methods, in their default order."""

IMAGES: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
"""Image numbers of a sequence; image 1 is the reference."""

DETECTORS: dict[str, str] = {"sift": "sift", "rootsift": "sift", "orb": "orb", "brief": "fast"}
"""The detector of each built-in method (``locked=<method>`` locks to this detector)."""

SIFT_DIMS = 128
BINARY_BYTES = 32  # ORB and BRIEF: 256 bits
ORB_LEVELS = 8
ORB_SCALE = 1.2
ORB_PATCH = 31
FAST_THRESHOLD = 20
BRIEF_PATCH = 49
ROOTSIFT_EPS = 1e-12
_SIFT_SIGMA = 1.6
_SIFT_LAYERS = 3


class SequenceLike(Protocol):
    """What :func:`extract` needs of a sequence (``metricalc.keypoints.sequences.Sequence``)."""

    @property
    def name(self) -> str: ...  # scene name

    def image(self, k: int) -> np.ndarray: ...  # uint8 HxW or HxWx3 (RGB)

    def gray(self, k: int) -> np.ndarray: ...  # uint8 HxW

    def shape(self, k: int) -> tuple[int, int]: ...  # (height, width)


# --------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------


def _coerce(keypoints: Any, descriptors: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate keypoints/descriptors and return them as float64 (N, 2) and float32|uint8 (N, D).

    ``where`` starts every error message (e.g. ``"features file /data/sift/i_a/1.npz"``).
    """
    kp = np.asarray(keypoints)
    desc = np.asarray(descriptors)
    if kp.ndim != 2 or kp.shape[1] != 2:
        raise InvalidInputError(
            f"{where}: 'keypoints' has shape {kp.shape}; expected N x 2 (x, y in pixels)"
        )
    if kp.dtype == bool or not (
        np.issubdtype(kp.dtype, np.floating) or np.issubdtype(kp.dtype, np.integer)
    ):
        raise InvalidInputError(
            f"{where}: 'keypoints' has dtype {kp.dtype}; expected a float (or integer) type"
        )
    kp = np.ascontiguousarray(kp, dtype=np.float64)
    if not np.isfinite(kp).all():
        raise InvalidInputError(f"{where}: 'keypoints' contains non-finite values (NaN or inf)")
    if desc.ndim != 2:
        raise InvalidInputError(
            f"{where}: 'descriptors' has shape {desc.shape} ({desc.ndim}-D); expected a 2-D "
            "N x D array"
        )
    if desc.shape[1] == 0:
        raise InvalidInputError(f"{where}: 'descriptors' has 0 columns; expected N x D, D >= 1")
    if desc.shape[0] != kp.shape[0]:
        raise InvalidInputError(
            f"{where}: 'descriptors' has {desc.shape[0]} rows but 'keypoints' has "
            f"{kp.shape[0]}; expected one descriptor row per keypoint"
        )
    if desc.dtype == np.uint8:
        desc = np.ascontiguousarray(desc)
    elif np.issubdtype(desc.dtype, np.floating):
        if not np.isfinite(desc).all():
            raise InvalidInputError(
                f"{where}: 'descriptors' contains non-finite values (NaN or inf)"
            )
        with np.errstate(over="ignore"):
            desc = np.ascontiguousarray(desc, dtype=np.float32)
        if not np.isfinite(desc).all():
            raise InvalidInputError(
                f"{where}: 'descriptors' has values too large for float32 (they overflow to inf)"
            )
    else:
        raise InvalidInputError(
            f"{where}: 'descriptors' has dtype {desc.dtype}; expected a float type (compared by "
            "L2 distance, stored as float32) or uint8 (packed bits compared by Hamming distance; "
            "pack boolean bits with np.packbits(bits, axis=1))"
        )
    return kp, desc


@dataclass(frozen=True, eq=False)
class Features:
    """Keypoints and descriptors of one image.

    Construction converts integer or float keypoints to float64 and float descriptors to
    float32; any other dtype, a shape that is not N x 2 / N x D, a row-count mismatch or a
    non-finite value raises :class:`~metricalc.InvalidInputError`.

    Attributes
    ----------
    keypoints : ndarray of float64, shape (N, 2)
        x, y pixel coordinates (pixel centres at integers, as in OpenCV).
    descriptors : ndarray, shape (N, D)
        float32 (compared by L2 distance) or uint8 packed bits (compared by Hamming distance).
        Row i describes keypoint i.

    Examples
    --------
    >>> import numpy as np
    >>> f = Features(np.array([[10, 20], [30, 40]]), np.zeros((2, 32), dtype=np.uint8))
    >>> f.keypoints.dtype, f.binary
    (dtype('float64'), True)
    """

    keypoints: np.ndarray
    descriptors: np.ndarray

    def __post_init__(self) -> None:
        kp, desc = _coerce(self.keypoints, self.descriptors, "Features")
        object.__setattr__(self, "keypoints", kp)
        object.__setattr__(self, "descriptors", desc)

    @property
    def binary(self) -> bool:
        """True for packed-bit descriptors (uint8, Hamming distance), False for float (L2)."""
        return bool(self.descriptors.dtype == np.uint8)

    def __len__(self) -> int:
        return int(self.keypoints.shape[0])

    def __repr__(self) -> str:
        return (
            f"Features(n={len(self)}, dims={self.descriptors.shape[1]}, "
            f"dtype={self.descriptors.dtype})"
        )


FeatureSet = dict[str, dict[str, dict[int, Features]]]
"""descriptor -> scene -> image (1..6) -> :class:`Features`."""


# --------------------------------------------------------------------------------------------
# Detection and description
# --------------------------------------------------------------------------------------------


class _Toolkit:
    """The OpenCV / scikit-image objects of one :func:`extract` call (created once)."""

    def __init__(self, max_keypoints: int | None) -> None:
        self.sift = cv2.SIFT_create()
        # ORB keeps its best `nfeatures` per pyramid level quota; ask for plenty, then keep the
        # strongest max_keypoints after border filtering like every other detector.
        orb_features = 100_000 if max_keypoints is None else max(4 * max_keypoints, 5000)
        self.orb_detector = cv2.ORB_create(
            nfeatures=orb_features, scaleFactor=ORB_SCALE, nlevels=ORB_LEVELS
        )
        self.orb = cv2.ORB_create(scaleFactor=ORB_SCALE, nlevels=ORB_LEVELS)
        self.fast = cv2.FastFeatureDetector_create(
            threshold=FAST_THRESHOLD,
            nonmaxSuppression=True,
            type=cv2.FAST_FEATURE_DETECTOR_TYPE_9_16,
        )

    def detect(self, detector: str, gray: np.ndarray) -> list[cv2.KeyPoint]:
        if detector == "sift":
            found = self.sift.detect(gray, None)
        elif detector == "orb":
            found = self.orb_detector.detect(gray, None)
        else:
            found = self.fast.detect(gray, None)
        return list(found)


def _select(
    keypoints: list[cv2.KeyPoint], shape: tuple[int, int], border: float, limit: int | None
) -> list[cv2.KeyPoint]:
    """Keypoints inside the border, strongest response first (ties: x, y, size, angle), capped.

    The kept keypoints are sorted deterministically and tagged with ``class_id`` = their index,
    which survives OpenCV's ``compute()`` and so identifies the keypoints it could describe.
    """
    if not keypoints:
        return []
    table = np.array(
        [(k.pt[0], k.pt[1], k.size, k.angle, k.response) for k in keypoints], dtype=np.float64
    )
    keep = np.flatnonzero(inside(table[:, :2], shape, border))
    order = np.lexsort(
        (table[keep, 3], table[keep, 2], table[keep, 1], table[keep, 0], -table[keep, 4])
    )
    chosen = keep[order][:limit]
    return [
        cv2.KeyPoint(
            float(keypoints[i].pt[0]),
            float(keypoints[i].pt[1]),
            float(keypoints[i].size),
            float(keypoints[i].angle),
            float(keypoints[i].response),
            int(keypoints[i].octave),
            j,
        )
        for j, i in enumerate(chosen)
    ]


def _sift_octave(size: float, shape: tuple[int, int]) -> int:
    r"""OpenCV's packed SIFT ``octave`` field for a keypoint of another detector.

    SIFT reports :math:`\mathrm{size} = 2\sigma\,2^{o + (l + \xi)/3}` (original image pixels,
    :math:`\sigma = 1.6`, layer :math:`l \in \{1, 2, 3\}`, offset :math:`\xi \in [-1/2, 1/2]`);
    this inverts it so SIFT describes the keypoint on the matching pyramid level. The descriptor
    window itself always follows ``size``.
    """
    t = float(np.log2(max(size, 1e-3) / (2 * _SIFT_SIGMA)))
    total = round(_SIFT_LAYERS * t)
    octave = (total - 1) // _SIFT_LAYERS
    layer = total - _SIFT_LAYERS * octave
    offset = _SIFT_LAYERS * t - total
    top = max(round(np.log2(min(shape))) - 3, -1)  # the deepest octave SIFT detects on
    if octave < -1:
        octave, layer, offset = -1, 1, -0.5
    elif octave > top:
        octave, layer, offset = top, _SIFT_LAYERS, 0.5
    code = round((min(max(offset, -0.5), 0.5) + 0.5) * 255)
    return (octave & 255) | (layer << 8) | (code << 16)


def _orb_level(size: float) -> int:
    """ORB pyramid level whose patch (31 px times 1.2**level) is closest to ``size``."""
    level = round(float(np.log(max(size, 1e-3) / ORB_PATCH) / np.log(ORB_SCALE)))
    return min(max(level, 0), ORB_LEVELS - 1)


def _for_method(
    keypoints: list[cv2.KeyPoint], detector: str, family: str, shape: tuple[int, int]
) -> list[cv2.KeyPoint]:
    """Copies of the keypoints with the ``octave`` field (and angle) the describer expects.

    Keypoints of the describer's own detector are passed unchanged; others get the pyramid level
    that matches their size, and an angle of 0 where the detector has no orientation (-1).
    """
    if family == detector:
        return keypoints
    out = []
    for k in keypoints:
        octave = _sift_octave(k.size, shape) if family == "sift" else _orb_level(k.size)
        angle = k.angle if k.angle >= 0 else 0.0
        out.append(cv2.KeyPoint(k.pt[0], k.pt[1], k.size, angle, k.response, octave, k.class_id))
    return out


def _opencv_describe(
    extractor: Any, gray: np.ndarray, keypoints: list[cv2.KeyPoint], dims: int, dtype: type
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``extractor.compute``; return the described indices (ascending) and their rows."""
    if not keypoints:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dims), dtype=dtype)
    described, rows = extractor.compute(gray, keypoints)
    if rows is None or not described:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dims), dtype=dtype)
    index = np.array([k.class_id for k in described], dtype=np.int64)
    order = np.argsort(index, kind="stable")
    return index[order], np.ascontiguousarray(rows[order], dtype=dtype)


def _rootsift(sift: np.ndarray) -> np.ndarray:
    r"""RootSIFT: :math:`\sqrt{d / \lVert d \rVert_1}` (SIFT entries are nonnegative)."""
    l1 = np.abs(sift).sum(axis=1, keepdims=True, dtype=np.float64)
    return np.sqrt(np.abs(sift) / np.maximum(l1, ROOTSIFT_EPS)).astype(np.float32)


class _ImageDescriber:
    """Describes keypoints of one image with any built-in method (SIFT computed once)."""

    def __init__(self, tools: _Toolkit, gray: np.ndarray) -> None:
        self.tools = tools
        self.gray = gray
        self.shape = (int(gray.shape[0]), int(gray.shape[1]))
        self._sift: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # by detector
        self._float: np.ndarray | None = None

    def describe(
        self, method: str, keypoints: list[cv2.KeyPoint], detector: str
    ) -> tuple[np.ndarray, np.ndarray]:
        if method in ("sift", "rootsift"):
            # one keypoint list per detector and image: sift and rootsift share the computation
            if detector not in self._sift:
                prepared = _for_method(keypoints, detector, "sift", self.shape)
                self._sift[detector] = _opencv_describe(
                    self.tools.sift, self.gray, prepared, SIFT_DIMS, np.float32
                )
            index, rows = self._sift[detector]
            return (index, _rootsift(rows)) if method == "rootsift" else (index, rows)
        if method == "orb":
            prepared = _for_method(keypoints, detector, "orb", self.shape)
            return _opencv_describe(self.tools.orb, self.gray, prepared, BINARY_BYTES, np.uint8)
        return self._brief(keypoints)

    def _brief(self, keypoints: list[cv2.KeyPoint]) -> tuple[np.ndarray, np.ndarray]:
        if not keypoints:
            return np.zeros(0, dtype=np.int64), np.zeros((0, BINARY_BYTES), dtype=np.uint8)
        if self._float is None:
            self._float = img_as_float(self.gray)
        rows_cols = np.array([(k.pt[1], k.pt[0]) for k in keypoints], dtype=np.float64)
        brief = BRIEF(descriptor_size=256, patch_size=BRIEF_PATCH, mode="normal")
        brief.extract(self._float, rows_cols)
        # BRIEF drops keypoints whose patch leaves the image; mask marks the ones it described
        index = np.flatnonzero(brief.mask).astype(np.int64)
        rows = np.packbits(np.asarray(brief.descriptors, dtype=bool), axis=1)
        return index, np.ascontiguousarray(rows, dtype=np.uint8)


def _positions(keypoints: list[cv2.KeyPoint], index: np.ndarray) -> np.ndarray:
    points = np.array([keypoints[i].pt for i in index], dtype=np.float64)
    return points.reshape(-1, 2)


def _check_methods(
    methods: Iterable[str] | str, locked: str | None, *, allow_empty: bool = False
) -> tuple[str, ...]:
    names = (methods,) if isinstance(methods, str) else tuple(methods)
    available = ", ".join(BUILTIN_METHODS)
    if not names and not allow_empty:
        raise InvalidInputError(f"methods is empty; expected one or more of {available}")
    for name in names:
        if name not in BUILTIN_METHODS:
            raise InvalidInputError(
                f"unknown method {name!r} in methods; available methods: {available} "
                "(load other descriptors with load_features)"
            )
    if len(set(names)) != len(names):
        raise InvalidInputError(f"methods {names} lists a method twice")
    if locked is not None and locked not in BUILTIN_METHODS:
        raise InvalidInputError(
            f"locked={locked!r} is not a built-in detector; expected None (native keypoints) "
            f"or one of {available}"
        )
    return names


def _check_gray(sequence: SequenceLike, k: int) -> np.ndarray:
    gray = np.asarray(sequence.gray(k))
    if gray.ndim != 2 or gray.dtype != np.uint8:
        raise InvalidInputError(
            f"scene {sequence.name!r} image {k}: gray() returned a {gray.dtype} array of shape "
            f"{gray.shape}; expected uint8 HxW"
        )
    shape = tuple(int(v) for v in sequence.shape(k))
    if shape != gray.shape:
        raise InvalidInputError(
            f"scene {sequence.name!r} image {k}: shape() is {shape} but gray() has shape "
            f"{gray.shape}"
        )
    return np.ascontiguousarray(gray)


def _describe_image(
    tools: _Toolkit,
    gray: np.ndarray,
    names: tuple[str, ...],
    locked: str | None,
    border: float,
    limit: int | None,
    own: Mapping[str, Features] | None = None,
    where: str = "",
) -> dict[str, Features]:
    """Detect and describe one uint8 gray image with every method of ``names`` (see extract).

    ``own`` (locked only): descriptor -> your :class:`Features` of this image, whose keypoints
    must be the kept keypoints of the locked detector (:func:`check_own_keypoints`; ``where``,
    e.g. ``"scene 'v_camera' image 3"``, names the image in the error).
    """
    describer = _ImageDescriber(tools, gray)
    result: dict[str, Features] = {}
    if locked is None:
        detected: dict[str, list[cv2.KeyPoint]] = {}
        for name in names:
            detector = DETECTORS[name]
            if detector not in detected:
                detected[detector] = _select(
                    tools.detect(detector, gray), describer.shape, border, limit
                )
            keypoints = detected[detector]
            index, rows = describer.describe(name, keypoints, detector)
            result[name] = Features(_positions(keypoints, index), rows)
        return result
    detector = DETECTORS[locked]
    keypoints = _select(tools.detect(detector, gray), describer.shape, border, limit)
    described = {name: describer.describe(name, keypoints, detector) for name in names}
    everything = np.arange(len(keypoints), dtype=np.int64)
    if own:
        kept = _positions(keypoints, everything)
        for name, item in own.items():  # your own rows describe every kept keypoint
            check_own_keypoints(item.keypoints, kept, descriptor=name, locked=locked, where=where)
            described[name] = (everything, item.descriptors)
    common = everything
    for index, _ in described.values():
        common = np.intersect1d(common, index, assume_unique=True)
    points = _positions(keypoints, common)
    for name, (index, rows) in described.items():
        result[name] = Features(points, rows[np.searchsorted(index, common)])
    return result


def _check_options(max_keypoints: Any, border: Any) -> tuple[int | None, float]:
    """Validated ``max_keypoints`` (None or an int >= 1) and ``border`` (a finite float >= 0)."""
    if max_keypoints is not None and (
        isinstance(max_keypoints, bool)
        or not isinstance(max_keypoints, int | np.integer)
        or max_keypoints < 1
    ):
        raise InvalidInputError(f"max_keypoints={max_keypoints!r}; expected an int >= 1 or None")
    limit = None if max_keypoints is None else int(max_keypoints)
    if isinstance(border, bool) or not isinstance(border, int | float | np.integer | np.floating):
        raise InvalidInputError(f"border={border!r}; expected a finite number >= 0")
    border = float(border)
    if not np.isfinite(border) or border < 0:
        raise InvalidInputError(f"border={border!r}; expected a finite number >= 0")
    return limit, border


def extract(
    sequences: Iterable[SequenceLike],
    methods: Iterable[str] | str = BUILTIN_METHODS,
    *,
    locked: str | None = None,
    max_keypoints: int | None = 2000,
    border: float = 40.0,
    progress: bool = False,
    own: Mapping[str, Mapping[str, Mapping[int, Features]]] | None = None,
) -> FeatureSet:
    r"""Detect and describe keypoints in every image of every sequence with built-in methods.

    Per image (uint8 gray, ``sequence.gray(k)``, k = 1..6):

    1. detect with the detector of the method (native) or of ``locked`` (every method);
    2. drop keypoints closer than ``border`` px to the edge,
       :math:`b \le x \le W - 1 - b` and :math:`b \le y \le H - 1 - b` are kept
       (:func:`metricalc.keypoints.geometry.inside`);
    3. keep the ``max_keypoints`` strongest by detector response (SIFT: DoG contrast, ORB: Harris
       score, FAST: corner score), ordered by decreasing response, ties by x then y;
    4. describe them with each method's ``compute``; keypoints a describer cannot describe
       (OpenCV ORB and BRIEF drop those whose patch leaves the image) are removed. In locked mode
       a keypoint any method fails to describe is removed for every method, so all descriptors
       get identical keypoint arrays.

    RootSIFT is :math:`\sqrt{d / \lVert d \rVert_1}` of the SIFT descriptor :math:`d`, so each
    row has unit L2 norm. BRIEF is scikit-image's (256 bits, 49 px patch, Gaussian sampling,
    fixed seed) packed with ``np.packbits`` into 32 bytes; it uses positions only (no scale or
    orientation). In locked mode SIFT and ORB describe foreign keypoints at the detector's size
    and angle (an angle of -1, as FAST reports, is described upright) on the pyramid level that
    matches the size. The result is deterministic: equal inputs give identical arrays.

    Parameters
    ----------
    sequences : iterable of Sequence
        Objects with ``name``, ``gray(k)`` (uint8 HxW) and ``shape(k)``
        (:class:`metricalc.keypoints.sequences.Sequence`); names must be unique.
    methods : iterable of str or str
        Built-in methods, a subset of :data:`BUILTIN_METHODS`.
    locked : str, optional
        None for native keypoints; a built-in method name to describe that method's detector's
        keypoints with every method (``"sift"`` and ``"rootsift"`` both lock to SIFT keypoints).
    max_keypoints : int or None
        Keep at most this many keypoints per image (None: all).
    border : float
        Border margin in pixels (default 40, the protocol's).
    progress : bool
        Show a rich progress bar over (method, scene, image).
    own : mapping descriptor -> scene -> image (1..6) -> Features, optional
        Your own descriptors (e.g. from :func:`load_features`), evaluated next to the built-in
        ones. Locked: their keypoints must be the locked detector's kept keypoints, in order
        (:func:`detect_keypoints`, :func:`export_keypoints`; checked by
        :func:`check_own_keypoints`), and a keypoint a built-in method cannot describe is removed
        from them too, so every descriptor ends with identical keypoint arrays. Native: they are
        added unchanged. ``methods`` may then be empty.

    Returns
    -------
    dict
        descriptor -> scene -> image (1..6) -> :class:`Features`, in the order of ``methods``
        (then ``own``) and ``sequences``.

    Examples
    --------
    >>> import cv2
    >>> from skimage import data
    >>> class Scene:
    ...     name = "i_camera"
    ...     def image(self, k): return cv2.resize(data.camera(), (256, 256))
    ...     def gray(self, k): return self.image(k)
    ...     def shape(self, k): return (256, 256)
    >>> fs = extract([Scene()], ("sift", "orb"), locked="sift", max_keypoints=100)
    >>> sift, orb = fs["sift"]["i_camera"][1], fs["orb"]["i_camera"][1]
    >>> bool((sift.keypoints == orb.keypoints).all()), sift.descriptors.shape[1], orb.binary
    (True, 128, True)
    """
    own = dict(own or {})
    names = _check_methods(methods, locked, allow_empty=bool(own))
    limit, border = _check_options(max_keypoints, border)
    scenes = _unique_scenes(sequences)
    _check_own(own, names, scenes)
    if locked is None and own:  # native: your own features keep their own keypoints
        builtin = (
            extract(scenes, names, max_keypoints=limit, border=border, progress=progress)
            if names
            else {}
        )
        return {**builtin, **{n: {s.name: dict(own[n][s.name]) for s in scenes} for n in own}}

    tools = _Toolkit(limit)
    every = (*names, *own)
    result: FeatureSet = {name: {s.name: {} for s in scenes} for name in every}
    total = len(every) * len(scenes) * len(IMAGES)
    with progress_bar("features", total=total, enabled=progress) as advance:
        for sequence in scenes:
            for k in IMAGES:
                described = _describe_image(
                    tools,
                    _check_gray(sequence, k),
                    names,
                    locked,
                    border,
                    limit,
                    own={name: own[name][sequence.name][k] for name in own},
                    where=f"scene {sequence.name!r} image {k}",
                )
                for name, features in described.items():
                    result[name][sequence.name][k] = features
                    advance()
    return result


def _unique_scenes(sequences: Iterable[SequenceLike]) -> list[SequenceLike]:
    scenes = list(sequences)
    seen: set[str] = set()
    for sequence in scenes:
        if not isinstance(sequence.name, str) or not sequence.name:
            raise InvalidInputError(f"sequence name {sequence.name!r}; expected a non-empty str")
        if sequence.name in seen:
            raise InvalidInputError(f"scene {sequence.name!r} appears twice in sequences")
        seen.add(sequence.name)
    return scenes


def _check_own(
    own: Mapping[str, Mapping[str, Mapping[int, Any]]],
    names: tuple[str, ...],
    scenes: list[SequenceLike],
) -> None:
    """Your own features: names that are not built-in methods, and every scene and image."""
    for name, per_scene in own.items():
        if name in names:
            raise InvalidInputError(
                f"your own descriptor {name!r} has the name of a built-in method in methods; "
                "give it another name"
            )
        for sequence in scenes:
            images = per_scene.get(sequence.name)
            if images is None:
                raise InvalidInputError(
                    f"your own descriptor {name!r} has no features for scene {sequence.name!r} "
                    f"(it has {len(per_scene)} scenes: {', '.join(sorted(per_scene)[:5])}"
                    f"{', ...' if len(per_scene) > 5 else ''})"
                )
            for k in IMAGES:
                if not isinstance(images.get(k), Features):
                    raise InvalidInputError(
                        f"your own descriptor {name!r}, scene {sequence.name!r}: image {k} is "
                        f"{type(images.get(k)).__name__}; expected Features"
                    )


def check_own_keypoints(
    keypoints: np.ndarray, kept: np.ndarray, *, descriptor: str, locked: str, where: str
) -> None:
    """Refuse your own keypoints of one image unless they are the locked detector's, in order.

    Equal means: the same number of keypoints and, row by row, the same x and y once both are
    rounded to float32 (the precision OpenCV reports keypoints in, so keypoints written as float32
    or float64 both match, anything moved does not). The error is one line naming the descriptor,
    the image (``where``) and both counts.

    Examples
    --------
    >>> kept = np.array([[50.25, 60.5], [70.0, 80.0]])
    >>> check_own_keypoints(kept.astype(np.float32), kept, descriptor="mine", locked="sift",
    ...                     where="scene 'i_a' image 1")
    >>> check_own_keypoints(kept[:1], kept, descriptor="mine", locked="sift",
    ...                     where="scene 'i_a' image 1")
    Traceback (most recent call last):
    metricalc.errors.InvalidInputError: descriptor 'mine' is not on the keypoints of sift: scene 'i_a' image 1 has 1 keypoints in your file but sift keeps 2; describe the keypoints of export-keypoints --detector sift (same border and max_keypoints), in their order
    """  # noqa: E501
    mine = np.asarray(keypoints, dtype=np.float64).astype(np.float32)
    theirs = np.asarray(kept, dtype=np.float64).astype(np.float32)
    start = f"descriptor {descriptor!r} is not on the keypoints of {locked}: {where}"
    advice = (
        f"describe the keypoints of export-keypoints --detector {locked} (same border and "
        "max_keypoints), in their order"
    )
    if mine.shape != theirs.shape:
        raise InvalidInputError(
            f"{start} has {len(mine)} keypoints in your file but {locked} keeps {len(theirs)}; "
            f"{advice}"
        )
    moved = np.flatnonzero((mine != theirs).any(axis=1))
    if moved.size:
        i = int(moved[0])
        raise InvalidInputError(
            f"{start} has keypoint {i} at ({mine[i, 0]:.9g}, {mine[i, 1]:.9g}) in your file but "
            f"at ({theirs[i, 0]:.9g}, {theirs[i, 1]:.9g}) for {locked} ({moved.size} of "
            f"{len(mine)} keypoints differ, {len(mine)} in your file and {len(theirs)} for "
            f"{locked}); {advice}"
        )


def detect_keypoints(
    sequences: Iterable[SequenceLike],
    detector: str = "sift",
    *,
    max_keypoints: int | None = 2000,
    border: float = 40.0,
    progress: bool = False,
) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """The keypoints :func:`extract` keeps with ``locked=detector``, before any description.

    Steps 1-3 of :func:`extract` (detect, drop the border, keep the ``max_keypoints`` strongest,
    in their order) for every image. These are the keypoints your own descriptor describes to be
    evaluated next to the built-in methods on locked keypoints (``extract(..., own=...)``).

    Returns
    -------
    dict
        scene -> image (1..6) -> arrays ``keypoints`` (N x 2 float64, x y), ``size``, ``angle``,
        ``response`` (N float64, as OpenCV reports them; an angle of -1 means none) and
        ``image_size`` (height, width).

    Examples
    --------
    >>> import cv2
    >>> from skimage import data
    >>> class Scene:
    ...     name = "i_camera"
    ...     def image(self, k): return cv2.resize(data.camera(), (256, 256))
    ...     def gray(self, k): return self.image(k)
    ...     def shape(self, k): return (256, 256)
    >>> kept = detect_keypoints([Scene()], "sift", max_keypoints=100)["i_camera"][1]
    >>> fs = extract([Scene()], "sift", locked="sift", max_keypoints=100)["sift"]["i_camera"]
    >>> bool((kept["keypoints"] == fs[1].keypoints).all()), kept["image_size"].tolist()
    (True, [256, 256])
    """
    if detector not in BUILTIN_METHODS:
        raise InvalidInputError(
            f"detector {detector!r} is not a built-in method; expected one of "
            f"{', '.join(BUILTIN_METHODS)} (the method's detector finds the keypoints)"
        )
    limit, border = _check_options(max_keypoints, border)
    scenes = _unique_scenes(sequences)
    tools = _Toolkit(limit)
    result: dict[str, dict[int, dict[str, np.ndarray]]] = {s.name: {} for s in scenes}
    with progress_bar("keypoints", total=len(scenes) * len(IMAGES), enabled=progress) as advance:
        for sequence in scenes:
            for k in IMAGES:
                gray = _check_gray(sequence, k)
                shape = (int(gray.shape[0]), int(gray.shape[1]))
                kept = _select(tools.detect(DETECTORS[detector], gray), shape, border, limit)
                table = np.array(
                    [(*p.pt, p.size, p.angle, p.response) for p in kept], dtype=np.float64
                ).reshape(-1, 5)
                result[sequence.name][k] = {
                    "keypoints": np.ascontiguousarray(table[:, :2]),
                    "size": table[:, 2].copy(),
                    "angle": table[:, 3].copy(),
                    "response": table[:, 4].copy(),
                    "image_size": np.array(shape, dtype=np.int64),
                }
                advance()
    return result



def extract_image(
    gray: np.ndarray,
    methods: Iterable[str] | str = BUILTIN_METHODS,
    *,
    locked: str | None = None,
    max_keypoints: int | None = 2000,
    border: float = 40.0,
) -> dict[str, Features]:
    """Detect and describe one image with built-in methods, exactly as :func:`extract` does.

    The same steps and options as :func:`extract` for a single uint8 gray ``(H, W)`` image, so
    the work of a benchmark can be split per image (e.g. over a dask cluster) with identical
    results.

    Returns
    -------
    dict
        method -> :class:`Features`, in the order of ``methods``.

    Examples
    --------
    >>> import cv2
    >>> from skimage import data
    >>> gray = cv2.resize(data.camera(), (256, 256))
    >>> one = extract_image(gray, "sift", max_keypoints=50)["sift"]
    >>> len(one), one.descriptors.shape[1]
    (50, 128)
    """
    names = _check_methods(methods, locked)
    limit, border = _check_options(max_keypoints, border)
    image = np.asarray(gray)
    if image.ndim != 2 or image.dtype != np.uint8:
        raise InvalidInputError(
            f"extract_image: gray is a {image.dtype} array of shape {image.shape}; expected uint8 "
            "HxW"
        )
    return _describe_image(
        _Toolkit(limit), np.ascontiguousarray(image), names, locked, border, limit
    )

# --------------------------------------------------------------------------------------------
# Bring your own: save and load
# --------------------------------------------------------------------------------------------


def _check_folder_name(name: Any, what: str) -> str:
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or name.startswith(".")
        or any(c in name for c in ("/", "\\", "\0"))
    ):
        raise InvalidInputError(
            f"{what} name {name!r} cannot be a folder name; expected a non-empty str without "
            "path separators that does not start with '.'"
        )
    return name


def save_features(root: str | os.PathLike[str], features: Mapping[str, Any]) -> None:
    """Write features in the bring-your-own layout ``root/<descriptor>/<scene>/<image>.npz``.

    Every scene must have images 1..6; each ``.npz`` holds ``keypoints`` (N x 2 float64) and
    ``descriptors`` (N x D float32 or uint8). Everything is validated before the first file is
    written, and each file is written to a temporary name and renamed (atomic). Existing files of
    the same names are replaced; other files are left alone.

    Parameters
    ----------
    root : path
        Output folder (created if missing).
    features : mapping
        descriptor -> scene -> image (1..6) -> :class:`Features` (or any object with
        ``keypoints`` and ``descriptors``), e.g. from :func:`extract`.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> one = Features(np.array([[50.0, 60.0]]), np.ones((1, 8), dtype=np.float32))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_features(tmp, {"mine": {"i_scene": {k: one for k in range(1, 7)}}})
    ...     sorted(p.name for p in (Path(tmp) / "mine" / "i_scene").iterdir())
    ['1.npz', '2.npz', '3.npz', '4.npz', '5.npz', '6.npz']
    """
    if not isinstance(features, Mapping) or not features:
        raise InvalidInputError("features must be a non-empty mapping descriptor -> scene -> image")
    plan: list[tuple[Path, Features]] = []
    base = Path(root)
    for descriptor, scenes in features.items():
        _check_folder_name(descriptor, "descriptor")
        if not isinstance(scenes, Mapping) or not scenes:
            raise InvalidInputError(
                f"features[{descriptor!r}] must be a non-empty mapping scene -> image -> Features"
            )
        for scene, images in scenes.items():
            _check_folder_name(scene, "scene")
            where = f"features[{descriptor!r}][{scene!r}]"
            if not isinstance(images, Mapping):
                raise InvalidInputError(f"{where} must be a mapping image (1..6) -> Features")
            keys = set()
            for key in images:
                if isinstance(key, bool) or not isinstance(key, int | np.integer):
                    raise InvalidInputError(f"{where} has image key {key!r}; expected ints 1..6")
                keys.add(int(key))
            if keys != set(IMAGES):
                raise InvalidInputError(
                    f"{where} has images {sorted(keys)}; expected exactly 1, 2, 3, 4, 5, 6"
                )
            for key, item in images.items():
                if not isinstance(item, Features):
                    if not (hasattr(item, "keypoints") and hasattr(item, "descriptors")):
                        raise InvalidInputError(
                            f"{where}[{key}] is a {type(item).__name__}; expected Features"
                        )
                    kp, desc = _coerce(item.keypoints, item.descriptors, f"{where}[{key}]")
                    item = Features(kp, desc)
                plan.append((base / descriptor / scene / f"{int(key)}.npz", item))
    for path, item in plan:
        with temporary_path(path) as tmp, open(tmp, "wb") as stream:
            np.savez(stream, keypoints=item.keypoints, descriptors=item.descriptors)


def export_keypoints(
    data: str | os.PathLike[str] | Iterable[SequenceLike],
    out: str | os.PathLike[str],
    *,
    detector: str = "sift",
    max_keypoints: int | None = 2000,
    border: float = 40.0,
    progress: bool = False,
) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """Write the kept keypoints of ``detector`` per image, for your own descriptor to describe.

    ``out/<scene>/<image>.npz`` (image 1..6), the layout of one descriptor folder of
    :func:`load_features`, with the arrays of :func:`detect_keypoints`: ``keypoints`` (N x 2
    float64, x y), ``size``, ``angle``, ``response`` and ``image_size`` (height, width), and no
    ``descriptors``. Add a ``descriptors`` array (N x D, row i describing keypoint i) to each file,
    in place or in a copy, and evaluate the folder next to the built-in methods with
    ``metricalc keypoints eval --features NAME=FOLDER --locked <detector>``: the evaluation
    checks that its keypoints are these (:func:`check_own_keypoints`). Each file is written to a
    temporary name and renamed; files of the same names are replaced, other files left alone.

    Parameters
    ----------
    data : path or iterable of Sequence
        A sequences folder (:func:`metricalc.keypoints.sequences.load_sequences`) or sequences.
    out : path
        Output folder (created if missing).
    detector : str
        A built-in method name; its detector finds the keypoints (``"rootsift"`` = ``"sift"``).
    max_keypoints, border
        As for :func:`extract` (and the same as the evaluation that follows must use).
    progress : bool
        Show a progress bar over (scene, image).

    Returns
    -------
    dict
        scene -> image -> the arrays written.
    """
    base = Path(out)
    if base.exists() and not base.is_dir():
        raise InvalidInputError(f"keypoints folder {base} exists and is not a folder")
    if isinstance(data, (str, os.PathLike)):
        from metricalc.keypoints.sequences import load_sequences

        data = load_sequences(data)
    kept = detect_keypoints(
        data, detector, max_keypoints=max_keypoints, border=border, progress=progress
    )
    for scene, images in kept.items():
        _check_folder_name(scene, "scene")
        for k, arrays in images.items():
            with temporary_path(base / scene / f"{k}.npz") as tmp, open(tmp, "wb") as stream:
                np.savez(stream, **arrays)
    return kept


def _read_npz(path: Path) -> Features:
    where = f"features file {path}"
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        archive = np.load(path, allow_pickle=False)
    except unreadable as error:
        raise InvalidInputError(f"{where} cannot be read as an .npz archive: {error}") from error
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InvalidInputError(f"{where} is not an .npz archive (write it with np.savez)")
    with archive:
        missing = [key for key in ("keypoints", "descriptors") if key not in archive.files]
        if missing == ["descriptors"] and "image_size" in archive.files:
            raise InvalidInputError(
                f"{where} has keypoints only (as export-keypoints writes them); add your "
                "'descriptors' array (N x D, row i describing keypoint i)"
            )
        if missing:
            raise InvalidInputError(
                f"{where} has no {' or '.join(repr(m) for m in missing)} array "
                f"(arrays found: {sorted(archive.files)}); expected 'keypoints' (N x 2) and "
                "'descriptors' (N x D)"
            )
        try:
            keypoints = archive["keypoints"]
            descriptors = archive["descriptors"]
        except unreadable as error:
            raise InvalidInputError(f"{where}: an array cannot be read: {error}") from error
    kp, desc = _coerce(keypoints, descriptors, where)
    return Features(kp, desc)



def load_image_features(path: str | os.PathLike[str]) -> Features:
    """Read one image's bring-your-own ``.npz`` (arrays ``keypoints`` and ``descriptors``).

    The checks of :func:`load_features` for a single file; errors name the file.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     np.savez(Path(tmp) / "1.npz", keypoints=np.ones((3, 2)), descriptors=np.ones((3, 8)))
    ...     load_image_features(Path(tmp) / "1.npz")
    Features(n=3, dims=8, dtype=float32)
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"missing features file {path}")
    return _read_npz(path)

def _subfolders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_features(
    root: str | os.PathLike[str] | Mapping[str, str | os.PathLike[str]],
    *,
    descriptors: Iterable[str] | str | None = None,
) -> FeatureSet:
    """Read bring-your-own features from ``root/<descriptor>/<scene>/<image>.npz``, validated.

    Each scene folder must hold ``1.npz`` .. ``6.npz`` (no other ``.npz``), each with arrays
    ``keypoints`` (N x 2, x y in pixels, float or integer; read as float64) and ``descriptors``
    (N x D, any float type, read as float32 and compared by L2 distance, or uint8 packed bits
    compared by Hamming distance). All images of a descriptor must have the same D and dtype. A
    missing folder or file, a missing array, a wrong shape, a row-count mismatch, another dtype
    or a non-finite value raises :class:`~metricalc.InvalidInputError` naming the file.

    Parameters
    ----------
    root : path or mapping descriptor name -> path
        Folder with one sub-folder per descriptor (folders starting with ``.`` are ignored), or
        a mapping that names descriptor folders (``<scene>/1.npz .. 6.npz`` each) anywhere,
        e.g. ``{"mine": "features/mine_v2"}``; descriptors then come in the mapping's order.
    descriptors : iterable of str or str, optional
        Load only these descriptors of ``root`` (each folder must exist); default all.

    Returns
    -------
    dict
        descriptor -> scene -> image (1..6) -> :class:`Features`, descriptors in the given order
        (default sorted), scenes sorted.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> rng = np.random.default_rng(0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     for k in range(1, 7):
    ...         path = Path(tmp) / "mine" / "v_scene" / f"{k}.npz"
    ...         path.parent.mkdir(parents=True, exist_ok=True)
    ...         np.savez(path, keypoints=rng.uniform(40, 200, (5, 2)),
    ...                  descriptors=rng.normal(size=(5, 64)))
    ...     fs = load_features(tmp)
    >>> fs["mine"]["v_scene"][6].descriptors.dtype, len(fs["mine"]["v_scene"])
    (dtype('float32'), 6)
    """
    if isinstance(root, Mapping):
        return _load_named(root, descriptors)
    base = Path(root)
    if not base.is_dir():
        raise InvalidInputError(f"features folder {base} does not exist or is not a folder")
    if descriptors is None:
        folders = _subfolders(base)
        if not folders:
            raise InvalidInputError(
                f"features folder {base} has no descriptor folders; expected "
                "<descriptor>/<scene>/1.npz .. 6.npz"
            )
    else:
        wanted = (descriptors,) if isinstance(descriptors, str) else tuple(descriptors)
        if not wanted:
            raise InvalidInputError("descriptors is empty; expected descriptor folder names")
        folders = []
        for name in wanted:
            _check_folder_name(name, "descriptor")
            if not (base / name).is_dir():
                raise InvalidInputError(
                    f"missing descriptor folder {base / name} (descriptor {name!r})"
                )
            folders.append(base / name)
    return {folder.name: _load_descriptor_folder(folder) for folder in folders}


def _load_named(root: Mapping[str, Any], descriptors: Any) -> FeatureSet:
    """:func:`load_features` of a mapping descriptor name -> descriptor folder."""
    if descriptors is not None:
        raise InvalidInputError(
            "descriptors selects folders of one root; with a mapping name -> folder, list only "
            "the descriptors you want in the mapping"
        )
    if not root:
        raise InvalidInputError("the mapping descriptor name -> folder is empty")
    result: FeatureSet = {}
    for name, folder in root.items():
        _check_folder_name(name, "descriptor")
        path = Path(folder)
        if not path.is_dir():
            raise InvalidInputError(
                f"features folder {path} of descriptor {name!r} does not exist or is not a folder"
            )
        result[name] = _load_descriptor_folder(path)
    return result


def _load_descriptor_folder(folder: Path) -> dict[str, dict[int, Features]]:
    """scene -> image -> :class:`Features` of one descriptor folder ``<scene>/1.npz .. 6.npz``."""
    expected_names = {f"{k}.npz" for k in IMAGES}
    scene_folders = _subfolders(folder)
    if not scene_folders:
        raise InvalidInputError(
            f"descriptor folder {folder} has no scene folders; expected <scene>/1.npz .. 6.npz"
        )
    first: tuple[Path, int, np.dtype[Any]] | None = None
    per_scene: dict[str, dict[int, Features]] = {}
    for scene_folder in scene_folders:
        extra = sorted(
            p.name
            for p in scene_folder.glob("*.npz")
            if p.name not in expected_names and not p.name.startswith(".")
        )
        if extra:
            raise InvalidInputError(
                f"scene folder {scene_folder} has unexpected files {extra}; images are "
                "named 1.npz .. 6.npz"
            )
        images: dict[int, Features] = {}
        for k in IMAGES:
            path = scene_folder / f"{k}.npz"
            if not path.is_file():
                raise InvalidInputError(
                    f"missing features file {path}; every scene needs 1.npz .. 6.npz"
                )
            item = _read_npz(path)
            dims, dtype = item.descriptors.shape[1], item.descriptors.dtype
            if first is None:
                first = (path, dims, dtype)
            elif (dims, dtype) != first[1:]:
                raise InvalidInputError(
                    f"features file {path}: descriptors are {dims} x {dtype} but "
                    f"{first[0]} has {first[1]} x {first[2]}; every image of a descriptor "
                    "needs the same length and dtype"
                )
            images[k] = item
        per_scene[scene_folder.name] = images
    return per_scene
