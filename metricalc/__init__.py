"""metricalc: decomposable metrics for evaluating local image descriptors.

The public API is re-exported here; see ``docs/`` for the metric definitions.

Importing the package costs nothing beyond the standard library: every name of ``__all__`` is
imported from its module on first use (a module ``__getattr__``, PEP 562), so that ``metricalc
trec-eval`` does not load xarray, pandas, scipy or OpenCV it never uses. ``from metricalc import
average_precision`` works as for any module attribute. A subpackage that needs an optional
dependency (``keypoints`` needs OpenCV, ``experiment`` OmegaConf and dask; the benchmarks are in
``metricalc.benchmarks``, one folder each) raises
:class:`MissingExtraError` naming the extra to install when that dependency is absent
(docs/installation.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metricalc.errors import (
    InvalidInputError,
    MetricalcError,
    MissingExtraError,
    UndefinedMetricWarning,
)
from metricalc.lazy import lazy_getattr

if TYPE_CHECKING:  # the names __getattr__ imports on first use, as static analysis sees them
    from metricalc import (
        cube,
        datasets,
        decompose,
        detection,
        experiment,
        keypoints,
        patches,
        plotting,
        pose,
        report,
        retrieval,
        stats,
        store,
    )
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
    from metricalc.metrics import (
        matching_accuracy,
        matching_counts,
        matching_pr_curve,
        matching_roc_curve,
        metric_set,
        scene_metrics,
    )
    from metricalc.store.metadata import format_metadata, parse_metadata
    from metricalc.version import __version__

__all__ = [
    "AP_METHODS",
    "TIE_POLICIES",
    "InvalidInputError",
    "MetricalcError",
    "MissingExtraError",
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
    "cube",
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
"""Subpackages imported on first attribute access (they load xarray, OpenCV, dask, ...)."""


_LAZY_FUNCTIONS = {
    **dict.fromkeys(
        ("accuracy", "counts_at_thresholds", "f1", "fpr", "precision", "rate_confint", "recall",
         "tnr", "tpr", "youden_j"),
        "metricalc.core.confusion",
    ),
    **dict.fromkeys(("auc", "pr_curve", "roc_auc", "roc_curve"), "metricalc.core.curves"),
    **dict.fromkeys(
        ("AP_METHODS", "TIE_POLICIES", "ap_from_rank_stats", "average_precision",
         "hit_rate_at_k", "precision_at_k", "rank_from_rank_stats", "rank_stats"),
        "metricalc.core.ranking",
    ),
    **dict.fromkeys(
        ("matching_accuracy", "matching_counts", "matching_pr_curve", "matching_roc_curve",
         "metric_set", "scene_metrics"),
        "metricalc.metrics",
    ),
    "format_metadata": "metricalc.store.metadata",
    "parse_metadata": "metricalc.store.metadata",
    "__version__": "metricalc.version",
}
"""The functions and constants the top level offers, and the module of each."""


_LAZY = {**{name: f"metricalc.{name}" for name in _LAZY_SUBPACKAGES}, **_LAZY_FUNCTIONS}
"""A subpackage of :data:`_LAZY_SUBPACKAGES` or the module of a name of
:data:`_LAZY_FUNCTIONS`, imported on first use (no import-time cost)."""

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names (imported or not yet) and the module's own attributes."""
    return sorted({*globals(), *__all__})
