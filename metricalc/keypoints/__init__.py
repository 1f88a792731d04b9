"""HPatches-style image sequences: loading, features, evaluation.

The built-in synthetic benchmark is made by :func:`metricalc.datasets.make_synthetic_dataset`.
:func:`evaluate_sequences` is the pipeline from sequences to a QueryCube (extraction on every
core, evaluation, the cube cache) that ``metricalc demo``, ``metricalc keypoints eval`` and the
reports call; :func:`evaluate_modes` runs its locked and native evaluations together;
:func:`image_features`, :func:`pair_queries` and :func:`cube_from_pairs` are its steps one image
and one image pair at a time (``metricalc run hpatches``).

>>> import metricalc.keypoints as kp
>>> sorted(kp.__all__)[:3]
['BUILTIN_METHODS', 'EvaluationSettings', 'Features']
"""

from metricalc.keypoints.evaluate import cube_from_pairs, evaluate
from metricalc.keypoints.features import (
    BUILTIN_METHODS,
    Features,
    available_methods,
    detect_keypoints,
    export_keypoints,
    extract,
    load_features,
    sample_patches,
    save_features,
)
from metricalc.keypoints.matching import nn_matches
from metricalc.keypoints.modes import evaluate_modes
from metricalc.keypoints.pair_steps import image_features, pair_queries
from metricalc.keypoints.pipeline import (
    EvaluationSettings,
    cached_evaluation,
    evaluate_sequences,
    keypoint_mode,
)
from metricalc.keypoints.sequences import Sequence, dataset_fingerprint, load_sequences

__all__ = [
    "BUILTIN_METHODS",
    "EvaluationSettings",
    "Features",
    "Sequence",
    "available_methods",
    "cached_evaluation",
    "cube_from_pairs",
    "dataset_fingerprint",
    "detect_keypoints",
    "evaluate",
    "evaluate_modes",
    "evaluate_sequences",
    "export_keypoints",
    "extract",
    "image_features",
    "keypoint_mode",
    "load_features",
    "load_sequences",
    "nn_matches",
    "pair_queries",
    "sample_patches",
    "save_features",
]
