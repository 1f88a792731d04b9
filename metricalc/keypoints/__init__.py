"""HPatches-style image sequences: loading, features, evaluation.

The built-in synthetic benchmark is made by :func:`metricalc.datasets.make_synthetic_dataset`.
:func:`evaluate_sequences` is the pipeline from sequences to a QueryCube (extraction on every
core, evaluation, the cube cache) that ``metricalc demo``, ``metricalc keypoints eval`` and the
reports call; :func:`evaluate_modes` runs its locked and native evaluations together.

>>> import metricalc.keypoints as kp
>>> sorted(kp.__all__)[:3]
['BUILTIN_METHODS', 'EvaluationSettings', 'Features']
"""

from metricalc.keypoints.evaluate import evaluate
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
from metricalc.keypoints.modes import evaluate_modes
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
    "dataset_fingerprint",
    "detect_keypoints",
    "evaluate",
    "evaluate_modes",
    "evaluate_sequences",
    "export_keypoints",
    "extract",
    "keypoint_mode",
    "load_features",
    "load_sequences",
    "sample_patches",
    "save_features",
]
