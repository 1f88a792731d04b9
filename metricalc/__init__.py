"""metricalc: decomposable metrics for evaluating local image descriptors.

The public API is re-exported here; see ``docs/`` for the metric definitions.
"""

from importlib.metadata import PackageNotFoundError, version

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
    "f1",
    "fpr",
    "hit_rate_at_k",
    "pr_curve",
    "precision",
    "precision_at_k",
    "rank_from_rank_stats",
    "rank_stats",
    "rate_confint",
    "recall",
    "roc_auc",
    "roc_curve",
    "tnr",
    "tpr",
    "youden_j",
]
