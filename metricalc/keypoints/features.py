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

This module is the public face of four modules of one job each:
:mod:`~metricalc.keypoints.featureset` (:class:`Features`, the checks of your own keypoints),
:mod:`~metricalc.keypoints.detectors` (the OpenCV and scikit-image methods on one image),
:mod:`~metricalc.keypoints.extraction` (:func:`extract`, :func:`extract_image`,
:func:`detect_keypoints`) and :mod:`~metricalc.keypoints.feature_files` (the ``.npz`` files).
"""

from __future__ import annotations

from metricalc.keypoints.detectors import BUILTIN_METHODS
from metricalc.keypoints.extraction import detect_keypoints, extract, extract_image
from metricalc.keypoints.feature_files import (
    export_keypoints,
    load_features,
    load_image_features,
    save_features,
)
from metricalc.keypoints.featureset import (
    IMAGES,
    Features,
    FeatureSet,
    SequenceLike,
    check_own_keypoints,
)

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
