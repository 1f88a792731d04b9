"""Local features of image sequences: built-in detectors and descriptors, and bring-your-own files.

Nine built-in methods (:data:`BUILTIN_METHODS`), each a detector and a descriptor; none
downloads anything (:data:`DEFAULT_METHODS`: sift, rootsift, orb and brief, run when
no method is named):

=========  ===============================================  ==========================  ========
method     detector (native keypoints)                      descriptor                  distance
=========  ===============================================  ==========================  ========
sift       OpenCV SIFT (difference of Gaussians)            SIFT, 128 float32           L2
rootsift   OpenCV SIFT                                      RootSIFT, 128 float32       L2
dspsift    OpenCV SIFT                                      DSP-SIFT, 128 float32       L2
orb        OpenCV ORB (oriented FAST, Harris response)      ORB, 256 bits -> 32 uint8   Hamming
brief      OpenCV FAST-9/16 (threshold 20, non-max supp.)   BRIEF (scikit-image), 32 u8 Hamming
brisk      OpenCV BRISK (multi-scale AGAST)                 BRISK, 512 bits -> 64 u8    Hamming
akaze      OpenCV AKAZE (nonlinear scale space, Hessian)    MLDB, 486 bits -> 61 uint8  Hamming
kaze       OpenCV KAZE (nonlinear scale space, Hessian)     KAZE, 64 float32            L2
raw_patch  OpenCV SIFT                                      8 x 8 patch, 64 float32     L2
=========  ===============================================  ==========================  ========

brisk, akaze and kaze need OpenCV's BRISK / AKAZE / KAZE, which OpenCV 5 keeps in its contrib
module (``opencv-contrib-python-headless``); :func:`available_methods` lists what this OpenCV has.

Keypoints are either *native* (each method describes the keypoints of its own detector) or
*locked* to one detector (every method describes the same keypoints, so every descriptor ends with
identical keypoint arrays and the queries of an evaluation can be paired one to one).

Bring-your-own features use the layout ``root/<descriptor>/<scene>/<image>.npz`` (image 1..6) with
arrays ``keypoints`` (N x 2, x y in pixels) and ``descriptors`` (N x D float, or N x B uint8 packed
bits); :func:`save_features` writes it and :func:`load_features` reads and validates it.
See ``docs/features.md``.

This module is the public face of the modules of one job each:
:mod:`~metricalc.keypoints.featureset` (:class:`Features`, the checks of your own keypoints),
:mod:`~metricalc.keypoints.detectors` (detectors, selection, one image),
:mod:`~metricalc.keypoints.describers` and :mod:`~metricalc.keypoints.sift_family` (the
descriptors),
:mod:`~metricalc.keypoints.extraction` (:func:`extract`, :func:`extract_image`,
:func:`detect_keypoints`) and :mod:`~metricalc.keypoints.feature_files` (the ``.npz`` files).
"""

from __future__ import annotations

from metricalc.keypoints.detectors import BUILTIN_METHODS, DEFAULT_METHODS, available_methods
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
from metricalc.keypoints.sift_family import sample_patches

__all__ = [
    "BUILTIN_METHODS",
    "DEFAULT_METHODS",
    "IMAGES",
    "FeatureSet",
    "Features",
    "SequenceLike",
    "available_methods",
    "check_own_keypoints",
    "detect_keypoints",
    "export_keypoints",
    "extract",
    "extract_image",
    "load_features",
    "load_image_features",
    "sample_patches",
    "save_features",
]
