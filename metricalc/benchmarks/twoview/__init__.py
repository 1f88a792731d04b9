"""Two-view relative pose: angular errors, pose AUC and mAA, OpenCV estimation, pair lists.

- :mod:`~metricalc.benchmarks.twoview.angular`: rotation and translation angular errors (SuperGlue,
  Glue
  Factory);
- :mod:`~metricalc.benchmarks.twoview.accuracy`: SuperGlue's pose AUC and the Image Matching
  Challenge's mAA;
- :mod:`~metricalc.benchmarks.twoview.estimation`: essential matrix by RANSAC or MAGSAC, then the
  cheirality
  test, as SuperGlue and Glue Factory estimate a pose (OpenCV, loaded on first use);
- :mod:`~metricalc.benchmarks.twoview.pairs`: MegaDepth-1500 / Glue Factory / SuperGlue pair lists;
- :mod:`~metricalc.benchmarks.twoview.evaluate`: images and pairs to per-pair errors and their
  summary.

The synthetic benchmark with exact poses is
:func:`metricalc.benchmarks.twoview.generator.make_twoview_dataset`.

>>> from metricalc.benchmarks.twoview import pose_auc
>>> pose_auc([1.0, 3.0], [5.0]).round(3).tolist()
[0.75]
"""

from metricalc.benchmarks.twoview.accuracy import (
    IMC_THRESHOLDS,
    POSE_AUC_THRESHOLDS,
    imc_accuracies,
    imc_maa,
    pose_auc,
)
from metricalc.benchmarks.twoview.angular import (
    pose_error,
    relative_pose_error,
    rotation_error,
    translation_error,
)
from metricalc.benchmarks.twoview.pairs import PosePair, read_pairs, write_pairs
from metricalc.lazy import lazy_getattr

__all__ = [
    "IMC_THRESHOLDS",
    "POSE_AUC_THRESHOLDS",
    "PosePair",
    "PoseSettings",
    "RelativePose",
    "estimate_relative_pose",
    "evaluate_pairs",
    "imc_accuracies",
    "imc_maa",
    "pose_auc",
    "pose_error",
    "read_pairs",
    "relative_pose_error",
    "rotation_error",
    "summarize",
    "translation_error",
    "write_pairs",
]

_LAZY = {
    "PoseSettings": "metricalc.benchmarks.twoview.estimation",
    "RelativePose": "metricalc.benchmarks.twoview.estimation",
    "estimate_relative_pose": "metricalc.benchmarks.twoview.estimation",
    "evaluate_pairs": "metricalc.benchmarks.twoview.evaluate",
    "summarize": "metricalc.benchmarks.twoview.evaluate",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
