"""The built-in methods on one image: their detectors, keypoint selection and the extraction step.

:data:`BUILTIN_METHODS` names every built-in method and :data:`DETECTORS` its detector;
:class:`Toolkit` holds the OpenCV detector objects of one extraction (created on first use);
:func:`select` keeps the strongest keypoints inside the border; :func:`describe_image` detects,
selects and describes one uint8 gray image with every method, native or locked to one detector
(the steps of :func:`metricalc.keypoints.features.extract`). The describers themselves are in
:mod:`metricalc.keypoints.describers`.

BRISK, AKAZE and KAZE are in OpenCV's main module up to 4.x and in the contrib module
(``opencv-contrib-python-headless``, ``cv2.xfeatures2d``) from 5.0 on; :func:`opencv_feature`
finds them in either place, and :func:`available_methods` lists the methods this OpenCV has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cv2
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.keypoints.describers import ImageDescriber
from metricalc.keypoints.featureset import Features, check_own_keypoints
from metricalc.keypoints.geometry import inside

__all__ = [
    "BUILTIN_METHODS",
    "CONTRIB_METHODS",
    "DEFAULT_METHODS",
    "DETECTORS",
    "Toolkit",
    "available_methods",
    "describe_image",
    "describe_image_both",
    "opencv_feature",
    "select",
]

BUILTIN_METHODS: tuple[str, ...] = (
    "sift",
    "rootsift",
    "dspsift",
    "orb",
    "brief",
    "brisk",
    "akaze",
    "kaze",
    "raw_patch",
)
"""Names of every built-in method, in their default order (docs/features.md describes each)."""

DEFAULT_METHODS: tuple[str, ...] = ("sift", "rootsift", "orb", "brief")
"""The methods :func:`~metricalc.keypoints.features.extract` runs when none are named."""

CONTRIB_METHODS: tuple[str, ...] = ("brisk", "akaze", "kaze")
"""Methods that need OpenCV's BRISK / AKAZE / KAZE (in ``cv2.xfeatures2d`` from OpenCV 5)."""

DETECTORS: dict[str, str] = {
    "sift": "sift",
    "rootsift": "sift",
    "dspsift": "sift",
    "orb": "orb",
    "brief": "fast",
    "brisk": "brisk",
    "akaze": "akaze",
    "kaze": "kaze",
    "raw_patch": "sift",
}
"""The detector of each built-in method (``locked=<method>`` locks to this detector)."""

ORB_LEVELS = 8
ORB_SCALE = 1.2
FAST_THRESHOLD = 20
_CONTRIB_CLASSES = {"brisk": "BRISK", "akaze": "AKAZE", "kaze": "KAZE"}


def opencv_feature(method: str) -> Any:
    """OpenCV's BRISK / AKAZE / KAZE class for ``method``, from ``cv2`` or ``cv2.xfeatures2d``.

    Raises
    ------
    InvalidInputError
        When this OpenCV has neither (``opencv-python-headless`` 5.x without contrib).
    """
    name = _CONTRIB_CLASSES[method]
    for module in (cv2, getattr(cv2, "xfeatures2d", None)):
        found = getattr(module, name, None) if module is not None else None
        if found is not None:
            return found
    raise InvalidInputError(
        f"method {method!r} needs OpenCV's {name}, which OpenCV {cv2.__version__} here does not "
        "have (OpenCV 5 moved it to contrib): install opencv-contrib-python-headless instead "
        "of opencv-python-headless, or leave out " + ", ".join(CONTRIB_METHODS)
    )


def available_methods() -> tuple[str, ...]:
    """The built-in methods this OpenCV provides, in :data:`BUILTIN_METHODS` order.

    Examples
    --------
    >>> {"sift", "rootsift", "dspsift", "orb", "brief", "raw_patch"} <= set(available_methods())
    True
    """
    missing = set()
    for method in CONTRIB_METHODS:
        try:
            opencv_feature(method)
        except InvalidInputError:
            missing.add(method)
    return tuple(m for m in BUILTIN_METHODS if m not in missing)


