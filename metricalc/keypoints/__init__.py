"""HPatches-style image sequences: loading, features, evaluation.

The built-in synthetic benchmark is made by :func:`metricalc.datasets.make_synthetic_dataset`.

>>> import metricalc.keypoints as kp
>>> sorted(kp.__all__)[:3]
['BUILTIN_METHODS', 'Features', 'Sequence']
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
from metricalc.keypoints.sequences import Sequence, dataset_fingerprint, load_sequences

__all__ = [
    "BUILTIN_METHODS",
    "Features",
    "Sequence",
    "available_methods",
    "dataset_fingerprint",
    "detect_keypoints",
    "evaluate",
    "export_keypoints",
    "extract",
    "load_features",
    "load_sequences",
    "sample_patches",
    "save_features",
]
