"""Decomposable and compound decomposable metrics (docs/decomposition.md).

A composed task (detection = localization, then classification given localization) is a chain of
stages. :func:`decompose` counts every stage along the confidence threshold and gives the factor
precision and recall curves, whose products are the composed curve (:func:`verify` checks the
identity); :func:`factor_ap`, :func:`what_if` and the monotonicity checks say which stage limits
the composed AP.
"""

from metricalc.decompose.ap import curve_average_precision, factor_ap, interpolated_precision
from metricalc.decompose.chain import (
    DEFAULT_STAGES,
    ChainOptions,
    chain_counts,
    decompose,
    factor_curves,
    stack_chains,
)
from metricalc.decompose.identity import Verification, verify
from metricalc.decompose.keypoints import (
    DetectorDescriptorSection,
    detector_or_descriptor,
    keypoint_chains,
    matching_identity,
)
from metricalc.decompose.monotone import (
    compound_monotonicity,
    improvement_check,
    monotonicity_check,
    random_improvement,
)
from metricalc.decompose.whatif import (
    compound,
    nanmean,
    perfect_stage_curves,
    what_if,
    what_if_table,
)
from metricalc.lazy import lazy_getattr

__all__ = [
    "DEFAULT_STAGES",
    "ChainOptions",
    "DetectionDecomposition",
    "DetectorDescriptorSection",
    "Verification",
    "chain_counts",
    "compound",
    "compound_monotonicity",
    "curve_average_precision",
    "decompose",
    "decompose_detection",
    "detection_chains",
    "detector_or_descriptor",
    "factor_ap",
    "factor_curves",
    "improvement_check",
    "interpolated_precision",
    "keypoint_chains",
    "matching_identity",
    "monotonicity_check",
    "nanmean",
    "perfect_stage_curves",
    "random_improvement",
    "stack_chains",
    "verify",
    "what_if",
    "what_if_table",
]


_LAZY = {
    name: "metricalc.benchmarks.coco.decompose"
    for name in ("decompose_detection", "detection_chains", "DetectionDecomposition")
}
"""The detection instance, loaded on first use (it imports the detection package)."""

__getattr__ = lazy_getattr(__name__, _LAZY)
