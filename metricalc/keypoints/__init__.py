"""HPatches-style image sequences: loading, the synthetic benchmark, features, evaluation.

>>> import metricalc.keypoints as kp
>>> sorted(kp.__all__)[:3]
['BUILTIN_METHODS', 'Features', 'PHOTOGRAPHS']
"""

from metricalc.keypoints.evaluate import evaluate
from metricalc.keypoints.features import (
    BUILTIN_METHODS,
    Features,
    detect_keypoints,
    export_keypoints,
    extract,
    load_features,
    save_features,
)
from metricalc.keypoints.sequences import Sequence, dataset_fingerprint, load_sequences
from metricalc.keypoints.synthetic import PHOTOGRAPHS, QUICK_SCENES, make_synthetic_dataset

__all__ = [
    "BUILTIN_METHODS",
    "PHOTOGRAPHS",
    "QUICK_SCENES",
    "Features",
    "Sequence",
    "dataset_fingerprint",
    "detect_keypoints",
    "evaluate",
    "export_keypoints",
    "extract",
    "load_features",
    "load_sequences",
    "make_synthetic_dataset",
    "save_features",
]
