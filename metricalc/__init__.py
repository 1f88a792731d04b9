"""metricalc: decomposable metrics for evaluating local image descriptors.

The public API is re-exported here; see ``docs/`` for the metric definitions.
"""

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
from metricalc.lazy import lazy_getattr
from metricalc.metrics import (
    matching_accuracy,
    matching_counts,
    matching_pr_curve,
    matching_roc_curve,
    metric_set,
    scene_metrics,
)
from metricalc.version import __version__

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
    "datasets",
    "decompose",
    "detection",
    "experiment",
    "f1",
    "format_metadata",
    "fpr",
    "hit_rate_at_k",
    "keypoints",
    "matching_accuracy",
    "matching_counts",
    "matching_pr_curve",
    "matching_roc_curve",
    "metric_set",
    "parse_metadata",
    "patches",
    "plotting",
    "pose",
    "pr_curve",
    "precision",
    "precision_at_k",
    "rank_from_rank_stats",
    "rank_stats",
    "rate_confint",
    "recall",
    "report",
    "retrieval",
    "roc_auc",
    "roc_curve",
    "scene_metrics",
    "stats",
    "store",
    "tnr",
    "tpr",
    "youden_j",
]


_LAZY_SUBPACKAGES = (
    "datasets",
    "plotting",
    "report",
    "keypoints",
    "patches",
    "stats",
    "store",
    "decompose",
    "detection",
    "experiment",
    "retrieval",
    "pose",
)
"""Subpackages imported on first attribute access (they load OpenCV, scikit-image, dask, ...)."""


_LAZY_FUNCTIONS = {
    "format_metadata": "metricalc.store.metadata",
    "parse_metadata": "metricalc.store.metadata",
}
"""Functions of a lazy subpackage that the top level offers too."""


_LAZY = {**{name: f"metricalc.{name}" for name in _LAZY_SUBPACKAGES}, **_LAZY_FUNCTIONS}
"""A subpackage of :data:`_LAZY_SUBPACKAGES` or the module of a function of
:data:`_LAZY_FUNCTIONS`, imported on first use (no import-time cost)."""

__getattr__ = lazy_getattr(__name__, _LAZY)
