"""metricalc: decomposable metrics for evaluating local image descriptors.

The public API is re-exported here; see ``docs/`` for the metric definitions.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from metricalc import cube
from metricalc.core.confusion import (
    accuracy,
    counts_at_thresholds,
    f1,
    fpr,
    precision,
    rate_confint,
    recall,
    tnr,
    tpr,
    youden_j,
)
from metricalc.core.curves import auc, pr_curve, roc_auc, roc_curve
from metricalc.core.ranking import (
    AP_METHODS,
    TIE_POLICIES,
    ap_from_rank_stats,
    average_precision,
    hit_rate_at_k,
    precision_at_k,
    rank_from_rank_stats,
    rank_stats,
)
from metricalc.errors import InvalidInputError, MetricalcError, UndefinedMetricWarning
from metricalc.metrics import (
    format_metadata,
    matching_accuracy,
    matching_pr_curve,
    metric_set,
    parse_metadata,
    scene_metrics,
)

try:
    __version__ = version("metricalc")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AP_METHODS",
    "TIE_POLICIES",
    "InvalidInputError",
    "MetricalcError",
    "UndefinedMetricWarning",
    "__version__",
    "accuracy",
    "ap_from_rank_stats",
    "auc",
    "average_precision",
    "counts_at_thresholds",
    "cube",
    "f1",
    "format_metadata",
    "fpr",
    "hit_rate_at_k",
    "keypoints",
    "matching_accuracy",
    "matching_pr_curve",
    "metric_set",
    "parse_metadata",
    "pr_curve",
    "precision",
    "precision_at_k",
    "rank_from_rank_stats",
    "rank_stats",
    "rate_confint",
    "recall",
    "roc_auc",
    "roc_curve",
    "scene_metrics",
    "stats",
    "tnr",
    "tpr",
    "youden_j",
]


def __getattr__(name: str) -> Any:
    """Import ``metricalc.keypoints`` on first use (it loads OpenCV and scikit-image)."""
    if name == "keypoints":
        return import_module("metricalc.keypoints")
    if name == "stats":  # significance tests: loads statsmodels
        return import_module("metricalc.stats")
    raise AttributeError(f"module 'metricalc' has no attribute {name!r}")