class Toolkit:
    """The OpenCV detector and descriptor objects of one extraction (each made on first use)."""

    def __init__(self, max_keypoints: int | None) -> None:
        self.max_keypoints = max_keypoints
        self._objects: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        """The object ``name`` (sift, orb, orb_detector, fast, brisk, akaze, kaze), made once."""
        if name not in self._objects:
            self._objects[name] = self._make(name)
        return self._objects[name]

    def _make(self, name: str) -> Any:
        if name == "sift":
            return cv2.SIFT.create()
        if name == "orb_detector":
            # ORB keeps its best `nfeatures` per pyramid level quota; ask for plenty, then keep
            # the strongest max_keypoints after border filtering like every other detector.
            limit = self.max_keypoints
            features = 100_000 if limit is None else max(4 * limit, 5000)
            return cv2.ORB.create(nfeatures=features, scaleFactor=ORB_SCALE, nlevels=ORB_LEVELS)
        if name == "orb":
            return cv2.ORB.create(scaleFactor=ORB_SCALE, nlevels=ORB_LEVELS)
        if name == "fast":
            return cv2.FastFeatureDetector.create(
                threshold=FAST_THRESHOLD,
                nonmaxSuppression=True,
                type=cv2.FAST_FEATURE_DETECTOR_TYPE_9_16,
            )
        return opencv_feature(name).create()  # brisk, akaze, kaze: OpenCV's defaults

    def detect(self, detector: str, gray: np.ndarray) -> list[cv2.KeyPoint]:
        """Every keypoint of ``detector`` (sift, orb, fast, brisk, akaze, kaze) in ``gray``."""
        name = "orb_detector" if detector == "orb" else detector
        return list(self.get(name).detect(gray, None))


def select(
    keypoints: list[cv2.KeyPoint], shape: tuple[int, int], border: float, limit: int | None
) -> list[cv2.KeyPoint]:
    """Keypoints inside the border, strongest response first (ties: x, y, size, angle), capped.

    The kept keypoints are copies with every field of the detector's (``octave`` and
    ``class_id`` included: AKAZE and KAZE describe their own keypoints on the scale-space
    level they store there).
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
            int(keypoints[i].class_id),
        )
        for i in chosen
    ]


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
    describer = ImageDescriber(tools.get, gray, names)
    if locked is None:
        return _described_natively(describer, tools, names, border, limit, {})
    return _described_locked(describer, tools, names, locked, border, limit, own, where)[0]


def describe_image_both(
    tools: Toolkit,
    gray: np.ndarray,
    names: tuple[str, ...],
    native: tuple[str, ...],
    locked: str,
    border: float,
    limit: int | None,
) -> tuple[dict[str, Features], dict[str, Features]]:
    """The features of ``names`` on ``locked``'s keypoints and those of ``native`` on their own
    detectors, from one detection per detector and one SIFT ``compute`` per keypoint list.

    Each mapping equals what :func:`describe_image` returns for it alone: the locked detector's
    keypoints are selected once, and a native method of that detector describes all of them
    (the locked run keeps only those every method of ``names`` describes).
    """
    describer = ImageDescriber(tools.get, gray, (*names, *native))
    locked_result, keypoints = _described_locked(
        describer, tools, names, locked, border, limit, None, ""
    )
    detected = {DETECTORS[locked]: keypoints}
    return locked_result, _described_natively(describer, tools, native, border, limit, detected)


def _described_natively(
    describer: ImageDescriber,
    tools: Toolkit,
    names: tuple[str, ...],
    border: float,
    limit: int | None,
    detected: dict[str, list[cv2.KeyPoint]],
) -> dict[str, Features]:
    """Each method on its own detector's kept keypoints (``detected``: those already selected,
    by detector; filled in as detectors run)."""
    result: dict[str, Features] = {}
    for name in names:
        detector = DETECTORS[name]
        if detector not in detected:
            detected[detector] = select(
                tools.detect(detector, describer.gray), describer.shape, border, limit
            )
        keypoints = detected[detector]
        index, rows = describer.describe(name, keypoints, detector)
        result[name] = Features(_positions(keypoints, index), rows)
    return result


def _described_locked(
    describer: ImageDescriber,
    tools: Toolkit,
    names: tuple[str, ...],
    locked: str,
    border: float,
    limit: int | None,
    own: Mapping[str, Features] | None,
    where: str,
) -> tuple[dict[str, Features], list[cv2.KeyPoint]]:
    """Every method (and ``own``) on the kept keypoints of ``locked``'s detector, reduced to the
    keypoints all of them describe; and the kept keypoints before that reduction."""
    detector = DETECTORS[locked]
    keypoints = select(tools.detect(detector, describer.gray), describer.shape, border, limit)
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
    result = {
        name: Features(points, rows[np.searchsorted(index, common)])
        for name, (index, rows) in described.items()
    }
    return result, keypoints
