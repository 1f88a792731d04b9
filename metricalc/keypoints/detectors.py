"""The built-in detectors and descriptors on one image (OpenCV and scikit-image).

:class:`Toolkit` holds the detector and descriptor objects of one extraction (created once);
:func:`describe_image` detects, selects and describes one uint8 gray image with every method,
native or locked to one detector (the steps of :func:`metricalc.keypoints.features.extract`).
SIFT and ORB describe the keypoints of another detector on the pyramid level of their size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cv2
import numpy as np
from skimage.feature import BRIEF
from skimage.util import img_as_float

from metricalc.keypoints.featureset import Features, check_own_keypoints
from metricalc.keypoints.geometry import inside

__all__ = ["BUILTIN_METHODS", "DETECTORS", "Toolkit", "describe_image", "select"]

BUILTIN_METHODS: tuple[str, ...] = ("sift", "rootsift", "orb", "brief")
"""Names of the built-in methods, in their default order."""

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


class Toolkit:
    """The OpenCV / scikit-image objects of one :func:`extract` call (created once)."""

    def __init__(self, max_keypoints: int | None) -> None:
        self.sift = cv2.SIFT.create()
        # ORB keeps its best `nfeatures` per pyramid level quota; ask for plenty, then keep the
        # strongest max_keypoints after border filtering like every other detector.
        orb_features = 100_000 if max_keypoints is None else max(4 * max_keypoints, 5000)
        self.orb_detector = cv2.ORB.create(
            nfeatures=orb_features, scaleFactor=ORB_SCALE, nlevels=ORB_LEVELS
        )
        self.orb = cv2.ORB.create(scaleFactor=ORB_SCALE, nlevels=ORB_LEVELS)
        self.fast = cv2.FastFeatureDetector.create(
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


def select(
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
    root: np.ndarray = np.sqrt(np.abs(sift) / np.maximum(l1, ROOTSIFT_EPS)).astype(np.float32)
    return root


class _ImageDescriber:
    """Describes keypoints of one image with any built-in method (SIFT computed once)."""

    def __init__(self, tools: Toolkit, gray: np.ndarray) -> None:
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
            self._float = img_as_float(self.gray)  # type: ignore[no-untyped-call]
        rows_cols = np.array([(k.pt[1], k.pt[0]) for k in keypoints], dtype=np.float64)
        brief = BRIEF(descriptor_size=256, patch_size=BRIEF_PATCH, mode="normal")  # type: ignore[no-untyped-call]
        brief.extract(self._float, rows_cols)  # type: ignore[no-untyped-call]
        # BRIEF drops keypoints whose patch leaves the image; mask marks the ones it described
        index = np.flatnonzero(np.asarray(brief.mask)).astype(np.int64)
        rows = np.packbits(np.asarray(brief.descriptors, dtype=bool), axis=1)
        return index, np.ascontiguousarray(rows, dtype=np.uint8)


def _positions(keypoints: list[cv2.KeyPoint], index: np.ndarray) -> np.ndarray:
    points = np.array([keypoints[i].pt for i in index], dtype=np.float64)
    return points.reshape(-1, 2)


def describe_image(
    tools: Toolkit,
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
                detected[detector] = select(
                    tools.detect(detector, gray), describer.shape, border, limit
                )
            keypoints = detected[detector]
            index, rows = describer.describe(name, keypoints, detector)
            result[name] = Features(_positions(keypoints, index), rows)
        return result
    detector = DETECTORS[locked]
    keypoints = select(tools.detect(detector, gray), describer.shape, border, limit)
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
